//! The input fingerprint of a project: its files, the shared stack config, its profile
//! entry (inputs, hooks) and a keyed hash of its secrets. `up --changed` compares it.

use std::path::Path;

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use crate::plan::Plan;
use crate::util::hex;
use crate::workspace::{Profile, StackConfig};

/// How deep the walk goes below a project folder; deeper folders are hashed by name only.
const MAX_DEPTH: usize = 64;

/// The content hash of each file a fingerprint read, by path, with the size and
/// modification time it had (`.strata/<stack>/fingerprint.cache`): a file whose size and
/// mtime are unchanged is not read again, as git's index and Cargo do. A file modified
/// less than two seconds before it was hashed is not kept (a later write within the same
/// mtime tick would go unseen: git's "racily clean" entries).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct FileHashes {
    files: BTreeMap<String, (u64, i128, String)>,
    #[serde(skip)]
    dirty: bool,
}

impl FileHashes {
    pub fn load(path: &Path) -> FileHashes {
        std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    }

    /// Writes the cache when it changed (best effort: it is only a cache).
    pub fn save(&self, path: &Path) {
        if self.dirty
            && let Ok(text) = serde_json::to_vec(self)
        {
            let _ = crate::files::write_atomic(path, &text, Some(0o600));
        }
    }

    /// The SHA-256 of the file at `p` (hex), from the cache when its size and mtime match.
    fn hash(&mut self, p: &Path) -> Option<String> {
        let meta = std::fs::symlink_metadata(p).ok()?;
        let mtime = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(-1);
        let key = p.to_string_lossy().into_owned();
        if let Some((size, at, hex)) = self.files.get(&key)
            && *size == meta.len()
            && *at == mtime
            && mtime >= 0
        {
            return Some(hex.clone());
        }
        let bytes = std::fs::read(p).ok()?;
        let hex = crate::util::sha256_hex(&bytes);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as i128)
            .unwrap_or(0);
        if mtime >= 0 && now - mtime > 2_000_000_000 {
            self.files
                .insert(key, (bytes.len() as u64, mtime, hex.clone()));
            self.dirty = true;
        }
        Some(hex)
    }
}

fn hash_dir(h: &mut Sha256, root: &Path, dir: &Path, depth: usize, cache: &mut FileHashes) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    // The entry's own type: a symbolic link is never followed (a link to `.` made the
    // walk endless), it is hashed as its target's text, as git stores it.
    let mut entries: Vec<_> = rd
        .flatten()
        .map(|e| (e.path(), e.file_type().ok()))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (p, kind) in entries {
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let rel = p.strip_prefix(root).unwrap_or(&p);
        if kind.is_some_and(|k| k.is_symlink()) {
            h.update(rel.to_string_lossy().as_bytes());
            h.update(b"\0link\0");
            if let Ok(target) = std::fs::read_link(&p) {
                h.update(target.to_string_lossy().as_bytes());
            }
            continue;
        }
        if kind.is_some_and(|k| k.is_dir()) {
            if crate::workspace::project::SKIP_DIRS.contains(&name) {
                continue;
            }
            if depth >= MAX_DEPTH {
                h.update(rel.to_string_lossy().as_bytes());
                h.update(b"\0too deep\0");
                continue;
            }
            hash_dir(h, root, &p, depth + 1, cache);
            continue;
        }
        // Pulumi's own per-stack files in the project folder change on every run.
        if name.starts_with("Pulumi.") && name != "Pulumi.yaml" && name != "Pulumi.yml" {
            continue;
        }
        h.update(rel.to_string_lossy().as_bytes());
        h.update([0]);
        if let Some(hex) = cache.hash(&p) {
            h.update(hex.as_bytes());
        }
    }
}

/// Computes the fingerprint. `entry` is a stable text of the profile entry, `config` the
/// shared stack config's text, `secrets` (key, keyed hash of the value) pairs: the
/// values themselves are never needed, so `status` can fingerprint from the store's
/// digest without decrypting it.
pub fn fingerprint(
    project_dir: Option<&Path>,
    entry: &str,
    config: &str,
    secrets: &[(String, String)],
) -> String {
    fingerprint_cached(
        project_dir,
        entry,
        config,
        secrets,
        &mut FileHashes::default(),
    )
}

fn fingerprint_cached(
    project_dir: Option<&Path>,
    entry: &str,
    config: &str,
    secrets: &[(String, String)],
    cache: &mut FileHashes,
) -> String {
    let mut h = Sha256::new();
    h.update(b"strata-fingerprint-v2\0");
    if let Some(dir) = project_dir {
        hash_dir(&mut h, dir, dir, 0, cache);
    }
    h.update(b"\0entry\0");
    h.update(entry.as_bytes());
    h.update(b"\0config\0");
    h.update(config.as_bytes());
    for (_, hash) in secrets {
        h.update(b"\0secret\0");
        h.update(hash.as_bytes());
    }
    let digest = h.finalize();
    hex(&digest)
}

/// Whether an environment-file variable stays out of fingerprints: `PULUMI_STACK`,
/// strata's own `STRATA_*` settings, the profile's `credentials:` and names that hold
/// secrets (a rotated key changes no infrastructure,
/// and its value must not be guessable from `.strata/`).
pub fn secret_like_env(name: &str, profile: &Profile) -> bool {
    let upper = name.to_ascii_uppercase();
    // Not secret, but not an input either: the stack (already the stack's own) and
    // strata's own settings.
    if upper == "PULUMI_STACK" || upper.starts_with("STRATA_") {
        return true;
    }
    profile.credentials.iter().any(|c| c == name)
        || [
            "TOKEN",
            "SECRET",
            "PASSWORD",
            "PASSPHRASE",
            "PRIVATE",
            "CREDENTIAL",
        ]
        .iter()
        .any(|w| upper.contains(w))
        || upper.ends_with("_KEY")
        || upper.ends_with("_KEY_ID")
}

/// What a project reads besides its folder and the stack config: the environment
/// file's values (less [`secret_like_env`]) and the `watch:` paths (from `root`).
pub struct Extra<'a> {
    pub root: &'a Path,
    pub env: &'a BTreeMap<String, String>,
    /// The [`FileHashes`] file, and whether this command may write it (under the lock).
    pub cache: Option<(&'a Path, bool)>,
}

/// The text of the watched paths: each one's files, or "missing".
fn watched_text(root: &Path, paths: &[&String], cache: &mut FileHashes) -> String {
    let mut h = Sha256::new();
    for p in paths {
        let full = root.join(p);
        h.update(p.as_bytes());
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => {
                h.update(b"\0dir\0");
                hash_dir(&mut h, &full, &full, 0, cache);
            }
            Ok(_) => {
                h.update(b"\0file\0");
                if let Some(hex) = cache.hash(&full) {
                    h.update(hex.as_bytes());
                }
            }
            Err(_) => h.update(b"\0missing\0"),
        }
    }
    hex(&h.finalize())
}

/// The input fingerprint of every step of the plan; `secret_hashes` maps each secret
/// key to the keyed hash of its value ([`crate::secrets::hmac::hash_secrets`]).
pub fn of_plan(
    plan: &Plan,
    profile: &Profile,
    cfg: &StackConfig,
    secret_hashes: &BTreeMap<String, String>,
    extra: &Extra,
) -> BTreeMap<String, String> {
    let mut config_text = serde_yaml::to_string(cfg.config()).unwrap_or_default();
    config_text.push_str("\0environment\0");
    for (k, v) in extra.env {
        if !secret_like_env(k, profile) {
            config_text.push_str(&format!("{k}={v}\n"));
        }
    }
    let profile_keys: Vec<&String> = profile.secrets.iter().map(|s| &s.key).collect();
    let all_secrets = profile.all_secrets();
    let all_keys: Vec<&String> = all_secrets.iter().map(|(s, _)| &s.key).collect();
    let mut cache = extra
        .cache
        .map(|(file, _)| FileHashes::load(file))
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for n in &plan.nodes {
        let (dir, entry_text, keys): (Option<&Path>, String, Vec<&String>) =
            match (&n.project, &n.entry) {
                (Some(p), Some(e)) => (
                    Some(p.dir.as_path()),
                    serde_json::json!({
                        "inputs": e.inputs,
                        "on_success": e.on_success,
                        "kind": p.kind_str(),
                        "watch": watched_text(
                            extra.root,
                            &profile.watch.iter().chain(e.watch.iter()).collect::<Vec<_>>(),
                            &mut cache,
                        ),
                    })
                    .to_string(),
                    e.secrets
                        .iter()
                        .map(|s| &s.key)
                        .chain(profile_keys.iter().copied())
                        .collect(),
                ),
                _ => (
                    None,
                    format!("secrets-step {}", profile.secret_name),
                    all_keys.clone(),
                ),
            };
        let pairs: Vec<(String, String)> = keys
            .into_iter()
            .filter_map(|k| secret_hashes.get(k).map(|v| (k.clone(), v.clone())))
            .collect();
        out.insert(
            n.path.clone(),
            fingerprint_cached(dir, &entry_text, &config_text, &pairs, &mut cache),
        );
    }
    if let Some((file, true)) = extra.cache {
        cache.save(file);
    }
    out
}

/// A keyed hash of non-secret data (a project's outputs, which hold `[secret]` where a
/// value is secret), salted with the per-stack random salt. Never for a secret value:
/// see [`crate::secrets::hmac::secret_digest`].
pub fn keyed_hash(salt: &[u8], key: &str, value: &str) -> String {
    let mut h = Sha256::new();
    h.update(salt);
    h.update(key.as_bytes());
    h.update([0]);
    h.update(value.as_bytes());
    hex(&h.finalize())
}

/// The per-stack random salt for keyed secret hashes (created on first use, mode 0600).
pub fn salt(state_dir: &Path) -> Vec<u8> {
    let path = state_dir.join("fingerprint.salt");
    if let Ok(b) = std::fs::read(&path)
        && b.len() >= 16
    {
        return b;
    }
    let salt = crate::util::random_bytes(32).unwrap_or_default();
    let _ = crate::files::write_atomic(&path, &salt, Some(0o600));
    salt
}

/// The stack's salt on a shared (s3://) backend: the one in the bucket
/// (`.strata/salts/<stack>`), written by the first run that found none (this checkout's
/// `local` salt, with a conditional create: two first runs agree on one). Every machine
/// then hashes outputs alike, so `--changed` on one does not run again what another
/// deployed. The salt guards no secret (secret values are digested under the store's
/// key, [`crate::secrets::hmac::secret_digest`]); outputs are in the bucket's checkpoints
/// anyway. This checkout's file is brought in line, for runs that cannot reach the bucket.
/// Only a run that `may_write` (it holds the stack's lease) creates the bucket's salt.
pub fn shared_salt(
    backend: &crate::backend::Backend,
    stack: &str,
    state_dir: &Path,
    may_write: bool,
) -> crate::error::Result<Vec<u8>> {
    let key = backend.key(&format!(".strata/salts/{stack}"));
    let local = salt(state_dir);
    let shared = match backend.get(&key)? {
        Some(o) if o.body.len() >= 16 => o.body,
        _ if !may_write => return Ok(local),
        _ => match backend.create(&key, &local)? {
            Some(_) => local.clone(),
            // Another run created it first: its salt.
            None => match backend.get(&key)? {
                Some(o) if o.body.len() >= 16 => o.body,
                _ => return Ok(local),
            },
        },
    };
    if shared != local {
        let _ =
            crate::files::write_atomic(&state_dir.join("fingerprint.salt"), &shared, Some(0o600));
    }
    Ok(shared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_checkouts_on_one_bucket_share_the_first_ones_salt() {
        let store = std::sync::Arc::new(object_store::memory::InMemory::new());
        let bucket = |p: &str| {
            crate::backend::Backend::new("s3://b".into(), store.clone(), p.into()).unwrap()
        };
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let c = tempfile::tempdir().unwrap();
        let preview = shared_salt(&bucket(""), "prod", c.path(), false).unwrap();
        assert_eq!(
            preview,
            salt(c.path()),
            "a run without the lease writes none"
        );
        let salt_a = shared_salt(&bucket(""), "prod", a.path(), true).unwrap();
        assert_eq!(
            salt_a,
            salt(a.path()),
            "the first checkout's own salt goes up"
        );
        let salt_b = shared_salt(&bucket(""), "prod", b.path(), true).unwrap();
        assert_eq!(salt_b, salt_a, "the second takes it");
        assert_eq!(
            salt(b.path()),
            salt_a,
            "and keeps it for runs without the bucket"
        );
        let other = shared_salt(&bucket(""), "dev", b.path(), true).unwrap();
        assert_eq!(other, salt_a, "a stack without a salt gets this checkout's");
        assert_ne!(
            shared_salt(
                &bucket("team2/"),
                "prod",
                tempfile::tempdir().unwrap().path(),
                true
            )
            .unwrap(),
            salt_a,
            "another prefix is another backend"
        );
    }

    /// `ln -s . a; ln -s . b` in a project folder made the walk endless (it followed
    /// links): links are hashed as links, as git does, and never followed.
    #[test]
    fn symlinks_are_hashed_not_followed() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("Pulumi.yaml"), "name: a\n").unwrap();
        std::os::unix::fs::symlink(".", d.path().join("a")).unwrap();
        std::os::unix::fs::symlink(".", d.path().join("b")).unwrap();
        let dir = d.path().to_path_buf();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(fingerprint(Some(&dir), "e", "c", &[]));
        });
        let first = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the walk ends");
        std::fs::remove_file(d.path().join("b")).unwrap();
        std::os::unix::fs::symlink("elsewhere", d.path().join("b")).unwrap();
        assert_ne!(
            first,
            fingerprint(Some(d.path()), "e", "c", &[]),
            "a link's target is part of the fingerprint"
        );
    }

    #[test]
    fn secret_looking_environment_values_stay_out() {
        let profile = crate::workspace::profile::tests_support::minimal(&["DO_ACCESS"]);
        for name in [
            "AWS_SECRET_ACCESS_KEY",
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "DO_ACCESS",
            "PULUMI_STACK",
            "STRATA_PASSPHRASE",
            "LINODE_API_KEY",
        ] {
            assert!(secret_like_env(name, &profile), "{name}");
        }
        for name in ["AWS_REGION", "LOCAL_TIER", "KUBECONFIG"] {
            assert!(!secret_like_env(name, &profile), "{name}");
        }
    }

    /// A file whose size and mtime are unchanged is not read again; any other is.
    #[test]
    fn files_are_hashed_once_per_size_and_mtime() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("main.yaml");
        std::fs::write(&f, "aaaa").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        let set_mtime = |t| {
            std::fs::File::options()
                .write(true)
                .open(&f)
                .unwrap()
                .set_modified(t)
                .unwrap()
        };
        set_mtime(old);
        let mut cache = FileHashes::default();
        let fp = |c: &mut FileHashes| fingerprint_cached(Some(d.path()), "e", "c", &[], c);
        let first = fp(&mut cache);
        assert_eq!(first, fingerprint(Some(d.path()), "e", "c", &[]));
        assert!(cache.dirty, "an old file is kept");
        // Same size, same mtime: the cache answers (the new bytes are not read).
        std::fs::write(&f, "bbbb").unwrap();
        set_mtime(old);
        assert_eq!(fp(&mut cache), first);
        // A new mtime: read again.
        set_mtime(old + std::time::Duration::from_secs(1));
        assert_ne!(fp(&mut cache), first);
        // A file just written is hashed but not kept.
        let mut fresh = FileHashes::default();
        std::fs::write(&f, "cccc").unwrap();
        fp(&mut fresh);
        assert!(!fresh.dirty, "{:?}", fresh.files);
        // Saved and loaded.
        let file = d.path().join("cache.json");
        cache.save(&file);
        assert_eq!(FileHashes::load(&file).files, cache.files);
    }

    #[test]
    fn changes_with_files_config_and_secrets_only() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("Pulumi.yaml"), "name: a\n").unwrap();
        let f = |cfg: &str, s: &str| {
            let hashes = crate::secrets::hmac::hash_secrets(
                b"salt",
                &[("k:x".to_string(), s.to_string())].into(),
            );
            fingerprint(
                Some(d.path()),
                "e",
                cfg,
                &hashes.into_iter().collect::<Vec<_>>(),
            )
        };
        let base = f("c", "s");
        assert_eq!(base, f("c", "s"));
        assert_ne!(base, f("c2", "s"));
        assert_ne!(base, f("c", "s2"));
        std::fs::write(d.path().join("Pulumi.dev.yaml"), "x").unwrap();
        assert_eq!(base, f("c", "s"), "Pulumi.<stack>.yaml is ignored");
        std::fs::write(d.path().join("main.yaml"), "x").unwrap();
        assert_ne!(base, f("c", "s"));
        assert!(!base.contains('s') || base.chars().all(|c| c.is_ascii_hexdigit()));
    }
}
