//! No Pulumi plugin left running (issue 34): the real CLI's `up` that fails before its
//! update (a stack that does not exist yet, on an object-store backend) exits while a
//! goroutine of its own has started the language host and not yet closed it; the host,
//! in a process group of its own, outlives the CLI. strata stops what a call of it left.
//! Here a wrapper around the fake plays that CLI; `real_s3::pulumi` counts the real ones.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::run::{DIAMOND, DIAMOND_PATHS, workspace};
use crate::support::*;

/// A `pulumi-language-yaml` process whose working folder is in `root`: (pid, what `ps`
/// would say of it: state, parent, group, folder, command line).
pub(crate) fn language_hosts(root: &Path) -> Vec<(i32, String)> {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    processes(|p| {
        p.exe
            .file_name()
            .is_some_and(|n| n == "pulumi-language-yaml")
            && p.cwd.starts_with(&root)
    })
}

/// What /proc says of a live process.
pub(crate) struct Proc {
    pub exe: PathBuf,
    pub cwd: PathBuf,
}

/// The live processes (not zombies) `pick` takes: (pid, what `ps` would say of it: state,
/// parent, group, folder, command line).
pub(crate) fn processes(pick: impl Fn(&Proc) -> bool) -> Vec<(i32, String)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let fields: Vec<&str> = stat[stat.rfind(')')? + 2..].split(' ').collect();
            let p = Proc {
                exe: std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default(),
                cwd: std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?,
            };
            if fields[0] == "Z" || !pick(&p) {
                return None;
            }
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
                .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
                .unwrap_or_default();
            Some((
                pid,
                format!(
                    "pid {pid} state {} ppid {} pgid {} cwd {} cmd {cmdline}",
                    fields[0],
                    fields[1],
                    fields[2],
                    p.cwd.display()
                ),
            ))
        })
        .collect()
}

/// Kills (by pid) the language hosts of a workspace still there when dropped: a failed
/// assertion leaves none behind.
pub(crate) struct KillLeftovers(pub PathBuf);

impl Drop for KillLeftovers {
    fn drop(&mut self) {
        for (pid, _) in language_hosts(&self.0) {
            // SAFETY: kill(2) of a process this test's workspace started.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
        }
    }
}

/// The language hosts of `root` still running once the run has had 10 s to let its
/// plugins go (a host the CLI closes exits within a moment).
pub(crate) fn leftover_language_hosts(root: &Path) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = language_hosts(root);
        if left.is_empty() || Instant::now() > deadline {
            return left.into_iter().map(|(_, d)| d).collect();
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `pulumi` in `ws` becomes a wrapper that, like the real CLI exiting early, starts a
/// "language host" (a copy of `sleep` named pulumi-language-yaml) in a session of its own,
/// waits until it runs (the CLI has read its port) and leaves it running, then runs the
/// fake.
fn leaving_a_language_host(ws: &Ws) {
    let sleep = find_tool(&["sleep"]).expect("sleep");
    let host = ws.path("plugins/pulumi-language-yaml");
    std::fs::create_dir_all(host.parent().unwrap()).unwrap();
    std::fs::copy(&sleep, &host).unwrap();
    let wrapper = ws.bin.join("pulumi");
    std::fs::remove_file(&wrapper).unwrap();
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nsetsid '{h}' 300 </dev/null >/dev/null 2>&1 &\nwhile [ \"$(readlink /proc/$!/exe)\" != '{h}' ]; do sleep 0.01; done\nexec '{}' \"$@\"\n",
            fake_pulumi().display(),
            h = host.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Every Pulumi call of the run leaves a language host behind it: after the run none is
/// left, and the run succeeded as before.
#[test]
fn language_hosts_a_pulumi_call_leaves_are_stopped() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    let _guard = KillLeftovers(ws.root.clone());
    leaving_a_language_host(&ws);
    let r = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 0, "{r:?}");
    let left = leftover_language_hosts(&ws.root);
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
}
