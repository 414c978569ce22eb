//! The passphrase secrets provider: salt state, key derivation, encrypt and decrypt.
//!
//! The layout copies Pulumi's (`encryptionsalt: v1:<salt>:v1:<nonce>:<ciphertext>`,
//! secure values `v1:<nonce>:<ciphertext>`), but the cipher is a SHA-256 keystream
//! with a SHA-256 tag instead of PBKDF2 + AES-GCM: the fake needs no crypto crates
//! and never has to read a real Pulumi file. So strata, which decrypts a real CLI's
//! passphrase secrets itself, finds the fake's salt check wrong and asks the fake's
//! `stack output --show-secrets`, as it asks the real CLI on any doubt.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use sha2::{Digest, Sha256};
use std::io::Read;

use crate::error::{Fail, Result};

/// The text Pulumi encrypts into the salt state to check the passphrase.
const CHECK: &str = "pulumi";
const TAG_LEN: usize = 16;

/// The passphrase from `PULUMI_CONFIG_PASSPHRASE` or `PULUMI_CONFIG_PASSPHRASE_FILE`.
pub fn passphrase() -> Result<String> {
    if let Ok(p) = std::env::var("PULUMI_CONFIG_PASSPHRASE") {
        return Ok(p);
    }
    if let Ok(file) = std::env::var("PULUMI_CONFIG_PASSPHRASE_FILE") {
        return std::fs::read_to_string(&file).map_err(|e| {
            Fail::error(format!(
                "unable to read PULUMI_CONFIG_PASSPHRASE_FILE {file}: {e}"
            ))
        });
    }
    Err(Fail::error(
        "passphrase must be set with PULUMI_CONFIG_PASSPHRASE or \
         PULUMI_CONFIG_PASSPHRASE_FILE environment variables",
    ))
}

/// Random bytes from the kernel.
pub fn random_bytes(n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    if !ok {
        // Never expected on Linux; fall back to time and pid so salts still differ.
        let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
        let h = Sha256::digest(seed.as_bytes());
        for (i, b) in buf.iter_mut().enumerate() {
            *b = h[i % h.len()];
        }
    }
    buf
}

/// A symmetric key derived from a passphrase and a salt.
#[derive(Clone)]
pub struct Crypter {
    key: [u8; 32],
}

/// Why a ciphertext did not decrypt.
#[derive(Debug, PartialEq, Eq)]
pub enum DecryptError {
    Malformed,
    Authentication,
}

impl std::fmt::Display for DecryptError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecryptError::Malformed => write!(f, "bad value format"),
            DecryptError::Authentication => write!(f, "cipher: message authentication failed"),
        }
    }
}

impl Crypter {
    pub fn new(passphrase: &str, salt: &[u8]) -> Crypter {
        let mut key: [u8; 32] = Sha256::new()
            .chain_update(salt)
            .chain_update(passphrase.as_bytes())
            .finalize()
            .into();
        for _ in 0..64 {
            key = Sha256::new()
                .chain_update(key)
                .chain_update(salt)
                .finalize()
                .into();
        }
        Crypter { key }
    }

    /// A fresh salt state for `encryptionsalt:` and the crypter it stands for.
    pub fn new_salt(passphrase: &str) -> (String, Crypter) {
        let salt = random_bytes(8);
        let c = Crypter::new(passphrase, &salt);
        let state = format!("v1:{}:{}", B64.encode(&salt), c.encrypt(CHECK));
        (state, c)
    }

    /// The crypter for an existing salt state; checks the passphrase against it.
    pub fn from_salt(passphrase: &str, state: &str) -> Result<Crypter> {
        let bad = || Fail::error(format!("invalid encryption salt state: {state}"));
        let rest = state.strip_prefix("v1:").ok_or_else(bad)?;
        let (salt, check) = rest.split_once(':').ok_or_else(bad)?;
        let salt = B64.decode(salt).map_err(|_| bad())?;
        let c = Crypter::new(passphrase, &salt);
        match c.decrypt(check) {
            Ok(s) if s == CHECK => Ok(c),
            Err(DecryptError::Malformed) => Err(bad()),
            _ => Err(incorrect_passphrase()),
        }
    }

    fn keystream_xor(&self, nonce: &[u8], data: &mut [u8]) {
        for (block, chunk) in data.chunks_mut(32).enumerate() {
            let ks = Sha256::new()
                .chain_update(self.key)
                .chain_update(nonce)
                .chain_update((block as u32).to_be_bytes())
                .finalize();
            for (b, k) in chunk.iter_mut().zip(ks.iter()) {
                *b ^= k;
            }
        }
    }

    fn tag(&self, nonce: &[u8], ct: &[u8]) -> [u8; TAG_LEN] {
        let h = Sha256::new()
            .chain_update(self.key)
            .chain_update(b"tag")
            .chain_update(nonce)
            .chain_update(ct)
            .finalize();
        let mut t = [0u8; TAG_LEN];
        t.copy_from_slice(&h[..TAG_LEN]);
        t
    }

    /// `v1:<nonce>:<ciphertext+tag>`, all base64.
    pub fn encrypt(&self, plaintext: &str) -> String {
        let nonce = random_bytes(12);
        let mut ct = plaintext.as_bytes().to_vec();
        self.keystream_xor(&nonce, &mut ct);
        let tag = self.tag(&nonce, &ct);
        ct.extend_from_slice(&tag);
        format!("v1:{}:{}", B64.encode(&nonce), B64.encode(&ct))
    }

    pub fn decrypt(&self, ciphertext: &str) -> std::result::Result<String, DecryptError> {
        let rest = ciphertext
            .strip_prefix("v1:")
            .ok_or(DecryptError::Malformed)?;
        let (nonce, ct) = rest.split_once(':').ok_or(DecryptError::Malformed)?;
        let nonce = B64.decode(nonce).map_err(|_| DecryptError::Malformed)?;
        let mut ct = B64.decode(ct).map_err(|_| DecryptError::Malformed)?;
        if ct.len() < TAG_LEN {
            return Err(DecryptError::Malformed);
        }
        let tag = ct.split_off(ct.len() - TAG_LEN);
        if tag != self.tag(&nonce, &ct) {
            return Err(DecryptError::Authentication);
        }
        self.keystream_xor(&nonce, &mut ct);
        String::from_utf8(ct).map_err(|_| DecryptError::Malformed)
    }
}

pub fn incorrect_passphrase() -> Fail {
    Fail::error(
        "incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE to the correct passphrase \
         or set PULUMI_CONFIG_PASSPHRASE_FILE to a file containing the passphrase",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let c = Crypter::new("pw", b"saltsalt");
        for text in [
            "",
            "s3cret",
            "a much longer value that spans several keystream blocks!!",
        ] {
            let ct = c.encrypt(text);
            assert!(ct.starts_with("v1:"));
            assert!(!ct.contains(text) || text.is_empty());
            assert_eq!(c.decrypt(&ct).unwrap(), text);
        }
        // Same plaintext, different nonce.
        assert_ne!(c.encrypt("x"), c.encrypt("x"));
    }

    #[test]
    fn wrong_key_fails_authentication() {
        let ct = Crypter::new("pw", b"salt1").encrypt("v");
        let other = Crypter::new("other", b"salt1");
        assert_eq!(other.decrypt(&ct), Err(DecryptError::Authentication));
        assert_eq!(other.decrypt("nonsense"), Err(DecryptError::Malformed));
    }

    #[test]
    fn salt_state_checks_the_passphrase() {
        let (state, c) = Crypter::new_salt("pw");
        let parts: Vec<&str> = state.split(':').collect();
        assert_eq!(parts.len(), 5, "{state}");
        assert_eq!((parts[0], parts[2]), ("v1", "v1"));
        let again = Crypter::from_salt("pw", &state).unwrap();
        assert_eq!(again.decrypt(&c.encrypt("x")).unwrap(), "x");
        let err = Crypter::from_salt("wrong", &state).err().unwrap();
        assert!(err.msg.starts_with("incorrect passphrase"));
    }
}
