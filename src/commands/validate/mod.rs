//! `strata validate`: the run pipeline's resolve and preflight stages, reported line by
//! line (env file, stack, stack config, profile, projects, graph, pulumi CLI, backend
//! passphrase, credentials, config, secrets); every problem at once; changes nothing.

mod references;

use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::settings::Settings;
use crate::util::{display_path, plural};
use crate::workspace::Target;
use crate::workspace::{self, StackConfig, profile::ValueType};

/// What was checked: (status `ok`/`note`/`warning`/`problem`, what, text).
struct Report {
    checks: Vec<(&'static str, String, String)>,
    problems: usize,
    warnings: usize,
}

impl Report {
    fn ok(&mut self, what: &str, text: impl AsRef<str>) {
        self.checks.push(("ok", what.into(), text.as_ref().into()));
    }
    fn note(&mut self, what: &str, text: impl AsRef<str>) {
        self.checks
            .push(("note", what.into(), text.as_ref().into()));
    }
    fn warn(&mut self, what: &str, text: impl AsRef<str>) {
        self.warnings += 1;
        self.checks
            .push(("warning", what.into(), text.as_ref().into()));
    }
    fn bad(&mut self, what: &str, text: impl AsRef<str>) {
        self.problems += 1;
        self.checks
            .push(("problem", what.into(), text.as_ref().into()));
    }

    fn text(&self) -> String {
        let mut out = String::new();
        for (status, what, text) in &self.checks {
            let mark = match *status {
                "ok" => '✓',
                "note" => '-',
                "warning" => '!',
                _ => '✗',
            };
            out.push_str(&format!("{mark} {what:<13}{text}\n"));
        }
        out
    }

    /// One JSON document: `{"ok": bool, "problems": n, "checks": [...], "error": ...}`.
    fn json(&self, error: Option<&str>) -> String {
        let checks: Vec<serde_json::Value> = self
            .checks
            .iter()
            .map(|(s, w, t)| serde_json::json!({"status": s, "check": w, "detail": t}))
            .collect();
        let doc = serde_json::json!({
            "ok": self.problems == 0 && error.is_none(),
            "problems": self.problems + usize::from(error.is_some()),
            "warnings": self.warnings,
            "checks": checks,
            "error": error,
        });
        format!("{doc}\n")
    }
}

pub fn run(target: &Target, settings: &Settings, strict: bool) -> Result<i32> {
    let mut r = Report {
        checks: Vec::new(),
        problems: 0,
        warnings: 0,
    };
    let outcome = check(target, settings, &mut r);
    if settings.json {
        super::print(&r.json(outcome.as_ref().err().map(|e| e.message.as_str())))?;
    } else {
        super::print(&r.text())?;
    }
    outcome?;
    if r.problems > 0 {
        return Err(Error::config(format!(
            "validate found {} problem{} (marked ✗ above).",
            r.problems,
            plural(r.problems)
        )));
    }
    if strict && r.warnings > 0 {
        return Err(Error::config(format!(
            "validate --strict: {} warning{} (marked ! above).",
            r.warnings,
            plural(r.warnings)
        )));
    }
    if !settings.json {
        super::print(if r.warnings > 0 {
            "no problem; warnings are marked ! above\n"
        } else {
            "everything checks out\n"
        })?;
    }
    Ok(0)
}

/// Every check, in the order `up` meets them; `Err` when one cannot go on (no workspace,
/// an unreadable profile, a cycle), with what was found so far in `r`.
fn check(target: &Target, settings: &Settings, r: &mut Report) -> Result<()> {
    let ws = super::open_workspace(target)?;
    r.ok("workspace", display_path(&ws.root));
    check_env_file(&ws, r);
    let stack = ws.resolve_stack(target.stack.as_deref())?;
    let stack_config = check_stack(&ws, target, stack.as_deref(), r)?;
    let profile = check_provider(&ws, target, stack_config.as_ref(), r)?;
    let plan = check_plan(&ws, &profile, r)?;
    check_preflight(&ws, &plan, &profile, stack.as_deref(), r);
    if let Some(s) = &stack {
        check_profile(&ws, &profile, stack_config.as_ref(), s, r);
    }
    check_config(
        &ws,
        stack.as_deref(),
        stack_config.as_ref(),
        &profile,
        settings,
        r,
    );
    if let Some(s) = &stack {
        check_own_configs(&plan, stack_config.as_ref(), s, r);
    }
    references::check(&ws, (&plan, stack.as_deref()), &profile, r);
    check_secrets(&ws, stack.as_deref(), &profile, settings, r);
    Ok(())
}

/// The env file: its variables, or that it is absent (it is optional).
fn check_env_file(ws: &workspace::Workspace, r: &mut Report) {
    if ws.env_file.exists {
        r.ok(
            "env file",
            format!(
                "{} ({} variables)",
                display_path(&ws.env_file.path),
                ws.env_file.vars.len()
            ),
        );
    } else {
        r.note(
            "env file",
            format!("{}: absent (optional)", display_path(&ws.env_file.path)),
        );
    }
}

/// The stack, where its name came from, and its config file (read when it exists).
fn check_stack(
    ws: &workspace::Workspace,
    target: &Target,
    stack: Option<&str>,
    r: &mut Report,
) -> Result<Option<StackConfig>> {
    let source = if target.stack.is_some() {
        "--stack"
    } else if ws.env_file.get("PULUMI_STACK").is_some() {
        "PULUMI_STACK of the env file"
    } else {
        "PULUMI_STACK of the environment"
    };
    let Some(s) = stack else {
        r.bad(
            "stack",
            format!(
                "no stack named: pass --stack NAME, or set PULUMI_STACK in {}",
                display_path(&ws.env_file.path)
            ),
        );
        return Ok(None);
    };
    r.ok("stack", format!("{s} (from {source})"));
    let path = ws.stack_config_path(s);
    let cfg = StackConfig::load(&path)?;
    match &cfg {
        Some(c) => r.ok(
            "stack config",
            format!(
                "{}: {} keys, infra_type {}",
                display_path(&path),
                c.config().len(),
                c.infra_type().unwrap_or_else(|| "(not set yet)".into())
            ),
        ),
        None => r.note(
            "stack config",
            format!(
                "{}: absent; the first `strata up` creates it",
                display_path(&path)
            ),
        ),
    }
    Ok(cfg)
}

/// The provider (named, or recorded in the stack config) and its profile.
fn check_provider(
    ws: &workspace::Workspace,
    target: &Target,
    stack_config: Option<&StackConfig>,
    r: &mut Report,
) -> Result<workspace::Profile> {
    let stack = ws.resolve_stack(target.stack.as_deref())?;
    let provider =
        ws.select_provider(target.provider.as_deref(), stack.as_deref(), stack_config)?;
    let profile = ws.profile(&provider)?;
    r.ok(
        "provider",
        format!(
            "{} ({}): infra_type {}, {} projects",
            profile.name,
            display_path(&profile.file),
            profile.infra_type,
            profile.entries.len()
        ),
    );
    Ok(profile)
}

/// The profile's project folders, and the graph they make (no cycle).
fn check_plan(
    ws: &workspace::Workspace,
    profile: &workspace::Profile,
    r: &mut Report,
) -> Result<Plan> {
    let projects = ws.projects(profile)?;
    let pulumi = projects.iter().filter(|p| p.kind_str() == "pulumi").count();
    r.ok(
        "projects",
        format!(
            "{} folders under {}: {} Pulumi, {} command",
            projects.len(),
            display_path(&ws.projects_dir(profile)),
            pulumi,
            projects.len() - pulumi
        ),
    );
    let plan = crate::plan::build(profile, projects)?;
    r.ok(
        "graph",
        format!(
            "no cycle; {} steps in {} waves",
            plan.nodes.len(),
            plan.wave_count()
        ),
    );
    Ok(plan)
}

/// Preflight, as `up` runs it before asking or writing anything: the Pulumi CLI, the
/// backend's passphrase, the credentials.
fn check_preflight(
    ws: &workspace::Workspace,
    plan: &Plan,
    profile: &workspace::Profile,
    stack: Option<&str>,
    r: &mut Report,
) {
    let backends =
        crate::pipeline::env::backends(ws, plan.nodes.iter().filter_map(|n| n.project.as_deref()));
    let given = crate::pipeline::preflight::Given {
        plan,
        full: plan,
        profile,
        backends: &backends,
        stack,
    };
    let (pre, problems) = crate::pipeline::preflight::inspect(ws, &given);
    match (&pre.pulumi, problems.is_empty()) {
        (Some(bin), true) => r.ok("pulumi", display_path(bin)),
        (None, true) => r.ok("pulumi", "not needed: the plan has no Pulumi project"),
        _ => {}
    }
    for p in problems {
        r.bad(
            "preflight",
            p.replace(crate::pipeline::preflight::NOTHING_STARTED, ""),
        );
    }
    for n in pre.notices {
        r.note("preflight", n);
    }
}

/// The profile the stack runs (remembered by name, else its recorded infra_type),
/// against the chosen one.
fn check_profile(
    ws: &workspace::Workspace,
    profile: &workspace::Profile,
    cfg: Option<&StackConfig>,
    stack: &str,
    r: &mut Report,
) {
    let deployed = || {
        !crate::state::journal::Journal::new(&ws.state_dir(stack))
            .last_success()
            .is_empty()
    };
    match ws.check_profile(profile, stack, cfg, &deployed) {
        Ok(()) => r.ok(
            "profile",
            match ws.remembered_profile(stack) {
                Some(_) => format!("stack `{stack}` runs profile {}", profile.name),
                None => format!(
                    "stack `{stack}` has not run a profile here yet; the first `up` remembers {}",
                    profile.name
                ),
            },
        ),
        Err(e) => r.bad("profile", e.message),
    }
}

/// The profile's config keys: each set one of its type; a missing one is asked on the
/// first `up`, or a problem when this run cannot prompt.
/// Each Pulumi project's own `Pulumi.<stack>.yaml`: readable by Pulumi, and the keys where
/// it and what strata sends disagree (a shared key, the entry's `config:` or an input
/// laid over another value of its own): named, file and key, never the values.
fn check_own_configs(plan: &Plan, shared: Option<&StackConfig>, stack: &str, r: &mut Report) {
    use crate::workspace::stack_config::{Layer, Layers};
    let empty = StackConfig::new(std::path::Path::new(""));
    let (mut read, mut differ) = (0, 0);
    for n in plan
        .nodes
        .iter()
        .filter(|n| n.kind == crate::plan::NodeKind::Pulumi)
    {
        let (Some(p), Some(e)) = (&n.project, &n.entry) else {
            continue;
        };
        let Some(file) = p.own_stack_config(&e.stack_name(stack)) else {
            continue;
        };
        let own = match StackConfig::load_project(&file) {
            Ok(Some(c)) => c,
            Ok(None) => continue,
            Err(err) => {
                r.bad("own config", err.message);
                continue;
            }
        };
        read += 1;
        let inputs: Vec<(String, serde_yaml::Value)> = e
            .inputs
            .iter()
            .map(|i| (i.key.clone(), serde_yaml::Value::Null))
            .collect();
        let layers = Layers {
            own: Some(&own),
            shared: shared.unwrap_or(&empty),
            entry: &e.config,
            inputs: &inputs,
        };
        for (key, _, _, layer) in layers.overridden() {
            differ += 1;
            let from = match layer {
                Layer::Input => format!(
                    "an input ({})",
                    e.inputs
                        .iter()
                        .find(|i| i.key == key)
                        .map_or("?", |i| i.project.as_str())
                ),
                other => other.describe().to_string(),
            };
            r.warn(
                "own config",
                format!(
                    "{}: `{key}` in {} is not what runs: strata sends {from}'s value over it. Drop it from one of the two, or make them agree.",
                    n.path,
                    display_path(&file)
                ),
            );
        }
    }
    if differ == 0 {
        r.ok(
            "own config",
            format!(
                "{read} project stack config{} read, none overridden",
                plural(read)
            ),
        );
    }
}

fn check_config(
    ws: &workspace::Workspace,
    stack: Option<&str>,
    stack_config: Option<&StackConfig>,
    profile: &workspace::Profile,
    settings: &Settings,
    r: &mut Report,
) {
    let mut missing = Vec::new();
    let mut set = 0;
    for item in &profile.config {
        match stack_config.and_then(|c| c.get(&item.key)) {
            Some(v) if !v.is_null() => {
                set += 1;
                if let Err(why) = type_matches(v, item.value_type) {
                    r.bad(
                        "config",
                        format!("`{}` = {why}; it must be {:?}", item.key, item.value_type)
                            .to_lowercase(),
                    );
                }
            }
            _ if item.default.is_some() => {}
            _ => missing.push(item),
        }
    }
    if missing.is_empty() {
        r.ok(
            "config",
            format!("{set} of {} profile keys set", profile.config.len()),
        );
    } else if settings.interactive {
        r.note(
            "config",
            format!(
                "{} keys to be asked on the first `up`: {}",
                missing.len(),
                missing
                    .iter()
                    .map(|i| i.key.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        );
    } else {
        let path = stack
            .map(|s| display_path(&ws.stack_config_path(s)))
            .unwrap_or_else(|| "config/pulumi/Pulumi.<stack>.yaml".into());
        for item in missing {
            r.bad(
                "config",
                format!(
                    "`{}` ({}) is missing and this run cannot prompt; set it with `pulumi config set {} VALUE --config-file {path}`",
                    item.key, item.prompt, item.key
                ),
            );
        }
    }
}

/// Secrets: can the store be read, and is every declared secret there (or in
/// `STRATA_SECRET_<KEY>`)?
fn check_secrets(
    ws: &workspace::Workspace,
    stack: Option<&str>,
    profile: &workspace::Profile,
    settings: &Settings,
    r: &mut Report,
) {
    let declared = profile.all_secrets();
    if declared.is_empty() {
        r.ok("secrets", "the profile declares none");
        return;
    }
    let Some(stack) = stack else { return };
    let path = crate::secrets::store_path(ws, stack);
    // The store is never decrypted here (a passphrase store costs its scrypt work
    // factor): its keys come from the digest strata writes whenever it opens the store.
    if crate::secrets::store::exists(&path) {
        match crate::secrets::key(ws, stack, false) {
            Ok(crate::secrets::store::Key::Identity(id)) if !id.is_file() => {
                r.bad(
                    "secrets",
                    format!(
                        "STRATA_AGE_IDENTITY names {}, which is not a file: point it at the age identity of {}",
                        display_path(&id),
                        display_path(&path)
                    ),
                );
                return;
            }
            Ok(_) => {}
            Err(_) if settings.interactive => r.note(
                "secrets",
                format!(
                    "{} exists; `up` will ask for its passphrase (or set STRATA_PASSPHRASE / STRATA_AGE_IDENTITY)",
                    display_path(&path)
                ),
            ),
            Err(e) => {
                r.bad("secrets", e.message);
                return;
            }
        }
    }
    let Some(stored) = crate::secrets::digest::read_fresh(ws, stack) else {
        r.note(
            "secrets",
            format!(
                "{} changed since strata last opened it, so its keys are not checked here; `strata secrets list` opens it and checks them",
                display_path(&path)
            ),
        );
        return;
    };
    let missing: Vec<&str> = declared
        .iter()
        .map(|(s, _)| s.key.as_str())
        .filter(|k| !stored.contains_key(*k) && !ws.env.contains_key(&crate::secrets::env_var(k)))
        .collect();
    if missing.is_empty() {
        r.ok(
            "secrets",
            format!("{} declared, all available", declared.len()),
        );
    } else if settings.interactive {
        r.note(
            "secrets",
            format!("to be asked on the first `up`: {}", missing.join(", ")),
        );
    } else {
        for k in missing {
            r.bad(
                "secrets",
                format!(
                    "`{k}` is missing and this run cannot prompt: strata secrets set {k}, or set {}",
                    crate::secrets::env_var(k)
                ),
            );
        }
    }
}

/// Checks a stack-config value against a profile type; Err describes the value.
pub fn type_matches(v: &serde_yaml::Value, t: ValueType) -> std::result::Result<(), String> {
    use serde_yaml::Value;
    let ok = match (t, v) {
        (ValueType::String, Value::String(_)) => true,
        (ValueType::String, Value::Number(_) | Value::Bool(_)) => true,
        (ValueType::Int, Value::Number(n)) => n.is_i64() || n.is_u64(),
        (ValueType::Int, Value::String(s)) => s.trim().parse::<i64>().is_ok(),
        (ValueType::Bool, Value::Bool(_)) => true,
        (ValueType::Bool, Value::String(s)) => s == "true" || s == "false",
        (ValueType::List, Value::Sequence(_)) => true,
        (_, Value::Mapping(m)) if m.contains_key("secure") => true,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(serde_yaml::to_string(v)
            .unwrap_or_default()
            .trim()
            .to_string())
    }
}
