//! One step of a run, from the scheduler's call to its journal record: the
//! [`StepRunner`] opens the step's log and runs it as its kind says, a project through
//! its engine or the built-in step that writes secrets into the cluster
//! (`cluster_secrets`), all sharing the run's [`Ctx`] (`context`). A project's step is
//! what it receives (`inputs`), how it runs (`attempt`), what it leaves (`outputs`) and
//! the hooks after it (`hooks`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Map, Value};

use super::events::{RunEvent, Status};
use super::scheduler::{Executor, StepResult, catch_panic};
use crate::engine::command::CommandEngine;
use crate::engine::pulumi::PulumiEngine;
use crate::engine::{Control, Job, Operation, Progress};
use crate::gates::denial::Denial;
use crate::plan::NodeKind;
use crate::state::journal::Journal;
use crate::util::{display_path, now_ms, rfc3339, slug};
use crate::workspace::{Entry, ProjectKind};

mod attempt;
pub mod bundle;
mod cluster_secrets;
mod context;
pub mod contracts;
mod gate;
pub mod hooks;
mod inputs;
pub(crate) mod log;
mod outputs;
mod projection;
mod rules;

pub use context::Ctx;
pub use log::events_path;
use outputs::Outputs;
pub use outputs::StepRecord;

/// How a project step ended.
struct Ran {
    status: Status,
    message: Option<String>,
    exit_code: Option<i32>,
    /// Failed for a missing input: an upstream never deployed, or an output it lacks.
    missing_input: bool,
    /// `blocked`: the upstream that was never deployed.
    upstream: Option<String>,
    changes: Option<crate::engine::digest::Changes>,
    /// A successful `up`: the keyed hash of its outputs.
    outputs_hash: Option<String>,
    /// A preview: the stack outputs it already knows (for projected dependents).
    planned: Option<Map<String, Value>>,
    /// A preview that ran on projected inputs.
    projected: bool,
    /// The `policy:` rule that denies what its preview planned.
    denied: Option<Box<Denial>>,
    /// The `approve:` rule that holds what its preview planned.
    awaiting: Option<Box<Denial>>,
}

impl Ran {
    fn new(status: Status, message: Option<String>, exit_code: Option<i32>) -> Ran {
        Ran {
            status,
            message,
            exit_code,
            missing_input: false,
            upstream: None,
            changes: None,
            outputs_hash: None,
            planned: None,
            projected: false,
            denied: None,
            awaiting: None,
        }
    }

    fn missing_input(message: String) -> Ran {
        Ran {
            missing_input: true,
            ..Ran::new(Status::Failed, Some(message), None)
        }
    }

    fn blocked(upstream: &str, stack: &str) -> Ran {
        Ran::blocked_because(
            upstream,
            format!("needs {upstream}, which has never been deployed on stack `{stack}`"),
        )
    }

    fn blocked_because(upstream: &str, why: String) -> Ran {
        Ran {
            upstream: Some(upstream.to_string()),
            ..Ran::new(Status::Blocked, Some(why), None)
        }
    }
}

/// Whether the end of a run shows the tail of a step that ended with `status`: the
/// summary shows a failure's, a preview's Markdown summary any project's lines.
fn tail_shown(op: Operation, status: Status) -> bool {
    status == Status::Failed || op == Operation::Preview
}

/// The kinds of step a plan holds, each run its own way.
enum Step {
    /// A project through its engine.
    Project,
    /// The built-in step that writes secrets into the cluster.
    ClusterSecrets,
}

impl Step {
    fn of(kind: NodeKind) -> Step {
        match kind {
            NodeKind::Pulumi | NodeKind::Command => Step::Project,
            NodeKind::Builtin => Step::ClusterSecrets,
        }
    }
}

pub struct StepRunner<'a> {
    ctx: &'a Ctx,
    control: &'a Control,
    pulumi: Option<&'a PulumiEngine>,
    command: &'a CommandEngine,
    journal: &'a Journal,
    logs: Mutex<BTreeMap<usize, PathBuf>>,
    outputs: Mutex<BTreeMap<String, Outputs>>,
    processes: AtomicU32,
    /// The last lines shown for each step (rendered, redacted), for the summary.
    tails: Mutex<BTreeMap<usize, Vec<String>>>,
    /// Per project: whether the journal's last up/destroy of it is a successful up.
    deployed_by_journal: std::sync::OnceLock<BTreeMap<String, bool>>,
    /// The outputs hash of each project that came up in this run.
    new_outputs: Mutex<BTreeMap<String, String>>,
    /// `--changed`: steps skipped at run time because their upstreams' outputs did not
    /// change.
    unchanged: Mutex<BTreeSet<usize>>,
    /// Each step's log, opened by `prepare`, taken by `execute`.
    log_files: Mutex<BTreeMap<usize, std::fs::File>>,
    /// `preview --save-plan`: the digest of each upstream's outputs, per step.
    bundle_reads: Mutex<BTreeMap<String, BTreeMap<String, String>>>,
    /// `preview --save-plan`: when each Pulumi stack's state was last written.
    bundle_states: Mutex<BTreeMap<String, String>>,
    /// One lock per upstream whose outputs are being read (see `outputs_of`).
    reading: Mutex<BTreeMap<String, std::sync::Arc<Mutex<()>>>>,
    /// A preview: what each finished preview knows of its outputs.
    previews: projection::Previews,
    /// A preview: the projected inputs of each step that has some.
    projected: Mutex<BTreeMap<String, projection::Projected>>,
    /// The run's concurrency pools (a throttled step's pool adapts; see `attempt`).
    pools: Option<&'a super::pools::Pools>,
}

impl<'a> StepRunner<'a> {
    pub fn new(
        ctx: &'a Ctx,
        control: &'a Control,
        pulumi: Option<&'a PulumiEngine>,
        command: &'a CommandEngine,
        journal: &'a Journal,
    ) -> StepRunner<'a> {
        StepRunner {
            ctx,
            control,
            pulumi,
            command,
            journal,
            pools: None,
            logs: Mutex::new(BTreeMap::new()),
            outputs: Mutex::new(BTreeMap::new()),
            processes: AtomicU32::new(0),
            tails: Mutex::new(BTreeMap::new()),
            deployed_by_journal: std::sync::OnceLock::new(),
            new_outputs: Mutex::new(BTreeMap::new()),
            unchanged: Mutex::new(BTreeSet::new()),
            log_files: Mutex::new(BTreeMap::new()),
            bundle_reads: Mutex::new(BTreeMap::new()),
            bundle_states: Mutex::new(BTreeMap::new()),
            reading: Mutex::new(BTreeMap::new()),
            previews: projection::Previews::default(),
            projected: Mutex::new(BTreeMap::new()),
        }
    }

    /// The run's concurrency pools: a step of a pool that is throttled makes it adapt.
    pub fn with_pools(mut self, pools: &'a super::pools::Pools) -> StepRunner<'a> {
        self.pools = Some(pools);
        self
    }

    /// Processes started by all steps (engines, hooks, output reads).
    pub fn processes(&self) -> u32 {
        self.processes.load(Ordering::SeqCst)
    }

    /// The last lines a step showed (rendered engine events, not raw JSON).
    pub fn tail(&self, node: usize) -> Vec<String> {
        self.tails
            .lock()
            .ok()
            .and_then(|t| t.get(&node).cloned())
            .unwrap_or_default()
    }

    /// Shows a line of step `node` (a rendered engine event, a command's or a hook's
    /// output): redacted, kept for the summary's tail, and emitted.
    fn show(&self, node: usize, line: &str, emit: &(dyn Fn(RunEvent) + Sync)) {
        let line = self.ctx.redact(line);
        if let Ok(mut t) = self.tails.lock() {
            let v = t.entry(node).or_default();
            v.push(line.clone());
            if v.len() > 15 {
                v.remove(0);
            }
        }
        emit(RunEvent::ProjectOutput {
            project: self.ctx.plan.nodes[node].path.clone(),
            line,
        });
    }

    /// Drops the tail of a step that ended when nothing will show it: the summary shows
    /// a failure's tail, a preview's summary a project's lines. Kept for every step of a
    /// large run, tails would grow with the estate.
    fn forget_tail_unless_shown(&self, node: usize, status: Status) {
        if !tail_shown(self.ctx.op, status)
            && let Ok(mut t) = self.tails.lock()
        {
            t.remove(&node);
        }
    }

    pub fn log_path(&self, node: usize) -> Option<PathBuf> {
        self.logs.lock().ok()?.get(&node).cloned()
    }

    fn job_for(&self, path: &str, op: Operation) -> Option<Job> {
        let project = self.ctx.projects.get(path)?;
        let mut env = self.ctx.env.clone();
        env.extend(self.ctx.child_env.of(path));
        let backend = self.ctx.backends.of(path);
        env.insert("PULUMI_BACKEND_URL".into(), backend.url.clone());
        Some(Job {
            path: path.to_string(),
            name: project.name(),
            dir: project.dir.clone(),
            op,
            stack: self.ctx.stack_of(path).to_string(),
            env,
            config_file: self.ctx.stack_config.path.clone(),
            inputs: BTreeMap::new(),
            needed_outputs: self.ctx.needed.get(path).cloned().unwrap_or_default(),
            scratch_dir: self.ctx.state_dir.join("work").join(slug(path)),
            secret_config: BTreeMap::new(),
            refresh: self.ctx.refresh && op == Operation::Preview,
            plan: match (&self.ctx.bundle, &project.kind) {
                (Some(b), ProjectKind::Pulumi { .. })
                    if matches!(op, Operation::Preview | Operation::Up) =>
                {
                    b.plan_file(path)
                }
                _ => None,
            },
        })
    }

    /// Runs step `i` as its kind says. A panic in it fails the step with what the panic
    /// said and where (journaled and shown like any failure), and the run goes on.
    fn run_step(
        &self,
        i: usize,
        emit: &(dyn Fn(RunEvent) + Sync),
        log: &mut dyn FnMut(&str),
    ) -> Ran {
        let ran = catch_panic(|| match Step::of(self.ctx.plan.nodes[i].kind) {
            Step::Project => self.run_project(i, emit, log),
            Step::ClusterSecrets => cluster_secrets::run(self.ctx, log),
        });
        ran.unwrap_or_else(|p| Ran::new(Status::Failed, Some(p.describe()), None))
    }

    fn run_project(
        &self,
        i: usize,
        emit: &(dyn Fn(RunEvent) + Sync),
        log: &mut dyn FnMut(&str),
    ) -> Ran {
        let ctx = self.ctx;
        let node = &ctx.plan.nodes[i];
        let (Some(entry), Some(project)) = (&node.entry, &node.project) else {
            return Ran::new(Status::Failed, Some("not a project".into()), None);
        };
        let op = ctx.op;
        let Some(mut job) = self.job_for(&node.path, op) else {
            return Ran::new(Status::Failed, Some("unknown project".into()), None);
        };
        let mut sink = self.progress_sink(i, emit, log);

        let projected =
            match self.before_preview(&node.path, entry, &project.kind, &mut job, &mut sink) {
                Ok(p) => p,
                Err(ran) => return *ran,
            };
        let is_pulumi = matches!(project.kind, ProjectKind::Pulumi { .. });
        // A projected preview is never held to a bundle: what it read is not deployed.
        if projected.is_none()
            && let Err(ran) = self.hold_to_bundle(&node.path, &mut sink)
        {
            return *ran;
        }
        let secrets = match self.ready(i, entry, &project.kind, &mut job, emit, &mut sink) {
            Ok(secrets) => secrets,
            Err(ran) => return *ran,
        };
        let (mut outcome, tries) =
            match self.attempt(i, entry, &project.kind, &job, emit, &mut sink) {
                Ok(done) => done,
                Err(ran) => return *ran,
            };
        if let (Operation::Preview, Some(crate::engine::PlanFile::Save(plan))) = (op, &job.plan) {
            let broken = self.broken_reads(&job, plan, &mut sink);
            note_broken_reads(&mut outcome, &broken);
        }
        if is_pulumi && !secrets.is_empty() {
            self.record_secret_hashes(&node.path, &secrets);
        }
        if op == Operation::Up && (!node.rules.is_empty() || self.ctx.gate(&node.path).holds_here())
        {
            self.clear_gate(&node.path);
        }
        if op == Operation::Destroy {
            let mut said = |l: String| sink(Progress::Line(l));
            self.forget_kubeconfigs(&entry.on_success, &node.path, &job.env, &mut said);
        }
        // What follows logs through `log` itself.
        drop(sink);
        if op == Operation::Up {
            if let Err(msg) = self.leave_outputs(&node.path, is_pulumi, &outcome) {
                return Ran::new(Status::Failed, Some(msg), None);
            }
            // Hooks, before any dependent starts.
            if let Err(msg) =
                self.run_hooks(i, &entry.on_success, &job, &outcome.outputs, emit, log)
            {
                return Ran::new(Status::Failed, Some(msg), None);
            }
        }
        if op == Operation::Destroy && !is_pulumi {
            self.forget_outputs(&node.path);
        }
        self.succeeded(i, outcome, tries, projected)
    }

    /// What a project's engine reports, shown and logged: the lines shown (a repeated
    /// warning once), the debug ones only with `--verbose`, resource counts as events.
    fn progress_sink<'s>(
        &'s self,
        i: usize,
        emit: &'s (dyn Fn(RunEvent) + Sync),
        log: &'s mut dyn FnMut(&str),
    ) -> impl FnMut(Progress) + 's {
        // A warning a project repeats word for word (Pulumi's "using
        // pulumi-resource-command from $PATH", once per plugin load) is shown once.
        let mut warned = std::collections::HashSet::new();
        // The log is text a person reads: the lines shown (and the debug ones hidden), the
        // calls and what the children printed; the engine's JSON events go beside it.
        move |p: Progress| match p {
            Progress::Raw(l) => {
                if self.ctx.verbose && !l.trim_start().starts_with('{') {
                    self.show(i, &l, emit);
                }
                log(&l)
            }
            Progress::Line(l) => {
                if !l.starts_with("warning: ") || warned.insert(l.clone()) {
                    self.show(i, &l, emit);
                }
                log(&l)
            }
            Progress::Debug(l) => {
                if self.ctx.verbose {
                    self.show(i, &l, emit);
                }
                log(&l)
            }
            Progress::Resources {
                done,
                started,
                current,
            } => emit(RunEvent::ProjectProgress {
                project: self.ctx.plan.nodes[i].path.clone(),
                done,
                started,
                current,
            }),
        }
    }

    /// Readies a project's job for its attempts: given its inputs and secrets (returned,
    /// to record their hashes after), and an `up` held to its `policy:`/`approve:` rules'
    /// plan (the bundle's, when it is held to one).
    fn ready(
        &self,
        i: usize,
        entry: &Entry,
        kind: &ProjectKind,
        job: &mut Job,
        emit: &(dyn Fn(RunEvent) + Sync),
        sink: &mut dyn FnMut(Progress),
    ) -> Result<BTreeMap<String, String>, Box<Ran>> {
        let node = &self.ctx.plan.nodes[i];
        let is_pulumi = matches!(kind, ProjectKind::Pulumi { .. });
        let secrets = self.receive(&node.path, entry, is_pulumi, job, sink)?;
        if self.ctx.op == Operation::Up
            && is_pulumi
            && let Some(approved) = self.review_projected(i, job, emit, sink)?
        {
            job.plan = Some(approved);
        }
        if self.ctx.op == Operation::Up
            && is_pulumi
            && node.rules.is_empty()
            && job.plan.is_none()
            && let Some(approved) = self.hold_at_its_gate(i, job, emit, sink)?
        {
            job.plan = Some(approved);
        }
        if self.ctx.op == Operation::Up && is_pulumi && !node.rules.is_empty() {
            let plan = match &job.plan {
                None => self.hold_to_rules(i, entry, kind, job, emit, sink)?,
                Some(bundled) => rules::hold_bundle_to_rules(&node.rules, bundled)?,
            };
            job.plan = Some(plan);
        }
        Ok(secrets)
    }

    /// What a project's step that went through reports: its summary after its tries, what
    /// it was projected on, its changes and planned outputs, the hash of what an `up` left,
    /// and what a preview's changes would meet at its rules.
    fn succeeded(
        &self,
        i: usize,
        outcome: crate::engine::Outcome,
        tries: u32,
        projected: Option<projection::Projected>,
    ) -> Ran {
        let (op, node) = (self.ctx.op, &self.ctx.plan.nodes[i]);
        let outputs_hash = (op == Operation::Up)
            .then(|| self.note_outputs_hash(&node.path, &outcome.outputs, &outcome.secret_outputs));
        let mut message = attempt::after_tries(outcome.summary, tries);
        if let Some(p) = &projected {
            message = format!("{message} · {}", p.describe());
        }
        let (denied, awaiting) = match op {
            Operation::Preview if node.kind == NodeKind::Pulumi => rules::foresee(
                &node.rules,
                &node.path,
                outcome.changes.as_ref(),
                &mut message,
            ),
            _ => (None, None),
        };
        Ran {
            denied,
            awaiting,
            changes: outcome.changes,
            outputs_hash,
            planned: outcome.planned_outputs,
            projected: projected.is_some(),
            ..Ran::new(Status::Succeeded, Some(message), None)
        }
    }
}

/// A preview's outcome with the reads its update would break: counted among its
/// changes (for the rules) and named in its summary line.
fn note_broken_reads(outcome: &mut crate::engine::Outcome, broken: &[String]) {
    if broken.is_empty() {
        return;
    }
    crate::gates::contracts::count_into(
        outcome.changes.get_or_insert_with(Default::default),
        broken,
    );
    outcome.summary = format!("{} · would break: {}", outcome.summary, broken.join("; "));
}

impl Executor for StepRunner<'_> {
    fn redact(&self, text: &str) -> String {
        self.ctx.redact(text)
    }

    fn prepare(&self, i: usize) -> Option<String> {
        let node = &self.ctx.plan.nodes[i];
        // Decided here, when what it needs is done: no log for a step that will not run.
        if self.upstream_outputs_unchanged(&node.path) {
            if let Ok(mut u) = self.unchanged.lock() {
                u.insert(i);
            }
            return None;
        }
        let stamp = rfc3339(now_ms()).replace(':', "-");
        let dir = self
            .ctx
            .state_dir
            .join("logs")
            .join(node.path.trim_start_matches('@'));
        let (path, file) = log::create(&dir, self.ctx.op.as_str(), &stamp)?;
        if let Ok(mut l) = self.logs.lock() {
            l.insert(i, path.clone());
        }
        if let Ok(mut f) = self.log_files.lock() {
            f.insert(i, file);
        }
        Some(display_path(&path))
    }

    fn execute(&self, i: usize, emit: &(dyn Fn(RunEvent) + Sync)) -> StepResult {
        let ctx = self.ctx;
        let node = &ctx.plan.nodes[i];
        if self.unchanged.lock().is_ok_and(|u| u.contains(&i)) {
            self.publish_preview(&node.path, Map::new());
            // Like a step `--changed` dropped before the run: no process, no record.
            return StepResult {
                unchanged: true,
                ..StepResult::not_run(Status::Skipped, "upstream outputs unchanged")
            };
        }
        let started = now_ms();
        let log_path = self.log_path(i);
        // The file `prepare` created, still open.
        let file = self.log_files.lock().ok().and_then(|mut f| f.remove(&i));
        let mut step_log = log::StepLog::new(log_path.clone(), file);
        let mut log = |line: &str| step_log.write(ctx.redact(line));
        log(&format!(
            "# strata {} of {} · stack {} · provider {} · run {} · {}",
            ctx.op.as_str(),
            node.path,
            ctx.stack,
            ctx.provider,
            ctx.run_id,
            rfc3339(started)
        ));
        let Ran {
            status,
            message,
            exit_code,
            missing_input,
            upstream,
            changes,
            outputs_hash,
            planned,
            projected,
            denied,
            awaiting,
        } = self.run_step(i, emit, &mut log);
        // Whatever became of it: a projected dependent may be waiting for it.
        self.publish_preview(&node.path, planned.unwrap_or_default());
        let ended = now_ms();
        self.forget_tail_unless_shown(i, status);
        let message = message.filter(|m| !m.is_empty()).map(|m| ctx.redact(&m));
        let duration_ms = ended.saturating_sub(started);
        log(&format!(
            "# {} in {}ms{}",
            status.as_str(),
            duration_ms,
            message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
        let record = StepRecord {
            status,
            started_ms: started,
            ended_ms: ended,
            exit_code,
            fingerprint: ctx.fingerprints.get(&node.path).cloned(),
            message: message.clone(),
            log: log_path
                .as_ref()
                .and_then(|p| p.strip_prefix(&ctx.root).ok())
                .map(|p| p.display().to_string()),
            changes: changes.as_ref().map(crate::engine::digest::counts_json),
            upstream_outputs: outputs_hash
                .is_some()
                .then(|| self.upstream_outputs(&node.path)),
            outputs_hash,
            pool: node.pool().map(str::to_string),
            denied: denied.clone(),
            awaiting: awaiting.clone(),
        }
        .into_record(&ctx.run_id, &node.path, ctx.op);
        if let Some(path) = &log_path {
            log::prune(path, ctx.op.as_str(), log::KEPT_PER_OPERATION);
        }
        let record = self.write_record(&record, emit);
        StepResult {
            status,
            duration_ms,
            message,
            log: log_path.map(|p| display_path(&p)),
            exit_code,
            missing_input,
            upstream,
            changes,
            unchanged: false,
            projected,
            denied,
            awaiting,
            record,
        }
    }

    fn settle(&self, record: u64) -> Result<(), String> {
        self.journal.settle(record).map_err(|e| e.to_string())
    }
}

impl StepRunner<'_> {
    /// Writes a step's record to the journal now; its number, for the scheduler to have
    /// it on disk before what needs the step starts. Not written: a warning, no number.
    fn write_record(
        &self,
        record: &crate::state::journal::Record,
        emit: &(dyn Fn(RunEvent) + Sync),
    ) -> Option<u64> {
        self.journal
            .append_unsettled(record)
            .map_err(|e| {
                emit(RunEvent::Notice {
                    message: format!("warning: {e}"),
                })
            })
            .ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_tails_the_end_of_a_run_shows_are_kept() {
        for op in [Operation::Up, Operation::Destroy, Operation::Refresh] {
            assert!(tail_shown(op, Status::Failed));
            for s in [Status::Succeeded, Status::Skipped, Status::Cancelled] {
                assert!(!tail_shown(op, s), "{op:?} {s:?}");
            }
        }
        for s in [Status::Succeeded, Status::Failed, Status::Blocked] {
            assert!(tail_shown(Operation::Preview, s));
        }
    }
}
