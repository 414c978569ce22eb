//! Order and parallelism, from the call log's start and end times: no project starts
//! before what it needs has succeeded, independent projects run together, `-j 1` runs
//! one at a time.

use super::{
    CHAIN_PATHS, DIAMOND, DIAMOND_EDGES, DIAMOND_PATHS, INDEPENDENT, assert_order, names, ok,
    op_span, projects_called, span, workspace,
};
use crate::support::*;

#[test]
fn up_starts_no_project_before_what_it_needs_has_succeeded() {
    let mut ws = workspace(DIAMOND, DIAMOND_PATHS);
    ws.set_env("FAKE_PULUMI_DELAY_MS", "300");
    let r = ok(&ws, "up", &[]);
    let calls = ws.calls();
    assert_eq!(projects_called(&calls), names(DIAMOND_PATHS), "{r:?}");
    assert_order(&calls, DIAMOND_EDGES);
    // What it needs has *succeeded*: every needed project's up ended with 0 first.
    for (need, dependent) in DIAMOND_EDGES {
        let (_, need_ok) = op_span(&calls, need, "up");
        let (dep_start, _) = span(&calls, dependent);
        assert!(need_ok <= dep_start, "{dependent} before {need} succeeded");
    }
    // Every child's full output goes to .strata/<stack>/logs/<project>/<op>-<time>.log,
    // its engine events beside it (`.log.events.jsonl`).
    for p in DIAMOND_PATHS {
        let files = ws.files_under(&format!(".strata/dev/logs/{p}"));
        let (logs, events): (Vec<_>, Vec<_>) = files
            .into_iter()
            .partition(|(f, _)| f.to_string_lossy().ends_with(".log"));
        assert_eq!(logs.len(), 1, "{p}: one log: {logs:?}");
        assert_eq!(events.len(), 1, "{p}: its events: {events:?}");
        let (file, bytes) = &logs[0];
        let fname = file.file_name().unwrap().to_string_lossy().to_string();
        assert!(
            fname.starts_with("up-") && fname.ends_with(".log"),
            "{fname}"
        );
        assert!(
            String::from_utf8_lossy(bytes).contains("fake:index:Thing"),
            "{p}: the log holds the child's output"
        );
    }
}

/// The three independent projects run at the same time: each waits until all three
/// have started (a rendezvous on files), which only finishes if strata runs them
/// together — no timing involved.
#[test]
fn independent_projects_overlap() {
    let ws = Ws::new();
    ws.profile("t", &format!("{HEAD}infrastructure:\n{INDEPENDENT}"));
    for p in CHAIN_PATHS {
        ws.command_project(
            p,
            &format!(
                "touch \"$STRATA_ROOT/started-{p}\"; i=0; while [ $(ls \"$STRATA_ROOT\" | grep -c '^started-') -lt 3 ]; do i=$((i+1)); [ $i -gt 1200 ] && {{ echo 'the others never started'; exit 1; }}; sleep 0.05; done; printf '{{}}' > \"$STRATA_OUTPUTS_FILE\""
            ),
            "true",
        );
    }
    let r = ok(&ws, "up", &[]);
    assert!(!r.stdout.contains("never started"), "{r:?}");
}

#[test]
fn parallel_one_serialises_independent_projects() {
    let mut ws = workspace(INDEPENDENT, CHAIN_PATHS);
    ws.set_env("FAKE_PULUMI_DELAY_MS", "300");
    ok(&ws, "up", &["-j", "1"]);
    let calls = ws.calls();
    let mut spans: Vec<(u64, u64, &str)> = CHAIN_PATHS
        .iter()
        .map(|p| {
            let (a, b) = span(&calls, p);
            (a, b, *p)
        })
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(
            w[1].0 >= w[0].1,
            "with -j 1, {} started ({}) before {} ended ({})",
            w[1].2,
            w[1].0,
            w[0].2,
            w[0].1
        );
    }
}
