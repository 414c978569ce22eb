//! Issue 35 with the real CLI: a `policy:` rule judges the real preview of a held
//! project; a denied one is not updated; one the rules let go is applied through the
//! real `pulumi up --plan` of the plan its preview saved.

use serde_json::Value;

use super::{Real, lp, up};

/// `local-pulumi/app` held by `rule` (YAML list item lines), appended to the profile.
fn hold_app(r: &Real, rule: &str) {
    let p = r.ws.path("providers/local-pulumi.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    let text = match text.find("\npolicy:\n") {
        Some(at) => text[..at].to_string(),
        None => text,
    };
    std::fs::write(&p, format!("{}\npolicy:\n{rule}", text.trim_end())).unwrap();
}

fn app_finished(run: &crate::support::Run) -> Value {
    run.events()
        .into_iter()
        .find(|e| e["event"] == "project_finished" && e["project"] == "local-pulumi/app")
        .unwrap_or_else(|| panic!("no project_finished of app: {run:?}"))
}

/// The app's Pulumi calls among `calls` (lines of the wrapper's log: its arguments).
fn app_calls(calls: &[String]) -> Vec<String> {
    calls
        .iter()
        .filter(|c| c.contains("projects/local-pulumi/app"))
        .cloned()
        .collect()
}

#[test]
fn a_rule_judges_the_real_preview_and_a_let_go_change_goes_out_as_planned() {
    let Some(r) = Real::with_local_pulumi("a_rule_judges_the_real_preview") else {
        return;
    };
    let first = up(&r);
    assert_eq!(first.code, 0, "{first:?}");
    // The app's replicas change: one update of the real program.
    let app = r.ws.path("projects/local-pulumi/app/Pulumi.yaml");
    let text = std::fs::read_to_string(&app).unwrap();
    std::fs::write(&app, text.replace("default: 1", "default: 2")).unwrap();

    hold_app(
        &r,
        "  - name: frozen\n    select: local-pulumi/app\n    max_changes: 0\n",
    );
    let preview = lp(&r, &["preview"]);
    assert_eq!(preview.code, 5, "{preview:?}");
    let app_row = app_finished(&preview);
    assert_eq!(app_row["denied"]["rule"], "frozen", "{app_row}");
    r.take_calls();
    let denied = lp(&r, &["up"]);
    assert_eq!(denied.code, 5, "{denied:?}");
    assert_eq!(app_finished(&denied)["status"], "denied");
    let calls = app_calls(&r.take_calls());
    assert_eq!(calls.len(), 1, "the app's preview only: {calls:?}");
    assert!(
        calls[0].starts_with("preview") && calls[0].contains("--save-plan"),
        "{calls:?}"
    );

    hold_app(
        &r,
        "  - name: small\n    select: local-pulumi/app\n    max_changes: 5\n",
    );
    let applied = lp(&r, &["up"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    assert_eq!(app_finished(&applied)["status"], "succeeded");
    let calls = app_calls(&r.take_calls());
    assert_eq!(calls.len(), 2, "a preview, then the update: {calls:?}");
    let plan_of = |c: &str, flag: &str| {
        let args: Vec<&str> = c.split(' ').collect();
        let at = args
            .iter()
            .position(|a| *a == flag)
            .unwrap_or_else(|| panic!("{flag} in {c}"));
        args[at + 1].to_string()
    };
    assert!(calls[1].starts_with("up "), "{calls:?}");
    assert_eq!(
        plan_of(&calls[0], "--save-plan"),
        plan_of(&calls[1], "--plan")
    );
    // The real CLI applied it: the stack now has the new replicas.
    let again = lp(&r, &["preview", "--expect-no-changes"]);
    assert_eq!(again.code, 0, "nothing left to change: {again:?}");
}
