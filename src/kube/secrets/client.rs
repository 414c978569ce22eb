//! A Kubernetes client from a kubeconfig file, its exec credential plugins run with the
//! project's environment and never interactively.

use std::collections::BTreeMap;
use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

use super::error::{KubeError, error_chain, kubeconfig_error};

/// Builds a client from a kubeconfig file, or from `KUBECONFIG` /
/// `~/.kube/config` when `path` is `None`; `context` overrides its
/// `current-context`. Exec credential plugins (`aws eks get-token`,
/// `gke-gcloud-auth-plugin`, `kubelogin`) run with `env` — the environment a project
/// gets, where the env file's cloud credentials are — under the kubeconfig's own `env:`
/// entries, and non-interactively (strata prompts nothing mid-run; their stderr is
/// kept for the error).
pub async fn client_from_kubeconfig(
    path: Option<&Path>,
    context: Option<&str>,
    env: &BTreeMap<String, String>,
) -> Result<Client, KubeError> {
    let location = match path {
        Some(path) => path.display().to_string(),
        None => "(KUBECONFIG or ~/.kube/config)".to_string(),
    };
    let kubeconfig = match path {
        Some(path) => Kubeconfig::read_from(path),
        None => Kubeconfig::read(),
    }
    .map_err(|e| kubeconfig_error(&location, e))?;
    let mut kubeconfig = kubeconfig;
    for user in kubeconfig.auth_infos.iter_mut() {
        if let Some(exec) = user.auth_info.as_mut().and_then(|a| a.exec.as_mut()) {
            let mut entries: Vec<std::collections::HashMap<String, String>> = env
                .iter()
                .map(|(k, v)| {
                    [
                        ("name".to_string(), k.clone()),
                        ("value".to_string(), v.clone()),
                    ]
                    .into()
                })
                .collect();
            entries.extend(exec.env.take().unwrap_or_default());
            exec.env = Some(entries);
            exec.interactive_mode = Some(kube::config::ExecInteractiveMode::Never);
        }
    }
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| kubeconfig_error(&location, e))?;
    Client::try_from(config).map_err(|e| KubeError::Client {
        location,
        detail: error_chain(&e),
    })
}

#[cfg(test)]
mod tests {
    use super::super::ApplyReport;
    use super::super::MANAGED_BY_LABEL;
    use super::super::apply::apply_secrets;
    use super::super::fake_kube::{self, FakeKube};
    use super::super::fixtures::{NAME, map, secrets};
    use super::*;
    use serde_json::json;

    /// Applies the test secrets through `kubeconfig`'s current context.
    async fn apply_through(kubeconfig: &Path) -> Result<ApplyReport, KubeError> {
        let client = client_from_kubeconfig(Some(kubeconfig), None, &BTreeMap::new()).await?;
        apply_secrets(client, NAME, &secrets(), &[], false).await
    }

    #[tokio::test]
    async fn over_http_through_a_kubeconfig_file() {
        let kube = FakeKube::start();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kube/config");
        kube.write_kubeconfig(&kubeconfig).unwrap();

        let report = apply_through(&kubeconfig).await.unwrap();
        assert_eq!(report.applied.len(), 2);
        assert_eq!(kube.namespaces(), ["apps", "monitoring"]);
        assert_eq!(
            kube.secret_data("monitoring", NAME).unwrap(),
            map(&[("adminpass", "s3cret-admin"), ("token", "t0ken-value")])
        );
        let secret = kube.secret("apps", NAME).unwrap();
        assert_eq!(
            secret["metadata"]["labels"][MANAGED_BY_LABEL],
            json!("strata")
        );
        assert_eq!(secret["type"], json!("Opaque"));

        // Again, by explicit context: nothing changes.
        let client = client_from_kubeconfig(Some(&kubeconfig), Some("fake"), &BTreeMap::new())
            .await
            .unwrap();
        let report = apply_secrets(client, NAME, &secrets(), &["apps".into()], false)
            .await
            .unwrap();
        assert!(!report.changed());
        let patch = kube
            .requests()
            .into_iter()
            .find(|r| r.method == "PATCH")
            .unwrap();
        assert_eq!(
            patch.query.get("fieldManager").map(String::as_str),
            Some("strata")
        );
        assert_eq!(patch.content_type.as_deref(), Some(fake_kube::APPLY_PATCH));
    }

    #[tokio::test]
    async fn unreachable_cluster_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("config");
        let port = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            listener.local_addr().unwrap().port()
        };
        let kube = FakeKube::start();
        let text = kube
            .kubeconfig()
            .replace(&kube.url(), &format!("http://127.0.0.1:{port}"));
        std::fs::write(&kubeconfig, text).unwrap();
        let err = apply_through(&kubeconfig).await.unwrap_err();
        let message = err.to_string();
        assert!(
            message.starts_with("cannot write the Secret `strata-secrets` in namespace `apps`"),
            "{message}"
        );
        assert!(message.contains("reachable"), "{message}");
    }

    #[tokio::test]
    async fn kubeconfig_errors_name_the_file_or_context() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing-config");
        let err = client_from_kubeconfig(Some(&missing), None, &BTreeMap::new())
            .await
            .err()
            .unwrap();
        assert!(matches!(err, KubeError::Kubeconfig { .. }), "{err:?}");
        assert!(err.to_string().contains("missing-config"), "{err}");

        let kube = FakeKube::start();
        let path = dir.path().join("config");
        kube.write_kubeconfig(&path).unwrap();
        let err = client_from_kubeconfig(Some(&path), Some("no-such-context"), &BTreeMap::new())
            .await
            .err()
            .unwrap();
        assert!(err.to_string().contains("no-such-context"), "{err}");

        assert!(matches!(err, KubeError::UnknownContext { .. }), "{err:?}");

        // Kubeconfigs hold credentials: a parse error gives the position only.
        let garbage = dir.path().join("garbage");
        let refusal_of = async |token: &str| {
            let text = format!(
                "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: {token}\n"
            );
            std::fs::write(&garbage, text).unwrap();
            let err = client_from_kubeconfig(Some(&garbage), None, &BTreeMap::new())
                .await
                .err()
                .unwrap();
            format!("{err} {err:?}")
        };
        let shown = refusal_of("TOKEN-1: [").await;
        assert!(shown.contains("garbage"), "{shown}");
        assert!(shown.contains("line 6 column"), "{shown}");
        assert!(!shown.contains("TOKEN-1"), "{shown}");
        let shown = refusal_of("[TOKEN-2]").await;
        assert!(!shown.contains("TOKEN-2"), "{shown}");
    }
}
