//! The crash test (issue 10): strata is killed with SIGKILL at random points of a run of
//! the shipped `local` profile, then `up --resume` runs. Every round must end with all
//! projects succeeded, and no project may ever run twice at once (an orphaned child of
//! the killed strata and the resumed run's child). `CRASH_ROUNDS` sets the number of
//! rounds (5 here; `scripts/crash-test.sh` runs 50), `CRASH_SEED` the kill points.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::support::*;

/// A copy of this repository's workspace (providers/, projects/) whose command projects
/// record `start`/`end` of every `up` in `$STRATA_ROOT/spans.log`.
fn local_workspace() -> Ws {
    let ws = Ws::new();
    // A write to a dead strata's pipe fails instead of killing the script, so an
    // orphan always records its end. The hooks record their spans too (as
    // `hook:<project>`): a hook of a killed run that still runs must not overlap the
    // resumed run's.
    let hooks = local_profile(
        &ws,
        |up| {
            format!(
                "trap '' PIPE\nspan() {{ echo \"$1 $STRATA_PROJECT $$ $(date +%s%N)\" >> \"$STRATA_ROOT/spans.log\"; }}\nspan start\ntrap 'span end' EXIT\n{up}"
            )
        },
        |path, run| {
            format!(
                "echo \"start hook:{path} $$ $(date +%s%N)\" >> \"$STRATA_ROOT/spans.log\"; {run}; echo \"end hook:{path} $$ $(date +%s%N)\" >> \"$STRATA_ROOT/spans.log\""
            )
        },
    );
    assert!(hooks >= 2, "the local profile's hooks are wrapped: {hooks}");
    ws
}

/// Per project, the [start, end] of every `up` (end `u128::MAX` while running). Lines
/// are `start|end <project> <pid> <ms>`.
fn spans(ws: &Ws) -> BTreeMap<String, Vec<(u128, u128)>> {
    let mut out: BTreeMap<String, Vec<(u128, u128)>> = BTreeMap::new();
    for (key, s, e) in crate::support::spans(&ws.read_opt("spans.log")) {
        assert_eq!(key.len(), 2, "project and pid: {key:?}");
        out.entry(key[0].clone()).or_default().push((s, e));
    }
    out
}

/// Pairs of `up`s of one project that overlapped in time.
fn overlaps(ws: &Ws) -> Vec<String> {
    let mut found = Vec::new();
    for (project, mut v) in spans(ws) {
        v.sort();
        for w in v.windows(2) {
            if w[1].0 < w[0].1 {
                found.push(format!("{project}: {:?} and {:?}", w[0], w[1]));
            }
        }
    }
    found
}

/// The last `up` record of each project in the journal.
fn last_up_status(ws: &Ws) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for l in ws.read_opt(".strata/dev/journal.jsonl").lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(l) else {
            continue;
        };
        if v["record"] == "project" && v["operation"] == "up" {
            out.insert(
                v["project"].as_str().unwrap_or("").to_string(),
                v["status"].as_str().unwrap_or("").to_string(),
            );
        }
    }
    out
}

/// A small deterministic generator for the kill points.
struct Lcg(u64);
impl Lcg {
    fn next_ms(&mut self, max: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % max
    }
}

#[test]
fn kill_9_at_random_points_then_resume_never_runs_a_project_twice_at_once() {
    let rounds: usize = std::env::var("CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let mut rng = Lcg(std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20261124));
    let ws = local_workspace();
    let up = ["up", "--provider", "local", "--stack", "dev"];
    let resume = ["up", "--provider", "local", "--stack", "dev", "--resume"];
    let (mut kills, mut exited_first) = (0, 0);
    for round in 1..=rounds {
        let delay = rng.next_ms(1600);
        let before: BTreeMap<String, usize> =
            spans(&ws).into_iter().map(|(p, v)| (p, v.len())).collect();
        let mut child = ws.spawn(&up);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(delay) {
            if child.try_wait().unwrap().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if child.try_wait().unwrap().is_none() {
            child.kill().unwrap(); // SIGKILL
            kills += 1;
        } else {
            exited_first += 1;
        }
        let _ = child.wait();
        let r = if round == 1 {
            // Two resumes at once: one runs; the other is refused while it holds the lock
            // (or, started after it finished, finds nothing to resume or runs nothing
            // twice). Never both at once, which the overlap check below would see.
            let other = ws.spawn(&resume);
            let mine = ws.strata(&resume);
            let out = other.wait_with_output().unwrap();
            let theirs = Run {
                code: out.status.code().unwrap_or(-1),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            };
            let refused = |r: &Run| {
                r.code == 3
                    && (r.stderr.contains("in use") || r.stderr.contains("nothing to resume"))
            };
            for r in [&mine, &theirs] {
                assert!(r.code == 0 || refused(r), "round {round}: a resume: {r:?}");
            }
            if mine.code == 0 { mine } else { theirs }
        } else {
            ws.strata(&resume)
        };
        let r = if r.code == 3 && r.stderr.contains("nothing to resume") {
            ws.strata(&up) // killed before its first record
        } else {
            r
        };
        assert_eq!(r.code, 0, "round {round} (kill after {delay} ms): {r:?}");
        let after = spans(&ws);
        let projects = after.keys().filter(|p| !p.starts_with("hook:")).count();
        assert_eq!(projects, 6, "every project recorded its spans: {after:?}");
        // Each round runs every project at least once (the first `up` or the resume).
        for (p, v) in after.iter().filter(|(p, _)| !p.starts_with("hook:")) {
            assert!(
                v.len() > before.get(p).copied().unwrap_or(0),
                "round {round}: {p} did not run: {v:?}"
            );
        }
        let last = last_up_status(&ws);
        assert_eq!(last.len(), 6, "round {round}: {last:?}");
        assert!(
            last.values().all(|s| s == "succeeded"),
            "round {round}: {last:?}"
        );
        let found = overlaps(&ws);
        assert!(
            found.is_empty(),
            "round {round}: runs overlapped: {found:?}"
        );
    }
    let all = spans(&ws);
    let hook_runs: usize = all
        .iter()
        .filter(|(p, _)| p.starts_with("hook:"))
        .map(|(_, v)| v.len())
        .sum();
    assert!(
        hook_runs >= rounds,
        "the hooks ran and were counted: {all:?}"
    );
    let ups: usize = all
        .iter()
        .filter(|(p, _)| !p.starts_with("hook:"))
        .map(|(_, v)| v.len())
        .sum();
    println!(
        "crash test: {rounds} rounds, {kills} kills (SIGKILL), {exited_first} runs finished before their kill point, {ups} project runs, {hook_runs} hook runs, two resumes at once in round 1, 0 overlaps"
    );
}
