//! `FAKE_PULUMI_LOG`: one JSON line per invocation start, end and signal, appended with
//! O_APPEND and a single write per line so parallel processes never interleave.

use serde_json::{Map, Value, json};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Mutex;

use crate::clock::now_ms;

/// Environment variables always copied into the log.
const ENV_KEYS: &[&str] = &[
    "STRATA_STACK",
    "STRATA_PROVIDER",
    "STRATA_INFRA_TYPE",
    "STRATA_ORG",
    "PULUMI_BACKEND_URL",
    "PULUMI_SKIP_UPDATE_CHECK",
];

struct State {
    path: Option<String>,
    /// The fields repeated on the start and end lines.
    base: Map<String, Value>,
    signals: Vec<String>,
    ended: bool,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn with<R>(f: impl FnOnce(&mut State) -> R) -> Option<R> {
    let mut g = STATE.lock().unwrap_or_else(|p| p.into_inner());
    g.as_mut().map(f)
}

fn append(path: &Option<String>, line: &Value) {
    let Some(path) = path else { return };
    let mut text = line.to_string();
    text.push('\n');
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o644)
        .open(path);
    if let Ok(mut f) = file {
        let _ = f.write_all(text.as_bytes());
    }
}

/// What the start line says about this invocation.
pub struct Invocation {
    pub argv: Vec<String>,
    pub cwd: String,
    pub project: Option<String>,
    pub stack: Option<String>,
    pub command: String,
    pub config: Value,
}

/// Records the invocation and writes the start line.
pub fn start(inv: Invocation) {
    let path = std::env::var("FAKE_PULUMI_LOG")
        .ok()
        .filter(|p| !p.is_empty());
    let pid = std::process::id();
    // SAFETY: getpgrp has no preconditions and cannot fail.
    let pgid = unsafe { libc::getpgrp() };
    let mut env = Map::new();
    let extra = std::env::var("FAKE_PULUMI_LOG_ENV").unwrap_or_default();
    let names = ENV_KEYS.iter().map(|s| s.to_string()).chain(
        extra
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
    );
    for name in names {
        if let Ok(v) = std::env::var(&name) {
            env.insert(name, Value::String(v));
        }
    }
    let base = json!({
        "pid": pid,
        "pgid": pgid,
        "own_pgroup": pgid as u32 == pid,
        "argv": inv.argv,
        "cwd": inv.cwd,
        "project": inv.project,
        "stack": inv.stack,
        "command": inv.command,
        "stdin": stdin_kind(),
        "config": inv.config,
        "env": env,
    });
    let base = base.as_object().cloned().unwrap_or_default();
    let mut line = Map::new();
    line.insert("event".into(), "start".into());
    line.extend(base.clone());
    line.insert("time_ms".into(), json!(now_ms()));
    append(&path, &Value::Object(line));
    *STATE.lock().unwrap_or_else(|p| p.into_inner()) = Some(State {
        path,
        base,
        signals: Vec::new(),
        ended: false,
    });
}

/// Records a received signal (called from the signal watcher, never from the handler).
pub fn signal(name: &str) {
    with(|s| {
        s.signals.push(name.to_string());
        let line = json!({
            "event": "signal",
            "pid": std::process::id(),
            "signal": name,
            "time_ms": now_ms(),
        });
        append(&s.path, &line);
    });
}

/// Writes the end line, once.
pub fn end(exit_code: i32, config: Option<Value>) {
    with(|s| {
        if s.ended {
            return;
        }
        s.ended = true;
        let mut line = Map::new();
        line.insert("event".into(), "end".into());
        line.extend(s.base.clone());
        if let Some(c) = config {
            line.insert("config".into(), c);
        }
        line.insert("time_ms".into(), json!(now_ms()));
        line.insert("exit_code".into(), json!(exit_code));
        line.insert("signals".into(), json!(s.signals));
        append(&s.path, &Value::Object(line));
    });
}

/// What fd 0 is: null, closed, tty, pipe, file or other.
pub fn stdin_kind() -> &'static str {
    // SAFETY: fstat on fd 0 with a zeroed stat buffer we own.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        if libc::fstat(0, &mut st) != 0 {
            return "closed";
        }
        if libc::isatty(0) == 1 {
            return "tty";
        }
        match st.st_mode & libc::S_IFMT {
            libc::S_IFIFO | libc::S_IFSOCK => "pipe",
            libc::S_IFREG => "file",
            libc::S_IFCHR => {
                let mut null: libc::stat = std::mem::zeroed();
                let p = c"/dev/null";
                if libc::stat(p.as_ptr(), &mut null) == 0 && null.st_rdev == st.st_rdev {
                    "null"
                } else {
                    "other"
                }
            }
            _ => "other",
        }
    }
}
