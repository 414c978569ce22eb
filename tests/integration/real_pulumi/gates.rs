//! Issue 35 with the real CLI: a `policy:` rule judges the real preview of a held
//! project; a denied one is not updated; one the rules let go is applied through the
//! real `pulumi up --plan` of the plan its preview saved. An `approve:` rule holds a
//! project at `awaiting` with its real plan kept, `strata approve` lets exactly that plan
//! out once, and a program changed since the approval is held again.

use serde_json::Value;

use super::{Real, lp, status_of, up};

/// The profile's `policy:` made of `rule` (YAML list item lines), replacing any before.
pub(crate) fn set_policy(r: &Real, rule: &str) {
    let p = r.ws.path("providers/local-pulumi.yaml");
    let text = std::fs::read_to_string(&p).unwrap();
    let text = match text.find("\npolicy:\n") {
        Some(at) => text[..at].to_string(),
        None => text,
    };
    std::fs::write(&p, format!("{}\npolicy:\n{rule}", text.trim_end())).unwrap();
}

const APP: &str = "local-pulumi/app";

fn finished_of(run: &crate::support::Run, project: &str) -> Value {
    run.events()
        .into_iter()
        .find(|e| e["event"] == "project_finished" && e["project"] == project)
        .unwrap_or_else(|| panic!("no project_finished of {project}: {run:?}"))
}

/// The Pulumi calls among `calls` (lines of the wrapper's log: its arguments) made in
/// `project`'s folder.
pub(crate) fn calls_in(calls: &[String], project: &str) -> Vec<String> {
    let folder = format!("projects/{project}");
    calls
        .iter()
        .filter(|c| c.split(' ').any(|a| a.ends_with(&folder)))
        .cloned()
        .collect()
}

/// The value after `flag` in a logged call.
pub(crate) fn flag_in(call: &str, flag: &str) -> String {
    let args: Vec<&str> = call.split(' ').collect();
    let at = args
        .iter()
        .position(|a| *a == flag)
        .unwrap_or_else(|| panic!("{flag} in {call}"));
    args[at + 1].to_string()
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

    set_policy(
        &r,
        "  - name: frozen\n    select: local-pulumi/app\n    max_changes: 0\n",
    );
    let preview = lp(&r, &["preview"]);
    assert_eq!(preview.code, 5, "{preview:?}");
    let app_row = finished_of(&preview, APP);
    assert_eq!(app_row["denied"]["rule"], "frozen", "{app_row}");
    r.take_calls();
    let denied = lp(&r, &["up"]);
    assert_eq!(denied.code, 5, "{denied:?}");
    assert_eq!(finished_of(&denied, APP)["status"], "denied");
    let calls = calls_in(&r.take_calls(), APP);
    assert_eq!(calls.len(), 1, "the app's preview only: {calls:?}");
    assert!(
        calls[0].starts_with("preview") && calls[0].contains("--save-plan"),
        "{calls:?}"
    );

    set_policy(
        &r,
        "  - name: small\n    select: local-pulumi/app\n    max_changes: 5\n",
    );
    let applied = lp(&r, &["up"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    assert_eq!(finished_of(&applied, APP)["status"], "succeeded");
    let calls = calls_in(&r.take_calls(), APP);
    assert_eq!(calls.len(), 2, "a preview, then the update: {calls:?}");
    assert!(calls[1].starts_with("up "), "{calls:?}");
    assert_eq!(
        flag_in(&calls[0], "--save-plan"),
        flag_in(&calls[1], "--plan")
    );
    // The real CLI applied it: the stack now has the new replicas.
    let again = lp(&r, &["preview", "--expect-no-changes"]);
    assert_eq!(again.code, 0, "nothing left to change: {again:?}");
}

pub(crate) const INGRESS: &str = "local-pulumi/ingress";
pub(crate) const REVIEW_INGRESS: &str = "  - name: ingress-review\n    select: local-pulumi/ingress\n    approve: [update, delete, replace]\n";
/// Where strata keeps what the rule holds for the ingress (`util::slug` of its path).
const INGRESS_GATE: &str = ".strata/dev/approvals/local-pulumi_2fingress";

/// Deployed by the real CLI, then the ingress under `REVIEW_INGRESS`.
fn deployed_under_review(test: &str) -> Option<Real> {
    let r = Real::with_local_pulumi(test)?;
    let first = up(&r);
    assert_eq!(first.code, 0, "{first:?}");
    set_policy(&r, REVIEW_INGRESS);
    Some(r)
}

/// Replaces `from` by `to` in a project's real program (once, or the test is wrong).
fn edit_program(r: &Real, project: &str, from: &str, to: &str) {
    let p = r.ws.path(&format!("projects/{project}/Pulumi.yaml"));
    let text = std::fs::read_to_string(&p).unwrap();
    assert_eq!(text.matches(from).count(), 1, "{from:?} in {text}");
    std::fs::write(&p, text.replace(from, to)).unwrap();
}

/// The ingress's command writes another line: one update of the real program.
pub(crate) fn ingress_v2(r: &Real) {
    edit_program(r, INGRESS, "echo \"ingress at ", "echo \"ingress v2 at ");
}

/// What the real ingress resource wrote.
pub(crate) fn ingress_file(r: &Real) -> String {
    std::fs::read_to_string(r.env_dir().join("ingress/ingress")).unwrap()
}

/// The updates Pulumi itself recorded for the ingress's stack (its own history).
fn ingress_updates(r: &Real) -> usize {
    let run = r.pulumi(INGRESS, &["stack", "history", "--json", "--stack", "dev"]);
    assert_eq!(run.code, 0, "{run:?}");
    let doc: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("stack history --json: {e}: {run:?}"));
    let all = doc.as_array().unwrap_or_else(|| panic!("{doc}"));
    all.iter().filter(|u| u["kind"] == "update").count()
}

/// `up` stops the ingress at the gate: exit 6, `awaiting`, one real preview of it and
/// no update.
fn held_at_the_gate(r: &Real) -> crate::support::Run {
    r.take_calls();
    let run = lp(r, &["up"]);
    assert_eq!(run.code, 6, "{run:?}");
    let row = finished_of(&run, INGRESS);
    assert_eq!(row["status"], "awaiting", "{row}");
    assert_eq!(row["awaiting"]["rule"], "ingress-review", "{row}");
    let calls = calls_in(&r.take_calls(), INGRESS);
    assert_eq!(calls.len(), 1, "the ingress's preview only: {calls:?}");
    assert!(
        calls[0].starts_with("preview") && calls[0].contains("--save-plan"),
        "{calls:?}"
    );
    run
}

fn approve_ingress(r: &Real) -> crate::support::Run {
    let run = lp(r, &["approve", INGRESS, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    run
}

#[test]
fn an_approval_rule_holds_the_real_ingress_while_its_sibling_finishes() {
    let Some(r) = deployed_under_review("an_approval_rule_holds_the_real_ingress") else {
        return;
    };
    ingress_v2(&r);
    // The log store, beside the ingress in its wave, changes too.
    edit_program(
        &r,
        "local-pulumi/logstore",
        "echo \"logs of ",
        "echo \"log store of ",
    );
    let run = held_at_the_gate(&r);
    assert_eq!(status_of(&run, "local-pulumi/logstore"), "succeeded");
    assert_eq!(status_of(&run, APP), "skipped", "the app needs the ingress");
    for p in [
        "local-pulumi/network",
        "local-pulumi/registry",
        "local-pulumi/cluster",
    ] {
        assert_eq!(status_of(&run, p), "succeeded", "{p}");
    }
    assert!(
        run.stderr
            .contains("strata approve local-pulumi/ingress -p local-pulumi -s dev"),
        "says how to approve: {run:?}"
    );
    // The sibling's change went out; the ingress's did not, by Pulumi's own account.
    let readme = std::fs::read_to_string(r.env_dir().join("logstore/README")).unwrap();
    assert!(readme.starts_with("log store of "), "{readme}");
    assert!(!ingress_file(&r).contains("v2"), "{}", ingress_file(&r));
    assert_eq!(ingress_updates(&r), 1, "the first deployment only");
    // The real plan is held, with what it changes.
    let held = r.ws.read(&format!("{INGRESS_GATE}/held.json"));
    assert!(held.contains("\"digest\""), "{held}");
    assert!(held.contains("command:local:Command::ingress"), "{held}");
    let plan = r.ws.read(&format!("{INGRESS_GATE}/plan.json"));
    assert!(plan.contains("resourcePlans"), "Pulumi's own plan: {plan}");
}

#[test]
fn an_approved_real_plan_goes_out_through_up_plan_once() {
    let Some(r) = deployed_under_review("an_approved_real_plan_goes_out") else {
        return;
    };
    ingress_v2(&r);
    held_at_the_gate(&r);
    let approved = approve_ingress(&r);
    let said = approved.all();
    assert!(
        said.contains("update command:local:Command ingress"),
        "shows what it approves: {approved:?}"
    );
    assert!(said.contains("approved by"), "{approved:?}");

    let run = lp(&r, &["up"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(status_of(&run, INGRESS), "succeeded");
    assert_eq!(status_of(&run, APP), "succeeded");
    let calls = calls_in(&r.take_calls(), INGRESS);
    assert_eq!(
        calls.len(),
        2,
        "a fresh preview, then the update: {calls:?}"
    );
    assert!(calls[1].starts_with("up "), "{calls:?}");
    let applied = flag_in(&calls[1], "--plan");
    assert!(
        applied.ends_with(&format!("{INGRESS_GATE}/plan.json")),
        "the approved plan, not the fresh preview's: {calls:?}"
    );
    assert_ne!(applied, flag_in(&calls[0], "--save-plan"));
    // The real CLI applied it.
    assert!(
        ingress_file(&r).starts_with("ingress v2 at "),
        "{}",
        ingress_file(&r)
    );
    assert_eq!(ingress_updates(&r), 2);
    r.take_calls();

    // Spent: nothing awaits, and a further up neither holds nor re-applies anything.
    assert!(!r.ws.path(INGRESS_GATE).exists());
    let again = lp(&r, &["approve", INGRESS, "--yes"]);
    assert_eq!(again.code, 3, "{again:?}");
    assert!(again.stderr.contains("nothing awaits"), "{again:?}");
    let steady = lp(&r, &["up"]);
    assert_eq!(steady.code, 0, "{steady:?}");
    assert_eq!(status_of(&steady, INGRESS), "succeeded");
    let calls = calls_in(&r.take_calls(), INGRESS);
    assert!(
        calls.iter().all(|c| !c.contains("/approvals/")),
        "no approved plan applied again: {calls:?}"
    );
    let nothing = lp(&r, &["preview", "--expect-no-changes"]);
    assert_eq!(nothing.code, 0, "nothing left to change: {nothing:?}");
}

/// The ingress's v2 held and approved, then `change`d: the next `up` holds it again
/// (exit 6, one preview, no update), saying the plan changed, and nothing went out; the
/// old approval is gone. The `up` and the ingress's `project_finished` message.
fn changed_after_approval(test: &str, change: &dyn Fn(&Real)) -> Option<(Real, String)> {
    let r = deployed_under_review(test)?;
    ingress_v2(&r);
    held_at_the_gate(&r);
    approve_ingress(&r);
    change(&r);
    let run = held_at_the_gate(&r);
    assert_eq!(status_of(&run, APP), "skipped");
    let row = finished_of(&run, INGRESS);
    let msg = row["message"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("changed since it was approved"), "{row}");
    let deployed = ingress_file(&r);
    assert!(
        deployed.starts_with("ingress at "),
        "nothing went out: {deployed}"
    );
    assert_eq!(ingress_updates(&r), 1, "the first deployment only");
    assert!(!r.ws.path(&format!("{INGRESS_GATE}/approval.json")).exists());
    Some((r, msg))
}

#[test]
fn a_real_program_changed_after_its_approval_is_held_again() {
    // After the approval, the program gains a resource.
    let add_marker = |r: &Real| {
        edit_program(
            r,
            INGRESS,
            "\noutputs:\n",
            "  marker:\n    type: command:local:Command\n    properties:\n      create: touch \"$STRATA_ROOT/.strata/$STRATA_STACK/local-pulumi-env/ingress/marker\"\n\noutputs:\n",
        )
    };
    let Some((r, msg)) = changed_after_approval("a_real_program_changed", &add_marker) else {
        return;
    };
    assert!(
        msg.contains("approved +0 ~1 -0 ±0, now +1 ~1 -0 ±0"),
        "{msg}"
    );
    assert!(!r.env_dir().join("ingress/marker").exists());
    // The new plan is held for its own approval.
    let held = r.ws.read(&format!("{INGRESS_GATE}/held.json"));
    assert!(held.contains("command:local:Command::marker"), "{held}");
}

/// The same resource, the same operation, other values: not the plan approved either
/// (and the real `up --plan` of the approved one would fail: "violates plan").
#[test]
fn a_real_property_changed_after_its_approval_is_held_again() {
    let v3 = |r: &Real| edit_program(r, INGRESS, "ingress v2 at ", "ingress v3 at ");
    let Some((r, msg)) = changed_after_approval("a_real_property_changed", &v3) else {
        return;
    };
    assert!(msg.contains("the same resources change"), "{msg}");
    let plan = r.ws.read(&format!("{INGRESS_GATE}/plan.json"));
    assert!(
        plan.contains("ingress v3 at "),
        "the new plan is held: {plan}"
    );
}
