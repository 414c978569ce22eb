//! Resolve: read the env file, the stack config, the profile and the project folders,
//! build the graph, find the stack's orphans and select what runs. Reads only; asks
//! nothing and writes nothing in the workspace (`destroy --orphans` copies a past
//! revision's programs into a private temporary folder, see `state::orphans::program`).

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use crate::engine::Operation;
use crate::error::{Error, Result};
use crate::plan::{Plan, select};
use crate::settings::Settings;
use crate::state::journal::{Journal, Record};
use crate::util::display_path;
use crate::workspace::profile::{ConfigItem, SecretItem};
use crate::workspace::{self, Profile, StackConfig, Target, Workspace};

use super::Request;

/// Everything a run plans with, as found on disk.
pub struct Resolved {
    pub ws: Workspace,
    pub req: Request,
    /// `None` on a first run without a stack name anywhere: `ask` asks for it.
    pub stack: Option<String>,
    /// The stack config as it is on disk (`None`: not created yet).
    pub stack_config: Option<StackConfig>,
    /// Shared with the thread that fingerprints the projects (see `execute`).
    pub profile: std::sync::Arc<Profile>,
    /// The whole graph of the profile.
    /// (Shared, like `plan`, with the run's steps and its fingerprinting thread.)
    pub full: std::sync::Arc<Plan>,
    /// What this run executes (selection, `--resume` applied; reversed for destroy).
    pub plan: std::sync::Arc<Plan>,
    /// Set when there is nothing to do, with the reason (a destroy of a stack that was
    /// never brought up).
    pub nothing_to_do: Option<String>,
    /// `up --plan DIR`: the bundle's manifest (the plan is its projects).
    pub bundle: Option<crate::bundle::Manifest>,
    /// `destroy --orphans`: the copies of past revisions some orphans' programs were
    /// taken from; they go when the run ends.
    pub programs: Option<crate::state::orphans::program::History>,
    /// The stack's orphans, found once for the run: for `up` and `preview` those this
    /// checkout's journal knows of (what they warn of and list), for `destroy --orphans`
    /// also those other machines recorded (what it destroys); none for other runs.
    pub orphans: Vec<crate::state::orphans::Orphan>,
    /// The Pulumi backend of each project, as Pulumi chooses it.
    pub backends: crate::workspace::backend::Backends,
}

/// Opens the workspace named by `--root`/`STRATA_ROOT`, else the nearest ancestor with
/// a `providers/` folder.
pub fn open_workspace(target: &Target) -> Result<Workspace> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::failed(format!("cannot read the current directory: {e}")))?;
    let root = workspace::find_root(target.root.as_deref(), &cwd)?;
    let process_env = std::env::vars().collect();
    Workspace::open(root, process_env)
}

/// The profile to use ([`Workspace::select_provider`]), the plan of its projects, and
/// each Pulumi project's backend: what a run and every read-only command plan with.
pub fn planned(
    ws: &Workspace,
    provider: Option<&str>,
    stack: Option<&str>,
    stack_config: Option<&StackConfig>,
) -> Result<(Profile, Plan, crate::workspace::backend::Backends)> {
    let provider = ws.select_provider(provider, stack, stack_config)?;
    let profile = ws.profile(&provider)?;
    let projects = ws.projects(&profile)?;
    let backends = super::env::backends(ws, &projects);
    let plan = crate::plan::build(&profile, projects)?;
    Ok((profile, plan, backends))
}

/// Resolves a run for `stack` (or the stack the flags and files name).
pub fn resolve(
    target: &Target,
    settings: &Settings,
    req: &Request,
    stack: Option<String>,
) -> Result<Resolved> {
    let ws = open_workspace(target)?;
    let stack = match stack {
        Some(s) => Some(s),
        None => ws.resolve_stack(target.stack.as_deref())?,
    };
    if stack.is_none() && !settings.interactive {
        return Err(workspace::no_stack_error(&ws));
    }
    let stack_config = match &stack {
        Some(s) => StackConfig::load(&ws.stack_config_path(s))?,
        None => None,
    };
    let (profile, full, backends) = planned(
        &ws,
        target.provider.as_deref(),
        stack.as_deref(),
        stack_config.as_ref(),
    )?;
    let super::orphans::OfRun {
        profile,
        full,
        orphans,
        programs,
    } = super::orphans::of_run(&ws, profile, full, stack.as_deref(), req)?;
    let full = Arc::new(full);
    // The selector reads the forward graph; destroy runs what it picks in reverse.
    let base = if req.op == Operation::Destroy {
        Cow::Owned(full.reversed())
    } else {
        Cow::Borrowed(full.as_ref())
    };
    let (mut plan, mut nothing_to_do) = selected(&ws, &profile, &full, &base, req)?;
    if req.orphans && stack.is_some() && plan.nodes.is_empty() {
        nothing_to_do = Some(format!(
            "stack `{}` has no orphans: every project an `up` deployed on it is still in profile `{}` (or was destroyed).",
            stack.as_deref().unwrap_or_default(),
            profile.name
        ));
    }
    let bundle = match &req.plan {
        Some(dir) => {
            let m = crate::bundle::check::open(&ws, dir, stack.as_deref())?;
            let keep: Vec<bool> = base
                .nodes
                .iter()
                .map(|n| m.steps.contains_key(&n.path))
                .collect();
            plan = Arc::new(base.subplan(&keep));
            Some(m)
        }
        None => None,
    };
    if req.resume {
        plan = Arc::new(resumed(&ws, &full, stack.as_deref())?);
    }
    if nothing_to_do.is_none() {
        destroy_may_go_on(req, settings, &plan, stack.as_deref())?;
    }
    if let Some(s) = &stack
        && let Some(why) = stack_checked(&ws, &profile, s, stack_config.as_ref(), req.op)?
    {
        nothing_to_do = Some(why);
    }
    Ok(Resolved {
        ws,
        req: req.clone(),
        stack,
        stack_config,
        profile: Arc::new(profile),
        full,
        plan,
        nothing_to_do,
        bundle,
        programs,
        orphans,
        backends,
    })
}

/// What the selector picks of `base` (the graph in the run's order), and why nothing,
/// when it picks nothing.
fn selected(
    ws: &Workspace,
    profile: &Profile,
    full: &Arc<Plan>,
    base: &Plan,
    req: &Request,
) -> Result<(Arc<Plan>, Option<String>)> {
    let git = select::Git::new(&ws.root);
    let chosen = req.args.selector.evaluate(
        full,
        &select::Context {
            order: &base.order,
            root: &ws.root,
            watch: &profile.watch,
            changes: &git,
        },
    )?;
    // A run of the whole profile forward runs the graph itself: not a copy of it (a
    // plan of thousands of projects is megabytes).
    let whole = req.op != Operation::Destroy && chosen.keep.iter().all(|k| *k);
    let plan = if whole {
        full.clone()
    } else {
        Arc::new(base.subplan(&chosen.keep))
    };
    Ok((plan, chosen.empty_because))
}

/// `up --resume`: what the stack's last `up` did not finish.
fn resumed(ws: &Workspace, full: &Plan, stack: Option<&str>) -> Result<Plan> {
    let Some(s) = stack else {
        return Err(Error::config(
            "nothing to resume: no stack is named, so no `strata up` is recorded. Run `strata up --stack NAME`.",
        ));
    };
    resume_plan(full, &Journal::new(&ws.state_dir(s)), s)
}

/// A destroy that cannot ask needs --yes: said before anything else is looked at.
fn destroy_may_go_on(
    req: &Request,
    settings: &Settings,
    plan: &Plan,
    stack: Option<&str>,
) -> Result<()> {
    if req.op != Operation::Destroy || req.args.yes || settings.interactive {
        return Ok(());
    }
    Err(Error::usage(format!(
        "destroy needs --yes when it cannot ask (non-interactive run). Nothing was destroyed.\n  To destroy {} {}project(s) of stack `{}`: strata destroy {}--yes",
        plan.nodes.len(),
        if req.orphans { "orphan " } else { "" },
        stack.unwrap_or("<stack>"),
        if req.orphans { "--orphans " } else { "" }
    )))
}

/// The profile checked against stack `s`, and what a stack without its stack config
/// means for `op`: nothing to destroy (returned), no refresh (an error), else nothing.
fn stack_checked(
    ws: &Workspace,
    profile: &Profile,
    s: &str,
    stack_config: Option<&StackConfig>,
    op: Operation,
) -> Result<Option<String>> {
    ws.check_profile(profile, s, stack_config, &|| {
        !Journal::new(&ws.state_dir(s)).last_success().is_empty()
    })?;
    let path = ws.stack_config_path(s);
    // A profile that records an infra_type writes the stack config on its first
    // `up`: without one, nothing was brought up. (Another profile's stacks may exist
    // without it: Pulumi says so, project by project.)
    if stack_config.is_some() || profile.infra_type.is_empty() {
        return Ok(None);
    }
    match op {
        Operation::Destroy => Ok(Some(format!(
            "stack `{s}` has no stack config ({}): nothing was brought up on it, nothing to destroy.",
            display_path(&path)
        ))),
        Operation::Refresh => Err(Error::config(format!(
            "stack `{s}` has no stack config ({}): nothing has been brought up on it. Run `strata up --stack {s}` first.",
            display_path(&path)
        ))),
        _ => Ok(None),
    }
}

impl Resolved {
    /// `-p PROFILE -s STACK`: what a printed command needs to name this run's profile
    /// and stack, whatever the files would choose on their own.
    pub fn target_args(&self) -> String {
        format!("-p {} -s {}", self.profile.name, self.stack())
    }

    /// The Pulumi environment of the team's backend (its lease, its run records).
    pub fn shared_env(&self) -> std::collections::BTreeMap<String, String> {
        super::env::shared_env(&self.ws, &self.backends)
    }

    /// The stack name; `ask` has made sure there is one.
    pub fn stack(&self) -> &str {
        self.stack.as_deref().unwrap_or_default()
    }

    /// Profile config keys the stack config does not have yet.
    pub fn missing_config(&self) -> Vec<&ConfigItem> {
        self.profile
            .config
            .iter()
            .filter(|i| !self.stack_config.as_ref().is_some_and(|c| c.has(&i.key)))
            .collect()
    }

    /// The secrets this plan needs: the profile-level ones (when anything runs), and
    /// those of the selected entries (all of them when the secrets step runs).
    pub fn declared_secrets(&self) -> Vec<&SecretItem> {
        let has_step = self
            .plan
            .nodes
            .iter()
            .any(|n| n.kind == crate::plan::NodeKind::Builtin);
        let mut declared: Vec<&SecretItem> = Vec::new();
        if !self.plan.nodes.is_empty() {
            declared.extend(self.profile.secrets.iter());
        }
        for (item, owner) in self.profile.all_secrets() {
            if let Some(owner) = owner
                && (has_step || self.plan.index_of(owner).is_some())
            {
                declared.push(item);
            }
        }
        declared
    }
}

/// `--resume`: what did not succeed in the last `up` of this stack, and its dependents
/// among the projects of that run.
fn resume_plan(full: &Plan, journal: &Journal, stack: &str) -> Result<Plan> {
    let records = journal.read();
    let Some((run_id, projects)) = records.iter().rev().find_map(|r| match r {
        Record::Run {
            run_id,
            operation,
            projects,
            ..
        } if operation == "up" => Some((run_id.clone(), projects.clone())),
        _ => None,
    }) else {
        return Err(Error::config(format!(
            "nothing to resume: no `strata up` is recorded for stack `{stack}`. Run `strata up`."
        )));
    };
    let succeeded: BTreeSet<String> = records
        .iter()
        .filter_map(|r| match r {
            Record::Project {
                run_id: id,
                project,
                status,
                ..
            } if *id == run_id && status == "succeeded" => Some(project.clone()),
            _ => None,
        })
        .collect();
    let in_run: BTreeSet<&str> = projects.iter().map(String::as_str).collect();
    let mut keep = vec![false; full.nodes.len()];
    for &i in &full.order {
        let n = &full.nodes[i];
        if !in_run.contains(n.path.as_str()) {
            continue;
        }
        let upstream_rerun = n.needs.iter().any(|&j| keep[j]);
        if !succeeded.contains(&n.path) || upstream_rerun {
            keep[i] = true;
        }
    }
    Ok(full.subplan(&keep))
}
