//! The step threads of a run: as many as the steps running at once need, reused from
//! step to step.

use std::sync::{Arc, Mutex, mpsc};

use super::{Executor, Msg, StepResult, failed_by, panics};
use crate::engine::Operation;
use crate::plan::Plan;
use crate::run::events::{RunEvent, Status};

/// The step threads: started as the steps running at once need them (never more than
/// `--parallel`), each taking the next step from one queue until the queue closes. A
/// thread costs a stack to map and release: 400 steps on 4 threads start 4, not 400.
pub(super) struct Workers<'scope, 'env> {
    scope: &'scope std::thread::Scope<'scope, 'env>,
    exec: &'scope dyn Executor,
    emit: &'scope (dyn Fn(RunEvent) + Sync),
    tx: mpsc::Sender<Msg>,
    queue: mpsc::Sender<usize>,
    next: Arc<Mutex<mpsc::Receiver<usize>>>,
    started: usize,
}

impl<'scope, 'env> Workers<'scope, 'env> {
    pub(super) fn new(
        scope: &'scope std::thread::Scope<'scope, 'env>,
        exec: &'scope dyn Executor,
        emit: &'scope (dyn Fn(RunEvent) + Sync),
        tx: mpsc::Sender<Msg>,
    ) -> Self {
        let (queue, next) = mpsc::channel();
        Workers {
            scope,
            exec,
            emit,
            tx,
            queue,
            next: Arc::new(Mutex::new(next)),
            started: 0,
        }
    }

    /// Starts step `i`, one of `running` steps now started: prepared on this thread (its
    /// log; a panic there fails the step), announced, then run on a step thread.
    pub(super) fn start(&mut self, plan: &Plan, i: usize, op: Operation, running: usize) {
        let prepared = panics::catch(|| self.exec.prepare(i));
        (self.emit)(RunEvent::ProjectStarted {
            project: plan.nodes[i].path.clone(),
            operation: op,
            log: prepared.clone().unwrap_or_default(),
            pool: plan.nodes[i].pool().map(str::to_string),
        });
        match prepared {
            Ok(_) => self.run(i, running),
            Err(p) => {
                let _ = self.tx.send(Msg::Finished(i, failed_by(self.exec, &p)));
            }
        }
    }

    /// Runs step `i`, one of `running` steps now started, on a step thread, which always
    /// says how it ended: a panic is a failed step. A thread that cannot be started
    /// fails the step at once when no other thread is there to take it.
    fn run(&mut self, i: usize, running: usize) {
        if self.started < running {
            match self.start_thread() {
                Ok(()) => self.started += 1,
                Err(e) if self.started == 0 => {
                    let r = StepResult::not_run(
                        Status::Failed,
                        format!("strata could not start a thread for this step: {e}"),
                    );
                    let _ = self.tx.send(Msg::Finished(i, r));
                    return;
                }
                // The threads there are take it when one is free.
                Err(_) => {}
            }
        }
        let _ = self.queue.send(i);
    }

    fn start_thread(&self) -> std::io::Result<()> {
        let (exec, emit, reply) = (self.exec, self.emit, self.tx.clone());
        let next = Arc::clone(&self.next);
        std::thread::Builder::new()
            .name(format!("step thread {}", self.started + 1))
            .spawn_scoped(self.scope, move || {
                while let Some(i) = take(&next) {
                    let r = panics::catch(|| exec.execute(i, emit))
                        .unwrap_or_else(|p| failed_by(exec, &p));
                    let _ = reply.send(Msg::Finished(i, r));
                }
            })
            .map(drop)
    }
}

/// The next step from the queue; `None` once it is closed.
fn take(next: &Mutex<mpsc::Receiver<usize>>) -> Option<usize> {
    next.lock().unwrap_or_else(|e| e.into_inner()).recv().ok()
}
