//! `up`, `preview`, `refresh`, `destroy`: plan, check, lock, run, summarise.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use crate::cli::{GlobalArgs, RunArgs};
use crate::engine::command::CommandEngine;
use crate::engine::process::find_program;
use crate::engine::pulumi::PulumiEngine;
use crate::engine::{Control, Operation};
use crate::error::{Error, Result};
use crate::plan::{NodeKind, Plan, Selection};
use crate::run::events::{Counts, RunEvent, Status};
use crate::run::executor::{Ctx, StepRunner};
use crate::run::journal::{self, Journal, Record};
use crate::run::lock::StackLock;
use crate::run::report::{self, Reporter, Row};
use crate::run::{fingerprint, scheduler, signals};
use crate::secrets::redact::Redactor;
use crate::settings::Settings;
use crate::util::{display_path, now_ms, rfc3339};
use crate::workspace::profile::Hook;
use crate::workspace::{self, Profile, ProjectKind, StackConfig, Workspace};

pub struct Request {
    pub op: Operation,
    pub args: RunArgs,
    pub resume: bool,
    pub changed: bool,
}

pub fn run(g: &GlobalArgs, settings: &Settings, req: Request) -> Result<i32> {
    let op = req.op;
    let mut ws = super::open_workspace(g)?;
    let stack = crate::setup::ensure_stack(&mut ws, g.stack.as_deref(), settings.interactive)?;
    let config_path = ws.stack_config_path(&stack);
    let existing = StackConfig::load(&config_path)?;
    let provider = ws.select_provider(g.provider.as_deref(), existing.as_ref())?;
    let profile = ws.profile(&provider)?;
    let projects = ws.projects(&profile)?;
    let full = Plan::build(&profile, projects)?;

    let base = if op == Operation::Destroy {
        full.reversed()
    } else {
        full.clone()
    };
    let mut plan = base.select(&Selection {
        projects: req.args.projects.clone(),
        with_deps: req.args.with_deps,
        from: req.args.from.clone(),
    })?;
    let state_dir = ws.state_dir(&stack);
    let journal = Journal::new(&state_dir);
    if req.resume {
        plan = resume_plan(&full, &journal, &stack)?;
    }

    // A destroy that cannot ask needs --yes: said before anything else is looked at.
    if op == Operation::Destroy && !req.args.yes && !settings.interactive {
        confirm_destroy(&req.args, settings, &plan, &stack, &profile)?;
    }
    if op == Operation::Destroy && existing.is_none() {
        eprintln!(
            "stack `{stack}` has no stack config ({}): nothing was brought up on it, nothing to destroy.",
            display_path(&config_path)
        );
        return Ok(crate::error::exit::OK);
    }

    // Config and secrets: asked on a terminal; otherwise every missing one is listed
    // in one error.
    let config_result = match op {
        Operation::Up | Operation::Preview => {
            crate::setup::ensure_stack_config(&ws, &stack, &profile, existing, settings.interactive)
        }
        _ => match existing {
            Some(c) => workspace::check_infra_type(&profile, &c, &stack).map(|_| c),
            None => {
                return Err(Error::config(format!(
                    "stack `{stack}` has no stack config ({}): nothing has been brought up on it. Run `strata up --stack {stack}` first.",
                    display_path(&config_path)
                )));
            }
        },
    };
    let secrets_result = match &config_result {
        Err(e) if e.kind != crate::error::Kind::Config || settings.interactive => None,
        _ => Some(crate::secrets::gather(
            &ws, &stack, &profile, &plan, op, settings,
        )),
    };
    let (stack_config, gathered) = match (config_result, secrets_result) {
        (Ok(c), Some(Ok(g))) => (c, g),
        (Err(a), Some(Err(b))) if b.kind == crate::error::Kind::Config => {
            return Err(Error::config(format!("{}\n{}", a.message, b.message)));
        }
        (Err(e), _) | (Ok(_), Some(Err(e))) => return Err(e),
        (Ok(_), None) => unreachable!("secrets are gathered whenever the config is ready"),
    };

    if op == Operation::Destroy && !confirm_destroy(&req.args, settings, &plan, &stack, &profile)? {
        eprintln!("Nothing was destroyed.");
        return Ok(1);
    }

    let env = child_env(&ws, &stack, &profile)?;
    let needs_pulumi = plan_needs_pulumi(&plan, &full);
    let pulumi_bin = if needs_pulumi {
        Some(preflight_pulumi(&ws, &env, &plan)?)
    } else {
        None
    };
    let control = Control::new();
    let mut notices: Vec<String> = Vec::new();
    let env = with_org(env, pulumi_bin.as_deref(), &plan, &control, &mut notices);

    // From here on Ctrl-C is ours, so the lock is released on every path.
    let signals = signals::install()
        .map_err(|e| Error::failed(format!("cannot install the Ctrl-C handler: {e}")))?;
    let handle = signals.handle();
    let _lock = StackLock::acquire(
        &state_dir,
        &stack,
        &format!("strata {}", op.as_str()),
        &mut |w| notices.push(format!("warning: {w}")),
    )?;

    let secrets = gathered.values;
    let redactor = Redactor::new(gathered.redact);
    let fp_salt = fingerprint::salt(&state_dir);
    let fingerprints = fingerprint::of_plan(&plan, &profile, &stack_config, &secrets, &fp_salt);
    let mut skipped_unchanged: Vec<(String, String)> = Vec::new();
    if req.changed {
        let (kept, skipped) = changed_plan(&plan, &journal, &fingerprints);
        plan = kept;
        skipped_unchanged = skipped;
    }

    let run_id = format!(
        "{}-{}",
        rfc3339(now_ms()).replace([':', '-'], ""),
        std::process::id()
    );
    let ctx = Ctx {
        root: ws.root.clone(),
        stack: stack.clone(),
        provider: profile.name.clone(),
        op,
        plan,
        env,
        stack_config: stack_config.clone(),
        state_dir: state_dir.clone(),
        run_id: run_id.clone(),
        redactor: std::sync::RwLock::new(redactor),
        secrets,
        profile_secret_keys: profile.secrets.iter().map(|s| s.key.clone()).collect(),
        needed: needed_outputs(&profile),
        fingerprints,
        fingerprint_salt: fp_salt,
        secret_name: profile.secret_name.clone(),
        projects: full
            .nodes
            .iter()
            .filter_map(|n| {
                n.project
                    .as_ref()
                    .map(|p| (n.path.clone(), (p.dir.clone(), p.name(), p.kind.clone())))
            })
            .collect(),
    };
    let pulumi = pulumi_bin.map(PulumiEngine::new);
    let command = CommandEngine {
        specs: full
            .nodes
            .iter()
            .filter_map(|n| match n.project.as_ref().map(|p| &p.kind) {
                Some(ProjectKind::Command(spec)) => Some((n.path.clone(), spec.clone())),
                _ => None,
            })
            .collect(),
    };
    let runner = StepRunner::new(&ctx, &control, pulumi.as_ref(), &command, &journal);
    let reporter = Reporter::stdout(settings.display);
    let emit = |e: RunEvent| reporter.event(&e);

    let started = now_ms();
    let order: Vec<String> = ctx
        .plan
        .order
        .iter()
        .map(|&i| ctx.plan.nodes[i].path.clone())
        .collect();
    journal.append(&Record::Run {
        run_id: run_id.clone(),
        operation: op.as_str().into(),
        provider: profile.name.clone(),
        stack: stack.clone(),
        projects: order.clone(),
        started_at: rfc3339(started),
        command: format!("strata {}", op.as_str()),
    })?;
    emit(RunEvent::RunStarted {
        run_id: run_id.clone(),
        operation: op,
        provider: profile.name.clone(),
        stack: stack.clone(),
        projects: order,
        parallel: req.args.parallel as usize,
    });
    for n in notices {
        emit(RunEvent::Notice { message: n });
    }
    for (path, why) in &skipped_unchanged {
        emit(RunEvent::ProjectFinished {
            project: path.clone(),
            operation: op,
            status: Status::Skipped,
            duration_ms: 0,
            message: Some(why.clone()),
            log: None,
            exit_code: None,
        });
    }

    let grace = Duration::from_secs(
        ctx.env
            .get("STRATA_GRACE_SECONDS")
            .and_then(|s| s.parse().ok())
            .unwrap_or(90),
    );
    let done = AtomicBool::new(false);
    let opts = scheduler::Options {
        parallel: req.args.parallel as usize,
        keep_going: req.args.keep_going,
        operation: op,
    };
    let results = std::thread::scope(|s| {
        s.spawn(|| signals::watch(signals, &control, &done, grace, &emit));
        let r = scheduler::run(&ctx.plan, opts, &runner, &control, &emit);
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        r
    });
    handle.close();
    let interrupted = control.is_cancelled();
    let killed = control.is_killed();
    // Nothing may survive the run.
    control.kill();

    // Journal records for the steps that never ran.
    for (i, r) in results.iter().enumerate() {
        if runner.log_path(i).is_none() {
            let _ = journal.append(&Record::Project {
                run_id: run_id.clone(),
                project: ctx.plan.nodes[i].path.clone(),
                operation: op.as_str().into(),
                status: r.status.as_str().into(),
                started_at: rfc3339(now_ms()),
                ended_at: rfc3339(now_ms()),
                duration_ms: 0,
                exit_code: None,
                fingerprint: None,
                message: r.message.clone(),
                log: None,
            });
        }
    }

    let mut counts = Counts::default();
    let mut rows = Vec::new();
    for (path, why) in &skipped_unchanged {
        counts.add(Status::Skipped);
        rows.push(Row {
            project: path.clone(),
            status: Status::Skipped,
            duration_ms: 0,
            note: why.clone(),
            log: None,
            failure: None,
            tail: vec![],
        });
    }
    for &i in &ctx.plan.order {
        let r = &results[i];
        counts.add(r.status);
        rows.push(Row {
            project: ctx.plan.nodes[i].path.clone(),
            status: r.status,
            duration_ms: r.duration_ms,
            note: r
                .message
                .clone()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
            log: runner.log_path(i),
            failure: r.message.clone(),
            tail: runner.tail(i),
        });
    }
    let elapsed = now_ms().saturating_sub(started);
    let status = if interrupted {
        Status::Cancelled
    } else if counts.failed > 0 || counts.cancelled > 0 {
        // A project Pulumi cancelled on its own (not a Ctrl-C) fails the run.
        Status::Failed
    } else {
        Status::Succeeded
    };
    let processes = runner.processes();
    emit(RunEvent::RunFinished {
        run_id,
        operation: op,
        status,
        duration_ms: elapsed,
        counts: counts.clone(),
        cpu_ms: crate::util::self_cpu_ms(),
        processes,
    });
    let headline = format!(
        "strata {} {}: {} succeeded, {} failed, {} skipped, {} cancelled in {} · {} process{} started",
        op.as_str(),
        status.as_str(),
        counts.succeeded,
        counts.failed,
        counts.skipped,
        counts.cancelled,
        crate::util::human_duration(elapsed),
        processes,
        if processes == 1 { "" } else { "es" }
    );
    if !settings.json {
        let text = report::summary(&rows, &headline, &|l| ctx.redact(l));
        reporter.println(text.trim_end());
    }
    match status {
        Status::Cancelled => {
            let killed_stacks: Vec<String> = ctx
                .plan
                .order
                .iter()
                .filter(|&&i| {
                    results[i].status == Status::Cancelled
                        && ctx.plan.nodes[i].kind == NodeKind::Pulumi
                        && runner.log_path(i).is_some()
                })
                .map(|&i| ctx.plan.nodes[i].path.clone())
                .collect();
            let hint = if killed && !killed_stacks.is_empty() {
                format!(
                    " These stacks may need `pulumi cancel --stack {stack}` in their folder: {}.",
                    killed_stacks.join(", ")
                )
            } else {
                " Pulumi saved the state of each cancelled update; run `strata up --resume` to continue.".to_string()
            };
            Err(Error::interrupted(format!("interrupted.{hint}")))
        }
        // A downstream whose upstream was never deployed lacks an input: exit 3.
        Status::Failed if results.iter().any(|r| r.missing_input) => Ok(crate::error::exit::CONFIG),
        Status::Failed => Ok(crate::error::exit::FAILED),
        _ => Ok(crate::error::exit::OK),
    }
}

/// Asks before destroying on a terminal; requires --yes otherwise.
fn confirm_destroy(
    args: &RunArgs,
    settings: &Settings,
    plan: &Plan,
    stack: &str,
    profile: &Profile,
) -> Result<bool> {
    if args.yes {
        return Ok(true);
    }
    if !settings.interactive {
        return Err(Error::usage(format!(
            "destroy needs --yes when it cannot ask (non-interactive run). Nothing was destroyed.\n  To destroy {} project(s) of stack `{stack}`: strata destroy --yes",
            plan.nodes.len()
        )));
    }
    dialoguer::Confirm::with_theme(&dialoguer::theme::ColorfulTheme::default())
        .with_prompt(format!(
            "Destroy {} project(s) of stack `{stack}` (provider {})? This deletes their resources",
            plan.nodes.len(),
            profile.name
        ))
        .default(false)
        .interact()
        .map_err(crate::setup::prompt_error)
}

/// The environment every Pulumi call gets: strata's environment overlaid by the env file,
/// without strata's own secrets (`STRATA_PASSPHRASE`, `STRATA_SECRET_*`), and with the
/// default file backend when no `PULUMI_BACKEND_URL` is set.
pub fn pulumi_env(ws: &Workspace) -> Result<BTreeMap<String, String>> {
    let mut env = ws.env.clone();
    env.retain(|k, _| !crate::secrets::is_strata_secret_var(k));
    if !env.contains_key("PULUMI_BACKEND_URL") {
        let backend = ws.root.join(".strata").join("backend");
        std::fs::create_dir_all(&backend).map_err(|e| Error::io("create", &backend, e))?;
        env.insert(
            "PULUMI_BACKEND_URL".into(),
            format!("file://{}", backend.display()),
        );
    }
    Ok(env)
}

/// A self-managed backend (file, s3, gs, azblob, postgres...) rather than the Pulumi
/// Cloud service (http/https).
fn self_managed(env: &BTreeMap<String, String>) -> bool {
    env.get("PULUMI_BACKEND_URL")
        .is_some_and(|u| !u.starts_with("https://") && !u.starts_with("http://"))
}

/// The base environment of every child (DESIGN.md §1).
fn child_env(ws: &Workspace, stack: &str, profile: &Profile) -> Result<BTreeMap<String, String>> {
    let mut env = pulumi_env(ws)?;
    env.insert("STRATA_ROOT".into(), ws.root.display().to_string());
    env.insert("STRATA_STACK".into(), stack.to_string());
    env.insert("STRATA_PROVIDER".into(), profile.name.clone());
    env.insert("STRATA_INFRA_TYPE".into(), profile.infra_type.clone());
    if self_managed(&env) {
        // Pulumi's rule for stack references on a self-managed backend.
        env.insert("STRATA_ORG".into(), "organization".into());
    } else if let Some(org) = env.get("PULUMI_ORG").cloned()
        && !env.contains_key("STRATA_ORG")
    {
        env.insert("STRATA_ORG".into(), org);
    }
    Ok(env)
}

/// On Pulumi Cloud without STRATA_ORG/PULUMI_ORG: the `pulumi whoami` user, asked once.
fn with_org(
    mut env: BTreeMap<String, String>,
    pulumi: Option<&std::path::Path>,
    plan: &Plan,
    control: &Control,
    notices: &mut Vec<String>,
) -> BTreeMap<String, String> {
    if env.contains_key("STRATA_ORG") || plan.nodes.is_empty() {
        return env;
    }
    let Some(bin) = pulumi else { return env };
    let out = crate::engine::process::run_captured(
        duct::cmd(bin, ["whoami", "--non-interactive"]).full_env(&env),
        control,
        "pulumi whoami",
        None,
    );
    match out {
        Ok(o) if o.exit.success() => {
            let user = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if !user.is_empty() {
                env.insert("STRATA_ORG".into(), user);
            }
        }
        _ => notices.push(
            "warning: could not tell the Pulumi organization (`pulumi whoami` failed); set STRATA_ORG in config/pulumi/environment so stack references resolve".into(),
        ),
    }
    env
}

fn plan_needs_pulumi(plan: &Plan, full: &Plan) -> bool {
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

/// Finds the pulumi CLI and checks the passphrase of a file backend, before anything runs.
pub fn preflight_pulumi(
    ws: &Workspace,
    env: &BTreeMap<String, String>,
    plan: &Plan,
) -> Result<std::path::PathBuf> {
    let wanted = env
        .get("STRATA_PULUMI")
        .cloned()
        .unwrap_or_else(|| "pulumi".into());
    let names: Vec<&str> = plan
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Pulumi)
        .map(|n| n.path.as_str())
        .take(5)
        .collect();
    let Some(bin) = find_program(&wanted, env) else {
        return Err(Error::config(format!(
            "the pulumi CLI was not found (looked for `{wanted}` on PATH). Nothing was started.\n  This plan has Pulumi projects ({}{}). Install Pulumi (https://www.pulumi.com/docs/install/), or set STRATA_PULUMI to its path.\n  The `local` profile needs no pulumi: strata up --provider local",
            names.join(", "),
            if names.len() == 5 { ", ..." } else { "" }
        )));
    };
    let backend = env.get("PULUMI_BACKEND_URL").cloned().unwrap_or_default();
    if backend.starts_with("file://")
        && !env.contains_key("PULUMI_CONFIG_PASSPHRASE")
        && !env.contains_key("PULUMI_CONFIG_PASSPHRASE_FILE")
    {
        return Err(Error::config(format!(
            "the Pulumi backend is the file backend ({backend}), which encrypts secrets with a passphrase, and none is set. Nothing was started.\n  Set PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE) in {} or the environment; use the same one for every run of this stack.",
            display_path(&ws.env_file.path)
        )));
    }
    Ok(bin)
}

/// Outputs that dependents (`inputs:`) or the project's own hooks read.
fn needed_outputs(profile: &Profile) -> BTreeMap<String, Vec<String>> {
    let mut needed: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for e in &profile.entries {
        for i in &e.inputs {
            needed
                .entry(i.project.clone())
                .or_default()
                .push(i.output.clone());
        }
        for h in &e.on_success {
            let names: Vec<String> = match h {
                Hook::Kubeconfig(k) => vec![k.output.clone()],
                Hook::Run(cmd) => cmd
                    .split("${outputs.")
                    .skip(1)
                    .filter_map(|rest| rest.split_once('}').map(|(n, _)| n.to_string()))
                    .collect(),
            };
            needed.entry(e.path.clone()).or_default().extend(names);
        }
    }
    for v in needed.values_mut() {
        v.sort();
        v.dedup();
    }
    needed
}

/// `--changed`: drop every step whose last `up` succeeded with the same fingerprint and
/// whose prerequisites were dropped too. Returns the kept plan and (path, reason) dropped.
fn changed_plan(
    plan: &Plan,
    journal: &Journal,
    fps: &BTreeMap<String, String>,
) -> (Plan, Vec<(String, String)>) {
    // The last up *or destroy*: a project destroyed since its last up must run again.
    let last = journal::last_by_project(&journal.read(), &["up", "destroy"]);
    let mut skip = vec![false; plan.nodes.len()];
    let mut dropped = Vec::new();
    for &i in &plan.order {
        let n = &plan.nodes[i];
        let same = match last.get(&n.path) {
            Some(Record::Project {
                status,
                fingerprint: Some(f),
                ended_at,
                operation,
                ..
            }) if operation == "up" && status == "succeeded" && fps.get(&n.path) == Some(f) => {
                Some(ended_at.clone())
            }
            _ => None,
        };
        if let Some(when) = same
            && n.needs.iter().all(|&j| skip[j])
        {
            skip[i] = true;
            dropped.push((
                n.path.clone(),
                format!("unchanged since its last up ({when})"),
            ));
        }
    }
    let keep: Vec<bool> = skip.iter().map(|s| !s).collect();
    (plan.subplan(&keep), dropped)
}

/// `--resume`: what did not succeed in the last `up` of this stack, and its dependents
/// among the projects of that run.
fn resume_plan(full: &Plan, journal: &Journal, stack: &str) -> Result<Plan> {
    let records = journal.read();
    let Some((run_id, projects)) = records.iter().rev().find_map(|r| match r {
        Record::Run {
            run_id,
            operation,
            projects,
            ..
        } if operation == "up" => Some((run_id.clone(), projects.clone())),
        _ => None,
    }) else {
        return Err(Error::config(format!(
            "nothing to resume: no `strata up` is recorded for stack `{stack}`. Run `strata up`."
        )));
    };
    let succeeded: BTreeSet<String> = records
        .iter()
        .filter_map(|r| match r {
            Record::Project {
                run_id: id,
                project,
                status,
                ..
            } if *id == run_id && status == "succeeded" => Some(project.clone()),
            _ => None,
        })
        .collect();
    let in_run: BTreeSet<&str> = projects.iter().map(String::as_str).collect();
    let mut keep = vec![false; full.nodes.len()];
    for &i in &full.order {
        let n = &full.nodes[i];
        if !in_run.contains(n.path.as_str()) {
            continue;
        }
        let upstream_rerun = n.needs.iter().any(|&j| keep[j]);
        if !succeeded.contains(&n.path) || upstream_rerun {
            keep[i] = true;
        }
    }
    Ok(full.subplan(&keep))
}
