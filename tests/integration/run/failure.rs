//! A failing project: its dependents and anything new stop (unless `--keep-going`),
//! what was running finishes, and the summary names the failure, its log and what
//! Pulumi's exit code means.

use super::{
    CHAIN_PATHS, INDEPENDENT, clear_calls, failing_up, hook_key, ok, op_span, run, sigints_of,
    span, starts_of, workspace,
};

/// alpha, then bravo (needs alpha); charlie needs nothing but is listed last.
const FAILING: &str = "  - path: alpha\n  - path: bravo\n  - path: charlie\n    needs: []\n";

#[test]
fn a_failure_stops_its_dependents_and_the_summary_names_it_and_its_log() {
    let ws = failing_up(FAILING, CHAIN_PATHS, "alpha");
    let r = run(&ws, "up", &["-j", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let calls = ws.calls();
    assert!(
        starts_of(&calls, "bravo").is_empty(),
        "bravo needs the failed alpha and must not run: {calls:#?}"
    );
    assert!(
        starts_of(&calls, "charlie").is_empty(),
        "after a failure (without --keep-going) nothing new is scheduled: {calls:#?}"
    );
    let out = r.all();
    assert!(
        out.lines().any(|l| {
            let mut w = l.split_whitespace();
            w.next() == Some("alpha") && w.next() == Some("failed")
        }),
        "the summary has a `alpha failed` row: {r:?}"
    );
    let log_line = out
        .lines()
        .find(|l| l.contains(".strata/dev/logs/alpha/"))
        .unwrap_or_else(|| {
            panic!("the summary names alpha's log under .strata/dev/logs/alpha/: {r:?}")
        });
    let rel = &log_line[log_line.find(".strata/dev/logs/alpha/").unwrap()..];
    let rel = rel.split_whitespace().next().unwrap();
    assert!(rel.ends_with(".log"), "{rel}");
    assert!(
        rel.starts_with(".strata/dev/logs/alpha/up-"),
        "logs/<project>/<operation>-<time>.log: {rel}"
    );
    let log = ws.read(rel);
    assert!(
        log.contains("failed"),
        "the log holds the child's output (its failure): {log}"
    );
    assert!(
        log.contains("fake:index:Thing"),
        "the log holds the child's engine events, as lines: {log}"
    );
    // Text to read: Pulumi's JSON events are beside it, one per line.
    assert!(!log.contains("{\"sequence\""), "{log}");
    let events = ws.read(&format!("{rel}.events.jsonl"));
    assert!(
        !events.is_empty()
            && events
                .lines()
                .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{events}"
    );
}

#[test]
fn keep_going_still_runs_what_does_not_depend_on_the_failure() {
    let ws = failing_up(FAILING, CHAIN_PATHS, "alpha");
    let r = run(&ws, "up", &["-j", "1", "--keep-going"]);
    assert_eq!(
        r.code, 1,
        "a failure still exits 1 with --keep-going: {r:?}"
    );
    let calls = ws.calls();
    assert!(starts_of(&calls, "bravo").is_empty(), "{calls:#?}");
    let (_, end) = op_span(&calls, "charlie", "up");
    assert!(end > 0);
}

#[test]
fn pulumi_exit_codes_become_clear_messages() {
    let mut ws = workspace("  - path: alpha\n", &["alpha"]);
    ws.set_env("FAKE_PULUMI_FAIL", "up");
    ws.set_env("FAKE_PULUMI_FAIL_CODE", "3");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let out = r.all().to_lowercase();
    assert!(
        out.contains("login") || out.contains("authentication"),
        "exit 3 of pulumi is an authentication problem and the message says so: {r:?}"
    );
}

#[test]
fn a_failure_lets_running_independent_projects_finish() {
    let mut ws = workspace(INDEPENDENT, CHAIN_PATHS);
    // Existing stacks, so the three `up`s start together.
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    ws.set_env(&format!("FAKE_PULUMI_FAIL_{}", hook_key("alpha")), "up");
    ws.set_env(
        &format!("FAKE_PULUMI_DELAY_MS_{}", hook_key("alpha")),
        "500",
    );
    ws.set_env(
        &format!("FAKE_PULUMI_DELAY_MS_{}", hook_key("bravo")),
        "2000",
    );
    ws.set_env(
        &format!("FAKE_PULUMI_DELAY_MS_{}", hook_key("charlie")),
        "2000",
    );
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let calls = ws.calls();
    for p in ["bravo", "charlie"] {
        let (start, end) = op_span(&calls, p, "up");
        let (_, alpha_end) = span(&calls, "alpha");
        assert!(
            start < alpha_end,
            "{p} was running when alpha failed (test premise)"
        );
        assert!(end > start);
        for c in starts_of(&calls, p) {
            let pid = c["pid"].as_u64().unwrap();
            assert_eq!(sigints_of(&calls, pid), 0, "{p} must not be interrupted");
        }
    }
}
