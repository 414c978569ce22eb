//! Everything the fake prints: JSON engine events (one object per line, numbered) or
//! human text on stdout, and `error:` lines on stderr.

use serde_json::{Value, json};
use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static JSON: AtomicBool = AtomicBool::new(false);
/// A preview digest is being collected: CLI messages are kept for it, not printed.
static DIGEST: AtomicBool = AtomicBool::new(false);
static KEPT: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// The next event's sequence number; the lock also keeps lines whole across threads.
static SEQ: Mutex<u64> = Mutex::new(0);

/// Engine events go out as JSON (no human text) from now on.
pub fn set_json(on: bool) {
    JSON.store(on, Ordering::SeqCst);
}

/// While on, CLI messages are kept for the preview digest instead of printed.
pub fn set_digest(on: bool) {
    DIGEST.store(on, Ordering::SeqCst);
}

/// The CLI messages kept for the digest since the last call.
pub fn take_kept() -> Vec<String> {
    std::mem::take(&mut *KEPT.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Each engine pass numbers its events from 0.
pub fn reset_sequence() {
    *SEQ.lock().unwrap_or_else(|p| p.into_inner()) = 0;
}

pub fn json_mode() -> bool {
    JSON.load(Ordering::SeqCst)
}

fn write_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    // A closed stdout (broken pipe) is not the fake's problem.
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// One engine event: `{"sequence":N,"timestamp":T,"<kind>":<body>}`.
pub fn event(kind: &str, body: Value) {
    let mut seq = SEQ.lock().unwrap_or_else(|p| p.into_inner());
    let ts = crate::clock::now_ms() / 1000;
    let line = format!(
        "{{\"sequence\":{},\"timestamp\":{},{}:{}}}\n",
        *seq,
        ts,
        Value::String(kind.to_string()),
        body
    );
    *seq += 1;
    write_stdout(&line);
}

/// Human text on stdout (nothing in JSON mode).
pub fn text(s: &str) {
    if json_mode() {
        return;
    }
    let _g = SEQ.lock().unwrap_or_else(|p| p.into_inner());
    write_stdout(s);
}

/// Text on stdout whatever the mode (stack output, config, whoami ...).
pub fn print(s: &str) {
    let _g = SEQ.lock().unwrap_or_else(|p| p.into_inner());
    write_stdout(s);
}

/// A message from the CLI during an operation: a `stdoutEvent` in JSON mode, text otherwise.
pub fn stdout_message(msg: &str) {
    if DIGEST.load(Ordering::SeqCst) {
        KEPT.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(msg.to_string());
    } else if json_mode() {
        event("stdoutEvent", json!({"message": msg, "color": "never"}));
    } else {
        let mut s = msg.to_string();
        if !s.ends_with('\n') {
            s.push('\n');
        }
        text(&s);
    }
}

/// `error: <msg>` on stderr.
pub fn error(msg: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "error: {msg}");
}
