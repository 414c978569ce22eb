//! Test support: a plan built from profile YAML, with project folders made up for it.

use crate::error::Result;
use crate::workspace::{profile, project};

use super::Plan;

/// The plan of `profile_yaml`; paths in `commands` are command projects, the others
/// Pulumi projects named after their last path segment.
pub fn plan_of(profile_yaml: &str, commands: &[&str]) -> Result<Plan> {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("providers")).unwrap();
    std::fs::write(d.path().join("providers/p.yaml"), profile_yaml).unwrap();
    let prof = profile::load(&d.path().join("providers"), "p")?;
    let projects = prof
        .entries
        .iter()
        .map(|e| {
            let dir = d.path().join("projects").join(&e.path);
            std::fs::create_dir_all(&dir).unwrap();
            if commands.contains(&e.path.as_str()) {
                std::fs::write(dir.join("Strata.yaml"), "up: 'true'\ndestroy: 'true'\n").unwrap();
            } else {
                let name = e.path.rsplit('/').next().unwrap();
                std::fs::write(
                    dir.join("Pulumi.yaml"),
                    format!("name: {name}\nruntime: yaml\n"),
                )
                .unwrap();
            }
            project::load(&d.path().join("projects"), &e.path, &e.file)
        })
        .collect::<Result<Vec<_>>>()?;
    crate::plan::build(&prof, projects)
}
