//! The kubeconfig to merge: parsed (YAML, JSON, base64 of either, or a string holding
//! one) and cut down to one context, its cluster and its user, renamed to the hook's name.

use base64::Engine;
use serde_yaml::{Mapping, Value};

use super::error::{KubeconfigError, yaml_error};

/// Parses the new kubeconfig: YAML (JSON included), base64 of it, or a YAML
/// string scalar holding either (as a JSON-encoded output would be).
pub(super) fn parse_new(text: &str) -> Result<Mapping, KubeconfigError> {
    let mut text = text.trim().to_string();
    let mut last_error = None;
    for _ in 0..3 {
        if text.is_empty() {
            return Err(KubeconfigError::Empty);
        }
        match serde_yaml::from_str::<Value>(&text) {
            Ok(Value::Mapping(mapping)) if mapping.is_empty() => {
                return Err(KubeconfigError::Empty);
            }
            Ok(Value::Mapping(mapping)) => return Ok(mapping),
            Ok(Value::Null) => return Err(KubeconfigError::Empty),
            Ok(Value::String(inner)) => {
                // A quoted document, or base64 (which YAML reads as a string).
                match decode_base64(&inner) {
                    Some(decoded) => text = decoded,
                    None if inner.trim() != text => text = inner.trim().to_string(),
                    None => break,
                }
            }
            Ok(_) => {
                return Err(KubeconfigError::BadNew {
                    problem: "it is not a mapping with `clusters`, `users` and `contexts`".into(),
                });
            }
            Err(e) => {
                last_error = Some(yaml_error(&e));
                match decode_base64(&text) {
                    Some(decoded) => text = decoded,
                    None => break,
                }
            }
        }
    }
    Err(KubeconfigError::InvalidNew {
        detail: last_error.unwrap_or_else(|| "a plain string".into()),
    })
}

/// Base64 (standard or URL-safe, padding optional, whitespace ignored) of
/// UTF-8 text.
fn decode_base64(text: &str) -> Option<String> {
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    if compact.is_empty() {
        return None;
    }
    let trimmed = compact.trim_end_matches('=');
    let engines = [
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ];
    let bytes = engines.iter().find_map(|e| e.decode(trimmed).ok())?;
    String::from_utf8(bytes).ok()
}

/// Picks the context to make current (the current-context, or the only one) and
/// returns a kubeconfig of just it, its cluster and its user, all three called `name`.
pub(super) fn rename_to(new: Mapping, name: &str) -> Result<(Mapping, String), KubeconfigError> {
    let bad = |problem: String| KubeconfigError::BadNew { problem };
    if name.trim().is_empty() {
        return Err(bad("the name given to the hook is empty".into()));
    }
    let contexts = named_entries(&new, "contexts").map_err(bad)?;
    let names: Vec<&String> = contexts.iter().map(|(n, _)| n).collect();
    let current = new
        .get("current-context")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .map(str::to_string);
    let chosen = match (current, names.as_slice()) {
        (_, []) => return Err(bad("it has no contexts".into())),
        (Some(current), _) if names.contains(&&current) => current,
        (Some(current), _) => {
            return Err(bad(format!(
                "its current-context `{current}` is not one of its contexts"
            )));
        }
        (None, [only]) => (*only).clone(),
        (None, _) => {
            return Err(bad(format!(
                "it has {} contexts and no current-context",
                names.len()
            )));
        }
    };
    let mut context = contexts
        .into_iter()
        .find(|(n, _)| *n == chosen)
        .map(|(_, v)| v)
        .unwrap_or_default();
    let field = |v: &Value, key: &str| {
        v.get("context")
            .and_then(|c| c.get(key))
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut out = Mapping::new();
    for (section, key) in [("clusters", "cluster"), ("users", "user")] {
        let Some(wanted) = field(&context, key) else {
            return Err(bad(format!("its context `{chosen}` names no {key}")));
        };
        let entry = named_entries(&new, section)
            .map_err(bad)?
            .into_iter()
            .find(|(n, _)| *n == wanted)
            .map(|(_, v)| v)
            .ok_or_else(|| {
                bad(format!(
                    "its context `{chosen}` names {key} `{wanted}`, which it does not define"
                ))
            })?;
        out.insert(section.into(), Value::Sequence(vec![renamed(entry, name)]));
        if let Some(Value::Mapping(c)) = context.get_mut("context") {
            c.insert(key.into(), Value::String(name.to_string()));
        }
    }
    out.insert(
        "contexts".into(),
        Value::Sequence(vec![renamed(context, name)]),
    );
    Ok((out, name.to_string()))
}

fn renamed(mut entry: Value, name: &str) -> Value {
    if let Value::Mapping(m) = &mut entry {
        m.insert("name".into(), Value::String(name.to_string()));
    }
    entry
}

/// The entries of a `clusters`/`users`/`contexts` list with their names.
pub(super) fn named_entries(
    config: &Mapping,
    section: &str,
) -> Result<Vec<(String, Value)>, String> {
    let entries = match config.get(section) {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Sequence(entries)) => entries,
        Some(_) => return Err(format!("`{section}` is not a list")),
    };
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            match entry
                .get("name")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
            {
                Some(name) => Ok((name.to_string(), entry.clone())),
                None => Err(format!("entry {} of `{section}` has no name", i + 1)),
            }
        })
        .collect()
}
