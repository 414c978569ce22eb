//! A stack's life: init, up, outputs, references across projects, destroy, secrets
//! through stdin and hooks, and concurrent inits on a fresh backend.

use serde_json::{Value, json};
use std::process::{Child, Stdio};

use crate::support::*;

#[test]
fn init_up_outputs_reference_destroy() {
    let ws = Ws::new("flow");
    ws.ok("vpc", &["stack", "init"]);
    // `stack init` has no --config-file: its salt goes beside the project.
    let own = std::fs::read_to_string(ws.path("vpc/Pulumi.dev.yaml")).unwrap();
    assert!(own.starts_with("encryptionsalt: v1:"), "{own}");

    let evs = up_json(&ws, "vpc");
    for (i, e) in evs.iter().enumerate() {
        assert_eq!(e["sequence"], json!(i));
        assert!(e["timestamp"].is_u64());
        let kinds: Vec<&String> = e
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "sequence" && *k != "timestamp")
            .collect();
        assert_eq!(kinds.len(), 1, "{e}");
    }
    assert!(evs[0].get("preludeEvent").is_some());
    assert_eq!(evs[0]["preludeEvent"]["config"]["aws:region"], "us-west-2");
    assert!(evs.last().unwrap().get("cancelEvent").is_some());
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"create": 3}));
    assert_eq!(summary["isPreview"], json!(false));
    let stack_urn = "urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev";
    let first_pre = evs.iter().find_map(|e| e.get("resourcePreEvent")).unwrap();
    assert_eq!(first_pre["metadata"]["urn"], stack_urn);
    let last_out = evs
        .iter()
        .rev()
        .find_map(|e| e.get("resOutputsEvent"))
        .unwrap();
    assert_eq!(last_out["metadata"]["urn"], stack_urn);
    assert_eq!(
        last_out["metadata"]["new"]["outputs"],
        json!({"vpc_id": "net-id", "region": "us-west-2", "token": {
            "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
            "ciphertext": "[secret]"
        }}),
        "engine events serialize a secret with its signature, as the real CLI does"
    );
    assert!(!text(&ws.ok("vpc", &["stack", "output", "--json"]).stdout).contains("tok-dev"));

    // stack output: masked, then shown.
    let masked = ws.outputs("vpc", &[]);
    assert_eq!(masked["token"], "[secret]");
    let shown = ws.outputs("vpc", &["--show-secrets"]);
    assert_eq!(shown["token"], "tok-dev");
    // The secret is encrypted at rest.
    let raw = std::fs::read_to_string(ws.path("backend/.pulumi/stacks/vpc/dev.json")).unwrap();
    assert!(!raw.contains("tok-dev") && raw.contains("ciphertext"));

    // A second project reads the first through a stack reference.
    ws.ok("eks", &["stack", "init"]);
    ws.ok("eks", UP);
    let eks = ws.outputs("eks", &["--show-secrets"]);
    assert_eq!(
        eks,
        json!({"cluster_vpc": "net-id", "upstream_token": "tok-dev"})
    );

    // A second up changes nothing.
    let evs = up_json(&ws, "vpc");
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"same": 3}));

    // destroy keeps the stack, empties it.
    let evs = events(&ws.ok("vpc", &["destroy", "--yes", "--skip-preview", "--json"]));
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"delete": 3}));
    assert!(resources_in_state(&ws, "vpc").is_empty());
    let outs = ws.outputs("vpc", &[]);
    assert_eq!(outs, json!({}));

    // A stack that does not exist: exit 6.
    let eks = ws.path("eks").display().to_string();
    let out = ws
        .cmd(&["up", "--yes", "--cwd", &eks, "--stack", "prod"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("error: no stack named 'prod' found"));
}

#[test]
fn stack_reference_to_a_missing_stack_fails_the_update() {
    let ws = Ws::new("ref");
    ws.ok("eks", &["stack", "init"]);
    let out = ws.run("eks", &["up", "--yes", "--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&out);
    let diag: Vec<&Value> = evs
        .iter()
        .filter_map(|e| e.get("diagnosticEvent"))
        .collect();
    assert!(
        diag[0]["message"]
            .as_str()
            .unwrap()
            .contains("unknown stack \"organization/vpc/dev\"")
    );
    assert!(evs.iter().any(|e| e.get("resOpFailedEvent").is_some()));
}

#[test]
fn secrets_through_stdin_config_and_hooks() {
    let ws = Ws::new("hooks");
    ws.ok("vpc", &["stack", "init"]);
    let a = ws.std_args("vpc", &["config", "set", "--secret", "dbpass"]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let mut child = ws.cmd(&a).stdin(Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"s3cr3t\n").unwrap();
    assert!(child.wait().unwrap().success());
    let cfg = std::fs::read_to_string(ws.path("stack.yaml")).unwrap();
    assert!(cfg.contains("vpc:dbpass:") && cfg.contains("secure: v1:") && !cfg.contains("s3cr3t"));

    let listed: Value =
        serde_json::from_slice(&ws.ok("vpc", &["config", "--json"]).stdout).unwrap();
    assert_eq!(listed["vpc:dbpass"], json!({"secret": true}));
    assert_eq!(listed["aws:region"]["value"], "us-west-2");

    // Expected config (decrypted) passes; a mismatch is exit 2.
    let want = r#"{"aws:region":"us-west-2","vpc:dbpass":"s3cr3t"}"#;
    let out = ws.run("vpc", UP, &[("FAKE_PULUMI_EXPECT_CONFIG_VPC", want)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = ws.run(
        "vpc",
        UP,
        &[("FAKE_PULUMI_EXPECT_CONFIG_VPC", r#"{"cidr":"x"}"#)],
    );
    assert_eq!(out.status.code(), Some(2));

    // Extra outputs, secret outputs.
    ws.run(
        "vpc",
        UP,
        &[
            ("FAKE_PULUMI_OUTPUTS_VPC", r#"{"extra":"x"}"#),
            ("FAKE_PULUMI_SECRET_OUTPUTS_VPC", r#"{"kubeconfig":"kc"}"#),
        ],
    );
    let outs = ws.outputs("vpc", &[]);
    assert_eq!(outs["extra"], "x");
    assert_eq!(outs["kubeconfig"], "[secret]");

    // A failing update: diagnostics, resOpFailedEvent, summary; the chosen exit code.
    let out = ws.run(
        "vpc",
        &["up", "--yes", "--skip-preview", "--json"],
        &[
            ("FAKE_PULUMI_FAIL_VPC", "destroy,up"),
            ("FAKE_PULUMI_FAIL_CODE", "4"),
        ],
    );
    assert_eq!(out.status.code(), Some(4));
    let evs = events(&out);
    assert!(evs.iter().any(|e| e.get("resOpFailedEvent").is_some()));
    assert!(
        evs.iter()
            .any(|e| e["diagnosticEvent"]["message"] == "update failed\n")
    );
    assert!(evs.iter().any(|e| e.get("summaryEvent").is_some()));

    // preview --json is one document.
    let out = ws.ok("vpc", &["preview", "--json"]);
    let digest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(digest["steps"].as_array().unwrap().len() >= 3);
    assert!(digest["changeSummary"].is_object());
    assert_eq!(digest["config"]["vpc:dbpass"], "[secret]");

    // The call log: start and end lines with what strata must get right.
    let calls = ws.calls();
    let end = calls
        .iter()
        .rev()
        .find(|c| c["event"] == "end" && c["command"] == "preview")
        .unwrap();
    assert_eq!(end["exit_code"], 0);
    assert_eq!(end["project"], "vpc");
    assert_eq!(end["stack"], "dev");
    assert_eq!(end["stdin"], "null");
    assert_eq!(end["config"]["vpc:dbpass"], "[secure]");
    assert!(
        end["env"]["PULUMI_BACKEND_URL"]
            .as_str()
            .unwrap()
            .starts_with("file://")
    );
    assert!(
        !std::fs::read_to_string(ws.path("calls.jsonl"))
            .unwrap()
            .contains("s3cr3t")
    );
}

/// A fresh backend, many `stack init`s at once (strata's first wave): each sees
/// `meta.yaml` whole or not at all, as with the real CLI, whose blob writes are a temp
/// file renamed into place. A torn read failed one of them with "corrupt store".
#[test]
fn parallel_stack_inits_on_a_fresh_backend_never_see_a_torn_meta_yaml() {
    for round in 0..100 {
        let ws = Ws::new(&format!("meta-race-{round}"));
        let children: Vec<Child> = (0..8)
            .map(|i| {
                let project = if i % 2 == 0 { "vpc" } else { "eks" };
                let stack = format!("s{i}");
                let dir = ws.path(project).display().to_string();
                let mut c = ws.cmd(&[
                    "stack",
                    "init",
                    "--cwd",
                    &dir,
                    "--stack",
                    &stack,
                    "--non-interactive",
                ]);
                c.stdout(Stdio::piped()).stderr(Stdio::piped());
                c.spawn().unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", text(&out.stderr));
        }
        let meta = std::fs::read_to_string(ws.path("backend/.pulumi/meta.yaml")).unwrap();
        assert_eq!(meta, "version: 1\n");
    }
}
