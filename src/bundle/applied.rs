//! The applied mark: a bundle applies once. The mark is keyed on the bundle's digest
//! ([`super::Manifest::digest`]: its content, never its id, which is never part of a
//! path) and written atomically (a temporary file renamed over it, so a link planted in
//! its place is replaced, never written through), in the bundle and under the stack.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{APPLIED, Manifest};
use crate::error::Result;

/// The applied mark (`applied.json`, and a copy under `.strata/<stack>/bundles/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The bundle's digest: what was applied.
    pub digest: String,
    /// The preview's run ID, for people.
    pub id: String,
    pub run_id: String,
    pub applied_at: String,
}

/// The mark of the bundle of `digest`, in the bundle at `dir` or under the stack's
/// state (when known): `None` when it was never applied. Only a plain file is read.
pub fn applied(dir: &Path, state_dir: Option<&Path>, digest: &str) -> Option<Applied> {
    [
        Some(dir.join(APPLIED)),
        state_dir.map(|s| mark_file(s, digest)),
    ]
    .iter()
    .flatten()
    .filter_map(|f| super::contents::read_plain(f).ok().flatten())
    .filter_map(|b| serde_json::from_slice::<Applied>(&b).ok())
    .find(|a| a.digest == digest)
}

/// Records that the bundle `m` at `dir` was applied by run `run_id`: under the stack's
/// state first (a copy of the bundle is spent too), then in the bundle.
pub fn mark_applied(dir: &Path, state_dir: &Path, m: &Manifest, run_id: &str) -> Result<()> {
    let mark = Applied {
        digest: m.digest(),
        id: m.id.clone(),
        run_id: run_id.into(),
        applied_at: crate::util::rfc3339(crate::util::now_ms()),
    };
    let mut text = serde_json::to_vec_pretty(&mark).expect("a mark serializes");
    text.push(b'\n');
    crate::files::private_dir(&state_dir.join(MARKS))?;
    crate::files::write_atomic(&mark_file(state_dir, &mark.digest), &text, Some(0o600))?;
    crate::files::write_atomic(&dir.join(APPLIED), &text, Some(0o644))
}

/// The folder of the stack's marks, under its state.
const MARKS: &str = "bundles";

/// The stack's mark of the bundle of `digest` (64 hex digits, strata's own: no text
/// from a bundle is ever part of the path).
fn mark_file(state_dir: &Path, digest: &str) -> PathBuf {
    state_dir.join(MARKS).join(format!("{digest}.json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mark_is_found_in_the_bundle_or_under_the_stack_by_digest() {
        let (bundle, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let m = super::super::tests::manifest();
        let d = m.digest();
        assert_eq!(applied(bundle.path(), Some(state.path()), &d), None);
        mark_applied(bundle.path(), state.path(), &m, "r2").unwrap();
        let mark = applied(bundle.path(), Some(state.path()), &d).unwrap();
        assert_eq!((&mark.digest, &mark.id, &*mark.run_id), (&d, &m.id, "r2"));
        // A fresh copy of the bundle (a CI artifact downloaded again) is still known.
        let copy = tempfile::tempdir().unwrap();
        assert_eq!(applied(copy.path(), Some(state.path()), &d), Some(mark));
        assert_eq!(applied(copy.path(), None, &d), None);
        let other = crate::util::sha256_hex(b"other");
        assert_eq!(applied(bundle.path(), Some(state.path()), &other), None);
        let marks: Vec<_> = std::fs::read_dir(state.path().join(MARKS))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(
            marks,
            [format!("{d}.json")],
            "keyed on the digest, not the id"
        );
    }

    #[test]
    fn the_mark_replaces_a_planted_link() {
        let (bundle, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let victim = state.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::os::unix::fs::symlink(&victim, bundle.path().join(APPLIED)).unwrap();
        let m = super::super::tests::manifest();
        assert_eq!(applied(bundle.path(), None, &m.digest()), None);
        mark_applied(bundle.path(), state.path(), &m, "r2").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        let meta = std::fs::symlink_metadata(bundle.path().join(APPLIED)).unwrap();
        assert!(meta.file_type().is_file());
    }
}
