//! Lock: from here on Ctrl-C is strata's (the signal handlers are installed first, so
//! the lock is released on every path), and the stack lock refuses a second strata.
//! Every stage from here on answers a signal within a second: the orphan wait and the
//! stages before the scheduler look at [`Caught`]; `execute`'s watcher reads `signals`.

use signal_hook::iterator::Signals;

use crate::error::{Error, Result};
use crate::run::lock::StackLock;
use crate::run::signals::{self, Caught};

use super::resolve::Resolved;

/// The stack lock and the signal handlers of a run; dropping it releases the lock.
pub struct Held {
    pub signals: Signals,
    /// The first signal, for the stages before the scheduler.
    pub caught: Caught,
    /// `None` for a preview, which changes nothing and takes no lock.
    pub lock: Option<StackLock>,
    /// Warnings (a stale lock taken over) for the run's header.
    pub notices: Vec<String>,
}

fn install_signals() -> Result<(Signals, Caught)> {
    let failed = |e| Error::failed(format!("cannot install the Ctrl-C handler: {e}"));
    Ok((
        signals::install().map_err(failed)?,
        Caught::register().map_err(failed)?,
    ))
}

/// The signal handlers alone: a preview runs beside an `up` of the same stack.
pub fn signals_only() -> Result<Held> {
    let (signals, caught) = install_signals()?;
    Ok(Held {
        signals,
        caught,
        lock: None,
        notices: Vec::new(),
    })
}

pub fn acquire(r: &Resolved) -> Result<Held> {
    // A strata killed outright leaves its children running: a takeover waits this long
    // for them (`STRATA_LOCK_WAIT_SECONDS`, default 120), then refuses.
    let orphan_wait = std::time::Duration::from_secs(
        r.ws.env
            .get("STRATA_LOCK_WAIT_SECONDS")
            .and_then(|s| s.parse().ok())
            .unwrap_or(120),
    );
    acquire_waiting(r, orphan_wait)
}

/// The lock now or never (a preview saving its answers does not wait for anyone).
pub fn try_acquire(r: &Resolved) -> Result<Held> {
    acquire_waiting(r, std::time::Duration::ZERO)
}

fn acquire_waiting(r: &Resolved, orphan_wait: std::time::Duration) -> Result<Held> {
    let (signals, caught) = install_signals()?;
    let mut notices = Vec::new();
    let lock = StackLock::acquire(
        &r.ws.state_dir(r.stack()),
        r.stack(),
        &format!("strata {}", r.req.op.as_str()),
        orphan_wait,
        &|| caught.signal(),
        &mut |w| notices.push(format!("warning: {w}")),
    )?;
    Ok(Held {
        signals,
        caught,
        lock: Some(lock),
        notices,
    })
}
