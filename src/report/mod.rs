//! `strata report`: one run of the journal as a timeline — its projects by wave, when each
//! ran and how it ended, the critical path, the totals and the tail of each failure's
//! log — drawn as a self-contained HTML page, a Mermaid gantt or one JSON document.
//!
//! The room: [`journal`] reads the journal, [`model`] is the run to draw, [`build`] makes
//! it from the journal (`tail` reads a failure's log, `pools` the changes of the pools'
//! limits), and [`html`], [`mermaid`] and [`json`] render it.

pub mod build;
pub mod html;
pub mod journal;
pub mod json;
pub mod mermaid;
pub mod model;
mod pools;
pub mod reason;
mod tail;

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::plan::Plan;
use build::build;
use journal::Journal;
use model::Report;

/// What a report is drawn as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// One self-contained HTML page.
    Html,
    /// A Mermaid gantt chart.
    Mermaid,
    /// The run's journal records and the timeline, as one JSON document.
    Json,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Html => "html",
            Format::Mermaid => "mermaid",
            Format::Json => "json",
        }
    }
}

/// The report in `format`.
pub fn render(r: &Report, format: Format) -> String {
    match format {
        Format::Html => html::render(r),
        Format::Mermaid => mermaid::render(r),
        Format::Json => json::render(r),
    }
}

/// Where `strata report` writes the HTML report of a stack by default.
pub fn default_path(state_dir: &Path) -> PathBuf {
    state_dir.join("report.html")
}

/// Writes a report to `path` (mode 0600: it quotes logs), atomically; a missing folder
/// is created (0700 inside `.strata/`).
pub fn write(path: &Path, text: &str) -> Result<()> {
    write_with(path, &mut |out| out.write_all(text.as_bytes()))
}

/// [`write`] of what `fill` writes, streamed to the file.
fn write_with(
    path: &Path,
    fill: &mut dyn FnMut(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if dir.components().any(|c| c.as_os_str() == ".strata") {
            crate::files::private_dir(dir)?;
        } else {
            std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
        }
    }
    crate::files::write_atomic_with(path, Some(0o600), fill)
}

/// After a run: writes the HTML report of run `run_id` to the stack's default path and
/// returns that path.
pub fn write_after_run(
    root: &Path,
    state_dir: &Path,
    stack: &str,
    run_id: &str,
    plan: &Plan,
    journal_from: u64,
) -> Result<PathBuf> {
    let journal = Journal::read_from_for_drawing(state_dir, stack, journal_from)?;
    let id = journal.select(Some(run_id))?;
    let report = build(&journal, &id, Ok(plan), root);
    // The records are drawn: the page needs only the report.
    drop(journal);
    let path = default_path(state_dir);
    // Streamed: the page of thousands of projects is megabytes.
    write_with(&path, &mut |out| html::write(&report, out))?;
    Ok(path)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::model::epoch_ms;
    use super::*;
    use proptest::strategy::Strategy;
    use serde_json::Value;

    const T0: &str = "2026-03-01T12:00:00.000Z";

    pub(crate) fn at(ms: u64) -> String {
        crate::util::rfc3339(epoch_ms(T0).unwrap() + ms)
    }

    pub(crate) fn run_line(id: &str, op: &str, projects: &[&str]) -> String {
        serde_json::json!({
            "record": "run", "run_id": id, "operation": op, "provider": "t", "stack": "dev",
            "projects": projects, "started_at": at(0), "command": format!("strata {op}"),
        })
        .to_string()
    }

    pub(crate) fn project_line(id: &str, path: &str, status: &str, start: u64, dur: u64) -> String {
        serde_json::json!({
            "record": "project", "run_id": id, "project": path, "operation": "up",
            "status": status, "started_at": at(start), "ended_at": at(start + dur),
            "duration_ms": dur,
        })
        .to_string()
    }

    pub(crate) fn journal_of(lines: &[String]) -> Journal {
        Journal::parse(
            PathBuf::from("/ws/.strata/dev/journal.jsonl"),
            "dev",
            lines.join("\n").as_bytes(),
        )
        .unwrap()
    }

    /// alpha (100ms) and bravo (300ms) at once; charlie (200ms) needs both; delta failed.
    pub(crate) fn sample() -> Report {
        let j = journal_of(&[
            run_line("r1", "up", &["alpha", "bravo", "charlie", "delta"]),
            project_line("r1", "alpha", "succeeded", 10, 100),
            project_line("r1", "bravo", "succeeded", 10, 300),
            project_line("r1", "charlie", "succeeded", 320, 200),
            project_line("r1", "delta", "skipped", 520, 0),
        ]);
        let plan = crate::plan::testing::plan_of(
            "description: d\ninfra_type: T\ninfrastructure:\n  - path: alpha\n  - path: bravo\n    needs: []\n  - path: charlie\n    needs: [alpha, bravo]\n  - path: delta\n",
            &[],
        )
        .unwrap();
        build(&j, "r1", Ok(&plan), Path::new("/nonexistent"))
    }

    #[test]
    fn absurd_times_and_durations_do_not_overflow() {
        let mut huge =
            serde_json::from_str::<Value>(&project_line("r1", "a", "succeeded", 0, 1)).unwrap();
        huge["duration_ms"] = serde_json::json!(u64::MAX);
        huge["started_at"] = serde_json::json!("9999-12-31T23:59:59.999Z");
        let mut bad =
            serde_json::from_str::<Value>(&project_line("r1", "b", "failed", 0, 1)).unwrap();
        bad["started_at"] = serde_json::json!("yesterday");
        bad["ended_at"] = serde_json::json!("");
        let mut long =
            serde_json::from_str::<Value>(&project_line("r1", "c", "succeeded", 0, 1)).unwrap();
        long["duration_ms"] = serde_json::json!(u64::MAX / 2);
        let j = journal_of(&[
            run_line("r1", "up", &["a", "b", "c"]),
            huge.to_string(),
            bad.to_string(),
            long.to_string(),
        ]);
        let r = build(&j, "r1", Err("none".into()), Path::new("/nonexistent"));
        assert_eq!(r.totals.sum_ms, u64::MAX);
        for f in [Format::Html, Format::Mermaid, Format::Json] {
            assert!(!render(&r, f).is_empty());
        }
    }

    #[test]
    fn a_journal_read_for_drawing_draws_the_same_html() {
        let d = tempfile::tempdir().unwrap();
        let lines = [
            run_line("r1", "up", &["a", "b"]),
            project_line("r1", "a", "succeeded", 0, 5),
            "{\"record\":\"proj".to_string(),
            project_line("r1", "b", "failed", 5, 5),
        ];
        std::fs::write(d.path().join("journal.jsonl"), lines.join("\n")).unwrap();
        let draw = |j: &Journal| {
            let r = build(j, "r1", Err("no plan".into()), d.path());
            html::render(&r)
        };
        let whole = Journal::read_from(d.path(), "dev", 0).unwrap();
        let drawing = Journal::read_from_for_drawing(d.path(), "dev", 0).unwrap();
        assert_eq!(drawing.unreadable, 1);
        assert!(drawing.lines.iter().all(|(t, _)| t.is_empty()));
        assert_eq!(draw(&whole), draw(&drawing));
    }

    proptest::proptest! {
        /// Whatever the journal holds, reading and drawing it never panics.
        #[test]
        fn any_journal_draws_without_panicking(
            lines in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(run_line("r", "up", &["a", "b"])),
                    proptest::strategy::Just(run_line("r", "destroy", &["b"])),
                    (0u64..5000, 0u64..5000, proptest::prop_oneof![
                        proptest::strategy::Just("succeeded"),
                        proptest::strategy::Just("failed"),
                        proptest::strategy::Just("cancelled"),
                        proptest::strategy::Just("blocked"),
                        proptest::strategy::Just("???"),
                    ], proptest::prop_oneof![
                        proptest::strategy::Just("a"),
                        proptest::strategy::Just("b"),
                        proptest::strategy::Just("c<&>\"'"),
                    ]).prop_map(|(s, d, st, p)| project_line("r", p, st, s, d)),
                    ".{0,40}",
                ],
                0..12,
            )
        ) {
            if let Ok(j) = Journal::parse(PathBuf::from("j"), "dev", lines.join("\n").as_bytes()) {
                let id = j.select(None).unwrap();
                let r = build(&j, &id, Err("no plan".into()), Path::new("/nonexistent"));
                for f in [Format::Html, Format::Mermaid, Format::Json] {
                    let _ = render(&r, f);
                }
            }
        }
    }
}
