//! A stack config in Pulumi's own format (`Pulumi.<stack>.yaml`): the one the profile
//! shares with every project (`config/pulumi/`), and a project's own, which strata reads
//! and lays the profile's keys over, never writes. Unknown keys and `secure:` values
//! survive a rewrite; the secrets provider it names is read as Pulumi reads it.

use std::path::{Path, PathBuf};

use serde_yaml::{Mapping, Value};

use crate::error::{Error, Result};
use crate::util::display_path;

pub const INFRA_TYPE_KEY: &str = "kubernetes:infra_type";

/// The top-level keys with which a stack config names its secrets provider.
const SECRETS_PROVIDER_KEYS: [&str; 3] = ["secretsprovider", "encryptedkey", "encryptionsalt"];

/// Whether a stack whose config names `provider` (`None`: none) on the backend `url`
/// encrypts with Pulumi's passphrase: named so, or named none on a self-managed backend
/// (Pulumi Cloud's default is its own service).
pub fn uses_passphrase(provider: Option<&str>, url: &str) -> bool {
    match provider {
        Some(p) => p == "passphrase",
        None => !(url.starts_with("https://") || url.starts_with("http://")),
    }
}

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

    /// A project's own stack config as Pulumi reads it: `Ok(None)` when missing; a file
    /// without `config:` (what `pulumi stack init` leaves: only its secrets provider) or
    /// empty is an empty config.
    pub fn load_project(path: &Path) -> Result<Option<StackConfig>> {
        if !path.exists() {
            return Ok(None);
        }
        let text = super::yaml::read(path, "A stack config")?;
        let doc = match serde_yaml::from_str::<Value>(&text) {
            Ok(Value::Mapping(m)) => m,
            Ok(Value::Null) => Mapping::new(),
            Ok(_) => Mapping::from_iter([("config".into(), Value::Bool(false))]),
            Err(e) => {
                return Err(Error::config(format!(
                    "{}: invalid YAML: {}\n  Pulumi cannot read it either: fix the file.",
                    display_path(path),
                    super::yaml::scrub(&e.to_string())
                )));
            }
        };
        let mut cfg = StackConfig {
            path: path.to_path_buf(),
            doc,
        };
        match cfg.doc.get("config") {
            None | Some(Value::Null) => {
                cfg.config_mut();
            }
            Some(Value::Mapping(_)) => {}
            Some(_) => {
                return Err(Error::config(format!(
                    "{}: a stack config is a mapping whose `config:` maps `namespace:key` to values, as Pulumi writes it",
                    display_path(path)
                )));
            }
        }
        Ok(Some(cfg))
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

    /// Whether the file names its stack's secrets provider: `secretsprovider:`,
    /// `encryptedkey:` or `encryptionsalt:` (what Pulumi writes for each provider).
    pub fn names_secrets_provider(&self) -> bool {
        SECRETS_PROVIDER_KEYS
            .iter()
            .any(|k| self.doc.get(*k).is_some_and(|v| !v.is_null()))
    }

    /// The secrets provider this file gives its stack, as Pulumi reads it: `passphrase`
    /// for an `encryptionsalt:` or `secretsprovider: passphrase`, a KMS/Vault URL or
    /// `service`; `None` when it names none (the backend's default then applies).
    pub fn secrets_provider(&self) -> Option<String> {
        let named = self
            .doc
            .get("secretsprovider")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|p| !p.is_empty() && *p != "default");
        match named {
            Some(p) => Some(p.to_string()),
            None if self.encryption_salt().is_some_and(|v| !v.is_null()) => {
                Some("passphrase".to_string())
            }
            None => None,
        }
    }

    /// Takes `from`'s secrets provider keys in place of this file's.
    pub fn take_secrets_provider(&mut self, from: &StackConfig) {
        for k in SECRETS_PROVIDER_KEYS {
            match from.doc.get(k) {
                Some(v) => {
                    self.doc.insert(k.into(), v.clone());
                }
                None => {
                    self.doc.remove(k);
                }
            }
        }
    }

    /// The `secure:` keys of the file.
    pub fn secure_keys(&self) -> Vec<String> {
        self.config()
            .iter()
            .filter(|(_, v)| v.get("secure").is_some())
            .filter_map(|(k, _)| k.as_str().map(str::to_string))
            .collect()
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

/// What a project runs with: its own stack config (`own`, as Pulumi reads it; `None`
/// when it has none) with what the profile owns laid over it, in this order: the shared
/// stack config's keys, the entry's `config:`, the wired inputs. The secrets provider is
/// the project's own when its file names one, else the shared file's. Refused when the
/// shared file's `secure:` values cannot be read under the project's own provider.
pub struct Layers<'a> {
    pub own: Option<&'a StackConfig>,
    pub shared: &'a StackConfig,
    pub entry: &'a Mapping,
    pub inputs: &'a [(String, Value)],
}

/// Where a key strata sends comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layer {
    Shared,
    Entry,
    Input,
}

impl Layer {
    pub fn describe(self) -> &'static str {
        match self {
            Layer::Shared => "the shared stack config",
            Layer::Entry => "the entry's config:",
            Layer::Input => "an input",
        }
    }
}

impl Layers<'_> {
    /// The keys the profile lays over the project's own, with where each comes from
    /// (a later layer wins).
    pub fn laid(&self) -> Vec<(String, Value, Layer)> {
        let mut out: Vec<(String, Value, Layer)> = Vec::new();
        let mut put = |k: &str, v: &Value, layer: Layer| {
            out.retain(|(have, ..)| have != k);
            out.push((k.to_string(), v.clone(), layer));
        };
        for (k, v) in self.shared.config() {
            if let Some(k) = k.as_str() {
                put(k, v, Layer::Shared);
            }
        }
        for (k, v) in self.entry {
            if let Some(k) = k.as_str() {
                put(k, v, Layer::Entry);
            }
        }
        for (k, v) in self.inputs {
            put(k, v, Layer::Input);
        }
        out
    }

    /// The keys of the project's own file that the profile sets to another value: the
    /// key, its own value, the value sent and where that comes from.
    pub fn overridden(&self) -> Vec<(String, Value, Value, Layer)> {
        let Some(own) = self.own else {
            return Vec::new();
        };
        self.laid()
            .into_iter()
            .filter_map(|(k, sent, layer)| {
                let mine = own.get(&k)?;
                (*mine != sent).then(|| (k, mine.clone(), sent, layer))
            })
            .collect()
    }

    /// The config the project runs with, at `path` (not written).
    pub fn build(&self, path: &Path) -> std::result::Result<StackConfig, String> {
        let mut cfg = match self.own {
            Some(own) => StackConfig {
                path: path.to_path_buf(),
                doc: own.doc.clone(),
            },
            None => StackConfig::new(path),
        };
        let own_provider = self.own.is_some_and(StackConfig::names_secrets_provider);
        if own_provider {
            self.check_shared_secrets()?;
        } else {
            cfg.take_secrets_provider(self.shared);
        }
        for (k, v, _) in self.laid() {
            cfg.set(&k, v);
        }
        Ok(cfg)
    }

    /// The shared file's `secure:` values are encrypted under its own salt: laid over a
    /// project whose file names another provider, Pulumi could not read them.
    fn check_shared_secrets(&self) -> std::result::Result<(), String> {
        let (Some(own), keys) = (self.own, self.shared.secure_keys()) else {
            return Ok(());
        };
        let same = |k: &str| own.doc.get(k) == self.shared.doc.get(k);
        if keys.is_empty() || SECRETS_PROVIDER_KEYS.iter().all(|k| same(k)) {
            return Ok(());
        }
        Err(format!(
            "{} holds secure values ({}) encrypted for its own secrets provider, and {} names another: Pulumi could not decrypt them there. Nothing of this project was run.\n  Keep such a secret in strata's store instead (`strata secrets set KEY`, listed under the profile's `secrets:`), or set it in the project's own file with `pulumi config set --secret`.",
            display_path(&self.shared.path),
            keys.join(", "),
            display_path(&own.path)
        ))
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
