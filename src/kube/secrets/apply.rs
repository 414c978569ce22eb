//! Server-side apply of one Secret per namespace (field manager `strata`), the namespaces
//! it needs created, and the strata Secrets of namespaces that no longer have secrets
//! deleted.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};

use super::error::{KubeError, api_error};
use super::names::{group_by_namespace, is_dns_subdomain};
use super::{
    AppliedSecret, ApplyReport, FIELD_MANAGER, MANAGED_BY_LABEL, MANAGED_BY_VALUE, Outcome,
    Removal, RemovedSecret,
};

/// Applies one Secret `secret_name` per namespace prefix of `secrets`, and
/// deletes the strata Secret from each of `managed_namespaces` that has no
/// secrets any more. Keys are validated before anything is sent.
/// With `force`, fields another field manager owns are taken over (server-side
/// apply's force); without it, such a conflict is an error naming the manager.
pub async fn apply_secrets(
    client: Client,
    secret_name: &str,
    secrets: &BTreeMap<String, String>,
    managed_namespaces: &[String],
    force: bool,
) -> Result<ApplyReport, KubeError> {
    if !is_dns_subdomain(secret_name) {
        return Err(KubeError::InvalidSecretName {
            name: secret_name.to_string(),
        });
    }
    let grouped = group_by_namespace(secrets)?;
    let mut params = PatchParams::apply(FIELD_MANAGER);
    if force {
        params = params.force();
    }

    let mut report = ApplyReport {
        secret_name: secret_name.to_string(),
        applied: Vec::new(),
        removed: Vec::new(),
    };

    for (namespace, data) in &grouped {
        let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let action = || format!("write the Secret `{secret_name}` in namespace `{namespace}`");
        let before = api
            .get_opt(secret_name)
            .await
            .map_err(|e| api_error(action(), e))?;
        let patch = Patch::Apply(secret_object(namespace, secret_name, data));
        let applied = match api.patch(secret_name, &params, &patch).await {
            // The namespace does not exist (a GET of the Secret just answers 404 for the
            // Secret): create it, then apply again.
            Err(kube::Error::Api(status)) if is_namespace_missing(&status, namespace) => {
                create_namespace(&client, namespace).await?;
                api.patch(secret_name, &params, &patch).await
            }
            other => other,
        };
        let after = applied.map_err(|e| match e {
            kube::Error::Api(status) if status.is_conflict() => KubeError::Conflict {
                namespace: namespace.clone(),
                secret_name: secret_name.to_string(),
                detail: conflicts(&status),
            },
            e => api_error(action(), e),
        })?;
        let outcome = match before {
            None => Outcome::Created,
            Some(before)
                if before.metadata.resource_version.is_some()
                    && before.metadata.resource_version == after.metadata.resource_version =>
            {
                Outcome::Unchanged
            }
            Some(_) => Outcome::Updated,
        };
        report.applied.push(AppliedSecret {
            namespace: namespace.clone(),
            keys: data.keys().cloned().collect(),
            outcome,
        });
    }

    let stale: BTreeSet<&String> = managed_namespaces
        .iter()
        .filter(|ns| !grouped.contains_key(*ns))
        .collect();
    for namespace in stale {
        let removal = remove_secret(&client, namespace, secret_name).await?;
        report.removed.push(RemovedSecret {
            namespace: namespace.clone(),
            removal,
        });
    }
    Ok(report)
}

/// The fields of a 409 apply conflict by the manager that set them, on one line:
/// `` `ops-console` set .data.a, .data.b ``. The server's message lists them one per
/// line, so it is the fallback only.
fn conflicts(status: &kube::core::Status) -> String {
    let mut by_manager: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for cause in status.details.iter().flat_map(|d| &d.causes) {
        let manager = cause
            .message
            .split('"')
            .nth(1)
            .unwrap_or("another manager")
            .to_string();
        by_manager
            .entry(manager)
            .or_default()
            .push(cause.field.clone());
    }
    if by_manager.is_empty() {
        return status
            .message
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
    }
    by_manager
        .iter()
        .map(|(manager, fields)| format!("`{manager}` set {}", fields.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Whether an apply's 404 is about the namespace (`namespaces "x" not found`) rather than
/// the object.
fn is_namespace_missing(status: &kube::core::Status, namespace: &str) -> bool {
    status.is_not_found()
        && status
            .details
            .as_ref()
            .is_some_and(|d| d.kind == "namespaces" && d.name == namespace)
}

/// Creates a namespace (field manager `strata`); one that appeared meanwhile is fine.
async fn create_namespace(client: &Client, namespace: &str) -> Result<(), KubeError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..PostParams::default()
    };
    match api.create(&params, &namespace_object(namespace)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(()),
        Err(e) => Err(api_error(
            format!("create the namespace `{namespace}` (it does not exist)"),
            e,
        )),
    }
}

/// Deletes the Secret if it is strata's (by label), guarded by its uid.
async fn remove_secret(
    client: &Client,
    namespace: &str,
    secret_name: &str,
) -> Result<Removal, KubeError> {
    let action = || format!("delete the Secret `{secret_name}` in namespace `{namespace}`");
    let api: Api<Secret> = Api::namespaced(client.clone(), namespace);
    let existing = match api.get_opt(secret_name).await {
        Ok(existing) => existing,
        // The namespace itself may be gone.
        Err(kube::Error::Api(status)) if status.code == 404 => None,
        Err(e) => return Err(api_error(action(), e)),
    };
    let Some(existing) = existing else {
        return Ok(Removal::Absent);
    };
    let managed = existing
        .metadata
        .labels
        .as_ref()
        .and_then(|labels| labels.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY_VALUE);
    if !managed {
        return Ok(Removal::KeptNotManaged);
    }
    let params = DeleteParams {
        preconditions: existing.metadata.uid.map(|uid| Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match api.delete(secret_name, &params).await {
        Ok(_) => Ok(Removal::Deleted),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Removal::Absent),
        Err(e) => Err(api_error(action(), e)),
    }
}

fn namespace_object(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    }
}

/// The full desired Secret. `data` (not `stringData`) so that server-side
/// apply owns each key and drops the ones no longer sent.
fn secret_object(namespace: &str, name: &str, data: &BTreeMap<String, &str>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            namespace: Some(namespace.to_string()),
            labels: Some(BTreeMap::from([(
                MANAGED_BY_LABEL.to_string(),
                MANAGED_BY_VALUE.to_string(),
            )])),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_string()),
        data: Some(
            data.iter()
                .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::fake_kube::{self, FakeApi};
    use super::super::fixtures::{NAME, map, secrets};
    use super::*;
    use kube::client::Body;
    use serde_json::{Value, json};

    /// A client over `tower_test::mock::pair()`, answered by the in-memory
    /// fake API. The task returns the fake (with its request log) once the
    /// client is dropped.
    fn mock(api: FakeApi) -> (Client, tokio::task::JoinHandle<FakeApi>) {
        let (service, mut handle) =
            tower_test::mock::pair::<http::Request<Body>, http::Response<Body>>();
        let server = tokio::spawn(async move {
            let mut api = api;
            while let Some((request, send)) = handle.next_request().await {
                let (parts, body) = request.into_parts();
                let body = body.collect_bytes().await.expect("request body");
                let content_type = parts
                    .headers
                    .get(http::header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok());
                let response = api.handle(fake_kube::Request::new(
                    parts.method.as_str(),
                    &parts.uri.to_string(),
                    content_type,
                    &String::from_utf8_lossy(&body),
                ));
                send.send_response(
                    http::Response::builder()
                        .status(response.status)
                        .header(http::header::CONTENT_TYPE, "application/json")
                        .body(Body::from(response.body.to_string().into_bytes()))
                        .expect("response"),
                );
            }
            api
        });
        (Client::new(service, "default"), server)
    }

    /// Runs `apply_secrets` against the mock; returns the report and the fake.
    async fn run(
        api: FakeApi,
        secrets: &BTreeMap<String, String>,
        managed: &[&str],
    ) -> (Result<ApplyReport, KubeError>, FakeApi) {
        let (client, server) = mock(api);
        let managed: Vec<String> = managed.iter().map(|s| s.to_string()).collect();
        let result = apply_secrets(client, NAME, secrets, &managed, false).await;
        let api = server.await.expect("mock server");
        (result, api)
    }

    fn b64(text: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    fn assert_apply(request: &fake_kube::Request, path: &str) {
        assert_eq!(request.line(), format!("PATCH {path}"));
        assert_eq!(
            request.content_type.as_deref(),
            Some("application/apply-patch+yaml")
        );
        assert_eq!(
            request.query.get("fieldManager").map(String::as_str),
            Some("strata")
        );
        // Conflicts are reported, not taken over (`--force-conflicts` does that).
        assert_eq!(request.query.get("force"), None);
    }

    fn stored_data(api: &FakeApi, namespace: &str) -> BTreeMap<String, String> {
        let key = format!("namespaces/{namespace}/secrets/{NAME}");
        let object = api.objects().remove(&key).expect("secret stored");
        object["data"]
            .as_object()
            .expect("data")
            .iter()
            .map(|(k, v)| {
                let bytes = fake_kube::decode_base64(v.as_str().expect("string")).expect("base64");
                (k.clone(), String::from_utf8(bytes).expect("utf8"))
            })
            .collect()
    }

    #[tokio::test]
    async fn first_run_applies_namespaces_and_secrets() {
        let (result, api) = run(FakeApi::new(), &secrets(), &[]).await;
        let report = result.unwrap();

        let requests = api.requests();
        let lines: Vec<String> = requests.iter().map(|r| r.line()).collect();
        // The namespaces do not exist: each apply answers 404 for its namespace, which
        // is then created (by POST, so no permission on other namespaces is needed).
        assert_eq!(
            lines,
            [
                "GET /api/v1/namespaces/apps/secrets/strata-secrets",
                "PATCH /api/v1/namespaces/apps/secrets/strata-secrets",
                "POST /api/v1/namespaces",
                "PATCH /api/v1/namespaces/apps/secrets/strata-secrets",
                "GET /api/v1/namespaces/monitoring/secrets/strata-secrets",
                "PATCH /api/v1/namespaces/monitoring/secrets/strata-secrets",
                "POST /api/v1/namespaces",
                "PATCH /api/v1/namespaces/monitoring/secrets/strata-secrets",
            ]
        );
        assert_eq!(
            requests[2].json(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "apps"}})
        );
        assert_eq!(
            requests[2].query.get("fieldManager").map(String::as_str),
            Some("strata")
        );
        assert_apply(
            &requests[7],
            "/api/v1/namespaces/monitoring/secrets/strata-secrets",
        );
        assert_eq!(
            requests[7].json(),
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": "strata-secrets",
                    "namespace": "monitoring",
                    "labels": {"app.kubernetes.io/managed-by": "strata"},
                },
                "type": "Opaque",
                "data": {
                    "adminpass": b64("s3cret-admin"),
                    "token": b64("t0ken-value"),
                },
            })
        );
        // Values travel only base64-encoded in `data`.
        assert!(requests.iter().all(|r| !r.body.contains("s3cret-admin")));

        assert_eq!(
            report,
            ApplyReport {
                secret_name: NAME.into(),
                applied: vec![
                    AppliedSecret {
                        namespace: "apps".into(),
                        keys: vec!["db-password".into()],
                        outcome: Outcome::Created,
                    },
                    AppliedSecret {
                        namespace: "monitoring".into(),
                        keys: vec!["adminpass".into(), "token".into()],
                        outcome: Outcome::Created,
                    },
                ],
                removed: vec![],
            }
        );
        assert!(report.changed());
        assert_eq!(report.namespaces(), ["apps", "monitoring"]);
        assert_eq!(
            stored_data(&api, "monitoring"),
            map(&[("adminpass", "s3cret-admin"), ("token", "t0ken-value")])
        );
    }

    #[tokio::test]
    async fn second_run_changes_nothing() {
        let (first, api) = run(FakeApi::new(), &secrets(), &[]).await;
        first.unwrap();
        let before = api.objects();
        let first_requests = api.requests().len();

        let (second, api) = run(api, &secrets(), &["apps", "monitoring"]).await;
        let report = second.unwrap();
        assert!(!report.changed());
        assert!(
            report
                .applied
                .iter()
                .all(|a| a.outcome == Outcome::Unchanged)
        );
        assert!(report.removed.is_empty());
        assert_eq!(api.objects(), before, "resourceVersions moved");
        let methods: Vec<String> = api.requests()[first_requests..]
            .iter()
            .map(|r| r.method.clone())
            .collect();
        assert_eq!(methods, ["GET", "PATCH", "GET", "PATCH"]);
    }

    #[tokio::test]
    async fn removed_key_is_dropped_from_the_secret() {
        let (first, api) = run(FakeApi::new(), &secrets(), &[]).await;
        first.unwrap();
        let fewer = map(&[
            ("monitoring:adminpass", "changed"),
            ("apps:db-password", "db-pa55"),
        ]);
        let (second, api) = run(api, &fewer, &["apps", "monitoring"]).await;
        let report = second.unwrap();
        assert_eq!(report.applied[0].outcome, Outcome::Unchanged);
        assert_eq!(report.applied[1].outcome, Outcome::Updated);
        assert_eq!(report.applied[1].keys, ["adminpass"]);
        let last = api.requests().pop().unwrap();
        assert_eq!(last.json()["data"], json!({"adminpass": b64("changed")}));
        assert_eq!(
            stored_data(&api, "monitoring"),
            map(&[("adminpass", "changed")])
        );
    }

    #[tokio::test]
    async fn namespace_without_secrets_loses_its_secret() {
        let (first, mut api) = run(FakeApi::new(), &secrets(), &[]).await;
        first.unwrap();
        // Someone else's Secret of the same name, without strata's label.
        api.insert(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "theirs"}}),
        );
        api.insert(json!({
            "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": NAME, "namespace": "theirs"},
        }));
        let start = api.requests().len();

        let only_apps = map(&[("apps:db-password", "db-pa55")]);
        let managed = ["apps", "monitoring", "gone", "theirs", "monitoring"];
        let (result, api) = run(api, &only_apps, &managed).await;
        let report = result.unwrap();

        assert_eq!(
            report.removed,
            [
                RemovedSecret {
                    namespace: "gone".into(),
                    removal: Removal::Absent
                },
                RemovedSecret {
                    namespace: "monitoring".into(),
                    removal: Removal::Deleted
                },
                RemovedSecret {
                    namespace: "theirs".into(),
                    removal: Removal::KeptNotManaged
                },
            ]
        );
        assert!(report.changed());
        let lines: Vec<String> = api.requests()[start..].iter().map(|r| r.line()).collect();
        assert_eq!(
            lines,
            [
                "GET /api/v1/namespaces/apps/secrets/strata-secrets",
                "PATCH /api/v1/namespaces/apps/secrets/strata-secrets",
                "GET /api/v1/namespaces/gone/secrets/strata-secrets",
                "GET /api/v1/namespaces/monitoring/secrets/strata-secrets",
                "DELETE /api/v1/namespaces/monitoring/secrets/strata-secrets",
                "GET /api/v1/namespaces/theirs/secrets/strata-secrets",
            ]
        );
        let objects = api.objects();
        assert!(!objects.contains_key("namespaces/monitoring/secrets/strata-secrets"));
        assert!(
            objects.contains_key("namespaces/monitoring"),
            "namespaces are never deleted"
        );
        assert!(objects.contains_key("namespaces/theirs/secrets/strata-secrets"));
        // The delete is guarded by the uid that was read.
        let delete = api
            .requests()
            .into_iter()
            .find(|r| r.method == "DELETE")
            .unwrap();
        assert!(
            delete.json()["preconditions"]["uid"].is_string(),
            "{}",
            delete.body
        );
    }

    #[tokio::test]
    async fn invalid_keys_are_refused_before_any_request() {
        let cases: [(&str, &str); 5] = [
            ("nocolon", "`nocolon` has no namespace"),
            (":key", "`` is not a valid Kubernetes namespace"),
            ("Bad_NS:key", "`Bad_NS` is not a valid Kubernetes namespace"),
            ("ns:", "`` is not a valid key"),
            ("ns:a:b", "`a:b` is not a valid key"),
        ];
        for (key, expected) in cases {
            let secrets = map(&[(key, "value-XYZ"), ("ok:fine", "v")]);
            let (result, api) = run(FakeApi::new(), &secrets, &[]).await;
            let message = result.unwrap_err().to_string();
            assert!(message.contains(expected), "{key}: {message}");
            assert!(message.contains(&format!("`{key}`")), "{message}");
            assert!(!message.contains("value-XYZ"));
            assert!(api.requests().is_empty(), "{key}: requests were sent");
        }
        let (client, server) = mock(FakeApi::new());
        let err = apply_secrets(client, "Not_Valid", &secrets(), &[], false)
            .await
            .unwrap_err();
        assert!(matches!(err, KubeError::InvalidSecretName { .. }), "{err}");
        assert!(server.await.unwrap().requests().is_empty());
    }

    #[tokio::test]
    async fn api_failure_names_the_action_and_no_value() {
        let mut api = FakeApi::new();
        api.fail_when("PATCH", "/namespaces/monitoring/secrets/", 403);
        let (result, _api) = run(api, &secrets(), &[]).await;
        let err = result.unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(
            shown.contains("cannot write the Secret `strata-secrets` in namespace `monitoring`"),
            "{shown}"
        );
        assert!(shown.contains("403"), "{shown}");
        assert!(
            shown.contains("user `fake` may not `patch` secrets in namespace `monitoring`"),
            "{shown}"
        );
        assert!(
            shown.contains("needs get, patch and delete on Secrets"),
            "{shown}"
        );
        for value in secrets().values() {
            assert!(!shown.contains(value.as_str()), "{shown}");
            assert!(!shown.contains(&b64(value)), "{shown}");
        }
    }

    #[tokio::test]
    async fn a_field_another_manager_set_is_a_conflict_unless_forced() {
        let (first, mut api) = run(FakeApi::new(), &secrets(), &[]).await;
        first.unwrap();
        api.edit(
            "monitoring",
            NAME,
            "token",
            "edited-by-hand",
            "kubectl-edit",
        );
        let start = api.requests().len();
        let managed = ["apps", "monitoring"];
        let (result, api) = run(api, &secrets(), &managed).await;
        let err = result.unwrap_err();
        assert!(matches!(err, KubeError::Conflict { .. }), "{err:?}");
        let message = err.to_string();
        for words in [
            "cannot write the Secret `strata-secrets` in namespace `monitoring`",
            "(`kubectl-edit` set .data.token)",
            "--force-conflicts",
        ] {
            assert!(message.contains(words), "{message}");
        }
        assert!(!message.contains("t0ken-value") && !message.contains("edited-by-hand"));
        assert_eq!(stored_data(&api, "monitoring")["token"], "edited-by-hand");
        assert_eq!(api.requests()[start + 3].query.get("force"), None);

        let (client, server) = mock(api);
        let managed: Vec<String> = managed.iter().map(|s| s.to_string()).collect();
        let report = apply_secrets(client, NAME, &secrets(), &managed, true)
            .await
            .unwrap();
        let api = server.await.unwrap();
        assert_eq!(report.applied[1].outcome, Outcome::Updated);
        assert_eq!(stored_data(&api, "monitoring")["token"], "t0ken-value");
        let last = api.requests().pop().unwrap();
        assert_eq!(last.query.get("force").map(String::as_str), Some("true"));
        let key = format!("namespaces/monitoring/secrets/{NAME}");
        let managers: Vec<Value> = api.objects()[&key]["metadata"]["managedFields"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["manager"].clone())
            .collect();
        assert_eq!(
            managers,
            [json!("strata")],
            "the token moved over to strata"
        );
    }
}
