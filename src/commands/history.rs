//! `strata history`: the stack's last runs, newest first: when, who and where, the
//! command and selection, the result and how many projects ended how. On a shared
//! backend, what every machine recorded there; and this checkout's journal.

use crate::error::Result;
use crate::settings::Settings;
use crate::state::journal::Journal;
use crate::state::records::{self, RunRecord};
use crate::workspace::Target;

/// The order results are counted in.
const RESULTS: [&str; 5] = ["succeeded", "failed", "skipped", "cancelled", "blocked"];

pub fn run(target: &Target, settings: &Settings, last: usize) -> Result<i32> {
    let ws = super::open_workspace(target)?;
    let Some(stack) = ws.stack_to_read(target.stack.as_deref())? else {
        return Err(crate::workspace::no_stack_error(&ws));
    };
    let shared = super::shared::read(&ws, &stack, last)?;
    let state_dir = ws.state_dir(&stack);
    let held = crate::state::lock::StackLock::is_held(&state_dir);
    let local = records::from_journal(&Journal::new(&state_dir).read_all(), held);
    let (backend, runs, lease) = match shared {
        Some(s) => {
            let line = s.lease_line();
            let json = s.lease_json();
            let mut runs = records::with_local(s.runs, local, last);
            running_elsewhere(&mut runs, &s.holders);
            runs.truncate(last);
            (Some(s.backend), runs, Some((line, json)))
        }
        None => (None, records::with_local(Vec::new(), local, last), None),
    };
    if settings.json {
        let runs: Vec<serde_json::Value> = runs.iter().map(summary_json).collect();
        let doc = serde_json::json!({
            "stack": stack,
            "backend": backend,
            "lease": lease.map(|(_, j)| j),
            "runs": runs,
        });
        super::print(&format!("{doc}\n"))?;
        return Ok(0);
    }
    let mut out = format!("stack {stack}");
    if let (Some(b), Some((line, _))) = (&backend, &lease) {
        out.push_str(&format!(" · backend {b} · {line}"));
    }
    out.push('\n');
    out.push_str(&table(&runs));
    super::print(&out)?;
    Ok(0)
}

/// The runs holding the stack's lease (on any machine) that no record shows yet: a run's
/// record is written as it ends, so these are running. Put first (newest), or marked
/// `running` where this checkout's journal already lists them.
fn running_elsewhere(runs: &mut Vec<RunRecord>, holders: &[crate::state::lock::lease::Holder]) {
    for h in holders.iter().rev() {
        match runs.iter_mut().find(|r| r.run_id == h.run_id) {
            Some(r) => r.status = "running".into(),
            None => runs.insert(
                0,
                RunRecord {
                    run_id: h.run_id.clone(),
                    stack: h.stack.clone(),
                    user: h.user.clone(),
                    host: h.host.clone(),
                    command: h.command.clone(),
                    selection: h.projects.clone().unwrap_or_default(),
                    started_at: h.since.clone(),
                    status: "running".into(),
                    ..Default::default()
                },
            ),
        }
    }
}

/// A run as `history --output json` shows it: the record without its projects.
fn summary_json(r: &RunRecord) -> serde_json::Value {
    let mut v = serde_json::to_value(r).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.remove("projects");
    }
    v
}

/// `3 succeeded, 1 failed`: the counts that are not zero, in the order of [`RESULTS`].
fn counts(r: &RunRecord) -> String {
    let mut parts: Vec<String> = RESULTS
        .iter()
        .filter_map(|k| {
            r.counts
                .get(*k)
                .filter(|n| **n > 0)
                .map(|n| format!("{n} {k}"))
        })
        .collect();
    parts.extend(
        r.counts
            .iter()
            .filter(|(k, n)| !RESULTS.contains(&k.as_str()) && **n > 0)
            .map(|(k, n)| format!("{n} {k}")),
    );
    if parts.is_empty() {
        "no project".into()
    } else {
        parts.join(", ")
    }
}

/// The runs as a table, newest first; who is `-` for a run only this checkout's
/// journal knows.
fn table(runs: &[RunRecord]) -> String {
    if runs.is_empty() {
        return "\nno run recorded yet\n".into();
    }
    let rows: Vec<[String; 5]> = runs
        .iter()
        .map(|r| {
            let who = if r.user.is_empty() {
                "-".into()
            } else {
                r.who()
            };
            let mut command = r.command.clone();
            for s in &r.selection {
                command.push(' ');
                command.push_str(s);
            }
            [
                r.started_at.clone(),
                who,
                command,
                r.status.clone(),
                counts(r),
            ]
        })
        .collect();
    let head = ["when", "who", "command", "result", "projects"].map(String::from);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&head).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::from("\n");
    for row in std::iter::once(&head).chain(&rows) {
        for (w, cell) in widths.iter().zip(row) {
            out.push_str(&format!("{cell:<w$}  "));
        }
        out.push_str(&row[4]);
        out.push('\n');
    }
    out
}
