//! The real-Pulumi tier with Pulumi's own Kubernetes provider (issue 33): a YAML project
//! makes a `pulumi:providers:kubernetes` from a kubeconfig given as (secret) config, and
//! a Namespace and a ConfigMap with it, on the throwaway control plane of the
//! real-Kubernetes tier (scripts/kube-test-cluster.sh).
//!
//! The provider is `pulumi-resource-kubernetes` beside the real CLI (built by
//! scripts/install-pulumi.sh); missing under `CI=true`, the test fails with the hint.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{Real, assert_no_clear_secret, status_of};
use crate::real_kube::Cluster;

const HINT: &str = "scripts/install-pulumi.sh builds it beside pulumi (github.com/pulumi/pulumi-kubernetes/provider/v4, through tools/pulumi-resource-kubernetes), or set STRATA_PULUMI_BIN_DIR to a folder holding it";
const PROVIDER: &str = "pulumi-resource-kubernetes";
const NAMESPACE: &str = "rp-k8s-apps";

/// The project: an explicit provider from the secret config `rp-k8s:kubeconfig`, a
/// Namespace and a ConfigMap in it, with the provider's defaults: it deletes with
/// foreground propagation and waits until each object is gone, which the control
/// plane's kube-controller-manager (garbage collector, namespace controller) brings
/// about. The delete of the ConfigMap is bounded (a minute, not the provider's ten), so
/// a control plane without them fails the test instead of stalling it.
const PROJECT: &str = r#"config:
  kubeconfig:
    type: string
resources:
  k8s:
    type: pulumi:providers:kubernetes
    properties:
      kubeconfig: ${kubeconfig}
  ns:
    type: kubernetes:core/v1:Namespace
    properties:
      metadata:
        name: rp-k8s-apps
        # A field of Pulumi's: the API server keeps no managedFields entry for a manager
        # that owns none (a name alone is not a field).
        labels:
          app.kubernetes.io/part-of: strata-test
    options:
      provider: ${k8s}
  settings:
    type: kubernetes:core/v1:ConfigMap
    properties:
      metadata:
        name: settings
        namespace: ${ns.metadata.name}
      data:
        greeting: hello from strata
    options:
      provider: ${k8s}
      customTimeouts:
        delete: 1m
outputs:
  namespace: ${ns.metadata.name}
  configmap: ${settings.metadata.name}
"#;

/// The folder holding the provider, or `None` (skipped) outside CI.
pub(super) fn provider_dir(test: &str) -> Option<PathBuf> {
    crate::support::real_bin_dir(
        test,
        "Pulumi's Kubernetes provider",
        "STRATA_PULUMI_BIN_DIR",
        "pulumi",
        &[PROVIDER],
        HINT,
    )
}

/// A real-Pulumi workspace with the provider beside the CLI and the `k8s` profile, whose
/// one project takes the admin kubeconfig of `cluster` as its secret config.
fn workspace(test: &str, dir: &Path, cluster: &Cluster) -> Option<Real> {
    let mut r = Real::new(test)?;
    std::os::unix::fs::symlink(dir.join(PROVIDER), r.ws.bin.join(PROVIDER)).unwrap();
    r.ws.profile(
        "k8s",
        "description: Pulumi's Kubernetes provider on the test cluster\ninfra_type: test\ninfrastructure:\n  - path: k8s\n    secrets:\n      - key: rp-k8s:kubeconfig\n        prompt: Kubeconfig of the cluster\n",
    );
    r.ws.pulumi_project("k8s", "rp-k8s", PROJECT);
    r.ws.set_env(
        "STRATA_SECRET_RP_K8S_KUBECONFIG",
        &cluster.kubeconfig("admin"),
    );
    Some(r)
}

fn strata(r: &Real, command: &str) -> crate::support::Run {
    r.strata(&[
        command,
        "--provider",
        "k8s",
        "--stack",
        "dev",
        "--yes",
        "--output",
        "json",
    ])
}

/// An object as the admin reads it: `None` when the API answers 404.
fn get(cluster: &Cluster, path: &str) -> Option<Value> {
    let (code, body) = cluster.request("admin", "GET", path, None);
    match code {
        200 => Some(body),
        404 => None,
        _ => panic!("GET {path}: {code} {body}"),
    }
}

/// The provider processes still running for this workspace (their environment names its
/// `PULUMI_HOME`).
pub(super) fn providers_left(r: &Real) -> Vec<String> {
    let home = format!("PULUMI_HOME={}", r.ws.path("home/.pulumi").display());
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let p = entry.path();
        let cmd = std::fs::read(p.join("cmdline")).unwrap_or_default();
        let env = std::fs::read(p.join("environ")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        let names_home = env.split(|b| *b == 0).any(|v| v == home.as_bytes());
        if cmd.contains("pulumi-") && names_home {
            left.push(format!("{}: {cmd}", entry.file_name().to_string_lossy()));
        }
    }
    left
}

/// `strata up` creates the Namespace and the ConfigMap through the real provider, a
/// second `up` leaves them alone, `destroy` deletes them both, to the end. The kubeconfig's
/// token is nowhere in clear, and no provider process outlives strata.
#[test]
fn the_real_kubernetes_provider_creates_and_destroys_a_namespace_and_a_configmap() {
    let test = "real_pulumi::kubernetes_provider";
    let Some(dir) = provider_dir(test) else {
        return;
    };
    let Some(cluster) = crate::real_kube::cluster(test) else {
        return;
    };
    let Some(r) = workspace(test, &dir, &cluster) else {
        return;
    };
    let cm_path = format!("/api/v1/namespaces/{NAMESPACE}/configmaps/settings");
    let first = strata(&r, "up");
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(status_of(&first, "k8s"), "succeeded", "{first:?}");
    let ns = get(&cluster, &format!("/api/v1/namespaces/{NAMESPACE}"))
        .unwrap_or_else(|| panic!("no namespace {NAMESPACE}: {first:?}"));
    assert_eq!(ns["status"]["phase"], "Active", "{ns}");
    // Written by server-side apply, under the provider's own field manager (in that mode
    // it sets no `app.kubernetes.io/managed-by` label).
    let manager = &ns["metadata"]["managedFields"][0];
    assert_eq!(manager["operation"], "Apply", "{ns}");
    assert!(
        manager["manager"]
            .as_str()
            .is_some_and(|m| m.starts_with("pulumi-kubernetes")),
        "{ns}"
    );
    let cm = get(&cluster, &cm_path).unwrap_or_else(|| panic!("no ConfigMap: {first:?}"));
    assert_eq!(cm["data"]["greeting"], "hello from strata", "{cm}");

    // Nothing changed: the real provider's diff is empty, the ConfigMap is not written.
    let steady = strata(&r, "up");
    assert_eq!(steady.code, 0, "{steady:?}");
    let again = get(&cluster, &cm_path).expect("ConfigMap after the second up");
    assert_eq!(
        again["metadata"]["resourceVersion"], cm["metadata"]["resourceVersion"],
        "the second up rewrote the ConfigMap: {steady:?}"
    );

    let down = strata(&r, "destroy");
    assert_eq!(down.code, 0, "{down:?}");
    assert_eq!(status_of(&down, "k8s"), "succeeded", "{down:?}");
    assert!(
        get(&cluster, &cm_path).is_none(),
        "ConfigMap left: {down:?}"
    );
    // Gone, not Terminating: the namespace controller emptied it and removed its
    // finalizer, and the provider waited for that.
    assert_eq!(
        get(&cluster, &format!("/api/v1/namespaces/{NAMESPACE}")),
        None,
        "the Namespace is left: {down:?}"
    );
    let token = cluster.var("ADMIN_TOKEN").to_string();
    assert_no_clear_secret(&r, &[&token], &[&first, &steady, &down]);
    assert_eq!(providers_left(&r), Vec::<String>::new(), "processes left");
}
