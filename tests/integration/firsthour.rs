//! A newcomer's first hour (issue 12): help that separates global from command options,
//! completions and a man page generated from the same definitions (snapshots), and
//! `--output json` as one JSON document from every read command.

use crate::support::*;

fn run_ok(ws: &Ws, args: &[&str]) -> String {
    let r = ws.strata(args);
    assert_eq!(r.code, 0, "{args:?}: {r:?}");
    r.stdout
}

#[test]
fn help_completions_and_man_page() {
    let ws = Ws::new();
    let help = run_ok(&ws, &["--help"]);
    let words = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for code in [
        "4 changes pending",
        "5 a policy: rule denied",
        "6 a project awaits",
    ] {
        assert!(words.contains(code), "the exit codes lack {code:?}: {help}");
    }
    insta::assert_snapshot!("help", help);
    // init's -p, -s and -C say what they do for init, not the defaults of a run.
    let init = run_ok(&ws, &["init", "--help"]);
    for other in ["infra_type", "nearest ancestor", "PULUMI_STACK of"] {
        assert!(!init.contains(other), "init --help shows {other:?}: {init}");
    }
    insta::assert_snapshot!("init_help", init);
    insta::assert_snapshot!("up_help", run_ok(&ws, &["up", "--help"]));
    let bash = run_ok(&ws, &["completions", "bash"]);
    assert!(
        bash.contains("complete -F") && bash.contains("--provider"),
        "{bash}"
    );
    insta::assert_snapshot!("completions_bash", bash);
    insta::assert_snapshot!("completions_zsh", run_ok(&ws, &["completions", "zsh"]));
    for shell in ["fish", "elvish", "powershell"] {
        assert!(!run_ok(&ws, &["completions", shell]).is_empty(), "{shell}");
    }
    let man = run_ok(&ws, &["man"]);
    assert!(
        man.starts_with(".ie") || man.contains(".TH strata"),
        "{man}"
    );
    insta::assert_snapshot!("man", man);
}

/// Every read command honours `--output json` with exactly one JSON document.
#[test]
fn every_read_command_prints_one_json_document() {
    let mut ws = Ws::new();
    ws.set_env("STRATA_PASSPHRASE", "p");
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: a\n"));
    let outputs = "printf '{\"x\":1}' > \"$STRATA_OUTPUTS_FILE\"";
    ws.command_project("a", outputs, "true");
    run_ok(&ws, &["up", "-p", "t", "-s", "dev"]);
    for args in [
        vec!["show", "-p", "t", "-s", "dev"],
        vec!["validate", "-p", "t", "-s", "dev"],
        vec!["providers"],
        vec!["status", "-p", "t", "-s", "dev"],
        vec!["outputs", "-p", "t", "-s", "dev"],
        vec!["secrets", "list", "-p", "t", "-s", "dev"],
        vec!["report", "-s", "dev"],
        vec!["history", "-s", "dev"],
    ] {
        let mut a = args.clone();
        a.extend(["--output", "json"]);
        let out = run_ok(&ws, &a);
        let v: Result<serde_json::Value, _> = serde_json::from_str(&out);
        assert!(v.is_ok(), "{args:?} printed no single JSON document: {out}");
    }
}

/// Unknown providers and projects get a "did you mean".
#[test]
fn unknown_names_get_a_suggestion() {
    let ws = Ws::new();
    ws.profile(
        "local",
        &format!("{HEAD}infrastructure:\n  - path: net/vpc\n"),
    );
    ws.command_project("net/vpc", "true", "true");
    let r = ws.strata(&["show", "-p", "locl", "-s", "dev"]);
    r.expect_code(3).expect_stderr(&["Did you mean `local`?"]);
    let r = ws.strata(&["show", "-p", "local", "-s", "dev", "--project", "net/vcp"]);
    r.expect_code(3).expect_stderr(&["Did you mean `net/vpc`?"]);
}

/// Ctrl-C during a command project: the message does not speak of Pulumi, says what
/// was stopped, and gives the exact command that resumes, with the flags in force.
#[test]
fn ctrl_c_says_what_was_stopped_and_how_to_resume() {
    let ws = Ws::with_command(
        "slow",
        "trap 'exit 130' INT; echo started > \"$STRATA_ROOT/started\"; sleep 60 & wait $!",
    );
    let child = ws.spawn(&["up", "-p", "t", "-s", "dev", "-j", "2"]);
    let limit = std::time::Duration::from_secs(60);
    crate::run::wait_for(limit, "slow to start", || ws.exists("started"));
    send_signal(child.id(), "INT");
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    let says = [
        "Command projects stopped: slow",
        "strata up --resume --provider t --stack dev -j 2",
    ];
    assert_has(&err, &says);
    assert!(!err.contains("Pulumi cancelled"), "{err}");
}

/// On a terminal with `TERM=dumb` (Emacs shells, some CI), strata prints plain lines:
/// every project's lines and its hooks' output, with the placeholders filled in.
#[test]
fn term_dumb_shows_plain_lines_with_hook_output() {
    let mut ws = Ws::with_profile(
        "infrastructure:\n  - path: a\n    on_success:\n      - run: echo \"hook says ${outputs.greeting}\"\n",
    );
    ws.set_env("TERM", "dumb");
    ws.command_project(
        "a",
        "echo working; printf '{\"greeting\":\"hello-42\"}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    let (out, code) = crate::pipeline::answering(
        &ws,
        &["up", "-p", "t", "-s", "dev"],
        &[("Do you want to perform this update?", "yes")],
    );
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("[a] working"), "{out}");
    assert!(out.contains("[a] hook says hello-42"), "{out}");
}

/// `-q` prints the final line (and what failed) only; `-v` adds the children's raw
/// lines, such as the CLI calls strata makes.
#[test]
fn quiet_and_verbose() {
    let ws = Ws::with_profile("infrastructure:\n  - path: a\n  - path: vpc\n");
    let chatty = "echo chatty-line; printf '{}' > \"$STRATA_OUTPUTS_FILE\"";
    ws.command_project("a", chatty, "true");
    ws.pulumi_project("vpc", "vpc", "outputs:\n  x: 1\n");
    let q = ws.run_ok("up", &["-q"]);
    assert_eq!(q.stdout.lines().count(), 1, "{q:?}");
    assert!(q.stdout.starts_with("strata up succeeded"), "{q:?}");
    ws.run_ok("up", &["-v"])
        .expect_stdout(&["[vpc] $ pulumi up"]);
    let plain = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert!(!plain.stdout.contains("$ pulumi up"), "{plain:?}");
    assert!(
        ws.strata(&["up", "-q", "-v"]).code == 2,
        "-q and -v conflict"
    );
}

/// A run whose projects take no secret never opens the store: a passphrase store costs
/// its scrypt work factor each time it is opened (here the passphrase is even wrong).
#[test]
fn a_run_without_secrets_does_not_open_the_store() {
    let mut ws = Ws::with_profile(
        "infrastructure:\n  - path: a\n  - path: b\n    secrets:\n      - key: b:token\n        prompt: Token\n",
    );
    ws.command_project("a", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    ws.command_project("b", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    ws.set_env("STRATA_PASSPHRASE", "the-right-one");
    ws.set_env("STRATA_SECRET_B_TOKEN", "tok");
    // (--project: the built-in secrets step would need a cluster.)
    ws.run_ok("up", &["--project", "b"]);
    assert!(ws.exists("config/secrets/dev.age"));
    ws.set_env("STRATA_PASSPHRASE", "a-wrong-one");
    let r = ws.run("up", &["--project", "a"]);
    assert_eq!(r.code, 0, "the store was opened: {r:?}");
    let r = ws.run("up", &["--project", "b"]);
    assert_eq!(r.code, 3, "b takes a secret: {r:?}");
    r.expect_stderr(&["wrong passphrase"]);
}

/// On a file backend, `history` lists this checkout's runs, newest first (who ran them
/// is not in a journal), and `status` shows no lease.
#[test]
fn history_on_a_file_backend_lists_this_checkouts_runs() {
    let ws = Ws::with_profile("infrastructure:\n  - path: a\n  - path: b\n");
    ws.command_project("a", "true", "true");
    ws.command_project("b", "exit 1", "true");
    let empty = run_ok(&ws, &["history", "-s", "dev"]);
    assert!(empty.contains("no run recorded yet"), "{empty}");
    assert_eq!(ws.strata(&["up", "-p", "t", "-s", "dev"]).code, 1);
    run_ok(&ws, &["destroy", "-p", "t", "-s", "dev", "--yes"]);
    let text = run_ok(&ws, &["history", "-s", "dev"]);
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("strata ")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(
        lines[0].contains("strata destroy") && lines[0].contains("2 succeeded"),
        "{text}"
    );
    assert!(
        lines[1].contains("strata up") && lines[1].contains("1 succeeded, 1 failed"),
        "{text}"
    );
    assert!(
        !lines[1].contains(" - ") && lines[1].contains('@'),
        "who ran it, user@host, on a file backend too: {text}"
    );
    let v: serde_json::Value = serde_json::from_str(&run_ok(
        &ws,
        &["history", "-s", "dev", "-n", "1", "--output", "json"],
    ))
    .unwrap();
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["runs"][0]["status"], "succeeded", "{v}");
    assert_eq!(v["runs"][0]["counts"]["succeeded"], 2, "{v}");
    assert!(v["lease"].is_null() && v["backend"].is_null(), "{v}");
    let st: serde_json::Value = serde_json::from_str(&run_ok(
        &ws,
        &["status", "-p", "t", "-s", "dev", "--output", "json"],
    ))
    .unwrap();
    assert!(st["lease"].is_null(), "{st}");
}

/// Issue 43, 8: `history` says what a run is: `running` while it holds the stack (not
/// `succeeded` with its counts so far), and an `up --changed` that left every project as
/// it was `succeeded` with them counted skipped (not a blank result).
#[test]
fn history_shows_a_running_run_as_running_and_a_run_with_nothing_to_do_as_succeeded() {
    let ws = Ws::with_profile("infrastructure:\n  - path: a\n  - path: b\n");
    ws.command_project("a", "true", "true");
    ws.command_project("b", "sleep 30", "true");
    let mut up = ws.spawn(&["up", "-p", "t", "-s", "dev"]);
    let t0 = std::time::Instant::now();
    let mut seen = String::new();
    while t0.elapsed() < std::time::Duration::from_secs(20) {
        seen = run_ok(&ws, &["history", "-s", "dev", "--output", "json"]);
        if seen.contains("\"succeeded\":1") || seen.contains("\"running\"") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let v: serde_json::Value = serde_json::from_str(&seen).unwrap();
    assert_eq!(v["runs"][0]["status"], "running", "{v}");
    // Stopped as Ctrl-C stops it: its children go with it, nothing is left running.
    crate::run::sigint(up.id());
    let _ = up.wait();
    // Let b finish quickly, and run up once; then nothing changed.
    ws.command_project("b", "true", "true");
    let done = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_eq!(done.code, 0, "{done:?}");
    let nothing = ws.strata(&["up", "-p", "t", "-s", "dev", "--changed"]);
    assert_eq!(nothing.code, 0, "{nothing:?}");
    let v: serde_json::Value = serde_json::from_str(&run_ok(
        &ws,
        &["history", "-s", "dev", "-n", "1", "--output", "json"],
    ))
    .unwrap();
    assert_eq!(v["runs"][0]["status"], "succeeded", "{v}");
    assert_eq!(v["runs"][0]["counts"]["skipped"], 2, "{v}");
}

/// Issue 44: `status` shows what is deployed (the last successful `up`, when) apart
/// from the last operation: a preview after an `up` hides nothing, and a destroy
/// leaves nothing deployed.
#[test]
fn status_shows_what_is_deployed_apart_from_the_last_operation() {
    let ws = Ws::with_profile("infrastructure:\n  - path: a\n");
    ws.command_project("a", "true", "true");
    run_ok(&ws, &["up", "-p", "t", "-s", "dev"]);
    run_ok(&ws, &["preview", "-p", "t", "-s", "dev"]);
    let doc: serde_json::Value = serde_json::from_str(&run_ok(
        &ws,
        &["status", "-p", "t", "-s", "dev", "--output", "json"],
    ))
    .unwrap();
    let a = &doc["projects"][0];
    assert_eq!(a["operation"], "preview", "{doc}");
    assert!(
        a["deployed"]["at"].is_string(),
        "the up is still deployed: {doc}"
    );
    let text = run_ok(&ws, &["status", "-p", "t", "-s", "dev"]);
    assert!(text.contains("deployed"), "{text}");
    run_ok(&ws, &["destroy", "-p", "t", "-s", "dev", "--yes"]);
    let doc: serde_json::Value = serde_json::from_str(&run_ok(
        &ws,
        &["status", "-p", "t", "-s", "dev", "--output", "json"],
    ))
    .unwrap();
    assert!(doc["projects"][0]["deployed"].is_null(), "{doc}");
}
