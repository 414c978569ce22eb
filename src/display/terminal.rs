//! The run for people on a terminal or in a CI log: `[project]`-prefixed plain lines, or
//! indicatif progress bars (one spinner per running project above an overall bar).

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::Reporter;
use crate::run::events::{RunEvent, Status};
use crate::util::{human_duration, plural};

fn symbol(s: Status) -> &'static str {
    match s {
        Status::Succeeded => "✓",
        Status::Failed => "✗",
        Status::Skipped => "-",
        Status::Cancelled => "⊘",
        Status::Blocked => "◌",
        Status::Denied => "⛔",
        Status::Awaiting => "⏳",
    }
}

impl Reporter {
    pub(super) fn plain(&self, e: &RunEvent) {
        match e {
            RunEvent::RunStarted { .. } => self.write_line(&header(e)),
            RunEvent::ProjectStarted {
                project, operation, ..
            } => self.write_line(&format!("[{project}] {} started", operation.as_str())),
            RunEvent::ProjectOutput { project, line } => {
                self.write_line(&format!("[{project}] {line}"))
            }
            // Already shown as the project's own output line.
            RunEvent::ProjectProgress { .. } | RunEvent::ProjectRetry { .. } => {}
            RunEvent::HookFinished {
                project,
                hook,
                status,
                message,
                ..
            } => self.write_line(&format!(
                "[{project}] hook {hook}: {}{}",
                status.as_str(),
                message
                    .as_ref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            )),
            RunEvent::ProjectFinished {
                project,
                status,
                duration_ms,
                message,
                ..
            } => self.write_line(&format!(
                "[{project}] {}{}{}",
                status.as_str(),
                if *status == Status::Succeeded || *status == Status::Failed {
                    format!(" in {}", human_duration(*duration_ms))
                } else {
                    String::new()
                },
                message_tail(message)
            )),
            RunEvent::RunFinished { .. } => {}
            RunEvent::Notice { message } => self.write_line(message),
            RunEvent::PoolLimit { .. } => self.write_line(&pool_line(e)),
        }
    }

    pub(super) fn progress(&self, e: &RunEvent) {
        let Ok(mut b) = self.bars.lock() else { return };
        match e {
            RunEvent::RunStarted { projects, .. } => {
                let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
                let overall = multi.add(ProgressBar::new(projects.len() as u64));
                overall.set_style(
                    ProgressStyle::with_template(
                        "{prefix:.bold} [{bar:30}] {pos}/{len} projects · {elapsed}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
                );
                overall.set_prefix("strata");
                let _ = multi.println(header(e));
                b.multi = Some(multi);
                b.overall = Some(overall);
            }
            RunEvent::ProjectStarted { project, .. } => {
                if let Some(m) = &b.multi {
                    let bar = m.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template(
                            "  {spinner} {prefix} {elapsed:>4} {wide_msg}",
                        )
                        .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.set_prefix(project.clone());
                    bar.enable_steady_tick(Duration::from_millis(120));
                    b.running.insert(project.clone(), bar);
                }
            }
            RunEvent::ProjectOutput { project, line } => {
                if let Some(bar) = b.running.get(project) {
                    let short: String = line.chars().take(100).collect();
                    bar.set_message(short);
                }
            }
            RunEvent::ProjectRetry { .. } => {}
            RunEvent::ProjectProgress {
                project,
                done,
                started,
                current,
            } => {
                if let Some(bar) = b.running.get(project) {
                    bar.set_message(format!(
                        "{done}/{started} resources{}",
                        current
                            .as_ref()
                            .map(|c| format!(" · {c}"))
                            .unwrap_or_default()
                    ));
                }
            }
            RunEvent::ProjectFinished {
                project,
                status,
                duration_ms,
                message,
                ..
            } => {
                if let Some(bar) = b.running.remove(project) {
                    bar.finish_and_clear();
                    if let Some(m) = &b.multi {
                        m.remove(&bar);
                    }
                }
                if let Some(o) = &b.overall {
                    o.inc(1);
                }
                let line = format!(
                    "{} {project} {}{}",
                    symbol(*status),
                    if *duration_ms > 0 {
                        human_duration(*duration_ms)
                    } else {
                        status.as_str().to_string()
                    },
                    message_tail(message)
                );
                if let Some(m) = &b.multi {
                    let _ = m.println(line);
                }
            }
            RunEvent::HookFinished {
                project,
                hook,
                status,
                ..
            } => {
                if let Some(m) = &b.multi {
                    let _ = m.println(format!("  {} {project}: hook {hook}", symbol(*status)));
                }
            }
            RunEvent::RunFinished { .. } => {
                if let Some(o) = b.overall.take() {
                    o.finish_and_clear();
                }
                for (_, bar) in std::mem::take(&mut b.running) {
                    bar.finish_and_clear();
                }
                if let Some(m) = b.multi.take() {
                    let _ = m.clear();
                }
            }
            RunEvent::Notice { message } => {
                drop(b);
                self.println(message);
            }
            RunEvent::PoolLimit { .. } => {
                drop(b);
                self.println(&pool_line(e));
            }
        }
    }
}

/// ` · message` after a finished project's line; nothing without a message.
fn message_tail(message: &Option<String>) -> String {
    message
        .as_ref()
        .filter(|m| !m.is_empty())
        .map(|m| format!(" · {m}"))
        .unwrap_or_default()
}

/// The first line of a run.
fn header(e: &RunEvent) -> String {
    match e {
        RunEvent::RunStarted {
            operation,
            provider,
            stack,
            projects,
            parallel,
            ..
        } => format!(
            "strata {} · provider {provider} · stack {stack} · {} step{} · up to {parallel} at once",
            operation.as_str(),
            projects.len(),
            plural(projects.len())
        ),
        _ => String::new(),
    }
}

/// A pool's change of limit, as one line: `pool aws: 4 → 2 at once (…)`.
pub(super) fn pool_line(e: &RunEvent) -> String {
    match e {
        RunEvent::PoolLimit {
            pool,
            limit,
            previous,
            reason,
            ..
        } => format!("pool {pool}: {previous} → {limit} at once ({reason})"),
        _ => String::new(),
    }
}
