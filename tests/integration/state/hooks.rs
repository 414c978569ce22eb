//! `on_success` hooks: a `run` hook sees the outputs before dependents start, a
//! `kubeconfig` hook merges into the user's file (mode 0600), and a failing hook fails
//! its project, in the summary, the events and the journal.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;

use serde_json::json;

use super::{
    NETWORK, REGION_KEY, WEB, calls_text, project_records, simple, summary, summary_row, ups,
    workspace,
};
use crate::support::*;

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

fn mode_of(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn run_hook_sees_outputs_config_and_env_before_dependents_start() {
    let mut ws = Ws::new();
    ws.env_file("PULUMI_STACK=dev\n");
    ws.set_env("STRATA_PROVIDER", "test");
    ws.set_env("HOOK_GREETING", "hello-from-env");
    let hook_file = ws.path("hook.txt");
    let hook = format!(
        "printf 'vpc=%s region=%s greet=%s var=%s\\n' \"${{outputs.vpc_id}}\" \"${{config.test:region}}\" \"${{env.HOOK_GREETING}}\" \"$STRATA_OUTPUT_VPC_ID\" > {}",
        hook_file.display()
    );
    ws.profile(
        "test",
        &format!(
            "{HEAD}{REGION_KEY}infrastructure:\n  - path: base/network\n    on_success:\n      - run: {}\n  - path: tools/after\n",
            yaml_str(&hook)
        ),
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.fake_outputs("network", json!({"vpc_id": "vpc-hooked-9"}));
    // The dependent copies the hook's file: it exists only if the hook ran first.
    ws.command_project(
        "tools/after",
        &format!(
            "cp {} {}",
            hook_file.display(),
            ws.path("seen.txt").display()
        ),
        "true",
    );

    ws.strata_ok(&["up"]);
    let expected = "vpc=vpc-hooked-9 region=eu-north-1 greet=hello-from-env var=vpc-hooked-9\n";
    assert_eq!(ws.read("hook.txt"), expected);
    assert_eq!(
        ws.read("seen.txt"),
        expected,
        "the dependent started before the hook ran"
    );
}

const KUBE_EXISTING: &str = "apiVersion: v1\nkind: Config\npreferences: {}\nclusters:\n- name: old-cluster\n  cluster:\n    server: https://old.example:6443\nusers:\n- name: old-user\n  user:\n    token: old-token\ncontexts:\n- name: old-ctx\n  context:\n    cluster: old-cluster\n    user: old-user\ncurrent-context: old-ctx\n";

fn kubeconfig(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}-cluster\n  cluster:\n    server: https://{name}.example:6443\nusers:\n- name: {name}-user\n  user:\n    token: {name}-token\ncontexts:\n- name: {name}-ctx\n  context:\n    cluster: {name}-cluster\n    user: {name}-user\ncurrent-context: {name}-ctx\n"
    )
}

fn names(doc: &serde_yaml::Value, section: &str) -> BTreeSet<String> {
    doc[section]
        .as_sequence()
        .unwrap_or_else(|| panic!("no {section} in {doc:?}"))
        .iter()
        .filter_map(|e| e["name"].as_str().map(String::from))
        .collect()
}

#[test]
fn kubeconfig_hook_merges_keeping_existing_contexts_with_mode_0600() {
    use base64::Engine;
    let mut ws = workspace(
        "infrastructure:\n  - path: base/cluster\n    on_success:\n      - kubeconfig: { output: kubeconfig }\n  - path: base/cluster2\n    on_success:\n      - kubeconfig: { output: kubeconfig, context: renamed-ctx }\n",
    );
    ws.pulumi_project("base/cluster", "cluster", &simple("one"));
    ws.pulumi_project("base/cluster2", "cluster2", &simple("two"));
    // A plain YAML kubeconfig, and a base64 one that is a secret output.
    ws.fake_outputs("cluster", json!({ "kubeconfig": kubeconfig("first") }));
    ws.fake_secret_outputs("cluster2", json!({ "kubeconfig": base64::engine::general_purpose::STANDARD.encode(kubeconfig("second")) }));
    ws.write("home/.kube/config", KUBE_EXISTING);
    let target = ws.path("home/.kube/config");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();

    let r = ws.strata_ok(&["up"]);

    let doc: serde_yaml::Value = serde_yaml::from_str(&ws.read("home/.kube/config")).unwrap();
    // The incoming context, cluster and user take the hook's name: `name:`/`context:`,
    // else `<stack>-<project folder>`.
    let all =
        |extra: [&str; 2]| -> BTreeSet<String> { extra.iter().map(|s| s.to_string()).collect() };
    for (section, old) in [
        ("contexts", "old-ctx"),
        ("clusters", "old-cluster"),
        ("users", "old-user"),
    ] {
        let mut want = all(["dev-cluster", "renamed-ctx"]);
        want.insert(old.to_string());
        assert_eq!(names(&doc, section), want, "{section}: {doc:?}");
    }
    assert_eq!(doc["current-context"].as_str(), Some("renamed-ctx"));
    // What was there is kept as it was.
    let old = doc["users"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "old-user")
        .unwrap();
    assert_eq!(old["user"]["token"].as_str(), Some("old-token"));
    assert!(
        doc.get("preferences").is_some(),
        "unknown keys are kept: {doc:?}"
    );
    assert_eq!(mode_of(&target), 0o600, "the kubeconfig holds credentials");
    // Written atomically: no temporary file left beside it.
    let leftovers: Vec<String> = std::fs::read_dir(ws.path("home/.kube"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "config")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The secret kubeconfig's token is not printed.
    assert!(!r.all().contains("second-token"), "{r:?}");
}

#[test]
fn kubeconfig_hook_creates_a_missing_file_with_mode_0600() {
    let mut ws = workspace(
        "infrastructure:\n  - path: base/cluster\n    on_success:\n      - kubeconfig: { output: kubeconfig }\n",
    );
    ws.pulumi_project("base/cluster", "cluster", &simple("one"));
    ws.fake_outputs("cluster", json!({ "kubeconfig": kubeconfig("first") }));
    assert!(!ws.exists("home/.kube/config"));
    ws.strata_ok(&["up"]);
    let doc: serde_yaml::Value = serde_yaml::from_str(&ws.read("home/.kube/config")).unwrap();
    assert_eq!(doc["current-context"].as_str(), Some("dev-cluster"));
    assert_eq!(mode_of(&ws.path("home/.kube/config")), 0o600);
}

#[test]
fn failing_hook_fails_its_project_and_stops_dependents() {
    let ws = workspace(
        "infrastructure:\n  - path: base/network\n    on_success:\n      - run: echo checking; exit 7\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n  - path: apps/frontend\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    ws.pulumi_project("apps/frontend", "frontend", &simple("front"));

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    // Pulumi itself succeeded; nothing after it ran.
    let ran = ups(&ws, 0);
    assert_eq!(ran.len(), 1, "{}", calls_text(&ws));
    assert_eq!((ran[0].0.as_str(), ran[0].1), ("network", 0));

    // The summary blames the hook, not Pulumi.
    let row = summary_row(&r, "base/network");
    assert!(row.contains("failed"), "{row}");
    let s = summary(&r);
    let blame: Vec<&str> = s
        .lines()
        .filter(|l| l.starts_with("✗ base/network"))
        .collect();
    assert_eq!(blame.len(), 1, "{s}");
    assert!(blame[0].contains("hook"), "{s}");
    assert!(blame[0].contains("exit 7"), "{s}");
    assert!(
        !blame[0].to_lowercase().contains("pulumi"),
        "the hook failed, not pulumi: {s}"
    );
    for p in ["apps/web", "apps/frontend"] {
        let row = summary_row(&r, p);
        assert!(!row.contains("succeeded"), "{row}");
    }
    // The journal says the same.
    let recs = project_records(&ws);
    let net = recs
        .iter()
        .find(|r| r["project"] == "base/network")
        .unwrap();
    assert_eq!(net["status"], "failed");
    assert!(
        net["message"].as_str().unwrap_or("").contains("hook"),
        "{net}"
    );
    for p in ["apps/web", "apps/frontend"] {
        assert!(
            recs.iter()
                .all(|r| r["project"] != p || r["status"] != "succeeded"),
            "{recs:#?}"
        );
    }
}

#[test]
fn failing_hook_is_reported_in_json_events() {
    let ws = workspace(
        "infrastructure:\n  - path: base/network\n    on_success:\n      - run: exit 5\n  - path: apps/frontend\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/frontend", "frontend", &simple("front"));
    let r = ws.strata(&["up", "--output", "json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let events = r.events();
    let hook = events
        .iter()
        .find(|e| e["event"] == "hook_finished")
        .unwrap_or_else(|| panic!("no hook_finished: {events:#?}"));
    assert_eq!(hook["project"], "base/network");
    assert_eq!(hook["status"], "failed");
    let fin = events
        .iter()
        .find(|e| e["event"] == "project_finished" && e["project"] == "base/network")
        .unwrap();
    assert_eq!(fin["status"], "failed");
    assert!(!events.iter().any(|e| e["event"] == "project_finished"
        && e["project"] == "apps/frontend"
        && e["status"] == "succeeded"));
    let run = events
        .iter()
        .find(|e| e["event"] == "run_finished")
        .unwrap();
    assert_eq!(run["status"], "failed");
}

#[test]
fn a_failing_hooks_output_is_in_the_failure_summary() {
    let ws = workspace(
        "infrastructure:\n  - path: base/a\n    on_success:\n      - run: echo hook-broke-here; exit 4\n",
    );
    ws.pulumi_project("base/a", "a", &simple("a"));
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("│ hook-broke-here"), "{r:?}");
}
