//! `.strata/<stack>/journal.jsonl`: append-only, one record per run and per project
//! operation. Never holds a secret value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

mod append;

/// One line of the journal. Read leniently (strata's own readers and `strata report`
/// alike): unknown fields are ignored and every field but `run_id` and `project` has a
/// default, so a line an older or newer strata wrote still reads.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    /// A run began: what it was asked to do.
    Run {
        run_id: String,
        #[serde(default)]
        operation: String,
        #[serde(default)]
        provider: String,
        #[serde(default)]
        stack: String,
        #[serde(default)]
        projects: Vec<String>,
        #[serde(default)]
        started_at: String,
        #[serde(default)]
        command: String,
        /// Who ran it, and where (`history` shows `user@host`).
        #[serde(default, skip_serializing_if = "String::is_empty")]
        user: String,
        #[serde(default, skip_serializing_if = "String::is_empty")]
        host: String,
        /// An `up`: every project of the profile as it stood (not only those run), so
        /// that a project later removed from it is still known (`state::orphans`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        graph: Vec<KnownProject>,
    },
    /// A failed try of a project operation that will be run again (`retry:`).
    Retry {
        run_id: String,
        project: String,
        #[serde(default)]
        operation: String,
        /// The try about to start.
        #[serde(default)]
        attempt: u32,
        #[serde(default)]
        delay_ms: u64,
        #[serde(default)]
        reason: String,
        #[serde(default)]
        at: String,
    },
    /// A concurrency pool's limit changed (halved after a throttled try, or grown).
    PoolLimit {
        run_id: String,
        pool: String,
        #[serde(default)]
        limit: usize,
        #[serde(default)]
        previous: usize,
        #[serde(default)]
        reason: String,
        /// The throttled project.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        project: Option<String>,
        #[serde(default)]
        at: String,
    },
    /// One project operation (or a step not run, with the reason).
    Project {
        run_id: String,
        project: String,
        #[serde(default)]
        operation: String,
        #[serde(default)]
        status: String,
        #[serde(default)]
        started_at: String,
        #[serde(default)]
        ended_at: String,
        #[serde(default)]
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fingerprint: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log: Option<String>,
        /// A preview's change summary, Pulumi's `changeSummary` (operation → count).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        changes: Option<serde_json::Value>,
        /// A successful `up`: the keyed hash of the outputs it left.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        outputs_hash: Option<String>,
        /// A successful `up`: the outputs hash of each project it needs, as they were when
        /// it ran (`--changed` skips it while they stay the same).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        upstream_outputs: Option<std::collections::BTreeMap<String, String>>,
        /// The concurrency pool it ran in.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pool: Option<String>,
        /// The `policy:` rule that denied what its preview planned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        denied: Option<Box<crate::gates::denial::Denial>>,
        /// The `approve:` rule that holds what its preview planned.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        awaiting: Option<Box<crate::gates::denial::Denial>>,
    },
    /// How a run ended (its result as the bucket's record has it), written as it ends;
    /// a run without one is running, or was killed. `unchanged`: projects `--changed`
    /// skipped, which have no record of their own.
    End {
        run_id: String,
        #[serde(default)]
        status: String,
        #[serde(default)]
        ended_at: String,
        #[serde(default)]
        unchanged: usize,
    },
    /// Someone approved the plan an `approve:` rule held (`strata approve`).
    Approval {
        /// The run that held the plan.
        run_id: String,
        project: String,
        /// The `approve:` rule that held it.
        #[serde(default)]
        rule: String,
        /// `user@host`.
        #[serde(default)]
        by: String,
        #[serde(default)]
        at: String,
        /// sha256 of the plan file approved.
        #[serde(default)]
        digest: String,
    },
}

/// A project of the profile as an `up` knew it: enough to find, order and destroy it
/// once it is removed from the profile.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct KnownProject {
    /// The path as written in the profile.
    pub project: String,
    /// Its folder, relative to the workspace root (`/`-separated).
    pub dir: String,
    /// `pulumi` or `command`.
    #[serde(default)]
    pub kind: String,
    /// Pulumi's project name (or the command project's name).
    #[serde(default)]
    pub name: String,
    /// `infrastructure` or `kubernetes`.
    #[serde(default)]
    pub stage: String,
    /// The paths of the projects it needed.
    #[serde(default)]
    pub needs: Vec<String>,
}

impl Record {
    /// The run the record belongs to.
    pub fn run_id(&self) -> &str {
        match self {
            Record::Run { run_id, .. }
            | Record::Retry { run_id, .. }
            | Record::PoolLimit { run_id, .. }
            | Record::Project { run_id, .. }
            | Record::End { run_id, .. }
            | Record::Approval { run_id, .. } => run_id,
        }
    }
}

pub struct Journal {
    path: PathBuf,
    /// The file, opened (and its folder created) on the first append, kept for the rest.
    file: Mutex<Option<Arc<std::fs::File>>>,
    /// Appends written so far (counted under `file`'s lock, after the write).
    written: AtomicU64,
    /// Appends known to be on disk; held while one `fdatasync` runs for all of them.
    synced: Mutex<u64>,
}

impl Journal {
    pub fn new(state_dir: &Path) -> Journal {
        Journal {
            path: state_dir.join("journal.jsonl"),
            file: Mutex::new(None),
            written: AtomicU64::new(0),
            synced: Mutex::new(0),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// `journal.index.jsonl`: the records of the journal that readers still need, up to a
/// byte offset of the journal, so reading costs the same after many runs as after one.
/// First line: `{"covers": <journal length>, "inode": <journal inode>}`; then the
/// records, in journal order.
#[derive(Serialize, Deserialize)]
struct IndexHead {
    covers: u64,
    inode: u64,
    /// SHA-256 of the (at most 256) journal bytes just before `covers`: a journal
    /// emptied and written again in place is not taken for the one indexed.
    #[serde(default)]
    before: String,
}

/// The hash of the journal bytes just before `end` (see [`IndexHead::before`]).
fn window_hash(f: &mut std::fs::File, end: u64) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let start = end.saturating_sub(256);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = vec![0u8; (end - start) as usize];
    f.read_exact(&mut buf).ok()?;
    Some(crate::util::sha256_hex(&buf))
}

impl Journal {
    fn index_path(&self) -> PathBuf {
        self.path.with_file_name("journal.index.jsonl")
    }

    /// Streams the lines of records the index holds to `each` and returns the journal
    /// offset it covers, when it describes this journal (same file, not longer than it);
    /// `None` (nothing streamed) when it does not.
    fn scan_index(
        &self,
        journal: &mut std::fs::File,
        journal_len: u64,
        inode: u64,
        each: &mut dyn FnMut(&[u8]),
    ) -> Option<u64> {
        use std::io::BufRead;
        let file = std::fs::File::open(self.index_path()).ok()?;
        let mut lines = std::io::BufReader::new(file);
        let mut first = Vec::new();
        lines.read_until(b'\n', &mut first).ok()?;
        let head: IndexHead = serde_json::from_slice(first.trim_ascii_end()).ok()?;
        if head.inode != inode
            || head.covers > journal_len
            || window_hash(journal, head.covers)? != head.before
        {
            return None;
        }
        scan_raw_lines(&mut lines, u64::MAX, each);
        Some(head.covers)
    }

    /// Every record readers need, oldest first: the index and the journal after it (or
    /// the whole journal without a valid index). A line that is not a whole record (torn
    /// by a crash, or not UTF-8) is skipped; the lines after it are read.
    pub fn read(&self) -> Vec<Record> {
        let mut out = Vec::new();
        self.scan(None, &mut |r| out.push(r));
        out
    }

    /// What [`Journal::read`] returns, streamed to `each` one record at a time: the
    /// journal is never held whole in memory.
    pub fn each(&self, each: &mut dyn FnMut(Record)) {
        self.scan(None, each);
    }

    /// Each project's last successful `up`, unless a successful `destroy` came after it
    /// (see [`last_success`]), read one record at a time: the journal is never held
    /// whole in memory.
    pub fn last_success(&self) -> BTreeMap<String, Record> {
        self.last_success_as(&|r| r)
    }

    /// The outputs hash each project's last success left (see [`Journal::last_success`]),
    /// holding no more than the hashes.
    pub fn last_outputs(&self) -> BTreeMap<String, String> {
        let last = self.last_success_as(&|r| match r {
            Record::Project { outputs_hash, .. } => outputs_hash,
            _ => None,
        });
        last.into_iter()
            .filter_map(|(p, h)| Some((p, h?)))
            .collect()
    }

    /// [`Journal::last_success`], keeping of each record what `keep` makes of it.
    pub fn last_success_as<T>(&self, keep: &dyn Fn(Record) -> T) -> BTreeMap<String, T> {
        let mut out = BTreeMap::new();
        self.scan(None, &mut |r| note_success(&mut out, r, keep));
        out
    }

    /// Each project's last successful `up` or `destroy` (a destroy kept, not dropped:
    /// what another journal says is merged with it by time), as `keep` makes it.
    pub fn last_settled_as<T>(&self, keep: &dyn Fn(Record) -> T) -> BTreeMap<String, Settled<T>> {
        let mut out = BTreeMap::new();
        self.scan(None, &mut |r| note_settled(&mut out, r, keep));
        out
    }

    /// The records of the run `run_id`, read from byte `from` of the journal (where it
    /// stood when the run began) on.
    pub fn run_since(&self, from: u64, run_id: &str) -> Vec<Record> {
        use std::io::{Seek, SeekFrom};
        let mut out = Vec::new();
        if let Ok(mut f) = std::fs::File::open(&self.path)
            && f.seek(SeekFrom::Start(from)).is_ok()
        {
            scan_lines(&mut std::io::BufReader::new(f), u64::MAX, &mut |r| {
                if r.run_id() == run_id {
                    out.push(r);
                }
            });
        }
        out
    }

    /// Streams what [`Journal::read`] returns to `each`, one record at a time, reading
    /// the journal up to byte `until` at most; returns the journal offset read to, its
    /// inode and the hash of the bytes before that offset (see [`IndexHead`]).
    fn scan(&self, until: Option<u64>, each: &mut dyn FnMut(Record)) -> (u64, u64, String) {
        self.scan_raw(until, &mut |line| {
            if let Ok(r) = serde_json::from_slice(line) {
                each(r);
            }
        })
    }

    /// [`Journal::scan`], streaming each line (without its newline) as it is, parsed or
    /// not.
    fn scan_raw(&self, until: Option<u64>, each: &mut dyn FnMut(&[u8])) -> (u64, u64, String) {
        use std::io::{Seek, SeekFrom};
        use std::os::unix::fs::MetadataExt;
        let Ok(mut f) = std::fs::File::open(&self.path) else {
            return (0, 0, String::new());
        };
        let Ok(meta) = f.metadata() else {
            return (0, 0, String::new());
        };
        let from = self
            .scan_index(&mut f, meta.len(), meta.ino(), each)
            .unwrap_or(0);
        let mut read = 0;
        if f.seek(SeekFrom::Start(from)).is_ok() {
            let limit = until.map_or(u64::MAX, |u| u.saturating_sub(from));
            read = scan_raw_lines(&mut std::io::BufReader::new(&mut f), limit, each);
        }
        let end = from + read;
        let before = window_hash(&mut f, end).unwrap_or_default();
        (end, meta.ino(), before)
    }

    /// Every record of the journal, including those the index dropped (`report --run`).
    pub fn read_all(&self) -> Vec<Record> {
        std::fs::read(&self.path)
            .map(|b| parse(&b))
            .unwrap_or_default()
    }

    /// Rewrites the index from what readers see now, keeping only what they need: the
    /// last run of each operation, whole, for each project its last record of each
    /// operation and status, and the `up` record whose graph last had a project still
    /// deployed (how `state::orphans` knows a project the profile lost). Atomic (a crash leaves the old index, which still describes
    /// the journal up to where it covered). Call it under the stack lock.
    ///
    /// Two passes over the records, one at a time (which to keep, then keeping them), so
    /// memory does not grow with the journal. Each record is read only as far as choosing
    /// needs ([`Head`]; an `up`'s graph as its paths alone) and a kept one is copied as
    /// its line: an estate of thousands of projects has records of megabytes.
    pub fn update_index(&self) -> Result<()> {
        let mut last_runs: BTreeMap<String, String> = BTreeMap::new();
        let mut last: BTreeMap<(String, String, String), usize> = BTreeMap::new();
        let mut graph_of: BTreeMap<String, String> = BTreeMap::new();
        let mut deployed: std::collections::BTreeSet<String> = Default::default();
        let mut i = 0;
        let (end, inode, before) = self.scan_raw(None, &mut |line| {
            let Ok(h) = serde_json::from_slice::<Head>(line) else {
                return;
            };
            match h.record.as_str() {
                "run" => {
                    if let Ok(g) = serde_json::from_slice::<GraphPaths>(line) {
                        for k in g.graph {
                            graph_of.insert(k.project, h.run_id.clone());
                        }
                    }
                    last_runs.insert(h.operation, h.run_id);
                }
                "project" => {
                    if h.is_success() {
                        if h.operation == "up" {
                            deployed.insert(h.project.clone());
                        } else {
                            deployed.remove(&h.project);
                        }
                    }
                    last.insert((h.project, h.operation, h.status), i);
                }
                _ => {}
            }
            i += 1;
        });
        if end == 0 {
            return Ok(());
        }
        let kept_runs: std::collections::BTreeSet<String> = last_runs.into_values().collect();
        // Only the record of such a run (its graph), not the rest of the run.
        let graph_runs: std::collections::BTreeSet<String> = graph_of
            .into_iter()
            .filter(|(p, _)| deployed.contains(p))
            .map(|(_, run)| run)
            .collect();
        let lasts: std::collections::BTreeSet<usize> = last.into_values().collect();
        let head = serde_json::to_string(&IndexHead {
            covers: end,
            inode,
            before,
        })
        .map_err(|e| Error::failed(format!("cannot encode the journal index: {e}")))?;
        // Streamed to the file: the index of a large estate is megabytes.
        crate::files::write_atomic_with(&self.index_path(), Some(0o600), &mut |out| {
            let (mut i, mut written) = (0, writeln!(out, "{head}"));
            // The same records again: the journal as far as the first pass read it
            // (another strata may have appended since).
            self.scan_raw(Some(end), &mut |line| {
                let Ok(h) = serde_json::from_slice::<Head>(line) else {
                    return;
                };
                if written.is_ok()
                    && (lasts.contains(&i)
                        || kept_runs.contains(&h.run_id)
                        || (h.record == "run" && graph_runs.contains(&h.run_id)))
                {
                    written = out.write_all(line).and_then(|()| out.write_all(b"\n"));
                }
                i += 1;
            });
            written
        })
    }
}

/// What [`Journal::update_index`] reads of a record to choose whether the index keeps it.
/// A line that is not one (torn by a crash) is left out; a record of a kind this strata
/// does not know is kept, as it is, with its run.
#[derive(Deserialize)]
struct Head {
    record: String,
    run_id: String,
    #[serde(default)]
    project: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    status: String,
}

impl Head {
    /// See [`is_success`].
    fn is_success(&self) -> bool {
        self.record == "project"
            && self.status == "succeeded"
            && matches!(self.operation.as_str(), "up" | "destroy")
    }
}

/// The paths of an `up`'s graph (see [`Record::Run`]).
#[derive(Deserialize)]
struct GraphPaths {
    #[serde(default)]
    graph: Vec<GraphPath>,
}

#[derive(Deserialize)]
struct GraphPath {
    project: String,
}

/// Streams the records of the lines of `reader` (at most `limit` bytes) to `each`,
/// skipping every line that is not a whole record; returns the bytes read.
fn scan_lines(reader: &mut dyn std::io::BufRead, limit: u64, each: &mut dyn FnMut(Record)) -> u64 {
    scan_raw_lines(reader, limit, &mut |line| {
        if let Ok(r) = serde_json::from_slice(line) {
            each(r);
        }
    })
}

/// Streams the lines of `reader` (at most `limit` bytes), each without its newline, to
/// `each`; returns the bytes read.
fn scan_raw_lines(
    reader: &mut dyn std::io::BufRead,
    limit: u64,
    each: &mut dyn FnMut(&[u8]),
) -> u64 {
    use std::io::{BufRead, Read};
    let mut reader = std::io::BufReader::new(reader.take(limit));
    let mut line = Vec::new();
    let mut read = 0;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n as u64,
        }
        each(line.strip_suffix(b"\n").unwrap_or(&line));
        // An `up`'s record (its graph) is a megabyte at thousands of projects: its
        // buffer is not kept for the thousands of short lines after it.
        if line.capacity() > LINE_BUFFER_KEPT {
            line = Vec::new();
        }
    }
    read
}

/// The largest line buffer [`scan_raw_lines`] keeps from one line to the next.
const LINE_BUFFER_KEPT: usize = 64 * 1024;

/// The records in `bytes`, skipping every line that is not a whole record.
pub fn parse(bytes: &[u8]) -> Vec<Record> {
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}

/// The last record of each project, among the given operations (all when empty).
/// Each project's last successful `up`, unless a successful `destroy` came after it:
/// what is deployed now, as this journal knows it.
pub fn last_success(records: &[Record]) -> std::collections::BTreeMap<String, Record> {
    let mut out = std::collections::BTreeMap::new();
    for r in records {
        if is_success(r) {
            note_success(&mut out, r.clone(), &|r| r);
        }
    }
    out
}

/// A project's last successful `up` or `destroy`: when it ended, which, and what the
/// reader keeps of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Settled<T> {
    pub ended_at: String,
    /// An `up` (deployed); else a `destroy` (gone).
    pub up: bool,
    pub kept: T,
}

/// [`Journal::last_settled_as`], one record at a time.
pub fn note_settled<T>(
    out: &mut BTreeMap<String, Settled<T>>,
    r: Record,
    keep: &dyn Fn(Record) -> T,
) {
    if !is_success(&r) {
        return;
    }
    if let Record::Project {
        project,
        operation,
        ended_at,
        ..
    } = &r
    {
        let (project, up, ended_at) = (project.clone(), operation == "up", ended_at.clone());
        out.insert(
            project,
            Settled {
                ended_at,
                up,
                kept: keep(r),
            },
        );
    }
}

/// A successful `up` or `destroy` of a project.
pub(crate) fn is_success(r: &Record) -> bool {
    matches!(r, Record::Project { operation, status, .. }
        if status == "succeeded" && matches!(operation.as_str(), "up" | "destroy"))
}

/// [`last_success`], one record at a time, keeping what `keep` makes of it.
fn note_success<T>(out: &mut BTreeMap<String, T>, r: Record, keep: &dyn Fn(Record) -> T) {
    if !is_success(&r) {
        return;
    }
    if let Record::Project {
        project, operation, ..
    } = &r
    {
        match operation.as_str() {
            "up" => {
                out.insert(project.clone(), keep(r));
            }
            _ => {
                out.remove(project);
            }
        }
    }
}

pub fn last_by_project(
    records: &[Record],
    operations: &[&str],
) -> std::collections::BTreeMap<String, Record> {
    let mut out = std::collections::BTreeMap::new();
    for r in records {
        if let Record::Project {
            project,
            operation: op,
            ..
        } = r
            && (operations.is_empty() || operations.contains(&op.as_str()))
        {
            out.insert(project.clone(), r.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests;
