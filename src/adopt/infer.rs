//! What strata can tell of the found projects without running them: the stage of each
//! (the Kubernetes provider in its code), its needs (the stack references in its code
//! that resolve to another found project: named outright, through a helper of the
//! repository, through config for each of its stack configs, or inferred when one
//! project alone fits a computed name), the references it cannot resolve (left for the
//! user, by file and line, with why), and the projects whose language it does not read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::discover::{Found, Kind};
use crate::plan::references::{self, Reference, Repo, Resolution, StackValues};
use crate::workspace::{StackConfig, Stage};

/// A need inferred from a stack reference: `from` reads `to`'s stack at `at` (file:line
/// from the root).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub at: String,
    /// Why `to` was inferred, when the name is computed and only `to` fits it; `None`
    /// when the name says `to`.
    pub inferred: Option<String>,
    /// The helper function the reference was made through (`lib/refs.py:3 stack_ref`).
    pub via: Option<String>,
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
    /// Projects whose code strata does not read (C#, F#, VB, Java): their folder and
    /// what (`runtime dotnet: C#`). Their references are not read.
    pub not_read: Vec<(String, String)>,
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
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for f in found {
        if let Kind::Pulumi { name, .. } = &f.kind {
            by_name.entry(name.clone()).or_default().push(f.rel.clone());
        }
    }
    let root = root_of(found);
    let repo = Repo::scan(&root);
    let mut out = Inferred::default();
    for f in found {
        out.stages.insert(f.rel.clone(), stage_of(f));
        if let Kind::Pulumi { name, .. } = &f.kind {
            let names = Names {
                own: name,
                by_name: &by_name,
                root: &root,
            };
            references_of(f, &names, &repo, &mut out);
            if let Some(n) = references::not_read(&f.dir) {
                out.not_read.push((f.rel.clone(), n.to_string()));
            }
        }
    }
    promote_readers_of_kubernetes(&mut out);
    out
}

/// The repository's root: the folder of a found project, less its path from the root.
fn root_of(found: &[Found]) -> PathBuf {
    let Some(f) = found.first() else {
        return PathBuf::new();
    };
    let depth = f.rel.split('/').filter(|p| *p != ".").count();
    let mut root = f.dir.clone();
    for _ in 0..depth {
        root.pop();
    }
    root
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

/// What a project's references are resolved among: its own name, the found projects
/// by name, the repository's root (for the shared stack configs).
struct Names<'a> {
    own: &'a str,
    by_name: &'a BTreeMap<String, Vec<String>>,
    root: &'a Path,
}

/// The references of the Pulumi project `f`: each an edge when it resolves to another
/// found project, else an unknown.
fn references_of(f: &Found, names: &Names, repo: &Repo, out: &mut Inferred) {
    let stacks: Vec<(String, StackValues)> = references::stacks_of(&f.dir)
        .into_iter()
        .map(|s| {
            let shared = StackConfig::path_for(names.root, &s);
            let values = StackValues::load(&f.dir, names.own, &s, Some(&shared));
            (s, values)
        })
        .collect();
    for r in repo.in_project(&f.dir, names.own) {
        let at = format!("{}/{}:{}", f.rel, r.file.display(), r.line);
        let (to, inferred) = match per_stack(&r, names, &stacks) {
            Resolution::SelfRef => continue,
            Resolution::Resolved { folder } => (folder, None),
            Resolution::Inferred { folder, why } => (folder, Some(why)),
            Resolution::Unresolved { why } => {
                let why = match &r.via {
                    Some(v) => format!("{why} (through {v})"),
                    None => why,
                };
                out.unknowns.push(Unknown {
                    project: f.rel.clone(),
                    at,
                    name: r.name.clone(),
                    why,
                });
                continue;
            }
        };
        out.edges.push(Edge {
            from: f.rel.clone(),
            to,
            at,
            inferred,
            via: r.via.clone(),
        });
    }
}

/// The resolution of `r` through each stack config that sets the config keys its name
/// reads: the one they agree on; unresolved, saying so, when they differ. A name that
/// reads no config, or that no stack config sets, resolves as it is.
fn per_stack(r: &Reference, names: &Names, stacks: &[(String, StackValues)]) -> Resolution {
    let resolve = |lookup: &dyn Fn(&str) -> Option<String>| {
        references::resolve(r, names.own, names.by_name, lookup)
    };
    let keys = r.config_keys();
    let per: Vec<(&str, Resolution)> = stacks
        .iter()
        .filter(|(_, v)| !keys.is_empty() && keys.iter().all(|k| v.get(k).is_some()))
        .map(|(s, v)| (s.as_str(), resolve(&|k| v.get(k))))
        .collect();
    let Some((_, first)) = per.first() else {
        return resolve(&|_| None);
    };
    if per.iter().all(|(_, x)| x == first) {
        return first.clone();
    }
    let each: Vec<String> = per
        .iter()
        .map(|(s, x)| format!("{s}: {}", x.folder().unwrap_or("none")))
        .collect();
    Resolution::Unresolved {
        why: format!(
            "config `{}` names another project in each stack ({})",
            keys.join("`, `"),
            each.join(", ")
        ),
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
