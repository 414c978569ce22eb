//! How a step runs: through its engine, under its policy (a timeout, retries on matching
//! output, the grace before a kill, its pool's throttling), cancelled with the run; each
//! retry and each change of a pool's limit is shown, emitted and journaled.

use std::sync::atomic::Ordering;

use super::{Ran, StepRunner};
use crate::engine::{Engine, Failure, Job, Outcome, Progress};
use crate::run::events::{RunEvent, Status};
use crate::run::policy::{self, Gate, Policy, RetryNote};
use crate::run::pools::{PoolChange, Pools};
use crate::run::signals;
use crate::state::journal::Record;
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
        let gate = match (self.pools, entry.pool.as_deref()) {
            (Some(pools), Some(pool)) => Some(PoolGate {
                runner: self,
                pools,
                pool,
                project: &entry.path,
                emit,
            }),
            _ => None,
        };
        let policy = Policy {
            timeout: entry.timeout,
            retry: entry.retry.as_ref(),
            grace: signals::grace(&ctx.env),
            gate: gate.as_ref().map(|g| g as &dyn Gate),
        };
        #[cfg(debug_assertions)]
        panic_if_asked(&job.path);
        let mut on_retry = |n: &RetryNote| self.retrying(i, n, emit);
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
    fn retrying(&self, i: usize, n: &RetryNote, emit: &(dyn Fn(RunEvent) + Sync)) {
        let ctx = self.ctx;
        let path = &ctx.plan.nodes[i].path;
        let delay_ms = u64::try_from(n.delay.as_millis()).unwrap_or(u64::MAX);
        let reason = if n.throttled {
            format!("throttled: {}", n.pattern)
        } else {
            n.pattern.clone()
        };
        self.show(
            i,
            &format!(
                "try {} failed with output matching `{}`{}: trying again in {} (try {} of {})",
                n.attempt - 1,
                n.pattern,
                if n.throttled {
                    " (throttled: waiting for a slot of its pool)"
                } else {
                    ""
                },
                humantime::format_duration(n.delay),
                n.attempt,
                n.attempts
            ),
            emit,
        );
        emit(RunEvent::ProjectRetry {
            project: path.clone(),
            operation: ctx.op,
            attempt: n.attempt,
            attempts: n.attempts,
            delay_ms,
            reason: reason.clone(),
        });
        let _ = self.journal.append(&Record::Retry {
            run_id: ctx.run_id.clone(),
            project: path.clone(),
            operation: ctx.op.as_str().into(),
            attempt: n.attempt,
            delay_ms,
            reason,
            at: rfc3339(now_ms()),
        });
    }

    /// A pool's limit changed: emitted and journaled.
    fn pool_changed(&self, c: PoolChange, emit: &(dyn Fn(RunEvent) + Sync)) {
        let _ = self.journal.append(&Record::PoolLimit {
            run_id: self.ctx.run_id.clone(),
            pool: c.pool.clone(),
            limit: c.limit,
            previous: c.previous,
            reason: c.reason.clone(),
            project: c.project.clone(),
            at: rfc3339(now_ms()),
        });
        emit(RunEvent::PoolLimit {
            pool: c.pool,
            limit: c.limit,
            previous: c.previous,
            reason: c.reason,
            project: c.project,
        });
    }
}

/// A pooled step's throttling, answered by its pool (see [`Pools`]).
struct PoolGate<'r, 'a> {
    runner: &'r StepRunner<'a>,
    pools: &'a Pools,
    pool: &'r str,
    project: &'r str,
    emit: &'r (dyn Fn(RunEvent) + Sync),
}

impl Gate for PoolGate<'_, '_> {
    fn throttled_by(&self, seen: &[String], message: &str) -> Option<String> {
        self.pools.throttled_by(seen, message)
    }

    fn try_starts(&self) -> u64 {
        self.pools.epoch(self.pool)
    }

    fn throttled(&self, round: u64, pattern: &str) {
        if let Some(c) = self
            .pools
            .throttled(self.pool, round, self.project, pattern)
        {
            self.runner.pool_changed(c, self.emit);
        }
        self.pools.release(Some(self.pool), true);
    }

    fn reacquire(&self, control: &crate::engine::Control) -> bool {
        self.pools.acquire(self.pool, control)
    }

    fn succeeded(&self) {
        if let Some(c) = self.pools.succeeded(self.pool) {
            self.runner.pool_changed(c, self.emit);
        }
    }

    fn attempts(&self) -> u32 {
        self.pools.attempts()
    }

    fn delay(&self) -> std::time::Duration {
        self.pools.delay()
    }
}

/// Test-only, compiled into debug builds alone (a release build, as installed, has no
/// such variable): `STRATA_TEST_PANIC_IN_STEP=<project path>` makes that project's step
/// panic where its engine would run, as a retry's overflowing wait once did, so the
/// integration tests can see that a panicking step ends as a failed one.
#[cfg(debug_assertions)]
fn panic_if_asked(path: &str) {
    if std::env::var("STRATA_TEST_PANIC_IN_STEP").is_ok_and(|p| p == path) {
        panic!("STRATA_TEST_PANIC_IN_STEP asked the step of {path} to panic");
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
