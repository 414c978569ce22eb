//! Secrets: the age-encrypted store, gathering values (store, `STRATA_SECRET_*`,
//! prompts), and redaction everywhere strata writes. Writing them into a cluster is
//! Kubernetes work: [`crate::kube::secrets`].

pub mod digest;
pub mod hmac;
pub mod redact;
pub mod store;
pub mod url;

use std::collections::BTreeMap;
use std::path::PathBuf;

use age::secrecy::SecretString;
use dialoguer::{Password, theme::ColorfulTheme};

use crate::error::{Error, Result};
use crate::util::{display_path, env_key};
use crate::workspace::Workspace;
use crate::workspace::profile::SecretItem;

/// `config/secrets/<stack>.age`.
pub fn store_path(ws: &Workspace, stack: &str) -> PathBuf {
    ws.root.join("config/secrets").join(format!("{stack}.age"))
}

/// The variable that can carry a secret in a non-interactive run.
pub fn env_var(key: &str) -> String {
    format!("STRATA_SECRET_{}", env_key(key))
}

/// The key of the store: `STRATA_AGE_IDENTITY` (a file), else `STRATA_PASSPHRASE`, else
/// a prompt on a terminal (with confirmation when the store is new).
pub fn key(ws: &Workspace, stack: &str, interactive: bool) -> Result<store::Key> {
    if let Some(id) = ws.env.get("STRATA_AGE_IDENTITY").filter(|s| !s.is_empty()) {
        let p = PathBuf::from(id);
        let p = if p.is_absolute() { p } else { ws.root.join(p) };
        return Ok(store::Key::Identity(p));
    }
    if let Some(p) = ws.env.get("STRATA_PASSPHRASE").filter(|s| !s.is_empty()) {
        return Ok(store::Key::Passphrase(SecretString::from(p.clone())));
    }
    let path = store_path(ws, stack);
    if let Some(typed) = typed_before(&path) {
        return Ok(store::Key::Passphrase(SecretString::from(typed)));
    }
    if !interactive {
        return Err(Error::config(format!(
            "the secrets of stack `{stack}` ({}) need a key and this run cannot prompt: set STRATA_PASSPHRASE, or STRATA_AGE_IDENTITY to an age identity file (age-keygen), in the environment or {}.",
            display_path(&path),
            display_path(&ws.env_file.path)
        )));
    }
    let theme = ColorfulTheme::default();
    let mut prompt = Password::with_theme(&theme).with_prompt(format!(
        "Passphrase of the secret store {}",
        display_path(&path)
    ));
    if !store::exists(&path) {
        prompt = prompt.with_confirmation("Repeat the passphrase", "the two entries differ");
    }
    let pass = prompt.interact().map_err(Error::prompt)?;
    remember_typed(&path, &pass);
    Ok(store::Key::Passphrase(SecretString::from(pass)))
}

/// Passphrases typed in this process, by store: an `up` on a terminal runs its preview
/// and then its update, and asks once (kept in memory only, never written).
static TYPED: std::sync::OnceLock<std::sync::Mutex<BTreeMap<PathBuf, String>>> =
    std::sync::OnceLock::new();

fn typed_before(path: &std::path::Path) -> Option<String> {
    TYPED.get()?.lock().ok()?.get(path).cloned()
}

fn remember_typed(path: &std::path::Path, pass: &str) {
    if let Ok(mut m) = TYPED.get_or_init(Default::default).lock() {
        m.insert(path.to_path_buf(), pass.to_string());
    }
}

/// The content of a store: the secrets, and the key of their digests (none in a store
/// written before strata kept one; [`save_store`] creates it).
#[derive(Debug, Default, Clone)]
pub struct Stored {
    pub values: BTreeMap<String, String>,
    pub digest_key: Option<String>,
}

impl Stored {
    fn from_raw(mut raw: BTreeMap<String, String>) -> Stored {
        let digest_key = raw
            .remove(store::DIGEST_KEY_ENTRY)
            .filter(|k| k.len() >= 32);
        Stored {
            values: raw,
            digest_key,
        }
    }
}

/// Decrypts the store of `stack` with `key`, and records its digest (so `status` and
/// `validate` need not decrypt it).
pub fn load_store(ws: &Workspace, stack: &str, key: &store::Key) -> Result<Stored> {
    let before = digest::current(ws, stack);
    let stored = Stored::from_raw(store::load(&store_path(ws, stack), key).map_err(store_error)?);
    digest::record(
        ws,
        stack,
        before.as_deref(),
        &stored.values,
        stored.digest_key.as_deref(),
    );
    Ok(stored)
}

/// Encrypts `stored` into the store of `stack` (with a new digest key when it has none),
/// and records its digest.
pub fn save_store(
    ws: &Workspace,
    stack: &str,
    key: &store::Key,
    stored: &mut Stored,
) -> Result<()> {
    if stored.digest_key.is_none() {
        stored.digest_key = Some(store::new_digest_key().map_err(|e| {
            Error::failed(format!(
                "cannot read random bytes for the store's digest key: {e}"
            ))
        })?);
    }
    let mut raw = stored.values.clone();
    if let Some(k) = &stored.digest_key {
        raw.insert(store::DIGEST_KEY_ENTRY.to_string(), k.clone());
    }
    store::save(&store_path(ws, stack), key, &raw).map_err(store_error)?;
    digest::record(
        ws,
        stack,
        None,
        &stored.values,
        stored.digest_key.as_deref(),
    );
    Ok(())
}

/// What a run read from the store: the hash of the store file it read and every value
/// in it. The `write` stage records the digest from it, under the stack lock (nothing is
/// written before the lock).
pub struct Read {
    pub store_hash: Option<String>,
    pub values: BTreeMap<String, String>,
    pub digest_key: Option<String>,
}

/// Decrypts the store without recording anything.
fn read_store(ws: &Workspace, stack: &str, key: &store::Key) -> Result<Read> {
    let store_hash = digest::current(ws, stack);
    let stored = Stored::from_raw(store::load(&store_path(ws, stack), key).map_err(store_error)?);
    Ok(Read {
        store_hash,
        values: stored.values,
        digest_key: stored.digest_key,
    })
}

/// The stored secrets when they can be read without asking (with the key that opened
/// them): `Ok(None)` when the store exists but no key is set in the environment; empty
/// when there is no store.
fn load_unprompted(ws: &Workspace, stack: &str) -> Result<Option<(Read, Option<store::Key>)>> {
    let path = store_path(ws, stack);
    if !store::exists(&path) {
        return Ok(Some((
            Read {
                store_hash: Some(String::new()),
                values: BTreeMap::new(),
                digest_key: None,
            },
            None,
        )));
    }
    match key(ws, stack, false) {
        Ok(k) => read_store(ws, stack, &k).map(|r| Some((r, Some(k)))),
        Err(_) => Ok(None),
    }
}

/// Records the digest of what a run read (the `write` stage, under the lock).
pub fn record_read(ws: &Workspace, stack: &str, read: &Read) {
    digest::record(
        ws,
        stack,
        read.store_hash.as_deref(),
        &read.values,
        read.digest_key.as_deref(),
    );
}

pub fn store_error(e: store::StoreError) -> Error {
    Error::config(e.to_string())
}

/// The secrets of a run, and every value that must never be shown.
#[derive(Default)]
pub struct Gathered {
    /// The secrets the plan needs, by key.
    pub values: BTreeMap<String, String>,
    /// Every value of the store (selected or not) and the passphrases in use.
    pub redact: Vec<String>,
    /// Values that came from `STRATA_SECRET_*` or a prompt: the `write` stage adds them
    /// to the store, under the stack lock.
    pub added: BTreeMap<String, String>,
    /// The store's key, when it was needed.
    pub key: Option<store::Key>,
    /// Declared secrets that no source had (non-interactive), one line each saying how
    /// to set it.
    pub missing: Vec<String>,
    /// The store as it was read, for its digest.
    pub read: Option<Read>,
}

impl Gathered {
    /// The key of the secrets' digests: the store's (once the `write` stage has written
    /// one), else none.
    pub fn digest_key(&self) -> Option<&str> {
        self.read.as_ref().and_then(|r| r.digest_key.as_deref())
    }
}

/// Variables that carry strata's own secrets: never handed to a child.
pub fn is_strata_secret_var(name: &str) -> bool {
    name == "STRATA_PASSPHRASE" || name.starts_with("STRATA_SECRET_")
}

/// Variables holding a URL that may carry credentials (`user:password@`, `?api_key=`).
pub const URL_VARS: [&str; 3] = [
    "PULUMI_BACKEND_URL",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
];

/// Values from the environment that must be redacted wherever they show up: strata's
/// secrets, Pulumi's passphrase and the credentials inside the backend's and the
/// collector's URLs.
pub fn env_secrets(env: &BTreeMap<String, String>) -> Vec<String> {
    let mut out: Vec<String> = env
        .iter()
        .filter(|(k, _)| is_strata_secret_var(k) || k.as_str() == "PULUMI_CONFIG_PASSPHRASE")
        .map(|(_, v)| v.clone())
        .collect();
    for var in URL_VARS {
        if let Some(u) = env.get(var) {
            out.extend(url::credentials(u));
        }
    }
    out
}

/// The `declared` secrets of a run, from the store, `STRATA_SECRET_<KEY>` or a prompt
/// (only when `asking`: up and preview; destroy and refresh read what the store has, for
/// redaction). Writes nothing: new values are returned in `added`.
pub fn gather(
    ws: &Workspace,
    stack: &str,
    declared: &[&SecretItem],
    asking: bool,
    interactive: bool,
) -> Result<Gathered> {
    let mut out = Gathered {
        redact: env_secrets(&ws.env),
        ..Gathered::default()
    };
    if declared.is_empty() {
        // No project of this run takes a secret, so no child is handed one: the store is
        // not opened (a passphrase store costs its scrypt work factor every time).
        return Ok(out);
    }
    if !asking {
        // Nothing to ask: still learn the stored values (when the key is at hand without
        // a prompt) so they can be redacted.
        if let Some((read, key)) = load_unprompted(ws, stack)? {
            out.values = read.values.clone();
            out.redact.extend(read.values.values().cloned());
            out.read = Some(read);
            out.key = key;
        }
        return Ok(out);
    }
    let k = key(ws, stack, interactive)?;
    let read = read_store(ws, stack, &k)?;
    let mut values = read.values.clone();
    out.read = Some(read);
    for item in declared {
        if values.contains_key(&item.key) {
            continue;
        }
        let v = if let Some(v) = ws.env.get(&env_var(&item.key)) {
            v.clone()
        } else if interactive {
            prompt_secret(item)?
        } else {
            out.missing.push(format!(
                "  - {} ({}): strata secrets set {} --stack {stack}, or set {}",
                item.key,
                item.prompt,
                item.key,
                env_var(&item.key)
            ));
            continue;
        };
        values.insert(item.key.clone(), v.clone());
        out.added.insert(item.key.clone(), v);
    }
    out.redact.extend(values.values().cloned());
    let wanted: std::collections::BTreeSet<&str> =
        declared.iter().map(|i| i.key.as_str()).collect();
    values.retain(|k, _| wanted.contains(k.as_str()));
    out.values = values;
    out.key = Some(k);
    Ok(out)
}

/// Asks for one secret: no echo, with confirmation; Enter takes a declared default.
pub fn prompt_secret(item: &SecretItem) -> Result<String> {
    let theme = ColorfulTheme::default();
    let mut p = Password::with_theme(&theme)
        .with_prompt(format!(
            "{} ({}){}",
            item.prompt,
            item.key,
            if item.default.is_some() {
                " [Enter for the default]"
            } else {
                ""
            }
        ))
        .with_confirmation("Repeat it", "the two entries differ");
    if item.default.is_some() {
        p = p.allow_empty_password(true);
    }
    let v = p.interact().map_err(Error::prompt)?;
    Ok(match (&item.default, v.is_empty()) {
        (Some(d), true) => d.clone(),
        _ => v,
    })
}
