//! `destroy` (and `down`): dependents first, only with `--yes` off a terminal,
//! `--with-deps` taking the dependents; a missing stack is nothing to do, a failed
//! destroy a failure, with old CLIs too.

use serde_json::Value;

use super::{
    CHAIN, CHAIN_PATHS, DIAMOND, DIAMOND_EDGES, DIAMOND_PATHS, argv, assert_order, clear_calls,
    commands_of, has_flag, hook_key, names, ok, projects_called, run, s, starts, starts_of,
    workspace,
};

#[test]
fn destroy_runs_in_reverse_order_with_yes() {
    let mut ws = workspace(DIAMOND, DIAMOND_PATHS);
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    ws.set_env("FAKE_PULUMI_DELAY_MS", "300");
    ok(&ws, "destroy", &["--yes"]);
    let calls = ws.calls();
    assert_eq!(projects_called(&calls), names(DIAMOND_PATHS));
    for p in DIAMOND_PATHS {
        let d: Vec<&Value> = starts_of(&calls, p)
            .into_iter()
            .filter(|c| s(c, "command") == "destroy")
            .collect();
        assert_eq!(d.len(), 1, "{p}: one `pulumi destroy`: {calls:#?}");
        assert!(has_flag(&argv(d[0]), "--yes"), "{}", d[0]);
    }
    // Dependents first: reverse every edge.
    let reversed: Vec<(&str, &str)> = DIAMOND_EDGES.iter().map(|(a, b)| (*b, *a)).collect();
    assert_order(&calls, &reversed);
}

/// A destroy that fails (a resource failure, exit 4) is a failure, even when the
/// provider's error text happens to mention "no stack named": only exit 6, or Pulumi's
/// own one-line error for a missing stack, means "nothing to destroy".
#[test]
fn failed_destroy_mentioning_no_stack_named_is_a_failure() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    ws.set_env(
        &format!("FAKE_PULUMI_FAIL_{}", hook_key("charlie")),
        "destroy",
    );
    ws.set_env("FAKE_PULUMI_FAIL_CODE", "4");
    ws.set_env(
        "FAKE_PULUMI_FAIL_MESSAGE",
        "deleting bucket: peer cluster reported: error: no stack named 'dev' found",
    );
    let r = run(&ws, "destroy", &["--yes", "--output", "json"]);
    assert_eq!(r.code, 1, "a failed destroy must fail the run: {r:?}");
    let charlie: Vec<Value> = r
        .events()
        .into_iter()
        .filter(|e| e["event"] == "project_finished" && e["project"] == "charlie")
        .collect();
    assert_eq!(charlie.len(), 1, "{r:?}");
    assert_eq!(charlie[0]["status"], "failed", "{}", charlie[0]);
    assert!(!r.stdout.contains("nothing to do"), "{}", r.stdout);
    // The stack still exists: the dependency ordering stopped bravo and alpha.
    assert_eq!(r.code, 1);
}

/// Pulumi's own "no stack" answer (exit 6 on 3.226+) is still "nothing to destroy".
#[test]
fn destroy_of_a_missing_stack_is_nothing_to_do() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &["--project", "alpha"]);
    // bravo and charlie were never brought up: their stacks do not exist.
    let r = ok(&ws, "destroy", &["--yes", "--output", "json"]);
    for p in ["bravo", "charlie"] {
        let e = r
            .events()
            .into_iter()
            .find(|e| e["event"] == "project_finished" && e["project"] == p)
            .unwrap_or_else(|| panic!("no event for {p}: {r:?}"));
        assert_eq!(e["status"], "succeeded", "{e}");
    }
}

/// A CLI older than 3.226 exits 255 on every error: its own one-line "no stack named"
/// error still means nothing to destroy, and a failed destroy is still a failure.
#[test]
fn old_cli_missing_stack_and_failed_destroy() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ws.set_env("FAKE_PULUMI_OLD_CLI", "1");
    ok(&ws, "up", &["--project", "alpha"]);
    ok(&ws, "destroy", &["--yes", "--project", "charlie"]);
    ok(&ws, "up", &[]);
    ws.set_env(
        &format!("FAKE_PULUMI_FAIL_{}", hook_key("charlie")),
        "destroy",
    );
    ws.set_env(
        "FAKE_PULUMI_FAIL_MESSAGE",
        "error: no stack named 'dev' found",
    );
    let r = run(&ws, "destroy", &["--yes"]);
    assert_eq!(r.code, 1, "{r:?}");
    // 255 is not called an internal error: the user sees Pulumi's own error line.
    ws.set_env("FAKE_PULUMI_FAIL_MESSAGE", "creating bucket: AccessDenied");
    ws.set_env(&format!("FAKE_PULUMI_FAIL_{}", hook_key("alpha")), "up");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("older than 3.226"), "{r:?}");
    assert!(r.stdout.contains("AccessDenied"), "{r:?}");
    assert!(!r.all().contains("internal error"), "{r:?}");
}

#[test]
fn down_is_destroy() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    ok(&ws, "down", &["--yes"]);
    let calls = ws.calls();
    for p in CHAIN_PATHS {
        let cmds = commands_of(&calls, p);
        assert_eq!(cmds, ["destroy"], "{p}");
    }
    assert_order(&calls, &[("charlie", "bravo"), ("bravo", "alpha")]);
}

#[test]
fn non_interactive_destroy_without_yes_exits_2_and_touches_nothing() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    let before = ws.files_under(".strata/backend");
    assert!(!before.is_empty());
    clear_calls(&ws);
    let r = run(&ws, "destroy", &[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.all().contains("--yes"),
        "the message says to pass --yes: {r:?}"
    );
    assert!(
        starts(&ws.calls()).is_empty(),
        "no pulumi process may start: {:#?}",
        ws.calls()
    );
    let mut after = ws.files_under(".strata/backend");
    let mut before = before;
    before.sort();
    after.sort();
    assert!(before == after, "the backend changed");
}

#[test]
fn destroy_with_deps_takes_the_dependents() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    ok(
        &ws,
        "destroy",
        &["--yes", "--project", "bravo", "--with-deps"],
    );
    let calls = ws.calls();
    assert_eq!(
        projects_called(&calls),
        names(&["bravo", "charlie"]),
        "for destroy, --with-deps adds the dependents (charlie), not what bravo needs"
    );
    assert_order(&calls, &[("charlie", "bravo")]);
}

#[test]
fn destroy_on_a_stack_never_brought_up_needs_yes_then_has_nothing_to_do() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    let r = run(&ws, "destroy", &[]);
    assert_eq!(
        r.code, 2,
        "without --yes a non-interactive destroy is a usage error: {r:?}"
    );
    let r = run(&ws, "destroy", &["--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("nothing to destroy"), "{r:?}");
    assert!(ws.calls().is_empty(), "no pulumi process: {:?}", ws.calls());
}
