//! One strata per stack: `.strata/<stack>/lock` holds the owner's pid, host, command,
//! start time and the process group of each running child. A lock whose strata is gone
//! is taken over with a warning, but only once none of its children's groups is alive
//! (a strata killed with SIGKILL leaves its Pulumi updates running): the takeover waits
//! for them, then refuses and names them.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
#[cfg(test)]
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::util::display_path;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Owner {
    pub pid: u32,
    pub host: String,
    pub command: String,
    pub since: String,
    /// The running children: (process group, project).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<(i32, String)>,
}

/// Keeps the list of running children current in `lock.children`, beside the lock
/// (cheap to clone, shared with the process registry). Each change appends one line, the
/// whole list as JSON, with one `write` on a file kept open: no new file and no rename
/// per child (that cost more than the child on a busy disk). The last whole line is the
/// list; the next owner starts the file again.
#[derive(Debug, Clone)]
pub struct ChildRecorder {
    path: PathBuf,
    file: std::sync::Arc<std::sync::Mutex<Option<std::fs::File>>>,
}

/// `lock.children` beside the lock at `lock`.
fn children_path(lock: &Path) -> PathBuf {
    lock.with_extension("children")
}

/// The children a lock's owner last recorded (the last whole line of `lock.children`).
fn recorded_children(lock: &Path) -> Option<Vec<(i32, String)>> {
    let bytes = std::fs::read(children_path(lock)).ok()?;
    bytes
        .split(|b| *b == b'\n')
        .rev()
        .find_map(|l| serde_json::from_slice(l).ok())
}

impl ChildRecorder {
    /// Records `children` as the running ones. The page cache survives a killed process,
    /// so no fsync.
    pub fn record(&self, children: &[(i32, String)]) {
        // Released already (the end of a run): never bring the lock back.
        if !self.path.exists() {
            return;
        }
        let Ok(mut line) = serde_json::to_string(children) else {
            return;
        };
        line.push('\n');
        let mut guard = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = crate::util::open_private_append(&children_path(&self.path)).ok();
        }
        if let Some(f) = guard.as_mut() {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// Whether a process group still has a member.
fn group_alive(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks whether the group exists.
    let rc = unsafe { libc::kill(-pgid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl crate::engine::process::ChildObserver for ChildRecorder {
    fn children(&self, running: &[(i32, String)]) {
        self.record(running);
    }
}

/// Held while a run goes on; the file is removed when dropped (every exit path that
/// returns, Ctrl-C included).
#[derive(Debug)]
pub struct StackLock {
    path: PathBuf,
    pid: u32,
}

pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn alive(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(pid as i32, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl StackLock {
    /// Takes the lock of `stack`, or says who holds it. `warn` receives the takeover notice.
    /// A stale lock whose children still run is waited for up to `orphan_wait`.
    pub fn acquire(
        state_dir: &Path,
        stack: &str,
        command: &str,
        orphan_wait: std::time::Duration,
        warn: &mut dyn FnMut(String),
    ) -> Result<StackLock> {
        // `.strata/` and the stack's state folders hold child output: owner only (0700).
        if let Some(top) = state_dir.parent() {
            crate::util::private_dir(top)?;
        }
        for sub in ["", "logs", "outputs", "work", "config"] {
            crate::util::private_dir(&state_dir.join(sub))?;
        }
        let path = state_dir.join("lock");
        let me = Owner {
            pid: std::process::id(),
            host: hostname(),
            command: command.to_string(),
            since: crate::util::rfc3339(crate::util::now_ms()),
            children: Vec::new(),
        };
        let body = serde_json::to_string(&me).unwrap_or_default();
        for _ in 0..3 {
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
            {
                Ok(mut f) => {
                    f.write_all(body.as_bytes())
                        .map_err(|e| Error::io("write", &path, e))?;
                    // The children of an earlier owner are not ours.
                    let _ = std::fs::remove_file(children_path(&path));
                    return Ok(StackLock { path, pid: me.pid });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    match serde_json::from_str::<Owner>(&text) {
                        Ok(owner) if owner.host == me.host && !alive(owner.pid) => {
                            wait_for_orphans(stack, &owner, &path, orphan_wait, warn)?;
                            warn(format!(
                                "taking over the lock of stack `{stack}`: its owner (pid {}, `{}` since {}) is gone",
                                owner.pid, owner.command, owner.since
                            ));
                            let _ = std::fs::remove_file(&path);
                        }
                        Ok(owner) => {
                            return Err(Error::config(format!(
                                "stack `{stack}` is in use: `{}` (pid {} on {}) has held its lock since {}.\n  Wait for it to finish. If that process is gone, remove {}.",
                                owner.command,
                                owner.pid,
                                owner.host,
                                owner.since,
                                display_path(&path)
                            )));
                        }
                        Err(_) if text.is_empty() => {
                            // Being written right now by another strata: it holds the lock.
                            std::thread::sleep(std::time::Duration::from_millis(50));
                            let again = std::fs::read_to_string(&path).unwrap_or_default();
                            if again.is_empty() {
                                warn(format!("taking over an empty lock file of stack `{stack}`"));
                                let _ = std::fs::remove_file(&path);
                            }
                        }
                        Err(_) => {
                            return Err(Error::config(format!(
                                "the lock of stack `{stack}` ({}) is unreadable. If no strata is running on this stack, remove it.",
                                display_path(&path)
                            )));
                        }
                    }
                }
                Err(e) => return Err(Error::io("create", &path, e)),
            }
        }
        Err(Error::config(format!(
            "could not take the lock of stack `{stack}` ({}); another strata keeps taking it.",
            display_path(&path)
        )))
    }
}

impl StackLock {
    /// The recorder that keeps this lock's list of running children current.
    pub fn recorder(&self) -> ChildRecorder {
        ChildRecorder {
            path: self.path.clone(),
            file: Default::default(),
        }
    }
}

/// A dead strata's children may still be running (SIGKILL does not reach them): wait
/// for their groups to end, then refuse, naming them.
fn wait_for_orphans(
    stack: &str,
    owner: &Owner,
    path: &Path,
    limit: std::time::Duration,
    warn: &mut dyn FnMut(String),
) -> Result<()> {
    let children = recorded_children(path).unwrap_or_else(|| owner.children.clone());
    let alive =
        || -> Vec<&(i32, String)> { children.iter().filter(|(g, _)| group_alive(*g)).collect() };
    if alive().is_empty() {
        return Ok(());
    }
    warn(format!(
        "the strata that held stack `{stack}` (pid {}) is gone, but its children still run ({}); waiting up to {}s for them to finish before taking over",
        owner.pid,
        describe(&alive()),
        limit.as_secs()
    ));
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if alive().is_empty() {
            return Ok(());
        }
    }
    let left = alive();
    Err(Error::config(format!(
        "stack `{stack}` is still in use: its last strata (pid {}, `{}`) was killed, and its children still run: {}.\n  Two updates of one stack must not run at once. Wait for them to finish, or stop them gracefully with `kill -INT -PGID` (one SIGINT lets Pulumi save its state), then run again. The lock is {}.",
        owner.pid,
        owner.command,
        describe(&left),
        display_path(path)
    )))
}

fn describe(children: &[&(i32, String)]) -> String {
    children
        .iter()
        .map(|(g, p)| format!("process group {g} ({p})"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Drop for StackLock {
    fn drop(&mut self) {
        // Only remove the lock if it is still ours.
        if let Ok(text) = std::fs::read_to_string(&self.path)
            && let Ok(owner) = serde_json::from_str::<Owner>(&text)
            && owner.pid == self.pid
        {
            let _ = std::fs::remove_file(children_path(&self.path));
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_lock_with_a_live_child_group_is_not_taken_over() {
        let d = tempfile::tempdir().unwrap();
        // A live group: a child of this test in its own process group.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let stale = Owner {
            pid: 999_999_999,
            host: hostname(),
            command: "strata up".into(),
            since: "2020-01-01T00:00:00Z".into(),
            children: vec![(child.id() as i32, "infra/vpc".into())],
        };
        std::fs::write(
            d.path().join("lock"),
            serde_json::to_string(&stale).unwrap(),
        )
        .unwrap();
        let wait = std::time::Duration::from_millis(300);
        let e = StackLock::acquire(d.path(), "dev", "strata up", wait, &mut |_| {}).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.message
                .contains(&format!("process group {} (infra/vpc)", child.id())),
            "{}",
            e.message
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let mut warnings = Vec::new();
        let l = StackLock::acquire(d.path(), "dev", "strata up", wait, &mut |w| {
            warnings.push(w)
        })
        .unwrap();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        // The earlier owner's children are gone with it; the recorder keeps the list
        // current (the last line wins); the owner stays this process.
        assert_eq!(recorded_children(&d.path().join("lock")), None);
        let rec = l.recorder();
        rec.record(&[(42, "a".into()), (43, "b".into())]);
        rec.record(&[(42, "a".into())]);
        assert_eq!(
            recorded_children(&d.path().join("lock")),
            Some(vec![(42, "a".to_string())])
        );
        let now: Owner =
            serde_json::from_str(&std::fs::read_to_string(d.path().join("lock")).unwrap()).unwrap();
        assert_eq!(now.pid, std::process::id());
        // Released: both files go, and a late record does not bring them back.
        drop(l);
        rec.record(&[(44, "c".into())]);
        assert!(!d.path().join("lock").exists());
        assert!(!d.path().join("lock.children").exists());
    }

    #[test]
    fn second_acquire_is_refused_and_release_frees() {
        let d = tempfile::tempdir().unwrap();
        let l = StackLock::acquire(
            d.path(),
            "dev",
            "strata up",
            std::time::Duration::ZERO,
            &mut |_| {},
        )
        .unwrap();
        let e = StackLock::acquire(
            d.path(),
            "dev",
            "strata up",
            std::time::Duration::ZERO,
            &mut |_| {},
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.message.contains(&format!("pid {}", std::process::id())));
        drop(l);
        assert!(!d.path().join("lock").exists());
        StackLock::acquire(
            d.path(),
            "dev",
            "strata up",
            std::time::Duration::ZERO,
            &mut |_| {},
        )
        .unwrap();
    }

    #[test]
    fn stale_lock_is_taken_over_with_warning() {
        let d = tempfile::tempdir().unwrap();
        let stale = Owner {
            pid: 999_999_999,
            host: hostname(),
            command: "strata up".into(),
            since: "2020-01-01T00:00:00Z".into(),
            children: vec![],
        };
        std::fs::write(
            d.path().join("lock"),
            serde_json::to_string(&stale).unwrap(),
        )
        .unwrap();
        let mut warnings = Vec::new();
        let _l = StackLock::acquire(
            d.path(),
            "dev",
            "strata up",
            std::time::Duration::ZERO,
            &mut |w| warnings.push(w),
        )
        .unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("999999999"));
    }
}
