//! The process groups that a child's own children went into. Pulumi starts each plugin
//! (the language host, every provider) in a process group of its own, so signalling the
//! group strata made for `pulumi` does not reach them; if `pulumi` is then killed
//! outright, they are orphaned and run on. A hard kill therefore looks them up through
//! `/proc` (while their parent still lives) and kills their groups too. A plugin the CLI
//! left running when it exited on its own is found by the call's name in its
//! environment, and stopped.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

/// Names one Pulumi call in its environment. Every plugin the CLI starts inherits it
/// (Pulumi passes its own environment on), so what a call left is found after it exits.
pub const CALL_VAR: &str = "STRATA_PULUMI_CALL";

/// A new value for [`CALL_VAR`]: 16 random bytes in hex, so that only this call's own
/// plugins carry it. Not `<pid>-<n>`: a strata in another PID namespace (a container)
/// can have the same pid, and its plugins would match. Should the kernel's random source
/// be unreadable, a digest of the pid, a counter and the time stands in.
pub fn new_call() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    match crate::util::random_bytes(16) {
        Ok(b) => crate::util::hex(&b),
        Err(_) => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let seed = format!(
                "{}-{}-{nanos}",
                std::process::id(),
                NEXT.fetch_add(1, Ordering::SeqCst)
            );
            crate::util::sha256_hex(seed.as_bytes())[..32].to_string()
        }
    }
}

/// Kills (SIGKILL, by pid) each Pulumi plugin (an executable named `pulumi-<kind>-...`:
/// language host, provider, analyzer) of the call `call` still running once its CLI has
/// exited, and says which, for the log. The real CLI leaves one when it exits before a
/// goroutine of its own closed the language host it had started (`pulumi up` on a stack
/// that does not exist yet: `GetLanguageRuntimeMetadata`, cmd/pulumi/metadata); that
/// host only notices the CLI is gone at its next health check, minutes later. Nothing
/// else is touched: not the CLI's own children that are no plugin (a server a
/// `command:local:Command` started on purpose), not another call's plugins.
pub fn stop_plugins_left_by(call: &str) -> Option<String> {
    let left = plugins_of(call);
    for (pid, _) in &left {
        // SAFETY: kill(2) of one process, found just now with this call's name in its
        // environment; no memory is touched.
        unsafe {
            libc::kill(*pid, libc::SIGKILL);
        }
    }
    let names: Vec<String> = left.iter().map(|(p, n)| format!("{n} (pid {p})")).collect();
    (!names.is_empty()).then(|| {
        format!(
            "strata stopped what the Pulumi CLI left running when it exited: {}",
            names.join(", ")
        )
    })
}

/// The running plugins whose environment names `call`: (pid, executable name).
fn plugins_of(call: &str) -> Vec<(i32, String)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let wanted = format!("{CALL_VAR}={call}");
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
            let name = exe.file_name()?.to_str()?.to_string();
            if !name.starts_with("pulumi-") || stat_state(pid) == Some('Z') {
                return None;
            }
            let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            env.split(|b| *b == 0)
                .any(|kv| kv == wanted.as_bytes())
                .then_some((pid, name))
        })
        .collect()
}

/// The state letter of `/proc/<pid>/stat` (`Z`: a zombie, already dead).
fn stat_state(pid: i32) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..].trim_start().chars().next()
}

/// One process as `/proc/<pid>/stat` tells it: (parent pid, process group).
fn stat(pid: i32) -> Option<(i32, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2, the command, is in parentheses and may hold anything: count after it.
    let mut rest = text[text.rfind(')')? + 1..].split_whitespace();
    let _state = rest.next()?;
    let ppid = rest.next()?.parse().ok()?;
    let pgrp = rest.next()?.parse().ok()?;
    Some((ppid, pgrp))
}

/// Every process of this machine (this PID namespace): pid → (parent, group).
fn processes() -> BTreeMap<i32, (i32, i32)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

/// The groups, other than `pgid`, of the descendants of the processes of group `pgid`.
pub fn other_groups_below(pgid: i32) -> BTreeSet<i32> {
    groups_below(&processes(), pgid)
}

fn groups_below(procs: &BTreeMap<i32, (i32, i32)>, pgid: i32) -> BTreeSet<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (&pid, &(ppid, _)) in procs {
        children.entry(ppid).or_default().push(pid);
    }
    let mut todo: Vec<i32> = procs
        .iter()
        .filter(|(_, (_, g))| *g == pgid)
        .map(|(&pid, _)| pid)
        .collect();
    let mut seen = BTreeSet::new();
    let mut groups = BTreeSet::new();
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if let Some((_, g)) = procs.get(&pid)
            && *g != pgid
            && *g > 1
        {
            groups.insert(*g);
        }
        todo.extend(children.get(&pid).into_iter().flatten().copied());
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The marker is a random token, not `<pid>-<n>`: a strata in another PID namespace
    /// with the same pid must not match this one's plugins (issue 43, item 9).
    #[test]
    fn a_call_is_named_by_a_random_token() {
        let (a, b) = (new_call(), new_call());
        assert_ne!(a, b);
        for t in [&a, &b] {
            assert_eq!(t.len(), 32, "{t}");
            assert!(t.chars().all(|c| c.is_ascii_hexdigit()), "{t}");
            assert!(!t.starts_with(&format!("{}-", std::process::id())), "{t}");
        }
    }

    #[test]
    fn the_groups_of_a_groups_descendants_are_found() {
        // pulumi (100, group 100) → language host (101, own group), provider (102, own
        // group) → its child (103, in 102's group); a shell (100's sibling) elsewhere.
        let procs = BTreeMap::from([
            (1, (0, 1)),
            (50, (1, 50)),
            (100, (50, 100)),
            (101, (100, 101)),
            (102, (100, 102)),
            (103, (102, 102)),
            (104, (100, 100)),
            (200, (50, 200)),
        ]);
        assert_eq!(
            groups_below(&procs, 100).into_iter().collect::<Vec<_>>(),
            [101, 102]
        );
        assert!(groups_below(&procs, 200).is_empty());
        assert!(groups_below(&procs, 999).is_empty());
    }

    /// Three orphans, each a copy of `sleep` in a session of its own, as the CLI leaves a
    /// plugin: a `pulumi-language-yaml` of this call is killed; the same plugin of
    /// another call, and a server of this call that is no plugin, are left alone.
    #[test]
    fn only_the_plugins_a_call_left_are_stopped() {
        let d = tempfile::tempdir().unwrap();
        let sleep = ["/bin/sleep", "/usr/bin/sleep"]
            .into_iter()
            .find(|p| std::path::Path::new(p).is_file())
            .unwrap();
        for name in ["pulumi-language-yaml", "etcd"] {
            std::fs::copy(sleep, d.path().join(name)).unwrap();
        }
        let (ours, other) = (new_call(), new_call());
        let orphan = |name: &str, call: &str| -> i32 {
            let out = std::process::Command::new("sh")
                .args([
                    "-c",
                    "setsid \"$0\" 30 </dev/null >/dev/null 2>&1 & echo $!",
                ])
                .arg(d.path().join(name))
                .env(CALL_VAR, call)
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let plugin = orphan("pulumi-language-yaml", &ours);
        let others = orphan("pulumi-language-yaml", &other);
        let server = orphan("etcd", &ours);
        // Until each has exec'd its copy, it is still `sh`.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while [plugin, others, server].iter().any(|p| {
            std::fs::read_link(format!("/proc/{p}/exe"))
                .is_ok_and(|e| e.starts_with("/bin") || e.starts_with("/usr"))
        }) && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let said = stop_plugins_left_by(&ours);
        let gone = |pid: i32| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !matches!(stat_state(pid), None | Some('Z')) {
                if std::time::Instant::now() > deadline {
                    return false;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            true
        };
        let plugin_gone = gone(plugin);
        let (others_alive, server_alive) = (stat_state(others), stat_state(server));
        // SAFETY: kill(2) of the processes this test started.
        unsafe {
            libc::kill(others, libc::SIGKILL);
            libc::kill(server, libc::SIGKILL);
        }
        assert!(plugin_gone, "the call's plugin {plugin} still runs");
        assert!(
            matches!(others_alive, Some(s) if s != 'Z'),
            "another call's plugin"
        );
        assert!(
            matches!(server_alive, Some(s) if s != 'Z'),
            "a server of the call"
        );
        let said = said.unwrap_or_default();
        assert!(
            said.contains(&format!("pulumi-language-yaml (pid {plugin})")),
            "{said}"
        );
        assert!(
            !said.contains(&others.to_string()) && !said.contains("etcd"),
            "{said}"
        );
        assert_eq!(
            stop_plugins_left_by(&ours),
            None,
            "nothing left the second time"
        );
    }

    /// A real child that starts a grandchild in a group of its own (as Pulumi starts its
    /// plugins): found from the child's group.
    #[test]
    fn a_real_grandchild_in_its_own_group_is_found() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let pgid = child.id() as i32;
        // `$!` is known as soon as the shell forks, before `setsid` has run in the
        // fork: until it has, the grandchild is still in the child's group.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while stat(grandchild).is_some_and(|(_, g)| g != grandchild)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let found = other_groups_below(pgid);
        // SAFETY: kill(2) of processes this test started.
        unsafe {
            libc::kill(-grandchild, libc::SIGKILL);
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = child.wait();
        assert!(found.contains(&grandchild), "{found:?} lacks {grandchild}");
    }
}
