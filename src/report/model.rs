//! The run model a report draws: one run of the journal as steps with their waves, start
//! and end, `needs` edges (from the plan, else from timing), the critical path and the
//! totals (`build` makes it). Renderers read it; nothing here writes text for people.

use std::collections::BTreeMap;
use std::sync::Arc;

pub use super::pools::PoolChange;

/// Where the graph of a report comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Graph {
    /// The profile still resolves: waves and `needs` edges are the plan's.
    Plan,
    /// It does not (the reason): projects in start order, the critical path from timing.
    Timing(String),
}

/// A failed try of a project that was run again (`retry:`).
#[derive(Debug, Clone)]
pub struct Retry {
    /// The try that followed.
    pub attempt: u32,
    /// When the failed try ended, from the start of the run.
    pub at_ms: u64,
    pub delay_ms: u64,
    pub reason: String,
    /// Its journal line, as written.
    pub(super) record: Arc<str>,
}

/// One project (or built-in step) of the run.
#[derive(Debug, Clone)]
pub struct Step {
    pub path: String,
    /// As recorded (`succeeded`, `failed`, `skipped`, `cancelled`, `blocked`), or
    /// `not recorded` when the run stopped before it recorded this step.
    pub status: String,
    /// 1-based; 0 when the graph is not known.
    pub wave: usize,
    /// From the start of the run.
    pub start_ms: u64,
    pub duration_ms: u64,
    pub exit_code: Option<i32>,
    pub message: Option<String>,
    /// The log, as recorded (relative to the workspace root).
    pub log: Option<String>,
    /// A preview's change counts (`create`, `update`, ...), `same` left out.
    pub changes: Vec<(String, u64)>,
    pub retries: Vec<Retry>,
    /// Indices (into `Report::steps`) of the steps it needs, when the graph is known.
    pub needs: Vec<usize>,
    pub critical: bool,
    /// The last lines of the log of a failure.
    pub tail: Vec<String>,
    /// Why the tail is missing, when it is.
    pub tail_note: Option<String>,
    /// Its journal line, as written (shared with the journal read: not copied).
    pub(super) record: Option<Arc<str>>,
}

impl Step {
    pub fn end_ms(&self) -> u64 {
        self.start_ms.saturating_add(self.duration_ms)
    }

    pub fn recorded(&self) -> bool {
        self.record.is_some()
    }

    /// The status class: what colour the step is drawn in.
    pub fn kind(&self) -> &'static str {
        status_kind(&self.status)
    }
}

/// The class of a status: one of `succeeded failed cancelled skipped blocked denied
/// awaiting unknown`.
pub fn status_kind(status: &str) -> &'static str {
    match status {
        "succeeded" => "succeeded",
        "failed" => "failed",
        "cancelled" => "cancelled",
        "skipped" => "skipped",
        "blocked" => "blocked",
        "denied" => "denied",
        "awaiting" => "awaiting",
        _ => "unknown",
    }
}

/// Wall time, the sum of the projects' times, and the critical path's.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub wall_ms: u64,
    pub sum_ms: u64,
    pub critical_ms: u64,
    /// How many steps ended with each status.
    pub counts: BTreeMap<String, usize>,
}

impl Totals {
    /// The parallelism achieved: the sum of the projects' times over the wall time.
    pub fn parallelism(&self) -> Option<f64> {
        (self.wall_ms > 0).then(|| self.sum_ms as f64 / self.wall_ms as f64)
    }
}

/// One run, ready to draw.
#[derive(Debug, Clone)]
pub struct Report {
    pub run_id: String,
    pub operation: String,
    pub provider: String,
    pub stack: String,
    pub command: String,
    pub started_at: String,
    /// `succeeded`, `failed`, `cancelled`, or `incomplete` (a step has no record).
    pub status: &'static str,
    /// Epoch milliseconds of the report's time 0 (the start of the run).
    pub origin_ms: u64,
    /// In drawing order: by wave, then by start time.
    pub steps: Vec<Step>,
    pub graph: Graph,
    /// The critical path (indices into `steps`), first step first.
    pub critical: Vec<usize>,
    pub totals: Totals,
    /// Each change of a pool's limit, in the order they happened.
    pub pool_changes: Vec<PoolChange>,
    pub journal: String,
    /// The run's journal line, as written.
    pub(super) run_record: Option<Arc<str>>,
}

impl Report {
    /// The steps of each wave (indices into `steps`), in order; one group with wave 0
    /// when the graph is not known.
    pub fn groups(&self) -> Vec<(usize, Vec<usize>)> {
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, s) in self.steps.iter().enumerate() {
            match groups.last_mut() {
                Some((w, members)) if *w == s.wave => members.push(i),
                _ => groups.push((s.wave, vec![i])),
            }
        }
        groups
    }

    /// `strata up of stack dev (provider local)`.
    pub fn title(&self) -> String {
        format!(
            "strata {} of stack {} (provider {})",
            self.operation, self.stack, self.provider
        )
    }
}

/// Milliseconds since the epoch of an RFC 3339 time (`None` when it is not one).
pub(super) fn epoch_ms(text: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(text.trim()).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}
