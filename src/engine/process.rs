//! Child processes: each in its own process group with stdin closed, output streamed
//! line by line, and a registry so Ctrl-C reaches each running child exactly once.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
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
    fn leader_exited(&self, pgid: i32, project: &str) {
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
        for g in super::descendants::other_groups_below(pgid) {
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

/// Whether the child `pid` has exited, without reaping it (`waitid` with `WNOWAIT`): its
/// pid, and so its process group id, stays taken until it is reaped.
fn has_exited(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: a zeroed siginfo_t is a valid out-parameter; waitid(2) writes into it only.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let r = libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        r == 0 && info.si_pid() == pid
    }
}

/// Blocks until the child `pid` has exited, without reaping it (see [`has_exited`]).
fn wait_exited(pid: i32) {
    if pid <= 0 {
        return;
    }
    loop {
        // SAFETY: as in `has_exited`.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        if r == 0 || std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl Exit {
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }
}

/// Makes the child the leader of its own process group, so the terminal's Ctrl-C does not
/// reach it: strata forwards exactly one SIGINT. (No parent-death signal: Linux sends it
/// again at each thread of a dying multi-threaded parent, which would be a second SIGINT.)
/// When strata raised its own open-files soft limit, the child gets the one strata
/// started with back, as Go's os/exec does: set between fork and exec, the only place it
/// reaches the child alone (the standard library then forks instead of `posix_spawn`).
fn own_group(cmd: &mut std::process::Command) -> std::io::Result<()> {
    cmd.process_group(0);
    if let Some(soft) = crate::util::children_open_files_limit() {
        let soft = soft as libc::rlim_t;
        // SAFETY: the closure runs in the forked child before exec and calls only
        // getrlimit(2) and setrlimit(2), which are async-signal-safe, on a local struct.
        unsafe {
            cmd.pre_exec(move || {
                let mut lim = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && soft < lim.rlim_cur {
                    lim.rlim_cur = soft;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
                }
                Ok(())
            });
        }
    }
    Ok(())
}

fn exit_of(status: &std::process::ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    Exit {
        code: status.code(),
        signal: status.signal(),
    }
}

/// Which pipe a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One pipe of a child being read: what it sent that is not a whole line yet.
struct Pipe {
    reader: os_pipe::PipeReader,
    from: Stream,
    partial: Vec<u8>,
    open: bool,
}

impl Pipe {
    fn emit(&mut self, on_line: &mut dyn FnMut(Stream, String), all: bool) {
        while let Some(i) = self.partial.iter().position(|b| *b == b'\n') {
            let mut line: Vec<u8> = self.partial.drain(..=i).collect();
            while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                line.pop();
            }
            on_line(self.from, String::from_utf8_lossy(&line).into_owned());
        }
        if all && !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            on_line(self.from, String::from_utf8_lossy(&line).into_owned());
        }
    }
}

/// Runs `expr` in its own process group with stdin closed, feeding every line of its
/// stdout and stderr to `on_line` as they come (two pipes, so a long JSON event on
/// stdout is never split by a stderr line), and returns how it ended. The child ends
/// when its process exits: a background process it left holding the pipes is not
/// waited for (what is already in the pipes is still read, briefly).
pub fn run_streaming(
    expr: duct::Expression,
    control: &Control,
    project: &str,
    on_line: &mut dyn FnMut(String),
) -> std::io::Result<Exit> {
    run_streaming_tagged(expr, control, project, &mut |_, line| on_line(line))
}

/// [`run_streaming`], telling which pipe each line came from.
pub fn run_streaming_tagged(
    expr: duct::Expression,
    control: &Control,
    project: &str,
    on_line: &mut dyn FnMut(Stream, String),
) -> std::io::Result<Exit> {
    use std::io::Read;
    use std::os::fd::AsRawFd;
    use std::time::{Duration, Instant};
    let (out_reader, out_writer) = os_pipe::pipe()?;
    let (err_reader, err_writer) = os_pipe::pipe()?;
    let expr = expr
        .stdin_null()
        .stdout_file(out_writer)
        .stderr_file(err_writer)
        .unchecked()
        .before_spawn(own_group);
    let handle = expr.start()?;
    // The expression held the parent's copies of the pipes' write ends.
    drop(expr);
    let pgid = handle.pids().first().copied().unwrap_or(0) as i32;
    let _guard = control.register(pgid, project);
    // Both pipes are read here, on the step's own thread, with poll(2): no reader
    // thread per child.
    let mut pipes = [
        Pipe {
            reader: out_reader,
            from: Stream::Stdout,
            partial: Vec::new(),
            open: true,
        },
        Pipe {
            reader: err_reader,
            from: Stream::Stderr,
            partial: Vec::new(),
            open: true,
        },
    ];
    let mut chunk = vec![0u8; 64 * 1024];
    let mut exited_at: Option<Instant> = None;
    while pipes.iter().any(|p| p.open) {
        let mut fds: Vec<libc::pollfd> = pipes
            .iter()
            .filter(|p| p.open)
            .map(|p| libc::pollfd {
                fd: p.reader.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 50) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e);
            }
        } else if n == 0 && exited_at.is_some() {
            // The child is gone and its pipes have been quiet: whoever holds them now is
            // not this project.
            break;
        }
        for fd in fds.iter().filter(|f| f.revents != 0) {
            let Some(p) = pipes.iter_mut().find(|p| p.reader.as_raw_fd() == fd.fd) else {
                continue;
            };
            match (&p.reader).read(&mut chunk) {
                Ok(0) => {
                    p.open = false;
                    p.emit(on_line, true);
                }
                Ok(k) => {
                    p.partial.extend_from_slice(&chunk[..k]);
                    p.emit(on_line, false);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    p.open = false;
                    p.emit(on_line, true);
                }
            }
        }
        if exited_at.is_none() && has_exited(pgid) {
            control.leader_exited(pgid, project);
            if handle.try_wait()?.is_some() {
                exited_at = Some(Instant::now());
            }
        }
        if exited_at.is_some_and(|t| t.elapsed() > Duration::from_secs(2)) {
            break;
        }
    }
    for p in &mut pipes {
        p.emit(on_line, true);
    }
    // A background process the child left still holds a pipe: drain it on a detached
    // thread, so its writes do not fail with EPIPE (or kill it with SIGPIPE).
    for p in pipes.into_iter().filter(|p| p.open) {
        std::thread::spawn(move || {
            let mut sink = [0u8; 8192];
            while matches!((&p.reader).read(&mut sink), Ok(n) if n > 0) {}
        });
    }
    let out = handle.wait()?;
    Ok(exit_of(&out.status))
}

/// What a captured child printed.
pub struct Captured {
    pub exit: Exit,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Runs `expr` to completion in its own process group, registered for Ctrl-C, with
/// `stdin` piped in (or closed), capturing stdout and stderr.
pub fn run_captured(
    expr: duct::Expression,
    control: &Control,
    project: &str,
    stdin: Option<&[u8]>,
) -> std::io::Result<Captured> {
    let expr = match stdin {
        Some(bytes) => expr.stdin_bytes(bytes.to_vec()),
        None => expr.stdin_null(),
    };
    let handle = expr
        .stdout_capture()
        .stderr_capture()
        .unchecked()
        .before_spawn(own_group)
        .start()?;
    let pgid = handle.pids().first().copied().unwrap_or(0) as i32;
    let _guard = control.register(pgid, project);
    wait_exited(pgid);
    control.leader_exited(pgid, project);
    let out = handle.wait()?;
    Ok(Captured {
        exit: exit_of(&out.status),
        stdout: out.stdout.clone(),
        stderr: out.stderr.clone(),
    })
}

/// Finds `program` on the `PATH` of `env` (or takes it as a path when it has a slash).
pub fn find_program(program: &str, env: &BTreeMap<String, String>) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &std::path::Path| {
        p.is_file()
            && std::fs::metadata(p)
                .map(|m| m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
    };
    if program.contains('/') {
        let p = std::path::PathBuf::from(program);
        return is_exec(&p).then_some(p);
    }
    let path = env.get("PATH")?;
    std::env::split_paths(path)
        .map(|d| d.join(program))
        .find(|p| is_exec(p))
}

/// The absolute path of `sh` on the children's `PATH`, looked up once per `PATH`. With
/// an absolute program the standard library starts children with `posix_spawn` (a
/// `vfork`): a program looked up on a `PATH` the child's environment rewrites makes it
/// fall back to `fork`, which copies the page tables of a busy parent for every child.
pub fn shell(env: &BTreeMap<String, String>) -> std::path::PathBuf {
    static CACHE: Mutex<Option<(Option<String>, std::path::PathBuf)>> = Mutex::new(None);
    let path = env.get("PATH").cloned();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((p, sh)) = cache.as_ref()
        && *p == path
    {
        return sh.clone();
    }
    let sh = find_program("sh", env).unwrap_or_else(|| "sh".into());
    *cache = Some((path, sh.clone()));
    sh
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `script` with `sh -c` as project `p` under `c`: how it exited, and each line
    /// it printed on stdout or stderr.
    fn sh_lines(c: &Control, script: &str) -> (Exit, Vec<String>) {
        let mut lines = Vec::new();
        let exit = run_streaming(duct::cmd!("sh", "-c", script), c, "p", &mut |l| {
            lines.push(l)
        })
        .unwrap();
        (exit, lines)
    }

    /// A background process the child leaves holding its stdout neither keeps the
    /// project running nor dies of SIGPIPE when it writes later.
    #[test]
    fn a_background_process_holding_the_pipe_is_not_waited_for_nor_killed() {
        let d = tempfile::tempdir().unwrap();
        let marker = d.path().join("alive");
        let script = format!(
            "(sleep 0.4; echo late; echo alive > '{}') & echo early",
            marker.display()
        );
        let t0 = std::time::Instant::now();
        let (exit, lines) = sh_lines(&Control::new(), &script);
        assert!(
            t0.elapsed() < std::time::Duration::from_millis(350),
            "{:?}",
            t0.elapsed()
        );
        assert_eq!(exit.code, Some(0));
        assert_eq!(lines, vec!["early".to_string()]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !marker.exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            marker.exists(),
            "the background process was killed by SIGPIPE"
        );
    }

    #[test]
    fn the_shell_is_an_absolute_path_found_on_the_childrens_path() {
        let env: BTreeMap<String, String> =
            [("PATH".to_string(), "/nonexistent:/bin:/usr/bin".to_string())].into();
        let sh = shell(&env);
        assert!(sh.is_absolute(), "{}", sh.display());
        assert!(sh.ends_with("sh"));
        // Another PATH is looked up again.
        let empty: BTreeMap<String, String> =
            [("PATH".to_string(), "/nonexistent".to_string())].into();
        assert_eq!(shell(&empty), std::path::PathBuf::from("sh"));
        assert_eq!(shell(&env), sh);
    }

    #[test]
    fn streams_lines_and_exit_code() {
        let c = Control::new();
        let (exit, mut lines) = sh_lines(&c, "echo one; echo two >&2; exit 3");
        assert_eq!(exit.code, Some(3));
        // Two pipes: stdout and stderr lines arrive in either order.
        lines.sort();
        assert_eq!(lines, ["one", "two"]);
        assert!(c.running().is_empty(), "unregistered after exit");
    }

    #[test]
    fn a_long_stdout_line_is_not_split_by_stderr() {
        // A 64 KiB line on stdout while stderr writes many short lines.
        let (exit, lines) = sh_lines(
            &Control::new(),
            "(i=0; while [ $i -lt 200 ]; do echo err$i >&2; i=$((i+1)); done) & head -c 65536 /dev/zero | tr '\\0' x; echo; wait",
        );
        assert!(exit.success());
        let long: Vec<&String> = lines.iter().filter(|l| l.starts_with('x')).collect();
        assert_eq!(long.len(), 1, "one whole line");
        assert_eq!(long[0].len(), 65536);
        assert_eq!(lines.iter().filter(|l| l.starts_with("err")).count(), 200);
    }

    #[test]
    fn child_has_own_process_group_and_no_stdin() {
        let (_, lines) = sh_lines(
            &Control::new(),
            "ps -o pgid= -p $$; ps -o pid= -p $$; cat; echo eof",
        );
        let lines: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
        assert_eq!(lines[0], lines[1], "pgid == pid: {lines:?}");
        assert_eq!(lines.last(), Some(&"eof"));
    }

    #[test]
    fn cancel_sends_sigint_once() {
        let c = std::sync::Arc::new(Control::new());
        let c2 = c.clone();
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let mut lines = Vec::new();
            let exit = run_streaming(
                duct::cmd!(
                    "sh",
                    "-c",
                    "n=0; trap 'n=$((n+1)); echo got $n' INT; echo ready; i=0; while [ $i -lt 100 ] && [ $n -eq 0 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.2; echo total $n"
                ),
                &c2,
                "p",
                &mut |l| {
                    if l == "ready" {
                        let _ = ready_tx.send(());
                    }
                    lines.push(l)
                },
            )
            .unwrap();
            (exit, lines)
        });
        // The trap is installed once the child says so: no sleep to guess it.
        ready_rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("the child got ready");
        assert_eq!(c.cancel(), vec!["p".to_string()]);
        assert!(c.cancel().is_empty(), "second cancel is a no-op");
        let (exit, lines) = t.join().unwrap();
        assert_eq!(exit.code, Some(0));
        assert!(lines.contains(&"total 1".to_string()), "{lines:?}");
    }

    #[test]
    fn finds_programs_on_path() {
        let env: BTreeMap<String, String> =
            [("PATH".to_string(), "/usr/bin:/bin".to_string())].into();
        assert!(find_program("sh", &env).is_some());
        assert!(find_program("definitely-not-a-program-xyz", &env).is_none());
    }
}
