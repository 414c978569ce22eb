//! Adopting an existing repository (`strata init`): its Pulumi and command projects found
//! where they are (`discover`), their needs and unresolved references read from their
//! code (`infer`), their stacks and what their stack configs keep secret (`config`), the
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
    /// The profile's name (`providers/<provider>.yaml`).
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

    /// The backend each found project runs against, as Pulumi chooses it in `env` (the
    /// process environment; a workspace's environment file is not written yet).
    pub fn backends(
        &self,
        env: &std::collections::BTreeMap<String, String>,
    ) -> crate::workspace::backend::Backends {
        let own = self
            .found
            .iter()
            .map(|f| (f.rel.as_str(), f.dir.as_path(), f.backend.as_deref()));
        crate::workspace::backend::Backends::choose(env, &self.root, own)
    }

    /// The found projects of `stage`, in an order that runs each after its needs.
    pub fn stage(&self, stage: Stage) -> Vec<String> {
        infer::ordered(&self.found, &self.inferred, stage)
    }

    /// Every found project, in an order that runs each after what it needs (ties by
    /// folder; those in a cycle last, in folder order): the one list `init` writes.
    pub fn ordered(&self) -> Vec<String> {
        let needs: std::collections::BTreeMap<&str, Vec<String>> = self
            .found
            .iter()
            .map(|f| (f.rel.as_str(), self.inferred.needs_of(&f.rel)))
            .collect();
        let mut done: Vec<String> = Vec::new();
        let mut placed = std::collections::BTreeSet::new();
        let mut left: Vec<&str> = self.found.iter().map(|f| f.rel.as_str()).collect();
        while !left.is_empty() {
            let ready = left.iter().position(|r| {
                needs[r]
                    .iter()
                    .all(|n| placed.contains(n.as_str()) || !needs.contains_key(n.as_str()))
            });
            match ready {
                Some(i) => {
                    let r = left.remove(i);
                    placed.insert(r);
                    done.push(r.to_string());
                }
                None => done.extend(left.drain(..).map(str::to_string)),
            }
        }
        done
    }

    /// The stack the environment file names by default: the one most projects have a
    /// stack config for (the first by name among equals), never one that looks like
    /// production (a first `strata up` must not change production); `dev` when no other
    /// is left.
    pub fn default_stack(&self) -> String {
        let mut stacks: Vec<(&String, &usize)> = self
            .configs
            .stacks
            .iter()
            .filter(|(s, _)| !looks_like_production(s))
            .collect();
        stacks.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        stacks
            .first()
            .map(|(s, _)| (*s).clone())
            .unwrap_or_else(|| "dev".to_string())
    }

    /// The project's own name of the run's stack when it is not the same, as a `stack:`
    /// template (`applications.${stack}`): its one stack config whose name is the
    /// default stack's with a prefix or suffix (joined by `.`, `-` or `_`).
    pub fn stack_template(&self, rel: &str) -> Option<String> {
        let stack = self.default_stack();
        let own = self.configs.by_project.get(rel)?;
        if own.contains(&stack) {
            return None;
        }
        let fits: Vec<String> = own
            .iter()
            .filter_map(|s| {
                if let Some(prefix) = s.strip_suffix(&stack)
                    && prefix.ends_with(['.', '-', '_'])
                {
                    return Some(format!("{prefix}${{stack}}"));
                }
                let suffix = s.strip_prefix(&stack)?;
                suffix
                    .starts_with(['.', '-', '_'])
                    .then(|| format!("${{stack}}{suffix}"))
            })
            .collect();
        match fits.as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        }
    }
}

/// Whether a stack name reads as production: `prod`, `production`, `prd`, `live` (and
/// `prod2`...), in any case, alone or as a part (`eu-prod`, `Production.app`).
pub fn looks_like_production(stack: &str) -> bool {
    stack
        .to_ascii_lowercase()
        .split(['.', '-', '_', '/'])
        .any(|p| {
            let base = p.trim_end_matches(|c: char| c.is_ascii_digit());
            matches!(base, "prod" | "production" | "prd" | "live")
        })
}

#[cfg(test)]
mod tests;
