//! Running plans (issue 4, DESIGN.md §2-3): `up`, `preview`, `refresh`, `destroy`
//! through the real `strata` binary, with the fake `pulumi` first on PATH. Order and
//! parallelism are proven from the start/end times the fake records in its call log,
//! never from wall-clock thresholds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;

// ---------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------
// The fake's call log
// ---------------------------------------------------------------------------------

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
    let eq = format!("{flag}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            argv.get(i + 1).cloned()
        } else {
            a.strip_prefix(&eq).map(str::to_string)
        }
    })
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

// ---------------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------------

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

fn sigints_of(calls: &[Value], pid: u64) -> usize {
    records(calls, "signal")
        .into_iter()
        .filter(|c| c["pid"].as_u64() == Some(pid) && s(c, "signal") == "SIGINT")
        .count()
}

// ---------------------------------------------------------------------------------
// Order and parallelism
// ---------------------------------------------------------------------------------

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
    // Every child's full output goes to .strata/<stack>/logs/<project>/<op>-<time>.log.
    for p in DIAMOND_PATHS {
        let logs = ws.files_under(&format!(".strata/dev/logs/{p}"));
        assert_eq!(logs.len(), 1, "{p}: one log: {logs:?}");
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

// ---------------------------------------------------------------------------------
// The contract with the pulumi CLI
// ---------------------------------------------------------------------------------

#[test]
fn every_pulumi_call_passes_the_required_flags_and_environment() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    ok(&ws, "up", &[]);
    ok(&ws, "preview", &[]);
    ok(&ws, "refresh", &[]);
    ok(&ws, "destroy", &["--yes"]);
    let calls = ws.calls();
    let starts = starts(&calls);
    let commands: BTreeSet<&str> = starts.iter().map(|c| s(c, "command")).collect();
    for c in ["up", "preview", "refresh", "destroy"] {
        assert!(commands.contains(c), "no `{c}` call: {commands:?}");
    }
    let backend = format!("file://{}/.strata/backend", ws.root.display());
    let backend_canon = format!(
        "file://{}/.strata/backend",
        ws.root.canonicalize().unwrap().display()
    );
    let config_dir = ws.path(".strata/dev/config");
    for c in &starts {
        let a = argv(c);
        let cmd = s(c, "command");
        let project = s(c, "project").trim_start_matches("proj-").to_string();
        let cwd = flag_value(&a, "--cwd").unwrap_or_else(|| panic!("no --cwd: {a:?}"));
        assert!(
            Path::new(&cwd).ends_with(format!("projects/{project}")),
            "--cwd {cwd} is not the project dir of {project}: {a:?}"
        );
        assert_eq!(flag_value(&a, "--stack").as_deref(), Some("dev"), "{a:?}");
        assert!(has_flag(&a, "--non-interactive"), "{a:?}");
        assert!(
            !a.iter().any(|x| x == "select"),
            "`stack select` must never be used: {a:?}"
        );
        if ["up", "destroy", "refresh"].contains(&cmd) {
            for f in ["--yes", "--skip-preview", "--json"] {
                assert!(has_flag(&a, f), "`{cmd}` without {f}: {a:?}");
            }
        }
        if ["up", "preview", "refresh", "destroy"].contains(&cmd) {
            let cf = flag_value(&a, "--config-file")
                .unwrap_or_else(|| panic!("`{cmd}` without --config-file: {a:?}"));
            // The project's own copy of the shared stack config.
            assert_eq!(
                Path::new(&cf).parent().and_then(|p| p.canonicalize().ok()),
                config_dir.canonicalize().ok(),
                "`{cmd}` --config-file is not a per-project copy of the stack config: {a:?}"
            );
        }
        assert_eq!(c["own_pgroup"], true, "not in its own process group: {c}");
        assert!(
            ["null", "closed"].contains(&s(c, "stdin")),
            "stdin of a child must be null/closed, was {}: {a:?}",
            s(c, "stdin")
        );
        let env = &c["env"];
        assert_eq!(env["STRATA_STACK"], "dev", "{c}");
        assert_eq!(env["STRATA_PROVIDER"], "t", "{c}");
        assert_eq!(env["STRATA_INFRA_TYPE"], "test", "{c}");
        assert_eq!(env["STRATA_ORG"], "organization", "{c}");
        assert_eq!(env["PULUMI_SKIP_UPDATE_CHECK"], "true", "{c}");
        let url = s(env, "PULUMI_BACKEND_URL");
        assert!(
            url == backend || url == backend_canon,
            "PULUMI_BACKEND_URL {url}, expected {backend}"
        );
    }
}

/// The real CLI writes an `encryptionsalt` into the file `--config-file` names when it
/// has none, with a plain truncate-and-write (no rename), and drops its comments: N
/// projects started at once on a fresh stack raced on the shared stack config, each
/// writing its own salt. strata hands each project its own copy instead, and the file
/// the user keeps in git is never written by Pulumi.
#[test]
fn pulumi_never_writes_the_shared_stack_config() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    let shared = "# the team's settings\nconfig:\n  kubernetes:infra_type: test\n  proj-alpha:size: 3 # small\n";
    ws.write("config/pulumi/Pulumi.dev.yaml", shared);
    ok(&ws, "up", &[]);
    ok(&ws, "up", &[]);
    ok(&ws, "preview", &[]);
    assert_eq!(ws.read("config/pulumi/Pulumi.dev.yaml"), shared);
    let copies = ws.path(".strata/dev/config");
    for c in starts(&ws.calls()) {
        let a = argv(c);
        if let Some(cf) = flag_value(&a, "--config-file") {
            assert!(
                Path::new(&cf).starts_with(&copies),
                "--config-file {cf} is not the project's own copy: {a:?}"
            );
            let copy = std::fs::read_to_string(&cf).unwrap();
            assert!(copy.contains("proj-alpha:size: 3"), "{copy}");
            assert!(copy.contains("encryptionsalt"), "{copy}");
        }
    }
}

#[test]
fn a_backend_url_that_is_set_is_kept() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    let other = ws.path("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let url = format!("file://{}", other.display());
    ws.set_env("PULUMI_BACKEND_URL", &url);
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    assert!(!starts(&calls).is_empty());
    for c in starts(&calls) {
        assert_eq!(s(&c["env"], "PULUMI_BACKEND_URL"), url, "{c}");
    }
    assert!(
        !ws.exists(".strata/backend/.pulumi"),
        "the default backend must not be used when PULUMI_BACKEND_URL is set"
    );
}

#[test]
fn a_missing_stack_is_created_with_stack_init_and_a_second_up_is_one_process_per_project() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    for p in DIAMOND_PATHS {
        let cmds = commands_of(&calls, p);
        assert!(
            cmds.contains(&"stack init"),
            "{p}: a missing stack is created with `stack init`: {cmds:?}"
        );
        // On the file backend strata sees the stack is new: init, then up — no failed up.
        assert_eq!(cmds, ["stack init", "up"], "{p}: first run processes");
        assert!(
            !cmds.iter().any(|c| c.contains("select")),
            "{p}: `stack select` used: {cmds:?}"
        );
    }
    for c in starts(&calls) {
        assert!(!argv(c).iter().any(|a| a == "select"), "{c}");
    }

    clear_calls(&ws);
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    for p in DIAMOND_PATHS {
        let cmds = commands_of(&calls, p);
        assert_eq!(
            cmds,
            ["up"],
            "{p}: a second `up` on an existing stack is exactly one pulumi process"
        );
    }
    assert_eq!(starts(&calls).len(), DIAMOND_PATHS.len(), "{calls:#?}");
}

#[test]
fn preview_and_refresh_run_the_matching_pulumi_subcommand() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    ok(&ws, "up", &[]);
    for cmd in ["preview", "refresh"] {
        clear_calls(&ws);
        ok(&ws, cmd, &[]);
        let calls = ws.calls();
        for p in DIAMOND_PATHS {
            let cmds = commands_of(&calls, p);
            assert!(
                cmds.contains(&cmd),
                "`strata {cmd}` must run `pulumi {cmd}` for {p}: {cmds:?}"
            );
            for c in &cmds {
                assert!(
                    !["up", "destroy"].contains(c),
                    "`strata {cmd}` ran `pulumi {c}` for {p}"
                );
            }
        }
        if cmd == "refresh" {
            assert_order(&calls, DIAMOND_EDGES);
        }
    }
}

// ---------------------------------------------------------------------------------
// Failure
// ---------------------------------------------------------------------------------

/// alpha, then bravo (needs alpha); charlie needs nothing but is listed last.
const FAILING: &str = "  - path: alpha\n  - path: bravo\n  - path: charlie\n    needs: []\n";

#[test]
fn a_failure_stops_its_dependents_and_the_summary_names_it_and_its_log() {
    let mut ws = workspace(FAILING, CHAIN_PATHS);
    ws.set_env(&format!("FAKE_PULUMI_FAIL_{}", hook_key("alpha")), "up");
    let r = run(&ws, "up", &["-j", "1"]);
    assert_eq!(r.code, 1, "{r:?}");
    let calls = ws.calls();
    assert!(
        starts_of(&calls, "bravo").is_empty(),
        "bravo needs the failed alpha and must not run: {calls:#?}"
    );
    assert!(
        starts_of(&calls, "charlie").is_empty(),
        "after a failure (without --keep-going) nothing new is scheduled: {calls:#?}"
    );
    let out = r.all();
    assert!(
        out.lines().any(|l| {
            let mut w = l.split_whitespace();
            w.next() == Some("alpha") && w.next() == Some("failed")
        }),
        "the summary has a `alpha failed` row: {r:?}"
    );
    let log_line = out
        .lines()
        .find(|l| l.contains(".strata/dev/logs/alpha/"))
        .unwrap_or_else(|| {
            panic!("the summary names alpha's log under .strata/dev/logs/alpha/: {r:?}")
        });
    let rel = &log_line[log_line.find(".strata/dev/logs/alpha/").unwrap()..];
    let rel = rel.split_whitespace().next().unwrap();
    assert!(rel.ends_with(".log"), "{rel}");
    assert!(
        rel.starts_with(".strata/dev/logs/alpha/up-"),
        "logs/<project>/<operation>-<time>.log: {rel}"
    );
    let log = ws.read(rel);
    assert!(
        log.contains("failed"),
        "the log holds the child's output (its failure): {log}"
    );
    assert!(
        log.contains("fake:index:Thing"),
        "the log holds the child's engine events: {log}"
    );
}

#[test]
fn keep_going_still_runs_what_does_not_depend_on_the_failure() {
    let mut ws = workspace(FAILING, CHAIN_PATHS);
    ws.set_env(&format!("FAKE_PULUMI_FAIL_{}", hook_key("alpha")), "up");
    let r = run(&ws, "up", &["-j", "1", "--keep-going"]);
    assert_eq!(
        r.code, 1,
        "a failure still exits 1 with --keep-going: {r:?}"
    );
    let calls = ws.calls();
    assert!(starts_of(&calls, "bravo").is_empty(), "{calls:#?}");
    let (_, end) = op_span(&calls, "charlie", "up");
    assert!(end > 0);
}

#[test]
fn pulumi_exit_codes_become_clear_messages() {
    let mut ws = workspace("  - path: alpha\n", &["alpha"]);
    ws.set_env("FAKE_PULUMI_FAIL", "up");
    ws.set_env("FAKE_PULUMI_FAIL_CODE", "3");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let out = r.all().to_lowercase();
    assert!(
        out.contains("login") || out.contains("authentication"),
        "exit 3 of pulumi is an authentication problem and the message says so: {r:?}"
    );
}

// ---------------------------------------------------------------------------------
// Piecemeal selection
// ---------------------------------------------------------------------------------

#[test]
fn project_selects_by_path_and_by_pulumi_name() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &["--project", "bravo"]);
    assert_eq!(projects_called(&ws.calls()), names(&["bravo"]));

    clear_calls(&ws);
    ok(&ws, "up", &["--project", "proj-charlie"]);
    assert_eq!(projects_called(&ws.calls()), names(&["charlie"]));

    clear_calls(&ws);
    ok(
        &ws,
        "up",
        &["--project", "alpha", "--project", "proj-charlie"],
    );
    assert_eq!(projects_called(&ws.calls()), names(&["alpha", "charlie"]));
}

#[test]
fn with_deps_adds_what_the_selection_needs() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &["--project", "bravo", "--with-deps"]);
    let calls = ws.calls();
    assert_eq!(projects_called(&calls), names(&["alpha", "bravo"]));
    assert_order(&calls, &[("alpha", "bravo")]);
}

#[test]
fn from_skips_what_is_ordered_before_it() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &["--from", "bravo"]);
    let calls = ws.calls();
    assert_eq!(projects_called(&calls), names(&["bravo", "charlie"]));
    assert_order(&calls, &[("bravo", "charlie")]);
}

// ---------------------------------------------------------------------------------
// Destroy
// ---------------------------------------------------------------------------------

#[test]
fn destroy_runs_in_reverse_order_with_yes() {
    let mut ws = workspace(DIAMOND, DIAMOND_PATHS);
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    ws.set_env("FAKE_PULUMI_DELAY_MS", "300");
    ok(&ws, "destroy", &["--yes"]);
    let calls = ws.calls();
    assert_eq!(projects_called(&calls), names(DIAMOND_PATHS));
    for p in DIAMOND_PATHS {
        let d: Vec<&Value> = starts_of(&calls, p)
            .into_iter()
            .filter(|c| s(c, "command") == "destroy")
            .collect();
        assert_eq!(d.len(), 1, "{p}: one `pulumi destroy`: {calls:#?}");
        assert!(has_flag(&argv(d[0]), "--yes"), "{}", d[0]);
    }
    // Dependents first: reverse every edge.
    let reversed: Vec<(&str, &str)> = DIAMOND_EDGES.iter().map(|(a, b)| (*b, *a)).collect();
    assert_order(&calls, &reversed);
}

/// A destroy that fails (a resource failure, exit 4) is a failure, even when the
/// provider's error text happens to mention "no stack named": only exit 6, or Pulumi's
/// own one-line error for a missing stack, means "nothing to destroy".
#[test]
fn failed_destroy_mentioning_no_stack_named_is_a_failure() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    ws.set_env(
        &format!("FAKE_PULUMI_FAIL_{}", hook_key("charlie")),
        "destroy",
    );
    ws.set_env("FAKE_PULUMI_FAIL_CODE", "4");
    ws.set_env(
        "FAKE_PULUMI_FAIL_MESSAGE",
        "deleting bucket: peer cluster reported: error: no stack named 'dev' found",
    );
    let r = run(&ws, "destroy", &["--yes", "--output", "json"]);
    assert_eq!(r.code, 1, "a failed destroy must fail the run: {r:?}");
    let charlie: Vec<Value> = r
        .events()
        .into_iter()
        .filter(|e| e["event"] == "project_finished" && e["project"] == "charlie")
        .collect();
    assert_eq!(charlie.len(), 1, "{r:?}");
    assert_eq!(charlie[0]["status"], "failed", "{}", charlie[0]);
    assert!(!r.stdout.contains("nothing to do"), "{}", r.stdout);
    // The stack still exists: the dependency ordering stopped bravo and alpha.
    assert_eq!(r.code, 1);
}

/// Pulumi's own "no stack" answer (exit 6 on 3.226+) is still "nothing to destroy".
#[test]
fn destroy_of_a_missing_stack_is_nothing_to_do() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &["--project", "alpha"]);
    // bravo and charlie were never brought up: their stacks do not exist.
    let r = ok(&ws, "destroy", &["--yes", "--output", "json"]);
    for p in ["bravo", "charlie"] {
        let e = r
            .events()
            .into_iter()
            .find(|e| e["event"] == "project_finished" && e["project"] == p)
            .unwrap_or_else(|| panic!("no event for {p}: {r:?}"));
        assert_eq!(e["status"], "succeeded", "{e}");
    }
}

/// A CLI older than 3.226 exits 255 on every error: its own one-line "no stack named"
/// error still means nothing to destroy, and a failed destroy is still a failure.
#[test]
fn old_cli_missing_stack_and_failed_destroy() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ws.set_env("FAKE_PULUMI_OLD_CLI", "1");
    ok(&ws, "up", &["--project", "alpha"]);
    ok(&ws, "destroy", &["--yes", "--project", "charlie"]);
    ok(&ws, "up", &[]);
    ws.set_env(
        &format!("FAKE_PULUMI_FAIL_{}", hook_key("charlie")),
        "destroy",
    );
    ws.set_env(
        "FAKE_PULUMI_FAIL_MESSAGE",
        "error: no stack named 'dev' found",
    );
    let r = run(&ws, "destroy", &["--yes"]);
    assert_eq!(r.code, 1, "{r:?}");
    // 255 is not called an internal error: the user sees Pulumi's own error line.
    ws.set_env("FAKE_PULUMI_FAIL_MESSAGE", "creating bucket: AccessDenied");
    ws.set_env(&format!("FAKE_PULUMI_FAIL_{}", hook_key("alpha")), "up");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("older than 3.226"), "{r:?}");
    assert!(r.stdout.contains("AccessDenied"), "{r:?}");
    assert!(!r.all().contains("internal error"), "{r:?}");
}

#[test]
fn down_is_destroy() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    ok(&ws, "down", &["--yes"]);
    let calls = ws.calls();
    for p in CHAIN_PATHS {
        let cmds = commands_of(&calls, p);
        assert_eq!(cmds, ["destroy"], "{p}");
    }
    assert_order(&calls, &[("charlie", "bravo"), ("bravo", "alpha")]);
}

#[test]
fn non_interactive_destroy_without_yes_exits_2_and_touches_nothing() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    let before = ws.files_under(".strata/backend");
    assert!(!before.is_empty());
    clear_calls(&ws);
    let r = run(&ws, "destroy", &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.all().contains("--yes"),
        "the message says to pass --yes: {r:?}"
    );
    assert!(
        starts(&ws.calls()).is_empty(),
        "no pulumi process may start: {:#?}",
        ws.calls()
    );
    let mut after = ws.files_under(".strata/backend");
    let mut before = before;
    before.sort();
    after.sort();
    assert!(before == after, "the backend changed");
}

// ---------------------------------------------------------------------------------
// Ctrl-C
// ---------------------------------------------------------------------------------

/// alpha, bravo, charlie (slow, independent); echo independent but beyond -j 3;
/// delta needs the three.
const CTRL_C: &str = "  - path: alpha\n    needs: []\n  - path: bravo\n    needs: []\n  - path: charlie\n    needs: []\n  - path: echo\n    needs: []\n  - path: delta\n    needs: [alpha, bravo, charlie]\n";
const CTRL_C_PATHS: &[&str] = &["alpha", "bravo", "charlie", "echo", "delta"];
const SLOW: &[&str] = &["alpha", "bravo", "charlie"];

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

#[test]
fn a_failure_lets_running_independent_projects_finish() {
    let mut ws = workspace(INDEPENDENT, CHAIN_PATHS);
    // Existing stacks, so the three `up`s start together.
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    ws.set_env(&format!("FAKE_PULUMI_FAIL_{}", hook_key("alpha")), "up");
    ws.set_env(
        &format!("FAKE_PULUMI_DELAY_MS_{}", hook_key("alpha")),
        "500",
    );
    ws.set_env(
        &format!("FAKE_PULUMI_DELAY_MS_{}", hook_key("bravo")),
        "2000",
    );
    ws.set_env(
        &format!("FAKE_PULUMI_DELAY_MS_{}", hook_key("charlie")),
        "2000",
    );
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let calls = ws.calls();
    for p in ["bravo", "charlie"] {
        let (start, end) = op_span(&calls, p, "up");
        let (_, alpha_end) = span(&calls, "alpha");
        assert!(
            start < alpha_end,
            "{p} was running when alpha failed (test premise)"
        );
        assert!(end > start);
        for c in starts_of(&calls, p) {
            let pid = c["pid"].as_u64().unwrap();
            assert_eq!(sigints_of(&calls, pid), 0, "{p} must not be interrupted");
        }
    }
}

#[test]
fn strata_pulumi_names_the_binary() {
    let mut ws = Ws::without_pulumi();
    fill(&ws, CHAIN, CHAIN_PATHS);
    ws.set_env("STRATA_PULUMI", fake_pulumi().to_str().unwrap());
    ok(&ws, "up", &[]);
    assert_eq!(projects_called(&ws.calls()), names(CHAIN_PATHS));
}

#[test]
fn the_environment_file_overlays_the_process_environment_of_children() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ws.env_file("STRATA_TEST_A=from-file\n");
    ws.set_env("STRATA_TEST_A", "from-process");
    ws.set_env("STRATA_TEST_B", "only-process");
    ws.set_env("FAKE_PULUMI_LOG_ENV", "STRATA_TEST_A,STRATA_TEST_B");
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    assert!(!starts(&calls).is_empty());
    for c in starts(&calls) {
        assert_eq!(c["env"]["STRATA_TEST_A"], "from-file", "the file wins: {c}");
        assert_eq!(c["env"]["STRATA_TEST_B"], "only-process", "{c}");
    }
}

#[test]
fn command_projects_get_the_same_environment_own_group_and_no_stdin() {
    let ws = Ws::with_profile("infrastructure:\n  - path: cmd\n");
    let up = r#"set -eu
{
  echo "stack=$STRATA_STACK"
  echo "provider=$STRATA_PROVIDER"
  echo "infra=$STRATA_INFRA_TYPE"
  echo "org=${STRATA_ORG:-}"
  echo "skip=$PULUMI_SKIP_UPDATE_CHECK"
  echo "stdin=$(readlink /proc/$$/fd/0 || echo closed)"
  echo "pid=$$"
  echo "pgrp=$(cut -d')' -f2 /proc/$$/stat | awk '{print $3}')"
} > "$STRATA_ROOT/cmd-env.txt"
echo '{}' > "$STRATA_OUTPUTS_FILE"
"#;
    ws.command_project("cmd", up, "true");
    ok(&ws, "up", &[]);
    let text = ws.read("cmd-env.txt");
    let kv: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    assert_eq!(kv["stack"], "dev", "{text}");
    assert_eq!(kv["provider"], "t", "{text}");
    assert_eq!(kv["infra"], "test", "{text}");
    assert_eq!(kv["org"], "organization", "{text}");
    assert_eq!(kv["skip"], "true", "{text}");
    assert!(
        kv["stdin"] == "/dev/null" || kv["stdin"] == "closed",
        "stdin of a command project: {text}"
    );
    assert_eq!(kv["pid"], kv["pgrp"], "own process group: {text}");
}

#[test]
fn destroy_with_deps_takes_the_dependents() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    ok(
        &ws,
        "destroy",
        &["--yes", "--project", "bravo", "--with-deps"],
    );
    let calls = ws.calls();
    assert_eq!(
        projects_called(&calls),
        names(&["bravo", "charlie"]),
        "for destroy, --with-deps adds the dependents (charlie), not what bravo needs"
    );
    assert_order(&calls, &[("charlie", "bravo")]);
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

// ---------------------------------------------------------------------------------
// Preflight
// ---------------------------------------------------------------------------------

#[test]
fn a_missing_pulumi_is_a_clear_error_before_anything_starts() {
    let ws = Ws::without_pulumi();
    fill(&ws, CHAIN, CHAIN_PATHS);
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 3, "{r:?}");
    let out = r.all();
    assert!(out.contains("pulumi"), "{r:?}");
    assert!(
        out.contains("STRATA_PULUMI"),
        "the message says how to point at pulumi: {r:?}"
    );
    assert!(
        ws.files_under(".strata/dev/logs").is_empty(),
        "no project may start (no project logs): {:?}",
        ws.files_under(".strata/dev/logs")
    );
    assert!(!out.contains("up started"), "{r:?}");
}

#[test]
fn a_file_backend_without_passphrase_stops_before_anything_runs() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ws.env.retain(|(k, _)| k != "PULUMI_CONFIG_PASSPHRASE");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.all().contains("PULUMI_CONFIG_PASSPHRASE"),
        "the message says how to set the passphrase: {r:?}"
    );
    assert!(starts(&ws.calls()).is_empty(), "{:#?}", ws.calls());
    assert!(ws.files_under(".strata/dev/logs").is_empty());
}

// ---------------------------------------------------------------------------------
// Reporting
// ---------------------------------------------------------------------------------

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
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ws.set_env(&format!("FAKE_PULUMI_FAIL_{}", hook_key("bravo")), "up");
    let r = run(&ws, "up", &["--output", "json"]);
    assert_eq!(r.code, 1, "{r:?}");
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

// ---------------------------------------------------------------------------------
// The local profile, end to end, without pulumi
// ---------------------------------------------------------------------------------

#[test]
fn the_local_profile_runs_end_to_end_without_pulumi() {
    let ws = Ws::without_pulumi();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        repo.join("providers/local.yaml"),
        ws.path("providers/local.yaml"),
    )
    .unwrap();
    copy_path(&repo.join("projects/local"), &ws.path("projects/local"));

    let r = ws.strata(&["up", "--provider", "local", "--stack", "t"]);
    assert_eq!(r.code, 0, "{r:?}");
    let made = ws.files_under(".strata/t/local-env");
    assert!(
        !made.is_empty(),
        "the local environment is made under .strata/t/local-env: {r:?}"
    );
    // Every project of the profile left something there.
    for p in [
        "network", "registry", "cluster", "ingress", "logstore", "app",
    ] {
        assert!(
            made.iter().any(|(f, _)| f.to_string_lossy().contains(p)),
            "nothing of local/{p} under .strata/t/local-env: {made:?}"
        );
    }

    let r = ws.strata(&["destroy", "--provider", "local", "--stack", "t", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let left = ws.files_under(".strata/t/local-env");
    assert!(left.is_empty(), "destroy removes what up made: {left:?}");
}

#[test]
fn after_a_graceful_ctrl_c_the_hint_is_resume_not_pulumi_cancel() {
    let ws = ctrl_c_workspace();
    let (r, _) = ctrl_c_slow_up(&ws, &[], Duration::from_secs(90));
    r.expect_stderr(&["--resume"]);
    assert!(!r.stderr.contains("pulumi cancel"), "{r:?}");
}

#[test]
fn destroy_on_a_stack_never_brought_up_needs_yes_then_has_nothing_to_do() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    let r = run(&ws, "destroy", &[]);
    assert_eq!(
        r.code, 2,
        "without --yes a non-interactive destroy is a usage error: {r:?}"
    );
    let r = run(&ws, "destroy", &["--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("nothing to destroy"), "{r:?}");
    assert!(ws.calls().is_empty(), "no pulumi process: {:?}", ws.calls());
}

/// The real CLI (cobra) has no `--config-file` on `stack init` and `stack output`: strata
/// never passes it there (the fake refuses unknown flags per command, exit 2).
#[test]
fn stack_init_and_stack_output_get_no_config_file() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ws.set_env(
        &format!("FAKE_PULUMI_SECRET_OUTPUTS_{}", hook_key("alpha")),
        r#"{"token":"s3cr3t-value"}"#,
    );
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: alpha\n  - path: bravo\n    inputs:\n      bravo:token: alpha:token\n  - path: charlie\n"
        ),
    );
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    let mut seen = BTreeSet::new();
    for c in starts(&calls) {
        let cmd = s(c, "command");
        if cmd == "stack init" || cmd == "stack output" {
            seen.insert(cmd.to_string());
            assert!(!has_flag(&argv(c), "--config-file"), "{c}");
        }
        assert_ne!(c["exit_code"], 2, "a call the real CLI refuses: {c}");
    }
    for c in records(&calls, "end") {
        assert_ne!(c["exit_code"].as_i64(), Some(2), "refused flags: {c}");
    }
    assert_eq!(
        seen,
        BTreeSet::from(["stack init".to_string(), "stack output".to_string()]),
        "both were exercised: {calls:#?}"
    );
}

/// On Pulumi Cloud, stacks are created and addressed fully qualified (`org/project/stack`)
/// whenever the organization is known: the CLI's default organization (here not the
/// user's) must not receive them, or stack references built from STRATA_ORG break.
#[test]
fn pulumi_cloud_stacks_are_fully_qualified_in_the_known_org() {
    for (pulumi_org, expected) in [(Some("team"), "team"), (None, "alice")] {
        let mut ws = workspace(
            "  - path: alpha\n  - path: bravo\n    inputs:\n      bravo:x: alpha:value\n",
            &["alpha", "bravo"],
        );
        let cloud = ws.path("cloud");
        ws.set_env("PULUMI_BACKEND_URL", "https://api.pulumi.com");
        ws.set_env("FAKE_PULUMI_CLOUD_DIR", cloud.to_str().unwrap());
        ws.set_env("FAKE_PULUMI_USER", "alice");
        ws.set_env("FAKE_PULUMI_DEFAULT_ORG", "acme-default");
        if let Some(o) = pulumi_org {
            ws.set_env("PULUMI_ORG", o);
        }
        let r = run(&ws, "up", &[]);
        assert_eq!(r.code, 0, "{r:?}");
        for p in ["alpha", "bravo"] {
            let f = cloud.join(format!(".pulumi/stacks/{expected}/{}/dev.json", name(p)));
            assert!(f.is_file(), "{} missing: {r:?}", f.display());
        }
        assert!(!cloud.join(".pulumi/stacks/acme-default").exists());
        for c in starts(&ws.calls()) {
            if c["project"].is_string() && s(c, "command") != "whoami" {
                let a = argv(c);
                let i = a.iter().position(|x| x == "--stack").expect("--stack");
                assert_eq!(
                    a[i + 1],
                    format!("{expected}/{}/dev", s(c, "project")),
                    "{c}"
                );
            }
        }
    }
}
