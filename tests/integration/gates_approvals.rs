//! `approve:` rules (issue 35, part 2), with the fake pulumi: an `up` stops a held
//! project at `awaiting` (exit 6) while the rest goes on; `strata approve` records an
//! approval of the held plan; a later `up` applies exactly that plan, or, when a fresh
//! preview plans something else, stops at `awaiting` again.

use serde_json::Value;

use crate::gates::{alpha_state, finished, gated};
use crate::run::{BODY, argv, clear_calls, flag_value, name, ok, run, starts_of};
use crate::support::*;

const REVIEW_ALPHA: &str =
    "  - name: prod-review\n    select: alpha\n    approve: [update, delete, replace]\n";

/// Deployed, then alpha's program changed so its preview plans an update.
fn awaiting_alpha() -> Ws {
    let ws = gated(REVIEW_ALPHA);
    ok(&ws, "up", &[]);
    ws.pulumi_project("alpha", &name("alpha"), &BODY.replace("x: 1", "x: 2"));
    ws
}

fn statuses(events: &[Value]) -> Vec<(String, String)> {
    ["alpha", "bravo", "charlie", "delta"]
        .iter()
        .map(|p| {
            (
                p.to_string(),
                finished(events, p)["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn alpha_commands(ws: &Ws) -> Vec<Vec<String>> {
    starts_of(&ws.calls(), "alpha")
        .into_iter()
        .map(argv)
        .collect()
}

const HELD: &str = ".strata/dev/approvals/alpha/plan.json";

#[test]
fn an_approval_rule_holds_one_project_while_the_rest_finish() {
    let ws = gated(REVIEW_ALPHA);
    // The first deployment only creates: nothing the rule holds.
    ok(&ws, "up", &[]);
    ws.pulumi_project("alpha", &name("alpha"), &BODY.replace("x: 1", "x: 2"));
    ws.pulumi_project("bravo", &name("bravo"), &BODY.replace("x: 1", "x: 2"));
    clear_calls(&ws);
    let r = run(&ws, "up", &["--output", "json"]);
    assert_eq!(r.code, 6, "{r:?}");
    let events = r.events();
    let s = statuses(&events);
    assert_eq!(s[0], ("alpha".into(), "awaiting".into()), "{s:?}");
    assert_eq!(s[1].1, "succeeded");
    assert_eq!((s[2].1.as_str(), s[3].1.as_str()), ("skipped", "skipped"));
    let alpha = finished(&events, "alpha");
    assert_eq!(alpha["awaiting"]["rule"], "prod-review", "{alpha}");
    assert!(
        alpha["message"]
            .as_str()
            .is_some_and(|m| m.contains("`strata approve alpha -p t -s dev`")),
        "the event names the run's profile too: {alpha}"
    );
    assert!(
        r.stderr.contains("strata approve alpha -p t -s dev"),
        "says how to approve: {r:?}"
    );
    let h = ws.strata(&["history", "-s", "dev", "-n", "1", "--output", "json"]);
    assert_eq!(
        h.json()["runs"][0]["status"],
        "awaiting",
        "the run's record says it awaits, not that it succeeded: {h:?}"
    );
    // Nothing changed, and the held plan is kept.
    assert!(!alpha_state(&ws).contains("\"x\": 2"));
    let cmds = alpha_commands(&ws);
    assert_eq!(cmds.len(), 1, "a preview, no update: {cmds:?}");
    assert!(ws.path(HELD).is_file());
    let held = ws.read(".strata/dev/approvals/alpha/held.json");
    assert!(held.contains("\"digest\""), "{held}");
    assert!(held.contains("fake:index:Thing"), "{held}");
    let end = events
        .iter()
        .find(|e| e["event"] == "run_finished")
        .unwrap();
    assert_eq!(end["status"], "awaiting", "{end}");
    assert_eq!(end["counts"]["awaiting"], 1, "{end}");
    // status shows it.
    let st = ok(&ws, "status", &[]);
    assert!(st.stdout.contains("awaiting"), "{st:?}");
    // The events and the report follow the published schemas (v2 knows `awaiting`).
    let report = ws.strata(&["report", "--stack", "dev", "--format", "json", "-o", "-"]);
    assert_eq!(report.code, 0, "{report:?}");
    assert!(
        report.stdout.contains("\"awaiting: approval rule\""),
        "{report:?}"
    );
    crate::handoff::assert_run_follows_schemas(&ws, &r, &report);
}

#[test]
fn a_preview_says_which_rule_would_hold_a_project() {
    let ws = awaiting_alpha();
    let r = run(&ws, "preview", &["--output", "json"]);
    assert_eq!(r.code, 0, "a hold is no failure of a preview: {r:?}");
    let events = r.events();
    let alpha = finished(&events, "alpha");
    assert_eq!(alpha["status"], "succeeded", "{alpha}");
    assert_eq!(alpha["awaiting"]["rule"], "prod-review", "{alpha}");
    let msg = alpha["message"].as_str().unwrap();
    assert!(msg.contains("would be held by prod-review"), "{msg}");
    assert!(finished(&events, "bravo").get("awaiting").is_none());
    assert!(!ws.path(HELD).exists(), "a preview holds nothing");
}

#[test]
fn an_approved_plan_is_applied_as_approved_and_consumed() {
    let ws = awaiting_alpha();
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 6, "{r:?}");
    assert!(r.stdout.contains("strata up awaiting: "), "{r:?}");
    assert!(r.stdout.contains(", 1 awaiting in"), "{r:?}");
    let r = ok(&ws, "approve", &["alpha", "--yes"]);
    let said = format!("{}{}", r.stdout, r.stderr);
    assert!(said.contains("update fake:index:Thing first"), "{r:?}");
    assert!(said.contains("approved"), "{r:?}");
    let journal = ws.read(".strata/dev/journal.jsonl");
    assert!(journal.contains("\"record\":\"approval\""), "{journal}");
    assert!(journal.contains("\"digest\""), "{journal}");
    clear_calls(&ws);
    // `--resume` takes up what the held run left: alpha and what needs it, not bravo.
    let r = ok(&ws, "up", &["--resume", "--output", "json"]);
    let events = r.events();
    for p in ["alpha", "charlie", "delta"] {
        assert_eq!(finished(&events, p)["status"], "succeeded", "{p}");
    }
    assert!(
        starts_of(&ws.calls(), "bravo").is_empty(),
        "bravo is not run again"
    );
    let cmds = alpha_commands(&ws);
    assert_eq!(cmds.len(), 2, "a fresh preview, then the update: {cmds:?}");
    assert!(flag_value(&cmds[0], "--save-plan").is_some(), "{cmds:?}");
    let applied = flag_value(&cmds[1], "--plan").expect("the update keeps to a plan");
    assert!(
        applied.ends_with(".strata/dev/approvals/alpha/plan.json"),
        "the approved plan, not the fresh preview's: {applied}"
    );
    assert!(alpha_state(&ws).contains("\"x\": 2") || alpha_state(&ws).contains("\"x\":2"));
    // Consumed: nothing awaits any more.
    assert!(!ws.path(HELD).exists());
    let r = run(&ws, "approve", &["alpha", "--yes"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("nothing awaits"), "{r:?}");
}

#[test]
fn a_plan_that_changed_since_the_approval_waits_again() {
    let ws = awaiting_alpha();
    assert_eq!(run(&ws, "up", &[]).code, 6);
    ok(&ws, "approve", &["alpha", "--yes"]);
    // The program changes again: now `second` goes away too.
    ws.pulumi_project(
        "alpha",
        &name("alpha"),
        "resources:\n  first:\n    type: fake:index:Thing\n    properties:\n      x: 3\noutputs:\n  value: ${first.x}\n",
    );
    clear_calls(&ws);
    let r = run(&ws, "up", &["--output", "json"]);
    assert_eq!(r.code, 6, "{r:?}");
    let alpha = finished(&r.events(), "alpha").clone();
    assert_eq!(alpha["status"], "awaiting", "{alpha}");
    let msg = alpha["message"].as_str().unwrap();
    assert!(msg.contains("changed since it was approved"), "{msg}");
    assert_eq!(alpha_commands(&ws).len(), 1, "no update");
    assert!(alpha_state(&ws).contains("second"), "nothing changed");
    // The new plan is held, waiting for its own approval.
    let held = ws.read(".strata/dev/approvals/alpha/held.json");
    assert!(held.contains("delete"), "{held}");
    assert!(
        !ws.path(".strata/dev/approvals/alpha/approval.json")
            .exists()
    );
}

#[test]
fn approve_refuses_what_is_not_awaiting_and_a_silent_terminal() {
    let ws = awaiting_alpha();
    let r = run(&ws, "approve", &["alpha", "--yes"]);
    assert_eq!(r.code, 3, "nothing awaits yet: {r:?}");
    assert!(r.stderr.contains("nothing awaits an approval"), "{r:?}");
    let r = run(&ws, "approve", &["nosuch", "--yes"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("no project `nosuch`"), "{r:?}");
    assert_eq!(run(&ws, "up", &[]).code, 6);
    let r = run(&ws, "approve", &["bravo", "--yes"]);
    assert_eq!(r.code, 3, "{r:?}");
    // No terminal, no --yes: refused, and nothing recorded.
    let r = run(&ws, "approve", &["alpha"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--yes"), "{r:?}");
    assert!(
        !ws.read(".strata/dev/journal.jsonl")
            .contains("\"approval\"")
    );
    assert!(
        !ws.path(".strata/dev/approvals/alpha/approval.json")
            .exists()
    );
}

/// GitHub Actions: the job of a project an `approve:` rule holds waits on a GitHub
/// environment named after the rule (its required reviewers are the gate there), and
/// records their approval with `strata approve` when the update stops at the gate.
#[test]
fn the_github_actions_export_holds_an_approved_project_on_an_environment() {
    let ws = gated(REVIEW_ALPHA);
    let (text, doc) = ws.github_workflow();
    let jobs = doc["jobs"].as_mapping().unwrap();
    let job = |name: &str| {
        jobs.values()
            .find(|j| j["name"] == name)
            .unwrap_or_else(|| panic!("no job {name}: {text}"))
    };
    assert_eq!(job("alpha")["environment"], "prod-review", "{text}");
    assert!(job("bravo")["environment"].is_null(), "{text}");
    let script: String = job("alpha")["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .collect();
    assert!(script.contains("strata approve alpha"), "{script}");
    assert!(script.contains("-eq 6"), "{script}");
    if let Some(actionlint) = crate::handoff::require_actionlint() {
        crate::handoff::actionlint_passes(&actionlint, &ws.path("wf.yml"), "gated workflow");
    }
}
