//! Planning a run: the dependency graph of a profile, the selectors that pick parts of it,
//! and its drawings.

pub mod graph;
pub mod references;
pub mod render;
pub mod select;
#[cfg(test)]
pub mod testing;

pub use graph::{NodeKind, NodeStage, Plan, SECRETS_STEP};
