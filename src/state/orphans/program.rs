//! Where an orphan's program is now: its folder, while it is still there; else the last
//! revision of the workspace's git history that had it, copied out of git (`git
//! archive`, the whole tree, so that a program reading its neighbours still finds them)
//! into a private temporary folder that goes with the run. Nothing is added to `.git`
//! (no worktree to prune) and nothing is left behind. Else a refusal that gives the steps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use crate::state::journal::KnownProject;
use crate::util::display_path;

/// The copies of past revisions made for one run (removed when dropped).
pub struct History {
    root: PathBuf,
    /// By revision: the copy, and the workspace root inside it.
    copies: BTreeMap<String, (tempfile::TempDir, PathBuf)>,
}

/// Where one orphan's program was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Found {
    /// Its folder is still in the workspace.
    InPlace,
    /// The folder is gone; this revision (a commit id) has it.
    Revision(String),
}

impl History {
    pub fn new(root: &Path) -> History {
        History {
            root: root.to_path_buf(),
            copies: BTreeMap::new(),
        }
    }

    /// The folder that holds `k.dir` (relative to it): the workspace root, or the root
    /// of a copy of the last revision that had it.
    pub fn base_for(&mut self, k: &KnownProject, stack: &str) -> Result<(PathBuf, Found)> {
        if self.root.join(&k.dir).is_dir() {
            return Ok((self.root.clone(), Found::InPlace));
        }
        let Some(rev) = self.last_revision_with(&k.dir) else {
            return Err(cannot_find(k, &self.root, stack));
        };
        if !self.copies.contains_key(&rev) {
            let copy = self.copy(&rev)?;
            self.copies.insert(rev.clone(), copy);
        }
        let (_, inner) = &self.copies[&rev];
        Ok((inner.clone(), Found::Revision(rev)))
    }

    /// The newest commit reachable from HEAD whose tree has `dir` (relative to the
    /// workspace root): HEAD itself when only the work tree lost it, else the parent of
    /// the last commit that touched it (the one that removed it).
    fn last_revision_with(&self, dir: &str) -> Option<String> {
        let has = |rev: &str| {
            self.git(&["cat-file", "-e", &format!("{rev}:./{dir}")])
                .is_some()
        };
        let full = |rev: &str| {
            let out = self.git(&[
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{rev}^{{commit}}"),
            ])?;
            Some(String::from_utf8_lossy(&out).trim().to_string())
        };
        if has("HEAD") {
            return full("HEAD");
        }
        let last = self.git(&["rev-list", "-1", "HEAD", "--", dir])?;
        let last = String::from_utf8_lossy(&last).trim().to_string();
        let parent = format!("{last}^");
        (!last.is_empty() && has(&parent))
            .then(|| full(&parent))
            .flatten()
    }

    /// The tree of `rev` in a new temporary folder; the workspace root inside it.
    fn copy(&self, rev: &str) -> Result<(tempfile::TempDir, PathBuf)> {
        let top = self
            .git(&["rev-parse", "--show-toplevel"])
            .map(|o| PathBuf::from(String::from_utf8_lossy(&o).trim()))
            .ok_or_else(|| Error::failed("git could not name the repository's top folder"))?;
        let prefix = self
            .git(&["rev-parse", "--show-prefix"])
            .map(|o| String::from_utf8_lossy(&o).trim().to_string())
            .unwrap_or_default();
        let dir = tempfile::Builder::new()
            .prefix("strata-orphans-")
            .tempdir()
            .map_err(|e| Error::failed(format!("cannot make a temporary folder: {e}")))?;
        let out = duct::cmd!("git", "archive", "--format=tar", rev)
            .dir(&top)
            .env("GIT_TERMINAL_PROMPT", "0")
            .pipe(duct::cmd!("tar", "-x", "-C", dir.path()))
            .stdout_null()
            .stderr_capture()
            .unchecked()
            .run()
            .map_err(|e| Error::failed(format!("cannot run git archive | tar: {e}")))?;
        if !out.status.success() {
            return Err(Error::failed(format!(
                "cannot copy revision {rev} out of git: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        // tar gives the folder and what it extracts the modes of the archive under the
        // umask (0755, 0664): made private, the folder 0700 and nothing open to others.
        make_private(dir.path()).map_err(|e| {
            Error::failed(format!(
                "cannot make the copy of revision {rev} at {} private: {e}",
                dir.path().display()
            ))
        })?;
        let inner = dir.path().join(prefix.trim_end_matches('/'));
        Ok((dir, inner))
    }

    /// git's stdout, run in the workspace root; `None` when it fails or cannot run.
    fn git(&self, args: &[&str]) -> Option<Vec<u8>> {
        let out = Command::new("git")
            .args(args)
            .current_dir(&self.root)
            .env("GIT_TERMINAL_PROMPT", "0")
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        out.status.success().then_some(out.stdout)
    }
}

/// `path` and everything under it without any permission for group and others (links
/// are left alone: their own mode means nothing).
fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.file_type().is_symlink() {
        return Ok(());
    }
    let mode = meta.permissions().mode() & 0o7777 & !0o077;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    if meta.is_dir() {
        for e in std::fs::read_dir(path)? {
            make_private(&e?.path())?;
        }
    }
    Ok(())
}

/// The refusal when neither the folder nor any revision has the program, with the steps.
fn cannot_find(k: &KnownProject, root: &Path, stack: &str) -> Error {
    let dir = display_path(&root.join(&k.dir));
    let by_hand = if k.kind == "command" || k.name.is_empty() {
        "run its own destroy command by hand".to_string()
    } else {
        format!(
            "destroy it with Pulumi in a copy of its program: `pulumi destroy --stack {stack}` (or, to forget its resources without deleting them: `pulumi stack rm --force --stack {stack}` there)"
        )
    };
    Error::config(format!(
        "orphan `{}`: its program is gone ({dir} does not exist) and no commit of this repository's history has it, so strata cannot destroy it. Nothing was destroyed.\n  Put its folder back at {dir} (from a backup or another clone) and run `strata destroy --orphans` again, or {by_hand}.",
        k.project
    ))
}
