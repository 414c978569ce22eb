//! Secret outputs between projects: handed on as secure config or in plaintext to the
//! child that needs them, never on a command line, and redacted in everything strata
//! prints or writes.

use serde_json::{Value, json};

use super::{calls_text, ends, network_and_web, the_up, workspace};
use crate::support::*;

#[test]
fn secret_output_wired_as_input_arrives_as_secure_value() {
    const SECRET: &str = "hunter2-Zq9-never-in-plaintext";
    let mut ws = network_and_web(&[], &[("vpc_id", "vpc_id"), ("db_password", "db_password")]);
    ws.fake_secret_outputs("network", json!({"db_password": SECRET}));
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        &format!(r#"{{"web:db_password":"{SECRET}","web:vpc_id":"vpc-id"}}"#),
    );

    let r = ws.strata_ok(&["up"]);

    // Pulumi saw a secure value, whose decryption is the secret (the fake checked it).
    let web = the_up(&ws, 0, "web");
    assert_eq!(web["config"]["web:db_password"], "[secure]", "{web:#}");
    assert_eq!(web["config"]["web:vpc_id"], "vpc-id");

    // The per-project config file holds it as `secure:`, never in plaintext.
    let text = ws.read(".strata/dev/config/apps_2fweb.yaml");
    assert!(
        !text.contains(SECRET),
        "plaintext secret in the config file:\n{text}"
    );
    let cfg: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    assert!(
        cfg["config"]["web:db_password"].get("secure").is_some(),
        "not a secure value:\n{text}"
    );

    // It went to Pulumi on stdin, never on a command line.
    for c in ws.calls() {
        assert!(
            !c["argv"].to_string().contains(SECRET),
            "secret in argv: {c}"
        );
    }
    let sets: Vec<Value> = ends(&ws, 0)
        .into_iter()
        .filter(|c| c["command"] == "config set" && c["project"] == "web")
        .collect();
    assert!(
        !sets.is_empty(),
        "no `pulumi config set --secret` for web:\n{}",
        calls_text(&ws)
    );
    for s in &sets {
        assert_eq!(s["stdin"], "pipe", "{s}");
    }

    // Not in strata's output, and nowhere under .strata in plaintext.
    assert!(!r.all().contains(SECRET), "{r:?}");
    assert_nowhere_under(&ws, ".strata", SECRET);
}

/// `up` = a Pulumi project `base/a` with a plain output `out` and a secret output
/// `tok`, and a command project `apps/b` taking both as inputs, which checks them and
/// prints only whether they match (and a hook that echoes the secret).
fn secret_pair_workspace() -> Ws {
    let mut ws = workspace(
        "infrastructure:\n  - path: base/a\n    on_success:\n      - run: echo \"hook sees ${outputs.tok}\"\n  - path: apps/b\n    inputs:\n      b:o: base/a:out\n      b:t: base/a:tok\n",
    );
    ws.pulumi_project("base/a", "a", "outputs:\n  out: hello\n");
    ws.fake_secret_outputs("a", json!({"tok": "SUPERSECRETOUT"}));
    ws.command_project(
        "apps/b",
        "test \"$STRATA_INPUT_B_O\" = hello && test \"$STRATA_INPUT_B_T\" = SUPERSECRETOUT && echo inputs-ok; echo \"b sees $STRATA_INPUT_B_T\"; env | sort > \"$HOME/b-env\"",
        "true",
    );
    ws
}

#[test]
fn a_piecemeal_run_hands_downstream_the_secret_output_not_its_mask() {
    let ws = secret_pair_workspace();
    ws.strata_ok(&["up"]).expect_stdout(&["inputs-ok"]);
    // The secret input arrives in plaintext when its upstream is not run.
    let r = ws.strata_ok(&["up", "--project", "apps/b"]);
    r.expect_stdout(&["inputs-ok"]);
}

#[test]
fn secret_outputs_are_redacted_in_hooks_command_output_and_logs() {
    let ws = secret_pair_workspace();
    let r = ws.strata_ok(&["up"]);
    assert!(r.stdout.contains("hook sees [secret]"), "{r:?}");
    assert!(r.stdout.contains("b sees [secret]"), "{r:?}");
    assert!(!r.all().contains("SUPERSECRETOUT"), "{r:?}");
    for (path, bytes) in ws.files_under(".strata/dev") {
        if path.components().any(|c| c.as_os_str() == "backend") {
            continue; // the fake's own (encrypted) state
        }
        assert!(
            !String::from_utf8_lossy(&bytes).contains("SUPERSECRETOUT"),
            "secret output in {}",
            path.display()
        );
    }
}

#[test]
fn children_never_get_stratas_own_secret_variables() {
    let mut ws = secret_pair_workspace();
    ws.set_env("STRATA_PASSPHRASE", "age-pass-XYZ");
    ws.set_env("STRATA_SECRET_OTHER_PW", "other-SECRET2");
    ws.set_env(
        "FAKE_PULUMI_LOG_ENV",
        "STRATA_PASSPHRASE,STRATA_SECRET_OTHER_PW",
    );
    let r = ws.strata_ok(&["up"]);
    let env = ws.read("home/b-env");
    assert!(!env.contains("STRATA_PASSPHRASE="), "{env}");
    assert!(!env.contains("STRATA_SECRET_OTHER_PW="), "{env}");
    for c in ws.calls() {
        if let Some(e) = c["env"].as_object() {
            assert!(!e.contains_key("STRATA_PASSPHRASE"), "{c}");
            assert!(!e.contains_key("STRATA_SECRET_OTHER_PW"), "{c}");
        }
    }
    assert!(!r.all().contains("age-pass-XYZ") && !r.all().contains("other-SECRET2"));
}
