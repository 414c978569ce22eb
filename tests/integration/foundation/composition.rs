//! Profile composition: `include:` of a fragment, and entries placed `after:` or
//! `before:` one of it.

use super::*;

/// Projects `i/net`, `k/ns`, `k/ingress` and each of `more`; the fragment
/// `providers/common/k.yaml` = `fragment`; the profile `t` with `i/net` as infrastructure
/// and as kubernetes the fragment followed by `entries`.
fn composed(more: &[&str], fragment: &str, entries: &str) -> Ws {
    let ws = Ws::new();
    projects(&ws, &[&["i/net", "k/ns", "k/ingress"], more].concat());
    ws.write("providers/common/k.yaml", fragment);
    let kubernetes = format!("kubernetes:\n  - include: common/k.yaml\n{entries}");
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: i/net\n{kubernetes}"),
    );
    ws
}

#[test]
fn composition_include_and_after() {
    let ws = composed(
        &["k/app", "k/creds", "k/dns"],
        "- path: k/ns\n- path: k/ingress\n  needs: [k/ns]\n- path: k/app\n",
        "  - path: k/creds\n    after: k/ns\n  - path: k/dns\n    after: k/ingress\n",
    );
    let j = graph(&ws, &[]);
    assert_eq!(
        order(&j),
        ["i/net", "k/ns", "k/creds", "k/ingress", "k/dns", "k/app"]
    );
    assert_needs(
        &j,
        &[
            ("k/creds", &["k/ns"], "after: X without needs needs X"),
            (
                "k/ingress",
                &["k/creds", "k/ns"],
                "what explicitly needs X also needs the inserted entry",
            ),
            ("k/dns", &["k/ingress"], "after: k/ingress"),
            (
                "k/app",
                &["k/dns"],
                "a plain entry follows what is now before it",
            ),
        ],
    );
    // The fragment is not a provider.
    let p = ws.strata(&["providers"]);
    assert_eq!(p.code, 0, "{p:?}");
    assert!(!p.stdout.contains("common"), "{p:?}");
}

#[test]
fn composition_before() {
    let ws = composed(
        &["k/pre", "k/first"],
        "- path: k/ns\n- path: k/ingress\n  needs: [k/ns]\n",
        "  - path: k/pre\n    before: k/ingress\n  - path: k/first\n    before: k/ns\n",
    );
    let j = graph(&ws, &[]);
    assert_eq!(
        order(&j),
        ["i/net", "k/first", "k/ns", "k/pre", "k/ingress"]
    );
    assert_needs(
        &j,
        &[
            (
                "k/pre",
                &["k/ns"],
                "before: X without needs needs what X needs",
            ),
            (
                "k/ingress",
                &["k/ns", "k/pre"],
                "X needs the inserted entry",
            ),
            ("k/ns", &["k/first"], "before: k/ns"),
            ("k/first", &["i/net"], "what k/ns needed"),
        ],
    );
}

#[test]
fn composition_anchor_that_does_not_exist_is_refused() {
    let ws = abc(
        "infrastructure:\n  - path: a\nkubernetes:\n  - path: b\n  - path: c\n    after: k/nowhere\n",
    );
    let r = ws.strata(&["-p", "t", "show"]);
    assert_config_error(&r, &["providers/t.yaml", "k/nowhere", "`c`"]);
}

#[test]
fn include_of_a_missing_fragment_is_refused() {
    let ws = abc("infrastructure:\n  - path: a\nkubernetes:\n  - include: common/nope.yaml\n");
    let r = ws.strata(&["-p", "t", "show"]);
    assert_config_error(&r, &["providers/t.yaml", "common/nope.yaml"]);
}
