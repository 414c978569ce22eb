//! Which cluster is a stack's: the one its kubeconfig hook merged (remembered in
//! `.strata/<stack>/cluster.json` with the API server it named), or the one the
//! profile's `cluster:` names. The secrets step writes only there, and never into the
//! kubeconfig's current context by accident: when strata cannot know, it refuses.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::util::display_path;

/// The file, under the stack's state folder, where the kubeconfig hook leaves the
/// cluster it merged.
pub const REMEMBERED: &str = "cluster.json";

/// A cluster: a context of a kubeconfig file, and the API server it names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterTarget {
    pub kubeconfig: PathBuf,
    pub context: String,
    pub server: String,
}

impl std::fmt::Display for ClusterTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "context `{}` of {} (server {})",
            self.context,
            display_path(&self.kubeconfig),
            self.server
        )
    }
}

/// What the kubeconfig hook of `project` leaves for the secrets step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    project: String,
    #[serde(flatten)]
    target: ClusterTarget,
}

/// Called by the kubeconfig hook once it merged `context` into `kubeconfig`: the stack's
/// cluster is now that context, pointing at the server the file names for it.
pub fn remember(
    state_dir: &Path,
    project: &str,
    kubeconfig: &Path,
    context: &str,
) -> Result<ClusterTarget, String> {
    let target = ClusterTarget {
        kubeconfig: kubeconfig.to_path_buf(),
        context: context.to_string(),
        server: server_of(kubeconfig, context)?,
    };
    let record = Remembered {
        project: project.to_string(),
        target: target.clone(),
    };
    let text = serde_json::to_string_pretty(&record).map_err(|e| e.to_string())?;
    crate::files::write_atomic(&state_dir.join(REMEMBERED), text.as_bytes(), None)
        .map_err(|e| format!("cannot remember the stack's cluster: {e}"))?;
    Ok(target)
}

/// The API server that `context` of the kubeconfig file `path` points at.
pub fn server_of(path: &Path, context: &str) -> Result<String, String> {
    let config = kube::config::Kubeconfig::read_from(path)
        .map_err(|e| format!("cannot read the kubeconfig {}: {e}", display_path(path)))?;
    let Some(ctx) = config
        .contexts
        .iter()
        .find(|c| c.name == context)
        .and_then(|c| c.context.as_ref())
    else {
        let names: Vec<&str> = config.contexts.iter().map(|c| c.name.as_str()).collect();
        return Err(format!(
            "the kubeconfig {} has no context `{context}` (it has: {})",
            display_path(path),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        ));
    };
    config
        .clusters
        .iter()
        .find(|c| c.name == ctx.cluster)
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .ok_or_else(|| {
            format!(
                "context `{context}` of the kubeconfig {} names cluster `{}`, which has no server",
                display_path(path),
                ctx.cluster
            )
        })
}

/// What resolving the stack's cluster needs to know of the run.
pub struct Lookup<'a> {
    pub stack: &'a str,
    pub root: &'a Path,
    pub state_dir: &'a Path,
    /// The stack config's scalar values, for `${config.KEY}`.
    pub config: &'a BTreeMap<String, String>,
    /// The run's environment, for `${env.NAME}` and `~`.
    pub env: &'a BTreeMap<String, String>,
}

/// The stack's cluster as its kubeconfig hook (run by `project`) merged it, checked
/// against the kubeconfig as it is now; Err says why strata cannot know it, and what to
/// do, for people.
pub fn from_hook(project: &str, at: &Lookup) -> Result<ClusterTarget, String> {
    let rerun = format!(
        "run `strata up -s {} --project {project}` to merge it (its kubeconfig hook remembers the cluster for this stack)",
        at.stack
    );
    let remembered: Option<Remembered> = std::fs::read_to_string(at.state_dir.join(REMEMBERED))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let Some(r) = remembered.filter(|r| r.project == project) else {
        return Err(format!(
            "the cluster of stack {} is not known on this machine: the kubeconfig hook of {project} has not merged it here; {rerun}",
            at.stack
        ));
    };
    let now = server_of(&r.target.kubeconfig, &r.target.context).map_err(|e| {
        format!(
            "the cluster of stack {} is gone from the kubeconfig: {e}; {rerun}",
            at.stack
        )
    })?;
    if now != r.target.server {
        return Err(format!(
            "context `{}` of {} now points at {now}, not at {} where the kubeconfig hook of {project} left stack {}'s cluster (another stack or tool reused the name); {rerun}",
            r.target.context,
            display_path(&r.target.kubeconfig),
            r.target.server,
            at.stack
        ));
    }
    Ok(r.target)
}

/// The stack's cluster as the profile's `cluster:` names it (`kubeconfig`, `context`, each
/// with `${config.KEY}` and `${env.NAME}` filled in; no context: the file's only one).
pub fn from_profile(
    kubeconfig: &str,
    context: Option<&str>,
    at: &Lookup,
) -> Result<ClusterTarget, String> {
    let file = fill(kubeconfig, at)?;
    if file.trim().is_empty() {
        return Err(format!(
            "the profile's `cluster: kubeconfig:` is empty for stack {}: set the kubeconfig file's path",
            at.stack
        ));
    }
    let file = absolute(file.trim(), at);
    let context = match context.map(|c| fill(c, at)).transpose()? {
        Some(c) if !c.trim().is_empty() => c.trim().to_string(),
        _ => only_context(&file)?,
    };
    let server = server_of(&file, &context).map_err(|e| {
        format!(
            "{e}: point the profile's `cluster:` (or the config keys it reads) at stack {}'s kubeconfig and context",
            at.stack
        )
    })?;
    Ok(ClusterTarget {
        kubeconfig: file,
        context,
        server,
    })
}

/// The one context of a kubeconfig file; with several, the profile must name one (its
/// `current-context` can change under strata's feet).
fn only_context(file: &Path) -> Result<String, String> {
    let config = kube::config::Kubeconfig::read_from(file)
        .map_err(|e| format!("cannot read the kubeconfig {}: {e}", display_path(file)))?;
    match config.contexts.as_slice() {
        [one] => Ok(one.name.clone()),
        many => Err(format!(
            "the kubeconfig {} has {} contexts ({}) and the profile's `cluster: context:` names none: set it to the stack's (its current-context may change under strata's feet)",
            display_path(file),
            many.len(),
            many.iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// `text` with `${config.KEY}` and `${env.NAME}` filled in.
fn fill(text: &str, at: &Lookup) -> Result<String, String> {
    let mut out = String::new();
    let mut last = 0;
    for (range, inner) in crate::util::placeholders(text) {
        out.push_str(&text[last..range.start]);
        out.push_str(fill_one(text, inner, at)?);
        last = range.end;
    }
    out.push_str(&text[last..]);
    Ok(out)
}

/// The value of one placeholder (`inner` is what is between `${` and `}`).
fn fill_one<'a>(text: &str, inner: &str, at: &'a Lookup) -> Result<&'a str, String> {
    if let Some(key) = inner.strip_prefix("config.") {
        return at.config.get(key).map(String::as_str).ok_or_else(|| {
            format!(
                "the profile's `cluster:` reads config `{key}`, which stack {}'s config does not set: run `strata up` to be asked, or add it to config/pulumi/Pulumi.{}.yaml",
                at.stack, at.stack
            )
        });
    }
    if let Some(name) = inner.strip_prefix("env.") {
        return at.env.get(name).map(String::as_str).ok_or_else(|| {
            format!("the profile's `cluster:` reads ${{env.{name}}}, which is not set: set it in the environment or config/pulumi/environment")
        });
    }
    Err(format!(
        "`cluster:` value `{text}` has `${{{inner}}}`: only ${{config.KEY}} and ${{env.NAME}} are filled in"
    ))
}

/// `~/…` from HOME; a relative path from the workspace root.
fn absolute(path: &str, at: &Lookup) -> PathBuf {
    if let (Some(rest), Some(home)) = (path.strip_prefix("~/"), at.env.get("HOME")) {
        return Path::new(home).join(rest);
    }
    at.root.join(path)
}

/// The namespaces the secrets step wrote into a cluster, remembered for the next run's
/// pruning. Pruning reads them only for the same cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    pub server: String,
    pub context: String,
    pub namespaces: Vec<String>,
}

impl Written {
    /// The namespaces written into `target` by the last run; none when the record is of
    /// another cluster or from before strata remembered which (an old bare list), so a
    /// run never prunes a cluster it did not write.
    pub fn previous(text: Option<&str>, target: &ClusterTarget) -> (Vec<String>, Option<String>) {
        let Some(text) = text else {
            return (Vec::new(), None);
        };
        match serde_json::from_str::<Written>(text) {
            Ok(w) if w.server == target.server => (w.namespaces, None),
            Ok(w) => (
                Vec::new(),
                Some(format!(
                    "the last secrets were written into {} (context {}), not this cluster: nothing is pruned there from here",
                    w.server, w.context
                )),
            ),
            Err(_) => (
                Vec::new(),
                Some(
                    "the record of the last written namespaces does not say which cluster they were in: nothing is pruned this time"
                        .into(),
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests;
