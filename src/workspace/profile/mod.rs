//! Provider profiles (`providers/<name>.yaml`): the model of a composed profile, and
//! loading one (the YAML as written in `raw`, composition in `compose`, checks in `check`).

mod check;
mod compose;
mod rare;
mod raw;
mod rules;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_yaml::Value;

use crate::error::{Error, Result};
use crate::util::display_path;
pub use rare::Rare;
use raw::{RawProfile, check_watch, read_yaml};
pub use rules::{ChangeKind, Rule};

/// Where entry paths are, unless a profile's `projects:` says otherwise.
pub const DEFAULT_PROJECTS_DIR: &str = "projects";

/// The two stages of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Infrastructure,
    Kubernetes,
}

impl Stage {
    pub fn key(self) -> &'static str {
        match self {
            Stage::Infrastructure => "infrastructure",
            Stage::Kubernetes => "kubernetes",
        }
    }
}

/// The type a config value must parse as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ValueType {
    #[default]
    String,
    Int,
    Bool,
    List,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigItem {
    pub key: String,
    pub prompt: String,
    #[serde(default)]
    pub default: Option<Value>,
    #[serde(default, rename = "type")]
    pub value_type: ValueType,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SecretItem {
    pub key: String,
    pub prompt: String,
    #[serde(default)]
    pub default: Option<String>,
}

/// An `on_success` hook: `- kubeconfig: {output: NAME}` or `- run: COMMAND`.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "lowercase", try_from = "RawHook")]
pub enum Hook {
    /// Merge a kubeconfig from an output into the user's kubeconfig.
    Kubeconfig(KubeconfigHook),
    /// A shell command.
    Run(String),
}

#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct KubeconfigHook {
    pub output: String,
    /// The name the incoming context, cluster and user get (`name:`, or `context:`);
    /// default `<stack>-<project folder>`.
    #[serde(default, alias = "name")]
    pub context: Option<String>,
    /// Whether the merged context becomes the kubeconfig's `current-context`
    /// (`current:`, default true, as `aws eks update-kubeconfig` does).
    #[serde(default = "yes")]
    pub current: bool,
}

fn yes() -> bool {
    true
}

/// `cluster:` of a profile: the stack's cluster as a kubeconfig file and a context in
/// it, for the built-in `@secrets` step. Values may hold `${config.KEY}` and
/// `${env.NAME}` (`crate::kube::target` fills them in); an empty context means the file's
/// only one.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterRef {
    pub kubeconfig: String,
    #[serde(default)]
    pub context: Option<String>,
}

/// How a profile says which cluster is the stack's (see [`Profile::cluster_source`]).
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterSource {
    /// `cluster:` of the profile (placeholders not yet filled in).
    Profile(ClusterRef),
    /// The kubeconfig hook of this project merges it.
    Hook { project: String },
}

/// The YAML shape of a hook: a map with exactly one of the known keys.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHook {
    #[serde(default)]
    kubeconfig: Option<KubeconfigHook>,
    #[serde(default)]
    run: Option<String>,
}

impl TryFrom<RawHook> for Hook {
    type Error = String;
    fn try_from(raw: RawHook) -> std::result::Result<Self, String> {
        match (raw.kubeconfig, raw.run) {
            (Some(k), None) => Ok(Hook::Kubeconfig(k)),
            (None, Some(r)) => Ok(Hook::Run(r)),
            _ => Err(
                "a hook is exactly one of `kubeconfig: {output: NAME}` or `run: COMMAND`".into(),
            ),
        }
    }
}

impl Hook {
    pub fn describe(&self) -> String {
        match self {
            Hook::Kubeconfig(k) => match &k.context {
                Some(c) => format!("kubeconfig (output {}, context {c})", k.output),
                None => format!("kubeconfig (output {})", k.output),
            },
            Hook::Run(cmd) => format!("run: {}", cmd.lines().next().unwrap_or("")),
        }
    }
}

/// The longest wait a profile may ask for before a retry (`retry: delay:`, `throttle:
/// delay:`); a doubling wait stops growing there. Longer is a typo, not a policy (and
/// `300000000000y` once overflowed the wait).
pub const MAX_DELAY: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// `retry:` of an entry: a failed operation whose output matches one of `on` is run
/// again, up to `attempts` tries in all, waiting `delay` before the second (doubling, up
/// to [`MAX_DELAY`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retry {
    pub attempts: u32,
    pub delay: std::time::Duration,
    /// Regexes, checked when the profile is loaded.
    pub on: Vec<String>,
}

/// A `pools:` item: a named concurrency budget. At most `limit` projects of the pool
/// run at once (and never more than `-j` in all); the limit halves when a project of the
/// pool is throttled and grows back one step at a time as its projects succeed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Pool {
    pub name: String,
    pub limit: usize,
    /// `false` (`{limit: N, adaptive: false}`): the limit never moves, as for a
    /// licence's seats.
    pub adaptive: bool,
}

/// `throttle:`: how the throttling of a pooled project is recognised (its output matches
/// one of `patterns`, the defaults and the profile's) and retried (`attempts` tries in
/// all, waiting `delay` before the second, doubling up to [`MAX_DELAY`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Throttle {
    pub patterns: Vec<String>,
    pub attempts: u32,
    pub delay: std::time::Duration,
}

/// The patterns every profile's `throttle:` starts with: AWS's `Throttling`,
/// `ThrottlingException` and `Rate exceeded`, an HTTP 429, Kubernetes' `TooManyRequests`.
pub const DEFAULT_THROTTLE_PATTERNS: &[&str] = &[
    r"Throttling",
    r"Rate exceeded",
    r"TooManyRequests",
    r"Too Many Requests",
    r"(?i)(status|code|http)[ :=/]*(code[ :=]*)?429\b",
];

impl Default for Throttle {
    fn default() -> Throttle {
        Throttle {
            patterns: DEFAULT_THROTTLE_PATTERNS
                .iter()
                .map(|s| s.to_string())
                .collect(),
            attempts: 5,
            delay: std::time::Duration::from_secs(5),
        }
    }
}

/// An `inputs:` item: config `key` <- `output` of `project`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Input {
    pub key: String,
    pub project: String,
    pub output: String,
}

/// A resolved entry of a composed list. What most entries leave unset is [`Rare`]: read
/// as the value, 8 bytes when unset (a plan shares its entries for the whole run).
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: String,
    pub description: Rare<Option<String>>,
    pub stage: Stage,
    /// `None`: the previous entry of the composed list.
    pub needs: Option<Vec<String>>,
    pub inputs: Rare<Vec<Input>>,
    pub secrets: Rare<Vec<SecretItem>>,
    pub on_success: Rare<Vec<Hook>>,
    /// `timeout:`: the operation is cancelled like Ctrl-C after this long, and fails.
    pub timeout: Option<std::time::Duration>,
    pub retry: Rare<Option<Retry>>,
    /// `watch:`: files or folders outside the project folder that it reads (paths from
    /// the workspace root), part of its fingerprint.
    pub watch: Rare<Vec<String>>,
    /// `mock_outputs:` (Terragrunt's name): stand-ins for this project's outputs, by
    /// output name, that a `preview` passes to its dependents while it has never been
    /// deployed and its own preview cannot tell the value. Never used by `up`.
    pub mock_outputs: Rare<std::collections::BTreeMap<String, serde_json::Value>>,
    /// `mock_outputs_allowed_commands:` as written (`None`: left out, which is
    /// `[preview]`, the only command allowed); see [`Entry::mocks_serve`].
    pub mock_outputs_allowed_commands: Rare<Option<Vec<String>>>,
    /// The concurrency pool it runs in: its `pool:`, else its stage's default, else the
    /// profile's (`pool:` at the top); `None`: only `-j` limits it.
    pub pool: Option<String>,
    /// `tags:`: names a selector picks entries by (`--filter tag:NAME`).
    pub tags: Rare<Vec<String>>,
    /// `config:`: stack config keys the profile sets for this project, laid over its own
    /// `Pulumi.<stack>.yaml` for the run (never written into it).
    pub config: Rare<serde_yaml::Mapping>,
    /// `stack:`: the project's own name of the run's stack, `${stack}` standing for the
    /// run's (`applications.${stack}`); `None`: the run's stack.
    pub stack: Rare<Option<String>>,
    /// `reads:`: what the stack references of its code that strata cannot resolve read
    /// (needs, declared); `None`: not declared.
    pub reads: Rare<Option<Reads>>,
    /// The file the entry was written in (profile or fragment).
    pub file: PathBuf,
}

impl Entry {
    /// Whether the entry's `mock_outputs:` serve the command `op`
    /// (`mock_outputs_allowed_commands:`, `[preview]` when left out).
    pub fn mocks_serve(&self, op: &str) -> bool {
        match &*self.mock_outputs_allowed_commands {
            Some(list) => list.iter().any(|c| c == op),
            None => op == "preview",
        }
    }

    /// The project's own stack name for the run's `stack`.
    pub fn stack_name(&self, stack: &str) -> String {
        match &*self.stack {
            Some(t) => t.replace("${stack}", stack),
            None => stack.to_string(),
        }
    }
}

/// `reads:` of an entry: the projects its unresolved stack references read, for the
/// whole entry (a list) or per file of its folder (a map of file to list). `[]` declares
/// that they read nothing strata runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, Serialize)]
#[serde(untagged)]
pub enum Reads {
    All(Vec<String>),
    ByFile(std::collections::BTreeMap<String, Vec<String>>),
}

impl Reads {
    /// Every project named, sorted and deduplicated.
    pub fn projects(&self) -> Vec<String> {
        let mut out: Vec<String> = match self {
            Reads::All(v) => v.clone(),
            Reads::ByFile(m) => m.values().flatten().cloned().collect(),
        };
        out.iter_mut()
            .for_each(|p| *p = p.trim().trim_matches('/').to_string());
        out.sort();
        out.dedup();
        out
    }

    /// Whether the references of `file` (relative to the project's folder) are declared.
    pub fn covers(&self, file: &str) -> bool {
        match self {
            Reads::All(_) => true,
            Reads::ByFile(m) => m.contains_key(file),
        }
    }
}

/// A provider profile, composed.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub file: PathBuf,
    pub description: String,
    pub infra_type: String,
    /// Environment variables the provider reads its credentials from (preflight warns
    /// when none is set; export turns them into CI secrets).
    pub credentials: Vec<String>,
    /// `infer_needs: true`: stack references found in the code are added as needs.
    pub infer_needs: bool,
    pub secret_name: String,
    /// Whether the profile names `secret_name` itself (it then asks for the Secret).
    pub secret_name_set: bool,
    /// `cluster:`: the kubeconfig and context of the stack's cluster, where no kubeconfig
    /// hook merges it (the `kubeconfig` profile's shape).
    pub cluster: Option<ClusterRef>,
    pub config: Vec<ConfigItem>,
    pub secrets: Vec<SecretItem>,
    /// `watch:` at the top: what every project of the profile reads besides its folder.
    pub watch: Vec<String>,
    /// `projects:`: the folder, relative to the workspace root, that entry paths are
    /// relative to (`projects` unless the profile says otherwise; `.` is the root).
    pub projects_dir: String,
    /// `pools:`, in the order written.
    pub pools: Vec<Pool>,
    /// `throttle:` with its defaults.
    pub throttle: Throttle,
    /// `policy:`: rules over each project's planned changes, in the order written.
    pub policy: Vec<Rule>,
    /// Infrastructure entries, then kubernetes entries, each list in composed order
    /// (shared with the plan's steps).
    pub entries: Vec<std::sync::Arc<Entry>>,
}

impl Profile {
    pub fn entry(&self, path: &str) -> Option<&Entry> {
        self.entries.iter().map(|e| &**e).find(|e| e.path == path)
    }

    /// Every secret of the profile and of its entries (profile-level first).
    pub fn all_secrets(&self) -> Vec<(&SecretItem, Option<&str>)> {
        let mut out: Vec<(&SecretItem, Option<&str>)> =
            self.secrets.iter().map(|s| (s, None)).collect();
        for e in &self.entries {
            out.extend(e.secrets.iter().map(|s| (s, Some(e.path.as_str()))));
        }
        out
    }

    /// Where the built-in `@secrets` step learns the stack's cluster: the profile's
    /// `cluster:`, else the one kubeconfig hook of the profile; `None` when it has no
    /// `cluster:` and not exactly one such hook.
    pub fn cluster_source(&self) -> Option<ClusterSource> {
        if let Some(c) = &self.cluster {
            return Some(ClusterSource::Profile(c.clone()));
        }
        match self.kubeconfig_hooks().as_slice() {
            [one] => Some(ClusterSource::Hook {
                project: one.to_string(),
            }),
            _ => None,
        }
    }

    /// The entries with a `kubeconfig:` hook, in profile order.
    pub fn kubeconfig_hooks(&self) -> Vec<&str> {
        self.entries
            .iter()
            .filter(|e| {
                e.on_success
                    .iter()
                    .any(|h| matches!(h, Hook::Kubeconfig(_)))
            })
            .map(|e| e.path.as_str())
            .collect()
    }

    /// Whether the built-in `@secrets` step writes the stack's secrets into the cluster:
    /// only when a Kubernetes stage can read that Secret (the profile's own secrets, which
    /// every project gets, or a Kubernetes entry's) or the profile names `secret_name`.
    /// Secrets only infrastructure entries declare reach them as Pulumi config; nothing
    /// in the cluster reads them.
    pub fn writes_cluster_secret(&self) -> bool {
        let k8s: Vec<&Entry> = self
            .entries
            .iter()
            .map(|e| &**e)
            .filter(|e| e.stage == Stage::Kubernetes)
            .collect();
        if k8s.is_empty() || self.all_secrets().is_empty() {
            return false;
        }
        self.secret_name_set
            || !self.secrets.is_empty()
            || k8s.iter().any(|e| !e.secrets.is_empty())
    }
}

/// Names of the profiles in `providers/` (sorted), with their file paths.
pub fn list(providers_dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let rd = std::fs::read_dir(providers_dir)
        .map_err(|e| Error::io("read the providers folder", providers_dir, e))?;
    let mut out = Vec::new();
    for entry in rd.flatten() {
        let p = entry.path();
        if p.is_file()
            && let Some(ext) = p.extension().and_then(|e| e.to_str())
            && (ext == "yaml" || ext == "yml")
            && let Some(stem) = p.file_stem().and_then(|s| s.to_str())
        {
            out.push((stem.to_string(), p));
        }
    }
    out.sort();
    Ok(out)
}

/// Loads and composes the profile `name` from `providers_dir`.
pub fn load(providers_dir: &Path, name: &str) -> Result<Profile> {
    let available = list(providers_dir)?;
    let Some((_, file)) = available.iter().find(|(n, _)| n == name) else {
        let names: Vec<&str> = available.iter().map(|(n, _)| n.as_str()).collect();
        return Err(Error::config(format!(
            "unknown provider `{name}`: there is no {}.{}\n  Available providers: {}.\n  Pick one with --provider NAME (see `strata providers`).",
            display_path(&providers_dir.join(format!("{name}.yaml"))),
            crate::util::did_you_mean(name, names.iter().copied()),
            if names.is_empty() {
                "none".to_string()
            } else {
                names.join(", ")
            }
        )));
    };
    let raw: RawProfile = read_yaml(file)?;
    let pools = raw::pools(&raw, file)?;
    let throttle = raw::throttle(raw.throttle.as_ref(), file)?;
    let policy = rules::rules(&raw.policy, file)?;
    let mut entries = Vec::new();
    for (stage, list) in [
        (Stage::Infrastructure, &raw.infrastructure),
        (Stage::Kubernetes, &raw.kubernetes),
    ] {
        let mut composed = compose::compose(providers_dir, file, stage, list)?;
        let default_pool = raw.pool.as_ref().and_then(|p| p.for_stage(stage));
        for e in composed.iter_mut().filter(|e| e.pool.is_none()) {
            e.pool = default_pool.clone();
        }
        entries.extend(composed.into_iter().map(std::sync::Arc::new));
    }
    let profile = Profile {
        name: name.to_string(),
        file: file.clone(),
        description: raw.description,
        infra_type: raw.infra_type,
        credentials: raw.credentials,
        infer_needs: raw.infer_needs,
        secret_name_set: raw.secret_name.is_some(),
        secret_name: raw
            .secret_name
            .unwrap_or_else(|| "strata-secrets".to_string()),
        cluster: raw.cluster,
        config: raw.config,
        secrets: raw.secrets,
        watch: check_watch(&raw.watch)
            .map_err(|why| Error::config(format!("{}: `watch:` {why}", display_path(file))))?,
        projects_dir: raw::check_projects_dir(raw.projects.as_deref())
            .map_err(|why| Error::config(format!("{}: `projects:` {why}", display_path(file))))?,
        pools,
        throttle,
        policy,
        entries,
    };
    check::check(&profile)?;
    Ok(profile)
}

/// Just the description of a profile, for `strata providers` (no composition).
pub fn describe(file: &Path) -> Result<(String, String)> {
    #[derive(Deserialize)]
    struct Head {
        description: Option<String>,
        infra_type: Option<String>,
    }
    let head: Head = read_yaml(file)?;
    Ok((
        head.description.unwrap_or_default(),
        head.infra_type.unwrap_or_default(),
    ))
}

/// A pool's, a tag's or a rule's name: letters, digits, `-`, `_`, `.`.
pub(crate) fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

/// A config or secret key: `namespace:name`, letters, digits, `-`, `_`, `.`.
pub fn is_valid_key(key: &str) -> bool {
    key.split_once(':').is_some_and(|(ns, k)| {
        !ns.is_empty()
            && !k.is_empty()
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    })
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A temporary folder holding `files` (path, text).
    pub fn files(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (p, t) in files {
            let path = d.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, t).unwrap();
        }
        d
    }

    /// A profile with no entries and these `credentials:`.
    pub fn minimal(credentials: &[&str]) -> Profile {
        Profile {
            name: "t".into(),
            file: PathBuf::from("providers/t.yaml"),
            description: String::new(),
            infra_type: "test".into(),
            credentials: credentials.iter().map(|s| s.to_string()).collect(),
            infer_needs: false,
            secret_name: "strata-secrets".into(),
            secret_name_set: false,
            cluster: None,
            config: Vec::new(),
            secrets: Vec::new(),
            watch: Vec::new(),
            projects_dir: DEFAULT_PROJECTS_DIR.into(),
            pools: Vec::new(),
            throttle: Throttle::default(),
            policy: Vec::new(),
            entries: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests;
