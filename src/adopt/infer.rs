//! What strata can tell of the found projects without running them: the stage of each
//! (the Kubernetes provider in its code), its needs (the stack references in its code
//! that name another found project), and the references it cannot resolve (left for
//! the user, by file and line; never a guess).

use std::collections::{BTreeMap, BTreeSet};

use super::discover::{Found, Kind};
use crate::plan::references::{self, Part};
use crate::workspace::Stage;

/// A need inferred from a stack reference: `from` reads `to`'s stack at `at` (file:line
/// from the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub at: String,
}

/// A reference strata could not resolve: where (file:line from the root), the name as
/// read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown {
    pub project: String,
    pub at: String,
    pub name: String,
    pub why: String,
}

/// Stages, edges and unknowns of the found projects (keyed by their folder from the
/// root).
#[derive(Debug, Default)]
pub struct Inferred {
    pub stages: BTreeMap<String, Stage>,
    pub edges: Vec<Edge>,
    pub unknowns: Vec<Unknown>,
}

impl Inferred {
    /// The projects `rel` needs, sorted and deduplicated.
    pub fn needs_of(&self, rel: &str) -> Vec<String> {
        let set: BTreeSet<&str> = self
            .edges
            .iter()
            .filter(|e| e.from == rel)
            .map(|e| e.to.as_str())
            .collect();
        set.into_iter().map(str::to_string).collect()
    }
}

/// What the code marks as using the Kubernetes provider: an import of its SDK.
const KUBERNETES_IMPORTS: &[&str] = &[
    "pulumi_kubernetes",
    "@pulumi/kubernetes",
    "pulumi-kubernetes/sdk",
];

/// Infers the stages and needs of `found`.
pub fn infer(found: &[Found]) -> Inferred {
    let mut by_name: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for f in found {
        if let Kind::Pulumi { name, .. } = &f.kind {
            by_name
                .entry(name.as_str())
                .or_default()
                .push(f.rel.as_str());
        }
    }
    let mut out = Inferred::default();
    for f in found {
        out.stages.insert(f.rel.clone(), stage_of(f));
        if let Kind::Pulumi { name, .. } = &f.kind {
            references_of(f, name, &by_name, &mut out);
        }
    }
    promote_readers_of_kubernetes(&mut out);
    out
}

/// Whether the project uses the Kubernetes provider: an SDK import in its code, or a
/// `kubernetes:` resource type in its YAML program.
fn stage_of(f: &Found) -> Stage {
    if f.kind == Kind::Command {
        return Stage::Infrastructure;
    }
    let uses = references::source_files(&f.dir).iter().any(|rel| {
        let text = std::fs::read_to_string(f.dir.join(rel)).unwrap_or_default();
        let yaml = rel.extension().is_some_and(|e| e == "yaml" || e == "yml");
        if yaml {
            text.lines().any(|l| {
                l.trim_start()
                    .strip_prefix("type:")
                    .map(|t| t.trim().trim_start_matches(['"', '\'']))
                    .is_some_and(|t| t.starts_with("kubernetes:"))
            })
        } else {
            KUBERNETES_IMPORTS.iter().any(|i| text.contains(i))
        }
    });
    if uses {
        Stage::Kubernetes
    } else {
        Stage::Infrastructure
    }
}

/// The references of the Pulumi project `f` (named `own`): each an edge when its
/// project part names exactly one other found project, else an unknown.
fn references_of(f: &Found, own: &str, by_name: &BTreeMap<&str, Vec<&str>>, out: &mut Inferred) {
    for r in references::in_project(&f.dir, own) {
        let at = format!("{}/{}:{}", f.rel, r.file.display(), r.line);
        let why = match &r.project {
            None | Some(Part::Project) => continue,
            Some(Part::Literal(n)) if n == own => continue,
            Some(Part::Literal(n)) => match by_name.get(n.as_str()).map(Vec::as_slice) {
                Some([one]) => {
                    out.edges.push(Edge {
                        from: f.rel.clone(),
                        to: one.to_string(),
                        at,
                    });
                    continue;
                }
                Some(many) => format!(
                    "{} projects are named `{n}` ({})",
                    many.len(),
                    many.join(", ")
                ),
                None => format!("no project here is named `{n}`"),
            },
            Some(_) => "the project part of the name is computed".to_string(),
        };
        out.unknowns.push(Unknown {
            project: f.rel.clone(),
            at,
            name: r.name.clone(),
            why,
        });
    }
}

/// A project that reads a Kubernetes-stage project runs after it, so in that stage too
/// (the infrastructure stage runs first): moved until nothing moves.
fn promote_readers_of_kubernetes(out: &mut Inferred) {
    loop {
        let moved: Vec<String> = out
            .edges
            .iter()
            .filter(|e| {
                out.stages.get(&e.from) == Some(&Stage::Infrastructure)
                    && out.stages.get(&e.to) == Some(&Stage::Kubernetes)
            })
            .map(|e| e.from.clone())
            .collect();
        if moved.is_empty() {
            return;
        }
        for m in moved {
            out.stages.insert(m, Stage::Kubernetes);
        }
    }
}

/// The projects of `stage`, in an order that runs each after what it needs (ties by
/// folder); those in a cycle come last, in folder order.
pub fn ordered(found: &[Found], inferred: &Inferred, stage: Stage) -> Vec<String> {
    let members: Vec<&str> = found
        .iter()
        .map(|f| f.rel.as_str())
        .filter(|r| inferred.stages.get(*r) == Some(&stage))
        .collect();
    let mut done: Vec<String> = Vec::new();
    let mut left: Vec<&str> = members.clone();
    while !left.is_empty() {
        let ready = left.iter().position(|r| {
            inferred
                .needs_of(r)
                .iter()
                .all(|n| !members.contains(&n.as_str()) || done.contains(n))
        });
        match ready {
            Some(i) => done.push(left.remove(i).to_string()),
            None => {
                done.extend(left.drain(..).map(str::to_string));
            }
        }
    }
    done
}
