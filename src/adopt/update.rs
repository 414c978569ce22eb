//! `strata init --update`: the profile's text edited in place, line by line, so the
//! user's edits and comments stay: the entries of projects found since are appended to
//! their stage's list, the entries whose folder no longer holds a project are cut out
//! (and their path out of every `needs:`). Nothing else of the file is touched.

use std::collections::BTreeSet;
use std::path::Path;

use super::Adoption;
use crate::error::{Error, Result};
use crate::util::display_path;
use crate::workspace::Stage;

/// The edited text and what changed (entry paths).
#[derive(Debug)]
pub struct Updated {
    pub text: String,
    pub added: Vec<String>,
    pub dropped: Vec<String>,
    /// Found projects that cannot be added (outside the profile's `projects:` folder).
    pub outside: Vec<String>,
    /// Vanished projects whose entry is in an `include:`d fragment: left for the user.
    pub in_fragments: Vec<String>,
}

/// The profile `file`'s text updated for the projects `a` found. `a.projects_dir` is set
/// from the profile's `projects:` first.
pub fn update(a: &mut Adoption, file: &Path, text: &str) -> Result<Updated> {
    let doc: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
        Error::config(format!(
            "{}: cannot be updated, it is not YAML ({}).\n  Fix it, then run `strata init --update` again.",
            display_path(file),
            crate::workspace::yaml::scrub(&e.to_string())
        ))
    })?;
    a.projects_dir = doc
        .get("projects")
        .and_then(|p| p.as_str())
        .map(|p| {
            p.trim()
                .trim_end_matches('/')
                .trim_start_matches("./")
                .to_string()
        })
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| crate::workspace::profile::DEFAULT_PROJECTS_DIR.into());
    let present = entry_paths(&doc, file.parent().unwrap_or(Path::new(".")));
    let base = match a.projects_dir.as_str() {
        "." => a.root.clone(),
        d => a.root.join(d),
    };
    let dropped: Vec<String> = present
        .iter()
        .filter(|p| !holds_project(&base.join(p)))
        .cloned()
        .collect();
    let (mut added, mut outside) = (Vec::new(), Vec::new());
    for f in &a.found {
        let inside = a.projects_dir == "." || f.rel.starts_with(&format!("{}/", a.projects_dir));
        let path = a.entry_path(&f.rel);
        if !inside {
            outside.push(f.rel.clone());
        } else if !present.contains(&path) {
            added.push(f.rel.clone());
        }
    }
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut in_fragments = Vec::new();
    for p in &dropped {
        if cut_entry(&mut lines, p) {
            drop_need(&mut lines, p);
        } else {
            in_fragments.push(p.clone());
        }
    }
    let dropped: Vec<String> = dropped
        .into_iter()
        .filter(|p| !in_fragments.contains(p))
        .collect();
    // New projects go at the end of the first list, each after what it needs: the
    // order is what their code gives, no stage the repository does not have.
    let new: Vec<String> = a
        .ordered()
        .into_iter()
        .filter(|r| added.contains(r))
        .collect();
    if !new.is_empty() {
        let block: String = new
            .iter()
            .map(|r| super::write::entry_text(a, r, Some("added by strata init --update")))
            .collect();
        append_to_stage(&mut lines, Stage::Infrastructure.key(), &block);
    }
    let mut text = lines.join("\n");
    text.push('\n');
    serde_yaml::from_str::<serde_yaml::Value>(&text).map_err(|e| {
        Error::config(format!(
            "{}: the update would not leave YAML ({}); nothing was written.\n  Add and drop the entries by hand.",
            display_path(file),
            crate::workspace::yaml::scrub(&e.to_string())
        ))
    })?;
    Ok(Updated {
        text,
        added: added.iter().map(|r| a.entry_path(r)).collect(),
        dropped,
        outside,
        in_fragments,
    })
}

fn holds_project(dir: &Path) -> bool {
    ["Pulumi.yaml", "Pulumi.yml", "Strata.yaml"]
        .iter()
        .any(|f| dir.join(f).is_file())
}

/// The `path:` of every entry of both stages, those of `include:`d fragments too.
fn entry_paths(doc: &serde_yaml::Value, providers: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for stage in ["infrastructure", "kubernetes"] {
        collect_paths(doc.get(stage), providers, &mut out, 0);
    }
    out
}

fn collect_paths(
    list: Option<&serde_yaml::Value>,
    providers: &Path,
    out: &mut BTreeSet<String>,
    depth: usize,
) {
    for e in list.and_then(|l| l.as_sequence()).into_iter().flatten() {
        if let Some(p) = e.get("path").and_then(|p| p.as_str()) {
            out.insert(p.trim_matches('/').to_string());
        }
        let fragment = e.get("include").and_then(|i| i.as_str()).and_then(|i| {
            let text = std::fs::read_to_string(providers.join(i)).ok()?;
            serde_yaml::from_str::<serde_yaml::Value>(&text).ok()
        });
        if let Some(f) = fragment.filter(|_| depth < 8) {
            collect_paths(Some(&f), providers, out, depth + 1);
        }
    }
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start().len()
}

/// A YAML scalar as written, without its comment and quotes.
fn unquote(s: &str) -> String {
    let s = match s.find(" #") {
        Some(i) => &s[..i],
        None => s,
    };
    s.trim()
        .trim_matches(|c| c == '"' || c == '\'')
        .trim_matches('/')
        .to_string()
}

/// Cuts the entry `- path: <path>` and its fields (the lines indented deeper than its
/// dash) out of `lines`; `false` when the text has no such entry.
fn cut_entry(lines: &mut Vec<String>, path: &str) -> bool {
    let Some(start) = lines.iter().position(|l| {
        l.trim_start()
            .strip_prefix("- path:")
            .is_some_and(|v| unquote(v) == path)
    }) else {
        return false;
    };
    let dash = indent(&lines[start]);
    let mut end = start + 1;
    while end < lines.len() {
        let l = &lines[end];
        if !l.trim().is_empty() && indent(l) <= dash {
            break;
        }
        end += 1;
    }
    lines.drain(start..end);
    true
}

/// Takes `path` out of every `needs:` (flow `[a, b]` or block `- a` items).
fn drop_need(lines: &mut Vec<String>, path: &str) {
    let mut in_needs: Option<usize> = None;
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].clone();
        let t = l.trim_start();
        if let Some(d) = in_needs
            && !t.is_empty()
        {
            let item = indent(&l) > d || t.starts_with('-');
            if !item {
                in_needs = None;
            } else if t.strip_prefix('-').is_some_and(|v| unquote(v) == path) {
                lines.remove(i);
                continue;
            }
        }
        if let Some(rest) = t.strip_prefix("needs:") {
            let rest = rest.trim_start();
            if let (Some(open), Some(close)) = (rest.find('['), rest.find(']')) {
                let kept: Vec<&str> = rest[open + 1..close]
                    .split(',')
                    .map(str::trim)
                    .filter(|n| !n.is_empty() && unquote(n) != path)
                    .collect();
                lines[i] = format!(
                    "{}needs: [{}]{}",
                    &l[..indent(&l)],
                    kept.join(", "),
                    &rest[close + 1..]
                );
            } else if rest.is_empty() || rest.starts_with('#') {
                in_needs = Some(indent(&l));
            }
        }
        i += 1;
    }
}

/// Appends `block` (entry lines) at the end of the top-level list `key:`, or a new
/// `key:` list at the end of the file.
fn append_to_stage(lines: &mut Vec<String>, key: &str, block: &str) {
    let new: Vec<String> = block.lines().map(str::to_string).collect();
    let head = lines.iter().position(|l| {
        l.strip_prefix(key)
            .and_then(|r| r.strip_prefix(':'))
            .is_some_and(|r| {
                let r = r.trim();
                r.is_empty() || r.starts_with('#') || r.starts_with("[]")
            })
    });
    let Some(head) = head else {
        while lines.last().is_some_and(|l| l.trim().is_empty()) {
            lines.pop();
        }
        lines.push(format!("{key}:"));
        lines.extend(new);
        return;
    };
    if let Some(rest) = lines[head].strip_prefix(&format!("{key}:")) {
        let rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix("[]") {
            lines[head] = format!("{key}:{after}");
        }
    }
    let mut last = head;
    for (i, l) in lines.iter().enumerate().skip(head + 1) {
        if l.trim().is_empty() || l.trim_start().starts_with('#') {
            continue;
        }
        if indent(l) == 0 && !l.starts_with('-') {
            break;
        }
        last = i;
    }
    for (k, l) in new.into_iter().enumerate() {
        lines.insert(last + 1 + k, l);
    }
}
