//! The engine operations (up, preview, refresh, destroy): the checks in the CLI's order
//! (confirmation flags, config expectations, plan, state, confirm, lock), then a run.
//! The run itself is in `runner` (passes and their conclusion), `pass` (one simulated
//! pass: steps, pauses, failures; refresh and destroy), `update` (the update/preview
//! pass) and `saved` (the state the engine reads and records).

mod pass;
mod runner;
mod saved;
mod update;

use runner::Runner;
use saved::decrypt_state;

use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::io::BufRead;

use crate::config::display_string;
use crate::crypto;
use crate::ctx::Ctx;
use crate::error::{Fail, Result, code};
use crate::output;
use crate::plan;
use crate::program::{self, Program};
use crate::secret;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Up,
    Preview,
    Refresh,
    Destroy,
}

impl Op {
    /// The name used by `FAKE_PULUMI_FAIL_<P>`.
    fn hook_name(self) -> &'static str {
        match self {
            Op::Up => "up",
            Op::Preview => "preview",
            Op::Refresh => "refresh",
            Op::Destroy => "destroy",
        }
    }

    fn kind(self) -> &'static str {
        match self {
            Op::Up => "update",
            Op::Preview => "preview",
            Op::Refresh => "refresh",
            Op::Destroy => "destroy",
        }
    }

    fn banner(self, dry_run: bool) -> &'static str {
        match (self, dry_run) {
            (Op::Up, false) => "Updating",
            (Op::Refresh, false) => "Refreshing",
            (Op::Destroy, false) => "Destroying",
            (Op::Up | Op::Preview, _) => "Previewing update",
            (Op::Refresh, true) => "Previewing refresh",
            (Op::Destroy, true) => "Previewing destroy",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Failed,
    Cancelled,
    /// The update would leave its plan (`up --plan`): exit 1, no "update failed" line.
    Rejected,
}

/// `FAKE_PULUMI_<NAME>_<P>`, else `FAKE_PULUMI_<NAME>`.
fn hook(name: &str, project_key: &str) -> Option<String> {
    std::env::var(format!("FAKE_PULUMI_{name}_{project_key}"))
        .or_else(|_| std::env::var(format!("FAKE_PULUMI_{name}")))
        .ok()
}

fn hook_json(name: &str, project_key: &str) -> Result<Map<String, Value>> {
    let Ok(text) = std::env::var(format!("FAKE_PULUMI_{name}_{project_key}")) else {
        return Ok(Map::new());
    };
    match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(Fail::error(format!(
            "FAKE_PULUMI_{name}_{project_key} is not a JSON object: {text}"
        ))),
    }
}

/// Runs one engine command from the top.
pub fn run(ctx: &Ctx, op: Op) -> Result<()> {
    let skip_preview = ctx.args.bool("skip-preview");
    let interactive = ctx.interactive();
    // `refresh --preview-only` / `destroy --preview-only`: a dry run, like preview.
    let dry_only = op == Op::Preview
        || (matches!(op, Op::Refresh | Op::Destroy) && ctx.args.bool("preview-only"));
    if !dry_only && !interactive && !ctx.yes() && !skip_preview {
        return Err(Fail::config(
            "--yes or --skip-preview must be passed in to proceed when running in \
             non-interactive mode",
        ));
    }
    let st = ctx.require_stack()?;
    let pass = crypto::passphrase()?;
    let mut cfg = ctx.stack_config(&st.project, &st.name)?;
    let (crypter, _) = cfg.crypter(&pass)?;
    let stack_values = cfg.decrypted(Some(&crypter))?;
    let key = st.project.env_key();
    let (program, config) = if matches!(op, Op::Up | Op::Preview) {
        let config = program::effective_config(&st.project, &st.name, &stack_values)?;
        (Program::load(&st.project)?, config)
    } else {
        (Program::default(), stack_values.clone())
    };
    let streams = ctx.json() && !dry_only;
    check_expected_config(&key, &st.project, &config, streams)?;
    // `up --plan FILE` reads its plan before the engine starts.
    let plan = match ctx
        .args
        .value("plan")
        .filter(|p| op == Op::Up && !p.is_empty())
    {
        Some(path) => Some(plan::read(path, &crypter)?),
        None => None,
    };
    let old = decrypt_state(&st.state)?;

    if !dry_only && interactive && !ctx.yes() && !confirm(op) {
        output::print(&format!(
            "confirmation declined, not proceeding with the {}\n",
            op.kind()
        ));
        return Err(Fail::bail(code::ERROR));
    }
    let lock = if dry_only {
        None
    } else {
        Some(st.backend.lock(&st.project.name, &st.name)?)
    };
    let blinded: BTreeMap<String, String> = cfg
        .blinded(secret::MASK)
        .into_iter()
        .map(|(k, v)| (k, display_string(&v)))
        .collect();
    let runner = Runner {
        ctx,
        st: &st,
        op,
        key: key.clone(),
        crypter: &crypter,
        salt: cfg.salt().map(String::from),
        config: &config,
        blinded,
        program: &program,
        old,
        dry_only,
        plan: plan.as_ref(),
        plan_config: cfg
            .entries()
            .into_iter()
            .map(|(k, v)| (k, serde_json::to_value(v).unwrap_or(Value::Null)))
            .collect(),
    };
    let result = runner.run_all(skip_preview);
    if let Some(l) = lock {
        l.release();
    }
    result
}

/// Interactive confirmation (only reached on a terminal without `--yes`).
fn confirm(op: Op) -> bool {
    output::print(&format!(
        "Do you want to perform this {}? [yes/no]: ",
        op.kind()
    ));
    let mut line = String::new();
    let _ = std::io::stdin().lock().read_line(&mut line);
    matches!(line.trim(), "yes" | "y")
}

/// `FAKE_PULUMI_EXPECT_CONFIG_<P>`: the program's config must hold these values.
fn check_expected_config(
    key: &str,
    project: &crate::project::Project,
    config: &BTreeMap<String, Value>,
    streams: bool,
) -> Result<()> {
    let want = hook_json("EXPECT_CONFIG", key)?;
    for (k, expected) in want {
        let q = project.qualify(&k);
        let got = config.get(&q).map(secret::reveal);
        let same = match (&got, &expected) {
            (Some(g), Value::String(e)) => display_string(g) == *e,
            (Some(g), e) => g == e,
            (None, _) => false,
        };
        if !same {
            let got = got
                .map(|g| g.to_string())
                .unwrap_or_else(|| "nothing".into());
            let msg = format!(
                "FAKE_PULUMI_EXPECT_CONFIG_{key}: config '{q}' expected {expected}, got {got}"
            );
            if streams {
                output::event(
                    "diagnosticEvent",
                    json!({"prefix": "error: ", "message": format!("{msg}\n"),
                           "color": "never", "severity": "error"}),
                );
            }
            return Err(Fail::config(msg));
        }
    }
    Ok(())
}
