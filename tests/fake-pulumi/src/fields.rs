//! Reading the optional fields of a JSON document (checkpoints, plan files): a missing
//! field, or one of another type, reads as empty.

use serde_json::{Map, Value};

/// The object under `key`.
pub fn object(v: &Value, key: &str) -> Map<String, Value> {
    v.get(key)
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default()
}

/// The strings of the array under `key` (other elements are passed over).
pub fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
