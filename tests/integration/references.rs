//! Stack references in code (issue 14, DESIGN.md "References in code"): found in the
//! programs, shown by `show`, checked by `validate`, and added as needs with
//! `infer_needs: true`.

use serde_json::Value;

use crate::support::*;

/// `net` exports an output; `app` reads it through a stack reference, with no `needs:`
/// between them (both `needs: []`).
fn workspace(infer: bool, org: &str) -> Ws {
    let ws = Ws::new();
    ws.profile(
        "t",
        &format!(
            "{HEAD}{}infrastructure:\n  - path: net\n    needs: []\n  - path: app\n    needs: []\n",
            if infer { "infer_needs: true\n" } else { "" }
        ),
    );
    ws.pulumi_project(
        "net",
        "net",
        "resources:\n  vpc:\n    type: fake:index:Thing\n    properties:\n      x: vpc-1\noutputs:\n  vpc: ${vpc.x}\n",
    );
    ws.pulumi_project(
        "app",
        "app",
        &format!(
            "resources:\n  netRef:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: {org}/net/${{pulumi.stack}}\n  thing:\n    type: fake:index:Thing\n    properties:\n      vpc: ${{netRef.outputs[\"vpc\"]}}\noutputs:\n  vpc: ${{thing.vpc}}\n"
        ),
    );
    ws.env_file("PULUMI_STACK=dev\n");
    ws
}

fn show_json(ws: &Ws) -> Value {
    let r = ws.strata(&["show", "-p", "t", "--format", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    serde_json::from_str(&r.stdout).unwrap()
}

fn project<'a>(doc: &'a Value, path: &str) -> &'a Value {
    doc["projects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["path"] == path)
        .unwrap()
}

#[test]
fn show_lists_references_and_draws_them_dashed() {
    let ws = workspace(false, "${pulumi.organization}");
    let doc = show_json(&ws);
    assert_eq!(
        project(&doc, "app")["references"],
        serde_json::json!(["net"])
    );
    assert_eq!(project(&doc, "app")["needs"], serde_json::json!([]));
    assert!(project(&doc, "net").get("references").is_none());

    let dot = ws.strata(&["show", "-p", "t", "--format", "dot"]);
    assert!(
        dot.stdout
            .contains("\"net\" -> \"app\" [style=dashed, label=\"reads\"];"),
        "{}",
        dot.stdout
    );
    if std::process::Command::new("dot").arg("-V").output().is_ok() {
        let f = ws.path("plan.dot");
        std::fs::write(&f, &dot.stdout).unwrap();
        let out = std::process::Command::new("dot")
            .args(["-Tsvg", f.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mmd = ws.strata(&["show", "-p", "t", "--format", "mermaid"]);
    assert!(mmd.stdout.contains("-. reads .->"), "{}", mmd.stdout);
    let tree = ws.strata(&["show", "-p", "t"]);
    assert!(tree.stdout.contains("reads   net"), "{}", tree.stdout);
}

#[test]
fn validate_warns_about_an_unordered_reference_and_strict_fails() {
    let ws = workspace(false, "${pulumi.organization}");
    let r = ws.strata(&["validate", "-p", "t"]);
    assert_eq!(r.code, 0, "a warning is not a failure: {r:?}");
    assert!(
        r.stdout.contains("app reads the stack of net") && r.stdout.contains("Pulumi.yaml:4"),
        "{r:?}"
    );
    let r = ws.strata(&["validate", "-p", "t", "--strict"]);
    assert_eq!(r.code, 3, "{r:?}");
    let r = ws.strata(&["validate", "-p", "t", "--output", "json"]);
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(doc["warnings"], 1, "{doc}");
}

#[test]
fn validate_warns_about_a_literal_org_and_an_unknown_project() {
    let ws = workspace(true, "acme");
    ws.pulumi_project(
        "net",
        "net",
        "resources:\n  other:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: organization/dns/dev\noutputs:\n  vpc: vpc-1\n",
    );
    let r = ws.strata(&["validate", "-p", "t"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("names organization `acme`"), "{r:?}");
    assert!(r.stdout.contains("project `dns`"), "{r:?}");
    assert!(
        !r.stdout.contains("is not ordered before it"),
        "inferred: {r:?}"
    );
}

#[test]
fn infer_needs_orders_a_reader_after_what_it_reads() {
    let ws = workspace(true, "${pulumi.organization}");
    let doc = show_json(&ws);
    assert_eq!(project(&doc, "app")["needs"], serde_json::json!(["net"]));
    let r = ws.strata(&["up", "-p", "t", "-j", "4"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = ws.strata(&["outputs", "-p", "t", "app", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["vpc"], "vpc-1", "{v}");
    let r = ws.strata(&["validate", "-p", "t", "--strict"]);
    assert!(
        r.stdout
            .contains("1 stack reference in the code, all ordered"),
        "{r:?}"
    );
}
