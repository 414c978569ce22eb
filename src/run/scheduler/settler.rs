//! Steps' journal records put on disk by one thread, not by the steps' own: each
//! `fdatasync` covers every step that ended since the last one (group commit), and a step
//! thread goes on to the next step while the disk syncs.

use std::sync::mpsc;

use super::{Executor, Msg, panics};

/// The thread that settles records: started at the first record, ended when dropped.
pub(super) struct Settler<'scope, 'env> {
    scope: &'scope std::thread::Scope<'scope, 'env>,
    exec: &'scope dyn Executor,
    reply: mpsc::Sender<Msg>,
    queue: Option<mpsc::Sender<u64>>,
}

impl<'scope, 'env> Settler<'scope, 'env> {
    pub(super) fn new(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        exec: &'scope dyn Executor,
        reply: mpsc::Sender<Msg>,
    ) -> Self {
        Settler {
            scope,
            exec,
            reply,
            queue: None,
        }
    }

    /// Asks for records up to number `record` to be put on disk; answered with a
    /// [`Msg::Settled`] that covers it. Settled here, on the scheduler's thread, when no
    /// thread can be started for it.
    pub(super) fn settle(&mut self, record: u64) {
        if self.queue.is_none() {
            self.queue = self.start().ok();
        }
        match &self.queue {
            Some(q) if q.send(record).is_ok() => {}
            _ => {
                let _ = self.reply.send(settled(self.exec, record));
            }
        }
    }

    fn start(&self) -> std::io::Result<mpsc::Sender<u64>> {
        let (queue, asked) = mpsc::channel::<u64>();
        let (exec, reply) = (self.exec, self.reply.clone());
        std::thread::Builder::new()
            .name("journal sync".into())
            .spawn_scoped(self.scope, move || {
                while let Ok(first) = asked.recv() {
                    // Everything asked for meanwhile shares this sync.
                    let upto = asked.try_iter().fold(first, u64::max);
                    if reply.send(settled(exec, upto)).is_err() {
                        return;
                    }
                }
            })?;
        Ok(queue)
    }
}

/// Settles the records up to `upto`; a panic in it is an error, not a lost answer.
fn settled(exec: &dyn Executor, upto: u64) -> Msg {
    let outcome = panics::catch(|| exec.settle(upto)).unwrap_or_else(|p| Err(p.describe()));
    Msg::Settled(upto, outcome)
}

#[cfg(test)]
mod tests {
    use super::super::{Executor, Options, StepResult, run};
    use crate::engine::{Control, Operation};
    use crate::plan::Plan;
    use crate::run::events::{RunEvent, Status};
    use crate::run::pools::Pools;
    use std::collections::BTreeMap;
    use std::sync::{Condvar, Mutex};
    use std::time::Duration;

    /// Steps that each append a numbered record; `settle` notes how far it got, and
    /// waits (up to 10 s) until `hold_until` has started, or fails when told to.
    struct Ledger {
        plan: Plan,
        fail: &'static str,
        hold_until: Option<&'static str>,
        settle_error: bool,
        appended: Mutex<BTreeMap<String, u64>>,
        started: (Mutex<Vec<String>>, Condvar),
        settled: Mutex<u64>,
        settle_threads: Mutex<Vec<std::thread::ThreadId>>,
    }

    impl Ledger {
        fn new(yaml: &str) -> Ledger {
            Ledger {
                plan: crate::plan::testing::plan_of(
                    &format!("description: d\ninfra_type: T\n{yaml}"),
                    &[],
                )
                .unwrap(),
                fail: "",
                hold_until: None,
                settle_error: false,
                appended: Mutex::new(BTreeMap::new()),
                started: Default::default(),
                settled: Mutex::new(0),
                settle_threads: Mutex::new(Vec::new()),
            }
        }

        /// Runs the plan at `-j parallel`: the results by path, and the events.
        fn run(&self, parallel: usize) -> (BTreeMap<String, Status>, Vec<RunEvent>) {
            let events = Mutex::new(Vec::new());
            let opts = Options {
                parallel,
                keep_going: false,
                operation: Operation::Up,
            };
            let emit = |e: RunEvent| {
                if let RunEvent::ProjectStarted { project, .. } = &e {
                    self.check_needs_settled(project);
                }
                events.lock().unwrap().push(e);
            };
            let r = run(
                &self.plan,
                opts,
                &Pools::none(),
                self,
                &Control::new(),
                &emit,
            );
            let statuses = self.plan.nodes.iter().map(|n| n.path.clone());
            let statuses = statuses.zip(r.iter().map(|r| r.status)).collect();
            (statuses, events.into_inner().unwrap())
        }
    }

    impl Ledger {
        /// Every record of what `project` needs is on disk.
        fn check_needs_settled(&self, project: &str) {
            let node = self.plan.nodes.iter().find(|n| n.path == project).unwrap();
            let settled = *self.settled.lock().unwrap();
            for &j in &node.needs {
                let need = &self.plan.nodes[j].path;
                let record = self.appended.lock().unwrap().get(need).copied();
                assert!(
                    record.is_some_and(|r| r <= settled),
                    "{project} started before the record of {need} ({record:?}) was on disk (through {settled})"
                );
            }
        }
    }

    impl Executor for Ledger {
        fn prepare(&self, _i: usize) -> Option<String> {
            None
        }
        fn execute(&self, i: usize, _emit: &(dyn Fn(RunEvent) + Sync)) -> StepResult {
            let path = self.plan.nodes[i].path.clone();
            let (lock, cv) = &self.started;
            lock.lock().unwrap().push(path.clone());
            cv.notify_all();
            let mut appended = self.appended.lock().unwrap();
            let record = appended.len() as u64 + 1;
            appended.insert(path.clone(), record);
            let status = if path == self.fail {
                Status::Failed
            } else {
                Status::Succeeded
            };
            StepResult {
                record: Some(record),
                ..StepResult::not_run(status, "")
            }
        }
        fn settle(&self, record: u64) -> Result<(), String> {
            self.settle_threads
                .lock()
                .unwrap()
                .push(std::thread::current().id());
            if let Some(other) = self.hold_until {
                let (lock, cv) = &self.started;
                let started = lock.lock().unwrap();
                let _ = cv
                    .wait_timeout_while(started, Duration::from_secs(10), |s| {
                        !s.iter().any(|p| p == other)
                    })
                    .unwrap();
            }
            if self.settle_error {
                return Err("cannot sync the journal: disk full".into());
            }
            let mut settled = self.settled.lock().unwrap();
            *settled = (*settled).max(record);
            Ok(())
        }
    }

    fn order(events: &[RunEvent]) -> Vec<String> {
        events
            .iter()
            .filter_map(|e| match e {
                RunEvent::ProjectStarted { project, .. } => Some(format!("start {project}")),
                RunEvent::ProjectFinished { project, .. } => Some(format!("done {project}")),
                _ => None,
            })
            .collect()
    }

    /// A step starts only once the records of what it needs are on disk (the observer
    /// above checks each start), every record is settled by the end, and the syncs ran
    /// on one thread of their own.
    #[test]
    fn what_needs_a_step_starts_only_once_its_record_is_settled() {
        let l = Ledger::new(
            "infrastructure:\n  - path: a\n  - path: b\n    needs: [a]\n  - path: c\n    needs: [a]\n  - path: d\n    needs: [b, c]\n",
        );
        let (statuses, events) = l.run(2);
        assert!(
            statuses.values().all(|s| *s == Status::Succeeded),
            "{statuses:?}"
        );
        let order = order(&events);
        let at = |x: &str| order.iter().position(|e| e == x).unwrap();
        assert!(
            at("done a") < at("start b") && at("done a") < at("start c"),
            "{order:?}"
        );
        assert!(
            at("done b") < at("start d") && at("done c") < at("start d"),
            "{order:?}"
        );
        assert_eq!(*l.settled.lock().unwrap(), 4);
        let threads = l.settle_threads.lock().unwrap();
        assert!(
            threads
                .iter()
                .all(|t| *t == threads[0] && *t != std::thread::current().id())
        );
    }

    /// At `-j 1`, the next step starts while the step before waits for its record: the
    /// disk does not hold a place among the `parallel` (settling `a` waits for `c` to
    /// start, so holding the place would stall it for the 10 s timeout, then fail). The
    /// events still show one step at a time.
    #[test]
    fn a_slow_sync_does_not_hold_a_place_among_the_parallel() {
        let mut l = Ledger::new("infrastructure:\n  - path: a\n  - path: c\n    needs: []\n");
        l.hold_until = Some("c");
        let t0 = std::time::Instant::now();
        let (statuses, events) = l.run(1);
        assert!(statuses.values().all(|s| *s == Status::Succeeded));
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "c waited for a's sync"
        );
        assert_eq!(order(&events), ["start a", "done a", "start c", "done c"]);
    }

    /// A failed step stops new work when it ends, not when its record is on disk.
    #[test]
    fn a_failure_stops_new_work_before_its_record_is_settled() {
        let mut l = Ledger::new("infrastructure:\n  - path: a\n  - path: c\n    needs: []\n");
        l.fail = "a";
        let (statuses, _) = l.run(1);
        assert_eq!(statuses["a"], Status::Failed);
        assert_eq!(statuses["c"], Status::Skipped);
        assert!(!l.appended.lock().unwrap().contains_key("c"), "c ran");
    }

    /// A sync that fails is a warning; the steps stay as they ended.
    #[test]
    fn a_failed_sync_is_a_warning_and_the_steps_end_as_they_ran() {
        let mut l = Ledger::new("infrastructure:\n  - path: a\n  - path: b\n    needs: [a]\n");
        l.settle_error = true;
        // The observer's check cannot hold when nothing settles: count instead.
        let events = Mutex::new(Vec::new());
        let opts = Options {
            parallel: 2,
            keep_going: false,
            operation: Operation::Up,
        };
        let r = run(&l.plan, opts, &Pools::none(), &l, &Control::new(), &|e| {
            events.lock().unwrap().push(e)
        });
        assert!(r.iter().all(|r| r.status == Status::Succeeded));
        let warnings: Vec<String> = events
            .into_inner()
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                RunEvent::Notice { message } => Some(message),
                _ => None,
            })
            .collect();
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(warnings[0].starts_with("warning: cannot sync the journal: disk full"));
    }
}
