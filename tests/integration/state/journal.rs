//! The journal (`.strata/<stack>/journal.jsonl`): one JSON line per project operation,
//! appended run after run, never holding a secret.

use std::collections::BTreeSet;

use serde_json::json;

use super::{network_and_web, project_records};
use crate::support::*;

#[test]
fn journal_lines_are_json_one_per_project_operation_without_secrets() {
    const SECRET: &str = "journal-leak-canary-8d1f";
    let mut ws = network_and_web(
        &["- run: echo \"got ${outputs.db_password}\" > /dev/null"],
        &[("vpc_id", "vpc_id"), ("db_password", "db_password")],
    );
    ws.fake_secret_outputs("network", json!({"db_password": SECRET}));
    ws.strata_ok(&["up"]);
    let first_text = ws.read(".strata/dev/journal.jsonl");

    let recs = project_records(&ws);
    assert_eq!(recs.len(), 2, "one record per project operation: {recs:#?}");
    let run_id = recs[0]["run_id"].as_str().expect("run_id").to_string();
    assert!(!run_id.is_empty());
    for (rec, project) in recs.iter().zip(["base/network", "apps/web"]) {
        assert_eq!(rec["project"], project, "{rec}");
        assert_eq!(rec["run_id"], run_id.as_str(), "{rec}");
        assert_eq!(rec["operation"], "up", "{rec}");
        assert_eq!(rec["status"], "succeeded", "{rec}");
        for k in ["started_at", "ended_at"] {
            let t = rec[k].as_str().unwrap_or_else(|| panic!("no {k}: {rec}"));
            assert!(
                t.len() >= 20 && t.as_bytes()[4] == b'-' && t.contains('T'),
                "{k} is not RFC 3339: {t}"
            );
        }
        assert!(
            rec["started_at"].as_str() <= rec["ended_at"].as_str(),
            "{rec}"
        );
        let fp = rec["fingerprint"]
            .as_str()
            .unwrap_or_else(|| panic!("no fingerprint: {rec}"));
        assert!(fp.len() >= 16, "{rec}");
    }
    assert!(
        !first_text.contains(SECRET),
        "secret in the journal:\n{first_text}"
    );

    // A second run appends: the first lines stay as they were.
    ws.strata_ok(&["up"]);
    let text = ws.read(".strata/dev/journal.jsonl");
    assert!(text.starts_with(&first_text), "the journal is append-only");
    assert_eq!(project_records(&ws).len(), 4);
    let ids: BTreeSet<String> = project_records(&ws)
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "each run has its own run_id");
    assert!(!text.contains(SECRET), "secret in the journal:\n{text}");
    // Nor in the logs of the run.
    assert_nowhere_under(&ws, ".strata/dev/logs", SECRET);
}

#[test]
fn a_project_keeps_the_logs_of_its_last_twenty_runs_of_each_operation() {
    let ws = Ws::new();
    ws.command_project("a", "echo built", "echo gone")
        .profile(
            "local",
            "description: one command\ninfrastructure:\n  - path: a\n",
        )
        .env_file("PULUMI_STACK=dev\n");
    // A file of the user's in the log folder stays.
    ws.write(".strata/dev/logs/a/notes.txt", "mine");
    ws.strata_ok(&["destroy", "-p", "local", "--yes"]);
    for _ in 0..22 {
        ws.strata_ok(&["up", "-p", "local"]);
    }
    let logs: Vec<String> = ws
        .files_under(".strata/dev/logs/a")
        .into_iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let ups: Vec<&String> = logs.iter().filter(|n| n.starts_with("up-")).collect();
    assert_eq!(ups.len(), 20, "{logs:?}");
    assert!(logs.contains(&"notes.txt".to_string()), "{logs:?}");
    assert_eq!(
        logs.iter().filter(|n| n.starts_with("destroy-")).count(),
        1,
        "another operation's log is not pruned by ups: {logs:?}"
    );
    // The journal keeps every run, and the last run's log is one of those kept.
    let recs: Vec<serde_json::Value> = project_records(&ws)
        .into_iter()
        .filter(|r| r["operation"] == "up")
        .collect();
    assert_eq!(recs.len(), 22);
    let last = recs.last().unwrap()["log"].as_str().unwrap().to_string();
    assert!(ws.exists(&last), "{last}");
    let first = recs[0]["log"].as_str().unwrap().to_string();
    assert!(!ws.exists(&first), "the oldest log is gone: {first}");
}
