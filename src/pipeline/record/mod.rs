//! Record: the end of a run — the summary (each project's status, duration, failure's
//! tail), `run_finished`, the report, the exit code (a stopped run's says how to go on).

use crate::display::Reporter;
use crate::display::summary::{self, Row};
use crate::engine::Operation;
use crate::error::{Error, Result, exit};
use crate::plan::NodeKind;
use crate::run::events::{Counts, RunEvent, Status};
use crate::settings::Settings;
use crate::trace::Trace;
use crate::util::{display_path, human_duration, now_ms, plural};

use super::execute::Executed;
use super::resolve::Resolved;

mod preview;

pub fn finish(
    r: &Resolved,
    mut done: Executed,
    reporter: &Reporter,
    settings: &Settings,
) -> Result<i32> {
    let trace = std::mem::take(&mut done.trace);
    let code = summarize(r, done, reporter, settings, &trace);
    // Last, so the summary is not held up by a slow collector.
    trace.finish()?;
    code
}

/// The run's end, step by step: the summary's rows, `run_finished`, the headline, a
/// preview's Markdown summary and bundle, the summary shown, the report written, and
/// the exit code.
fn summarize(
    r: &Resolved,
    mut done: Executed,
    reporter: &Reporter,
    settings: &Settings,
    trace: &Trace,
) -> Result<i32> {
    let op = r.req.op;
    let (rows, counts) = rows(&done);
    let elapsed = now_ms().saturating_sub(done.started_ms);
    let status = run_status(&done, &counts);
    let finished = RunEvent::RunFinished {
        run_id: done.run_id.clone(),
        operation: op,
        status,
        duration_ms: elapsed,
        counts: counts.clone(),
        cpu_ms: crate::util::self_cpu_ms(),
        processes: done.processes,
    };
    trace.event(&finished);
    reporter.event(&finished);
    let headline = headline(op, status, &counts, elapsed, done.processes);
    let mut summary_failed = None;
    if op == Operation::Preview {
        summary_failed = preview::write(r, &done, &rows);
    }
    // `up --plan`: the applied mark was written under the lock (`execute`).
    summary_failed = summary_failed.or(done.bundle_mark.take());
    show_summary(&rows, &headline, &done, reporter, settings);
    // What only the summaries read goes before the report is drawn: a run of thousands
    // of projects holds a row, and a fingerprint, for each.
    drop(rows);
    drop(std::mem::take(&mut done.fingerprints));
    crate::util::return_free_memory();
    write_report(r, &done, reporter, settings);
    exit_code(r, &done, status, summary_failed)
}

/// A row of the summary for each step `--changed` skipped, then for each step of the
/// plan in its order; and the count of each status.
fn rows(done: &Executed) -> (Vec<Row>, Counts) {
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
            changes: None,
        });
    }
    for &i in &done.plan.order {
        let res = &done.results[i];
        counts.add(res.status);
        if res.denied.is_some() && res.status != Status::Denied {
            // A preview's project: it succeeded, and a rule would deny it.
            counts.denied += 1;
        }
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
            changes: res.changes.clone(),
        });
    }
    (rows, counts)
}

/// The run's status: cancelled by a signal, failed, denied (an `up` a `policy:` rule
/// stopped short), awaiting (an `up` an `approve:` rule holds), or succeeded: the first
/// that holds, so a failure's exit (1) wins over a denial's (5), and a denial's over
/// waiting's (6).
fn run_status(done: &Executed, counts: &Counts) -> Status {
    if done.interrupted {
        Status::Cancelled
    } else if counts.failed > 0 || counts.cancelled > 0 {
        // A project Pulumi cancelled on its own (not a Ctrl-C) fails the run.
        Status::Failed
    } else if done.results.iter().any(|r| r.status == Status::Denied) {
        // An `up` a rule stopped short: not everything it was asked went out.
        Status::Denied
    } else if done.results.iter().any(|r| r.status == Status::Awaiting) {
        // An `up` stopped at a gate: the rest went out, what is held waits.
        Status::Awaiting
    } else {
        Status::Succeeded
    }
}

/// The summary's last line: the counts, how long, how many processes.
fn headline(
    op: Operation,
    status: Status,
    counts: &Counts,
    elapsed: u64,
    processes: u32,
) -> String {
    format!(
        "strata {} {}: {} succeeded, {} failed, {} skipped, {} cancelled{} in {} · {} process{} started",
        op.as_str(),
        status.as_str(),
        counts.succeeded,
        counts.failed,
        counts.skipped,
        counts.cancelled,
        match (op, counts.denied) {
            (Operation::Preview, 0) => format!(", {} blocked", counts.blocked),
            (Operation::Preview, d) => format!(", {} blocked, {d} denied", counts.blocked),
            (_, 0) if counts.awaiting == 0 => String::new(),
            (_, d) => format!(
                "{}{}",
                if d > 0 {
                    format!(", {d} denied")
                } else {
                    String::new()
                },
                if counts.awaiting > 0 {
                    format!(", {} awaiting", counts.awaiting)
                } else {
                    String::new()
                }
            ),
        },
        human_duration(elapsed),
        processes,
        if processes == 1 { "" } else { "es" }
    )
}

/// The summary as the display asks: with -q the headline and what failed, else every
/// row (none with `--json`).
fn show_summary(
    rows: &[Row],
    headline: &str,
    done: &Executed,
    reporter: &Reporter,
    settings: &Settings,
) {
    if settings.display == crate::settings::Display::Quiet {
        // -q: the final line, and what failed.
        for row in rows.iter().filter(|r| r.status == Status::Failed) {
            eprintln!(
                "✗ {}: {}",
                row.project,
                done.redactor.redact(row.failure.as_deref().unwrap_or(""))
            );
        }
        println!("{headline}");
    } else if !settings.json {
        let text = summary::summary(rows, headline, &|l| done.redactor.redact(l));
        reporter.println(text.trim_end());
    }
}

/// The run as a timeline, next to its journal (`strata report` draws it again), and
/// where it went.
fn write_report(r: &Resolved, done: &Executed, reporter: &Reporter, settings: &Settings) {
    let stack = r.stack();
    let timeline = crate::report::write_after_run(
        &r.ws.root,
        &r.ws.state_dir(stack),
        stack,
        &done.run_id,
        &r.full,
        done.journal_from,
    );
    if settings.display != crate::settings::Display::Quiet && !settings.json {
        reporter.println(&match timeline {
            Ok(path) => format!("report: {}", crate::util::display_path(&path)),
            Err(e) => format!("report: not written ({e})"),
        });
    }
}

/// The run's exit code, or the error that ends it: a stop by a signal, a summary or
/// bundle not written, `--expect-no-changes` with changes.
fn exit_code(
    r: &Resolved,
    done: &Executed,
    status: Status,
    summary_failed: Option<Error>,
) -> Result<i32> {
    match status {
        Status::Cancelled => Err(stopped(r, done)),
        // A downstream whose upstream was never deployed lacks an input: exit 3.
        Status::Failed if done.results.iter().any(|r| r.missing_input) => Ok(exit::CONFIG),
        Status::Failed => Ok(exit::FAILED),
        _ => {
            if let Some(e) = summary_failed {
                return Err(e);
            }
            if let Some(code) = denied_exit(done) {
                return Ok(code);
            }
            if let Some(code) = awaiting_exit(r, done) {
                return Ok(code);
            }
            Ok(preview::changes_exit(r, done))
        }
    }
}

/// Exit 5 when a `policy:` rule denied a project (and nothing failed), saying which.
fn denied_exit(done: &Executed) -> Option<i32> {
    let denied = in_run_order(done, |i| {
        let d = done.results[i].denied.as_ref()?;
        Some(format!("{} ({})", done.plan.nodes[i].path, d.rule))
    });
    if denied.is_empty() {
        return None;
    }
    eprintln!(
        "policy: {} project{} denied by a rule: {}",
        denied.len(),
        plural(denied.len()),
        denied.join(", ")
    );
    Some(exit::DENIED)
}

/// Exit 6 when an `approve:` rule holds a project (and nothing failed or was denied),
/// saying how to approve each.
fn awaiting_exit(r: &Resolved, done: &Executed) -> Option<i32> {
    let held = in_run_order(done, |i| {
        let step = &done.results[i];
        if step.status != Status::Awaiting {
            return None;
        }
        let rule = step.awaiting.as_ref().map(|h| h.rule.as_str());
        let path = &done.plan.nodes[i].path;
        Some(format!(
            "  {path} (held by {}): strata approve {path} {}",
            rule.unwrap_or("an approve rule"),
            r.target_args()
        ))
    });
    if held.is_empty() {
        return None;
    }
    eprintln!(
        "policy: {} project{} await{} an approval (nothing of {} was changed); approve, then run `strata up` again:\n{}",
        held.len(),
        plural(held.len()),
        if held.len() == 1 { "s" } else { "" },
        if held.len() == 1 { "it" } else { "them" },
        held.join("\n")
    );
    Some(exit::AWAITING)
}

/// What `say` says of each step of the run (by its index), in run order, where it says
/// anything.
fn in_run_order<T>(done: &Executed, say: impl FnMut(usize) -> Option<T>) -> Vec<T> {
    done.plan.order.iter().copied().filter_map(say).collect()
}

/// A run a signal stopped: what it stopped (killed, or cancelled gracefully), and the
/// command that continues it.
fn stopped(r: &Resolved, done: &Executed) -> Error {
    let stack = r.stack();
    let cancelled = |kind: NodeKind| -> Vec<String> {
        in_run_order(done, |i| {
            let n = &done.plan.nodes[i];
            (done.results[i].status == Status::Cancelled
                && n.kind == kind
                && done.logs[i].is_some())
            .then(|| n.path.clone())
        })
    };
    let (pulumi, commands) = (cancelled(NodeKind::Pulumi), cancelled(NodeKind::Command));
    let mut hint = String::new();
    if !pulumi.is_empty() {
        if done.killed {
            hint.push_str(&format!(
                " These Pulumi stacks were killed and may need `pulumi cancel --stack {stack}` in their folder: {}.",
                pulumi.join(", ")
            ));
        } else {
            hint.push_str(&format!(
                " Pulumi cancelled {} gracefully and saved its state.",
                pulumi.join(", ")
            ));
        }
    }
    if !commands.is_empty() {
        hint.push_str(&format!(
            " Command projects {}: {}.",
            if done.killed { "killed" } else { "stopped" },
            commands.join(", ")
        ));
    }
    hint.push_str(&format!(" To continue: {}", resume_command(r)));
    let sig = done.signal.unwrap_or(libc::SIGINT);
    let what = crate::error::stopped_by(sig);
    Error::signal(sig, format!("{what}.{hint}"))
}

/// The exact command that resumes this run, with the flags in force (under a plan
/// bundle: the same bundle again).
fn resume_command(r: &Resolved) -> String {
    let mut cmd = String::from("strata");
    let inside = std::env::current_dir().is_ok_and(|d| d.starts_with(&r.ws.root));
    if !inside {
        cmd.push_str(&format!(" -C {}", r.ws.root.display()));
    }
    // A reviewed bundle continues as itself: `--resume` would apply what nobody saw.
    let how = match &r.req.plan {
        Some(dir) => format!("--plan {}", display_path(dir)),
        None => "--resume".into(),
    };
    cmd.push_str(&format!(
        " up {how} --provider {} --stack {}",
        r.profile.name,
        r.stack()
    ));
    if r.req.args.parallel != 4 {
        cmd.push_str(&format!(" -j {}", r.req.args.parallel));
    }
    if r.req.args.keep_going {
        cmd.push_str(" --keep-going");
    }
    cmd
}
