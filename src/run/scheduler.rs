//! The scheduler: runs a plan's steps as soon as what they need has succeeded, at most
//! `parallel` at once and no more than its pool allows; stops scheduling after a failure
//! (unless keep-going) or Ctrl-C. A step that panics is a failed step (`panics`): the
//! scheduler always hears back from every step it started. What needs a step starts only
//! once the step's journal record is on disk (`settler`); its thread and its place among
//! the `parallel` go to the next step meanwhile.

use std::sync::mpsc;

mod board;
mod panics;
mod settler;
mod workers;

use board::Board;
pub use panics::Panic;
use settler::Settler;
use workers::Workers;

use super::events::{RunEvent, Status};
use super::pools::Pools;
use crate::engine::{Control, Operation};
use crate::plan::Plan;

/// The result of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    pub status: Status,
    pub duration_ms: u64,
    pub message: Option<String>,
    pub log: Option<String>,
    pub exit_code: Option<i32>,
    /// Failed for a missing input (an upstream never deployed, an output it lacks).
    pub missing_input: bool,
    /// `blocked`: the upstream that has never been deployed.
    pub upstream: Option<String>,
    /// A preview's changes.
    pub changes: Option<crate::engine::digest::Changes>,
    /// `--changed`: skipped because nothing it reads changed; what needs it may run.
    pub unchanged: bool,
    /// A preview that ran on projected inputs (never an appliable plan).
    pub projected: bool,
    /// The `policy:` rule that denies what its preview planned.
    pub denied: Option<Box<crate::gates::denial::Denial>>,
    /// The `approve:` rule that holds what its preview planned.
    pub awaiting: Option<Box<crate::gates::denial::Denial>>,
    /// The number of its journal record's append, written and not yet on disk: what
    /// needs the step starts once [`Executor::settle`] has made it durable.
    pub record: Option<u64>,
}

impl StepResult {
    pub fn not_run(status: Status, message: impl Into<String>) -> StepResult {
        StepResult {
            status,
            duration_ms: 0,
            message: Some(message.into()),
            log: None,
            exit_code: None,
            missing_input: false,
            upstream: None,
            changes: None,
            unchanged: false,
            projected: false,
            denied: None,
            awaiting: None,
            record: None,
        }
    }
}

/// Runs one step of the plan (a project with its hooks, or the secrets step). Called from
/// several threads at once.
pub trait Executor: Sync {
    /// Called on the scheduler thread just before the step starts; returns its log path.
    fn prepare(&self, node: usize) -> Option<String>;
    fn execute(&self, node: usize, emit: &(dyn Fn(RunEvent) + Sync)) -> StepResult;
    /// A message about a step as it may be shown (secret values masked).
    fn redact(&self, text: &str) -> String {
        text.to_string()
    }
    /// Makes the journal records appended up to number `record` (a
    /// [`StepResult::record`]) durable; called on one thread, for every step that ended
    /// since its last call. An error is a warning: the steps stay as they ended.
    fn settle(&self, record: u64) -> Result<(), String> {
        let _ = record;
        Ok(())
    }
}

/// Runs `f` on this thread; a panic in it is returned (what it said and where) instead of
/// unwinding further. For step code that must end as a failed step whatever happens.
pub fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, Panic> {
    panics::catch(f)
}

#[derive(Debug, Clone, Copy)]
pub struct Options {
    pub parallel: usize,
    pub keep_going: bool,
    pub operation: Operation,
}

/// What the scheduler waits for.
enum Msg {
    Finished(usize, StepResult),
    /// A pool slot freed up outside the scheduler, or a pool's limit grew.
    Wake,
    /// The journal records appended up to this number are on disk (or could not be).
    Settled(u64, Result<(), String>),
}

/// Runs `plan` and returns one result per node. A step starts when what it needs has
/// succeeded, fewer than `opts.parallel` run, and its pool (see [`Pools`]) has a slot;
/// the scheduler holds that slot for the step and gives it back when it ends.
pub fn run(
    plan: &Plan,
    opts: Options,
    pools: &Pools,
    exec: &dyn Executor,
    control: &Control,
    emit: &(dyn Fn(RunEvent) + Sync),
) -> Vec<StepResult> {
    // Only a run this wide may need more open files than the user's limit allows.
    crate::util::raise_open_files_limit(opts.parallel.max(1));
    let mut board = Board::new(plan, opts);
    std::thread::scope(|scope| {
        let (tx, rx) = mpsc::channel::<Msg>();
        let mut workers = Workers::new(scope, exec, emit, tx.clone());
        let mut settler = Settler::new(scope, exec, tx.clone());
        let waker = tx.clone();
        pools.set_waker(Some(Box::new(move || {
            let _ = waker.send(Msg::Wake);
        })));
        loop {
            board.end_unreachable(control, emit);
            if !board.stopped(control) {
                start_ready(&mut board, plan, opts, pools, &mut workers);
            }
            if board.running() == 0 && !board.settling() {
                break;
            }
            match rx.recv() {
                Ok(Msg::Finished(i, r)) => {
                    pools.release(plan.nodes[i].pool(), false);
                    match r.record {
                        Some(record) => {
                            board.ran(i, r, emit);
                            settler.settle(record);
                        }
                        None => board.ended(i, r, emit),
                    }
                }
                Ok(Msg::Settled(upto, outcome)) => {
                    if let Err(e) = outcome {
                        emit(RunEvent::Notice {
                            message: format!("warning: {e}"),
                        });
                    }
                    board.settled(upto);
                }
                Ok(Msg::Wake) => {}
                Err(_) => break,
            }
        }
        pools.set_waker(None);
        // Dropping `workers` and `settler` closes their queues: their threads end, and
        // the scope joins them.
        drop(workers);
        drop(settler);
    });
    board.into_results(control, emit)
}

/// Starts, in the plan's order, every ready step there is room for: fewer than
/// `--parallel` running, and a slot in its pool.
fn start_ready(
    board: &mut Board,
    plan: &Plan,
    opts: Options,
    pools: &Pools,
    workers: &mut Workers,
) {
    let mut after = None;
    while board.running() < opts.parallel.max(1) {
        let Some((place, i)) = board.next_ready(after) else {
            break;
        };
        after = Some(place);
        if !pools.try_acquire(plan.nodes[i].pool()) {
            continue;
        }
        board.start(i);
        workers.start(plan, i, opts.operation, board.running());
    }
}

/// A step that panicked: failed, saying what and where.
fn failed_by(exec: &dyn Executor, panic: &Panic) -> StepResult {
    StepResult::not_run(Status::Failed, exec.redact(&panic.describe()))
}

fn describe(s: Status) -> &'static str {
    match s {
        Status::Failed => "failed",
        Status::Cancelled => "was cancelled",
        Status::Skipped => "did not run",
        Status::Succeeded => "succeeded",
        Status::Blocked => "is blocked",
        Status::Denied => "was denied by a policy rule",
        Status::Awaiting => "awaits an approval",
    }
}

fn finish(emit: &(dyn Fn(RunEvent) + Sync), plan: &Plan, i: usize, op: Operation, r: &StepResult) {
    emit(RunEvent::ProjectFinished {
        project: plan.nodes[i].path.clone(),
        operation: op,
        status: r.status,
        duration_ms: r.duration_ms,
        message: r.message.clone(),
        log: r.log.clone(),
        exit_code: r.exit_code,
        upstream: r.upstream.clone(),
        changes: r.changes.as_ref().map(crate::engine::digest::counts_json),
        denied: r.denied.as_deref().cloned(),
        awaiting: r.awaiting.as_deref().cloned(),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    /// An in-memory executor: each step sleeps, records its start and end, and fails
    /// when told to. Steps named in `meet` wait (up to 60 s) until their partner has
    /// started: a rendezvous that completes only when the two run at the same time.
    struct Fake {
        plan: Plan,
        sleep_ms: u64,
        fail: Vec<&'static str>,
        /// Steps that panic instead of ending.
        panic_in: Vec<&'static str>,
        t0: Instant,
        spans: Mutex<BTreeMap<String, (u128, u128)>>,
        cancel_after_start: Option<(&'static str, &'static Control)>,
        meet: Vec<(&'static str, &'static str)>,
        started: (Mutex<Vec<String>>, std::sync::Condvar),
        missed: Mutex<Vec<String>>,
    }

    impl Fake {
        fn rendezvous(&self, path: &str) {
            let (lock, cv) = &self.started;
            let mut started = lock.lock().unwrap();
            started.push(path.to_string());
            cv.notify_all();
            for (a, b) in &self.meet {
                let other = match (*a == path, *b == path) {
                    (true, _) => *b,
                    (_, true) => *a,
                    _ => continue,
                };
                let (s, timeout) = cv
                    .wait_timeout_while(started, Duration::from_secs(60), |s| {
                        !s.iter().any(|x| x == other)
                    })
                    .unwrap();
                started = s;
                if timeout.timed_out() {
                    self.missed
                        .lock()
                        .unwrap()
                        .push(format!("{path} never met {other}"));
                }
            }
        }
    }

    impl Executor for Fake {
        fn prepare(&self, i: usize) -> Option<String> {
            let path = &self.plan.nodes[i].path;
            if self
                .panic_in
                .iter()
                .any(|p| format!("prepare {path}") == *p)
            {
                panic!("preparing {path} broke");
            }
            None
        }
        fn execute(&self, i: usize, _emit: &(dyn Fn(RunEvent) + Sync)) -> StepResult {
            let path = self.plan.nodes[i].path.clone();
            let start = self.t0.elapsed().as_millis();
            self.rendezvous(&path);
            if let Some((p, c)) = self.cancel_after_start
                && p == path
            {
                c.cancel();
            }
            std::thread::sleep(Duration::from_millis(self.sleep_ms));
            if self.panic_in.contains(&path.as_str()) {
                panic!("{path} broke");
            }
            let end = self.t0.elapsed().as_millis();
            self.spans
                .lock()
                .unwrap()
                .insert(path.clone(), (start, end));
            let status = if self.fail.contains(&path.as_str()) {
                Status::Failed
            } else {
                Status::Succeeded
            };
            StepResult {
                duration_ms: (end - start) as u64,
                message: None,
                ..StepResult::not_run(status, "")
            }
        }
    }

    fn plan(yaml: &str) -> Plan {
        crate::plan::testing::plan_of(&format!("description: d\ninfra_type: T\n{yaml}"), &[])
            .unwrap()
    }

    fn fake(p: &Plan, fail: Vec<&'static str>) -> Fake {
        Fake {
            plan: p.clone(),
            sleep_ms: 60,
            fail,
            panic_in: Vec::new(),
            t0: Instant::now(),
            spans: Mutex::new(BTreeMap::new()),
            cancel_after_start: None,
            meet: Vec::new(),
            started: Default::default(),
            missed: Mutex::new(Vec::new()),
        }
    }

    fn statuses(p: &Plan, r: &[StepResult]) -> BTreeMap<String, Status> {
        p.nodes
            .iter()
            .zip(r)
            .map(|(n, r)| (n.path.clone(), r.status))
            .collect()
    }

    const DIAMOND: &str = "infrastructure:\n  - path: a\n  - path: b\n  - path: c\n    needs: [a]\n  - path: d\n    needs: [b, c]\n  - path: e\n    needs: []\n";

    fn opts(parallel: usize, keep_going: bool) -> Options {
        Options {
            parallel,
            keep_going,
            operation: Operation::Up,
        }
    }

    /// `run` of `p` through `f`, with no pools, no Ctrl-C and no observer.
    fn run_plainly(p: &Plan, o: Options, f: &Fake) -> Vec<StepResult> {
        run(p, o, &Pools::none(), f, &Control::new(), &|_| {})
    }

    #[test]
    fn order_and_overlap() {
        let p = plan(DIAMOND);
        let mut f = fake(&p, vec![]);
        // Independent steps must run at the same time: e with a, b with c.
        f.meet = vec![("e", "a"), ("b", "c")];
        let events = Mutex::new(Vec::new());
        let r = run(
            &p,
            opts(4, false),
            &Pools::none(),
            &f,
            &Control::new(),
            &|e| events.lock().unwrap().push(e),
        );
        assert!(r.iter().all(|r| r.status == Status::Succeeded));
        let s = f.spans.lock().unwrap();
        for (node, needs) in [("b", vec!["a"]), ("c", vec!["a"]), ("d", vec!["b", "c"])] {
            for need in needs {
                assert!(s[node].0 >= s[need].1, "{node} started before {need} ended");
            }
        }
        assert!(
            f.missed.lock().unwrap().is_empty(),
            "independent steps did not run together: {:?}",
            f.missed.lock().unwrap()
        );
        let ev = events.lock().unwrap();
        let finished = ev
            .iter()
            .filter(|e| matches!(e, RunEvent::ProjectFinished { .. }))
            .count();
        assert_eq!(finished, 5);
    }

    /// The most spans of `paths` open at one time.
    fn most_at_once(spans: &BTreeMap<String, (u128, u128)>, paths: &[&str]) -> usize {
        let ends: Vec<(u128, u128)> = paths.iter().map(|p| spans[*p]).collect();
        ends.iter()
            .map(|&(start, _)| {
                ends.iter()
                    .filter(|&&(s, e)| s <= start && start < e)
                    .count()
            })
            .max()
            .unwrap_or(0)
    }

    #[test]
    fn a_pool_caps_its_steps_while_others_use_the_rest_of_j() {
        let p = plan(
            "pools: {harbor: 1, aws: 2}\ninfrastructure:\n  - path: h1\n    pool: harbor\n    needs: []\n  - path: h2\n    pool: harbor\n    needs: []\n  - path: h3\n    pool: harbor\n    needs: []\n  - path: a1\n    pool: aws\n    needs: []\n  - path: a2\n    pool: aws\n    needs: []\n  - path: a3\n    pool: aws\n    needs: []\n  - path: free\n    needs: []\n",
        );
        let prof_pools = [
            crate::workspace::profile::Pool {
                name: "harbor".into(),
                limit: 1,
                adaptive: true,
            },
            crate::workspace::profile::Pool {
                name: "aws".into(),
                limit: 2,
                adaptive: true,
            },
        ];
        let pools = Pools::new(&prof_pools, &Default::default());
        let mut f = fake(&p, vec![]);
        // While harbor and aws are full, the step in no pool still starts.
        f.meet = vec![("free", "h1"), ("a1", "a2")];
        let events = Mutex::new(Vec::new());
        let r = run(&p, opts(4, false), &pools, &f, &Control::new(), &|e| {
            events.lock().unwrap().push(e)
        });
        assert!(r.iter().all(|r| r.status == Status::Succeeded));
        let s = f.spans.lock().unwrap();
        assert_eq!(most_at_once(&s, &["h1", "h2", "h3"]), 1);
        assert_eq!(most_at_once(&s, &["a1", "a2", "a3"]), 2);
        assert!(
            f.missed.lock().unwrap().is_empty(),
            "{:?}",
            f.missed.lock().unwrap()
        );
        // Every slot was given back.
        assert!(pools.try_acquire(Some("harbor")));
        assert!(pools.try_acquire(Some("aws")) && pools.try_acquire(Some("aws")));
        let started_in: Vec<Option<String>> = events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                RunEvent::ProjectStarted { project, pool, .. }
                    if project == "h1" || project == "free" =>
                {
                    Some(pool.clone())
                }
                _ => None,
            })
            .collect();
        assert!(started_in.contains(&Some("harbor".into())) && started_in.contains(&None));
    }

    #[test]
    fn parallel_one_serialises() {
        let p = plan(DIAMOND);
        let f = fake(&p, vec![]);
        run_plainly(&p, opts(1, false), &f);
        let s = f.spans.lock().unwrap();
        let mut spans: Vec<_> = s.values().copied().collect();
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[1].0 >= w[0].1, "overlap with -j 1: {spans:?}");
        }
    }

    /// `a` fails beside an independent pair `c` → `d`, run with `-j 1`: `a` failed and
    /// `b`, which needs it, is skipped whatever `keep_going` says. Every step's status,
    /// and the results.
    fn when_a_fails(keep_going: bool) -> (BTreeMap<String, Status>, Plan, Vec<StepResult>) {
        let p = plan(
            "infrastructure:\n  - path: a\n  - path: b\n  - path: c\n    needs: []\n  - path: d\n    needs: [c]\n",
        );
        let f = fake(&p, vec!["a"]);
        let r = run_plainly(&p, opts(1, keep_going), &f);
        let st = statuses(&p, &r);
        assert_eq!(st["a"], Status::Failed);
        assert_eq!(st["b"], Status::Skipped);
        (st, p, r)
    }

    #[test]
    fn failure_stops_dependents_and_new_work() {
        let (st, p, r) = when_a_fails(false);
        // With -j 1, c had not started when a failed: it is not started after.
        assert_eq!(st["d"], Status::Skipped);
        assert!(
            r[p.index_of("b").unwrap()]
                .message
                .as_ref()
                .unwrap()
                .contains("needs a")
        );
    }

    #[test]
    fn keep_going_runs_independent_work() {
        let (st, ..) = when_a_fails(true);
        assert_eq!(st["c"], Status::Succeeded);
        assert_eq!(st["d"], Status::Succeeded);
    }

    #[test]
    fn cancel_stops_scheduling() {
        static CONTROL: std::sync::OnceLock<Control> = std::sync::OnceLock::new();
        let control = CONTROL.get_or_init(Control::new);
        let p = plan("infrastructure:\n  - path: a\n  - path: b\n");
        let mut f = fake(&p, vec![]);
        f.cancel_after_start = Some(("a", control));
        let r = run(&p, opts(2, false), &Pools::none(), &f, control, &|_| {});
        let st = statuses(&p, &r);
        assert_eq!(st["b"], Status::Cancelled);
    }

    #[test]
    fn a_panicking_step_fails_with_its_message_and_the_run_ends() {
        let p = plan(
            "infrastructure:\n  - path: a\n  - path: b\n  - path: c\n    needs: []\n  - path: d\n    needs: []\n",
        );
        let mut f = fake(&p, vec![]);
        f.panic_in = vec!["a", "prepare c"];
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let r = run_plainly(&p, opts(2, true), &f);
            let message = |path: &str| r[p.index_of(path).unwrap()].message.clone();
            let _ = tx.send((statuses(&p, &r), message("a"), message("c")));
        });
        let (st, a, c) = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the run ended");
        assert_eq!(st["a"], Status::Failed);
        assert_eq!(st["b"], Status::Skipped);
        // A panic while it is prepared, on the scheduler's thread, fails it too.
        assert_eq!(st["c"], Status::Failed);
        assert!(c.unwrap_or_default().contains("preparing c broke"));
        assert_eq!(st["d"], Status::Succeeded);
        let message = a.unwrap_or_default();
        assert!(
            message.contains("panicked at src/run/scheduler.rs:") && message.contains("a broke"),
            "{message}"
        );
    }

    /// The step threads of a run: which thread ran each step.
    struct Threads {
        plan: Plan,
        panic_in: &'static str,
        seen: Mutex<BTreeMap<String, std::thread::ThreadId>>,
    }

    impl Executor for Threads {
        fn prepare(&self, _i: usize) -> Option<String> {
            None
        }
        fn execute(&self, i: usize, _emit: &(dyn Fn(RunEvent) + Sync)) -> StepResult {
            let path = self.plan.nodes[i].path.clone();
            self.seen
                .lock()
                .unwrap()
                .insert(path.clone(), std::thread::current().id());
            if path == self.panic_in {
                panic!("{path} broke");
            }
            StepResult::not_run(Status::Succeeded, "")
        }
    }

    fn threads_of(yaml: &str, parallel: usize, panic_in: &'static str) -> (Vec<Status>, usize) {
        let t = Threads {
            plan: plan(yaml),
            panic_in,
            seen: Mutex::new(BTreeMap::new()),
        };
        let r = run(
            &t.plan,
            opts(parallel, true),
            &Pools::none(),
            &t,
            &Control::new(),
            &|_| {},
        );
        let seen = t.seen.lock().unwrap();
        let distinct: std::collections::HashSet<_> = seen.values().collect();
        (r.iter().map(|r| r.status).collect(), distinct.len())
    }

    #[test]
    fn steps_share_at_most_parallel_threads() {
        let yaml = format!(
            "infrastructure:\n{}",
            (0..40)
                .map(|n| format!("  - path: p{n}\n    needs: []\n"))
                .collect::<String>()
        );
        let (st, threads) = threads_of(&yaml, 3, "");
        assert!(st.iter().all(|s| *s == Status::Succeeded), "{st:?}");
        assert!(
            (1..=3).contains(&threads),
            "40 steps ran on {threads} threads"
        );
    }

    #[test]
    fn a_panic_fails_its_step_and_the_thread_runs_the_next() {
        // One thread: the step after the panicking one can only run if it survived.
        let (st, threads) = threads_of(
            "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: []\n",
            1,
            "a",
        );
        assert_eq!(
            st,
            vec![Status::Failed, Status::Succeeded, Status::Succeeded]
        );
        assert_eq!(threads, 1);
    }
}
