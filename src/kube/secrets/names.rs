//! The names Kubernetes accepts (namespaces, Secret names, data keys), and the secret
//! keys `<namespace>:<key>` split by namespace: checked before anything is sent.

use std::collections::BTreeMap;

use super::error::KubeError;

/// Splits `ns:key` keys into namespace → data key → value, validating names.
pub(super) fn group_by_namespace(
    secrets: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, BTreeMap<String, &str>>, KubeError> {
    let mut grouped: BTreeMap<String, BTreeMap<String, &str>> = BTreeMap::new();
    for (key, value) in secrets {
        let Some((namespace, data_key)) = key.split_once(':') else {
            return Err(KubeError::KeyWithoutNamespace { key: key.clone() });
        };
        if !is_dns_label(namespace) {
            return Err(KubeError::InvalidNamespace {
                key: key.clone(),
                namespace: namespace.to_string(),
            });
        }
        if !is_secret_data_key(data_key) {
            return Err(KubeError::InvalidDataKey {
                key: key.clone(),
                data_key: data_key.to_string(),
            });
        }
        grouped
            .entry(namespace.to_string())
            .or_default()
            .insert(data_key.to_string(), value.as_str());
    }
    Ok(grouped)
}

/// RFC 1123 label: a namespace name.
fn is_dns_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(|b| *b != b'-')
        && bytes.last().is_some_and(|b| *b != b'-')
}

/// RFC 1123 subdomain: a Secret name.
pub(super) fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && name.split('.').all(is_dns_label)
}

/// A valid key of a Secret's `data`.
fn is_secret_data_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_rules() {
        assert!(is_dns_label("a"));
        assert!(is_dns_label("kube-system"));
        assert!(!is_dns_label("-a"));
        assert!(!is_dns_label("a-"));
        assert!(!is_dns_label(&"a".repeat(64)));
        assert!(is_dns_subdomain("strata-secrets.v1"));
        assert!(!is_dns_subdomain("a..b"));
        assert!(is_secret_data_key("tls.crt"));
        assert!(is_secret_data_key("DB_PASSWORD"));
        assert!(!is_secret_data_key(".."));
        assert!(!is_secret_data_key("a/b"));
    }
}
