//! Why a kubeconfig could not be merged, in words that never quote a kubeconfig's
//! contents (they hold credentials).

use std::io;
use std::path::PathBuf;

/// Why the kubeconfig could not be merged.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    #[error(
        "the kubeconfig to merge is empty; check that the project's output named in the \
         `kubeconfig` hook holds a kubeconfig"
    )]
    Empty,

    #[error(
        "the kubeconfig to merge is neither YAML nor base64 of YAML ({detail}); check the \
         project's output named in the `kubeconfig` hook"
    )]
    InvalidNew { detail: String },

    #[error("the kubeconfig to merge is invalid: {problem}; check the project's output")]
    BadNew { problem: String },

    #[error(
        "cannot merge into the kubeconfig {}: it is not valid YAML ({detail}); fix or move it \
         away and run again",
        path.display()
    )]
    InvalidTarget { path: PathBuf, detail: String },

    #[error(
        "cannot merge into the kubeconfig {}: {problem}; fix or move it away and run again",
        path.display()
    )]
    BadTarget { path: PathBuf, problem: String },

    #[error(
        "cannot lock the kubeconfig {}: {}.lock has been held for {}s; if no kubectl or strata is writing it, remove the lock file",
        path.display(),
        path.display(),
        waited
    )]
    Locked { path: PathBuf, waited: u64 },

    #[error("cannot read the kubeconfig {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "cannot write the kubeconfig {}: {source}; check that its directory is writable, or set \
         KUBECONFIG to another file",
        path.display()
    )]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// The position and kind of a YAML error, without quoting the input.
pub(super) fn yaml_error(error: &serde_yaml::Error) -> String {
    match error.location() {
        Some(at) => format!("YAML error at line {}, column {}", at.line(), at.column()),
        None => "YAML error".to_string(),
    }
}
