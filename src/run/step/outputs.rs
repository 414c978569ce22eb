//! What a step leaves: its outputs (kept for dependents and later runs; a command
//! project's in a file), their keyed hash (`--changed` compares them), and its record
//! in the journal.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::StepRunner;
use crate::engine::{Operation, Outcome};
use crate::run::events::Status;
use crate::state::journal::Record;
use crate::util::{now_ms, rfc3339, slug};

/// Outputs of a project, and which of them are secret.
#[derive(Debug, Clone, Default)]
pub(super) struct Outputs {
    pub(super) values: Map<String, Value>,
    pub(super) secret: BTreeSet<String>,
}

/// What the journal keeps of one step: how it ended, and after a successful `up` the
/// hash of the outputs it left and of its upstreams' it ran with.
pub struct StepRecord {
    pub status: Status,
    pub started_ms: u64,
    pub ended_ms: u64,
    pub exit_code: Option<i32>,
    pub fingerprint: Option<String>,
    pub message: Option<String>,
    /// Its log, relative to the workspace root.
    pub log: Option<String>,
    /// A preview's change counts.
    pub changes: Option<Value>,
    pub outputs_hash: Option<String>,
    pub upstream_outputs: Option<BTreeMap<String, String>>,
    /// The concurrency pool it ran in.
    pub pool: Option<String>,
    /// The `policy:` rule that denied what its preview planned.
    pub denied: Option<Box<crate::gates::denial::Denial>>,
    /// The `approve:` rule that holds what its preview planned.
    pub awaiting: Option<Box<crate::gates::denial::Denial>>,
}

impl StepRecord {
    /// A step that never ran: only its status and why.
    pub fn not_run(status: Status, message: Option<String>) -> StepRecord {
        let now = now_ms();
        StepRecord {
            status,
            started_ms: now,
            ended_ms: now,
            exit_code: None,
            fingerprint: None,
            message,
            log: None,
            changes: None,
            outputs_hash: None,
            upstream_outputs: None,
            pool: None,
            denied: None,
            awaiting: None,
        }
    }

    /// The journal record of this step of `project`, in run `run_id` doing `op`.
    pub fn into_record(self, run_id: &str, project: &str, op: Operation) -> Record {
        Record::Project {
            run_id: run_id.to_string(),
            project: project.to_string(),
            operation: op.as_str().into(),
            status: self.status.as_str().into(),
            started_at: rfc3339(self.started_ms),
            ended_at: rfc3339(self.ended_ms),
            duration_ms: self.ended_ms.saturating_sub(self.started_ms),
            exit_code: self.exit_code,
            fingerprint: self.fingerprint,
            message: self.message,
            log: self.log,
            changes: self.changes,
            outputs_hash: self.outputs_hash,
            upstream_outputs: self.upstream_outputs,
            pool: self.pool,
            denied: self.denied,
            awaiting: self.awaiting,
        }
    }
}

impl StepRunner<'_> {
    pub(super) fn outputs_file(&self, path: &str) -> PathBuf {
        self.ctx
            .state_dir
            .join("outputs")
            .join(format!("{}.json", slug(path)))
    }

    /// Keeps a command project's outputs where its dependents and later runs read them,
    /// written in place (the same file every run: no new file, no fsync), and only when
    /// they changed: rewriting a file frees and takes a disk block, which costs more
    /// than reading it (a synchronous discard on ext4 mounted with `discard`). The
    /// journal record that follows is synced; a file torn by a crash before it reads as
    /// "not deployed", and that project has no success record either, so it runs again.
    fn keep_outputs(&self, path: &str, outputs: &Map<String, Value>) -> Result<(), String> {
        let file = self.outputs_file(path);
        let text =
            serde_json::to_string_pretty(&Value::Object(outputs.clone())).unwrap_or_default();
        if std::fs::read(&file).ok().as_deref() == Some(text.as_bytes()) {
            return Ok(());
        }
        let dir = file.parent().unwrap_or(&file);
        if !dir.is_dir() {
            crate::files::private_dir(dir).map_err(|e| e.message)?;
        }
        crate::files::write_private(&file, text.as_bytes()).map_err(|e| e.message)
    }

    /// The outputs hash of `path` now: from this run, else from its last success.
    fn current_outputs(&self, path: &str) -> Option<String> {
        self.new_outputs
            .lock()
            .ok()
            .and_then(|m| m.get(path).cloned())
            .or_else(|| self.ctx.last_outputs.get(path).cloned())
    }

    /// `--changed`: a conditional step whose upstreams all left the outputs it last ran
    /// with (decided once they are done).
    pub(super) fn upstream_outputs_unchanged(&self, path: &str) -> bool {
        self.ctx.conditional.get(path).is_some_and(|expected| {
            expected
                .iter()
                .all(|(u, h)| self.current_outputs(u).as_ref() == Some(h))
        })
    }

    /// The keyed hash of a project's outputs (never the values: secret ones included).
    /// A secret output strata only saw masked (`[secret]`: read by a StackReference, not
    /// through `inputs:`) has a value it cannot hash, so the hash is this run's own: a
    /// dependent that reads it is never skipped as unchanged after the project ran.
    ///
    /// The salt sits beside the hash (`.strata/`, or the bucket for a team), so no secret
    /// value enters it in clear: a secret output (`secret`: revealed to strata for a
    /// dependent's `inputs:`) is replaced by its digest under the store's own key, and a
    /// secret of the store that an output repeats in clear (a command project that
    /// echoes it) likewise.
    fn outputs_hash(&self, outputs: &Map<String, Value>, secret: &BTreeSet<String>) -> String {
        let secrets = self.store_secrets();
        let masked: Map<String, Value> = outputs
            .iter()
            .map(|(k, v)| {
                let v = match secret.contains(k) {
                    true => Value::String(format!(
                        "[secret:{}]",
                        crate::secrets::hmac::secret_digest(
                            &self.ctx.secret_key,
                            &format!("output:{k}"),
                            &v.to_string()
                        )
                    )),
                    false => self.mask_secrets(v, &secrets),
                };
                (k.clone(), v)
            })
            .collect();
        let sorted: BTreeMap<&String, &Value> = masked.iter().collect();
        let mut text = serde_json::to_string(&sorted).unwrap_or_default();
        if outputs.values().any(crate::engine::contains_secret_mask) {
            text.push_str("\0masked secret output, run ");
            text.push_str(&self.ctx.run_id);
        }
        crate::state::fingerprint::keyed_hash(&self.ctx.fingerprint_salt, "outputs", &text)
    }

    /// The store's secret values, longest first (what [`Self::mask_secrets`] takes).
    pub(super) fn store_secrets(&self) -> Vec<&String> {
        let mut secrets: Vec<&String> = self
            .ctx
            .secrets
            .values()
            .filter(|v| !v.is_empty())
            .collect();
        secrets.sort_by_key(|v| std::cmp::Reverse(v.len()));
        secrets
    }

    /// `v` with every occurrence of each of `secrets` (longest first) replaced by its
    /// digest under the store's key.
    pub(super) fn mask_secrets(&self, v: &Value, secrets: &[&String]) -> Value {
        match v {
            Value::String(s) => {
                let mut out = s.clone();
                for secret in secrets {
                    if out.contains(secret.as_str()) {
                        let d = crate::secrets::hmac::secret_digest(
                            &self.ctx.secret_key,
                            "output",
                            secret,
                        );
                        out = out.replace(secret.as_str(), &format!("[secret:{d}]"));
                    }
                }
                Value::String(out)
            }
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| self.mask_secrets(x, secrets)).collect())
            }
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (k.clone(), self.mask_secrets(x, secrets)))
                    .collect(),
            ),
            other => {
                let text = other.to_string();
                match secrets.iter().find(|s| text == ***s) {
                    Some(secret) => Value::String(format!(
                        "[secret:{}]",
                        crate::secrets::hmac::secret_digest(&self.ctx.secret_key, "output", secret)
                    )),
                    None => other.clone(),
                }
            }
        }
    }

    /// What a successful `up` of `path` leaves for its dependents: its secret outputs
    /// learnt by the redactor, a command project's outputs kept in their file, and the
    /// outputs for the rest of this run.
    pub(super) fn leave_outputs(
        &self,
        path: &str,
        is_pulumi: bool,
        outcome: &Outcome,
    ) -> Result<(), String> {
        self.ctx
            .learn_secrets(&outcome.outputs, &outcome.secret_outputs);
        let outputs = Outputs {
            values: outcome.outputs.clone(),
            secret: outcome.secret_outputs.clone(),
        };
        if !is_pulumi {
            self.keep_outputs(path, &outcome.outputs)?;
        }
        if let Ok(mut m) = self.outputs.lock() {
            m.insert(path.to_string(), outputs);
        }
        Ok(())
    }

    /// A command project destroyed: its kept outputs go.
    pub(super) fn forget_outputs(&self, path: &str) {
        let _ = std::fs::remove_file(self.outputs_file(path));
    }

    /// The outputs hash of `path` after its `up` in this run, kept for its dependents.
    pub(super) fn note_outputs_hash(
        &self,
        path: &str,
        outputs: &Map<String, Value>,
        secret: &BTreeSet<String>,
    ) -> String {
        let h = self.outputs_hash(outputs, secret);
        if let Ok(mut m) = self.new_outputs.lock() {
            m.insert(path.to_string(), h.clone());
        }
        h
    }

    /// The outputs hash of each upstream of `path` now, as it runs with them.
    pub(super) fn upstream_outputs(&self, path: &str) -> BTreeMap<String, String> {
        self.ctx
            .upstreams
            .get(path)
            .into_iter()
            .flatten()
            .filter_map(|u| self.current_outputs(u).map(|h| (u.clone(), h)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_that_never_ran_has_its_status_and_why_only() {
        let record = StepRecord::not_run(Status::Skipped, Some("upstream failed".into()))
            .into_record("r1", "apps/web", Operation::Up);
        let Record::Project {
            run_id,
            project,
            operation,
            status,
            started_at,
            ended_at,
            duration_ms,
            message,
            exit_code: None,
            fingerprint: None,
            log: None,
            changes: None,
            outputs_hash: None,
            upstream_outputs: None,
            pool: None,
            denied: None,
            awaiting: None,
        } = record
        else {
            panic!("not a bare project record: {record:?}");
        };
        assert_eq!(
            (run_id.as_str(), project.as_str(), operation.as_str()),
            ("r1", "apps/web", "up")
        );
        assert_eq!(status, "skipped");
        assert_eq!((started_at == ended_at, duration_ms), (true, 0));
        assert_eq!(message.as_deref(), Some("upstream failed"));
    }

    /// A wall clock set back during a step (NTP, a VM resumed) is a step of no time,
    /// not an overflow.
    #[test]
    fn a_clock_set_back_during_a_step_is_no_time() {
        let record = StepRecord {
            started_ms: 2_000,
            ended_ms: 1_000,
            ..StepRecord::not_run(Status::Succeeded, None)
        }
        .into_record("r1", "a", Operation::Up);
        assert!(
            matches!(record, Record::Project { duration_ms: 0, .. }),
            "{record:?}"
        );
    }
}
