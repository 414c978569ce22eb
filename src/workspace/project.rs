//! Project directories under `projects/`: a Pulumi project (`Pulumi.yaml`) or a command
//! project (`Strata.yaml`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Result};
use crate::util::display_path;

/// Folders never hashed (fingerprints) nor scanned (references): VCS data and
/// dependency caches that do not change the program.
pub const SKIP_DIRS: &[&str] = &[
    ".git",
    "node_modules",
    "__pycache__",
    ".venv",
    "venv",
    "target",
];

/// What runs a project.
#[derive(Debug, Clone)]
pub enum ProjectKind {
    /// A Pulumi project: what its Pulumi.yaml says.
    Pulumi {
        /// `name:`, the Pulumi project name.
        name: String,
        /// `backend.url`, as written (see `workspace::backend`).
        backend: Option<String>,
        /// The folder its stack configs (`Pulumi.<stack>.yaml`) are in: its own, or the
        /// one `stackConfigDir:` names.
        config_dir: PathBuf,
        /// `runtime:` (`nodejs`, `python`, `go`, `dotnet`, `yaml`...).
        runtime: String,
        /// `runtime.options` whose values are scalars (`virtualenv`, `toolchain`,
        /// `packagemanager`...), as text.
        runtime_options: BTreeMap<String, String>,
    },
    /// A command project (shared: the command engine looks it up by path).
    Command(std::sync::Arc<CommandSpec>),
}

/// `Strata.yaml`: shell commands for each operation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    pub up: String,
    pub destroy: String,
    #[serde(default)]
    pub preview: Option<String>,
    #[serde(default)]
    pub refresh: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Project {
    /// The path as written in the profile (relative to `projects/`).
    pub path: String,
    pub dir: PathBuf,
    pub kind: ProjectKind,
}

impl Project {
    /// The project's name: Pulumi's project name, or the command project's name.
    pub fn name(&self) -> String {
        match &self.kind {
            ProjectKind::Pulumi { name, .. } => name.clone(),
            ProjectKind::Command(spec) => spec.name.clone().unwrap_or_else(|| {
                self.path
                    .rsplit('/')
                    .next()
                    .unwrap_or(&self.path)
                    .to_string()
            }),
        }
    }

    /// Where Pulumi reads this project's config of `stack` (its own name of the stack):
    /// `Pulumi.<stack>.yaml` (or `.yml`, when only that exists) in its stack config
    /// folder; `None` for a command project.
    pub fn own_stack_config(&self, stack: &str) -> Option<PathBuf> {
        let ProjectKind::Pulumi { config_dir, .. } = &self.kind else {
            return None;
        };
        // Pulumi names the file by the stack's own part of `org/project/stack`.
        let short = stack.rsplit('/').next().unwrap_or(stack);
        let yaml = config_dir.join(format!("Pulumi.{short}.yaml"));
        let yml = config_dir.join(format!("Pulumi.{short}.yml"));
        Some(if !yaml.exists() && yml.exists() {
            yml
        } else {
            yaml
        })
    }

    pub fn kind_str(&self) -> &'static str {
        match self.kind {
            ProjectKind::Pulumi { .. } => "pulumi",
            ProjectKind::Command(_) => "command",
        }
    }
}

/// The folders under `projects_dir` that hold a project (a Pulumi.yaml, Pulumi.yml or
/// Strata.yaml), as paths relative to it: what a mistyped entry path may have meant.
/// Hidden folders and [`SKIP_DIRS`] are not entered, nor anything deeper than 8 levels.
fn project_folders(projects_dir: &Path) -> Vec<String> {
    fn walk(dir: &Path, rel: &str, depth: usize, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut subdirs = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && !name.starts_with('.') && !SKIP_DIRS.contains(&name.as_str()) {
                subdirs.push(name);
            } else if !rel.is_empty()
                && ["Pulumi.yaml", "Pulumi.yml", "Strata.yaml"].contains(&name.as_str())
                && out.last().map(String::as_str) != Some(rel)
            {
                out.push(rel.to_string());
            }
        }
        if depth < 8 {
            for name in subdirs {
                let sub = if rel.is_empty() {
                    name.clone()
                } else {
                    format!("{rel}/{name}")
                };
                walk(&dir.join(&name), &sub, depth + 1, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(projects_dir, "", 0, &mut out);
    out
}

/// Reads the project at `projects/<path>`; `source` names the profile file for messages.
pub fn load(projects_dir: &Path, path: &str, source: &Path) -> Result<Project> {
    let dir = projects_dir.join(path);
    if !dir.is_dir() {
        let folders = project_folders(projects_dir);
        return Err(Error::config(format!(
            "{}: project `{path}` has no folder: {} does not exist.{}\n  Create it with a Pulumi.yaml (a Pulumi project) or a Strata.yaml (a command project), or fix the path.",
            display_path(source),
            display_path(&dir),
            crate::util::did_you_mean(path, folders.iter().map(String::as_str))
        )));
    }
    for file in ["Pulumi.yaml", "Pulumi.yml"] {
        let f = dir.join(file);
        if f.is_file() {
            let meta = read_pulumi_yaml(&f)?;
            return Ok(Project {
                path: path.to_string(),
                kind: ProjectKind::Pulumi {
                    config_dir: meta.config_dir_in(&dir),
                    name: meta.name,
                    backend: meta.backend_url,
                    runtime: meta.runtime,
                    runtime_options: meta.runtime_options,
                },
                dir,
            });
        }
    }
    let f = dir.join("Strata.yaml");
    if f.is_file() {
        let text = super::yaml::read(&f, "A Strata.yaml")?;
        let spec: CommandSpec = serde_yaml::from_str(&text).map_err(|e| {
            Error::config(format!(
                "{}: {}\n  A Strata.yaml needs `up:` and `destroy:` commands, and may have `name`, `description`, `preview`, `refresh`.",
                display_path(&f),
                super::yaml::scrub(&e.to_string())
            ))
        })?;
        return Ok(Project {
            path: path.to_string(),
            kind: ProjectKind::Command(std::sync::Arc::new(spec)),
            dir,
        });
    }
    Err(Error::config(format!(
        "{}: project `{path}`: {} holds neither Pulumi.yaml nor Strata.yaml.\n  Add a Pulumi.yaml (a Pulumi project) or a Strata.yaml (a command project).",
        display_path(source),
        display_path(&dir)
    )))
}

/// What strata reads of a `Pulumi.yaml`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PulumiMeta {
    /// `name:`, trimmed.
    pub name: String,
    /// `runtime:` (a string or `{name: ...}`): `python`, `nodejs`, `go`, `yaml`...
    pub runtime: String,
    /// `runtime.options` with scalar values, as text (`virtualenv: venv`,
    /// `toolchain: poetry`, `packagemanager: pnpm`...).
    pub runtime_options: BTreeMap<String, String>,
    /// `backend.url`.
    pub backend_url: Option<String>,
    /// `stackConfigDir:` (or the older `config:` when it is a string), relative to the
    /// project's folder.
    pub config_dir: Option<String>,
}

impl PulumiMeta {
    /// The folder its stack configs are in, for the project in `dir`.
    pub fn config_dir_in(&self, dir: &Path) -> PathBuf {
        match &self.config_dir {
            Some(c) => dir.join(c),
            None => dir.to_path_buf(),
        }
    }
}

/// Reads `file` (a `Pulumi.yaml`).
pub fn read_pulumi_yaml(file: &Path) -> Result<PulumiMeta> {
    let text = super::yaml::read(file, "A Pulumi.yaml")?;
    let v: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| {
        Error::config(format!(
            "{}: invalid YAML: {}",
            display_path(file),
            super::yaml::scrub(&e.to_string())
        ))
    })?;
    let name = v
        .get("name")
        .and_then(|n| n.as_str())
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            Error::config(format!(
                "{}: has no `name:`, and a Pulumi project needs a `name:` (the Pulumi project name).",
                display_path(file)
            ))
        })?;
    let runtime = match v.get("runtime") {
        Some(serde_yaml::Value::String(r)) => r.clone(),
        Some(r) => r
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or("")
            .to_string(),
        None => String::new(),
    };
    let runtime_options = v
        .get("runtime")
        .and_then(|r| r.get("options"))
        .and_then(|o| o.as_mapping())
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| {
                    let value = match v {
                        serde_yaml::Value::String(s) => s.clone(),
                        serde_yaml::Value::Bool(b) => b.to_string(),
                        serde_yaml::Value::Number(n) => n.to_string(),
                        _ => return None,
                    };
                    Some((k.as_str()?.to_string(), value))
                })
                .collect()
        })
        .unwrap_or_default();
    let text_of = |v: Option<&serde_yaml::Value>| {
        v.and_then(|c| c.as_str())
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::to_string)
    };
    Ok(PulumiMeta {
        name: name.to_string(),
        runtime,
        runtime_options,
        backend_url: text_of(v.get("backend").and_then(|b| b.get("url"))),
        config_dir: text_of(v.get("stackConfigDir")).or_else(|| text_of(v.get("config"))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workspace::profile::tests_support::files;

    #[test]
    fn detects_both_kinds() {
        let d = files(&[
            ("a/vpc/Pulumi.yaml", "name: aws-vpc\nruntime: yaml\n"),
            ("u/build/Strata.yaml", "up: make\ndestroy: rm -rf out\n"),
        ]);
        let src = d.path().join("p.yaml");
        let p = load(d.path(), "a/vpc", &src).unwrap();
        assert_eq!(p.name(), "aws-vpc");
        let c = load(d.path(), "u/build", &src).unwrap();
        assert_eq!(c.name(), "build");
        assert_eq!(c.kind_str(), "command");
    }

    #[test]
    fn missing_dir_and_empty_dir_are_errors() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("p.yaml");
        let e = load(d.path(), "nope", &src).unwrap_err();
        e.assert_says("does not exist");
        assert!(!e.message.contains("Did you mean"), "{e:?}");
        std::fs::create_dir_all(d.path().join("empty")).unwrap();
        let e = load(d.path(), "empty", &src).unwrap_err();
        e.assert_says("neither Pulumi.yaml nor Strata.yaml");
    }

    #[test]
    fn runtime_and_its_scalar_options_are_read() {
        let d = files(&[(
            "py/Pulumi.yaml",
            "name: py\nruntime:\n  name: python\n  options:\n    toolchain: uv\n    virtualenv: .venv\n    typechecker: {x: 1}\n",
        )]);
        let meta = read_pulumi_yaml(&d.path().join("py/Pulumi.yaml")).unwrap();
        assert_eq!(meta.runtime, "python");
        let opts: Vec<(&str, &str)> = meta
            .runtime_options
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(opts, [("toolchain", "uv"), ("virtualenv", ".venv")]);
        let p = load(d.path(), "py", &d.path().join("p.yaml")).unwrap();
        let ProjectKind::Pulumi { runtime, .. } = &p.kind else {
            panic!("a Pulumi project");
        };
        assert_eq!(runtime, "python");
    }

    #[test]
    fn a_mistyped_path_gets_the_nearest_project_folder() {
        let d = files(&[
            ("infra/vpc/Pulumi.yaml", "name: vpc\nruntime: yaml\n"),
            ("infra/eks/Pulumi.yml", "name: eks\nruntime: yaml\n"),
            ("tools/build/Strata.yaml", "up: make\ndestroy: true\n"),
            (
                "infra/vpc/node_modules/x/Pulumi.yaml",
                "name: x\nruntime: yaml\n",
            ),
        ]);
        let src = d.path().join("p.yaml");
        let e = load(d.path(), "infra/vcp", &src).unwrap_err();
        e.assert_says("Did you mean `infra/vpc`?");
        let e = load(d.path(), "tools/biuld", &src).unwrap_err();
        e.assert_says("Did you mean `tools/build`?");
        let mut found = project_folders(d.path());
        found.sort();
        assert_eq!(found, ["infra/eks", "infra/vpc", "tools/build"]);
    }

    #[test]
    fn strata_yaml_refuses_unknown_fields() {
        let d = files(&[("c/Strata.yaml", "up: a\ndestroy: b\nupp: c\n")]);
        let e = load(d.path(), "c", &d.path().join("p.yaml")).unwrap_err();
        e.assert_says("unknown field");
    }
}
