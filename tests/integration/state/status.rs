//! `status` and `outputs`: the last result of every project and its outputs, read from
//! local state (no Pulumi process), secrets masked unless `--show-secrets`.

use serde_json::{Value, json};

use super::{NETWORK, chain_after_web_failed, chain_workspace, up_projects, workspace};
use crate::support::*;

/// JSON printed by `status`/`outputs --output json`: one document, or JSON Lines.
fn json_docs(r: &Run) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(r.stdout.trim()) {
        return vec![v];
    }
    r.stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{r:?}")))
        .collect()
}

/// Every (key, value) pair anywhere in a JSON tree.
fn walk<'a>(v: &'a Value, out: &mut Vec<(Option<&'a str>, &'a Value)>, key: Option<&'a str>) {
    out.push((key, v));
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                walk(x, out, Some(k));
            }
        }
        Value::Array(a) => {
            for x in a {
                walk(x, out, key);
            }
        }
        _ => {}
    }
}

fn values_of_key<'a>(docs: &'a [Value], key: &str) -> Vec<&'a Value> {
    let mut all = Vec::new();
    for d in docs {
        walk(d, &mut all, None);
    }
    all.into_iter()
        .filter(|(k, _)| *k == Some(key))
        .map(|(_, v)| v)
        .collect()
}

/// The per-project entries of a `status --output json`: objects naming a project (by
/// `project` or `path`), wherever they sit in the document(s).
fn status_entries(docs: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for d in docs {
        let mut all = Vec::new();
        walk(d, &mut all, None);
        for (_, v) in all {
            if let Value::Object(m) = v {
                let names = m.get("project").or_else(|| m.get("path"));
                if names.is_some_and(|n| n.is_string()) && m.len() > 1 {
                    out.push(v.clone());
                }
            }
        }
        // A map keyed by project path: {"projects": {"base/network": {...}}}.
        if let Some(Value::Object(projects)) = d.get("projects") {
            for (path, v) in projects {
                if let Value::Object(m) = v {
                    let mut m = m.clone();
                    m.insert("project".into(), json!(path));
                    out.push(Value::Object(m));
                }
            }
        }
    }
    out
}

fn entry_for<'a>(entries: &'a [Value], project: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| {
            e.get("project").and_then(Value::as_str) == Some(project)
                || e.get("path").and_then(Value::as_str) == Some(project)
        })
        .unwrap_or_else(|| panic!("no status entry for {project} in {entries:#?}"))
}

/// The first present field among `names`.
fn field<'a>(e: &'a Value, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| e.get(*n).filter(|v| !v.is_null()))
}

/// The entry's "inputs changed" flag: a boolean field whose name mentions `changed`.
fn changed_flag(e: &Value) -> Option<bool> {
    e.as_object()?
        .iter()
        .find(|(k, v)| k.contains("changed") && v.is_boolean())
        .and_then(|(_, v)| v.as_bool())
}

#[test]
fn status_shows_last_result_of_every_project() {
    let ws = chain_after_web_failed();
    let since = ws.calls().len();

    // Human.
    let r = ws.strata_ok(&["status"]);
    for (p, want) in [
        ("base/network", "succeeded"),
        ("apps/web", "failed"),
        ("apps/side", "succeeded"),
    ] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.contains(p))
            .unwrap_or_else(|| panic!("{p} missing: {r:?}"));
        assert!(line.contains(want), "{p} should be {want}: {line}");
        assert!(line.contains("up"), "{p}: the operation: {line}");
    }
    assert!(
        r.stdout.contains("apps/frontend"),
        "every project of the profile: {r:?}"
    );

    // JSON.
    let r = ws.strata_ok(&["status", "--output", "json"]);
    let entries = status_entries(&json_docs(&r));
    let net = entry_for(&entries, "base/network");
    assert_eq!(
        field(net, &["operation", "last_operation"]),
        Some(&json!("up")),
        "{net}"
    );
    assert_eq!(
        field(net, &["status", "result"]),
        Some(&json!("succeeded")),
        "{net}"
    );
    assert!(
        field(
            net,
            &["ended_at", "when", "finished_at", "started_at", "at"]
        )
        .is_some_and(Value::is_string),
        "when: {net}"
    );
    assert!(
        field(net, &["duration_ms", "duration"]).is_some(),
        "how long: {net}"
    );
    assert_eq!(changed_flag(net), Some(false), "{net}");
    let web = entry_for(&entries, "apps/web");
    assert_eq!(
        field(web, &["status", "result"]),
        Some(&json!("failed")),
        "{web}"
    );
    let front = entry_for(&entries, "apps/frontend");
    assert_ne!(
        field(front, &["status", "result"]),
        Some(&json!("succeeded")),
        "{front}"
    );

    // A changed file shows as changed inputs; the others do not.
    ws.write("projects/base/network/extra.txt", "x");
    let r = ws.strata_ok(&["status", "--output", "json"]);
    let entries = status_entries(&json_docs(&r));
    assert_eq!(
        changed_flag(entry_for(&entries, "base/network")),
        Some(true),
        "{entries:#?}"
    );
    assert_eq!(
        changed_flag(entry_for(&entries, "apps/side")),
        Some(false),
        "{entries:#?}"
    );
    // status reads local state only: no Pulumi process.
    assert_eq!(up_projects(&ws, since).len(), 0);
}

#[test]
fn status_before_any_run_lists_projects_as_never_run() {
    let ws = chain_workspace();
    let r = ws.strata_ok(&["status", "--output", "json"]);
    let entries = status_entries(&json_docs(&r));
    for p in ["base/network", "apps/web", "apps/frontend", "apps/side"] {
        let e = entry_for(&entries, p);
        assert_ne!(
            field(e, &["status", "result"]),
            Some(&json!("succeeded")),
            "{e}"
        );
    }
}

#[test]
fn outputs_masks_secrets_unless_show_secrets() {
    const SECRET: &str = "outputs-secret-value-5150";
    let mut ws = workspace("infrastructure:\n  - path: base/network\n  - path: tools/report\n");
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.command_project(
        "tools/report",
        "printf '{\"endpoint\":\"https://report.example\"}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    ws.fake_outputs("network", json!({"vpc_id": "vpc-outputs-1"}));
    ws.fake_secret_outputs("network", json!({"db_password": SECRET}));
    ws.strata_ok(&["up"]);

    // One project, human.
    let r = ws.strata_ok(&["outputs", "base/network"]);
    assert!(
        r.stdout.contains("vpc_id") && r.stdout.contains("vpc-outputs-1"),
        "{r:?}"
    );
    assert!(r.stdout.contains("db_password"), "{r:?}");
    assert!(
        !r.all().contains(SECRET),
        "masked without --show-secrets: {r:?}"
    );

    let r = ws.strata_ok(&["outputs", "base/network", "--show-secrets"]);
    assert!(r.stdout.contains(SECRET), "{r:?}");

    // All projects, JSON (command projects too).
    let r = ws.strata_ok(&["outputs", "--output", "json"]);
    assert!(!r.all().contains(SECRET), "{r:?}");
    let docs = json_docs(&r);
    assert_eq!(
        values_of_key(&docs, "vpc_id"),
        [&json!("vpc-outputs-1")],
        "{docs:#?}"
    );
    assert_eq!(
        values_of_key(&docs, "endpoint"),
        [&json!("https://report.example")],
        "{docs:#?}"
    );
    let masked = values_of_key(&docs, "db_password");
    assert_eq!(masked.len(), 1, "{docs:#?}");
    assert_ne!(masked[0], &json!(SECRET));

    // One project, JSON, secrets shown.
    let r = ws.strata_ok(&[
        "outputs",
        "base/network",
        "--show-secrets",
        "--output",
        "json",
    ]);
    let docs = json_docs(&r);
    assert_eq!(
        values_of_key(&docs, "db_password"),
        [&json!(SECRET)],
        "{docs:#?}"
    );
    assert_eq!(values_of_key(&docs, "vpc_id"), [&json!("vpc-outputs-1")]);
    assert!(
        values_of_key(&docs, "endpoint").is_empty(),
        "only that project: {docs:#?}"
    );
}
