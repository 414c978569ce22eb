//! A project's planned changes held to the `policy:` rules that select it: the first rule
//! that denies them, in the order the profile writes them, and why.

use std::sync::Arc;

use super::{Ran, StepRunner};
use crate::engine::digest::{self, Changes};
use crate::engine::{Job, Operation, PlanFile, Progress};
use crate::gates::denial::Denial;
pub(super) use crate::gates::rules::foresee;
use crate::gates::rules::{holds, judge, unread};
use crate::run::events::{RunEvent, Status};
use crate::workspace::ProjectKind;
use crate::workspace::profile::{Entry, Rule};

impl StepRunner<'_> {
    /// Before an `up` of a project that rules hold: its preview, saved as a Pulumi update
    /// plan, held to the rules. Denied: the step ends `denied` and nothing is changed.
    /// Let go: the plan the `up` must keep to, so that what goes out is what was judged.
    /// Held by an `approve:` rule: see `at_the_gate`.
    pub(super) fn hold_to_rules(
        &self,
        i: usize,
        entry: &Entry,
        kind: &ProjectKind,
        job: &Job,
        emit: &(dyn Fn(RunEvent) + Sync),
        sink: &mut dyn FnMut(Progress),
    ) -> Result<PlanFile, Box<Ran>> {
        let file = job.scratch_dir.join("policy-plan.json");
        if let Err(e) = std::fs::create_dir_all(&job.scratch_dir) {
            return Err(Box::new(Ran::new(
                Status::Failed,
                Some(format!(
                    "cannot create {} for the plan its rules check: {e}",
                    job.scratch_dir.display()
                )),
                None,
            )));
        }
        let mut preview = job.clone();
        preview.op = Operation::Preview;
        preview.plan = Some(PlanFile::Save(file.clone()));
        sink(Progress::Line(format!(
            "previewing for policy rule(s) {}",
            self.ctx.plan.nodes[i]
                .rules
                .iter()
                .map(|r| r.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
        let (outcome, _) = self.attempt(i, entry, kind, &preview, emit, sink)?;
        let node = &self.ctx.plan.nodes[i];
        // What the preview printed, else the plan it saved (the one the `up` would
        // apply); when neither can be read the changes are unknown and the project is
        // refused: a gate never takes what it cannot read for "no changes".
        let changes = outcome.changes.or_else(|| {
            std::fs::read_to_string(&file)
                .ok()
                .and_then(|t| digest::plan_changes(&t))
        });
        let Some(mut changes) = changes else {
            return Err(Box::new(Ran {
                denied: Some(Box::new(unread(&node.rules, &node.path))),
                ..Ran::new(
                    Status::Denied,
                    Some(format!(
                        "{}; nothing was changed",
                        unread(&node.rules, &node.path).describe()
                    )),
                    None,
                )
            }));
        };
        crate::gates::contracts::count_into(&mut changes, &self.broken_reads(job, &file, sink));
        match judge(&node.rules, &changes) {
            Some(d) => Err(denied(d, changes)),
            None => match holds(&self.ctx.plan.nodes[i].rules, &changes) {
                Some(hold) => self.at_the_gate(i, &file, changes, hold, sink),
                None => Ok(PlanFile::Apply(file)),
            },
        }
    }
}

/// `up --plan BUNDLE`: the bundle's plan of a held project, judged as recorded (the
/// changes its resource plans name); the plan to apply, or the step `denied`.
pub(super) fn hold_bundle_to_rules(
    rules: &[Arc<Rule>],
    bundled: &PlanFile,
) -> Result<PlanFile, Box<Ran>> {
    let PlanFile::Apply(file) = bundled else {
        return Ok(bundled.clone());
    };
    let read = std::fs::read_to_string(file).ok();
    let Some(changes) = read.as_deref().and_then(digest::plan_changes) else {
        return Err(Box::new(Ran::new(
            Status::Failed,
            Some(format!(
                "cannot read the bundle's plan {} to hold it to its policy rules; nothing was changed. Make the bundle again with `strata preview --save-plan`.",
                file.display()
            )),
            None,
        )));
    };
    match judge(rules, &changes) {
        Some(d) => Err(denied(d, changes)),
        None => Ok(bundled.clone()),
    }
}

/// The step a rule denied: nothing changed, the rule and its resources said.
fn denied(d: Denial, changes: Changes) -> Box<Ran> {
    Box::new(Ran {
        changes: Some(changes),
        denied: Some(Box::new(d.clone())),
        ..Ran::new(
            Status::Denied,
            Some(format!("{}; nothing was changed", d.describe())),
            None,
        )
    })
}
