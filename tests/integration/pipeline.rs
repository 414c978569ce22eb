//! The run pipeline (DESIGN.md §3): resolve → preflight → ask → lock → write. Nothing is
//! written before the lock; preflight problems come before any question; `validate`
//! fails wherever `up` would fail before starting; backends are preflighted and a
//! relative `file://` backend is one backend for every project.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use crate::support::*;

/// A profile that asks a config key and a secret, over one Pulumi project; the store's
/// passphrase, the secret and the region are given (only `t:size` is left to ask).
fn answered_workspace() -> Ws {
    let mut ws = Ws::with_profile(
        "config:\n  - key: aws:region\n    prompt: AWS region\n  - key: t:size\n    prompt: Size\n    default: 3\n    type: int\nsecrets:\n  - key: t:token\n    prompt: The token\ninfrastructure:\n  - path: alpha\n",
    );
    ws.pulumi_project("alpha", "alpha", "outputs:\n  x: 1\n");
    ws.set_env("STRATA_PASSPHRASE", "store pass");
    ws.set_env("STRATA_SECRET_T_TOKEN", "tok-123");
    ws.stack_config("dev", "config:\n  aws:region: us-east-1\n");
    ws
}

fn snapshot(ws: &Ws) -> BTreeMap<PathBuf, Vec<u8>> {
    ws.files_under("").into_iter().collect()
}

pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// A run refused by the lock leaves every file byte-for-byte as it was: no stack config,
/// no secrets store, no env file entry, no backend folder.
#[test]
fn a_run_refused_by_the_lock_writes_nothing() {
    let ws = answered_workspace();
    // Held by a live process (this test) on this host.
    ws.write(
        ".strata/dev/lock",
        &serde_json::json!({
            "pid": std::process::id(),
            "host": hostname(),
            "command": "strata up",
            "since": "2026-01-01T00:00:00Z"
        })
        .to_string(),
    );
    let before = snapshot(&ws);
    ws.run("up", &[])
        .expect_code(3)
        .expect_stderr(&["is in use"]);
    let after = snapshot(&ws);
    let changed: Vec<_> = after
        .iter()
        .filter(|(p, b)| before.get(*p) != Some(*b))
        .map(|(p, _)| p.clone())
        .chain(before.keys().filter(|p| !after.contains_key(*p)).cloned())
        .collect();
    assert!(
        changed.is_empty(),
        "files changed by a refused run: {changed:?}"
    );
    assert!(!ws.exists("config/secrets/dev.age"));
    assert!(!ws.exists(".strata/backend"));
    assert!(ws.calls().is_empty(), "no pulumi call: {:?}", ws.calls());
}

/// Once the lock is free, the same run writes what it asked (the control for the test
/// above): the config key's default, the secret into the store, the stack into the env
/// file.
#[test]
fn the_same_run_with_the_lock_free_writes_its_answers() {
    let ws = answered_workspace();
    // (--project: the built-in secrets step would need a cluster.)
    ws.run_ok("up", &["--project", "alpha"]);
    let cfg = ws.read("config/pulumi/Pulumi.dev.yaml");
    assert!(cfg.contains("t:size: 3"), "{cfg}");
    assert!(cfg.contains("kubernetes:infra_type: test"), "{cfg}");
    assert!(ws.exists("config/secrets/dev.age"));
    assert!(
        ws.read("config/pulumi/environment")
            .contains("PULUMI_STACK=dev"),
        "the first up remembers the stack"
    );
    // ...so the next command needs no --stack.
    ws.strata(&["status"]).expect_code(0);
}

/// Runs `strata ARGS` on a pseudo-terminal (so it may ask), typing nothing; returns
/// everything it printed and its exit code.
fn on_a_terminal(ws: &Ws, args: &[&str]) -> (String, i32) {
    answering(ws, args, &[])
}

/// [`on_a_terminal`], typing each answer once its prompt text has been printed.
pub fn answering(ws: &Ws, args: &[&str], answers: &[(&str, &str)]) -> (String, i32) {
    let strata = ws.command(args);
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg("\"$0\" \"$@\"; echo \"EXIT=$?\"")
        .arg(strata.get_program())
        .args(strata.get_args())
        .current_dir(strata.get_current_dir().unwrap())
        .env_clear();
    for (k, v) in strata.get_envs() {
        if let Some(v) = v {
            sh.env(k, v);
        }
    }
    if !strata.get_envs().any(|(k, _)| k == "TERM") {
        sh.env("TERM", "xterm");
    }
    let mut p = rexpect::session::spawn_command(sh, Some(30_000)).expect("spawn on a pty");
    let mut seen = String::new();
    for (prompt, answer) in answers {
        seen.push_str(
            &p.exp_string(prompt)
                .unwrap_or_else(|e| panic!("no prompt {prompt:?}: {e}")),
        );
        seen.push_str(prompt);
        p.send_line(answer).expect("type");
    }
    let out = seen + &p.exp_eof().expect("strata ends without being answered");
    let code = out
        .rsplit_once("EXIT=")
        .and_then(|(_, c)| c.trim().parse().ok())
        .unwrap_or(-1);
    (out, code)
}

/// On a terminal, a first `up` with `pulumi` missing says so before asking anything.
#[test]
fn a_missing_pulumi_is_reported_before_any_question() {
    let mut ws = Ws::without_pulumi();
    ws.set_env("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE);
    let asking = "config:\n  - key: aws:region\n    prompt: AWS region\nsecrets:\n  - key: t:token\n    prompt: The token\ninfrastructure:\n  - path: alpha\n";
    ws.profile("t", &format!("{HEAD}{asking}"));
    ws.pulumi_project("alpha", "alpha", "");
    let (out, code) = on_a_terminal(&ws, &["up", "--provider", "t", "--stack", "dev"]);
    assert_eq!(code, 3, "{out}");
    assert!(out.contains("pulumi CLI was not found"), "{out}");
    assert!(
        !out.contains("AWS region"),
        "a question was asked first: {out}"
    );
    assert!(
        !out.contains("The token"),
        "a question was asked first: {out}"
    );
    assert!(!ws.exists("config/pulumi/Pulumi.dev.yaml"));
}

/// `validate` is resolve + preflight: it fails where `up` would fail before starting,
/// and says every problem at once.
#[test]
fn validate_fails_where_up_would() {
    let mut ws = Ws::without_pulumi();
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: alpha\n"));
    ws.pulumi_project("alpha", "alpha", "");
    ws.set_env("PULUMI_CONFIG_PASSPHRASE", "");
    ws.env_file("PULUMI_BACKEND_URL=s3://bucket/state\n");
    let mut env_less = ws;
    env_less
        .env
        .retain(|(k, _)| k != "PULUMI_CONFIG_PASSPHRASE");
    let both = ["pulumi CLI was not found", "PULUMI_CONFIG_PASSPHRASE"];
    let v = env_less.run("validate", &[]);
    let said = v.expect_code(3).all();
    assert_has(&said, &both);
    // validate starts nothing by nature: its checks do not say so (issue 46).
    assert!(!said.contains("Nothing was started"), "{said}");
    env_less
        .run("up", &[])
        .expect_code(3)
        .expect_stderr(&both)
        .expect_stderr(&["Nothing was started"]);
}

/// s3://, gs:// and azblob:// backends use the passphrase secrets provider too: without
/// a passphrase the run stops in preflight, before any pulumi call.
#[test]
fn every_self_managed_backend_needs_a_passphrase() {
    for url in ["s3://bucket/state", "gs://bucket", "azblob://container"] {
        let mut ws = Ws::new();
        ws.env.retain(|(k, _)| k != "PULUMI_CONFIG_PASSPHRASE");
        ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: alpha\n"));
        ws.pulumi_project("alpha", "alpha", "");
        ws.env_file(&format!("PULUMI_BACKEND_URL={url}\n"));
        let r = ws.strata(&["up", "--provider", "t", "--stack", "dev"]);
        assert_eq!(r.code, 3, "{url}: {r:?}");
        assert!(r.stderr.contains(url), "{url}: {r:?}");
        assert!(r.stderr.contains("PULUMI_CONFIG_PASSPHRASE"), "{r:?}");
        assert!(ws.calls().is_empty(), "{url}: pulumi was called");
    }
}

/// `PULUMI_BACKEND_URL=file://./state` in the env file is the workspace's `state/`
/// folder for every project (Pulumi would resolve it against each project's --cwd).
#[test]
fn a_relative_file_backend_is_resolved_against_the_workspace_root() {
    let ws = Ws::with_profile(
        "infrastructure:\n  - path: net/alpha\n  - path: app/bravo\n    inputs:\n      bravo:from_alpha: net/alpha:x\n",
    );
    ws.pulumi_project("net/alpha", "alpha", "outputs:\n  x: 42\n");
    ws.pulumi_project(
        "app/bravo",
        "bravo",
        "config:\n  from_alpha:\n    type: integer\noutputs:\n  y: ${from_alpha}\n",
    );
    ws.env_file("PULUMI_BACKEND_URL=file://./state\n");
    ws.run_ok("up", &[]);
    let want = format!("file://{}", ws.path("state").display());
    for c in ws.calls().iter().filter(|c| c["event"] == "start") {
        assert_eq!(c["env"]["PULUMI_BACKEND_URL"], want.as_str(), "{c}");
    }
    assert!(ws.exists("state/.pulumi/stacks/alpha/dev.json"));
    assert!(ws.exists("state/.pulumi/stacks/bravo/dev.json"));
    assert!(!ws.exists("projects/net/alpha/state"));
}

/// Read-only commands work for any `--stack`; only writing commands enforce the env
/// file's stack.
#[test]
fn read_only_commands_accept_any_stack() {
    let ws = Ws::with_command("alpha", "echo '{}' > \"$STRATA_OUTPUTS_FILE\"");
    ws.env_file("PULUMI_STACK=dev\n");
    for args in [
        vec!["status", "-s", "prod", "-p", "t"],
        vec!["show", "-s", "prod", "-p", "t"],
        vec!["outputs", "-s", "prod", "-p", "t"],
        vec!["secrets", "list", "-s", "prod", "-p", "t"],
        vec!["export", "-s", "prod", "-p", "t", "--format", "argo"],
    ] {
        let r = ws.strata(&args);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
    }
    // Commands that write take it too: -s wins for the run, as in the Pulumi CLI.
    let up = ws.strata(&["up", "-s", "prod", "-p", "t"]);
    assert_eq!(up.code, 0, "{up:?}");
    assert_eq!(ws.read("config/pulumi/environment"), "PULUMI_STACK=dev\n");
}

/// An interactive destroy asks the user to type the stack name: a bare `y` destroys
/// nothing (exit 1); the name destroys.
#[test]
fn destroy_asks_for_the_stack_name_not_a_keypress() {
    let ws = Ws::with_profile("infrastructure:\n  - path: a\n");
    let destroy = "echo destroyed >> \"$STRATA_ROOT/destroyed\"";
    ws.command_project("a", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", destroy);
    ws.run_ok("up", &[]);
    let (out, code) = answering(
        &ws,
        &["destroy", "-p", "t", "-s", "dev"],
        &[("Type the stack name", "y")],
    );
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Nothing was destroyed"), "{out}");
    assert!(!ws.exists("destroyed"));
    let (out, code) = answering(
        &ws,
        &["destroy", "-p", "t", "-s", "dev"],
        &[("Type the stack name", "dev")],
    );
    assert_eq!(code, 0, "{out}");
    assert!(ws.exists("destroyed"));
}

/// On a terminal `up` does what `pulumi up` does (issue 45): it previews every project,
/// shows the table, asks once; "no" changes nothing (exit 1), "yes" applies exactly the
/// plans it showed (`pulumi up --plan` of the plan each preview saved). On a fresh stack
/// what could not be previewed (blocked behind what was never deployed, as the table
/// says) is brought up without a plan. `--yes` asks nothing and previews nothing.
#[test]
fn up_on_a_terminal_previews_everything_asks_once_and_applies_the_plans_shown() {
    let ws = crate::run::workspace(crate::run::CHAIN, crate::run::CHAIN_PATHS);
    let up = ["up", "-p", "t", "-s", "dev"];
    let commands = |ws: &Ws| -> Vec<(String, String)> {
        let all = ws.calls();
        crate::run::starts(&all)
            .iter()
            .map(|c| (c["command"].to_string(), c["argv"].to_string()))
            .collect()
    };
    let (out, code) = answering(&ws, &up, &[("Do you want to perform this update?", "no")]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("strata preview"), "the preview first: {out}");
    assert!(
        out.contains("blocked"),
        "what cannot be previewed yet: {out}"
    );
    assert!(out.contains("Nothing was changed"), "{out}");
    let calls = commands(&ws);
    assert!(
        calls.iter().all(|(c, _)| c != "\"up\""),
        "no update: {calls:?}"
    );

    // "yes": the updates it made, each its argv.
    let said_yes = || -> Vec<String> {
        crate::run::clear_calls(&ws);
        let (out, code) = answering(&ws, &up, &[("Do you want to perform this update?", "yes")]);
        assert_eq!(code, 0, "{out}");
        let ups: Vec<String> = commands(&ws)
            .into_iter()
            .filter(|(c, _)| c == "\"up\"")
            .map(|(_, a)| a)
            .collect();
        assert_eq!(ups.len(), 3, "{ups:?}");
        ups
    };
    let ups = said_yes();
    assert!(
        ups[0].contains(".strata/dev/reviews/") && ups[0].contains("plans/alpha.json"),
        "alpha's plan, as shown: {}",
        ups[0]
    );
    for u in &ups[1..] {
        assert!(
            !u.contains("--plan"),
            "blocked in the preview: no plan: {u}"
        );
    }

    // Deployed: each project's plan is shown and applied.
    let ups = said_yes();
    for (u, p) in ups.iter().zip(crate::run::CHAIN_PATHS) {
        assert!(
            u.contains(&format!("plans/{p}.json")),
            "the plan shown: {u}"
        );
    }

    crate::run::clear_calls(&ws);
    let mut yes = up.to_vec();
    yes.push("--yes");
    let (out, code) = answering(&ws, &yes, &[]);
    assert_eq!(code, 0, "{out}");
    let calls = commands(&ws);
    assert!(
        calls
            .iter()
            .all(|(c, a)| c == "\"up\"" && !a.contains("--plan")),
        "--yes previews nothing: {calls:?}"
    );
}

/// `--lock-timeout` waits for the checkout's own stack lock too (another `strata up` of
/// this stack in this checkout), not only for a shared backend's lease: released while
/// it waits, the run goes on; held past the timeout, it refuses naming the holder.
#[test]
fn lock_timeout_waits_for_the_local_lock() {
    use std::os::fd::AsRawFd;
    let ws = crate::run::workspace("  - path: alpha\n", &["alpha"]);
    crate::run::ok(&ws, "up", &[]);
    let path = ws.path(".strata/dev/lock");
    let hold = || {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .unwrap();
        // SAFETY: flock on a descriptor this File owns.
        assert_eq!(
            unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        std::fs::write(
            &path,
            serde_json::json!({"pid": std::process::id(), "host": hostname(), "command": "strata up", "since": "2026-01-01T00:00:00Z"}).to_string(),
        )
        .unwrap();
        f
    };
    let held = hold();
    let waiting =
        crate::run::Background::start(&ws, &crate::run::args("up", &["--lock-timeout", "20s"]));
    std::thread::sleep(std::time::Duration::from_millis(1500));
    // Released as strata releases it: the file goes, then the kernel lock.
    std::fs::remove_file(&path).unwrap();
    drop(held);
    let r = waiting.wait(std::time::Duration::from_secs(60));
    assert_eq!(r.code, 0, "went on once the lock was free: {r:?}");
    assert!(r.stderr.contains("waiting"), "said it waits: {r:?}");

    let _held = hold();
    let started = std::time::Instant::now();
    let r = ws.strata(&crate::run::args("up", &["--lock-timeout", "1s"]));
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("is in use"), "{r:?}");
    assert!(
        r.stderr.contains("still held after 1s"),
        "says it waited: {r:?}"
    );
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "it waited"
    );
    // Refused at once, it says how to wait instead (issue 46).
    let r = ws.strata(&crate::run::args("up", &[]));
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("--lock-timeout 10m"), "{r:?}");
}

/// Issue 42: `--keep-going` does not skip what does not need the failure. A kubernetes
/// step waits for every infrastructure step (the stage barrier); under `--keep-going` it
/// runs once they have ended when its entry does not need the one that failed, while
/// one that needs it is skipped. Without `--keep-going` the run stops as before.
#[test]
fn keep_going_runs_kubernetes_steps_that_do_not_need_the_failure() {
    let ws = Ws::with_profile(
        "infrastructure:\n  - path: net\n    needs: []\n  - path: dns\n    needs: []\nkubernetes:\n  - path: app\n    needs: []\n  - path: db\n    needs: [net]\n",
    );
    ws.command_project("net", "exit 1", "true");
    for p in ["dns", "app", "db"] {
        ws.command_project(p, "true", "true");
    }
    let r = ws.strata(&UP_KEEP_GOING_JSON);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.finished_with("succeeded"), ["app", "dns"], "{r:?}");
    assert_eq!(r.finished_with("skipped"), ["db"], "db needs net: {r:?}");
    let r = ws.strata(&["up", "-p", "t", "-s", "dev", "--output", "json"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        !r.finished_with("succeeded").contains(&"app".to_string()),
        "without --keep-going the barrier holds: {r:?}"
    );
}
