//! Running one project: the `Engine` trait, the Pulumi CLI engine, the command-project
//! engine, child-process control and Pulumi event parsing.

pub mod command;
mod descendants;
pub mod digest;
pub mod events;
pub mod process;
pub mod pulumi;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::{Map, Value};

pub use process::Control;

/// The operation strata runs on every selected project.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Up,
    Preview,
    Refresh,
    Destroy,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Up => "up",
            Operation::Preview => "preview",
            Operation::Refresh => "refresh",
            Operation::Destroy => "destroy",
        }
    }
}

/// Everything an engine needs to run one project once.
#[derive(Debug, Clone)]
pub struct Job {
    /// The project path (as in the profile).
    pub path: String,
    /// The Pulumi project name (or the command project's name).
    pub name: String,
    pub dir: PathBuf,
    pub op: Operation,
    pub stack: String,
    /// The complete child environment.
    pub env: BTreeMap<String, String>,
    /// The stack config file handed to Pulumi (`--config-file`).
    pub config_file: PathBuf,
    /// Values wired from upstream outputs (`inputs:`), by config key.
    pub inputs: BTreeMap<String, Value>,
    /// Outputs that a dependent or a hook will read; a secret among them is fetched.
    pub needed_outputs: Vec<String>,
    /// A scratch folder for this project's files (outputs, inputs).
    pub scratch_dir: PathBuf,
    /// Config values to set as Pulumi secrets in `config_file` before the operation
    /// (piped through stdin, never on a command line).
    pub secret_config: BTreeMap<String, String>,
    /// `preview --refresh`: refresh the stack's state before previewing (drift).
    pub refresh: bool,
    /// A Pulumi update plan: written by a preview, or the one an `up` is held to.
    pub plan: Option<PlanFile>,
}

#[cfg(test)]
impl Job {
    /// A job for unit tests: `up` of project `path` (named `name`) on stack `dev`, in
    /// `/tmp`, with no environment, inputs or secrets; a test sets what it is about.
    pub fn for_tests(path: &str, name: &str) -> Job {
        Job {
            path: path.into(),
            name: name.into(),
            dir: "/tmp".into(),
            op: Operation::Up,
            stack: "dev".into(),
            env: BTreeMap::new(),
            config_file: "/tmp/c.yaml".into(),
            inputs: BTreeMap::new(),
            needed_outputs: vec![],
            scratch_dir: "/tmp".into(),
            secret_config: BTreeMap::new(),
            refresh: false,
            plan: None,
        }
    }
}

/// A Pulumi update plan file (`preview --save-plan`, `up --plan`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanFile {
    /// A preview writes the plan here.
    Save(PathBuf),
    /// The `up` may do only what this plan recorded.
    Apply(PathBuf),
}

/// What an engine reports while it runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// A line of the child's output, raw (for the log).
    Raw(String),
    /// A line for people (a rendered engine event or a plain output line).
    Line(String),
    /// A Pulumi debug diagnostic, rendered: for people only with `-v` (the log has the
    /// raw event in any case).
    Debug(String),
    /// Resource counts and the current step.
    Resources {
        done: usize,
        started: usize,
        current: Option<String>,
    },
}

/// A successful run.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    pub outputs: Map<String, Value>,
    /// Names of outputs that Pulumi marks secret.
    pub secret_outputs: std::collections::BTreeSet<String>,
    /// A short line for the summary ("3 created, 1 updated").
    pub summary: String,
    /// How many CLI processes this project started.
    pub processes: u32,
    /// A Pulumi preview's change summary and changed resources.
    pub changes: Option<digest::Changes>,
    /// A Pulumi preview that saved a plan: the stack outputs it already knows.
    pub planned_outputs: Option<Map<String, Value>>,
}

/// A failed or cancelled run.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    Failed {
        message: String,
        exit_code: Option<i32>,
        processes: u32,
    },
    Cancelled {
        message: String,
        processes: u32,
    },
}

impl Failure {
    /// Pulumi said the stack does not exist: exit 6 (the engine records an older CLI's
    /// missing-stack answer as 6 too). Never decided from the message text.
    pub fn is_missing_stack(&self) -> bool {
        matches!(
            self,
            Failure::Failed {
                exit_code: Some(6),
                ..
            }
        )
    }

    pub fn message(&self) -> &str {
        match self {
            Failure::Failed { message, .. } | Failure::Cancelled { message, .. } => message,
        }
    }
}

/// Runs one project. The Pulumi and command engines implement it; tests use others.
pub trait Engine: Send + Sync {
    fn run(
        &self,
        job: &Job,
        control: &Control,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Outcome, Failure>;
}

/// Pulumi's secret signature key and value (`sdk/go/common/resource/sig`).
pub const SECRET_SIG_KEY: &str = "4dabf18193072939515e22adb298388d";
pub const SECRET_SIG: &str = "1b47061264138c4ac30d75fd1eb44270";

/// True when `v` (or anything inside it) is a secret Pulumi did not show: the string
/// `[secret]` (`pulumi stack output --json`), or a value carrying the secret signature
/// (`{"4dabf…": "1b47…", "ciphertext": "[secret]"}`, as JSON engine events serialize
/// secret outputs).
pub fn contains_secret_mask(v: &Value) -> bool {
    match v {
        Value::String(s) => s == "[secret]",
        Value::Array(a) => a.iter().any(contains_secret_mask),
        Value::Object(o) => {
            o.get(SECRET_SIG_KEY).and_then(Value::as_str) == Some(SECRET_SIG)
                || o.values().any(contains_secret_mask)
        }
        _ => false,
    }
}
