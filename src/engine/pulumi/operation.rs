//! The steps of one Pulumi operation of one project, in the order `PulumiEngine::run`
//! takes them: the stack made ready (created, its stale lock cleared, its secret config
//! set, its secret key derived early), the call itself with its arguments (retried once
//! after creating a stack Pulumi says is missing), and the outcome (the outputs a
//! dependent or hook needs, revealed when secret).

use serde_json::Map;

use super::PulumiEngine;
use super::checkpoint_stack_missing;
use super::invoke::{Calls, Seen, streaming_preview};
use super::preview::preview_summary;
use crate::engine::digest::{self, Changes};
use crate::engine::process::Exit;
use crate::engine::{Failure, Job, Operation, Outcome, PlanFile, Progress, contains_secret_mask};

/// The summary of a preview whose output says nothing of its changes (see
/// `preview_changes`): they are unknown, not none.
pub(crate) const UNREAD: &str = "the preview's output could not be read: its changes are unknown";

/// An `up` held to a saved plan (`up --plan`).
pub(super) fn held_to_plan(job: &Job) -> bool {
    job.op == Operation::Up && matches!(job.plan, Some(PlanFile::Apply(_)))
}

/// The Pulumi command of the job's operation, `plan` being the plan file's path.
fn operation_args<'a>(job: &Job, plan: &'a str) -> Vec<&'a str> {
    match (job.op, &job.plan) {
        // Held to a plan: Pulumi's own preview runs first, so a plan that no longer
        // holds fails before anything is applied (with --skip-preview the resources
        // that still conform would be applied first).
        (Operation::Up, Some(PlanFile::Apply(_))) => {
            vec!["up", "--yes", "--json", "--plan", plan]
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
                a.extend(["--save-plan", plan]);
            }
            a
        }
    }
}

impl PulumiEngine {
    /// Readies the job's stack before its operation: a new stack on a backend strata reads
    /// is created first (instead of learning it from a failed operation; a wrong guess
    /// only costs an "already exists"), a stale Pulumi lock is cleared, the secret config
    /// is set, and an `up` starts deriving the key its secret outputs will need.
    pub(super) fn prepare_stack(&self, calls: &mut Calls) -> Result<(), Failure> {
        let job = calls.job;
        if matches!(job.op, Operation::Up | Operation::Preview)
            && checkpoint_stack_missing(job) == Some(true)
        {
            self.stack_init(calls)?;
        }
        if matches!(
            job.op,
            Operation::Up | Operation::Destroy | Operation::Refresh
        ) {
            self.clear_stale_lock(calls)?;
        }
        if !job.secret_config.is_empty() && job.op != Operation::Destroy {
            self.set_secret_config(calls)?;
        }
        // While Pulumi updates the stack, the key its secret outputs will need (a
        // dependent's input, a hook) is derived beside it, off the critical path.
        if job.op == Operation::Up && !job.needed_outputs.is_empty() {
            Self::derive_secret_key_early(job);
        }
        Ok(())
    }

    /// The operation's call and what it saw; when Pulumi says the stack does not exist,
    /// an `up` or `preview` creates it and tries once more, and a `destroy` or `refresh`
    /// has nothing to do (`None`, said on the step's log).
    pub(super) fn operate(&self, calls: &mut Calls) -> Result<Option<(Exit, Seen)>, Failure> {
        let job = calls.job;
        let plan = match &job.plan {
            Some(PlanFile::Save(f) | PlanFile::Apply(f)) => f.to_string_lossy().into_owned(),
            None => String::new(),
        };
        let args = self.base(job, &operation_args(job, &plan), true);
        let digest_mode = job.op == Operation::Preview && !streaming_preview(job);
        let held = held_to_plan(job);
        let mut created = false;
        loop {
            calls.stop_if_cancelled()?;
            let mut seen = Seen {
                state: crate::engine::events::EventState {
                    preview: job.op == Operation::Preview,
                    ..Default::default()
                },
                digest: (digest_mode || held).then(String::new),
                digest_then_events: held,
                lock_to_note: job.op != Operation::Preview,
                ..Seen::default()
            };
            let exit = self.invoke(calls, args.clone(), &mut seen)?;
            let missing = !exit.success()
                && Self::is_missing_stack(job, &exit, seen.tail.iter().map(String::as_str))
                && !calls.control.is_cancelled();
            if !missing || created {
                return Ok(Some((exit, seen)));
            }
            if matches!(job.op, Operation::Destroy | Operation::Refresh) {
                (calls.report)(Progress::Line(format!(
                    "stack {} of {} does not exist: nothing to {}",
                    job.stack,
                    job.name,
                    job.op.as_str()
                )));
                return Ok(None);
            }
            self.stack_init(calls)?;
            if !job.secret_config.is_empty() {
                self.set_secret_config(calls)?;
            }
            created = true;
        }
    }

    /// What a successful operation leaves: its summary, the stack's outputs after an `up`
    /// (asked for once more, revealed, when a needed one is secret or the events lacked
    /// it), and a saved plan's planned outputs.
    pub(super) fn outcome(
        &self,
        calls: &mut Calls,
        seen: Seen,
        changes: Option<Changes>,
    ) -> Result<Outcome, Failure> {
        let job = calls.job;
        let mut summary = match &changes {
            Some(c) => preview_summary(c),
            None if job.op == Operation::Preview => UNREAD.into(),
            None => seen.state.change_summary(),
        };
        if job.op == Operation::Preview && calls.created_stack {
            summary.push_str(&format!(
                " · created the missing stack {} (empty) in the backend",
                job.stack
            ));
        }
        let mut outputs = match job.op {
            Operation::Up => seen.state.stack_outputs.unwrap_or_default(),
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
                None => self.stack_outputs(calls, true)?,
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
