//! Lock: from here on Ctrl-C is strata's (the signal handlers are installed first, so
//! the lock is released on every path), and the stack lock refuses a second strata.
//! Every stage from here on answers a signal within a second: the orphan wait and the
//! stages before the scheduler look at [`Caught`]; `execute`'s watcher reads `signals`.
//! On an S3 backend the run also holds the stack's lease in the backend (after the local
//! lock), so that another checkout or machine waits or refuses too.

use signal_hook::iterator::Signals;

use crate::error::{Error, Result};
use crate::run::signals::{self, Caught};
use crate::state::lock::StackLock;
use crate::state::lock::lease::{self, Lease, Where};

use super::resolve::Resolved;

/// The stack lock and the signal handlers of a run; dropping it releases the lock.
pub struct Held {
    /// The lease in the backend, first so that it goes first (its renewals may raise
    /// SIGTERM, which must find strata's handlers still installed).
    pub lease: Option<Lease>,
    /// The run's id (also in the lease, which names its holder's run).
    pub run_id: String,
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
        lease: None,
        run_id: new_run_id(),
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
    let mut held = acquire_waiting(r, orphan_wait, r.req.args.lock_timeout)?;
    held.lease = take_lease(r, &mut held)?;
    Ok(held)
}

/// The run's id: when it started, and the process.
fn new_run_id() -> String {
    format!(
        "{}-{}",
        crate::util::rfc3339(crate::util::now_ms()).replace([':', '-'], ""),
        std::process::id()
    )
}

/// The stack's lease in its backend, when that is an S3 bucket, waiting for it up to
/// `--lock-timeout`. A lease lost during the run cancels it as SIGTERM would, saying why.
fn take_lease(r: &Resolved, held: &mut Held) -> Result<Option<Lease>> {
    let env = r.shared_env();
    // The bucket the preflight opened: one client, and a backend that did not answer
    // it moments ago is not waited for a second time.
    let backend = match crate::engine::pulumi::shared_where(&env)? {
        (Where::S3(_), Some(failed)) => return Err(lease::nothing_started(Error::failed(failed))),
        (Where::S3(b), None) => b,
        (Where::Unsupported(scheme), _) => {
            held.notices.push(format!(
                "warning: strata keeps a stack's lease only in s3:// backends, not yet in {scheme}://: another checkout or machine on this backend is not kept from running stack `{}` at the same time.",
                r.stack()
            ));
            return Ok(None);
        }
        (Where::None, _) => return Ok(None),
    };
    let me = lease::Holder::me(
        &r.ws.env,
        r.stack(),
        &held.run_id,
        &format!("strata {}", r.req.op.as_str()),
    )?
    .for_projects(claimed(r));
    let caught = &held.caught;
    let notices = &mut held.notices;
    let lease = lease::acquire(
        backend,
        me,
        lease::Waiting {
            timeout: r.req.args.lock_timeout,
            stop: &|| caught.signal(),
            warn: &mut |w| notices.push(format!("warning: {w}")),
        },
        Box::new(|why: String| {
            eprintln!("strata: {why}");
            // SAFETY: kill sends a signal to this process; its handlers are installed.
            unsafe { libc::kill(std::process::id() as i32, libc::SIGTERM) };
        }),
    )?;
    Ok(Some(lease))
}

/// The projects a run may change, which it holds the lease for: those its selection
/// picks; `None` (the whole environment) for a run of all of them or of the orphans.
fn claimed(r: &Resolved) -> Option<Vec<String>> {
    if r.req.args.selector.is_empty() || r.req.orphans {
        return None;
    }
    Some(r.plan.nodes.iter().map(|n| n.path.clone()).collect())
}

/// The lock now or never (a preview saving its answers does not wait for anyone).
pub fn try_acquire(r: &Resolved) -> Result<Held> {
    acquire_waiting(r, std::time::Duration::ZERO, std::time::Duration::ZERO)
}

/// The refusal of a stack another strata of this checkout holds, with what
/// `--lock-timeout` does about it: waits (when it was not given), or waited in vain.
fn with_lock_timeout(mut e: Error, lock_timeout: std::time::Duration) -> Error {
    if lock_timeout.is_zero() {
        e.message.push_str(
            "\n  To wait for it instead of refusing, add `--lock-timeout 10m` (or any duration).",
        );
    } else {
        e.message.push_str(&format!(
            "\n  It was still held after {} (`--lock-timeout`): give a longer one to wait longer.",
            humantime::format_duration(lock_timeout)
        ));
    }
    e
}

fn acquire_waiting(
    r: &Resolved,
    orphan_wait: std::time::Duration,
    lock_timeout: std::time::Duration,
) -> Result<Held> {
    let (signals, caught) = install_signals()?;
    let mut notices = Vec::new();
    let state_dir = r.ws.state_dir(r.stack());
    let deadline = std::time::Instant::now() + lock_timeout;
    let mut said = false;
    let lock = loop {
        let took = StackLock::acquire(
            &state_dir,
            r.stack(),
            &format!("strata {}", r.req.op.as_str()),
            orphan_wait,
            &|| caught.signal(),
            &mut |w| notices.push(format!("warning: {w}")),
        );
        // `--lock-timeout`: another strata of this checkout holds the stack; wait for it
        // (answering Ctrl-C) until the deadline, then refuse as without the flag.
        match took {
            Err(e) if std::time::Instant::now() < deadline && StackLock::is_held(&state_dir) => {
                if !said {
                    eprintln!(
                        "strata: waiting up to {} for the lock of stack `{}`: {}",
                        humantime::format_duration(lock_timeout),
                        r.stack(),
                        e.message.lines().next().unwrap_or("")
                    );
                    said = true;
                }
                if let Some(sig) = caught.signal() {
                    return Err(crate::error::stopped_before_start(
                        sig,
                        &format!("while waiting for the lock of stack `{}`", r.stack()),
                    ));
                }
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            Err(e) if StackLock::is_held(&state_dir) => {
                return Err(with_lock_timeout(e, lock_timeout));
            }
            took => break took?,
        }
    };
    Ok(Held {
        lease: None,
        run_id: new_run_id(),
        signals,
        caught,
        lock: Some(lock),
        notices,
    })
}
