//! `.strata/<stack>/secrets.digest.json`: what the read-only commands need to know of
//! the encrypted store without decrypting it (a passphrase store costs its scrypt work
//! factor, about a second and hundreds of MiB, every time it is opened). It holds, per
//! key, the HMAC of its value under the store's own digest key (an entry of the
//! encrypted store, so a reader of `.strata/` cannot test guesses; the fingerprints use
//! the same digests) and the SHA-256 of the store file it was made from; written
//! whenever strata reads or writes the store with its key. A store changed since (a
//! `git pull`, another machine) makes the digest stale, and `status`/`validate` say so
//! instead of decrypting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::workspace::Workspace;

/// The format: 2 is the HMAC under the store's key; a file without it (SHA-256 over a
/// salt beside it) is ignored, as stale.
const VERSION: u32 = 2;

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct File {
    #[serde(default)]
    version: u32,
    /// SHA-256 of the store file's bytes; empty when there is no store.
    store: String,
    /// Secret key → keyed hash of its value.
    keys: BTreeMap<String, String>,
}

fn path(ws: &Workspace, stack: &str) -> PathBuf {
    ws.state_dir(stack).join("secrets.digest.json")
}

/// SHA-256 of the store file, `""` when it does not exist.
fn store_hash(store: &Path) -> Option<String> {
    match std::fs::read(store) {
        Ok(bytes) => Some(crate::util::sha256_hex(&bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(String::new()),
        Err(_) => None,
    }
}

/// The digest of every value under the store's digest key, as the fingerprints use them.
pub fn hashes(digest_key: &str, values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    crate::secrets::hmac::hash_secrets(digest_key.as_bytes(), values)
}

/// Records `values` as the content of the store file as it is now, whose hash was
/// `before` when the values were read (so a store replaced in between is not
/// described by the wrong values), digested under the store's `digest_key`. Without a
/// key (a store written before it had one) any older digest is removed: it was
/// guessable. Best effort: a digest that cannot be written only means the next
/// `status` cannot tell.
pub fn record(
    ws: &Workspace,
    stack: &str,
    before: Option<&str>,
    values: &BTreeMap<String, String>,
    digest_key: Option<&str>,
) {
    let Some(digest_key) = digest_key else {
        let _ = std::fs::remove_file(path(ws, stack));
        return;
    };
    let store = super::store_path(ws, stack);
    let Some(now) = store_hash(&store) else {
        return;
    };
    if before.is_some_and(|b| b != now) {
        return;
    }
    let file = File {
        version: VERSION,
        store: now,
        keys: hashes(digest_key, values),
    };
    if let Ok(text) = serde_json::to_string_pretty(&file) {
        let _ = crate::files::write_atomic(&path(ws, stack), text.as_bytes(), Some(0o600));
    }
}

/// The hash of the store file now (for [`record`] after a load).
pub fn current(ws: &Workspace, stack: &str) -> Option<String> {
    store_hash(&super::store_path(ws, stack))
}

/// Key → keyed hash of the stored secrets, when the digest describes the store as it is
/// now (no store: empty). `None`: no digest, or the store changed since it was written.
pub fn read_fresh(ws: &Workspace, stack: &str) -> Option<BTreeMap<String, String>> {
    let now = current(ws, stack)?;
    if now.is_empty() {
        return Some(BTreeMap::new());
    }
    let text = std::fs::read_to_string(path(ws, stack)).ok()?;
    let file: File = serde_json::from_str(&text).ok()?;
    (file.version == VERSION && file.store == now).then_some(file.keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws(root: &Path) -> Workspace {
        std::fs::create_dir_all(root.join("providers")).unwrap();
        Workspace::open(root.to_path_buf(), BTreeMap::new()).unwrap()
    }

    #[test]
    fn fresh_while_the_store_is_unchanged_stale_after() {
        let d = tempfile::tempdir().unwrap();
        let w = ws(d.path());
        // No store: nothing stored, no digest needed.
        assert_eq!(read_fresh(&w, "dev"), Some(BTreeMap::new()));
        let store = super::super::store_path(&w, "dev");
        std::fs::create_dir_all(store.parent().unwrap()).unwrap();
        std::fs::write(&store, "ciphertext one").unwrap();
        assert_eq!(read_fresh(&w, "dev"), None, "no digest yet");
        let values: BTreeMap<String, String> =
            [("db:pw".to_string(), "s3cret-value".to_string())].into();
        let before = current(&w, "dev");
        record(&w, "dev", before.as_deref(), &values, Some("k1"));
        let got = read_fresh(&w, "dev").unwrap();
        assert_eq!(got, hashes("k1", &values));
        assert_ne!(
            got,
            hashes("k2", &values),
            "the digest depends on the store's key"
        );
        // The digest holds no value.
        let text = std::fs::read_to_string(path(&w, "dev")).unwrap();
        assert!(!text.contains("s3cret-value"), "{text}");
        // Another store (a git pull): stale.
        std::fs::write(&store, "ciphertext two").unwrap();
        assert_eq!(read_fresh(&w, "dev"), None);
        // Values read from a store that changed while reading are not recorded.
        record(&w, "dev", before.as_deref(), &values, Some("k1"));
        assert_eq!(read_fresh(&w, "dev"), None);
        // A store without a digest key: no digest (an old one is removed).
        record(&w, "dev", None, &values, Some("k1"));
        assert!(path(&w, "dev").exists());
        record(&w, "dev", None, &values, None);
        assert!(!path(&w, "dev").exists());
    }
}
