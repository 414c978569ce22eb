//! Cancelling children: the registry of running process groups by project, so Ctrl-C,
//! a second Ctrl-C, a project's `timeout:` or a lost lease reaches each running child
//! exactly once (SIGINT, then SIGKILL down to its plugins' groups), and an observer told
//! of every start and end (the stack lock names them if strata is killed outright).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

/// Told the running children (process group, project) whenever one starts or ends, so
/// the stack lock can name them if strata is killed outright.
pub trait ChildObserver: Send + Sync + std::fmt::Debug {
    fn children(&self, running: &[(i32, String)]);
}

/// Shared by the scheduler, the engines and the signal handler.
#[derive(Debug, Default)]
pub struct Control {
    observer: std::sync::OnceLock<Box<dyn ChildObserver>>,
    cancelled: AtomicBool,
    killed: AtomicBool,
    /// The signal that cancelled the run (0: none, or cancelled from inside).
    signal: AtomicI32,
    /// Projects cancelled on their own (a `timeout:`): (project, killed).
    stopped: Mutex<BTreeMap<String, bool>>,
    next_id: AtomicU64,
    /// id -> (process group id, project path)
    children: Mutex<BTreeMap<u64, (i32, String)>>,
}

/// Unregisters a child when dropped.
pub struct ChildGuard<'a> {
    control: &'a Control,
    id: u64,
}

impl Drop for ChildGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut c) = self.control.children.lock() {
            c.remove(&self.id);
            self.control.tell(&c);
        }
    }
}

impl Control {
    pub fn new() -> Control {
        Control::default()
    }

    /// Sets the observer of running children (once).
    pub fn observe(&self, observer: Box<dyn ChildObserver>) {
        let _ = self.observer.set(observer);
    }

    fn tell(&self, children: &BTreeMap<u64, (i32, String)>) {
        if let Some(o) = self.observer.get() {
            let list: Vec<(i32, String)> = children.values().cloned().collect();
            o.children(&list);
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    pub fn is_killed(&self) -> bool {
        self.killed.load(Ordering::SeqCst)
    }

    /// Registers a running child's process group. A child that starts after the
    /// cancellation gets its one SIGINT at once.
    pub fn register(&self, pgid: i32, project: &str) -> ChildGuard<'_> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        // The flags are read and the child added under the one lock that cancel() and
        // kill() hold while they set the flags and signal: each child gets one SIGINT.
        if let Ok(mut c) = self.children.lock() {
            c.insert(id, (pgid, project.to_string()));
            self.tell(&c);
            let stopped = self
                .stopped
                .lock()
                .ok()
                .and_then(|s| s.get(project).copied());
            if self.is_killed() || stopped == Some(true) {
                signal_group(pgid, libc::SIGKILL);
            } else if self.is_cancelled() || stopped == Some(false) {
                signal_group(pgid, libc::SIGINT);
            }
        }
        ChildGuard { control: self, id }
    }

    /// The first signal that cancelled the run (SIGINT, SIGTERM, SIGHUP), if any.
    pub fn signal(&self) -> Option<i32> {
        Some(self.signal.load(Ordering::SeqCst)).filter(|s| *s != 0)
    }

    /// A signal arrived: the first one is remembered (for the exit code) and cancels.
    pub fn cancel_by_signal(&self, sig: i32) -> Vec<String> {
        let _ = self
            .signal
            .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
        self.cancel()
    }

    /// First Ctrl-C: stop scheduling and send exactly one SIGINT to every running child
    /// group. Returns the projects that were running. Later calls do nothing.
    pub fn cancel(&self) -> Vec<String> {
        let Ok(children) = self.children.lock() else {
            return Vec::new();
        };
        if self.cancelled.swap(true, Ordering::SeqCst) {
            return Vec::new();
        }
        for (pgid, _) in children.values() {
            signal_group(*pgid, libc::SIGINT);
        }
        children.values().map(|(_, p)| p.clone()).collect()
    }

    /// Second Ctrl-C or the end of the grace period: SIGKILL every running child group.
    /// Returns the projects that were still running.
    pub fn kill(&self) -> Vec<String> {
        let Ok(children) = self.children.lock() else {
            return Vec::new();
        };
        self.cancelled.store(true, Ordering::SeqCst);
        self.killed.store(true, Ordering::SeqCst);
        for (pgid, _) in children.values() {
            signal_group(*pgid, libc::SIGKILL);
        }
        children.values().map(|(_, p)| p.clone()).collect()
    }

    /// One project's `timeout:` ran out: exactly one SIGINT to each of its running
    /// groups (later children of it get theirs when they start), like Ctrl-C for it alone.
    pub fn cancel_project(&self, project: &str) {
        self.stop_project(project, false, libc::SIGINT);
    }

    /// The grace period after a project's timeout is over: SIGKILL its groups.
    pub fn kill_project(&self, project: &str) {
        self.stop_project(project, true, libc::SIGKILL);
    }

    /// Lets a project run again (its next attempt).
    pub fn resume_project(&self, project: &str) {
        if let Ok(mut s) = self.stopped.lock() {
            s.remove(project);
        }
    }

    /// Whether the project was stopped on its own (timed out).
    pub fn project_stopped(&self, project: &str) -> bool {
        self.stopped
            .lock()
            .map(|s| s.contains_key(project))
            .unwrap_or(false)
    }

    /// A child's leader has exited (and is not reaped yet, so its group id cannot have
    /// been reused): when its project was stopped by its timeout, SIGKILL whatever is
    /// left in its process group, so no background child of a timed-out project
    /// outlives it. (A project that ends on its own keeps its background processes.)
    pub(super) fn leader_exited(&self, pgid: i32, project: &str) {
        if self.project_stopped(project) {
            signal_group(pgid, libc::SIGKILL);
        }
    }

    fn stop_project(&self, project: &str, kill: bool, sig: i32) {
        let Ok(children) = self.children.lock() else {
            return;
        };
        if let Ok(mut s) = self.stopped.lock() {
            if s.get(project) == Some(&kill) {
                return;
            }
            s.insert(project.to_string(), kill);
        }
        for (pgid, p) in children.values() {
            if p == project {
                signal_group(*pgid, sig);
            }
        }
    }

    /// Projects with a child still running.
    pub fn running(&self) -> Vec<String> {
        self.children
            .lock()
            .map(|c| c.values().map(|(_, p)| p.clone()).collect())
            .unwrap_or_default()
    }
}

/// Signals a process group; a SIGKILL also reaches the groups its processes' children
/// went into (Pulumi's plugins), before their parent dies and they are orphaned.
fn signal_group(pgid: i32, sig: i32) {
    if pgid > 1 && sig == libc::SIGKILL {
        for g in crate::engine::descendants::other_groups_below(pgid) {
            // SAFETY: as below.
            unsafe {
                libc::kill(-g, sig);
            }
        }
    }
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, sig);
        }
    }
}
