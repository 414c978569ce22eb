//! Gates fail closed (issue 43, item 7): a `pulumi` that prints more than the one JSON
//! document of `preview --json` (a wrapper script that says a line first, as teams use
//! for credentials) still has its changes read and judged; a preview whose changes
//! cannot be read at all is refused for a project rules hold, never taken for "no
//! changes".

use serde_json::Value;

use crate::gates::{KEEP_ALPHA, alpha_state, drop_second, finished, gated};
use crate::run::{BODY, name, ok, run};
use crate::support::*;

const REVIEW_ALPHA: &str =
    "  - name: prod-review\n    select: alpha\n    approve: [update, delete, replace]\n";

/// Puts a shell script in place of the fake pulumi on PATH: `body` runs with `$REAL`
/// naming the fake.
fn wrap_pulumi(ws: &Ws, body: &str) {
    let path = ws.bin.join("pulumi");
    std::fs::remove_file(&path).unwrap();
    let script = format!("#!/bin/sh\nREAL='{}'\n{body}\n", fake_pulumi().display());
    std::fs::write(&path, script).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A wrapper that says a line before and after whatever the CLI prints.
const CHATTY: &str =
    "echo 'wrapper: credentials loaded'\n\"$REAL\" \"$@\"\nrc=$?\necho 'wrapper: done'\nexit $rc";

/// A wrapper that loses a preview's stdout (the plan file it saves stays).
const MUTE_PREVIEW: &str =
    "case \"$1\" in preview) \"$REAL\" \"$@\" >/dev/null; exit $?;; esac\nexec \"$REAL\" \"$@\"";

/// alpha's `project_finished` event in `r`, and its message (empty without one).
fn alpha_finished(r: &Run) -> (Value, String) {
    let alpha = finished(&r.events(), "alpha").clone();
    let msg = alpha["message"].as_str().unwrap_or_default().to_string();
    (alpha, msg)
}

/// alpha up under `keep-data`, its second resource then dropped from its program, and
/// pulumi behind `wrapper`: the next `up` is denied by that rule (exit 5) and deletes
/// nothing.
fn up_denied_behind(wrapper: &str) -> Ws {
    let ws = gated(KEEP_ALPHA);
    ok(&ws, "up", &[]);
    drop_second(&ws);
    wrap_pulumi(&ws, wrapper);
    let r = run(&ws, "up", &["--output", "json"]);
    assert_eq!(r.code, 5, "{r:?}");
    let alpha = finished(&r.events(), "alpha").clone();
    assert_eq!(alpha["status"], "denied", "{alpha}");
    assert_eq!(alpha["denied"]["rule"], "keep-data", "{alpha}");
    assert!(
        alpha_state(&ws).contains("second"),
        "the delete was applied"
    );
    ws
}

#[test]
fn a_chatty_wrapper_does_not_let_a_denied_delete_through() {
    let ws = up_denied_behind(CHATTY);
    let p = run(&ws, "preview", &["--output", "json"]);
    assert_eq!(p.code, 5, "{p:?}");
    assert_eq!(
        finished(&p.events(), "alpha")["denied"]["rule"],
        "keep-data"
    );
}

#[test]
fn a_chatty_wrapper_does_not_skip_an_approval_hold() {
    let ws = gated(REVIEW_ALPHA);
    ok(&ws, "up", &[]);
    ws.pulumi_project("alpha", &name("alpha"), &BODY.replace("x: 1", "x: 2"));
    wrap_pulumi(&ws, CHATTY);
    let r = run(&ws, "up", &["--output", "json"]);
    assert_eq!(r.code, 6, "{r:?}");
    assert_eq!(finished(&r.events(), "alpha")["status"], "awaiting");
}

#[test]
fn an_unreadable_preview_is_judged_by_its_saved_plan_or_refused() {
    // up: the plan file it saved is judged.
    let ws = up_denied_behind(MUTE_PREVIEW);
    // preview: no plan to read, so the project is refused, never "no changes".
    let p = run(&ws, "preview", &["--output", "json"]);
    assert_eq!(p.code, 5, "{p:?}");
    let (alpha, msg) = alpha_finished(&p);
    assert!(
        msg.contains("alpha") && msg.contains("could not be read"),
        "{alpha}"
    );
    // bravo, which no rule holds, is previewed as usual.
    assert_eq!(finished(&p.events(), "bravo")["status"], "succeeded");
}

/// `deny: [delete]` holds `destroy` too (issue 43, item 11): a destroy that would delete
/// a project a rule keeps is refused before anything is destroyed, naming the rule and
/// the project (exit 5); `--override-deny` destroys it.
#[test]
fn a_destroy_is_refused_where_a_rule_denies_deletes_unless_overridden() {
    let ws = gated(KEEP_ALPHA);
    ok(&ws, "up", &[]);
    let r = run(&ws, "destroy", &["--yes"]);
    assert_eq!(r.code, 5, "{r:?}");
    for said in ["keep-data", "alpha", "--override-deny"] {
        assert!(r.stderr.contains(said), "{said}: {r:?}");
    }
    assert!(alpha_state(&ws).contains("second"), "alpha was destroyed");
    let bravo = ws.read(&format!(
        ".strata/backend/.pulumi/stacks/{}/dev.json",
        name("bravo")
    ));
    assert!(
        bravo.contains("fake:index:Thing"),
        "bravo was destroyed: {bravo}"
    );
    ok(&ws, "destroy", &["--yes", "--override-deny"]);
    let after = ws.read_opt(&format!(
        ".strata/backend/.pulumi/stacks/{}/dev.json",
        name("alpha")
    ));
    assert!(!after.contains("fake:index:Thing"), "{after}");
}

/// With a streamed preview, the preview an `up` runs for its rules says what would
/// happen, not a past-tense "1 deleted" before "nothing was changed" (issue 43, item 12).
#[test]
fn a_streamed_policy_preview_says_what_would_happen() {
    let mut ws = gated(KEEP_ALPHA);
    ok(&ws, "up", &[]);
    drop_second(&ws);
    ws.set_env("PULUMI_ENABLE_STREAMING_JSON_PREVIEW", "true");
    let r = run(&ws, "up", &["--verbose"]);
    assert_eq!(r.code, 5, "{r:?}");
    let logs = ws.texts_under(".strata/dev/logs");
    let said = format!("{}{logs}", r.all());
    assert!(said.contains("would delete 1"), "{said}");
    assert!(!said.contains("1 deleted"), "{said}");
    assert!(said.contains("nothing was changed"), "{said}");
}

/// A preview of a stack that does not exist yet creates it, empty, for Pulumi to preview
/// against: the preview says so (issue 43, item 13), and a second preview does not.
#[test]
fn a_preview_says_it_created_a_missing_stack() {
    let ws = gated(KEEP_ALPHA);
    let r = run(&ws, "preview", &["--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let (alpha, msg) = alpha_finished(&r);
    assert!(msg.contains("created the missing stack dev"), "{alpha}");
    let again = run(&ws, "preview", &["--output", "json"]);
    let (alpha, msg) = alpha_finished(&again);
    assert!(!msg.contains("created"), "{alpha}");
}

/// `--expect-no-changes` does not pass a preview whose output could not be read: its
/// changes are unknown, not none (exit 4, naming why).
#[test]
fn expect_no_changes_fails_on_an_unreadable_preview() {
    let ws = crate::run::workspace("  - path: alpha\n", &["alpha"]);
    ok(&ws, "up", &[]);
    wrap_pulumi(&ws, MUTE_PREVIEW);
    let r = run(&ws, "preview", &["--expect-no-changes"]);
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.all().contains("could not be read"), "{r:?}");
}
