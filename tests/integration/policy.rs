//! `timeout:` and `retry:` on a profile entry (issue 10, DESIGN.md profile syntax).

use serde_json::Value;

use crate::support::*;

pub(crate) const OK: &str = "printf '{}' > \"$STRATA_OUTPUTS_FILE\"";

/// A try that runs longer than `timeout:` is cancelled like Ctrl-C (one SIGINT to the
/// project) and fails "timed out after …"; the rest of the run goes on by the failure
/// policy.
#[test]
fn a_timeout_cancels_the_project_with_one_sigint_and_fails_it() {
    let ws = Ws::with_profile(
        "infrastructure:\n  - path: slow\n    timeout: 1s\n  - path: other\n    needs: []\n",
    );
    ws.command_project(
        "slow",
        "trap 'echo sigint >> \"$STRATA_ROOT/signals\"; exit 130' INT; sleep 60 & wait $!",
        "true",
    );
    ws.command_project("other", OK, "true");
    let r = ws.run_json("up", &["--keep-going"]);
    r.expect_code(1);
    assert_slow_timed_out(&r);
    assert_eq!(ws.read("signals").lines().count(), 1, "exactly one SIGINT");
    assert_eq!(r.statuses()["other"], "succeeded", "{r:?}");
}

fn retry_workspace(pattern: &str) -> Ws {
    let ws = Ws::with_profile(&format!(
        "infrastructure:\n  - path: flaky\n    retry: {{ attempts: 3, delay: 100ms, on: [\"{pattern}\"] }}\n"
    ));
    // Fails twice with a throttling error, then succeeds.
    ws.command_project(
        "flaky",
        "n=$(cat \"$STRATA_ROOT/tries\" 2>/dev/null || echo 0); n=$((n+1)); echo $n > \"$STRATA_ROOT/tries\"; if [ $n -lt 3 ]; then echo 'error: TooManyRequests: rate exceeded'; exit 1; fi; printf '{}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    ws
}

/// Brings [`retry_workspace`] (retrying on `pattern`) up; asserts its exit code and how
/// many times the project ran, printing the run when either differs.
#[track_caller]
fn up_retrying_on(pattern: &str, code: i32, tries: usize) -> (Ws, Run) {
    let ws = retry_workspace(pattern);
    let r = ws.run_json("up", &[]);
    r.expect_code(code);
    assert_eq!(ws.read("tries").trim(), tries.to_string(), "{r:?}");
    (ws, r)
}

fn journal(ws: &Ws) -> Vec<Value> {
    ws.read(".strata/dev/journal.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// A failed try whose output matches `retry.on` runs again, waiting `delay` and then
/// twice that; each retry is an event and a journal record; the summary shows the tries.
#[test]
fn a_matching_failure_is_retried_with_a_doubling_delay() {
    let (ws, r) = up_retrying_on("TooManyRequests", 0, 3);
    let retries: Vec<Value> = r
        .events()
        .into_iter()
        .filter(|e| e["event"] == "project_retry")
        .collect();
    assert_eq!(retries.len(), 2, "{r:?}");
    assert_eq!(
        (
            retries[0]["attempt"].as_u64(),
            retries[0]["delay_ms"].as_u64()
        ),
        (Some(2), Some(100))
    );
    assert_eq!(
        (
            retries[1]["attempt"].as_u64(),
            retries[1]["delay_ms"].as_u64()
        ),
        (Some(3), Some(200))
    );
    assert_eq!(retries[0]["reason"], "TooManyRequests");
    let fin = r
        .events()
        .into_iter()
        .find(|e| e["event"] == "project_finished")
        .unwrap();
    assert!(
        fin["message"]
            .as_str()
            .unwrap_or("")
            .contains("after 3 attempts"),
        "{fin}"
    );
    let recorded = journal(&ws)
        .into_iter()
        .filter(|j| j["record"] == "retry")
        .count();
    assert_eq!(recorded, 2);
    let human = {
        let _ = std::fs::remove_file(ws.path("tries"));
        ws.strata(&["up", "-p", "t", "-s", "dev"])
    };
    assert!(human.stdout.contains("after 3 attempts"), "{human:?}");
}

/// No pattern matches: no retry.
#[test]
fn a_failure_that_matches_no_pattern_is_not_retried() {
    let (_ws, r) = up_retrying_on("connection reset", 1, 1);
    assert!(!r.stdout.contains("project_retry"), "{r:?}");
}

/// The same policy drives the pulumi CLI: every try is a `pulumi up`.
#[test]
fn a_pulumi_project_is_retried_through_the_cli() {
    let mut ws = Ws::new();
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: vpc\n    retry: {{ attempts: 3, delay: 10ms, on: [\"TooManyRequests\"] }}\n"
        ),
    );
    ws.pulumi_project(
        "vpc",
        "vpc",
        "resources:\n  a:\n    type: fake:index:Thing\n    properties:\n      x: 1\n",
    );
    ws.set_env("FAKE_PULUMI_FAIL_VPC", "up");
    ws.set_env(
        "FAKE_PULUMI_FAIL_MESSAGE",
        "creating VPC: TooManyRequests: slow down",
    );
    let r = ws.run("up", &[]);
    r.expect_code(1);
    let ups = ws
        .calls()
        .into_iter()
        .filter(|c| c["event"] == "start" && c["command"] == "up")
        .count();
    assert_eq!(ups, 3, "three tries of `pulumi up`");
    assert!(r.stdout.contains("after 3 attempts"), "{r:?}");
}

/// Past its deadline a project is timed out whatever its exit code: one that traps the
/// SIGINT and exits 0 still fails "timed out", and the background child it left in its
/// process group does not outlive the run (issue 25).
#[test]
fn a_timeout_holds_when_the_project_exits_0_after_sigint() {
    let ws = Ws::with_profile("infrastructure:\n  - path: slow\n    timeout: 1s\n");
    let leaves_a_child = "trap 'exit 0' INT; sleep 30 & echo $! > \"$STRATA_ROOT/child\"; wait";
    ws.command_project("slow", leaves_a_child, "true");
    let r = ws.run_json("up", &[]);
    assert_slow_timed_out(&r);
    r.expect_code(1);
    let pid: i32 = ws.read("child").trim().parse().unwrap();
    // Dead, or a zombie nobody has reaped yet: not running.
    let alive = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|t| t.trim().to_string()))
            .is_some_and(|t| !t.starts_with('Z') && !t.starts_with('X'))
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let still = alive();
    if still {
        // SAFETY: ends the stray child this test made.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(
        !still,
        "the project's background child {pid} outlived the run"
    );
}

/// `slow` failed, and its message says it timed out after its 1 s limit.
fn assert_slow_timed_out(r: &Run) {
    let slow = r
        .events()
        .into_iter()
        .find(|e| e["event"] == "project_finished" && e["project"] == "slow")
        .unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(slow["status"], "failed", "{slow}");
    assert!(
        slow["message"]
            .as_str()
            .unwrap_or("")
            .contains("timed out after 1s"),
        "{slow}"
    );
}
