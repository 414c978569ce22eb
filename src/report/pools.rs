//! The changes of the concurrency pools' limits during a run, as the report shows them.

use std::sync::Arc;

use crate::state::journal::Record;

/// A change of a concurrency pool's limit during the run.
#[derive(Debug, Clone)]
pub struct PoolChange {
    pub pool: String,
    pub previous: usize,
    pub limit: usize,
    pub reason: String,
    /// From the start of the run.
    pub at_ms: u64,
    /// Its journal line, as written.
    pub(super) record: Arc<str>,
}

/// The run's `pool_limit` records, in the order written; `at_ms` turns a record's time
/// into milliseconds from the start of the run.
pub(super) fn changes(
    lines: Vec<(&Arc<str>, &Record)>,
    at_ms: impl Fn(&str) -> u64,
) -> Vec<PoolChange> {
    lines
        .into_iter()
        .filter_map(|(text, line)| match line {
            Record::PoolLimit {
                pool,
                limit,
                previous,
                reason,
                at,
                ..
            } => Some(PoolChange {
                pool: pool.clone(),
                previous: *previous,
                limit: *limit,
                reason: reason.clone(),
                at_ms: at_ms(at),
                record: text.clone(),
            }),
            _ => None,
        })
        .collect()
}
