//! A first run: what strata asks on a terminal (stack, config, passphrase, secrets) and
//! writes from the answers; and, without a terminal, every missing key listed at once.

use std::collections::BTreeMap;

use super::fake_kube::FakeKube;
use super::pty::{self, strip_ansi};
use super::*;

/// A terminal first run: no PULUMI_STACK anywhere. strata asks the stack name, the
/// profile's config keys (default shown and taken on Enter, re-asked until the value
/// parses as its type), the store's passphrase (with confirmation: a new store) and the
/// secret (no echo, confirmation); then the run goes on and succeeds.
#[test]
fn terminal_first_run_prompts_and_writes_env_file_stack_config_and_store() {
    let kube = FakeKube::start();
    let ws = Ws::new();
    ws.profile(
        "lab",
        &format!(
            "{HEAD}cluster: {{kubeconfig: ~/.kube/config, context: fake}}\nconfig:\n  \
             - key: lab:region\n    prompt: Lab region\n    default: us-west-2\n  \
             - key: lab:nodes\n    prompt: Number of nodes\n    default: 3\n    type: int\n  \
             - key: lab:cluster_name\n    prompt: Cluster name\n\
             secrets:\n  - key: lab:token\n    prompt: Lab API token\n\
             infrastructure:\n  - path: infra/cluster\n\
             kubernetes:\n  - path: k8s/app\n"
        ),
    );
    ws.command_project("infra/cluster", "echo infra up", "echo infra down");
    ws.command_project(
        "k8s/app",
        "echo \"token is $STRATA_SECRET_LAB_TOKEN\"",
        "echo app down",
    );
    kube.write_kubeconfig(&ws.path("home/.kube/config"))
        .unwrap();
    // An env file with other lines and no newline at the end (MARA appended without one).
    let before_env = "# lab settings\nFOO=bar\nexport LAB_MODE=\"fast mode\"";
    ws.env_file(before_env);

    const SECRET: &str = "Pty-T0ken-VALUE-c0ffee";
    const PASSPHRASE: &str = "pty-Pass-phrase-VALUE-d00d";

    let mut term = pty::Pty::spawn(ws.command(&["up", "--provider", "lab"]));

    let seen = term.expect("Stack name");
    assert!(!seen.contains("error"), "{seen}");
    term.type_line("prod");

    term.expect("Lab region (lab:region)");
    let shown = term.expect("us-west-2");
    assert!(
        !shown.contains('\n'),
        "the default is shown on the prompt line: {shown:?}"
    );
    term.type_line(""); // Enter takes the default

    term.expect("Number of nodes (lab:nodes)");
    term.expect("3");
    term.type_line("three");
    term.expect("not a whole number");
    term.type_line("5");

    term.expect("Cluster name (lab:cluster_name)");
    term.type_line("alpha");

    term.expect("Passphrase");
    term.type_secret(PASSPHRASE);
    term.expect("Repeat");
    term.type_secret(PASSPHRASE);

    term.expect("Lab API token (lab:token)");
    term.type_secret(SECRET);
    term.expect("Repeat");
    term.type_secret(SECRET);

    // `up` on a terminal previews first (the answers above are its), then asks once.
    term.expect("Do you want to perform this update?");
    term.type_line("yes");

    let (code, raw) = term.wait();
    let text = strip_ansi(&raw);
    assert_eq!(code, 0, "the run after the prompts failed:\n{text}");

    // The typed secret and passphrase never appear on the terminal.
    assert!(!raw.contains(SECRET), "the secret was echoed:\n{text}");
    assert!(
        !raw.contains(PASSPHRASE),
        "the passphrase was echoed:\n{text}"
    );

    // The env file: every old line intact, PULUMI_STACK added, ends with a newline.
    let env = ws.read("config/pulumi/environment");
    assert!(env.ends_with('\n'), "{env:?}");
    let lines: Vec<&str> = env.lines().collect();
    assert_eq!(
        &lines[..3],
        &["# lab settings", "FOO=bar", "export LAB_MODE=\"fast mode\""],
        "{env:?}"
    );
    assert!(
        lines.iter().any(|l| l.trim() == "PULUMI_STACK=prod"),
        "{env:?}"
    );
    assert_eq!(lines.len(), 4, "{env:?}");

    // The stack config: the answers, typed, plus kubernetes:infra_type.
    let cfg: serde_yaml::Value =
        serde_yaml::from_str(&ws.read("config/pulumi/Pulumi.prod.yaml")).unwrap();
    let c = &cfg["config"];
    assert_eq!(c["lab:region"].as_str(), Some("us-west-2"), "{cfg:?}");
    assert!(
        c["lab:nodes"].as_i64() == Some(5) || c["lab:nodes"].as_str() == Some("5"),
        "{cfg:?}"
    );
    assert_eq!(c["lab:cluster_name"].as_str(), Some("alpha"), "{cfg:?}");
    assert_eq!(c["kubernetes:infra_type"].as_str(), Some("test"), "{cfg:?}");

    // The store holds the typed secret, under the typed passphrase.
    let bytes = std::fs::read(ws.path("config/secrets/prod.age")).unwrap();
    let identity = age::scrypt::Identity::new(PASSPHRASE.to_string().into());
    let plain = age::decrypt(&identity, &bytes).expect("decrypt the store with the passphrase");
    let mut values: BTreeMap<String, String> = serde_json::from_slice(&plain).unwrap();
    // Beside it, the random key of the digests strata keeps under `.strata/`.
    let digest_key = values.remove("strata.digest-key").unwrap_or_default();
    assert_eq!(digest_key.len(), 64, "{digest_key:?}");
    assert_eq!(
        values,
        BTreeMap::from([("lab:token".to_string(), SECRET.to_string())])
    );

    // And the secret reached the cluster, while the project's echo was redacted.
    assert_eq!(stored(&kube, "lab", "token"), SECRET);
    let logs = ws.texts_under(".strata/prod/logs");
    assert!(logs.contains("token is [secret]"), "{logs}");
    assert!(!logs.contains(SECRET), "{logs}");
}

/// A non-interactive first run asks nothing: every config key without a value is listed
/// at once, with how to set it, exit 3.
#[test]
fn non_interactive_first_run_lists_every_missing_config_key() {
    let ws = Ws::new();
    ws.profile(
        "lab",
        &format!(
            "{HEAD}config:\n  \
             - key: lab:region\n    prompt: Lab region\n    default: us-west-2\n  \
             - key: lab:account\n    prompt: Account id\n  \
             - key: lab:nodes\n    prompt: Number of nodes\n    type: int\n  \
             - key: net:cidr\n    prompt: Network range\n\
             infrastructure:\n  - path: infra/cluster\n"
        ),
    );
    ws.command_project("infra/cluster", "echo ran >> \"$HOME/infra-ran\"", "true");
    let r = ws.strata(&["up", "--stack", "dev", "--provider", "lab"]);
    assert_eq!(r.code, 3, "{r:?}");
    let err = r.stderr.clone();
    for key in ["lab:account", "lab:nodes", "net:cidr"] {
        assert!(err.contains(key), "missing key {key} not named: {r:?}");
        assert!(
            err.contains(&format!("pulumi config set {key}")),
            "no way to set {key}: {r:?}"
        );
    }
    r.expect_stderr(&["--config-file", "Pulumi.dev.yaml"]);
    assert!(
        !err.contains("lab:region"),
        "a key with a default is not missing: {r:?}"
    );
    assert!(
        !infra_ran(&ws),
        "nothing runs before the config is complete"
    );

    // Without a stack name, nothing is asked either: exit 3, and no env file is written.
    let r = ws.strata(&["up", "--provider", "lab"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("--stack"), "{r:?}");
    assert!(r.stderr.contains("PULUMI_STACK"), "{r:?}");
    assert!(!ws.exists("config/pulumi/environment"));
}

/// A missing secret in a non-interactive run: exit 3 naming each one and how to set it,
/// before anything runs; nothing is written to the store.
#[test]
fn missing_secrets_non_interactively_are_listed_with_how_to_set_them() {
    let (kube, mut ws) = kube_lab();
    ws.env.retain(|(k, _)| {
        k != "STRATA_SECRET_APPS_DB_PASSWORD" && k != "STRATA_SECRET_APPS_API_KEY"
    });
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 3, "{r:?}");
    for (key, var) in [
        ("apps:db-password", "STRATA_SECRET_APPS_DB_PASSWORD"),
        ("apps:api-key", "STRATA_SECRET_APPS_API_KEY"),
    ] {
        assert!(r.stderr.contains(key), "{key} not named: {r:?}");
        assert!(
            r.stderr.contains(&format!("strata secrets set {key}")),
            "{r:?}"
        );
        assert!(r.stderr.contains(var), "{var} not named: {r:?}");
    }
    assert!(
        !r.stderr.contains("monitoring:adminpass"),
        "a secret given by env is not missing: {r:?}"
    );
    assert!(
        !infra_ran(&ws),
        "nothing runs before the secrets are complete"
    );
    assert!(kube.requests().is_empty(), "{:?}", kube.requests());
    assert!(
        !ws.exists(STORE),
        "nothing is stored when the run cannot go on"
    );
    assert!(!r.all().contains(ADMIN), "{r:?}");
}

#[test]
fn missing_config_and_missing_secrets_are_listed_in_one_error() {
    let mut ws = Ws::new();
    ws.set_env("STRATA_PASSPHRASE", "pass-for-the-store");
    ws.profile(
        "lab",
        "description: lab\ninfra_type: lab\nconfig:\n  - key: lab:account\n    prompt: Account id\nsecrets:\n  - key: apps:token\n    prompt: API token\ninfrastructure:\n  - path: infra/a\n",
    );
    ws.command_project("infra/a", "true", "true");
    let r = ws.strata(&["up", "--stack", "dev", "--provider", "lab"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("lab:account"), "{r:?}");
    assert!(r.stderr.contains("apps:token"), "both in one run: {r:?}");
    assert!(r.stderr.contains("STRATA_SECRET_APPS_TOKEN"), "{r:?}");
}
