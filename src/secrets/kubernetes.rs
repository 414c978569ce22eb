//! Writes the stack's secrets into the cluster as Kubernetes Secrets (server-side apply).
//!
//! A secret key `monitoring:adminpass` becomes the data key `adminpass` of the
//! Secret `<secret_name>` in the namespace `monitoring`. The Secret is applied with
//! field manager `strata`, so a re-run changes nothing and a key dropped from the map
//! is dropped from the Secret. A field of it that another manager set to another value
//! is a conflict, reported with that manager's name; only `force` (`strata up
//! --force-conflicts`) takes it over. A namespace that does not exist is created (the
//! apply answers 404 for it), so a user allowed Secrets in existing namespaces needs no
//! permission on Namespaces. Reports and errors name namespaces and keys, never values.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "strata";
/// The label that marks Secrets written by strata.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "strata";

/// Why secrets could not be written to the cluster. Messages never contain a
/// secret value.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error(
        "secret key `{key}` has no namespace: name it `<namespace>:<key>` (the namespace is \
         where its Kubernetes Secret is written), e.g. `strata secrets set monitoring:{key}`"
    )]
    KeyWithoutNamespace { key: String },

    #[error(
        "secret key `{key}`: `{namespace}` is not a valid Kubernetes namespace (lower-case \
         letters, digits and `-`, at most 63 characters, starting and ending with a letter or \
         digit); rename the key"
    )]
    InvalidNamespace { key: String, namespace: String },

    #[error(
        "secret key `{key}`: `{data_key}` is not a valid key in a Kubernetes Secret (letters, \
         digits, `-`, `_` and `.`, at most 253 characters); rename the key"
    )]
    InvalidDataKey { key: String, data_key: String },

    #[error(
        "`{name}` is not a valid name for a Kubernetes Secret (lower-case letters, digits, `-` \
         and `.`, at most 253 characters); change the secret name in the provider profile"
    )]
    InvalidSecretName { name: String },

    #[error(
        "cannot load the kubeconfig {location}: {detail}; point KUBECONFIG at a valid \
         kubeconfig file (the infrastructure stage writes one)"
    )]
    Kubeconfig { location: String, detail: String },

    #[error(
        "the kubeconfig {location} has no context `{context}`; use one that \
         `kubectl config get-contexts` lists"
    )]
    UnknownContext { location: String, context: String },

    #[error(
        "the kubeconfig {location} sets no current-context; set one with \
         `kubectl config use-context NAME` or name the context to use"
    )]
    NoCurrentContext { location: String },

    #[error("cannot create a Kubernetes client from the kubeconfig {location}: {detail}")]
    Client { location: String, detail: String },

    #[error(
        "cannot write the Secret `{secret_name}` in namespace `{namespace}`: another field \
         manager set fields of it to other values ({detail}); strata does not take them over \
         silently: change them back or remove them with the tool that set them, or run \
         `strata up --force-conflicts` to make strata their manager"
    )]
    Conflict {
        namespace: String,
        secret_name: String,
        detail: String,
    },

    #[error("cannot {action}: {detail}{hint}")]
    Api {
        action: String,
        detail: String,
        hint: &'static str,
    },
}

/// What happened to one namespace's Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
}

/// A Secret that was applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedSecret {
    pub namespace: String,
    /// The data keys in the Secret (names only).
    pub keys: Vec<String>,
    pub outcome: Outcome,
}

/// What happened in a namespace that no longer has secrets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The Secret was deleted.
    Deleted,
    /// There was no such Secret.
    Absent,
    /// A Secret of that name exists but lacks the strata label: left alone.
    KeptNotManaged,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovedSecret {
    pub namespace: String,
    pub removal: Removal,
}

/// The result of [`apply_secrets`]: names only, never values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyReport {
    pub secret_name: String,
    /// One entry per namespace that has secrets, sorted by namespace.
    pub applied: Vec<AppliedSecret>,
    /// One entry per namespace of `managed_namespaces` that has none now.
    pub removed: Vec<RemovedSecret>,
}

impl ApplyReport {
    /// Whether anything changed in the cluster.
    pub fn changed(&self) -> bool {
        self.applied.iter().any(|a| a.outcome != Outcome::Unchanged)
            || self.removed.iter().any(|r| r.removal == Removal::Deleted)
    }

    /// The namespaces that hold a strata Secret after this run; record them
    /// to pass as `managed_namespaces` next time.
    pub fn namespaces(&self) -> Vec<String> {
        self.applied.iter().map(|a| a.namespace.clone()).collect()
    }
}

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

/// Splits `ns:key` keys into namespace → data key → value, validating names.
fn group_by_namespace(
    secrets: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, BTreeMap<String, &str>>, KubeError> {
    let mut grouped: BTreeMap<String, BTreeMap<String, &str>> = BTreeMap::new();
    for (key, value) in secrets {
        let Some((namespace, data_key)) = key.split_once(':') else {
            return Err(KubeError::KeyWithoutNamespace { key: key.clone() });
        };
        if !is_dns_label(namespace) {
            return Err(KubeError::InvalidNamespace {
                key: key.clone(),
                namespace: namespace.to_string(),
            });
        }
        if !is_secret_data_key(data_key) {
            return Err(KubeError::InvalidDataKey {
                key: key.clone(),
                data_key: data_key.to_string(),
            });
        }
        grouped
            .entry(namespace.to_string())
            .or_default()
            .insert(data_key.to_string(), value.as_str());
    }
    Ok(grouped)
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

fn api_error(action: String, error: kube::Error) -> KubeError {
    let (detail, hint) = match &error {
        kube::Error::Api(status) if status.code == 403 => match forbidden(&status.message) {
            Some(refusal) => (
                format!("the API server refused it (403 Forbidden): {refusal}"),
                FORBIDDEN_HINT,
            ),
            None => (
                format!("the API server answered 403 Forbidden: {}", status.message),
                FORBIDDEN_HINT,
            ),
        },
        kube::Error::Api(status) => {
            let hint = match status.code {
                401 => "; the kubeconfig's credentials were refused, refresh them",
                _ => "",
            };
            let reason = if status.reason.is_empty() {
                String::new()
            } else {
                format!(" {}", status.reason)
            };
            (
                format!(
                    "the API server answered {}{reason}: {}",
                    status.code, status.message
                ),
                hint,
            )
        }
        // serde's message could quote a field of the returned Secret.
        kube::Error::SerdeError(_) => (
            "the API server's answer is not a valid Kubernetes object".to_string(),
            "",
        ),
        kube::Error::Auth(kube::client::AuthError::AuthExecRun { cmd, out }) => (
            format!(
                "the kubeconfig's exec credential plugin `{cmd}` failed ({}){}",
                out.status,
                last_lines(&out.stderr)
            ),
            "; it ran with the environment of config/pulumi/environment: check the cloud credentials there (and that you are logged in, e.g. `aws sso login`, `gcloud auth login`, `az login`)",
        ),
        kube::Error::Auth(kube::client::AuthError::AuthExecStart(e)) => (
            format!("the kubeconfig's exec credential plugin could not be started: {e}"),
            "; install the plugin the kubeconfig names (its `exec.command`) and put it on PATH",
        ),
        other => (
            error_chain(other),
            "; check that the cluster is reachable with this kubeconfig",
        ),
    };
    KubeError::Api {
        action,
        detail,
        hint,
    }
}

const FORBIDDEN_HINT: &str = "; the kubeconfig's user needs get, patch and delete on Secrets \
     in each namespace strata writes to (a Role and RoleBinding there), and create on \
     Namespaces for a namespace that does not exist yet";

/// The API server's RBAC refusal (`secrets "s" is forbidden: User "u" cannot get
/// resource "secrets" in API group "" in the namespace "ns"`) in words: the user, the
/// verb, the resource and the namespace.
fn forbidden(message: &str) -> Option<String> {
    let quoted = |text: &str, after: &str| -> Option<String> {
        let rest = &text[text.find(after)? + after.len()..];
        let rest = rest.strip_prefix('"')?;
        Some(rest[..rest.find('"')?].to_string())
    };
    let user = quoted(message, "User ")?;
    let verb = message
        .split(" cannot ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .to_string();
    let resource = quoted(message, "resource ")?;
    let place = match quoted(message, "in the namespace ") {
        Some(namespace) => format!("in namespace `{namespace}`"),
        None => "at the cluster scope".to_string(),
    };
    Some(format!("user `{user}` may not `{verb}` {resource} {place}"))
}

fn kubeconfig_error(location: &str, error: kube::config::KubeconfigError) -> KubeError {
    use kube::config::KubeconfigError as E;
    let location = location.to_string();
    match error {
        E::LoadContext(context) => KubeError::UnknownContext { location, context },
        E::CurrentContextNotSet => KubeError::NoCurrentContext { location },
        // kube's parse errors quote the offending lines, which may hold
        // credentials: keep only the position.
        E::Parse(e) => {
            let text = e.to_string();
            let first_line = text.lines().next().unwrap_or_default();
            let position = first_line
                .find("line ")
                .map(|at| &first_line[at..])
                .and_then(|rest| rest.split(':').next())
                .map(|position| format!(" at {position}"))
                .unwrap_or_default();
            KubeError::Kubeconfig {
                location,
                detail: format!("it is not a valid kubeconfig (YAML error{position})"),
            }
        }
        other => KubeError::Kubeconfig {
            location,
            detail: error_chain(&other),
        },
    }
}

/// The last lines a plugin wrote on stderr, for an error message (`: ...`).
fn last_lines(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    format!(": {}", lines[lines.len().saturating_sub(3)..].join(" / "))
}

/// An error and its sources, `: `-joined (kube's top-level messages are terse).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// RFC 1123 label: a namespace name.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(|b| *b != b'-')
        && bytes.last().is_some_and(|b| *b != b'-')
}

/// RFC 1123 subdomain: a Secret name.
fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// A valid key of a Secret's `data`.
fn is_secret_data_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
#[path = "../../tests/support/fake_kube.rs"]
mod fake_kube;

#[cfg(test)]
mod tests {
    use super::fake_kube::{self, FakeApi, FakeKube};
    use super::*;
    use kube::client::Body;
    use serde_json::{Value, json};

    const NAME: &str = "strata-secrets";

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

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn secrets() -> BTreeMap<String, String> {
        map(&[
            ("monitoring:adminpass", "s3cret-admin"),
            ("monitoring:token", "t0ken-value"),
            ("apps:db-password", "db-pa55"),
        ])
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

    #[tokio::test]
    async fn over_http_through_a_kubeconfig_file() {
        let kube = FakeKube::start();
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = dir.path().join("kube/config");
        kube.write_kubeconfig(&kubeconfig).unwrap();

        let client = client_from_kubeconfig(Some(&kubeconfig), None, &BTreeMap::new())
            .await
            .unwrap();
        let report = apply_secrets(client, NAME, &secrets(), &[], false)
            .await
            .unwrap();
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
        let client = client_from_kubeconfig(Some(&kubeconfig), None, &BTreeMap::new())
            .await
            .unwrap();
        let err = apply_secrets(client, NAME, &secrets(), &[], false)
            .await
            .unwrap_err();
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
        std::fs::write(
            &garbage,
            "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: TOKEN-1: [\n",
        )
        .unwrap();
        let err = client_from_kubeconfig(Some(&garbage), None, &BTreeMap::new())
            .await
            .err()
            .unwrap();
        let shown = format!("{err} {err:?}");
        assert!(shown.contains("garbage"), "{shown}");
        assert!(shown.contains("line 6 column"), "{shown}");
        assert!(!shown.contains("TOKEN-1"), "{shown}");
        std::fs::write(
            &garbage,
            "apiVersion: v1\nkind: Config\nusers:\n- name: u\n  user:\n    token: [TOKEN-2]\n",
        )
        .unwrap();
        let err = client_from_kubeconfig(Some(&garbage), None, &BTreeMap::new())
            .await
            .err()
            .unwrap();
        assert!(!format!("{err} {err:?}").contains("TOKEN-2"), "{err}");
    }

    #[test]
    fn name_rules() {
        assert!(is_dns_label("a"));
        assert!(is_dns_label("kube-system"));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label("a-"));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(is_dns_subdomain("strata-secrets.v1"));
        assert!(!is_dns_subdomain("a..b"));
        assert!(is_secret_data_key("tls.crt"));
        assert!(is_secret_data_key("DB_PASSWORD"));
        assert!(!is_secret_data_key(".."));
        assert!(!is_secret_data_key("a/b"));
    }
}
