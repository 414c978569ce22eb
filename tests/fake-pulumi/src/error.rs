//! The one error type: what goes to stderr and the exit code the real CLI would use.

use std::fmt;

/// Exit codes of the Pulumi CLI (3.226.1 and later, `pkg/cmd/pulumi/cmd/exit_codes.go`).
pub mod code {
    pub const OK: i32 = 0;
    pub const ERROR: i32 = 1;
    pub const CONFIG: i32 = 2;
    pub const AUTH: i32 = 3;
    pub const STACK_NOT_FOUND: i32 = 6;
    pub const CANCELLED: i32 = 8;
    pub const INTERNAL: i32 = 255;
}

/// A failed command. An empty message is a "bail": the reason was already shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fail {
    pub code: i32,
    pub msg: String,
}

pub type Result<T> = std::result::Result<T, Fail>;

impl Fail {
    pub fn new(code: i32, msg: impl Into<String>) -> Self {
        Fail {
            code,
            msg: msg.into(),
        }
    }

    /// A generic error (exit 1).
    pub fn error(msg: impl Into<String>) -> Self {
        Self::new(code::ERROR, msg)
    }

    /// A configuration or invocation error (exit 2).
    pub fn config(msg: impl Into<String>) -> Self {
        Self::new(code::CONFIG, msg)
    }

    /// The reason was already printed; only the exit code is left to give.
    pub fn bail(code: i32) -> Self {
        Self::new(code, "")
    }

    pub fn stack_not_found(stack: &str) -> Self {
        Self::new(
            code::STACK_NOT_FOUND,
            format!("no stack named '{stack}' found"),
        )
    }

    /// An I/O failure on a path (exit 255, as an internal error).
    pub fn io(what: &str, path: &std::path::Path, err: std::io::Error) -> Self {
        Self::new(code::INTERNAL, format!("{what} {}: {err}", path.display()))
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (exit {})", self.msg, self.code)
    }
}
