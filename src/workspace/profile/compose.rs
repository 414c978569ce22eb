//! Composition of one stage's list: `include:` fragments expanded, each raw entry
//! checked and resolved, `after:`/`before:` insertions spliced into the chain.

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
                || raw.pool.is_some()
                || !raw.tags.is_empty()
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
        let mock_outputs_allowed_commands =
            check_mock_commands(raw.mock_outputs_allowed_commands.as_deref()).map_err(|why| {
                Error::config(format!(
                    "{where_} ({path}): `mock_outputs_allowed_commands:` {why}."
                ))
            })?;
        let mut mock_outputs = std::collections::BTreeMap::new();
        for (name, v) in &raw.mock_outputs {
            let value = serde_json::to_value(v).map_err(|e| {
                Error::config(format!(
                    "{where_} ({path}): `mock_outputs: {name}` is not a plain value ({e})."
                ))
            })?;
            mock_outputs.insert(name.clone(), value);
        }
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
                mock_outputs,
                mock_outputs_allowed_commands,
                pool: raw.pool.as_ref().map(|p| p.trim().to_string()),
                tags: raw.tags.iter().map(|t| t.trim().to_string()).collect(),
                file: file.to_path_buf(),
            },
            placement,
        ));
    }
    Ok(())
}
