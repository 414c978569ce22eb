//! Plan bundles with the fake pulumi (issue 24): what the real-CLI tier
//! (`real_pulumi::a_plan_bundle_…`) cannot reach quickly — a plan Pulumi itself refuses,
//! command projects, a bundle with a blocked step, folders that are not bundles.

use serde_json::Value;

use crate::run::{BODY, CHAIN, CHAIN_PATHS, name, ok, run, workspace};
use crate::support::*;

fn manifest(ws: &Ws, dir: &str) -> Value {
    serde_json::from_str(&ws.read(&format!("{dir}/manifest.json"))).expect("a manifest")
}

/// `up` of `ws`, then alpha's `x` goes from 1 to 2 and a preview saves the plan bundle
/// `b` of that change.
fn deploy_then_save_a_plan_of_x_2(ws: &Ws) {
    ok(ws, "up", &[]);
    ws.pulumi_project("alpha", &name("alpha"), &BODY.replace("x: 1", "x: 2"));
    ok(ws, "preview", &["--save-plan", "b"]);
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Pulumi's own check (a resource whose inputs differ from its plan) fails the project
/// with Pulumi's words, applies nothing of it, and stops its dependents.
#[test]
fn a_plan_pulumi_refuses_fails_with_its_reason_and_stops_the_dependents() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    deploy_then_save_a_plan_of_x_2(&ws);
    // The plan says x becomes 2; the program now says 3, but in a place the fingerprint
    // does not see: the plan file itself is edited, and its digest in the manifest with
    // it (strata's own check would refuse the bundle first: `bundle_trust`).
    let mut m = manifest(&ws, "b");
    let plan = m["steps"]["alpha"]["plan"].as_str().unwrap().to_string();
    let text = ws.read(&format!("b/{plan}"));
    assert!(text.contains("\"x\": 2"), "{text}");
    let edited = text.replace("\"x\": 2", "\"x\": 7");
    ws.write(&format!("b/{plan}"), &edited);
    m["files"][&plan] = sha256_hex(edited.as_bytes()).into();
    ws.write("b/manifest.json", &m.to_string());
    let r = run(&ws, "up", &["--plan", "b", "--output", "json"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.all().contains("violates plan"), "Pulumi's reason: {r:?}");
    let deployed = ws.read(".strata/backend/.pulumi/stacks/proj-alpha/dev.json");
    assert!(!deployed.contains("\"x\": 2"), "nothing of alpha applied");
    assert!(r.all().contains("needs alpha, which failed"), "{r:?}");
    assert!(!ws.exists("b/applied.json"));
}

/// A stack output other than the plan's: Pulumi fails without a word, and strata says
/// what such a failure means.
#[test]
fn a_silent_plan_failure_is_explained() {
    let mut ws = workspace("  - path: alpha\n", &["alpha"]);
    deploy_then_save_a_plan_of_x_2(&ws);
    // At apply time the program registers an output the plan does not have.
    ws.set_env(
        &format!("FAKE_PULUMI_OUTPUTS_{}", crate::run::hook_key("alpha")),
        r#"{"extra":"x"}"#,
    );
    let r = run(&ws, "up", &["--plan", "b"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.all().contains("Pulumi gave no reason"), "{r:?}");
}

/// Command projects: the preview line and the fingerprint are in the manifest, and the
/// bundle applies; a project without `preview:` is held by its fingerprint alone.
#[test]
fn command_projects_are_held_by_their_preview_line_and_fingerprint() {
    let ws = Ws::new();
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: a\n  - path: b\n"),
    );
    ws.write(
        "projects/a/Strata.yaml",
        "up: printf '{\"v\":1}' > \"$STRATA_OUTPUTS_FILE\"\ndestroy: \"true\"\npreview: echo would make v\n",
    );
    ws.command_project("b", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    ok(&ws, "up", &[]);
    ok(&ws, "preview", &["--save-plan", "b1"]);
    let m = manifest(&ws, "b1");
    assert_eq!(m["steps"]["a"]["preview"], "echo would make v", "{m:#}");
    assert_eq!(m["steps"]["a"]["status"], "succeeded");
    assert_eq!(m["steps"]["b"]["status"], "skipped", "no preview: command");
    assert_eq!(
        m["steps"]["b"]["upstream_outputs"]
            .as_object()
            .unwrap()
            .len(),
        1
    );
    assert!(m["steps"]["a"]["fingerprint"].is_string());
    ok(&ws, "up", &["--plan", "b1"]);
    assert!(ws.exists("b1/applied.json"));
    // The same bundle copied elsewhere is still spent: the stack remembers it.
    copy_path(&ws.path("b1"), &ws.path("copy"));
    std::fs::remove_file(ws.path("copy/applied.json")).unwrap();
    let again = run(&ws, "up", &["--plan", "copy"]);
    assert_eq!(again.code, 3, "{again:?}");
    assert!(again.stderr.contains("applied already"), "{again:?}");
    // A change to b's command after the preview: refused, nothing runs.
    ok(&ws, "preview", &["--save-plan", "b2"]);
    ws.command_project("b", "printf '{\"w\":2}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    let refused = run(&ws, "up", &["--plan", "b2"]);
    let changed = "b: its code, inputs or secrets changed since the preview";
    refused.expect_code(3).expect_stderr(&[changed]);
}

/// A fresh stack's preview blocks what needs an undeployed upstream: its bundle cannot
/// be applied, and says which steps hold no plan.
#[test]
fn a_bundle_with_a_blocked_step_is_refused_before_anything_runs() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "preview", &["--save-plan", "fresh"]);
    let m = manifest(&ws, "fresh");
    assert_eq!(m["steps"]["alpha"]["status"], "succeeded");
    assert_eq!(m["steps"]["bravo"]["status"], "blocked");
    let r = run(&ws, "up", &["--plan", "fresh", "--output", "json"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr
            .contains("bravo: its preview did not succeed (blocked"),
        "{r:?}"
    );
    assert!(!r.stdout.contains("project_started"), "nothing ran: {r:?}");
}

#[test]
fn folders_that_are_not_bundles_and_flags_that_do_not_mix_are_refused() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    let r = run(&ws, "up", &["--plan", "nowhere"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("is not a plan bundle"), "{r:?}");
    ws.write("full/x", "x");
    let r = run(&ws, "preview", &["--save-plan", "full"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("the folder is not empty"), "{r:?}");
    let r = run(&ws, "up", &["--plan", "full", "--project", "alpha"]);
    assert_eq!(r.code, 2, "{r:?}");
}

/// Issue 45: a bundle is tied to each stack's state as its preview began. A stack whose
/// state was written since (an update by hand, here a state edit that moves its
/// checkpoint) is refused by `up --plan`, naming the stack and saying what to do; its
/// plan would otherwise undo that change. The stacks nobody touched still apply.
#[test]
fn a_stack_changed_since_the_preview_is_refused_by_up_plan() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    deploy_then_save_a_plan_of_x_2(&ws);
    let m = manifest(&ws, "b");
    let state = m["steps"]["alpha"]["state"].as_str().unwrap_or_default();
    assert!(!state.is_empty(), "the bundle names alpha's state: {m}");
    // Someone else writes alpha's state after the review.
    let file = ".strata/backend/.pulumi/stacks/proj-alpha/dev.json";
    let mut doc: Value = serde_json::from_str(&ws.read(file)).unwrap();
    doc["checkpoint"]["latest"]["manifest"]["time"] = "2030-01-01T00:00:00Z".into();
    ws.write(file, &serde_json::to_string_pretty(&doc).unwrap());
    let r = run(&ws, "up", &["--plan", "b", "--output", "json"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_has(
        &r.all(),
        &[
            "the stack dev of alpha changed since the preview",
            "2030-01-01T00:00:00Z now",
            "preview again",
        ],
    );
    let deployed = ws.read(file);
    assert!(!deployed.contains("\"x\": 2"), "nothing of alpha applied");
    assert!(!ws.exists("b/applied.json"));
}
