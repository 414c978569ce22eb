//! The environment children get: the process environment overlaid by the env file,
//! strata's own secrets removed, and the Pulumi backend made absolute (DESIGN.md §1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::workspace::{Profile, Workspace};

/// The default backend when neither the environment nor the env file names one.
pub fn default_backend_dir(root: &Path) -> PathBuf {
    root.join(".strata").join("backend")
}

/// The environment every Pulumi call gets: strata's environment overlaid by the env file,
/// without strata's own secrets (`STRATA_PASSPHRASE`, `STRATA_SECRET_*`), with the
/// default file backend when no `PULUMI_BACKEND_URL` is set, and a relative `file://`
/// backend resolved against the workspace root (Pulumi would resolve it against each
/// project's folder, giving every project a backend of its own). Reads only.
pub fn pulumi_env(ws: &Workspace) -> BTreeMap<String, String> {
    let mut env = ws.env.clone();
    env.retain(|k, _| !crate::secrets::is_strata_secret_var(k));
    let url = match env.get("PULUMI_BACKEND_URL").filter(|u| !u.is_empty()) {
        Some(u) => absolute_file_backend(u, &ws.root),
        None => format!("file://{}", default_backend_dir(&ws.root).display()),
    };
    env.insert("PULUMI_BACKEND_URL".into(), url);
    env
}

/// `file://./state`, `file://state` → `file://<root>/state` (query kept); every other
/// URL (absolute file paths, `file://~`, cloud URLs) unchanged.
pub fn absolute_file_backend(url: &str, root: &Path) -> String {
    let Some(rest) = url.strip_prefix("file://") else {
        return url.to_string();
    };
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if path.is_empty() || path.starts_with('/') || path.starts_with('~') {
        return url.to_string();
    }
    let trimmed = path.strip_prefix("./").unwrap_or(path);
    let abs = if trimmed == "." || trimmed.is_empty() {
        root.to_path_buf()
    } else {
        root.join(trimmed)
    };
    match query {
        Some(q) => format!("file://{}?{q}", abs.display()),
        None => format!("file://{}", abs.display()),
    }
}

/// A self-managed backend (file, s3, gs, azblob, postgres...) rather than the Pulumi
/// Cloud service (http/https). Self-managed backends use the passphrase secrets provider
/// by default.
pub fn self_managed(env: &BTreeMap<String, String>) -> bool {
    env.get("PULUMI_BACKEND_URL")
        .is_some_and(|u| !u.starts_with("https://") && !u.starts_with("http://"))
}

/// The base environment of every child of a run (DESIGN.md §1): the Pulumi environment
/// plus `STRATA_*`, with the organization preflight found.
pub fn child_env(
    ws: &Workspace,
    stack: &str,
    profile: &Profile,
    org: Option<&str>,
) -> BTreeMap<String, String> {
    let mut env = pulumi_env(ws);
    env.insert("STRATA_ROOT".into(), ws.root.display().to_string());
    env.insert("STRATA_STACK".into(), stack.to_string());
    env.insert("STRATA_PROVIDER".into(), profile.name.clone());
    env.insert("STRATA_INFRA_TYPE".into(), profile.infra_type.clone());
    if let Some(org) = org {
        env.insert("STRATA_ORG".into(), org.to_string());
    }
    env
}

/// The organization stack references use, when it is known without asking Pulumi:
/// `organization` on a self-managed backend (Pulumi's rule), else `STRATA_ORG`, else
/// `PULUMI_ORG`.
pub fn known_org(env: &BTreeMap<String, String>) -> Option<String> {
    if self_managed(env) {
        return Some("organization".into());
    }
    env.get("STRATA_ORG")
        .or_else(|| env.get("PULUMI_ORG"))
        .filter(|o| !o.is_empty())
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_file_backends_become_absolute() {
        let root = Path::new("/w");
        for (url, want) in [
            ("file://./state", "file:///w/state"),
            ("file://state", "file:///w/state"),
            (
                "file://./state?no_checksum=true",
                "file:///w/state?no_checksum=true",
            ),
            ("file://.", "file:///w"),
            ("file:///abs/state", "file:///abs/state"),
            ("file://~", "file://~"),
            ("file://~/x", "file://~/x"),
            ("s3://bucket", "s3://bucket"),
            ("https://api.pulumi.com", "https://api.pulumi.com"),
        ] {
            assert_eq!(absolute_file_backend(url, root), want, "{url}");
        }
    }

    #[test]
    fn self_managed_backends() {
        let env = |u: &str| BTreeMap::from([("PULUMI_BACKEND_URL".to_string(), u.to_string())]);
        for u in ["file:///x", "s3://b", "gs://b", "azblob://c"] {
            assert!(self_managed(&env(u)), "{u}");
            assert_eq!(known_org(&env(u)).as_deref(), Some("organization"));
        }
        assert!(!self_managed(&env("https://api.pulumi.com")));
        let mut cloud = env("https://api.pulumi.com");
        assert_eq!(known_org(&cloud), None);
        cloud.insert("PULUMI_ORG".into(), "acme".into());
        assert_eq!(known_org(&cloud).as_deref(), Some("acme"));
    }
}
