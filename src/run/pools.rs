//! Concurrency pools: how many steps of each pool may run at once, and the adaptive
//! limit (additive increase, multiplicative decrease, as TCP does): it halves when a try
//! of the pool is throttled and grows back by one after as many successes as the limit,
//! never above what the profile declares.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Duration;

use regex::Regex;

use crate::engine::Control;
use crate::workspace::profile::{Pool, Throttle};

/// A change of a pool's limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolChange {
    pub pool: String,
    pub previous: usize,
    pub limit: usize,
    pub reason: String,
    /// The throttled project (none when the limit grew).
    pub project: Option<String>,
}

/// The state of one pool.
#[derive(Debug)]
struct State {
    name: String,
    /// The declared limit: the start and the ceiling.
    max: usize,
    limit: usize,
    adaptive: bool,
    /// Steps holding a slot.
    active: usize,
    /// Throttled steps waiting for a slot to try again: they go before new steps.
    waiting: usize,
    /// Successes since the limit last changed.
    successes: usize,
    /// Bumped at each decrease: a throttled try that started before the last decrease
    /// already counted in it (one halving per round, as TCP halves once per window).
    epoch: u64,
}

/// The pools of one run.
pub struct Pools {
    pools: Mutex<Vec<State>>,
    cv: Condvar,
    patterns: Vec<(String, Regex)>,
    /// Tries in all of a throttled step, and the wait before its second (doubling).
    attempts: u32,
    delay: Duration,
    /// Wakes the scheduler when a slot frees up outside it or a limit grows.
    waker: Mutex<Option<Box<dyn Fn() + Send + Sync>>>,
}

impl Pools {
    /// The pools declared by a profile, with its throttle patterns (checked regexes).
    pub fn new(pools: &[Pool], throttle: &Throttle) -> Pools {
        Pools {
            pools: Mutex::new(
                pools
                    .iter()
                    .map(|p| State {
                        name: p.name.clone(),
                        max: p.limit.max(1),
                        limit: p.limit.max(1),
                        adaptive: p.adaptive,
                        active: 0,
                        waiting: 0,
                        successes: 0,
                        epoch: 0,
                    })
                    .collect(),
            ),
            cv: Condvar::new(),
            patterns: throttle
                .patterns
                .iter()
                .filter_map(|p| Some((p.clone(), Regex::new(p).ok()?)))
                .collect(),
            attempts: throttle.attempts,
            delay: throttle.delay,
            waker: Mutex::new(None),
        }
    }

    /// No pools at all.
    #[cfg(test)]
    pub fn none() -> Pools {
        Pools::new(&[], &Throttle::default())
    }

    /// Tries in all of a throttled step.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The wait before a throttled step's second try (doubling after).
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Sets (or clears) what wakes the scheduler.
    pub fn set_waker(&self, waker: Option<Box<dyn Fn() + Send + Sync>>) {
        if let Ok(mut w) = self.waker.lock() {
            *w = waker;
        }
    }

    fn wake(&self) {
        self.cv.notify_all();
        if let Ok(w) = self.waker.lock()
            && let Some(f) = w.as_ref()
        {
            f();
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<State>> {
        self.pools.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The first throttle pattern that matches a line of a try's output or its failure.
    pub fn throttled_by(&self, seen: &[String], message: &str) -> Option<String> {
        self.patterns.iter().find_map(|(p, re)| {
            (re.is_match(message) || seen.iter().any(|l| re.is_match(l))).then(|| p.clone())
        })
    }

    /// Takes a slot of `pool` for a new step, unless the pool is full or throttled
    /// steps wait for one. A step in no pool (or an unknown one) always gets one.
    pub fn try_acquire(&self, pool: Option<&str>) -> bool {
        let Some(name) = pool else { return true };
        let mut pools = self.lock();
        let Some(p) = pools.iter_mut().find(|p| p.name == name) else {
            return true;
        };
        if p.active >= p.limit || p.waiting > 0 {
            return false;
        }
        p.active += 1;
        true
    }

    /// Gives a slot back. `wake`: tell the scheduler (not needed when it releases).
    pub fn release(&self, pool: Option<&str>, wake: bool) {
        let Some(name) = pool else { return };
        {
            let mut pools = self.lock();
            if let Some(p) = pools.iter_mut().find(|p| p.name == name) {
                p.active = p.active.saturating_sub(1);
            }
        }
        if wake {
            self.wake();
        } else {
            self.cv.notify_all();
        }
    }

    /// Waits for a slot of `pool` for a throttled step's next try, before any new step
    /// of the pool. Answers Ctrl-C: once the run is cancelled it takes the slot at once
    /// (so the step always holds one when it returns) and says so with `false`.
    pub fn acquire(&self, pool: &str, control: &Control) -> bool {
        let mut pools = self.lock();
        let Some(i) = pools.iter().position(|p| p.name == pool) else {
            return true;
        };
        pools[i].waiting += 1;
        let mut ok = true;
        while pools[i].active >= pools[i].limit {
            if control.is_cancelled() {
                ok = false;
                break;
            }
            pools = match self.cv.wait_timeout(pools, Duration::from_millis(50)) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
        pools[i].waiting -= 1;
        pools[i].active += 1;
        ok
    }

    /// The round a try of `pool` starts in (see [`Pools::throttled`]).
    pub fn epoch(&self, pool: &str) -> u64 {
        self.lock()
            .iter()
            .find(|p| p.name == pool)
            .map_or(0, |p| p.epoch)
    }

    /// A try of `project` in `pool`, started in round `epoch`, was throttled (`pattern`
    /// matched): the limit halves, once per round.
    pub fn throttled(
        &self,
        pool: &str,
        epoch: u64,
        project: &str,
        pattern: &str,
    ) -> Option<PoolChange> {
        let mut pools = self.lock();
        let p = pools.iter_mut().find(|p| p.name == pool)?;
        if !p.adaptive || p.epoch != epoch || p.limit <= 1 {
            return None;
        }
        let previous = p.limit;
        p.limit = (p.limit / 2).max(1);
        p.epoch += 1;
        p.successes = 0;
        Some(PoolChange {
            pool: p.name.clone(),
            previous,
            limit: p.limit,
            reason: format!("{project} was throttled (`{pattern}`)"),
            project: Some(project.to_string()),
        })
    }

    /// A step of `pool` succeeded: after as many successes as the limit, it grows by one
    /// (up to the declared limit).
    pub fn succeeded(&self, pool: &str) -> Option<PoolChange> {
        let change = {
            let mut pools = self.lock();
            let p = pools.iter_mut().find(|p| p.name == pool)?;
            if !p.adaptive || p.limit >= p.max {
                return None;
            }
            p.successes += 1;
            if p.successes < p.limit {
                return None;
            }
            let previous = p.limit;
            p.limit += 1;
            p.successes = 0;
            PoolChange {
                pool: p.name.clone(),
                previous,
                limit: p.limit,
                reason: format!("{previous} successes in a row at {previous}"),
                project: None,
            }
        };
        self.wake();
        Some(change)
    }

    /// Each pool's name, declared limit and current limit.
    #[cfg(test)]
    pub fn limits(&self) -> Vec<(String, usize, usize)> {
        self.lock()
            .iter()
            .map(|p| (p.name.clone(), p.max, p.limit))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn pools(list: &[(&str, usize)]) -> Pools {
        let list: Vec<Pool> = list
            .iter()
            .map(|(n, l)| Pool {
                name: n.to_string(),
                limit: *l,
                adaptive: true,
            })
            .collect();
        Pools::new(&list, &Throttle::default())
    }

    #[test]
    fn a_pool_admits_up_to_its_limit_and_steps_in_no_pool_always() {
        let p = pools(&[("harbor", 1), ("aws", 2)]);
        assert!(p.try_acquire(Some("harbor")));
        assert!(!p.try_acquire(Some("harbor")));
        assert!(p.try_acquire(Some("aws")) && p.try_acquire(Some("aws")));
        assert!(!p.try_acquire(Some("aws")));
        assert!(p.try_acquire(None) && p.try_acquire(None));
        p.release(Some("harbor"), false);
        assert!(p.try_acquire(Some("harbor")));
    }

    #[test]
    fn throttling_halves_once_per_round_and_successes_grow_it_back_one_step_at_a_time() {
        let p = pools(&[("aws", 8)]);
        let round = p.epoch("aws");
        let c = p.throttled("aws", round, "vpc", "Throttling").unwrap();
        assert_eq!((c.previous, c.limit), (8, 4));
        assert_eq!(c.project.as_deref(), Some("vpc"));
        // The other tries of that round were throttled by the same burst.
        assert_eq!(p.throttled("aws", round, "subnet", "Throttling"), None);
        let c = p
            .throttled("aws", p.epoch("aws"), "vpc", "Throttling")
            .unwrap();
        assert_eq!((c.previous, c.limit), (4, 2));
        // Two successes at 2 → 3; three at 3 → 4; ... never above 8.
        assert_eq!(p.succeeded("aws"), None);
        assert_eq!(p.succeeded("aws").map(|c| c.limit), Some(3));
        let mut limits = Vec::new();
        for _ in 0..100 {
            if let Some(c) = p.succeeded("aws") {
                limits.push(c.limit);
            }
        }
        assert_eq!(limits, [4, 5, 6, 7, 8]);
        // Down to one, and no lower.
        for _ in 0..5 {
            p.throttled("aws", p.epoch("aws"), "vpc", "429");
        }
        assert_eq!(p.limits(), [("aws".to_string(), 8, 1)]);
        assert_eq!(p.throttled("aws", p.epoch("aws"), "vpc", "429"), None);
    }

    #[test]
    fn a_fixed_pool_never_moves() {
        let list = [Pool {
            name: "harbor".into(),
            limit: 3,
            adaptive: false,
        }];
        let p = Pools::new(&list, &Throttle::default());
        assert_eq!(p.throttled("harbor", 0, "r", "429"), None);
        assert_eq!(p.limits(), [("harbor".to_string(), 3, 3)]);
    }

    #[test]
    fn a_throttled_step_waits_for_a_slot_before_new_steps_and_answers_ctrl_c() {
        let p = Arc::new(pools(&[("aws", 1)]));
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        p.set_waker(Some(Box::new(move || {
            w.fetch_add(1, Ordering::SeqCst);
        })));
        assert!(p.try_acquire(Some("aws")));
        let control = Arc::new(Control::new());
        let waiter = {
            let (p, c) = (p.clone(), control.clone());
            std::thread::spawn(move || p.acquire("aws", &c))
        };
        while p.lock()[0].waiting == 0 {
            std::thread::sleep(Duration::from_millis(5));
        }
        // A new step does not jump the queue.
        p.release(Some("aws"), true);
        assert!(waiter.join().unwrap(), "the waiting retry got the slot");
        assert!(!p.try_acquire(Some("aws")));
        assert!(woken.load(Ordering::SeqCst) >= 1, "the scheduler was woken");
        // Cancelled while waiting: it returns, holding a slot.
        let waiter = {
            let (p, c) = (p.clone(), control.clone());
            std::thread::spawn(move || p.acquire("aws", &c))
        };
        std::thread::sleep(Duration::from_millis(30));
        control.cancel();
        assert!(!waiter.join().unwrap());
        assert_eq!(p.lock()[0].active, 2);
    }

    #[test]
    fn throttle_patterns_match_output_lines_or_the_failure() {
        let p = pools(&[]);
        let seen = vec![
            "creating vpc".to_string(),
            "Error: Rate exceeded".to_string(),
        ];
        assert_eq!(
            p.throttled_by(&seen, "failed").as_deref(),
            Some("Rate exceeded")
        );
        assert!(p.throttled_by(&[], "HTTP 429").is_some());
        assert_eq!(p.throttled_by(&["fine".into()], "exit 1"), None);
    }
}
