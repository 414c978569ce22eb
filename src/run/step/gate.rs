//! A project an `approve:` rule holds: its plan kept at the gate until someone approves
//! it (`strata approve`), then applied as approved while a fresh preview plans the same
//! changes; the gate is cleared once the update went out.

use std::path::Path;

use super::{Ran, StepRunner};
use crate::engine::digest::Changes;
use crate::engine::{PlanFile, Progress};
use crate::gates::approvals::{Held, Summary};
use crate::gates::denial::Denial;
use crate::run::events::Status;

impl StepRunner<'_> {
    /// The approved plan to apply when the plan `saved` (of `changes`) is the one
    /// approved; otherwise it is held (replacing what was held) and the step ends
    /// `awaiting`, saying how to approve it.
    pub(super) fn at_the_gate(
        &self,
        i: usize,
        saved: &Path,
        changes: Changes,
        hold: Denial,
        sink: &mut dyn FnMut(Progress),
    ) -> Result<PlanFile, Box<Ran>> {
        let path = &self.ctx.plan.nodes[i].path;
        let gate = self.ctx.gate(path);
        let summary = Summary::of(&changes);
        let why = match gate.approval() {
            Some((held, a)) if held.summary == summary && gate.holds_the_same_plan_as(saved) => {
                sink(Progress::Line(format!(
                    "applying the plan {} approved at {} ({})",
                    a.by,
                    a.at,
                    summary.short()
                )));
                return Ok(PlanFile::Apply(gate.plan_file()));
            }
            Some((held, a)) => format!(
                "the plan changed since it was approved by {} at {} ({}): a new approval is needed",
                a.by,
                a.at,
                held.summary.changed_to(&summary)
            ),
            None => hold.describe_hold(),
        };
        let mut held = Held {
            project: path.clone(),
            stack: self.ctx.stack.clone(),
            run_id: self.ctx.run_id.clone(),
            rule: hold.rule.clone(),
            reason: hold.reason.clone(),
            digest: String::new(),
            summary,
            held_at: crate::util::rfc3339(crate::util::now_ms()),
        };
        if let Err(e) = gate.hold(saved, &mut held) {
            return Err(Box::new(Ran::new(
                Status::Failed,
                Some(format!(
                    "cannot keep the plan for its approval: {}",
                    e.message
                )),
                None,
            )));
        }
        Err(Box::new(Ran {
            changes: Some(changes),
            awaiting: Some(Box::new(hold)),
            ..Ran::new(
                Status::Awaiting,
                Some(format!(
                    "{why}; nothing was changed. Approve it with `strata approve {path} -p {} -s {}`",
                    self.ctx.provider, self.ctx.stack
                )),
                None,
            )
        }))
    }

    /// After an update of a held project went out: what was held (and approved) is
    /// spent.
    pub(super) fn clear_gate(&self, path: &str) {
        let _ = self.ctx.gate(path).clear();
    }
}
