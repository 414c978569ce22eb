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
    insta::assert_snapshot!("help", run_ok(&ws, &["--help"]));
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
    ws.command_project("a", "printf '{\"x\":1}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    run_ok(&ws, &["up", "-p", "t", "-s", "dev"]);
    for args in [
        vec!["show", "-p", "t", "-s", "dev"],
        vec!["validate", "-p", "t", "-s", "dev"],
        vec!["providers"],
        vec!["status", "-p", "t", "-s", "dev"],
        vec!["outputs", "-p", "t", "-s", "dev"],
        vec!["secrets", "list", "-p", "t", "-s", "dev"],
    ] {
        let mut a = args.clone();
        a.extend(["--output", "json"]);
        let out = run_ok(&ws, &a);
        let v: Result<serde_json::Value, _> = serde_json::from_str(&out);
        assert!(v.is_ok(), "{args:?} printed no single JSON document: {out}");
    }
}
