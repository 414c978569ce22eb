//! A server one of the repository's test scripts starts on loopback
//! (scripts/kube-test-cluster.sh, scripts/s3-test-server.sh), shared by the tests that run
//! at the same time: started with `SCRIPT start DIR --watch PID` (the watchdog stops it if
//! the test binary dies first), its settings read from the env file the script writes in
//! DIR, stopped with `SCRIPT stop DIR` when dropped (a panic's unwinding too).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, Weak};

use super::script;

/// What to start: what it is called in a failure, the script, the env file it writes,
/// and where its binaries are found (`STRATA_<NAME>_BIN_DIR`, else the install script's
/// `~/.cache/strata/<name>/current`; missing, `hint` says how to get them).
pub(crate) struct Kind {
    pub what: &'static str,
    pub script: &'static str,
    pub env_file: &'static str,
    pub name: &'static str,
    pub bin_var: &'static str,
    pub binaries: &'static [&'static str],
    pub hint: &'static str,
}

/// The folder holding the binaries of `kind`, or `None` (skipped) outside CI.
pub(crate) fn real_bin_dir(kind: &Kind, test: &str) -> Option<PathBuf> {
    crate::support::real_bin_dir(
        test,
        kind.what,
        kind.bin_var,
        kind.name,
        kind.binaries,
        kind.hint,
    )
}

/// A running server; stopped when dropped.
pub(crate) struct Service {
    kind: &'static Kind,
    dir: tempfile::TempDir,
    env: BTreeMap<String, String>,
}

impl Service {
    /// Starts one of `kind` with the binaries in `bin`, asserting it started.
    pub(crate) fn start(kind: &'static Kind, bin: &Path) -> Service {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = Command::new("bash")
            .arg(script(kind.script))
            .arg("start")
            .arg(dir.path())
            .args(["--watch", &std::process::id().to_string()])
            .env(kind.bin_var, bin)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("run scripts/{}: {e}", kind.script));
        // The guard exists before any assertion, so a failed start stops what it started.
        let env = std::fs::read_to_string(dir.path().join(kind.env_file))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.trim_matches('\'').to_string()))
            .collect();
        let service = Service { kind, dir, env };
        assert!(
            out.status.success(),
            "{} did not start:\n{}",
            kind.what,
            String::from_utf8_lossy(&out.stderr)
        );
        service
    }

    /// A setting of the env file.
    pub(crate) fn var(&self, key: &str) -> &str {
        self.env
            .get(key)
            .unwrap_or_else(|| panic!("{key} not in {}", self.kind.env_file))
    }

    /// The folder the script keeps the server's files in.
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script(self.kind.script))
            .arg("stop")
            .arg(self.dir.path())
            .stdin(Stdio::null())
            .status();
    }
}

/// The server in `slot` while a test running now holds it, else a new one from `start`.
pub(crate) fn shared<T>(slot: &Mutex<Weak<T>>, start: impl FnOnce() -> T) -> Arc<T> {
    let mut held = slot.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(running) = held.upgrade() {
        return running;
    }
    let running = Arc::new(start());
    *held = Arc::downgrade(&running);
    running
}

/// The kernel's range of ports for outgoing connections (`ip_local_port_range`).
fn ephemeral_range() -> (u32, u32) {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap_or_else(|_| "32768 60999".into());
    let mut it = text.split_whitespace().map(|n| n.parse().expect("a port"));
    (it.next().expect("low"), it.next().expect("high"))
}

/// The servers' free ports are chosen outside the range the kernel hands out to outgoing
/// connections: a port picked there was taken by one of the server's own connections
/// (SeaweedFS's parts talk to each other before its S3 gateway binds) often enough that
/// a start failed three times in CI with `bind: address already in use`.
#[test]
fn free_ports_are_chosen_outside_the_ephemeral_range() {
    let (low, high) = ephemeral_range();
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"NAME=t; . "$1"; for _ in $(seq 1 300); do free_port port; echo "$port"; done"#)
        .arg("bash")
        .arg(script("lib/test-server.sh"))
        .stdin(Stdio::null())
        .output()
        .expect("bash");
    assert!(out.status.success(), "{out:?}");
    let ports: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap_or_else(|_| panic!("not a port: {l:?}")))
        .collect();
    assert_eq!(ports.len(), 300, "{out:?}");
    // A kernel range of nearly all ports leaves none outside it (the script then relies
    // on a retried start).
    if low >= 12000 || high <= 63535 {
        let inside: Vec<_> = ports.iter().filter(|p| (low..=high).contains(*p)).collect();
        assert!(inside.is_empty(), "in {low}-{high}: {inside:?}");
    }
    assert!(
        ports.iter().all(|p| (1024..=65535).contains(p)),
        "{ports:?}"
    );
    let distinct: std::collections::BTreeSet<_> = ports.iter().collect();
    assert_eq!(distinct.len(), ports.len(), "a port twice: {ports:?}");
}
