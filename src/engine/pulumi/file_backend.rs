//! What strata reads straight from a `file://` backend, without starting a Pulumi
//! process: the backend's folder, a stack's outputs from its checkpoint, its lock files.

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::PulumiEngine;
use crate::engine::Job;

impl PulumiEngine {
    /// The stack's outputs as `stack output --json` prints them (secrets as `"[secret]"`),
    /// read from the checkpoint of a `file://` backend without starting a process;
    /// `None` (ask the CLI) for any other backend, a compressed or unreadable
    /// checkpoint, or an output holding anything but plain values and secrets.
    pub fn stack_outputs_from_file(job: &Job) -> Option<Map<String, Value>> {
        let path = file_backend_dir(job)?
            .join(".pulumi")
            .join("stacks")
            .join(&job.name)
            .join(format!("{}.json", job.stack));
        let doc: Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
        let resources = doc.pointer("/checkpoint/latest/resources")?.as_array()?;
        let Some(stack) = resources
            .iter()
            .find(|r| r["type"] == "pulumi:pulumi:Stack")
        else {
            return Some(Map::new());
        };
        let mut out = Map::new();
        for (k, v) in stack["outputs"].as_object().cloned().unwrap_or_default() {
            out.insert(k, masked(v)?);
        }
        Some(out)
    }
}

/// A checkpoint value as `stack output --json` shows it: a secret as `"[secret]"`;
/// `None` for an asset, archive or resource reference (the CLI renders those).
pub(super) fn masked(v: Value) -> Option<Value> {
    Some(match v {
        Value::Object(o) => match o.get(crate::engine::SECRET_SIG_KEY).and_then(Value::as_str) {
            Some(crate::engine::SECRET_SIG) => Value::String("[secret]".into()),
            Some(_) => return None,
            None => Value::Object(
                o.into_iter()
                    .map(|(k, v)| masked(v).map(|v| (k, v)))
                    .collect::<Option<Map<String, Value>>>()?,
            ),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(masked).collect::<Option<Vec<_>>>()?),
        other => other,
    })
}

/// One lock file of a file backend: what Pulumi writes into
/// `.pulumi/locks/organization/<project>/<stack>/<id>.json`.
#[derive(Debug, serde::Deserialize)]
pub(super) struct PulumiLock {
    pub(super) pid: i64,
    #[serde(default)]
    pub(super) hostname: String,
    #[serde(default)]
    pub(super) timestamp: String,
}

impl PulumiLock {
    /// Taken by a process of this host that no longer exists.
    pub(super) fn stale(&self) -> bool {
        if self.hostname != crate::util::hostname() || self.pid <= 0 {
            return false;
        }
        let Ok(pid) = i32::try_from(self.pid) else {
            return false;
        };
        // SAFETY: kill with signal 0 only checks whether the process exists.
        let rc = unsafe { libc::kill(pid, 0) };
        rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
    }
}

/// The folder of the job's `file://` backend (`~` and relative paths resolved).
pub(super) fn file_backend_dir(job: &Job) -> Option<PathBuf> {
    let url = job.env.get("PULUMI_BACKEND_URL")?;
    let dir = url.strip_prefix("file://")?;
    let dir = dir.split('?').next().unwrap_or(dir);
    let dir = match dir.strip_prefix('~') {
        Some(rest) => format!("{}{rest}", job.env.get("HOME")?),
        None => dir.to_string(),
    };
    if dir.is_empty() {
        return None;
    }
    Some(job.dir.join(dir))
}

/// The stack's lock files in a file backend (none elsewhere); unreadable ones count as
/// held by a live process, so they are never cleared.
pub(super) fn pulumi_locks(job: &Job) -> Vec<PulumiLock> {
    let Some(dir) = file_backend_dir(job) else {
        return Vec::new();
    };
    let dir = dir
        .join(".pulumi")
        .join("locks")
        .join("organization")
        .join(&job.name)
        .join(&job.stack);
    let Ok(rd) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    rd.flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            std::fs::read_to_string(&p)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or(PulumiLock {
                    pid: -1,
                    hostname: String::new(),
                    timestamp: String::new(),
                })
        })
        .collect()
}
