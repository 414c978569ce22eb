//! The run in a shared (s3://) backend beside its lease (`state::records`): its record,
//! written at its end while the lease is still held (the next run, on any machine,
//! finds it), and the records `--changed` reads back. A backend that cannot be reached
//! costs a warning, never the run.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::backend::{Backend, Where};
use crate::error::Result;
use crate::run::events::Status;
use crate::state::journal::Journal;
use crate::state::lock::lease;
use crate::state::records::{self, ProjectResult, RunRecord};
use crate::util::{now_ms, rfc3339};

use super::super::resolve::Resolved;
use super::schedule::Ran;

/// The run's backend, when it is a bucket.
fn bucket(r: &Resolved) -> Result<Option<Arc<Backend>>> {
    match crate::engine::pulumi::shared_where(&r.shared_env())?.0 {
        Where::S3(b) => Ok(Some(b)),
        _ => Ok(None),
    }
}

/// The salt of the stack's output hashes: the bucket's on a shared backend (see
/// `fingerprint::shared_salt`), else this checkout's; a warning when the bucket could
/// not be read.
pub(super) fn salt(
    r: &Resolved,
    state_dir: &std::path::Path,
    locked: bool,
) -> (Vec<u8>, Option<String>) {
    use crate::state::fingerprint;
    let shared = bucket(r).and_then(|b| {
        b.map(|b| fingerprint::shared_salt(&b, r.stack(), state_dir, locked))
            .transpose()
    });
    match shared {
        Ok(Some(s)) => (s, None),
        Ok(None) => (fingerprint::salt(state_dir), None),
        Err(e) => (
            fingerprint::salt(state_dir),
            Some(format!(
                "warning: the stack's salt could not be read from the shared backend, so this run hashes outputs with this checkout's own (another machine's `--changed` may run again what it deploys): {}",
                e.message
            )),
        ),
    }
}

/// The newest runs of the stack in its shared backend (none on another backend), and
/// why some or all could not be read.
pub(super) fn recent(r: &Resolved) -> (Vec<RunRecord>, Vec<String>) {
    let mut warnings = Vec::new();
    let read = bucket(r).and_then(|b| match b {
        Some(b) => records::recent(&b, r.stack(), records::LIMIT, &mut |w| {
            warnings.push(format!("warning: {w}"))
        }),
        None => Ok(Vec::new()),
    });
    match read {
        Ok(runs) => (runs, warnings),
        Err(e) => {
            warnings.push(format!(
                "warning: the runs other machines recorded in the shared backend could not be read, so `--changed` knows only this checkout's journal: {}",
                e.message
            ));
            (Vec::new(), warnings)
        }
    }
}

/// What the run was, for its record.
pub(super) struct Done<'a> {
    pub run_id: &'a str,
    pub started_ms: u64,
    /// Where the journal stood when the run began.
    pub journal_from: u64,
    /// Steps `--changed` skipped.
    pub unchanged: usize,
    /// Their last successes, carried into the record.
    pub carried: Vec<ProjectResult>,
    pub ran: &'a Ran,
}

/// Writes the run's record when the backend is a bucket: a warning when it could not.
pub(super) fn leave(r: &Resolved, journal: &Journal, done: &Done) -> Option<String> {
    let written = bucket(r).and_then(|b| match b {
        Some(b) => {
            let run = record(r, journal, done)?;
            records::write(&b, &run, done.started_ms)
        }
        None => Ok(()),
    });
    written.err().map(|e| {
        format!(
            "warning: this run's record was not written to the shared backend (`strata status` and `strata history` on other machines will not show it, and their `--changed` runs again what it did): {}",
            e.message
        )
    })
}

/// The run's record: who, where, what was asked, and each project's result as the
/// journal has it.
fn record(r: &Resolved, journal: &Journal, done: &Done) -> Result<RunRecord> {
    let (user, host) = lease::who(&r.ws.env)?;
    let mut projects: Vec<ProjectResult> = journal
        .run_since(done.journal_from, done.run_id)
        .iter()
        .filter_map(ProjectResult::of)
        .collect();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for p in &projects {
        *counts.entry(p.status.clone()).or_default() += 1;
    }
    if done.unchanged > 0 {
        *counts.entry(Status::Skipped.as_str().into()).or_default() += done.unchanged;
    }
    projects.extend(done.carried.iter().cloned());
    Ok(RunRecord {
        run_id: done.run_id.to_string(),
        stack: r.stack().to_string(),
        provider: r.profile.name.clone(),
        user,
        host,
        command: command(r),
        selection: r
            .req
            .args
            .selector
            .filters
            .iter()
            .map(|f| f.source.clone())
            .collect(),
        started_at: rfc3339(done.started_ms),
        ended_at: rfc3339(now_ms()),
        status: status(done.ran).as_str().into(),
        counts,
        projects,
    })
}

/// The run's result: cancelled by a signal, else failed, denied (a `policy:` rule) or
/// awaiting (an `approve:` hold) when a project was, else succeeded (also when
/// `--changed` left every project as it was).
pub(super) fn status(ran: &Ran) -> Status {
    if ran.interrupted {
        return Status::Cancelled;
    }
    let any = |f: &dyn Fn(&Status) -> bool| ran.results.iter().any(|s| f(&s.status));
    if any(&|s| matches!(s, Status::Failed | Status::Cancelled)) {
        Status::Failed
    } else if any(&|s| *s == Status::Denied) {
        Status::Denied
    } else if any(&|s| *s == Status::Awaiting) {
        Status::Awaiting
    } else {
        Status::Succeeded
    }
}

/// `strata up --changed`: the operation and the flags that change what it does.
fn command(r: &Resolved) -> String {
    let mut cmd = format!("strata {}", r.req.op.as_str());
    for (on, flag) in [
        (r.req.changed, " --changed"),
        (r.req.resume, " --resume"),
        (r.req.plan.is_some(), " --plan"),
    ] {
        if on {
            cmd.push_str(flag);
        }
    }
    cmd
}
