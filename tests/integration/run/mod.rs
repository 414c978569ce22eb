//! Running plans (issue 4, DESIGN.md §2-3): `up`, `preview`, `refresh`, `destroy`
//! through the real `strata` binary, with the fake `pulumi` first on PATH. Order and
//! parallelism are proven from the start/end times the fake records in its call log,
//! never from wall-clock thresholds. Here: the fixtures, the call-log readers and the
//! background runs the tests share (other areas' tests use them too).

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

/// The contract with the pulumi CLI: flags, stacks, backends, and what every child gets.
mod contract;
/// `destroy`: reverse order, `--yes`, a missing stack, a failed destroy.
mod destroy;
/// A failing project: what stops, what still runs, what the summary says.
mod failure;
/// The shipped `local` profile, end to end, without pulumi.
mod local_profile;
/// Order and parallelism: nothing starts before what it needs, independent projects overlap.
mod order;
/// What stops a run before anything starts: no pulumi, no passphrase.
mod preflight;
/// What a run prints: JSON events, plain prefixed lines off a terminal.
mod reporting;
/// Piecemeal selection: `--project`, `--with-deps`, `--from`.
mod selection;
/// Ctrl-C, SIGTERM and SIGHUP: one SIGINT per child, a kill after a second or the grace period.
mod signals;

/// A Pulumi YAML program with two resources (so a delay spreads over several steps).
pub(crate) const BODY: &str = "resources:\n  first:\n    type: fake:index:Thing\n    properties:\n      x: 1\n  second:\n    type: fake:index:Thing\n    properties:\n      y: ${first.x}\noutputs:\n  value: ${second.y}\n";

/// The Pulumi project name of the project at `projects/<path>`.
pub(crate) fn name(path: &str) -> String {
    format!("proj-{path}")
}

/// The `<P>` of the fake's hooks for the project at `path`.
pub(crate) fn hook_key(path: &str) -> String {
    let upper = name(path).to_ascii_uppercase();
    upper.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
}

/// A workspace with profile `t` (`infrastructure:` = `entries`, YAML list items) and a
/// Pulumi project named `proj-<path>` for each path.
pub(crate) fn workspace(entries: &str, paths: &[&str]) -> Ws {
    let ws = Ws::new();
    fill(&ws, entries, paths);
    ws
}

fn fill(ws: &Ws, entries: &str, paths: &[&str]) {
    ws.profile("t", &format!("{HEAD}infrastructure:\n{entries}"));
    for p in paths {
        ws.pulumi_project(p, &name(p), BODY);
    }
}

/// alpha and bravo independent; charlie needs both; delta after charlie (list order).
pub(crate) const DIAMOND: &str = "  - path: alpha\n  - path: bravo\n    needs: []\n  - path: charlie\n    needs: [alpha, bravo]\n  - path: delta\n";
pub(crate) const DIAMOND_PATHS: &[&str] = &["alpha", "bravo", "charlie", "delta"];
const DIAMOND_EDGES: &[(&str, &str)] = &[
    ("alpha", "charlie"),
    ("bravo", "charlie"),
    ("charlie", "delta"),
];

/// A plain list: alpha, then bravo, then charlie.
pub(crate) const CHAIN: &str = "  - path: alpha\n  - path: bravo\n  - path: charlie\n";
pub(crate) const CHAIN_PATHS: &[&str] = &["alpha", "bravo", "charlie"];

/// Three projects that need nothing.
const INDEPENDENT: &str = "  - path: alpha\n    needs: []\n  - path: bravo\n    needs: []\n  - path: charlie\n    needs: []\n";

/// A workspace of `entries` ([`workspace`]) whose project at `failing` fails its `up`.
fn failing_up(entries: &str, paths: &[&str], failing: &str) -> Ws {
    let mut ws = workspace(entries, paths);
    ws.set_env(&format!("FAKE_PULUMI_FAIL_{}", hook_key(failing)), "up");
    ws
}

pub(crate) fn args<'a>(cmd: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![cmd, "--provider", "t", "--stack", "dev"];
    v.extend_from_slice(extra);
    v
}

pub(crate) fn run(ws: &Ws, cmd: &str, extra: &[&str]) -> Run {
    ws.strata(&args(cmd, extra))
}

pub(crate) fn ok(ws: &Ws, cmd: &str, extra: &[&str]) -> Run {
    let r = run(ws, cmd, extra);
    assert_eq!(r.code, 0, "strata {cmd} {extra:?} should succeed: {r:?}");
    r
}

pub(crate) fn clear_calls(ws: &Ws) {
    let _ = std::fs::remove_file(ws.path("calls.jsonl"));
}

pub(crate) fn s<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or("")
}

pub(crate) fn t(v: &Value) -> u64 {
    v["time_ms"]
        .as_u64()
        .unwrap_or_else(|| panic!("no time_ms in {v}"))
}

pub(crate) fn records<'a>(calls: &'a [Value], event: &str) -> Vec<&'a Value> {
    calls.iter().filter(|c| s(c, "event") == event).collect()
}

pub(crate) fn starts(calls: &[Value]) -> Vec<&Value> {
    records(calls, "start")
}

/// Start records of the project at `path`.
pub(crate) fn starts_of<'a>(calls: &'a [Value], path: &str) -> Vec<&'a Value> {
    let n = name(path);
    starts(calls)
        .into_iter()
        .filter(|c| s(c, "project") == n)
        .collect()
}

/// The pulumi commands the project at `path` ran (`up`, `stack init`…), in order.
pub(crate) fn commands_of<'a>(calls: &'a [Value], path: &str) -> Vec<&'a str> {
    let starts = starts_of(calls, path);
    starts.into_iter().map(|c| s(c, "command")).collect()
}

/// Every process of a project, from its first start to its last end.
pub(crate) fn span(calls: &[Value], path: &str) -> (u64, u64) {
    let n = name(path);
    let first = starts_of(calls, path).into_iter().map(t).min();
    let last = records(calls, "end")
        .into_iter()
        .filter(|c| s(c, "project") == n)
        .map(t)
        .max();
    match (first, last) {
        (Some(a), Some(b)) => (a, b),
        _ => panic!("{path} ({n}) did not run (no start/end in the call log): {calls:#?}"),
    }
}

/// The successful `command` process of a project: (start, end).
pub(crate) fn op_span(calls: &[Value], path: &str, command: &str) -> (u64, u64) {
    let n = name(path);
    let end = records(calls, "end")
        .into_iter()
        .find(|c| s(c, "project") == n && s(c, "command") == command && c["exit_code"] == 0)
        .unwrap_or_else(|| panic!("no successful `{command}` of {path}: {calls:#?}"));
    let start = starts(calls)
        .into_iter()
        .find(|c| c["pid"] == end["pid"])
        .unwrap_or_else(|| panic!("no start for {end}"));
    (t(start), t(end))
}

pub(crate) fn argv(c: &Value) -> Vec<String> {
    c["argv"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

pub(crate) fn has_flag(argv: &[String], flag: &str) -> bool {
    argv.iter().any(|a| a == flag)
}

/// The value of `--flag value` or `--flag=value`.
pub(crate) fn flag_value(argv: &[String], flag: &str) -> Option<String> {
    crate::support::flag_of(&serde_json::json!({ "argv": argv }), flag)
}

/// Projects (Pulumi names) that have any record in the call log.
fn projects_called(calls: &[Value]) -> BTreeSet<String> {
    starts(calls)
        .into_iter()
        .map(|c| s(c, "project").to_string())
        .collect()
}

fn names(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|p| name(p)).collect()
}

/// Asserts that no project started before every project it needs had finished.
fn assert_order(calls: &[Value], edges: &[(&str, &str)]) {
    for (need, dependent) in edges {
        let (_, need_end) = span(calls, need);
        let (dep_start, _) = span(calls, dependent);
        assert!(
            dep_start >= need_end,
            "{dependent} started at {dep_start} before {need} (which it needs) ended at {need_end}"
        );
    }
}

pub(crate) fn sigint(pid: u32) {
    send_signal(pid, "INT");
}

/// strata running in the background; its output is drained on a thread.
pub(crate) struct Background {
    pub(crate) pid: u32,
    rx: std::sync::mpsc::Receiver<std::io::Result<std::process::Output>>,
}

impl Background {
    pub(crate) fn start(ws: &Ws, a: &[&str]) -> Background {
        let child = ws.spawn(a);
        let pid = child.id();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        Background { pid, rx }
    }

    pub(crate) fn wait(self, limit: Duration) -> Run {
        match self.rx.recv_timeout(limit) {
            Ok(out) => {
                let out = out.expect("wait for strata");
                Run {
                    code: out.status.code().unwrap_or(-1),
                    stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                    stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                }
            }
            Err(_) => {
                let _ = Command::new("kill")
                    .args(["-KILL", &self.pid.to_string()])
                    .status();
                panic!("strata (pid {}) did not exit within {limit:?}", self.pid);
            }
        }
    }
}

/// Polls `cond` every 50 ms for up to `limit`.
pub(crate) fn wait_for(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sigints_of(calls: &[Value], pid: u64) -> usize {
    records(calls, "signal")
        .into_iter()
        .filter(|c| c["pid"].as_u64() == Some(pid) && s(c, "signal") == "SIGINT")
        .count()
}
