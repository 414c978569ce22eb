//! The stages of one run, in the order every `up`, `preview`, `refresh` and `destroy`
//! goes through them: resolve (read only) → preflight → ask → lock → write → execute →
//! record. Nothing is written before `lock`; `validate` is resolve + preflight.

pub mod ask;
pub mod env;
pub mod execute;
pub mod lock;
pub mod preflight;
pub mod record;
pub mod resolve;
pub mod write;

use crate::cli::{PreviewOptions, RunArgs};
use crate::engine::Operation;

/// What the user asked of a run.
#[derive(Debug, Clone)]
pub struct Request {
    pub op: Operation,
    pub args: RunArgs,
    pub resume: bool,
    pub changed: bool,
    /// `up --force-conflicts`: the secrets step applies with force.
    pub force_conflicts: bool,
    /// `preview` only.
    pub preview: PreviewOptions,
}
