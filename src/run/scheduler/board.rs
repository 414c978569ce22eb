//! What each step of a running plan has come to (waiting, running, done and how), which
//! steps may start, and which never can: the scheduler's bookkeeping. A step's end looks
//! only at the steps that need it, so a run's bookkeeping grows with its edges, not with
//! the square of its steps.

use std::collections::BTreeSet;

use super::{Options, StepResult, describe, finish};
use crate::engine::{Control, Operation};
use crate::plan::Plan;
use crate::run::events::{RunEvent, Status};

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    /// Ran and shown, its journal record not yet on disk: what needs it waits.
    Settling,
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
    /// Steps that ran whose journal record is not on disk yet, with its number.
    unsettled: Vec<(usize, u64)>,
    stopped_by_failure: bool,
    /// Each step's place in the plan's order (`usize::MAX`: not in it).
    place: Vec<usize>,
    /// Who needs each step: `needed_by[starts[i]..starts[i + 1]]`.
    needed_by: Vec<usize>,
    starts: Vec<usize>,
    /// The places of waiting steps whose needs are met: they start, in the plan's
    /// order, as the `parallel` and their pools allow.
    ready: BTreeSet<usize>,
    /// The places of waiting steps a need of which ended without succeeding.
    doomed: BTreeSet<usize>,
}

impl<'p> Board<'p> {
    pub(super) fn new(plan: &'p Plan, opts: Options) -> Board<'p> {
        let n = plan.nodes.len();
        let mut place = vec![usize::MAX; n];
        for (p, &i) in plan.order.iter().enumerate() {
            place[i] = p;
        }
        let (needed_by, starts) = needed_by(plan);
        let mut board = Board {
            plan,
            opts,
            state: vec![State::Pending; n],
            satisfied: vec![false; n],
            results: vec![None; n],
            running: 0,
            unsettled: Vec::new(),
            stopped_by_failure: false,
            place,
            needed_by,
            starts,
            ready: BTreeSet::new(),
            doomed: BTreeSet::new(),
        };
        board.ready = (0..plan.order.len())
            .filter(|&p| board.is_ready(plan.order[p]))
            .collect();
        board
    }

    /// The first step, after place `after` in the plan's order, that may start when there
    /// is room: its place and its index.
    pub(super) fn next_ready(&self, after: Option<usize>) -> Option<(usize, usize)> {
        let from = after.map_or(0, |p| p + 1);
        let p = *self.ready.range(from..).next()?;
        Some((p, self.plan.order[p]))
    }

    /// How many steps run now.
    pub(super) fn running(&self) -> usize {
        self.running
    }

    /// Whether a step that ran waits for its record to be on disk.
    pub(super) fn settling(&self) -> bool {
        !self.unsettled.is_empty()
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
        // In the plan's order; a step ended here dooms those that need it, later in it.
        while let Some(p) = self.doomed.pop_first() {
            let i = plan.order[p];
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
    fn is_ready(&self, i: usize) -> bool {
        self.state[i] == State::Pending
            && self.plan.nodes[i].needs.iter().all(|&j| {
                self.satisfied[j] || (self.passes(i, j) && matches!(self.state[j], State::Done(_)))
            })
    }

    /// Step `i` starts.
    pub(super) fn start(&mut self, i: usize) {
        self.state[i] = State::Running;
        self.ready.remove(&self.place[i]);
        self.running += 1;
    }

    /// Step `i`, which ran, ended with `r`: shown and kept; a failure stops what has not
    /// started yet (unless `--keep-going`).
    pub(super) fn ended(&mut self, i: usize, r: StepResult, emit: &(dyn Fn(RunEvent) + Sync)) {
        self.stop_running(i, &r);
        self.done(i, r, emit);
    }

    /// Step `i` ran and ended with `r`, its journal record written but not yet on disk:
    /// shown and kept, its place among the `parallel` free, a failure stops what has not
    /// started yet; what needs it waits until [`Board::settled`] covers its record.
    pub(super) fn ran(&mut self, i: usize, r: StepResult, emit: &(dyn Fn(RunEvent) + Sync)) {
        self.stop_running(i, &r);
        self.unsettled.push((i, r.record.unwrap_or(0)));
        finish(emit, self.plan, i, self.opts.operation, &r);
        self.results[i] = Some(r);
        self.state[i] = State::Settling;
    }

    /// The journal records up to number `upto` are on disk: their steps are done, and
    /// what needs them may start.
    pub(super) fn settled(&mut self, upto: u64) {
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.unsettled)
            .into_iter()
            .partition(|(_, record)| *record <= upto);
        self.unsettled = later;
        for (i, _) in now {
            self.mark_done(i);
        }
    }

    fn stop_running(&mut self, i: usize, r: &StepResult) {
        debug_assert!(self.state[i] == State::Running);
        self.running -= 1;
        if r.status == Status::Failed {
            self.stopped_by_failure = true;
        }
    }

    fn done(&mut self, i: usize, r: StepResult, emit: &(dyn Fn(RunEvent) + Sync)) {
        finish(emit, self.plan, i, self.opts.operation, &r);
        self.results[i] = Some(r);
        self.mark_done(i);
    }

    /// Step `i`, its result kept, is done: what needs it may start (or never will).
    fn mark_done(&mut self, i: usize) {
        let (status, unchanged) = match &self.results[i] {
            Some(r) => (r.status, r.unchanged),
            None => (Status::Skipped, false),
        };
        self.satisfied[i] = status == Status::Succeeded || unchanged;
        self.state[i] = State::Done(status);
        self.ready.remove(&self.place[i]);
        for e in self.starts[i]..self.starts[i + 1] {
            let d = self.needed_by[e];
            if self.state[d] != State::Pending || self.place[d] == usize::MAX {
                continue;
            }
            if !self.satisfied[i] {
                self.doomed.insert(self.place[d]);
            }
            if self.is_ready(d) {
                self.ready.insert(self.place[d]);
            }
        }
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

/// Who needs each step of `plan`, as one list and where each step's part of it starts
/// (`needed_by[starts[i]..starts[i + 1]]`): one allocation, not one per step.
fn needed_by(plan: &Plan) -> (Vec<usize>, Vec<usize>) {
    let n = plan.nodes.len();
    let mut starts = vec![0usize; n + 1];
    for node in &plan.nodes {
        for &j in &node.needs {
            starts[j + 1] += 1;
        }
    }
    for i in 0..n {
        starts[i + 1] += starts[i];
    }
    let mut next = starts.clone();
    let mut needed_by = vec![0usize; starts[n]];
    for (i, node) in plan.nodes.iter().enumerate() {
        for &j in &node.needs {
            needed_by[next[j]] = i;
            next[j] += 1;
        }
    }
    (needed_by, starts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(yaml: &str) -> Plan {
        crate::plan::testing::plan_of(&format!("description: d\ninfra_type: T\n{yaml}"), &[])
            .unwrap()
    }

    const CHAIN: &str = "infrastructure:\n  - path: a\n  - path: b\n    needs: [a]\n  - path: c\n    needs: [b]\n  - path: d\n    needs: []\n  - path: e\n    needs: [a, d]\n";

    fn opts(keep_going: bool) -> Options {
        Options {
            parallel: 4,
            keep_going,
            operation: Operation::Up,
        }
    }

    fn ready(board: &Board) -> Vec<String> {
        let mut out = Vec::new();
        let mut after = None;
        while let Some((p, i)) = board.next_ready(after) {
            out.push(board.plan.nodes[i].path.clone());
            after = Some(p);
        }
        out
    }

    #[test]
    fn who_needs_each_step_is_read_from_one_list() {
        let p = plan(CHAIN);
        let (needed_by, starts) = needed_by(&p);
        let of = |path: &str| {
            let i = p.index_of(path).unwrap();
            let mut d: Vec<&str> = needed_by[starts[i]..starts[i + 1]]
                .iter()
                .map(|&k| p.nodes[k].path.as_str())
                .collect();
            d.sort();
            d
        };
        assert_eq!(of("a"), ["b", "e"]);
        assert_eq!(of("b"), ["c"]);
        assert_eq!(of("d"), ["e"]);
        assert!(of("c").is_empty() && of("e").is_empty());
    }

    /// Steps become ready as what they need succeeds; a failure ends, in the plan's
    /// order, every step that can no longer run, down the chain, and nothing else.
    #[test]
    fn a_step_that_ends_readies_or_ends_only_what_needs_it() {
        let p = plan(CHAIN);
        let mut board = Board::new(&p, opts(false));
        assert_eq!(ready(&board), ["a", "d"]);
        let (a, d) = (p.index_of("a").unwrap(), p.index_of("d").unwrap());
        board.start(a);
        board.start(d);
        assert!(ready(&board).is_empty());
        let events = std::sync::Mutex::new(Vec::new());
        let emit = |e: RunEvent| {
            if let RunEvent::ProjectFinished {
                project, message, ..
            } = e
            {
                events
                    .lock()
                    .unwrap()
                    .push(format!("{project}: {message:?}"));
            }
        };
        board.ended(d, StepResult::not_run(Status::Succeeded, ""), &emit);
        assert!(ready(&board).is_empty(), "e still needs a");
        board.ended(a, StepResult::not_run(Status::Failed, "boom"), &emit);
        board.end_unreachable(&Control::new(), &emit);
        assert!(ready(&board).is_empty());
        let events = events.into_inner().unwrap();
        assert_eq!(
            events[2..],
            [
                "b: Some(\"not run: needs a, which failed\")",
                "c: Some(\"not run: needs b, which did not run\")",
                "e: Some(\"not run: needs a, which failed\")",
            ]
        );
        assert!(board.state.iter().all(|s| matches!(s, State::Done(_))));
    }
}
