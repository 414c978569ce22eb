//! A step's part in output contracts (`gates::contracts`): whether others read its
//! project's outputs (its preview then saves its plan), and the reads the update its
//! preview saved would break, said as the step goes.

use std::path::Path;

use super::StepRunner;
use crate::engine::digest;
use crate::engine::{Job, Progress};
use crate::gates::contracts::breaks;

impl StepRunner<'_> {
    /// Whether other projects read `path`'s outputs (its preview then saves its plan,
    /// for [`StepRunner::broken_reads`]).
    pub(super) fn is_read(&self, path: &str) -> bool {
        self.ctx.readers.get(path).is_some_and(|r| !r.is_empty())
    }

    /// The reads of `job`'s project's outputs that the update its preview saved at
    /// `plan` would break, each said for people (also to `sink`). None when no project
    /// reads it, the plan holds no stack outputs, or its deployed outputs cannot be
    /// read from its checkpoint (never deployed: nothing reads it yet; or a backend
    /// strata does not read).
    pub(super) fn broken_reads(
        &self,
        job: &Job,
        plan: &Path,
        sink: &mut dyn FnMut(Progress),
    ) -> Vec<String> {
        let Some(reads) = self.ctx.readers.get(&job.path).filter(|r| !r.is_empty()) else {
            return Vec::new();
        };
        let planned = std::fs::read_to_string(plan)
            .ok()
            .and_then(|t| digest::planned_output_values(&t));
        let now = crate::engine::pulumi::PulumiEngine::stack_outputs_from_checkpoint(job);
        let (Some(planned), Some(now)) = (planned, now) else {
            return Vec::new();
        };
        let broken = breaks(reads, &planned, &now);
        for b in &broken {
            sink(Progress::Line(format!("would break a read: {b}")));
        }
        broken
    }
}
