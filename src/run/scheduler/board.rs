//! What each step of a running plan has come to (waiting, running, done and how), which
//! steps may start, and which never can: the scheduler's bookkeeping.

use super::{Options, StepResult, describe, finish};
use crate::engine::{Control, Operation};
use crate::plan::Plan;
use crate::run::events::{RunEvent, Status};

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    Done(Status),
}

/// Each step's state and result, and how many run now.
pub(super) struct Board<'p> {
    plan: &'p Plan,
    opts: Options,
    state: Vec<State>,
    /// Succeeded, or skipped by `--changed` because nothing it reads changed.
    satisfied: Vec<bool>,
    results: Vec<Option<StepResult>>,
    running: usize,
    stopped_by_failure: bool,
}

impl<'p> Board<'p> {
    pub(super) fn new(plan: &'p Plan, opts: Options) -> Board<'p> {
        let n = plan.nodes.len();
        Board {
            plan,
            opts,
            state: vec![State::Pending; n],
            satisfied: vec![false; n],
            results: vec![None; n],
            running: 0,
            stopped_by_failure: false,
        }
    }

    /// How many steps run now.
    pub(super) fn running(&self) -> usize {
        self.running
    }

    /// `--keep-going`: a step that waits for `j` only because of the stage barrier runs
    /// once `j` has ended, however it ended: it does not need what failed.
    fn passes(&self, i: usize, j: usize) -> bool {
        self.opts.keep_going
            && self.opts.operation != Operation::Destroy
            && self.plan.waits_only_for_the_barrier(i, j)
    }

    /// Ends every waiting step a prerequisite of which ended without succeeding: it can
    /// never run (cancelled when the run was, skipped otherwise).
    pub(super) fn end_unreachable(&mut self, control: &Control, emit: &(dyn Fn(RunEvent) + Sync)) {
        let plan = self.plan;
        for &i in &plan.order {
            if self.state[i] != State::Pending {
                continue;
            }
            let blocked = plan.nodes[i].needs.iter().find(|&&j| {
                matches!(self.state[j], State::Done(_)) && !self.satisfied[j] && !self.passes(i, j)
            });
            let Some(&j) = blocked else {
                continue;
            };
            let s = match self.state[j] {
                State::Done(s) => s,
                _ => Status::Skipped,
            };
            let status = if s == Status::Cancelled || control.is_cancelled() {
                Status::Cancelled
            } else {
                Status::Skipped
            };
            let why = format!(
                "not run: needs {}, which {}",
                plan.nodes[j].path,
                describe(s)
            );
            self.done(i, StepResult::not_run(status, why), emit);
        }
    }

    /// Whether no more steps may start: Ctrl-C, or a failure without `--keep-going`.
    pub(super) fn stopped(&self, control: &Control) -> bool {
        control.is_cancelled() || (self.stopped_by_failure && !self.opts.keep_going)
    }

    /// Whether step `i` waits and what it needs has succeeded (or, under `--keep-going`,
    /// ended, when it waits for it only because of the stage barrier).
    pub(super) fn is_ready(&self, i: usize) -> bool {
        self.state[i] == State::Pending
            && self.plan.nodes[i].needs.iter().all(|&j| {
                self.satisfied[j] || (self.passes(i, j) && matches!(self.state[j], State::Done(_)))
            })
    }

    /// Step `i` starts.
    pub(super) fn start(&mut self, i: usize) {
        self.state[i] = State::Running;
        self.running += 1;
    }

    /// Step `i`, which ran, ended with `r`: shown and kept; a failure stops what has not
    /// started yet (unless `--keep-going`).
    pub(super) fn ended(&mut self, i: usize, r: StepResult, emit: &(dyn Fn(RunEvent) + Sync)) {
        self.running -= 1;
        if r.status == Status::Failed {
            self.stopped_by_failure = true;
        }
        self.done(i, r, emit);
    }

    fn done(&mut self, i: usize, r: StepResult, emit: &(dyn Fn(RunEvent) + Sync)) {
        finish(emit, self.plan, i, self.opts.operation, &r);
        self.satisfied[i] = r.status == Status::Succeeded || r.unchanged;
        self.state[i] = State::Done(r.status);
        self.results[i] = Some(r);
    }

    /// One result per step: those that never started end as cancelled (Ctrl-C) or
    /// skipped (after a failure), and are shown so.
    pub(super) fn into_results(
        mut self,
        control: &Control,
        emit: &(dyn Fn(RunEvent) + Sync),
    ) -> Vec<StepResult> {
        let plan = self.plan;
        for &i in &plan.order {
            if self.results[i].is_some() {
                continue;
            }
            let r = if control.is_cancelled() {
                StepResult::not_run(Status::Cancelled, "not started: the run was interrupted")
            } else {
                StepResult::not_run(
                    Status::Skipped,
                    "not started: the run stopped after a failure (use --keep-going to run independent projects)",
                )
            };
            finish(emit, plan, i, self.opts.operation, &r);
            self.results[i] = Some(r);
        }
        self.results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| StepResult::not_run(Status::Skipped, "")))
            .collect()
    }
}
