//! `policy:` rules on the plan (issue 35, part 1), with the fake pulumi: a preview says
//! which project a rule would deny and exits 5; an `up` previews a held project first,
//! applies exactly that plan when the rules let it go, and otherwise leaves it `denied`,
//! skips what needs it and goes on with the rest.

use serde_json::Value;

use crate::run::{BODY, DIAMOND, DIAMOND_PATHS, clear_calls, name, ok, records, run, workspace};
use crate::support::*;

/// DIAMOND (alpha, bravo → charlie → delta) with `policy` after its entries.
pub(crate) fn gated(policy: &str) -> Ws {
    workspace(&format!("{DIAMOND}policy:\n{policy}"), DIAMOND_PATHS)
}

pub(crate) const KEEP_ALPHA: &str =
    "  - name: keep-data\n    select: alpha\n    deny: [delete, replace]\n";

/// alpha's program without its resource `second` (a delete), its output kept.
pub(crate) fn drop_second(ws: &Ws) {
    ws.pulumi_project(
        "alpha",
        &name("alpha"),
        "resources:\n  first:\n    type: fake:index:Thing\n    properties:\n      x: 1\noutputs:\n  value: ${first.x}\n",
    );
}

pub(crate) fn finished<'a>(events: &'a [Value], project: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["event"] == "project_finished" && e["project"] == project)
        .unwrap_or_else(|| panic!("no project_finished of {project}: {events:?}"))
}

pub(crate) fn alpha_state(ws: &Ws) -> String {
    ws.read(&format!(
        ".strata/backend/.pulumi/stacks/{}/dev.json",
        name("alpha")
    ))
}

#[test]
fn a_preview_names_the_rule_that_would_deny_a_project_and_exits_5() {
    let ws = gated(KEEP_ALPHA);
    ok(&ws, "up", &[]);
    drop_second(&ws);
    let r = run(
        &ws,
        "preview",
        &["--output", "json", "--summary-file", "pr.md"],
    );
    assert_eq!(r.code, 5, "{r:?}");
    let events = r.events();
    let alpha = finished(&events, "alpha");
    assert_eq!(alpha["status"], "succeeded", "{alpha}");
    assert_eq!(alpha["denied"]["rule"], "keep-data", "{alpha}");
    assert_eq!(alpha["denied"]["reason"], "would delete 1 resource");
    assert_eq!(
        alpha["denied"]["resources"][0], "delete fake:index:Thing second",
        "{alpha}"
    );
    assert!(finished(&events, "bravo").get("denied").is_none());
    let end = events
        .iter()
        .find(|e| e["event"] == "run_finished")
        .unwrap();
    assert_eq!(end["counts"]["denied"], 1, "{end}");
    assert!(
        r.stderr.contains("denied by a rule: alpha (keep-data)"),
        "{r:?}"
    );
    let md = ws.read("pr.md");
    assert!(md.contains("denied by keep-data"), "{md}");
    // Nothing was changed by the preview.
    assert!(alpha_state(&ws).contains("second"));
}

#[test]
fn an_up_leaves_a_denied_project_unchanged_skips_what_needs_it_and_goes_on() {
    let ws = gated(KEEP_ALPHA);
    ok(&ws, "up", &[]);
    drop_second(&ws);
    // bravo changes too, and nothing holds it.
    ws.pulumi_project("bravo", &name("bravo"), &BODY.replace("x: 1", "x: 2"));
    clear_calls(&ws);
    let r = run(&ws, "up", &["--output", "json"]);
    assert_eq!(r.code, 5, "{r:?}");
    let events = r.events();
    let alpha = finished(&events, "alpha");
    assert_eq!(alpha["status"], "denied", "{alpha}");
    assert_eq!(alpha["denied"]["rule"], "keep-data");
    assert!(
        alpha["message"]
            .as_str()
            .unwrap()
            .contains("nothing was changed"),
        "{alpha}"
    );
    assert_eq!(finished(&events, "bravo")["status"], "succeeded");
    assert_eq!(finished(&events, "charlie")["status"], "skipped");
    assert_eq!(finished(&events, "delta")["status"], "skipped");
    assert!(alpha_state(&ws).contains("second"), "alpha was not updated");
    // alpha: a preview that saved its plan, and no update.
    let calls = ws.calls();
    let alpha_cmds: Vec<String> = records(&calls, "start")
        .iter()
        .filter(|c| crate::run::s(c, "project") == name("alpha"))
        .map(|c| crate::run::s(c, "command").to_string())
        .collect();
    assert_eq!(alpha_cmds, ["preview"], "{calls:?}");
    let end = events
        .iter()
        .find(|e| e["event"] == "run_finished")
        .unwrap();
    assert_eq!(end["counts"]["denied"], 1, "{end}");
    // The journal keeps why.
    let journal = ws.read(".strata/dev/journal.jsonl");
    assert!(journal.contains("\"status\":\"denied\""), "{journal}");
    assert!(journal.contains("\"rule\":\"keep-data\""), "{journal}");
    // The events and the report follow the published schemas (v2 knows `denied`).
    let report = ws.strata(&["report", "--stack", "dev", "--format", "json", "-o", "-"]);
    assert_eq!(report.code, 0, "{report:?}");
    let v: Value = serde_json::from_str(&report.stdout).unwrap();
    let row = item(&v["projects"], "project", "alpha");
    assert_eq!(row["reason"], "denied: policy rule", "{row}");
    crate::handoff::assert_run_follows_schemas(&ws, &r, &report);
}

#[test]
fn a_change_the_rules_let_go_is_applied_as_previewed() {
    let ws = gated("  - name: small\n    select: alpha\n    max_changes: 5\n");
    ok(&ws, "up", &[]);
    ws.pulumi_project("alpha", &name("alpha"), &BODY.replace("x: 1", "x: 2"));
    clear_calls(&ws);
    let r = ok(&ws, "up", &["--output", "json"]);
    assert_eq!(finished(&r.events(), "alpha")["status"], "succeeded");
    let calls = ws.calls();
    let alpha: Vec<Vec<String>> = records(&calls, "start")
        .iter()
        .filter(|c| crate::run::s(c, "project") == name("alpha"))
        .map(|c| crate::run::argv(c))
        .collect();
    assert_eq!(alpha.len(), 2, "a preview, then the update: {alpha:?}");
    let saved = crate::run::flag_value(&alpha[0], "--save-plan").expect("the preview saves a plan");
    let applied = crate::run::flag_value(&alpha[1], "--plan").expect("the update keeps to it");
    assert_eq!(saved, applied);
    assert!(alpha_state(&ws).contains("\"x\": 2") || alpha_state(&ws).contains("\"x\":2"));
    // More changes than the limit (the first deployment's three creates): denied, and
    // the summary says so.
    let ws = gated("  - name: small\n    select: alpha\n    max_changes: 2\n");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 5, "{r:?}");
    assert!(
        r.stdout
            .contains("denied by small: would make 3 changes, more than 2"),
        "{r:?}"
    );
    assert!(r.stdout.contains("strata up denied:"), "{r:?}");
    assert!(r.stdout.contains(", 1 denied in"), "{r:?}");
    assert!(
        !alpha_state(&ws).contains("fake:index:Thing"),
        "nothing created"
    );
}

#[test]
fn bad_rules_are_refused_by_validate_and_every_run() {
    for (policy, says) in [
        (
            "  - name: r\n    select: tag:nosuch\n    deny: [delete]\n",
            "`policy:` rule `r`",
        ),
        (
            "  - name: r\n    deny: [destroy]\n",
            "unknown variant `destroy`",
        ),
        ("  - name: r\n    select: alpha\n", "checks nothing"),
    ] {
        let ws = gated(policy);
        for cmd in ["validate", "up", "preview"] {
            let r = run(&ws, cmd, &[]);
            assert_eq!(r.code, 3, "{cmd} {policy}: {r:?}");
            assert!(r.stderr.contains(says), "{cmd}: {r:?}");
            assert!(r.stderr.contains("providers/t.yaml"), "{r:?}");
        }
    }
}

/// `up --plan BUNDLE` holds a bundle's plan to the rules as recorded: a preview that a
/// rule denied makes a bundle that does not apply that project.
#[test]
fn a_bundle_s_plan_is_held_to_the_rules_too() {
    let ws = gated(KEEP_ALPHA);
    ok(&ws, "up", &[]);
    drop_second(&ws);
    let r = run(&ws, "preview", &["--save-plan", "b"]);
    assert_eq!(r.code, 5, "{r:?}");
    let r = run(&ws, "up", &["--plan", "b", "--output", "json"]);
    assert_eq!(r.code, 5, "{r:?}");
    let events = r.events();
    let alpha = finished(&events, "alpha");
    assert_eq!(alpha["status"], "denied", "{alpha}");
    assert_eq!(
        alpha["denied"]["resources"][0], "delete fake:index:Thing second",
        "{alpha}"
    );
    assert_eq!(finished(&events, "charlie")["status"], "skipped");
    assert!(alpha_state(&ws).contains("second"), "alpha was not updated");
}
