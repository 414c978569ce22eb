//! A profile entry's `timeout:` and `retry:` around one project's engine run: a try that
//! runs too long is cancelled like Ctrl-C for that project alone (one SIGINT, the grace
//! period, then a kill) and fails "timed out after …"; a failed try whose output matches
//! a `retry.on` pattern is run again after `delay` (doubling, up to 1 h), up to
//! `attempts` in all; a waiting step answers Ctrl-C at once. A step in a concurrency pool
//! is also retried when its output says it was throttled (its [`Gate`]): the pool
//! adapts, and the next try waits for a slot of it.

use std::time::{Duration, Instant};

use super::done::Done;
use crate::engine::{Control, Engine, Failure, Job, Outcome, Progress};
use crate::workspace::profile::{MAX_DELAY, Retry};

/// How one project's operation is run.
pub struct Policy<'a> {
    pub timeout: Option<Duration>,
    pub retry: Option<&'a Retry>,
    /// After a timeout's SIGINT, how long before the kill.
    pub grace: Duration,
    /// A step in a concurrency pool: how its throttling is seen and answered.
    pub gate: Option<&'a dyn Gate>,
}

/// A pooled step's side of throttling (the pool is [`crate::run::pools::Pools`]).
pub trait Gate: Sync {
    /// The throttle pattern that a failed try's output or message matches.
    fn throttled_by(&self, seen: &[String], message: &str) -> Option<String>;
    /// A try starts: the pool's round it starts in.
    fn try_starts(&self) -> u64;
    /// The try that started in `round` was throttled (`pattern`): the pool may halve,
    /// and the step gives its slot back while it waits.
    fn throttled(&self, round: u64, pattern: &str);
    /// Takes a slot of the pool again for the next try; `false` when the run was
    /// cancelled meanwhile (the slot is taken all the same).
    fn reacquire(&self, control: &Control) -> bool;
    /// The try succeeded: the pool may grow.
    fn succeeded(&self);
    /// Tries in all of a throttled step, and the wait before its second (doubling).
    fn attempts(&self) -> u32;
    fn delay(&self) -> Duration;
}

/// A retry about to happen.
pub struct RetryNote {
    /// The number of the try about to start (2 for the first retry).
    pub attempt: u32,
    /// Tries allowed in all.
    pub attempts: u32,
    pub delay: Duration,
    /// The pattern that matched the failed try's output.
    pub pattern: String,
    /// The pattern was a throttle pattern of the step's pool.
    pub throttled: bool,
}

/// Runs `job` under `policy`; returns the last try's result and the number of tries.
pub fn run(
    engine: &dyn Engine,
    job: &Job,
    control: &Control,
    policy: &Policy,
    sink: &mut dyn FnMut(Progress),
    on_retry: &mut dyn FnMut(&RetryNote),
) -> (Result<Outcome, Failure>, u32) {
    let mut attempt = 1u32;
    let mut delay = policy.retry.map(|r| r.delay).unwrap_or_default();
    let mut throttle_delay = policy.gate.map(|g| g.delay()).unwrap_or_default();
    let mut processes = 0u32;
    loop {
        let mut seen: Vec<String> = Vec::new();
        let round = policy.gate.map(|g| g.try_starts()).unwrap_or(0);
        let result = {
            let mut capture = |p: Progress| {
                if let Progress::Raw(l) | Progress::Line(l) = &p
                    && seen.len() < 10_000
                {
                    seen.push(l.clone());
                }
                sink(p);
            };
            one_try(engine, job, control, policy, &mut capture)
        };
        let failure = match result {
            Ok(mut o) => {
                if let Some(g) = policy.gate {
                    g.succeeded();
                }
                o.processes = o.processes.saturating_add(processes);
                return (Ok(o), attempt);
            }
            Err(f) => f,
        };
        let failed = matches!(failure, Failure::Failed { .. }) && !control.is_cancelled();
        // Throttled: the pool adapts, the step waits and tries again in a free slot.
        if let Some(g) = policy.gate.filter(|g| failed && attempt < g.attempts())
            && let Some(pattern) = g.throttled_by(&seen, failure.message())
        {
            g.throttled(round, &pattern);
            processes = processes.saturating_add(failure_processes(&failure));
            attempt += 1;
            on_retry(&RetryNote {
                attempt,
                attempts: g.attempts(),
                delay: throttle_delay,
                pattern,
                throttled: true,
            });
            let slept = wait(throttle_delay, control);
            let slot = g.reacquire(control);
            if !slept || !slot {
                return (Err(cancelled_before(job, attempt, processes)), attempt - 1);
            }
            throttle_delay = next_delay(throttle_delay);
            continue;
        }
        let retry = match policy.retry {
            Some(r) if attempt < r.attempts && !control.is_cancelled() => r,
            _ => return (Err(add_processes(failure, processes)), attempt),
        };
        let Some(pattern) = matching(retry, &seen, failure.message()) else {
            return (Err(add_processes(failure, processes)), attempt);
        };
        processes = processes.saturating_add(failure_processes(&failure));
        attempt += 1;
        on_retry(&RetryNote {
            attempt,
            attempts: retry.attempts,
            delay,
            pattern,
            throttled: false,
        });
        if !wait(delay, control) {
            return (Err(cancelled_before(job, attempt, processes)), attempt - 1);
        }
        delay = next_delay(delay);
    }
}

/// The wait after `delay`: twice as long, up to [`MAX_DELAY`] (never shorter than it was).
fn next_delay(delay: Duration) -> Duration {
    delay.saturating_mul(2).min(MAX_DELAY).max(delay)
}

/// Sleeps `delay` unless the run is cancelled first; `false` when it was.
/// (No deadline is computed: `now + delay` can overflow.)
fn wait(delay: Duration, control: &Control) -> bool {
    let started = Instant::now();
    while !control.is_cancelled() {
        let left = delay.saturating_sub(started.elapsed());
        if left.is_zero() {
            break;
        }
        std::thread::sleep(left.min(Duration::from_millis(25)));
    }
    !control.is_cancelled()
}

fn cancelled_before(job: &Job, attempt: u32, processes: u32) -> Failure {
    Failure::Cancelled {
        message: format!(
            "{} of {} was cancelled before its try {attempt}",
            job.op.as_str(),
            job.path
        ),
        processes,
    }
}

/// One try, with the timeout watched.
fn one_try(
    engine: &dyn Engine,
    job: &Job,
    control: &Control,
    policy: &Policy,
    sink: &mut dyn FnMut(Progress),
) -> Result<Outcome, Failure> {
    let Some(limit) = policy.timeout else {
        return engine.run(job, control, sink);
    };
    let done = Done::new();
    let result = std::thread::scope(|s| {
        let watcher = std::thread::Builder::new()
            .name("timeout".into())
            .spawn_scoped(s, || watch(limit, policy.grace, job, control, &done));
        if let Err(e) = watcher {
            return Err(Failure::Failed {
                message: format!("strata could not start the thread that keeps its timeout: {e}"),
                exit_code: None,
                processes: 0,
            });
        }
        // Set however the run ends (a panic too), so the watcher never outlives it.
        let _done = done.on_drop();
        engine.run(job, control, sink)
    });
    let timed_out = control.project_stopped(&job.path);
    control.resume_project(&job.path);
    if !timed_out {
        return result;
    }
    // Past its deadline a try has timed out whatever it exited with: a program that
    // traps the SIGINT and exits 0 did not finish its work.
    let processes = match &result {
        Ok(o) => o.processes,
        Err(f) => failure_processes(f),
    };
    Err(Failure::Failed {
        message: format!("timed out after {}", humantime::format_duration(limit)),
        exit_code: None,
        processes,
    })
}

/// Until `done`: past `limit`, cancels the project like Ctrl-C; `grace` after, kills it.
fn watch(limit: Duration, grace: Duration, job: &Job, control: &Control, done: &Done) {
    let t0 = Instant::now();
    let mut sent: Option<Instant> = None;
    loop {
        if sent.is_none() && t0.elapsed() >= limit {
            control.cancel_project(&job.path);
            sent = Some(Instant::now());
        }
        if sent.is_some_and(|t| t.elapsed() >= grace) {
            control.kill_project(&job.path);
            return;
        }
        if done.wait(Duration::from_millis(25)) {
            return;
        }
    }
}

/// The first `on` pattern that matches a line of the try's output or its failure.
fn matching(retry: &Retry, seen: &[String], message: &str) -> Option<String> {
    retry.on.iter().find_map(|p| {
        let re = regex::Regex::new(p).ok()?;
        (re.is_match(message) || seen.iter().any(|l| re.is_match(l))).then(|| p.clone())
    })
}

fn failure_processes(f: &Failure) -> u32 {
    match f {
        Failure::Failed { processes, .. } | Failure::Cancelled { processes, .. } => *processes,
    }
}

fn add_processes(mut f: Failure, more: u32) -> Failure {
    match &mut f {
        Failure::Failed { processes, .. } | Failure::Cancelled { processes, .. } => {
            *processes = processes.saturating_add(more)
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Fails with `lines` printed until try `ok_at`, then succeeds.
    struct Flaky {
        tries: Mutex<u32>,
        ok_at: u32,
        lines: Vec<&'static str>,
    }

    impl Engine for Flaky {
        fn run(
            &self,
            _job: &Job,
            _c: &Control,
            report: &mut dyn FnMut(Progress),
        ) -> Result<Outcome, Failure> {
            let mut t = self.tries.lock().unwrap();
            *t += 1;
            if *t >= self.ok_at {
                return Ok(Outcome {
                    processes: 1,
                    ..Outcome::default()
                });
            }
            for l in &self.lines {
                report(Progress::Raw(l.to_string()));
            }
            Err(Failure::Failed {
                message: "update failed".into(),
                exit_code: Some(1),
                processes: 1,
            })
        }
    }

    fn job() -> Job {
        Job::for_tests("a", "a")
    }

    fn retry(attempts: u32, on: &[&str]) -> Retry {
        Retry {
            attempts,
            delay: Duration::from_millis(1),
            on: on.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// An engine that prints `line` and fails until try `ok_at`.
    fn flaky(ok_at: u32, line: &'static str) -> Flaky {
        Flaky {
            tries: Mutex::new(0),
            ok_at,
            lines: vec![line],
        }
    }

    /// No timeout, a grace of a second.
    fn policy<'a>(retry: Option<&'a Retry>, gate: Option<&'a dyn Gate>) -> Policy<'a> {
        Policy {
            timeout: None,
            retry,
            grace: Duration::from_secs(1),
            gate,
        }
    }

    /// `run` of the test job, its output dropped, each retry note handed to `on_retry`.
    fn run_noting(
        engine: &dyn Engine,
        policy: &Policy,
        on_retry: &mut dyn FnMut(&RetryNote),
    ) -> (Result<Outcome, Failure>, u32) {
        run(
            engine,
            &job(),
            &Control::new(),
            policy,
            &mut |_| {},
            on_retry,
        )
    }

    /// `run` of the test job, its output and retry notes dropped.
    fn run_quietly(engine: &dyn Engine, policy: &Policy) -> (Result<Outcome, Failure>, u32) {
        run_noting(engine, policy, &mut |_| {})
    }

    #[test]
    fn retries_only_on_a_match_and_doubles_the_delay() {
        let engine = flaky(3, "error: TooManyRequests: slow down");
        let r = retry(3, &["TooManyRequests"]);
        let policy = policy(Some(&r), None);
        let mut notes = Vec::new();
        let (res, tries) = run_noting(&engine, &policy, &mut |n| {
            notes.push((n.attempt, n.delay, n.pattern.clone()))
        });
        assert!(res.is_ok());
        assert_eq!(tries, 3);
        assert_eq!(
            res.unwrap().processes,
            3,
            "every try's processes are counted"
        );
        assert_eq!(
            notes,
            vec![
                (2, Duration::from_millis(1), "TooManyRequests".to_string()),
                (3, Duration::from_millis(2), "TooManyRequests".to_string())
            ]
        );

        let engine = flaky(3, "error: access denied");
        let (res, tries) = run_noting(&engine, &policy, &mut |_| {
            panic!("no retry without a match")
        });
        assert!(res.is_err());
        assert_eq!(tries, 1);
    }

    /// A gate that records what the policy asks of it.
    #[derive(Default)]
    struct Recorder {
        calls: Mutex<Vec<String>>,
    }

    impl Gate for Recorder {
        fn throttled_by(&self, seen: &[String], _message: &str) -> Option<String> {
            seen.iter()
                .any(|l| l.contains("Rate exceeded"))
                .then(|| "Rate exceeded".to_string())
        }
        fn try_starts(&self) -> u64 {
            let mut c = self.calls.lock().unwrap();
            c.push("start".into());
            c.len() as u64
        }
        fn throttled(&self, round: u64, pattern: &str) {
            self.calls
                .lock()
                .unwrap()
                .push(format!("throttled {round} {pattern}"));
        }
        fn reacquire(&self, _control: &Control) -> bool {
            self.calls.lock().unwrap().push("reacquire".into());
            true
        }
        fn succeeded(&self) {
            self.calls.lock().unwrap().push("succeeded".into());
        }
        fn attempts(&self) -> u32 {
            3
        }
        fn delay(&self) -> Duration {
            Duration::from_millis(1)
        }
    }

    #[test]
    fn a_throttled_try_tells_its_pool_waits_for_a_slot_and_tries_again() {
        let engine = flaky(3, "api error Throttling: Rate exceeded");
        let gate = Recorder::default();
        let policy = policy(None, Some(&gate));
        let mut notes = Vec::new();
        let (res, tries) = run_noting(&engine, &policy, &mut |n| {
            notes.push((n.attempt, n.attempts, n.delay, n.throttled))
        });
        assert!(res.is_ok());
        assert_eq!(tries, 3);
        assert_eq!(
            notes,
            [
                (2, 3, Duration::from_millis(1), true),
                (3, 3, Duration::from_millis(2), true)
            ]
        );
        assert_eq!(
            *gate.calls.lock().unwrap(),
            [
                "start",
                "throttled 1 Rate exceeded",
                "reacquire",
                "start",
                "throttled 4 Rate exceeded",
                "reacquire",
                "start",
                "succeeded"
            ]
        );
        // The gate's attempts bound it; a failure it does not call throttling is not
        // retried without `retry:`.
        let quietly = |line: &'static str| {
            let engine = Flaky {
                tries: Mutex::new(0),
                ok_at: 10,
                lines: vec![line],
            };
            run_quietly(&engine, &policy)
        };
        let (res, tries) = quietly("Rate exceeded");
        assert!(res.is_err());
        assert_eq!(tries, 3);
        let (_, tries) = quietly("access denied");
        assert_eq!(tries, 1);
    }

    #[test]
    fn gives_up_after_the_last_attempt() {
        let engine = flaky(10, "connection reset by peer");
        let r = retry(2, &["connection reset"]);
        let policy = policy(Some(&r), None);
        let (res, tries) = run_quietly(&engine, &policy);
        assert_eq!(tries, 2);
        assert!(matches!(res, Err(Failure::Failed { processes: 2, .. })));
    }

    /// Ends well once its project is cancelled, as a program that traps SIGINT and
    /// exits 0 does.
    struct ExitsZeroOnCancel;

    impl Engine for ExitsZeroOnCancel {
        fn run(
            &self,
            job: &Job,
            c: &Control,
            _report: &mut dyn FnMut(Progress),
        ) -> Result<Outcome, Failure> {
            while !c.project_stopped(&job.path) {
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(Outcome {
                processes: 1,
                ..Outcome::default()
            })
        }
    }

    #[test]
    fn past_the_deadline_a_try_times_out_whatever_it_exits_with() {
        let policy = Policy {
            timeout: Some(Duration::from_millis(50)),
            retry: None,
            gate: None,
            grace: Duration::from_secs(5),
        };
        let (res, tries) = run_quietly(&ExitsZeroOnCancel, &policy);
        assert_eq!(tries, 1);
        match res {
            Err(Failure::Failed {
                message, processes, ..
            }) => {
                assert!(message.contains("timed out after 50ms"), "{message}");
                assert_eq!(processes, 1);
            }
            other => panic!("{other:?}"),
        }
    }

    /// A wait as long as a `Duration` holds (what a profile once let through as
    /// `delay: 300000000000y`) neither overflows nor outlives Ctrl-C.
    #[test]
    fn the_longest_wait_ends_with_ctrl_c_and_doubling_stops_at_the_longest_delay() {
        let engine = flaky(10, "connection reset by peer");
        let r = Retry {
            delay: Duration::MAX,
            ..retry(3, &["connection reset"])
        };
        let policy = policy(Some(&r), None);
        let control = Control::new();
        let (res, tries) = std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(100));
                control.cancel();
            });
            run(&engine, &job(), &control, &policy, &mut |_| {}, &mut |_| {})
        });
        assert_eq!(tries, 1);
        assert!(matches!(res, Err(Failure::Cancelled { .. })), "{res:?}");
        assert_eq!(
            next_delay(Duration::from_millis(1)),
            Duration::from_millis(2)
        );
        assert_eq!(next_delay(Duration::from_secs(40 * 60)), MAX_DELAY);
        assert_eq!(next_delay(Duration::MAX), Duration::MAX);
        assert_eq!(next_delay(Duration::ZERO), Duration::ZERO);
    }
}
