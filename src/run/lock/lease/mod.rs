//! One run per stack across machines: the lease `.strata/locks/<stack>.json` in the
//! stack's S3 backend, taken with a conditional create, renewed on its ETag while the run
//! lives, released at its end, and taken over only once a waiter saw it unchanged for a
//! whole TTL on its own clock (never by comparing the holder's wall clock with its own).

use std::collections::BTreeMap;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

#[cfg(test)]
mod tests;

pub use crate::backend::{Backend, Where};

/// How long a lease lives without a renewal, unless a test says otherwise.
const TTL: Duration = Duration::from_secs(60);

/// What the lease object says: who holds it, since when, and for how long a renewal
/// keeps it. `renewals` changes with every write, so every write changes the ETag.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Holder {
    pub stack: String,
    pub user: String,
    pub host: String,
    pub pid: u32,
    /// The process's start time (`/proc/<pid>/stat` field 22), telling it from a later
    /// process of the same pid.
    #[serde(default)]
    pub started: Option<u64>,
    pub run_id: String,
    pub command: String,
    pub since: String,
    pub ttl_ms: u64,
    #[serde(default)]
    pub renewals: u64,
    /// The holder's wall clock at its last write: shown, never compared.
    #[serde(default)]
    pub renewed_at: String,
    /// Released at the end of its run: free to take.
    #[serde(default)]
    pub released: bool,
    /// A random token of each write: a write whose answer was lost (a timeout, applied
    /// by the store all the same) is recognised as this run's by it.
    #[serde(default)]
    pub write: String,
}

impl Holder {
    /// This process's claim on `stack` for the run `run_id` of `command`. The TTL and the
    /// host may be set by strata's own tests (debug builds only): `STRATA_TEST_LEASE_TTL_MS`
    /// and `STRATA_TEST_HOSTNAME`, so that two "machines" are played on one.
    pub fn me(
        env: &BTreeMap<String, String>,
        stack: &str,
        run_id: &str,
        command: &str,
    ) -> Result<Holder> {
        let ttl = test_override(env, "STRATA_TEST_LEASE_TTL_MS")?
            .map(|v| {
                v.parse::<u64>().ok().filter(|n| *n >= 100).ok_or_else(|| {
                    Error::config(format!(
                        "STRATA_TEST_LEASE_TTL_MS={v}: a number of milliseconds, at least 100"
                    ))
                })
            })
            .transpose()?
            .unwrap_or(TTL.as_millis() as u64);
        let (user, host) = who(env)?;
        let pid = std::process::id();
        let now = crate::util::rfc3339(crate::util::now_ms());
        Ok(Holder {
            stack: stack.to_string(),
            user,
            host,
            pid,
            started: super::start_time(pid),
            run_id: run_id.to_string(),
            command: command.to_string(),
            since: now.clone(),
            ttl_ms: ttl,
            renewals: 0,
            renewed_at: now,
            released: false,
            write: token(),
        })
    }

    pub fn ttl(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// Whether `other` was written by this same holder (a write whose answer was lost).
    fn same_holder(&self, other: &Holder) -> bool {
        (&self.host, self.pid, self.started, &self.run_id)
            == (&other.host, other.pid, other.started, &other.run_id)
    }

    /// Whether `other` is one of this holder's own writes still holding the lease: same
    /// run, not released, and a write token this holder sent (`sent`).
    fn own_write(&self, other: &Holder, sent: &[String]) -> bool {
        self.same_holder(other) && !other.released && sent.contains(&other.write)
    }

    fn body(&self) -> Vec<u8> {
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }

    /// Who, where, since when: for messages.
    pub fn describe(&self) -> String {
        format!(
            "`{}` (run {}) by {} on {}, pid {}, since {}",
            self.command, self.run_id, self.user, self.host, self.pid, self.since
        )
    }
}

/// Who runs this strata, and where: the user (`USER`, `LOGNAME`, else the uid) and the
/// host (`STRATA_TEST_HOSTNAME` in strata's own tests).
pub fn who(env: &BTreeMap<String, String>) -> Result<(String, String)> {
    let host = test_override(env, "STRATA_TEST_HOSTNAME")?.unwrap_or_else(crate::util::hostname);
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|k| env.get(*k).filter(|v| !v.is_empty()).cloned())
        // SAFETY: getuid cannot fail.
        .unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }));
    Ok((user, host))
}

/// A random token (16 bytes, hex); the time and pid when the system gives no randomness.
fn token() -> String {
    match crate::util::random_bytes(16) {
        Ok(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
        Err(_) => format!("{}-{}", std::process::id(), crate::util::now_ms()),
    }
}

/// A test-only setting: read in debug builds, refused in release builds.
fn test_override(env: &BTreeMap<String, String>, key: &str) -> Result<Option<String>> {
    let Some(v) = env.get(key).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if cfg!(debug_assertions) {
        Ok(Some(v.clone()))
    } else {
        Err(Error::config(format!(
            "{key} is set: it is for strata's own tests (debug builds) only. Unset it."
        )))
    }
}

/// A clock that counts a suspended machine's sleep too (`CLOCK_BOOTTIME`): a waiter or a
/// holder that slept through a TTL knows it.
fn now() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The lease object as read: its holder (`None` when unreadable) and ETag.
pub struct Found {
    pub holder: Option<Holder>,
    pub etag: String,
}

/// The lease of `stack` as it is now, if there is one.
pub fn read(backend: &Backend, stack: &str) -> Result<Option<Found>> {
    Ok(backend.get(&key(backend, stack))?.map(|o| Found {
        holder: serde_json::from_slice(&o.body).ok(),
        etag: o.etag,
    }))
}

/// How to wait for a held lease.
pub struct Waiting<'a> {
    /// `--lock-timeout`: zero refuses at once.
    pub timeout: Duration,
    /// A signal that arrived (the wait then stops).
    pub stop: &'a dyn Fn() -> Option<i32>,
    /// Receives the takeover notice.
    pub warn: &'a mut dyn FnMut(String),
}

/// Takes the lease of `me.stack` in `backend`, waiting as `waiting` says, then keeps it
/// renewed on a thread until the returned [`Lease`] is dropped. `lost` is called (on that
/// thread) if the lease is lost meanwhile.
pub fn acquire(
    backend: Arc<Backend>,
    me: Holder,
    waiting: Waiting,
    lost: Box<dyn Fn(String) + Send>,
) -> Result<Lease> {
    let key = key(&backend, &me.stack);
    let (etag, sent) = match take(&backend, &key, &me, waiting) {
        Ok(taken) => taken,
        Err(e) => {
            release_own(&backend, &key, &me);
            return Err(nothing_started(e));
        }
    };
    Lease::keep(backend, key, me, etag, sent, lost)
}

/// After a failed take: a write of ours the store applied but did not answer (a
/// timeout) holds the lease with nobody renewing it; written released, so the next run
/// is not refused for a run that never started. Best effort: the store may still be away.
fn release_own(backend: &Backend, key: &str, me: &Holder) {
    if let Ok(Some(cur)) = backend.get(key)
        && let Ok(h) = serde_json::from_slice::<Holder>(&cur.body)
        && me.same_holder(&h)
        && !h.released
    {
        let found = Found {
            holder: Some(h),
            etag: cur.etag,
        };
        let _ = free(backend, &me.stack, &found);
    }
}

/// A lease that could not be taken for want of an answer (not a holder's): says that
/// nothing ran, and what to do.
pub fn nothing_started(mut e: Error) -> Error {
    if e.kind == crate::error::Kind::Failed {
        e.message.push_str("\n  Nothing was started: strata takes the stack's lease in its backend before it runs anything. Check that the backend is reachable, then run again.");
    }
    e
}

/// The ETag seen, and since when (on this process's clock).
struct Seen {
    etag: String,
    since: Duration,
}

/// The waiting loop: creates the lease when there is none, takes a released one, and
/// takes over one whose ETag stayed the same for its whole TTL. The ETag of the lease
/// written, and when its write was sent.
fn take(backend: &Backend, key: &str, me: &Holder, waiting: Waiting) -> Result<(String, Duration)> {
    let t0 = now();
    let poll = (me.ttl() / 10).clamp(Duration::from_millis(50), Duration::from_secs(2));
    let mut seen: Option<Seen> = None;
    // A write that got no answer may have been applied all the same: the next look
    // tells (a write of ours is ours). Only a store that keeps failing fails the take.
    let mut unanswered: Option<Error> = None;
    let mut attempts = 0;
    loop {
        let sent = now();
        let Some(cur) = backend.get(key)? else {
            match backend.create(key, &me.body()) {
                Ok(Some(etag)) => return Ok((etag, sent)),
                Ok(None) => {}
                Err(e) => unanswered = Some(e),
            }
            attempts += 1;
            if let Some(e) = unanswered.take().filter(|_| attempts >= 3) {
                return Err(e);
            }
            continue;
        };
        let holder: Option<Holder> = serde_json::from_slice(&cur.body).ok();
        // A write of ours whose answer was lost: ours.
        if holder
            .as_ref()
            .is_some_and(|h| me.own_write(h, std::slice::from_ref(&me.write)))
        {
            return Ok((cur.etag, sent));
        }
        let ttl = holder.as_ref().map_or(me.ttl(), Holder::ttl);
        let same = seen.as_ref().is_some_and(|s| s.etag == cur.etag);
        if !same {
            seen = Some(Seen {
                etag: cur.etag.clone(),
                since: now(),
            });
        }
        let since = seen.as_ref().map(|s| s.since).unwrap_or_default();
        let unchanged_for = now().saturating_sub(since);
        let released = holder.as_ref().is_some_and(|h| h.released);
        if released || unchanged_for >= ttl {
            match backend.update(key, &me.body(), &cur.etag) {
                Ok(Some(etag)) => {
                    if !released {
                        (waiting.warn)(takeover_notice(backend, me, holder.as_ref(), ttl));
                    }
                    return Ok((etag, sent));
                }
                Ok(None) => {}
                Err(e) => {
                    attempts += 1;
                    if attempts >= 3 {
                        return Err(e);
                    }
                }
            }
            continue;
        }
        let waited = now().saturating_sub(t0);
        if waited >= waiting.timeout {
            return Err(in_use(backend, me, holder.as_ref(), ttl));
        }
        if let Some(sig) = (waiting.stop)() {
            return Err(crate::run::signals::stopped_before_start(
                sig,
                &format!("while waiting for the lease of stack `{}`", me.stack),
            ));
        }
        std::thread::sleep(poll.min(waiting.timeout.saturating_sub(waited)));
    }
}

fn takeover_notice(backend: &Backend, me: &Holder, gone: Option<&Holder>, ttl: Duration) -> String {
    format!(
        "took over the lease of stack `{}` in {}: its holder ({}) had not renewed it for {}s, its whole lease",
        me.stack,
        backend.name,
        gone.map_or("unreadable".to_string(), Holder::describe),
        ttl.as_secs_f64()
    )
}

/// The refusal when another run holds the lease: who, where, since when, and how to free it.
fn in_use(backend: &Backend, me: &Holder, holder: Option<&Holder>, ttl: Duration) -> Error {
    let stack = &me.stack;
    let who = holder.map_or_else(
        || format!("a lease strata cannot read ({})", key(backend, stack)),
        Holder::describe,
    );
    let wait = (ttl * 2).as_secs().max(1);
    Error::config(format!(
        "stack `{stack}` is in use: {who} holds its lease in the Pulumi backend {}.\n  Wait for it to finish, or wait for it with `--lock-timeout 30m`. If that run is gone (killed, its machine off), its lease expires {}s after its last renewal: `--lock-timeout {wait}s` takes it over then, and `strata unlock -s {stack}` frees it now.",
        backend.name,
        ttl.as_secs_f64(),
    ))
}

/// A held lease: a thread renews it every third of its TTL; dropped, it releases it.
pub struct Lease {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// What the renewing thread holds.
struct Kept {
    backend: Arc<Backend>,
    key: String,
    me: Holder,
    etag: String,
    /// When the last write that went through was sent.
    renewed: Duration,
    /// The tokens of the writes sent since the last one answered: any of them may be
    /// the one the store holds.
    unanswered: Vec<String>,
    lost: Box<dyn Fn(String) + Send>,
}

impl Lease {
    fn keep(
        backend: Arc<Backend>,
        key: String,
        me: Holder,
        etag: String,
        sent: Duration,
        lost: Box<dyn Fn(String) + Send>,
    ) -> Result<Lease> {
        let (tx, rx) = mpsc::channel();
        let kept = Kept {
            backend,
            key,
            me,
            etag,
            renewed: sent,
            unanswered: Vec::new(),
            lost,
        };
        let thread = std::thread::Builder::new()
            .name("lease".into())
            .spawn(move || kept.run(rx))
            .map_err(|e| {
                Error::failed(format!(
                    "cannot start the thread that renews the lease: {e}"
                ))
            })?;
        Ok(Lease {
            stop: Some(tx),
            thread: Some(thread),
        })
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.stop.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Kept {
    /// Renews until told to stop (then releases), or until the lease is lost.
    fn run(mut self, stop: mpsc::Receiver<()>) {
        let ttl = self.me.ttl();
        let mut failing = false;
        loop {
            let pause = if failing { ttl / 10 } else { ttl / 3 };
            match stop.recv_timeout(pause) {
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                _ => return self.release(),
            }
            match self.write(false) {
                Ok(true) => failing = false,
                Ok(false) => return self.taken(),
                Err(e) => {
                    failing = true;
                    // A waiter may take it over one TTL after it saw our last write,
                    // which was sent at `renewed` at the earliest: give up a little before.
                    if now().saturating_sub(self.renewed) >= ttl * 9 / 10 {
                        (self.lost)(format!(
                            "the lease of stack `{}` could not be renewed for {}s, its whole lease, so another run may hold it now: {}. Cancelling this run.",
                            self.me.stack,
                            ttl.as_secs_f64(),
                            e.message
                        ));
                        // Still ours if nobody took it: released as the run ends, once
                        // the backend answers again.
                        let _ = stop.recv();
                        return self.release();
                    }
                }
            }
        }
    }

    /// Writes the lease again on its ETag (released, or renewed): `Ok(false)` when
    /// another write came first.
    fn write(&mut self, released: bool) -> Result<bool> {
        self.me.renewals += 1;
        self.me.released = released;
        self.me.renewed_at = crate::util::rfc3339(crate::util::now_ms());
        self.me.write = token();
        self.unanswered.push(self.me.write.clone());
        let sent = now();
        let written = match self
            .backend
            .update(&self.key, &self.me.body(), &self.etag)?
        {
            Some(etag) => Some(etag),
            // An earlier write of ours whose answer was lost (a timeout the store applied
            // all the same) changed the ETag: still ours, on the ETag it has now.
            None => self.own_etag()?,
        };
        match written {
            Some(etag) => {
                self.etag = etag;
                self.renewed = sent;
                self.unanswered.clear();
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The ETag of the lease if what it holds is one of this run's unanswered writes
    /// (then written again on it, released or renewed as `self.me` says).
    fn own_etag(&mut self) -> Result<Option<String>> {
        let Some(cur) = self.backend.get(&self.key)? else {
            return Ok(None);
        };
        let ours = serde_json::from_slice::<Holder>(&cur.body)
            .is_ok_and(|h| self.me.own_write(&h, &self.unanswered));
        if !ours {
            return Ok(None);
        }
        self.backend.update(&self.key, &self.me.body(), &cur.etag)
    }

    fn release_if_mine(&self) -> Result<()> {
        if let Some(found) = read(&self.backend, &self.me.stack)?
            && let Some(h) = &found.holder
            && h.run_id == self.me.run_id
            && !h.released
        {
            free(&self.backend, &self.me.stack, &found)?;
        }
        Ok(())
    }

    fn taken(self) {
        let by = read(&self.backend, &self.me.stack)
            .ok()
            .flatten()
            .and_then(|f| f.holder)
            .map_or("another strata".to_string(), |h| {
                if h.released {
                    "`strata unlock`".to_string()
                } else {
                    h.describe()
                }
            });
        (self.lost)(format!(
            "the lease of stack `{}` in {} was taken by {by} while this run held it (this run's renewals had stopped for a whole lease, or it was freed). Cancelling this run.",
            self.me.stack, self.backend.name
        ))
    }

    /// Writes the lease released, if it is still this run's: on its ETag, else (a
    /// renewal whose answer was lost landed later) on the ETag it has now.
    fn release(mut self) {
        // An unanswered write may have landed: the second try tells.
        let done =
            self.write(true)
                .or_else(|_| self.write(true))
                .and_then(|written| match written {
                    true => Ok(()),
                    false => self.release_if_mine(),
                });
        if let Err(e) = done {
            eprintln!(
                "warning: the lease of stack `{}` was not released: {}\n  It expires {}s after its last renewal; `strata unlock -s {}` frees it now.",
                self.me.stack,
                e.message,
                self.me.ttl().as_secs_f64(),
                self.me.stack
            );
        }
    }
}

/// Frees the lease of `stack` if its ETag is still `etag` (the one shown to whoever
/// confirmed): written released, never deleted. `Ok(false)` when it changed meanwhile.
pub fn free(backend: &Backend, stack: &str, found: &Found) -> Result<bool> {
    let mut h = found.holder.clone().unwrap_or_else(|| Holder {
        stack: stack.to_string(),
        user: String::new(),
        host: String::new(),
        pid: 0,
        started: None,
        run_id: String::new(),
        command: String::new(),
        since: String::new(),
        ttl_ms: TTL.as_millis() as u64,
        renewals: 0,
        renewed_at: String::new(),
        released: false,
        write: String::new(),
    });
    h.write = token();
    h.released = true;
    h.renewals += 1;
    h.renewed_at = crate::util::rfc3339(crate::util::now_ms());
    Ok(backend
        .update(&key(backend, stack), &h.body(), &found.etag)?
        .is_some())
}

/// The key of `stack`'s lease in `backend`.
pub fn key(backend: &Backend, stack: &str) -> String {
    backend.key(&format!(".strata/locks/{stack}.json"))
}
