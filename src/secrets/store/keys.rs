//! The keys a store is encrypted to: the identity file it is opened with
//! (`STRATA_AGE_IDENTITY`, age X25519 or OpenSSH) and the team's recipients file.

use std::fs;
use std::io;
use std::path::Path;

use age::secrecy::{ExposeSecret, SecretString};

use super::StoreError;

/// The identity a store is opened with.
pub(super) enum LoadedIdentity {
    X25519(age::x25519::Identity),
    Ssh(age::ssh::Identity),
}

impl LoadedIdentity {
    pub(super) fn as_identity(&self) -> &dyn age::Identity {
        match self {
            LoadedIdentity::X25519(i) => i,
            LoadedIdentity::Ssh(i) => i,
        }
    }

    /// The recipient that opens with this identity (the writer is always one).
    pub(super) fn recipient(&self, path: &Path) -> Result<Box<dyn age::Recipient>, StoreError> {
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

/// The recipients of the team (age's recipients-file format); none when the file is
/// absent.
pub(super) fn read_recipients(path: &Path) -> Result<Vec<Box<dyn age::Recipient>>, StoreError> {
    let Some(bytes) = super::read_if_present(path)? else {
        return Ok(Vec::new());
    };
    let text = String::from_utf8(bytes).map_err(|e| StoreError::Read {
        path: path.to_path_buf(),
        source: io::Error::new(io::ErrorKind::InvalidData, e.utf8_error()),
    })?;
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
pub(super) fn read_identity(path: &Path) -> Result<LoadedIdentity, StoreError> {
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
