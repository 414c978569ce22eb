//! Keyed digests of secret values, wherever strata keeps one (the store's digest file,
//! the fingerprints, the per-project hashes of secure config): HMAC-SHA256 under the
//! random key held inside the encrypted store.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::util::hex;

/// HMAC-SHA256 (RFC 2104) of `message` under `key`, in hex.
pub fn hmac_sha256(key: &[u8], message: &[&[u8]]) -> String {
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| k.map(|b| b ^ byte);
    let mut inner = Sha256::new_with_prefix(pad(0x36));
    for m in message {
        inner.update(m);
    }
    let inner = inner.finalize();
    let mut outer = Sha256::new_with_prefix(pad(0x5c));
    outer.update(inner);
    hex(&outer.finalize())
}

/// The digest of a secret value wherever strata keeps one (the store's digest, the
/// fingerprints, the per-project hashes of secure config): HMAC-SHA256 under the random
/// key held inside the encrypted store, so only someone who can open the store can test
/// a guess. A salt beside the digests would not do: a six-digit secret falls to 10^6
/// guesses in a second.
pub fn secret_digest(key: &[u8], name: &str, value: &str) -> String {
    hmac_sha256(
        key,
        &[
            b"strata-secret-v2\0",
            name.as_bytes(),
            b"\0",
            value.as_bytes(),
        ],
    )
}

/// The keyed hash of every secret value (what fingerprints and the store's digest hold),
/// under the store's digest key ([`secret_digest`]).
pub fn hash_secrets(key: &[u8], values: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    values
        .iter()
        .map(|(k, v)| (k.clone(), secret_digest(key, k, v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231 test case 2, and the digest of a secret depends on the store's key, the
    /// secret's name and its value: without the key a guess cannot be checked.
    #[test]
    fn secret_digest_is_an_hmac_that_changes_with_the_key() {
        assert_eq!(
            hmac_sha256(b"Jefe", &[b"what do ya want ", b"for nothing?"]),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        let long_key = [0xaau8; 131];
        assert_eq!(
            hmac_sha256(
                &long_key,
                &[b"Test Using Larger Than Block-Size Key - Hash Key First"]
            ),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
        let d = secret_digest(b"key-one", "lab:pin", "428571");
        assert_eq!(d, secret_digest(b"key-one", "lab:pin", "428571"));
        assert_ne!(d, secret_digest(b"key-two", "lab:pin", "428571"));
        assert_ne!(d, secret_digest(b"key-one", "lab:pin", "428572"));
        assert_ne!(d, secret_digest(b"key-one", "lab:other", "428571"));
        // Not the old construction: SHA-256 over the key (then a salt), name and value.
        let old = crate::util::sha256_hex(b"key-onelab:pin\x00428571");
        assert_ne!(d, old);
    }
}
