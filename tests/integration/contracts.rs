//! Output contracts (issue 45), with the fake pulumi: a preview names each output
//! another project reads that the update would remove or retype (the reader, the output,
//! where it is read: the profile's `inputs:` or a YAML program's StackReference), and a
//! `policy:` rule denies such a change as `output-removed`, in a preview and in an `up`.

use crate::gates::finished;
use crate::run::{name, ok, run};
use crate::support::*;

/// alpha outputs `value` and `cidr`; charlie takes alpha's `value` through `inputs:` and
/// reads bravo's `value` through a StackReference in its YAML program.
fn readers(policy: &str) -> Ws {
    let ws = Ws::new();
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: alpha\n  - path: bravo\n    needs: []\n  - path: charlie\n    needs: [alpha, bravo]\n    inputs:\n      {c}:v: alpha:value\n{policy}",
            c = name("charlie")
        ),
    );
    let body = "resources:\n  first:\n    type: fake:index:Thing\n    properties:\n      x: 1\noutputs:\n  value: ${first.x}\n  cidr: 10.0.0.0/16\n";
    ws.pulumi_project("alpha", &name("alpha"), body);
    ws.pulumi_project("bravo", &name("bravo"), body);
    ws.pulumi_project(
        "charlie",
        &name("charlie"),
        &format!(
            "config:\n  v:\n    type: string\nresources:\n  b:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: organization/{}/${{pulumi.stack}}\n  first:\n    type: fake:index:Thing\n    properties:\n      x: ${{b.outputs[\"value\"]}}\noutputs:\n  value: ${{first.x}}\n",
            name("bravo")
        ),
    );
    ws
}

/// `project`'s program with its output `value` gone (`cidr` kept).
fn drop_value(ws: &Ws, project: &str) {
    ws.pulumi_project(
        project,
        &name(project),
        "resources:\n  first:\n    type: fake:index:Thing\n    properties:\n      x: 1\noutputs:\n  cidr: 10.0.0.0/16\n",
    );
}

#[test]
fn a_preview_names_each_read_output_the_update_removes_and_where_it_is_read() {
    let ws = readers("");
    ok(&ws, "up", &[]);
    drop_value(&ws, "alpha");
    drop_value(&ws, "bravo");
    let r = run(&ws, "preview", &["--output", "json"]);
    assert_eq!(r.code, 0, "named, not refused without a rule: {r:?}");
    let events = r.events();
    let alpha = finished(&events, "alpha");
    let said = alpha["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("removes output `value`, which charlie reads (providers/t.yaml:10)"),
        "{alpha}"
    );
    let bravo = finished(&events, "bravo");
    let said = bravo["message"].as_str().unwrap_or_default();
    assert!(
        said.contains(
            "removes output `value`, which charlie reads (projects/charlie/Pulumi.yaml:14)"
        ),
        "{bravo}"
    );
    // An output nobody reads goes unnamed; a project nobody reads says nothing.
    let charlie = finished(&events, "charlie");
    assert!(!charlie.to_string().contains("would break"), "{charlie}");
}

#[test]
fn an_output_removed_rule_denies_the_change_in_a_preview_and_in_an_up() {
    let ws = readers(
        "policy:\n  - name: keep-contracts\n    select: alpha\n    deny: [output-removed]\n",
    );
    ok(&ws, "up", &[]);
    // Another output nobody reads may go: no denial.
    ws.pulumi_project(
        "alpha",
        &name("alpha"),
        "resources:\n  first:\n    type: fake:index:Thing\n    properties:\n      x: 1\noutputs:\n  value: ${first.x}\n",
    );
    let fine = run(&ws, "preview", &["--output", "json"]);
    assert_eq!(fine.code, 0, "{fine:?}");
    drop_value(&ws, "alpha");
    let r = run(&ws, "preview", &["--output", "json"]);
    assert_eq!(r.code, 5, "{r:?}");
    let events = r.events();
    let alpha = finished(&events, "alpha");
    assert_eq!(alpha["denied"]["rule"], "keep-contracts", "{alpha}");
    assert_eq!(
        alpha["denied"]["reason"], "would break 1 read of its outputs",
        "{alpha}"
    );
    assert_eq!(
        alpha["denied"]["resources"][0],
        "removes output `value`, which charlie reads (providers/t.yaml:10)"
    );
    let up = run(&ws, "up", &["--output", "json"]);
    assert_eq!(up.code, 5, "{up:?}");
    let events = up.events();
    assert_eq!(finished(&events, "alpha")["status"], "denied");
    // Nothing of alpha changed: its stack still outputs `value`.
    let state = ws.read(&format!(
        ".strata/backend/.pulumi/stacks/{}/dev.json",
        name("alpha")
    ));
    assert!(state.contains("\"value\""), "{state}");
}
