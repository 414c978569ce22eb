//! `config/pulumi/Pulumi.<stack>.yaml`: the stack config shared by every project, in
//! Pulumi's own format. Unknown keys and `secure:` values survive a rewrite.

use std::path::{Path, PathBuf};

use serde_yaml::{Mapping, Value};

use crate::error::{Error, Result};
use crate::util::display_path;

pub const INFRA_TYPE_KEY: &str = "kubernetes:infra_type";

#[derive(Debug, Clone)]
pub struct StackConfig {
    pub path: PathBuf,
    /// The whole document (`config:`, `encryptionsalt:`, anything else), in file order.
    doc: Mapping,
}

impl StackConfig {
    pub fn path_for(root: &Path, stack: &str) -> PathBuf {
        root.join("config/pulumi")
            .join(format!("Pulumi.{stack}.yaml"))
    }

    /// Loads the stack config. `Ok(None)` when the file is missing or empty (a first run).
    pub fn load(path: &Path) -> Result<Option<StackConfig>> {
        if !path.exists() {
            return Ok(None);
        }
        let text = super::yaml::read(path, "The stack config")?;
        if text.trim().is_empty() {
            return Ok(None);
        }
        let value: Value = serde_yaml::from_str(&text).map_err(|e| {
            Error::config(format!(
                "{}: invalid YAML: {}\n  Fix the file, or delete it to be asked for the stack's settings again.",
                display_path(path),
                super::yaml::scrub(&e.to_string())
            ))
        })?;
        let doc = match value {
            Value::Mapping(m) => m,
            Value::Null => return Ok(None),
            _ => {
                return Err(Error::config(format!(
                    "{}: the stack config must be a mapping with a `config:` key (Pulumi's stack settings format)",
                    display_path(path)
                )));
            }
        };
        match doc.get("config") {
            Some(Value::Mapping(_)) => {}
            Some(Value::Null) | None => {
                return Err(Error::config(format!(
                    "{}: there is no `config:` map in this stack config.\n  Add one (for example `config:\\n  kubernetes:infra_type: AWS`), or delete the file to be asked for the stack's settings again.",
                    display_path(path)
                )));
            }
            Some(_) => {
                return Err(Error::config(format!(
                    "{}: `config:` must be a map of `namespace:key: value`",
                    display_path(path)
                )));
            }
        }
        Ok(Some(StackConfig {
            path: path.to_path_buf(),
            doc,
        }))
    }

    /// A new, empty stack config at `path` (not yet written).
    pub fn new(path: &Path) -> StackConfig {
        let mut doc = Mapping::new();
        doc.insert("config".into(), Value::Mapping(Mapping::new()));
        StackConfig {
            path: path.to_path_buf(),
            doc,
        }
    }

    pub fn config(&self) -> &Mapping {
        static EMPTY: std::sync::OnceLock<Mapping> = std::sync::OnceLock::new();
        match self.doc.get("config") {
            Some(Value::Mapping(m)) => m,
            _ => EMPTY.get_or_init(Mapping::new),
        }
    }

    fn config_mut(&mut self) -> &mut Mapping {
        if !matches!(self.doc.get("config"), Some(Value::Mapping(_))) {
            self.doc
                .insert("config".into(), Value::Mapping(Mapping::new()));
        }
        match self.doc.get_mut("config") {
            Some(Value::Mapping(m)) => m,
            _ => unreachable!("config was just made a mapping"),
        }
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.config().get(key)
    }

    pub fn has(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| !v.is_null())
    }

    pub fn set(&mut self, key: &str, value: Value) {
        self.config_mut().insert(key.into(), value);
    }

    /// Sets a top-level key of the document (`encryptionsalt`, ...).
    pub fn set_top(&mut self, key: &str, value: Value) {
        self.doc.insert(key.into(), value);
    }

    pub fn infra_type(&self) -> Option<String> {
        self.get(INFRA_TYPE_KEY).and_then(scalar_string)
    }

    pub fn encryption_salt(&self) -> Option<&Value> {
        self.doc.get("encryptionsalt")
    }

    /// The document as YAML text.
    pub fn to_yaml(&self) -> Result<String> {
        serde_yaml::to_string(&self.doc).map_err(|e| {
            Error::failed(format!(
                "could not serialise {}: {e}",
                display_path(&self.path)
            ))
        })
    }

    /// A copy of the document with extra config values (for a per-project config file).
    pub fn with_values(&self, extra: &[(String, Value)]) -> StackConfig {
        let mut copy = self.clone();
        for (k, v) in extra {
            copy.set(k, v.clone());
        }
        copy
    }

    /// Writes the file atomically (temp file + rename).
    pub fn save(&self) -> Result<()> {
        crate::files::write_atomic(&self.path, self.to_yaml()?.as_bytes(), None)
    }

    /// Writes the document to another path (atomically).
    pub fn save_to(&self, path: &Path) -> Result<()> {
        crate::files::write_atomic(path, self.to_yaml()?.as_bytes(), Some(0o600))
    }
}

/// A scalar YAML value as a string (`3` -> "3", `true` -> "true"); None for maps, lists, null.
pub fn scalar_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_empty_is_first_run() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("Pulumi.dev.yaml");
        assert!(StackConfig::load(&p).unwrap().is_none());
        std::fs::write(&p, "  \n").unwrap();
        assert!(StackConfig::load(&p).unwrap().is_none());
    }

    /// A `Pulumi.dev.yaml` holding `text`, in a temporary folder.
    fn stack_file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("Pulumi.dev.yaml");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    #[test]
    fn without_config_key_is_an_error() {
        let (_d, p) = stack_file("encryptionsalt: v1:abc\n");
        let e = StackConfig::load(&p).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.message.contains("config:"));
    }

    #[test]
    fn invalid_yaml_names_line() {
        let (_d, p) = stack_file("config:\n  a: [1, 2\n");
        let e = StackConfig::load(&p).unwrap_err();
        e.assert_says("line");
    }

    #[test]
    fn round_trip_keeps_unknown_keys_and_secure_values() {
        let (_d, p) = stack_file(
            "encryptionsalt: v1:salt\nconfig:\n  aws:region: us-west-2\n  db:pass:\n    secure: v1:AAAA\n  eks:min: 3\nenvironment:\n  - shared\n",
        );
        let mut c = StackConfig::load(&p).unwrap().unwrap();
        c.set(INFRA_TYPE_KEY, "AWS".into());
        c.save().unwrap();
        let again = StackConfig::load(&p).unwrap().unwrap();
        assert_eq!(again.infra_type().as_deref(), Some("AWS"));
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.contains("secure: v1:AAAA"), "{text}");
        assert!(text.contains("encryptionsalt: v1:salt"));
        assert!(text.contains("environment:"));
        assert_eq!(again.get("eks:min"), Some(&Value::from(3)));
    }
}
