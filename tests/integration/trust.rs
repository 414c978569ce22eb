//! State that survives crashes, races and hostile layouts (issue 10, DESIGN.md §3
//! "Rules that keep state whole"): torn journal lines, collision-free per-project state,
//! private file modes.

use serde_json::Value;

use crate::support::*;

fn writes(v: &str) -> String {
    format!("printf '%s' '{{\"v\":\"{v}\"}}' > \"$STRATA_OUTPUTS_FILE\"")
}

/// A crash that tears the journal's last line loses no later record: `--resume` still
/// sees the project that failed after it.
#[test]
fn a_torn_journal_line_does_not_hide_a_failure_from_resume() {
    let mut ws = Ws::new();
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: a\n  - path: b\n"),
    );
    ws.command_project("a", &writes("a"), "true");
    ws.command_project(
        "b",
        "test -z \"$FAIL_B\" && printf '{}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    let args = ["up", "-p", "t", "-s", "dev"];
    assert_eq!(ws.strata(&args).code, 0);
    // A crash mid-record: a torn line without its newline.
    let journal = ws.path(".strata/dev/journal.jsonl");
    let mut text = std::fs::read(&journal).unwrap();
    text.extend_from_slice(b"{\"kind\":\"project\",\"run_id\":\"torn");
    std::fs::write(&journal, &text).unwrap();
    ws.set_env("FAIL_B", "1");
    let r = ws.strata(&args);
    assert_eq!(r.code, 1, "{r:?}");
    ws.set_env("FAIL_B", "");
    let resumed = ws.strata(&["up", "-p", "t", "-s", "dev", "--resume", "--output", "json"]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    let ran: Vec<String> = resumed
        .events()
        .iter()
        .filter(|e| e["event"] == "project_started")
        .map(|e| e["project"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(
        ran,
        ["b"],
        "resume must re-run the failed project: {resumed:?}"
    );
}

/// `x/y` and `x-y` are different projects: each keeps its own outputs.
#[test]
fn projects_whose_paths_differ_only_in_separators_keep_their_own_state() {
    let ws = Ws::new();
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: x/y\n  - path: x-y\n    needs: []\n  - path: x_y\n    needs: []\n  - path: use\n    needs: []\n    inputs:\n      c:a: x/y:v\n      c:b: x-y:v\n      c:c: x_y:v\n"
        ),
    );
    ws.command_project("x/y", &writes("slash"), "true");
    ws.command_project("x-y", &writes("dash"), "true");
    ws.command_project("x_y", &writes("underscore"), "true");
    ws.command_project(
        "use",
        "printf '{\"got\":\"%s %s %s\"}' \"$STRATA_INPUT_C_A\" \"$STRATA_INPUT_C_B\" \"$STRATA_INPUT_C_C\" > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    let r = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 0, "{r:?}");
    let out = ws.strata(&["outputs", "-p", "t", "-s", "dev", "--output", "json"]);
    assert_eq!(out.code, 0, "{out:?}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(v["use"]["got"], "slash dash underscore", "{v}");
    assert_eq!(v["x/y"]["v"], "slash", "{v}");
    assert_eq!(v["x-y"]["v"], "dash", "{v}");
}

/// Everything under `.strata/` is the owner's alone: files 0600, folders 0700.
#[test]
fn state_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let ws = Ws::with_command("a/b", &writes("a"));
    ws.run_ok("up", &[]);
    fn walk(p: &std::path::Path, out: &mut Vec<(std::path::PathBuf, u32, bool)>) {
        for e in std::fs::read_dir(p).unwrap().flatten() {
            let m = e.metadata().unwrap();
            out.push((e.path(), m.permissions().mode() & 0o777, m.is_dir()));
            if m.is_dir() {
                walk(&e.path(), out);
            }
        }
    }
    let mut all = vec![];
    walk(&ws.path(".strata/dev"), &mut all);
    assert!(all.iter().any(|(p, _, _)| p.ends_with("journal.jsonl")));
    assert!(
        all.iter()
            .any(|(p, _, _)| p.extension().is_some_and(|e| e == "log"))
    );
    let top = std::fs::metadata(ws.path(".strata"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(top, 0o700);
    for (p, mode, dir) in all {
        if p.starts_with(ws.path(".strata/dev/work")) && !dir {
            continue; // written by the project's own command, inside a 0700 folder
        }
        let want = if dir { 0o700 } else { 0o600 };
        assert_eq!(mode, want, "{} is {mode:o}", p.display());
    }
}

/// A project ends when its process exits: a background process that keeps its output
/// pipes open is not waited for.
#[test]
fn a_background_process_holding_the_pipes_is_not_waited_for() {
    let ws = Ws::new();
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: a\n  - path: b\n"),
    );
    ws.command_project(
        "a",
        "sleep 600 & echo $! > \"$STRATA_ROOT/bg.pid\"; echo started; printf '{}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    ws.command_project("b", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    let mut child = ws.spawn(&["up", "-p", "t", "-s", "dev", "--output", "json"]);
    // Bounded by the 600 s the background process holds the pipes, not by speed.
    let t0 = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if t0.elapsed() > std::time::Duration::from_secs(120) {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    if let Ok(pid) = std::fs::read_to_string(ws.path("bg.pid")) {
        let _ = std::process::Command::new("kill").arg(pid.trim()).status();
    }
    let status = status.unwrap_or_else(|| {
        let _ = child.kill();
        panic!("strata waited for the background process of project a")
    });
    let out = child.wait_with_output().unwrap();
    assert!(status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("\"started\""),
        "a's own output is shown: {text}"
    );
    assert!(text.contains("\"project\":\"b\""), "b ran after a: {text}");
}

/// strata killed with SIGKILL leaves its children running; `up --resume` must not start
/// the same project again while the orphan runs (two updates of one stack at once). The
/// lock names the children's process groups; the takeover waits for them.
#[test]
fn resume_after_sigkill_waits_for_the_orphaned_children() {
    // Writes only to files after it starts (its stdout reader will be dead).
    let ws = Ws::with_command(
        "slow",
        "id=$$; echo \"start $id $(date +%s%3N)\" >> \"$STRATA_ROOT/spans.log\"; sleep 3; echo \"end $id $(date +%s%3N)\" >> \"$STRATA_ROOT/spans.log\"; printf '{}' > \"$STRATA_OUTPUTS_FILE\"",
    );
    let mut first = ws.spawn(&["up", "-p", "t", "-s", "dev"]);
    let started = || ws.read_opt("spans.log").contains("start");
    crate::run::wait_for(std::time::Duration::from_secs(60), "slow to start", started);
    // The lock's children file names the running child's process group.
    let children = ws.read(".strata/dev/lock.children");
    assert!(children.contains("\"slow\""), "{children}");
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let r = ws.run_ok("up", &["--resume"]);
    assert!(r.all().contains("its children still run"), "{r:?}");
    let s = spans(&ws.read("spans.log"));
    assert_eq!(s.len(), 2, "the orphan, then the resumed run: {s:?}");
    let (a, b) = (&s[0], &s[1]);
    assert!(a.2 <= b.1, "two runs of `slow` overlapped: {s:?}");
}

/// `include:` stays inside providers/, and the error never prints the file it named.
#[test]
fn include_cannot_escape_providers_or_print_another_file() {
    let ws = Ws::new();
    ws.env_file("PULUMI_CONFIG_PASSPHRASE=hunter2-do-not-print\n");
    for inc in ["../config/pulumi/environment", "/etc/passwd"] {
        ws.profile("t", &format!("{HEAD}infrastructure:\n  - include: {inc}\n"));
        let r = ws.strata(&["show", "-p", "t", "-s", "dev"]);
        assert_eq!(r.code, 3, "{inc}: {r:?}");
        assert!(
            r.stderr.contains("outside the providers folder"),
            "{inc}: {r:?}"
        );
        assert!(!r.all().contains("hunter2"), "{inc}: {r:?}");
        assert!(!r.all().contains("root:x:"), "{inc}: {r:?}");
    }
    // A fragment inside providers/ that is not a list: the message names the file and the
    // line, not its content.
    ws.write("providers/common/bad.yaml", "secret-token-value-xyz\n");
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - include: common/bad.yaml\n"),
    );
    let r = ws.run("show", &[]);
    r.expect_code(3).expect_stderr(&["bad.yaml"]);
    assert!(!r.all().contains("secret-token-value-xyz"), "{r:?}");
}

/// A 100,000-deep profile, an invalid-UTF-8 stack config and a 300-character stack name
/// are configuration errors (exit 3) naming the file, found at once.
#[test]
fn hostile_files_and_names_are_configuration_errors() {
    let ws = Ws::new();
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: {}\n", "[".repeat(100_000)),
    );
    let r = ws.strata(&["show", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("t.yaml") && r.stderr.contains("nested"),
        "{r:?}"
    );

    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: a\n"));
    ws.command_project("a", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    std::fs::write(
        ws.path("config/pulumi/Pulumi.dev.yaml"),
        b"config:\n  t:x: \xff\xfe\n",
    )
    .unwrap();
    let r = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("Pulumi.dev.yaml: line 2"), "{r:?}");

    let long = "s".repeat(300);
    let r = ws.strata(&["up", "-p", "t", "-s", &long]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("not a valid stack name"), "{r:?}");
    assert!(!ws.exists(&format!(".strata/{long}")));
}

/// Every line of a multi-line secret (a PEM key) is redacted in the terminal, the logs
/// and the JSON events.
#[test]
fn every_line_of_a_multi_line_secret_is_redacted_everywhere() {
    let mut ws = Ws::new();
    let pem = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\nBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n-----END PRIVATE KEY-----";
    ws.set_env("STRATA_PASSPHRASE", "store pass");
    ws.set_env("STRATA_SECRET_T_KEY", pem);
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: a\n    secrets:\n      - key: t:key\n        prompt: Key\n"),
    );
    // The command prints the key line by line, as tools that read a key do.
    ws.command_project(
        "a",
        "printf '%s\\n' \"$STRATA_SECRET_T_KEY\"; printf '{}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    let r = ws.run_json("up", &["--project", "a"]);
    r.expect_code(0);
    let logs: String = ws
        .files_under(".strata/dev/logs")
        .into_iter()
        .map(|(_, b)| String::from_utf8_lossy(&b).into_owned())
        .collect();
    for line in [
        "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC",
        "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj",
    ] {
        assert!(!r.all().contains(line), "terminal/events: {r:?}");
        assert!(!logs.contains(line), "logs: {logs}");
    }
}

/// Sixteen projects whose kubeconfig hooks run at the same time all keep their entries
/// (the merge holds kubectl's `<file>.lock`).
#[test]
fn parallel_kubeconfig_hooks_keep_every_entry() {
    let ws = Ws::new();
    let mut entries = String::new();
    for i in 0..16 {
        entries.push_str(&format!(
            "  - path: c{i}\n    needs: []\n    on_success:\n      - kubeconfig: {{ output: kubeconfig }}\n"
        ));
        let kc = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster: {{server: https://c{i}.example}}\nusers:\n- name: aws\n  user: {{token: t{i}}}\ncontexts:\n- name: aws\n  context: {{cluster: kubernetes, user: aws}}\ncurrent-context: aws\n"
        );
        ws.write(
            &format!("projects/c{i}/outputs.json"),
            &serde_json::json!({ "kubeconfig": kc }).to_string(),
        );
        ws.command_project(
            &format!("c{i}"),
            "cat outputs.json > \"$STRATA_OUTPUTS_FILE\"",
            "true",
        );
    }
    ws.profile("t", &format!("{HEAD}infrastructure:\n{entries}"));
    let r = ws.strata(&["up", "-p", "t", "-s", "dev", "-j", "16"]);
    assert_eq!(r.code, 0, "{r:?}");
    let doc: serde_yaml::Value = serde_yaml::from_str(&ws.read("home/.kube/config")).unwrap();
    let contexts = doc["contexts"].as_sequence().unwrap();
    assert_eq!(contexts.len(), 16, "{doc:?}");
    assert!(!ws.exists("home/.kube/config.lock"));
}

/// A stale lock (its strata is gone) whose recorded child group still runs: the dead
/// strata's `sleep <secs>` in a process group of its own (as `setsid sleep` would be).
/// The caller reaps it, so the group really ends.
fn stale_lock_with_a_live_child(ws: &Ws, project: &str, secs: u32) -> std::process::Child {
    use std::os::unix::process::CommandExt;
    let child = std::process::Command::new("sleep")
        .arg(secs.to_string())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut dead = std::process::Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    let host = String::from_utf8(
        std::process::Command::new("hostname")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    ws.write(
        ".strata/dev/lock",
        &serde_json::json!({
            "pid": dead_pid,
            "host": host.trim(),
            "command": "strata up",
            "since": "2020-01-01T00:00:00Z",
            "children": [[child.id(), project]],
        })
        .to_string(),
    );
    child
}

/// Issue 25: two strata waiting for the same stale lock must not both take it. Exactly
/// one runs the project; the other waits for it or is refused, and no two `pulumi up`s
/// of the stack overlap.
#[test]
fn two_waiters_for_a_stale_lock_never_both_run() {
    let mut ws = Ws::new();
    ws.env_file("PULUMI_STACK=dev\n");
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: net\n"));
    ws.pulumi_project(
        "net",
        "net",
        "resources:\n  thing:\n    type: fake:index:Thing\n    properties:\n      label: x\n",
    );
    ws.set_env("FAKE_PULUMI_DELAY_MS", "1500");
    ws.set_env("STRATA_LOCK_WAIT_SECONDS", "30");
    let mut orphan = stale_lock_with_a_live_child(&ws, "net", 3);
    let args = ["up", "-p", "t", "-s", "dev"];
    let (a, b) = std::thread::scope(|s| {
        s.spawn(|| orphan.wait().unwrap());
        let a = s.spawn(|| ws.strata(&args));
        let b = s.spawn(|| ws.strata(&args));
        (a.join().unwrap(), b.join().unwrap())
    });
    let runs = [&a, &b];
    let ran: Vec<&&Run> = runs
        .iter()
        .filter(|r| r.stdout.contains("[net] up started"))
        .collect();
    assert!(!ran.is_empty(), "nobody ran: {a:?}\n{b:?}");
    for r in runs {
        if r.code == 3 {
            // Refused: it says who holds the stack and ran nothing.
            assert!(r.stderr.contains("in use"), "{r:?}");
            assert!(!r.stdout.contains("up started"), "{r:?}");
        } else {
            // Or it waited for the other and ran after it (checked below).
            assert_eq!(r.code, 0, "each run succeeds or is refused: {a:?}\n{b:?}");
        }
    }
    // The fake's call log: no two real `up`s (not the probe that finds no stack) overlap.
    let calls = ws.calls();
    let mut spans: Vec<(u64, u64)> = Vec::new();
    for c in calls.iter().filter(|c| c["event"] == "end") {
        if c["command"] != "up" || c["exit_code"] == 6 {
            continue;
        }
        let pid = &c["pid"];
        let start = calls
            .iter()
            .find(|s| s["event"] == "start" && &s["pid"] == pid)
            .and_then(|s| s["time_ms"].as_u64())
            .expect("a start line for each end line");
        spans.push((start, c["time_ms"].as_u64().expect("end time")));
    }
    assert!(!spans.is_empty(), "no `pulumi up` ran: {calls:?}");
    spans.sort();
    for w in spans.windows(2) {
        assert!(
            w[0].1 <= w[1].0,
            "two `pulumi up`s of stack dev overlapped: {spans:?}\n{a:?}\n{b:?}"
        );
    }
}

/// Whether some process holds the kernel lock of `path` (a free lock is taken and let go).
fn lock_held(path: &std::path::Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(f) = std::fs::File::open(path) else {
        return false;
    };
    // SAFETY: flock on a descriptor `f` owns; closing `f` lets go of it.
    let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    rc != 0
}

/// Issue 25: the signal handlers are installed with the lock, so every stage after it
/// must answer them. A strata waiting for a dead owner's children (up to
/// STRATA_LOCK_WAIT_SECONDS) ends on SIGTERM within a moment, exit 143, the lock free, and
/// the stale lock still names the dead owner's child, so the next run waits for it too.
#[test]
fn sigterm_during_the_orphan_wait_exits_143_and_frees_the_lock() {
    let mut ws = Ws::new();
    ws.env_file("PULUMI_STACK=dev\n");
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: a\n"));
    ws.command_project("a", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    ws.set_env("STRATA_LOCK_WAIT_SECONDS", "60");
    let mut orphan = stale_lock_with_a_live_child(&ws, "a", 60);
    let mut run = ws.spawn(&["up", "-p", "t", "-s", "dev"]);
    // In the wait, it holds the kernel lock (its notice is printed with the header).
    let (status, took) = sigterm_once_locked(&ws, &mut run);
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let Some(status) = status else {
        let _ = orphan.kill();
        let _ = orphan.wait();
        panic!("SIGTERM during the orphan wait was ignored for 5 s: {err}");
    };
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("SIGTERM"), "{err}");
    assert!(
        took < std::time::Duration::from_secs(2),
        "answered after {took:?}: {err}"
    );
    assert!(
        !lock_held(&ws.path(".strata/dev/lock")),
        "the lock is free after SIGTERM: {err}"
    );
    // Not taken over: the dead owner and its child are still named for the next run.
    assert!(
        ws.read(".strata/dev/lock")
            .contains(&format!("{}", orphan.id())),
        "{err}"
    );
    orphan.kill().unwrap();
    orphan.wait().unwrap();
    ws.run_ok("up", &[]);
}

/// Sends SIGTERM to `run` once it holds the stack lock; its exit status (None: still
/// running 5 s later, then killed) and how long it took to answer.
fn sigterm_once_locked(
    ws: &Ws,
    run: &mut std::process::Child,
) -> (Option<std::process::ExitStatus>, std::time::Duration) {
    let lock = ws.path(".strata/dev/lock");
    let t0 = std::time::Instant::now();
    while !lock_held(&lock) {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60) && run.try_wait().unwrap().is_none(),
            "strata never took the lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    send_signal(run.id(), "TERM");
    let sent = std::time::Instant::now();
    loop {
        if let Some(s) = run.try_wait().unwrap() {
            return (Some(s), sent.elapsed());
        }
        if sent.elapsed() > std::time::Duration::from_secs(5) {
            let _ = run.kill();
            let _ = run.wait();
            return (None, sent.elapsed());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Issue 25: fingerprinting the projects comes after the lock, so it answers a signal
/// too: a project folder whose symlinks make the walk endless (`a -> .`, `b -> .`) must
/// not swallow SIGTERM. Whichever stage the signal finds (the project itself sleeps),
/// strata exits 143 within a moment and frees the lock.
#[test]
fn sigterm_while_fingerprinting_exits_143_and_frees_the_lock() {
    let ws = Ws::new();
    ws.env_file("PULUMI_STACK=dev\n");
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: x\n"));
    ws.command_project(
        "x",
        "sleep 30; printf '{}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    for l in ["a", "b"] {
        std::os::unix::fs::symlink(".", ws.path(&format!("projects/x/{l}"))).unwrap();
    }
    let mut run = ws.spawn(&["up", "-p", "t", "-s", "dev"]);
    let (status, took) = sigterm_once_locked(&ws, &mut run);
    let out = run.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let status = status.unwrap_or_else(|| panic!("SIGTERM was ignored for 5 s: {err}"));
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(
        took < std::time::Duration::from_secs(2),
        "answered after {took:?}: {err}"
    );
    assert!(!lock_held(&ws.path(".strata/dev/lock")), "the lock is free");
    assert!(!ws.exists(".strata/dev/lock"), "and removed: {err}");
}

/// strata and its Pulumi child both killed outright leave Pulumi's lock file (the fake
/// leaves it as the real file backend does); the resume clears it with `pulumi cancel`
/// since its process is gone, and runs the project. (The real tier checks the same with
/// the real CLI: real_pulumi::kill_9_…)
#[test]
fn a_stale_pulumi_lock_from_a_killed_update_is_cleared_on_resume() {
    let mut ws = Ws::new();
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: app\n"));
    ws.pulumi_project("app", "app", crate::run::BODY);
    ws.set_env("FAKE_PULUMI_DELAY_MS_APP", "30000");
    let mut first = ws.spawn(&["up", "-p", "t", "-s", "dev"]);
    let locks = ws.path(".strata/backend/.pulumi/locks/organization/app/dev");
    let json_locks = |d: &std::path::Path| -> usize {
        std::fs::read_dir(d)
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .count()
            })
            .unwrap_or(0)
    };
    let t0 = std::time::Instant::now();
    // strata notes the lock its Pulumi process holds (what lets the resume prove it
    // stale) once the update's first event arrives.
    let noted = || {
        std::fs::read(ws.path(".strata/dev/work/app/pulumi-locks.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<Vec<serde_json::Value>>(&b).ok())
            .is_some_and(|v| !v.is_empty())
    };
    while json_locks(&locks) == 0 || !noted() {
        assert!(t0.elapsed() < std::time::Duration::from_secs(60), "no lock");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let children = ws.read(".strata/dev/lock.children");
    first.kill().unwrap();
    first.wait().unwrap();
    let groups: Vec<(i32, String)> = children
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .next_back()
        .unwrap();
    for (g, _) in &groups {
        unsafe { libc::kill(-g, libc::SIGKILL) };
    }
    while groups
        .iter()
        .any(|(g, _)| unsafe { libc::kill(-g, 0) } == 0)
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(json_locks(&locks), 1);
    ws.set_env("FAKE_PULUMI_DELAY_MS_APP", "0");
    let r = ws.strata(&["up", "-p", "t", "-s", "dev", "--resume"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.all().contains("clearing the lock with `pulumi cancel`"),
        "{r:?}"
    );
    assert_eq!(json_locks(&locks), 0);
    let cancels = ws
        .calls()
        .into_iter()
        .filter(|c| c["event"] == "start" && c["command"] == "cancel")
        .count();
    assert_eq!(cancels, 1);
}
