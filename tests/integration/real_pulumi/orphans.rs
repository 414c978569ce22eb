//! Orphans with the real CLI (issue 35, part 3): a project removed from the profile and
//! from the repository is listed by `status` from the real checkpoint, and `destroy
//! --orphans` destroys its real stack from the last revision that had its program.

use serde_json::Value;

use super::{Real, wired_projects};
use crate::select::git;

fn wired(r: &Real, args: &[&str]) -> crate::support::Run {
    let mut all = vec![args[0], "--provider", "wired", "--stack", "dev"];
    all.extend_from_slice(&args[1..]);
    r.strata(&all)
}

fn orphan_paths(r: &Real) -> Vec<String> {
    let status = wired(r, &["status", "--output", "json"]);
    assert_eq!(status.code, 0, "{status:?}");
    let doc: Value = serde_json::from_str(&status.stdout).unwrap();
    doc["orphans"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["path"].as_str().map(String::from))
        .collect()
}

#[test]
fn a_project_removed_from_profile_and_repository_is_destroyed_from_its_last_revision() {
    let Some(r) = Real::new("orphans_destroyed_from_history") else {
        return;
    };
    wired_projects(&r);
    let first = wired(&r, &["up"]);
    assert_eq!(first.code, 0, "{first:?}");
    r.ws.write(
        ".gitignore",
        ".strata/\nhome/\nbin/\npulumi-calls.log\ncalls.jsonl\n",
    );
    git(&r.ws.root, &["init", "-q"]);
    git(&r.ws.root, &["add", "."]);
    git(&r.ws.root, &["commit", "-qm", "two projects"]);
    // down1 leaves the profile and the repository.
    r.ws.profile(
        "wired",
        "description: two wired projects\ninfra_type: test\ninfrastructure:\n  - path: up1\n",
    );
    git(&r.ws.root, &["rm", "-rq", "projects/down1"]);
    git(&r.ws.root, &["commit", "-qam", "down1 goes"]);

    let status = wired(&r, &["status"]);
    assert!(
        status.stdout.contains("down1 (projects/down1, deployed ")
            && status.stdout.contains("outputs got=from-up1"),
        "the real checkpoint's outputs: {status:?}"
    );
    assert_eq!(orphan_paths(&r), ["down1"]);
    r.take_calls();
    let destroyed = wired(&r, &["destroy", "--orphans", "--yes"]);
    assert_eq!(destroyed.code, 0, "{destroyed:?}");
    let (destroy, calls) = r.take_the_one_destroy();
    assert!(
        destroy.contains("strata-orphans-"),
        "from a copy: {calls:?}"
    );
    assert!(orphan_paths(&r).is_empty(), "its real stack is empty now");
    // up1, still in the profile, is untouched: its outputs are still there.
    let outputs = wired(&r, &["outputs", "up1", "--output", "json"]);
    assert!(outputs.stdout.contains("from-up1"), "{outputs:?}");
}
