//! The execution graph's rules: written order, `needs`, `inputs`, the stages, and the
//! `@secrets` step between them.

use super::*;

#[test]
fn plain_list_runs_in_written_order() {
    // Written c, a, b on purpose: the order is the list's, not alphabetical.
    let j = graph_of("infrastructure:\n  - path: c\n  - path: a\n  - path: b\n");
    assert_eq!(order(&j), ["c", "a", "b"]);
    assert_eq!((wave(&j, "c"), wave(&j, "a"), wave(&j, "b")), (1, 2, 3));
    assert_eq!(needs(&j, "c"), Vec::<String>::new());
    assert_eq!(needs(&j, "a"), ["c"]);
    assert_eq!(needs(&j, "b"), ["a"]);
}

#[test]
fn empty_needs_runs_beside() {
    let j = graph_of("infrastructure:\n  - path: a\n  - path: b\n  - path: c\n    needs: []\n");
    assert_eq!(needs(&j, "c"), Vec::<String>::new());
    assert_eq!(wave(&j, "a"), 1);
    assert_eq!(wave(&j, "c"), 1, "needs: [] runs in the first wave");
    assert_eq!(wave(&j, "b"), 2);
}

#[test]
fn explicit_needs_replace_the_previous_entry() {
    let j = graph_of(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: [a]\n",
    );
    assert_eq!(
        needs(&j, "c"),
        ["a"],
        "c needs exactly a, not the previous entry b"
    );
    assert_eq!(wave(&j, "c"), 2);
    assert_eq!(wave(&j, "b"), 1);
}

#[test]
fn inputs_imply_needs() {
    let j = graph_of(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: []\n    inputs:\n      c-proj:vpc: a:vpc_id\n",
    );
    assert_eq!(needs(&j, "c"), ["a"]);
    assert!(pos(&j, "c") > pos(&j, "a"));
    assert_eq!(wave(&j, "c"), 2);
    // Inputs add to explicit needs, they do not replace them.
    let j = graph_of(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: [b]\n    inputs:\n      c-proj:vpc: a:vpc_id\n",
    );
    assert_eq!(needs(&j, "c"), ["a", "b"]);
}

#[test]
fn every_kubernetes_entry_runs_after_every_infrastructure_entry() {
    let ws = Ws::new();
    projects(&ws, &["i/one", "i/two", "i/three", "k/x", "k/y"]);
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: i/one\n  - path: i/two\n    needs: []\n  - path: i/three\n    needs: [i/two]\nkubernetes:\n  - path: k/x\n  - path: k/y\n    needs: []\n"
        ),
    );
    let j = graph(&ws, &[]);
    assert!(
        !has_project(&j, "@secrets"),
        "no secrets declared: no secrets step\n{j:#}"
    );
    let infra = paths_of_stage(&j, "infrastructure");
    let k8s = paths_of_stage(&j, "kubernetes");
    assert_eq!(infra.len(), 3);
    assert_eq!(k8s.len(), 2);
    let last_infra_wave = infra.iter().map(|p| wave(&j, p)).max().unwrap();
    let last_infra_pos = infra.iter().map(|p| pos(&j, p)).max().unwrap();
    for k in &k8s {
        assert!(
            wave(&j, k) > last_infra_wave,
            "{k} must come after every infrastructure entry\n{j:#}"
        );
        assert!(
            pos(&j, k) > last_infra_pos,
            "{k} is ordered before an infrastructure entry\n{j:#}"
        );
    }
    // Even with `needs: []`, a kubernetes entry waits for the whole infrastructure stage.
    assert_eq!(wave(&j, "k/y"), wave(&j, "k/x"));
}

#[test]
fn secrets_step_sits_between_stages_only_when_secrets_are_declared() {
    let body =
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\nkubernetes:\n  - path: c\n";
    // With profile-level secrets.
    let j = graph_of(&format!(
        "cluster: {{kubeconfig: kubeconfig, context: dev}}\nsecrets:\n  - key: app:token\n    prompt: Token\n{body}"
    ));
    let s = project(&j, "@secrets");
    assert_eq!(s["stage"], "secrets");
    assert_eq!(
        needs(&j, "@secrets"),
        ["a", "b"],
        "the step waits for the whole infrastructure stage"
    );
    assert_eq!(needs(&j, "c"), ["@secrets"]);
    assert!(pos(&j, "a") < pos(&j, "@secrets") && pos(&j, "b") < pos(&j, "@secrets"));
    assert!(pos(&j, "@secrets") < pos(&j, "c"));
    assert_eq!(wave(&j, "@secrets"), 2);
    assert_eq!(wave(&j, "c"), 3);

    // Only an entry's own secrets: still the step.
    let j = graph_of(
        "cluster: {kubeconfig: kubeconfig, context: dev}\ninfrastructure:\n  - path: a\n  - path: b\n    needs: []\nkubernetes:\n  - path: c\n    secrets:\n      - key: c:pass\n        prompt: Pass\n",
    );
    assert!(has_project(&j, "@secrets"), "{j:#}");

    // No secrets: no step, the kubernetes stage needs the infrastructure directly.
    let j = graph_of(body);
    assert!(!has_project(&j, "@secrets"), "{j:#}");
    assert!(!order(&j).iter().any(|p| p == "@secrets"));
    assert_eq!(needs(&j, "c"), ["a", "b"]);
    assert_eq!(wave(&j, "c"), 2);
}
