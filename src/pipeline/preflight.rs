//! Preflight: what must hold before anything is asked or written — the `pulumi` CLI
//! (when the plan has Pulumi projects), the passphrase of a self-managed backend, a file
//! backend's layout (never Pulumi's legacy one), and the provider's credentials. Every
//! problem is reported at once.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::engine::process::find_program;
use crate::engine::{Control, Operation};
use crate::error::{Error, Result};
use crate::plan::{NodeKind, Plan};
use crate::util::display_path;
use crate::workspace::backend::Backends;
use crate::workspace::stack_config::uses_passphrase;
use crate::workspace::{StackConfig, Workspace};

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
    let given = Given {
        plan: &r.plan,
        full: &r.full,
        profile: &r.profile,
        backends: &r.backends,
        stack: r.stack.as_deref(),
    };
    let (mut pre, mut problems) = inspect(&r.ws, &given);
    if matches!(r.req.op, Operation::Up | Operation::Preview) {
        problems.extend(undeclared_references(r));
    }
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

/// The selected projects whose stack references strata cannot resolve and whose entry
/// does not say what they read (`reads:`): refused, as they might read any project and
/// must not run beside it (see `plan::references::declared`).
fn undeclared_references(r: &Resolved) -> Option<String> {
    use crate::plan::references;
    let shared = r.stack.as_deref().map(|s| r.ws.stack_config_path(s));
    let at = references::Context {
        root: &r.ws.root,
        stack: r.stack.as_deref(),
        shared: shared.as_deref(),
    };
    references::refused(&r.full, &r.plan, &at, &r.profile.file)
}

/// What a run says of the stack's orphans: an `up` warns once, a `preview` lists each
/// (what it left, who needed it); the other runs say nothing.
fn orphan_notices(r: &Resolved) -> Vec<String> {
    let found = &r.orphans;
    match (found.is_empty() || r.req.orphans, r.req.op) {
        (true, _) => Vec::new(),
        (false, Operation::Up) => vec![super::orphans::warning(found, &r.target_args())],
        (false, _) => std::iter::once(format!(
            "orphans: {} project(s) deployed on this stack are no longer in the profile; `strata destroy --orphans {}` destroys them:",
            found.len(),
            r.target_args()
        ))
        .chain(found.iter().map(|o| format!("  orphan {}", crate::state::orphans::describe(o))))
        .collect(),
    }
}

/// What the checks look at: the run's plan within the whole profile, each project's
/// backend, and the stack (`None`: not named yet).
pub struct Given<'a> {
    pub plan: &'a Plan,
    pub full: &'a Plan,
    pub profile: &'a crate::workspace::Profile,
    pub backends: &'a Backends,
    pub stack: Option<&'a str>,
}

/// The sentence a preflight problem (and a backend's) carries to say that the run it
/// stopped started nothing; `validate`, which starts nothing by nature, leaves it out.
pub const NOTHING_STARTED: &str = " Nothing was started.";

/// The checks, with the problems as a list (for `validate`, which shows them all).
pub fn inspect(ws: &Workspace, given: &Given) -> (Preflight, Vec<String>) {
    let env = env::pulumi_env(ws);
    let mut pre = Preflight::default();
    let mut problems = Vec::new();
    if plan_needs_pulumi(given.plan, given.full) {
        match find_pulumi(ws, &env, given.plan) {
            Ok(bin) => pre.pulumi = Some(bin),
            Err(e) => problems.push(e.message),
        }
        problems.extend(backend_problems(ws, given));
        pre.notices
            .extend(backend_notice(given.backends, &pulumi_projects(given)));
    }
    let credentials = &given.profile.credentials;
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

/// What must hold of the backends before Pulumi runs: a passphrase for every stack that
/// encrypts with one, and no backend in Pulumi's legacy layout.
pub fn backend_problems(ws: &Workspace, given: &Given) -> Vec<String> {
    let env = env::pulumi_env(ws);
    let paths = pulumi_projects(given);
    let mut problems = Vec::new();
    if let Err(e) = check_passphrases(ws, given, &paths) {
        problems.push(e.message);
    }
    for (backend, _) in given.backends.distinct(paths.iter().map(String::as_str)) {
        problems.extend(crate::engine::pulumi::layout_problem(&env::with_backend(
            env.clone(),
            backend,
        )));
    }
    problems
}

/// The Pulumi projects the run runs or reads the outputs of, by path.
fn pulumi_projects(given: &Given) -> Vec<String> {
    let pulumi = given.full.paths_of(NodeKind::Pulumi);
    let mut out: Vec<String> = Vec::new();
    for n in &given.plan.nodes {
        let read = n
            .entry
            .iter()
            .flat_map(|e| e.inputs.iter())
            .map(|i| i.project.as_str());
        for p in std::iter::once(n.path.as_str()).chain(read) {
            if pulumi.contains(p) && !out.iter().any(|have| have == p) {
                out.push(p.to_string());
            }
        }
    }
    out
}

/// Where the run's stacks are, for its header: strata's own file backend is always said
/// (no Pulumi setting chose it), and so are projects spread over several backends.
fn backend_notice(backends: &Backends, paths: &[String]) -> Vec<String> {
    let distinct = backends.distinct(paths.iter().map(String::as_str));
    match distinct.as_slice() {
        [] => Vec::new(),
        [(one, _)] => vec![format!(
            "backend: {} ({})",
            crate::secrets::url::masked(&one.url),
            one.why()
        )],
        many => std::iter::once(format!(
            "backends: {} for the {} Pulumi projects:",
            many.len(),
            paths.len()
        ))
        .chain(many.iter().map(|(b, on)| {
            format!(
                "  {} ({}): {}",
                crate::secrets::url::masked(&b.url),
                b.why(),
                crate::util::list_some(on, 4)
            )
        }))
        .collect(),
    }
}

/// Whether the plan runs a Pulumi project or reads one's outputs.
pub fn plan_needs_pulumi(plan: &Plan, full: &Plan) -> bool {
    let pulumi_paths = full.paths_of(NodeKind::Pulumi);
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

/// Each project whose stack encrypts with Pulumi's passphrase (its own stack config
/// names that provider, or none on a self-managed backend) needs one before anything
/// runs; a stack under a KMS, Vault or the Pulumi Cloud service does not.
fn check_passphrases(ws: &Workspace, given: &Given, paths: &[String]) -> Result<()> {
    let env = env::pulumi_env(ws);
    if has_passphrase(&env) {
        return Ok(());
    }
    let needing: Vec<&str> = paths
        .iter()
        .map(String::as_str)
        .filter(|p| project_uses_passphrase(ws, given, p))
        .collect();
    if needing.is_empty() {
        return Ok(());
    }
    let urls: Vec<String> = given
        .backends
        .distinct(needing.iter().copied())
        .iter()
        .map(|(b, _)| crate::secrets::url::masked(&b.url))
        .collect();
    let one = needing.len() == 1;
    Err(Error::config(format!(
        "{} {} secrets with Pulumi's passphrase ({} no other secrets provider, on the self-managed backend {}), and none is set. Nothing was started.\n  Set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) in {} or the environment; use the same one for every run of this stack.",
        crate::util::list_some(&needing, 4),
        if one {
            "encrypts its stack's"
        } else {
            "encrypt their stacks'"
        },
        if one {
            "its Pulumi.<stack>.yaml names"
        } else {
            "their Pulumi.<stack>.yaml name"
        },
        urls.join(", "),
        display_path(&ws.env_file.path)
    )))
}

/// Whether `PULUMI_CONFIG_PASSPHRASE` or `..._FILE` is set (an empty passphrase is one).
pub fn has_passphrase(env: &BTreeMap<String, String>) -> bool {
    env.contains_key("PULUMI_CONFIG_PASSPHRASE")
        || env.contains_key("PULUMI_CONFIG_PASSPHRASE_FILE")
}

/// Whether the stack of project `path` encrypts with the passphrase: the provider its
/// own stack config names (or the shared one's, laid over a file naming none), else the
/// backend's default.
fn project_uses_passphrase(ws: &Workspace, given: &Given, path: &str) -> bool {
    let stack = given.stack.unwrap_or_default();
    let name = given
        .profile
        .entry(path)
        .map_or_else(|| stack.to_string(), |e| e.stack_name(stack));
    let own = given
        .full
        .node(path)
        .and_then(|n| n.project.as_ref())
        .and_then(|p| p.own_stack_config(&name))
        .and_then(|f| StackConfig::load_project(&f).ok().flatten());
    let shared = given
        .stack
        .and_then(|s| StackConfig::load(&ws.stack_config_path(s)).ok().flatten());
    let provider = own
        .as_ref()
        .filter(|c| c.names_secrets_provider())
        .or(shared.as_ref())
        .and_then(StackConfig::secrets_provider);
    uses_passphrase(provider.as_deref(), &given.backends.of(path).url)
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
