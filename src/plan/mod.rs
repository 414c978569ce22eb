//! Planning a run: the dependency graph of a profile, the selectors that pick parts of it,
//! the projects each policy rule holds, and its drawings.

pub mod graph;
pub mod references;
pub mod render;
pub mod rules;
pub mod select;
#[cfg(test)]
pub mod testing;

pub use graph::{NodeKind, NodeStage, Plan, SECRETS_STEP};
