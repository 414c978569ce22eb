//! The files a git range changed, from the `git` CLI run in the workspace root: `[A...B]`
//! is `git diff --name-only A...B` (from the merge base), `[REF]` is `git diff
//! --name-only REF` (the work tree against REF) and the untracked files git does not
//! ignore. Paths come back relative to the workspace root (`--relative`).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::error::{Error, Result};
use crate::util::display_path;

use super::{Changes, Range};

/// The `git` CLI in a workspace.
pub struct Git {
    root: PathBuf,
}

impl Git {
    pub fn new(root: &Path) -> Git {
        Git {
            root: root.to_path_buf(),
        }
    }

    /// Runs git with `args` in the root; its stdout, or its stderr's first line.
    fn run(&self, args: &[&str]) -> Result<std::result::Result<Vec<u8>, String>> {
        let out = Command::new("git")
            .args(args)
            .current_dir(&self.root)
            .env("GIT_TERMINAL_PROMPT", "0")
            .env_remove("GIT_EXTERNAL_DIFF")
            .output()
            .map_err(|e| {
                Error::config(format!(
                    "a git range in a selector needs the `git` command, which could not be run ({e}). Install git, or select projects by path, name, glob or tag."
                ))
            })?;
        if out.status.success() {
            Ok(Ok(out.stdout))
        } else {
            let err = String::from_utf8_lossy(&out.stderr);
            Ok(Err(err.lines().next().unwrap_or("").trim().to_string()))
        }
    }

    fn check_repository(&self, range: &Range) -> Result<()> {
        match self.run(&["rev-parse", "--is-inside-work-tree"])? {
            Ok(_) => Ok(()),
            Err(why) => Err(Error::config(format!(
                "`{}` compares git revisions, but the workspace {} is not in a git repository (git: {why}).\n  Run strata in a clone of the repository, or select projects by path, name, glob or tag.",
                super::Target::Changed(range.clone()),
                display_path(&self.root)
            ))),
        }
    }

    fn check_revision(&self, range: &Range, rev: &str) -> Result<()> {
        // The parser refuses a revision that starts with `-`: none is taken for an option
        // (`--end-of-options` would say so too, but older gits' rev-parse lacks it).
        let spec = format!("{rev}^{{commit}}");
        if self
            .run(&["rev-parse", "--verify", "--quiet", &spec])?
            .is_ok()
        {
            return Ok(());
        }
        let refs = self
            .run(&[
                "for-each-ref",
                "--format=%(refname:short)",
                "refs/heads",
                "refs/tags",
                "refs/remotes",
            ])?
            .unwrap_or_default();
        let refs = String::from_utf8_lossy(&refs);
        Err(Error::config(format!(
            "`{}`: git knows no commit `{rev}` in {}.{}\n  Name a branch, tag or commit (`git branch -a` lists them); in a shallow CI clone, fetch it first (`git fetch origin {rev}`).",
            super::Target::Changed(range.clone()),
            display_path(&self.root),
            crate::util::did_you_mean(rev, refs.lines())
        )))
    }

    fn names(&self, args: &[&str]) -> Result<Vec<String>> {
        match self.run(args)? {
            Ok(out) => Ok(out
                .split(|b| *b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .collect()),
            Err(why) => Err(Error::config(format!(
                "`git {}` failed in {}: {why}",
                args.join(" "),
                display_path(&self.root)
            ))),
        }
    }
}

impl Changes for Git {
    fn changed(&self, range: &Range) -> Result<Vec<String>> {
        self.check_repository(range)?;
        let diff = ["diff", "--name-only", "-z", "--no-renames", "--relative"];
        match range {
            Range::Between(a, b) => {
                self.check_revision(range, a)?;
                self.check_revision(range, b)?;
                let spec = format!("{a}...{b}");
                self.names(&[&diff[..], &[&spec, "--"]].concat())
            }
            Range::Since(r) => {
                self.check_revision(range, r)?;
                let mut files = self.names(&[&diff[..], &[r.as_str(), "--"]].concat())?;
                files.extend(self.names(&["ls-files", "-z", "--others", "--exclude-standard"])?);
                Ok(files)
            }
        }
    }
}
