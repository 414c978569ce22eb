//! `up --plan`'s checks before anything runs: when it is opened, the bundle is read as
//! untrusted input (its files against their digests, its id, applied before); under the
//! stack lock, applied before (again: another run may have applied it meanwhile) and
//! against the workspace as it is now. Each difference is one line that names the
//! project (or the file) and what moved.

use std::collections::BTreeMap;
use std::path::Path;

use super::Manifest;
use super::contents::shown;
use crate::error::{Error, Result};
use crate::util::display_path;
use crate::workspace::{Profile, Project, Workspace};

/// Reads the bundle at `dir` for `up --plan`: refused when any of its files is not what
/// the preview wrote, or when it was applied before.
pub fn open(ws: &Workspace, dir: &Path, stack: Option<&str>) -> Result<Manifest> {
    let m = Manifest::read(dir)?;
    super::contents::verify(dir, &m)?;
    refuse_applied(ws, stack.unwrap_or(&m.stack), dir, &m)?;
    Ok(m)
}

/// Refuses (exit 3) a bundle applied before: its own mark, or the stack's record of its
/// digest.
pub fn refuse_applied(ws: &Workspace, stack: &str, dir: &Path, m: &Manifest) -> Result<()> {
    let digest = m.digest();
    let Some(a) = super::applied(dir, Some(&ws.state_dir(stack)), &digest) else {
        return Ok(());
    };
    Err(Error::config(format!(
        "the plan bundle {} (digest {}) was applied already, by run {} at {}: a bundle applies once. Nothing was run.\n  For new changes, preview again: strata preview --save-plan DIR",
        display_path(dir),
        &digest[..12],
        shown(&a.run_id),
        shown(&a.applied_at)
    )))
}

/// `up --plan`, under the stack lock, before anything runs: refuses (exit 3) a bundle
/// another run applied since it was opened, or one whose making moved.
/// `steps` are the run's steps, each with its project (none for the secrets step).
pub fn before_running<'a>(
    ws: &Workspace,
    profile: &Profile,
    steps: impl IntoIterator<Item = (&'a str, Option<&'a Project>)>,
    stack: &str,
    dir: &Path,
    manifest: &Manifest,
    run: &Applying,
) -> Result<()> {
    refuse_applied(ws, stack, dir, manifest)?;
    let kinds = steps
        .into_iter()
        .map(|(path, project)| (path.to_string(), super::kind_of(project)))
        .collect();
    refuse_moved(ws, profile, stack, dir, manifest, run, &kinds)
}

/// What the run applying a bundle brings to its check.
pub struct Applying<'a> {
    /// Each step's input fingerprint now.
    pub fingerprints: &'a BTreeMap<String, String>,
    /// Steps whose preview was `blocked` may run without a plan (`Now::unbound_blocked`).
    pub unbound_blocked: bool,
}

/// Refuses (exit 3, before anything runs) a bundle when anything it was made from moved.
fn refuse_moved(
    ws: &Workspace,
    profile: &Profile,
    stack: &str,
    dir: &Path,
    manifest: &Manifest,
    at: &Applying,
    kinds: &BTreeMap<String, &'static str>,
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
        fingerprints: at.fingerprints,
        kinds,
        unbound_blocked: at.unbound_blocked,
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
    /// The kind of every step of the plan, as the workspace has it.
    pub kinds: &'a BTreeMap<String, &'static str>,
    /// Steps whose preview was `blocked` may run without a plan (the `up` a terminal
    /// user said yes to).
    pub unbound_blocked: bool,
}

/// What moved since the bundle was made; empty when it may be applied.
pub fn moved(m: &Manifest, now: &Now) -> Vec<String> {
    let mut out = Vec::new();
    if m.strata_version != now.strata_version {
        out.push(format!(
            "strata: the bundle was made by strata {}, this is {} (fingerprints are not comparable across versions)",
            shown(&m.strata_version),
            now.strata_version
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
            shown(&m.profile),
            now.profile
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
        match (now.fingerprints.get(path), now.kinds.get(path)) {
            (Some(fp), Some(kind)) => out.extend(step_moved(m, path, step, kind, fp, now)),
            _ => out.push(format!(
                "{}: in the bundle, but no longer in profile {}",
                shown(path),
                now.profile
            )),
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

/// Why the step at `path`, of `kind` in the workspace and fingerprint `fp` now, cannot
/// be applied from the bundle; `None` when it can.
fn step_moved(
    m: &Manifest,
    path: &str,
    step: &super::Step,
    kind: &str,
    fp: &str,
    now: &Now,
) -> Option<String> {
    let message = || step.message.as_deref().map(shown);
    let unbound = now.unbound_blocked && step.status == super::BLOCKED;
    if step.kind != kind {
        // The kind decides whether a project is held to a plan: only the workspace's
        // word counts.
        return Some(format!(
            "{path}: the bundle gives its kind as `{}`, but it is a {kind} project in the workspace: strata takes a step's kind from the workspace, never from a bundle, so this one was edited after the preview",
            shown(&step.kind)
        ));
    }
    if !step.appliable(kind) && !unbound {
        return Some(format!(
            "{path}: its preview did not succeed ({}{}), so the bundle holds no plan for it",
            shown(&step.status),
            message().map(|m| format!(": {m}")).unwrap_or_default()
        ));
    }
    if kind == "pulumi" && !unbound {
        let want = super::plan_path(path);
        match step.plan.as_deref() {
            Some(p) if p != want => {
                return Some(format!(
                    "{path}: its update plan is given as a path other than {want} ({}): the plan of {path} is {want}, inside the bundle, where the preview writes it",
                    shown(p)
                ));
            }
            Some(_) if m.files.contains_key(&want) => {}
            _ => {
                return Some(format!(
                    "{path}: its update plan ({}) is missing from the bundle",
                    step.plan
                        .as_deref()
                        .map_or_else(|| "none recorded".into(), shown)
                ));
            }
        }
    }
    (step.fingerprint.as_deref() != Some(fp)).then(|| {
        format!(
            "{path}: its code, inputs or secrets changed since the preview (fingerprint {} → {})",
            short(&shown(step.fingerprint.as_deref().unwrap_or("none"))),
            short(fp)
        )
    })
}

fn short(hash: &str) -> &str {
    &hash[..hash.len().min(12)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now<'a>(
        m: &'a Manifest,
        fps: &'a BTreeMap<String, String>,
        kinds: &'a BTreeMap<String, &'static str>,
    ) -> Now<'a> {
        Now {
            strata_version: &m.strata_version,
            stack: &m.stack,
            profile: &m.profile,
            profile_hash: &m.profile_hash,
            stack_config_file: "config/pulumi/Pulumi.dev.yaml",
            stack_config_hash: &m.stack_config_hash,
            fingerprints: fps,
            kinds,
            unbound_blocked: false,
        }
    }

    fn fps(m: &Manifest) -> BTreeMap<String, String> {
        m.steps
            .iter()
            .map(|(p, s)| (p.clone(), s.fingerprint.clone().unwrap()))
            .collect()
    }

    /// The workspace's kinds: infra/vpc a Pulumi project, k8s/app a command project.
    fn kinds() -> BTreeMap<String, &'static str> {
        [
            ("infra/vpc".into(), "pulumi"),
            ("k8s/app".into(), "command"),
        ]
        .into()
    }

    /// What moved in `m` against the workspace it was made from.
    fn moved_in(m: &Manifest) -> Vec<String> {
        let (f, k) = (fps(&super::super::tests::manifest()), kinds());
        moved(m, &now(m, &f, &k))
    }

    #[test]
    fn an_unchanged_workspace_moves_nothing() {
        let m = super::super::tests::manifest();
        assert_eq!(moved_in(&m), Vec::<String>::new());
    }

    #[test]
    fn each_difference_names_what_moved() {
        let m = super::super::tests::manifest();
        let mut f = fps(&m);
        f.insert("infra/vpc".into(), "ffffffffffffffffff".into());
        f.remove("k8s/app");
        f.insert("k8s/new".into(), "n".into());
        let k = kinds();
        let mut n = now(&m, &f, &k);
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
        super::super::tests::assert_lines_start(&got, &want);
    }

    #[test]
    fn a_step_whose_preview_did_not_succeed_cannot_be_applied() {
        let mut m = super::super::tests::manifest();
        let s = m.steps.get_mut("k8s/app").unwrap();
        s.status = "blocked".into();
        s.message = Some("upstream infra/vpc was never deployed".into());
        assert_eq!(
            moved_in(&m),
            [
                "k8s/app: its preview did not succeed (blocked: upstream infra/vpc was never deployed), so the bundle holds no plan for it"
            ]
        );
        // The `up` a terminal user said yes to runs it without a plan, as its table
        // showed; its fingerprint still holds it.
        let (f, k) = (fps(&m), kinds());
        let mut n = now(&m, &f, &k);
        n.unbound_blocked = true;
        assert!(moved(&m, &n).is_empty(), "{:?}", moved(&m, &n));
        let mut f = fps(&m);
        f.insert("k8s/app".into(), "changed".into());
        let n = Now {
            unbound_blocked: true,
            ..now(&m, &f, &k)
        };
        assert_eq!(moved(&m, &n).len(), 1);
    }

    #[test]
    fn a_pulumi_step_without_its_plan_file_cannot_be_applied() {
        let mut m = super::super::tests::manifest();
        m.files.clear();
        let got = moved_in(&m);
        assert_eq!(
            got,
            ["infra/vpc: its update plan (plans/infra_2fvpc.json) is missing from the bundle"]
        );
        m = super::super::tests::manifest();
        m.steps.get_mut("infra/vpc").unwrap().plan = None;
        let got = moved_in(&m);
        assert_eq!(
            got,
            ["infra/vpc: its update plan (none recorded) is missing from the bundle"]
        );
    }

    /// The kind is the workspace's: a Pulumi project the bundle calls a command (which
    /// would need no plan) is refused, and so is any other disagreement.
    #[test]
    fn a_kind_the_workspace_does_not_give_is_refused() {
        for (path, kind) in [
            ("infra/vpc", "command"),
            ("infra/vpc", "builtin"),
            ("k8s/app", "pulumi"),
            ("k8s/app", "\u{1b}[2J"),
        ] {
            let mut m = super::super::tests::manifest();
            let s = m.steps.get_mut(path).unwrap();
            s.kind = kind.into();
            s.status = "skipped".into();
            let got = moved_in(&m);
            assert_eq!(got.len(), 1, "{got:?}");
            assert!(
                got[0].starts_with(&format!(
                    "{path}: the bundle gives its kind as `{}`, but it is a {} project in the workspace",
                    shown(kind),
                    kinds()[path]
                )),
                "{got:?}"
            );
        }
    }

    /// A Pulumi step's plan is where the preview writes it: never a path of the
    /// bundle's choosing.
    #[test]
    fn a_plan_named_anywhere_else_is_refused() {
        for plan in [
            "/etc/passwd",
            "../outside.json",
            "plans/../../outside.json",
            "plans/k8s_2fapp.json",
            "./plans/infra_2fvpc.json",
            "summary.md",
        ] {
            let mut m = super::super::tests::manifest();
            m.steps.get_mut("infra/vpc").unwrap().plan = Some(plan.into());
            m.files.insert(plan.into(), "0".repeat(64));
            let got = moved_in(&m);
            assert_eq!(
                got,
                [format!(
                    "infra/vpc: its update plan is given as a path other than plans/infra_2fvpc.json ({plan}): the plan of infra/vpc is plans/infra_2fvpc.json, inside the bundle, where the preview writes it"
                )]
            );
        }
    }
}
