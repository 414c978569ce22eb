//! fake-pulumi: a test double of the Pulumi CLI for strata's integration tests.
//!
//! It follows the real CLI's contract (flags, files, events, exit codes) on a file
//! backend, and adds test hooks chosen by `FAKE_PULUMI_*` environment variables.

mod calllog;
mod cli;
mod clock;
mod commands;
mod config;
mod crypto;
mod ctx;
mod display;
mod engine;
mod error;
mod eval;
mod fields;
mod flags;
mod layout;
mod output;
mod plan;
mod program;
mod project;
mod secret;
mod signals;
mod state;

pub use clock::now_rfc3339;

use serde_json::{Value, json};

fn main() {
    signals::install();
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = cli::Args::parse(&argv);
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let chdir_err = args.value("cwd").and_then(|dir| {
        std::env::set_current_dir(dir)
            .err()
            .map(|e| format!("changing the working directory: chdir {dir}: {e}"))
    });
    let (command, rest) = args.command();
    let ctx = ctx::Ctx {
        args,
        command,
        rest,
    };
    let project = ctx.project().ok();
    calllog::start(calllog::Invocation {
        argv,
        cwd,
        project: project.as_ref().map(|p| p.name.clone()),
        stack: stack_name(&ctx),
        command: ctx.command.clone(),
        config: config_view(&ctx),
    });
    let result = match chdir_err {
        Some(e) => Err(error::Fail::error(e)),
        None => commands::run(&ctx),
    };
    let code = match result {
        Ok(()) => error::code::OK,
        Err(f) => {
            if !f.msg.is_empty() {
                output::error(&f.msg);
            }
            // CLIs before 3.226 exit 255 on every error.
            if std::env::var_os("FAKE_PULUMI_OLD_CLI").is_some() {
                255
            } else {
                f.code
            }
        }
    };
    calllog::end(code, Some(config_view(&ctx)));
    std::process::exit(code);
}

/// The effective config file for the log: plain values, secure ones as `[secure]`.
fn config_view(ctx: &ctx::Ctx) -> Value {
    let Ok(project) = ctx.project() else {
        return json!({});
    };
    let Some(stack) = stack_name(ctx) else {
        return json!({});
    };
    match ctx.stack_config(&project, &stack) {
        Ok(cfg) => json!(cfg.blinded("[secure]")),
        Err(_) => json!({}),
    }
}

/// The bare stack name this invocation is about (`--stack`, or `stack init NAME`).
fn stack_name(ctx: &ctx::Ctx) -> Option<String> {
    let raw = if matches!(ctx.command.as_str(), "stack init" | "stack rm") {
        ctx.stack_arg()
    } else {
        ctx.args.value("stack").map(String::from)
    }?;
    raw.rsplit('/').next().map(String::from)
}
