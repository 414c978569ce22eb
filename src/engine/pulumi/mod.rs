//! The Pulumi engine: one project through the real `pulumi` CLI (duct). One process per
//! project in the steady state: `up --json` streams events that carry the outputs;
//! `stack init` only for a new stack, `stack output --show-secrets` only for a needed
//! secret output that `passphrase` cannot decrypt. The steps of one operation are
//! `operation`'s; a failure put into words is
//! `failure`'s; what is read from a `file://` or `s3://` backend (`source`) without a
//! process is `checkpoint`'s, the layouts strata refuses `layout`'s, and which Pulumi
//! locks strata may clear `locks`'.

mod checkpoint;
mod failure;
mod invoke;
mod layout;
mod locks;
mod operation;
pub mod otel;
mod passphrase;
mod preview;
mod scratch;
mod source;
mod stack;

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::descendants;
use super::digest::{self, Changes};
use super::events::EventState;
use super::process::{Captured, Control, Exit, Stream, run_captured, run_streaming_tagged};
use super::{Engine, Failure, Job, Operation, Outcome, Progress};
pub use checkpoint::{
    checkpoint_passphrase_salt, checkpoint_resources_and_outputs, checkpoint_stack_missing,
    checkpoint_written_at,
};
use failure::{call_failed, cancel_command, failure};
pub use invoke::Calls;
use invoke::{Seen, stack_arg};
pub use layout::layout_problem;
pub use passphrase::{Encrypter, config_encrypter};
use preview::{plan_errors, preview_changes};
pub use source::{shared_call, shared_where};

pub struct PulumiEngine {
    pub binary: PathBuf,
    /// A traced run's OTLP traces URL, when this CLI takes `--otel-traces`: every call
    /// of a traced step passes it, so Pulumi's spans nest under the step's.
    pub otel_traces: Option<String>,
}

impl PulumiEngine {
    pub fn new(binary: PathBuf) -> PulumiEngine {
        PulumiEngine {
            binary,
            otel_traces: None,
        }
    }
}

impl Engine for PulumiEngine {
    /// One operation of one project (`operation` holds its steps): the stack made ready,
    /// the Pulumi call (the stack created when Pulumi says it is missing), then what the
    /// call changed and left.
    fn run(
        &self,
        job: &Job,
        control: &Control,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Outcome, Failure> {
        let mut calls = Calls {
            job,
            control,
            report,
            procs: 0,
            created_stack: false,
        };
        self.prepare_stack(&mut calls)?;
        let Some((exit, mut seen)) = self.operate(&mut calls)? else {
            return Ok(Outcome {
                summary: "no stack: nothing to do".into(),
                processes: calls.procs,
                ..Outcome::default()
            });
        };
        let changes = match job.op {
            Operation::Preview => preview_changes(&mut seen, calls.report),
            _ => None,
        };
        if operation::held_to_plan(job) {
            plan_errors(&mut seen, &exit);
        }
        if !exit.success() {
            let procs = calls.procs;
            return Err(failure(job, job.op.as_str(), &exit, &seen, control, procs));
        }
        self.outcome(&mut calls, seen, changes)
    }
}

#[cfg(test)]
mod backend_tests;
#[cfg(test)]
mod bucket_tests;
#[cfg(test)]
mod tests;
