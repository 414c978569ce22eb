//! Selecting projects: `--project` by path or Pulumi name, `--with-deps`, `--from`.

use super::*;

#[test]
fn show_project_by_path_and_by_pulumi_name() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\n  - path: c\n");
    let by_path = graph(&ws, &["--project", "b"]);
    assert_eq!(order(&by_path), ["b"]);
    let by_name = graph(&ws, &["--project", "b-proj"]);
    assert_eq!(order(&by_name), ["b"]);
    // Repeatable.
    let two = graph(&ws, &["--project", "a", "--project", "c-proj"]);
    assert_eq!(order(&two), ["a", "c"]);
    // Unknown: exit 3, listing what exists.
    let r = ws.strata(&["-p", "t", "show", "--project", "nope"]);
    assert_config_error(&r, &["nope", "a, b, c"]);
}

#[test]
fn show_project_by_ambiguous_pulumi_name_asks_for_the_path() {
    let ws = Ws::new();
    ws.pulumi_project("x/one", "same", "");
    ws.pulumi_project("x/two", "same", "");
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: x/one\n  - path: x/two\n"),
    );
    let r = ws.strata(&["-p", "t", "show", "--project", "same"]);
    assert_config_error(&r, &["same", "x/one", "x/two"]);
    let ok = graph(&ws, &["--project", "x/two"]);
    assert_eq!(order(&ok), ["x/two"]);
}

#[test]
fn show_with_deps_adds_what_the_selection_needs() {
    let ws = abc(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: [a]\n",
    );
    let j = graph(&ws, &["--project", "c", "--with-deps"]);
    assert_eq!(order(&j), ["a", "c"], "b is not needed by c");
    assert_eq!(needs(&j, "c"), ["a"]);
}

#[test]
fn show_from_skips_what_is_ordered_before() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\n  - path: c\n");
    let j = graph(&ws, &["--from", "b"]);
    assert_eq!(order(&j), ["b", "c"]);
    let by_name = graph(&ws, &["--from", "b-proj"]);
    assert_eq!(order(&by_name), ["b", "c"]);
    let r = ws.strata(&["-p", "t", "show", "--from", "zzz"]);
    assert_config_error(&r, &["zzz"]);
}
