//! Secrets into Pulumi: a project's secrets reach it as secure config, on stdin, never
//! on a command line or in the shared stack config.

use std::process::Command;

use serde_json::{Value, json};

use super::fake_kube::FakeKube;
use super::*;

#[test]
fn pulumi_project_gets_its_secret_as_secure_config() {
    let kube = FakeKube::start();
    let mut ws = pulumi_ws(&kube, false);
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_DB_APP",
        &json!({ "apps:db-password": DB, "monitoring:adminpass": ADMIN }).to_string(),
    );
    ws.strata_ok(&["up"]);

    let calls = ws.calls();
    let db_calls: Vec<&Value> = calls
        .iter()
        .filter(|c| c["project"] == json!("db-app"))
        .collect();
    // The value went through `config set --secret` on stdin, never on the command line.
    let sets: Vec<&&Value> = db_calls
        .iter()
        .filter(|c| c["command"] == json!("config set") && c["event"] == json!("start"))
        .collect();
    let set_keys: Vec<String> = sets
        .iter()
        .filter_map(|c| {
            let argv: Vec<&str> = c["argv"]
                .as_array()?
                .iter()
                .filter_map(|a| a.as_str())
                .collect();
            assert!(argv.contains(&"--secret"), "{c}");
            for v in [DB, ADMIN] {
                assert!(!argv.iter().any(|a| a.contains(v)), "a secret on argv: {c}");
            }
            argv.iter().find(|a| a.contains(':')).map(|a| a.to_string())
        })
        .collect();
    assert!(
        set_keys.iter().any(|k| k == "apps:db-password"),
        "no `config set --secret apps:db-password`: {db_calls:#?}"
    );
    for c in &sets {
        assert_eq!(c["stdin"], json!("pipe"), "the value is piped: {c}");
    }
    // The update ran with both values as secure config.
    let up = db_calls
        .iter()
        .find(|c| c["command"] == json!("up") && c["event"] == json!("start"))
        .unwrap_or_else(|| panic!("no up of db-app: {calls:#?}"));
    assert_eq!(up["config"]["apps:db-password"], json!("[secure]"), "{up}");
    assert_eq!(
        up["config"]["monitoring:adminpass"],
        json!("[secure]"),
        "{up}"
    );
    let up_args = up["argv"].to_string();
    assert!(up_args.contains("--config-file"), "{up}");
    assert!(up_args.contains(".strata/dev/config/k8s_2fdb.yaml"), "{up}");

    // The per-project config file holds them as `secure:` values.
    let cfg: serde_yaml::Value =
        serde_yaml::from_str(&ws.read(".strata/dev/config/k8s_2fdb.yaml")).unwrap();
    for key in ["apps:db-password", "monitoring:adminpass"] {
        assert!(
            cfg["config"][key]["secure"].is_string(),
            "{key} is not secure config: {cfg:?}"
        );
    }
    assert!(cfg["encryptionsalt"].is_string(), "{cfg:?}");
    // The shared stack config got none of it.
    let shared = ws.read("config/pulumi/Pulumi.dev.yaml");
    assert!(!shared.contains("apps:db-password"), "{shared}");

    // `pulumi config` of that project shows it as a secret.
    let out = Command::new(fake_pulumi())
        .args([
            "config",
            "--cwd",
            ws.path("projects/k8s/db").to_str().unwrap(),
            "--stack",
            "dev",
            "--config-file",
            ws.path(".strata/dev/config/k8s_2fdb.yaml")
                .to_str()
                .unwrap(),
        ])
        .env("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)
        .env(
            "PULUMI_BACKEND_URL",
            format!("file://{}", ws.path(".strata/backend").display()),
        )
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{shown}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.contains("apps:db-password"), "{shown}");
    assert!(shown.contains("[secret]"), "{shown}");
    assert!(!shown.contains(DB), "{shown}");

    // A second up still hands the project the right values.
    ws.strata_ok(&["up"]);
}
