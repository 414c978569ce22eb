//! Provider profiles (`providers/<name>.yaml`): parsing with unknown fields refused,
//! and composition (`include:` fragments, `after:`/`before:` insertions) into flat lists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_yaml::Value;

use crate::error::{Error, Result};
use crate::util::display_path;

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

/// One entry as written in a profile or fragment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    #[serde(default)]
    include: Option<String>,
    #[serde(default)]
    path: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    needs: Option<Vec<String>>,
    #[serde(default)]
    inputs: BTreeMap<String, String>,
    #[serde(default)]
    secrets: Vec<SecretItem>,
    #[serde(default)]
    on_success: Vec<Hook>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    before: Option<String>,
    #[serde(default)]
    timeout: Option<String>,
    #[serde(default)]
    retry: Option<RawRetry>,
    #[serde(default)]
    watch: Vec<String>,
}

/// `retry:` as written: `{attempts: 3, delay: 30s, on: [regex, ...]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetry {
    attempts: u32,
    #[serde(default)]
    delay: Option<String>,
    #[serde(default)]
    on: Vec<String>,
}

/// `retry:` of an entry: a failed operation whose output matches one of `on` is run
/// again, up to `attempts` tries in all, waiting `delay` before the second (doubling).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Retry {
    pub attempts: u32,
    pub delay: std::time::Duration,
    /// Regexes, checked when the profile is loaded.
    pub on: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    description: String,
    infra_type: String,
    #[serde(default)]
    credentials: Vec<String>,
    #[serde(default)]
    infer_needs: bool,
    #[serde(default)]
    secret_name: Option<String>,
    #[serde(default)]
    config: Vec<ConfigItem>,
    #[serde(default)]
    secrets: Vec<SecretItem>,
    #[serde(default)]
    watch: Vec<String>,
    #[serde(default)]
    infrastructure: Vec<RawEntry>,
    #[serde(default)]
    kubernetes: Vec<RawEntry>,
}

/// An `inputs:` item: config `key` <- `output` of `project`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Input {
    pub key: String,
    pub project: String,
    pub output: String,
}

/// A resolved entry of a composed list.
#[derive(Debug, Clone)]
pub struct Entry {
    pub path: String,
    pub description: Option<String>,
    pub stage: Stage,
    /// `None`: the previous entry of the composed list.
    pub needs: Option<Vec<String>>,
    pub inputs: Vec<Input>,
    pub secrets: Vec<SecretItem>,
    pub on_success: Vec<Hook>,
    /// `timeout:`: the operation is cancelled like Ctrl-C after this long, and fails.
    pub timeout: Option<std::time::Duration>,
    pub retry: Option<Retry>,
    /// `watch:`: files or folders outside the project folder that it reads (paths from
    /// the workspace root), part of its fingerprint.
    pub watch: Vec<String>,
    /// The file the entry was written in (profile or fragment).
    pub file: PathBuf,
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
    pub config: Vec<ConfigItem>,
    pub secrets: Vec<SecretItem>,
    /// `watch:` at the top: what every project of the profile reads besides its folder.
    pub watch: Vec<String>,
    /// Infrastructure entries, then kubernetes entries, each list in composed order.
    pub entries: Vec<Entry>,
}

impl Profile {
    pub fn entry(&self, path: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.path == path)
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

    /// Whether the built-in `@secrets` step writes the stack's secrets into the cluster:
    /// only when a Kubernetes stage can read that Secret (the profile's own secrets, which
    /// every project gets, or a Kubernetes entry's) or the profile names `secret_name`.
    /// Secrets only infrastructure entries declare reach them as Pulumi config; nothing
    /// in the cluster reads them.
    pub fn writes_cluster_secret(&self) -> bool {
        let k8s: Vec<&Entry> = self
            .entries
            .iter()
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
    let mut entries = Vec::new();
    for (stage, list) in [
        (Stage::Infrastructure, &raw.infrastructure),
        (Stage::Kubernetes, &raw.kubernetes),
    ] {
        let composed = compose(providers_dir, file, stage, list)?;
        entries.extend(composed);
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
        config: raw.config,
        secrets: raw.secrets,
        watch: check_watch(&raw.watch)
            .map_err(|why| Error::config(format!("{}: `watch:` {why}", display_path(file))))?,
        entries,
    };
    check(&profile)?;
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

fn read_yaml<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T> {
    let text = super::yaml::read(file, "A profile")?;
    serde_yaml::from_str(&text).map_err(|e| {
        let msg = super::yaml::scrub(&e.to_string());
        let (what, hint) = if msg.contains("unknown field") {
            (
                msg.clone(),
                "Check the spelling against the profile syntax in the README (unknown fields are refused so typos cannot pass silently).",
            )
        } else if msg.contains("invalid type") && msg.contains("expected struct") {
            let at = msg
                .find(" at line ")
                .map(|i| msg[i..].to_string())
                .unwrap_or_default();
            (
                format!("this is not a mapping of profile fields{at}"),
                "A profile is a YAML mapping with `description:`, `infra_type:` and the `infrastructure:`/`kubernetes:` lists (see the README); a fragment under providers/common/ is a list of entries.",
            )
        } else if msg.contains("missing field") {
            (
                msg.clone(),
                "Add the field; `description:` and `infra_type:` are required in a profile, `path:` in an entry.",
            )
        } else if msg.contains("invalid type") {
            (
                msg.clone(),
                "Check the value's type against the profile syntax in the README.",
            )
        } else {
            (
                msg.clone(),
                "This is not valid YAML: check indentation, brackets and quotes around that place.",
            )
        };
        Error::config(format!("{}: {what}\n  {hint}", display_path(file)))
    })
}

enum Placement {
    After(String),
    Before(String),
}

/// Expands includes and applies insertions, returning the stage's entries in order.
fn compose(
    providers_dir: &Path,
    file: &Path,
    stage: Stage,
    list: &[RawEntry],
) -> Result<Vec<Entry>> {
    let mut flat: Vec<(Entry, Option<Placement>)> = Vec::new();
    flatten(providers_dir, file, stage, list, &mut flat, &mut Vec::new())?;

    let mut placed: Vec<Entry> = Vec::new();
    let mut inserts = Vec::new();
    for (entry, placement) in flat {
        match placement {
            None => placed.push(entry),
            Some(p) => inserts.push((entry, p)),
        }
    }
    for (mut entry, placement) in inserts {
        let (anchor, after) = match &placement {
            Placement::After(a) => (a, true),
            Placement::Before(a) => (a, false),
        };
        let Some(idx) = placed.iter().position(|e| &e.path == anchor) else {
            return Err(Error::config(format!(
                "{}: entry `{}` is placed {} `{anchor}`, but the {} list has no entry with that path.\n  Known paths: {}.",
                display_path(&entry.file),
                entry.path,
                if after { "after" } else { "before" },
                stage.key(),
                placed
                    .iter()
                    .map(|e| e.path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        if after {
            // Splice into the chain: whoever explicitly needs the anchor needs this too.
            for other in placed.iter_mut() {
                if let Some(needs) = other.needs.as_mut()
                    && needs.iter().any(|n| n == anchor)
                {
                    needs.push(entry.path.clone());
                }
            }
            placed.insert(idx + 1, entry);
        } else {
            if entry.needs.is_none()
                && let Some(anchor_needs) = &placed[idx].needs
            {
                // The insert runs with the anchor's prerequisites, then the anchor after it.
                entry.needs = Some(anchor_needs.clone());
            }
            if let Some(needs) = placed[idx].needs.as_mut() {
                needs.push(entry.path.clone());
            }
            placed.insert(idx, entry);
        }
    }
    Ok(placed)
}

fn flatten(
    providers_dir: &Path,
    file: &Path,
    stage: Stage,
    list: &[RawEntry],
    out: &mut Vec<(Entry, Option<Placement>)>,
    include_stack: &mut Vec<PathBuf>,
) -> Result<()> {
    for (i, raw) in list.iter().enumerate() {
        let where_ = format!("{}: {} entry {}", display_path(file), stage.key(), i + 1);
        if let Some(inc) = &raw.include {
            let has_other = raw.path.is_some()
                || raw.description.is_some()
                || raw.needs.is_some()
                || !raw.inputs.is_empty()
                || !raw.secrets.is_empty()
                || !raw.on_success.is_empty()
                || raw.after.is_some()
                || raw.before.is_some()
                || raw.timeout.is_some()
                || raw.retry.is_some();
            if has_other {
                return Err(Error::config(format!(
                    "{where_}: an `include:` entry takes no other field; put the fields on the entries of {inc}."
                )));
            }
            let inc_path = providers_dir.join(inc);
            if include_stack.contains(&inc_path) {
                return Err(Error::config(format!(
                    "{where_}: `include: {inc}` includes itself (through {}).",
                    include_stack
                        .iter()
                        .map(|p| display_path(p))
                        .collect::<Vec<_>>()
                        .join(" → ")
                )));
            }
            if !inc_path.is_file() {
                return Err(Error::config(format!(
                    "{where_}: `include: {inc}` names no file ({} does not exist). Paths are relative to the providers folder.",
                    display_path(&inc_path)
                )));
            }
            // Includes stay inside providers/ (symbolic links resolved): a profile must
            // not be able to read, and have an error print, any other file.
            let inside = match (inc_path.canonicalize(), providers_dir.canonicalize()) {
                (Ok(f), Ok(dir)) => f.starts_with(&dir),
                _ => false,
            };
            if !inside {
                return Err(Error::config(format!(
                    "{where_}: `include: {inc}` is outside the providers folder ({}). An include names a fragment under providers/, for example `include: common/kubernetes.yaml`.",
                    display_path(providers_dir)
                )));
            }
            let sub: Vec<RawEntry> = read_yaml(&inc_path)?;
            include_stack.push(inc_path.clone());
            flatten(providers_dir, &inc_path, stage, &sub, out, include_stack)?;
            include_stack.pop();
            continue;
        }
        let Some(path) = raw.path.clone() else {
            return Err(Error::config(format!(
                "{where_}: the entry has no `path:` (the project folder under projects/), and is not an `include:`."
            )));
        };
        let path = path.trim_matches('/').to_string();
        if path.is_empty() {
            return Err(Error::config(format!("{where_}: `path:` is empty.")));
        }
        if path.split('/').any(|c| c == ".." || c == ".") || path.contains('\\') {
            return Err(Error::config(format!(
                "{where_}: `path: {path}` must name a folder inside projects/ without `.` or `..` parts."
            )));
        }
        let placement = match (&raw.after, &raw.before) {
            (Some(_), Some(_)) => {
                return Err(Error::config(format!(
                    "{where_} ({path}): give `after:` or `before:`, not both."
                )));
            }
            (Some(a), None) => Some(Placement::After(a.trim_matches('/').to_string())),
            (None, Some(b)) => Some(Placement::Before(b.trim_matches('/').to_string())),
            (None, None) => None,
        };
        let mut inputs = Vec::new();
        for (key, source) in &raw.inputs {
            let parsed = source
                .rsplit_once(':')
                .filter(|(p, o)| !p.trim().is_empty() && !o.trim().is_empty() && !p.contains(':'));
            let Some((project, output)) = parsed else {
                return Err(Error::config(format!(
                    "{where_} ({path}): input `{key}: {source}` is not `<project path>:<output>` (for example `infrastructure/aws/vpc:vpc_id`)."
                )));
            };
            inputs.push(Input {
                key: key.clone(),
                project: project.trim().trim_matches('/').to_string(),
                output: output.trim().to_string(),
            });
        }
        let timeout = match &raw.timeout {
            None => None,
            Some(t) => Some(parse_duration(t).map_err(|why| {
                Error::config(format!(
                    "{where_} ({path}): `timeout: {t}` is not a duration ({why}); write it like `45m`, `90s` or `1h 30m`."
                ))
            })?),
        };
        let retry = match &raw.retry {
            None => None,
            Some(r) => Some(
                parse_retry(r)
                    .map_err(|why| Error::config(format!("{where_} ({path}): `retry:` {why}")))?,
            ),
        };
        let watch = check_watch(&raw.watch)
            .map_err(|why| Error::config(format!("{where_} ({path}): `watch:` {why}")))?;
        out.push((
            Entry {
                path,
                description: raw.description.clone(),
                stage,
                needs: raw
                    .needs
                    .as_ref()
                    .map(|n| n.iter().map(|s| s.trim_matches('/').to_string()).collect()),
                inputs,
                secrets: raw.secrets.clone(),
                on_success: raw.on_success.clone(),
                timeout,
                retry,
                watch,
                file: file.to_path_buf(),
            },
            placement,
        ));
    }
    Ok(())
}

/// `watch:` paths: relative to the workspace root, inside it (no `..`, not absolute).
fn check_watch(paths: &[String]) -> std::result::Result<Vec<String>, String> {
    paths
        .iter()
        .map(|p| {
            let t = p.trim().trim_end_matches('/');
            let path = Path::new(t);
            if t.is_empty()
                || path.is_absolute()
                || path
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(format!(
                    "`{p}` must be a path inside the workspace, relative to its root (for example `projects/local/lib.sh`), without `..`"
                ));
            }
            Ok(t.to_string())
        })
        .collect()
}

/// A duration as written in a profile (`45m`, `30s`, `1h 30m`); zero is refused.
fn parse_duration(text: &str) -> std::result::Result<std::time::Duration, String> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("it must be longer than zero".into());
    }
    Ok(d)
}

fn parse_retry(raw: &RawRetry) -> std::result::Result<Retry, String> {
    if raw.attempts < 1 {
        return Err(format!(
            "`attempts: {}` must be at least 1 (the number of tries in all).",
            raw.attempts
        ));
    }
    let delay = match &raw.delay {
        None => std::time::Duration::ZERO,
        Some(d) => humantime::parse_duration(d.trim()).map_err(|e| {
            format!("`delay: {d}` is not a duration ({e}); write it like `30s` or `2m`.")
        })?,
    };
    if raw.on.is_empty() {
        return Err(
            "`on:` lists no pattern, so nothing would ever be retried; list the regexes of the errors to retry (for example `on: [\"TooManyRequests\"]`).".into(),
        );
    }
    for pattern in &raw.on {
        if let Err(e) = regex::Regex::new(pattern) {
            return Err(format!(
                "pattern `{pattern}` in `on:` is not a valid regex: {}",
                e.to_string().lines().last().unwrap_or("invalid")
            ));
        }
    }
    Ok(Retry {
        attempts: raw.attempts,
        delay,
        on: raw.on.clone(),
    })
}

/// Checks that paths are unique, references known, keys well-formed.
fn check(profile: &Profile) -> Result<()> {
    let mut seen: BTreeMap<&str, &Entry> = BTreeMap::new();
    for e in &profile.entries {
        if let Some(first) = seen.insert(e.path.as_str(), e) {
            return Err(Error::config(format!(
                "{}: `{}` is listed twice (in the {} list of {} and the {} list of {}). Each project may appear once.",
                display_path(&profile.file),
                e.path,
                first.stage.key(),
                display_path(&first.file),
                e.stage.key(),
                display_path(&e.file)
            )));
        }
    }
    for e in &profile.entries {
        for n in e.needs.iter().flatten() {
            if !seen.contains_key(n.as_str()) {
                return Err(Error::config(format!(
                    "{}: entry `{}` needs `{n}`, which is not an entry of profile `{}`.\n  Known paths: {}.",
                    display_path(&e.file),
                    e.path,
                    profile.name,
                    seen.keys().copied().collect::<Vec<_>>().join(", ")
                )));
            }
        }
        for i in &e.inputs {
            if !seen.contains_key(i.project.as_str()) {
                return Err(Error::config(format!(
                    "{}: entry `{}` takes input `{}` from `{}`, which is not an entry of profile `{}`.",
                    display_path(&e.file),
                    e.path,
                    i.key,
                    i.project,
                    profile.name
                )));
            }
            if i.project == e.path {
                return Err(Error::config(format!(
                    "{}: entry `{}` takes input `{}` from itself.",
                    display_path(&e.file),
                    e.path,
                    i.key
                )));
            }
        }
    }
    let mut keys = BTreeSet::new();
    for item in &profile.config {
        check_key(&profile.file, "config", &item.key)?;
        if !keys.insert(item.key.as_str()) {
            return Err(Error::config(format!(
                "{}: config key `{}` is declared twice.",
                display_path(&profile.file),
                item.key
            )));
        }
    }
    let mut secret_keys = BTreeSet::new();
    for (s, owner) in profile.all_secrets() {
        check_key(&profile.file, "secrets", &s.key)?;
        if !secret_keys.insert(s.key.as_str()) {
            return Err(Error::config(format!(
                "{}: secret `{}` is declared twice{}.",
                display_path(&profile.file),
                s.key,
                owner
                    .map(|o| format!(" (again by `{o}`)"))
                    .unwrap_or_default()
            )));
        }
    }
    Ok(())
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

fn check_key(file: &Path, list: &str, key: &str) -> Result<()> {
    if is_valid_key(key) {
        Ok(())
    } else {
        Err(Error::config(format!(
            "{}: `{list}` key `{key}` must look like `namespace:name` (letters, digits, - _ .).",
            display_path(file)
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

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
            config: Vec::new(),
            secrets: Vec::new(),
            watch: Vec::new(),
            entries: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for (p, t) in files {
            let path = d.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, t).unwrap();
        }
        d
    }

    fn paths(p: &Profile) -> Vec<&str> {
        p.entries.iter().map(|e| e.path.as_str()).collect()
    }

    const HEAD: &str = "description: d\ninfra_type: T\n";

    #[test]
    fn watch_paths_stay_inside_the_workspace() {
        assert_eq!(
            check_watch(&["projects/local/lib.sh".into(), "lib/".into()]).unwrap(),
            ["projects/local/lib.sh", "lib"]
        );
        for bad in ["../secrets", "/etc/passwd", "projects/../../x", ""] {
            let e = check_watch(&[bad.to_string()]).unwrap_err();
            assert!(e.contains("inside the workspace"), "{bad}: {e}");
        }
    }

    #[test]
    fn parses_core_syntax() {
        let d = ws(&[(
            "aws.yaml",
            &format!(
                "{HEAD}config:\n  - key: aws:region\n    prompt: Region\n    default: us-west-2\n  - key: eks:min\n    prompt: Min\n    default: 3\n    type: int\nsecrets:\n  - key: prom:pass\n    prompt: Pass\ninfrastructure:\n  - path: a\n    inputs: {{ 'x:y': 'b:out' }}\n    on_success:\n      - kubeconfig: {{ output: kc }}\n      - run: echo hi\n  - path: b\n    needs: []\nkubernetes:\n  - path: k\n"
            ),
        )]);
        let p = load(d.path(), "aws").unwrap();
        assert_eq!(paths(&p), ["a", "b", "k"]);
        assert_eq!(p.config[1].value_type, ValueType::Int);
        assert_eq!(p.entries[0].inputs[0].project, "b");
        assert_eq!(p.entries[0].on_success.len(), 2);
        assert_eq!(p.entries[1].needs, Some(vec![]));
        assert_eq!(p.entries[2].stage, Stage::Kubernetes);
        assert_eq!(p.secret_name, "strata-secrets");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
        /// Any text as a profile: a profile or a configuration error, never a panic.
        #[test]
        fn any_profile_text_loads_or_is_refused(body in "\\PC{0,300}", nest in 0usize..200) {
            let text = format!("{HEAD}{body}\ninfrastructure: {}{}\n", "[".repeat(nest), "]".repeat(nest));
            let d = ws(&[("p.yaml", text.as_str())]);
            if let Err(e) = load(d.path(), "p") {
                proptest::prop_assert_eq!(e.exit_code(), 3);
            }
        }
    }

    #[test]
    fn parses_credentials_timeout_and_retry() {
        let d = ws(&[(
            "aws.yaml",
            &format!(
                "{HEAD}credentials: [AWS_ACCESS_KEY_ID]\ninfer_needs: true\ninfrastructure:\n  - path: a\n    timeout: 45m\n    retry: {{ attempts: 3, delay: 30s, on: [\"TooManyRequests\", \"reset$\"] }}\n  - path: b\n"
            ),
        )]);
        let p = load(d.path(), "aws").unwrap();
        assert_eq!(p.credentials, ["AWS_ACCESS_KEY_ID"]);
        assert!(p.infer_needs);
        let a = &p.entries[0];
        assert_eq!(a.timeout, Some(std::time::Duration::from_secs(45 * 60)));
        let r = a.retry.as_ref().unwrap();
        assert_eq!((r.attempts, r.delay.as_secs()), (3, 30));
        assert_eq!(r.on.len(), 2);
        assert_eq!(
            (p.entries[1].timeout, p.entries[1].retry.clone()),
            (None, None)
        );
    }

    #[test]
    fn bad_timeout_and_retry_are_config_errors() {
        for (yaml, needle) in [
            ("timeout: soon", "`timeout: soon` is not a duration"),
            ("timeout: 0s", "longer than zero"),
            ("retry: { attempts: 0, on: [x] }", "at least 1"),
            ("retry: { attempts: 2 }", "lists no pattern"),
            ("retry: { attempts: 2, on: [\"(\"] }", "not a valid regex"),
            (
                "retry: { attempts: 2, delay: later, on: [x] }",
                "`delay: later`",
            ),
        ] {
            let d = ws(&[(
                "aws.yaml",
                &format!("{HEAD}infrastructure:\n  - path: a\n    {yaml}\n"),
            )]);
            let e = load(d.path(), "aws").unwrap_err();
            assert_eq!(e.exit_code(), 3, "{yaml}");
            assert!(e.message.contains(needle), "{yaml}: {}", e.message);
            assert!(e.message.contains("aws.yaml"), "{}", e.message);
        }
    }

    #[test]
    fn unknown_field_is_an_error_with_line() {
        let d = ws(&[(
            "aws.yaml",
            &format!("{HEAD}infrastructure:\n  - path: a\n    need: [b]\n"),
        )]);
        let e = load(d.path(), "aws").unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.message.contains("unknown field `need`"), "{}", e.message);
        assert!(e.message.contains("line 5"), "{}", e.message);
        assert!(e.message.contains("aws.yaml"), "{}", e.message);
    }

    #[test]
    fn unknown_provider_lists_available() {
        let d = ws(&[("aws.yaml", HEAD), ("do.yaml", HEAD)]);
        let e = load(d.path(), "gcp").unwrap_err();
        assert!(e.message.contains("aws, do"), "{}", e.message);
    }

    #[test]
    fn include_and_insertions_compose() {
        let d = ws(&[
            (
                "common/k.yaml",
                "- path: ns\n- path: ingress\n  needs: [ns]\n- path: app\n",
            ),
            (
                "do.yaml",
                &format!(
                    "{HEAD}kubernetes:\n  - include: common/k.yaml\n  - path: creds\n    after: ns\n  - path: first\n    before: ns\n  - path: dns\n    after: ingress\n"
                ),
            ),
        ]);
        let p = load(d.path(), "do").unwrap();
        assert_eq!(paths(&p), ["first", "ns", "creds", "ingress", "dns", "app"]);
        let ingress = p.entry("ingress").unwrap();
        assert_eq!(
            ingress.needs.as_deref(),
            Some(&["ns".to_string(), "creds".to_string()][..])
        );
        // app had no needs: it follows dns by position now.
        assert!(p.entry("app").unwrap().needs.is_none());
        assert!(p.entry("creds").unwrap().needs.is_none());
    }

    #[test]
    fn insertion_anchor_must_exist() {
        let d = ws(&[(
            "do.yaml",
            &format!("{HEAD}kubernetes:\n  - path: a\n  - path: x\n    after: nope\n"),
        )]);
        let e = load(d.path(), "do").unwrap_err();
        assert!(e.message.contains("after `nope`"), "{}", e.message);
    }

    #[test]
    fn include_cycle_is_reported() {
        let d = ws(&[
            ("common/a.yaml", "- include: common/a.yaml\n"),
            (
                "p.yaml",
                &format!("{HEAD}kubernetes:\n  - include: common/a.yaml\n"),
            ),
        ]);
        let e = load(d.path(), "p").unwrap_err();
        assert!(e.message.contains("includes itself"), "{}", e.message);
    }

    #[test]
    fn duplicate_path_is_an_error() {
        let d = ws(&[(
            "p.yaml",
            &format!("{HEAD}infrastructure:\n  - path: a\nkubernetes:\n  - path: a\n"),
        )]);
        let e = load(d.path(), "p").unwrap_err();
        assert!(e.message.contains("listed twice"), "{}", e.message);
    }

    #[test]
    fn needs_unknown_path_is_an_error() {
        let d = ws(&[(
            "p.yaml",
            &format!("{HEAD}infrastructure:\n  - path: a\n    needs: [ghost]\n"),
        )]);
        let e = load(d.path(), "p").unwrap_err();
        assert!(e.message.contains("needs `ghost`"), "{}", e.message);
    }

    #[test]
    fn bad_input_source_is_an_error() {
        let d = ws(&[(
            "p.yaml",
            &format!(
                "{HEAD}infrastructure:\n  - path: a\n  - path: b\n    inputs:\n      'x:y': a-without-output\n"
            ),
        )]);
        let e = load(d.path(), "p").unwrap_err();
        assert!(
            e.message.contains("<project path>:<output>"),
            "{}",
            e.message
        );
    }

    #[test]
    fn hooks_reject_unknown_kinds() {
        let d = ws(&[(
            "p.yaml",
            &format!("{HEAD}infrastructure:\n  - path: a\n    on_success:\n      - shell: x\n"),
        )]);
        let e = load(d.path(), "p").unwrap_err();
        assert!(e.message.contains("shell"), "{}", e.message);
    }

    #[test]
    fn list_is_sorted_and_skips_fragments() {
        let d = ws(&[("z.yaml", HEAD), ("a.yaml", HEAD), ("common/k.yaml", "[]")]);
        let names: Vec<String> = list(d.path()).unwrap().into_iter().map(|x| x.0).collect();
        assert_eq!(names, ["a", "z"]);
    }
}
