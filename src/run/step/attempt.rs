//! How a step runs: through its engine, under its policy (a timeout, retries on matching
//! output, the grace before a kill), cancelled with the run; each retry is shown,
//! emitted and journaled.

use std::sync::atomic::Ordering;

use super::{Ran, StepRunner};
use crate::engine::{Engine, Failure, Job, Outcome, Progress};
use crate::run::events::{RunEvent, Status};
use crate::run::journal::Record;
use crate::run::policy::{self, Policy, RetryNote};
use crate::run::signals;
use crate::util::{now_ms, rfc3339};
use crate::workspace::{Entry, ProjectKind};

impl StepRunner<'_> {
    /// Runs `job` (step `i`, of `kind`) through its engine under `entry`'s policy: the
    /// outcome and how many tries it took, or how the step ended.
    pub(super) fn attempt(
        &self,
        i: usize,
        entry: &Entry,
        kind: &ProjectKind,
        job: &Job,
        emit: &(dyn Fn(RunEvent) + Sync),
        sink: &mut dyn FnMut(Progress),
    ) -> Result<(Outcome, u32), Box<Ran>> {
        let ctx = self.ctx;
        let engine: &dyn Engine = match (kind, self.pulumi) {
            (ProjectKind::Command(_), _) => self.command,
            (ProjectKind::Pulumi { .. }, Some(p)) => p,
            (ProjectKind::Pulumi { .. }, None) => {
                return Err(Box::new(Ran::new(
                    Status::Failed,
                    Some("the pulumi CLI was not found".into()),
                    None,
                )));
            }
        };
        let policy = Policy {
            timeout: entry.timeout,
            retry: entry.retry.as_ref(),
            grace: signals::grace(&ctx.env),
        };
        let attempts_allowed = entry.retry.as_ref().map(|r| r.attempts).unwrap_or(1);
        let mut on_retry = |n: &RetryNote| self.retrying(i, n, attempts_allowed, emit);
        let (result, tries) = policy::run(engine, job, self.control, &policy, sink, &mut on_retry);
        match result {
            Ok(outcome) => {
                self.processes
                    .fetch_add(outcome.processes, Ordering::SeqCst);
                Ok((outcome, tries))
            }
            Err(Failure::Failed {
                message,
                exit_code,
                processes,
            }) => {
                self.processes.fetch_add(processes, Ordering::SeqCst);
                Err(Box::new(Ran::new(
                    Status::Failed,
                    Some(after_tries(message, tries)),
                    exit_code,
                )))
            }
            Err(Failure::Cancelled { message, processes }) => {
                self.processes.fetch_add(processes, Ordering::SeqCst);
                Err(Box::new(Ran::new(Status::Cancelled, Some(message), None)))
            }
        }
    }

    /// A retry of step `i` about to happen: shown, emitted and journaled.
    fn retrying(
        &self,
        i: usize,
        n: &RetryNote,
        attempts_allowed: u32,
        emit: &(dyn Fn(RunEvent) + Sync),
    ) {
        let ctx = self.ctx;
        let path = &ctx.plan.nodes[i].path;
        let delay_ms = n.delay.as_millis() as u64;
        self.show(
            i,
            &format!(
                "try {} failed with output matching `{}`: trying again in {} (try {} of {attempts_allowed})",
                n.attempt - 1,
                n.pattern,
                humantime::format_duration(n.delay),
                n.attempt
            ),
            emit,
        );
        emit(RunEvent::ProjectRetry {
            project: path.clone(),
            operation: ctx.op,
            attempt: n.attempt,
            attempts: attempts_allowed,
            delay_ms,
            reason: n.pattern.clone(),
        });
        let _ = self.journal.append(&Record::Retry {
            run_id: ctx.run_id.clone(),
            project: path.clone(),
            operation: ctx.op.as_str().into(),
            attempt: n.attempt,
            delay_ms,
            reason: n.pattern.clone(),
            at: rfc3339(now_ms()),
        });
    }
}

/// A step's closing message, saying how many tries it took when it took more than one.
pub(super) fn after_tries(message: String, tries: u32) -> String {
    if tries > 1 {
        format!("{message} (after {tries} attempts)")
    } else {
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_counts_tries_only_after_a_retry() {
        assert_eq!(after_tries("failed".into(), 1), "failed");
        assert_eq!(after_tries("failed".into(), 3), "failed (after 3 attempts)");
    }
}
