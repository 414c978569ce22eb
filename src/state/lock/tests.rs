//! Unit tests of the stack lock: taking, refusing, taking over, and waiting for orphans.

use std::os::unix::process::CommandExt;

use super::*;

use std::time::Duration;

/// A sleeping child of this test in its own process group (as a Pulumi update's is).
fn group_child(secs: &str) -> std::process::Child {
    std::process::Command::new("sleep")
        .arg(secs)
        .process_group(0)
        .spawn()
        .unwrap()
}

/// The description a strata that is gone left on this host, naming `children`.
fn gone_owner(children: Vec<(i32, String)>) -> Owner {
    Owner {
        pid: 999_999_999,
        host: hostname(),
        started: None,
        command: "strata up".into(),
        since: "2020-01-01T00:00:00Z".into(),
        children,
    }
}

/// Writes `owner` as the lock's description in `dir`; the text written.
fn describe(dir: &Path, owner: &Owner) -> String {
    let text = serde_json::to_string(owner).unwrap();
    std::fs::write(dir.join("lock"), &text).unwrap();
    text
}

/// What the lock in `dir` says now.
fn lock_text(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("lock")).unwrap()
}

/// `strata up`'s lock of stack `dev` in `dir`, waiting `wait` for orphans, with no signal;
/// the takeover warnings it gave.
fn take(dir: &Path, wait: Duration) -> (Result<StackLock>, Vec<String>) {
    let mut warnings = Vec::new();
    let got = StackLock::acquire(dir, "dev", "strata up", wait, &|| None, &mut |w| {
        warnings.push(w)
    });
    (got, warnings)
}

#[test]
fn a_stale_lock_with_a_live_child_group_is_not_taken_over() {
    let d = tempfile::tempdir().unwrap();
    // A live group: a child of this test in its own process group.
    let mut child = group_child("30");
    describe(
        d.path(),
        &gone_owner(vec![(child.id() as i32, "infra/vpc".into())]),
    );
    let wait = Duration::from_millis(300);
    let e = take(d.path(), wait).0.unwrap_err();
    assert_eq!(e.exit_code(), 3);
    assert!(
        e.message
            .contains(&format!("process group {} (infra/vpc)", child.id())),
        "{}",
        e.message
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let (l, warnings) = take(d.path(), wait);
    let l = l.unwrap();
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
    let now: Owner = serde_json::from_str(&lock_text(d.path())).unwrap();
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
    let l = take(d.path(), Duration::ZERO).0.unwrap();
    let e = take(d.path(), Duration::ZERO).0.unwrap_err();
    assert_eq!(e.exit_code(), 3);
    assert!(e.message.contains(&format!("pid {}", std::process::id())));
    drop(l);
    assert!(!d.path().join("lock").exists());
    take(d.path(), Duration::ZERO).0.unwrap();
}

#[test]
fn stale_lock_is_taken_over_with_warning() {
    let d = tempfile::tempdir().unwrap();
    describe(d.path(), &gone_owner(vec![]));
    let (l, warnings) = take(d.path(), Duration::ZERO);
    l.unwrap();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("999999999"));
}

/// Issue 25: of many strata that find the same stale lock at once, exactly one takes
/// it (a takeover once removed the lock another waiter had just taken).
#[test]
fn racing_for_a_stale_lock_exactly_one_wins() {
    for _round in 0..5 {
        let d = tempfile::tempdir().unwrap();
        // Its strata is gone; its child's group ends in a moment, and every waiter
        // sees that within one poll of the others.
        let mut child = group_child("0.3");
        describe(
            d.path(),
            &gone_owner(vec![(child.id() as i32, "infra/vpc".into())]),
        );
        let n = 8;
        let start = std::sync::Barrier::new(n);
        let tried = std::sync::Barrier::new(n);
        let won = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            s.spawn(|| child.wait().unwrap());
            for _ in 0..n {
                s.spawn(|| {
                    start.wait();
                    let got = take(d.path(), Duration::from_secs(5)).0;
                    if let Err(e) = &got {
                        assert_eq!(e.exit_code(), 3, "{}", e.message);
                        e.assert_says("in use");
                    } else {
                        won.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    }
                    // The winner holds the lock until every other has tried.
                    tried.wait();
                    drop(got);
                });
            }
        });
        assert_eq!(won.into_inner(), 1, "exactly one strata takes a stale lock");
        assert!(!d.path().join("lock").exists(), "released");
    }
}

/// A description naming a live pid whose process started at another time is a lock
/// left behind by a process whose pid was reused (a restarted container): taken over.
#[test]
fn a_reused_pid_does_not_keep_the_lock() {
    let d = tempfile::tempdir().unwrap();
    let me = std::process::id();
    let started = start_time(me).expect("procfs");
    let stale = Owner {
        pid: me,
        started: Some(started + 1),
        ..gone_owner(vec![])
    };
    describe(d.path(), &stale);
    let (l, warnings) = take(d.path(), Duration::ZERO);
    let l = l.unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let now: Owner = serde_json::from_str(&lock_text(d.path())).unwrap();
    assert_eq!((now.pid, now.started), (me, Some(started)));
    drop(l);
    // The same pid with the same start time is a live owner: refused, left alone.
    let text = describe(
        d.path(),
        &Owner {
            started: Some(started),
            ..stale
        },
    );
    let e = take(d.path(), Duration::ZERO).0.unwrap_err();
    assert_eq!(e.exit_code(), 3, "{}", e.message);
    assert_eq!(lock_text(d.path()), text);
}

/// A signal ends the wait for a dead owner's children at once: exit 128+n, and the
/// lock is left naming them (and free), so the next strata waits for them too.
#[test]
fn a_signal_ends_the_orphan_wait() {
    let d = tempfile::tempdir().unwrap();
    let mut child = group_child("30");
    let text = describe(
        d.path(),
        &gone_owner(vec![(child.id() as i32, "infra/vpc".into())]),
    );
    let t0 = std::time::Instant::now();
    let e = StackLock::acquire(
        d.path(),
        "dev",
        "strata up",
        Duration::from_secs(30),
        &|| Some(libc::SIGTERM),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert_eq!(e.exit_code(), 143, "{}", e.message);
    assert_eq!(lock_text(d.path()), text);
    let again = take(d.path(), Duration::ZERO).0.unwrap_err();
    assert!(
        again.message.contains("its children still run"),
        "{}",
        again.message
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
