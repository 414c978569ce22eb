//! Secret values inside JSON trees, marked with Pulumi's secret signature.
//!
//! In memory a secret is `{SIG: SECRET_SIG, "value": <plaintext>}`; in a state file it
//! is `{SIG: SECRET_SIG, "ciphertext": "v1:..."}` (the JSON of the plaintext, encrypted).

use serde_json::{Map, Value, json};

use crate::crypto::Crypter;

pub const SIG: &str = "4dabf18193072939515e22adb298388d";
pub const SECRET_SIG: &str = "1b47061264138c4ac30d75fd1eb44270";
pub const MASK: &str = "[secret]";

/// Marks a value secret (a no-op for a value that already is).
pub fn wrap(v: Value) -> Value {
    if is_secret(&v) {
        return v;
    }
    json!({ SIG: SECRET_SIG, "value": v })
}

/// True for a secret, plaintext or encrypted.
pub fn is_secret(v: &Value) -> bool {
    v.get(SIG).and_then(Value::as_str) == Some(SECRET_SIG)
}

/// The plaintext inside an in-memory secret.
pub fn inner(v: &Value) -> Option<&Value> {
    if is_secret(v) { v.get("value") } else { None }
}

/// Every secret replaced by the string `[secret]`.
pub fn mask(v: &Value) -> Value {
    map_tree(v, &mut |_| Some(Value::String(MASK.into())))
}

/// Every secret as the real CLI serializes it in JSON engine events and the preview
/// digest: Pulumi's blinding crypter keeps the signature and says `[secret]` as the
/// ciphertext (`{"4dabf…": "1b47…", "ciphertext": "[secret]"}`), never a bare string.
pub fn blind(v: &Value) -> Value {
    map_tree(v, &mut |_| {
        Some(json!({ SIG: SECRET_SIG, "ciphertext": MASK }))
    })
}

/// Every in-memory secret replaced by its plaintext.
pub fn reveal(v: &Value) -> Value {
    map_tree(v, &mut |s| {
        Some(reveal(s.get("value").unwrap_or(&Value::Null)))
    })
}

/// True if the tree holds a secret anywhere.
pub fn contains_secret(v: &Value) -> bool {
    match v {
        _ if is_secret(v) => true,
        Value::Array(a) => a.iter().any(contains_secret),
        Value::Object(o) => o.values().any(contains_secret),
        _ => false,
    }
}

/// In-memory secrets → ciphertext form, for writing a state file.
pub fn encrypt_tree(v: &Value, c: &Crypter) -> Value {
    map_tree(v, &mut |s| {
        let plain = reveal(s.get("value")?);
        Some(json!({ SIG: SECRET_SIG, "ciphertext": c.encrypt(&plain.to_string()) }))
    })
}

/// In-memory secrets → `{SIG: SECRET_SIG, "plaintext": "<JSON>"}`, the form
/// `preview --save-plan --show-secrets` writes.
pub fn plaintext_tree(v: &Value) -> Value {
    map_tree(v, &mut |s| {
        let plain = reveal(s.get("value")?);
        Some(json!({ SIG: SECRET_SIG, "plaintext": plain.to_string() }))
    })
}

/// Ciphertext (or plaintext-form) secrets → in-memory form. Errs on a secret that does
/// not decrypt.
pub fn decrypt_tree(v: &Value, c: &Crypter) -> Result<Value, String> {
    let mut err = None;
    let out = map_tree(v, &mut |s| {
        if let Some(text) = s.get("plaintext").and_then(Value::as_str) {
            return Some(wrap(
                serde_json::from_str(text).unwrap_or(Value::String(text.to_string())),
            ));
        }
        let ct = s.get("ciphertext").and_then(Value::as_str)?;
        match c.decrypt(ct) {
            Ok(text) => Some(wrap(
                serde_json::from_str(&text).unwrap_or(Value::String(text)),
            )),
            Err(e) => {
                err = Some(e.to_string());
                Some(Value::Null)
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// Rebuilds a tree, letting `f` replace each secret node (None keeps it).
fn map_tree(v: &Value, f: &mut dyn FnMut(&Value) -> Option<Value>) -> Value {
    if is_secret(v) {
        return f(v).unwrap_or_else(|| v.clone());
    }
    match v {
        Value::Array(a) => Value::Array(a.iter().map(|e| map_tree(e, f)).collect()),
        Value::Object(o) => {
            let m: Map<String, Value> =
                o.iter().map(|(k, e)| (k.clone(), map_tree(e, f))).collect();
            Value::Object(m)
        }
        _ => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mask_reveal_and_encrypt() {
        let c = Crypter::new("pw", b"salt");
        let tree = json!({"a": 1, "b": wrap(json!("pw")), "c": [wrap(json!({"x": 2}))]});
        assert_eq!(
            mask(&tree),
            json!({"a": 1, "b": "[secret]", "c": ["[secret]"]})
        );
        assert_eq!(reveal(&tree), json!({"a": 1, "b": "pw", "c": [{"x": 2}]}));
        let stored = encrypt_tree(&tree, &c);
        assert!(!stored.to_string().contains("\"pw\""));
        assert!(
            stored["b"]["ciphertext"]
                .as_str()
                .unwrap()
                .starts_with("v1:")
        );
        assert_eq!(mask(&stored), mask(&tree));
        assert_eq!(decrypt_tree(&stored, &c).unwrap(), tree);
        assert!(decrypt_tree(&stored, &Crypter::new("no", b"salt")).is_err());
    }
}
