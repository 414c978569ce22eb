//! One strata per stack: `.strata/<stack>/lock` holds the owner's pid, host, command and
//! start time. A lock whose process is gone is taken over with a warning.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
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
    pub fn acquire(
        state_dir: &Path,
        stack: &str,
        command: &str,
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
                    return Ok(StackLock { path, pid: me.pid });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    match serde_json::from_str::<Owner>(&text) {
                        Ok(owner) if owner.host == me.host && !alive(owner.pid) => {
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

impl Drop for StackLock {
    fn drop(&mut self) {
        // Only remove the lock if it is still ours.
        if let Ok(text) = std::fs::read_to_string(&self.path)
            && let Ok(owner) = serde_json::from_str::<Owner>(&text)
            && owner.pid == self.pid
        {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_is_refused_and_release_frees() {
        let d = tempfile::tempdir().unwrap();
        let l = StackLock::acquire(d.path(), "dev", "strata up", &mut |_| {}).unwrap();
        let e = StackLock::acquire(d.path(), "dev", "strata up", &mut |_| {}).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.message.contains(&format!("pid {}", std::process::id())));
        drop(l);
        assert!(!d.path().join("lock").exists());
        StackLock::acquire(d.path(), "dev", "strata up", &mut |_| {}).unwrap();
    }

    #[test]
    fn stale_lock_is_taken_over_with_warning() {
        let d = tempfile::tempdir().unwrap();
        let stale = Owner {
            pid: 999_999_999,
            host: hostname(),
            command: "strata up".into(),
            since: "2020-01-01T00:00:00Z".into(),
        };
        std::fs::write(
            d.path().join("lock"),
            serde_json::to_string(&stale).unwrap(),
        )
        .unwrap();
        let mut warnings = Vec::new();
        let _l =
            StackLock::acquire(d.path(), "dev", "strata up", &mut |w| warnings.push(w)).unwrap();
        assert_eq!(warnings.len(), 1);
        assert!(warnings[0].contains("999999999"));
    }
}
