//! Issue 32, third pass: no panic hangs a run (a panicking step is a failed step, and a
//! wait that could overflow is refused before the run), and messages that tell the truth
//! (the trace's timeout warning names the limit that was hit).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::policy::OK;
use crate::run::Background;
use crate::support::*;

/// A retry delay of 300000000000 years once passed `validate`, then overflowed in the
/// wait and hung the run with the stack locked. Now the profile is refused, by
/// `validate` and by `up` alike, naming the file, the key and its line.
#[test]
fn an_absurd_retry_delay_is_refused_naming_file_key_and_line() {
    let ws = Ws::with_profile(
        "infrastructure:\n  - path: a\n    retry: {attempts: 2, delay: 300000000000y, on: [\"boom\"]}\n",
    );
    ws.command_project("a", "echo boom; exit 1", "true");
    let v = ws.run("validate", &[]);
    v.expect_code(3);
    let bg = Background::start(&ws, &["up", "-p", "t", "-s", "dev"]);
    let up = bg.wait(Duration::from_secs(60));
    up.expect_code(3);
    for r in [&v, &up] {
        let all = r.all();
        // Where (the file, the key, its line), and why.
        assert_has(&all, &["providers/t.yaml", "retry.delay", "line 5"]);
        assert_has(&all, &["is longer than 1h"]);
    }
    assert!(!ws.exists(".strata/dev/lock"), "no lock is left");
}

/// A step that panics (here through the test-only `STRATA_TEST_PANIC_IN_STEP` of debug
/// builds) is a failed step like any other: its message in the JSON events, the summary
/// and the journal; what needs it is skipped; the run ends and frees the stack lock.
#[test]
fn a_panicking_step_is_a_failed_step_and_the_run_ends() {
    let mut ws = Ws::new();
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: a\n  - path: b\n  - path: c\n    needs: []\n"),
    );
    for p in ["a", "b", "c"] {
        ws.command_project(p, OK, "true");
    }
    ws.set_env("STRATA_TEST_PANIC_IN_STEP", "a");
    let r = Background::start(&ws, &UP_KEEP_GOING_JSON).wait(Duration::from_secs(60));
    r.expect_code(1);
    let finished = |p: &str| {
        r.events()
            .into_iter()
            .find(|e| e["event"] == "project_finished" && e["project"] == p)
            .unwrap_or_else(|| panic!("no project_finished for {p}: {r:?}"))
    };
    let a = finished("a");
    assert_eq!(a["status"], "failed", "{a}");
    let message = a["message"].as_str().unwrap_or("");
    assert!(
        message.contains("panicked") && message.contains("STRATA_TEST_PANIC_IN_STEP"),
        "{a}"
    );
    assert!(message.contains("src/run/step/"), "names where: {a}");
    assert_eq!(finished("b")["status"], "skipped");
    assert_eq!(finished("c")["status"], "succeeded");
    let recorded = (ws.read(".strata/dev/journal.jsonl").lines())
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|j| j["project"] == "a" && j["status"] == "failed")
        .unwrap_or_else(|| panic!("no journal record of a: {r:?}"));
    assert!(
        recorded["message"]
            .as_str()
            .unwrap_or("")
            .contains("panicked"),
        "{recorded}"
    );
    assert!(!ws.exists(".strata/dev/lock"), "the lock is released");
    // The human summary says it too, and the panic is not printed raw on stderr.
    let human = ws.run("up", &[]);
    human
        .expect_code(1)
        .expect_stdout(&["STRATA_TEST_PANIC_IN_STEP"]);
    assert!(!human.stderr.contains("RUST_BACKTRACE"), "{human:?}");
}

/// The end of a traced run waits at most 5 s for the collector: when that cap, not
/// `OTEL_EXPORTER_OTLP_TIMEOUT` (unset here: 10 s), ends the wait, the warning says so.
#[test]
fn the_trace_warning_names_strata_s_own_cap_when_that_is_the_limit_hit() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut ws = Ws::without_pulumi();
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: a\n"));
    ws.command_project("a", OK, "true");
    ws.set_env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        &format!("http://{}", silent.local_addr().unwrap()),
    )
    .set_env("OTEL_BSP_SCHEDULE_DELAY", "600000");
    let t0 = Instant::now();
    let r = ws.run_ok("up", &[]);
    assert!(t0.elapsed() < Duration::from_secs(30), "{:?}", t0.elapsed());
    let warning = r.stderr_line(|l| l.contains("trace"));
    assert!(warning.contains("did not answer within 5.0s"), "{warning}");
    assert!(!warning.contains("OTEL_EXPORTER_OTLP_TIMEOUT"), "{warning}");
    assert!(warning.contains("strata waits at most"), "{warning}");
    drop(silent);
}
