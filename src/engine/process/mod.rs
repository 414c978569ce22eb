//! Child processes: each in its own process group with stdin closed, output streamed
//! line by line or captured, how it ended, and where a program is found. Who may cancel
//! them, and how, is `control`'s.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::sync::Mutex;

mod control;
mod pipes;

pub use control::{ChildGuard, ChildObserver, Control};
use pipes::Pipes;

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
    let mut pipes = Pipes::new(out_reader, err_reader);
    let mut exited_at: Option<Instant> = None;
    while pipes.any_open() {
        let quiet = !pipes.pump(on_line)?;
        if quiet && exited_at.is_some() {
            // The child is gone and its pipes have been quiet: whoever holds them now is
            // not this project.
            break;
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
    pipes.finish(on_line);
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
mod tests;
