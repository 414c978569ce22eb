//! Which cluster `@secrets` writes into (issue 32): the cluster of this stack, as its
//! kubeconfig hook merged it or as the profile's `cluster:` names it; never whatever
//! the kubeconfig's current context happens to be. When strata cannot know, it refuses
//! and writes nothing; pruning touches only that same cluster.

use serde_json::json;

use super::fake_kube::{FakeKube, encode_base64};
use super::*;

/// The user's unrelated work: `name`'s cluster added to the kubeconfig strata merges
/// into and made its current context, as `kubectl config set-cluster`, `set-context`
/// and `use-context` would.
fn use_context(ws: &Ws, other: &FakeKube, name: &str) {
    let path = "home/.kube/config";
    let mut config: serde_yaml::Value = serde_yaml::from_str(&ws.read(path)).unwrap();
    let entries = [
        (
            "clusters",
            json!({"name": name, "cluster": {"server": other.url()}}),
        ),
        (
            "users",
            json!({"name": name, "user": {"token": "fake-token"}}),
        ),
        (
            "contexts",
            json!({"name": name, "context": {"cluster": name, "user": name}}),
        ),
    ];
    for (section, entry) in entries {
        let entry: serde_yaml::Value = serde_json::from_value(entry).unwrap();
        config[section].as_sequence_mut().unwrap().push(entry);
    }
    config["current-context"] = name.into();
    ws.write(path, &serde_yaml::to_string(&config).unwrap());
}

/// Another stack's Secret in `other`: written by strata for that stack.
fn others_secret(other: &FakeKube, namespace: &str) {
    let mut api = other.api();
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}));
    api.insert(json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "strata-secrets",
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "strata"},
        },
        "type": "Opaque",
        "data": {"db-password": encode_base64(b"prod-db-VALUE")},
    }));
}

fn writes_to(kube: &FakeKube) -> usize {
    kube.requests().iter().filter(|r| r.method != "GET").count()
}

/// Asserts `kube` received `count` writes in all, printing its requests when not.
#[track_caller]
fn assert_writes(kube: &FakeKube, count: usize) {
    assert_eq!(writes_to(kube), count, "{:?}", kube.requests());
}

/// Two fake clusters, dev's and prod's, and [`kube_ws`] on dev's.
fn dev_and_prod() -> (FakeKube, FakeKube, Ws) {
    let (dev, ws) = kube_lab();
    (dev, FakeKube::start(), ws)
}

/// [`kube_profile`] without its kubeconfig hook.
fn without_hook(profile: &str) -> String {
    profile.replace(
        "    on_success:\n      - kubeconfig: { output: kubeconfig }\n",
        "",
    )
}

/// `up --project @secrets`, asserted to fail.
#[track_caller]
fn secrets_step_refused(ws: &Ws) -> Run {
    let r = ws.strata(&["up", "--project", "@secrets"]);
    assert_ne!(r.code, 0, "{r:?}");
    r
}

/// The stack config giving the profile's `cluster:` the file `dev.kubeconfig` and
/// `context`.
fn stack_cluster(ws: &Ws, context: &str) {
    let file = ws.path("dev.kubeconfig");
    let config = format!(
        "config:\n  lab:kubeconfig: {}\n  lab:context: {context}\n",
        file.display()
    );
    ws.write("config/pulumi/Pulumi.dev.yaml", &config);
}

/// After `kubectl config use-context prod`, a rotated secret and `up --changed` (the
/// hook's project does not run) still go to dev's cluster, and a namespace dropped from
/// dev's profile is pruned there, never in prod.
#[test]
fn a_switched_current_context_does_not_redirect_the_secrets() {
    let (dev, prod, mut ws) = dev_and_prod();
    ws.strata_ok(&["up"]);
    others_secret(&prod, "apps");
    use_context(&ws, &prod, "prod");
    let before = writes_to(&prod);

    // A secret only the kubernetes stage reads: the infrastructure stays unchanged.
    ws.env
        .retain(|(k, _)| k != "STRATA_SECRET_APPS_DB_PASSWORD");
    let rotated = "r0tated-DB-VALUE-5d1e";
    set_secret(&ws, "apps:db-password", &format!("{rotated}\n"));
    let r = ws.strata_ok(&["up", "--changed"]);
    assert!(!r.all().contains("[infra/cluster] up started"), "{r:?}");
    assert_eq!(stored(&dev, "apps", "db-password"), rotated);
    assert_eq!(stored(&prod, "apps", "db-password"), "prod-db-VALUE");
    assert!(prod.secret("monitoring", "strata-secrets").is_none());

    // `apps` loses its secrets in dev's profile: pruned in dev, prod's stays.
    ws.profile("lab", &kube_profile(None, &[]));
    ws.strata_ok(&["up"]);
    assert!(dev.secret("apps", "strata-secrets").is_none());
    assert!(prod.secret("apps", "strata-secrets").is_some());
    assert_writes(&prod, before);
}

/// A stack whose kubeconfig hook never ran on this machine (a fresh clone running only
/// `@secrets`): strata cannot know its cluster, so it refuses, naming the hook's project
/// and what to run, and writes nothing into the current context's cluster.
#[test]
fn an_unknown_cluster_is_refused_and_nothing_is_written() {
    let (dev, prod, ws) = dev_and_prod();
    prod.write_kubeconfig(&ws.path("home/.kube/config"))
        .unwrap();
    let r = secrets_step_refused(&ws);
    let all = r.all();
    // Names the hook's project and says what to run.
    assert_has(
        &all,
        &["infra/cluster", "strata up", "--project infra/cluster"],
    );
    assert!(all.contains("Nothing was written"), "{r:?}");
    assert_writes(&prod, 0);
    assert_writes(&dev, 0);
    for v in [ADMIN, DB] {
        assert!(!all.contains(v), "{r:?}");
    }
}

/// Two stacks, one `~/.kube/config` whose hook gives both the same context name: the
/// entry now points at the other stack's cluster, so dev's secrets are refused rather
/// than written there.
#[test]
fn a_context_that_now_points_elsewhere_is_refused() {
    let (dev, prod, ws) = dev_and_prod();
    let shared = db_profile().replace(
        "{ output: kubeconfig }",
        "{ output: kubeconfig, name: shared }",
    );
    ws.profile("lab", &shared);
    ws.strata_ok(&["up"]);
    // The prod stack's hook merged its own cluster under the same name.
    let text = ws
        .read("home/.kube/config")
        .replace(&dev.url(), &prod.url());
    ws.write("home/.kube/config", &text);
    let before = writes_to(&prod);
    let r = secrets_step_refused(&ws);
    assert!(
        r.all().contains(&prod.url()),
        "names where it points: {r:?}"
    );
    assert!(r.all().contains(&dev.url()), "and where it pointed: {r:?}");
    assert_writes(&prod, before);
}

/// The `kubeconfig` profile's shape: no hook, the cluster named by config keys through
/// `cluster:`. The secrets go to that file and context whatever the current context.
#[test]
fn the_profiles_cluster_names_the_kubeconfig_and_context() {
    let (dev, prod, ws) = dev_and_prod();
    let named = "cluster:\n  kubeconfig: ${config.lab:kubeconfig}\n  context: ${config.lab:context}\n\
                 config:\n  - key: lab:kubeconfig\n    prompt: Kubeconfig\n  - key: lab:context\n    prompt: Context\n\
                 secrets:\n";
    let profile = without_hook(&db_profile()).replacen("secrets:\n", named, 1);
    ws.profile("lab", &profile);
    // The stack's own file has its context `fake`; the user's default file says prod.
    dev.write_kubeconfig(&ws.path("dev.kubeconfig")).unwrap();
    prod.write_kubeconfig(&ws.path("home/.kube/config"))
        .unwrap();
    stack_cluster(&ws, "fake");
    ws.strata_ok(&["up"]);
    assert_eq!(stored(&dev, "monitoring", "adminpass"), ADMIN);
    assert_writes(&prod, 0);

    // A context the file does not have: refused, nothing written.
    stack_cluster(&ws, "staging");
    let before = writes_to(&dev);
    let r = secrets_step_refused(&ws);
    assert!(r.all().contains("staging"), "{r:?}");
    assert_writes(&dev, before);
}

/// No hook and no `cluster:`: strata cannot know which cluster is the stack's, so a
/// profile that writes secrets into one is refused before anything runs.
#[test]
fn a_profile_that_cannot_name_its_cluster_is_refused() {
    let (dev, ws) = kube_lab();
    ws.profile("lab", &without_hook(&kube_profile(None, &[])));
    dev.write_kubeconfig(&ws.path("home/.kube/config")).unwrap();
    let r = ws.strata(&["up"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.all().contains("cluster:"), "says how to name it: {r:?}");
    assert_writes(&dev, 0);
}
