//! What a preview says: its changes (from the digest `preview --json` prints, or from
//! streamed events), their summary line, and the errors of the preview an `up --plan`
//! runs first.

use super::*;

/// What a preview would change: from its digest (shown as one line per changed
/// resource; its error diagnostics kept for the failure message), or from the streamed
/// events when the CLI streams. `None` when what the CLI printed says nothing of its
/// changes (no digest, no change summary): unknown, never "no changes".
pub(super) fn preview_changes(
    seen: &mut Seen,
    report: &mut dyn FnMut(Progress),
) -> Option<Changes> {
    let changes;
    match seen.digest.take() {
        Some(text) => {
            if let Some(d) = digest::parse(&text) {
                changes = d.changes;
                let mut errors = d.errors;
                errors.append(&mut seen.state.errors);
                seen.state.errors = errors;
            } else {
                // Not a digest (an error before the engine ran): its lines, as printed.
                for l in text.lines().filter(|l| !l.trim().is_empty()) {
                    seen.tail.push(l.to_string());
                    report(Progress::Line(l.to_string()));
                }
                return None;
            }
        }
        None => {
            let mut changes = Changes::default();
            if seen.state.changes.is_none() && seen.state.steps.is_empty() {
                return None;
            }
            if let Some(c) = &seen.state.changes {
                for (op, n) in c {
                    if let Some(n) = n.as_u64() {
                        changes.counts.insert(op.clone(), n);
                    }
                }
            }
            for (op, urn) in &seen.state.steps {
                if !urn.contains("::pulumi:pulumi:Stack::") {
                    changes.add_step(op, urn);
                }
            }
            return Some(changes);
        }
    }
    for (op, urn) in &changes.steps {
        report(Progress::Line(format!(
            "{} {}",
            crate::engine::events::op_symbol(op),
            digest::short_urn(urn)
        )));
    }
    Some(changes)
}

/// "2 to create, 1 to replace" (or "no changes").
pub(super) fn preview_summary(c: &Changes) -> String {
    let parts: Vec<String> = digest::CHANGING
        .iter()
        .filter(|op| c.count(op) > 0)
        .map(|op| format!("{} to {op}", c.count(op)))
        .collect();
    if parts.is_empty() {
        "no changes".into()
    } else {
        parts.join(", ")
    }
}

/// `up --plan`: the errors of the preview Pulumi ran first (where a plan that no longer
/// holds is reported), and words for the failure Pulumi leaves without any: a stack
/// output other than the plan's.
pub(super) fn plan_errors(seen: &mut Seen, exit: &Exit) {
    if let Some(d) = seen.digest.take().and_then(|text| digest::parse(&text)) {
        let mut errors = d.errors;
        errors.append(&mut seen.state.errors);
        seen.state.errors = errors;
    }
    if !exit.success() && seen.state.errors.is_empty() {
        seen.state.errors.push(
            "the update does not match its plan, and Pulumi gave no reason: it fails this way when the stack's outputs would differ from the plan's (an upstream output it passes on changed since the preview)".into(),
        );
    }
}
