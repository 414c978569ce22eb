//! Redaction: no secret value reaches the terminal, the logs or any file strata writes,
//! in the forms a program prints one in, and a short secret masks no word.

use serde_json::json;

use super::fake_kube::{FakeKube, encode_base64};
use super::*;

#[test]
fn a_full_up_with_secrets_leaks_no_value_anywhere() {
    let kube = FakeKube::start();
    let ws = pulumi_ws(&kube, true);
    let values = [ADMIN, DB, API];

    let human = ws.strata(&["up", "--keep-going"]);
    assert_eq!(human.code, 1, "k8s/broken fails: {human:?}");
    let json_run = ws.strata(&["--output", "json", "up", "--keep-going"]);
    assert_eq!(json_run.code, 1, "{json_run:?}");
    let status = ws.strata(&["status"]);
    let outputs = ws.strata(&["outputs"]);
    let list = ws.strata(&["secrets", "list"]);

    // The projects did run and echoed their secrets: strata printed `[secret]` instead.
    assert!(human.all().contains("api=[secret]"), "{human:?}");
    assert!(human.all().contains("admin=[secret]"), "{human:?}");
    assert!(human.all().contains("broken with [secret]"), "{human:?}");
    let lines: Vec<String> = json_run
        .events()
        .iter()
        .filter(|e| e["event"] == json!("project_output"))
        .filter_map(|e| e["line"].as_str().map(str::to_string))
        .collect();
    assert!(
        lines.iter().any(|l| l.contains("api=[secret]")),
        "{json_run:?}"
    );
    assert!(kube.secret_data("apps", "strata-secrets").is_some());
    assert!(
        ws.calls()
            .iter()
            .any(|c| c["project"] == json!("db-app") && c["command"] == json!("up")),
        "the Pulumi project ran"
    );

    // Nothing strata printed holds a value.
    for (name, r) in [
        ("up", &human),
        ("up --output json", &json_run),
        ("status", &status),
        ("outputs", &outputs),
        ("secrets list", &list),
    ] {
        for v in values {
            assert!(
                !r.all().contains(v),
                "`strata {name}` shows a secret value: {r:?}"
            );
            assert!(
                !r.all().contains(&encode_base64(v.as_bytes())),
                "`strata {name}`: {r:?}"
            );
        }
    }

    // Every file of the workspace but the encrypted store: .strata/ (journal, logs,
    // per-project config, state, the Pulumi backend), config/, the fake's call log.
    let mut scanned = 0;
    let mut logs_with_mask = 0;
    for (path, bytes) in ws.files_under("") {
        let rel = path
            .strip_prefix(&ws.root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel.starts_with("bin/") || rel == STORE {
            continue;
        }
        scanned += 1;
        for v in values {
            assert!(
                !contains_bytes(&bytes, v.as_bytes()),
                "{rel} holds a secret value:\n{}",
                String::from_utf8_lossy(&bytes)
            );
            assert!(
                !contains_bytes(&bytes, encode_base64(v.as_bytes()).as_bytes()),
                "{rel} holds a secret value in base64"
            );
        }
        if rel.starts_with(".strata/dev/logs/") && contains_bytes(&bytes, b"[secret]") {
            logs_with_mask += 1;
        }
    }
    assert!(ws.exists(".strata/dev/journal.jsonl"));
    assert!(scanned > 10, "only {scanned} files scanned");
    assert!(
        logs_with_mask >= 2,
        "the logs of the echoing projects should show [secret]"
    );
}

/// What a program prints a secret as, beyond the value itself: a line of a multi-line
/// secret JSON-escaped, a short line (`4711`) on its own, a value in shell quotes. None
/// of it reaches the terminal or the log; and a one-character passphrase (`x`) or a
/// two-character one (`pp`) does not mask every `x` of `exit` or the `pp` of `app`.
#[test]
fn redaction_catches_escaped_forms_and_spares_words_holding_a_short_secret() {
    let cert = "-----BEGIN CERT-----\np\"w\\d=hunter2\n4711\n-----END CERT-----\n";
    let given = [("lab:cert", cert), ("lab:name", "o'brien-s3cret")];
    let mut ws = lab_given(&given, "  - path: infra/app\n");
    ws.set_env("STRATA_PASSPHRASE", "x");
    ws.set_env("PULUMI_CONFIG_PASSPHRASE", "pp");
    ws.write(
        "projects/infra/app/print.sh",
        "cat <<'EOF'\njson: {\"cert\":\"p\\\"w\\\\d=hunter2\"}\npin: 4711\nshell: 'o'\\''brien-s3cret'\nexit code follows; the app is ready\nEOF\nexit 3\n",
    );
    ws.command_project("infra/app", "sh print.sh", "true");
    let r = ws.strata(&["up", "--provider", "lab", "--project", "infra/app"]);
    assert_ne!(r.code, 0, "the project fails: {r:?}");
    let logs = ws.texts_under(".strata/dev/logs");
    assert!(logs.contains("json:"), "the project ran: {logs}");
    for (what, text) in [("terminal", r.all()), ("log", logs)] {
        for leaked in ["hunter2", "4711", "brien-s3cret"] {
            assert!(!text.contains(leaked), "{leaked} in the {what}: {text}");
        }
        assert!(
            text.contains("exit code follows; the app is ready"),
            "a short secret mangled the {what}: {text}"
        );
        assert!(!text.contains("e[secret]it"), "{what}: {text}");
        assert!(!text.contains("a[secret]"), "{what}: {text}");
    }
    assert!(r.all().contains("infra/app"), "{r:?}");
}
