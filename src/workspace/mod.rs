//! What is on disk: the workspace root, the environment file, the stack config, the
//! provider profiles and the project folders.

pub mod backend;
pub mod env_file;
pub mod profile;
pub mod project;
pub mod stack_config;
pub mod yaml;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::util::display_path;
pub use env_file::EnvFile;
pub use profile::{Entry, Profile, Stage};
pub use project::{Project, ProjectKind};
pub use stack_config::StackConfig;

/// The workspace: its root and the environment its children run with.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub root: PathBuf,
    pub env_file: EnvFile,
    /// The process environment (a snapshot; never mutated).
    pub process_env: BTreeMap<String, String>,
    /// The process environment overlaid by the env file, plus PULUMI_SKIP_UPDATE_CHECK.
    pub env: BTreeMap<String, String>,
}

/// Where the root is: `--root`/`STRATA_ROOT`, else the nearest ancestor of `cwd` that has
/// a `providers/` folder.
/// What the user pointed a command at: the workspace root, the stack and the provider
/// profile, each `None` when left to the files (`-C`, `-s` and `-p` on the command line).
#[derive(Debug, Clone, Default)]
pub struct Target {
    pub root: Option<PathBuf>,
    pub stack: Option<String>,
    pub provider: Option<String>,
}

pub fn find_root(flag: Option<&Path>, cwd: &Path) -> Result<PathBuf> {
    if let Some(dir) = flag {
        let dir = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            cwd.join(dir)
        };
        if !dir.join("providers").is_dir() {
            return Err(Error::config(format!(
                "{} is not a strata workspace: it has no providers/ folder.\n  Point --root (or STRATA_ROOT) at the folder that holds providers/, config/ and projects/.",
                display_path(&dir)
            )));
        }
        return Ok(dir);
    }
    for dir in cwd.ancestors() {
        if dir.join("providers").is_dir() {
            return Ok(dir.to_path_buf());
        }
    }
    Err(Error::config(format!(
        "no strata workspace here: neither {} nor any folder above it has a providers/ folder.\n  Run strata inside a workspace, or name one with --root DIR (or STRATA_ROOT).",
        display_path(cwd)
    )))
}

impl Workspace {
    /// Opens the workspace at `root`, reading the environment file.
    pub fn open(root: PathBuf, process_env: BTreeMap<String, String>) -> Result<Workspace> {
        let env_file = EnvFile::load(&root.join("config/pulumi/environment"))?;
        let env = env_file::child_environment(process_env.clone(), &env_file);
        Ok(Workspace {
            root,
            env_file,
            process_env,
            env,
        })
    }

    pub fn providers_dir(&self) -> PathBuf {
        self.root.join("providers")
    }

    /// The folder `profile`'s entry paths are relative to (its `projects:`).
    pub fn projects_dir(&self, profile: &Profile) -> PathBuf {
        match profile.projects_dir.as_str() {
            "." => self.root.clone(),
            dir => self.root.join(dir),
        }
    }

    /// `.strata/<stack>/`: journal, logs, lock, per-project config.
    pub fn state_dir(&self, stack: &str) -> PathBuf {
        self.root.join(".strata").join(stack)
    }

    pub fn stack_config_path(&self, stack: &str) -> PathBuf {
        StackConfig::path_for(&self.root, stack)
    }

    /// The stack of a command: `--stack`, else `PULUMI_STACK` of the env file, else of
    /// the process environment. As in the Pulumi CLI, `--stack` wins for that run: the
    /// file gives the default.
    pub fn resolve_stack(&self, flag: Option<&str>) -> Result<Option<String>> {
        self.stack(flag)
    }

    /// The stack of a command that only reads (`show`, `status`, `outputs`, `export`,
    /// `secrets list`): the same rule.
    pub fn stack_to_read(&self, flag: Option<&str>) -> Result<Option<String>> {
        self.stack(flag)
    }

    fn stack(&self, flag: Option<&str>) -> Result<Option<String>> {
        let from_file = self.env_file.get("PULUMI_STACK").filter(|s| !s.is_empty());
        let file_hint = || {
            format!(
                "It comes from PULUMI_STACK in {} (or the environment); fix it there.",
                display_path(&self.env_file.path)
            )
        };
        // The file's value is checked before any message could show it: a value that is
        // not a stack name may be anything (a broken line can pull a token into it), and
        // children get the file's variables, so it is refused even beside `--stack`.
        if let Some(file) = from_file
            && !valid_stack_name(file)
        {
            return Err(Error::config(format!(
                "PULUMI_STACK in {} is not a valid stack name: {}.\n  {}",
                display_path(&self.env_file.path),
                why_not_a_stack_name(file),
                file_hint()
            )));
        }
        let stack = match (flag, from_file) {
            (Some(f), _) => Some(f.to_string()),
            (None, Some(file)) => Some(file.to_string()),
            (None, None) => self
                .process_env
                .get("PULUMI_STACK")
                .filter(|s| !s.is_empty())
                .cloned(),
        };
        if let Some(s) = &stack
            && !valid_stack_name(s)
        {
            // Never quoted: only what is wrong with it.
            let why = why_not_a_stack_name(s);
            return Err(if flag.is_some() {
                Error::config(format!(
                    "--stack is not a valid stack name: {why}.\n  Pass another --stack."
                ))
            } else {
                Error::config(format!(
                    "PULUMI_STACK is not a valid stack name: {why}.\n  {}",
                    file_hint()
                ))
            });
        }
        Ok(stack)
    }

    /// Loads and composes the profile `name`.
    pub fn profile(&self, name: &str) -> Result<Profile> {
        profile::load(&self.providers_dir(), name)
    }

    /// Loads the project of every entry of `profile`, in the profile's order.
    pub fn projects(&self, profile: &Profile) -> Result<Vec<Project>> {
        let dir = self.projects_dir(profile);
        profile
            .entries
            .iter()
            .map(|e| project::load(&dir, &e.path, &e.file))
            .collect()
    }

    /// The profile to use: `--provider`, else the one the stack last ran (remembered by
    /// name, see [`Workspace::remembered_profile`]), else the only one, else the one
    /// whose `infra_type` (or name) matches the stack's `kubernetes:infra_type` (a stack
    /// that ran before profiles were remembered).
    pub fn select_provider(
        &self,
        flag: Option<&str>,
        stack: Option<&str>,
        stack_config: Option<&StackConfig>,
    ) -> Result<String> {
        if let Some(p) = flag {
            return Ok(p.to_string());
        }
        let available = profile::list(&self.providers_dir())?;
        let names = || {
            available
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if let Some(name) = stack.and_then(|s| self.remembered_profile(s))
            && available.iter().any(|(n, _)| *n == name)
        {
            return Ok(name);
        }
        if let [(only, _)] = available.as_slice() {
            return Ok(only.clone());
        }
        let Some(infra) = stack_config.and_then(|c| c.infra_type()) else {
            let which = stack.map_or_else(
                || "no stack is named, so no profile is remembered".to_string(),
                |s| format!("stack `{s}` has not run a profile on this checkout and its stack config records no kubernetes:infra_type"),
            );
            return Err(Error::config(format!(
                "no provider chosen: {which}, and there are {} profiles.\n  Pass -p NAME (--provider NAME, or set STRATA_PROVIDER), for a command that only reads too. Available providers: {}.",
                available.len(),
                names()
            )));
        };
        for (name, file) in &available {
            if name.eq_ignore_ascii_case(&infra) {
                return Ok(name.clone());
            }
            if let Ok((_, t)) = profile::describe(file)
                && t.eq_ignore_ascii_case(&infra)
            {
                return Ok(name.clone());
            }
        }
        Err(Error::config(format!(
            "the stack's kubernetes:infra_type is `{infra}`, but no provider profile has that infra_type.\n  Available providers: {}. Pass --provider NAME.",
            names()
        )))
    }

    /// `.strata/<stack>/profile`: the name of the profile the stack's last `up` ran.
    fn remembered_file(&self, stack: &str) -> PathBuf {
        self.state_dir(stack).join("profile")
    }

    /// The profile the stack's last `up` on this checkout ran, by name.
    pub fn remembered_profile(&self, stack: &str) -> Option<String> {
        let text = std::fs::read_to_string(self.remembered_file(stack)).ok()?;
        let name = text.trim();
        (profile::is_valid_name(name)).then(|| name.to_string())
    }

    /// Remembers that the stack runs `profile` (the `up` that does so holds its lock).
    pub fn remember_profile(&self, stack: &str, profile: &str) -> Result<()> {
        if self.remembered_profile(stack).as_deref() == Some(profile) {
            return Ok(());
        }
        crate::files::private_dir(&self.state_dir(stack))?;
        crate::files::write_atomic(
            &self.remembered_file(stack),
            format!("{profile}\n").as_bytes(),
            Some(0o600),
        )
    }

    /// Refuses a profile other than the one the stack runs: by name when the stack
    /// remembers one (unless `deployed` says nothing of it is up any more), else by the
    /// `kubernetes:infra_type` its stack config records.
    pub fn check_profile(
        &self,
        profile: &Profile,
        stack: &str,
        config: Option<&StackConfig>,
        deployed: &dyn Fn() -> bool,
    ) -> Result<()> {
        match self.remembered_profile(stack) {
            Some(name) if name != profile.name && deployed() => Err(Error::config(format!(
                "stack `{stack}` runs profile `{name}` (its last `strata up` did), not `{}`.\n  A stack keeps its profile: run it with `-p {name}`, or start a new stack for `{}`: strata up -p {} --stack <new-name>.",
                profile.name, profile.name, profile.name
            ))),
            Some(_) => Ok(()),
            None => match config {
                Some(c) => check_infra_type(profile, c, stack),
                None => Ok(()),
            },
        }
    }
}

/// Refuses a provider whose infra_type differs from the stack's recorded one.
pub fn check_infra_type(profile: &Profile, config: &StackConfig, stack: &str) -> Result<()> {
    if let Some(recorded) = config.infra_type()
        && !profile.infra_type.is_empty()
        && !recorded.eq_ignore_ascii_case(&profile.infra_type)
    {
        return Err(Error::config(format!(
            "stack `{stack}` was brought up with infra_type `{recorded}` ({}), but provider `{}` has infra_type `{}`.\n  A stack keeps its provider. To use `{}`, start a new stack: strata up --provider {} --stack <new-name> (and change PULUMI_STACK in config/pulumi/environment if it names `{stack}`).",
            display_path(&config.path),
            profile.name,
            profile.infra_type,
            profile.name,
            profile.name
        )));
    }
    Ok(())
}

/// The error when no stack is named anywhere.
pub fn no_stack_error(ws: &Workspace) -> Error {
    Error::config(format!(
        "no stack named: pass --stack NAME, or set PULUMI_STACK=NAME in {}.",
        display_path(&ws.env_file.path)
    ))
}

/// Pulumi's rule (`tokens.IsName`, at most 100 characters): letters, digits, `-`, `_`
/// and `.`; not only dots (a stack name is also a folder name under `.strata/`).
/// What is wrong with a stack name, without quoting it (it may be anything).
pub fn why_not_a_stack_name(s: &str) -> String {
    const RULE: &str =
        "Pulumi allows at most 100 characters, letters, digits, `-`, `_` and `.` (not only dots)";
    let n = s.chars().count();
    let what = if s.is_empty() {
        "it is empty".to_string()
    } else if s.len() > 100 {
        format!("it is {n} characters long")
    } else if s.contains(['\n', '\r']) {
        "it spans several lines".to_string()
    } else if s.chars().all(|c| c == '.') {
        "it is only dots".to_string()
    } else {
        let bad = s
            .chars()
            .filter(|c| !(c.is_ascii_alphanumeric() || "-_.".contains(*c)))
            .count();
        format!(
            "{bad} of its {n} characters {} not allowed",
            if bad == 1 { "is" } else { "are" }
        )
    };
    format!("{what}; {RULE}")
}

pub fn valid_stack_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && !s.chars().all(|c| c == '.')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Entry paths are under projects/ by default, and under the profile's `projects:`
    /// folder (here the root itself) when it names one.
    #[test]
    fn projects_are_found_under_the_profiles_projects_folder() {
        let d = tempfile::tempdir().unwrap();
        let w = |rel: &str, text: &str| {
            let p = d.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        w("projects/net/Pulumi.yaml", "name: net\nruntime: yaml\n");
        w("infra/vpc/Pulumi.yaml", "name: vpc\nruntime: yaml\n");
        w(
            "providers/old.yaml",
            "description: d\ninfra_type: t\ninfrastructure:\n  - path: net\n",
        );
        w(
            "providers/adopted.yaml",
            "description: d\ninfra_type: t\nprojects: .\ninfrastructure:\n  - path: infra/vpc\n",
        );
        let ws = Workspace::open(d.path().to_path_buf(), BTreeMap::new()).unwrap();
        let old = ws.projects(&ws.profile("old").unwrap()).unwrap();
        assert_eq!(old[0].dir, d.path().join("projects/net"));
        let adopted = ws.projects(&ws.profile("adopted").unwrap()).unwrap();
        assert_eq!(adopted[0].dir, d.path().join("infra/vpc"));
        assert_eq!(adopted[0].name(), "vpc");
    }

    fn ws_with_env(file: Option<&str>, process: &[(&str, &str)]) -> (tempfile::TempDir, Workspace) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("providers")).unwrap();
        std::fs::create_dir_all(d.path().join("config/pulumi")).unwrap();
        if let Some(t) = file {
            std::fs::write(d.path().join("config/pulumi/environment"), t).unwrap();
        }
        let env = crate::util::string_map(process);
        let w = Workspace::open(d.path().to_path_buf(), env).unwrap();
        (d, w)
    }

    #[test]
    fn root_is_nearest_ancestor_with_providers() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("providers")).unwrap();
        std::fs::create_dir_all(d.path().join("projects/a/b")).unwrap();
        let r = find_root(None, &d.path().join("projects/a/b")).unwrap();
        assert_eq!(r, d.path());
        let e = find_root(Some(&d.path().join("projects")), d.path()).unwrap_err();
        assert_eq!(e.exit_code(), 3);
    }

    #[test]
    fn stack_precedence() {
        let (_d, w) = ws_with_env(Some("PULUMI_STACK=dev\n"), &[("PULUMI_STACK", "proc")]);
        assert_eq!(w.resolve_stack(None).unwrap().as_deref(), Some("dev"));
        assert_eq!(
            w.resolve_stack(Some("dev")).unwrap().as_deref(),
            Some("dev")
        );
        // -s wins for the run, as in the Pulumi CLI; the file gives the default.
        assert_eq!(
            w.resolve_stack(Some("prod")).unwrap().as_deref(),
            Some("prod")
        );
        let (_d, w) = ws_with_env(None, &[("PULUMI_STACK", "proc")]);
        assert_eq!(w.resolve_stack(None).unwrap().as_deref(), Some("proc"));
        assert_eq!(w.resolve_stack(Some("x")).unwrap().as_deref(), Some("x"));
        let (_d, w) = ws_with_env(None, &[]);
        assert_eq!(w.resolve_stack(None).unwrap(), None);
        assert!(w.resolve_stack(Some("bad name")).is_err());
        assert!(w.resolve_stack(Some("..")).is_err());
        let (_d, w) = ws_with_env(Some("PULUMI_STACK='my stack'\n"), &[]);
        assert_eq!(w.resolve_stack(None).unwrap_err().exit_code(), 3);
    }

    #[test]
    fn env_overlay_is_not_applied_to_process() {
        let (_d, w) = ws_with_env(Some("STRATA_TEST_ONLY_VAR=1\n"), &[]);
        assert_eq!(w.env["STRATA_TEST_ONLY_VAR"], "1");
        assert!(std::env::var("STRATA_TEST_ONLY_VAR").is_err());
    }
}
