//! `show`: its JSON shape, the tree, DOT and Mermaid drawings, its alias, and that it
//! needs no stack config and asks nothing.

use super::*;

#[test]
fn show_json_has_the_documented_shape() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\nkubernetes:\n  - path: c\n");
    let j = show_json(&ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "json"]));
    assert_eq!(j["provider"], "t");
    assert_eq!(j["stack"], "dev");
    assert_eq!(order(&j), ["a", "b", "c"]);
    let projects = j["projects"].as_array().unwrap();
    assert_eq!(projects.len(), 3);
    for p in projects {
        for field in ["path", "name", "stage", "needs", "wave"] {
            assert!(p.get(field).is_some(), "project lacks {field}: {p}");
        }
    }
    let b = project(&j, "b");
    assert_eq!(b["name"], "b-proj");
    assert_eq!(b["stage"], "infrastructure");
    assert_eq!(project(&j, "c")["stage"], "kubernetes");
    assert_eq!(needs(&j, "b"), ["a"]);
    assert_eq!(wave(&j, "c"), 3);
}

#[test]
fn show_tree_dot_and_mermaid_draw_the_graph() {
    let ws = abc(
        "cluster: {kubeconfig: kubeconfig, context: dev}\nsecrets:\n  - key: app:token\n    prompt: Token\ninfrastructure:\n  - path: a\n    description: Network\n    on_success:\n      - run: echo up\n  - path: b\n    needs: []\nkubernetes:\n  - path: c\n    inputs:\n      c-proj:x: a:out\n",
    );
    let tree = ws.strata(&["-p", "t", "-s", "dev", "show"]);
    assert_eq!(tree.code, 0, "{tree:?}");
    for n in [
        "wave 1",
        "wave 2",
        "wave 3",
        "a",
        "b",
        "c",
        "@secrets",
        "needs",
        "Network",
        "echo up",
        "app:token",
        "parallel",
    ] {
        assert!(tree.stdout.contains(n), "tree should show {n:?}\n{tree:?}");
    }
    // The explicit --format tree is the same.
    let t2 = ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "tree"]);
    assert_eq!(t2.stdout, tree.stdout);

    let dot = ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "dot"]);
    assert_eq!(dot.code, 0, "{dot:?}");
    assert!(dot.stdout.trim_start().starts_with("digraph"), "{dot:?}");
    // IDs are quoted (a project may be called `node` or `graph`).
    assert!(dot.stdout.contains("\"a\" -> "), "{dot:?}");
    assert!(dot.stdout.contains("-> \"c\""), "{dot:?}");
    assert!(dot.stdout.trim_end().ends_with('}'), "{dot:?}");

    let mm = ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "mermaid"]);
    assert_eq!(mm.code, 0, "{mm:?}");
    // A title, then the flowchart; IDs are indexes and the paths are the labels.
    assert!(mm.stdout.starts_with("---\ntitle: "), "{mm:?}");
    assert!(mm.stdout.contains("flowchart LR"), "{mm:?}");
    let id_of = |path: &str| {
        mm.stdout
            .lines()
            .find(|l| l.trim_end().ends_with(&format!("[\"{path}\"]")))
            .and_then(|l| l.trim().split('[').next())
            .unwrap_or_else(|| panic!("no node for {path}: {mm:?}"))
            .to_string()
    };
    let (a, c) = (id_of("a"), id_of("c"));
    assert!(mm.stdout.contains(&format!("{a} -->")), "{mm:?}");
    assert!(mm.stdout.contains(&format!("--> {c}")), "{mm:?}");
}

#[test]
fn show_execution_is_an_alias_of_show() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\n");
    let a = ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "json"]);
    let b = ws.strata(&["-p", "t", "-s", "dev", "show-execution", "--format", "json"]);
    assert_eq!(a.code, 0, "{a:?}");
    assert_eq!(b.code, 0, "{b:?}");
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn show_needs_no_stack_config_and_prompts_for_nothing() {
    let ws = abc(
        "cluster: {kubeconfig: kubeconfig, context: dev}\nconfig:\n  - key: t:region\n    prompt: Which region do you want\nsecrets:\n  - key: app:token\n    prompt: Give the app token\ninfrastructure:\n  - path: a\nkubernetes:\n  - path: b\n",
    );
    let before = ws.files_under("");
    // No env file, no stack config, stdin closed; with and without a stack.
    for args in [
        &["-p", "t", "show"][..],
        &["-p", "t", "-s", "dev", "show"][..],
        &["-p", "t", "-s", "dev", "show", "--format", "json"][..],
    ] {
        let r = ws.strata(args);
        assert_eq!(r.code, 0, "{args:?}\n{r:?}");
        assert!(
            !r.all().contains("Which region"),
            "show must not prompt\n{r:?}"
        );
        assert!(
            !r.all().contains("Give the app token"),
            "show must not prompt\n{r:?}"
        );
    }
    assert!(!ws.exists("config/pulumi/Pulumi.dev.yaml"));
    assert!(!ws.exists("config/secrets"));
    assert_eq!(ws.files_under(""), before, "show must change nothing");
    assert!(ws.calls().is_empty(), "show must not call pulumi");
    let j = graph(&ws, &[]);
    assert!(j["stack"].is_null() || j["stack"].is_string(), "{j:#}");
}
