//! `.strata/<stack>/journal.jsonl`: append-only, one record per run and per project
//! operation. Never holds a secret value.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One line of the journal.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    /// A run began: what it was asked to do.
    Run {
        run_id: String,
        operation: String,
        provider: String,
        stack: String,
        projects: Vec<String>,
        started_at: String,
        #[serde(default)]
        command: String,
    },
    /// A failed try of a project operation that will be run again (`retry:`).
    Retry {
        run_id: String,
        project: String,
        operation: String,
        /// The try about to start.
        attempt: u32,
        delay_ms: u64,
        reason: String,
        at: String,
    },
    /// One project operation (or a step not run, with the reason).
    Project {
        run_id: String,
        project: String,
        operation: String,
        status: String,
        started_at: String,
        ended_at: String,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fingerprint: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        log: Option<String>,
        /// A preview's change summary (operation → count).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        changes: Option<std::collections::BTreeMap<String, u64>>,
    },
}

pub struct Journal {
    path: PathBuf,
    /// The file, opened (and its folder created) on the first append, kept for the rest.
    file: Mutex<Option<std::fs::File>>,
}

impl Journal {
    pub fn new(state_dir: &Path) -> Journal {
        Journal {
            path: state_dir.join("journal.jsonl"),
            file: Mutex::new(None),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record: one `write(2)` of one line on an `O_APPEND` file (mode 0600).
    /// When the file does not end with a newline (a crash tore the last record), the
    /// write starts with one, so the new record is never glued to the torn line.
    /// The record is on disk when this returns (one `fdatasync`): a record that was
    /// reported survives a power cut, not only a crash.
    pub fn append(&self, record: &Record) -> Result<()> {
        let json = serde_json::to_string(record)
            .map_err(|e| Error::failed(format!("cannot encode a journal record: {e}")))?;
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            if let Some(dir) = self.path.parent() {
                crate::util::private_dir(dir)?;
            }
            *guard = Some(
                crate::util::open_private_append(&self.path)
                    .map_err(|e| Error::io("open", &self.path, e))?,
            );
        }
        let Some(f) = guard.as_mut() else {
            return Err(Error::failed("the journal is not open"));
        };
        let mut line = String::with_capacity(json.len() + 2);
        // Another strata (a preview beside an up) may append too, and may have crashed
        // in the middle of a line.
        if !ends_with_newline(f) {
            line.push('\n');
        }
        line.push_str(&json);
        line.push('\n');
        f.write_all(line.as_bytes())
            .and_then(|()| f.sync_data())
            .map_err(|e| Error::io("append to", &self.path, e))
    }

    /// Every readable record, oldest first. A line that is not a whole record (torn by a
    /// crash, or not UTF-8) is skipped; the lines after it are read.
    pub fn read(&self) -> Vec<Record> {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return Vec::new();
        };
        parse(&bytes)
    }
}

impl Journal {
    /// Keeps the cost of reading the journal from growing with the number of past runs:
    /// when it holds more than `2 × keep` runs, the records every reader needs stay (the
    /// last `keep` runs, the last run of each operation, and for each project its last
    /// record of each operation and status) and the others move to
    /// `journal-archive.jsonl` beside it. The archive is appended (and synced) first, then
    /// the journal is replaced atomically: a crash in between only leaves records in both.
    /// Returns how many records moved. Call it under the stack lock; a record another
    /// strata appended meanwhile (a preview) makes it give up until next time.
    pub fn compact(&self, keep: usize) -> Result<usize> {
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        let Ok(bytes) = std::fs::read(&self.path) else {
            return Ok(0);
        };
        let lines: Vec<(&[u8], Option<Record>)> = bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| (l, serde_json::from_slice::<Record>(l).ok()))
            .collect();
        let runs: Vec<(&str, &str)> = lines
            .iter()
            .filter_map(|(_, r)| match r {
                Some(Record::Run {
                    run_id, operation, ..
                }) => Some((run_id.as_str(), operation.as_str())),
                _ => None,
            })
            .collect();
        if runs.len() <= 2 * keep.max(1) {
            return Ok(0);
        }
        let mut kept_runs: std::collections::BTreeSet<&str> = runs[runs.len() - keep..]
            .iter()
            .map(|(id, _)| *id)
            .collect();
        let mut seen_ops = std::collections::BTreeSet::new();
        for (id, op) in runs.iter().rev() {
            if seen_ops.insert(*op) {
                kept_runs.insert(id);
            }
        }
        // For each (project, operation, status), its last record.
        let mut last: BTreeMap<(&str, &str, &str), usize> = BTreeMap::new();
        for (i, (_, r)) in lines.iter().enumerate() {
            if let Some(Record::Project {
                project,
                operation,
                status,
                ..
            }) = r
            {
                last.insert((project, operation, status), i);
            }
        }
        let lasts: std::collections::BTreeSet<usize> = last.into_values().collect();
        let run_of = |r: &Record| match r {
            Record::Run { run_id, .. }
            | Record::Retry { run_id, .. }
            | Record::Project { run_id, .. } => run_id.clone(),
        };
        let (mut keep_text, mut moved_text) = (Vec::new(), Vec::new());
        let mut moved = 0;
        for (i, (line, r)) in lines.iter().enumerate() {
            let stays = match r {
                // A torn line is dropped: it was never a record.
                None => continue,
                Some(r) => lasts.contains(&i) || kept_runs.contains(run_of(r).as_str()),
            };
            let out = if stays {
                &mut keep_text
            } else {
                &mut moved_text
            };
            out.extend_from_slice(line);
            out.push(b'\n');
            moved += usize::from(!stays);
        }
        if moved == 0 {
            return Ok(0);
        }
        let unchanged =
            || std::fs::metadata(&self.path).map(|m| m.len()).ok() == Some(bytes.len() as u64);
        if !unchanged() {
            return Ok(0);
        }
        let archive = self.path.with_file_name("journal-archive.jsonl");
        let mut a = crate::util::open_private_append(&archive)
            .map_err(|e| Error::io("open", &archive, e))?;
        if !ends_with_newline(&mut a) {
            moved_text.insert(0, b'\n');
        }
        a.write_all(&moved_text)
            .and_then(|()| a.sync_data())
            .map_err(|e| Error::io("append to", &archive, e))?;
        // Give up if another strata appended since the journal was read.
        if !unchanged() {
            return Ok(0);
        }
        crate::util::write_atomic(&self.path, &keep_text, Some(0o600))?;
        // The next append opens the new file.
        *guard = None;
        Ok(moved)
    }
}

/// The records in `bytes`, skipping every line that is not a whole record.
pub fn parse(bytes: &[u8]) -> Vec<Record> {
    bytes
        .split(|b| *b == b'\n')
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect()
}

/// Whether the (append-mode) file is empty or ends with `\n`.
fn ends_with_newline(f: &mut std::fs::File) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(len) = f.seek(SeekFrom::End(0)) else {
        return true;
    };
    if len == 0 || f.seek(SeekFrom::Start(len - 1)).is_err() {
        return true;
    }
    let mut last = [0u8; 1];
    f.read_exact(&mut last).is_err() || last[0] == b'\n'
}

/// The last record of each project, among the given operations (all when empty).
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
mod compact_tests {
    use super::*;

    fn run(j: &Journal, id: &str, op: &str, results: &[(&str, &str)]) {
        j.append(&Record::Run {
            run_id: id.into(),
            operation: op.into(),
            provider: "p".into(),
            stack: "dev".into(),
            projects: results.iter().map(|(p, _)| p.to_string()).collect(),
            started_at: "t".into(),
            command: String::new(),
        })
        .unwrap();
        for (p, status) in results {
            j.append(&Record::Project {
                run_id: id.into(),
                project: p.to_string(),
                operation: op.into(),
                status: status.to_string(),
                started_at: "t".into(),
                ended_at: "t".into(),
                duration_ms: 1,
                exit_code: None,
                fingerprint: Some(format!("{id}-{p}")),
                message: None,
                log: None,
                changes: None,
            })
            .unwrap();
        }
    }

    #[test]
    fn compaction_keeps_what_readers_need_and_archives_the_rest() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path());
        // An up where b failed (resume needs that run), then many previews and ups.
        run(&j, "u0", "up", &[("a", "succeeded"), ("b", "succeeded")]);
        run(&j, "u1", "up", &[("a", "succeeded"), ("b", "failed")]);
        for i in 0..30 {
            run(
                &j,
                &format!("p{i}"),
                "preview",
                &[("a", "succeeded"), ("b", "blocked")],
            );
        }
        let before = j.read();
        let moved = j.compact(5).unwrap();
        assert!(moved > 0);
        let after = j.read();
        assert!(
            after.len() < before.len() / 3,
            "{} of {}",
            after.len(),
            before.len()
        );
        // Every reader sees the same thing.
        for ops in [&["up", "destroy"][..], &[][..], &["up"][..]] {
            assert_eq!(
                last_by_project(&before, ops),
                last_by_project(&after, ops),
                "{ops:?}"
            );
        }
        // The last up is whole (resume reads it), and the last success of b is kept.
        assert!(
            after
                .iter()
                .any(|r| matches!(r, Record::Run { run_id, .. } if run_id == "u1"))
        );
        assert!(after.iter().any(
            |r| matches!(r, Record::Project { run_id, project, status, .. }
            if run_id == "u0" && project == "b" && status == "succeeded")
        ));
        // Nothing is lost: the archive holds the rest.
        let archived = parse(&std::fs::read(d.path().join("journal-archive.jsonl")).unwrap());
        assert_eq!(archived.len() + after.len(), before.len());
        // Appends go to the new file; a second compaction has nothing to do.
        run(&j, "u2", "up", &[("a", "succeeded")]);
        assert!(
            j.read()
                .iter()
                .any(|r| matches!(r, Record::Run { run_id, .. } if run_id == "u2"))
        );
        assert_eq!(j.compact(5).unwrap(), 0);
    }

    #[test]
    fn a_small_journal_is_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path());
        for i in 0..10 {
            run(&j, &format!("u{i}"), "up", &[("a", "succeeded")]);
        }
        let before = std::fs::read(j.path()).unwrap();
        assert_eq!(j.compact(5).unwrap(), 0);
        assert_eq!(std::fs::read(j.path()).unwrap(), before);
        assert!(!d.path().join("journal-archive.jsonl").exists());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(run: &str, status: &str) -> Record {
        Record::Project {
            run_id: run.into(),
            project: "a".into(),
            operation: "up".into(),
            status: status.into(),
            started_at: "t".into(),
            ended_at: "t".into(),
            duration_ms: 1,
            exit_code: None,
            fingerprint: None,
            message: None,
            log: None,
            changes: None,
        }
    }

    #[test]
    fn a_torn_line_loses_no_later_record() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path());
        j.append(&project("r1", "succeeded")).unwrap();
        // A crash in the middle of the next record, including a torn UTF-8 sequence.
        let mut f = crate::util::open_private_append(j.path()).unwrap();
        f.write_all(b"{\"kind\":\"project\",\"run_id\":\"r2\",\"message\":\"\xc3")
            .unwrap();
        drop(f);
        j.append(&project("r3", "failed")).unwrap();
        let records = j.read();
        assert_eq!(records.len(), 2, "{records:?}");
        assert!(
            matches!(&records[1], Record::Project { run_id, status, .. } if run_id == "r3" && status == "failed")
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(j.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    proptest::proptest! {
        /// Whatever bytes a crash left at the end of the journal, a record appended after
        /// them is read back.
        #[test]
        fn any_garbage_before_a_record_never_loses_it(garbage in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let d = tempfile::tempdir().unwrap();
            let j = Journal::new(d.path());
            std::fs::write(j.path(), &garbage).unwrap();
            j.append(&project("after", "failed")).unwrap();
            let records = j.read();
            let found = records.iter().any(|r| matches!(r, Record::Project { run_id, .. } if run_id == "after"));
            proptest::prop_assert!(found, "lost the record after {:?}", garbage);
        }
    }

    #[test]
    fn append_and_read_back() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path());
        j.append(&Record::Run {
            run_id: "r1".into(),
            operation: "up".into(),
            provider: "local".into(),
            stack: "dev".into(),
            projects: vec!["a".into()],
            started_at: "t".into(),
            command: "strata up".into(),
        })
        .unwrap();
        for status in ["failed", "succeeded"] {
            j.append(&Record::Project {
                run_id: "r1".into(),
                project: "a".into(),
                operation: "up".into(),
                status: status.into(),
                started_at: "t".into(),
                ended_at: "t".into(),
                duration_ms: 1,
                exit_code: None,
                fingerprint: Some("f".into()),
                message: None,
                log: None,
                changes: None,
            })
            .unwrap();
        }
        let records = j.read();
        assert_eq!(records.len(), 3);
        let last = last_by_project(&records, &["up"]);
        assert!(matches!(&last["a"], Record::Project { status, .. } if status == "succeeded"));
        for line in std::fs::read_to_string(j.path()).unwrap().lines() {
            serde_json::from_str::<serde_json::Value>(line).unwrap();
        }
    }
}
