//! Which project a reference reads, shared by `strata init` (`adopt::infer`) and a run
//! (`of_plan`): its config values put in, its project part looked up among the
//! projects' Pulumi names. A literal name resolves to the one project of that name; a
//! pattern (`network-*`) to the one project whose name fits, marked inferred; anything
//! else is unresolved, with why.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::{Part, Reference, Repo, StackValues};

/// What a reference resolves to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind")]
pub enum Resolution {
    /// The folder of the project it reads.
    Resolved { folder: String },
    /// The folder of the one project whose name fits a computed name, and why.
    Inferred { folder: String, why: String },
    /// A stack of the project itself.
    #[serde(rename = "self")]
    SelfRef,
    /// No project, several, or a name that cannot be told: why.
    Unresolved { why: String },
}

impl Resolution {
    /// The folder it resolves to, inferred or not.
    pub fn folder(&self) -> Option<&str> {
        match self {
            Resolution::Resolved { folder } | Resolution::Inferred { folder, .. } => Some(folder),
            _ => None,
        }
    }
}

/// Resolves `r`, a reference of the project named `own`, among `projects` (Pulumi
/// name → the folders of the projects of that name), its config values from `config`
/// (`namespace:key` → value).
pub fn resolve(
    r: &Reference,
    own: &str,
    projects: &BTreeMap<String, Vec<String>>,
    config: &dyn Fn(&str) -> Option<String>,
) -> Resolution {
    let r = r.with_config(config);
    let unset = || {
        let keys = r.config_keys();
        match keys.as_slice() {
            [] => String::new(),
            ks => format!(" (config `{}` has no value here)", ks.join("`, `")),
        }
    };
    match &r.project {
        None | Some(Part::Project) => Resolution::SelfRef,
        Some(Part::Literal(n)) if n == own => Resolution::SelfRef,
        Some(Part::Literal(n)) => by_name(n, projects),
        Some(Part::Pattern(p)) => by_pattern(p, own, projects, &unset()),
        Some(Part::Config(_)) => Resolution::Unresolved {
            why: format!("the name is read from config{}", unset()),
        },
        Some(_) => Resolution::Unresolved {
            why: format!("the project part of the name is computed{}", unset()),
        },
    }
}

/// The project named `n`.
fn by_name(n: &str, projects: &BTreeMap<String, Vec<String>>) -> Resolution {
    match projects.get(n).map(Vec::as_slice) {
        Some([one]) => Resolution::Resolved {
            folder: one.clone(),
        },
        Some(many) if !many.is_empty() => Resolution::Unresolved {
            why: format!(
                "{} projects are named `{n}` ({})",
                many.len(),
                many.join(", ")
            ),
        },
        _ => Resolution::Unresolved {
            why: format!("no project here is named `{n}`"),
        },
    }
}

/// Whether `name` fits `pattern` (text around one `*`, which stands for one or more
/// characters).
fn fits(pattern: &str, name: &str) -> bool {
    let Some((head, tail)) = pattern.split_once('*') else {
        return pattern == name;
    };
    name.len() > head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
}

/// The one project whose name fits `pattern`.
fn by_pattern(
    pattern: &str,
    own: &str,
    projects: &BTreeMap<String, Vec<String>>,
    unset: &str,
) -> Resolution {
    let fitting: Vec<(&String, &Vec<String>)> =
        projects.iter().filter(|(n, _)| fits(pattern, n)).collect();
    match fitting.as_slice() {
        [(n, _)] if n.as_str() == own => Resolution::SelfRef,
        [(n, folders)] if folders.len() == 1 => Resolution::Inferred {
            folder: folders[0].clone(),
            why: format!("`{pattern}` fits only project `{n}`{unset}"),
        },
        [] => Resolution::Unresolved {
            why: format!("no project's name fits `{pattern}`{unset}"),
        },
        many => {
            let names: Vec<&str> = many.iter().map(|(n, _)| n.as_str()).collect();
            Resolution::Unresolved {
                why: format!(
                    "`{pattern}` fits {} ({}){unset}",
                    names.len(),
                    names.join(", ")
                ),
            }
        }
    }
}

/// A reference of a project of the plan, and what it points at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    /// The reference, its config values put in.
    #[serde(flatten)]
    pub reference: Reference,
    /// The profile path of the referenced project, when the reference resolves to one
    /// of the plan's projects (inferred or not).
    pub target: Option<String>,
    pub resolution: Resolution,
}

impl Found {
    /// Whether the program may read any stack: the reference resolves to no project,
    /// and its project part is no name written out (a name no project of the plan has
    /// reads none of them).
    pub fn unreadable(&self) -> bool {
        matches!(self.resolution, Resolution::Unresolved { .. })
            && !matches!(self.reference.project, Some(Part::Literal(_)))
    }
}

/// Where a run reads references: the workspace's root (the repository its helpers and
/// constants are read from), its stack (config-named references are resolved with
/// that stack's config; left unresolved without one), and the shared stack config
/// file.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub root: &'a Path,
    pub stack: Option<&'a str>,
    pub shared: Option<&'a Path>,
}

/// The stack references of every Pulumi project of `plan`, by project path, each
/// resolved among the plan's projects by their Pulumi name. References to the project
/// itself (a bare stack name, `${pulumi.project}`) are left out.
pub fn of_plan(plan: &crate::plan::Plan, at: &Context) -> BTreeMap<String, Vec<Found>> {
    use crate::plan::NodeKind;
    let pulumi = || plan.nodes.iter().filter(|n| n.kind == NodeKind::Pulumi);
    let mut by_name: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for n in pulumi() {
        by_name
            .entry(n.name.clone())
            .or_default()
            .push(n.path.clone());
    }
    let repo = Repo::scan(at.root);
    let mut out = BTreeMap::new();
    for n in pulumi() {
        let Some(p) = n.project.as_ref() else {
            continue;
        };
        let values = at
            .stack
            .map(|s| StackValues::load(&p.dir, &n.name, s, at.shared))
            .unwrap_or_default();
        let lookup = |k: &str| values.get(k);
        let found: Vec<Found> = repo
            .in_project(&p.dir, &n.name)
            .into_iter()
            .filter_map(|r| {
                let resolution = resolve(&r, &n.name, &by_name, &lookup);
                (resolution != Resolution::SelfRef).then(|| Found {
                    reference: r.with_config(&lookup),
                    target: resolution.folder().map(str::to_string),
                    resolution,
                })
            })
            .collect();
        if !found.is_empty() {
            out.insert(n.path.clone(), found);
        }
    }
    out
}

/// The referenced profile paths of each project, sorted and deduplicated.
pub fn targets(found: &BTreeMap<String, Vec<Found>>) -> BTreeMap<String, Vec<String>> {
    per_project(found, |refs| {
        let mut t: Vec<String> = refs.iter().filter_map(|f| f.target.clone()).collect();
        t.sort();
        t.dedup();
        t
    })
}

/// Where each project has a reference that may read any stack: `file:line`, the file
/// relative to the project folder.
pub fn unreadable(found: &BTreeMap<String, Vec<Found>>) -> BTreeMap<String, Vec<String>> {
    per_project(found, |refs| {
        refs.iter()
            .filter(|f| f.unreadable())
            .map(|f| format!("{}:{}", f.reference.file.display(), f.reference.line))
            .collect()
    })
}

/// `of` each project's references, the projects it gives nothing left out.
fn per_project(
    found: &BTreeMap<String, Vec<Found>>,
    of: impl Fn(&[Found]) -> Vec<String>,
) -> BTreeMap<String, Vec<String>> {
    found
        .iter()
        .map(|(path, refs)| (path.clone(), of(refs)))
        .filter(|(_, listed)| !listed.is_empty())
        .collect()
}
