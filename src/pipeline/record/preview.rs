//! What a preview leaves beyond the summary: its Markdown summary (`--summary-file`,
//! `$GITHUB_STEP_SUMMARY`), its plan bundle, and the exit `--expect-no-changes` asks for.

use crate::display::markdown;
use crate::display::summary::Row;
use crate::error::{Error, Result, exit};
use crate::plan::NodeKind;
use crate::run::events::Status;
use crate::util::display_path;

use super::super::execute::Executed;
use super::super::resolve::Resolved;

/// A preview's Markdown summary (`--summary-file`, `$GITHUB_STEP_SUMMARY`) and, for
/// `--save-plan`, its plan bundle; the first error in writing them.
pub(super) fn write(r: &Resolved, done: &Executed, rows: &[Row]) -> Option<Error> {
    let text = preview_markdown(r, done, rows);
    let mut failed = write_preview_summary(r, &text).err();
    if let Some(dir) = &r.req.preview.save_plan
        && !done.interrupted
    {
        let git = crate::bundle::git_state(&r.ws.root);
        match super::super::bundle::write(r, dir, done, &text, git) {
            // The `up` that asked for this preview applies the bundle itself.
            Ok(()) if r.req.preview.for_up => {}
            Ok(()) => {
                eprintln!(
                    "wrote the plan bundle {} (apply exactly it: strata up --plan {})",
                    display_path(dir),
                    display_path(dir)
                );
                if let Some(note) = unplanned_note(done) {
                    eprintln!("{note}");
                }
            }
            Err(e) => failed = failed.or(Some(e)),
        }
    }
    failed
}

/// What a bundle holds no plan of, said as it is written: the projects its preview could
/// not preview (`blocked` behind a project never deployed), which `up --plan` refuses
/// (a pull request's review is green, its apply would not be).
fn unplanned_note(done: &Executed) -> Option<String> {
    let blocked: Vec<&str> = done
        .plan
        .nodes
        .iter()
        .zip(&done.results)
        .filter(|(_, res)| res.status == Status::Blocked)
        .map(|(n, _)| n.path.as_str())
        .collect();
    (!blocked.is_empty()).then(|| {
        format!(
            "note: the bundle holds no plan for {} (blocked: what it needs was never deployed), so `strata up --plan` will refuse it. Deploy what they need first (or run `strata up` on a terminal, which brings them up without a plan, as its table says), then preview again.",
            crate::util::list_some(&blocked, 5)
        )
    })
}

/// `--expect-no-changes`: exit 4 (and say which) when a project would change.
pub(super) fn changes_exit(r: &Resolved, done: &Executed) -> i32 {
    let changing = if r.req.preview.expect_no_changes {
        pending_changes(r, done)
    } else {
        Vec::new()
    };
    if !changing.is_empty() {
        eprintln!(
            "--expect-no-changes: {} project{} would change: {}",
            changing.len(),
            crate::util::plural(changing.len()),
            changing.join(", ")
        );
        return exit::CHANGES;
    }
    exit::OK
}

/// `--expect-no-changes`: the projects of a preview that would change something, each
/// with why. A project changes when its preview counts a change (an import included),
/// when it is blocked behind a project never deployed (it would be created after it),
/// when its preview's output could not be read (its changes are unknown),
/// and, for a command project (whose preview has no counts), when no `up` of it has
/// succeeded since its last destroy (it would be created).
fn pending_changes(r: &Resolved, done: &Executed) -> Vec<String> {
    let deployed = crate::state::journal::Journal::new(&r.ws.state_dir(r.stack())).last_success();
    let mut out = Vec::new();
    for &i in &done.plan.order {
        let (node, res) = (&done.plan.nodes[i], &done.results[i]);
        let why = if res.changes.as_ref().is_some_and(|c| c.any()) {
            None
        } else if res.status == Status::Blocked {
            Some(match &res.upstream {
                Some(u) => format!("blocked behind {u}"),
                None => "blocked".to_string(),
            })
        } else if node.kind == NodeKind::Pulumi
            && res.status == Status::Succeeded
            && res.changes.is_none()
            && !res.projected
        {
            // Its output could not be read: its changes are unknown, not none.
            Some("its preview's output could not be read: changes unknown".to_string())
        } else if node.kind == NodeKind::Command
            && matches!(res.status, Status::Succeeded | Status::Skipped)
            && !res.unchanged
            && !deployed.contains_key(&node.path)
        {
            Some("never deployed: would be created".to_string())
        } else {
            continue;
        };
        out.push(match why {
            Some(w) => format!("{} ({w})", node.path),
            None => node.path.clone(),
        });
    }
    out
}

/// The preview's Markdown summary, redacted.
fn preview_markdown(r: &Resolved, done: &Executed, rows: &[Row]) -> String {
    let lines: Vec<markdown::Line> = rows
        .iter()
        .map(|row| markdown::Line {
            project: &row.project,
            status: row.status,
            note: &row.note,
            changes: row.changes.as_ref(),
            text: &row.tail,
        })
        .collect();
    let mut text = markdown::preview_summary(r.stack(), &r.profile.name, &lines);
    text.push_str(&orphans_markdown(r));
    done.redactor.redact(&text)
}

/// The stack's orphans under the preview's table: a reviewer sees what the change left
/// behind in the cloud.
fn orphans_markdown(r: &Resolved) -> String {
    let found = &r.orphans;
    if found.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n**Orphans**: {} project(s) deployed on `{}` are no longer in the profile; strata never destroys them by itself (`strata destroy --orphans` does).\n\n",
        found.len(),
        r.stack()
    );
    for o in found {
        out.push_str(&format!("- `{}`\n", crate::state::orphans::describe(o)));
    }
    out
}

/// `--summary-file FILE` and `$GITHUB_STEP_SUMMARY` (appended to, like GitHub's own
/// actions do): the preview's Markdown summary.
fn write_preview_summary(r: &Resolved, text: &str) -> Result<()> {
    let file = r.req.preview.summary_file.as_ref();
    let step =
        r.ws.env
            .get("GITHUB_STEP_SUMMARY")
            .cloned()
            .or_else(|| std::env::var("GITHUB_STEP_SUMMARY").ok())
            .filter(|s| !s.is_empty());
    if let Some(path) = file {
        crate::files::write_atomic(path, text.as_bytes(), None)?;
    }
    if let Some(path) = step {
        use std::io::Write;
        let path = std::path::PathBuf::from(path);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut f| f.write_all(format!("{text}\n").as_bytes()))
            .map_err(|e| Error::io("append the summary to $GITHUB_STEP_SUMMARY", &path, e))?;
    }
    Ok(())
}
