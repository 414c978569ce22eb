//! The stack lock: a second run on the stack exits 3 naming the holder, a dead holder's
//! lock is taken over with a warning, and every way a run ends releases it.

use std::collections::BTreeSet;
use std::io::Read;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{NETWORK, calls_text, chain_workspace, ends, up_projects, ups, workspace};
use crate::support::*;

/// A running strata with its output drained in the background.
struct Bg {
    child: Child,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
}

fn bg(ws: &Ws, args: &[&str]) -> Bg {
    let mut child = ws.spawn(args);
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    Bg { child, out, err }
}

impl Bg {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn finish(mut self, limit: Duration) -> Run {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("strata did not finish within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Run {
            code: status.code().unwrap_or(-1),
            stdout: self.out.join().unwrap(),
            stderr: self.err.join().unwrap(),
        }
    }
}

fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True while some Pulumi `up` has been running for at least `ms` (so it is the real
/// update, not the quick probe that finds no stack).
fn up_running_for(ws: &Ws, ms: u64) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let calls = ws.calls();
    let ended: BTreeSet<u64> = calls
        .iter()
        .filter(|c| c["event"] == "end")
        .filter_map(|c| c["pid"].as_u64())
        .collect();
    calls.iter().any(|c| {
        c["event"] == "start"
            && c["command"] == "up"
            && c["pid"].as_u64().is_some_and(|p| !ended.contains(&p))
            && c["time_ms"].as_u64().is_some_and(|t| t + ms <= now)
    })
}

fn hostname() -> String {
    let out = Command::new("hostname").output().expect("run hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A pid that is certainly gone: a child that has been reaped.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn concurrent_up_on_one_stack_second_exits_3_and_nothing_runs_twice() {
    let mut ws = chain_workspace();
    ws.set_env("FAKE_PULUMI_DELAY_MS_NETWORK", "4000");
    let first = bg(&ws, &["up"]);
    let pid = first.pid();
    wait_until(
        "the first strata to hold the lock and run pulumi",
        Duration::from_secs(60),
        || ws.exists(".strata/dev/lock") && up_running_for(&ws, 300),
    );
    let lock: Value = serde_json::from_str(&ws.read(".strata/dev/lock")).expect("the lock is JSON");
    assert_eq!(lock["pid"], pid, "{lock}");

    let second = ws.strata(&["up"]);
    assert_eq!(second.code, 3, "{second:?}");
    // It did not wait for the first: that one still holds the lock and runs.
    let still: Value = serde_json::from_str(&ws.read(".strata/dev/lock")).expect("lock");
    assert_eq!(still["pid"], pid, "the first strata still holds the lock");
    let msg = second.all();
    assert!(msg.contains(&pid.to_string()), "names the pid: {msg}");
    assert!(msg.contains(&hostname()), "names the host: {msg}");
    assert!(msg.contains("strata up"), "names the command: {msg}");
    assert!(
        msg.contains(lock["since"].as_str().unwrap()),
        "says since when: {msg}"
    );
    // The holder's lock is untouched.
    assert!(ws.exists(".strata/dev/lock"));

    let r = first.finish(Duration::from_secs(120));
    assert_eq!(r.code, 0, "{r:?}");
    let ran = ups(&ws, 0);
    let mut names: Vec<&str> = ran.iter().map(|(p, _, _)| p.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        ["frontend", "network", "side", "web"],
        "{}",
        calls_text(&ws)
    );
    assert!(!ws.exists(".strata/dev/lock"));
}

#[test]
fn lock_held_by_a_live_process_is_refused_and_left_alone() {
    let ws = chain_workspace();
    let holder = json!({
        "pid": std::process::id(),
        "host": hostname(),
        "command": "strata destroy",
        "since": "2024-05-06T07:08:09Z",
    })
    .to_string();
    ws.write(".strata/dev/lock", &holder);
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 3, "{r:?}");
    let msg = r.all();
    assert!(msg.contains(&std::process::id().to_string()), "{msg}");
    assert!(msg.contains("strata destroy"), "{msg}");
    assert!(msg.contains("2024-05-06T07:08:09Z"), "{msg}");
    assert_eq!(
        ws.read(".strata/dev/lock"),
        holder,
        "someone else's lock is not touched"
    );
    assert!(ws.calls().is_empty(), "nothing ran:\n{}", calls_text(&ws));
}

#[test]
fn stale_lock_of_a_dead_process_is_taken_over_with_a_warning() {
    let ws = chain_workspace();
    let dead = dead_pid();
    ws.write(
        ".strata/dev/lock",
        &json!({
            "pid": dead,
            "host": hostname(),
            "command": "strata up",
            "since": "2020-01-01T00:00:00Z",
        })
        .to_string(),
    );
    let r = ws.strata_ok(&["up"]);
    let warning = r
        .all()
        .lines()
        .find(|l| l.contains("warning") && l.contains(&dead.to_string()))
        .map(String::from);
    assert!(warning.is_some(), "a warning naming the dead owner: {r:?}");
    assert_eq!(up_projects(&ws, 0).len(), 4);
    assert!(!ws.exists(".strata/dev/lock"), "released after the run");
}

#[test]
fn lock_is_released_after_success_failure_and_ctrl_c() {
    let mut ws = chain_workspace();
    // Success.
    ws.strata_ok(&["up"]);
    assert!(!ws.exists(".strata/dev/lock"), "after success");

    // A project fails.
    ws.set_env("FAKE_PULUMI_FAIL_WEB", "up");
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(!ws.exists(".strata/dev/lock"), "after a failure");
    ws.env.retain(|(k, _)| k != "FAKE_PULUMI_FAIL_WEB");

    // Ctrl-C while Pulumi runs.
    ws.set_env("FAKE_PULUMI_DELAY_MS_NETWORK", "8000");
    let since = ws.calls().len();
    let run = bg(&ws, &["up"]);
    wait_until("pulumi up to be running", Duration::from_secs(60), || {
        ws.exists(".strata/dev/lock") && up_running_for(&ws, 500) && ws.calls().len() > since
    });
    let st = Command::new("kill")
        .args(["-INT", &run.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let r = run.finish(Duration::from_secs(90));
    assert_eq!(r.code, 130, "{r:?}");
    assert!(!ws.exists(".strata/dev/lock"), "after Ctrl-C: {r:?}");
    // Pulumi got exactly one SIGINT and cancelled gracefully.
    let net = ends(&ws, since)
        .into_iter()
        .find(|c| c["command"] == "up" && c["project"] == "network" && c["exit_code"] != 6)
        .unwrap_or_else(|| panic!("{}", calls_text(&ws)));
    assert_eq!(net["signals"], json!(["SIGINT"]), "{net}");
    assert_eq!(net["exit_code"], 8, "{net}");

    // The interrupted run can be resumed: what was cancelled or not reached runs again.
    ws.env.retain(|(k, _)| k != "FAKE_PULUMI_DELAY_MS_NETWORK");
    let since = ws.calls().len();
    ws.strata_ok(&["up", "--resume"]);
    assert_eq!(up_projects(&ws, since).len(), 4, "{}", calls_text(&ws));
    assert!(!ws.exists(".strata/dev/lock"));
}

#[test]
fn lock_is_released_when_the_run_stops_with_a_configuration_error() {
    // A profile secret that is missing in a non-interactive run: exit 3, after the lock.
    let mut ws = workspace(
        "secrets:\n  - key: lab:token\n    prompt: Token\ninfrastructure:\n  - path: base/network\n",
    );
    ws.set_env("STRATA_PASSPHRASE", "store passphrase");
    ws.pulumi_project("base/network", "network", NETWORK);
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.all().contains("lab:token"), "{r:?}");
    assert!(!ws.exists(".strata/dev/lock"), "the lock outlived the run");
    assert!(up_projects(&ws, 0).is_empty());
}

#[test]
fn json_stdout_holds_only_the_documented_events_even_with_a_warning() {
    let ws = chain_workspace();
    let host = String::from_utf8(Command::new("hostname").output().unwrap().stdout).unwrap();
    ws.write(
        ".strata/dev/lock",
        &json!({"pid": 999_999_999u64, "host": host.trim(), "command": "strata up", "since": "2020-01-01T00:00:00Z"})
            .to_string(),
    );
    let r = ws.strata_ok(&["up", "--output", "json"]);
    let documented = [
        "run_started",
        "project_started",
        "project_output",
        "project_finished",
        "hook_finished",
        "run_finished",
    ];
    for e in r.events() {
        let name = e["event"].as_str().unwrap_or("");
        assert!(
            documented.contains(&name),
            "undocumented event on stdout: {e}"
        );
    }
    assert!(
        r.stderr.contains("taking over"),
        "the warning goes to stderr: {r:?}"
    );
}
