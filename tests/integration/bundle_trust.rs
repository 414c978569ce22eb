//! Plan bundles are untrusted input (issue 32): a pull request's CI job makes the bundle,
//! main's credentials apply it. Each test tampers with a real bundle made by
//! `strata preview --save-plan` and checks that `up --plan` refuses it (exit 3, naming
//! what was edited) and that no `pulumi up` ran.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::run::{BODY, Background, CHAIN, CHAIN_PATHS, args, name, ok, run, wait_for, workspace};
use crate::support::*;

/// A deployed chain (alpha → bravo → charlie) and its bundle `b`, ready to apply.
fn bundled() -> Ws {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    ok(&ws, "preview", &["--save-plan", "b"]);
    ws
}

/// A copy of bundle `b` named `to`, edited by `edit` (given the copy's folder).
fn tampered(ws: &Ws, to: &str, edit: impl FnOnce(&Path)) {
    copy_path(&ws.path("b"), &ws.path(to));
    edit(&ws.path(to));
}

/// Edits the manifest of the bundle at `dir` as JSON.
fn edit_manifest(dir: &Path, edit: impl FnOnce(&mut Value)) {
    let file = dir.join("manifest.json");
    let mut m: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    edit(&mut m);
    std::fs::write(&file, serde_json::to_string_pretty(&m).unwrap()).unwrap();
}

/// How many `pulumi up` the fake has started so far.
fn ups(ws: &Ws) -> usize {
    ws.calls()
        .iter()
        .filter(|c| c["event"] == "start" && c["command"] == "up")
        .count()
}

/// `up --plan dir` is refused before anything runs, saying `why`.
fn refused(ws: &Ws, dir: &str, why: &str) -> Run {
    let before = ups(ws);
    let r = run(ws, "up", &["--plan", dir]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains(why), "expected {why:?} in: {r:?}");
    assert_eq!(ups(ws), before, "no pulumi up may run: {r:?}");
    assert!(!ws.exists(&format!("{dir}/applied.json")), "{r:?}");
    r
}

/// A step's kind is the workspace's: a Pulumi step the manifest calls a command (and
/// gives no plan) once ran `pulumi up --skip-preview` with no plan at all.
#[test]
fn a_step_whose_kind_was_edited_is_refused() {
    let ws = bundled();
    tampered(&ws, "kind", |d| {
        edit_manifest(d, |m| {
            let alpha = m["steps"]["alpha"].as_object_mut().unwrap();
            alpha.insert("kind".into(), "command".into());
            alpha.remove("plan");
        })
    });
    refused(
        &ws,
        "kind",
        "alpha: the bundle gives its kind as `command`, but it is a pulumi project",
    );
}

/// A Pulumi step's plan is the file the preview wrote, inside the bundle: never an
/// absolute path, one that climbs out with `..`, or a symbolic link out of the folder.
#[test]
fn a_plan_outside_the_bundle_is_refused() {
    let ws = bundled();
    std::fs::copy(ws.path("b/plans/alpha.json"), ws.path("outside.json")).unwrap();
    let outside = ws.path("outside.json").display().to_string();
    for (dir, plan) in [
        ("absolute", outside.as_str()),
        ("climbs", "../outside.json"),
    ] {
        tampered(&ws, dir, |d| {
            edit_manifest(d, |m| m["steps"]["alpha"]["plan"] = plan.into())
        });
        refused(
            &ws,
            dir,
            "alpha: its update plan is given as a path other than plans/alpha.json",
        );
    }
    tampered(&ws, "link", |d| {
        let plan = d.join("plans/alpha.json");
        std::fs::remove_file(&plan).unwrap();
        std::os::unix::fs::symlink("../../outside.json", &plan).unwrap();
    });
    refused(&ws, "link", "plans/alpha.json: a symbolic link");
}

/// The manifest holds the SHA-256 of every file: an edited plan or summary, a file
/// added, a file removed — each refused, naming the file.
#[test]
fn every_file_of_the_bundle_is_held_to_its_digest() {
    /// A copy's name, how it is edited, and the refusal.
    type Tamper<'a> = (&'a str, &'a dyn Fn(&Path), &'a str);
    let ws = bundled();
    let edits: [Tamper; 4] = [
        (
            "edited",
            // Still a valid plan (Pulumi would take it): only the bytes differ.
            &|d| {
                let plan = d.join("plans/bravo.json");
                let text = std::fs::read_to_string(&plan).unwrap();
                std::fs::write(&plan, format!("{text}\n")).unwrap();
            },
            "plans/bravo.json: its bytes are not what the preview wrote",
        ),
        (
            "summary",
            &|d| std::fs::write(d.join("summary.md"), "nothing to see\n").unwrap(),
            "summary.md: its bytes are not what the preview wrote",
        ),
        (
            "added",
            &|d| std::fs::write(d.join("plans/extra.sh"), "#!/bin/sh\n").unwrap(),
            "plans/extra.sh: in the bundle, but not in its manifest",
        ),
        (
            "removed",
            &|d| std::fs::remove_file(d.join("summary.md")).unwrap(),
            "summary.md: in the manifest, but missing from the bundle",
        ),
    ];
    for (dir, edit, why) in edits {
        tampered(&ws, dir, edit);
        refused(&ws, dir, why);
    }
}

/// A bundle written before the manifest held its files' digests (format 1) is refused,
/// saying to preview again.
#[test]
fn a_bundle_without_digests_is_refused_with_preview_again() {
    let ws = bundled();
    tampered(&ws, "old", |d| {
        edit_manifest(d, |m| {
            m["version"] = 1.into();
            m.as_object_mut().unwrap().remove("files");
        })
    });
    let r = refused(&ws, "old", "bundle of format 1");
    assert!(
        r.stderr.contains("no digests of its files") && r.stderr.contains("Preview again"),
        "{r:?}"
    );
}

/// The id is never a path: one that climbs out of `.strata/` once made strata write its
/// applied mark over a file of the user's home.
#[test]
fn an_id_that_is_a_path_is_refused_and_nothing_is_written() {
    let ws = bundled();
    tampered(&ws, "path", |d| {
        edit_manifest(d, |m| m["id"] = "../../../home/victim".into())
    });
    refused(&ws, "path", "its `id` is not one `strata preview` makes");
    assert!(!ws.exists("home/victim.json"), "nothing written outside");
}

/// "Applied" is the bundle's content, not its id: a spent bundle with a new id is still
/// spent, in a fresh copy (no `applied.json`) too.
#[test]
fn an_edited_id_does_not_make_a_spent_bundle_apply_again() {
    let ws = bundled();
    tampered(&ws, "copy", |_| {});
    ok(&ws, "up", &["--plan", "b"]);
    tampered(&ws, "renamed", |d| {
        std::fs::remove_file(d.join("applied.json")).unwrap();
        edit_manifest(d, |m| m["id"] = "20200101T000000.000Z-1".into());
    });
    refused(&ws, "renamed", "was applied already");
    refused(&ws, "copy", "was applied already");
}

/// The applied mark is written atomically: a symbolic link planted in its place is
/// replaced, never written through.
#[test]
fn the_applied_mark_never_writes_through_a_planted_link() {
    let ws = bundled();
    ws.write("home/victim.txt", "keep");
    std::os::unix::fs::symlink("../home/victim.txt", ws.path("b/applied.json")).unwrap();
    ok(&ws, "up", &["--plan", "b"]);
    assert_eq!(ws.read("home/victim.txt"), "keep");
    let meta = std::fs::symlink_metadata(ws.path("b/applied.json")).unwrap();
    assert!(
        meta.file_type().is_file(),
        "the link was replaced: {meta:?}"
    );
}

/// A fresh age identity at `home/<file>`: its path and its text.
fn identity(ws: &Ws, file: &str) -> (PathBuf, String) {
    use age::secrecy::ExposeSecret;
    let id = age::x25519::Identity::generate();
    let text = format!("{}\n", id.to_string().expose_secret());
    ws.write(&format!("home/{file}"), &text);
    (ws.path(&format!("home/{file}")), text)
}

/// The write end of the FIFO at `path`, once a reader has it open.
fn fifo_writer(path: &Path) -> std::fs::File {
    use std::os::unix::fs::OpenOptionsExt;
    let mut writer = None;
    wait_for(Duration::from_secs(60), "strata to open the FIFO", || {
        writer = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .ok();
        writer.is_some()
    });
    writer.unwrap()
}

/// "A bundle applies once" holds under the stack lock: a second `up --plan` that opened
/// the bundle before the first one marked it (it waits here on its age identity, read
/// through a FIFO the test fills once the first has finished) refuses and runs nothing.
#[test]
fn a_second_up_that_opened_the_bundle_first_refuses_under_the_lock() {
    use std::io::Write;
    let mut ws = Ws::new();
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: alpha\n    secrets:\n      - key: alpha:token\n        prompt: Token\n  - path: bravo\n"
        ),
    );
    for p in ["alpha", "bravo"] {
        ws.pulumi_project(p, &name(p), BODY);
    }
    let (key, text) = identity(&ws, "me.txt");
    ws.set_env("STRATA_AGE_IDENTITY", key.to_str().unwrap());
    ws.set_env("STRATA_SECRET_ALPHA_TOKEN", "t0ken-4242");
    ok(&ws, "up", &[]);
    ok(&ws, "preview", &["--save-plan", "b"]);

    let fifo = ws.path("home/me.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    ws.set_env("STRATA_AGE_IDENTITY", fifo.to_str().unwrap());
    let second = Background::start(&ws, &args("up", &["--plan", "b"]));
    ws.set_env("STRATA_AGE_IDENTITY", key.to_str().unwrap());
    let mut writer = fifo_writer(&fifo);

    // The second has opened the bundle (it is past resolving the run): the first
    // applies it and marks it applied.
    ok(&ws, "up", &["--plan", "b"]);
    assert!(ws.exists("b/applied.json"));
    let applied_ups = ups(&ws);
    writer.write_all(text.as_bytes()).unwrap();
    drop(writer);
    let r = second.wait(Duration::from_secs(90));
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("was applied already"), "{r:?}");
    assert_eq!(ups(&ws), applied_ups, "the second ran nothing: {r:?}");
}
