//! The Pulumi project: finding `Pulumi.yaml` upwards from the working directory.

use serde_yaml::Value as Yaml;
use std::path::{Path, PathBuf};

use crate::error::{Fail, Result};

/// A loaded `Pulumi.yaml` (or `.yml`).
#[derive(Debug, Clone)]
pub struct Project {
    pub name: String,
    /// The directory holding the project file.
    pub dir: PathBuf,
    /// `yaml` or `yml`: the stack config file uses the same extension.
    pub ext: String,
    pub doc: Yaml,
}

impl Project {
    /// `backend.url` of the project file, when set.
    pub fn backend_url(&self) -> Option<String> {
        self.doc
            .get("backend")?
            .get("url")?
            .as_str()
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .map(str::to_string)
    }

    /// Searches `start` and its ancestors, as Pulumi does.
    pub fn find(start: &Path) -> Result<Project> {
        let mut dir = Some(start);
        while let Some(d) = dir {
            for ext in ["yaml", "yml"] {
                let file = d.join(format!("Pulumi.{ext}"));
                if file.is_file() {
                    return Project::load(&file, ext);
                }
            }
            dir = d.parent();
        }
        Err(Fail::error(format!(
            "no Pulumi.yaml project file found (searching upwards from {}). If you have not \
             created a project yet, use `pulumi new` to do so: no project file found",
            start.display()
        )))
    }

    fn load(file: &Path, ext: &str) -> Result<Project> {
        let text = std::fs::read_to_string(file).map_err(|e| Fail::io("reading", file, e))?;
        let doc: Yaml = serde_yaml::from_str(&text).map_err(|e| {
            Fail::error(format!(
                "could not read project file {}: {e}",
                file.display()
            ))
        })?;
        let name = doc
            .get("name")
            .and_then(Yaml::as_str)
            .filter(|n| !n.is_empty())
            .ok_or_else(|| {
                Fail::error(format!(
                    "failed to validate '{}': project is missing a 'name' attribute",
                    file.display()
                ))
            })?
            .to_string();
        Ok(Project {
            name,
            dir: file.parent().unwrap_or(Path::new(".")).to_path_buf(),
            ext: ext.to_string(),
            doc,
        })
    }

    /// `Pulumi.<stack>.yaml` beside the project file (or in `stackConfigDir`).
    pub fn stack_config_path(&self, stack: &str) -> PathBuf {
        let dir = match self.doc.get("stackConfigDir").and_then(Yaml::as_str) {
            Some(sub) => self.dir.join(sub),
            None => self.dir.clone(),
        };
        dir.join(format!("Pulumi.{stack}.{}", self.ext))
    }

    /// The project name as used in the test hooks' variable names.
    pub fn env_key(&self) -> String {
        env_key(&self.name)
    }

    /// A config key as stored: `key` becomes `<project>:key`.
    pub fn qualify(&self, key: &str) -> String {
        qualify(&self.name, key)
    }
}

/// Upper-cased, every non-alphanumeric character as `_`.
pub fn env_key(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

pub fn qualify(project: &str, key: &str) -> String {
    if key.contains(':') {
        key.to_string()
    } else {
        format!("{project}:{key}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_keys() {
        assert_eq!(env_key("my-app.v2"), "MY_APP_V2");
        assert_eq!(qualify("eks", "vpc_id"), "eks:vpc_id");
        assert_eq!(qualify("eks", "aws:region"), "aws:region");
    }
}
