//! Issue 3, the foundation: the workspace model, provider profiles, the execution graph,
//! and `show` / `validate` / `providers`, driven through the real binary against fixture
//! workspaces (and against the workspace this repository ships). This file holds the
//! shared fixtures and readers of `show --format json`; one file per idea below.
//!
//! Every bad input must exit 3 with a message that names the file, the entry or key,
//! the line where serde_yaml reports one, and what to do; usage errors exit 2; nothing
//! ever panics (exit 101).

use serde_json::Value;

use crate::support::*;

mod composition;
mod config_errors;
mod graph;
mod no_panic;
mod providers;
mod repo;
mod selection;
mod show;
mod usage;
mod validate;

/// A workspace with Pulumi projects `a`, `b`, `c` (named `a-proj`, ...) and the profile
/// `providers/t.yaml` = HEAD + `body`.
pub(super) fn abc(body: &str) -> Ws {
    let ws = Ws::new();
    for p in ["a", "b", "c"] {
        ws.pulumi_project(p, &format!("{p}-proj"), "");
    }
    ws.profile("t", &format!("{HEAD}{body}"));
    ws
}

/// Pulumi projects at each of `paths`, named after their last component.
pub(super) fn projects(ws: &Ws, paths: &[&str]) {
    for p in paths {
        let name = p.rsplit('/').next().unwrap();
        ws.pulumi_project(p, name, "");
    }
}

/// Asserts a configuration error (exit 3) whose stderr contains every one of `needles`.
pub(super) fn assert_config_error(r: &Run, needles: &[&str]) {
    assert_eq!(r.code, 3, "expected exit 3 (invalid configuration)\n{r:?}");
    for n in needles {
        assert!(r.stderr.contains(n), "stderr should mention {n:?}\n{r:?}");
    }
    assert_no_panic(r);
}

/// [`assert_config_error`] and [`assert_says_what_to_do`]: refused as a configuration
/// error naming each of `needles`, in words that say what to do.
#[track_caller]
pub(super) fn assert_config_error_says_what_to_do(r: &Run, needles: &[&str]) {
    assert_config_error(r, needles);
    assert_says_what_to_do(r);
}

/// `show` over [`abc`]`(body)`: asserts the profile is refused as a configuration error
/// naming `providers/t.yaml` and each of `says`; returns the run for what else to check.
#[track_caller]
pub(super) fn profile_refused(body: &str, says: &[&str]) -> Run {
    let r = abc(body).run("show", &[]);
    assert_config_error(&r, &[&["providers/t.yaml"], says].concat());
    r
}

pub(super) fn assert_no_panic(r: &Run) {
    assert_ne!(r.code, 101, "strata panicked\n{r:?}");
    assert!(!r.stderr.contains("panicked"), "strata panicked\n{r:?}");
    assert!(
        !r.stderr.contains("RUST_BACKTRACE"),
        "strata panicked\n{r:?}"
    );
}

/// The message tells the user what to do (an instruction, not only a diagnosis).
pub(super) fn assert_says_what_to_do(r: &Run) {
    let lower = r.stderr.to_lowercase();
    let hints = [
        "fix", "check", "add ", "create", "pass ", "set ", "use ", "drop ", "change ", "remove",
        "rename", "start ", "pick ", "break ", "put ", "point ", "must ", "delete", "correct",
    ];
    assert!(
        hints.iter().any(|h| lower.contains(h)),
        "the message should say what to do about it\n{r:?}"
    );
}

/// [`graph`] of [`abc`]`(body)`.
#[track_caller]
pub(super) fn graph_of(body: &str) -> Value {
    graph(&abc(body), &[])
}

/// `show --format json` of profile `t` (no stack) with the `extra` arguments, parsed.
#[track_caller]
pub(super) fn graph(ws: &Ws, extra: &[&str]) -> Value {
    show_json(&ws.strata(&[&["-p", "t", "show", "--format", "json"], extra].concat()))
}

/// Parses the output of `show --format json`.
pub(super) fn show_json(r: &Run) -> Value {
    assert_eq!(r.code, 0, "show failed\n{r:?}");
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("show json is not JSON: {e}\n{r:?}"))
}

pub(super) fn order(j: &Value) -> Vec<String> {
    j["order"]
        .as_array()
        .expect("order is an array")
        .iter()
        .map(|v| v.as_str().expect("order holds strings").to_string())
        .collect()
}

pub(super) fn project<'a>(j: &'a Value, path: &str) -> &'a Value {
    j["projects"]
        .as_array()
        .expect("projects is an array")
        .iter()
        .find(|p| p["path"] == path)
        .unwrap_or_else(|| panic!("no project {path} in {j:#}"))
}

pub(super) fn has_project(j: &Value, path: &str) -> bool {
    j["projects"]
        .as_array()
        .expect("projects is an array")
        .iter()
        .any(|p| p["path"] == path)
}

pub(super) fn needs(j: &Value, path: &str) -> Vec<String> {
    let mut v: Vec<String> = project(j, path)["needs"]
        .as_array()
        .unwrap_or_else(|| panic!("needs of {path} is not an array: {j:#}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

/// Asserts the needs of each path (sorted), `why` each is so; prints the graph when one
/// differs.
#[track_caller]
pub(super) fn assert_needs(j: &Value, expected: &[(&str, &[&str], &str)]) {
    for (path, wanted, why) in expected {
        let got = needs(j, path);
        assert_eq!(got, sorted(wanted), "needs of {path}: {why}\n{j:#}");
    }
}

pub(super) fn wave(j: &Value, path: &str) -> u64 {
    project(j, path)["wave"]
        .as_u64()
        .unwrap_or_else(|| panic!("wave of {path} is not a number: {j:#}"))
}

pub(super) fn pos(j: &Value, path: &str) -> usize {
    order(j)
        .iter()
        .position(|p| p == path)
        .unwrap_or_else(|| panic!("{path} is not in the order {:?}", order(j)))
}

/// `after` runs right after `before` in the order of `j`.
#[track_caller]
pub(super) fn assert_right_after(j: &Value, before: &str, after: &str) {
    assert_eq!(
        pos(j, after),
        pos(j, before) + 1,
        "{after} right after {before}: {:?}",
        order(j)
    );
}

pub(super) fn paths_of_stage(j: &Value, stage: &str) -> Vec<String> {
    j["projects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["stage"] == stage)
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect()
}

pub(super) fn sorted(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// A good stack config for profile `t` (infra_type `test`).
pub(super) const GOOD_STACK: &str = "config:\n  kubernetes:infra_type: test\n";
