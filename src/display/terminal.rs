//! The run for people on a terminal or in a CI log: `[project]`-prefixed plain lines, or
//! indicatif progress bars (one spinner per running project above an overall bar).

use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Bars, Reporter};
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
            RunEvent::RunStarted { projects, .. } => b.start(projects.len(), header(e)),
            RunEvent::ProjectStarted { project, .. } => b.add_spinner(project),
            RunEvent::ProjectOutput { project, line } => {
                b.set_message(project, line.chars().take(100).collect())
            }
            RunEvent::ProjectRetry { .. } => {}
            RunEvent::ProjectProgress {
                project,
                done,
                started,
                current,
            } => b.set_message(
                project,
                format!(
                    "{done}/{started} resources{}",
                    current
                        .as_ref()
                        .map(|c| format!(" · {c}"))
                        .unwrap_or_default()
                ),
            ),
            RunEvent::ProjectFinished {
                project,
                status,
                duration_ms,
                message,
                ..
            } => {
                b.finish_project(project);
                b.println(format!(
                    "{} {project} {}{}",
                    symbol(*status),
                    if *duration_ms > 0 {
                        human_duration(*duration_ms)
                    } else {
                        status.as_str().to_string()
                    },
                    message_tail(message)
                ));
            }
            RunEvent::HookFinished {
                project,
                hook,
                status,
                ..
            } => b.println(format!("  {} {project}: hook {hook}", symbol(*status))),
            RunEvent::RunFinished { .. } => b.clear(),
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

impl Bars {
    /// The overall bar for `projects` projects, under the run's `header`.
    fn start(&mut self, projects: usize, header: String) {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        let overall = multi.add(ProgressBar::new(projects as u64));
        overall.set_style(
            ProgressStyle::with_template(
                "{prefix:.bold} [{bar:30}] {pos}/{len} projects · {elapsed}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        overall.set_prefix("strata");
        let _ = multi.println(header);
        self.multi = Some(multi);
        self.overall = Some(overall);
    }

    /// A spinner for `project`, now running.
    fn add_spinner(&mut self, project: &str) {
        let Some(m) = &self.multi else { return };
        let bar = m.add(ProgressBar::new_spinner());
        bar.set_style(
            ProgressStyle::with_template("  {spinner} {prefix} {elapsed:>4} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_prefix(project.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        self.running.insert(project.to_string(), bar);
    }

    /// The message beside a running project's spinner.
    fn set_message(&self, project: &str, message: String) {
        if let Some(bar) = self.running.get(project) {
            bar.set_message(message);
        }
    }

    /// A finished project: its spinner gone, the overall bar one further.
    fn finish_project(&mut self, project: &str) {
        if let Some(bar) = self.running.remove(project) {
            bar.finish_and_clear();
            if let Some(m) = &self.multi {
                m.remove(&bar);
            }
        }
        if let Some(o) = &self.overall {
            o.inc(1);
        }
    }

    /// A line above the bars.
    fn println(&self, line: String) {
        if let Some(m) = &self.multi {
            let _ = m.println(line);
        }
    }

    /// The run is over: every bar cleared.
    fn clear(&mut self) {
        if let Some(o) = self.overall.take() {
            o.finish_and_clear();
        }
        for (_, bar) in std::mem::take(&mut self.running) {
            bar.finish_and_clear();
        }
        if let Some(m) = self.multi.take() {
            let _ = m.clear();
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
