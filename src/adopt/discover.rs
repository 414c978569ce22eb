//! Finding the projects of an existing repository: every folder with a `Pulumi.yaml`
//! (or `.yml`) or a `Strata.yaml`, at any depth, outside dependency caches, virtual
//! environments, VCS data and build output.

use std::path::{Path, PathBuf};

/// Folders never entered: dependency caches, virtual environments, VCS data, build
/// output and strata's own state. A folder holding `pyvenv.cfg` (a virtualenv of any
/// name) and any hidden folder are skipped too.
pub const SKIP: &[&str] = &[
    ".git",
    "node_modules",
    "venv",
    ".venv",
    "__pycache__",
    "target",
    "bin",
    "dist",
    "build",
    "vendor",
    ".strata",
];

/// How deep the walk goes below the root.
const MAX_DEPTH: usize = 16;

/// What runs a found project.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// A Pulumi project: its `name:` and its `runtime:` (`python`, `nodejs`, `go`, `yaml`).
    Pulumi { name: String, runtime: String },
    /// A command project (`Strata.yaml`).
    Command,
}

/// A project found in the repository.
#[derive(Debug, Clone)]
pub struct Found {
    /// Its folder from the root, `/`-separated (`infra/aws/vpc`).
    pub rel: String,
    pub dir: PathBuf,
    pub kind: Kind,
    /// The folder its stack configs (`Pulumi.<stack>.yaml`) are in: its own, or the
    /// `config:` folder its `Pulumi.yaml` names.
    pub config_dir: PathBuf,
    /// Its `backend.url`, when its `Pulumi.yaml` names one.
    pub backend: Option<String>,
}

impl Found {
    pub fn name(&self) -> &str {
        match &self.kind {
            Kind::Pulumi { name, .. } => name,
            Kind::Command => self.rel.rsplit('/').next().unwrap_or(&self.rel),
        }
    }
}

/// Every project under `root`, sorted by folder; a `Pulumi.yaml` that cannot be read is
/// a problem (its file and why), not a project.
pub fn discover(root: &Path) -> (Vec<Found>, Vec<String>) {
    let mut found = Vec::new();
    let mut problems = Vec::new();
    walk(root, root, 0, &mut found, &mut problems);
    found.sort_by(|a, b| a.rel.cmp(&b.rel));
    (found, problems)
}

fn walk(root: &Path, dir: &Path, depth: usize, out: &mut Vec<Found>, problems: &mut Vec<String>) {
    if depth > MAX_DEPTH || dir.join("pyvenv.cfg").is_file() {
        return;
    }
    if let Some(p) = project_at(root, dir, problems) {
        out.push(p);
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut subdirs: Vec<PathBuf> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            !name.starts_with('.') && !SKIP.contains(&name.as_str())
        })
        .map(|e| e.path())
        .collect();
    subdirs.sort();
    for d in subdirs {
        walk(root, &d, depth + 1, out, problems);
    }
}

/// The project in `dir`, if it holds one.
fn project_at(root: &Path, dir: &Path, problems: &mut Vec<String>) -> Option<Found> {
    let rel = relative(root, dir);
    let pulumi = ["Pulumi.yaml", "Pulumi.yml"]
        .iter()
        .map(|f| dir.join(f))
        .find(|f| f.is_file());
    if let Some(file) = pulumi {
        return match crate::workspace::project::read_pulumi_yaml(&file) {
            Ok(meta) => Some(Found {
                rel,
                dir: dir.to_path_buf(),
                config_dir: meta.config_dir_in(dir),
                kind: Kind::Pulumi {
                    name: meta.name,
                    runtime: meta.runtime,
                },
                backend: meta.backend_url,
            }),
            Err(e) => {
                problems.push(e.message);
                None
            }
        };
    }
    dir.join("Strata.yaml").is_file().then(|| Found {
        rel,
        dir: dir.to_path_buf(),
        kind: Kind::Command,
        config_dir: dir.to_path_buf(),
        backend: None,
    })
}

/// `dir` from `root`, `/`-separated; `.` for the root itself.
pub fn relative(root: &Path, dir: &Path) -> String {
    let rel = dir.strip_prefix(root).unwrap_or(dir);
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.is_empty() {
        ".".into()
    } else {
        parts.join("/")
    }
}

/// The folder, from the root, that holds every project: the longest common parent
/// folder of their folders (`.` when they share none).
pub fn common_folder(found: &[Found]) -> String {
    let parents: Vec<Vec<&str>> = found
        .iter()
        .map(|f| {
            let mut parts: Vec<&str> = f.rel.split('/').filter(|p| *p != ".").collect();
            parts.pop();
            parts
        })
        .collect();
    let Some(first) = parents.first() else {
        return ".".into();
    };
    let mut len = first.len();
    for p in &parents[1..] {
        len = len.min(first.iter().zip(p).take_while(|(a, b)| a == b).count());
    }
    if len == 0 {
        ".".into()
    } else {
        first[..len].join("/")
    }
}

/// `rel` (from the root) relative to `folder` (from the root, `.` the root itself).
pub fn under(folder: &str, rel: &str) -> String {
    if folder == "." {
        rel.to_string()
    } else {
        rel.strip_prefix(folder)
            .map(|r| r.trim_start_matches('/').to_string())
            .unwrap_or_else(|| rel.to_string())
    }
}
