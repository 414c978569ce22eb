//! Child processes: each in its own process group with stdin closed, output streamed
//! line by line, and a registry so Ctrl-C reaches each running child exactly once.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Shared by the scheduler, the engines and the signal handler.
#[derive(Debug, Default)]
pub struct Control {
    cancelled: AtomicBool,
    killed: AtomicBool,
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
        }
    }
}

impl Control {
    pub fn new() -> Control {
        Control::default()
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
            if self.is_killed() {
                signal_group(pgid, libc::SIGKILL);
            } else if self.is_cancelled() {
                signal_group(pgid, libc::SIGINT);
            }
        }
        ChildGuard { control: self, id }
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

    /// Projects with a child still running.
    pub fn running(&self) -> Vec<String> {
        self.children
            .lock()
            .map(|c| c.values().map(|(_, p)| p.clone()).collect())
            .unwrap_or_default()
    }
}

fn signal_group(pgid: i32, sig: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is touched.
        unsafe {
            libc::kill(-pgid, sig);
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

/// Runs `expr` in its own process group with stdin closed, stdout and stderr merged and
/// fed to `on_line` line by line, and returns how it ended.
pub fn run_streaming(
    expr: duct::Expression,
    control: &Control,
    project: &str,
    on_line: &mut dyn FnMut(String),
) -> std::io::Result<Exit> {
    let expr = expr
        .stdin_null()
        .stderr_to_stdout()
        .unchecked()
        .before_spawn(|cmd| {
            cmd.process_group(0);
            #[cfg(target_os = "linux")]
            // SAFETY: the closure runs in the child between fork and exec and calls only
            // prctl(2), which is async-signal-safe. If strata dies without cleaning up
            // (SIGKILL), the child still gets its one graceful SIGINT.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGINT);
                    Ok(())
                });
            }
            Ok(())
        });
    let reader = expr.reader()?;
    let pgid = reader.pids().first().copied().unwrap_or(0) as i32;
    let _guard = control.register(pgid, project);
    let mut buf = BufReader::new(&reader);
    let mut line = Vec::new();
    loop {
        line.clear();
        match buf.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {
                while line.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
                    line.pop();
                }
                on_line(String::from_utf8_lossy(&line).into_owned());
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    drop(buf);
    // EOF: duct has waited for the child.
    loop {
        if let Some(output) = reader.try_wait()? {
            use std::os::unix::process::ExitStatusExt;
            return Ok(Exit {
                code: output.status.code(),
                signal: output.status.signal(),
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_lines_and_exit_code() {
        let c = Control::new();
        let mut lines = Vec::new();
        let exit = run_streaming(
            duct::cmd!("sh", "-c", "echo one; echo two >&2; exit 3"),
            &c,
            "p",
            &mut |l| lines.push(l),
        )
        .unwrap();
        assert_eq!(exit.code, Some(3));
        assert_eq!(lines, ["one", "two"]);
        assert!(c.running().is_empty(), "unregistered after exit");
    }

    #[test]
    fn child_has_own_process_group_and_no_stdin() {
        let c = Control::new();
        let mut lines = Vec::new();
        run_streaming(
            duct::cmd!(
                "sh",
                "-c",
                "ps -o pgid= -p $$; ps -o pid= -p $$; cat; echo eof"
            ),
            &c,
            "p",
            &mut |l| lines.push(l.trim().to_string()),
        )
        .unwrap();
        assert_eq!(lines[0], lines[1], "pgid == pid: {lines:?}");
        assert_eq!(lines.last().map(String::as_str), Some("eof"));
    }

    #[test]
    fn cancel_sends_sigint_once() {
        let c = std::sync::Arc::new(Control::new());
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            let mut lines = Vec::new();
            let exit = run_streaming(
                duct::cmd!(
                    "sh",
                    "-c",
                    "n=0; trap 'n=$((n+1)); echo got $n' INT; echo ready; i=0; while [ $i -lt 40 ]; do sleep 0.05; i=$((i+1)); done; echo total $n"
                ),
                &c2,
                "p",
                &mut |l| lines.push(l),
            )
            .unwrap();
            (exit, lines)
        });
        while c.running().is_empty() {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
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
