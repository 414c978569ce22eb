//! The journal of a stack, read for a report: its records as written (kept as their
//! text for the JSON report), which run to draw, and clear errors for a missing or torn
//! journal.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::state::journal::Record;
use crate::util::display_path;

/// The journal of a stack (`.strata/<stack>/journal.jsonl`), read for a report.
pub struct Journal {
    pub path: PathBuf,
    pub stack: String,
    /// Each record with its line as written: the text, not a parsed [`Value`], which
    /// takes several times the memory (a report of thousands of projects holds them all).
    pub(super) lines: Vec<(Arc<str>, Record)>,
    /// Lines that are not a whole record (torn by a crash, or of a kind not known here).
    pub unreadable: usize,
}

impl Journal {
    /// Reads the journal of `stack` in `state_dir`. A missing journal, or one without a
    /// readable run, is an error that says how to get one.
    pub fn read(state_dir: &Path, stack: &str) -> Result<Journal> {
        Journal::read_from(state_dir, stack, 0)
    }

    /// [`Journal::read`] from byte `from` on: after a run, only what it appended is read,
    /// so writing its report does not get slower as the journal grows.
    pub fn read_from(state_dir: &Path, stack: &str, from: u64) -> Result<Journal> {
        Journal::read_lines(state_dir, stack, from, true)
    }

    /// [`Journal::read_from`] for an HTML report, which draws from the records alone:
    /// the lines' text (only the JSON report quotes it) is not kept.
    pub fn read_from_for_drawing(state_dir: &Path, stack: &str, from: u64) -> Result<Journal> {
        Journal::read_lines(state_dir, stack, from, false)
    }

    /// Reads the journal from byte `from` on, one line at a time (never whole).
    fn read_lines(state_dir: &Path, stack: &str, from: u64, text: bool) -> Result<Journal> {
        use std::io::{Seek, SeekFrom};
        let path = state_dir.join("journal.jsonl");
        let read = std::fs::File::open(&path).and_then(|mut f| {
            f.seek(SeekFrom::Start(from))?;
            Ok(f)
        });
        let file = match read {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::config(format!(
                    "no run is recorded for stack `{stack}` yet ({} does not exist).\n  Run `strata up --stack {stack}` (or preview, refresh, destroy), then `strata report`.",
                    display_path(&path)
                )));
            }
            Err(e) => return Err(Error::io("read", &path, e)),
        };
        let reader = std::io::BufReader::new(file);
        Journal::parse_lines(path, stack, reader, text)
    }

    /// The journal in `bytes` (read from `path`).
    pub fn parse(path: PathBuf, stack: &str, bytes: &[u8]) -> Result<Journal> {
        Journal::parse_lines(path, stack, bytes, true)
    }

    /// The journal in the lines of `reader`, with their text when `text`.
    fn parse_lines(
        path: PathBuf,
        stack: &str,
        mut reader: impl std::io::BufRead,
        text: bool,
    ) -> Result<Journal> {
        let mut lines = Vec::new();
        let mut unreadable = 0;
        let mut raw = Vec::new();
        let empty: Arc<str> = Arc::from("");
        loop {
            raw.clear();
            match reader.read_until(b'\n', &mut raw) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => return Err(Error::io("read", &path, e)),
            }
            let raw = raw.strip_suffix(b"\n").unwrap_or(&raw);
            if raw.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // Straight into a record, not through a `Value`: an `up`'s record holds the
            // graph of every project, megabytes as a `Value` for thousands of them.
            let parsed = serde_json::from_slice::<Record>(raw).ok().map(|r| {
                let record = without_unread(r);
                let kept = if text {
                    Arc::from(String::from_utf8_lossy(raw).trim())
                } else {
                    empty.clone()
                };
                (kept, record)
            });
            match parsed {
                Some(pair) => lines.push(pair),
                None => unreadable += 1,
            }
        }
        let journal = Journal {
            path,
            stack: stack.to_string(),
            lines,
            unreadable,
        };
        if journal.runs().is_empty() {
            let total = journal.lines.len() + unreadable;
            return Err(Error::config(format!(
                "{} holds no readable run: {total} line(s), {unreadable} of them not a whole record (torn by a crash, or not written by strata).\n  Run `strata up --stack {stack}` (or preview, refresh, destroy) to record one, then `strata report`.",
                display_path(&journal.path)
            )));
        }
        Ok(journal)
    }

    /// The run records, oldest first: (run id, operation, started at, project count).
    fn runs(&self) -> Vec<(&str, &str, &str, usize)> {
        self.lines
            .iter()
            .filter_map(|(_, l)| match l {
                Record::Run {
                    run_id,
                    operation,
                    started_at,
                    projects,
                    ..
                } => Some((
                    run_id.as_str(),
                    operation.as_str(),
                    started_at.as_str(),
                    projects.len(),
                )),
                _ => None,
            })
            .collect()
    }

    /// The provider that run `run_id` used ("" when its record names none).
    pub fn provider_of(&self, run_id: &str) -> &str {
        self.lines
            .iter()
            .find_map(|(_, l)| match l {
                Record::Run {
                    run_id: id,
                    provider,
                    ..
                } if id == run_id => Some(provider.as_str()),
                _ => None,
            })
            .unwrap_or("")
    }

    /// The id of the run to draw: the last one, or the one `wanted` names (its id or a
    /// unique start of it). An unknown id is an error (exit 3) listing the recent runs.
    pub fn select(&self, wanted: Option<&str>) -> Result<String> {
        let runs = self.runs();
        let Some(wanted) = wanted else {
            return Ok(runs.last().map(|r| r.0.to_string()).unwrap_or_default());
        };
        if let Some(r) = runs.iter().rev().find(|r| r.0 == wanted) {
            return Ok(r.0.to_string());
        }
        let matching: BTreeSet<&str> = runs
            .iter()
            .filter(|r| !wanted.is_empty() && r.0.starts_with(wanted))
            .map(|r| r.0)
            .collect();
        let listing = |ids: &mut dyn Iterator<Item = &(&str, &str, &str, usize)>| -> String {
            ids.map(|(id, op, at, n)| format!("\n    {id}  {op:<8} {at}  {n} project(s)"))
                .collect()
        };
        match matching.len() {
            1 => Ok(matching.into_iter().next().unwrap_or_default().to_string()),
            0 => Err(Error::config(format!(
                "no run `{wanted}` in {}.\n  Recent runs of stack `{}`, newest first:{}\n  Draw one with `strata report --run ID` (the start of an ID is enough when it is unique).",
                display_path(&self.path),
                self.stack,
                listing(&mut runs.iter().rev().take(10))
            ))),
            _ => Err(Error::config(format!(
                "`{wanted}` is the start of several runs of stack `{}`:{}\n  Name one with more of its ID.",
                self.stack,
                listing(&mut runs.iter().rev().filter(|r| matching.contains(r.0)))
            ))),
        }
    }
}

/// `record` without what no report reads of it (its text keeps all of it): the
/// fingerprint and outputs hashes are most of a project record's memory, the graph of
/// the whole profile most of an `up`'s.
fn without_unread(mut record: Record) -> Record {
    match &mut record {
        Record::Project {
            fingerprint,
            outputs_hash,
            upstream_outputs,
            ..
        } => {
            *fingerprint = None;
            *outputs_hash = None;
            *upstream_outputs = None;
        }
        Record::Run { graph, .. } => *graph = Vec::new(),
        _ => {}
    }
    record
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{journal_of, project_line, run_line};
    use serde_json::Value;

    #[test]
    fn the_last_run_is_the_default_and_ids_can_be_shortened() {
        let j = journal_of(&[
            run_line("20260301T120000.000Z-1", "up", &[]),
            run_line("20260302T120000.000Z-2", "destroy", &[]),
        ]);
        assert_eq!(j.select(None).unwrap(), "20260302T120000.000Z-2");
        assert_eq!(
            j.select(Some("20260301")).unwrap(),
            "20260301T120000.000Z-1"
        );
        let e = j.select(Some("2026")).unwrap_err();
        assert!(e.message.contains("several runs"), "{e}");
        let e = j.select(Some("nope")).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.message.contains("no run `nope`")
                && e.message.contains("20260302T120000.000Z-2  destroy")
                && e.message.contains("strata report --run ID"),
            "{e}"
        );
    }

    #[test]
    fn each_record_keeps_its_line_as_written() {
        let mut v: Value = serde_json::from_str(&run_line("r1", "up", &["a"])).unwrap();
        v["from_a_newer_strata"] = serde_json::json!({"x": [1, 2]});
        let j = journal_of(&[v.to_string()]);
        assert_eq!(j.lines.len(), 1);
        let (text, record) = &j.lines[0];
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), v);
        assert_eq!(record.run_id(), "r1");
        // What no report reads of a project record is left out of the record, not of
        // its text.
        let mut p: Value =
            serde_json::from_str(&project_line("r1", "a", "succeeded", 0, 5)).unwrap();
        p["fingerprint"] = serde_json::json!("f".repeat(64));
        p["outputs_hash"] = serde_json::json!("h".repeat(64));
        p["upstream_outputs"] = serde_json::json!({"b": "x"});
        let j = journal_of(&[v.to_string(), p.to_string()]);
        let (text, record) = &j.lines[1];
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), p);
        let Record::Project {
            fingerprint,
            outputs_hash,
            upstream_outputs,
            status,
            duration_ms,
            ..
        } = record
        else {
            panic!("{record:?}")
        };
        assert_eq!((status.as_str(), *duration_ms), ("succeeded", 5));
        assert!(fingerprint.is_none() && outputs_hash.is_none() && upstream_outputs.is_none());
        // An `up`'s graph of the whole profile likewise: its text keeps it.
        let mut g = v.clone();
        g["graph"] = serde_json::json!([{"project": "a", "dir": "projects/a", "needs": []}]);
        let j = journal_of(&[g.to_string()]);
        let (text, record) = &j.lines[0];
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), g);
        let Record::Run {
            graph, projects, ..
        } = record
        else {
            panic!("{record:?}")
        };
        assert!(graph.is_empty(), "{graph:?}");
        assert_eq!(projects, &["a"]);
    }

    #[test]
    fn an_empty_or_torn_journal_is_a_clear_error() {
        for bytes in [
            &b""[..],
            b"\n\n",
            b"{\"record\":\"run\",\"run_id\":\"r",
            b"\xff\xfe garbage",
        ] {
            let e = Journal::parse(PathBuf::from("j.jsonl"), "dev", bytes)
                .err()
                .unwrap();
            assert_eq!(e.exit_code(), 3);
            assert!(e.message.contains("no readable run"), "{e}");
        }
        let e = Journal::read(Path::new("/nonexistent/dev"), "dev")
            .err()
            .unwrap();
        assert!(
            e.message.contains("no run is recorded for stack `dev`"),
            "{e}"
        );
        // A torn last line after a whole run is skipped.
        let mut bytes = run_line("r1", "up", &[]).into_bytes();
        bytes.extend_from_slice(b"\n{\"record\":\"project\",\"run_id\":\"r1\",\"proj");
        let j = Journal::parse(PathBuf::from("j"), "dev", &bytes).unwrap();
        assert_eq!(j.unreadable, 1);
        assert_eq!(j.select(None).unwrap(), "r1");
    }
}
