//! References no entry declares: a stack reference strata cannot resolve may read any
//! stack, so its project must not run beside what it might read. Until the entry says
//! what they read (`reads:`, whose projects become its needs), `validate` and `up`
//! refuse it, listing each reference by file and line and saying how to declare it.

use std::collections::BTreeMap;
use std::path::Path;

use super::Found;
use crate::plan::Plan;
use crate::util::display_path;

/// An unresolved reference of a project whose entry does not declare what it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undeclared {
    /// The project's profile path.
    pub project: String,
    /// `file:line` from the workspace root.
    pub at: String,
    /// The name as read (`${?}` when nothing of it was).
    pub name: String,
    pub why: String,
}

/// The unresolved references of `found` (see [`super::of_plan`]) that no `reads:` of
/// the plan's entries covers (a `reads:` list covers the whole entry, a map the files
/// it names).
pub fn undeclared(plan: &Plan, found: &BTreeMap<String, Vec<Found>>) -> Vec<Undeclared> {
    let mut out = Vec::new();
    for n in &plan.nodes {
        let (Some(refs), Some(entry), Some(project)) = (found.get(&n.path), &n.entry, &n.project)
        else {
            continue;
        };
        for f in refs.iter().filter(|f| f.unreadable()) {
            let file = f.reference.file.to_string_lossy();
            if entry.reads.as_ref().is_some_and(|r| r.covers(&file)) {
                continue;
            }
            out.push(Undeclared {
                project: n.path.clone(),
                at: format!(
                    "{}:{}",
                    display_path(&project.dir.join(&f.reference.file)),
                    f.reference.line
                ),
                name: f.reference.name.clone(),
                why: match &f.resolution {
                    super::Resolution::Unresolved { why } => why.clone(),
                    _ => String::new(),
                },
            });
        }
    }
    out
}

/// The refusal (see [`refusal`]) for the projects of `selected` whose unresolved
/// references, found in `full` at `at`, no `reads:` declares; `None` when there is none.
pub fn refused(
    full: &Plan,
    selected: &Plan,
    at: &super::Context,
    profile: &Path,
) -> Option<String> {
    if !selected
        .nodes
        .iter()
        .any(|n| n.kind == crate::plan::NodeKind::Pulumi)
    {
        return None;
    }
    let list = undeclared(selected, &super::of_plan(full, at));
    (!list.is_empty()).then(|| refusal(&list, profile))
}

/// The projects `refs` (one project's references) read: those they name, and for the
/// ones strata cannot resolve, what `reads` declares; `None` (any stack) when one of
/// those is not declared.
pub fn read_targets(
    refs: &[Found],
    reads: Option<&crate::workspace::profile::Reads>,
) -> Option<std::collections::BTreeSet<String>> {
    let mut out: std::collections::BTreeSet<String> =
        refs.iter().filter_map(|f| f.target.clone()).collect();
    for f in refs.iter().filter(|f| f.unreadable()) {
        let declared = reads.filter(|r| r.covers(&f.reference.file.to_string_lossy()))?;
        out.extend(declared.projects());
    }
    Some(out)
}

/// The refusal for `list` (not empty): each reference, and how to declare what it
/// reads in `profile`.
pub fn refusal(list: &[Undeclared], profile: &Path) -> String {
    let mut projects: Vec<&str> = list.iter().map(|u| u.project.as_str()).collect();
    projects.dedup();
    let mut out = format!(
        "{} read{} stacks strata cannot resolve, so {} might read any project of the stack and must not run beside it:\n",
        crate::util::list_some(&projects, 4),
        if projects.len() == 1 { "s" } else { "" },
        if projects.len() == 1 { "it" } else { "each" },
    );
    for u in list {
        out.push_str(&format!(
            "  {}  {}: `{}`: {}\n",
            u.project, u.at, u.name, u.why
        ));
    }
    out.push_str(&format!(
        "  Say what they read in {}: under each such entry, `reads: [PATH, ...]` (the projects' paths; they run first, like needs), or `reads: []` when they read no project of this profile.",
        display_path(profile)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_lists_each_reference_and_how_to_declare() {
        let u = |p: &str, line: usize| Undeclared {
            project: p.into(),
            at: format!("projects/{p}/main.py:{line}"),
            name: "${?}".into(),
            why: "the project part of the name is computed".into(),
        };
        let text = refusal(
            &[u("app", 3), u("app", 9)],
            Path::new("providers/main.yaml"),
        );
        assert!(
            text.starts_with("app reads stacks strata cannot resolve"),
            "{text}"
        );
        assert!(text.contains("projects/app/main.py:3") && text.contains("main.py:9"));
        assert!(text.contains("reads: [PATH, ...]") && text.contains("providers/main.yaml"));
    }
}
