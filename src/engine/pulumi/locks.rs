//! Pulumi's lock files in a `file://` backend, and the one case in which strata clears
//! one. An update killed outright leaves its lock
//! (`.pulumi/locks/organization/<project>/<stack>/<id>.json`: pid, username, hostname,
//! timestamp) and every later operation fails until `pulumi cancel` removes it. The lock
//! does not say in which PID namespace or boot its pid was: containers that share a
//! hostname, or workspaces that share a `file:///shared` backend, see each other's
//! locks with pids that do not exist on their side. So a missing pid proves nothing
//! alone.
//!
//! What strata can prove it proves from its own record: when a Pulumi process it
//! started (its descendant, so in its PID namespace) holds the stack's lock, it notes that
//! lock in the project's work folder with this boot's id, this PID namespace and the
//! process's start time, and forgets it once the lock is gone. A later run clears a lock
//! only when every lock of the stack matches such a record (same file, pid, host and
//! timestamp) made in this boot and this PID namespace, and that process no longer
//! exists (its pid is free, or taken by a process that started later).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::source::file_backend_dir;
use crate::engine::Job;

/// One lock file: its name and what Pulumi wrote into it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct PulumiLock {
    #[serde(default)]
    pub(super) file: String,
    pub(super) pid: i64,
    #[serde(default)]
    pub(super) hostname: String,
    #[serde(default)]
    pub(super) timestamp: String,
}

/// What strata notes about a lock its own Pulumi process holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Held {
    pub(super) lock: PulumiLock,
    /// `/proc/sys/kernel/random/boot_id` when it was noted.
    pub(super) boot: String,
    /// The PID namespace (`/proc/self/ns/pid`, as device:inode).
    pub(super) pid_ns: String,
    /// The process's start time (clock ticks since boot).
    pub(super) started: u64,
}

/// Where strata runs: what a record must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Here {
    pub(super) host: String,
    pub(super) boot: Option<String>,
    pub(super) pid_ns: Option<String>,
}

impl Here {
    pub(super) fn now() -> Here {
        use std::os::unix::fs::MetadataExt;
        Here {
            host: crate::util::hostname(),
            boot: std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
                .ok()
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()),
            pid_ns: std::fs::metadata("/proc/self/ns/pid")
                .ok()
                .map(|m| format!("{}:{}", m.dev(), m.ino())),
        }
    }
}

/// The stack's lock directory in a file backend.
fn lock_dir(job: &Job) -> Option<PathBuf> {
    Some(
        file_backend_dir(job)?
            .join(".pulumi")
            .join("locks")
            .join("organization")
            .join(&job.name)
            .join(&job.stack),
    )
}

/// The stack's lock files (none on other backends); an unreadable one has pid -1, so it
/// matches no record and is never cleared.
pub(super) fn pulumi_locks(job: &Job) -> Vec<PulumiLock> {
    let Some(Ok(rd)) = lock_dir(job).map(std::fs::read_dir) else {
        return Vec::new();
    };
    let mut locks: Vec<PulumiLock> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| read_lock(&p))
        .collect();
    locks.sort_by(|a, b| a.file.cmp(&b.file));
    locks
}

fn read_lock(path: &Path) -> PulumiLock {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let read: Option<PulumiLock> = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    PulumiLock {
        file,
        ..read.unwrap_or(PulumiLock {
            file: String::new(),
            pid: -1,
            hostname: String::new(),
            timestamp: String::new(),
        })
    }
}

fn records_path(job: &Job) -> PathBuf {
    job.scratch_dir.join("pulumi-locks.json")
}

fn records(job: &Job) -> Vec<Held> {
    std::fs::read(records_path(job))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn save_records(job: &Job, held: &[Held]) {
    let path = records_path(job);
    if held.is_empty() {
        let _ = std::fs::remove_file(path);
        return;
    }
    if crate::files::private_dir(&job.scratch_dir).is_ok()
        && let Ok(text) = serde_json::to_vec(held)
    {
        // Whole or not at all: a strata killed while writing must not leave an empty
        // record that a resume then reads as "no lock of ours".
        let _ = crate::files::write_atomic(&path, &text, Some(0o600));
    }
}

/// `/proc/<pid>/stat`: (parent pid, start time in clock ticks since boot).
pub(super) fn proc_stat(pid: i64) -> std::io::Result<(i64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Field 2, the command, is in parentheses and may hold anything: count after it.
    let bad = || std::io::Error::other("unexpected /proc/<pid>/stat");
    let rest = &stat[stat.rfind(')').ok_or_else(bad)? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1).and_then(|f| f.parse().ok()).ok_or_else(bad)?;
    let start = fields
        .get(19)
        .and_then(|f| f.parse().ok())
        .ok_or_else(bad)?;
    Ok((ppid, start))
}

/// Whether `pid` is a process strata started for this job's Pulumi command (its child,
/// or a child of a wrapper it ran, so in its PID namespace; its arguments name the
/// project's folder). Its start time when it is.
fn own_child(pid: i64, job: &Job) -> Option<u64> {
    let me = i64::from(std::process::id());
    let (mut parent, started) = proc_stat(pid).ok()?;
    let mut depth = 0;
    while parent != me {
        depth += 1;
        if parent <= 1 || depth > 4 {
            return None;
        }
        parent = proc_stat(parent).ok()?.0;
    }
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let dir = job.dir.display().to_string();
    cmdline
        .split(|b| *b == 0)
        .any(|a| a == dir.as_bytes())
        .then_some(started)
}

/// Called once a locking Pulumi command of `job` has started its engine (its first
/// event: Pulumi takes the lock before): notes the locks its process holds.
pub(super) fn note_own_locks(job: &Job) {
    let here = Here::now();
    let (Some(boot), Some(pid_ns)) = (here.boot.clone(), here.pid_ns.clone()) else {
        return;
    };
    let mut held = records(job);
    for lock in pulumi_locks(job) {
        if lock.hostname != here.host || held.iter().any(|h| h.lock == lock) {
            continue;
        }
        if let Some(started) = own_child(lock.pid, job) {
            held.push(Held {
                lock,
                boot: boot.clone(),
                pid_ns: pid_ns.clone(),
                started,
            });
        }
    }
    save_records(job, &held);
}

/// Forgets the records of locks that are gone (the process released them, or they were
/// cleared).
pub(super) fn forget_released(job: &Job) {
    let held = records(job);
    if held.is_empty() {
        return;
    }
    let locks = pulumi_locks(job);
    let kept: Vec<Held> = held
        .iter()
        .filter(|h| locks.contains(&h.lock))
        .cloned()
        .collect();
    if kept != held {
        save_records(job, &kept);
    }
}

/// Whether strata can prove `lock`'s process is gone; `Err` says why not.
pub(super) fn proven_gone(lock: &PulumiLock, held: &[Held], here: &Here) -> Result<(), String> {
    let Some(h) = held.iter().find(|h| h.lock == *lock) else {
        return Err("no Pulumi process strata started from this workspace took it".into());
    };
    if lock.hostname != here.host {
        return Err(format!("it was taken on host {}", lock.hostname));
    }
    if here.boot.as_deref() != Some(h.boot.as_str()) {
        return Err("it was taken before this machine last booted, or on another machine".into());
    }
    if here.pid_ns.as_deref() != Some(h.pid_ns.as_str()) {
        return Err("it was taken in another PID namespace (another container)".into());
    }
    match proc_stat(lock.pid) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Ok((_, started)) if started != h.started => Ok(()),
        Ok(_) => Err(format!("its process {} is still running", lock.pid)),
        Err(e) => Err(format!("process {} cannot be looked at: {e}", lock.pid)),
    }
}

/// The locks of `job`'s stack, each with why strata cannot prove it stale (`None`:
/// proven).
pub(super) fn judge(job: &Job) -> Vec<(PulumiLock, Option<String>)> {
    let here = Here::now();
    let held = records(job);
    pulumi_locks(job)
        .into_iter()
        .map(|l| {
            let why = proven_gone(&l, &held, &here).err();
            (l, why)
        })
        .collect()
}
