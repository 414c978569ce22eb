//! The profile as written: its YAML shapes, read with errors that say how to fix them,
//! and the parsers of single fields (durations, `retry:`, `watch:`).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Deserializer};

use super::{
    ClusterRef, ConfigItem, Hook, MAX_DELAY, Pool, Retry, SecretItem, Stage, Throttle,
    is_valid_name,
};
use crate::error::{Error, Result};
use crate::util::display_path;

/// One entry as written in a profile or fragment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEntry {
    #[serde(default)]
    pub(super) include: Option<String>,
    #[serde(default)]
    pub(super) path: Option<String>,
    #[serde(default)]
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) needs: Option<Vec<String>>,
    #[serde(default)]
    pub(super) inputs: BTreeMap<String, String>,
    #[serde(default)]
    pub(super) secrets: Vec<SecretItem>,
    #[serde(default)]
    pub(super) on_success: Vec<Hook>,
    #[serde(default)]
    pub(super) after: Option<String>,
    #[serde(default)]
    pub(super) before: Option<String>,
    #[serde(default)]
    pub(super) timeout: Option<String>,
    #[serde(default)]
    pub(super) retry: Option<RawRetry>,
    #[serde(default)]
    pub(super) watch: Vec<String>,
    #[serde(default)]
    pub(super) mock_outputs: BTreeMap<String, serde_yaml::Value>,
    #[serde(default)]
    pub(super) mock_outputs_allowed_commands: Option<Vec<String>>,
    #[serde(default)]
    pub(super) pool: Option<String>,
    #[serde(default)]
    pub(super) tags: Vec<String>,
    /// `config:`: stack config keys this profile sets for this project (over its own
    /// `Pulumi.<stack>.yaml`).
    #[serde(default)]
    pub(super) config: serde_yaml::Mapping,
    /// `stack:`: the project's own stack name for the run's (`${stack}` is the run's).
    #[serde(default)]
    pub(super) stack: Option<String>,
    /// `reads:`: what its stack references strata cannot resolve read.
    #[serde(default)]
    pub(super) reads: Option<super::Reads>,
}

impl RawEntry {
    /// Whether a field other than `include:` is set: an `include:` entry takes none.
    /// (Every field is named, so one added later cannot be dropped silently.)
    pub(super) fn has_fields_besides_include(&self) -> bool {
        let RawEntry {
            include: _,
            path,
            description,
            needs,
            inputs,
            secrets,
            on_success,
            after,
            before,
            timeout,
            retry,
            watch,
            mock_outputs,
            mock_outputs_allowed_commands,
            pool,
            tags,
            config,
            stack,
            reads,
        } = self;
        path.is_some()
            || description.is_some()
            || needs.is_some()
            || !inputs.is_empty()
            || !secrets.is_empty()
            || !on_success.is_empty()
            || after.is_some()
            || before.is_some()
            || timeout.is_some()
            || retry.is_some()
            || !watch.is_empty()
            || !mock_outputs.is_empty()
            || mock_outputs_allowed_commands.is_some()
            || pool.is_some()
            || !tags.is_empty()
            || !config.is_empty()
            || stack.is_some()
            || reads.is_some()
    }
}

/// `retry:` as written: `{attempts: 3, delay: 30s, on: [regex, ...]}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRetry {
    pub(super) attempts: u32,
    #[serde(default, deserialize_with = "retry_delay")]
    pub(super) delay: Option<Duration>,
    #[serde(default)]
    pub(super) on: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
    pub(super) description: String,
    /// Recorded as `kubernetes:infra_type` (MARA's key); none in an adopted repository.
    #[serde(default)]
    pub(super) infra_type: String,
    #[serde(default)]
    pub(super) credentials: Vec<String>,
    #[serde(default)]
    pub(super) infer_needs: bool,
    #[serde(default)]
    pub(super) secret_name: Option<String>,
    /// `cluster: {kubeconfig: ..., context: ...}`: the stack's cluster for `@secrets`.
    #[serde(default)]
    pub(super) cluster: Option<ClusterRef>,
    #[serde(default)]
    pub(super) config: Vec<ConfigItem>,
    #[serde(default)]
    pub(super) secrets: Vec<SecretItem>,
    #[serde(default)]
    pub(super) watch: Vec<String>,
    /// `projects: DIR`: the folder entry paths are relative to (default `projects`).
    #[serde(default)]
    pub(super) projects: Option<String>,
    /// `pools: {aws-us-east-1: 4, harbor: 1}`.
    #[serde(default)]
    pub(super) pools: serde_yaml::Mapping,
    /// The default pool: one name, or one per stage.
    #[serde(default)]
    pub(super) pool: Option<RawPoolDefault>,
    #[serde(default)]
    pub(super) throttle: Option<RawThrottle>,
    /// `policy:`: rules over each project's planned changes.
    #[serde(default)]
    pub(super) policy: Vec<super::rules::RawRule>,
    #[serde(default)]
    pub(super) infrastructure: Vec<RawEntry>,
    #[serde(default)]
    pub(super) kubernetes: Vec<RawEntry>,
}

/// `pool:` at the top of a profile: `pool: aws` or
/// `pool: {infrastructure: aws, kubernetes: cluster-api}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum RawPoolDefault {
    All(String),
    ByStage(RawPoolByStage),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPoolByStage {
    #[serde(default)]
    infrastructure: Option<String>,
    #[serde(default)]
    kubernetes: Option<String>,
}

impl RawPoolDefault {
    /// The default pool of the entries of `stage`.
    pub(super) fn for_stage(&self, stage: Stage) -> Option<String> {
        match self {
            RawPoolDefault::All(p) => Some(p.trim().to_string()),
            RawPoolDefault::ByStage(s) => match stage {
                Stage::Infrastructure => s.infrastructure.clone(),
                Stage::Kubernetes => s.kubernetes.clone(),
            }
            .map(|p| p.trim().to_string()),
        }
    }
}

/// `throttle:` as written: `{patterns: [regex, ...], attempts: 5, delay: 5s}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawThrottle {
    #[serde(default)]
    patterns: Vec<String>,
    #[serde(default)]
    attempts: Option<u32>,
    #[serde(default, deserialize_with = "throttle_delay")]
    delay: Option<Duration>,
}

/// `retry: delay:` as written: a duration of at most [`MAX_DELAY`] (zero: no wait).
fn retry_delay<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Duration>, D::Error> {
    d.deserialize_str(Delay {
        example: "`30s` or `2m`",
        zero_ok: true,
    })
    .map(Some)
}

/// `throttle: delay:` as written: the same, and longer than zero.
fn throttle_delay<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Duration>, D::Error> {
    d.deserialize_str(Delay {
        example: "`5s` or `1m`",
        zero_ok: false,
    })
    .map(Some)
}

/// Reads a `delay:` scalar, refusing it there, so that the parser's error names its key
/// and line.
struct Delay {
    example: &'static str,
    zero_ok: bool,
}

impl serde::de::Visitor<'_> for Delay {
    type Value = Duration;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "a duration such as {}", self.example)
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> std::result::Result<Duration, E> {
        parse_delay(text, self.example, self.zero_ok).map_err(E::custom)
    }
}

/// A wait before a project's next try, checked as the profile is read (so the refusal
/// names its line): what is wrong, then `\n  ` and the fix (see [`read_yaml`]).
fn parse_delay(text: &str, example: &str, zero_ok: bool) -> std::result::Result<Duration, String> {
    let max = humantime::format_duration(MAX_DELAY);
    let d = humantime::parse_duration(text.trim())
        .map_err(|e| format!("`{text}` is not a duration ({e})\n  Write it like {example}."))?;
    if d > MAX_DELAY {
        return Err(format!(
            "`{text}` is longer than {max}, the longest strata waits before a project's next try\n  Write at most `{max}` (for example {example}); the wait doubles after each try, up to {max}."
        ));
    }
    if d.is_zero() && !zero_ok {
        return Err(format!(
            "`{text}`: a throttled project must pause before its next try (trying again at once only adds to the throttling)\n  Write a pause such as {example}, at most {max}."
        ));
    }
    Ok(d)
}

/// The most projects a pool may let run at once: more is no limit at all (a run starts at
/// most `-j`, itself at most 65535), so it is refused rather than quietly lowered.
pub(super) const MAX_POOL_LIMIT: u64 = 10_000;

/// `pools:`, checked: each a name and a limit from 1 to [`MAX_POOL_LIMIT`].
pub(super) fn pools(raw: &RawProfile, file: &Path) -> Result<Vec<Pool>> {
    let mut out = Vec::new();
    for (k, v) in &raw.pools {
        let name = match k {
            serde_yaml::Value::String(s) if is_valid_name(s) => s.clone(),
            other => {
                return Err(Error::config(format!(
                    "{}: `pools:` key {} is not a pool name (letters, digits, - _ .), for example `aws-us-east-1: 4`.",
                    display_path(file),
                    scalar_text(other)
                )));
            }
        };
        let (limit, adaptive) = pool_limit(&name, v).map_err(|why| {
            Error::config(format!("{}: `pools: {name}:` {why}", display_path(file)))
        })?;
        out.push(Pool {
            name,
            limit: limit as usize,
            adaptive,
        });
    }
    Ok(out)
}

/// One pool's value: `N`, or `{limit: N, adaptive: BOOL}`; the limit and whether it adapts.
fn pool_limit(name: &str, v: &serde_yaml::Value) -> std::result::Result<(u64, bool), String> {
    let (limit, adaptive) = match v {
        serde_yaml::Value::Mapping(m) => {
            let mut limit = None;
            let mut adaptive = true;
            for (k, x) in m {
                match (k.as_str(), x) {
                    (Some("limit"), x) => limit = Some(x),
                    (Some("adaptive"), serde_yaml::Value::Bool(b)) => adaptive = *b,
                    (Some("adaptive"), x) => {
                        return Err(format!(
                            "`adaptive:` is true or false, not {}.",
                            scalar_text(x)
                        ));
                    }
                    (_, _) => {
                        return Err(format!(
                            "unknown key {}: a pool is a limit (`{name}: 4`) or a mapping of `limit` and `adaptive` (`{name}: {{limit: 1, adaptive: false}}`).",
                            scalar_text(k)
                        ));
                    }
                }
            }
            (limit, adaptive)
        }
        v => (Some(v), true),
    };
    let bad = |shown: String| {
        format!(
            "{shown} must be a whole number of at least 1 (the projects of the pool that may run at once), or `{{limit: N, adaptive: false}}` for a limit that never moves."
        )
    };
    let Some(written) = limit else {
        return Err(bad("a mapping without `limit:`".into()));
    };
    match written.as_u64() {
        Some(n) if n > MAX_POOL_LIMIT => Err(format!(
            "`{n}` is more than {MAX_POOL_LIMIT}, the most projects a pool may let run at once; for no limit but `-j`, leave its projects out of any pool."
        )),
        Some(n) if n >= 1 => Ok((n, adaptive)),
        _ => Err(bad(scalar_text(written))),
    }
}

/// A YAML value as it would be written, on one line, for an error message.
fn scalar_text(v: &serde_yaml::Value) -> String {
    match serde_yaml::to_string(v) {
        Ok(t) => format!("`{}`", t.trim().lines().next().unwrap_or("")),
        Err(_) => "(a value)".into(),
    }
}

/// `throttle:` with the defaults filled in; the patterns are checked regexes.
pub(super) fn throttle(raw: Option<&RawThrottle>, file: &Path) -> Result<Throttle> {
    let mut t = Throttle::default();
    let Some(raw) = raw else { return Ok(t) };
    for pattern in &raw.patterns {
        if let Err(e) = regex::Regex::new(pattern) {
            return Err(Error::config(format!(
                "{}: `throttle: patterns:` `{pattern}` is not a valid regex: {}",
                display_path(file),
                e.to_string().lines().last().unwrap_or("invalid")
            )));
        }
        t.patterns.push(pattern.clone());
    }
    if let Some(a) = raw.attempts {
        if a < 1 {
            return Err(Error::config(format!(
                "{}: `throttle: attempts: {a}` must be at least 1 (the tries in all of a throttled project).",
                display_path(file)
            )));
        }
        t.attempts = a;
    }
    if let Some(d) = raw.delay {
        t.delay = d;
    }
    Ok(t)
}

pub(super) fn read_yaml<T: serde::de::DeserializeOwned>(file: &Path) -> Result<T> {
    let text = crate::workspace::yaml::read(file, "A profile")?;
    serde_yaml::from_str(&text).map_err(|e| {
        let msg = crate::workspace::yaml::scrub(&e.to_string());
        if let Some((what, fix)) = msg.split_once("\n  ") {
            // A field's own refusal (`parse_delay`): the parser's place goes with what
            // is wrong, before the fix.
            let (fix, at) = fix.split_at(fix.find(" at line ").unwrap_or(fix.len()));
            return Error::config(format!("{}: {what}{at}\n  {fix}", display_path(file)));
        }
        let (what, hint) = if msg.contains("unknown field") {
            (
                msg.clone(),
                "Check the spelling against the profile syntax in docs/book/src/profiles.md (unknown fields are refused so typos cannot pass silently).",
            )
        } else if msg.contains("invalid type") && msg.contains("expected struct") {
            let at = msg
                .find(" at line ")
                .map(|i| msg[i..].to_string())
                .unwrap_or_default();
            (
                format!("this is not a mapping of profile fields{at}"),
                "A profile is a YAML mapping with `description:`, `infra_type:` and the `infrastructure:`/`kubernetes:` lists (see docs/book/src/profiles.md); a fragment under providers/common/ is a list of entries.",
            )
        } else if msg.contains("missing field") {
            (
                msg.clone(),
                "Add the field; `description:` is required in a profile, `path:` in an entry.",
            )
        } else if msg.contains("unknown variant") {
            (
                msg.clone(),
                "Write one of the values it lists.",
            )
        } else if msg.contains("invalid type") {
            (
                msg.clone(),
                "Check the value's type against the profile syntax in docs/book/src/profiles.md.",
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
/// `projects:` of a profile: a folder relative to the workspace root, inside it (`.` is
/// the root itself); default `projects`.
pub(super) fn check_projects_dir(dir: Option<&str>) -> std::result::Result<String, String> {
    let Some(d) = dir else {
        return Ok(super::DEFAULT_PROJECTS_DIR.to_string());
    };
    let t = d.trim().trim_end_matches('/');
    if t == "." {
        return Ok(".".to_string());
    }
    let t = t.strip_prefix("./").unwrap_or(t);
    check_watch(&[t.to_string()])
        .map(|mut v| v.remove(0))
        .map_err(|_| {
            format!(
                "`{d}` must be a folder inside the workspace, relative to its root (`.` for the root itself, `infra` for infra/), without `..`"
            )
        })
}

/// `watch:` paths: relative to the workspace root, inside it (no `..`, not absolute).
pub(super) fn check_watch(paths: &[String]) -> std::result::Result<Vec<String>, String> {
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

/// The commands a `mock_outputs_allowed_commands:` list may name: only `preview` (a mock
/// must never reach what is deployed). Left out, it is `[preview]`
/// ([`super::Entry::mocks_serve`]).
pub(super) fn check_mock_commands(commands: &[String]) -> std::result::Result<Vec<String>, String> {
    for c in commands {
        match c.trim() {
            "preview" => {}
            "up" | "destroy" | "refresh" => {
                return Err(format!(
                    "lists `{c}`: mocks are used only by `preview` (an `{c}` on made-up values would change real stacks); list `preview` alone or leave the key out"
                ));
            }
            _ => {
                return Err(format!(
                    "lists `{c}`, which is not a strata command that reads outputs; the only command mocks serve is `preview`"
                ));
            }
        }
    }
    let mut out: Vec<String> = commands.iter().map(|c| c.trim().to_string()).collect();
    out.dedup();
    Ok(out)
}

/// A duration as written in a profile (`45m`, `30s`, `1h 30m`); zero is refused.
pub(super) fn parse_duration(text: &str) -> std::result::Result<std::time::Duration, String> {
    let d = humantime::parse_duration(text.trim()).map_err(|e| e.to_string())?;
    if d.is_zero() {
        return Err("it must be longer than zero".into());
    }
    Ok(d)
}

pub(super) fn parse_retry(raw: &RawRetry) -> std::result::Result<Retry, String> {
    if raw.attempts < 1 {
        return Err(format!(
            "`attempts: {}` must be at least 1 (the number of tries in all).",
            raw.attempts
        ));
    }
    let delay = raw.delay.unwrap_or_default();
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
