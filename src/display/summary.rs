//! The end-of-run summary: a table of every project with its status, time and note (and a
//! preview's change counts), then for each failure the tail of its log and its path.

use crate::run::events::Status;
use crate::util::human_duration;

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
