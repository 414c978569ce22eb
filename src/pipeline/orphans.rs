//! The stack's orphans for a run or a command: found in the journal (`state::orphans`),
//! looked up in the backend of the workspace's environment, and, for `destroy
//! --orphans`, turned into a profile of their own whose programs are where
//! `state::orphans::program` found them.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::error::Result;
use crate::plan::Plan;
use crate::state::journal::{Journal, Record};
use crate::state::orphans::program::History;
use crate::state::orphans::{self, Backend, Orphan};
use crate::workspace::profile::{Entry, Stage};
use crate::workspace::{Profile, Project, Workspace, project};

/// What a run plans with once its orphans are known (see [`of_run`]).
pub struct OfRun {
    pub profile: Profile,
    pub full: Plan,
    pub orphans: Vec<Orphan>,
    pub programs: Option<History>,
}

/// The orphans a run sees, found once: `up` and `preview` those of this checkout's
/// journal (they warn and list); `destroy --orphans` those every machine recorded, and
/// then plans with their profile ([`destroy_profile`]) instead of the workspace's.
pub fn of_run(
    ws: &Workspace,
    profile: Profile,
    full: Plan,
    stack: Option<&str>,
    req: &super::Request,
) -> Result<OfRun> {
    use crate::engine::Operation;
    let (Some(stack), op) = (stack, req.op) else {
        return Ok(OfRun {
            profile,
            full,
            orphans: Vec::new(),
            programs: None,
        });
    };
    if req.orphans {
        let found = find(ws, &profile, &full, stack, None);
        let mut history = History::new(&ws.root);
        let (own, projects) = destroy_profile(&profile, &found, &mut history, stack)?;
        let full = crate::plan::build(&own, projects)?;
        return Ok(OfRun {
            profile: own,
            full,
            orphans: found,
            programs: Some(history),
        });
    }
    let orphans = match op {
        Operation::Up | Operation::Preview => find_local(ws, &profile, &full, stack),
        _ => Vec::new(),
    };
    Ok(OfRun {
        profile,
        full,
        orphans,
        programs: None,
    })
}

/// The orphans of `stack` against the profile's graph `full`, from `records` (given), or
/// this checkout's journal merged with what a shared backend recorded.
pub fn find(
    ws: &Workspace,
    profile: &Profile,
    full: &Plan,
    stack: &str,
    records: Option<&[Record]>,
) -> Vec<Orphan> {
    let env = super::env::pulumi_env(ws);
    let current = orphans::Current::of(full, &ws.root);
    let found = match records {
        Some(records) => orphans::find(records, &current, &profile.projects_dir),
        None => {
            let local = Journal::new(&ws.state_dir(stack)).read();
            let records = crate::state::records::merged(local, &shared_runs(&env, stack));
            orphans::find(&records, &current, &profile.projects_dir)
        }
    };
    look(ws, profile, stack, &env, &current, found)
}

/// The orphans `find` found, each with its kind learnt where only its path was known,
/// those a current entry uses left out, and their stacks and outputs read.
fn look(
    ws: &Workspace,
    profile: &Profile,
    stack: &str,
    env: &std::collections::BTreeMap<String, String>,
    current: &orphans::Current,
    mut found: Vec<Orphan>,
) -> Vec<Orphan> {
    if found.is_empty() {
        return found;
    }
    for o in found.iter_mut().filter(|o| o.known.kind.is_empty()) {
        learn_kind(ws, profile, &mut o.known);
    }
    // Known by path alone until now: what it ran may be a current entry's.
    found.retain(|o| !current.uses(&o.known));
    Backend {
        env,
        stack,
        root: &ws.root,
        state_dir: &ws.state_dir(stack),
        config_file: &ws.stack_config_path(stack),
    }
    .look(found)
}

/// A project known by its path alone (deployed by another machine, or before strata kept
/// graphs): its kind and name, from its folder where that is still there.
fn learn_kind(ws: &Workspace, profile: &Profile, k: &mut crate::state::journal::KnownProject) {
    if let Ok(p) = project::load(&ws.root, &k.dir, &profile.file) {
        k.kind = p.kind_str().to_string();
        k.name = p.name();
    }
}

/// On a shared (s3://) backend, the recent runs every machine recorded there (what
/// another machine deployed counts as deployed); none elsewhere, or when the bucket cannot
/// be read (the journal alone then).
fn shared_runs(
    env: &std::collections::BTreeMap<String, String>,
    stack: &str,
) -> Vec<crate::state::records::RunRecord> {
    use crate::state::records;
    let read = crate::engine::pulumi::shared_call(env, |b| {
        records::recent(b, stack, records::LIMIT, &mut |_| {})
    });
    read.and_then(Result::ok).unwrap_or_default()
}

/// The orphans this checkout's journal knows of, without asking a shared backend: what
/// `up` warns of and `preview` lists before anything runs (a bucket's run records would
/// cost round trips on every run).
/// The journal is streamed, never held whole: a run's estate may have thousands of
/// projects, each with records in it.
pub fn find_local(ws: &Workspace, profile: &Profile, full: &Plan, stack: &str) -> Vec<Orphan> {
    let current = orphans::Current::of(full, &ws.root);
    let mut finder = orphans::Finder::new(&current, &profile.projects_dir);
    Journal::new(&ws.state_dir(stack)).each(&mut |r| finder.note(&r));
    let found = finder.finish();
    look(
        ws,
        profile,
        stack,
        &super::env::pulumi_env(ws),
        &current,
        found,
    )
}

/// `destroy --orphans` destroys what the journal recorded, and nothing else: a program
/// found for an orphan (in its folder, or in history) that names another project than
/// the journal recorded would destroy another stack (or run another `destroy:`).
fn refuse_another_program(
    o: &Orphan,
    p: &Project,
    found: &crate::state::orphans::program::Found,
) -> Result<()> {
    let (recorded, now) = (&o.known, p.name());
    if recorded.name.is_empty() || (recorded.name == now && recorded.kind == p.kind_str()) {
        return Ok(());
    }
    let place = match found {
        crate::state::orphans::program::Found::InPlace => format!("{} now", recorded.dir),
        crate::state::orphans::program::Found::Revision(rev) => {
            format!("{} in revision {}", recorded.dir, &rev[..rev.len().min(12)])
        }
    };
    Err(crate::error::Error::config(format!(
        "orphan {} was deployed as {} project `{}`, but the program at {place} is {} project `{now}`: destroying it would tear down another stack than the one the journal recorded. Nothing was destroyed.\n  Destroy that stack by hand where its program is (`pulumi destroy` in the project that deployed it), or restore its folder as it was.",
        recorded.project,
        recorded.kind,
        recorded.name,
        p.kind_str()
    )))
}

/// The warning an `up` gives once when the stack has orphans.
pub fn warning(found: &[Orphan], target: &str) -> String {
    let names: Vec<&str> = found.iter().map(|o| o.known.project.as_str()).collect();
    format!(
        "warning: {} project(s) deployed on this stack are no longer in the profile: {}. strata never destroys them by itself; `strata status {target}` lists them, `strata destroy --orphans {target}` destroys them.",
        found.len(),
        names.join(", ")
    )
}

/// A profile of the orphans alone, for `destroy --orphans`: each an entry needing the
/// orphans it needed, with nothing to ask, write or hook; its projects loaded from their
/// folders, or from the copies of past revisions `history` makes (kept for the run).
pub fn destroy_profile(
    profile: &Profile,
    found: &[Orphan],
    history: &mut History,
    stack: &str,
) -> Result<(Profile, Vec<Project>)> {
    let names: BTreeSet<&str> = found.iter().map(|o| o.known.project.as_str()).collect();
    let mut entries = Vec::with_capacity(found.len());
    let mut projects = Vec::with_capacity(found.len());
    for o in found {
        let (base, found) = history.base_for(&o.known, stack)?;
        let mut p = project::load(&base, &o.known.dir, &profile.file)?;
        refuse_another_program(o, &p, &found)?;
        p.path = o.known.project.clone();
        projects.push(p);
        entries.push(Arc::new(entry_of(o, &names, profile)));
    }
    let own = Profile {
        infer_needs: false,
        secret_name_set: false,
        cluster: None,
        secrets: Vec::new(),
        watch: Vec::new(),
        pools: Vec::new(),
        policy: Vec::new(),
        entries,
        ..profile.clone()
    };
    Ok((own, projects))
}

fn entry_of(o: &Orphan, orphans: &BTreeSet<&str>, profile: &Profile) -> Entry {
    Entry {
        path: o.known.project.clone(),
        description: Some("orphan: no longer in the profile".to_string()).into(),
        stage: if o.known.stage == "kubernetes" {
            Stage::Kubernetes
        } else {
            Stage::Infrastructure
        },
        needs: Some(
            o.known
                .needs
                .iter()
                .filter(|n| orphans.contains(n.as_str()))
                .cloned()
                .collect(),
        ),
        inputs: Default::default(),
        secrets: Default::default(),
        on_success: Default::default(),
        timeout: None,
        retry: Default::default(),
        watch: Default::default(),
        mock_outputs: Default::default(),
        // An orphan's mocks serve nothing (it has none).
        mock_outputs_allowed_commands: Some(Vec::new()).into(),
        pool: None,
        tags: Default::default(),
        config: Default::default(),
        stack: Default::default(),
        reads: Default::default(),
        file: profile.file.clone(),
    }
}
