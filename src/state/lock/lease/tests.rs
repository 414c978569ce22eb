//! Unit tests of the lease on an in-memory object store (with ETags and conditional
//! puts, as S3 has them): taking, refusing, releasing, takeover after a whole TTL only,
//! a lost lease, racing waiters, and freeing.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use object_store::memory::InMemory;

use super::*;

fn backend(store: &Arc<InMemory>) -> Backend {
    Backend::new("s3://test".into(), store.clone(), String::new()).unwrap()
}

fn holder(host: &str, ttl_ms: u64) -> Holder {
    let env = BTreeMap::from([
        ("STRATA_TEST_HOSTNAME".to_string(), host.to_string()),
        ("STRATA_TEST_LEASE_TTL_MS".to_string(), ttl_ms.to_string()),
        ("USER".to_string(), "alice".to_string()),
    ]);
    Holder::me(&env, "prod", &format!("run-{host}"), "strata up").unwrap()
}

/// Drops `lease`, which releases it: no holder of `prod` is left on `b`.
#[track_caller]
fn assert_released_on_drop(lease: Lease, b: &Backend) {
    drop(lease);
    assert!(read(b, "prod").unwrap().unwrap().holders.is_empty());
}

/// `host`'s lease of stack `prod` (of `ttl_ms`), waiting up to `timeout`; a loss ignored.
fn take(
    store: &Arc<InMemory>,
    host: &str,
    ttl_ms: u64,
    timeout: Duration,
    warnings: &mut Vec<String>,
) -> Result<Lease> {
    acquire(
        Arc::new(backend(store)),
        holder(host, ttl_ms),
        Waiting {
            timeout,
            stop: &|| None,
            warn: &mut |m| warnings.push(m),
        },
        Box::new(|_: String| {}),
    )
}

#[test]
fn a_held_lease_refuses_naming_its_holder_and_is_free_once_released() {
    let store = Arc::new(InMemory::new());
    let mut w = Vec::new();
    let a = take(&store, "host-a", 3000, Duration::ZERO, &mut w).unwrap();
    let t0 = Instant::now();
    let Err(e) = take(&store, "host-b", 3000, Duration::ZERO, &mut w) else {
        panic!("taken twice")
    };
    assert!(t0.elapsed() < Duration::from_secs(1), "refused at once");
    assert_eq!(e.exit_code(), 3);
    for part in [
        "stack `prod` is in use",
        "run run-host-a",
        "by alice on host-a",
        "s3://test",
        "strata unlock -s prod",
        "--lock-timeout",
    ] {
        assert!(e.message.contains(part), "{part}: {}", e.message);
    }
    assert_released_on_drop(a, &backend(&store));
    // Released: taken at once, no takeover notice.
    let b = take(&store, "host-b", 3000, Duration::ZERO, &mut w);
    assert!(b.is_ok());
    assert!(w.is_empty(), "{w:?}");
}

#[test]
fn a_renewed_lease_is_never_taken_over_and_a_dead_one_only_after_its_ttl() {
    let store = Arc::new(InMemory::new());
    let mut w = Vec::new();
    let ttl = Duration::from_millis(600);
    let live = take(&store, "host-a", 600, Duration::ZERO, &mut w).unwrap();
    // Three TTLs of waiting: the holder renews, so the waiter never sees it still.
    let e = take(&store, "host-b", 600, ttl * 3, &mut w);
    assert!(e.is_err(), "a renewed lease was taken over");
    drop(live);

    // A holder that died: its lease is never renewed.
    let b = backend(&store);
    let dead = holder("host-dead", 600);
    let key = key(&b, "prod");
    let cur = b.get(&key).unwrap().unwrap();
    b.update(&key, &dead.body(), &cur.etag).unwrap().unwrap();
    let t0 = Instant::now();
    let early = take(&store, "host-b", 600, ttl / 2, &mut w);
    assert!(early.is_err(), "taken over before its TTL");
    let t0b = Instant::now();
    let late = take(&store, "host-b", 600, ttl * 3, &mut w);
    assert!(late.is_ok());
    assert!(t0b.elapsed() >= ttl, "took over after {:?}", t0b.elapsed());
    assert!(t0.elapsed() >= ttl);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("host-dead"), "{w:?}");
}

#[test]
fn a_holder_whose_lease_was_taken_is_told_naming_the_taker() {
    let store = Arc::new(InMemory::new());
    let (a, lost) = held_noting_loss(Arc::new(backend(&store)), "host-a", 300);
    let b = backend(&store);
    let key = key(&b, "prod");
    let cur = b.get(&key).unwrap().unwrap();
    b.update(&key, &holder("host-thief", 300).body(), &cur.etag)
        .unwrap()
        .unwrap();
    let t0 = Instant::now();
    while lost.lock().unwrap().is_empty() && t0.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(a);
    let msgs = lost.lock().unwrap().clone();
    assert_eq!(msgs.len(), 1, "{msgs:?}");
    assert!(msgs[0].contains("host-thief"), "{msgs:?}");
    assert!(msgs[0].contains("Cancelling this run"), "{msgs:?}");
    // Its end did not release the thief's lease.
    let now = read(&b, "prod").unwrap().unwrap().holders;
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].host, "host-thief");
}

/// Each winner keeps its lease until both racers are done (so the loser cannot take it
/// after a release), and the loser waits long enough that a loaded machine's delays
/// cannot make both lose: exactly one wins every round.
#[test]
fn two_waiters_racing_for_a_dead_lease_never_both_win() {
    for round in 0..10 {
        let store = Arc::new(InMemory::new());
        let b = backend(&store);
        let key = key(&b, "prod");
        b.create(&key, &holder("host-dead", 200).body()).unwrap();
        let racers: Vec<_> = ["host-x", "host-y"]
            .into_iter()
            .map(|h| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let mut w = Vec::new();
                    take(&store, h, 200, Duration::from_millis(1500), &mut w).ok()
                })
            })
            .collect();
        let leases: Vec<Option<Lease>> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let won: Vec<bool> = leases.iter().map(Option::is_some).collect();
        assert_eq!(
            won.iter().filter(|w| **w).count(),
            1,
            "round {round}: {won:?}"
        );
        drop(leases);
    }
}

#[test]
fn free_writes_released_on_the_etag_shown_only() {
    let store = Arc::new(InMemory::new());
    let b = backend(&store);
    let key = key(&b, "prod");
    b.create(&key, &holder("host-a", 1000).body()).unwrap();
    let shown = read(&b, "prod").unwrap().unwrap();
    // Renewed since it was shown: not freed.
    let cur = b.get(&key).unwrap().unwrap();
    b.update(&key, &holder("host-a2", 1000).body(), &cur.etag)
        .unwrap()
        .unwrap();
    assert!(!free(&b, "prod", &shown).unwrap());
    let shown = read(&b, "prod").unwrap().unwrap();
    assert!(free(&b, "prod", &shown).unwrap());
    assert!(read(&b, "prod").unwrap().unwrap().holders.is_empty());
}

#[test]
fn the_test_overrides_are_checked() {
    let env = BTreeMap::from([("STRATA_TEST_LEASE_TTL_MS".to_string(), "soon".to_string())]);
    let Err(e) = Holder::me(&env, "prod", "r", "strata up") else {
        panic!("a bad TTL accepted")
    };
    e.assert_says("STRATA_TEST_LEASE_TTL_MS");
    let h = Holder::me(&BTreeMap::new(), "prod", "r", "strata up").unwrap();
    assert_eq!(h.ttl(), TTL);
    assert_eq!(h.host, crate::util::hostname());
}

/// An S3 store whose next `late` writes are applied but answered with an error, as a
/// PUT the server applies after the client's timeout; after each, the next
/// `down_after_late` reads fail too (the store away for a moment).
#[derive(Debug)]
struct Late {
    inner: Arc<InMemory>,
    late: AtomicUsize,
    down_after_late: AtomicUsize,
    down: AtomicUsize,
}

/// Takes one from `n` if it is not zero: whether it was.
fn take_one(n: &AtomicUsize) -> bool {
    n.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok()
}

impl std::fmt::Display for Late {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Late")
    }
}

impl Late {
    fn answer_late(&self, n: usize) {
        self.late.store(n, SeqCst);
    }
}

#[async_trait::async_trait]
impl object_store::ObjectStore for Late {
    async fn put_opts(
        &self,
        location: &object_store::path::Path,
        payload: object_store::PutPayload,
        opts: object_store::PutOptions,
    ) -> object_store::Result<object_store::PutResult> {
        let r = self.inner.put_opts(location, payload, opts).await;
        match (r, take_one(&self.late)) {
            (Ok(_), true) => {
                self.down.store(self.down_after_late.load(SeqCst), SeqCst);
                Err(timed_out())
            }
            (r, _) => r,
        }
    }
    async fn put_multipart_opts(
        &self,
        location: &object_store::path::Path,
        opts: object_store::PutMultipartOptions,
    ) -> object_store::Result<Box<dyn object_store::MultipartUpload>> {
        self.inner.put_multipart_opts(location, opts).await
    }
    async fn get_opts(
        &self,
        location: &object_store::path::Path,
        options: object_store::GetOptions,
    ) -> object_store::Result<object_store::GetResult> {
        if take_one(&self.down) {
            return Err(timed_out());
        }
        self.inner.get_opts(location, options).await
    }
    fn delete_stream(
        &self,
        locations: futures::stream::BoxStream<
            'static,
            object_store::Result<object_store::path::Path>,
        >,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::path::Path>> {
        self.inner.delete_stream(locations)
    }
    fn list(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> futures::stream::BoxStream<'static, object_store::Result<object_store::ObjectMeta>> {
        self.inner.list(prefix)
    }
    async fn list_with_delimiter(
        &self,
        prefix: Option<&object_store::path::Path>,
    ) -> object_store::Result<object_store::ListResult> {
        self.inner.list_with_delimiter(prefix).await
    }
    async fn copy_opts(
        &self,
        from: &object_store::path::Path,
        to: &object_store::path::Path,
        options: object_store::CopyOptions,
    ) -> object_store::Result<()> {
        self.inner.copy_opts(from, to, options).await
    }
}

fn timed_out() -> object_store::Error {
    object_store::Error::Generic {
        store: "Late",
        source: "operation timed out".into(),
    }
}

fn late_store() -> (Arc<Late>, Arc<Backend>) {
    let late = Arc::new(Late {
        inner: Arc::new(InMemory::new()),
        late: 0.into(),
        down_after_late: 0.into(),
        down: 0.into(),
    });
    let b = Backend::new("s3://test".into(), late.clone(), String::new()).unwrap();
    (late, Arc::new(b))
}

/// Issue 43, 3: a renewal the store applies but answers late is this run's own write:
/// the next renewal carries on, the run is never cancelled, and its end releases the
/// lease so the next run takes it at once.
#[test]
fn a_renewal_answered_late_is_recognised_as_ours_and_the_run_goes_on() {
    let (late, b) = late_store();
    let (lease, lost) = held_noting_loss(b.clone(), "host-a", 300);
    late.answer_late(1);
    // Several renewals (every 100 ms) after the late one.
    std::thread::sleep(Duration::from_millis(900));
    assert!(
        lost.lock().unwrap().is_empty(),
        "{:?}",
        lost.lock().unwrap()
    );
    let h = read(&b, "prod").unwrap().unwrap().holders[0].clone();
    assert!(h.renewals >= 3, "{h:?}");
    assert_released_on_drop(lease, &b);
}

/// Issue 43, 3: the first create applied but answered late is ours too: the run takes
/// the lease it made instead of failing with it left behind.
#[test]
fn a_create_answered_late_takes_the_lease_it_made() {
    let (late, b) = late_store();
    late.answer_late(1);
    let mut w = Vec::new();
    let lease = take_on(&b, "host-a", &mut w).expect("the lease it created is its own");
    assert!(w.is_empty(), "no takeover: {w:?}");
    assert_released_on_drop(lease, &b);
}

/// Issue 43, 3: a take that fails after its create was applied unanswered (the store
/// then away for a read) releases the lease it made: the next run is not refused for a
/// whole TTL naming a run that never started.
#[test]
fn a_take_that_fails_releases_what_it_created() {
    let (late, b) = late_store();
    late.answer_late(1);
    late.down_after_late.store(1, SeqCst);
    let Err(e) = take_on(&b, "host-a", &mut Vec::new()) else {
        panic!("taken while the store was away")
    };
    assert!(e.message.contains("Nothing was started"), "{e:?}");
    assert!(read(&b, "prod").unwrap().unwrap().holders.is_empty());
    let mut w = Vec::new();
    let next = take_on(&b, "host-b", &mut w);
    assert!(
        next.is_ok(),
        "the next run is not refused: {:?}",
        next.err()
    );
    assert!(w.is_empty(), "taken as released, not over: {w:?}");
}

/// `host`'s lease of `prod` on `b` (of `ttl_ms`), taken at once, and what its loss
/// callback was told.
fn held_noting_loss(b: Arc<Backend>, host: &str, ttl_ms: u64) -> (Lease, Arc<Mutex<Vec<String>>>) {
    let lost = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = lost.clone();
    let lease = acquire(
        b,
        holder(host, ttl_ms),
        Waiting {
            timeout: Duration::ZERO,
            stop: &|| None,
            warn: &mut |_| {},
        },
        Box::new(move |m: String| seen.lock().unwrap().push(m)),
    )
    .unwrap();
    (lease, lost)
}

/// `host`'s lease of `prod` on `b`, refused at once when held.
fn take_on(b: &Arc<Backend>, host: &str, warnings: &mut Vec<String>) -> Result<Lease> {
    acquire(
        b.clone(),
        holder(host, 60_000),
        Waiting {
            timeout: Duration::ZERO,
            stop: &|| None,
            warn: &mut |m| warnings.push(m),
        },
        Box::new(|_: String| {}),
    )
}

/// `host`'s lease of `prod` for `projects` (`None`: the whole environment), waiting up
/// to `timeout`.
fn take_for(
    store: &Arc<InMemory>,
    host: &str,
    projects: Option<&[&str]>,
    timeout: Duration,
) -> Result<Lease> {
    acquire(
        Arc::new(backend(store)),
        holder(host, 600).for_projects(projects.map(|p| p.iter().map(|s| s.to_string()).collect())),
        Waiting {
            timeout,
            stop: &|| None,
            warn: &mut |_| {},
        },
        Box::new(|_: String| {}),
    )
}

/// Issue 44: runs on disjoint sets of projects hold the stack's lease at once; a run
/// whose set overlaps is refused naming the holder and the projects both want; a run
/// of the whole environment overlaps every other; each release frees only its part.
#[test]
fn runs_on_disjoint_projects_hold_the_lease_at_once_and_overlapping_ones_wait() {
    let store = Arc::new(InMemory::new());
    let net = take_for(&store, "host-a", Some(&["infra/net"]), Duration::ZERO).unwrap();
    let app = take_for(&store, "host-b", Some(&["k8s/app"]), Duration::ZERO)
        .expect("a disjoint set goes at once");
    let Err(e) = take_for(
        &store,
        "host-c",
        Some(&["k8s/app", "k8s/db"]),
        Duration::ZERO,
    ) else {
        panic!("two runs hold k8s/app")
    };
    for part in [
        "run run-host-b",
        "for k8s/app",
        "this run wants k8s/app too",
    ] {
        assert!(e.message.contains(part), "{part}: {}", e.message);
    }
    let Err(e) = take_for(&store, "host-c", None, Duration::ZERO) else {
        panic!("the whole environment beside two runs")
    };
    assert!(e.message.contains("run run-host-"), "{}", e.message);
    let held = read(&backend(&store), "prod").unwrap().unwrap().holders;
    assert_eq!(held.len(), 2, "{held:?}");
    drop(app);
    let held = read(&backend(&store), "prod").unwrap().unwrap().holders;
    assert_eq!(
        held.iter().map(|h| h.host.as_str()).collect::<Vec<_>>(),
        ["host-a"],
        "only its own part released"
    );
    let db = take_for(
        &store,
        "host-c",
        Some(&["k8s/app", "k8s/db"]),
        Duration::ZERO,
    );
    assert!(db.is_ok(), "free again: {:?}", db.err());
    // Both keep renewing their parts of one object without losing them.
    std::thread::sleep(Duration::from_millis(700));
    let held = read(&backend(&store), "prod").unwrap().unwrap().holders;
    assert_eq!(held.len(), 2, "{held:?}");
    assert!(held.iter().all(|h| h.renewals >= 2), "{held:?}");
    drop((net, db));
    assert!(
        read(&backend(&store), "prod")
            .unwrap()
            .unwrap()
            .holders
            .is_empty()
    );
}

/// A dead holder of some projects is left out after its whole TTL by a run that wants
/// them, while a live holder of others keeps its part.
#[test]
fn a_dead_part_is_taken_over_after_its_ttl_and_a_live_part_stays() {
    let store = Arc::new(InMemory::new());
    let live = take_for(&store, "host-live", Some(&["a"]), Duration::ZERO).unwrap();
    let b = backend(&store);
    let key = key(&b, "prod");
    // A run that died holding b: its part is never renewed.
    let cur = b.get(&key).unwrap().unwrap();
    let mut all = super::holders(&cur.body).unwrap();
    all.push(holder("host-dead", 600).for_projects(Some(vec!["b".into()])));
    b.update(&key, &super::body(&all), &cur.etag)
        .unwrap()
        .unwrap();
    let t0 = Instant::now();
    let taker = take_for(&store, "host-new", Some(&["b"]), Duration::from_secs(5));
    assert!(taker.is_ok(), "{:?}", taker.err());
    assert!(
        t0.elapsed() >= Duration::from_millis(600),
        "not before its TTL"
    );
    let mut hosts: Vec<String> = read(&b, "prod")
        .unwrap()
        .unwrap()
        .holders
        .into_iter()
        .map(|h| h.host)
        .collect();
    hosts.sort();
    assert_eq!(hosts, ["host-live", "host-new"]);
    drop((live, taker));
}

/// Racing for overlapping sets, 30 rounds: never both hold a project at once.
#[test]
fn overlapping_runs_racing_never_both_hold_a_project() {
    for round in 0..30 {
        let store = Arc::new(InMemory::new());
        let racers: Vec<_> = [("host-x", vec!["a", "b"]), ("host-y", vec!["b", "c"])]
            .into_iter()
            .map(|(h, p)| {
                let store = store.clone();
                std::thread::spawn(move || take_for(&store, h, Some(&p), Duration::ZERO).ok())
            })
            .collect();
        let leases: Vec<Option<Lease>> = racers.into_iter().map(|t| t.join().unwrap()).collect();
        let won = leases.iter().filter(|l| l.is_some()).count();
        assert_eq!(won, 1, "round {round}");
        drop(leases);
    }
}
