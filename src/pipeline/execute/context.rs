//! The steps' context (`run::step::Ctx`) a run builds from what `resolve` found: the
//! outputs each project must keep, what each reads, its upstreams, the mocks it may use.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::engine::Operation;
use crate::error::Result;
use crate::gates::contracts::Read;
use crate::plan::{NodeKind, Plan};
use crate::run::events::ChildEnv;
use crate::run::step::bundle::PlanBundle;
use crate::run::step::{Ctx, hooks};
use crate::secrets::Gathered;
use crate::secrets::redact::Redactor;
use crate::workspace::profile::Hook;
use crate::workspace::{Profile, Project, StackConfig};

use super::super::resolve::Resolved;
use super::inputs::Inputs;

/// What the run brings to its steps' context beside what `resolve` found.
pub(super) struct Given {
    pub run_id: String,
    /// The organization preflight found.
    pub org: Option<String>,
    pub stack_config: StackConfig,
    pub secrets: Gathered,
    pub verbose: bool,
    pub child_env: ChildEnv,
}

/// The context every step of the run reads; for `preview --save-plan`, the bundle's
/// folder is made ready here.
pub(super) fn build(r: &Resolved, given: Given, inputs: Inputs) -> Result<Ctx> {
    let op = r.req.op;
    let stack = r.stack().to_string();
    let preview = op == Operation::Preview;
    // The stack references of the programs: what a preview cannot project, and who
    // reads whose outputs (not needed by a run that judges nothing).
    let found = if preview || r.plan.nodes.iter().any(|n| !n.rules.is_empty()) {
        references(r)
    } else {
        BTreeMap::new()
    };
    Ok(Ctx {
        root: r.ws.root.clone(),
        env: crate::pipeline::env::child_env(&r.ws, &stack, &r.profile, given.org.as_deref()),
        state_dir: r.ws.state_dir(&stack),
        stack,
        provider: r.profile.name.clone(),
        op,
        plan: inputs
            .changed
            .plan
            .map_or_else(|| Arc::clone(&r.plan), Arc::new),
        stack_config: given.stack_config,
        run_id: given.run_id,
        redactor: std::sync::RwLock::new(Redactor::new(given.secrets.redact)),
        secrets: given.secrets.values,
        profile_secret_keys: r.profile.secrets.iter().map(|s| s.key.clone()).collect(),
        needed: needed_outputs(&r.profile),
        fingerprints: inputs.fingerprints,
        fingerprint_salt: inputs.fingerprint_salt,
        secret_key: inputs.secret_key,
        secret_name: r.profile.secret_name.clone(),
        cluster: r.profile.cluster_source(),
        verbose: given.verbose,
        projects: projects(&r.full),
        upstreams: upstreams(&r.full),
        refresh: r.req.preview.refresh,
        last_outputs: inputs.last_outputs,
        conditional: inputs.changed.conditional,
        force_conflicts: r.req.force_conflicts,
        bundle: bundle(r)?,
        reads_backend: if preview {
            reads_backend(r, &found)
        } else {
            BTreeMap::new()
        },
        readers: if preview || r.plan.nodes.iter().any(|n| !n.rules.is_empty()) {
            readers(r, &found)
        } else {
            BTreeMap::new()
        },
        // Only a preview projects inputs (`run::step::projection`).
        declared_needs: if preview {
            declared_needs(&r.profile)
        } else {
            BTreeMap::new()
        },
        mocks: mocks(&r.profile, op),
        child_env: given.child_env,
        backends: r.backends.clone(),
        stack_names: r
            .profile
            .entries
            .iter()
            .filter(|e| e.stack.is_some())
            .map(|e| (e.path.clone(), e.stack_name(r.stack())))
            .collect(),
        shared: match crate::engine::pulumi::shared_where(&r.shared_env()) {
            Ok((crate::backend::Where::S3(b), _)) => Some(b),
            _ => None,
        },
    })
}

/// Every project of the profile, by path.
fn projects(full: &Plan) -> BTreeMap<String, Arc<Project>> {
    full.nodes
        .iter()
        .filter_map(|n| n.project.as_ref().map(|p| (n.path.clone(), Arc::clone(p))))
        .collect()
}

/// The projects each project needs directly (built-in steps left out).
fn upstreams(full: &Plan) -> BTreeMap<String, Vec<String>> {
    full.nodes
        .iter()
        .map(|n| {
            let ups = n
                .needs
                .iter()
                .map(|&j| &full.nodes[j])
                .filter(|u| u.kind != NodeKind::Builtin)
                .map(|u| u.path.clone())
                .collect();
            (n.path.clone(), ups)
        })
        .collect()
}

/// The plan bundle `preview --save-plan` writes (its folder made ready) or `up --plan`
/// applies.
fn bundle(r: &Resolved) -> Result<Option<PlanBundle>> {
    Ok(match (&r.req.preview.save_plan, &r.req.plan, &r.bundle) {
        (Some(dir), _, _) if r.req.op == Operation::Preview => {
            crate::bundle::prepare_dir(dir)?;
            Some(PlanBundle::Save { dir: dir.clone() })
        }
        (_, Some(dir), Some(m)) => Some(PlanBundle::Apply {
            dir: dir.clone(),
            manifest: Box::new(m.clone()),
            unbound_blocked: r.req.unbound_blocked,
        }),
        _ => None,
    })
}

/// The `mock_outputs:` an operation may use, by the project they stand in for.
fn mocks(profile: &Profile, op: Operation) -> BTreeMap<String, Map<String, Value>> {
    profile
        .entries
        .iter()
        .filter(|e| !e.mock_outputs.is_empty() && e.mocks_serve(op.as_str()))
        .map(|e| {
            let m = (*e.mock_outputs).clone().into_iter().collect();
            (e.path.clone(), m)
        })
        .collect()
}

/// The needs each entry declares: its `needs:`, else the entry before it.
fn declared_needs(profile: &Profile) -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let mut previous: Option<&str> = None;
    for e in &profile.entries {
        let needs = match &e.needs {
            Some(n) => n.iter().cloned().collect(),
            None => previous.into_iter().map(String::from).collect(),
        };
        out.insert(e.path.clone(), needs);
        previous = Some(&e.path);
    }
    out
}

/// The stack references of every Pulumi project of the profile, by project path.
fn references(r: &Resolved) -> BTreeMap<String, Vec<crate::plan::references::Found>> {
    let shared = r.ws.stack_config_path(r.stack());
    let at = crate::plan::references::Context {
        root: &r.ws.root,
        stack: Some(r.stack()),
        shared: Some(&shared),
    };
    crate::plan::references::of_plan(&r.full, &at)
}

/// What each Pulumi project reads through StackReferences (`found`): the projects
/// named, or `None` when a name cannot be read (see [`Ctx::reads_backend`]).
fn reads_backend(
    r: &Resolved,
    found: &BTreeMap<String, Vec<crate::plan::references::Found>>,
) -> BTreeMap<String, Option<BTreeSet<String>>> {
    found
        .iter()
        .filter(|(_, refs)| !refs.is_empty())
        .map(|(path, refs)| {
            let reads = r.profile.entry(path).and_then(|e| e.reads.as_ref());
            let targets = crate::plan::references::read_targets(refs, reads);
            (path.clone(), targets)
        })
        .collect()
}

/// Outputs that dependents (`inputs:`) or the project's own hooks read.
pub fn needed_outputs(profile: &Profile) -> BTreeMap<String, Vec<String>> {
    let mut needed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in &profile.entries {
        for i in &e.inputs {
            needed
                .entry(i.project.clone())
                .or_default()
                .push(i.output.clone());
        }
        for h in &e.on_success {
            let names: Vec<String> = match h {
                Hook::Kubeconfig(k) => vec![k.output.clone()],
                Hook::Run(cmd) => hooks::outputs_named(cmd).map(String::from).collect(),
            };
            needed.entry(e.path.clone()).or_default().extend(names);
        }
    }
    for v in needed.values_mut() {
        v.sort();
        v.dedup();
    }
    needed
}

/// Who reads each project's outputs, by the project read: each entry's `inputs:` (where
/// the profile writes it) and each output a YAML program reads through a StackReference
/// to a project of the profile (`found`: where the program reads it).
fn readers(
    r: &Resolved,
    found: &BTreeMap<String, Vec<crate::plan::references::Found>>,
) -> BTreeMap<String, Vec<Read>> {
    let root = |p: &std::path::Path| {
        p.strip_prefix(&r.ws.root)
            .unwrap_or(p)
            .display()
            .to_string()
    };
    let mut out: BTreeMap<String, Vec<Read>> = BTreeMap::new();
    // Each profile file read and indexed once (an estate's entries share a few files).
    let mut files: BTreeMap<&std::path::Path, ProfileText> = BTreeMap::new();
    for e in r.profile.entries.iter().filter(|e| !e.inputs.is_empty()) {
        let text = files
            .entry(e.file.as_path())
            .or_insert_with(|| ProfileText::read(&e.file));
        for i in &e.inputs {
            let at = match text.input_line(&e.path, &format!("{}:{}", i.project, i.output)) {
                Some(line) => format!("{}:{line}", root(&e.file)),
                None => root(&e.file),
            };
            out.entry(i.project.clone()).or_default().push(Read {
                reader: e.path.clone(),
                output: i.output.clone(),
                at,
            });
        }
    }
    for (reader, refs) in found {
        let Some(dir) = r
            .full
            .nodes
            .iter()
            .find(|n| &n.path == reader)
            .and_then(|n| n.project.as_ref())
            .map(|p| root(&p.dir))
        else {
            continue;
        };
        for f in refs {
            let Some(target) = &f.target else { continue };
            for (output, line) in &f.reference.outputs {
                out.entry(target.clone()).or_default().push(Read {
                    reader: reader.clone(),
                    output: output.clone(),
                    at: format!("{dir}/{}:{line}", f.reference.file.display()),
                });
            }
        }
    }
    for reads in out.values_mut() {
        reads.sort();
        reads.dedup();
    }
    out
}

/// A profile file's lines, and where each entry's `path:` is written.
struct ProfileText {
    lines: Vec<String>,
    entries: BTreeMap<String, usize>,
}

impl ProfileText {
    fn read(file: &std::path::Path) -> ProfileText {
        let lines: Vec<String> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(String::from)
            .collect();
        let mut entries = BTreeMap::new();
        for (i, l) in lines.iter().enumerate() {
            let l = l.trim_start().trim_start_matches("- ").trim_start();
            if let Some(path) = l.strip_prefix("path: ") {
                entries.entry(path.trim().to_string()).or_insert(i);
            }
        }
        ProfileText { lines, entries }
    }

    /// The line (1-based) where entry `path` takes `source` (`project:output`) as an
    /// input: the first line naming it after the entry's `path:`, before the next entry.
    fn input_line(&self, path: &str, source: &str) -> Option<usize> {
        let start = *self.entries.get(path)?;
        self.lines[start..]
            .iter()
            .enumerate()
            .take_while(|(k, l)| *k == 0 || !l.trim_start().starts_with("- path: "))
            .find(|(_, l)| l.contains(source))
            .map(|(k, _)| start + k + 1)
    }
}
