//! `strata secrets list|set|rm`: keys and who declares them, never values.

use serde_json::{Value, json};

use super::fake_kube::encode_base64;
use super::*;

#[test]
fn secrets_list_shows_keys_and_declaring_project_never_values() {
    let (_kube, ws) = kube_lab();
    for (k, v) in [
        ("monitoring:adminpass", ADMIN),
        ("apps:db-password", DB),
        ("other:undeclared", "undeclared-VALUE-77"),
    ] {
        let r = set_secret(&ws, k, &format!("{v}\n"));
        assert!(!r.all().contains(v), "{r:?}");
    }

    let r = ws.strata_ok(&["secrets", "list"]);
    let line = |key: &str| -> String {
        r.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_else(|| panic!("no line for {key}: {r:?}"))
            .to_string()
    };
    assert!(line("apps:db-password").contains("k8s/app"), "{r:?}");
    assert!(
        line("monitoring:adminpass").contains("every project"),
        "{r:?}"
    );
    assert!(line("other:undeclared").contains("not declared"), "{r:?}");
    // Declared but not stored: shown as missing, with how to set it.
    assert!(line("apps:api-key").contains("missing"), "{r:?}");
    for v in [ADMIN, DB, "undeclared-VALUE-77"] {
        assert!(!r.all().contains(v), "a value was listed: {r:?}");
        assert!(!r.all().contains(&encode_base64(v.as_bytes())), "{r:?}");
    }

    let r = ws.strata_ok(&["--output", "json", "secrets", "list"]);
    let list: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let keys: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"apps:db-password"), "{r:?}");
    let db = list
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == json!("apps:db-password"))
        .unwrap();
    assert_eq!(db["declared_by"], json!("k8s/app"), "{r:?}");
    for v in [ADMIN, DB, "undeclared-VALUE-77"] {
        assert!(!r.all().contains(v), "{r:?}");
    }
}

#[test]
fn secrets_set_from_piped_stdin_then_rm() {
    let (kube, mut ws) = kube_lab();
    // The app checks the value it gets without printing it.
    ws.command_project(
        "k8s/app",
        &format!(
            "if [ \"$STRATA_SECRET_APPS_DB_PASSWORD\" = '{DB}' ]; then echo VALUE-MATCHES; else echo VALUE-DIFFERS; fi"
        ),
        "true",
    );
    ws.env
        .retain(|(k, _)| k != "STRATA_SECRET_APPS_DB_PASSWORD");

    // One trailing newline (from echo) is not part of the value.
    let r = strata_stdin(
        &ws,
        &["secrets", "set", "apps:db-password"],
        &format!("{DB}\n"),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.all().contains(DB), "{r:?}");
    let r = ws.strata(&["secrets", "list"]);
    assert!(r.stdout.contains("apps:db-password"), "{r:?}");
    assert!(
        !r.stdout
            .lines()
            .any(|l| l.contains("apps:db-password") && l.contains("missing")),
        "{r:?}"
    );

    let r = ws.strata_ok(&["up"]);
    assert!(
        r.stdout.contains("VALUE-MATCHES"),
        "the stored value differs: {r:?}"
    );
    assert_eq!(stored(&kube, "apps", "db-password"), DB);

    ws.strata_ok(&["secrets", "rm", "apps:db-password"]);
    let r = ws.strata(&["--output", "json", "secrets", "list"]);
    let list: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert!(
        !list
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["key"] == json!("apps:db-password")),
        "{r:?}"
    );
    // Removing it again names the key and fails.
    let r = ws.strata(&["secrets", "rm", "apps:db-password"]);
    assert_ne!(r.code, 0, "{r:?}");
    r.expect_stderr(&["apps:db-password"]);
    // Now missing again for a non-interactive up.
    let r = ws.strata(&["up"]);
    r.expect_code(3)
        .expect_stderr(&["STRATA_SECRET_APPS_DB_PASSWORD"]);
}
