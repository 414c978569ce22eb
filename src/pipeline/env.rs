//! The environment children get: the process environment overlaid by the env file,
//! strata's own secrets removed, and the Pulumi backend as Pulumi would choose it
//! (`workspace::backend`), made absolute (DESIGN.md §1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::workspace::backend::{Backends, Chosen};
use crate::workspace::{Profile, Project, ProjectKind, Workspace};

/// strata's own file backend, for a workspace that names none.
pub fn default_backend_dir(root: &Path) -> PathBuf {
    crate::workspace::backend::strata_dir(root)
}

/// The environment every Pulumi call gets: strata's environment overlaid by the env file,
/// without strata's own secrets (`STRATA_PASSPHRASE`, `STRATA_SECRET_*`), with
/// `PULUMI_BACKEND_URL` set to the workspace's backend as Pulumi chooses it for a project
/// without `backend.url` (a relative `file://` folder of the env file's taken from the
/// workspace root, which Pulumi would take from each project's folder, giving every
/// project a backend of its own). Reads only.
pub fn pulumi_env(ws: &Workspace) -> BTreeMap<String, String> {
    let backend = Backends::choose(&ws.env, &ws.root, []).workspace;
    with_backend(base_env(ws), &backend)
}

/// strata's environment overlaid by the env file, without strata's own secrets.
fn base_env(ws: &Workspace) -> BTreeMap<String, String> {
    let mut env = ws.env.clone();
    env.retain(|k, _| !crate::secrets::is_strata_secret_var(k));
    env
}

/// `env` with `backend` as its `PULUMI_BACKEND_URL`.
pub fn with_backend(
    mut env: BTreeMap<String, String>,
    backend: &Chosen,
) -> BTreeMap<String, String> {
    env.insert("PULUMI_BACKEND_URL".into(), backend.url.clone());
    env
}

/// The backends of the workspace and of each Pulumi project of `projects`.
pub fn backends<'a>(ws: &Workspace, projects: impl IntoIterator<Item = &'a Project>) -> Backends {
    let own = projects.into_iter().filter_map(|p| match &p.kind {
        ProjectKind::Pulumi { backend, .. } => {
            Some((p.path.as_str(), p.dir.as_path(), backend.as_deref()))
        }
        ProjectKind::Command(_) => None,
    });
    Backends::choose(&ws.env, &ws.root, own)
}

/// The Pulumi environment of the team's backend: where the lease and run records live
/// (see [`Backends::shared`]).
pub fn shared_env(ws: &Workspace, backends: &Backends) -> BTreeMap<String, String> {
    with_backend(base_env(ws), backends.shared())
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
