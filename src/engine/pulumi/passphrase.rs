//! Pulumi's passphrase secrets provider: the key a checkpoint's or stack config's salt and
//! the job's passphrase derive, the plaintext of each secret a checkpoint holds, and a
//! config value encrypted as `pulumi config set --secret` writes it, exactly as
//! `pkg/secrets/passphrase` and `config.symmetricCrypter` do. Any doubt: `None`.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ring::aead::{AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};
use serde_json::{Map, Value};

use crate::engine::{SECRET_SIG, SECRET_SIG_KEY};

/// PBKDF2 rounds of Pulumi's passphrase key (`NewSymmetricCrypterFromPassphrase`).
const ROUNDS: u32 = 1_000_000;
/// What Pulumi encrypts into the salt state to check the passphrase.
const CHECK: &str = "pulumi";

/// The key of one checkpoint's secrets.
pub(super) struct Decrypter {
    cipher: LessSafeKey,
}

/// The decrypter of a checkpoint `doc` whose secrets provider is the passphrase one, with
/// the passphrase the CLI would read from `env` (the child's, started in `dir`); `None`
/// (ask the CLI) for another provider, no passphrase, a wrong one, or an unknown form.
pub(super) fn decrypter(
    doc: &Value,
    env: &BTreeMap<String, String>,
    dir: &Path,
) -> Option<Decrypter> {
    let provider = doc.pointer("/checkpoint/latest/secrets_providers")?;
    if provider["type"].as_str()? != "passphrase" {
        return None;
    }
    let state = provider.pointer("/state/salt")?.as_str()?;
    let phrase = passphrase(env, dir)?;
    Some(Decrypter {
        cipher: cipher(&cached_key(state, &phrase)?)?,
    })
}

/// The passphrase as `readPassphrase` finds it: `PULUMI_CONFIG_PASSPHRASE` when set at
/// all (empty included), else the trimmed content of `PULUMI_CONFIG_PASSPHRASE_FILE`
/// (relative to the folder the CLI runs in).
fn passphrase(env: &BTreeMap<String, String>, dir: &Path) -> Option<String> {
    if let Some(p) = env.get("PULUMI_CONFIG_PASSPHRASE") {
        return Some(p.clone());
    }
    let file = env
        .get("PULUMI_CONFIG_PASSPHRASE_FILE")
        .filter(|f| !f.is_empty())?;
    let text = String::from_utf8(std::fs::read(dir.join(file)).ok()?).ok()?;
    Some(text.trim().to_string())
}

/// Derived keys of this process (never written anywhere), by salt state and passphrase:
/// the 1,000,000 rounds are paid once per stack and run, even by steps asking at once.
/// `None`: the passphrase does not open that state.
type Keys = HashMap<(String, String), Arc<OnceLock<Option<[u8; 32]>>>>;

static KEYS: OnceLock<Mutex<Keys>> = OnceLock::new();

fn cached_key(state: &str, phrase: &str) -> Option<[u8; 32]> {
    let slot = KEYS
        .get_or_init(Mutex::default)
        .lock()
        .ok()?
        .entry((state.to_string(), phrase.to_string()))
        .or_default()
        .clone();
    *slot.get_or_init(|| key_of_state(state, phrase))
}

/// Whether the key of `state` and `phrase` has been derived in this process (or found
/// not to open it).
#[cfg(test)]
pub(super) fn derived(state: &str, phrase: &str) -> bool {
    KEYS.get()
        .and_then(|k| k.lock().ok()?.get(&(state.into(), phrase.into())).cloned())
        .is_some_and(|slot| slot.get().is_some())
}

/// `symmetricCrypterFromPhraseAndState`: the state is `v1:<salt b64>:<check>`, the check
/// being "pulumi" encrypted with the key the passphrase and salt derive.
fn key_of_state(state: &str, phrase: &str) -> Option<[u8; 32]> {
    let mut parts = state.splitn(3, ':');
    if parts.next()? != "v1" {
        return None;
    }
    let salt = B64.decode(parts.next()?).ok()?;
    let check = parts.next()?;
    let key = derive(phrase, &salt);
    (decrypt_with(&cipher(&key)?, check)? == CHECK).then_some(key)
}

/// PBKDF2-HMAC-SHA256 of the passphrase and salt, 1,000,000 rounds, 32 bytes.
fn derive(phrase: &str, salt: &[u8]) -> [u8; 32] {
    pbkdf2::pbkdf2_sha256(phrase.as_bytes(), salt, ROUNDS)
}

/// AES-256-GCM with `key` (any 32 bytes do).
fn cipher(key: &[u8; 32]) -> Option<LessSafeKey> {
    Some(LessSafeKey::new(UnboundKey::new(&AES_256_GCM, key).ok()?))
}

/// `symmetricCrypter.DecryptValue`: `v1:<nonce b64>:<ciphertext b64>`, AES-256-GCM with
/// a 12-byte nonce and the tag after the ciphertext; the plaintext as text.
fn decrypt_with(cipher: &LessSafeKey, value: &str) -> Option<String> {
    let parts: Vec<&str> = value.split(':').collect();
    let [version, nonce, ciphertext] = parts.as_slice() else {
        return None;
    };
    if *version != "v1" {
        return None;
    }
    let nonce = Nonce::try_assume_unique_for_key(&B64.decode(nonce).ok()?).ok()?;
    let mut sealed = B64.decode(ciphertext).ok()?;
    let plain = cipher
        .open_in_place(nonce, Aad::empty(), &mut sealed)
        .ok()?;
    String::from_utf8(plain.to_vec()).ok()
}

/// Encrypts config values with a stack config's passphrase key.
pub struct Encrypter {
    cipher: LessSafeKey,
}

/// The encrypter of a stack config whose `encryptionsalt:` is `state`, with the
/// passphrase the CLI would read from `env` in `dir`: what `pulumi config set --secret`
/// would encrypt with. `None` (let the CLI do it) when there is no passphrase or it does
/// not open `state`.
pub fn config_encrypter(
    state: &str,
    env: &BTreeMap<String, String>,
    dir: &Path,
) -> Option<Encrypter> {
    let phrase = passphrase(env, dir)?;
    Some(Encrypter {
        cipher: cipher(&cached_key(state, &phrase)?)?,
    })
}

impl Encrypter {
    /// `symmetricCrypter.EncryptValue`: `v1:<nonce b64>:<ciphertext b64>`, AES-256-GCM
    /// with a fresh random 12-byte nonce, the tag after the ciphertext.
    pub fn encrypt(&self, plain: &str) -> Option<String> {
        use ring::rand::SecureRandom;
        let mut nonce = [0u8; 12];
        ring::rand::SystemRandom::new().fill(&mut nonce).ok()?;
        let mut sealed = plain.as_bytes().to_vec();
        self.cipher
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::empty(),
                &mut sealed,
            )
            .ok()?;
        Some(format!("v1:{}:{}", B64.encode(nonce), B64.encode(sealed)))
    }
}

impl Decrypter {
    /// A checkpoint value as `stack output --json --show-secrets` prints it: every secret
    /// decrypted; `None` for a secret that does not decrypt, an asset, archive or
    /// resource reference, or any form strata does not know.
    pub(super) fn reveal(&self, v: Value) -> Option<Value> {
        walk(v, &mut |s| decrypt_with(&self.cipher, s))
    }
}

/// Rebuilds `v` with each secret replaced by its plaintext value, `open` turning a
/// secret's `ciphertext` into the JSON text of its value.
fn walk(v: Value, open: &mut dyn FnMut(&str) -> Option<String>) -> Option<Value> {
    Some(match v {
        Value::Object(o) => match o.get(SECRET_SIG_KEY) {
            None => Value::Object(
                o.into_iter()
                    .map(|(k, v)| walk(v, open).map(|v| (k, v)))
                    .collect::<Option<Map<String, Value>>>()?,
            ),
            Some(sig) if sig == SECRET_SIG => secret(&o, open)?,
            Some(_) => return None,
        },
        Value::Array(a) => Value::Array(
            a.into_iter()
                .map(|v| walk(v, open))
                .collect::<Option<Vec<_>>>()?,
        ),
        other => other,
    })
}

/// One secret (`SecretV1`): exactly one of `ciphertext` and `plaintext`, the latter the
/// JSON of its value. Secrets inside it were serialized with Pulumi's no-op encrypter:
/// their `ciphertext` is already that JSON.
fn secret(o: &Map<String, Value>, open: &mut dyn FnMut(&str) -> Option<String>) -> Option<Value> {
    let text = match (o.get("ciphertext"), o.get("plaintext")) {
        (Some(Value::String(c)), None) => open(c)?,
        (None, Some(Value::String(p))) => p.clone(),
        _ => return None,
    };
    let inner: Value = serde_json::from_str(&text).ok()?;
    walk(inner, &mut |nested| Some(nested.to_string()))
}

mod pbkdf2;
#[cfg(test)]
mod tests;
