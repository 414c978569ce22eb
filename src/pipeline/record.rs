//! Record: the end of a run — the summary (every project with its status and duration,
//! the tail of each failure's log), the `run_finished` event, and the exit code.

use crate::error::{Error, Result, exit};
use crate::plan::NodeKind;
use crate::run::events::{Counts, RunEvent, Status};
use crate::run::report::{self, Reporter, Row};
use crate::settings::Settings;
use crate::util::{human_duration, now_ms};

use super::execute::Executed;
use super::resolve::Resolved;

pub fn finish(
    r: &Resolved,
    done: Executed,
    reporter: &Reporter,
    settings: &Settings,
) -> Result<i32> {
    let op = r.req.op;
    let stack = r.stack();
    let mut counts = Counts::default();
    let mut rows = Vec::new();
    for (path, why) in &done.unchanged {
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
    for &i in &done.plan.order {
        let res = &done.results[i];
        counts.add(res.status);
        rows.push(Row {
            project: done.plan.nodes[i].path.clone(),
            status: res.status,
            duration_ms: res.duration_ms,
            note: res
                .message
                .as_deref()
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or("")
                .to_string(),
            log: done.logs[i].clone(),
            failure: res.message.clone(),
            tail: done.tails[i].clone(),
        });
    }
    let elapsed = now_ms().saturating_sub(done.started_ms);
    let status = if done.interrupted {
        Status::Cancelled
    } else if counts.failed > 0 || counts.cancelled > 0 {
        // A project Pulumi cancelled on its own (not a Ctrl-C) fails the run.
        Status::Failed
    } else {
        Status::Succeeded
    };
    reporter.event(&RunEvent::RunFinished {
        run_id: done.run_id.clone(),
        operation: op,
        status,
        duration_ms: elapsed,
        counts: counts.clone(),
        cpu_ms: crate::util::self_cpu_ms(),
        processes: done.processes,
    });
    let processes = done.processes;
    let headline = format!(
        "strata {} {}: {} succeeded, {} failed, {} skipped, {} cancelled in {} · {} process{} started",
        op.as_str(),
        status.as_str(),
        counts.succeeded,
        counts.failed,
        counts.skipped,
        counts.cancelled,
        human_duration(elapsed),
        processes,
        if processes == 1 { "" } else { "es" }
    );
    if !settings.json {
        let text = report::summary(&rows, &headline, &|l| done.redactor.redact(l));
        reporter.println(text.trim_end());
    }
    match status {
        Status::Cancelled => {
            let killed_stacks: Vec<String> = done
                .plan
                .order
                .iter()
                .filter(|&&i| {
                    done.results[i].status == Status::Cancelled
                        && done.plan.nodes[i].kind == NodeKind::Pulumi
                        && done.logs[i].is_some()
                })
                .map(|&i| done.plan.nodes[i].path.clone())
                .collect();
            let hint = if done.killed && !killed_stacks.is_empty() {
                format!(
                    " These stacks may need `pulumi cancel --stack {stack}` in their folder: {}.",
                    killed_stacks.join(", ")
                )
            } else {
                " Pulumi saved the state of each cancelled update; run `strata up --resume` to continue.".to_string()
            };
            let sig = done.signal.unwrap_or(libc::SIGINT);
            let what = match sig {
                libc::SIGTERM => "stopped by SIGTERM",
                libc::SIGHUP => "stopped by SIGHUP (the terminal closed)",
                _ => "interrupted",
            };
            Err(Error::signal(sig, format!("{what}.{hint}")))
        }
        // A downstream whose upstream was never deployed lacks an input: exit 3.
        Status::Failed if done.results.iter().any(|r| r.missing_input) => Ok(exit::CONFIG),
        Status::Failed => Ok(exit::FAILED),
        _ => Ok(exit::OK),
    }
}
