//! `strata report`: a run of the stack's journal as a timeline — HTML (the default, written
//! to `.strata/<stack>/report.html`), a Mermaid gantt or JSON. Reads only: any `--stack`.

use std::path::Path;

use crate::cli::{ReportArgs, ReportFormat};
use crate::error::Result;
use crate::plan::Plan;
use crate::report;
use crate::report::journal::Journal;
use crate::settings::{Display, Settings};
use crate::util::display_path;
use crate::workspace::Target;
use crate::workspace::Workspace;

pub fn run(target: &Target, settings: &Settings, args: &ReportArgs) -> Result<i32> {
    let ws = super::open_workspace(target)?;
    let Some(stack) = ws.stack_to_read(target.stack.as_deref())? else {
        return Err(crate::workspace::no_stack_error(&ws));
    };
    let state_dir = ws.state_dir(&stack);
    let journal = Journal::read(&state_dir, &stack)?;
    let run_id = journal.select(args.run.as_deref())?;
    // The graph of the profile the run used, if it still resolves.
    let plan = plan_of(&ws, journal.provider_of(&run_id));
    let r = report::build::build(
        &journal,
        &run_id,
        plan.as_ref().map_err(Clone::clone),
        &ws.root,
    );
    let format = match args.format {
        Some(f) => format_of(f),
        None if settings.json => report::Format::Json,
        None => report::Format::Html,
    };
    let text = report::render(&r, format);
    let out = match args.out.as_deref() {
        Some(p) if p == Path::new("-") => None,
        Some(p) => Some(p.to_path_buf()),
        None if format == report::Format::Html => Some(report::default_path(&state_dir)),
        None => None,
    };
    let Some(path) = out else {
        super::print(&text)?;
        return Ok(0);
    };
    report::write(&path, &text)?;
    if settings.json {
        let doc = serde_json::json!({
            "path": display_path(&path),
            "format": format.as_str(),
            "run_id": r.run_id,
            "status": r.status,
        });
        super::print(&format!("{doc}\n"))?;
    } else {
        super::print(&format!("{}\n", display_path(&path)))?;
        if settings.display != Display::Quiet {
            eprintln!(
                "{} report of run {}: strata {} of stack {}, {}{}",
                format.as_str(),
                r.run_id,
                r.operation,
                r.stack,
                r.status,
                if format == report::Format::Html {
                    "; open it in a browser"
                } else {
                    ""
                }
            );
        }
    }
    Ok(0)
}

/// The report's own format for the one `--format` names: clap stays at the door.
fn format_of(format: ReportFormat) -> report::Format {
    match format {
        ReportFormat::Html => report::Format::Html,
        ReportFormat::Mermaid => report::Format::Mermaid,
        ReportFormat::Json => report::Format::Json,
    }
}

/// The full plan of `provider`'s profile, or why there is none (first line).
fn plan_of(ws: &Workspace, provider: &str) -> std::result::Result<Plan, String> {
    if provider.is_empty() {
        return Err("the run record names no provider".into());
    }
    let first_line = |e: crate::error::Error| e.message.lines().next().unwrap_or("").to_string();
    let profile = ws.profile(provider).map_err(first_line)?;
    let projects = ws.projects(&profile).map_err(first_line)?;
    crate::plan::build(&profile, projects).map_err(first_line)
}
