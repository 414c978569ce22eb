//! What a later run runs again: `up --resume` the failed branch and what was not reached,
//! `up --changed` what changed (files, watched files, environment values) and what its
//! changed outputs reach.

use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use super::{
    NETWORK, calls_text, chain_after_web_failed, chain_workspace, project_records, summary,
    summary_row, the_up, up_projects, ups,
};
use crate::support::*;

#[test]
fn resume_after_a_failure_reruns_only_the_failed_branch() {
    let ws = chain_after_web_failed();
    let first: Vec<(String, i64)> = ups(&ws, 0).into_iter().map(|(p, c, _)| (p, c)).collect();
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [("network".into(), 0), ("side".into(), 0), ("web".into(), 1)],
        "{}",
        calls_text(&ws)
    );
    // The journal records the failure with its exit code.
    let recs = project_records(&ws);
    let web = recs.iter().find(|r| r["project"] == "apps/web").unwrap();
    assert_eq!(web["status"], "failed", "{web}");
    assert_eq!(web["exit_code"], 1, "{web}");
    let front = recs
        .iter()
        .find(|r| r["project"] == "apps/frontend")
        .unwrap();
    assert_ne!(front["status"], "succeeded", "{front}");

    let since = ws.calls().len();
    ws.strata_ok(&["up", "--resume"]);
    assert_eq!(
        up_projects(&ws, since),
        BTreeSet::from(["web".to_string(), "frontend".to_string()]),
        "{}",
        calls_text(&ws)
    );
    for (_, code, _) in ups(&ws, since) {
        assert_eq!(code, 0);
    }
    // web still got network's output (read from its deployed stack).
    let web = the_up(&ws, since, "web");
    assert_eq!(web["config"]["web:vpc_id"], "vpc-id");

    // Everything succeeded: a second resume has nothing to do.
    let since = ws.calls().len();
    ws.strata_ok(&["up", "--resume"]);
    assert!(up_projects(&ws, since).is_empty(), "{}", calls_text(&ws));
}

#[test]
fn changed_after_a_clean_up_starts_no_pulumi_process_and_says_why() {
    let ws = chain_workspace();
    ws.strata_ok(&["up"]);

    let since = ws.calls().len();
    let r = ws.strata_ok(&["up", "--changed"]);
    let new_calls: Vec<Value> = ws.calls().into_iter().skip(since).collect();
    assert!(
        new_calls.is_empty(),
        "a no-change `up --changed` started Pulumi processes:\n{}",
        calls_text(&ws)
    );
    for p in ["base/network", "apps/web", "apps/frontend", "apps/side"] {
        let row = summary_row(&r, p);
        assert!(row.contains("skipped"), "{row}");
        assert!(row.contains("unchanged"), "the summary says why: {row}");
    }
    assert!(summary(&r).contains("0 processes started"), "{r:?}");

    // The same in JSON events.
    let r = ws.strata_ok(&["up", "--changed", "--output", "json"]);
    assert_eq!(ws.calls().len(), since, "{}", calls_text(&ws));
    let events = r.events();
    let skipped: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "project_finished" && e["status"] == "skipped")
        .collect();
    assert_eq!(skipped.len(), 4, "{events:#?}");
    for e in skipped {
        assert!(
            e["message"].as_str().unwrap_or("").contains("unchanged"),
            "why it was skipped: {e}"
        );
    }
}

#[test]
fn changed_file_reruns_that_project_and_what_its_changed_outputs_reach() {
    let ws = chain_workspace();
    ws.strata_ok(&["up"]);

    // A new file in apps/web: web re-runs; frontend (after it) only if web's outputs
    // changed, and they did not; network and side not at all.
    ws.write("projects/apps/web/notes.txt", "a change\n");
    let since = ws.calls().len();
    let r = ws.strata_ok(&["up", "--changed"]);
    assert_eq!(
        up_projects(&ws, since),
        BTreeSet::from(["web".to_string()]),
        "{}",
        calls_text(&ws)
    );
    let web = the_up(&ws, since, "web");
    assert_eq!(
        web["config"]["web:vpc_id"], "vpc-id",
        "inputs of a skipped upstream still arrive"
    );
    for p in ["base/network", "apps/side"] {
        let row = summary_row(&r, p);
        assert!(
            row.contains("skipped") && row.contains("unchanged"),
            "{row}"
        );
    }
    assert!(summary_row(&r, "apps/web").contains("succeeded"), "{r:?}");
    assert!(
        summary_row(&r, "apps/frontend").contains("upstream outputs unchanged"),
        "{r:?}"
    );

    // That run is now the last success: nothing left to do.
    let since = ws.calls().len();
    ws.strata_ok(&["up", "--changed"]);
    assert_eq!(ws.calls().len(), since, "{}", calls_text(&ws));

    // An edit of the upstream that keeps its outputs re-runs it alone.
    ws.write(
        "projects/base/network/Pulumi.yaml",
        &format!("name: network\nruntime: yaml\ndescription: edited\n{NETWORK}"),
    );
    let since = ws.calls().len();
    ws.strata_ok(&["up", "--changed"]);
    assert_eq!(
        up_projects(&ws, since),
        BTreeSet::from(["network".to_string()]),
        "{}",
        calls_text(&ws)
    );
    // One that changes them re-runs what depends on it, as far as outputs change.
    ws.write(
        "projects/base/network/Pulumi.yaml",
        &format!(
            "name: network\nruntime: yaml\n{}",
            NETWORK.replace("outputs:\n", "outputs:\n  region: eu-west-1\n")
        ),
    );
    let since = ws.calls().len();
    ws.strata_ok(&["up", "--changed"]);
    let ran = up_projects(&ws, since);
    assert!(
        ran.contains("network") && ran.contains("web") && ran.contains("side"),
        "{ran:?} {}",
        calls_text(&ws)
    );
}

#[test]
fn changed_after_destroy_runs_everything_again() {
    let ws = chain_workspace();
    ws.strata_ok(&["up"]);
    ws.strata_ok(&["destroy", "--yes"]);
    let before = ws.calls().len();
    let r = ws.strata_ok(&["up", "--changed", "--output", "json"]);
    let finished = r
        .events()
        .into_iter()
        .find(|e| e["event"] == "run_finished")
        .expect("run_finished");
    assert_eq!(finished["counts"]["succeeded"], 4, "{r:?}");
    assert_eq!(finished["counts"]["skipped"], 0, "{r:?}");
    assert!(ws.calls().len() > before);
}

/// Issue 25: all six `local` projects source `projects/local/lib.sh`; after editing it,
/// `up --changed` skipped all six as unchanged. The profile's `watch:` makes it part of
/// each fingerprint. An environment-file value is an input too; a secret-looking one is
/// not (a rotated token changes no infrastructure).
#[test]
fn changed_sees_watched_files_and_environment_values() {
    let ws = Ws::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (from, to) in [
        ("providers/local.yaml", "providers/local.yaml"),
        ("projects/local", "projects/local"),
    ] {
        copy_path(&repo.join(from), &ws.path(to));
    }
    let up = [
        "up",
        "--provider",
        "local",
        "--stack",
        "dev",
        "--output",
        "json",
    ];
    let changed = [
        "up",
        "--provider",
        "local",
        "--stack",
        "dev",
        "--changed",
        "--output",
        "json",
    ];
    assert_eq!(ws.strata(&up).code, 0);
    let ran = |r: &Run| -> usize {
        r.events()
            .iter()
            .filter(|e| e["event"] == "project_finished" && e["status"] == "succeeded")
            .count()
    };
    let r = ws.strata(&changed);
    assert_eq!((r.code, ran(&r)), (0, 0), "{r:?}");

    ws.append("projects/local/lib.sh", "\n# a helper changed\n");
    let r = ws.strata(&changed);
    assert_eq!(
        (r.code, ran(&r)),
        (0, 6),
        "lib.sh is read by all six: {r:?}"
    );

    ws.append("config/pulumi/environment", "LOCAL_TIER=gold\n");
    let r = ws.strata(&changed);
    assert_eq!((r.code, ran(&r)), (0, 6), "an environment value: {r:?}");
    ws.append("config/pulumi/environment", "API_TOKEN=t-1\n");
    let r = ws.strata(&changed);
    assert_eq!((r.code, ran(&r)), (0, 0), "a token is not an input: {r:?}");
}
