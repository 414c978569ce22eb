//! The age-encrypted secret store of a stack: `config/secrets/<stack>.age`.
//!
//! The file is an ASCII-armoured age file whose plaintext is one JSON object
//! mapping secret keys (`namespace:name`) to their values. It is encrypted
//! either to an identity (an age X25519 identity from `age-keygen`, or an OpenSSH
//! ed25519/RSA private key) together with every recipient of
//! `config/secrets/<stack>.recipients` (age's recipients-file format), so a teammate's
//! key is never dropped; or to a passphrase (scrypt). Writes are atomic and the file
//! is private (0600). Neither errors nor `Debug` output ever contain a secret value.

mod keys;

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use age::armor::{ArmoredReader, ArmoredWriter, Format};
use age::secrecy::{ExposeSecret, SecretSlice, SecretString};
use age::{DecryptError, Decryptor, Encryptor};

use keys::{read_identity, read_recipients};

const BEGIN_MARKER: &str = "-----BEGIN AGE ENCRYPTED FILE-----";
const END_MARKER: &str = "-----END AGE ENCRYPTED FILE-----";
const BINARY_MAGIC: &[u8] = b"age-encryption.org/";

/// The store's own entry beside the secrets: the random key of the digests strata keeps
/// of secret values under `.strata/` (HMAC-SHA256, see `secrets::hmac::secret_digest`).
/// Created when the store is first written; not a valid secret key (no `:`), so it
/// cannot clash with one, and never shown or handed to a project.
pub const DIGEST_KEY_ENTRY: &str = "strata.digest-key";

/// A new digest key: 32 random bytes, hex.
pub fn new_digest_key() -> io::Result<String> {
    let bytes = crate::util::random_bytes(32)?;
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

/// The bytes of the file at `path`; none when it does not exist.
fn read_if_present(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StoreError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Reads and decrypts the store. A missing file is an empty store.
///
/// Never modifies the file.
pub fn load(path: &Path, key: &Key) -> Result<BTreeMap<String, String>, StoreError> {
    let Some(bytes) = read_if_present(path)? else {
        return Ok(BTreeMap::new());
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

/// `config/secrets/<stack>.recipients` beside the store `<stack>.age`.
pub fn recipients_path(store: &Path) -> PathBuf {
    store.with_extension("recipients")
}
/// Atomic write (temp file, 0600, rename): see `files::write_file_atomic`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    crate::files::write_file_atomic(path, bytes, Some(0o600)).map_err(|source| StoreError::Write {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests;
