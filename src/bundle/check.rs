//! `up --plan`'s checks before anything runs: a bundle applied before is refused when it
//! is opened, and the bundle against the workspace as it is now once the fingerprints
//! are known. Each difference is one line that names the project (or the file) and
//! what moved.

use std::collections::BTreeMap;
use std::path::Path;

use super::Manifest;
use crate::error::{Error, Result};
use crate::util::display_path;
use crate::workspace::{Profile, Workspace};

/// Reads the bundle at `dir` for `up --plan`: refused when it was applied before.
pub fn open(ws: &Workspace, dir: &Path, stack: Option<&str>) -> Result<Manifest> {
    let m = Manifest::read(dir)?;
    let stack = stack.unwrap_or(&m.stack);
    if let Some(a) = super::applied(dir, &ws.state_dir(stack), &m.id) {
        return Err(Error::config(format!(
            "the plan bundle {} (preview run {}) was applied already, by run {} at {}: a bundle applies once. Nothing was run.\n  For new changes, preview again: strata preview --save-plan DIR",
            display_path(dir),
            m.id,
            a.run_id,
            a.applied_at
        )));
    }
    Ok(m)
}

/// `up --plan`: refuses (exit 3, before anything runs) when anything the bundle was
/// made from moved.
pub fn refuse_moved(
    ws: &Workspace,
    profile: &Profile,
    stack: &str,
    dir: &Path,
    manifest: &Manifest,
    fingerprints: &BTreeMap<String, String>,
) -> Result<()> {
    let config_file = ws.stack_config_path(stack);
    let profile_hash = super::profile_hash(profile, &ws.root);
    let config_hash = super::file_hash(&config_file);
    let shown = display_path(&config_file);
    let now = Now {
        strata_version: env!("CARGO_PKG_VERSION"),
        stack,
        profile: &profile.name,
        profile_hash: &profile_hash,
        stack_config_file: &shown,
        stack_config_hash: &config_hash,
        fingerprints,
        dir,
    };
    let moved = moved(manifest, &now);
    if moved.is_empty() {
        return Ok(());
    }
    Err(Error::config(format!(
        "the plan bundle {} no longer matches this workspace, so nothing was run:\n  {}\nPreview again (strata preview --save-plan DIR), review it, and apply that bundle.",
        display_path(dir),
        moved.join("\n  ")
    )))
}

/// The workspace as `up --plan` finds it.
pub struct Now<'a> {
    pub strata_version: &'a str,
    pub stack: &'a str,
    pub profile: &'a str,
    pub profile_hash: &'a str,
    /// The shared stack config file, for messages.
    pub stack_config_file: &'a str,
    pub stack_config_hash: &'a str,
    /// Every step of the plan this run would execute, with its input fingerprint.
    pub fingerprints: &'a BTreeMap<String, String>,
    /// The bundle's folder (its plan files are checked to be there).
    pub dir: &'a Path,
}

/// What moved since the bundle was made; empty when it may be applied.
pub fn moved(m: &Manifest, now: &Now) -> Vec<String> {
    let mut out = Vec::new();
    if m.strata_version != now.strata_version {
        out.push(format!(
            "strata: the bundle was made by strata {}, this is {} (fingerprints are not comparable across versions)",
            m.strata_version, now.strata_version
        ));
    }
    if m.stack != now.stack {
        out.push(format!(
            "stack: the bundle is for stack {}, this run is for stack {}",
            m.stack, now.stack
        ));
    }
    if m.profile != now.profile {
        out.push(format!(
            "profile: the bundle was made with profile {}, this run uses {}",
            m.profile, now.profile
        ));
    } else if m.profile_hash != now.profile_hash {
        out.push(format!(
            "profile: providers/{}.yaml (or a fragment it includes) changed since the preview",
            m.profile
        ));
    }
    if m.stack_config_hash != now.stack_config_hash {
        out.push(format!(
            "stack config: {} changed since the preview",
            now.stack_config_file
        ));
    }
    for (path, step) in &m.steps {
        match now.fingerprints.get(path) {
            None => out.push(format!(
                "{path}: in the bundle, but no longer in profile {}",
                now.profile
            )),
            Some(_) if step.status == super::PROJECTED => out.push(format!(
                "{path}: its preview ran on projected inputs (an upstream had never been deployed{}), not on what `up` would pass it, so the bundle holds no plan for it. Bring its upstreams up first, then preview again",
                step.message
                    .as_deref()
                    .and_then(|m| m.find("projected: ").map(|i| &m[i..]))
                    .map(|m| format!("; {m}"))
                    .unwrap_or_default()
            )),
            Some(_) if !step.appliable() => out.push(format!(
                "{path}: its preview did not succeed ({}{}), so the bundle holds no plan for it",
                step.status,
                step.message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default()
            )),
            Some(_)
                if step.kind == "pulumi"
                    && !step.plan.as_ref().is_some_and(|p| now.dir.join(p).is_file()) =>
            {
                out.push(format!(
                    "{path}: its update plan ({}) is missing from the bundle",
                    step.plan.as_deref().unwrap_or("none recorded")
                ))
            }
            Some(fp) if step.fingerprint.as_ref() != Some(fp) => out.push(format!(
                "{path}: its code, inputs or secrets changed since the preview (fingerprint {} → {})",
                short(step.fingerprint.as_deref().unwrap_or("none")),
                short(fp)
            )),
            Some(_) => {}
        }
    }
    for path in now.fingerprints.keys() {
        if !m.steps.contains_key(path) {
            out.push(format!(
                "{path}: in profile {}, but not in the bundle (added since the preview)",
                now.profile
            ));
        }
    }
    out
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now<'a>(m: &'a Manifest, fps: &'a BTreeMap<String, String>, dir: &'a Path) -> Now<'a> {
        Now {
            strata_version: &m.strata_version,
            stack: &m.stack,
            profile: &m.profile,
            profile_hash: &m.profile_hash,
            stack_config_file: "config/pulumi/Pulumi.dev.yaml",
            stack_config_hash: &m.stack_config_hash,
            fingerprints: fps,
            dir,
        }
    }

    /// A bundle folder holding the manifest's plan files.
    fn dir_of(m: &Manifest) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for p in m.steps.values().filter_map(|s| s.plan.as_ref()) {
            let f = d.path().join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, "{}").unwrap();
        }
        d
    }

    fn fps(m: &Manifest) -> BTreeMap<String, String> {
        m.steps
            .iter()
            .map(|(p, s)| (p.clone(), s.fingerprint.clone().unwrap()))
            .collect()
    }

    #[test]
    fn an_unchanged_workspace_moves_nothing() {
        let m = super::super::tests::manifest();
        let f = fps(&m);
        let d = dir_of(&m);
        assert_eq!(moved(&m, &now(&m, &f, d.path())), Vec::<String>::new());
    }

    #[test]
    fn each_difference_names_what_moved() {
        let m = super::super::tests::manifest();
        let mut f = fps(&m);
        f.insert("infra/vpc".into(), "ffffffffffffffffff".into());
        f.remove("k8s/app");
        f.insert("k8s/new".into(), "n".into());
        let d = dir_of(&m);
        let mut n = now(&m, &f, d.path());
        n.stack_config_hash = "other";
        n.profile_hash = "other";
        n.strata_version = "9.9.9";
        let got = moved(&m, &n);
        let want = [
            "strata: the bundle was made by strata 0.1.0, this is 9.9.9",
            "profile: providers/local.yaml",
            "stack config: config/pulumi/Pulumi.dev.yaml changed",
            "infra/vpc: its code, inputs or secrets changed since the preview (fingerprint f1 → ffffffffffff)",
            "k8s/app: in the bundle, but no longer in profile local",
            "k8s/new: in profile local, but not in the bundle",
        ];
        assert_eq!(got.len(), want.len(), "{got:#?}");
        for (g, w) in got.iter().zip(want) {
            assert!(g.starts_with(w), "{g:?} does not start with {w:?}");
        }
    }

    #[test]
    fn a_step_whose_preview_did_not_succeed_cannot_be_applied() {
        let mut m = super::super::tests::manifest();
        let f = fps(&m);
        let s = m.steps.get_mut("k8s/app").unwrap();
        s.status = "blocked".into();
        s.message = Some("upstream infra/vpc was never deployed".into());
        let d = dir_of(&m);
        let got = moved(&m, &now(&m, &f, d.path()));
        assert_eq!(
            got,
            [
                "k8s/app: its preview did not succeed (blocked: upstream infra/vpc was never deployed), so the bundle holds no plan for it"
            ]
        );
    }

    #[test]
    fn a_pulumi_step_without_its_plan_file_cannot_be_applied() {
        let m = super::super::tests::manifest();
        let f = fps(&m);
        let empty = tempfile::tempdir().unwrap();
        let got = moved(&m, &now(&m, &f, empty.path()));
        assert_eq!(got.len(), 1, "{got:?}");
        assert!(
            got[0].starts_with("infra/vpc: its update plan (plans/")
                && got[0].ends_with("is missing from the bundle"),
            "{got:?}"
        );
    }
}
