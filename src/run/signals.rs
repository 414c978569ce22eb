//! Ctrl-C, SIGTERM and SIGHUP (a closed terminal, a dropped SSH session) during a run:
//! the first stops scheduling and forwards exactly one SIGINT to each running child; a
//! second (or the end of the grace period) kills them. The run then exits 128+n.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use signal_hook::SigId;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::done::Done;
use super::events::RunEvent;
use crate::engine::Control;
use crate::error::{Error, Result, stopped_before_start};
use crate::util::plural;

/// Installs the handlers; strata no longer dies on Ctrl-C while they are installed.
pub fn install() -> std::io::Result<Signals> {
    Signals::new([SIGINT, SIGTERM, SIGHUP])
}

/// The first of those signals that arrived, for the stages between the lock and the
/// scheduler (the orphan wait, write, fingerprinting): they look at it without taking
/// it from the [`Signals`] that `execute`'s watcher reads. Installed with them.
#[derive(Debug)]
pub struct Caught {
    first: Arc<AtomicUsize>,
    ids: Vec<SigId>,
}

impl Caught {
    pub fn register() -> std::io::Result<Caught> {
        let first = Arc::new(AtomicUsize::new(0));
        let mut ids = Vec::new();
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            let flag = first.clone();
            // SAFETY: the action only does an atomic compare-and-swap, which is
            // async-signal-safe, and allocates nothing.
            let id = unsafe {
                signal_hook::low_level::register(sig, move || {
                    let _ =
                        flag.compare_exchange(0, sig as usize, Ordering::SeqCst, Ordering::SeqCst);
                })
            }?;
            ids.push(id);
        }
        Ok(Caught { first, ids })
    }

    /// The first signal that arrived, if any.
    pub fn signal(&self) -> Option<i32> {
        match self.first.load(Ordering::SeqCst) {
            0 => None,
            n => Some(n as i32),
        }
    }

    /// `Err` (exit 128+n) once a signal arrived; `stage` says where the run stopped.
    pub fn check(&self, stage: &str) -> Result<()> {
        match self.signal() {
            None => Ok(()),
            Some(sig) => Err(stopped_before_start(sig, stage)),
        }
    }

    /// Runs `f` on a thread of its own and waits for it, but gives up within 50 ms of a
    /// signal (the thread is left to the process's exit): for work that may take long
    /// and changes nothing, such as hashing every project's files.
    pub fn until_signal<T: Send + 'static>(
        &self,
        stage: &str,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T> {
        self.check(stage)?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(stage.to_string())
            .spawn(move || {
                let _ = tx.send(f());
            })
            .map_err(|e| Error::failed(format!("cannot start a thread: {e}")))?;
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(v) => return Ok(v),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => self.check(stage)?,
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(Error::failed(format!(
                        "{stage} failed (its thread panicked)"
                    )));
                }
            }
        }
    }
}

impl Drop for Caught {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

/// How long a signalled (or timed-out) child has to stop before it is killed:
/// `STRATA_GRACE_SECONDS` of the run's environment, else 90 seconds.
pub fn grace(env: &BTreeMap<String, String>) -> Duration {
    Duration::from_secs(
        env.get("STRATA_GRACE_SECONDS")
            .and_then(|s| s.parse().ok())
            .unwrap_or(90),
    )
}

/// Watches for signals until `done` is set.
pub fn watch(
    mut signals: Signals,
    control: &Control,
    done: &Done,
    grace: Duration,
    notify: &(dyn Fn(RunEvent) + Sync),
) {
    let mut first: Option<Instant> = None;
    loop {
        for sig in signals.pending() {
            if first.is_none() {
                first = Some(Instant::now());
                let running = control.cancel_by_signal(sig);
                notify(RunEvent::Notice {
                    message: format!(
                        "Interrupted: no new project starts. Sent one SIGINT to {} running project{}{} so each stops gracefully (Pulumi saves its state). Waiting up to {}s; press Ctrl-C again to kill {}.",
                        running.len(),
                        plural(running.len()),
                        if running.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", running.join(", "))
                        },
                        grace.as_secs(),
                        if running.len() == 1 { "it" } else { "them" }
                    ),
                });
            } else if !control.is_killed() {
                let killed = control.kill();
                notify(RunEvent::Notice {
                    message: kill_message(&killed, "Second Ctrl-C"),
                });
            }
        }
        if let Some(t) = first
            && t.elapsed() >= grace
            && !control.is_killed()
            && !control.running().is_empty()
        {
            let killed = control.kill();
            notify(RunEvent::Notice {
                message: kill_message(&killed, "Grace period over"),
            });
        }
        if done.wait(Duration::from_millis(25)) {
            return;
        }
    }
}

fn kill_message(killed: &[String], why: &str) -> String {
    if killed.is_empty() {
        return format!("{why}: nothing is running any more.");
    }
    format!(
        "{why}: killed {}. Their stacks may still be marked as updating: run `pulumi cancel` in each of them (the summary names the commands).",
        killed.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grace_is_strata_grace_seconds_else_90() {
        let env = |v: &str| BTreeMap::from([("STRATA_GRACE_SECONDS".to_string(), v.to_string())]);
        assert_eq!(grace(&BTreeMap::new()), Duration::from_secs(90));
        assert_eq!(grace(&env("5")), Duration::from_secs(5));
        assert_eq!(grace(&env("soon")), Duration::from_secs(90));
    }
}
