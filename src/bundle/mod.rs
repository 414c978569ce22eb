//! Plan bundles: what `strata preview --save-plan DIR` writes (each Pulumi project's
//! update plan, a manifest of everything the preview saw, the Markdown summary) and what
//! `strata up --plan DIR` checks before and while it applies exactly that.
//!
//! Pulumi compares a resource's inputs with its plan, but never the plan's config, and
//! it accepts a plan replayed over a state that already matches it
//! (docs/research/pulumi-update-plans.md). The manifest gives a bundle what Pulumi does
//! not: the code, inputs, secrets, stack config and profile it was made from, the
//! upstream outputs each project read, and a mark once applied.

pub mod check;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::util::display_path;

/// The manifest's file name inside a bundle.
pub const MANIFEST: &str = "manifest.json";
/// The Markdown summary of the preview inside a bundle.
pub const SUMMARY: &str = "summary.md";
/// The folder of Pulumi's update plans inside a bundle, one file per project.
pub const PLANS: &str = "plans";
/// Written into the bundle when `up --plan` applied all of it.
pub const APPLIED: &str = "applied.json";
/// The manifest format; a bundle of another version is refused.
pub const VERSION: u32 = 1;

/// The commit the bundle was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Git {
    pub commit: String,
    /// No uncommitted change, tracked or untracked (ignored files do not count).
    pub clean: bool,
}

/// What a bundle holds for one step of the preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// `pulumi`, `command` or `builtin` (the secrets step).
    pub kind: String,
    /// How its preview ended (`succeeded`, `blocked`, `failed`, …); only a bundle whose
    /// every step `succeeded` can be applied.
    pub status: String,
    /// The input fingerprint the preview ran with (code, inputs, secrets digest).
    pub fingerprint: Option<String>,
    /// Pulumi: the update plan, relative to the bundle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Command projects: the `preview:` line, as the profile has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// The hash of every upstream's outputs this step read, by upstream path.
    #[serde(default)]
    pub upstream_outputs: BTreeMap<String, String>,
    /// The preview's change counts, when the engine reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<serde_json::Value>,
    /// Why the step did not succeed, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Step {
    /// Whether `up --plan` may apply this step: its preview succeeded, or it is a
    /// command project (or the secrets step) with nothing to preview, which the
    /// fingerprint alone holds.
    /// Never true of a step previewed on projected inputs (status [`PROJECTED`]).
    pub fn appliable(&self) -> bool {
        self.status == "succeeded" || (self.status == "skipped" && self.kind != "pulumi")
    }
}

/// A step's status in the manifest when its preview ran on projected inputs (an
/// upstream never deployed): not appliable, since those values are not what `up`
/// would pass.
pub const PROJECTED: &str = "projected";

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    /// Names this bundle in the journal and in the applied mark (the preview's run ID).
    pub id: String,
    pub created_at: String,
    pub strata_version: String,
    pub git: Option<Git>,
    pub stack: String,
    pub profile: String,
    /// The profile as strata composed it (includes expanded), hashed.
    pub profile_hash: String,
    /// The shared stack config file, hashed.
    pub stack_config_hash: String,
    /// Every step of the preview, by project path, in the order they ran.
    pub steps: BTreeMap<String, Step>,
}

/// The applied mark (`applied.json`, and a copy under `.strata/<stack>/bundles/`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    pub id: String,
    pub run_id: String,
    pub applied_at: String,
}

impl Manifest {
    /// Reads the manifest of the bundle at `dir`.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let file = dir.join(MANIFEST);
        let text = match std::fs::read(&file) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::config(format!(
                    "{} is not a plan bundle: it has no {MANIFEST}. Make one with `strata preview --save-plan {}`.",
                    display_path(dir),
                    display_path(dir)
                )));
            }
            Err(e) => return Err(Error::io("read", &file, e)),
        };
        let m: Manifest = serde_json::from_slice(&text).map_err(|e| {
            Error::config(format!(
                "{}: not a plan bundle manifest strata can read ({e}). Make the bundle again with `strata preview --save-plan`.",
                display_path(&file)
            ))
        })?;
        if m.version != VERSION {
            return Err(Error::config(format!(
                "{}: a bundle of format {} (this strata reads format {VERSION}). Make it again with this strata's `preview --save-plan`.",
                display_path(&file),
                m.version
            )));
        }
        Ok(m)
    }

    /// Writes the manifest into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let mut text = serde_json::to_vec_pretty(self).expect("a manifest serializes");
        text.push(b'\n');
        crate::files::write_atomic(&dir.join(MANIFEST), &text, Some(0o644))
    }

    /// The update plan file of `project`, when it has one.
    pub fn plan_file(&self, dir: &Path, project: &str) -> Option<PathBuf> {
        self.steps
            .get(project)
            .and_then(|s| s.plan.as_ref())
            .map(|p| dir.join(p))
    }
}

/// Where the update plan of `project` goes inside a bundle (relative to it).
pub fn plan_path(project: &str) -> String {
    format!("{PLANS}/{}.json", crate::util::slug(project))
}

/// Makes `dir` ready for a new bundle: created when missing, refused when it holds
/// anything (an old bundle is never mixed with a new one).
pub fn prepare_dir(dir: &Path) -> Result<()> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Error::config(format!(
                    "--save-plan {}: the folder is not empty. A bundle goes into a new or empty folder; remove it or name another.",
                    display_path(dir)
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("read", dir, e)),
    }
    let plans = dir.join(PLANS);
    std::fs::create_dir_all(&plans).map_err(|e| Error::io("create", &plans, e))
}

/// The commit of the workspace's git checkout and whether its tree is clean; `None`
/// outside git (or without git).
pub fn git_state(root: &Path) -> Option<Git> {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let commit = git(&["rev-parse", "HEAD"])?.trim().to_string();
    let status = git(&["status", "--porcelain", "--untracked-files=normal"])?;
    Some(Git {
        commit,
        clean: status.trim().is_empty(),
    })
}

/// The SHA-256 of a file's bytes ("missing" when there is none).
pub fn file_hash(path: &Path) -> String {
    match std::fs::read(path) {
        Ok(bytes) => crate::util::sha256_hex(&bytes),
        Err(_) => "missing".into(),
    }
}

/// The profile as composed, hashed: its entries in order with every field strata reads.
/// Paths under `root` are written relative to it, so a bundle made in one checkout
/// applies in another.
pub fn profile_hash(profile: &crate::workspace::Profile, root: &Path) -> String {
    let text = format!("{profile:?}");
    let root = root.display().to_string();
    crate::util::sha256_hex(text.replace(&root, "<root>").as_bytes())
}

/// Whether the bundle was applied: its own mark, or the stack's record of its ID.
pub fn applied(dir: &Path, state_dir: &Path, id: &str) -> Option<Applied> {
    [
        dir.join(APPLIED),
        marks_dir(state_dir).join(format!("{id}.json")),
    ]
    .iter()
    .filter_map(|f| std::fs::read(f).ok())
    .filter_map(|b| serde_json::from_slice::<Applied>(&b).ok())
    .find(|a| a.id == id)
}

/// Records that the bundle was applied, in the bundle and under the stack's state.
pub fn mark_applied(dir: &Path, state_dir: &Path, mark: &Applied) -> Result<()> {
    let mut text = serde_json::to_vec_pretty(mark).expect("a mark serializes");
    text.push(b'\n');
    let marks = marks_dir(state_dir);
    crate::files::private_dir(&marks)?;
    crate::files::write_private(&marks.join(format!("{}.json", mark.id)), &text)?;
    crate::files::write_atomic(&dir.join(APPLIED), &text, Some(0o644))
}

fn marks_dir(state_dir: &Path) -> PathBuf {
    state_dir.join("bundles")
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn manifest() -> Manifest {
        let step = |kind: &str, fp: &str| Step {
            kind: kind.into(),
            status: "succeeded".into(),
            fingerprint: Some(fp.into()),
            plan: (kind == "pulumi").then(|| plan_path("infra/vpc")),
            preview: (kind == "command").then(|| "echo preview".into()),
            upstream_outputs: BTreeMap::new(),
            changes: None,
            message: None,
        };
        Manifest {
            version: VERSION,
            id: "r1".into(),
            created_at: "2026-11-26T00:00:00Z".into(),
            strata_version: "0.1.0".into(),
            git: None,
            stack: "dev".into(),
            profile: "local".into(),
            profile_hash: "p".into(),
            stack_config_hash: "c".into(),
            steps: [
                ("infra/vpc".to_string(), step("pulumi", "f1")),
                ("k8s/app".to_string(), step("command", "f2")),
            ]
            .into(),
        }
    }

    #[test]
    fn a_manifest_round_trips_and_names_its_plan_files() {
        let dir = tempfile::tempdir().unwrap();
        let m = manifest();
        m.write(dir.path()).unwrap();
        let back = Manifest::read(dir.path()).unwrap();
        assert_eq!(back, m);
        assert_eq!(
            back.plan_file(dir.path(), "infra/vpc"),
            Some(dir.path().join(plan_path("infra/vpc")))
        );
        assert_eq!(back.plan_file(dir.path(), "k8s/app"), None);
    }

    #[test]
    fn a_folder_that_is_not_a_bundle_is_a_configuration_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = Manifest::read(dir.path()).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.message.contains("not a plan bundle"), "{e:?}");
        std::fs::write(dir.path().join(MANIFEST), "{").unwrap();
        let e = Manifest::read(dir.path()).unwrap_err();
        assert!(e.message.contains("cannot read") || e.message.contains("not a plan bundle"));
        let mut m = manifest();
        m.version = 99;
        m.write(dir.path()).unwrap();
        let e = Manifest::read(dir.path()).unwrap_err();
        assert!(e.message.contains("format 99"), "{e:?}");
    }

    #[test]
    fn a_bundle_goes_only_into_a_new_or_empty_folder() {
        let dir = tempfile::tempdir().unwrap();
        let new = dir.path().join("b");
        prepare_dir(&new).unwrap();
        assert!(new.join(PLANS).is_dir());
        let e = prepare_dir(&new).unwrap_err();
        assert!(e.message.contains("not empty"), "{e:?}");
    }

    #[test]
    fn the_applied_mark_is_found_in_the_bundle_or_under_the_stack() {
        let (bundle, state) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        assert_eq!(applied(bundle.path(), state.path(), "r1"), None);
        let mark = Applied {
            id: "r1".into(),
            run_id: "r2".into(),
            applied_at: "t".into(),
        };
        mark_applied(bundle.path(), state.path(), &mark).unwrap();
        assert_eq!(
            applied(bundle.path(), state.path(), "r1"),
            Some(mark.clone())
        );
        // A fresh copy of the bundle (a CI artifact downloaded again) is still known.
        let copy = tempfile::tempdir().unwrap();
        assert_eq!(applied(copy.path(), state.path(), "r1"), Some(mark));
        assert_eq!(applied(copy.path(), state.path(), "other"), None);
    }

    #[test]
    fn git_state_reads_the_commit_and_cleanliness() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(git_state(dir.path()), None, "not a checkout");
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t")
                .output()
                .unwrap()
                .status
                .success();
            assert!(ok, "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(dir.path().join("f"), "1").unwrap();
        git(&["add", "f"]);
        git(&["commit", "-q", "-m", "m"]);
        let g = git_state(dir.path()).unwrap();
        assert!(g.clean && g.commit.len() == 40, "{g:?}");
        std::fs::write(dir.path().join("f"), "2").unwrap();
        assert!(!git_state(dir.path()).unwrap().clean);
    }
}
