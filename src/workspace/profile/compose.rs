//! Composition of one stage's list: `include:` fragments expanded, each raw entry
//! checked and resolved, `after:`/`before:` insertions spliced into the chain.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::raw::{
    RawEntry, check_mock_commands, check_watch, parse_duration, parse_retry, read_yaml,
};
use super::{Entry, Input, Stage};
use crate::error::{Error, Result};
use crate::util::display_path;

enum Placement {
    After(String),
    Before(String),
}

/// Expands includes and applies insertions, returning the stage's entries in order.
pub(super) fn compose(
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

/// Appends the entries of `list` (read from `file`) to `out`, each `include:` expanded
/// in place; `include_stack` holds the fragments being expanded, to refuse a cycle.
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
        let Some(inc) = &raw.include else {
            out.push(entry(file, stage, raw, &where_)?);
            continue;
        };
        let inc_path = include_path(providers_dir, raw, inc, &where_, include_stack)?;
        let sub: Vec<RawEntry> = read_yaml(&inc_path)?;
        include_stack.push(inc_path.clone());
        flatten(providers_dir, &inc_path, stage, &sub, out, include_stack)?;
        include_stack.pop();
    }
    Ok(())
}

/// The fragment the entry `include: inc` names, checked: the entry has no other field,
/// the fragment is not being expanded already, and it is a file inside providers/.
fn include_path(
    providers_dir: &Path,
    raw: &RawEntry,
    inc: &str,
    where_: &str,
    include_stack: &[PathBuf],
) -> Result<PathBuf> {
    if raw.has_fields_besides_include() {
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
    Ok(inc_path)
}

/// A project entry (not an `include:`) checked and resolved, with where it is placed.
fn entry(
    file: &Path,
    stage: Stage,
    raw: &RawEntry,
    where_: &str,
) -> Result<(Entry, Option<Placement>)> {
    let path = entry_path(raw, where_)?;
    // Where a problem of this entry is: the file, the entry's number and its path.
    let at = format!("{where_} ({path})");
    let placement = placement(raw, &at)?;
    let inputs = inputs(raw, &at)?;
    let timeout = raw
        .timeout
        .as_ref()
        .map(|t| {
            parse_duration(t).map_err(|why| {
                Error::config(format!(
                    "{at}: `timeout: {t}` is not a duration ({why}); write it like `45m`, `90s` or `1h 30m`."
                ))
            })
        })
        .transpose()?;
    let retry = raw
        .retry
        .as_ref()
        .map(|r| parse_retry(r).map_err(|why| Error::config(format!("{at}: `retry:` {why}"))))
        .transpose()?;
    let watch =
        check_watch(&raw.watch).map_err(|why| Error::config(format!("{at}: `watch:` {why}")))?;
    let mock_outputs_allowed_commands = raw
        .mock_outputs_allowed_commands
        .as_deref()
        .map(check_mock_commands)
        .transpose()
        .map_err(|why| Error::config(format!("{at}: `mock_outputs_allowed_commands:` {why}.")))?;
    let mock_outputs = mock_outputs(raw, &at)?;
    let entry = Entry {
        path,
        description: raw.description.clone().into(),
        stage,
        needs: raw
            .needs
            .as_ref()
            .map(|n| n.iter().map(|s| s.trim_matches('/').to_string()).collect()),
        inputs: inputs.into(),
        secrets: raw.secrets.clone().into(),
        on_success: raw.on_success.clone().into(),
        timeout,
        retry: retry.into(),
        watch: watch.into(),
        mock_outputs: mock_outputs.into(),
        mock_outputs_allowed_commands: mock_outputs_allowed_commands.into(),
        pool: raw.pool.as_ref().map(|p| p.trim().to_string()),
        tags: raw
            .tags
            .iter()
            .map(|t| t.trim().to_string())
            .collect::<Vec<_>>()
            .into(),
        config: entry_config(raw, &at)?.into(),
        stack: entry_stack(raw, &at)?.into(),
        reads: raw.reads.clone().into(),
        file: file.to_path_buf(),
    };
    Ok((entry, placement))
}

/// The entry's `config:`: `namespace:key` → a value (no `secure:`: a secret is Pulumi's,
/// in the project's own stack config, or strata's, under `secrets:`).
fn entry_config(raw: &RawEntry, at: &str) -> Result<serde_yaml::Mapping> {
    for (k, v) in &raw.config {
        let key = k.as_str().unwrap_or("");
        if key.is_empty() || !key.contains(':') || key.starts_with(':') || key.ends_with(':') {
            return Err(Error::config(format!(
                "{at}: `config:` key {} is not a stack config key: write it `namespace:key` as Pulumi does (`aws:region`, `<project>:size`).",
                serde_json::to_string(&k).unwrap_or_default()
            )));
        }
        if v.get("secure").is_some() {
            return Err(Error::config(format!(
                "{at}: `config:` key `{key}` holds a `secure:` value. A profile holds no secrets: keep it in the project's own Pulumi.<stack>.yaml (`pulumi config set --secret`), or list it under `secrets:`."
            )));
        }
    }
    Ok(raw.config.clone())
}

/// The entry's `stack:`: a stack name that may hold `${stack}` (the run's).
fn entry_stack(raw: &RawEntry, at: &str) -> Result<Option<String>> {
    let Some(t) = raw.stack.as_ref().map(|t| t.trim().to_string()) else {
        return Ok(None);
    };
    let sample = t.replace("${stack}", "dev");
    if !crate::workspace::valid_stack_name(&sample) {
        return Err(Error::config(format!(
            "{at}: `stack: {t}` is not a stack name: {}. `${{stack}}` stands for the run's stack (`applications.${{stack}}`).",
            crate::workspace::why_not_a_stack_name(&sample)
        )));
    }
    Ok(Some(t))
}

/// The entry's `path:`, trimmed of slashes: a folder inside projects/.
fn entry_path(raw: &RawEntry, where_: &str) -> Result<String> {
    let Some(path) = raw.path.clone() else {
        return Err(Error::config(format!(
            "{where_}: the entry has no `path:` (the project folder under projects/, or under the profile's `projects:` folder), and is not an `include:`."
        )));
    };
    let path = path.trim_matches('/').to_string();
    if path.is_empty() {
        return Err(Error::config(format!("{where_}: `path:` is empty.")));
    }
    if path.split('/').any(|c| c == ".." || c == ".") || path.contains('\\') {
        return Err(Error::config(format!(
            "{where_}: `path: {path}` must name a folder inside projects/ (or the profile's `projects:` folder) without `.` or `..` parts."
        )));
    }
    Ok(path)
}

/// The entry's `after:` or `before:` (not both), if any.
fn placement(raw: &RawEntry, at: &str) -> Result<Option<Placement>> {
    match (&raw.after, &raw.before) {
        (Some(_), Some(_)) => Err(Error::config(format!(
            "{at}: give `after:` or `before:`, not both."
        ))),
        (Some(a), None) => Ok(Some(Placement::After(a.trim_matches('/').to_string()))),
        (None, Some(b)) => Ok(Some(Placement::Before(b.trim_matches('/').to_string()))),
        (None, None) => Ok(None),
    }
}

/// The entry's `inputs:`, each `<key>: <project path>:<output>`.
fn inputs(raw: &RawEntry, at: &str) -> Result<Vec<Input>> {
    let mut inputs = Vec::new();
    for (key, source) in &raw.inputs {
        let parsed = source
            .rsplit_once(':')
            .filter(|(p, o)| !p.trim().is_empty() && !o.trim().is_empty() && !p.contains(':'));
        let Some((project, output)) = parsed else {
            return Err(Error::config(format!(
                "{at}: input `{key}: {source}` is not `<project path>:<output>` (for example `infrastructure/aws/vpc:vpc_id`)."
            )));
        };
        inputs.push(Input {
            key: key.clone(),
            project: project.trim().trim_matches('/').to_string(),
            output: output.trim().to_string(),
        });
    }
    Ok(inputs)
}

/// The entry's `mock_outputs:`, each a plain value.
fn mock_outputs(raw: &RawEntry, at: &str) -> Result<BTreeMap<String, serde_json::Value>> {
    let mut mock_outputs = BTreeMap::new();
    for (name, v) in &raw.mock_outputs {
        let value = serde_json::to_value(v).map_err(|e| {
            Error::config(format!(
                "{at}: `mock_outputs: {name}` is not a plain value ({e})."
            ))
        })?;
        mock_outputs.insert(name.clone(), value);
    }
    Ok(mock_outputs)
}
