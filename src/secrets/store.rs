//! The age-encrypted secret store of a stack: `config/secrets/<stack>.age`.
//!
//! The file is an ASCII-armoured age file whose plaintext is one JSON object
//! mapping secret keys (`namespace:name`) to their values. It is encrypted
//! either to an identity (an age X25519 identity from `age-keygen`, or an OpenSSH
//! ed25519/RSA private key) together with every recipient of
//! `config/secrets/<stack>.recipients` (age's recipients-file format), so a teammate's
//! key is never dropped; or to a passphrase (scrypt). Writes are atomic and the file
//! is private (0600). Neither errors nor `Debug` output ever contain a secret value.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use age::armor::{ArmoredReader, ArmoredWriter, Format};
use age::secrecy::{ExposeSecret, SecretSlice, SecretString};
use age::{DecryptError, Decryptor, Encryptor};

const BEGIN_MARKER: &str = "-----BEGIN AGE ENCRYPTED FILE-----";
const END_MARKER: &str = "-----END AGE ENCRYPTED FILE-----";
const BINARY_MAGIC: &[u8] = b"age-encryption.org/";

/// The store's own entry beside the secrets: the random key of the digests strata keeps
/// of secret values under `.strata/` (HMAC-SHA256, see `run::fingerprint::secret_digest`).
/// Created when the store is first written; not a valid secret key (no `:`), so it
/// cannot clash with one, and never shown or handed to a project.
pub const DIGEST_KEY_ENTRY: &str = "strata.digest-key";

/// A new digest key: 32 random bytes, hex.
pub fn new_digest_key() -> io::Result<String> {
    let bytes = crate::run::fingerprint::random_bytes(32)?;
    Ok(crate::util::hex(&bytes))
}

/// What the store is encrypted to.
#[derive(Debug)]
pub enum Key {
    /// An X25519 identity file in `age-keygen` format (comments allowed).
    /// The store is encrypted to its public key.
    Identity(PathBuf),
    /// A passphrase; the store is encrypted with age's scrypt recipient.
    /// `SecretString`'s `Debug` output is redacted.
    Passphrase(SecretString),
}

/// Why the secret store could not be read or written.
///
/// Every message names the file and says what to do; none contains a secret.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot read the secret store {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "cannot write the secret store {}: {source}; check that the directory is writable",
        path.display()
    )]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "cannot read the age identity file {}: {source}; set STRATA_AGE_IDENTITY to an \
         existing file made by `age-keygen`",
        path.display()
    )]
    IdentityRead {
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    #[error(
        "the age identity file {} has a line {line} that is not an X25519 identity \
         (expected `AGE-SECRET-KEY-1...`; comments start with `#`); create one with `age-keygen`",
        path.display()
    )]
    IdentityInvalid { path: PathBuf, line: usize },

    #[error(
        "the age identity file {} holds no identity (expected a line `AGE-SECRET-KEY-1...`); \
         create one with `age-keygen -o {}`",
        path.display(), path.display()
    )]
    IdentityMissing { path: PathBuf },

    #[error(
        "wrong passphrase for the secret store {}; enter the passphrase it was created with \
         (STRATA_PASSPHRASE)",
        path.display()
    )]
    WrongPassphrase { path: PathBuf },

    #[error(
        "the secret store {} is not encrypted to the identity in {}; use the identity it was \
         created with (STRATA_AGE_IDENTITY)",
        path.display(), identity.display()
    )]
    WrongIdentity { path: PathBuf, identity: PathBuf },

    #[error(
        "the secret store {} is encrypted with a passphrase, but an identity file was given; \
         unset STRATA_AGE_IDENTITY and set STRATA_PASSPHRASE (or enter it when asked)",
        path.display()
    )]
    NeedsPassphrase { path: PathBuf },

    #[error(
        "the secret store {} is encrypted to an age identity, but a passphrase was given; \
         set STRATA_AGE_IDENTITY to the identity file it was created with",
        path.display()
    )]
    NeedsIdentity { path: PathBuf },

    #[error(
        "the secret store {} is truncated (the age file ends early); restore it from version \
         control or a backup, or delete it and set the secrets again",
        path.display()
    )]
    Truncated { path: PathBuf },

    #[error(
        "the secret store {} is damaged or was modified ({detail}); restore it from version \
         control or a backup, or delete it and set the secrets again",
        path.display()
    )]
    Corrupt { path: PathBuf, detail: String },

    #[error(
        "the secret store {} was decrypted but does not hold a JSON object of strings \
         (line {line}, column {column}); it was not written by strata, restore it or delete it",
        path.display()
    )]
    NotJson {
        path: PathBuf,
        line: usize,
        column: usize,
    },

    #[error(
        "the secret store {} needs more scrypt work to decrypt than this machine allows \
         (2^{required}); re-encrypt it with a lower work factor",
        path.display()
    )]
    ExcessiveWork { path: PathBuf, required: u8 },

    #[error("cannot encrypt the secret store {}: {detail}", path.display())]
    Encrypt { path: PathBuf, detail: String },

    #[error(
        "{}: line {line} is not an age recipient (`age1...`, `ssh-ed25519 ...` or `ssh-rsa ...`; `#` starts a comment); fix or remove it",
        path.display()
    )]
    RecipientInvalid { path: PathBuf, line: usize },

    #[error(
        "{} lists recipients, but this store is written with a passphrase, which age cannot combine with other recipients; set STRATA_AGE_IDENTITY to your age identity or SSH key to write it for the team",
        path.display()
    )]
    RecipientsNeedIdentity { path: PathBuf },
}

/// Whether the store file exists (a missing store is an empty one).
pub fn exists(path: &Path) -> bool {
    path.is_file()
}

/// Reads and decrypts the store. A missing file is an empty store.
///
/// Never modifies the file.
pub fn load(path: &Path, key: &Key) -> Result<BTreeMap<String, String>, StoreError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(source) => {
            return Err(StoreError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let plaintext = decrypt(path, key, &bytes)?;
    serde_json::from_slice::<BTreeMap<String, String>>(plaintext.expose_secret()).map_err(|e| {
        // Only the position: serde's message could quote a value.
        StoreError::NotJson {
            path: path.to_path_buf(),
            line: e.line(),
            column: e.column(),
        }
    })
}

/// Encrypts `values` and writes them atomically to `path` (mode 0600),
/// creating the parent directory. On error the old file is left as it was.
pub fn save(path: &Path, key: &Key, values: &BTreeMap<String, String>) -> Result<(), StoreError> {
    save_with_work_factor(path, key, values, Some(PASSPHRASE_WORK_FACTOR))
}

/// The scrypt work factor (`log2 N`) of a passphrase store: 18, what the `age` CLI
/// uses. Opening the store costs 2^18 × 1 KiB = 256 MiB of memory and a fraction of a
/// second of CPU; age's own calibration (about one second of work on the machine that
/// writes) can choose 19–20 on a fast laptop, which a small CI runner then pays twice
/// over in memory. Teams and CI are better served by an age identity (no scrypt).
pub const PASSPHRASE_WORK_FACTOR: u8 = 18;

/// [`save`], with an explicit scrypt work factor (`log2 N`) for passphrase
/// keys. `None` is age's default (about one second of work); tests use a
/// small factor to stay fast.
pub(crate) fn save_with_work_factor(
    path: &Path,
    key: &Key,
    values: &BTreeMap<String, String>,
    scrypt_log_n: Option<u8>,
) -> Result<(), StoreError> {
    let plaintext =
        SecretSlice::from(serde_json::to_vec(values).map_err(|e| StoreError::Encrypt {
            path: path.to_path_buf(),
            detail: format!("cannot serialise the secrets: {:?}", e.classify()),
        })?);
    let ciphertext = encrypt(path, key, plaintext.expose_secret(), scrypt_log_n)?;
    write_atomically(path, &ciphertext)
}

fn encrypt(
    path: &Path,
    key: &Key,
    plaintext: &[u8],
    scrypt_log_n: Option<u8>,
) -> Result<Vec<u8>, StoreError> {
    let encrypt_error = |detail: String| StoreError::Encrypt {
        path: path.to_path_buf(),
        detail,
    };
    let team = read_recipients(&recipients_path(path))?;
    let encryptor = match key {
        Key::Identity(identity_path) => {
            let own = read_identity(identity_path)?.recipient(identity_path)?;
            let mut all: Vec<&dyn age::Recipient> = vec![own.as_ref()];
            all.extend(team.iter().map(|r| r.as_ref()));
            Encryptor::with_recipients(all.into_iter()).map_err(|e| encrypt_error(e.to_string()))?
        }
        Key::Passphrase(_) if !team.is_empty() => {
            return Err(StoreError::RecipientsNeedIdentity {
                path: recipients_path(path),
            });
        }
        Key::Passphrase(passphrase) => {
            let mut recipient = age::scrypt::Recipient::new(passphrase.clone());
            if let Some(log_n) = scrypt_log_n.filter(|n| (1..64).contains(n)) {
                recipient.set_work_factor(log_n);
            }
            Encryptor::with_recipients(std::iter::once(&recipient as &dyn age::Recipient))
                .map_err(|e| encrypt_error(e.to_string()))?
        }
    };
    let io_error = |e: io::Error| encrypt_error(e.to_string());
    let mut out = Vec::new();
    let armored = ArmoredWriter::wrap_output(&mut out, Format::AsciiArmor).map_err(io_error)?;
    let mut writer = encryptor.wrap_output(armored).map_err(io_error)?;
    writer.write_all(plaintext).map_err(io_error)?;
    writer
        .finish()
        .and_then(|armored| armored.finish())
        .map_err(io_error)?;
    Ok(out)
}

fn decrypt(path: &Path, key: &Key, bytes: &[u8]) -> Result<SecretSlice<u8>, StoreError> {
    let looks_truncated = bytes.is_empty() || {
        let text = String::from_utf8_lossy(bytes);
        text.trim_start().starts_with(BEGIN_MARKER) && !text.contains(END_MARKER)
    };
    if looks_truncated {
        return Err(StoreError::Truncated {
            path: path.to_path_buf(),
        });
    }
    let trimmed = bytes.trim_ascii_start();
    if !trimmed.starts_with(BEGIN_MARKER.as_bytes()) && !trimmed.starts_with(BINARY_MAGIC) {
        return Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            detail: "it is not an age file".into(),
        });
    }

    let decryptor =
        Decryptor::new(ArmoredReader::new(bytes)).map_err(|e| decrypt_error(path, key, e))?;

    let mut plaintext = Vec::new();
    let read = match key {
        Key::Identity(identity_path) => {
            if decryptor.is_scrypt() {
                return Err(StoreError::NeedsPassphrase {
                    path: path.to_path_buf(),
                });
            }
            let identity = read_identity(identity_path)?;
            let mut reader = decryptor
                .decrypt(std::iter::once(identity.as_identity()))
                .map_err(|e| decrypt_error(path, key, e))?;
            reader.read_to_end(&mut plaintext)
        }
        Key::Passphrase(passphrase) => {
            if !decryptor.is_scrypt() {
                return Err(StoreError::NeedsIdentity {
                    path: path.to_path_buf(),
                });
            }
            let identity = age::scrypt::Identity::new(passphrase.clone());
            let mut reader = decryptor
                .decrypt(std::iter::once(&identity as &dyn age::Identity))
                .map_err(|e| decrypt_error(path, key, e))?;
            reader.read_to_end(&mut plaintext)
        }
    };
    // Wrap first so a partial plaintext is zeroed on every path.
    let plaintext = SecretSlice::from(plaintext);
    match read {
        Ok(_) => Ok(plaintext),
        Err(e) => Err(payload_error(path, e)),
    }
}

/// Maps an error from reading the header or unwrapping the file key.
fn decrypt_error(path: &Path, key: &Key, error: DecryptError) -> StoreError {
    let path = path.to_path_buf();
    match error {
        DecryptError::DecryptionFailed | DecryptError::KeyDecryptionFailed => match key {
            Key::Passphrase(_) => StoreError::WrongPassphrase { path },
            Key::Identity(identity) => StoreError::WrongIdentity {
                path,
                identity: identity.clone(),
            },
        },
        DecryptError::NoMatchingKeys => match key {
            Key::Passphrase(_) => StoreError::NeedsIdentity { path },
            Key::Identity(identity) => StoreError::WrongIdentity {
                path,
                identity: identity.clone(),
            },
        },
        DecryptError::ExcessiveWork { required, .. } => {
            StoreError::ExcessiveWork { path, required }
        }
        DecryptError::Io(e) => payload_error(&path, e),
        DecryptError::InvalidHeader => StoreError::Corrupt {
            path,
            detail: "invalid age header".into(),
        },
        DecryptError::InvalidMac => StoreError::Corrupt {
            path,
            detail: "the age header's MAC does not match".into(),
        },
        DecryptError::UnknownFormat => StoreError::Corrupt {
            path,
            detail: "not an age v1 file".into(),
        },
        other => StoreError::Corrupt {
            path,
            detail: other.to_string(),
        },
    }
}

/// Maps an I/O error raised while reading the armour or the payload.
fn payload_error(path: &Path, error: io::Error) -> StoreError {
    let path = path.to_path_buf();
    if error.kind() == io::ErrorKind::UnexpectedEof {
        StoreError::Truncated { path }
    } else {
        // age's messages here describe the armour or the stream, never the plaintext.
        StoreError::Corrupt {
            path,
            detail: error.to_string(),
        }
    }
}

/// The identity a store is opened with.
enum LoadedIdentity {
    X25519(age::x25519::Identity),
    Ssh(age::ssh::Identity),
}

impl LoadedIdentity {
    fn as_identity(&self) -> &dyn age::Identity {
        match self {
            LoadedIdentity::X25519(i) => i,
            LoadedIdentity::Ssh(i) => i,
        }
    }

    /// The recipient that opens with this identity (the writer is always one).
    fn recipient(&self, path: &Path) -> Result<Box<dyn age::Recipient>, StoreError> {
        Ok(match self {
            LoadedIdentity::X25519(i) => Box::new(i.to_public()),
            LoadedIdentity::Ssh(i) => {
                Box::new(age::ssh::Recipient::try_from(i.clone()).map_err(|_| {
                    StoreError::IdentityInvalid {
                        path: path.to_path_buf(),
                        line: 1,
                    }
                })?)
            }
        })
    }
}

/// `config/secrets/<stack>.recipients` beside the store `<stack>.age`.
pub fn recipients_path(store: &Path) -> PathBuf {
    store.with_extension("recipients")
}

/// The recipients of the team (age's recipients-file format); none when the file is
/// absent.
fn read_recipients(path: &Path) -> Result<Vec<Box<dyn age::Recipient>>, StoreError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(StoreError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let mut out: Vec<Box<dyn age::Recipient>> = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let invalid = || StoreError::RecipientInvalid {
            path: path.to_path_buf(),
            line: index + 1,
        };
        if line.starts_with("age1") {
            out.push(Box::new(
                line.parse::<age::x25519::Recipient>()
                    .map_err(|_| invalid())?,
            ));
        } else if line.starts_with("ssh-") {
            out.push(Box::new(
                line.parse::<age::ssh::Recipient>().map_err(|_| invalid())?,
            ));
        } else {
            return Err(invalid());
        }
    }
    Ok(out)
}

/// Reads `STRATA_AGE_IDENTITY`: an age X25519 identity file (`age-keygen`, comments
/// allowed; the first identity is used) or an unencrypted OpenSSH ed25519/RSA private
/// key.
fn read_identity(path: &Path) -> Result<LoadedIdentity, StoreError> {
    let text = SecretString::from(fs::read_to_string(path).map_err(|source| {
        StoreError::IdentityRead {
            path: path.to_path_buf(),
            source,
        }
    })?);
    if text
        .expose_secret()
        .contains("-----BEGIN OPENSSH PRIVATE KEY-----")
    {
        let invalid = || StoreError::IdentityInvalid {
            path: path.to_path_buf(),
            line: 1,
        };
        let identity = age::ssh::Identity::from_buffer(
            text.expose_secret().as_bytes(),
            Some(path.display().to_string()),
        )
        .map_err(|_| invalid())?;
        return match identity {
            age::ssh::Identity::Unencrypted(_) => Ok(LoadedIdentity::Ssh(identity)),
            _ => Err(StoreError::IdentityRead {
                path: path.to_path_buf(),
                source: io::Error::other(
                    "a passphrase-protected or unsupported SSH key cannot be used without a prompt; use an unencrypted ed25519 or RSA key, or an age identity (age-keygen)",
                ),
            }),
        };
    }
    let mut found = None;
    for (index, line) in text.expose_secret().lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match line.parse::<age::x25519::Identity>() {
            Ok(identity) => {
                if found.is_none() {
                    found = Some(identity);
                }
            }
            Err(_) => {
                return Err(StoreError::IdentityInvalid {
                    path: path.to_path_buf(),
                    line: index + 1,
                });
            }
        }
    }
    found
        .map(LoadedIdentity::X25519)
        .ok_or_else(|| StoreError::IdentityMissing {
            path: path.to_path_buf(),
        })
}

/// Atomic write (temp file, 0600, rename): see `util::write_file_atomic`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    crate::util::write_file_atomic(path, bytes, Some(0o600)).map_err(|source| StoreError::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use age::secrecy::ExposeSecret;

    /// Tests use a tiny scrypt work factor so they run fast.
    const FAST: Option<u8> = Some(2);

    fn values() -> BTreeMap<String, String> {
        BTreeMap::from([
            (
                "prometheus:adminpass".to_string(),
                "hunter2-PLAINTEXT".to_string(),
            ),
            (
                "lab:token".to_string(),
                "tok-\u{e9}-\"quoted\"\nline".to_string(),
            ),
        ])
    }

    fn passphrase(p: &str) -> Key {
        Key::Passphrase(SecretString::from(p.to_string()))
    }

    fn identity_file(dir: &Path, name: &str) -> PathBuf {
        let identity = age::x25519::Identity::generate();
        let path = dir.join(name);
        let text = format!(
            "# created: 2024-01-01T00:00:00Z\n# public key: {}\n{}\n",
            identity.to_public(),
            identity.to_string().expose_secret()
        );
        fs::write(&path, text).unwrap();
        path
    }

    fn saved(dir: &Path, key: &Key) -> PathBuf {
        let path = dir.join("config/secrets/dev.age");
        save_with_work_factor(&path, key, &values(), FAST).unwrap();
        path
    }

    /// Asserts that `load` fails, that the error names the file and holds no
    /// secret, and that the file is unchanged; returns the error.
    fn load_fails(path: &Path, key: &Key) -> StoreError {
        let before = fs::read(path).unwrap();
        let err = load(path, key).unwrap_err();
        assert_eq!(fs::read(path).unwrap(), before, "file was modified");
        let shown = format!("{err} {err:?}");
        assert!(shown.contains(&path.display().to_string()), "{shown}");
        for value in values().values() {
            assert!(!shown.contains(value.as_str()), "{shown}");
        }
        err
    }

    #[test]
    fn round_trip_with_identity() {
        let dir = tempfile::tempdir().unwrap();
        let key = Key::Identity(identity_file(dir.path(), "key.txt"));
        let path = saved(dir.path(), &key);
        assert!(exists(&path));
        assert_eq!(load(&path, &key).unwrap(), values());
    }

    #[test]
    fn round_trip_with_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let key = passphrase("correct horse");
        let path = saved(dir.path(), &key);
        assert_eq!(load(&path, &key).unwrap(), values());
    }

    #[test]
    fn passphrase_stores_use_the_age_cli_work_factor() {
        use std::io::Read;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.age");
        save(&path, &passphrase("correct horse"), &BTreeMap::new()).unwrap();
        let open = |max: u8| {
            let text = std::fs::read(&path).unwrap();
            let reader = age::armor::ArmoredReader::new(&text[..]);
            let d = age::Decryptor::new(reader).unwrap();
            let mut id = age::scrypt::Identity::new(SecretString::from("correct horse"));
            id.set_max_work_factor(max);
            d.decrypt(std::iter::once(&id as &dyn age::Identity))
                .map(|mut r| {
                    let mut s = String::new();
                    r.read_to_string(&mut s).unwrap();
                    s
                })
                .is_ok()
        };
        assert!(open(PASSPHRASE_WORK_FACTOR), "opens with the chosen factor");
        assert!(!open(PASSPHRASE_WORK_FACTOR - 1), "and needs exactly it");
    }

    #[test]
    fn default_work_factor_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let key = passphrase("correct horse");
        let path = dir.path().join("s.age");
        let one = BTreeMap::from([("a:b".to_string(), "c".to_string())]);
        save(&path, &key, &one).unwrap();
        assert_eq!(load(&path, &key).unwrap(), one);
    }

    #[test]
    fn missing_file_is_empty_store() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nope.age");
        assert!(!exists(&path));
        assert!(load(&path, &passphrase("x")).unwrap().is_empty());
    }

    #[test]
    fn empty_map_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let key = passphrase("p");
        let path = dir.path().join("s.age");
        save_with_work_factor(&path, &key, &BTreeMap::new(), FAST).unwrap();
        assert!(load(&path, &key).unwrap().is_empty());
    }

    #[test]
    fn file_is_armoured_and_holds_no_plaintext() {
        let dir = tempfile::tempdir().unwrap();
        for key in [
            passphrase("pw"),
            Key::Identity(identity_file(dir.path(), "key.txt")),
        ] {
            let path = saved(dir.path(), &key);
            let text = fs::read_to_string(&path).unwrap();
            assert!(text.starts_with(BEGIN_MARKER), "{text}");
            assert!(text.trim_end().ends_with(END_MARKER), "{text}");
            for (k, v) in values() {
                assert!(!text.contains(&k), "key {k} in file");
                assert!(!text.contains(&v), "value in file");
            }
            assert!(!text.contains("hunter2"));
        }
    }

    #[test]
    fn wrong_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path(), &passphrase("right"));
        let err = load_fails(&path, &passphrase("wrong"));
        assert!(matches!(err, StoreError::WrongPassphrase { .. }), "{err:?}");
        assert!(err.to_string().contains("wrong passphrase"));
    }

    #[test]
    fn wrong_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(
            dir.path(),
            &Key::Identity(identity_file(dir.path(), "a.txt")),
        );
        let other = identity_file(dir.path(), "b.txt");
        let err = load_fails(&path, &Key::Identity(other.clone()));
        match &err {
            StoreError::WrongIdentity { identity, .. } => assert_eq!(identity, &other),
            _ => panic!("{err:?}"),
        }
        assert!(err.to_string().contains("b.txt"));
    }

    #[test]
    fn passphrase_file_opened_with_identity() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(dir.path(), &passphrase("pw"));
        let key = Key::Identity(identity_file(dir.path(), "key.txt"));
        let err = load_fails(&path, &key);
        assert!(matches!(err, StoreError::NeedsPassphrase { .. }), "{err:?}");
    }

    #[test]
    fn identity_file_opened_with_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let path = saved(
            dir.path(),
            &Key::Identity(identity_file(dir.path(), "k.txt")),
        );
        let err = load_fails(&path, &passphrase("pw"));
        assert!(matches!(err, StoreError::NeedsIdentity { .. }), "{err:?}");
    }

    #[test]
    fn truncated_file() {
        let dir = tempfile::tempdir().unwrap();
        let key = passphrase("pw");
        let path = saved(dir.path(), &key);
        let full = fs::read(&path).unwrap();
        // Cut at several places: inside the armour, right before the end
        // marker, and to nothing at all.
        for cut in [full.len() / 2, full.len() - END_MARKER.len() - 2, 40, 0] {
            fs::write(&path, &full[..cut]).unwrap();
            let err = load_fails(&path, &key);
            assert!(
                matches!(err, StoreError::Truncated { .. }),
                "cut {cut}: {err:?}"
            );
        }
        // Lines removed from the middle of the armour, end marker intact.
        let text = String::from_utf8(full).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.len() > 4, "{text}");
        let mut shorter = vec![lines[0], lines[1]];
        shorter.extend(&lines[lines.len() - 1..]);
        fs::write(&path, shorter.join("\n") + "\n").unwrap();
        let err = load_fails(&path, &key);
        assert!(
            matches!(
                err,
                StoreError::Truncated { .. } | StoreError::Corrupt { .. }
            ),
            "{err:?}"
        );
    }

    /// Replaces the base64 character at `index` by another valid one.
    fn flip(bytes: &mut [u8], index: usize) {
        bytes[index] = if bytes[index] == b'A' { b'B' } else { b'A' };
    }

    #[test]
    fn tampered_file() {
        let dir = tempfile::tempdir().unwrap();
        for key in [
            passphrase("pw"),
            Key::Identity(identity_file(dir.path(), "key.txt")),
        ] {
            let path = saved(dir.path(), &key);
            let original = fs::read(&path).unwrap();
            let text = String::from_utf8(original.clone()).unwrap();
            let body_start = BEGIN_MARKER.len() + 1;
            let body_end = text.find(END_MARKER).unwrap();
            let body = &text[body_start..body_end];
            let last_full_line = body.lines().count() - 2;
            // The payload (last full lines of the armour) and the header MAC
            // region (middle of the first lines).
            let payload_index = body_start + last_full_line * 65 + 10;
            let header_index = body_start + 65 * 3 + 5;
            for index in [payload_index, header_index] {
                let mut bytes = original.clone();
                flip(&mut bytes, index);
                fs::write(&path, &bytes).unwrap();
                let err = load_fails(&path, &key);
                assert!(
                    matches!(err, StoreError::Corrupt { .. }),
                    "{index}: {err:?}"
                );
                assert!(err.to_string().contains("damaged"), "{err}");
            }
        }
    }

    #[test]
    fn garbage_file_is_corrupt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.age");
        fs::write(&path, "hello: world\n").unwrap();
        let err = load_fails(&path, &passphrase("pw"));
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
    }

    #[cfg(unix)]
    #[test]
    fn file_mode_is_0600_even_over_a_public_file() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config/secrets/dev.age");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "old").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        save_with_work_factor(&path, &passphrase("pw"), &values(), FAST).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn save_is_atomic_and_leaves_no_temp_files() {
        let dir = tempfile::tempdir().unwrap();
        let key = passphrase("pw");
        let path = saved(dir.path(), &key);
        let mut more = values();
        more.insert("extra:key".into(), "v".into());
        save_with_work_factor(&path, &key, &more, FAST).unwrap();
        assert_eq!(load(&path, &key).unwrap(), more);
        let names: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("dev.age")]);
    }

    #[test]
    fn failed_save_leaves_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let key = passphrase("pw");
        let path = saved(dir.path(), &key);
        let before = fs::read(&path).unwrap();
        let missing = Key::Identity(dir.path().join("no-such-identity.txt"));
        let err = save_with_work_factor(&path, &missing, &values(), FAST).unwrap_err();
        assert!(matches!(err, StoreError::IdentityRead { .. }), "{err:?}");
        assert!(err.to_string().contains("no-such-identity.txt"));
        assert_eq!(fs::read(&path).unwrap(), before);
    }

    #[test]
    fn identity_file_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.age");
        let bad = dir.path().join("bad.txt");
        fs::write(&bad, "# comment\n\nnot-a-key\n").unwrap();
        let err = save_with_work_factor(&path, &Key::Identity(bad), &values(), FAST).unwrap_err();
        assert!(
            matches!(err, StoreError::IdentityInvalid { line: 3, .. }),
            "{err:?}"
        );
        assert!(!err.to_string().contains("not-a-key"));

        let empty = dir.path().join("empty.txt");
        fs::write(&empty, "# only comments\n").unwrap();
        let err = save_with_work_factor(&path, &Key::Identity(empty), &values(), FAST).unwrap_err();
        assert!(matches!(err, StoreError::IdentityMissing { .. }), "{err:?}");
        assert!(!path.exists());
    }

    #[test]
    fn debug_output_hides_passphrase() {
        let key = passphrase("sup3r-s3cret");
        assert!(!format!("{key:?}").contains("sup3r-s3cret"));
    }
}
