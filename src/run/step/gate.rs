//! A project whose plan waits at its gate — one an `approve:` rule holds, or one an
//! `up --plan` held because its real plan was not the one reviewed: its plan kept until
//! someone approves it (`strata approve`), then applied as approved while a fresh
//! preview plans the same changes; the gate is cleared once the update went out.

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

    /// A project without rules whose plan waits at its gate in this checkout (an `up
    /// --plan` held it: its plan on real outputs was not the one reviewed): previewed
    /// again, and its approved plan applied when the fresh preview plans the same, else
    /// held again. `None` when nothing waits there.
    pub(super) fn hold_at_its_gate(
        &self,
        i: usize,
        job: &crate::engine::Job,
        emit: &(dyn Fn(crate::run::events::RunEvent) + Sync),
        sink: &mut dyn FnMut(Progress),
    ) -> Result<Option<PlanFile>, Box<Ran>> {
        let gate = self.ctx.gate(&job.path);
        if !gate.holds_here() {
            return Ok(None);
        }
        let Ok(Some(held)) = gate.held() else {
            return Ok(None);
        };
        sink(Progress::Line(format!(
            "a plan of it waits at its gate ({}): previewing it again",
            held.reason
        )));
        let file = job.scratch_dir.join("gate-plan.json");
        let changes = self.preview_saving(i, job, &file, emit, sink)?;
        let hold = Denial {
            rule: held.rule,
            reason: held.reason,
            resources: Vec::new(),
        };
        self.at_the_gate(i, &file, changes, hold, sink).map(Some)
    }

    /// A preview of step `i`'s `job` that saves its update plan at `file`: the changes it
    /// plans (as it printed them, else as the plan says).
    pub(super) fn preview_saving(
        &self,
        i: usize,
        job: &crate::engine::Job,
        file: &Path,
        emit: &(dyn Fn(crate::run::events::RunEvent) + Sync),
        sink: &mut dyn FnMut(Progress),
    ) -> Result<Changes, Box<Ran>> {
        let node = &self.ctx.plan.nodes[i];
        let (Some(entry), Some(project)) = (&node.entry, &node.project) else {
            return Err(Box::new(Ran::new(
                Status::Failed,
                Some("not a project".into()),
                None,
            )));
        };
        let (entry, kind) = (entry, &project.kind);
        let _ = crate::files::private_dir(&job.scratch_dir);
        let mut preview = job.clone();
        preview.op = crate::engine::Operation::Preview;
        preview.plan = Some(PlanFile::Save(file.to_path_buf()));
        let (outcome, _) = self.attempt(i, entry, kind, &preview, emit, sink)?;
        Ok(outcome.changes.unwrap_or_else(|| {
            std::fs::read_to_string(file)
                .ok()
                .and_then(|t| crate::engine::digest::plan_changes(&t))
                .unwrap_or_default()
        }))
    }

    /// After an update of a held project went out: what was held (and approved) is
    /// spent.
    pub(super) fn clear_gate(&self, path: &str) {
        let _ = self.ctx.gate(path).clear();
    }
}
