//! Ctrl-C, SIGTERM and SIGHUP: one SIGINT to each running child and nothing new
//! started; a second Ctrl-C, or the grace period, kills; no pulumi process survives;
//! the hint says how to continue.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{
    Background, args, hook_key, names, ok, records, s, sigint, sigints_of, starts, starts_of,
    wait_for, workspace,
};
use crate::support::*;

/// alpha, bravo, charlie (slow, independent); echo independent but beyond -j 3;
/// delta needs the three.
const CTRL_C: &str = "  - path: alpha\n    needs: []\n  - path: bravo\n    needs: []\n  - path: charlie\n    needs: []\n  - path: echo\n    needs: []\n  - path: delta\n    needs: [alpha, bravo, charlie]\n";
const CTRL_C_PATHS: &[&str] = &["alpha", "bravo", "charlie", "echo", "delta"];
const SLOW: &[&str] = &["alpha", "bravo", "charlie"];

/// Whether `pid` is a live (not zombie) fake pulumi process.
fn alive(pid: u64) -> bool {
    let signalable = Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !signalable {
        return false;
    }
    // A zombie has not survived; a reused pid is not our child.
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("");
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    state != "Z" && String::from_utf8_lossy(&cmdline).contains("pulumi")
}

/// Pids of `up` processes of the given projects that have started and not ended.
fn running_ups(calls: &[Value], paths: &[&str]) -> BTreeMap<String, u64> {
    let ended: BTreeSet<u64> = records(calls, "end")
        .into_iter()
        .filter_map(|c| c["pid"].as_u64())
        .collect();
    let wanted = names(paths);
    starts(calls)
        .into_iter()
        .filter(|c| s(c, "command") == "up" && wanted.contains(s(c, "project")))
        .filter_map(|c| {
            let pid = c["pid"].as_u64()?;
            (!ended.contains(&pid)).then(|| (s(c, "project").to_string(), pid))
        })
        .collect()
}

fn ctrl_c_workspace() -> Ws {
    let mut ws = workspace(CTRL_C, CTRL_C_PATHS);
    for p in SLOW {
        ws.set_env(&format!("FAKE_PULUMI_DELAY_MS_{}", hook_key(p)), "15000");
    }
    ws
}

/// Starts `strata up -j 3` and waits until the three slow `up`s are running.
fn start_slow_up(ws: &Ws, extra: &[&str]) -> (Background, BTreeMap<String, u64>) {
    let mut a = args("up", &["-j", "3"]);
    a.extend_from_slice(extra);
    let bg = Background::start(ws, &a);
    // On a file backend strata creates a missing stack before its first `up`, so the
    // first `up` of each project is the operation itself; the fake logs its start after
    // its signal handlers are installed, so a logged, unfinished `up` can take a SIGINT.
    let mut running = BTreeMap::new();
    wait_for(
        Duration::from_secs(60),
        "the three slow fakes to start",
        || {
            running = running_ups(&ws.calls(), SLOW);
            running.len() == SLOW.len()
        },
    );
    (bg, running)
}

/// A slow `up` ([`start_slow_up`]) stopped by one Ctrl-C within `limit`: its run, which
/// exits 130, and the children that were running when the Ctrl-C came.
fn ctrl_c_slow_up(ws: &Ws, extra: &[&str], limit: Duration) -> (Run, BTreeMap<String, u64>) {
    let (bg, running) = start_slow_up(ws, extra);
    sigint(bg.pid);
    let r = bg.wait(limit);
    r.expect_code(130);
    (r, running)
}

/// Each of the `running` children got exactly one SIGINT (`why`: what that means here).
fn assert_one_sigint_each(calls: &[Value], running: &BTreeMap<String, u64>, why: &str) {
    for (project, pid) in running {
        let got = sigints_of(calls, *pid);
        assert_eq!(got, 1, "{project} (pid {pid}): {why}\n{calls:#?}");
    }
}

fn assert_nothing_survives(ws: &Ws) {
    let calls = ws.calls();
    let pids: BTreeSet<u64> = starts(&calls)
        .into_iter()
        .filter_map(|c| c["pid"].as_u64())
        .collect();
    assert!(!pids.is_empty());
    // Give the kernel a moment to finish tearing down killed processes.
    let t0 = Instant::now();
    let mut survivors: Vec<u64> = pids.iter().copied().filter(|p| alive(*p)).collect();
    while !survivors.is_empty() && t0.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(100));
        survivors.retain(|p| alive(*p));
    }
    assert!(
        survivors.is_empty(),
        "pulumi processes survived strata: {survivors:?}"
    );
}

#[test]
fn ctrl_c_forwards_one_sigint_to_each_running_child_and_exits_130() {
    let ws = ctrl_c_workspace();
    let (_, running) = ctrl_c_slow_up(&ws, &[], Duration::from_secs(90));
    let calls = ws.calls();
    assert_one_sigint_each(&calls, &running, "must receive exactly one SIGINT");
    for (project, pid) in &running {
        let end = records(&calls, "end")
            .into_iter()
            .find(|c| c["pid"].as_u64() == Some(*pid))
            .unwrap_or_else(|| panic!("{project} did not end gracefully (no end record)"));
        assert_eq!(
            end["exit_code"], 8,
            "{project} cancelled gracefully (pulumi exit 8): {end}"
        );
    }
    for p in ["echo", "delta"] {
        assert!(
            starts_of(&calls, p).is_empty(),
            "{p} had not started and must never start after Ctrl-C: {calls:#?}"
        );
    }
    assert_nothing_survives(&ws);
}

/// Ctrl-C during `up --plan`: the way to continue is the same bundle, never an
/// unreviewed `up --resume`.
#[test]
fn ctrl_c_during_up_plan_says_to_continue_with_the_same_bundle() {
    let mut ws = workspace(CTRL_C, CTRL_C_PATHS);
    ok(&ws, "up", &[]);
    ok(&ws, "preview", &["--save-plan", "reviewed"]);
    for p in SLOW {
        ws.set_env(&format!("FAKE_PULUMI_DELAY_MS_{}", hook_key(p)), "15000");
    }
    let (r, _) = ctrl_c_slow_up(&ws, &["--plan", "reviewed"], Duration::from_secs(90));
    r.expect_stderr(&["To continue: strata up --plan ", "reviewed"]);
    assert!(!r.stderr.contains("--resume"), "{r:?}");
    assert!(!ws.exists("reviewed/applied.json"));
}

#[test]
fn a_second_ctrl_c_kills_the_children_and_mentions_pulumi_cancel() {
    let mut ws = ctrl_c_workspace();
    ws.set_env("FAKE_PULUMI_CANCEL_MS", "60000");
    let (bg, running) = start_slow_up(&ws, &[]);
    sigint(bg.pid);
    wait_for(
        Duration::from_secs(30),
        "each running fake to record the first SIGINT",
        || {
            let calls = ws.calls();
            running.values().all(|pid| sigints_of(&calls, *pid) >= 1)
        },
    );
    std::thread::sleep(Duration::from_millis(200));
    sigint(bg.pid);
    let r = bg.wait(Duration::from_secs(60));
    assert_eq!(r.code, 130, "{r:?}");
    assert!(
        r.all().contains("pulumi cancel"),
        "after killing, strata says which stacks may need `pulumi cancel`: {r:?}"
    );
    let calls = ws.calls();
    let why = "strata forwards one SIGINT, then kills (never a second SIGINT)";
    assert_one_sigint_each(&calls, &running, why);
    for (project, pid) in &running {
        assert!(
            !records(&calls, "end")
                .into_iter()
                .any(|c| c["pid"].as_u64() == Some(*pid)),
            "{project} was still cancelling (FAKE_PULUMI_CANCEL_MS) and must have been killed"
        );
    }
    for p in ["echo", "delta"] {
        assert!(starts_of(&calls, p).is_empty(), "{p} started: {calls:#?}");
    }
    assert_nothing_survives(&ws);
}

/// SIGTERM and SIGHUP (a closed terminal, a dropped SSH session) take Ctrl-C's graceful
/// path: one SIGINT per child, nothing new started, the lock released; exit 128+n.
#[test]
fn sigterm_is_handled_like_ctrl_c() {
    graceful_on("TERM", 143);
}

#[test]
fn sighup_is_handled_like_ctrl_c() {
    graceful_on("HUP", 129);
}

fn graceful_on(signal: &str, code: i32) {
    let ws = ctrl_c_workspace();
    let (bg, running) = start_slow_up(&ws, &[]);
    send_signal(bg.pid, signal);
    let r = bg.wait(Duration::from_secs(90));
    r.expect_code(code);
    assert!(!ws.exists(".strata/dev/lock"), "the lock is released");
    let calls = ws.calls();
    assert_one_sigint_each(&calls, &running, "one SIGINT");
    for p in ["echo", "delta"] {
        assert!(starts_of(&calls, p).is_empty(), "{p} started: {calls:#?}");
    }
    assert_nothing_survives(&ws);
}

#[test]
fn children_that_ignore_sigint_are_killed_after_the_grace_period() {
    let mut ws = ctrl_c_workspace();
    ws.set_env("FAKE_PULUMI_IGNORE_SIGINT", "1");
    ws.set_env("STRATA_GRACE_SECONDS", "2");
    let (r, running) = ctrl_c_slow_up(&ws, &[], Duration::from_secs(60));
    let why = "one SIGINT, then a kill after the grace period";
    assert_one_sigint_each(&ws.calls(), &running, why);
    assert!(
        r.all().contains("pulumi cancel"),
        "killed stacks may need `pulumi cancel`: {r:?}"
    );
    assert_nothing_survives(&ws);
}

#[test]
fn after_a_graceful_ctrl_c_the_hint_is_resume_not_pulumi_cancel() {
    let ws = ctrl_c_workspace();
    let (r, _) = ctrl_c_slow_up(&ws, &[], Duration::from_secs(90));
    r.expect_stderr(&["--resume"]);
    assert!(!r.stderr.contains("pulumi cancel"), "{r:?}");
}
