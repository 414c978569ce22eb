//! `strata status`: the last operation of every project of the stack (or of those
//! `--filter` selects), its result, when, how long, and whether its inputs changed since
//! (by fingerprint).

use crate::error::Result;
use crate::plan::select::Selector;
use crate::run::journal::{self, Journal, Record};
use crate::settings::Settings;
use crate::util::human_duration;
use crate::workspace::Target;

pub fn run(target: &Target, settings: &Settings, sel: &Selector) -> Result<i32> {
    let loaded = super::load(target, true)?;
    let Some(stack) = loaded.stack.clone() else {
        return Err(crate::workspace::no_stack_error(&loaded.ws));
    };
    let (selected, empty_because) = super::selected(&loaded, sel)?;
    if let Some(why) = empty_because {
        eprintln!("{why}");
    }
    let state_dir = loaded.ws.state_dir(&stack);
    let records = Journal::new(&state_dir).read();
    let last = journal::last_by_project(&records, &[]);
    let last_up = journal::last_success(&records);
    let current = super::current_fingerprints(&loaded, &stack);
    let mut rows = Vec::new();
    for &i in &selected.order {
        let path = selected.nodes[i].path.clone();
        let changed = match (last_up.get(&path), &current) {
            (
                Some(Record::Project {
                    fingerprint: Some(f),
                    status,
                    operation,
                    ..
                }),
                Some(cur),
            ) if operation == "up" && status == "succeeded" => cur.get(&path).map(|c| c != f),
            _ => None,
        };
        let row = match last.get(&path) {
            Some(Record::Project {
                operation,
                status,
                ended_at,
                duration_ms,
                log,
                ..
            }) => serde_json::json!({
                "path": path,
                "operation": operation,
                "status": status,
                "at": ended_at,
                "duration_ms": duration_ms,
                "inputs_changed": changed,
                "log": log,
            }),
            _ => serde_json::json!({
                "path": path,
                "operation": null,
                "status": "never run",
                "at": null,
                "duration_ms": null,
                "inputs_changed": null,
                "log": null,
            }),
        };
        rows.push(row);
    }
    if settings.json {
        let doc = serde_json::json!({
            "provider": loaded.profile.name,
            "stack": stack,
            "projects": rows,
        });
        super::print(&format!("{doc}\n"))?;
        return Ok(0);
    }
    let w = rows
        .iter()
        .filter_map(|r| r["path"].as_str().map(|s| s.chars().count()))
        .max()
        .unwrap_or(7)
        .max(7);
    let mut out = format!(
        "stack {stack} · provider {}\n\n{:<w$}  {:<8} {:<10} {:<24} {:>7}  inputs\n",
        loaded.profile.name, "project", "last", "result", "when", "took"
    );
    for r in &rows {
        let s = |k: &str| r[k].as_str().unwrap_or("-").to_string();
        let took = r["duration_ms"]
            .as_u64()
            .map(human_duration)
            .unwrap_or_else(|| "-".into());
        let inputs = match r["inputs_changed"].as_bool() {
            Some(true) => "changed since last up",
            Some(false) => "unchanged",
            None => "-",
        };
        out.push_str(&format!(
            "{:<w$}  {:<8} {:<10} {:<24} {:>7}  {inputs}\n",
            s("path"),
            s("operation"),
            s("status"),
            s("at"),
            took
        ));
    }
    super::print(&out)?;
    Ok(0)
}
