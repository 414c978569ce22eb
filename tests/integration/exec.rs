//! `strata exec -- CMD`: a command in each selected project's folder, in dependency order,
//! with the projects' environment, a log per project, the run's exit codes and Ctrl-C,
//! and nothing of strata's state touched but logs.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::*;

/// a; b and c need a; d needs b and c; e needs nothing. Command projects: `up` never runs.
const DIAMOND: &str = "infrastructure:\n  - path: a\n  - path: b\n    needs: [a]\n  - path: c\n    needs: [a]\n  - path: d\n    needs: [b, c]\n  - path: e\n    needs: []\n";
const PATHS: &[&str] = &["a", "b", "c", "d", "e"];
const EDGES: &[(&str, &str)] = &[("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")];

fn workspace(profile: &str) -> Ws {
    let ws = Ws::with_profile(profile);
    for p in PATHS {
        ws.command_project(p, "true", "true");
    }
    ws
}

/// `strata exec -p t -s dev <flags…> -- sh -c <script>`.
fn exec_sh(ws: &Ws, flags: &[&str], script: &str) -> Run {
    let mut args = flags.to_vec();
    args.extend(["--", "sh", "-c", script]);
    ws.run("exec", &args)
}

/// Each project appends `start P` and, a moment later, `end P` to one shared file.
const APPEND: &str = "echo \"start $STRATA_PROJECT\" >> \"$ORDER_FILE\"; sleep 0.5; echo \"end $STRATA_PROJECT\" >> \"$ORDER_FILE\"";

fn with_order_file(ws: &mut Ws) -> PathBuf {
    let file = ws.path("order.txt");
    ws.set_env("ORDER_FILE", file.to_str().unwrap());
    file
}

/// The line index of `what` in `lines`.
fn at(lines: &[&str], what: &str) -> usize {
    lines
        .iter()
        .position(|l| *l == what)
        .unwrap_or_else(|| panic!("no {what:?} in {lines:?}"))
}

#[test]
fn exec_runs_in_dependency_order_in_parallel_where_it_can() {
    let mut ws = workspace(DIAMOND);
    let file = with_order_file(&mut ws);
    let r = exec_sh(&ws, &["-j", "4"], APPEND);
    r.expect_code(0)
        .expect_stdout(&["[a] started", "[d] ok in", "exec: 5 ok"]);
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 10, "each project ran once: {lines:?}");
    for (need, dependent) in EDGES {
        assert!(
            at(&lines, &format!("end {need}")) < at(&lines, &format!("start {dependent}")),
            "{dependent} started before {need} ended: {lines:?}"
        );
    }
    // b and c need only a: they run together (as does e, beside a).
    assert!(at(&lines, "start c") < at(&lines, "end b"), "{lines:?}");
    assert!(at(&lines, "start e") < at(&lines, "end a"), "{lines:?}");
}

#[test]
fn each_command_runs_in_its_project_folder_with_the_projects_environment() {
    let ws = workspace(&DIAMOND.replace(
        "  - path: e\n    needs: []\n",
        "  - path: e\n    needs: []\n    stack: applications.${stack}\n",
    ));
    ws.env_file("PULUMI_STACK=dev\nFROM_ENV_FILE=yes\n");
    let r = ws.strata(&[
        "exec",
        "-p",
        "t",
        "--",
        "sh",
        "-c",
        "echo \"$STRATA_PROJECT $STRATA_STACK $FROM_ENV_FILE ${PULUMI_BACKEND_URL:+backend}\" > here.txt",
    ]);
    r.expect_code(0);
    for p in PATHS {
        let stack = if *p == "e" { "applications.dev" } else { "dev" };
        assert_eq!(
            ws.read(&format!("projects/{p}/here.txt")),
            format!("{p} {stack} yes backend\n"),
            "{r:?}"
        );
    }
    // A path is taken from the project's folder.
    ws.write("projects/a/build.sh", "#!/bin/sh\necho built > built.txt\n");
    let script = ws.path("projects/a/build.sh");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    ws.run("exec", &["--filter", "a", "--", "./build.sh"])
        .expect_code(0);
    assert_eq!(ws.read("projects/a/built.txt"), "built\n");
}

#[test]
fn a_failure_skips_what_needs_it_says_why_and_exits_1() {
    let mut ws = workspace(DIAMOND);
    let file = with_order_file(&mut ws);
    let script = format!(
        "if [ \"$STRATA_PROJECT\" = b ]; then echo 'line one'; echo 'boom: b broke' >&2; exit 3; fi; {APPEND}"
    );
    // -j 1 and no --keep-going: nothing new starts once b failed.
    let r = exec_sh(&ws, &["-j", "1"], &script);
    r.expect_code(1).expect_stdout(&[
        "[b] failed (exit 3)",
        "log: .strata/dev/logs/b/exec-",
        "| boom: b broke",
        "[d] skipped: not run: needs b, which failed",
        "--keep-going",
    ]);
    let logs = ws.files_under(".strata/dev/logs/b");
    assert_eq!(logs.len(), 1, "{logs:?}");
    let log = String::from_utf8_lossy(&logs[0].1).to_string();
    assert_has(&log, &["line one", "boom: b broke", "# failed"]);
    assert!(!ws.read_opt("order.txt").contains("start d"), "{r:?}");

    // --keep-going: what does not need b still runs; d, which does, never.
    std::fs::remove_file(&file).ok();
    let r = exec_sh(&ws, &["-j", "1", "--keep-going"], &script);
    r.expect_code(1);
    let ran = ws.read("order.txt");
    for p in ["a", "c", "e"] {
        assert!(ran.contains(&format!("end {p}")), "{p} did not run: {r:?}");
    }
    assert!(!ran.contains("start d"), "{r:?}");
    r.expect_stdout(&["[d] skipped", "exec: 3 ok, 1 failed, 1 skipped"]);
}

#[test]
fn filter_selects_the_projects() {
    let mut ws = workspace(DIAMOND);
    let file = with_order_file(&mut ws);
    exec_sh(&ws, &["--filter", "d...", "--filter", "!a"], APPEND).expect_code(0);
    let text = std::fs::read_to_string(&file).unwrap();
    let mut ran: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("start "))
        .collect();
    ran.sort();
    assert_eq!(ran, ["b", "c", "d"]);
    std::fs::remove_file(&file).unwrap();
    exec_sh(&ws, &["--project", "e"], APPEND).expect_code(0);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "start e\nend e\n");
    // A filter that selects nothing is refused, as for every command.
    ws.run("exec", &["--filter", "nope", "--", "true"])
        .expect_code(3);
}

#[test]
fn no_command_after_the_double_dash_is_a_usage_error() {
    let ws = workspace(DIAMOND);
    for extra in [&[][..], &["--"][..], &["-j", "2"][..]] {
        let r = ws.run("exec", extra);
        r.expect_code(2).expect_stderr(&["<CMD>"]);
    }
    assert!(!ws.exists(".strata"), "nothing written");
}

#[test]
fn a_command_not_found_names_it_and_the_project_and_runs_nothing() {
    let ws = workspace(DIAMOND);
    let r = ws.run("exec", &["--", "no-such-tool-strata", "install"]);
    r.expect_code(3).expect_stderr(&[
        "command `no-such-tool-strata` not found for project a",
        "Nothing was run",
    ]);
    assert!(!ws.exists(".strata/dev/logs"), "{r:?}");
    // A path that is not there fails that project (its folder is where it is looked for).
    let r = ws.run("exec", &["--filter", "e", "--", "./missing.sh"]);
    r.expect_code(1)
        .expect_stdout(&["[e] failed: command `./missing.sh` not found for project e"]);
}

/// Every file of the workspace but the exec logs and what the commands wrote, with its
/// bytes.
fn state(ws: &Ws) -> Vec<(PathBuf, Vec<u8>)> {
    let logs = ws.path(".strata/dev/logs");
    let mut files: Vec<(PathBuf, Vec<u8>)> = ws
        .files_under("")
        .into_iter()
        .filter(|(p, _)| {
            let name = p.file_name().unwrap().to_string_lossy();
            !(p.starts_with(&logs) && name.starts_with("exec-")) && name != "here.txt"
        })
        .collect();
    files.sort();
    files
}

#[test]
fn exec_changes_no_state_of_strata_but_its_logs() {
    let ws = workspace(DIAMOND);
    ws.run_ok("up", &[]);
    let before = state(&ws);
    assert!(
        before.iter().any(|(p, _)| p.ends_with("journal.jsonl")),
        "up wrote a journal: {:?}",
        before.iter().map(|(p, _)| p).collect::<Vec<_>>()
    );
    exec_sh(&ws, &[], "echo hi > here.txt").expect_code(0);
    exec_sh(&ws, &["--keep-going"], "exit 1").expect_code(1);
    let after = state(&ws);
    let names = |s: &[(PathBuf, Vec<u8>)]| s.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
    assert_eq!(names(&after), names(&before));
    assert!(after == before, "a file of strata's state changed");
    // Its logs are there: one per command run (a and e ran twice; the rest needed a,
    // which failed the second time), beside up's.
    for (p, n) in [("a", 2), ("b", 1), ("c", 1), ("d", 1), ("e", 2)] {
        let logs = ws.files_under(&format!(".strata/dev/logs/{p}"));
        let exec_logs = logs
            .iter()
            .filter(|(f, _)| {
                f.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("exec-")
            })
            .count();
        assert_eq!(exec_logs, n, "{p}: {logs:?}");
    }
}

#[test]
fn json_events_are_the_runs_with_operation_exec() {
    let ws = workspace(DIAMOND);
    let r = ws.run_json("exec", &["--filter", "a...", "--", "sh", "-c", "echo out"]);
    r.expect_code(0);
    let events = r.events();
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "project_started",
            "project_output",
            "project_finished",
            "run_finished"
        ],
        "{r:?}"
    );
    for e in &events {
        if let Some(op) = e.get("operation") {
            assert_eq!(op, "exec");
        }
    }
    assert_eq!(events[3]["status"], "succeeded");
    assert_eq!(events[3]["exit_code"], 0);
    assert_eq!(r.statuses()["a"], "succeeded");
    crate::handoff::assert_follows_schemas(&ws, &[("events.v2.json", "exec.jsonl", &r.stdout)]);
}

/// Whether `pid` is a live process (not a zombie).
fn alive(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .unwrap_or("");
    !state.is_empty() && state != "Z"
}

#[test]
fn ctrl_c_stops_the_commands_and_leaves_no_process_behind() {
    let ws = workspace(DIAMOND);
    let mut child = ws.spawn(&[
        "exec",
        "-p",
        "t",
        "-s",
        "dev",
        "--",
        "sh",
        "-c",
        "echo $$ > pid.txt; exec sleep 60",
    ]);
    // a runs first, alone; e beside it.
    let pid_file = ws.path("projects/a/pid.txt");
    let t0 = Instant::now();
    while !pid_file.exists() || ws.read_opt("projects/a/pid.txt").trim().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(20), "a never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    let pids: Vec<u32> = ["a", "e"]
        .iter()
        .filter_map(|p| {
            ws.read_opt(&format!("projects/{p}/pid.txt"))
                .trim()
                .parse()
                .ok()
        })
        .collect();
    crate::run::sigint(child.id());
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("strata exec did not end after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = Run::from(child.wait_with_output().unwrap());
    assert_eq!(status.code(), Some(130), "{out:?}");
    assert_has(&out.all(), &["Interrupted", "[b] cancelled"]);
    for pid in pids {
        assert!(!alive(pid), "process {pid} survived: {out:?}");
    }
    assert!(!ws.exists("projects/b/pid.txt"), "nothing new started");
}

#[test]
fn quiet_shows_only_failures_and_the_last_line_and_verbose_every_line() {
    let ws = workspace(DIAMOND);
    let script = "echo \"said by $STRATA_PROJECT\"; [ \"$STRATA_PROJECT\" != e ]";
    let r = exec_sh(&ws, &["-q", "--keep-going"], script);
    r.expect_code(1)
        .expect_stdout(&["[e] failed (exit 1)", "| said by e", "exec: 4 ok, 1 failed"]);
    assert!(
        !r.stdout.contains("started") && !r.stdout.contains("[a]"),
        "{r:?}"
    );
    let r = exec_sh(&ws, &["-v", "--filter", "a"], script);
    r.expect_code(0)
        .expect_stdout(&["[a] started", "[a] said by a", "[a] ok in"]);
}
