//! The run's steps under the scheduler, in parallel where the graph allows (a preview's
//! with no order), and the signal watcher on a thread beside it.

use std::borrow::Cow;

use signal_hook::iterator::Signals;

use crate::engine::{Control, Operation};
use crate::plan::Plan;
use crate::run::done::Done;
use crate::run::events::RunEvent;
use crate::run::pools::Pools;
use crate::run::scheduler::{self, StepResult};
use crate::run::signals;
use crate::run::step::{Ctx, StepRunner};

use super::super::RunOptions;

/// How the scheduler left the run.
pub(super) struct Ran {
    /// Per step of the plan.
    pub results: Vec<StepResult>,
    pub interrupted: bool,
    /// The signal that interrupted the run.
    pub signal: Option<i32>,
    pub killed: bool,
}

/// Runs the plan's steps through `runner` until they are done or a signal stops them;
/// then kills what is left, so that nothing survives the run.
pub(super) fn run(
    args: &RunOptions,
    ctx: &Ctx,
    signals: Signals,
    pools: &Pools,
    runner: &StepRunner,
    control: &Control,
    emit: &(dyn Fn(RunEvent) + Sync),
) -> Ran {
    let grace = signals::grace(&ctx.env);
    let done = Done::new();
    // A preview changes nothing, so it needs no order: every project starts at once
    // (bounded by -j), reading its upstreams' outputs as they are now, and one failed
    // preview does not hide what the others would change. The one order a preview
    // keeps is a projection's (an upstream never deployed, whose preview's known
    // outputs a downstream takes): that downstream waits for that upstream's preview
    // at run time (`run::step::projection`), since only then is it known that the
    // upstream was never deployed; steps still start in the plan's order, which is
    // what keeps that wait from deadlocking.
    let preview = ctx.op == Operation::Preview;
    let sched_plan = if preview {
        Cow::Owned(unordered(&ctx.plan))
    } else {
        // Not copied: the plan of thousands of projects is large.
        Cow::Borrowed(&*ctx.plan)
    };
    let opts = scheduler::Options {
        parallel: args.parallel as usize,
        keep_going: args.keep_going || preview,
        operation: ctx.op,
    };
    let handle = signals.handle();
    let results = std::thread::scope(|s| {
        s.spawn(|| signals::watch(signals, control, &done, grace, emit));
        // Set however the scheduler's thread ends: were it to unwind (a panic while an
        // event is shown), the watcher must end too, or the scope waits for it forever.
        let _done = done.on_drop();
        scheduler::run(&sched_plan, opts, pools, runner, control, emit)
    });
    handle.close();
    let ran = Ran {
        results,
        interrupted: control.is_cancelled(),
        signal: control.signal(),
        killed: control.is_killed(),
    };
    // Nothing may survive the run.
    control.kill();
    ran
}

/// The same steps with no order between them (a preview).
fn unordered(plan: &Plan) -> Plan {
    let mut flat = plan.clone();
    for n in &mut flat.nodes {
        n.needs.clear();
    }
    flat
}
