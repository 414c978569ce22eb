//! The layout of a self-managed backend strata reads (`source`: a `file://` folder or an
//! `s3://` bucket), told as Pulumi's DIY backend tells it
//! (`pkg/backend/diy/meta.go`): project mode (`.pulumi/meta.yaml` says `version: 1`,
//! stacks at `.pulumi/stacks/<project>/<stack>.json`), or the legacy layout of CLIs
//! before 3.61 (no `meta.yaml` and stack files at `.pulumi/stacks/<stack>.json`, or
//! `version: 0`), where a stack belongs to no project and every project's `dev` is the
//! same stack. strata refuses the legacy layout before anything runs (and, on a backend
//! it cannot look into, the variable that lets the CLI run one).

use std::collections::BTreeMap;

use super::source::Source;

/// What the backend's folder says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// `meta.yaml` says version 1.
    Project,
    /// No `meta.yaml` and no legacy stack: Pulumi makes it a project-mode backend
    /// (unless `PULUMI_DIY_BACKEND_LEGACY_LAYOUT` asks for the legacy one).
    New,
    /// The legacy layout; the stacks found at the top of `.pulumi/stacks/`.
    Legacy(Vec<String>),
    /// Anything else (an unreadable or unknown `meta.yaml`): Pulumi decides.
    Unknown(String),
}

/// Pulumi's `env.Bool` with its alternative name: the first name wins when it is set at
/// all; true is `1` or `true` in any case.
pub fn env_bool(env: &BTreeMap<String, String>, name: &str, alternative: &str) -> bool {
    env.get(name)
        .or_else(|| env.get(alternative))
        .is_some_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

const LEGACY_VAR: (&str, &str) = (
    "PULUMI_DIY_BACKEND_LEGACY_LAYOUT",
    "PULUMI_SELF_MANAGED_STATE_LEGACY_LAYOUT",
);

/// The variable that would make a new backend legacy, as set.
fn legacy_var(env: &BTreeMap<String, String>) -> Option<&'static str> {
    let (name, alt) = LEGACY_VAR;
    env_bool(env, name, alt).then(|| if env.contains_key(name) { name } else { alt })
}

const META: &str = ".pulumi/meta.yaml";

/// The layout of the backend `source`.
pub(super) fn layout(source: &Source) -> Layout {
    match source.read(META) {
        Ok(Some(text)) => match serde_yaml::from_slice::<serde_yaml::Value>(&text)
            .ok()
            .and_then(|d| d.get("version").and_then(serde_yaml::Value::as_i64))
        {
            Some(1) => Layout::Project,
            Some(0) => Layout::Legacy(legacy_stacks(source).unwrap_or_default()),
            Some(v) => Layout::Unknown(format!("{} says version {v}", source.name(META))),
            None => Layout::Unknown(format!("{} has no version", source.name(META))),
        },
        Ok(None) => match legacy_stacks(source) {
            Ok(stacks) if stacks.is_empty() => Layout::New,
            Ok(stacks) => Layout::Legacy(stacks),
            Err(e) => Layout::Unknown(e),
        },
        Err(e) => Layout::Unknown(format!("{}: {e}", source.name(META))),
    }
}

/// Whether stacks live in project folders, so strata may read them without the CLI:
/// project mode, or a new backend the CLI will make project mode. A bucket found in
/// project mode is not asked again.
pub(super) fn project_scoped(source: &Source, env: &BTreeMap<String, String>) -> bool {
    if source.known_project_mode() {
        return true;
    }
    match layout(source) {
        Layout::Project => {
            source.remember_project_mode();
            true
        }
        Layout::New => legacy_var(env).is_none(),
        Layout::Legacy(_) | Layout::Unknown(_) => false,
    }
}

/// The stack names of legacy stack files at the top of `.pulumi/stacks/`
/// (`<stack>.json` or `.yaml`, possibly `.gz`/`.zst`), as
/// `legacyReferenceStore.ListReferences` finds them; backups and other files are not
/// stacks.
fn legacy_stacks(source: &Source) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = source
        .files(".pulumi/stacks")?
        .iter()
        .filter_map(|f| legacy_stack_name(&f.name))
        .collect();
    out.sort();
    out.dedup();
    Ok(out)
}

fn legacy_stack_name(file: &str) -> Option<String> {
    let base = file
        .strip_suffix(".gz")
        .or_else(|| file.strip_suffix(".zst"))
        .unwrap_or(file);
    let stack = base
        .strip_suffix(".json")
        .or_else(|| base.strip_suffix(".yaml"))?;
    let valid = !stack.is_empty()
        && stack
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    valid.then(|| stack.to_string())
}

/// A self-managed backend strata cannot look into (gs://, azblob://…, or an s3:// bucket
/// it cannot open or read) with
/// `PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR` set: that variable only lets the CLI run
/// a backend in the legacy layout, which strata cannot rule out there, so it is refused.
/// Unset, Pulumi (3.257+) refuses a legacy backend itself.
fn unreadable_problem(url: &str, env: &BTreeMap<String, String>) -> Option<String> {
    let var = "PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR";
    let self_managed = !(url.starts_with("https://") || url.starts_with("http://"));
    (self_managed && env_bool(env, var, "")).then(|| {
        format!(
            "{var} is set: it only lets Pulumi run a backend in its legacy layout, where every project's stack of one name is the same stack, and strata cannot read the layout of {url} to rule that out. Nothing was started.\n  Unset {var}: Pulumi then refuses a legacy backend itself, and `pulumi state upgrade` converts it."
        )
    })
}

/// Why strata refuses the run's backend, if it does: a `file://` backend in the legacy
/// layout, or one that `PULUMI_DIY_BACKEND_LEGACY_LAYOUT` would create so. `env` is the
/// environment Pulumi gets (its `PULUMI_BACKEND_URL` absolute).
pub fn layout_problem(env: &BTreeMap<String, String>) -> Option<String> {
    let url = env.get("PULUMI_BACKEND_URL")?;
    let Some(source) = Source::of_env(env) else {
        return unreadable_problem(url, env);
    };
    let upgrade = format!(
        "Upgrade it once to project mode, with no update running: `PULUMI_BACKEND_URL={url} pulumi state upgrade` (each stack moves under its project's folder), then run again"
    );
    let shared = "a stack belongs to no project, so every project's stack of one name is the same stack, and each project's `up` would replace the resources of the one before it";
    match layout(&source) {
        Layout::Legacy(stacks) => Some(format!(
            "the Pulumi backend {url} is in Pulumi's legacy layout ({}): {shared}. strata refuses it. Nothing was started.\n  {upgrade}.",
            if stacks.is_empty() {
                ".pulumi/meta.yaml says version 0".to_string()
            } else {
                format!(
                    "no .pulumi/meta.yaml, stacks at .pulumi/stacks/<stack>.json: {}",
                    stacks.join(", ")
                )
            }
        )),
        Layout::New => legacy_var(env).map(|var| {
            format!(
                "{var} is set, so Pulumi would create the new backend {url} in its legacy layout, where {shared}. strata refuses it. Nothing was started.\n  Unset {var}."
            )
        }),
        Layout::Project => None,
        // A bucket that does not answer is one strata cannot look into.
        Layout::Unknown(_) if source.is_bucket() => unreadable_problem(url, env),
        Layout::Unknown(_) => None,
    }
}
