//! What a run prints: `--output json` holds only the documented events, a failure
//! included; off a terminal, plain lines prefixed with their project.

use serde_json::Value;

use super::{CHAIN, CHAIN_PATHS, failing_up, ok, run, s, workspace};

#[test]
fn json_output_emits_the_documented_events() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    let r = ok(&ws, "up", &["--output", "json"]);
    for l in r.stdout.lines().filter(|l| !l.trim().is_empty()) {
        assert!(l.starts_with('{'), "stdout holds only JSON lines, got: {l}");
    }
    let ev = r.events();
    let kinds: Vec<&str> = ev.iter().map(|e| s(e, "event")).collect();
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
    for p in CHAIN_PATHS {
        let of = |k: &str| -> Vec<&Value> {
            ev.iter()
                .filter(|e| s(e, "event") == k && s(e, "project") == *p)
                .collect()
        };
        assert_eq!(of("project_started").len(), 1, "{p}: {kinds:?}");
        assert!(!of("project_output").is_empty(), "{p}: no project_output");
        for o in of("project_output") {
            assert!(o["line"].is_string(), "{o}");
        }
        let fin = of("project_finished");
        assert_eq!(fin.len(), 1, "{p}");
        assert_eq!(fin[0]["operation"], "up", "{}", fin[0]);
        assert_eq!(fin[0]["status"], "succeeded", "{}", fin[0]);
        assert!(fin[0]["duration_ms"].is_u64(), "{}", fin[0]);
    }
    let last = ev.last().unwrap();
    assert_eq!(last["status"], "succeeded", "{last}");
    assert_eq!(last["counts"]["succeeded"], 3, "{last}");
    assert_eq!(last["counts"]["failed"], 0, "{last}");
}

#[test]
fn json_output_reports_a_failure() {
    let ws = failing_up(CHAIN, CHAIN_PATHS, "bravo");
    let r = run(&ws, "up", &["--output", "json"]);
    r.expect_code(1);
    let ev = r.events();
    let fin = |p: &str| {
        ev.iter()
            .find(|e| s(e, "event") == "project_finished" && s(e, "project") == p)
            .cloned()
            .unwrap_or_else(|| panic!("no project_finished for {p}"))
    };
    assert_eq!(fin("alpha")["status"], "succeeded");
    assert_eq!(fin("bravo")["status"], "failed");
    assert_ne!(fin("charlie")["status"], "succeeded");
    let last = ev.last().unwrap();
    assert_eq!(last["event"], "run_finished");
    assert_eq!(last["status"], "failed");
    assert_eq!(last["counts"]["failed"], 1, "{last}");
}

#[test]
fn human_output_off_a_terminal_is_plain_prefixed_lines() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    let r = ok(&ws, "up", &[]);
    let out = r.all();
    assert!(
        !out.contains('\u{1b}') && !out.contains('\r'),
        "no escape codes or carriage returns off a terminal: {r:?}"
    );
    for p in CHAIN_PATHS {
        let prefix = format!("[{p}] ");
        assert!(
            out.lines().any(|l| l.starts_with(&prefix)),
            "lines of {p} are prefixed with [{p}]: {r:?}"
        );
    }
    // Child output (the fake's step lines) only ever appears behind its project's prefix.
    let child: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("fake:index:Thing"))
        .collect();
    assert!(!child.is_empty(), "the children's progress is shown: {r:?}");
    for l in child {
        assert!(
            CHAIN_PATHS
                .iter()
                .any(|p| l.starts_with(&format!("[{p}] "))),
            "unprefixed child output line: {l}"
        );
    }
}
