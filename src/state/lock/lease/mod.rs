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
    /// The projects (profile paths) this run may change; `None`: the whole environment.
    /// Runs whose sets do not overlap hold the lease at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub projects: Option<Vec<String>>,
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
            projects: None,
        })
    }

    /// This claim narrowed to `projects` (a run of part of the environment).
    pub fn for_projects(mut self, projects: Option<Vec<String>>) -> Holder {
        self.projects = projects;
        self
    }

    /// Whether this run and `other` may change a project in common (a run of the whole
    /// environment overlaps every other).
    pub fn overlaps(&self, other: &Holder) -> bool {
        match (&self.projects, &other.projects) {
            (Some(mine), Some(theirs)) => mine.iter().any(|p| theirs.contains(p)),
            _ => true,
        }
    }

    /// `for a, b (this run wants a)`: what `other` holds, and what of it this run wants.
    fn overlap_with(&self, other: &Holder) -> String {
        let theirs = match &other.projects {
            Some(p) => crate::util::list_some(p, 4),
            None => "the whole environment".into(),
        };
        let both: Vec<String> = match (&self.projects, &other.projects) {
            (Some(mine), Some(t)) => mine.iter().filter(|p| t.contains(p)).cloned().collect(),
            (Some(mine), None) => mine.clone(),
            (None, Some(t)) => t.clone(),
            (None, None) => Vec::new(),
        };
        match both.is_empty() {
            true => format!("for {theirs}"),
            false => format!(
                "for {theirs} (this run wants {} too)",
                crate::util::list_some(&both, 4)
            ),
        }
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

    #[cfg(test)]
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

/// Who runs this strata, and where: a person's name (`USER`, `LOGNAME`, else git's
/// `user.name`, else the account's name, the uid only when none of them is known) and
/// the host (`STRATA_TEST_HOSTNAME` in strata's own tests).
pub fn who(env: &BTreeMap<String, String>) -> Result<(String, String)> {
    let host = test_override(env, "STRATA_TEST_HOSTNAME")?.unwrap_or_else(crate::util::hostname);
    let user = ["USER", "LOGNAME"]
        .iter()
        .find_map(|k| env.get(*k).filter(|v| !v.is_empty()).cloned())
        .or_else(git_user_name)
        .or_else(account_name)
        // SAFETY: getuid cannot fail.
        .unwrap_or_else(|| format!("uid {}", unsafe { libc::getuid() }));
    Ok((user, host))
}

/// `git config user.name`, when git is there and it is set: asked once per process
/// (a run names its user in the lease, the journal and the run record).
fn git_user_name() -> Option<String> {
    static NAME: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    NAME.get_or_init(ask_git_user_name).clone()
}

fn ask_git_user_name() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["config", "--get", "user.name"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let name = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !name.is_empty()).then_some(name)
}

/// The account's name in the password database (`getpwuid_r`).
fn account_name() -> Option<String> {
    let mut buf = vec![0u8; 4096];
    // SAFETY: a zeroed passwd is a valid out-parameter; getpwuid_r writes strings into
    // `buf` and points `pw` at `entry` on success.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut pw: *mut libc::passwd = std::ptr::null_mut();
    let rc = unsafe {
        libc::getpwuid_r(
            libc::getuid(),
            &mut entry,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut pw,
        )
    };
    if rc != 0 || pw.is_null() || entry.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name points into `buf`, NUL-terminated by getpwuid_r.
    let name = unsafe { std::ffi::CStr::from_ptr(entry.pw_name) };
    Some(name.to_string_lossy().into_owned()).filter(|n| !n.is_empty())
}

/// A random token (16 bytes, hex); the time and pid when the system gives no randomness.
fn token() -> String {
    match crate::util::random_bytes(16) {
        Ok(b) => crate::util::hex(&b),
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

/// The lease object as read: its live holders (none when free; `readable` false when it
/// is not a lease strata can read) and its ETag.
pub struct Found {
    pub holders: Vec<Holder>,
    pub readable: bool,
    pub etag: String,
}

impl Found {
    fn of(o: crate::backend::Object) -> Found {
        let holders = holders(&o.body);
        Found {
            readable: holders.is_some(),
            holders: holders.unwrap_or_default(),
            etag: o.etag,
        }
    }
}

/// The lease object's body: every run that holds part of the stack.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Doc {
    holders: Vec<Holder>,
}

fn body(holders: &[Holder]) -> Vec<u8> {
    let doc = Doc {
        holders: holders.to_vec(),
    };
    serde_json::to_vec_pretty(&doc).unwrap_or_default()
}

/// The live holders in a lease object's body (a list; or one holder, as strata wrote
/// it before leases were per project); `None` when it is neither.
fn holders(body: &[u8]) -> Option<Vec<Holder>> {
    let all = match serde_json::from_slice::<Doc>(body) {
        Ok(doc) => doc.holders,
        Err(_) => vec![serde_json::from_slice::<Holder>(body).ok()?],
    };
    Some(all.into_iter().filter(|h| !h.released).collect())
}

/// The lease of `stack` as it is now, if there is one.
pub fn read(backend: &Backend, stack: &str) -> Result<Option<Found>> {
    Ok(backend.get(&key(backend, stack))?.map(Found::of))
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

/// Takes the lease of `me.stack` for `me.projects` in `backend`, waiting as `waiting`
/// says, then keeps it renewed on a thread until the returned [`Lease`] is dropped.
/// `lost` is called (on that thread) if the lease is lost meanwhile.
pub fn acquire(
    backend: Arc<Backend>,
    me: Holder,
    waiting: Waiting,
    lost: Box<dyn Fn(String) + Send>,
) -> Result<Lease> {
    let key = key(&backend, &me.stack);
    let sent = match take(&backend, &key, &me, waiting) {
        Ok(sent) => sent,
        Err(e) => {
            release_own(&backend, &key, &me);
            return Err(nothing_started(e));
        }
    };
    Lease::keep(backend, key, me, sent, lost)
}

/// After a failed take: a write of ours the store applied but did not answer (a
/// timeout) holds part of the lease with nobody renewing it; taken out again, so the
/// next run is not refused for a run that never started. Best effort: the store may
/// still be away.
fn release_own(backend: &Backend, key: &str, me: &Holder) {
    for _ in 0..3 {
        let Ok(Some(cur)) = backend.get(key) else {
            return;
        };
        let Some(mut all) = holders(&cur.body) else {
            return;
        };
        let before = all.len();
        all.retain(|h| !me.same_holder(h));
        if all.len() == before {
            return;
        }
        if let Ok(Some(_)) = backend.update(key, &body(&all), &cur.etag) {
            return;
        }
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

/// What a waiter saw of each holder (by run): its renewals, and since when (on this
/// process's clock) they stayed the same; and of an unreadable lease, its ETag.
#[derive(Default)]
struct Seen {
    runs: BTreeMap<String, (u64, Duration)>,
    unreadable: Option<(String, Duration)>,
}

impl Seen {
    /// How long `h` has not been renewed, as far as this waiter saw.
    fn still_for(&mut self, h: &Holder) -> Duration {
        let t = now();
        let e = self.runs.entry(h.run_id.clone()).or_insert((h.renewals, t));
        if e.0 != h.renewals {
            *e = (h.renewals, t);
        }
        t.saturating_sub(e.1)
    }

    fn unreadable_for(&mut self, etag: &str) -> Duration {
        let t = now();
        match &self.unreadable {
            Some((seen, since)) if seen == etag => t.saturating_sub(*since),
            _ => {
                self.unreadable = Some((etag.to_string(), t));
                Duration::ZERO
            }
        }
    }
}

/// The waiting loop: adds this run to the lease when no live holder wants a project it
/// wants (creating the lease when there is none), leaving out holders not renewed for
/// their whole TTL as this waiter saw them. When its write was sent.
fn take(backend: &Backend, key: &str, me: &Holder, waiting: Waiting) -> Result<Duration> {
    let t0 = now();
    let poll = (me.ttl() / 10).clamp(Duration::from_millis(50), Duration::from_secs(2));
    let mut seen = Seen::default();
    // A write that got no answer may have been applied all the same: the next look
    // tells (a write of ours is ours). Only a store that keeps failing fails the take.
    let mut failures = 0;
    loop {
        let sent = now();
        let written = match backend.get(key)? {
            None => backend.create(key, &body(std::slice::from_ref(me))),
            Some(cur) => {
                let Some(all) = holders(&cur.body) else {
                    // Not a lease strata can read: taken over once it stayed the same a
                    // whole TTL.
                    if seen.unreadable_for(&cur.etag) < me.ttl() {
                        waited(me, &waiting, t0, poll, || {
                            in_use(backend, me, &[], me.ttl())
                        })?;
                        continue;
                    }
                    let written = backend.update(key, &body(std::slice::from_ref(me)), &cur.etag);
                    if let Ok(Some(_)) = written {
                        (waiting.warn)(takeover_notice(backend, me, None, me.ttl()));
                    }
                    match written {
                        Ok(Some(_)) => return Ok(sent),
                        Ok(None) => continue,
                        Err(e) => return Err(e),
                    }
                };
                // A write of ours whose answer was lost: ours.
                if all
                    .iter()
                    .any(|h| me.own_write(h, std::slice::from_ref(&me.write)))
                {
                    return Ok(sent);
                }
                let (gone, live): (Vec<Holder>, Vec<Holder>) =
                    all.into_iter().partition(|h| seen.still_for(h) >= h.ttl());
                let blocking: Vec<&Holder> = live.iter().filter(|h| me.overlaps(h)).collect();
                if !blocking.is_empty() {
                    let ttl = blocking.iter().map(|h| h.ttl()).max().unwrap_or(me.ttl());
                    let first = blocking[0].clone();
                    waited(me, &waiting, t0, poll, || {
                        in_use(backend, me, std::slice::from_ref(&first), ttl)
                    })?;
                    continue;
                }
                let mut next = live;
                next.push(me.clone());
                let written = backend.update(key, &body(&next), &cur.etag);
                if let Ok(Some(_)) = written {
                    for g in gone.iter().filter(|g| me.overlaps(g)) {
                        (waiting.warn)(takeover_notice(backend, me, Some(g), g.ttl()));
                    }
                }
                written
            }
        };
        match written {
            Ok(Some(_)) => return Ok(sent),
            Ok(None) => {}
            Err(e) => {
                failures += 1;
                if failures >= 3 {
                    return Err(e);
                }
            }
        }
    }
}

/// One pause of the waiting loop: the refusal `refused` once `--lock-timeout` has
/// passed, a stop when a signal came.
fn waited(
    me: &Holder,
    waiting: &Waiting,
    t0: Duration,
    poll: Duration,
    refused: impl FnOnce() -> Error,
) -> Result<()> {
    let waited = now().saturating_sub(t0);
    if waited >= waiting.timeout {
        return Err(refused());
    }
    if let Some(sig) = (waiting.stop)() {
        return Err(crate::error::stopped_before_start(
            sig,
            &format!("while waiting for the lease of stack `{}`", me.stack),
        ));
    }
    std::thread::sleep(poll.min(waiting.timeout.saturating_sub(waited)));
    Ok(())
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

/// The refusal when another run holds the lease for a project this run wants: who,
/// where, since when, which projects both want, and how to free it.
fn in_use(backend: &Backend, me: &Holder, holders: &[Holder], ttl: Duration) -> Error {
    let stack = &me.stack;
    let who = holders.first().map_or_else(
        || format!("a lease strata cannot read ({})", key(backend, stack)),
        |h| format!("{} {}", h.describe(), me.overlap_with(h)),
    );
    let wait = (ttl * 2).as_secs().max(1);
    Error::config(format!(
        "stack `{stack}` is in use: {who} holds its lease in the Pulumi backend {}.\n  Wait for it to finish, or wait for it with `--lock-timeout 30m`. Runs on projects that do not overlap go at once. If that run is gone (killed, its machine off), its lease expires {}s after its last renewal: `--lock-timeout {wait}s` takes it over then, and `strata unlock -s {stack}` frees it now.",
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
    /// When the last write that went through was sent.
    renewed: Duration,
    lost: Box<dyn Fn(String) + Send>,
}

impl Lease {
    fn keep(
        backend: Arc<Backend>,
        key: String,
        me: Holder,
        sent: Duration,
        lost: Box<dyn Fn(String) + Send>,
    ) -> Result<Lease> {
        let (tx, rx) = mpsc::channel();
        let kept = Kept {
            backend,
            key,
            me,
            renewed: sent,
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

    /// Writes this run's part of the lease again (renewed), or takes it out (`release`),
    /// reading the lease first: other runs renew their parts of the same object, and a
    /// write of ours whose answer was lost (a timeout the store applied all the same) is
    /// found as ours. `Ok(false)` when this run's part is gone (taken over, or freed by
    /// `strata unlock`).
    fn write(&mut self, release: bool) -> Result<bool> {
        let mut last = None;
        for _ in 0..8 {
            let Some(cur) = self.backend.get(&self.key)? else {
                return Ok(release);
            };
            let Some(mut all) = holders(&cur.body) else {
                return Ok(release);
            };
            let Some(at) = all.iter().position(|h| self.me.same_holder(h)) else {
                return Ok(release);
            };
            let sent = now();
            if release {
                all.remove(at);
            } else {
                self.me.renewals = all[at].renewals + 1;
                self.me.renewed_at = crate::util::rfc3339(crate::util::now_ms());
                self.me.write = token();
                all[at] = self.me.clone();
            }
            match self.backend.update(&self.key, &body(&all), &cur.etag) {
                Ok(Some(_)) => {
                    self.renewed = sent;
                    return Ok(true);
                }
                // Another run wrote its part meanwhile: read again.
                Ok(None) => {}
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            Error::failed(format!(
                "the lease of stack `{}` changed under every write: too many runs renewing at once",
                self.me.stack
            ))
        }))
    }

    fn taken(self) {
        let by = read(&self.backend, &self.me.stack)
            .ok()
            .flatten()
            .and_then(|f| f.holders.into_iter().find(|h| self.me.overlaps(h)))
            .map_or(
                "`strata unlock`, or a run that took it over,".to_string(),
                |h| h.describe(),
            );
        (self.lost)(format!(
            "the lease of stack `{}` in {} was taken by {by} while this run held it (this run's renewals had stopped for a whole lease, or it was freed). Cancelling this run.",
            self.me.stack, self.backend.name
        ))
    }

    /// Takes this run's part out of the lease, if it is still there; a write whose
    /// answer was lost is tried again.
    fn release(mut self) {
        let done = self.write(true).or_else(|_| self.write(true));
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
/// confirmed): every holder shown taken out. `Ok(false)` when it changed meanwhile.
pub fn free(backend: &Backend, stack: &str, found: &Found) -> Result<bool> {
    Ok(backend
        .update(&key(backend, stack), &body(&[]), &found.etag)?
        .is_some())
}

/// The key of `stack`'s lease in `backend`.
pub fn key(backend: &Backend, stack: &str) -> String {
    backend.key(&format!(".strata/locks/{stack}.json"))
}
