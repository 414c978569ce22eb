//! Execute: the run itself — its inputs, its steps' context and engines, the run opened
//! in the journal, its steps scheduled under the signal watch, the run closed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::display::Reporter;
use crate::engine::command::CommandEngine;
use crate::engine::pulumi::PulumiEngine;
use crate::engine::{Control, Operation};
use crate::error::Result;
use crate::plan::Plan;
use crate::run::events::{ChildEnv, RunEvent, Status};
use crate::run::pools::Pools;
use crate::run::scheduler::StepResult;
use crate::run::signals::Caught;
use crate::run::step::{Ctx, StepRecord, StepRunner};
use crate::secrets::redact::Redactor;
use crate::state::journal::{Journal, Record};
use crate::trace::Trace;
use crate::util::{now_ms, rfc3339};
use crate::workspace::ProjectKind;

use super::ask::Answers;
use super::lock::Held;
use super::preflight::Preflight;
use super::resolve::Resolved;

mod changed;
mod context;
mod inputs;
mod schedule;
mod shared;

pub use context::needed_outputs;
use schedule::Ran;

/// What a run did, for the `record` stage.
pub struct Executed {
    pub run_id: String,
    pub plan: Arc<Plan>,
    pub results: Vec<StepResult>,
    /// Per step of `plan`: its log (when it started) and the last lines it showed.
    pub logs: Vec<Option<PathBuf>>,
    pub tails: Vec<Vec<String>>,
    /// Steps `--changed` skipped, with the reason.
    pub unchanged: Vec<(String, String)>,
    pub processes: u32,
    pub started_ms: u64,
    pub interrupted: bool,
    /// The signal that interrupted the run (it exits 128+n).
    pub signal: Option<i32>,
    pub killed: bool,
    pub redactor: Redactor,
    /// The journal's length before the run's first record: its report reads from here.
    pub journal_from: u64,
    /// The input fingerprint of every step of the run.
    pub fingerprints: BTreeMap<String, String>,
    /// `preview --save-plan`: the digest of each upstream's outputs, per step.
    pub bundle_reads: BTreeMap<String, BTreeMap<String, String>>,
    /// `preview --save-plan`: when each Pulumi stack's state was last written, as its
    /// preview began (where strata reads checkpoints).
    pub bundle_states: BTreeMap<String, String>,
    /// `up --plan`: why the applied mark could not be written, if it could not.
    pub bundle_mark: Option<crate::error::Error>,
    /// The run's trace, still open: `record` ends and sends it.
    pub trace: Trace,
}

pub fn execute(
    r: &Resolved,
    pre: Preflight,
    answers: Answers,
    held: Held,
    reporter: &Reporter,
    verbose: bool,
) -> Result<Executed> {
    // The lease is bound last, so that on every early return it goes before the signal
    // handlers its loss would need.
    let Held {
        run_id,
        signals,
        caught,
        lock,
        notices: lock_notices,
        lease,
    } = held;
    let Answers {
        stack_config,
        secrets,
        ..
    } = answers;
    let journal = Journal::new(&r.ws.state_dir(r.stack()));
    let mut notices = pre.notices;
    notices.extend(lock_notices);
    // Traced when strata's own environment asks (OTEL_EXPORTER_OTLP_ENDPOINT); the
    // trace sets each running project's TRACEPARENT here for its children.
    let child_env = ChildEnv::default();
    let trace = Trace::from_env(&r.ws.process_env, &child_env, &mut notices);
    let mut inputs = inputs::prepare(r, &stack_config, &secrets, &caught, lock.is_some())?;
    notices.append(&mut inputs.warnings);
    check_bundle(r, &inputs.fingerprints)?;
    let unchanged = std::mem::take(&mut inputs.changed.dropped);
    let carried = std::mem::take(&mut inputs.changed.carried);
    let given = context::Given {
        run_id,
        org: pre.org,
        stack_config,
        secrets,
        verbose,
        child_env,
    };
    let ctx = context::build(r, given, inputs)?;
    let control = Control::new();
    if let Some(lock) = &lock {
        control.observe(Box::new(lock.recorder()));
    }
    let (pulumi, command) = engines(r, pre.pulumi, &trace, &ctx.env, &mut notices);
    let pools = Pools::new(&r.profile.pools, &r.profile.throttle);
    let runner =
        StepRunner::new(&ctx, &control, pulumi.as_ref(), &command, &journal).with_pools(&pools);
    // Two observers: the trace first, so a step's TRACEPARENT is set before it starts.
    let emit = |e: RunEvent| {
        trace.event(&e);
        reporter.event(&e);
    };
    let opened = announce(r, &ctx, &journal, &caught, notices, &unchanged, &emit)?;
    let ran = schedule::run(&r.req.args, &ctx, signals, &pools, &runner, &control, &emit);
    let kept = Kept::take(runner, ctx.plan.nodes.len());
    let bundle_mark = close(r, &ctx, &journal, &kept, &ran, lock.is_some(), &emit);
    // While the lease is still held: the next run, on any machine, finds the record.
    let done = shared::Done {
        run_id: &ctx.run_id,
        started_ms: opened.started_ms,
        journal_from: opened.journal_from,
        unchanged: unchanged.len(),
        carried,
        ran: &ran,
    };
    // The journal says how the run ended: without it, `history` shows it running.
    let end = crate::state::journal::Record::End {
        run_id: ctx.run_id.clone(),
        status: shared::status(&ran).as_str().into(),
        ended_at: crate::util::rfc3339(crate::util::now_ms()),
        unchanged: unchanged.len(),
    };
    if let Err(e) = journal.append(&end) {
        emit(RunEvent::Notice {
            message: format!("warning: the journal does not say how this run ended: {e}"),
        });
    }
    if let Some(message) = shared::leave(r, &journal, &done) {
        emit(RunEvent::Notice { message });
    }
    drop(lease);
    drop(lock);
    Ok(executed(
        ctx,
        ran,
        kept,
        opened,
        unchanged,
        bundle_mark,
        trace,
    ))
}

/// `up --plan`, under the stack lock and before anything runs: the bundle was applied
/// since it was opened (by a run that held the lock before this one), or it moved.
fn check_bundle(r: &Resolved, fingerprints: &BTreeMap<String, String>) -> Result<()> {
    let (Some(dir), Some(m)) = (&r.req.plan, &r.bundle) else {
        return Ok(());
    };
    crate::bundle::check::before_running(
        &r.ws,
        &r.profile,
        r.plan
            .nodes
            .iter()
            .map(|n| (n.path.as_str(), n.project.as_deref())),
        r.stack(),
        dir,
        m,
        &crate::bundle::check::Applying {
            fingerprints,
            unbound_blocked: r.req.unbound_blocked,
        },
    )
}

/// The engines the steps run through: the pulumi CLI preflight found (told where to
/// send its traces, when it can), and the command projects' specs.
fn engines(
    r: &Resolved,
    pulumi: Option<PathBuf>,
    trace: &Trace,
    env: &BTreeMap<String, String>,
    notices: &mut Vec<String>,
) -> (Option<PulumiEngine>, CommandEngine) {
    let pulumi = pulumi.map(|bin| {
        let mut engine = PulumiEngine::new(bin);
        if trace.endpoint().is_some()
            && crate::engine::pulumi::otel::has_otel_traces(&engine.binary, env)
        {
            let (url, note) = trace.for_pulumi();
            engine.otel_traces = url.map(str::to_string);
            notices.extend(note);
        }
        engine
    });
    let command = CommandEngine {
        specs: r
            .full
            .nodes
            .iter()
            .filter_map(|n| match n.project.as_ref().map(|p| &p.kind) {
                Some(ProjectKind::Command(spec)) => Some((n.path.clone(), Arc::clone(spec))),
                _ => None,
            })
            .collect(),
    };
    (pulumi, command)
}

/// When the run started, and where its journal stood.
struct Opened {
    started_ms: u64,
    journal_from: u64,
}

/// Opens the run, unless a signal came first: its journal record, `RunStarted`, the
/// notices, and the steps `--changed` skipped.
fn announce(
    r: &Resolved,
    ctx: &Ctx,
    journal: &Journal,
    caught: &Caught,
    notices: Vec<String>,
    unchanged: &[(String, String)],
    emit: &dyn Fn(RunEvent),
) -> Result<Opened> {
    let op = ctx.op;
    let started_ms = now_ms();
    let order: Vec<String> = ctx
        .plan
        .order
        .iter()
        .map(|&i| ctx.plan.nodes[i].path.clone())
        .collect();
    // The last moment a signal stops the run before it starts (the scheduler's watcher
    // answers from here on).
    caught.check("before any project started")?;
    let journal_from = std::fs::metadata(journal.path())
        .map(|m| m.len())
        .unwrap_or(0);
    let (user, host) = crate::state::lock::lease::who(&r.ws.env).unwrap_or_default();
    journal.append(&Record::Run {
        run_id: ctx.run_id.clone(),
        operation: op.as_str().into(),
        provider: r.profile.name.clone(),
        stack: ctx.stack.clone(),
        projects: order.clone(),
        started_at: rfc3339(started_ms),
        command: format!("strata {}", op.as_str()),
        user,
        host,
        graph: if op == Operation::Up {
            crate::state::orphans::known_graph(&r.full, &r.ws.root)
        } else {
            Vec::new()
        },
    })?;
    emit(RunEvent::RunStarted {
        schema_version: crate::run::events::SCHEMA_VERSION,
        run_id: ctx.run_id.clone(),
        operation: op,
        provider: r.profile.name.clone(),
        stack: ctx.stack.clone(),
        projects: order,
        parallel: r.req.args.parallel as usize,
    });
    for n in notices {
        emit(RunEvent::Notice { message: n });
    }
    for (path, why) in unchanged {
        emit(RunEvent::project_finished(
            path.clone(),
            op,
            Status::Skipped,
            0,
            Some(why.clone()),
        ));
    }
    Ok(Opened {
        started_ms,
        journal_from,
    })
}

/// Closes the run while the lock (if `locked`) is still held: a journal record for each
/// step that never ran, the journal's index, and, for `up --plan`, the bundle's applied
/// mark (why it could not be written, if it could not). Called with what the runner
/// `kept`, the runner gone: its per-project maps (megabytes at thousands of projects)
/// are freed before the index is rewritten, the run's peak.
fn close(
    r: &Resolved,
    ctx: &Ctx,
    journal: &Journal,
    kept: &Kept,
    ran: &Ran,
    locked: bool,
    emit: &dyn Fn(RunEvent),
) -> Option<crate::error::Error> {
    let op = ctx.op;
    // Journal records for the steps that never ran, put on disk with one sync.
    let mut last = None;
    for (i, res) in ran.results.iter().enumerate() {
        if kept.logs[i].is_none() {
            let record = StepRecord::not_run(res.status, res.message.clone());
            let record = record.into_record(&ctx.run_id, &ctx.plan.nodes[i].path, op);
            last = journal.append_unsettled(&record).ok().or(last);
        }
    }
    if let Some(n) = last {
        let _ = journal.settle(n);
    }
    if locked {
        // Under the stack lock: the index of what readers need, so reading the journal
        // does not get slower run after run.
        if let Err(e) = journal.update_index() {
            emit(RunEvent::Notice {
                message: format!("warning: the journal's index was not updated: {e}"),
            });
        }
    }
    // `up --plan` that applied every project: the bundle is spent, marked while the
    // lock is still held (a run waiting for the lock then finds it so).
    let applied_all = ran
        .results
        .iter()
        .all(|s| s.status == Status::Succeeded || s.status == Status::Skipped);
    match (&r.req.plan, &r.bundle) {
        (Some(dir), Some(m)) if op == Operation::Up && !ran.interrupted && applied_all => {
            crate::bundle::mark_applied(dir, &ctx.state_dir, m, &ctx.run_id).err()
        }
        _ => None,
    }
}

/// What the runner kept of each of the run's `n` steps, and of the run.
struct Kept {
    logs: Vec<Option<PathBuf>>,
    tails: Vec<Vec<String>>,
    processes: u32,
    bundle_reads: BTreeMap<String, BTreeMap<String, String>>,
    bundle_states: BTreeMap<String, String>,
}

impl Kept {
    fn take(runner: StepRunner, n: usize) -> Kept {
        Kept {
            logs: (0..n).map(|i| runner.log_path(i)).collect(),
            tails: (0..n).map(|i| runner.tail(i)).collect(),
            processes: runner.processes(),
            bundle_reads: runner.bundle_reads(),
            bundle_states: runner.bundle_states(),
        }
    }
}

/// What the run did, for `record`.
fn executed(
    ctx: Ctx,
    ran: Ran,
    kept: Kept,
    opened: Opened,
    unchanged: Vec<(String, String)>,
    bundle_mark: Option<crate::error::Error>,
    trace: Trace,
) -> Executed {
    let redactor = ctx.redactor.into_inner().unwrap_or_else(|e| e.into_inner());
    Executed {
        run_id: ctx.run_id,
        plan: ctx.plan,
        results: ran.results,
        logs: kept.logs,
        tails: kept.tails,
        unchanged,
        processes: kept.processes,
        started_ms: opened.started_ms,
        interrupted: ran.interrupted,
        signal: ran.signal,
        killed: ran.killed,
        redactor,
        journal_from: opened.journal_from,
        fingerprints: ctx.fingerprints,
        bundle_reads: kept.bundle_reads,
        bundle_states: kept.bundle_states,
        bundle_mark,
        trace,
    }
}
