//! The command line's contract: unknown flags, and the errors the real CLI gives for
//! misuse.

use crate::support::*;

#[test]
fn unknown_flags_are_refused_per_command() {
    let ws = Ws::new("flags");
    let cwd = ws.path("vpc").display().to_string();
    for argv in [
        vec!["stack", "init", "--stack", "dev", "--config-file", "x.yaml"],
        vec![
            "stack",
            "output",
            "--json",
            "--stack",
            "dev",
            "--config-file",
            "x.yaml",
        ],
        vec!["preview", "--stack", "dev", "--yes"],
        vec!["up", "--stack", "dev", "--yes", "--no-such-flag"],
    ] {
        let mut a = argv.clone();
        a.extend(["--cwd", cwd.as_str()]);
        let out = ws.cmd(&a).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{argv:?}");
        assert!(
            text(&out.stderr).contains("unknown flag: --"),
            "{argv:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn cli_contract_errors() {
    let ws = Ws::new("errors");
    // No stack yet: 6.
    let out = ws.run("vpc", UP, &[]);
    assert_eq!(out.status.code(), Some(6));
    ws.ok("vpc", &["stack", "init"]);
    let out = ws.run("vpc", &["stack", "init"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("already exists"));
    // Non-interactive without --yes: 2.
    let out = ws.run("vpc", &["up"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(
        "--yes or --skip-preview must be passed in to proceed when running in non-interactive mode"
    ));
    // No passphrase.
    let a = ws.std_args("vpc", UP);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = ws
        .cmd(&a)
        .env_remove("PULUMI_CONFIG_PASSPHRASE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("passphrase must be set"));
    // Wrong passphrase (once the shared config holds the stack's salt).
    ws.ok("vpc", UP);
    let out = ws.run("vpc", UP, &[("PULUMI_CONFIG_PASSPHRASE", "nope")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("incorrect passphrase"));
    // Unknown command.
    let out = ws.cmd(&["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("unknown command \"frobnicate\" for \"pulumi\""));
    // No project.
    let out = ws
        .cmd(&["up", "--cwd", "/", "-s", "dev", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no Pulumi.yaml project file found"));
    assert_eq!(
        text(&ws.cmd(&["version"]).output().unwrap().stdout),
        "v3.230.0\n"
    );
}
