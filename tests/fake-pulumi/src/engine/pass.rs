//! One simulated pass: its steps' pacing, cancellation and failures, how it closes,
//! and the refresh and destroy passes.

use serde_json::{Map, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};

use super::runner::{Pass, Runner};
use super::{Op, Outcome, hook};
use crate::clock::now_rfc3339;
use crate::display::Display;
use crate::plan::{Plan, Recorder};
use crate::program::STACK_TYPE;
use crate::signals;
use crate::state::Resource;

pub(super) struct PassRun<'a, 'b> {
    pub(super) r: &'a Runner<'b>,
    pub(super) d: Display,
    pub(super) dry_run: bool,
    /// How long each step takes (the hook's delay spread over the steps).
    pub(super) slice: Duration,
    pub(super) stack_urn: String,
    /// `up --plan`: this pass's copy of the plan (its steps are consumed).
    pub(super) check: Option<Plan>,
    /// `preview --save-plan`: what this pass plans.
    pub(super) record: Option<Recorder>,
}

impl PassRun<'_, '_> {
    /// The fail hook applies to its own operation, not to the preview before it.
    pub(super) fn failing(&self) -> bool {
        self.r.failing() && (!self.dry_run || self.r.dry_only)
    }

    pub(super) fn set_slices(&mut self, steps: usize) {
        let total = self.r.delay(self.dry_run);
        self.slice = total / (steps.max(1) as u32);
    }

    /// Sleeps one step's time in small pieces; true if a cancel arrived. A cancel lets
    /// the step in flight complete at once, or after `FAKE_PULUMI_CANCEL_MS` (the time a
    /// graceful cancellation takes, to leave room for a second Ctrl-C).
    pub(super) fn pause(&self) -> bool {
        let mut until = Instant::now() + self.slice;
        let mut seen = false;
        loop {
            let now = Instant::now();
            if !seen && signals::cancelled() {
                seen = true;
                let linger = hook("CANCEL_MS", &self.r.key)
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0);
                until = until.min(now + Duration::from_millis(linger));
            }
            if now >= until {
                return signals::cancelled();
            }
            std::thread::sleep((until - now).min(Duration::from_millis(5)));
        }
    }

    pub(super) fn stack_resource(
        &self,
        old: Option<&Resource>,
        outputs: Map<String, Value>,
    ) -> Resource {
        let now = now_rfc3339();
        Resource {
            urn: self.stack_urn.clone(),
            custom: false,
            id: String::new(),
            ty: STACK_TYPE.into(),
            inputs: Map::new(),
            outputs,
            parent: String::new(),
            dependencies: Vec::new(),
            provider: String::new(),
            created: old
                .map(|o| o.created.clone())
                .unwrap_or_else(|| now.clone()),
            modified: now,
        }
    }

    /// Records a failing step: resource diagnostic, resOpFailedEvent, the run's error.
    pub(super) fn fail_step(
        &mut self,
        op: &str,
        old: Option<&Resource>,
        new: Option<&Resource>,
        msg: &str,
    ) {
        let urn = new.or(old).map(|r| r.urn.clone()).unwrap_or_default();
        self.d.diag(&urn, "error", msg);
        self.d.failed(op, old, new);
    }

    pub(super) fn fail_message(&self) -> String {
        if let Ok(text) = std::env::var("FAKE_PULUMI_FAIL_MESSAGE") {
            return text;
        }
        format!(
            "fake-pulumi: simulated failure of `{}` (FAKE_PULUMI_FAIL_{})",
            self.r.op.hook_name(),
            self.r.key
        )
    }

    /// The run's closing diagnostic, summary and cancelEvent.
    pub(super) fn close(&mut self, outcome: Outcome, outputs: Option<&Map<String, Value>>) {
        if outcome == Outcome::Failed {
            let what = if self.dry_run {
                "preview"
            } else {
                self.r.op.kind()
            };
            let urn = self.stack_urn.clone();
            self.d.diag(&urn, "error", &format!("{what} failed"));
        }
        let destroyed = (self.r.op == Op::Destroy && outcome == Outcome::Ok && !self.dry_run)
            .then_some(self.r.st.name.as_str());
        self.d.finish(outputs, destroyed);
    }

    pub(super) fn refresh(&mut self) -> Pass {
        let r = self.r;
        self.set_slices(r.old.len());
        let fail = self.failing();
        let mut outcome = Outcome::Ok;
        for (i, x) in r.old.iter().enumerate() {
            if signals::cancelled() {
                outcome = Outcome::Cancelled;
                break;
            }
            self.d.pre("refresh", Some(x), Some(x));
            let interrupted = self.pause();
            if fail && i + 1 == r.old.len() {
                let msg = self.fail_message();
                self.fail_step("refresh", Some(x), Some(x), &msg);
                outcome = Outcome::Failed;
                break;
            }
            self.d.done("same", Some(x), Some(x));
            if interrupted {
                outcome = Outcome::Cancelled;
                break;
            }
        }
        if fail && r.old.is_empty() {
            outcome = Outcome::Failed;
        }
        self.close(outcome, None);
        Pass {
            outcome,
            resources: r.old.clone(),
            changed: false,
            recorded: None,
        }
    }

    pub(super) fn destroy(&mut self) -> Pass {
        let r = self.r;
        // Resources in reverse order, the stack resource last.
        let mut order: Vec<&Resource> = r.old.iter().filter(|x| x.ty != STACK_TYPE).rev().collect();
        order.extend(r.old.iter().filter(|x| x.ty == STACK_TYPE));
        self.set_slices(order.len());
        let fail = self.failing();
        let fail_at = order
            .iter()
            .rposition(|x| x.ty != STACK_TYPE)
            .or(order.len().checked_sub(1));
        let mut deleted: HashSet<String> = HashSet::new();
        let mut outcome = Outcome::Ok;
        for (i, x) in order.iter().enumerate() {
            if signals::cancelled() {
                outcome = Outcome::Cancelled;
                break;
            }
            self.d.pre("delete", Some(x), None);
            let interrupted = self.pause();
            if fail && Some(i) == fail_at {
                let msg = self.fail_message();
                self.fail_step("delete", Some(x), None, &msg);
                outcome = Outcome::Failed;
                break;
            }
            self.d.done("delete", Some(x), None);
            deleted.insert(x.urn.clone());
            if interrupted {
                outcome = Outcome::Cancelled;
                break;
            }
        }
        if fail && order.is_empty() {
            outcome = Outcome::Failed;
        }
        self.close(outcome, None);
        Pass {
            outcome,
            resources: r
                .old
                .iter()
                .filter(|x| !deleted.contains(&x.urn))
                .cloned()
                .collect(),
            changed: !deleted.is_empty(),
            recorded: None,
        }
    }
}
