//! Plan bundles: what `strata preview --save-plan DIR` writes (each Pulumi project's
//! update plan, a manifest of everything the preview saw, the Markdown summary) and what
//! `strata up --plan DIR` checks before and while it applies exactly that.
//!
//! Pulumi compares a resource's inputs with its plan, but never the plan's config, and
//! it accepts a plan replayed over a state that already matches it
//! (docs/research/pulumi-update-plans.md). The manifest gives a bundle what Pulumi does
//! not: the code, inputs, secrets, stack config and profile it was made from, the
//! upstream outputs each project read, the digest of every file it holds, and a mark
//! once applied. A bundle is untrusted input (a pull request's job makes it, main's
//! credentials apply it): nothing in it names a path strata writes or decides a step's
//! kind.

pub mod applied;
pub mod check;
pub mod contents;

pub use applied::{Applied, applied, mark_applied};

use std::collections::BTreeMap;
use std::path::Path;

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
/// The manifest format; a bundle of another version is refused. Format 2 added
/// `files`, the SHA-256 of every file of the bundle.
pub const VERSION: u32 = 2;

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
    /// Pulumi, on a `file://` or `s3://` backend: when the stack's state was last written
    /// as the preview began (empty: no deployment yet). `up --plan` refuses the project
    /// when it was written since (a hand-made update would otherwise be undone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// The preview's change counts, when the engine reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<serde_json::Value>,
    /// Why the step did not succeed, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

impl Manifest {
    /// Whether the bundle's preview of `path` ran on projected inputs.
    pub fn is_projected(&self, path: &str) -> bool {
        self.steps.get(path).is_some_and(|s| s.status == PROJECTED)
    }

    /// Whether the bundle's preview of `path` was blocked (it holds no plan of it).
    pub fn is_blocked(&self, path: &str) -> bool {
        self.steps.get(path).is_some_and(|s| s.status == BLOCKED)
    }
}

impl Step {
    /// Whether `up --plan` may apply this step, of `kind` as the workspace has it (never
    /// the manifest's word): its preview succeeded, or it is a command project (or the
    /// secrets step) with nothing to preview, which the fingerprint alone holds.
    /// A step previewed on projected inputs (status [`PROJECTED`]) is, too: `up --plan`
    /// previews it again on its upstreams' real outputs first.
    pub fn appliable(&self, kind: &str) -> bool {
        self.status == "succeeded"
            || self.status == PROJECTED
            || (self.status == "skipped" && kind != "pulumi")
    }
}

/// A step's kind as the workspace has it, named as a manifest names it: its project's
/// kind (`pulumi`, `command`), or `builtin` for the secrets step, which has none.
pub fn kind_of(project: Option<&crate::workspace::Project>) -> &'static str {
    match project.map(|p| &p.kind) {
        Some(crate::workspace::ProjectKind::Pulumi { .. }) => "pulumi",
        Some(crate::workspace::ProjectKind::Command(_)) => "command",
        None => "builtin",
    }
}

/// A step's status in the manifest when it could not be previewed: a project it needs
/// was never deployed and nothing of it could be projected.
pub const BLOCKED: &str = "blocked";

/// A step's status in the manifest when its preview ran on projected inputs (an
/// upstream never deployed): those values may not be what `up` will pass, so `up --plan`
/// previews it again once its upstreams are up, and applies its plan only when that
/// preview plans the same changes.
pub const PROJECTED: &str = "projected";

/// `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub version: u32,
    /// The preview's run ID, for people: checked to be one ([`valid_id`]), never part
    /// of a path, and not what "applied" is keyed on ([`Manifest::digest`]).
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
    /// Every file of the bundle but the manifest and the applied mark, by path relative
    /// to the bundle (`/`-separated), with the SHA-256 of its bytes ([`contents`]).
    pub files: BTreeMap<String, String>,
}

impl Manifest {
    /// Reads the manifest of the bundle at `dir`: a plain file (never a link) of this
    /// format, whose id and stack are what a preview writes.
    pub fn read(dir: &Path) -> Result<Manifest> {
        let file = dir.join(MANIFEST);
        let text = match contents::read_plain(&file) {
            Ok(Some(t)) => t,
            Ok(None) => {
                return Err(Error::config(format!(
                    "{} is not a plain file (a symbolic link, a folder or a device): a bundle holds plain files only. Nothing was run; make the bundle again with `strata preview --save-plan`.",
                    display_path(&file)
                )));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::config(format!(
                    "{} is not a plan bundle: it has no {MANIFEST}. Make one with `strata preview --save-plan {}`.",
                    display_path(dir),
                    display_path(dir)
                )));
            }
            Err(e) => return Err(Error::io("read", &file, e)),
        };
        let unreadable = |e: serde_json::Error| {
            Error::config(format!(
                "{}: not a plan bundle manifest strata can read ({e}). Make the bundle again with `strata preview --save-plan`.",
                display_path(&file)
            ))
        };
        #[derive(Deserialize)]
        struct Format {
            version: u32,
        }
        let format: Format = serde_json::from_slice(&text).map_err(unreadable)?;
        refuse_format(&file, format.version)?;
        let m: Manifest = serde_json::from_slice(&text).map_err(unreadable)?;
        m.refuse_names(&file)?;
        Ok(m)
    }

    /// The id and the stack are checked to be what a preview writes: neither is ever
    /// part of a path strata builds, but an edited one is an edited bundle.
    fn refuse_names(&self, file: &Path) -> Result<()> {
        let edited = |what: String| {
            Err(Error::config(format!(
                "{}: {what}: the bundle was edited after the preview, so nothing was run. Preview again (strata preview --save-plan DIR), review it, and apply that bundle.",
                display_path(file)
            )))
        };
        if !valid_id(&self.id) {
            return edited(
                "its `id` is not one `strata preview` makes (a run ID such as 20261126T101500.123Z-4242)"
                    .into(),
            );
        }
        if !crate::workspace::valid_stack_name(&self.stack) {
            return edited(format!(
                "its `stack` is not a stack name ({})",
                crate::workspace::why_not_a_stack_name(&self.stack)
            ));
        }
        Ok(())
    }

    /// Writes the manifest into `dir`.
    pub fn write(&self, dir: &Path) -> Result<()> {
        let mut text = serde_json::to_vec_pretty(self).expect("a manifest serializes");
        text.push(b'\n');
        crate::files::write_atomic(&dir.join(MANIFEST), &text, Some(0o644))
    }

    /// The bundle's digest: the SHA-256 of the manifest as strata reads it, but its
    /// `id`. The manifest holds the digest of every other file, so this covers every
    /// byte of the bundle but the id (and the manifest's layout): a bundle is "applied"
    /// by this, and an edited id makes no new bundle.
    pub fn digest(&self) -> String {
        let mut content = self.clone();
        content.id.clear();
        let text = serde_json::to_vec(&content).expect("a manifest serializes");
        crate::util::sha256_hex(&text)
    }
}

/// A bundle of another format is refused; one from before the manifest held the
/// digests of its files says so.
fn refuse_format(file: &Path, version: u32) -> Result<()> {
    if version == VERSION {
        return Ok(());
    }
    let why = if version < 2 {
        format!(
            "a bundle of format {version}, written before bundles held the digest of every file: it has no digests of its files, so nothing in it can be checked, and this strata (format {VERSION}) does not apply it"
        )
    } else {
        format!("a bundle of format {version} (this strata reads format {VERSION})")
    };
    Err(Error::config(format!(
        "{}: {why}. Nothing was run. Preview again with this strata (strata preview --save-plan DIR), review it, and apply that bundle.",
        display_path(file)
    )))
}

/// Whether `id` is a run ID as `strata preview` makes them (`execute`): the start time
/// `YYYYMMDDTHHMMSS.mmmZ`, `-`, and strata's process ID.
pub fn valid_id(id: &str) -> bool {
    let digits = |b: &[u8]| !b.is_empty() && b.iter().all(u8::is_ascii_digit);
    let Some((time, pid)) = id.split_once('-') else {
        return false;
    };
    let t = time.as_bytes();
    t.len() == 20
        && digits(&t[..8])
        && t[8] == b'T'
        && digits(&t[9..15])
        && t[15] == b'.'
        && digits(&t[16..19])
        && t[19] == b'Z'
        && pid.len() <= 10
        && digits(pid.as_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Each line of `got` starts with the line of `want` at its place.
    pub(super) fn assert_lines_start(got: &[String], want: &[&str]) {
        assert_eq!(got.len(), want.len(), "{got:#?}");
        for (g, w) in got.iter().zip(want) {
            assert!(g.starts_with(w), "{g:?} does not start with {w:?}");
        }
    }

    pub(super) fn manifest() -> Manifest {
        let step = |kind: &str, fp: &str| Step {
            kind: kind.into(),
            status: "succeeded".into(),
            fingerprint: Some(fp.into()),
            plan: (kind == "pulumi").then(|| plan_path("infra/vpc")),
            preview: (kind == "command").then(|| "echo preview".into()),
            upstream_outputs: BTreeMap::new(),
            state: None,
            changes: None,
            message: None,
        };
        Manifest {
            version: VERSION,
            id: "20261126T000000.000Z-4242".into(),
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
            files: [
                (plan_path("infra/vpc"), crate::util::sha256_hex(b"{}")),
                (SUMMARY.to_string(), crate::util::sha256_hex(b"")),
            ]
            .into(),
        }
    }

    #[test]
    fn a_manifest_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let m = manifest();
        m.write(dir.path()).unwrap();
        assert_eq!(Manifest::read(dir.path()).unwrap(), m);
    }

    #[test]
    fn only_ids_a_preview_makes_are_read() {
        let made = format!(
            "{}-{}",
            crate::util::rfc3339(crate::util::now_ms()).replace([':', '-'], ""),
            std::process::id()
        );
        for good in [
            made.as_str(),
            "20261126T101500.123Z-4242",
            "99991231T235959.999Z-1",
        ] {
            assert!(valid_id(good), "{good}");
        }
        for bad in [
            "",
            "r1",
            "../../../home/u/victim",
            "20261126T101500.123Z-",
            "20261126T101500.123Z-12345678901",
            "20261126T101500.123Z-42/..",
            "20261126T101500.123Z-4242\n",
            "2026112xT101500.123Z-4242",
            "20261126T101500.123Z-42-42",
            "20261126T101500é23Z-4242",
            "20261126T101500.123Z/4242",
        ] {
            assert!(!valid_id(bad), "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let mut m = manifest();
        m.id = "../../../home/u/victim".into();
        m.write(dir.path()).unwrap();
        let e = Manifest::read(dir.path()).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(e.message.contains("its `id` is not one"), "{e:?}");
        assert!(!e.message.contains("victim"), "the id is not shown: {e:?}");
        m = manifest();
        m.stack = "../x".into();
        m.write(dir.path()).unwrap();
        let e = Manifest::read(dir.path()).unwrap_err();
        assert!(
            e.message.contains("its `stack` is not a stack name"),
            "{e:?}"
        );
    }

    #[test]
    fn the_digest_covers_everything_but_the_id() {
        let m = manifest();
        let d = m.digest();
        assert_eq!(d.len(), 64);
        let mut renamed = m.clone();
        renamed.id = "20200101T000000.000Z-1".into();
        assert_eq!(renamed.digest(), d, "an edited id is the same bundle");
        let edits: [&dyn Fn(&mut Manifest); 5] = [
            &|m| m.created_at.push('x'),
            &|m| m.steps.get_mut("infra/vpc").unwrap().kind = "command".into(),
            &|m| m.steps.get_mut("k8s/app").unwrap().fingerprint = None,
            &|m| {
                m.files.insert("extra".into(), "0".repeat(64));
            },
            &|m| {
                m.files.insert(SUMMARY.into(), "0".repeat(64));
            },
        ];
        for edit in edits {
            let mut other = m.clone();
            edit(&mut other);
            assert_ne!(other.digest(), d, "{other:?}");
        }
    }

    #[test]
    fn a_manifest_that_is_a_link_is_not_read() {
        let (dir, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        manifest().write(elsewhere.path()).unwrap();
        std::os::unix::fs::symlink(elsewhere.path().join(MANIFEST), dir.path().join(MANIFEST))
            .unwrap();
        let e = Manifest::read(dir.path()).unwrap_err();
        assert!(e.message.contains("is not a plain file"), "{e:?}");
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
        // Format 1 had no `files`: refused for what it lacks, before anything else.
        std::fs::write(
            dir.path().join(MANIFEST),
            r#"{"version": 1, "id": "r1", "steps": {}}"#,
        )
        .unwrap();
        let e = Manifest::read(dir.path()).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.message
                .contains("format 1, written before bundles held the digest of every file")
                && e.message.contains("Preview again with this strata"),
            "{e:?}"
        );
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
