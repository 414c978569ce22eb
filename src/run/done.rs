//! The end of the work a watcher thread watches (a run, one try of a step): set once, it
//! wakes the watcher at once. A watcher that slept between its checks kept every run
//! (and every try with a `timeout:`) waiting up to a tick for it at the end.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Whether the watched work has ended; [`Done::wait`] returns as soon as it has.
#[derive(Debug, Default)]
pub struct Done {
    ended: Mutex<bool>,
    changed: Condvar,
}

impl Done {
    pub fn new() -> Done {
        Done::default()
    }

    /// The work ended: wakes whoever waits.
    pub fn set(&self) {
        *self.ended.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.changed.notify_all();
    }

    /// Waits up to `tick` for the end; whether it came.
    pub fn wait(&self, tick: Duration) -> bool {
        let ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        let (ended, _) = self
            .changed
            .wait_timeout_while(ended, tick, |ended| !*ended)
            .unwrap_or_else(|e| e.into_inner());
        *ended
    }

    /// Sets it when dropped, however the work ends (a panic too), so the watcher (and the
    /// thread scope waiting for it) always ends.
    pub fn on_drop(&self) -> SetOnDrop<'_> {
        SetOnDrop(self)
    }
}

/// See [`Done::on_drop`].
pub struct SetOnDrop<'a>(&'a Done);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.set();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn a_waiter_wakes_when_it_is_set_not_at_the_end_of_its_tick() {
        let done = Done::new();
        assert!(!done.wait(Duration::from_millis(1)));
        let t0 = Instant::now();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| done.wait(Duration::from_secs(30)));
            std::thread::sleep(Duration::from_millis(20));
            drop(done.on_drop());
            assert!(waiter.join().unwrap());
        });
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        assert!(done.wait(Duration::ZERO));
    }
}
