//! Why secrets could not be written to the cluster, in words: the action, the API
//! server's answer and what to do about it. Messages never contain a secret value, nor a
//! line of a kubeconfig (they hold credentials).

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

pub(super) fn api_error(action: String, error: kube::Error) -> KubeError {
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

pub(super) fn kubeconfig_error(location: &str, error: kube::config::KubeconfigError) -> KubeError {
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
pub(super) fn error_chain(error: &dyn std::error::Error) -> String {
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
