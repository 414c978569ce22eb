//! `.strata/<stack>/journal.jsonl`: append-only, one record per run and per project
//! operation. Never holds a secret value.

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
    },
}

pub struct Journal {
    path: PathBuf,
    lock: Mutex<()>,
}

impl Journal {
    pub fn new(state_dir: &Path) -> Journal {
        Journal {
            path: state_dir.join("journal.jsonl"),
            lock: Mutex::new(()),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one record (one write of one line).
    pub fn append(&self, record: &Record) -> Result<()> {
        let _g = self.lock.lock();
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        }
        let mut line = serde_json::to_string(record)
            .map_err(|e| Error::failed(format!("cannot encode a journal record: {e}")))?;
        line.push('\n');
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| Error::io("open", &self.path, e))?;
        f.write_all(line.as_bytes())
            .map_err(|e| Error::io("append to", &self.path, e))
    }

    /// Every readable record, oldest first (a torn last line is skipped).
    pub fn read(&self) -> Vec<Record> {
        let Ok(text) = std::fs::read_to_string(&self.path) else {
            return Vec::new();
        };
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
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
mod tests {
    use super::*;

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
