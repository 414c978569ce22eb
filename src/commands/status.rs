//! `strata status`: the last operation of every project of the stack (or of those
//! `--filter` selects), its result, when, how long, who ran it, and whether its inputs
//! changed since (by fingerprint); the orphans (projects deployed on the stack that the
//! profile no longer has). On a shared backend, what every machine recorded there
//! counts too (the newest result wins), and the lease's holder is shown. Each Pulumi
//! project's own backend is named (Pulumi's precedence: see `workspace::backend`).

use crate::error::Result;
use crate::plan::select::Selector;
use std::collections::BTreeMap;

use super::shared::Shared;
use crate::settings::Settings;
use crate::state::journal::{self, Journal, Record};
use crate::state::{orphans, records};
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
    let shared = read_shared(&loaded.ws, &stack);
    let runs = shared
        .as_ref()
        .map(|s| s.runs.as_slice())
        .unwrap_or_default();
    let records = records::merged(Journal::new(&loaded.ws.state_dir(&stack)).read(), runs);
    let orphans = crate::pipeline::orphans::find(
        &loaded.ws,
        &loaded.profile,
        &loaded.plan,
        &stack,
        Some(&records),
    );
    let (backend_of, backend_why) = loaded.shown_backends();
    let known = Known {
        by: runs.iter().map(|r| (r.run_id.as_str(), r.who())).collect(),
        last: journal::last_by_project(&records, &[]),
        last_up: journal::last_success(&records),
        current: super::current_fingerprints(&loaded, &stack),
        backend_of,
    };
    let rows: Vec<_> = selected
        .order
        .iter()
        .map(|&i| known.row(&selected.nodes[i].path))
        .collect();
    if settings.json {
        let doc = serde_json::json!({
            "provider": loaded.profile.name,
            "stack": stack,
            "backend": shared.as_ref().map(|s| &s.backend),
            "lease": shared.as_ref().map(Shared::lease_json),
            "projects": rows,
            "orphans": orphans.iter().map(orphans::to_json).collect::<Vec<_>>(),
        });
        super::print(&format!("{doc}\n"))?;
        return Ok(0);
    }
    let mut out = table(&loaded.profile.name, &stack, shared.as_ref(), &rows);
    out.insert_str(
        out.find('\n').map_or(0, |i| i + 1),
        &backend_lines(&backend_why, &rows),
    );
    out.push_str(&orphan_lines(&orphans));
    super::print(&out)?;
    Ok(0)
}

/// What the shared backend recorded of the stack; `None` (with a warning) when it
/// cannot be read: the checkout's own journal is still shown.
fn read_shared(ws: &crate::workspace::Workspace, stack: &str) -> Option<Shared> {
    match super::shared::read(ws, stack, records::LIMIT) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "warning: the shared backend could not be read, so this shows only this checkout's journal: {}",
                e.message
            );
            None
        }
    }
}

/// What the records say of the projects, to make their rows of.
struct Known<'r> {
    /// Who ran each run the backend knows of.
    by: BTreeMap<&'r str, String>,
    /// Each project's last operation.
    last: BTreeMap<String, Record>,
    /// Each project's last successful `up` (unless a destroy came after it).
    last_up: BTreeMap<String, Record>,
    /// Each project's fingerprint now (`None` without a stack config).
    current: Option<BTreeMap<String, String>>,
    /// Each Pulumi project's backend, as shown.
    backend_of: BTreeMap<String, String>,
}

impl Known<'_> {
    /// Whether `path`'s inputs changed since its last successful `up` (unknown: `None`).
    fn inputs_changed(&self, path: &str) -> Option<bool> {
        match (self.last_up.get(path), &self.current) {
            (
                Some(Record::Project {
                    fingerprint: Some(f),
                    status,
                    operation,
                    ..
                }),
                Some(cur),
            ) if operation == "up" && status == "succeeded" => cur.get(path).map(|c| c != f),
            _ => None,
        }
    }

    /// What is deployed: the last successful `up` (unless a destroy came after it),
    /// apart from the last operation (a preview after an `up` hides nothing).
    fn deployed(&self, path: &str) -> serde_json::Value {
        match self.last_up.get(path) {
            Some(Record::Project {
                run_id, ended_at, ..
            }) => serde_json::json!({
                "at": ended_at,
                "run_id": run_id,
                "by": self.by.get(run_id.as_str()),
            }),
            _ => serde_json::Value::Null,
        }
    }

    /// The row of project `path`: its last operation, or "never run".
    fn row(&self, path: &str) -> serde_json::Value {
        match self.last.get(path) {
            Some(Record::Project {
                run_id,
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
                "inputs_changed": self.inputs_changed(path),
                "log": log,
                "run_id": run_id,
                "by": self.by.get(run_id.as_str()),
                "backend": self.backend_of.get(path),
                "deployed": self.deployed(path),
            }),
            _ => serde_json::json!({
                "path": path,
                "operation": null,
                "status": "never run",
                "at": null,
                "duration_ms": null,
                "inputs_changed": null,
                "log": null,
                "run_id": null,
                "by": null,
                "backend": self.backend_of.get(path),
                "deployed": self.deployed(path),
            }),
        }
    }
}

/// The orphans, after the table: how many, how to destroy them, one line each.
fn orphan_lines(orphans: &[orphans::Orphan]) -> String {
    if orphans.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\norphans: {} project(s) deployed on this stack are no longer in the profile (`strata destroy --orphans` destroys them)\n",
        orphans.len()
    );
    for o in orphans {
        out.push_str(&format!("  {}\n", orphans::describe(o)));
    }
    out
}

/// Where the projects' stacks are: `projects' backend: URL (why)`, or with several, one
/// line per backend naming its projects.
fn backend_lines(why: &BTreeMap<String, String>, rows: &[serde_json::Value]) -> String {
    let on = |url: &str| -> Vec<&str> {
        rows.iter()
            .filter(|r| r["backend"].as_str() == Some(url))
            .filter_map(|r| r["path"].as_str())
            .collect()
    };
    match why.len() {
        0 => String::new(),
        1 => why
            .iter()
            .map(|(url, why)| format!("projects' backend: {url} ({why})\n"))
            .collect(),
        _ => why
            .iter()
            .map(|(url, why)| {
                format!(
                    "backend {url} ({why}): {}\n",
                    crate::util::list_some(&on(url), 6)
                )
            })
            .collect(),
    }
}

/// The rows as a table, under the stack, the provider and (on a shared backend) the lease.
fn table(
    provider: &str,
    stack: &str,
    shared: Option<&Shared>,
    rows: &[serde_json::Value],
) -> String {
    let w = rows
        .iter()
        .filter_map(|r| r["path"].as_str().map(|s| s.chars().count()))
        .max()
        .unwrap_or(7)
        .max(7);
    let mut out = format!("stack {stack} · provider {provider}\n");
    if let Some(s) = shared {
        out.push_str(&format!("backend {} · {}\n", s.backend, s.lease_line()));
    }
    out.push_str(&format!(
        "\n{:<w$}  {:<8} {:<10} {:<24} {:>7}  {:<20} {:<24} inputs\n",
        "project", "last", "result", "when", "took", "by", "deployed"
    ));
    for r in rows {
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
        // A run of this checkout the backend does not know of: here.
        let by = match (r["by"].as_str(), r["operation"].is_null()) {
            (Some(who), _) => who,
            (None, true) => "-",
            (None, false) => "here",
        };
        let deployed = r["deployed"]["at"].as_str().unwrap_or("-");
        out.push_str(&format!(
            "{:<w$}  {:<8} {:<10} {:<24} {:>7}  {by:<20} {deployed:<24} {inputs}\n",
            s("path"),
            s("operation"),
            s("status"),
            s("at"),
            took
        ));
    }
    out
}
