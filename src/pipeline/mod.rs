//! The stages of one run, in the order every `up`, `preview`, `refresh` and `destroy`
//! goes through them: resolve (read only) → preflight → ask → lock → write → execute →
//! record. Nothing is written before `lock`; `validate` is resolve + preflight.

pub mod ask;
pub mod bundle;
pub mod env;
pub mod execute;
pub mod lock;
pub mod orphans;
pub mod preflight;
pub mod record;
pub mod resolve;
pub mod write;

use std::path::PathBuf;

use crate::engine::Operation;

/// What the user asked of a run.
#[derive(Debug, Clone)]
pub struct Request {
    pub op: Operation,
    pub args: RunOptions,
    pub resume: bool,
    pub changed: bool,
    /// `up --force-conflicts`: the secrets step applies with force.
    pub force_conflicts: bool,
    /// `preview` only.
    pub preview: PreviewOptions,
    /// `up --plan`: the plan bundle to apply.
    pub plan: Option<PathBuf>,
    /// The `up` a terminal user said yes to (its own bundle): the projects its preview
    /// could not preview (`blocked` behind a project not yet deployed, as its table
    /// showed) are brought up without a plan; `up --plan` refuses them.
    pub unbound_blocked: bool,
    /// `destroy --orphans`: the projects the profile lost, not its own.
    pub orphans: bool,
    /// `destroy --override-deny`: destroy projects whose rules deny deletes too.
    pub override_deny: bool,
}

/// Which projects a run takes and how it runs them (`--filter`, `-j`, …).
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Which projects (`--filter`, `--project`, `--with-deps`, `--from`); empty: all.
    pub selector: crate::plan::select::Selector,
    /// Projects at once.
    pub parallel: u16,
    /// After a failure, still run what does not depend on it.
    pub keep_going: bool,
    /// Confirmation given in advance (destroy).
    pub yes: bool,
    /// How long to wait for the stack's lease in a shared backend (`--lock-timeout`).
    pub lock_timeout: std::time::Duration,
}

/// What a preview is asked to do beyond previewing.
#[derive(Debug, Clone, Default)]
pub struct PreviewOptions {
    /// Exit 4 when any project would change.
    pub expect_no_changes: bool,
    /// Refresh each stack's state before its preview.
    pub refresh: bool,
    /// Where to write the Markdown summary.
    pub summary_file: Option<PathBuf>,
    /// `--save-plan`: where to write a plan bundle.
    pub save_plan: Option<PathBuf>,
    /// The preview of an `up` on a terminal, whose bundle that `up` applies on "yes".
    pub for_up: bool,
}
