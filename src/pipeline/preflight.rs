//! Preflight: what must hold before anything is asked or written — the `pulumi` CLI
//! (when the plan has Pulumi projects), the passphrase of a self-managed backend, a file
//! backend's layout (never Pulumi's legacy one), and the provider's credentials. Every
//! problem is reported at once.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::engine::process::find_program;
use crate::engine::{Control, Operation};
use crate::error::{Error, Result};
use crate::plan::{NodeKind, Plan};
use crate::util::display_path;
use crate::workspace::Workspace;

use super::env;
use super::resolve::Resolved;

/// What preflight found: the CLI to run and the organization of stack references.
#[derive(Debug, Default)]
pub struct Preflight {
    pub pulumi: Option<PathBuf>,
    pub org: Option<String>,
    /// Warnings for the run's header (credentials, organization).
    pub notices: Vec<String>,
}

/// Runs every check; all problems come back in one error (exit 3).
pub fn check(r: &Resolved) -> Result<Preflight> {
    let (mut pre, problems) = inspect(&r.ws, &r.plan, &r.full, &r.profile.credentials);
    let words = run_words(r);
    pre.notices.extend(weak_passphrases(
        &env::pulumi_env(&r.ws),
        words.iter().map(String::as_str),
    ));
    pre.notices.extend(orphan_notices(r));
    if problems.is_empty() {
        Ok(pre)
    } else {
        Err(Error::config(format!(
            "{}\n  Nothing was asked, written or started.",
            problems.join("\n")
        )))
    }
}

/// What a run says of the stack's orphans: an `up` warns once, a `preview` lists each
/// (what it left, who needed it); the other runs say nothing.
fn orphan_notices(r: &Resolved) -> Vec<String> {
    let found = &r.orphans;
    match (found.is_empty() || r.req.orphans, r.req.op) {
        (true, _) => Vec::new(),
        (false, Operation::Up) => vec![super::orphans::warning(found)],
        (false, _) => std::iter::once(format!(
            "orphans: {} project(s) deployed on this stack are no longer in the profile; `strata destroy --orphans` destroys them:",
            found.len()
        ))
        .chain(found.iter().map(|o| format!("  orphan {}", crate::run::orphans::describe(o))))
        .collect(),
    }
}

/// The checks, with the problems as a list (for `validate`, which shows them all).
pub fn inspect(
    ws: &Workspace,
    plan: &Plan,
    full: &Plan,
    credentials: &[String],
) -> (Preflight, Vec<String>) {
    let env = env::pulumi_env(ws);
    let mut pre = Preflight::default();
    let mut problems = Vec::new();
    if plan_needs_pulumi(plan, full) {
        match find_pulumi(ws, &env, plan) {
            Ok(bin) => pre.pulumi = Some(bin),
            Err(e) => problems.push(e.message),
        }
        if let Err(e) = check_passphrase(ws, &env) {
            problems.push(e.message);
        }
        problems.extend(crate::engine::pulumi::layout_problem(&env));
    }
    if !credentials.is_empty() && !credentials.iter().any(|c| env.contains_key(c)) {
        pre.notices.push(format!(
            "warning: none of the provider's credential variables is set ({}); set them in the environment or {} unless the provider finds credentials another way (a profile file, an instance role).",
            credentials.join(", "),
            display_path(&ws.env_file.path)
        ));
    }
    pre.org = env::known_org(&env);
    if pre.org.is_none()
        && let Some(bin) = &pre.pulumi
    {
        pre.org = whoami(bin, &env);
        if pre.org.is_none() {
            pre.notices.push(
                "warning: could not tell the Pulumi organization (`pulumi whoami` failed); set STRATA_ORG in config/pulumi/environment so stack references resolve".into(),
            );
        }
    }
    (pre, problems)
}

/// Whether the plan runs a Pulumi project or reads one's outputs.
pub fn plan_needs_pulumi(plan: &Plan, full: &Plan) -> bool {
    let pulumi_paths: BTreeSet<&str> = full
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Pulumi)
        .map(|n| n.path.as_str())
        .collect();
    plan.nodes.iter().any(|n| {
        n.kind == NodeKind::Pulumi
            || n.entry
                .iter()
                .flat_map(|e| e.inputs.iter())
                .any(|i| pulumi_paths.contains(i.project.as_str()))
    })
}

/// Finds the pulumi CLI (`STRATA_PULUMI`, else `pulumi` on PATH).
pub fn find_pulumi(ws: &Workspace, env: &BTreeMap<String, String>, plan: &Plan) -> Result<PathBuf> {
    let wanted = env
        .get("STRATA_PULUMI")
        .cloned()
        .unwrap_or_else(|| "pulumi".into());
    if let Some(bin) = find_program(&wanted, env) {
        return Ok(bin);
    }
    let names: Vec<&str> = plan
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Pulumi)
        .map(|n| n.path.as_str())
        .take(5)
        .collect();
    Err(Error::config(format!(
        "the pulumi CLI was not found (looked for `{wanted}` on PATH). Nothing was started.\n  This plan has Pulumi projects ({}{}). Install Pulumi (https://www.pulumi.com/docs/install/), or set STRATA_PULUMI to its path (in the environment or {}).\n  The `local` profile needs no pulumi: strata up --provider local",
        names.join(", "),
        if names.len() == 5 { ", ..." } else { "" },
        display_path(&ws.env_file.path)
    )))
}

/// A self-managed backend (file, s3, gs, azblob, ...) encrypts secrets with a
/// passphrase by default: one must be set before anything runs.
pub fn check_passphrase(ws: &Workspace, env: &BTreeMap<String, String>) -> Result<()> {
    if !env::self_managed(env)
        || env.contains_key("PULUMI_CONFIG_PASSPHRASE")
        || env.contains_key("PULUMI_CONFIG_PASSPHRASE_FILE")
    {
        return Ok(());
    }
    let backend = crate::secrets::url::masked(
        env.get("PULUMI_BACKEND_URL")
            .map(String::as_str)
            .unwrap_or_default(),
    );
    Err(Error::config(format!(
        "the Pulumi backend {backend} is self-managed, so Pulumi encrypts secrets with a passphrase, and none is set. Nothing was started.\n  Set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) in {} or the environment; use the same one for every run of this stack.",
        display_path(&ws.env_file.path)
    )))
}

/// The run's own words: the stack, the provider, each project's path and folder.
fn run_words(r: &Resolved) -> Vec<String> {
    let mut words = vec![r.stack().to_string(), r.profile.name.clone()];
    for e in &r.profile.entries {
        words.push(e.path.clone());
        words.extend(e.path.rsplit('/').next().map(str::to_string));
    }
    words
}

/// The passphrases whose value is masked as `[secret]` wherever strata prints it.
const PASSPHRASE_VARS: [&str; 2] = ["PULUMI_CONFIG_PASSPHRASE", "STRATA_PASSPHRASE"];

/// One warning per passphrase that is short (under six characters) or one of the run's
/// own words: it is easy to guess, and since every passphrase in use is masked, that
/// word turns into `[secret]` in everything the run prints.
pub fn weak_passphrases<'a>(
    env: &BTreeMap<String, String>,
    words: impl Iterator<Item = &'a str> + Clone,
) -> Vec<String> {
    let mut out = Vec::new();
    for var in PASSPHRASE_VARS {
        let Some(value) = env.get(var).filter(|v| !v.is_empty()) else {
            continue;
        };
        let same = words.clone().find(|w| w.eq_ignore_ascii_case(value));
        let why = match same {
            Some(w) => format!("is `{w}`, a name of this run,"),
            None if value.chars().count() < crate::secrets::redact::SHORT => {
                format!(
                    "is shorter than {} characters,",
                    crate::secrets::redact::SHORT
                )
            }
            None => continue,
        };
        out.push(format!(
            "warning: {var} {why} so it is easy to guess, and since every passphrase in use is masked, that word prints as [secret] wherever it appears. Choose a longer one that is no word of the run (an existing Pulumi stack keeps its passphrase until `pulumi stack change-secrets-provider passphrase`)."
        ));
    }
    out
}

/// On Pulumi Cloud without STRATA_ORG/PULUMI_ORG: the `pulumi whoami` user.
fn whoami(bin: &std::path::Path, env: &BTreeMap<String, String>) -> Option<String> {
    let out = crate::engine::process::run_captured(
        duct::cmd(bin, ["whoami", "--non-interactive"]).full_env(env),
        &Control::new(),
        "pulumi whoami",
        None,
    )
    .ok()?;
    let user = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.exit.success() && !user.is_empty()).then_some(user)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<const N: usize>(pairs: [(&str, &str); N]) -> BTreeMap<String, String> {
        BTreeMap::from(pairs.map(|(k, v)| (k.to_string(), v.to_string())))
    }

    #[test]
    fn a_passphrase_that_is_a_run_word_or_short_is_warned_about_once() {
        let words = ["dev", "local-pulumi", "lp/ingress", "ingress"];
        let w = weak_passphrases(
            &env([("PULUMI_CONFIG_PASSPHRASE", "dev")]),
            words.iter().copied(),
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("PULUMI_CONFIG_PASSPHRASE is `dev`"), "{w:?}");
        let w = weak_passphrases(
            &env([("STRATA_PASSPHRASE", "Ingress")]),
            words.iter().copied(),
        );
        assert!(w[0].contains("STRATA_PASSPHRASE is `ingress`"), "{w:?}");
        let w = weak_passphrases(
            &env([
                ("PULUMI_CONFIG_PASSPHRASE", "x7"),
                ("STRATA_PASSPHRASE", "12345"),
            ]),
            words.iter().copied(),
        );
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w.iter().all(|l| l.contains("shorter than 6 characters")),
            "{w:?}"
        );
        let long = env([("PULUMI_CONFIG_PASSPHRASE", "local-only-Kq7v2x")]);
        assert!(weak_passphrases(&long, words.iter().copied()).is_empty());
        assert!(weak_passphrases(&env([]), words.iter().copied()).is_empty());
    }
}
