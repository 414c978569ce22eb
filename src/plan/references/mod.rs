//! Stack references found in the code of each Pulumi project, and what they point at in
//! the plan: the model of a reference, the walk over a project's files, the resolution
//! against the plan. The scanners are `yaml` (Pulumi YAML) and `code` (Python,
//! TypeScript/JavaScript, Go).

mod code;
mod yaml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use code::in_code;
use yaml::in_yaml;

/// One part of a stack name (`org/project/stack`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "value")]
pub enum Part {
    /// Written out: `organization`, `vpc`, `dev`.
    Literal(String),
    /// The current organization (`${pulumi.organization}`, `get_organization()`,
    /// `$STRATA_ORG`).
    Org,
    /// The current project.
    Project,
    /// The current stack (`${pulumi.stack}`, `get_stack()`, `$STRATA_STACK`).
    Stack,
    /// Something the scanner cannot tell (a variable, a config value).
    Unknown,
}

/// A stack reference in a program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// The name as the scanner read it: `${org}/kubeconfig/${stack}`.
    pub name: String,
    /// `None` when the name has no organization part (`project/stack`, `stack`).
    pub org: Option<Part>,
    /// `None` for a bare stack name (a stack of the same project).
    pub project: Option<Part>,
    pub stack: Part,
    /// Where it is: the file (relative to the project folder) and its line (1-based).
    pub file: PathBuf,
    pub line: usize,
}

impl Reference {
    /// Whether the scanner could not tell which project's stack this reads: then the
    /// program may read any stack (a name in a variable, arguments built elsewhere).
    pub fn unreadable(&self) -> bool {
        self.project == Some(Part::Unknown)
    }
}

/// A piece of a name: text, or a placeholder.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Value(Part),
}

/// The pieces of a name, split at `/` into parts. A name made of one unknown part (a
/// variable, `f"{x}-net"`) may hold slashes, so it may name any project of any
/// organization: all its parts are unknown. So are the parts of a name of more than
/// three parts.
fn reference(pieces: &[Piece], file: &Path, line: usize) -> Reference {
    let unreadable = || Reference {
        name: "${?}".into(),
        org: Some(Part::Unknown),
        project: Some(Part::Unknown),
        stack: Part::Unknown,
        file: file.to_path_buf(),
        line,
    };
    let mut parts: Vec<Vec<Piece>> = vec![Vec::new()];
    for p in pieces {
        match p {
            Piece::Text(t) => {
                for (k, seg) in t.split('/').enumerate() {
                    if k > 0 {
                        parts.push(Vec::new());
                    }
                    if !seg.is_empty()
                        && let Some(last) = parts.last_mut()
                    {
                        last.push(Piece::Text(seg.to_string()));
                    }
                }
            }
            Piece::Value(_) => {
                if let Some(last) = parts.last_mut() {
                    last.push(p.clone());
                }
            }
        }
    }
    // A lone placeholder is that placeholder, text alone is literal, a mix is unknown.
    let to_part = |ps: &[Piece]| -> Part {
        match ps {
            [Piece::Value(v)] => v.clone(),
            all if all.iter().all(|p| matches!(p, Piece::Text(_))) => Part::Literal(
                all.iter()
                    .map(|p| match p {
                        Piece::Text(t) => t.as_str(),
                        Piece::Value(_) => "",
                    })
                    .collect(),
            ),
            _ => Part::Unknown,
        }
    };
    let parts: Vec<Part> = parts.iter().map(|p| to_part(p)).collect();
    let name = pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.clone(),
            Piece::Value(Part::Org) => "${org}".into(),
            Piece::Value(Part::Project) => "${project}".into(),
            Piece::Value(Part::Stack) => "${stack}".into(),
            Piece::Value(_) => "${?}".into(),
        })
        .collect::<String>();
    let (org, project, stack) = match parts.len() {
        1 if parts[0] == Part::Unknown => return unreadable(),
        1 => (None, None, parts[0].clone()),
        2 => (None, Some(parts[0].clone()), parts[1].clone()),
        3 => (
            Some(parts[0].clone()),
            Some(parts[1].clone()),
            parts[2].clone(),
        ),
        _ => return unreadable(),
    };
    Reference {
        name,
        org,
        project,
        stack,
        file: file.to_path_buf(),
        line,
    }
}

/// A reference of a project of the plan, and what it points at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    #[serde(flatten)]
    pub reference: Reference,
    /// The profile path of the referenced project, when its Pulumi name is one of the
    /// plan's projects.
    pub target: Option<String>,
}

/// The stack references of every Pulumi project of `plan`, by project path, each
/// resolved through the `name:` of the projects' `Pulumi.yaml`. References to the
/// project itself (a bare stack name, `${pulumi.project}`) are left out.
pub fn of_plan(plan: &super::Plan) -> BTreeMap<String, Vec<Found>> {
    let by_name: BTreeMap<&str, &str> = plan
        .nodes
        .iter()
        .filter(|n| n.kind == super::NodeKind::Pulumi)
        .map(|n| (n.name.as_str(), n.path.as_str()))
        .collect();
    let mut out = BTreeMap::new();
    for n in &plan.nodes {
        let Some(p) = n
            .project
            .as_ref()
            .filter(|_| n.kind == super::NodeKind::Pulumi)
        else {
            continue;
        };
        let found: Vec<Found> = in_project(&p.dir)
            .into_iter()
            .filter(|r| !matches!(r.project, None | Some(Part::Project)))
            .filter(|r| r.project != Some(Part::Literal(n.name.clone())))
            .map(|r| {
                let target = match &r.project {
                    Some(Part::Literal(name)) => by_name.get(name.as_str()).map(|p| p.to_string()),
                    _ => None,
                };
                Found {
                    reference: r,
                    target,
                }
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

/// Where each project has a reference the scanner cannot read: `file:line`, the file
/// relative to the project folder.
pub fn unreadable(found: &BTreeMap<String, Vec<Found>>) -> BTreeMap<String, Vec<String>> {
    per_project(found, |refs| {
        refs.iter()
            .filter(|f| f.reference.unreadable())
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

/// Folders never read, beyond those the fingerprint skips: build output and vendored code.
const MORE_SKIP_DIRS: &[&str] = &["dist", "build", "vendor"];

/// At most this many bytes of one source file are read.
const MAX_FILE: u64 = 2 * 1024 * 1024;

/// Every stack reference in the Pulumi project in `dir` (its `Pulumi.yaml` program and
/// its `.py`, `.ts`, `.js`, `.mjs`, `.go` files), in file order.
pub fn in_project(dir: &Path) -> Vec<Reference> {
    let mut out = Vec::new();
    for rel in source_files(dir) {
        let path = dir.join(&rel);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or("");
        match ext {
            "yaml" | "yml" => out.extend(in_yaml(&text, &rel)),
            _ => out.extend(in_code(&text, &rel)),
        }
    }
    out
}

/// The files of the Pulumi project in `dir` the scanner reads (its `Pulumi.yaml`
/// program and its code), relative to `dir`, sorted.
pub fn source_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect(dir, dir, 0, &mut files);
    files.sort();
    files
}

fn collect(root: &Path, dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 8 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            let skipped = crate::workspace::project::SKIP_DIRS.contains(&name.as_str())
                || MORE_SKIP_DIRS.contains(&name.as_str());
            if !skipped && !name.starts_with('.') {
                collect(root, &p, depth + 1, out);
            }
            continue;
        }
        if !ft.is_file() || e.metadata().map(|m| m.len() > MAX_FILE).unwrap_or(true) {
            continue;
        }
        let program =
            (name == "Pulumi.yaml" || name == "Pulumi.yml" || name == "Main.yaml") && depth == 0;
        let code = [".py", ".ts", ".js", ".mjs", ".go"]
            .iter()
            .any(|x| name.ends_with(x))
            && !name.ends_with(".d.ts");
        if program || code {
            out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
        }
    }
}

#[cfg(test)]
mod tests;
