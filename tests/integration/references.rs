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
    let net_ref = stack_reference("netRef", &format!("{org}/net/${{pulumi.stack}}"));
    ws.pulumi_project(
        "app",
        "app",
        &format!(
            "resources:\n{net_ref}  thing:\n    type: fake:index:Thing\n    properties:\n      vpc: ${{netRef.outputs[\"vpc\"]}}\noutputs:\n  vpc: ${{thing.vpc}}\n"
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
    if let Some(svg) = dot_svg(&ws, &dot.stdout) {
        assert!(
            svg.contains("stroke-dasharray"),
            "the reference is dashed: {svg}"
        );
    }
    let mmd = ws.strata(&["show", "-p", "t", "--format", "mermaid"]);
    assert!(mmd.stdout.contains("-. reads .->"), "{}", mmd.stdout);
    check_mermaid(&ws, &mmd.stdout);
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
    let dns_ref = stack_reference("other", "organization/dns/dev");
    let net = format!("resources:\n{dns_ref}outputs:\n  vpc: vpc-1\n");
    ws.pulumi_project("net", "net", &net);
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

/// `up --changed` follows outputs: an upstream that re-runs and leaves the same outputs
/// does not re-run its dependents; a changed output re-runs exactly the projects that
/// need it, and the cascade stops where outputs stop changing.
#[test]
fn changed_follows_outputs_not_only_the_graph() {
    let ws = Ws::new();
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: a\n  - path: b\n  - path: c\n  - path: d\n    needs: [a]\n  - path: e\n    needs: []\n"
        ),
    );
    let up = |out: &str| {
        format!(
            "echo \"$STRATA_PROJECT\" >> \"$STRATA_ROOT/ran.log\"; printf '%s' '{out}' > \"$STRATA_OUTPUTS_FILE\""
        )
    };
    ws.command_project("a", &up(r#"{"v":"1"}"#), "true");
    ws.command_project("b", &up(r#"{"b":"x"}"#), "true");
    ws.command_project("c", &up(r#"{"c":"x"}"#), "true");
    ws.command_project("d", &up(r#"{"d":"x"}"#), "true");
    ws.command_project("e", &up(r#"{"e":"x"}"#), "true");
    ws.env_file("PULUMI_STACK=dev\n");
    let ran = |ws: &Ws, args: &[&str]| -> (Vec<String>, Value) {
        let _ = std::fs::remove_file(ws.path("ran.log"));
        let mut a = vec!["up", "-p", "t", "--output", "json"];
        a.extend_from_slice(args);
        let r = ws.strata(&a);
        assert_eq!(r.code, 0, "{r:?}");
        let end = r
            .events()
            .into_iter()
            .find(|e| e["event"] == "run_finished")
            .unwrap();
        let mut v: Vec<String> = ws.read_opt("ran.log").lines().map(String::from).collect();
        v.sort();
        (v, end)
    };
    assert_eq!(ran(&ws, &[]).0.len(), 5);
    assert!(ran(&ws, &["--changed"]).0.is_empty(), "nothing changed");

    // a changes (a comment), its outputs do not: only a runs.
    ws.command_project("a", &format!("{} # edited", up(r#"{"v":"1"}"#)), "true");
    let (v, end) = ran(&ws, &["--changed"]);
    assert_eq!(v, ["a"], "{end}");
    assert_eq!(end["processes"], 1, "{end}");

    // a's output changes: a, then b and d (which need it); c keeps b's same outputs.
    ws.command_project("a", &up(r#"{"v":"2"}"#), "true");
    let (v, _) = ran(&ws, &["--changed"]);
    assert_eq!(v, ["a", "b", "d"]);
    // And nothing is left to do.
    assert!(ran(&ws, &["--changed"]).0.is_empty());
}

/// Where what a project reads is known (its inputs and stack references), `--changed`
/// looks only at those upstreams: a changed output of a project it needs only for order
/// does not re-run it.
#[test]
fn changed_looks_only_at_what_a_project_reads_when_that_is_known() {
    let ws = workspace(false, "${pulumi.organization}");
    // app now needs `order` too (for order only) and reads `net` through its reference.
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: net\n    needs: []\n  - path: order\n    needs: []\n  - path: app\n    needs: [net, order]\n"
        ),
    );
    let order = |v: &str| {
        format!(
            "resources:\n  o:\n    type: fake:index:Thing\n    properties:\n      v: {v}\noutputs:\n  v: ${{o.v}}\n"
        )
    };
    ws.pulumi_project("order", "order", &order("1"));
    let r = ws.strata(&["up", "-p", "t"]);
    assert_eq!(r.code, 0, "{r:?}");
    // order's outputs change: it re-runs, app does not (it never reads order).
    ws.pulumi_project("order", "order", &order("2"));
    let r = ws.strata(&["up", "-p", "t", "--changed", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.finished_with("succeeded"), ["order"], "{r:?}");
    // net's outputs change: app reads them, so it runs.
    ws.pulumi_project(
        "net",
        "net",
        "resources:\n  vpc:\n    type: fake:index:Thing\n    properties:\n      x: vpc-2\noutputs:\n  vpc: ${vpc.x}\n",
    );
    let r = ws.strata(&["up", "-p", "t", "--changed", "--output", "json"]);
    assert_eq!(r.finished_with("succeeded"), ["app", "net"], "{r:?}");
}

/// A stack reference the scanner cannot read (issue 25: a name held in a variable) may
/// read any stack: `validate` and `up` refuse its project, naming file and line, until
/// its entry says what it reads (`reads:`). Once declared, `up --changed` judges it by
/// what it declared: a project reading upstreams whose outputs look unchanged is skipped.
#[test]
fn an_unreadable_reference_is_refused_until_declared_then_judged_by_its_reads() {
    let ws = workspace(false, "${pulumi.organization}");
    // `known` reads net through a reference strata reads; `blind` reads a stack whose
    // name is in a variable (its Python source, beside the YAML program the fake
    // runs); `solo` reads one too and needs nothing.
    let profile = |blind_reads: &str, solo_reads: &str| {
        format!(
            "{HEAD}infrastructure:\n  - path: net\n    needs: []\n  - path: known\n    needs: [net]\n  - path: blind\n    needs: [net]\n{blind_reads}  - path: solo\n    needs: []\n{solo_reads}"
        )
    };
    ws.profile("t", &profile("", ""));
    let net_ref = stack_reference("netRef", "${pulumi.organization}/net/${pulumi.stack}");
    let known = format!("resources:\n{net_ref}outputs:\n  k: known\n");
    ws.pulumi_project("known", "known", &known);
    let blind = "resources:\n  t:\n    type: fake:index:Thing\n    properties:\n      x: b\noutputs:\n  b: ${t.x}\n";
    ws.pulumi_project("blind", "blind", blind);
    ws.write(
        "projects/blind/__main__.py",
        "import pulumi\nnet = pulumi.StackReference(\"net\", stack_name=net_stack)\n",
    );
    ws.pulumi_project("solo", "solo", blind);
    ws.write(
        "projects/solo/index.ts",
        "import * as pulumi from \"@pulumi/pulumi\";\nconst args = { name: stackName };\nconst net = new pulumi.StackReference(\"net\", args);\n",
    );

    for cmd in ["validate", "up"] {
        let r = ws.strata(&[cmd, "-p", "t"]);
        assert_eq!(r.code, 3, "{cmd}: {r:?}");
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(
            all.contains("projects/blind/__main__.py:2")
                && all.contains("projects/solo/index.ts:3")
                && all.contains("reads: [PATH, ...]"),
            "{cmd}: {r:?}"
        );
    }
    assert!(
        !ws.exists(".strata/dev/journal.jsonl"),
        "a refused up starts nothing"
    );

    ws.profile(
        "t",
        &profile("    reads: [net]\n", "    reads: {index.ts: []}\n"),
    );
    let r = ws.strata(&["validate", "-p", "t", "--strict"]);
    assert_eq!(r.code, 0, "declared: nothing left to warn of: {r:?}");
    let r = ws.strata(&["up", "-p", "t"]);
    assert_eq!(r.code, 0, "{r:?}");
    // net's program changes, its outputs do not.
    ws.pulumi_project(
        "net",
        "net",
        "# edited\nresources:\n  vpc:\n    type: fake:index:Thing\n    properties:\n      x: vpc-1\noutputs:\n  vpc: ${vpc.x}\n",
    );
    let r = ws.strata(&["up", "-p", "t", "--changed", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.finished_with("succeeded"),
        ["net"],
        "known and blind read net, whose outputs are the same; solo reads nothing: {r:?}"
    );
}

/// `show` lists a reference it cannot read where it lists the others: the JSON as
/// `unreadable_references` (file:line from the workspace root), the tree as `reads ?`.
#[test]
fn show_marks_an_unreadable_reference() {
    let ws = workspace(false, "${pulumi.organization}");
    ws.write(
        "projects/app/main.go",
        "package main\nfunc main() {\n\tpulumi.NewStackReference(ctx, \"x\", &pulumi.StackReferenceArgs{Name: name})\n}\n",
    );
    let doc = show_json(&ws);
    assert_eq!(
        project(&doc, "app")["references"],
        serde_json::json!(["net"])
    );
    assert_eq!(
        project(&doc, "app")["unreadable_references"],
        serde_json::json!(["projects/app/main.go:3"]),
        "{doc}"
    );
    assert!(project(&doc, "net").get("unreadable_references").is_none());
    let tree = ws.strata(&["show", "-p", "t"]);
    assert!(
        tree.stdout
            .contains("reads   net, ? (projects/app/main.go:3)"),
        "{}",
        tree.stdout
    );
}
