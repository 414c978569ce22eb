//! Which projects each `policy:` rule of the profile holds: its `select:` evaluated on the
//! whole plan like a `--filter`. A rule holds the same projects in every run, so a
//! selector that does not parse, names a git range or `from:` (which change from run to
//! run), selects nothing, or selects no Pulumi project (only a Pulumi preview says what
//! a project would change) is refused, naming the rule.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::util::display_path;
use crate::workspace::Profile;

use super::graph::{NodeKind, Plan};
use super::select::{self, Target};

/// Fills in each node's `rules` from the profile's `policy:`.
pub fn hold(plan: &mut Plan, profile: &Profile) -> Result<()> {
    for rule in &profile.policy {
        let rule = Arc::new(rule.clone());
        let refuse = |why: String| {
            Error::config(format!(
                "{}: `policy:` rule `{}`: {why}",
                display_path(&profile.file),
                rule.name
            ))
        };
        let keep = match &rule.select {
            None => vec![true; plan.nodes.len()],
            Some(text) => selected(plan, text).map_err(|e| refuse(e.message))?,
        };
        let held: Vec<usize> = (0..plan.nodes.len())
            .filter(|&i| keep[i] && plan.nodes[i].kind == NodeKind::Pulumi)
            .collect();
        if held.is_empty() {
            return Err(refuse(format!(
                "`select: {}` holds no Pulumi project, so it would check nothing (a command project has no plan to check).\n  Select Pulumi projects (see `strata show`), or leave `select:` out for all of them.",
                rule.select.as_deref().unwrap_or("")
            )));
        }
        for i in held {
            plan.nodes[i].rules.push(Arc::clone(&rule));
        }
    }
    Ok(())
}

/// The refusal of a `destroy` of `plan` (without `--override-deny`) when a rule that
/// denies deletes holds one of its projects: each such project with its rule. A destroy
/// deletes every resource of a project, which is exactly what `deny: [delete]` keeps.
pub fn destroy_refusal(plan: &Plan) -> Option<String> {
    let held: Vec<String> = plan
        .nodes
        .iter()
        .filter_map(|n| {
            let rule = n.rules.iter().find(|r| {
                r.deny
                    .contains(&crate::workspace::profile::ChangeKind::Delete)
            })?;
            Some(format!("  {} (rule `{}`: deny delete)", n.path, rule.name))
        })
        .collect();
    if held.is_empty() {
        return None;
    }
    Some(format!(
        "destroy refused: `policy:` rules deny deleting {} of the projects it would destroy; nothing was destroyed:\n{}\n  Leave them out (`--filter '!PATH'`), or destroy them anyway with `strata destroy --override-deny`.",
        held.len(),
        held.join("\n")
    ))
}

/// The nodes the selector `text` picks (a selector that picks nothing is refused by the
/// evaluation, with did-you-mean).
fn selected(plan: &Plan, text: &str) -> Result<Vec<bool>> {
    let mut sel = select::Selector::new(&[text.to_string()], &Default::default(), false)?;
    let terms = sel.filters.iter().flat_map(|f| &f.terms);
    if let Some(t) = terms.into_iter().find(|t| changes_per_run(t)) {
        return Err(Error::config(format!(
            "`select: {text}`: `{}` picks other projects from run to run; a rule must hold the same ones every time (a path, glob, name or `tag:`).",
            t.target
        )));
    }
    for f in &mut sel.filters {
        f.source = format!("select: {text}");
    }
    let no_git = NoGit;
    let chosen = sel.evaluate(
        plan,
        &select::Context {
            order: &plan.order,
            root: std::path::Path::new("."),
            watch: &[],
            changes: &no_git,
        },
    )?;
    Ok(chosen.keep)
}

fn changes_per_run(t: &select::Term) -> bool {
    matches!(t.target, Target::Changed(_) | Target::From(_))
}

/// Git ranges are refused before the evaluation: it never asks.
struct NoGit;

impl select::Changes for NoGit {
    fn changed(&self, _: &select::Range) -> Result<Vec<String>> {
        Err(Error::config("a rule's selector names no git range"))
    }
}

#[cfg(test)]
mod tests {
    use crate::plan::testing::plan_of;

    const ENTRIES: &str = "description: d\ninfra_type: t\ninfrastructure:\n  - path: data/db\n    tags: [data]\n  - path: data/cache\n    tags: [data]\n  - path: net/vpc\n  - path: tools/seed\n    tags: [data]\n";

    fn held(policy: &str) -> Result<Vec<(String, Vec<String>)>, String> {
        let plan = plan_of(&format!("{ENTRIES}policy:\n{policy}"), &["tools/seed"])
            .map_err(|e| e.message)?;
        Ok(plan
            .nodes
            .iter()
            .map(|n| {
                (
                    n.path.clone(),
                    n.rules.iter().map(|r| r.name.clone()).collect(),
                )
            })
            .collect())
    }

    #[test]
    fn a_rule_holds_the_pulumi_projects_its_selector_picks() {
        let h = held("  - name: keep-data\n    select: tag:data\n    deny: [delete]\n  - name: small\n    max_changes: 3\n").unwrap();
        let of = |p: &str| h.iter().find(|(x, _)| x == p).unwrap().1.clone();
        assert_eq!(of("data/db"), ["keep-data", "small"]);
        assert_eq!(of("data/cache"), ["keep-data", "small"]);
        assert_eq!(of("net/vpc"), ["small"]);
        // A command project has no plan: no rule holds it.
        assert!(of("tools/seed").is_empty());
    }

    #[test]
    fn a_selector_that_holds_nothing_or_changes_per_run_is_refused() {
        let e = held("  - name: r\n    select: tag:nosuch\n    deny: [delete]\n").unwrap_err();
        assert!(e.contains("rule `r`") && e.contains("nosuch"), "{e}");
        let e = held("  - name: r\n    select: tools/seed\n    deny: [delete]\n").unwrap_err();
        assert!(e.contains("holds no Pulumi project"), "{e}");
        let e = held("  - name: r\n    select: '[main]'\n    deny: [delete]\n").unwrap_err();
        assert!(e.contains("from run to run"), "{e}");
        let e = held("  - name: r\n    select: from:net/vpc\n    deny: [delete]\n").unwrap_err();
        assert!(e.contains("from run to run"), "{e}");
        let e = held("  - name: r\n    select: 'data/*|'\n    deny: [delete]\n").unwrap_err();
        assert!(e.contains("rule `r`"), "{e}");
    }
}
