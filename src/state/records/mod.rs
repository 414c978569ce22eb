//! What each run leaves in a shared (s3://) backend, so that a checkout on another
//! machine sees it: `.strata/runs/<stack>/<newest first>-<run id>.json`, one short object
//! per run written at its end (who, where, the command and selection, start and end, and
//! each project's result, fingerprint and outputs hash: never a value). Read back newest
//! first, at most [`LIMIT`] of them, and merged with the local journal by time.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::backend::Backend;
use crate::error::{Error, Result};

use super::journal::{Record, Settled, note_settled};

#[cfg(test)]
mod tests;

/// How many runs are read back (the newest): a project whose last success is older
/// than these is taken as never deployed by `--changed` (it runs again).
pub const LIMIT: usize = 50;

/// The key part that sorts the newest run first: this minus its start (ms since the
/// epoch), 13 digits (until the year 2286).
const NEWEST_FIRST: u64 = 9_999_999_999_999;

/// One run, as the backend keeps it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub run_id: String,
    #[serde(default)]
    pub stack: String,
    #[serde(default)]
    pub provider: String,
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub host: String,
    /// `strata up --changed`, `strata destroy`…
    #[serde(default)]
    pub command: String,
    /// The filters the run was given (`--filter`, `--project`…), as written; empty: all.
    #[serde(default)]
    pub selection: Vec<String>,
    #[serde(default)]
    pub started_at: String,
    #[serde(default)]
    pub ended_at: String,
    /// `succeeded`, `failed`, `denied`, `awaiting` or `cancelled`; `running` (a run
    /// still holding the stack, or one whose end was never written).
    #[serde(default)]
    pub status: String,
    /// Projects per result (`succeeded`, `failed`, `skipped`…).
    #[serde(default)]
    pub counts: BTreeMap<String, usize>,
    #[serde(default)]
    pub projects: Vec<ProjectResult>,
}

/// One project of a run: what `status` and `--changed` read of it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ProjectResult {
    pub project: String,
    #[serde(default)]
    pub operation: String,
    #[serde(default)]
    pub status: String,
    #[serde(default)]
    pub ended_at: String,
    #[serde(default)]
    pub duration_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream_outputs: Option<BTreeMap<String, String>>,
    /// Not run by this run (`--changed` found it unchanged): its last success, carried
    /// so that the newest records alone tell what is deployed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub carried: bool,
}

impl ProjectResult {
    /// The result a journal record holds (`None` for a record of no project).
    pub fn of(r: &Record) -> Option<ProjectResult> {
        match r {
            Record::Project {
                project,
                operation,
                status,
                ended_at,
                duration_ms,
                fingerprint,
                outputs_hash,
                upstream_outputs,
                ..
            } => Some(ProjectResult {
                project: project.clone(),
                operation: operation.clone(),
                status: status.clone(),
                ended_at: ended_at.clone(),
                duration_ms: *duration_ms,
                fingerprint: fingerprint.clone(),
                outputs_hash: outputs_hash.clone(),
                upstream_outputs: upstream_outputs.clone(),
                carried: false,
            }),
            _ => None,
        }
    }

    /// As a journal record of the run `run_id`, for the journal's readers.
    fn record(&self, run_id: &str) -> Record {
        Record::Project {
            run_id: run_id.to_string(),
            project: self.project.clone(),
            operation: self.operation.clone(),
            status: self.status.clone(),
            started_at: String::new(),
            ended_at: self.ended_at.clone(),
            duration_ms: self.duration_ms,
            exit_code: None,
            fingerprint: self.fingerprint.clone(),
            message: None,
            log: None,
            changes: None,
            outputs_hash: self.outputs_hash.clone(),
            upstream_outputs: self.upstream_outputs.clone(),
            pool: None,
            denied: None,
            awaiting: None,
        }
    }
}

impl RunRecord {
    /// `user@host`.
    pub fn who(&self) -> String {
        format!("{}@{}", self.user, self.host)
    }
}

/// The folder of `stack`'s run records in `backend`.
fn folder(backend: &Backend, stack: &str) -> String {
    backend.key(&format!(".strata/runs/{stack}/"))
}

/// The key of the run `run_id` of `stack` started at `started_ms`: newest first.
pub fn key(backend: &Backend, stack: &str, started_ms: u64, run_id: &str) -> String {
    format!(
        "{}{:013}-{run_id}.json",
        folder(backend, stack),
        NEWEST_FIRST.saturating_sub(started_ms)
    )
}

/// Writes `run` (started at `started_ms`) once: a record already there (a retried
/// write of its own) is left as it is.
pub fn write(backend: &Backend, run: &RunRecord, started_ms: u64) -> Result<()> {
    let body = serde_json::to_vec(run)
        .map_err(|e| Error::failed(format!("cannot encode the run record: {e}")))?;
    backend.create(&key(backend, &run.stack, started_ms, &run.run_id), &body)?;
    Ok(())
}

/// The newest `limit` runs of `stack`, newest first. A record that cannot be read or
/// parsed is left out, and `warn` is told (once).
pub fn recent(
    backend: &Backend,
    stack: &str,
    limit: usize,
    warn: &mut dyn FnMut(String),
) -> Result<Vec<RunRecord>> {
    let keys = backend.list_keys(&folder(backend, stack), limit)?;
    let mut unread = Vec::new();
    let bodies = backend.get_all(&keys, &mut |e| unread.push(e.message));
    let mut out = Vec::new();
    for (key, body) in keys.iter().zip(bodies) {
        match body.map(|b| serde_json::from_slice::<RunRecord>(&b)) {
            Some(Ok(run)) => out.push(run),
            Some(Err(e)) => unread.push(format!("{key} is not a run record: {e}")),
            None => {}
        }
    }
    if let Some(first) = unread.first() {
        warn(format!(
            "{} run record(s) of stack `{stack}` in {} left out: {first}",
            unread.len(),
            backend.name
        ));
    }
    Ok(out)
}

/// The project results of `runs` as journal records, oldest first (by when each ended).
pub fn project_records(runs: &[RunRecord]) -> Vec<Record> {
    let mut out: Vec<Record> = runs
        .iter()
        .flat_map(|run| run.projects.iter().map(|p| p.record(&run.run_id)))
        .collect();
    out.sort_by(|a, b| ended_at(a).cmp(ended_at(b)));
    out
}

fn ended_at(r: &Record) -> &str {
    match r {
        Record::Project { ended_at, .. } => ended_at,
        _ => "",
    }
}

/// The local journal's records and the project results of `runs`, in the order they
/// ended: read as one journal, the newest result of each project wins.
pub fn merged(local: Vec<Record>, runs: &[RunRecord]) -> Vec<Record> {
    if runs.is_empty() {
        return local;
    }
    let mut all = local;
    all.extend(project_records(runs));
    all.sort_by(|a, b| ended_at(a).cmp(ended_at(b)));
    all
}

/// Each project's last successful `up`, unless a successful `destroy` came after it,
/// from the local journal's (`local`, see `Journal::last_settled_as`) and `runs`', the
/// newest winning; as `keep` makes it.
pub fn last_success<T>(
    mut local: BTreeMap<String, Settled<T>>,
    runs: &[RunRecord],
    keep: &dyn Fn(Record) -> T,
) -> BTreeMap<String, T> {
    let mut theirs = BTreeMap::new();
    for r in project_records(runs) {
        note_settled(&mut theirs, r, keep);
    }
    for (project, s) in theirs {
        if local.get(&project).is_none_or(|l| l.ended_at < s.ended_at) {
            local.insert(project, s);
        }
    }
    local
        .into_iter()
        .filter(|(_, s)| s.up)
        .map(|(p, s)| (p, s.kept))
        .collect()
}

/// The runs of a local journal (`records`, oldest first) as records, newest first (who
/// and where empty for runs recorded before the journal kept them). The newest run with
/// no end written is `running` while the stack's lock is `held`.
pub fn from_journal(records: &[Record], held: bool) -> Vec<RunRecord> {
    let mut runs: Vec<RunRecord> = Vec::new();
    let mut ended = std::collections::BTreeSet::new();
    for r in records {
        match r {
            Record::Run {
                run_id,
                operation,
                provider,
                stack,
                started_at,
                command,
                user,
                host,
                ..
            } => runs.push(RunRecord {
                run_id: run_id.clone(),
                stack: stack.clone(),
                provider: provider.clone(),
                user: user.clone(),
                host: host.clone(),
                command: if command.is_empty() {
                    format!("strata {operation}")
                } else {
                    command.clone()
                },
                started_at: started_at.clone(),
                ..Default::default()
            }),
            Record::Project { run_id, .. } => {
                if let (Some(run), Some(p)) = (
                    runs.iter_mut().rev().find(|x| &x.run_id == run_id),
                    ProjectResult::of(r),
                ) {
                    *run.counts.entry(p.status.clone()).or_default() += 1;
                    run.ended_at = run.ended_at.clone().max(p.ended_at.clone());
                    run.status = run_status(&run.status, &p.status);
                    run.projects.push(p);
                }
            }
            Record::End {
                run_id,
                status,
                ended_at,
                unchanged,
            } => {
                ended.insert(run_id.clone());
                if let Some(run) = runs.iter_mut().rev().find(|x| &x.run_id == run_id) {
                    run.status = status.clone();
                    run.ended_at = ended_at.clone();
                    if *unchanged > 0 {
                        *run.counts.entry("skipped".into()).or_default() += unchanged;
                    }
                }
            }
            Record::Retry { .. } | Record::PoolLimit { .. } | Record::Approval { .. } => {}
        }
    }
    if let Some(last) = runs
        .last_mut()
        .filter(|r| held && !ended.contains(&r.run_id))
    {
        last.status = "running".into();
    }
    runs.reverse();
    runs
}

/// A run's result so far, with one more project's: failed once any failed or was
/// cancelled, else denied once a `policy:` rule denied one, else awaiting once an
/// `approve:` rule held one.
pub fn run_status(run: &str, project: &str) -> String {
    match (run, project) {
        ("failed", _) | (_, "failed" | "cancelled") => "failed".into(),
        ("denied", _) | (_, "denied") => "denied".into(),
        ("awaiting", _) | (_, "awaiting") => "awaiting".into(),
        _ => "succeeded".into(),
    }
}

/// `shared` (newest first) and the runs of the local journal it lacks, newest first by
/// start, the first `limit`.
pub fn with_local(shared: Vec<RunRecord>, local: Vec<RunRecord>, limit: usize) -> Vec<RunRecord> {
    let known: std::collections::BTreeSet<String> =
        shared.iter().map(|r| r.run_id.clone()).collect();
    let mut all = shared;
    all.extend(local.into_iter().filter(|r| !known.contains(&r.run_id)));
    all.sort_by(|a, b| b.started_at.cmp(&a.started_at));
    all.truncate(limit);
    all
}
