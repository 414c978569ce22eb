//! Unit tests of the execution graph: building, cycles, order, waves, subplans.

use super::*;

const HEAD: &str = "description: d\ninfra_type: T\n";
/// The stack's cluster, which a profile whose `@secrets` writes into one must name.
const CLUSTER: &str = "cluster: {kubeconfig: kubeconfig, context: dev}\n";

/// The plan of the profile `body` (after the head).
fn plan_of(body: &str) -> Result<Plan> {
    crate::plan::testing::plan_of(&format!("{HEAD}{body}"), &[])
}

/// The plan of the profile `body`, which must build.
fn planned(body: &str) -> Plan {
    plan_of(body).unwrap()
}

fn order(p: &Plan) -> Vec<&str> {
    p.order.iter().map(|&i| p.nodes[i].path.as_str()).collect()
}

fn wave(p: &Plan, path: &str) -> usize {
    p.nodes[p.index_of(path).unwrap()].wave
}

/// The paths `path`'s step waits for.
fn needs<'p>(p: &'p Plan, path: &str) -> Vec<&'p str> {
    p.needs_paths(p.index_of(path).unwrap())
}

#[test]
fn plain_list_runs_in_written_order() {
    let p = planned("infrastructure:\n  - path: c\n  - path: a\n  - path: b\n");
    assert_eq!(order(&p), ["c", "a", "b"]);
    assert_eq!((wave(&p, "c"), wave(&p, "a"), wave(&p, "b")), (1, 2, 3));
}

#[test]
fn empty_needs_runs_beside() {
    let p =
        planned("infrastructure:\n  - path: vpc\n  - path: eks\n  - path: ecr\n    needs: []\n");
    assert_eq!(wave(&p, "vpc"), 1);
    assert_eq!(wave(&p, "ecr"), 1);
    assert_eq!(wave(&p, "eks"), 2);
    assert_eq!(
        order(&p),
        ["vpc", "eks", "ecr"],
        "ties keep the written order"
    );
}

#[test]
fn explicit_needs_replace_previous() {
    let p = planned("infrastructure:\n  - path: a\n  - path: b\n  - path: c\n    needs: [a]\n");
    assert_eq!(needs(&p, "c"), ["a"]);
    assert_eq!(wave(&p, "c"), 2);
}

#[test]
fn inputs_are_implied_needs() {
    let p = planned(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: []\n    inputs:\n      'x:y': b:out\n",
    );
    assert_eq!(needs(&p, "c"), ["b"]);
}

#[test]
fn kubernetes_waits_for_all_infrastructure_and_secrets_step() {
    let p = planned(&format!(
        "{CLUSTER}secrets:\n  - key: ns:pw\n    prompt: pw\ninfrastructure:\n  - path: a\n  - path: b\n    needs: []\nkubernetes:\n  - path: k1\n  - path: k2\n    needs: []\n"
    ));
    assert_eq!(needs(&p, SECRETS_STEP), ["a", "b"]);
    assert_eq!(needs(&p, "k1"), [SECRETS_STEP]);
    assert_eq!(needs(&p, "k2"), [SECRETS_STEP]);
    assert_eq!(wave(&p, SECRETS_STEP), 2);
    assert_eq!(wave(&p, "k2"), 3);
}

#[test]
fn no_secrets_step_where_no_kubernetes_project_reads_the_secret() {
    // Only an infrastructure entry's secret, or no kubernetes stage: no step.
    for yaml in [
        "infrastructure:\n  - path: a\n    secrets:\n      - key: ns:pw\n        prompt: pw\nkubernetes:\n  - path: k\n",
        "secrets:\n  - key: ns:pw\n    prompt: pw\ninfrastructure:\n  - path: a\n",
    ] {
        let p = planned(yaml);
        assert!(p.index_of(SECRETS_STEP).is_none(), "{yaml}");
    }
    // A kubernetes entry's secret, or a named Secret: the step is there.
    for yaml in [
        "infrastructure:\n  - path: a\nkubernetes:\n  - path: k\n    secrets:\n      - key: ns:pw\n        prompt: pw\n",
        "secret_name: app-secrets\ninfrastructure:\n  - path: a\n    secrets:\n      - key: ns:pw\n        prompt: pw\nkubernetes:\n  - path: k\n",
    ] {
        let p = planned(&format!("{CLUSTER}{yaml}"));
        assert!(p.index_of(SECRETS_STEP).is_some(), "{yaml}");
    }
}

#[test]
fn without_secrets_kubernetes_needs_infrastructure_sinks() {
    let p = planned("infrastructure:\n  - path: a\n  - path: b\nkubernetes:\n  - path: k\n");
    assert!(p.index_of(SECRETS_STEP).is_none());
    assert_eq!(needs(&p, "k"), ["b"]);
}

#[test]
fn cycle_is_printed() {
    let e = plan_of("infrastructure:\n  - path: a\n    needs: [c]\n  - path: b\n  - path: c\n")
        .unwrap_err();
    assert_eq!(e.exit_code(), 3);
    e.assert_says("a → b → c → a");
}

#[test]
fn cross_stage_cycle_explains_barrier() {
    let e = plan_of("infrastructure:\n  - path: a\n    needs: [k]\nkubernetes:\n  - path: k\n")
        .unwrap_err();
    e.assert_says("cycle");
    e.assert_says("infrastructure entry cannot need");
}

#[test]
fn subplan_bridges_unselected_prerequisites() {
    let p = planned("infrastructure:\n  - path: a\n  - path: b\n  - path: c\n");
    let sub = p.subplan(&[true, false, true]);
    assert_eq!(needs(&sub, "c"), ["a"]);
}

#[test]
fn reverse_runs_dependents_first() {
    let p = planned(
        "infrastructure:\n  - path: vpc\n  - path: eks\n  - path: ecr\n    needs: []\nkubernetes:\n  - path: app\n",
    );
    let r = p.reversed();
    let o = order(&r);
    assert_eq!(o[0], "app");
    let pos = |x: &str| o.iter().position(|y| *y == x).unwrap();
    assert!(pos("eks") < pos("vpc"));
    assert!(pos("app") < pos("ecr"));
}

#[test]
fn project_resolves_by_pulumi_name() {
    let p = planned("infrastructure:\n  - path: x/vpc\n");
    assert_eq!(p.resolve("vpc").unwrap(), 0);
    assert_eq!(p.resolve("projects/x/vpc/").unwrap(), 0);
}

#[test]
fn critical_path_sums_the_longest_chain() {
    let p = planned("infrastructure:\n  - path: a\n  - path: b\n  - path: c\n    needs: []\n");
    assert_eq!(p.critical_path(|_| 10), 20);
}

#[test]
fn an_unknown_project_suggests_the_path_whose_last_segment_is_close() {
    let p = planned("infrastructure:\n  - path: local/network\n  - path: local/app\n");
    for (wanted, meant) in [("ap", "local/app"), ("netwrk", "local/network")] {
        let e = p.resolve(wanted).unwrap_err();
        e.assert_says(&format!("Did you mean `{meant}`?"));
    }
}
