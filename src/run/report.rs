//! Reporters: render run events as indicatif progress lines, plain prefixed lines, or
//! JSON Lines; and the end-of-run summary table with the tail of each failure's log.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::events::{RunEvent, Status};
use crate::settings::Display;
use crate::util::human_duration;

/// Renders events. Shared by the scheduler's threads.
pub struct Reporter {
    display: Display,
    out: Mutex<Box<dyn Write + Send>>,
    bars: Mutex<Bars>,
}

struct Bars {
    multi: Option<MultiProgress>,
    overall: Option<ProgressBar>,
    running: BTreeMap<String, ProgressBar>,
}

fn symbol(s: Status) -> &'static str {
    match s {
        Status::Succeeded => "✓",
        Status::Failed => "✗",
        Status::Skipped => "-",
        Status::Cancelled => "⊘",
        Status::Blocked => "◌",
    }
}

impl Reporter {
    pub fn new(display: Display, out: Box<dyn Write + Send>) -> Reporter {
        Reporter {
            display,
            out: Mutex::new(out),
            bars: Mutex::new(Bars {
                multi: None,
                overall: None,
                running: BTreeMap::new(),
            }),
        }
    }

    /// A reporter on stdout.
    pub fn stdout(display: Display) -> Reporter {
        Reporter::new(display, Box::new(std::io::stdout()))
    }

    fn write_line(&self, line: &str) {
        if let Ok(mut out) = self.out.lock() {
            // A closed pipe must not stop the run.
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
    }

    /// Prints a line for people, above the progress bars when they are shown.
    pub fn println(&self, line: &str) {
        if self.display == Display::Json {
            return;
        }
        let bars = self.bars.lock();
        if let Ok(b) = &bars
            && let Some(m) = &b.multi
        {
            let _ = m.println(line);
            return;
        }
        drop(bars);
        self.write_line(line);
    }

    pub fn event(&self, e: &RunEvent) {
        match self.display {
            Display::Json => {
                match e {
                    RunEvent::ProjectProgress { .. } => return,
                    // stdout carries only the documented events; notices are for people.
                    RunEvent::Notice { message } => {
                        eprintln!("{message}");
                        return;
                    }
                    _ => {}
                }
                if let Ok(line) = serde_json::to_string(e) {
                    self.write_line(&line);
                }
            }
            Display::Plain => self.plain(e),
            Display::Progress => self.progress(e),
            Display::Quiet => {
                if let RunEvent::Notice { message } = e {
                    eprintln!("{message}");
                }
            }
        }
    }

    fn plain(&self, e: &RunEvent) {
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
                message
                    .as_ref()
                    .filter(|m| !m.is_empty())
                    .map(|m| format!(" · {m}"))
                    .unwrap_or_default()
            )),
            RunEvent::RunFinished { .. } => {}
            RunEvent::Notice { message } => self.write_line(message),
        }
    }

    fn progress(&self, e: &RunEvent) {
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
                    message
                        .as_ref()
                        .filter(|m| !m.is_empty())
                        .map(|m| format!(" · {m}"))
                        .unwrap_or_default()
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
                if let Some(m) = &b.multi {
                    let _ = m.println(message);
                } else {
                    drop(b);
                    self.write_line(message);
                }
            }
        }
    }
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
            if projects.len() == 1 { "" } else { "s" }
        ),
        _ => String::new(),
    }
}

/// One row of the summary.
pub struct Row {
    pub project: String,
    pub status: Status,
    pub duration_ms: u64,
    pub note: String,
    pub log: Option<std::path::PathBuf>,
    pub failure: Option<String>,
    /// The last lines the step showed; the log's last lines when empty.
    pub tail: Vec<String>,
    /// A preview's changes.
    pub changes: Option<crate::engine::digest::Changes>,
}

/// The end-of-run table, and for each failure the tail of its log and its path.
pub fn summary(rows: &[Row], headline: &str, redact: &dyn Fn(&str) -> String) -> String {
    let w = rows
        .iter()
        .map(|r| r.project.chars().count())
        .max()
        .unwrap_or(7)
        .max(7);
    // A preview's table has the change counts: + create ~ update - delete ± replace.
    let previewed = rows.iter().any(|r| r.changes.is_some());
    let counts = |c: Option<&crate::engine::digest::Changes>| match c {
        Some(c) => format!("{:<15}  ", c.short()),
        None if previewed => format!("{:<15}  ", ""),
        None => String::new(),
    };
    let mut out = format!(
        "\n{:<w$}  {:<9}  {:>8}  {}note\n",
        "project",
        "status",
        "time",
        if previewed {
            format!("{:<15}  ", "+ ~ - ±")
        } else {
            String::new()
        }
    );
    let mut total = crate::engine::digest::Changes::default();
    for r in rows {
        let t = if r.duration_ms > 0 {
            human_duration(r.duration_ms)
        } else {
            "-".into()
        };
        if let Some(c) = &r.changes {
            for op in crate::engine::digest::CHANGING {
                *total.counts.entry(op.to_string()).or_default() += c.count(op);
            }
        }
        out.push_str(&format!(
            "{:<w$}  {:<9}  {:>8}  {}{}\n",
            r.project,
            r.status.as_str(),
            t,
            counts(r.changes.as_ref()),
            r.note
        ));
    }
    if previewed {
        out.push_str(&format!(
            "{:<w$}  {:<9}  {:>8}  {}\n",
            "total",
            "",
            "",
            counts(Some(&total)).trim_end()
        ));
    }
    out.push_str(&format!("\n{headline}\n"));
    for r in rows.iter().filter(|r| r.status == Status::Failed) {
        out.push_str(&format!(
            "\n✗ {}: {}\n",
            r.project,
            r.failure.as_deref().unwrap_or("failed")
        ));
        if let Some(log) = &r.log {
            let tail = if r.tail.is_empty() {
                tail_lines(log, 15)
            } else {
                r.tail.clone()
            };
            if !tail.is_empty() {
                out.push_str("  last lines of its output:\n");
                for l in tail {
                    out.push_str(&format!("  │ {}\n", redact(&l)));
                }
            }
            out.push_str(&format!("  full log: {}\n", crate::util::display_path(log)));
        }
    }
    out
}

/// The last `n` lines of a file.
pub fn tail_lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Operation;

    #[derive(Clone, Default)]
    struct Buf(std::sync::Arc<Mutex<Vec<u8>>>);
    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn render(display: Display, events: &[RunEvent]) -> String {
        let buf = Buf::default();
        let r = Reporter::new(display, Box::new(buf.clone()));
        for e in events {
            r.event(e);
        }
        String::from_utf8(buf.0.lock().unwrap().clone()).unwrap()
    }

    fn sample() -> Vec<RunEvent> {
        vec![
            RunEvent::ProjectStarted {
                project: "a".into(),
                operation: Operation::Up,
                log: None,
            },
            RunEvent::ProjectOutput {
                project: "a".into(),
                line: "hello".into(),
            },
            RunEvent::ProjectProgress {
                project: "a".into(),
                done: 1,
                started: 2,
                current: None,
            },
            RunEvent::ProjectFinished {
                project: "a".into(),
                operation: Operation::Up,
                status: Status::Succeeded,
                duration_ms: 1200,
                message: None,
                log: None,
                exit_code: None,
                upstream: None,
                changes: None,
            },
        ]
    }

    #[test]
    fn json_lines_have_event_tags() {
        let text = render(Display::Json, &sample());
        let events: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let names: Vec<&str> = events
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["project_started", "project_output", "project_finished"]
        );
        assert_eq!(events[2]["status"], "succeeded");
        assert_eq!(events[2]["duration_ms"], 1200);
        assert_eq!(events[2]["operation"], "up");
    }

    #[test]
    fn plain_lines_are_prefixed() {
        let text = render(Display::Plain, &sample());
        assert_eq!(text, "[a] up started\n[a] hello\n[a] succeeded in 1.2s\n");
    }

    #[test]
    fn summary_shows_failure_tail_and_log() {
        let d = tempfile::tempdir().unwrap();
        let log = d.path().join("up.log");
        std::fs::write(&log, "l1\nl2\nboom s3cret\n").unwrap();
        let rows = vec![Row {
            project: "a".into(),
            status: Status::Failed,
            duration_ms: 10,
            note: String::new(),
            log: Some(log),
            failure: Some("pulumi up failed".into()),
            tail: vec![],
            changes: None,
        }];
        let s = summary(&rows, "run failed", &|l: &str| {
            l.replace("s3cret", "[secret]")
        });
        assert!(s.contains("│ boom [secret]"), "{s}");
        assert!(s.contains("full log:"), "{s}");
        assert!(s.contains("pulumi up failed"));
    }
}
