//! The one error type of strata and the exit codes it maps to; how a run a signal
//! stopped says so.

use std::fmt;

use signal_hook::consts::{SIGHUP, SIGTERM};

/// Exit codes, as documented in DESIGN.md and the book (docs/book/src/commands.md).
pub mod exit {
    pub const OK: i32 = 0;
    pub const FAILED: i32 = 1;
    pub const USAGE: i32 = 2;
    pub const CONFIG: i32 = 3;
    /// `preview --expect-no-changes` found changes.
    pub const CHANGES: i32 = 4;
    /// A `policy:` rule denied what a project's preview planned (`preview`: it would be
    /// denied; `up`: it was not updated).
    pub const DENIED: i32 = 5;
    /// `up` stopped a project at an `approve:` rule's gate (and nothing failed or was
    /// denied, which take precedence): `strata approve` it, then `up` again.
    pub const AWAITING: i32 = 6;
    pub const INTERRUPTED: i32 = 130;
}

/// What went wrong, which decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A project, a hook or an I/O step failed (exit 1).
    Failed,
    /// The command line was wrong (exit 2).
    Usage,
    /// A file, a setting or an input is invalid or missing (exit 3).
    Config,
    /// A prompt was aborted (exit 130, as for Ctrl-C).
    Interrupted,
    /// The run was stopped by this signal, after its graceful shutdown (exit 128+n:
    /// 130 SIGINT, 143 SIGTERM, 129 SIGHUP).
    Signal(i32),
}

/// An error for people: the message says what is wrong, where, and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    pub kind: Kind,
    pub message: String,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Self {
        Error {
            kind,
            message: message.into(),
        }
    }
    pub fn config(message: impl Into<String>) -> Self {
        Self::new(Kind::Config, message)
    }
    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Kind::Usage, message)
    }
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(Kind::Failed, message)
    }
    pub fn interrupted(message: impl Into<String>) -> Self {
        Self::new(Kind::Interrupted, message)
    }
    /// A run stopped by signal `sig` after its graceful shutdown.
    pub fn signal(sig: i32, message: impl Into<String>) -> Self {
        Self::new(Kind::Signal(sig), message)
    }

    /// A prompt that could not be answered (Ctrl-C at a question, a closed terminal).
    pub fn prompt(err: dialoguer::Error) -> Self {
        Self::interrupted(format!("prompt aborted: {err}"))
    }

    /// An I/O failure on `path`, while doing `what` ("read", "write", ...).
    pub fn io(what: &str, path: &std::path::Path, err: std::io::Error) -> Self {
        Self::failed(format!(
            "could not {what} {}: {err}",
            crate::util::display_path(path)
        ))
    }

    pub fn exit_code(&self) -> i32 {
        match self.kind {
            Kind::Failed => exit::FAILED,
            Kind::Usage => exit::USAGE,
            Kind::Config => exit::CONFIG,
            Kind::Interrupted => exit::INTERRUPTED,
            Kind::Signal(sig) => 128 + sig,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// How a run that a signal stopped says so: "stopped by SIGTERM", ...
pub fn stopped_by(sig: i32) -> &'static str {
    match sig {
        SIGTERM => "stopped by SIGTERM",
        SIGHUP => "stopped by SIGHUP (the terminal closed)",
        _ => "interrupted",
    }
}

/// A run stopped by `sig` before any project started (exit 128+n).
pub fn stopped_before_start(sig: i32, stage: &str) -> Error {
    Error::signal(
        sig,
        format!(
            "{} {stage}: no project ran, and the stack lock is released.",
            capitalized(stopped_by(sig))
        ),
    )
}

fn capitalized(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

#[cfg(test)]
impl Error {
    /// Asserts that the message says `part`; a failure shows the whole message.
    #[track_caller]
    pub fn assert_says(&self, part: &str) {
        assert!(
            self.message.contains(part),
            "{part:?} is not in: {}",
            self.message
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_map_to_documented_exit_codes() {
        assert_eq!(Error::failed("x").exit_code(), 1);
        assert_eq!(Error::usage("x").exit_code(), 2);
        assert_eq!(Error::config("x").exit_code(), 3);
        assert_eq!(Error::interrupted("x").exit_code(), 130);
        assert_eq!(Error::signal(libc::SIGINT, "x").exit_code(), 130);
        assert_eq!(Error::signal(libc::SIGTERM, "x").exit_code(), 143);
        assert_eq!(Error::signal(libc::SIGHUP, "x").exit_code(), 129);
    }
}
