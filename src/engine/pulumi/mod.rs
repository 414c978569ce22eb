//! The Pulumi engine: one project through the real `pulumi` CLI (duct). One process per
//! project in the steady state: `up --json` streams events that carry the outputs;
//! `stack init` only for a new stack, `stack output --show-secrets` only for a needed
//! secret output that `passphrase` cannot decrypt. A failure put into words is
//! `failure`'s; what is read from a `file://` or `s3://` backend (`source`) without a
//! process is `checkpoint`'s, the layouts strata refuses `layout`'s, and which Pulumi
//! locks strata may clear `locks`'.

mod checkpoint;
mod failure;
mod invoke;
mod layout;
mod locks;
pub mod otel;
mod passphrase;
mod preview;
mod source;
mod stack;

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::descendants;
use super::digest::{self, Changes};
use super::events::EventState;
use super::process::{Captured, Control, Exit, Stream, run_captured, run_streaming_tagged};
use super::{Engine, Failure, Job, Operation, Outcome, PlanFile, Progress, contains_secret_mask};
pub use checkpoint::{checkpoint_resources_and_outputs, checkpoint_stack_missing};
use failure::{call_failed, cancel_command, failure};
pub use invoke::Calls;
use invoke::{Seen, stack_arg, streaming_preview};
pub use layout::layout_problem;
use preview::{plan_errors, preview_changes, preview_summary};
pub use source::{shared_call, shared_where};

pub struct PulumiEngine {
    pub binary: PathBuf,
    /// A traced run's OTLP traces URL, when this CLI takes `--otel-traces`: every call
    /// of a traced step passes it, so Pulumi's spans nest under the step's.
    pub otel_traces: Option<String>,
}

impl PulumiEngine {
    pub fn new(binary: PathBuf) -> PulumiEngine {
        PulumiEngine {
            binary,
            otel_traces: None,
        }
    }
}

impl Engine for PulumiEngine {
    fn run(
        &self,
        job: &Job,
        control: &Control,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Outcome, Failure> {
        let mut calls = Calls {
            job,
            control,
            report,
            procs: 0,
        };
        let plan = match &job.plan {
            Some(PlanFile::Save(f) | PlanFile::Apply(f)) => f.to_string_lossy().into_owned(),
            None => String::new(),
        };
        let op_args: Vec<&str> = match (job.op, &job.plan) {
            // Held to a plan: Pulumi's own preview runs first, so a plan that no longer
            // holds fails before anything is applied (with --skip-preview the resources
            // that still conform would be applied first).
            (Operation::Up, Some(PlanFile::Apply(_))) => {
                vec!["up", "--yes", "--json", "--plan", &plan]
            }
            (Operation::Up, _) => vec!["up", "--yes", "--skip-preview", "--json"],
            (Operation::Destroy, _) => vec!["destroy", "--yes", "--skip-preview", "--json"],
            (Operation::Refresh, _) => vec!["refresh", "--yes", "--skip-preview", "--json"],
            (Operation::Preview, _) => {
                let mut a = vec!["preview", "--json"];
                if job.refresh {
                    a.push("--refresh");
                }
                if let Some(PlanFile::Save(_)) = &job.plan {
                    a.extend(["--save-plan", plan.as_str()]);
                }
                a
            }
        };
        let digest_mode = job.op == Operation::Preview && !streaming_preview(job);
        let held_to_plan = job.op == Operation::Up && matches!(job.plan, Some(PlanFile::Apply(_)));
        // A new stack on a backend strata reads: create it first instead of learning it from a
        // failed operation (a wrong guess only costs an "already exists").
        if matches!(job.op, Operation::Up | Operation::Preview)
            && checkpoint_stack_missing(job) == Some(true)
        {
            self.stack_init(&mut calls)?;
        }
        if matches!(
            job.op,
            Operation::Up | Operation::Destroy | Operation::Refresh
        ) {
            self.clear_stale_lock(&mut calls)?;
        }
        if !job.secret_config.is_empty() && job.op != Operation::Destroy {
            self.set_secret_config(&mut calls)?;
        }
        // While Pulumi updates the stack, the key its secret outputs will need (a
        // dependent's input, a hook) is derived beside it, off the critical path.
        if job.op == Operation::Up && !job.needed_outputs.is_empty() {
            Self::derive_secret_key_early(job);
        }
        // The operation; when Pulumi says the stack does not exist, create it and retry once.
        let mut created = false;
        let (exit, mut seen) = loop {
            calls.stop_if_cancelled()?;
            let mut seen = Seen {
                digest: (digest_mode || held_to_plan).then(String::new),
                digest_then_events: held_to_plan,
                lock_to_note: job.op != Operation::Preview,
                ..Seen::default()
            };
            let exit = self.invoke(&mut calls, self.base(job, &op_args, true), &mut seen)?;
            let missing = !exit.success()
                && Self::is_missing_stack(job, &exit, seen.tail.iter().map(String::as_str))
                && !control.is_cancelled();
            if !missing || created {
                break (exit, seen);
            }
            if matches!(job.op, Operation::Destroy | Operation::Refresh) {
                (calls.report)(Progress::Line(format!(
                    "stack {} of {} does not exist: nothing to {}",
                    job.stack,
                    job.name,
                    job.op.as_str()
                )));
                return Ok(Outcome {
                    summary: "no stack: nothing to do".into(),
                    processes: calls.procs,
                    ..Outcome::default()
                });
            }
            self.stack_init(&mut calls)?;
            if !job.secret_config.is_empty() {
                self.set_secret_config(&mut calls)?;
            }
            created = true;
        };
        let changes =
            (job.op == Operation::Preview).then(|| preview_changes(&mut seen, calls.report));
        if held_to_plan {
            plan_errors(&mut seen, &exit);
        }
        if !exit.success() {
            return Err(failure(
                job,
                job.op.as_str(),
                &exit,
                &seen,
                control,
                calls.procs,
            ));
        }
        let summary = match &changes {
            Some(c) => preview_summary(c),
            None => seen.state.change_summary(),
        };
        let state = seen.state;
        let mut outputs = match job.op {
            Operation::Up => state.stack_outputs.clone().unwrap_or_default(),
            _ => Map::new(),
        };
        let secret_outputs = outputs
            .iter()
            .filter(|(_, v)| contains_secret_mask(v))
            .map(|(k, _)| k.clone())
            .collect();
        let secret_needed = job
            .needed_outputs
            .iter()
            .any(|k| outputs.get(k).is_some_and(contains_secret_mask));
        // A CLI whose events lack an output a dependent needs: ask for the outputs once.
        // On a file or S3 backend with the passphrase provider strata reads them itself.
        let missing_needed =
            job.op == Operation::Up && job.needed_outputs.iter().any(|k| !outputs.contains_key(k));
        if secret_needed || missing_needed {
            outputs = match Self::stack_outputs_from_checkpoint_revealed(job) {
                Some(clear) => clear,
                None => self.stack_outputs(&mut calls, true)?,
            };
        }
        let planned_outputs = match (&job.op, &job.plan) {
            (Operation::Preview, Some(PlanFile::Save(f))) => std::fs::read_to_string(f)
                .ok()
                .and_then(|t| digest::planned_outputs(&t)),
            _ => None,
        };
        Ok(Outcome {
            outputs,
            secret_outputs,
            summary,
            processes: calls.procs,
            changes,
            planned_outputs,
        })
    }
}

#[cfg(test)]
mod backend_tests;
#[cfg(test)]
mod bucket_tests;
#[cfg(test)]
mod tests;
