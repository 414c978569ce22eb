//! `validate`'s stack-reference checks: what the code reads, against the graph's order,
//! the profile's projects and the backend's organization.

use std::collections::BTreeSet;
use std::path::Path;

use super::Report;
use crate::plan::Plan;
use crate::plan::references::{self, Found, Part};
use crate::util::{display_path, plural};
use crate::workspace;

/// Stack references found in the code, checked against the graph: a reference the
/// scanner cannot read, a project that reads a stack not ordered before it, a reference
/// to a project the profile does not have, and a literal organization other than
/// `organization` on a self-managed backend, where Pulumi only knows that one (MARA
/// issue #223).
pub(super) fn check(
    ws: &workspace::Workspace,
    (plan, stack): (&Plan, Option<&str>),
    profile: &workspace::Profile,
    r: &mut Report,
) {
    let shared = stack.map(|s| ws.stack_config_path(s));
    let at = references::Context {
        root: &ws.root,
        stack,
        shared: shared.as_deref(),
    };
    let found = references::of_plan(plan, &at);
    let count: usize = found.values().map(Vec::len).sum();
    let env = crate::pipeline::env::pulumi_env(ws);
    let checks = Checks {
        plan,
        profile,
        self_managed: crate::pipeline::env::self_managed(&env),
    };
    let mut warned = 0;
    for (path, refs) in &found {
        let Some(i) = plan.index_of(path) else {
            continue;
        };
        let ancestors = ancestors(plan, i);
        let dir = plan.nodes[i].project.as_ref().map(|p| p.dir.as_path());
        for f in refs {
            for warning in checks.of(path, dir, &ancestors, f) {
                warned += 1;
                r.warn("references", warning);
            }
        }
    }
    let undeclared = references::undeclared(plan, &found);
    if !undeclared.is_empty() {
        warned += 1;
        r.bad(
            "references",
            references::refusal(&undeclared, &profile.file),
        );
    }
    warned += not_read(plan, r);
    if warned == 0 {
        r.ok(
            "references",
            format!(
                "{count} stack reference{} in the code, all ordered",
                plural(count)
            ),
        );
    }
}

/// Every project the plan orders before node `i`.
fn ancestors(plan: &Plan, i: usize) -> BTreeSet<usize> {
    let mut seen = BTreeSet::new();
    let mut stack = plan.nodes[i].needs.clone();
    while let Some(j) = stack.pop() {
        if seen.insert(j) {
            stack.extend(plan.nodes[j].needs.iter().copied());
        }
    }
    seen
}

/// What one reference is checked against.
struct Checks<'a> {
    plan: &'a Plan,
    profile: &'a workspace::Profile,
    self_managed: bool,
}

impl Checks<'_> {
    /// The warnings of reference `f` in the code of project `path` (in folder `dir`),
    /// whose ancestors are `ancestors`. An unreadable one is said once, with the others
    /// (in `undeclared`).
    fn of(
        &self,
        path: &str,
        dir: Option<&Path>,
        ancestors: &BTreeSet<usize>,
        f: &Found,
    ) -> Vec<String> {
        let mut warnings = Vec::new();
        let at = place(path, dir, f);
        match (&f.target, &f.reference.project) {
            _ if f.unreadable() => {}
            (Some(t), _)
                if self
                    .plan
                    .index_of(t)
                    .is_some_and(|j| !ancestors.contains(&j)) =>
            {
                warnings.push(format!(
                    "{path} reads the stack of {t} ({at}: `{}`), but {t} is not ordered before it: add it to the `needs:` of {path} in {}, or set `infer_needs: true`",
                    f.reference.name,
                    display_path(&self.profile.file)
                ));
            }
            (None, Some(Part::Literal(name))) => warnings.push(format!(
                "{path} reads a stack of project `{name}` ({at}), which is no project of profile {}: {}",
                self.profile.name,
                crate::util::did_you_mean(name, self.plan.nodes.iter().map(|n| n.name.as_str()))
                    .trim()
            )),
            _ => {}
        }
        if let Some(Part::Literal(org)) = &f.reference.org
            && self.self_managed
            && org != "organization"
        {
            warnings.push(format!(
                "{path} names organization `{org}` ({at}: `{}`), but on a self-managed backend every stack is in `organization`: use `${{pulumi.organization}}`, get_organization(), or $STRATA_ORG",
                f.reference.name
            ));
        }
        warnings
    }
}

/// Where reference `f` of project `path` (in folder `dir`) is: its file (a repository
/// path) and line.
fn place(path: &str, dir: Option<&Path>, f: &Found) -> String {
    match dir {
        Some(d) => format!(
            "{}:{}",
            display_path(&d.join(&f.reference.file)),
            f.reference.line
        ),
        None => path.to_string(),
    }
}

/// Pulumi projects in a language whose stack references strata does not read (C#, F#,
/// VB, Java): warned of, as their order is then only what the profile says.
fn not_read(plan: &Plan, r: &mut Report) -> usize {
    let mut n = 0;
    for node in plan
        .nodes
        .iter()
        .filter(|n| n.kind == crate::plan::NodeKind::Pulumi)
    {
        let Some(p) = &node.project else { continue };
        if let Some(what) = crate::plan::references::not_read(&p.dir) {
            n += 1;
            r.warn(
                "references",
                format!(
                    "{}: strata does not read the stack references of its code ({what}): its order is only what its entry says; add what it reads to its needs:",
                    node.path
                ),
            );
        }
    }
    n
}
