//! Signals: a first SIGINT cancels and saves, a second terminates, an ignored one,
//! and the process group the double reports.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdout};
use std::time::{Duration, Instant};

use crate::support::*;

/// Reads the child's stdout until a line contains `needle`.
fn wait_for(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    needle: &str,
) -> Vec<String> {
    let mut seen = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        let hit = l.contains(needle);
        seen.push(l);
        if hit {
            return seen;
        }
    }
    panic!("never saw {needle}: {seen:?}");
}

fn sigint(child: &Child) {
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
}

/// The child's stdout, line by line.
type Lines = std::io::Lines<BufReader<ChildStdout>>;

/// Starts `up --json` on a new `vpc` stack with `env` and sends it SIGINT once its first
/// resource is in flight.
fn sigint_mid_update(ws: &Ws, env: &[(&str, &str)]) -> (Child, Lines) {
    ws.ok("vpc", &["stack", "init"]);
    let mut child = ws.spawn("vpc", &["up", "--yes", "--skip-preview", "--json"], env);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    wait_for(&mut lines, "fake:index:Vpc::net");
    sigint(&child);
    (child, lines)
}

#[test]
fn first_sigint_cancels_and_saves() {
    let ws = Ws::new("sigint1");
    let (mut child, mut lines) = sigint_mid_update(&ws, &[("FAKE_PULUMI_DELAY_MS_VPC", "30000")]);
    let sent = Instant::now();
    let rest = wait_for(&mut lines, "cancelEvent");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(8));
    // Noticed at once: the step in flight completes without waiting out its 10 s (a
    // bound far from both, so a loaded machine cannot break it).
    assert!(
        sent.elapsed() < Duration::from_secs(8),
        "{:?}",
        sent.elapsed()
    );
    assert!(rest.iter().any(|l| l.contains("^C received; cancelling")));
    // The resource in flight completed and was saved; the next one never started.
    assert_eq!(resources_in_state(&ws, "vpc"), ["vpc-dev", "net"]);
    let calls = ws.calls();
    assert!(
        calls
            .iter()
            .any(|c| c["event"] == "signal" && c["signal"] == "SIGINT")
    );
    let end = calls.iter().rev().find(|c| c["event"] == "end").unwrap();
    assert_eq!(
        (end["exit_code"].clone(), end["signals"].clone()),
        (json!(8), json!(["SIGINT"]))
    );
    // The lock was released: a new update runs.
    ws.ok("vpc", UP);
    assert_eq!(resources_in_state(&ws, "vpc"), ["vpc-dev", "net", "subnet"]);
}

#[test]
fn second_sigint_terminates_without_saving() {
    let ws = Ws::new("sigint2");
    let (mut child, mut lines) = sigint_mid_update(
        &ws,
        &[
            ("FAKE_PULUMI_DELAY_MS_VPC", "3000"),
            ("FAKE_PULUMI_CANCEL_MS", "5000"),
        ],
    );
    wait_for(&mut lines, "^C received; cancelling");
    std::thread::sleep(Duration::from_millis(100));
    assert!(child.try_wait().unwrap().is_none(), "still cancelling");
    sigint(&child);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(255));
    assert!(resources_in_state(&ws, "vpc").is_empty());
    // Killed mid-update, it left its lock, as Pulumi does; `pulumi cancel` clears it.
    let out = ws.run("vpc", UP, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the stack is currently locked by 1 lock(s)"));
    ws.ok("vpc", &["cancel", "--yes"]);
    ws.ok("vpc", UP);
}

#[test]
fn ignored_first_sigint_then_terminate() {
    let ws = Ws::new("ignore");
    let (mut child, _lines) = sigint_mid_update(
        &ws,
        &[
            ("FAKE_PULUMI_DELAY_MS", "3000"),
            ("FAKE_PULUMI_IGNORE_SIGINT", "1"),
        ],
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first SIGINT was not ignored"
    );
    sigint(&child);
    assert_eq!(child.wait().unwrap().code(), Some(255));
    let signals: Vec<Value> = ws
        .calls()
        .into_iter()
        .filter(|c| c["event"] == "signal")
        .collect();
    assert_eq!(signals.len(), 2);
}

#[test]
fn own_process_group_is_reported() {
    let ws = Ws::new("pgroup");
    let mut c = ws.cmd(&["version"]);
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    assert!(c.status().unwrap().success());
    let start = ws
        .calls()
        .into_iter()
        .find(|c| c["event"] == "start")
        .unwrap();
    assert_eq!(start["own_pgroup"], true);
    assert_eq!(start["pgid"], start["pid"]);
}
