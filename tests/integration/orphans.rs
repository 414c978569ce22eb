//! Orphans (issue 35, part 3), with the fake pulumi: a project an `up` deployed and the
//! profile then lost is listed by `status` and `preview` with what it left and who needed
//! it, warned of once by `up` (which never destroys it), and destroyed by `destroy
//! --orphans` in reverse dependency order, from the last git revision that had its
//! program when its folder is gone, or refused with the steps when none has.

use serde_json::Value;

use crate::run::{CHAIN, CHAIN_PATHS, clear_calls, name, ok, run, s, starts, workspace};
use crate::select::git;
use crate::support::*;

/// CHAIN (alpha → bravo → charlie) brought up, then the profile keeps alpha alone.
fn two_orphans() -> Ws {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: alpha\n"));
    clear_calls(&ws);
    ws
}

/// The projects the fake ran `command` for, in the order they started.
fn ran(ws: &Ws, command: &str) -> Vec<String> {
    starts(&ws.calls())
        .into_iter()
        .filter(|c| s(c, "command") == command)
        .map(|c| s(c, "project").to_string())
        .collect()
}

#[test]
fn status_lists_an_orphan_with_what_it_left_and_who_needed_it() {
    let ws = two_orphans();
    // Later runs compact the journal's index: the graph that knew bravo stays.
    ok(&ws, "up", &[]);
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    let r = ok(&ws, "status", &[]);
    assert!(r.stdout.contains("orphans: 2 project(s)"), "{r:?}");
    assert!(
        r.stdout.contains("bravo (projects/bravo, deployed 20"),
        "{r:?}"
    );
    assert!(
        r.stdout.contains("needed by charlie; outputs value=1"),
        "{r:?}"
    );
    let doc: Value =
        serde_json::from_str(&ok(&ws, "status", &["--output", "json"]).stdout).unwrap();
    let orphans = doc["orphans"].as_array().expect("an orphans list");
    let paths: Vec<&str> = orphans.iter().filter_map(|o| o["path"].as_str()).collect();
    assert_eq!(paths, ["bravo", "charlie"]);
    assert_eq!(orphans[0]["needed_by"][0], "charlie");
    assert!(orphans[0]["resources"].as_u64().unwrap() > 0, "{doc}");
    assert_eq!(orphans[1]["outputs"]["value"], 1);
    assert!(
        ws.calls().is_empty(),
        "status starts no pulumi: {:?}",
        ws.calls()
    );
}

#[test]
fn preview_lists_the_orphans_and_up_warns_once_and_destroys_nothing() {
    let ws = two_orphans();
    let r = ok(&ws, "preview", &["--summary-file", "pr.md"]);
    assert!(r.all().contains("orphans: 2 project(s)"), "{r:?}");
    assert!(
        r.all().contains("orphan charlie (projects/charlie"),
        "{r:?}"
    );
    let pr = ws.read("pr.md");
    assert!(pr.contains("**Orphans**: 2 project(s)"), "{pr}");
    assert!(pr.contains("- `bravo (projects/bravo"), "{pr}");
    let r = ok(&ws, "up", &[]);
    assert_eq!(
        r.all().matches("no longer in the profile").count(),
        1,
        "{r:?}"
    );
    assert!(r.all().contains("strata destroy --orphans"), "{r:?}");
    assert!(
        ran(&ws, "destroy").is_empty(),
        "up destroyed: {:?}",
        ws.calls()
    );
}

#[test]
fn destroy_orphans_asks_then_destroys_them_in_reverse_order_and_nothing_else() {
    let ws = two_orphans();
    let r = run(&ws, "destroy", &["--orphans"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains(
            "To destroy 2 orphan project(s) of stack `dev`: strata destroy --orphans --yes"
        ),
        "{r:?}"
    );
    assert!(ws.calls().is_empty(), "{:?}", ws.calls());
    ok(&ws, "destroy", &["--orphans", "--yes"]);
    assert_eq!(ran(&ws, "destroy"), [name("charlie"), name("bravo")]);
    let r = ok(&ws, "status", &[]);
    assert!(!r.stdout.contains("orphans:"), "{r:?}");
    let r = ok(&ws, "destroy", &["--orphans", "--yes"]);
    assert!(r.stderr.contains("stack `dev` has no orphans"), "{r:?}");
    // alpha, still in the profile, was never touched.
    assert!(ws.exists(&format!(
        ".strata/backend/.pulumi/stacks/{}/dev.json",
        name("alpha")
    )));
    let r = run(&ws, "destroy", &["--orphans", "--filter", "bravo"]);
    assert_eq!(r.code, 2, "--orphans takes no selection: {r:?}");
}

#[test]
fn a_removed_folder_is_destroyed_from_the_last_revision_that_had_it() {
    let mut ws = two_orphans();
    let tmp = ws.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    ws.set_env("TMPDIR", tmp.to_str().unwrap());
    ws.write(".gitignore", ".strata/\ntmp/\ncalls.jsonl\nhome/\nbin/\n");
    git(&ws.root, &["init", "-q"]);
    git(&ws.root, &["add", "."]);
    git(&ws.root, &["commit", "-qm", "all three"]);
    git(&ws.root, &["rm", "-rq", "projects/bravo"]);
    git(&ws.root, &["commit", "-qm", "bravo goes"]);
    std::fs::remove_dir_all(ws.path("projects/charlie")).unwrap(); // not even committed
    ok(&ws, "destroy", &["--orphans", "--yes"]);
    let destroys: Vec<Value> = starts(&ws.calls())
        .into_iter()
        .filter(|c| s(c, "command") == "destroy")
        .cloned()
        .collect();
    assert_eq!(destroys.len(), 2, "{destroys:?}");
    for d in &destroys {
        assert!(
            s(d, "cwd").contains("strata-orphans-"),
            "run from a copy: {d}"
        );
    }
    let left: Vec<_> = std::fs::read_dir(&tmp).unwrap().collect();
    assert!(left.is_empty(), "the copy goes with the run: {left:?}");
}

#[test]
fn an_orphan_no_revision_has_is_refused_with_the_steps_and_nothing_destroyed() {
    let ws = two_orphans();
    std::fs::remove_dir_all(ws.path("projects/bravo")).unwrap();
    let r = run(&ws, "destroy", &["--orphans", "--yes"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("orphan `bravo`: its program is gone"),
        "{r:?}"
    );
    assert!(r.stderr.contains("pulumi destroy --stack dev"), "{r:?}");
    assert!(ran(&ws, "destroy").is_empty(), "{:?}", ws.calls());
}

#[test]
fn a_stack_emptied_outside_strata_is_no_orphan() {
    let ws = two_orphans();
    std::fs::remove_file(ws.path(&format!(
        ".strata/backend/.pulumi/stacks/{}/dev.json",
        name("bravo")
    )))
    .unwrap();
    let doc: Value =
        serde_json::from_str(&ok(&ws, "status", &["--output", "json"]).stdout).unwrap();
    let paths: Vec<&str> = doc["orphans"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["path"].as_str())
        .collect();
    assert_eq!(paths, ["charlie"]);
}

/// Issue 43: a renamed folder whose entry follows it keeps running the same Pulumi
/// project, so the same stack: the old path is no orphan, and `destroy --orphans`
/// destroys nothing. Two entries sharing a Pulumi project, and a command project whose
/// folder moved under the same name, are the same.
#[test]
fn a_stack_a_current_entry_uses_is_never_an_orphan() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    std::fs::rename(ws.path("projects/bravo"), ws.path("projects/bravo-renamed")).unwrap();
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: alpha\n  - path: bravo-renamed\n  - path: charlie\n"
        ),
    );
    let status = ok(&ws, "status", &[]);
    assert!(!status.stdout.contains("orphan"), "{status:?}");
    clear_calls(&ws);
    let destroy = ws.strata(&["destroy", "--orphans", "--yes", "-p", "t", "-s", "dev"]);
    assert_eq!(destroy.code, 0, "{destroy:?}");
    assert_eq!(ran(&ws, "destroy"), Vec::<String>::new(), "{destroy:?}");
    assert!(destroy.all().contains("no orphans"), "{destroy:?}");
}
