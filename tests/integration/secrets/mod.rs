//! First run and secrets (issue 6, DESIGN.md §1 "Secrets"): the shared fixtures of the
//! secrets tests (a profile `lab` asking secrets, a fake cluster, an age store keyed by an
//! identity), and one file per idea below.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::support::*;

#[path = "../../support/fake_kube.rs"]
pub(crate) mod fake_kube;

use fake_kube::FakeKube;

mod cluster;
mod command;
mod digests;
mod first_run;
mod kube_step;
mod pty;
mod pulumi;
mod redaction;
mod store;

/// A fresh X25519 identity in `age-keygen` format at `home/<name>`; returns its path.
pub(super) fn identity_file(ws: &Ws, name: &str) -> PathBuf {
    use age::secrecy::ExposeSecret;
    let identity = age::x25519::Identity::generate();
    let path = ws.path(&format!("home/{name}"));
    std::fs::write(
        &path,
        format!(
            "# created: 2024-01-01T00:00:00Z\n# public key: {}\n{}\n",
            identity.to_public(),
            identity.to_string().expose_secret()
        ),
    )
    .unwrap();
    path
}

/// Encrypts the workspace's store to a fresh identity (`STRATA_AGE_IDENTITY`).
pub(super) fn use_identity(ws: &mut Ws, name: &str) -> PathBuf {
    let path = identity_file(ws, name);
    ws.set_env("STRATA_AGE_IDENTITY", path.to_str().unwrap());
    path
}

pub(super) const STORE: &str = "config/secrets/dev.age";
pub(super) const BEGIN: &str = "-----BEGIN AGE ENCRYPTED FILE-----";
pub(super) const END: &str = "-----END AGE ENCRYPTED FILE-----";

/// A workspace on stack `dev` (its environment file's) whose profile `lab` asks the
/// secrets `asks` (key, prompt) and runs `infrastructure` (YAML list items).
pub(crate) fn lab_asking(asks: &[(&str, &str)], infrastructure: &str) -> Ws {
    let mut yaml = format!("{HEAD}secrets:\n");
    for (key, prompt) in asks {
        yaml.push_str(&format!("  - key: {key}\n    prompt: {prompt}\n"));
    }
    yaml.push_str(&format!("infrastructure:\n{infrastructure}"));
    let ws = Ws::new();
    ws.profile("lab", &yaml);
    ws.env_file("PULUMI_STACK=dev\n");
    ws
}

/// [`lab_asking`] the secrets `given` (key, value), each given by its
/// `STRATA_SECRET_<KEY>` variable, into a store under a passphrase.
pub(super) fn lab_given(given: &[(&str, &str)], infrastructure: &str) -> Ws {
    let asks: Vec<(&str, &str)> = given.iter().map(|(key, _)| (*key, *key)).collect();
    let mut ws = lab_asking(&asks, infrastructure);
    ws.set_env("STRATA_PASSPHRASE", "the-right-passphrase");
    for (key, value) in given {
        let var = key.to_uppercase().replace([':', '-'], "_");
        ws.set_env(&format!("STRATA_SECRET_{var}"), value);
    }
    ws
}

pub(super) fn contains_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// An infrastructure command project whose `up` outputs the fake cluster's kubeconfig
/// (for the profile's kubeconfig hook) and notes that it ran in `$HOME/infra-ran`.
pub(crate) fn cluster_project(ws: &Ws, kube: &FakeKube) {
    let outputs = json!({ "kubeconfig": kube.kubeconfig() });
    ws.write(
        "projects/infra/cluster/outputs.json",
        &serde_json::to_string(&outputs).unwrap(),
    );
    ws.command_project(
        "infra/cluster",
        "echo infra up; echo ran >> \"$HOME/infra-ran\"; cat outputs.json > \"$STRATA_OUTPUTS_FILE\"",
        "echo infra down",
    );
}

pub(super) fn infra_ran(ws: &Ws) -> bool {
    ws.exists("home/infra-ran")
}

/// The profile of most tests: a profile-level secret, a kubeconfig-producing
/// infrastructure project, and a kubernetes command project with its own secrets.
pub(crate) fn kube_profile(secret_name: Option<&str>, app_secrets: &[(&str, &str)]) -> String {
    let mut y = String::from(HEAD);
    if let Some(name) = secret_name {
        y.push_str(&format!("secret_name: {name}\n"));
    }
    y.push_str(
        "secrets:\n  - key: monitoring:adminpass\n    prompt: Prometheus admin password\n\
         infrastructure:\n  - path: infra/cluster\n    on_success:\n      - kubeconfig: { output: kubeconfig }\n\
         kubernetes:\n  - path: k8s/app\n",
    );
    if !app_secrets.is_empty() {
        y.push_str("    secrets:\n");
        for (k, p) in app_secrets {
            y.push_str(&format!("      - key: {k}\n        prompt: {p}\n"));
        }
    }
    y
}

/// [`kube_profile`] whose app declares only `apps:db-password`.
pub(super) fn db_profile() -> String {
    kube_profile(None, &[("apps:db-password", "Database password")])
}

pub(crate) const ADMIN: &str = "adm1n-Pa55-VALUE-71c4";
pub(crate) const DB: &str = "db-Pa55-VALUE-3e9a";
pub(crate) const API: &str = "api-KEY-VALUE-58b0";

/// A workspace with the kube profile (`lab`), the cluster project and an app project
/// that echoes its secret, the store keyed by an identity, secrets given by env.
pub(crate) fn kube_ws(kube: &FakeKube, secret_name: Option<&str>) -> Ws {
    let mut ws = Ws::new();
    ws.profile(
        "lab",
        &kube_profile(
            secret_name,
            &[
                ("apps:db-password", "Database password"),
                ("apps:api-key", "API key"),
            ],
        ),
    );
    cluster_project(&ws, kube);
    ws.command_project(
        "k8s/app",
        "echo \"app sees db=$STRATA_SECRET_APPS_DB_PASSWORD\"",
        "echo app down",
    );
    ws.env_file("PULUMI_STACK=dev\n");
    use_identity(&mut ws, "id.txt");
    ws.set_env("STRATA_PROVIDER", "lab");
    ws.set_env("STRATA_SECRET_MONITORING_ADMINPASS", ADMIN);
    ws.set_env("STRATA_SECRET_APPS_DB_PASSWORD", DB);
    ws.set_env("STRATA_SECRET_APPS_API_KEY", API);
    ws
}

/// A fake cluster and [`kube_ws`] on it, with the default Secret name.
pub(super) fn kube_lab() -> (FakeKube, Ws) {
    let kube = FakeKube::start();
    let ws = kube_ws(&kube, None);
    (kube, ws)
}

/// `strata secrets set <key>` with `value` piped in, asserted to succeed.
#[track_caller]
pub(super) fn set_secret(ws: &Ws, key: &str, value: &str) -> Run {
    let r = strata_stdin(ws, &["secrets", "set", key], value);
    r.expect_code(0);
    r
}

/// The value under `key` of the Secret `name` in `namespace`; fails printing the
/// cluster's objects when there is no such Secret or key.
#[track_caller]
pub(super) fn secret_value(kube: &FakeKube, namespace: &str, name: &str, key: &str) -> String {
    let data = kube.secret_data(namespace, name).unwrap_or_default();
    let value = data.get(key).cloned();
    value.unwrap_or_else(|| panic!("no {key} in {namespace}/{name}: {:#?}", kube.objects()))
}

/// [`secret_value`] of the Secret strata names by default, `strata-secrets`.
#[track_caller]
pub(super) fn stored(kube: &FakeKube, namespace: &str, key: &str) -> String {
    secret_value(kube, namespace, "strata-secrets", key)
}

pub(super) fn event_of<'a>(events: &'a [Value], event: &str, project: &str) -> Option<&'a Value> {
    events
        .iter()
        .find(|e| e["event"] == json!(event) && e["project"] == json!(project))
}

/// The profile of the Pulumi and leak tests: the kube profile plus a Pulumi project that
/// declares `apps:db-password` and a command project that fails after echoing a secret.
pub(super) fn pulumi_ws(kube: &FakeKube, with_failure: bool) -> Ws {
    let ws = kube_ws(kube, None);
    let mut y = kube_profile(None, &[("apps:api-key", "API key")]);
    y.push_str(
        "  - path: k8s/db\n    secrets:\n      - key: apps:db-password\n        prompt: Database password\n",
    );
    if with_failure {
        y.push_str("  - path: k8s/broken\n    needs: []\n");
        ws.command_project(
            "k8s/broken",
            "echo \"broken with $STRATA_SECRET_MONITORING_ADMINPASS\"; echo \"to stderr $STRATA_SECRET_MONITORING_ADMINPASS\" >&2; exit 1",
            "true",
        );
    }
    ws.profile("lab", &y);
    ws.command_project(
        "k8s/app",
        "echo \"api=$STRATA_SECRET_APPS_API_KEY\"; echo \"admin=$STRATA_SECRET_MONITORING_ADMINPASS\" >&2",
        "true",
    );
    ws.pulumi_project(
        "k8s/db",
        "db-app",
        "resources:\n  conn:\n    type: test:index:Connection\n    properties:\n      password: ${apps:db-password}\n      admin: ${monitoring:adminpass}\n\
         outputs:\n  password: ${apps:db-password}\n  endpoint: db.local\n",
    );
    ws
}
