//! Adopting an existing repository (`strata init`): its Pulumi and command projects found
//! where they are (`discover`), their stages, needs and unresolved references read from
//! their code (`infer`), their stack configs' secrets and shared keys (`config`), the
//! workspace files written around them (`write`), and a later `--update` that edits the
//! profile's text in place (`update`).

pub mod config;
pub mod discover;
pub mod infer;
pub mod update;
pub mod write;

use std::path::{Path, PathBuf};

use crate::workspace::Stage;

/// Everything `strata init` learned of a repository, before writing anything.
#[derive(Debug)]
pub struct Adoption {
    pub root: PathBuf,
    /// The profile's name (`providers/<provider>.yaml`), also its `infra_type`.
    pub provider: String,
    /// The profile's `projects:` folder: the longest folder that holds every project.
    pub projects_dir: String,
    pub found: Vec<discover::Found>,
    pub inferred: infer::Inferred,
    pub configs: config::Configs,
    /// Files that could not be read, projects that cannot be entries: for the user.
    pub problems: Vec<String>,
}

impl Adoption {
    /// Surveys the repository at `root` for the profile `provider`.
    pub fn survey(root: &Path, provider: &str) -> Adoption {
        let (mut found, mut problems) = discover::discover(root);
        if let Some(i) = found.iter().position(|f| f.rel == ".") {
            found.remove(i);
            problems.push(
                "the repository's root is itself a project: a profile entry is a folder below the workspace root; move it into a folder to adopt it".into(),
            );
        }
        let inferred = infer::infer(&found);
        let configs = config::read(&found);
        problems.extend(configs.problems.iter().cloned());
        Adoption {
            root: root.to_path_buf(),
            provider: provider.to_string(),
            projects_dir: discover::common_folder(&found),
            found,
            inferred,
            configs,
            problems,
        }
    }

    /// A project's entry path: its folder relative to the `projects:` folder.
    pub fn entry_path(&self, rel: &str) -> String {
        discover::under(&self.projects_dir, rel)
    }

    /// The found projects of `stage`, in an order that runs each after its needs.
    pub fn stage(&self, stage: Stage) -> Vec<String> {
        infer::ordered(&self.found, &self.inferred, stage)
    }

    /// The profile's `infra_type`: the `kubernetes:infra_type` the projects' stack configs
    /// already agree on (MARA's runner records one), else the profile's name.
    pub fn infra_type(&self) -> String {
        let seen: std::collections::BTreeSet<&str> = self
            .configs
            .seeds
            .values()
            .filter_map(|m| m.get(crate::workspace::stack_config::INFRA_TYPE_KEY))
            .filter_map(|v| v.as_str())
            .collect();
        match seen.into_iter().collect::<Vec<_>>().as_slice() {
            [one] => one.to_string(),
            _ => self.provider.clone(),
        }
    }

    /// The stack the environment file names: the one most projects have a stack config
    /// for (the first by name among equals), else `dev`.
    pub fn default_stack(&self) -> String {
        let most = self.configs.stacks.values().max().copied().unwrap_or(0);
        self.configs
            .stacks
            .iter()
            .find(|(_, n)| **n == most)
            .map(|(s, _)| s.clone())
            .unwrap_or_else(|| "dev".to_string())
    }
}

#[cfg(test)]
mod tests;
