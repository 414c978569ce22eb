//! SIGINT and SIGTERM: the handler only records the signal; a watcher thread acts on it
//! (log line, message, cancel flag, or exit) within a few milliseconds.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering};
use std::time::Duration;

use crate::{calllog, output};

const SLOTS: usize = 64;
static PENDING: [AtomicI32; SLOTS] = [const { AtomicI32::new(0) }; SLOTS];
static RECEIVED: AtomicUsize = AtomicUsize::new(0);
static SIGINTS: AtomicUsize = AtomicUsize::new(0);

/// Set by the first SIGINT during an operation: stop at the next step and save.
static CANCEL: AtomicBool = AtomicBool::new(false);
/// True while an engine operation runs (outside one, SIGINT kills as in any Go program).
static ENGINE: AtomicBool = AtomicBool::new(false);
static PREVIEW: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    let i = RECEIVED.fetch_add(1, Ordering::SeqCst);
    if i < SLOTS {
        PENDING[i].store(sig, Ordering::SeqCst);
    }
}

/// Installs the handlers and starts the watcher thread.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with an async-signal-safe handler (atomics only).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as *const () as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut());
        }
    }
    std::thread::spawn(watch);
}

/// From now on SIGINT cancels gracefully (first) or terminates (second).
pub fn enter_engine(preview: bool) {
    PREVIEW.store(preview, Ordering::SeqCst);
    ENGINE.store(true, Ordering::SeqCst);
}

pub fn leave_engine() {
    ENGINE.store(false, Ordering::SeqCst);
}

pub fn cancelled() -> bool {
    CANCEL.load(Ordering::SeqCst)
}

fn watch() {
    let mut seen = 0;
    loop {
        std::thread::sleep(Duration::from_millis(3));
        let n = RECEIVED.load(Ordering::SeqCst).min(SLOTS);
        while seen < n {
            let sig = PENDING[seen].load(Ordering::SeqCst);
            if sig == 0 {
                break; // the handler has counted it but not stored it yet
            }
            seen += 1;
            handle(sig);
        }
    }
}

fn handle(sig: libc::c_int) {
    match sig {
        libc::SIGINT => {
            calllog::signal("SIGINT");
            let count = SIGINTS.fetch_add(1, Ordering::SeqCst) + 1;
            if !ENGINE.load(Ordering::SeqCst) {
                calllog::end(128 + libc::SIGINT, None);
                die(libc::SIGINT);
            }
            let ignore = std::env::var("FAKE_PULUMI_IGNORE_SIGINT").is_ok_and(|v| v == "1");
            if count == 1 && ignore {
                return;
            }
            if count >= 2 {
                output::stdout_message("^C received; terminating");
                calllog::end(crate::error::code::INTERNAL, None);
                std::process::exit(crate::error::code::INTERNAL);
            }
            let mut msg = String::from(
                "^C received; cancelling. If you would like to terminate immediately, press ^C again.\n",
            );
            if !PREVIEW.load(Ordering::SeqCst) {
                msg.push_str(
                    "Note that terminating immediately may lead to orphaned resources and other \
                     inconsistencies.\n",
                );
            }
            CANCEL.store(true, Ordering::SeqCst);
            output::stdout_message(&msg);
        }
        libc::SIGTERM => {
            calllog::signal("SIGTERM");
            calllog::end(128 + libc::SIGTERM, None);
            die(libc::SIGTERM);
        }
        _ => {}
    }
}

/// Dies by the signal's default action, as a Go program without a handler does.
fn die(sig: libc::c_int) -> ! {
    // SAFETY: restoring the default disposition and raising are plain libc calls.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
    std::process::exit(128 + sig)
}
