//! Unit tests of what strata reads from a `file://` backend: its layout, each checkpoint
//! form, and the rule for clearing a Pulumi lock.

use std::path::Path;

use super::checkpoint::newest_form;
use super::layout::{Layout, layout, layout_problem, project_scoped};
use super::locks::{Held, Here, PulumiLock, judge, note_own_locks, proven_gone};
use super::source::Source;
use super::tests::{
    CHECKPOINTS, PLAIN, SECRETS, ZSTD, assert_reads_the_testdata, derives_early, derives_early_for,
    job,
};
use super::*;

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn folder(root: &Path) -> Source {
    Source::Folder(root.to_path_buf())
}

use crate::util::string_map as env_of;

#[test]
fn the_layout_is_told_as_pulumi_tells_it() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    assert_eq!(layout(&folder(root)), Layout::New);
    write(&root.join(".pulumi/stacks/aws-vpc/dev.json"), b"{}");
    write(&root.join(".pulumi/stacks/dev.json.bak"), b"{}");
    write(&root.join(".pulumi/stacks/dev.json.attrs"), b"{}");
    assert_eq!(
        layout(&folder(root)),
        Layout::New,
        "project folders and backups only"
    );
    write(&root.join(".pulumi/stacks/dev.json.zst"), b"x");
    write(&root.join(".pulumi/stacks/prod.json"), b"{}");
    assert_eq!(
        layout(&folder(root)),
        Layout::Legacy(vec!["dev".into(), "prod".into()])
    );
    write(&root.join(".pulumi/meta.yaml"), b"version: 1\n");
    assert_eq!(layout(&folder(root)), Layout::Project, "meta.yaml decides");
    write(&root.join(".pulumi/meta.yaml"), b"version: 0\n");
    assert!(matches!(layout(&folder(root)), Layout::Legacy(_)));
    write(&root.join(".pulumi/meta.yaml"), b"version: 2\n");
    assert!(matches!(layout(&folder(root)), Layout::Unknown(_)));
    write(&root.join(".pulumi/meta.yaml"), b": [\n");
    assert!(matches!(layout(&folder(root)), Layout::Unknown(_)));
}

#[test]
fn only_a_project_scoped_layout_is_read_and_the_legacy_one_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path();
    let url = format!("file://{}", root.display());
    let env = env_of(&[("PULUMI_BACKEND_URL", &url)]);
    let legacy_var = env_of(&[
        ("PULUMI_BACKEND_URL", &url),
        ("PULUMI_DIY_BACKEND_LEGACY_LAYOUT", "TRUE"),
    ]);
    assert!(project_scoped(&folder(root), &env));
    assert_eq!(layout_problem(&env), None);
    // A new backend the variable would make legacy.
    assert!(!project_scoped(&folder(root), &legacy_var));
    let p = layout_problem(&legacy_var).unwrap();
    assert!(p.contains("PULUMI_DIY_BACKEND_LEGACY_LAYOUT is set"), "{p}");
    // The first name wins when set at all, as Pulumi's env.Bool reads it.
    let off = env_of(&[
        ("PULUMI_BACKEND_URL", &url),
        ("PULUMI_DIY_BACKEND_LEGACY_LAYOUT", "0"),
        ("PULUMI_SELF_MANAGED_STATE_LEGACY_LAYOUT", "1"),
    ]);
    assert_eq!(layout_problem(&off), None);
    write(&root.join(".pulumi/stacks/dev.json"), b"{}");
    assert!(!project_scoped(&folder(root), &env));
    let p = layout_problem(&env).unwrap();
    assert!(p.contains("legacy layout"), "{p}");
    assert!(p.contains("pulumi state upgrade"), "{p}");
    assert!(p.contains(": dev"), "names the stacks: {p}");
    // Once upgraded, the variable does nothing.
    write(&root.join(".pulumi/meta.yaml"), b"version: 1\n");
    assert_eq!(layout_problem(&legacy_var), None);
    for other in ["https://api.pulumi.com", "s3://bucket", "file://relative"] {
        assert_eq!(
            layout_problem(&env_of(&[("PULUMI_BACKEND_URL", other)])),
            None
        );
    }
    // A bucket strata cannot look into, with the variable that only serves the legacy
    // layout: refused; on Pulumi Cloud the variable does nothing.
    let ignore = ("PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR", "1");
    let p = layout_problem(&env_of(&[("PULUMI_BACKEND_URL", "s3://b"), ignore])).unwrap();
    assert!(
        p.contains("Unset PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR"),
        "{p}"
    );
    let cloud = env_of(&[("PULUMI_BACKEND_URL", "https://api.pulumi.com"), ignore]);
    assert_eq!(layout_problem(&cloud), None);
    assert_eq!(
        layout_problem(&env_of(&[("PULUMI_BACKEND_URL", &url), ignore])),
        None
    );
}

fn backend_with(files: &[(&str, &[u8])]) -> (tempfile::TempDir, Job) {
    let d = tempfile::tempdir().unwrap();
    for (name, bytes) in files {
        write(&d.path().join(".pulumi/stacks/aws-vpc").join(name), bytes);
    }
    write(&d.path().join(".pulumi/meta.yaml"), b"version: 1\n");
    let j = job(&format!("file://{}", d.path().display()));
    (d, j)
}

#[test]
fn every_checkpoint_form_pulumi_writes_is_read() {
    for (name, bytes) in CHECKPOINTS {
        let (_d, j) = backend_with(&[(name, bytes)]);
        assert_reads_the_testdata(&j, name);
    }
    let (_d, j) = backend_with(&[]);
    assert_eq!(checkpoint_stack_missing(&j), Some(true));
    assert_eq!(PulumiEngine::stack_outputs_from_checkpoint(&j), None);
    // Broken or unknown: the CLI is asked.
    let (_d, j) = backend_with(&[("dev.json.zst", &ZSTD[..40])]);
    assert_eq!(PulumiEngine::stack_outputs_from_checkpoint(&j), None);
    let v9 = String::from_utf8_lossy(PLAIN).replace("\"version\":3", "\"version\":9");
    let (_d, j) = backend_with(&[("dev.json", v9.as_bytes())]);
    assert_eq!(PulumiEngine::stack_outputs_from_checkpoint(&j), None);
}

#[test]
fn secret_outputs_are_read_in_clear_only_where_the_passphrase_opens_them() {
    // Made by the real CLI, in the gzip form too.
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    std::io::Write::write_all(&mut gz, SECRETS).unwrap();
    let gz = gz.finish().unwrap();
    for (name, bytes) in [("dev.json", SECRETS), ("dev.json.gz", &gz)] {
        let (_d, mut j) = backend_with(&[(name, bytes)]);
        let masked = PulumiEngine::stack_outputs_from_checkpoint(&j).unwrap();
        assert_eq!(masked["token"], "[secret]", "{name}");
        assert_eq!(
            PulumiEngine::stack_outputs_from_checkpoint_revealed(&j),
            None,
            "{name}: no passphrase"
        );
        j.env
            .insert("PULUMI_CONFIG_PASSPHRASE".into(), "wrong".into());
        assert_eq!(
            PulumiEngine::stack_outputs_from_checkpoint_revealed(&j),
            None,
            "{name}: wrong"
        );
        j.env.insert(
            "PULUMI_CONFIG_PASSPHRASE".into(),
            "correct horse battery staple".into(),
        );
        let clear = PulumiEngine::stack_outputs_from_checkpoint_revealed(&j).unwrap();
        assert_eq!(clear["token"], "tok-3f9a-known", "{name}");
        assert_eq!(clear["plain"], "not-a-secret", "{name}");
        assert_eq!(clear.len(), masked.len(), "{name}");
    }
    // A checkpoint without a secrets provider: its secrets are the CLI's to show; one
    // without secrets needs no passphrase.
    let (_d, j) = backend_with(&[("dev.json", PLAIN)]);
    assert_eq!(
        PulumiEngine::stack_outputs_from_checkpoint_revealed(&j),
        None
    );
    let plain = String::from_utf8_lossy(PLAIN).replace(
        r#""token":{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"v1:abc"}"#,
        r#""token":"t""#,
    );
    let (_d, j) = backend_with(&[("dev.json", plain.as_bytes())]);
    let got = PulumiEngine::stack_outputs_from_checkpoint_revealed(&j).map(Value::Object);
    assert_eq!(
        got,
        Some(serde_json::json!({"vpcId": "vpc-123", "token": "t"}))
    );
}

#[test]
fn of_several_forms_the_newest_is_read_as_the_cli_reads_it() {
    let stale = String::from_utf8_lossy(PLAIN).replace("vpc-123", "vpc-old");
    let (d, j) = backend_with(&[("dev.json", stale.as_bytes()), ("dev.json.zst", ZSTD)]);
    let dir = d.path().join(".pulumi/stacks/aws-vpc");
    let set = |name: &str, secs: u64| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000 - secs);
        std::fs::File::options()
            .write(true)
            .open(dir.join(name))
            .unwrap()
            .set_modified(t)
            .unwrap();
    };
    set("dev.json", 60);
    let out = PulumiEngine::stack_outputs_from_checkpoint(&j).unwrap();
    assert_eq!(out["vpcId"], "vpc-123", "the newer .json.zst");
    set("dev.json.zst", 120);
    let out = PulumiEngine::stack_outputs_from_checkpoint(&j).unwrap();
    assert_eq!(out["vpcId"], "vpc-old", "now the plain one is newer");
    // A tie goes to the later form.
    set("dev.json", 120);
    assert_eq!(
        newest_form(&folder(d.path()), ".pulumi/stacks/aws-vpc", "dev.json"),
        Some(Some("dev.json.zst".to_string()))
    );
}

#[test]
fn a_legacy_or_unknown_layout_is_never_read_as_missing() {
    let d = tempfile::tempdir().unwrap();
    write(&d.path().join(".pulumi/stacks/dev.json"), PLAIN);
    let j = job(&format!("file://{}", d.path().display()));
    assert_eq!(checkpoint_stack_missing(&j), None);
    assert_eq!(PulumiEngine::stack_outputs_from_checkpoint(&j), None);
    write(&d.path().join(".pulumi/meta.yaml"), b"version: 7\n");
    assert_eq!(checkpoint_stack_missing(&j), None);
}

fn lock(pid: i64, host: &str) -> PulumiLock {
    PulumiLock {
        file: "1f0e.json".into(),
        pid,
        hostname: host.into(),
        timestamp: "2026-11-27T10:00:00Z".into(),
    }
}

fn dead_pid() -> i64 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    i64::from(pid)
}

#[test]
fn a_lock_is_proven_stale_only_by_strata_s_own_record_in_this_boot_and_pid_namespace() {
    let here = Here {
        host: "h1".into(),
        boot: Some("b1".into()),
        pid_ns: Some("4:4026531836".into()),
    };
    let dead = dead_pid();
    let l = lock(dead, "h1");
    let held = |l: &PulumiLock, boot: &str, ns: &str, started: u64| Held {
        lock: l.clone(),
        boot: boot.into(),
        pid_ns: ns.into(),
        started,
    };
    let ours = held(&l, "b1", "4:4026531836", 1);
    assert_eq!(proven_gone(&l, std::slice::from_ref(&ours), &here), Ok(()));
    // A dead pid alone proves nothing: the lock may be another namespace's.
    let why = proven_gone(&l, &[], &here).unwrap_err();
    assert!(why.contains("no Pulumi process strata started"), "{why}");
    let other = lock(dead, "h1");
    let renamed = PulumiLock {
        file: "other.json".into(),
        ..other
    };
    assert!(proven_gone(&renamed, std::slice::from_ref(&ours), &here).is_err());
    let rebooted = held(&l, "b0", "4:4026531836", 1);
    assert!(
        proven_gone(&l, &[rebooted], &here)
            .unwrap_err()
            .contains("booted")
    );
    let container = held(&l, "b1", "4:4026532999", 1);
    assert!(
        proven_gone(&l, &[container], &here)
            .unwrap_err()
            .contains("PID namespace")
    );
    let no_ns = Here {
        pid_ns: None,
        ..here.clone()
    };
    assert!(proven_gone(&l, std::slice::from_ref(&ours), &no_ns).is_err());
    // A live pid: the same process (same start time) holds it; a later one reused it.
    let me = i64::from(std::process::id());
    let started = super::locks::proc_stat(me).unwrap().1;
    let live = lock(me, "h1");
    let why = proven_gone(&live, &[held(&live, "b1", "4:4026531836", started)], &here);
    assert!(why.unwrap_err().contains("still running"));
    let reused = held(&live, "b1", "4:4026531836", started + 1);
    assert_eq!(proven_gone(&live, &[reused], &here), Ok(()));
}

/// The record is made only for strata's own child running this job (its `--cwd`), and
/// proves the lock stale once that child is gone.
#[test]
fn strata_notes_its_own_childs_lock_and_proves_it_stale_once_the_child_is_gone() {
    let d = tempfile::tempdir().unwrap();
    let mut j = job(&format!("file://{}", d.path().join("backend").display()));
    j.dir = d.path().join("projects/vpc");
    j.scratch_dir = d.path().join("work");
    write(&d.path().join("backend/.pulumi/meta.yaml"), b"version: 1\n");
    let lock_dir = d
        .path()
        .join("backend/.pulumi/locks/organization/aws-vpc/dev");
    let mut child = std::process::Command::new("sh")
        .args(["-c", "sleep 30", "--cwd"])
        .arg(&j.dir)
        .spawn()
        .unwrap();
    // Right after exec, /proc/<pid>/cmdline can still read empty (seen here about once
    // in twenty runs): wait until it names the folder, as it does long before Pulumi's
    // first event, which is when strata notes its locks.
    let dir = j.dir.display().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !std::fs::read(format!("/proc/{}/cmdline", child.id()))
        .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == dir.as_bytes()))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let host = crate::util::hostname();
    let content = |pid: u32| {
        format!(
            r#"{{"pid":{pid},"username":"u","hostname":"{host}","timestamp":"2026-11-27T10:00:00Z"}}"#
        )
    };
    write(&lock_dir.join("a1.json"), content(child.id()).as_bytes());
    // Not a child of this process: never noted.
    write(&lock_dir.join("b2.json"), content(1).as_bytes());
    note_own_locks(&j);
    let judged = judge(&j);
    assert_eq!(judged.len(), 2);
    assert!(
        judged[0].1.as_deref().unwrap().contains("still running"),
        "{judged:?}"
    );
    assert!(
        judged[1]
            .1
            .as_deref()
            .unwrap()
            .contains("no Pulumi process"),
        "{judged:?}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let judged = judge(&j);
    assert_eq!(judged[0].1, None, "its process is gone: {judged:?}");
    assert!(judged[1].1.is_some());
    std::fs::remove_file(lock_dir.join("a1.json")).unwrap();
    std::fs::remove_file(lock_dir.join("b2.json")).unwrap();
    super::locks::forget_released(&j);
    assert!(
        !j.scratch_dir.join("pulumi-locks.json").exists(),
        "forgotten"
    );
}

/// The key of a stack's secrets is derived while its update runs (a thread of its own),
/// so reading the secret outputs after it does not pay the 1,000,000 rounds on the
/// critical path; a checkpoint without secret outputs derives nothing.
#[test]
fn the_secret_key_is_derived_beside_the_update() {
    let (_d, mut j) = backend_with(&[("dev.json", SECRETS)]);
    assert!(derives_early(&mut j, "derived-early-8c1f"), "not derived");

    let plain = String::from_utf8_lossy(PLAIN).replace(
        r#""token":{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"v1:abc"}"#,
        r#""token":"t""#,
    );
    let (_d, mut j) = backend_with(&[("dev.json", plain.as_bytes())]);
    assert!(!derives_early(&mut j, "no-secrets-here-51d0"));
}

/// A stack that holds secret outputs no dependent reads (lp-registry's password, while
/// lp-app reads its URL) costs no key: the rounds would only take a core from the
/// updates running beside it.
#[test]
fn no_key_is_derived_when_no_needed_output_is_secret() {
    let (_d, mut j) = backend_with(&[("dev.json", SECRETS)]);
    assert!(!derives_early_for(
        &mut j,
        "only-plain-needed-7e2b",
        "plain"
    ));
}

/// A stack's state is dated by its checkpoint's manifest time; an empty stack (what
/// `stack init` or a preview of a new stack makes, or a destroyed one) has no
/// deployment to date, whenever its checkpoint was written.
#[test]
fn an_empty_stack_has_no_deployment_to_date() {
    let (_d, j) = backend_with(&[]);
    assert_eq!(checkpoint_written_at(&j).as_deref(), Some(""));
    let deployed = String::from_utf8_lossy(PLAIN).replace(
        r#""latest":{"#,
        r#""latest":{"manifest":{"time":"2026-12-02T18:00:00Z"},"#,
    );
    let (_d, j) = backend_with(&[("dev.json", deployed.as_bytes())]);
    assert_eq!(
        checkpoint_written_at(&j).as_deref(),
        Some("2026-12-02T18:00:00Z")
    );
    let empty = br#"{"version":3,"checkpoint":{"stack":"organization/aws-vpc/dev","latest":{"manifest":{"time":"2026-12-02T17:56:59Z","magic":"m","version":"v3.274.1"},"secrets_providers":{"type":"passphrase","state":{"salt":"v1:x:y"}},"metadata":{}}}}"#;
    let (_d, j) = backend_with(&[("dev.json", empty)]);
    assert_eq!(checkpoint_written_at(&j).as_deref(), Some(""));
}
