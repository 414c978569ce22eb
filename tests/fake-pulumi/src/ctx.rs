//! The resolved invocation: project, stack name, config file and backend, found the way
//! the real CLI finds them.

use std::path::PathBuf;

use crate::cli::Args;
use crate::config::StackConfig;
use crate::error::{Fail, Result, code};
use crate::project::Project;
use crate::state::{Backend, ORG, StackState};

pub struct Ctx {
    pub args: Args,
    /// The command path: `up`, `stack init`, `config set` ...
    pub command: String,
    /// Positional arguments after the command path.
    pub rest: Vec<String>,
}

/// A stack that exists, with everything needed to work on it.
pub struct Stack {
    pub project: Project,
    pub name: String,
    pub backend: Backend,
    pub state: StackState,
}

impl Ctx {
    pub fn json(&self) -> bool {
        self.args.bool("json")
    }

    pub fn yes(&self) -> bool {
        self.args.bool("yes")
    }

    pub fn show_secrets(&self) -> bool {
        self.args.bool("show-secrets")
    }

    /// Pulumi's `cmdutil.Interactive()`: not `--non-interactive`, stdin and stdout are
    /// terminals, and not in CI.
    pub fn interactive(&self) -> bool {
        if self.args.bool("non-interactive") {
            return false;
        }
        let ci = [
            "CI",
            "GITHUB_ACTIONS",
            "BUILD_NUMBER",
            "TF_BUILD",
            "GITLAB_CI",
        ]
        .iter()
        .any(|v| std::env::var(v).is_ok_and(|x| !x.is_empty() && x != "false" && x != "0"));
        // SAFETY: isatty only inspects the descriptors.
        let tty = unsafe { libc::isatty(0) == 1 && libc::isatty(1) == 1 };
        tty && !ci
    }

    pub fn project(&self) -> Result<Project> {
        let cwd = std::env::current_dir().map_err(|e| Fail::error(e.to_string()))?;
        Project::find(&cwd)
    }

    /// The stack name from `--stack` (`dev`, `organization/dev` or `organization/proj/dev`).
    pub fn stack_name(&self, project: &Project) -> Result<String> {
        match self.args.value("stack") {
            Some(s) if !s.is_empty() => parse_stack_ref(s, &project.name),
            _ => Err(Fail::new(
                code::STACK_NOT_FOUND,
                "no stack selected; please use `pulumi stack select` or `pulumi stack init` to \
                 choose one (fake-pulumi has no selected stack: pass --stack)",
            )),
        }
    }

    /// The stack a `stack init NAME` or `stack rm NAME` names: `--stack`, else the
    /// first positional argument (unparsed).
    pub fn stack_arg(&self) -> Option<String> {
        self.args
            .value("stack")
            .map(String::from)
            .or_else(|| self.rest.first().cloned())
    }

    /// `--config-file` if given, else `Pulumi.<stack>.yaml` beside the project file.
    pub fn config_path(&self, project: &Project, stack: &str) -> PathBuf {
        match self.args.value("config-file") {
            Some(f) => {
                let p = PathBuf::from(f);
                if p.is_absolute() {
                    p
                } else {
                    std::env::current_dir().unwrap_or_default().join(p)
                }
            }
            None => project.stack_config_path(stack),
        }
    }

    pub fn stack_config(&self, project: &Project, stack: &str) -> Result<StackConfig> {
        StackConfig::load(&self.config_path(project, stack))
    }

    /// Project, stack name and backend; the stack must exist (exit 6 if not).
    pub fn require_stack(&self) -> Result<Stack> {
        let project = self.project()?;
        let name = self.stack_name(&project)?;
        let backend = Backend::from_env()?;
        let state = backend
            .load(&project.name, &name)?
            .ok_or_else(|| Fail::stack_not_found(&name))?;
        Ok(Stack {
            project,
            name,
            backend,
            state,
        })
    }
}

/// Parses a stack reference as the file backend does; returns the bare stack name.
pub fn parse_stack_ref(s: &str, project: &str) -> Result<String> {
    let parts: Vec<&str> = s.split('/').collect();
    let (org, proj, name) = match parts.as_slice() {
        [n] => (ORG, project, *n),
        [o, n] => (*o, project, *n),
        [o, p, n] => (*o, *p, *n),
        _ => {
            return Err(Fail::error(format!(
                "could not parse stack reference '{s}'"
            )));
        }
    };
    if crate::state::cloud_mode() {
        // Pulumi Cloud: any organization; an unqualified name is the CLI's default org.
        let org = if parts.len() == 1 {
            crate::state::default_org()
        } else {
            org.to_string()
        };
        crate::state::set_stack_org(&org);
    } else if org != ORG {
        return Err(Fail::error("organization name must be 'organization'"));
    }
    if proj != project {
        return Err(Fail::error(format!(
            "provided project name \"{proj}\" doesn't match Pulumi.yaml"
        )));
    }
    validate_stack_name(name)?;
    Ok(name.to_string())
}

pub fn validate_stack_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(Fail::error(format!(
            "invalid stack name '{name}': stack names may only contain alphanumeric, hyphens, \
             underscores, or periods"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_references() {
        assert_eq!(parse_stack_ref("dev", "p").unwrap(), "dev");
        assert_eq!(parse_stack_ref("organization/p/dev", "p").unwrap(), "dev");
        assert!(parse_stack_ref("acme/p/dev", "p").is_err());
        assert!(parse_stack_ref("organization/q/dev", "p").is_err());
        assert!(parse_stack_ref("bad name", "p").is_err());
    }
}
