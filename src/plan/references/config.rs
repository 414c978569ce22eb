//! Config in stack names: which expressions read a config key (`config.require("k")`,
//! `pulumi.Config("ns").get("k")`, `new pulumi.Config().require("k")`,
//! `cfg.Require("k")`, `config.Require(ctx, "k")`) and under which key Pulumi reads it
//! (`namespace:key`); and the value of a key for a stack: the project's own
//! `Pulumi.<stack>.yaml` (beside its Pulumi.yaml or in its `stackConfigDir:`), then a
//! shared file the caller names, then the defaults of its Pulumi.yaml. `secure:`
//! values are never read.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_yaml::Value;

use super::Part;
use super::facts::Place;
use super::lex::Lang;
use super::strings::{call_of, is_name, literal};

/// The methods of a config object that return a string, per language.
fn string_methods(lang: Lang) -> &'static [&'static str] {
    match lang {
        Lang::Python => &["require", "get", "require_secret", "get_secret"],
        Lang::Js => &["require", "get", "requireSecret", "getSecret"],
        Lang::Go => &["Require", "Get", "RequireSecret", "GetSecret"],
    }
}

/// The methods that return something else (an object, a number): never a stack name.
fn other_methods(lang: Lang) -> &'static [&'static str] {
    match lang {
        Lang::Python => &[
            "require_object",
            "get_object",
            "require_int",
            "get_int",
            "require_bool",
            "get_bool",
            "require_float",
            "get_float",
        ],
        Lang::Js => &[
            "requireObject",
            "getObject",
            "requireNumber",
            "getNumber",
            "requireBoolean",
            "getBoolean",
        ],
        Lang::Go => &[
            "RequireObject",
            "GetObject",
            "RequireInt",
            "GetInt",
            "RequireBool",
            "GetBool",
            "RequireFloat64",
            "GetFloat64",
        ],
    }
}

/// What `term` reads from config: [`Part::Config`] with the key as Pulumi reads it,
/// [`Part::Unknown`] for a read of something that is no string or of a key the scanner
/// cannot tell; `None` when `term` is no config read.
pub(super) fn read(place: Place, project: &str, term: &str) -> Option<Part> {
    let lang = place.lang;
    let methods = string_methods(lang).iter().chain(other_methods(lang));
    let (receiver, method, args) = methods
        .into_iter()
        .find_map(|m| method_call(term, m, lang))?;
    let strings = string_methods(lang).contains(&method);
    // Go's package functions: `config.Require(ctx, "k")`.
    if lang == Lang::Go && receiver == "config" && args.len() == 2 {
        let key = literal(&args[1]);
        return Some(match key {
            Some(k) if strings && k.contains(':') => Part::Config(k),
            Some(k) if strings => Part::Config(format!("{project}:{k}")),
            _ => Part::Unknown,
        });
    }
    let namespace = namespace(place, project, receiver)?;
    let key = args.first().and_then(|a| literal(a));
    Some(match (namespace, key) {
        (Some(ns), Some(k)) if strings => Part::Config(format!("{ns}:{k}")),
        _ => Part::Unknown,
    })
}

/// `receiver.method(args)` when `term` is exactly that call.
fn method_call<'t>(
    term: &'t str,
    method: &'static str,
    lang: Lang,
) -> Option<(&'t str, &'static str, Vec<String>)> {
    let needle = format!(".{method}(");
    let mut from = term.len();
    while let Some(at) = term[..from].rfind(&needle) {
        if let Some(args) = call_of(&term[at + 1..], &[method], lang) {
            return Some((term[..at].trim(), method, args));
        }
        from = at;
    }
    None
}

/// The namespace a config object reads: `Some(Some(ns))`, `Some(None)` when it is a
/// config object whose namespace the scanner cannot tell, `None` when `receiver` is no
/// config object.
fn namespace(place: Place, project: &str, receiver: &str) -> Option<Option<String>> {
    if let Some(ns) = constructed(place.lang, project, receiver) {
        return Some(ns);
    }
    if !is_name(receiver) || receiver.contains('.') {
        return None;
    }
    let assigned = place.facts.and_then(|f| f.assigned.get(receiver));
    if let Some([one]) = assigned.map(Vec::as_slice) {
        return constructed(place.lang, project, one);
    }
    let lower = receiver.to_ascii_lowercase();
    (assigned.is_none() && ["config", "cfg", "conf"].iter().any(|c| lower.contains(c)))
        .then(|| Some(project.to_string()))
}

/// The namespace of a config object made by `e` (`pulumi.Config("ns")`,
/// `new pulumi.Config()`, `config.New(ctx, "ns")`), the project's when it names none.
fn constructed(lang: Lang, project: &str, e: &str) -> Option<Option<String>> {
    let e = e.trim();
    let e = e.strip_prefix("new ").unwrap_or(e).trim_start();
    let arg = match lang {
        Lang::Go => call_of(e, &["config.New"], lang)?.get(1).cloned(),
        _ => call_of(e, &["pulumi.Config", "Config"], lang)?
            .first()
            .cloned(),
    };
    Some(match arg.map(|a| literal(&a)) {
        None => Some(project.to_string()),
        Some(Some(ns)) if ns.is_empty() => Some(project.to_string()),
        Some(Some(ns)) => Some(ns),
        Some(None) => None,
    })
}

/// A YAML document, unless it nests too deep or expands too far (aliases).
pub(super) fn parse_yaml(text: &str) -> Option<Value> {
    use crate::workspace::yaml;
    if yaml::too_deep(text, yaml::MAX_DEPTH).is_some()
        || yaml::expands_past(text, yaml::expansion_limit(text.len()))
    {
        return None;
    }
    serde_yaml::from_str(text).ok()
}

/// The folder of a project's stack configs: the one its Pulumi.yaml names
/// (`stackConfigDir:`, or the older `config:` as a folder), else its own.
pub fn stack_config_dir(project_dir: &Path) -> PathBuf {
    let doc = ["Pulumi.yaml", "Pulumi.yml"]
        .iter()
        .find_map(|f| std::fs::read_to_string(project_dir.join(f)).ok())
        .and_then(|t| parse_yaml(&t));
    let named = doc.as_ref().and_then(|d| {
        ["stackConfigDir", "config"]
            .iter()
            .find_map(|k| d.get(k).and_then(Value::as_str).map(str::to_string))
    });
    match named {
        Some(dir) => project_dir.join(dir),
        None => project_dir.to_path_buf(),
    }
}

/// The stacks a project has a stack config for (`Pulumi.<stack>.yaml` in its stack
/// config folder), sorted.
pub fn stacks_of(project_dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(stack_config_dir(project_dir)) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let rest = name.strip_prefix("Pulumi.")?;
            let stack = rest.strip_suffix(".yaml").or(rest.strip_suffix(".yml"))?;
            crate::workspace::valid_stack_name(stack).then(|| stack.to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The config values of one project for one stack: key (`namespace:key`) → value,
/// `None` for a `secure:` one (never read) or one that is no scalar.
#[derive(Debug, Default, Clone)]
pub struct StackValues {
    values: BTreeMap<String, Option<String>>,
}

impl StackValues {
    /// The values of project `project` (its folder `project_dir`) for `stack`, as its
    /// run gets them: its own stack config, with the `shared` file's keys (the profile's)
    /// laid over it.
    pub fn load(project_dir: &Path, project: &str, stack: &str, shared: Option<&Path>) -> Self {
        let mut out = StackValues::default();
        out.add_defaults(project_dir, project);
        let dir = stack_config_dir(project_dir);
        for ext in ["yml", "yaml"] {
            out.add(&dir.join(format!("Pulumi.{stack}.{ext}")), project);
        }
        if let Some(file) = shared {
            out.add(file, project);
        }
        out
    }

    /// Adds the defaults the project's Pulumi.yaml declares (`config: {key: {default:
    /// v}}` or `config: {key: v}`): below every stack config.
    fn add_defaults(&mut self, project_dir: &Path, project: &str) {
        let doc = ["Pulumi.yaml", "Pulumi.yml"]
            .iter()
            .find_map(|f| std::fs::read_to_string(project_dir.join(f)).ok())
            .and_then(|t| parse_yaml(&t));
        let Some(config) = doc.as_ref().and_then(|d| d.get("config")?.as_mapping()) else {
            return;
        };
        for (k, v) in config {
            let value = v.get("default").unwrap_or(v);
            if let (Some(k), Some(value)) = (k.as_str(), scalar(value)) {
                self.values.insert(qualified(project, k), Some(value));
            }
        }
    }

    /// Adds the values of the stack config `file` (its keys without a namespace are
    /// `project`'s), over those already known.
    fn add(&mut self, file: &Path, project: &str) {
        let Some(doc) = std::fs::read_to_string(file)
            .ok()
            .and_then(|t| parse_yaml(&t))
        else {
            return;
        };
        let Some(config) = doc.get("config").and_then(Value::as_mapping) else {
            return;
        };
        for (k, v) in config {
            let Some(k) = k.as_str() else { continue };
            self.values.insert(qualified(project, k), scalar(v));
        }
    }

    /// The value of `key` (`namespace:key`), unless it is unset or secret.
    pub fn get(&self, key: &str) -> Option<String> {
        self.values.get(key).cloned().flatten()
    }
}

/// A key as Pulumi reads it: `namespace:key`, the project's name when it has none.
fn qualified(project: &str, key: &str) -> String {
    if key.contains(':') {
        key.to_string()
    } else {
        format!("{project}:{key}")
    }
}

/// A scalar value as text; `None` for a `secure:` one, a map or a list.
fn scalar(v: &Value) -> Option<String> {
    crate::workspace::stack_config::scalar_string(v)
}

/// The value of config `key` (`namespace:key`) of project `project` for `stack`: its
/// own stack config first, then the `shared` file; `None` when neither sets it, or it
/// is a secret.
pub fn config_value(
    project_dir: &Path,
    project: &str,
    stack: &str,
    key: &str,
    shared: Option<&Path>,
) -> Option<String> {
    StackValues::load(project_dir, project, stack, shared).get(key)
}
