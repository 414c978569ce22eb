//! Piecemeal selection: `--project` by path or Pulumi name, `--with-deps` adding what
//! the selection needs, `--from` skipping what is ordered before.

use super::{CHAIN, CHAIN_PATHS, assert_order, clear_calls, names, ok, projects_called, workspace};

#[test]
fn project_selects_by_path_and_by_pulumi_name() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &["--project", "bravo"]);
    assert_eq!(projects_called(&ws.calls()), names(&["bravo"]));

    clear_calls(&ws);
    ok(&ws, "up", &["--project", "proj-charlie"]);
    assert_eq!(projects_called(&ws.calls()), names(&["charlie"]));

    clear_calls(&ws);
    ok(
        &ws,
        "up",
        &["--project", "alpha", "--project", "proj-charlie"],
    );
    assert_eq!(projects_called(&ws.calls()), names(&["alpha", "charlie"]));
}

#[test]
fn with_deps_adds_what_the_selection_needs() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &["--project", "bravo", "--with-deps"]);
    let calls = ws.calls();
    assert_eq!(projects_called(&calls), names(&["alpha", "bravo"]));
    assert_order(&calls, &[("alpha", "bravo")]);
}

#[test]
fn from_skips_what_is_ordered_before_it() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    ok(&ws, "up", &["--from", "bravo"]);
    let calls = ws.calls();
    assert_eq!(projects_called(&calls), names(&["bravo", "charlie"]));
    assert_order(&calls, &[("bravo", "charlie")]);
}
