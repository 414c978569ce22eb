//! `policy:` of a profile: named rules over each project's planned changes — which
//! projects (a `--filter` selector, checked against the plan in `plan::rules`), which
//! kinds of change are denied, and how many changes a project may make at most.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::util::display_path;

/// A kind of change a preview plans for a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeKind {
    Create,
    Update,
    Delete,
    Replace,
    /// An output another project reads, removed (or renamed) or of another type after
    /// the update (`run::step::contracts`).
    #[serde(rename = "output-removed")]
    OutputRemoved,
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Create => "create",
            ChangeKind::Update => "update",
            ChangeKind::Delete => "delete",
            ChangeKind::Replace => "replace",
            ChangeKind::OutputRemoved => "output-removed",
        }
    }
}

/// A rule as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRule {
    name: String,
    #[serde(default)]
    select: Option<String>,
    #[serde(default)]
    deny: Vec<ChangeKind>,
    #[serde(default)]
    approve: Vec<ChangeKind>,
    #[serde(default)]
    max_changes: Option<u64>,
}

/// A `policy:` rule, checked: a project it selects may not plan a change of a `deny`
/// kind, nor more than `max_changes` changes, and waits for an approval of a plan with a
/// change of an `approve` kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rule {
    pub name: String,
    /// The `--filter` expression of the projects it holds; `None`: every Pulumi project.
    pub select: Option<String>,
    pub deny: Vec<ChangeKind>,
    /// Kinds of change that wait for an approval (`strata approve`) before they go out.
    pub approve: Vec<ChangeKind>,
    pub max_changes: Option<u64>,
}

/// `policy:`, checked: each rule named (letters, digits, `-`, `_`, `.`; no two alike),
/// each with something to check. A refusal names the file, the rule and its line.
pub(super) fn rules(raw: &[RawRule], file: &Path) -> Result<Vec<Rule>> {
    let mut out: Vec<Rule> = Vec::new();
    for (i, r) in raw.iter().enumerate() {
        let fail = |why: String| {
            Error::config(format!(
                "{}: `policy:` rule {}{}: {why}",
                display_path(file),
                if r.name.is_empty() {
                    format!("#{}", i + 1)
                } else {
                    format!("`{}`", r.name)
                },
                // Read again only to name the line of a refusal.
                line_of(&std::fs::read_to_string(file).unwrap_or_default(), &r.name)
                    .map(|l| format!(" (line {l})"))
                    .unwrap_or_default()
            ))
        };
        if !super::is_valid_name(&r.name) {
            return Err(fail(
                "`name:` must be letters, digits, `-`, `_` or `.`, for example `keep-data`.".into(),
            ));
        }
        if out.iter().any(|o| o.name == r.name) {
            return Err(fail(
                "two rules have this name; give each its own (the name is what a denied project reports)."
                    .into(),
            ));
        }
        if r.deny.is_empty() && r.approve.is_empty() && r.max_changes.is_none() {
            return Err(fail(
                "it checks nothing: give it `deny: [delete, replace]`, `approve: [update]` (kinds: create, update, delete, replace, output-removed) or `max_changes: N`."
                    .into(),
            ));
        }
        if r.select.as_deref().is_some_and(|s| s.trim().is_empty()) {
            return Err(fail(
                "`select:` is empty: write a selector such as `tag:data`, or leave the key out for every Pulumi project."
                    .into(),
            ));
        }
        out.push(Rule {
            name: r.name.clone(),
            select: r.select.as_ref().map(|s| s.trim().to_string()),
            deny: kinds(&r.deny),
            approve: kinds(&r.approve),
            max_changes: r.max_changes,
        });
    }
    Ok(out)
}

fn kinds(k: &[ChangeKind]) -> Vec<ChangeKind> {
    let mut k = k.to_vec();
    k.sort();
    k.dedup();
    k
}

/// The line of the profile where the rule named `name` is written (`name: NAME`).
fn line_of(text: &str, name: &str) -> Option<usize> {
    if name.is_empty() {
        return None;
    }
    text.lines()
        .position(|l| {
            let l = l.trim_start().trim_start_matches("- ").trim();
            l.strip_prefix("name:")
                .map(|v| v.trim().trim_matches(['"', '\'']))
                == Some(name)
        })
        .map(|i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(yaml: &str) -> std::result::Result<Vec<RawRule>, String> {
        serde_yaml::from_str(yaml).map_err(|e| e.to_string())
    }

    fn checked(yaml: &str) -> std::result::Result<Vec<Rule>, String> {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("p.yaml");
        std::fs::write(&file, format!("policy:\n{yaml}")).unwrap();
        rules(&raw(yaml)?, &file).map_err(|e| e.message)
    }

    #[test]
    fn rules_are_read_with_their_kinds_and_limits() {
        let r = checked(
            "- name: keep-data\n  select: \"tag:data\"\n  deny: [replace, delete, delete]\n- name: small-steps\n  max_changes: 20\n",
        )
        .unwrap();
        assert_eq!(r[0].name, "keep-data");
        assert_eq!(r[0].select.as_deref(), Some("tag:data"));
        assert_eq!(r[0].deny, [ChangeKind::Delete, ChangeKind::Replace]);
        assert_eq!((r[1].select.clone(), r[1].max_changes), (None, Some(20)));
    }

    #[test]
    fn a_bad_rule_is_refused_naming_it_and_its_line() {
        let e = checked("- name: keep-data\n  select: x\n").unwrap_err();
        assert!(e.contains("rule `keep-data` (line 2)"), "{e}");
        assert!(e.contains("checks nothing"), "{e}");
        let e = checked("- name: a\n  deny: [delete]\n- name: a\n  max_changes: 1\n").unwrap_err();
        assert!(e.contains("two rules have this name"), "{e}");
        let e = checked("- name: 'x y'\n  deny: [delete]\n").unwrap_err();
        assert!(e.contains("`name:` must be"), "{e}");
        let r = checked("- name: r\n  approve: [update, delete, update]\n").unwrap();
        assert_eq!(r[0].approve, [ChangeKind::Update, ChangeKind::Delete]);
        let e = checked("- name: r\n  select: ' '\n  deny: [create]\n").unwrap_err();
        assert!(e.contains("`select:` is empty"), "{e}");
        // An unknown kind is the parser's refusal, with its line.
        let e = raw("- name: r\n  deny: [destroy]\n").unwrap_err();
        assert!(e.contains("unknown variant `destroy`"), "{e}");
        assert!(e.contains("line 2"), "{e}");
        let e = raw("- name: r\n  denied: [delete]\n").unwrap_err();
        assert!(e.contains("unknown field `denied`"), "{e}");
    }
}
