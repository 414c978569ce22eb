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

/// The plan of `profile` (`projects`: its entries' projects, in order): its graph, and
/// the `policy:` rules that hold each project.
pub fn build(
    profile: &crate::workspace::Profile,
    projects: Vec<crate::workspace::Project>,
) -> crate::error::Result<Plan> {
    let mut plan = Plan::build_graph(profile, projects)?;
    rules::hold(&mut plan, profile)?;
    Ok(plan)
}
