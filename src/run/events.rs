//! The events a run emits; reporters render them (JSON Lines, plain lines, progress bars).
//! [`ChildEnv`] is what an observer of them hands the children of a running project.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use serde::Serialize;

use crate::engine::Operation;
use crate::gates::denial::Denial;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Succeeded,
    Failed,
    Skipped,
    Cancelled,
    /// Preview only: an upstream it needs has never been deployed, so it cannot be
    /// previewed yet. Not a failure.
    Blocked,
    /// `up` only: a `policy:` rule denied what its preview planned; nothing was changed,
    /// what needs it is skipped, the rest goes on.
    Denied,
    /// `up` only: an `approve:` rule holds what its preview planned until someone
    /// approves it (`strata approve`); nothing was changed, what needs it is skipped.
    Awaiting,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Skipped => "skipped",
            Status::Cancelled => "cancelled",
            Status::Blocked => "blocked",
            Status::Denied => "denied",
            Status::Awaiting => "awaiting",
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    pub succeeded: usize,
    pub failed: usize,
    pub skipped: usize,
    pub cancelled: usize,
    pub blocked: usize,
    pub denied: usize,
    pub awaiting: usize,
}

impl Counts {
    pub fn add(&mut self, s: Status) {
        match s {
            Status::Succeeded => self.succeeded += 1,
            Status::Failed => self.failed += 1,
            Status::Skipped => self.skipped += 1,
            Status::Cancelled => self.cancelled += 1,
            Status::Blocked => self.blocked += 1,
            Status::Denied => self.denied += 1,
            Status::Awaiting => self.awaiting += 1,
        }
    }
}

/// The version of the `--output json` events' published schema
/// (`docs/schema/events.v2.json`; v2 added the status `denied` and `project_finished`'s
/// `denied`), carried by `run_started`.
pub const SCHEMA_VERSION: u32 = 2;

/// One event of a run. Serialised with an `event` tag for `--output json`.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum RunEvent {
    RunStarted {
        /// [`SCHEMA_VERSION`].
        schema_version: u32,
        run_id: String,
        operation: Operation,
        provider: String,
        stack: String,
        projects: Vec<String>,
        parallel: usize,
    },
    ProjectStarted {
        project: String,
        operation: Operation,
        #[serde(skip_serializing_if = "Option::is_none")]
        log: Option<String>,
        /// The concurrency pool it runs in (`pool:` of its entry or a default).
        #[serde(skip_serializing_if = "Option::is_none")]
        pool: Option<String>,
    },
    ProjectOutput {
        project: String,
        line: String,
    },
    /// Resource counts (not part of the JSON stream: too chatty).
    #[serde(skip)]
    ProjectProgress {
        project: String,
        done: usize,
        started: usize,
        current: Option<String>,
    },
    HookFinished {
        project: String,
        hook: String,
        status: Status,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    ProjectFinished {
        project: String,
        operation: Operation,
        status: Status,
        duration_ms: u64,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        log: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// `blocked`: the upstream that has never been deployed.
        #[serde(skip_serializing_if = "Option::is_none")]
        upstream: Option<String>,
        /// A Pulumi preview's change summary (`{"create": 2, "same": 7}`).
        #[serde(skip_serializing_if = "Option::is_none")]
        changes: Option<serde_json::Value>,
        /// The `policy:` rule that denies what its preview planned (a preview's project
        /// still succeeds; an `up`'s is `denied`).
        #[serde(skip_serializing_if = "Option::is_none")]
        denied: Option<Denial>,
        /// The `approve:` rule that holds what its preview planned until it is approved
        /// (an `up`'s project is `awaiting`).
        #[serde(skip_serializing_if = "Option::is_none")]
        awaiting: Option<Denial>,
    },
    /// A failed try whose output matched a `retry.on` pattern: the next try starts after
    /// `delay_ms`.
    ProjectRetry {
        project: String,
        operation: Operation,
        /// The try about to start (2 for the first retry).
        attempt: u32,
        attempts: u32,
        delay_ms: u64,
        /// The pattern that matched.
        reason: String,
    },
    /// A pool's limit changed: halved after a throttled try, or one step back up after
    /// as many successes as the limit.
    PoolLimit {
        pool: String,
        limit: usize,
        previous: usize,
        reason: String,
        /// The throttled project (none when the limit grew back).
        #[serde(skip_serializing_if = "Option::is_none")]
        project: Option<String>,
    },
    RunFinished {
        run_id: String,
        operation: Operation,
        status: Status,
        duration_ms: u64,
        counts: Counts,
        /// CPU time strata itself spent (user + system), not its children.
        cpu_ms: u64,
        /// Child processes started (Pulumi CLI calls, command projects, hooks).
        processes: u32,
    },
    /// A message for people (Ctrl-C notices, warnings); on stderr with `--output json`.
    #[serde(skip)]
    Notice {
        message: String,
    },
}

impl RunEvent {
    /// The end of `project`'s step with nothing to say beyond its status, time and why:
    /// no log, exit code, upstream, changes or rule (a step the run passed over).
    pub fn project_finished(
        project: String,
        operation: Operation,
        status: Status,
        duration_ms: u64,
        message: Option<String>,
    ) -> RunEvent {
        RunEvent::ProjectFinished {
            project,
            operation,
            status,
            duration_ms,
            message,
            log: None,
            exit_code: None,
            upstream: None,
            changes: None,
            denied: None,
            awaiting: None,
        }
    }
}

/// Environment variables an observer of the events adds to the children of a running
/// project (the trace's `TRACEPARENT`): set on `project_started`, which the scheduler
/// emits on its thread before the step starts, so every child of the step sees them;
/// cleared on `project_finished`. Shared: clones see the same map. Empty unless an
/// observer sets something.
#[derive(Debug, Clone, Default)]
pub struct ChildEnv(Arc<RwLock<BTreeMap<String, BTreeMap<String, String>>>>);

impl ChildEnv {
    pub fn set(&self, project: &str, key: &str, value: String) {
        if let Ok(mut m) = self.0.write() {
            m.entry(project.to_string())
                .or_default()
                .insert(key.to_string(), value);
        }
    }

    pub fn clear(&self, project: &str) {
        if let Ok(mut m) = self.0.write() {
            m.remove(project);
        }
    }

    /// What the children of `project` get on top of the run's environment.
    pub fn of(&self, project: &str) -> BTreeMap<String, String> {
        self.0
            .read()
            .ok()
            .and_then(|m| m.get(project).cloned())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_env_is_per_project_shared_by_clones_and_cleared() {
        let env = ChildEnv::default();
        let observer = env.clone();
        assert!(env.of("a").is_empty());
        observer.set("a", "TRACEPARENT", "00-1-2-01".into());
        observer.set("b", "TRACEPARENT", "00-3-4-01".into());
        assert_eq!(env.of("a")["TRACEPARENT"], "00-1-2-01");
        observer.clear("a");
        assert!(env.of("a").is_empty());
        assert_eq!(env.of("b")["TRACEPARENT"], "00-3-4-01");
    }
}
