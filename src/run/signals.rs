//! Ctrl-C, SIGTERM and SIGHUP (a closed terminal, a dropped SSH session) during a run:
//! the first stops scheduling and forwards exactly one SIGINT to each running child; a
//! second (or the end of the grace period) kills them. The run then exits 128+n.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::events::RunEvent;
use crate::engine::Control;

/// Installs the handlers; strata no longer dies on Ctrl-C while they are installed.
pub fn install() -> std::io::Result<Signals> {
    Signals::new([SIGINT, SIGTERM, SIGHUP])
}

/// Watches for signals until `done` is set.
pub fn watch(
    mut signals: Signals,
    control: &Control,
    done: &AtomicBool,
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
                        if running.len() == 1 { "" } else { "s" },
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
        if done.load(Ordering::SeqCst) {
            return;
        }
        std::thread::sleep(Duration::from_millis(25));
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
