//! Orphans: projects an `up` of the stack deployed that are no longer in the profile.
//! Every `up` records the profile's whole graph in the journal ([`known_graph`]); a
//! project that graph knew, whose last success was an `up` (no `destroy` since) and that
//! the profile no longer has, is an orphan ([`find`]), unless the backend shows its stack
//! empty ([`Backend::look`]). Where its program is now: [`program`].

pub mod program;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde_json::{Map, Value};

use crate::engine::{Job, Operation};
use crate::plan::{NodeKind, NodeStage, Plan};
use crate::state::journal::{self, KnownProject, Record};
use crate::util::slug;

/// A project removed from the profile whose resources may still exist.
#[derive(Debug, Clone, PartialEq)]
pub struct Orphan {
    /// As the last `up` that had it in its profile knew it.
    pub known: KnownProject,
    /// When its last successful `up` ended.
    pub deployed_at: String,
    /// The projects that needed it in that graph.
    pub needed_by: Vec<String>,
    /// Resources of its stack in the backend: `None` when strata cannot read them (a
    /// command project, or a backend strata does not read).
    pub resources: Option<usize>,
    /// Its last outputs (secrets masked), where strata can read them.
    pub outputs: Option<Map<String, Value>>,
}

/// The projects of `plan` (not the built-in step), as the journal keeps them: folders
/// relative to `root`, needs by path.
pub fn known_graph(plan: &Plan, root: &Path) -> Vec<KnownProject> {
    plan.nodes
        .iter()
        .filter(|n| n.kind != NodeKind::Builtin)
        .map(|n| KnownProject {
            project: n.path.clone(),
            dir: n
                .project
                .as_ref()
                .map(|p| relative_dir(&p.dir, root))
                .unwrap_or_default(),
            kind: match n.kind {
                NodeKind::Command => "command",
                _ => "pulumi",
            }
            .into(),
            name: n.name.clone(),
            stage: match n.stage {
                NodeStage::Kubernetes => "kubernetes",
                _ => "infrastructure",
            }
            .into(),
            needs: n
                .needs
                .iter()
                .map(|&j| &plan.nodes[j])
                .filter(|d| d.kind != NodeKind::Builtin)
                .map(|d| d.path.clone())
                .collect(),
        })
        .collect()
}

fn relative_dir(dir: &Path, root: &Path) -> String {
    let rel = dir.strip_prefix(root).unwrap_or(dir);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
}

/// What the profile runs now: its entries' paths, and what each manages, which a past
/// path may have managed under another name: a Pulumi project's stack (its project name;
/// the stack name is the run's), a command project's name, a folder.
#[derive(Debug, Default)]
pub struct Current {
    paths: BTreeSet<String>,
    /// `(kind, name)`: `("pulumi", "proj-db")`, `("command", "seed")`.
    managed: BTreeSet<(String, String)>,
    dirs: BTreeSet<String>,
}

impl Current {
    /// What the projects of `plan` run (folders relative to `root`).
    pub fn of(plan: &Plan, root: &Path) -> Current {
        let mut c = Current::default();
        for k in known_graph(plan, root) {
            c.paths.insert(k.project.clone());
            c.managed.insert((k.kind.clone(), k.name.clone()));
            c.dirs.insert(k.dir);
        }
        c
    }

    /// Whether a project the journal knew is run by a current entry: its path, or what
    /// it managed (a renamed folder's entry runs the same Pulumi project, so the same
    /// stack; two entries sharing one), or its folder. Such a project is never an orphan.
    pub fn uses(&self, k: &KnownProject) -> bool {
        self.paths.contains(&k.project)
            || (!k.name.is_empty() && self.managed.contains(&(k.kind.clone(), k.name.clone())))
            || (!k.dir.is_empty() && self.dirs.contains(&k.dir))
    }
}

/// The orphans the journal's `records` show, given what the profile runs now.
/// A project deployed before strata kept graphs is known by its path alone: its folder
/// is taken to be `<projects_dir>/<path>`, its needs unknown.
pub fn find(records: &[Record], current: &Current, projects_dir: &str) -> Vec<Orphan> {
    let mut finder = Finder::new(current, projects_dir);
    for r in records {
        finder.note(r);
    }
    finder.finish()
}

/// [`find`], fed one record at a time (a journal streamed, never held whole): keeps only
/// what concerns the projects the profile no longer has, so a run whose profile still has
/// every project it deployed holds next to nothing, however large its estate.
pub struct Finder<'a> {
    current: &'a Current,
    projects_dir: &'a str,
    /// Each project gone from the profile whose last success is an `up`: when it ended.
    deployed: BTreeMap<String, String>,
    /// The last graph each project gone from the profile appears in: the project as that
    /// graph knew it, and who needed it there.
    known: BTreeMap<String, (KnownProject, Vec<String>)>,
}

impl<'a> Finder<'a> {
    pub fn new(current: &'a Current, projects_dir: &'a str) -> Finder<'a> {
        Finder {
            current,
            projects_dir,
            deployed: BTreeMap::new(),
            known: BTreeMap::new(),
        }
    }

    /// Takes in the next record, in journal order.
    pub fn note(&mut self, r: &Record) {
        match r {
            Record::Run { graph, .. } => self.note_graph(graph),
            Record::Project {
                project,
                operation,
                ended_at,
                ..
            } if journal::is_success(r) && !self.current.paths.contains(project) => {
                if operation == "up" {
                    self.deployed.insert(project.clone(), ended_at.clone());
                } else {
                    self.deployed.remove(project);
                }
            }
            _ => {}
        }
    }

    fn note_graph(&mut self, graph: &[KnownProject]) {
        let gone = |p: &str| !self.current.paths.contains(p);
        if !graph.iter().any(|k| gone(&k.project)) {
            return;
        }
        let mut needed_by: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for k in graph {
            for n in k.needs.iter().filter(|n| gone(n)) {
                let by = needed_by.entry(n.as_str()).or_default();
                if by.last() != Some(&k.project) {
                    by.push(k.project.clone());
                }
            }
        }
        for k in graph.iter().filter(|k| gone(&k.project)) {
            let by = needed_by
                .get(k.project.as_str())
                .cloned()
                .unwrap_or_default();
            self.known.insert(k.project.clone(), (k.clone(), by));
        }
    }

    /// The orphans the records noted show.
    pub fn finish(mut self) -> Vec<Orphan> {
        let deployed = std::mem::take(&mut self.deployed);
        deployed
            .into_iter()
            .map(|(path, deployed_at)| {
                let (known, needed_by) = self
                    .known
                    .remove(&path)
                    .unwrap_or_else(|| (unknown(&path, self.projects_dir), Vec::new()));
                Orphan {
                    known,
                    deployed_at,
                    needed_by,
                    resources: None,
                    outputs: None,
                }
            })
            .filter(|o| !self.current.uses(&o.known))
            .collect()
    }
}

fn unknown(path: &str, projects_dir: &str) -> KnownProject {
    let dir = match projects_dir {
        "." | "" => path.to_string(),
        d => format!("{d}/{path}"),
    };
    KnownProject {
        project: path.to_string(),
        dir,
        kind: String::new(),
        name: String::new(),
        stage: "infrastructure".into(),
        needs: Vec::new(),
    }
}

/// Where the orphans' stacks and outputs are read: the backend of the run's environment.
pub struct Backend<'a> {
    /// The Pulumi environment (`PULUMI_BACKEND_URL` made absolute, credentials).
    pub env: &'a BTreeMap<String, String>,
    pub stack: &'a str,
    pub root: &'a Path,
    /// `.strata/<stack>/`: the command projects' recorded outputs.
    pub state_dir: &'a Path,
    /// The stack config file.
    pub config_file: &'a Path,
}

impl Backend<'_> {
    /// Reads each orphan's stack and outputs; drops those whose stack the backend shows
    /// empty or gone (destroyed outside strata: nothing is left to orphan).
    pub fn look(&self, orphans: Vec<Orphan>) -> Vec<Orphan> {
        orphans
            .into_iter()
            .filter_map(|mut o| {
                match o.known.kind.as_str() {
                    "command" => o.outputs = self.command_outputs(&o.known),
                    _ if !o.known.name.is_empty() => {
                        let job = self.job(&o.known);
                        let state = crate::engine::pulumi::checkpoint_resources_and_outputs(&job);
                        o.resources = state.as_ref().map(|(n, _)| *n);
                        o.outputs = state.and_then(|(_, outputs)| outputs);
                    }
                    _ => {}
                }
                (o.resources != Some(0)).then_some(o)
            })
            .collect()
    }

    fn command_outputs(&self, k: &KnownProject) -> Option<Map<String, Value>> {
        let f = self
            .state_dir
            .join("outputs")
            .join(format!("{}.json", slug(&k.project)));
        serde_json::from_str(&std::fs::read_to_string(f).ok()?).ok()
    }

    fn job(&self, k: &KnownProject) -> Job {
        Job {
            path: k.project.clone(),
            name: k.name.clone(),
            dir: self.root.join(&k.dir),
            op: Operation::Up,
            stack: self.stack.to_string(),
            env: self.env.clone(),
            config_file: self.config_file.to_path_buf(),
            inputs: Default::default(),
            needed_outputs: vec![],
            scratch_dir: self.state_dir.join("work").join(slug(&k.project)),
            secret_config: Default::default(),
            refresh: false,
            plan: None,
        }
    }
}

/// One line per orphan and an indented line for what it left and who needed it, for
/// `status`, `preview` and the warning of `up`.
pub fn describe(o: &Orphan) -> String {
    let mut out = format!(
        "{} ({}, deployed {})",
        o.known.project,
        if o.known.dir.is_empty() {
            "folder unknown"
        } else {
            &o.known.dir
        },
        if o.deployed_at.is_empty() {
            "at an unknown time"
        } else {
            &o.deployed_at
        }
    );
    if let Some(n) = o.resources {
        out.push_str(&format!(", {n} resource(s) in the backend"));
    }
    if !o.needed_by.is_empty() {
        out.push_str(&format!("; needed by {}", o.needed_by.join(", ")));
    }
    if let Some(outputs) = &o.outputs
        && !outputs.is_empty()
    {
        let shown: Vec<String> = outputs
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}={}", s.lines().next().unwrap_or("")),
                other => format!("{k}={other}"),
            })
            .collect();
        out.push_str(&format!("; outputs {}", shown.join(", ")));
    }
    out
}

/// The orphans as JSON (status's `orphans`, preview's notice event).
pub fn to_json(o: &Orphan) -> Value {
    serde_json::json!({
        "path": o.known.project,
        "dir": o.known.dir,
        "kind": o.known.kind,
        "deployed_at": o.deployed_at,
        "needed_by": o.needed_by,
        "resources": o.resources,
        "outputs": o.outputs,
    })
}

#[cfg(test)]
mod tests;
