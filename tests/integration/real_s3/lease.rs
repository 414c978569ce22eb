//! The stack's lease in the object store, played by two "machines": two checkouts with
//! their own HOME and `.strata/`, a test hostname each (`STRATA_TEST_HOSTNAME`) and a
//! short lease (`STRATA_TEST_LEASE_TTL_MS`), one backend on the real server. Each test
//! has a bucket of its own; the projects are slow command projects (no Pulumi needed:
//! the lease is strata's), which say in a shared log when they start and end.

use std::path::Path;
use std::process::Child;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Server, assert_ended, server};
use crate::support::*;

pub(super) const STACK: &str = "prod";

/// One checkout of the environment, on "machine" `host`, with the backend `url`.
fn machine(s: &Server, url: &str, host: &str, ttl_ms: u64, shared: &Path) -> Ws {
    machine_of(s, url, host, ttl_ms, shared, &["slow"])
}

/// [`machine`] with the slow projects `paths` (none needs another).
fn machine_of(s: &Server, url: &str, host: &str, ttl_ms: u64, shared: &Path, paths: &[&str]) -> Ws {
    let ws = checkout(s, url, host, ttl_ms, shared);
    let entries: String = paths
        .iter()
        .map(|p| format!("  - path: {p}\n    needs: []\n"))
        .collect();
    ws.profile("t", &format!("{HEAD}infrastructure:\n{entries}"));
    // Starts (its pid, which is its process group, in pid-HOST), then runs until the
    // test writes release-HOST (60 s at most).
    let up = r#"h=$STRATA_TEST_HOSTNAME; d=$LEASE_SHARED
echo "start $h" >> "$d/log"; echo $$ > "$d/pid-$h"
i=0; while [ ! -e "$d/release-$h" ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done
echo "end $h" >> "$d/log"; printf '{}' > "$STRATA_OUTPUTS_FILE""#;
    for p in paths {
        ws.command_project(p, up, "true");
    }
    ws
}

/// The first holder of a lease object (`Null` when free or absent).
fn first_holder(lease: &serde_json::Value) -> serde_json::Value {
    lease["holders"][0].clone()
}

/// One checkout of the environment, with its own HOME and `.strata/`, on "machine" `host`
/// (`STRATA_TEST_HOSTNAME`), with the backend `url` and the shared folder `shared` (in
/// `LEASE_SHARED`): no profile yet.
pub(super) fn checkout(s: &Server, url: &str, host: &str, ttl_ms: u64, shared: &Path) -> Ws {
    let mut ws = Ws::new();
    ws.set_env("PULUMI_BACKEND_URL", url)
        .set_env("AWS_ACCESS_KEY_ID", s.var("AWS_ACCESS_KEY_ID"))
        .set_env("AWS_SECRET_ACCESS_KEY", s.var("AWS_SECRET_ACCESS_KEY"))
        .set_env("AWS_REGION", s.var("AWS_REGION"))
        .set_env("USER", "tester")
        .set_env("STRATA_TEST_HOSTNAME", host)
        .set_env("STRATA_TEST_LEASE_TTL_MS", &ttl_ms.to_string())
        .set_env("LEASE_SHARED", shared.to_str().unwrap());
    ws
}

fn up_args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut a = vec!["up", "--provider", "t", "--stack", STACK];
    a.extend(extra);
    a
}

/// The backend URL of the server's bucket under the test's own path prefix `prefix`
/// (where Pulumi's `.pulumi/` would be). One bucket for all: the server makes room for
/// only a few buckets (volumes), and a new one may refuse writes for a while.
pub(super) fn url(s: &Server, prefix: &str) -> String {
    let bucket = s.var("BUCKET");
    s.backend_url(bucket).replacen(
        &format!("s3://{bucket}?"),
        &format!("s3://{bucket}/{prefix}?"),
        1,
    )
}

/// The shared server, the machines' shared folder, and the backend URL under the test's
/// own `prefix`; `None` when skipped.
pub(super) fn on_prefix(test: &str, prefix: &str) -> Option<(Arc<Server>, Shared, String)> {
    let s = server(test)?;
    let url = url(&s, prefix);
    Some((s, Shared::new(), url))
}

/// A server of the test's own (to stop or pause), the machines' shared folder, and the
/// backend URL under `prefix`; `None` when skipped.
fn own_server(test: &str, prefix: &str) -> Option<(Server, Shared, String)> {
    let s = Server::start(&super::real_bin_dir(test)?);
    let url = url(&s, prefix);
    Some((s, Shared::new(), url))
}

/// The lease object under `prefix` as JSON (`Null` when there is none).
fn lease(s: &Server, prefix: &str) -> serde_json::Value {
    let a = s.request(
        "GET",
        &format!("/{}/{prefix}/.strata/locks/{STACK}.json", s.var("BUCKET")),
        &[],
        None,
    );
    match a.code {
        200 => serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{e}: {a:?}")),
        _ => serde_json::Value::Null,
    }
}

/// The shared server, and machines host-a and host-b on the backend under `prefix`, with
/// leases of `ttl_ms`; `None` when skipped.
fn two_machines(test: &str, prefix: &str, ttl_ms: u64) -> Option<(Arc<Server>, Shared, Ws, Ws)> {
    let (s, shared, url) = on_prefix(test, prefix)?;
    let a = machine(&s, &url, "host-a", ttl_ms, shared.path());
    let b = machine(&s, &url, "host-b", ttl_ms, shared.path());
    Some((s, shared, a, b))
}

/// Waits (bounded) until `path` exists.
pub(super) fn wait_for(path: &Path, what: &str) {
    let t0 = Instant::now();
    while !path.exists() {
        assert!(t0.elapsed() < Duration::from_secs(60), "{what} never came");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for a spawned strata (bounded), as a [`Run`].
pub(super) fn finish(child: Child, what: &str) -> Run {
    finish_within(child, what, Duration::from_secs(90))
}

/// Waits for a spawned strata up to `bound`, as a [`Run`]; killed beyond it.
pub(super) fn finish_within(child: Child, what: &str, bound: Duration) -> Run {
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = match rx.recv_timeout(bound) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            // SAFETY: kill of a child this test started.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            panic!("{what} did not finish within {bound:?}");
        }
    };
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The folder the "machines" of a test share (their log, pid and release files).
/// Dropped, a failed assertion's unwinding too, it kills whatever still runs with it in
/// its environment: the test's strata processes and their projects.
pub(super) struct Shared(tempfile::TempDir);

impl Shared {
    pub(super) fn new() -> Shared {
        Shared(tempfile::tempdir().unwrap())
    }

    pub(super) fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let mark = format!("LEASE_SHARED={}", self.path().display()).into_bytes();
        let procs = std::fs::read_dir("/proc").into_iter().flatten().flatten();
        for p in procs {
            let Some(pid) = p.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
                continue;
            };
            let environ = std::fs::read(p.path().join("environ")).unwrap_or_default();
            if environ.split(|b| *b == 0).any(|v| v == mark.as_slice()) {
                // SAFETY: kill of a process this test started (its environment says so).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// Kills the command project of `host` (its own process group), if it runs.
fn kill_project(shared: &Path, host: &str) {
    let pid = std::fs::read_to_string(shared.join(format!("pid-{host}"))).unwrap_or_default();
    if let Ok(pgid) = pid.trim().parse::<i32>() {
        // SAFETY: kill of a process group this test's strata started.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
}

pub(super) fn log(shared: &Path) -> Vec<String> {
    std::fs::read_to_string(shared.join("log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// Both `up` at once: exactly one runs, the other refuses at once naming the first (its
/// host, user, run and how to free it); with `--lock-timeout` the other waits and runs
/// after it, never beside it; the lease is released at the end.
#[test]
fn two_checkouts_one_backend_one_run_at_a_time() {
    let Some((s, shared, a, b)) = two_machines("real_s3::lease_two", "lease-two", 2000) else {
        return;
    };
    let run_a = a.spawn(&up_args(&[]));
    wait_for(&shared.path().join("pid-host-a"), "host-a's project");
    let holder = first_holder(&lease(&s, "lease-two"));
    assert_eq!(holder["host"], "host-a", "{holder}");
    let refused = b.strata(&up_args(&[]));
    let run_id = holder["run_id"].as_str().unwrap();
    let why = [
        "stack `prod` is in use",
        "by tester on host-a",
        run_id,
        "strata/lease-two?",
        "strata unlock -s prod",
    ];
    assert_ended(&refused, 3, &why, "host-b");
    let run_b = b.spawn(&up_args(&["--lock-timeout", "60s"]));
    // B waits while A runs (A renews its lease every ~0.7 s: never taken over).
    std::thread::sleep(Duration::from_millis(4000));
    assert!(
        !shared.path().join("pid-host-b").exists(),
        "{:?}",
        log(shared.path())
    );
    std::fs::write(shared.path().join("release-host-a"), "").unwrap();
    std::fs::write(shared.path().join("release-host-b"), "").unwrap();
    let ra = finish(run_a, "host-a's up");
    let rb = finish(run_b, "host-b's up");
    assert_eq!((ra.code, rb.code), (0, 0), "{ra:?}\n{rb:?}");
    assert!(!rb.all().contains("took over"), "{rb:?}");
    assert_eq!(
        log(shared.path()),
        ["start host-a", "end host-a", "start host-b", "end host-b"]
    );
    let after = lease(&s, "lease-two");
    assert_eq!(after["holders"], serde_json::json!([]), "released: {after}");
}

/// Issue 44: two machines on disjoint projects of one stack (what two jobs of a wave
/// do) run at once; a third wanting a project one of them holds is refused naming the
/// holder and the project both want; each release frees only its own part.
#[test]
fn runs_on_disjoint_projects_go_at_once_and_an_overlapping_one_is_refused() {
    let Some((s, shared, url)) = on_prefix("real_s3::lease_disjoint", "lease-disjoint") else {
        return;
    };
    let paths = ["net", "app"];
    let a = machine_of(&s, &url, "host-a", 2000, shared.path(), &paths);
    let b = machine_of(&s, &url, "host-b", 2000, shared.path(), &paths);
    let c = machine_of(&s, &url, "host-c", 2000, shared.path(), &paths);
    let run_a = a.spawn(&up_args(&["--project", "net"]));
    wait_for(&shared.path().join("pid-host-a"), "host-a's net");
    let run_b = b.spawn(&up_args(&["--project", "app"]));
    wait_for(
        &shared.path().join("pid-host-b"),
        "host-b's app, beside host-a's net",
    );
    let held = lease(&s, "lease-disjoint");
    assert_eq!(held["holders"].as_array().map(Vec::len), Some(2), "{held}");
    let refused = c.strata(&up_args(&["--project", "app"]));
    assert_ended(
        &refused,
        3,
        &["stack `prod` is in use", "host-b", "this run wants app too"],
        "host-c",
    );
    let status = c.strata(&["status", "--provider", "t", "--stack", STACK]);
    assert!(
        status.stdout.contains("for net") && status.stdout.contains("for app"),
        "status shows who holds what: {status:?}"
    );
    std::fs::write(shared.path().join("release-host-a"), "").unwrap();
    let ra = finish(run_a, "host-a's up");
    assert_eq!(ra.code, 0, "{ra:?}");
    let held = lease(&s, "lease-disjoint");
    assert_eq!(
        first_holder(&held)["host"],
        "host-b",
        "only a's part went: {held}"
    );
    std::fs::write(shared.path().join("release-host-b"), "").unwrap();
    let rb = finish(run_b, "host-b's up");
    assert_eq!(rb.code, 0, "{rb:?}");
    let log = log(shared.path());
    assert_eq!(
        &log[..2],
        ["start host-a", "start host-b"],
        "both ran at once: {log:?}"
    );
}

/// Two processes race for a free lease (first absent, then released), round after
/// round, each from its own checkout: exactly one runs, the other is refused.
#[test]
fn two_processes_racing_for_a_free_lease_never_both_win() {
    let Some((s, shared, url)) = on_prefix("real_s3::lease_race", "lease-race") else {
        return;
    };
    let hosts = ["host-x", "host-y"];
    let ws: Vec<Ws> = hosts
        .iter()
        .map(|h| machine(&s, &url, h, 5000, shared.path()))
        .collect();
    const ROUNDS: usize = 30;
    let mut wins = [0usize; 2];
    for round in 0..ROUNDS {
        for f in [
            "log",
            "pid-host-x",
            "pid-host-y",
            "release-host-x",
            "release-host-y",
        ] {
            let _ = std::fs::remove_file(shared.path().join(f));
        }
        let mut racers: Vec<Option<Child>> =
            ws.iter().map(|w| Some(w.spawn(&up_args(&[])))).collect();
        // The loser exits first (refused); the winner runs until released.
        let t0 = Instant::now();
        let loser = loop {
            if let Some(i) = (0..2).find(|i| {
                racers[*i]
                    .as_mut()
                    .is_some_and(|c| c.try_wait().ok().flatten().is_some())
            }) {
                break i;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "round {round}: neither was refused: {:?}",
                log(shared.path())
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let winner = 1 - loser;
        let lost = finish(racers[loser].take().unwrap(), "the loser");
        assert_eq!(lost.code, 3, "round {round}: {lost:?}");
        assert!(
            lost.stderr.contains(&format!("on {}", hosts[winner])),
            "round {round}: {lost:?}"
        );
        std::fs::write(shared.path().join(format!("release-{}", hosts[winner])), "").unwrap();
        let won = finish(racers[winner].take().unwrap(), "the winner");
        assert_eq!(won.code, 0, "round {round}: {won:?}");
        assert_eq!(
            log(shared.path()),
            [
                format!("start {}", hosts[winner]),
                format!("end {}", hosts[winner])
            ],
            "round {round}"
        );
        wins[winner] += 1;
    }
    eprintln!("real_s3::lease_race: {ROUNDS} rounds, wins {wins:?}");
}

/// Starts `host`'s `up` and waits until its project runs (it holds the lease), then kills
/// strata with SIGKILL, and its project.
fn killed_holder(w: &Ws, shared: &Path, host: &str) {
    let mut child = w.spawn(&up_args(&[]));
    wait_for(&shared.join(format!("pid-{host}")), "the holder's project");
    child.kill().unwrap();
    child.wait().unwrap();
    kill_project(shared, host);
}

/// A holder killed with `kill -9` renews nothing: the other machine is refused while
/// the lease is young, and takes it over only after seeing it unchanged for a whole TTL
/// on its own clock, with a warning naming the dead holder.
#[test]
fn a_killed_holder_is_taken_over_after_its_ttl_and_not_before() {
    let Some((_s, shared, a, b)) = two_machines("real_s3::lease_kill", "lease-kill", 3000) else {
        return;
    };
    let ttl = Duration::from_millis(3000);
    killed_holder(&a, shared.path(), "host-a");
    let refused = b.strata(&up_args(&[]));
    assert_ended(&refused, 3, &["on host-a"], "host-b");
    // Shorter than the TTL: still refused.
    let short = b.strata(&up_args(&["--lock-timeout", "1s"]));
    assert_eq!(short.code, 3, "{short:?}");
    std::fs::write(shared.path().join("release-host-b"), "").unwrap();
    let t0 = Instant::now();
    let took = b.strata(&up_args(&["--lock-timeout", "30s"]));
    let waited = t0.elapsed();
    assert_eq!(took.code, 0, "{took:?}");
    assert!(
        waited >= ttl,
        "took over after {waited:?}, before the TTL {ttl:?}"
    );
    assert!(
        took.all().contains("took over the lease of stack `prod`"),
        "{took:?}"
    );
    assert!(took.all().contains("on host-a"), "{took:?}");
    assert_eq!(
        log(shared.path()),
        ["start host-a", "start host-b", "end host-b"]
    );
}

/// `unlock` shows the holder a killed strata left and frees its lease once confirmed:
/// without a terminal it refuses unless `--yes`, naming it. On a file backend there is
/// no lease to free. Freeing a live holder's lease cancels its run at its next renewal.
#[test]
fn unlock_frees_a_killed_holders_lease_with_yes_only() {
    let Some((s, shared, a, b)) = two_machines("real_s3::lease_unlock", "lease-unlock", 6000)
    else {
        return;
    };
    killed_holder(&a, shared.path(), "host-a");
    let unlock = ["unlock", "--stack", STACK];
    let asked = b.strata(&unlock);
    assert_ended(&asked, 2, &["on host-a", "--yes"], "unlock without --yes");
    assert_eq!(first_holder(&lease(&s, "lease-unlock"))["host"], "host-a");
    let freed = b.strata(&["unlock", "--stack", STACK, "--yes"]);
    assert_eq!(freed.code, 0, "{freed:?}");
    assert_eq!(lease(&s, "lease-unlock")["holders"], serde_json::json!([]));
    // Taken at once now (the dead holder's lease, unfreed, would refuse it).
    let run_b = b.spawn(&up_args(&[]));
    wait_for(&shared.path().join("pid-host-b"), "host-b's project");
    // Freed under a live run: that run is cancelled at its next renewal (TTL/3).
    let freed = a.strata(&["unlock", "--stack", STACK, "--yes"]);
    assert_eq!(freed.code, 0, "{freed:?}");
    let cancelled = finish(run_b, "host-b's up");
    assert_ended(&cancelled, 143, &["was taken by `strata unlock`"], "host-b");
    kill_project(shared.path(), "host-b");

    let local = Ws::new();
    let r = local.strata(&["unlock", "--stack", STACK]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("nothing to free"), "{r:?}");
}

/// The server stops under a running holder: its renewals fail, and within its TTL it
/// cancels its run, saying why. A run started then fails within a bounded time with an
/// error naming the backend, and starts nothing.
#[test]
fn an_unreachable_backend_cancels_the_holder_and_refuses_a_new_run() {
    // A server of its own, which this test stops.
    let Some((s, shared, url)) = own_server("real_s3::lease_down", "lease-down") else {
        return;
    };
    let a = machine(&s, &url, "host-a", 2000, shared.path());
    let run_a = a.spawn(&up_args(&[]));
    wait_for(&shared.path().join("pid-host-a"), "host-a's project");
    let t0 = Instant::now();
    drop(s);
    let cancelled = finish(run_a, "host-a's up");
    kill_project(shared.path(), "host-a");
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    assert_ended(&cancelled, 143, &["could not be renewed"], "host-a");
    let t1 = Instant::now();
    let r = a.strata(&up_args(&[]));
    assert!(t1.elapsed() < Duration::from_secs(30), "{:?}", t1.elapsed());
    let why = [
        "s3://strata/lease-down?endpoint=http://127.0.0.1:",
        "Nothing was started",
    ];
    assert_ended(&r, 1, &why, "a run on the stopped server");
    assert_eq!(log(shared.path()), ["start host-a"], "nothing else ran");
}

/// The server stops answering under a running holder for longer than its lease (its
/// renewals fail: the run is cancelled), then answers again while the cancelled run is
/// still ending (its project takes its time to stop): the run releases its lease as it
/// ends, so nobody has to wait out its TTL or `unlock` it.
#[test]
fn a_holder_cancelled_by_an_outage_releases_its_lease_once_the_backend_answers() {
    // A server of its own, which this test pauses.
    let Some((s, shared, url)) = own_server("real_s3::lease_outage", "lease-outage") else {
        return;
    };
    let a = checkout(&s, &url, "host-a", 2000, shared.path());
    a.profile("t", &format!("{HEAD}infrastructure:\n  - path: stubborn\n"));
    // Ignores the cancel's SIGTERM, and ends when the test writes release-host-a.
    let up = r#"trap '' TERM; d=$LEASE_SHARED; echo $$ > "$d/pid-host-a"
i=0; while [ ! -e "$d/release-host-a" ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done
printf '{}' > "$STRATA_OUTPUTS_FILE""#;
    a.command_project("stubborn", up, "true");
    let run = a.spawn(&up_args(&[]));
    wait_for(&shared.path().join("pid-host-a"), "host-a's project");
    {
        let _paused = super::Paused::new(&s);
        // Renewals hang (10 s per call) and fail: lost after one call's bound.
        std::thread::sleep(Duration::from_secs(14));
    }
    std::thread::sleep(Duration::from_secs(1));
    std::fs::write(shared.path().join("release-host-a"), "").unwrap();
    let cancelled = finish(run, "host-a's up");
    assert_ended(&cancelled, 143, &["could not be renewed"], "host-a");
    let after = lease(&s, "lease-outage");
    assert_eq!(
        after["holders"],
        serde_json::json!([]),
        "released once the backend answered: {after}\n{cancelled:?}"
    );
}

/// Issue 44: a run is `running` until it ends, seen from any machine: while host-a's
/// `up` runs, host-b's `history` lists it first as running (its record is written only
/// as it ends), then as succeeded once it has.
#[test]
fn history_on_another_machine_shows_a_running_run_as_running() {
    let Some((s, shared, a, b)) = two_machines("real_s3::lease_history", "lease-history", 2000)
    else {
        return;
    };
    let run_a = a.spawn(&up_args(&[]));
    wait_for(&shared.path().join("pid-host-a"), "host-a's project");
    let h = b.strata(&["history", "--stack", STACK, "--output", "json"]);
    assert_eq!(h.code, 0, "{h:?}");
    let doc = h.json();
    assert_eq!(doc["runs"][0]["status"], "running", "{doc}");
    assert_eq!(doc["runs"][0]["host"], "host-a", "{doc}");
    std::fs::write(shared.path().join("release-host-a"), "").unwrap();
    let ra = finish(run_a, "host-a's up");
    assert_eq!(ra.code, 0, "{ra:?}");
    let doc = b
        .strata(&["history", "--stack", STACK, "--output", "json"])
        .json();
    assert_eq!(doc["runs"][0]["status"], "succeeded", "{doc}");
    drop(s);
}
