//! Planning a run: the dependency graph of a profile and its drawings.

pub mod graph;
pub mod references;
pub mod render;
#[cfg(test)]
pub mod testing;

pub use graph::{NodeKind, NodeStage, Plan, SECRETS_STEP, Selection};
