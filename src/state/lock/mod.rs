//! One strata per stack. `.strata/<stack>/lock` is held with a kernel lock, `flock(2)`,
//! on the file kept open for the run's life: taking it is one atomic step that cannot
//! succeed twice, and it dies with its process (as Cargo and dpkg hold theirs). The
//! file's content only describes the holder: pid, host, process start time, command and
//! since when; the process group of each running child is kept beside it in
//! `lock.children`. A lock whose description names a strata that is gone is taken over
//! with a warning, but only once none of its children's groups is alive (a strata killed
//! with SIGKILL leaves its Pulumi updates running): the new holder takes the kernel lock
//! first, then waits for them, then refuses and names them.

use std::io::{Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::util::{display_path, hostname};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Owner {
    pub pid: u32,
    pub host: String,
    /// When the process started (`/proc/<pid>/stat` field 22, clock ticks since boot):
    /// with host and pid it tells the owner from a later process that got its pid (a
    /// container restarted runs strata under the same small pid again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<u64>,
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
    state: Arc<Mutex<Recording>>,
}

#[derive(Debug, Default)]
struct Recording {
    /// The lock is released: a late record must not bring `lock.children` back (it may
    /// belong to the next holder by now).
    released: bool,
    file: Option<std::fs::File>,
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
        let Ok(mut line) = serde_json::to_string(children) else {
            return;
        };
        line.push('\n');
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if guard.released {
            return;
        }
        if guard.file.is_none() {
            guard.file = crate::files::open_private_append(&children_path(&self.path)).ok();
        }
        if let Some(f) = guard.file.as_mut() {
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

/// Held while a run goes on: the open lock file carries the kernel lock. Dropped (every
/// exit path that returns, Ctrl-C included), it removes the file while still holding
/// the kernel lock, then closes it.
#[derive(Debug)]
pub struct StackLock {
    path: PathBuf,
    file: std::fs::File,
    recording: Arc<Mutex<Recording>>,
}

fn alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks whether the process exists.
    let rc = unsafe { libc::kill(pid as i32, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// A process's start time: field 22 of `/proc/<pid>/stat` (clock ticks since boot).
/// `None` where there is no procfs.
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2, the command, is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether the process a description names is still the one that wrote it: the same
/// host, a live pid, and (when recorded and readable) the same start time.
fn owner_alive(owner: &Owner, host: &str) -> bool {
    owner.host == host
        && alive(owner.pid)
        && match (owner.started, start_time(owner.pid)) {
            (Some(then), Some(now)) => then == now,
            _ => true,
        }
}

/// Takes the kernel lock of `file` without waiting: `Ok(false)` when another open file
/// holds it.
fn try_flock(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: flock on a descriptor this File owns.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(e),
        }
    }
}

/// Whether `file` is still the file at `path` (a holder removes the file when it
/// releases it: a lock taken on the removed file locks nothing).
fn still_linked(file: &std::fs::File, path: &Path) -> bool {
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// What the lock file says about its holder.
fn description(file: &mut std::fs::File) -> String {
    let mut text = String::new();
    let _ = file.read_to_string(&mut text);
    text
}

fn in_use(stack: &str, owner: &Owner, hint: &str) -> Error {
    Error::config(format!(
        "stack `{stack}` is in use: `{}` (pid {} on {}) has held its lock since {}.\n  Wait for it to finish.{hint}",
        owner.command, owner.pid, owner.host, owner.since,
    ))
}

/// The refusal when another process holds the kernel lock: names the holder from its
/// description, read again for a moment while a new holder is still writing it.
fn held_by_another(stack: &str, path: &Path, host: &str) -> Error {
    let mut last = None;
    for _ in 0..10 {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if let Ok(owner) = serde_json::from_str::<Owner>(&text) {
            if owner_alive(&owner, host) || owner.host != host {
                return in_use(stack, &owner, "");
            }
            last = Some(owner);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    match last {
        // A new holder is taking over from a strata that is gone (and waits for its
        // children before it writes its own name).
        Some(gone) => Error::config(format!(
            "stack `{stack}` is in use: another strata holds its lock and is taking it over from `{}` (pid {}, since {}), which is gone.\n  Wait for it to finish.",
            gone.command, gone.pid, gone.since
        )),
        None => Error::config(format!(
            "stack `{stack}` is in use: another strata holds its lock ({}) and has not written its name yet.\n  Wait for it to finish.",
            display_path(path)
        )),
    }
}

impl StackLock {
    /// Whether another process holds the kernel lock of the stack whose state is in
    /// `state_dir` right now (a probe: taken and let go at once when free).
    pub fn is_held(state_dir: &Path) -> bool {
        let Ok(file) = std::fs::File::open(state_dir.join("lock")) else {
            return false;
        };
        // Dropping the file releases the probe's lock, if it got it.
        matches!(try_flock(&file), Ok(false))
    }

    /// Takes the lock of `stack`, or says who holds it. `warn` receives the takeover notice.
    /// A stale lock whose children still run is waited for up to `orphan_wait`, or until
    /// `stop` returns a signal (then the lock is left as it was, and released).
    pub fn acquire(
        state_dir: &Path,
        stack: &str,
        command: &str,
        orphan_wait: std::time::Duration,
        stop: &dyn Fn() -> Option<i32>,
        warn: &mut dyn FnMut(String),
    ) -> Result<StackLock> {
        private_state_dirs(state_dir)?;
        let path = state_dir.join("lock");
        let me = Owner::me(command);
        // More than once only when a holder removed the file between our open and our
        // lock (it releases that way).
        for _ in 0..100 {
            let Some(mut file) = take_kernel_lock(&path, stack, &me.host)? else {
                continue;
            };
            // Ours. What the file says is only who held it last.
            let (gone, notice) = last_holder(&description(&mut file), stack, &path, &me.host)?;
            // An empty description (a holder killed while writing it) with children.
            let gone = gone.or_else(|| {
                recorded_children(&path)
                    .map(|c| ("a strata that never wrote its name".to_string(), c))
            });
            if let Some((who, children)) = &gone {
                wait_for_orphans(stack, who, children, &path, orphan_wait, stop, warn)?;
            }
            if let Some(notice) = notice {
                warn(notice);
            }
            // The children of an earlier owner are not ours.
            let _ = std::fs::remove_file(children_path(&path));
            let body = serde_json::to_string(&me).unwrap_or_default();
            file.set_len(0)
                .and_then(|()| file.write_all_at(body.as_bytes(), 0))
                .map_err(|e| Error::io("write", &path, e))?;
            return Ok(StackLock {
                path,
                file,
                recording: Default::default(),
            });
        }
        Err(Error::config(format!(
            "could not take the lock of stack `{stack}` ({}); another strata keeps taking it.",
            display_path(&path)
        )))
    }
}

impl Owner {
    /// This process, running `command`, from now.
    fn me(command: &str) -> Owner {
        let pid = std::process::id();
        Owner {
            pid,
            host: hostname(),
            started: start_time(pid),
            command: command.to_string(),
            since: crate::util::rfc3339(crate::util::now_ms()),
            children: Vec::new(),
        }
    }
}

/// `.strata/` and the stack's state folders hold child output: owner only (0700).
fn private_state_dirs(state_dir: &Path) -> Result<()> {
    if let Some(top) = state_dir.parent() {
        crate::files::private_dir(top)?;
    }
    for sub in ["", "logs", "outputs", "work", "config"] {
        crate::files::private_dir(&state_dir.join(sub))?;
    }
    Ok(())
}

/// The lock file at `path`, opened and kernel-locked; `None` when its holder removed it
/// meanwhile (open it again); an error naming the holder when another process holds it.
fn take_kernel_lock(path: &Path, stack: &str, host: &str) -> Result<Option<std::fs::File>> {
    // Never created anew to be taken: whoever holds the kernel lock on the file at this
    // path holds the stack.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        // Read first: it names whoever held it last.
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|e| Error::io("open", path, e))?;
    if !try_flock(&file).map_err(|e| {
        Error::failed(format!(
            "could not lock {} (strata needs a filesystem with flock(2) for .strata/): {e}",
            display_path(path)
        ))
    })? {
        return Err(held_by_another(stack, path, host));
    }
    Ok(still_linked(&file, path).then_some(file))
}

/// A holder that is gone: who it was, and the children it recorded.
type Holder = (String, Vec<(i32, String)>);

/// Who held the lock last, from its description `text`, now that no process holds it:
/// who that was and the children it recorded (to wait for), and the takeover notice;
/// neither for an empty description. A live holder (or another host's) is an error.
fn last_holder(
    text: &str,
    stack: &str,
    path: &Path,
    host: &str,
) -> Result<(Option<Holder>, Option<String>)> {
    if text.trim().is_empty() {
        return Ok((None, None));
    }
    match serde_json::from_str::<Owner>(text) {
        // Another host's strata cannot be checked from here; a live one on this host
        // that holds no kernel lock is a strata from before the kernel lock.
        Ok(owner) if owner.host != host || owner_alive(&owner, host) => Err(in_use(
            stack,
            &owner,
            &format!(" If that process is gone, remove {}.", display_path(path)),
        )),
        Ok(owner) => {
            let who = format!("pid {}, `{}`", owner.pid, owner.command);
            let notice = format!(
                "taking over the lock of stack `{stack}`: its owner (pid {}, `{}` since {}) is gone",
                owner.pid, owner.command, owner.since
            );
            let children = recorded_children(path).unwrap_or(owner.children);
            Ok((Some((who, children)), Some(notice)))
        }
        Err(_) => Ok((
            Some((
                "a strata whose lock description is unreadable".to_string(),
                recorded_children(path).unwrap_or_default(),
            )),
            Some(format!(
                "taking over the lock of stack `{stack}`: its description ({}) is unreadable, and no process holds it",
                display_path(path)
            )),
        )),
    }
}

impl StackLock {
    /// The recorder that keeps this lock's list of running children current.
    pub fn recorder(&self) -> ChildRecorder {
        ChildRecorder {
            path: self.path.clone(),
            state: self.recording.clone(),
        }
    }
}

/// A dead strata's children may still be running (SIGKILL does not reach them): wait
/// for their groups to end, then refuse, naming them. `who` names that strata.
fn wait_for_orphans(
    stack: &str,
    who: &str,
    children: &[(i32, String)],
    path: &Path,
    limit: std::time::Duration,
    stop: &dyn Fn() -> Option<i32>,
    warn: &mut dyn FnMut(String),
) -> Result<()> {
    let alive =
        || -> Vec<&(i32, String)> { children.iter().filter(|(g, _)| group_alive(*g)).collect() };
    if alive().is_empty() {
        return Ok(());
    }
    warn(format!(
        "the strata that held stack `{stack}` ({who}) is gone, but its children still run ({}); waiting up to {}s for them to finish before taking over",
        describe(&alive()),
        limit.as_secs()
    ));
    let t0 = std::time::Instant::now();
    while t0.elapsed() < limit {
        std::thread::sleep(std::time::Duration::from_millis(100));
        if alive().is_empty() {
            return Ok(());
        }
        if let Some(sig) = stop() {
            // Not taken over: the lock still names that strata and its children.
            return Err(crate::error::stopped_before_start(
                sig,
                &format!(
                    "while waiting for the children of the strata that held stack `{stack}` ({who})"
                ),
            ));
        }
    }
    let left = alive();
    Err(Error::config(format!(
        "stack `{stack}` is still in use: its last strata ({who}) was killed, and its children still run: {}.\n  Two updates of one stack must not run at once. Wait for them to finish, or stop them gracefully with `kill -INT -PGID` (one SIGINT lets Pulumi save its state), then run again. The lock is {}.",
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
        let mut rec = self.recording.lock().unwrap_or_else(|e| e.into_inner());
        rec.released = true;
        rec.file = None;
        // Removed while the kernel lock is still held (and only if the file at the path
        // is still ours); a strata that opened it meanwhile sees it removed and opens the
        // path again. Closing the file releases the kernel lock.
        if still_linked(&self.file, &self.path) {
            let _ = std::fs::remove_file(children_path(&self.path));
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

pub mod lease;
#[cfg(test)]
mod tests;
