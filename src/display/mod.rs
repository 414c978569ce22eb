//! The run's display: how a run looks while it runs and when it ends. The [`Reporter`]
//! renders the scheduler's events for the chosen display (JSON Lines here, plain lines and
//! progress bars in `terminal`); [`summary`] is the end-of-run table, [`markdown`] a
//! preview's summary for pull requests.

pub mod markdown;
pub mod summary;
mod terminal;

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar};

use crate::run::events::RunEvent;
use crate::settings::Display;

/// Renders events. Shared by the scheduler's threads.
pub struct Reporter {
    display: Display,
    out: Mutex<Box<dyn Write + Send>>,
    bars: Mutex<Bars>,
}

/// The progress bars of [`Display::Progress`] (drawn by `terminal`).
struct Bars {
    multi: Option<MultiProgress>,
    overall: Option<ProgressBar>,
    running: BTreeMap<String, ProgressBar>,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Operation;
    use crate::run::events::Status;

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
                pool: None,
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
            RunEvent::project_finished("a".into(), Operation::Up, Status::Succeeded, 1200, None),
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
}
