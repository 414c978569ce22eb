//! The stack config file (`Pulumi.<stack>.yaml` or `--config-file`): read, edit, write.

use serde_json::Value;
use serde_yaml::{Mapping, Value as Yaml};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::crypto::Crypter;
use crate::error::{Fail, Result};
use crate::secret;

/// One stack config file, every key kept as read.
#[derive(Debug, Clone)]
pub struct StackConfig {
    pub path: PathBuf,
    pub doc: Mapping,
}

/// One segment of a `--path` key.
#[derive(Debug, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

impl StackConfig {
    /// A missing or empty file reads as an empty config.
    pub fn load(path: &Path) -> Result<StackConfig> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(Fail::io("reading", path, e)),
        };
        let doc = if text.trim().is_empty() {
            Mapping::new()
        } else {
            match serde_yaml::from_str::<Yaml>(&text) {
                Ok(Yaml::Mapping(m)) => m,
                Ok(Yaml::Null) => Mapping::new(),
                Ok(_) | Err(_) => {
                    return Err(Fail::error(format!(
                        "could not parse stack config file {}: not a YAML mapping",
                        path.display()
                    )));
                }
            }
        };
        Ok(StackConfig {
            path: path.to_path_buf(),
            doc,
        })
    }

    pub fn save(&self) -> Result<()> {
        let text = if self.doc.is_empty() {
            String::new()
        } else {
            serde_yaml::to_string(&self.doc).map_err(|e| Fail::error(e.to_string()))?
        };
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Fail::io("creating", dir, e))?;
        }
        // Temp file + rename: a parallel reader never sees a half-written file.
        let name = self.path.file_name().unwrap_or_default().to_string_lossy();
        let tmp = self
            .path
            .with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        std::fs::write(&tmp, text).map_err(|e| Fail::io("writing", &tmp, e))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| Fail::io("writing", &self.path, e))
    }

    pub fn salt(&self) -> Option<&str> {
        self.doc.get("encryptionsalt").and_then(Yaml::as_str)
    }

    /// Sets `encryptionsalt`, keeping every other key (a new one goes first, as Pulumi writes it).
    pub fn set_salt(&mut self, salt: &str) {
        let key = Yaml::from("encryptionsalt");
        if self.doc.contains_key(&key) {
            self.doc.insert(key, Yaml::from(salt));
            return;
        }
        let mut doc = Mapping::new();
        doc.insert(key, Yaml::from(salt));
        for (k, v) in std::mem::take(&mut self.doc) {
            doc.insert(k, v);
        }
        self.doc = doc;
    }

    /// The crypter for this file's salt; writes a new salt into the file when it has none
    /// (pulumi/pulumi#11220). Returns whether the file was written.
    pub fn crypter(&mut self, passphrase: &str) -> Result<(Crypter, bool)> {
        if let Some(salt) = self.salt() {
            return Ok((Crypter::from_salt(passphrase, salt)?, false));
        }
        let (state, c) = Crypter::new_salt(passphrase);
        self.set_salt(&state);
        self.save()?;
        Ok((c, true))
    }

    /// The `config:` map, key → raw YAML value.
    pub fn entries(&self) -> Vec<(String, Yaml)> {
        let Some(Yaml::Mapping(m)) = self.doc.get("config") else {
            return Vec::new();
        };
        m.iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), v.clone())))
            .collect()
    }

    pub fn get(&self, key: &str) -> Option<Yaml> {
        self.entries()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    pub fn has_secure(&self) -> bool {
        self.entries().iter().any(|(_, v)| contains_secure(v))
    }

    /// Every value as JSON, secure ones decrypted and marked secret.
    pub fn decrypted(&self, c: Option<&Crypter>) -> Result<BTreeMap<String, Value>> {
        let mut out = BTreeMap::new();
        for (k, v) in self.entries() {
            let j = to_json(&v, &mut |ct| {
                let c = c.ok_or_else(|| Fail::error("no passphrase to decrypt config"))?;
                c.decrypt(ct).map_err(|e| {
                    Fail::error(format!("could not decrypt configuration value '{k}': {e}"))
                })
            })?;
            out.insert(k, j);
        }
        Ok(out)
    }

    /// Every value as JSON with secure ones blinded as `blind` (no passphrase needed).
    pub fn blinded(&self, blind: &str) -> BTreeMap<String, Value> {
        self.entries()
            .into_iter()
            .map(|(k, v)| {
                let j = to_json(&v, &mut |_| Ok::<_, Fail>(String::new()))
                    .map(|j| blind_secrets(&j, blind))
                    .unwrap_or(Value::Null);
                (k, j)
            })
            .collect()
    }

    /// `config set`: `key` is qualified; with `path`, `key` may hold `.a[0]` segments.
    pub fn set(&mut self, key: &str, value: Yaml, path: bool) -> Result<()> {
        let segs = if path {
            parse_path(key)?
        } else {
            vec![Seg::Key(key.to_string())]
        };
        let config = self
            .doc
            .entry(Yaml::from("config"))
            .or_insert_with(|| Yaml::Mapping(Mapping::new()));
        if !config.is_mapping() {
            *config = Yaml::Mapping(Mapping::new());
        }
        set_path(config, &segs, value)
    }

    /// `config rm`: true if the key was there.
    pub fn remove(&mut self, key: &str) -> bool {
        match self.doc.get_mut("config") {
            Some(Yaml::Mapping(m)) => m.remove(key).is_some(),
            _ => false,
        }
    }
}

/// `{secure: v1:...}`, the form of an encrypted value.
pub fn secure_text(v: &Yaml) -> Option<&str> {
    match v {
        Yaml::Mapping(m) if m.len() == 1 => m.get("secure").and_then(Yaml::as_str),
        _ => None,
    }
}

fn contains_secure(v: &Yaml) -> bool {
    match v {
        _ if secure_text(v).is_some() => true,
        Yaml::Mapping(m) => m.values().any(contains_secure),
        Yaml::Sequence(s) => s.iter().any(contains_secure),
        _ => false,
    }
}

fn blind_secrets(v: &Value, blind: &str) -> Value {
    if secret::is_secret(v) {
        return Value::String(blind.to_string());
    }
    match v {
        Value::Array(a) => Value::Array(a.iter().map(|e| blind_secrets(e, blind)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, e)| (k.clone(), blind_secrets(e, blind)))
                .collect(),
        ),
        _ => v.clone(),
    }
}

/// YAML → JSON; each secure value goes through `decrypt` and comes out marked secret.
fn to_json<E>(
    v: &Yaml,
    decrypt: &mut dyn FnMut(&str) -> std::result::Result<String, E>,
) -> std::result::Result<Value, E> {
    if let Some(ct) = secure_text(v) {
        return Ok(secret::wrap(Value::String(decrypt(ct)?)));
    }
    Ok(match v {
        Yaml::Null => Value::Null,
        Yaml::Bool(b) => Value::Bool(*b),
        Yaml::Number(n) => serde_json::to_value(n).unwrap_or(Value::Null),
        Yaml::String(s) => Value::String(s.clone()),
        Yaml::Sequence(s) => Value::Array(
            s.iter()
                .map(|e| to_json(e, decrypt))
                .collect::<std::result::Result<_, _>>()?,
        ),
        Yaml::Mapping(m) => {
            let mut o = serde_json::Map::new();
            for (k, e) in m {
                let key = match k {
                    Yaml::String(s) => s.clone(),
                    other => serde_yaml::to_string(other)
                        .unwrap_or_default()
                        .trim()
                        .to_string(),
                };
                o.insert(key, to_json(e, decrypt)?);
            }
            Value::Object(o)
        }
        Yaml::Tagged(t) => to_json(&t.value, decrypt)?,
    })
}

/// A config value as the text Pulumi shows: strings as-is, anything else as JSON.
pub fn display_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn parse_path(key: &str) -> Result<Vec<Seg>> {
    let bad = || Fail::error(format!("invalid configuration key path '{key}'"));
    let mut segs = Vec::new();
    let b = key.as_bytes();
    let mut i = 0;
    let mut cur = String::new();
    while i < b.len() {
        match b[i] {
            b'.' => {
                if !cur.is_empty() {
                    segs.push(Seg::Key(std::mem::take(&mut cur)));
                }
                i += 1;
            }
            b'[' => {
                if !cur.is_empty() {
                    segs.push(Seg::Key(std::mem::take(&mut cur)));
                }
                let end = key[i..].find(']').ok_or_else(bad)? + i;
                let inside = &key[i + 1..end];
                if let Some(q) = inside.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
                    segs.push(Seg::Key(q.to_string()));
                } else {
                    segs.push(Seg::Index(inside.parse().map_err(|_| bad())?));
                }
                i = end + 1;
            }
            _ => {
                let ch = key[i..].chars().next().ok_or_else(bad)?;
                cur.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    if !cur.is_empty() {
        segs.push(Seg::Key(cur));
    }
    match segs.first() {
        Some(Seg::Key(_)) => Ok(segs),
        _ => Err(bad()),
    }
}

fn set_path(node: &mut Yaml, segs: &[Seg], value: Yaml) -> Result<()> {
    let Some((first, rest)) = segs.split_first() else {
        *node = value;
        return Ok(());
    };
    let fresh = |next: Option<&Seg>| match next {
        Some(Seg::Index(_)) => Yaml::Sequence(Vec::new()),
        _ => Yaml::Mapping(Mapping::new()),
    };
    match first {
        Seg::Key(k) => {
            if !node.is_mapping() {
                *node = Yaml::Mapping(Mapping::new());
            }
            let m = node.as_mapping_mut().expect("mapping");
            let child = m
                .entry(Yaml::from(k.as_str()))
                .or_insert_with(|| fresh(rest.first()));
            set_path(child, rest, value)
        }
        Seg::Index(n) => {
            if !node.is_sequence() {
                *node = Yaml::Sequence(Vec::new());
            }
            let s = node.as_sequence_mut().expect("sequence");
            if *n > s.len() {
                return Err(Fail::error(format!(
                    "an array index of {n} is out of range; the array has {} elements",
                    s.len()
                )));
            }
            if *n == s.len() {
                s.push(fresh(rest.first()));
            }
            set_path(&mut s[*n], rest, value)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stack config file in a temp folder of its own, removed with the guard.
    fn tmp() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("Pulumi.dev.yaml");
        (d, p)
    }

    #[test]
    fn salt_is_written_into_the_named_file_keeping_other_keys() {
        let (_d, p) = tmp();
        std::fs::write(
            &p,
            "config:\n  aws:region: us-west-2\n  eks:min: 3\nother: kept\n",
        )
        .unwrap();
        let mut c = StackConfig::load(&p).unwrap();
        let (_, wrote) = c.crypter("pw").unwrap();
        assert!(wrote);
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(text.starts_with("encryptionsalt: v1:"), "{text}");
        assert!(text.contains("aws:region: us-west-2") && text.contains("other: kept"));
        // Reused, not rewritten, the second time; a wrong passphrase is refused.
        let mut again = StackConfig::load(&p).unwrap();
        let (_, wrote) = again.crypter("pw").unwrap();
        assert!(!wrote);
        assert_eq!(std::fs::read_to_string(&p).unwrap(), text);
        assert!(again.crypter("bad").is_err());
    }

    #[test]
    fn secure_values_round_trip() {
        let (_d, p) = tmp();
        let mut c = StackConfig::load(&p).unwrap();
        let (cr, _) = c.crypter("pw").unwrap();
        let mut m = Mapping::new();
        m.insert("secure".into(), Yaml::from(cr.encrypt("hunter2")));
        c.set("proj:pw", Yaml::Mapping(m), false).unwrap();
        c.set("proj:plain", Yaml::from("v"), false).unwrap();
        c.save().unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(!text.contains("hunter2"));
        let c = StackConfig::load(&p).unwrap();
        let d = c.decrypted(Some(&cr)).unwrap();
        assert_eq!(secret::inner(&d["proj:pw"]), Some(&Value::from("hunter2")));
        assert_eq!(d["proj:plain"], Value::from("v"));
        assert_eq!(c.blinded("[secret]")["proj:pw"], Value::from("[secret]"));
    }

    #[test]
    fn path_keys() {
        let (_d, p) = tmp();
        let mut c = StackConfig::load(&p).unwrap();
        c.set("proj:data.items[0]", Yaml::from("a"), true).unwrap();
        c.set("proj:data.items[1]", Yaml::from("b"), true).unwrap();
        c.set("proj:data[\"x y\"]", Yaml::from("c"), true).unwrap();
        let d = c.decrypted(None).unwrap();
        assert_eq!(
            d["proj:data"],
            serde_json::json!({"items": ["a", "b"], "x y": "c"})
        );
    }
}
