//! Execute: the scheduler runs the plan's projects in parallel where the graph allows,
//! each through its engine (the pulumi CLI or a command), with Ctrl-C/SIGTERM watched
//! and `--changed` applied; events go to the reporter.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::display::Reporter;
use crate::engine::Control;
use crate::engine::Operation;
use crate::engine::command::CommandEngine;
use crate::engine::pulumi::PulumiEngine;
use crate::error::Result;
use crate::plan::Plan;
use crate::run::events::{ChildEnv, RunEvent, Status};
use crate::run::journal::{Journal, Record};
use crate::run::scheduler::StepResult;
use crate::run::step::{StepRecord, StepRunner};
use crate::secrets::redact::Redactor;
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
    let op = r.req.op;
    let stack = r.stack().to_string();
    let state_dir = r.ws.state_dir(&stack);
    let journal = Journal::new(&state_dir);
    let Answers {
        stack_config,
        secrets,
        ..
    } = answers;
    let mut notices = pre.notices;
    notices.extend(held.notices);
    // Traced when strata's own environment asks (OTEL_EXPORTER_OTLP_ENDPOINT); the
    // trace sets each running project's TRACEPARENT here for its children.
    let child_env = ChildEnv::default();
    let trace = Trace::from_env(&r.ws.process_env, &child_env, &mut notices);
    let mut inputs = inputs::prepare(
        r,
        &stack_config,
        &secrets,
        &held.caught,
        held.lock.is_some(),
    )?;
    // `up --plan`, under the stack lock and before anything runs: applied since it was
    // opened (by a run that held the lock before this one), or moved.
    if let (Some(dir), Some(m)) = (&r.req.plan, &r.bundle) {
        crate::bundle::check::before_running(
            &r.ws,
            &r.profile,
            r.plan
                .nodes
                .iter()
                .map(|n| (n.path.as_str(), n.project.as_deref())),
            &stack,
            dir,
            m,
            &inputs.fingerprints,
        )?;
    }
    let unchanged = std::mem::take(&mut inputs.changed.dropped);
    let run_id = format!(
        "{}-{}",
        rfc3339(now_ms()).replace([':', '-'], ""),
        std::process::id()
    );
    let ctx = context::build(
        r,
        context::Given {
            run_id: run_id.clone(),
            org: pre.org,
            stack_config,
            secrets,
            verbose,
            child_env,
        },
        inputs,
    )?;
    let control = Control::new();
    if let Some(lock) = &held.lock {
        control.observe(Box::new(lock.recorder()));
    }
    let pulumi = pre.pulumi.map(|bin| {
        let mut engine = PulumiEngine::new(bin);
        if trace.endpoint().is_some()
            && crate::engine::pulumi::otel::has_otel_traces(&engine.binary, &ctx.env)
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
    let pools = crate::run::pools::Pools::new(&r.profile.pools, &r.profile.throttle);
    let runner =
        StepRunner::new(&ctx, &control, pulumi.as_ref(), &command, &journal).with_pools(&pools);
    // Two observers: the trace first, so a step's TRACEPARENT is set before it starts.
    let emit = |e: RunEvent| {
        trace.event(&e);
        reporter.event(&e);
    };

    let started_ms = now_ms();
    let order: Vec<String> = ctx
        .plan
        .order
        .iter()
        .map(|&i| ctx.plan.nodes[i].path.clone())
        .collect();
    // The last moment a signal stops the run before it starts (the scheduler's watcher
    // answers from here on).
    held.caught.check("before any project started")?;
    let journal_from = std::fs::metadata(journal.path())
        .map(|m| m.len())
        .unwrap_or(0);
    journal.append(&Record::Run {
        run_id: run_id.clone(),
        operation: op.as_str().into(),
        provider: r.profile.name.clone(),
        stack: stack.clone(),
        projects: order.clone(),
        started_at: rfc3339(started_ms),
        command: format!("strata {}", op.as_str()),
    })?;
    emit(RunEvent::RunStarted {
        schema_version: crate::run::events::SCHEMA_VERSION,
        run_id: run_id.clone(),
        operation: op,
        provider: r.profile.name.clone(),
        stack: stack.clone(),
        projects: order,
        parallel: r.req.args.parallel as usize,
    });
    for n in notices {
        emit(RunEvent::Notice { message: n });
    }
    for (path, why) in &unchanged {
        emit(RunEvent::ProjectFinished {
            project: path.clone(),
            operation: op,
            status: Status::Skipped,
            duration_ms: 0,
            message: Some(why.clone()),
            log: None,
            exit_code: None,
            upstream: None,
            changes: None,
        });
    }

    let Held { signals, lock, .. } = held;
    let Ran {
        results,
        interrupted,
        signal,
        killed,
    } = schedule::run(&r.req.args, &ctx, signals, &pools, &runner, &control, &emit);

    // Journal records for the steps that never ran.
    for (i, res) in results.iter().enumerate() {
        if runner.log_path(i).is_none() {
            let record = StepRecord::not_run(res.status, res.message.clone());
            let _ = journal.append(&record.into_record(&run_id, &ctx.plan.nodes[i].path, op));
        }
    }
    if lock.is_some() {
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
    let applied_all = results
        .iter()
        .all(|s| s.status == Status::Succeeded || s.status == Status::Skipped);
    let bundle_mark = match (&r.req.plan, &r.bundle) {
        (Some(dir), Some(m)) if op == Operation::Up && !interrupted && applied_all => {
            crate::bundle::mark_applied(dir, &state_dir, m, &run_id).err()
        }
        _ => None,
    };
    drop(lock);
    let n = ctx.plan.nodes.len();
    let logs = (0..n).map(|i| runner.log_path(i)).collect();
    let tails = (0..n).map(|i| runner.tail(i)).collect();
    let processes = runner.processes();
    let bundle_reads = runner.bundle_reads();
    drop(runner);
    let redactor = ctx.redactor.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(Executed {
        run_id,
        plan: ctx.plan,
        results,
        logs,
        tails,
        unchanged,
        processes,
        started_ms,
        interrupted,
        signal,
        killed,
        redactor,
        journal_from,
        fingerprints: ctx.fingerprints,
        bundle_reads,
        bundle_mark,
        trace,
    })
}
