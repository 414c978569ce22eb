//! Inputs whose upstream is not part of the run: read from its deployed stack, and an
//! error naming the projects, the output and the command to run when they cannot be.

use std::collections::BTreeSet;

use serde_json::json;

use super::{calls_text, ends, network_and_web, the_up, up_projects};

#[test]
fn missing_upstream_output_names_both_projects_and_the_output() {
    let ws = network_and_web(&[], &[("vpc_id", "no_such_output")]);

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 3, "a missing input is exit 3: {r:?}");
    let all = r.all();
    for name in ["base/network", "apps/web", "no_such_output"] {
        assert!(all.contains(name), "the error should name `{name}`: {r:?}");
    }
    assert_eq!(up_projects(&ws, 0), BTreeSet::from(["network".to_string()]));
}

#[test]
fn piecemeal_project_reads_inputs_from_the_deployed_upstream_stack() {
    const TOKEN: &str = "tok-deployed-s3cr3t";
    let mut ws = network_and_web(&[], &[("vpc_id", "vpc_id"), ("token", "token")]);
    ws.fake_outputs("network", json!({"vpc_id": "vpc-deployed-1"}));
    ws.fake_secret_outputs("network", json!({"token": TOKEN}));
    ws.strata_ok(&["up"]);

    // Were network to run again, its output would change: web must get what is deployed.
    let since = ws.calls().len();
    ws.fake_outputs("network", json!({"vpc_id": "vpc-WRONG-rerun"}));
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        &format!(r#"{{"web:vpc_id":"vpc-deployed-1","web:token":"{TOKEN}"}}"#),
    );
    let r = ws.strata_ok(&["up", "--project", "apps/web"]);
    assert_eq!(up_projects(&ws, since), BTreeSet::from(["web".to_string()]));
    let web = the_up(&ws, since, "web");
    assert_eq!(web["config"]["web:vpc_id"], "vpc-deployed-1");
    assert_eq!(web["config"]["web:token"], "[secure]");
    // The upstream outputs were read from its stack.
    assert!(
        ends(&ws, since)
            .iter()
            .any(|c| c["project"] == "network" && c["command"] == "stack output"),
        "{}",
        calls_text(&ws)
    );
    assert!(!r.all().contains(TOKEN), "{r:?}");
}

#[test]
fn upstream_never_deployed_is_an_error_naming_the_command_to_run() {
    let ws = network_and_web(&[], &[("vpc_id", "vpc_id")]);

    let r = ws.strata(&["up", "--project", "apps/web"]);
    assert_eq!(r.code, 3, "a missing input is exit 3 (DESIGN §2): {r:?}");
    let all = r.all();
    assert!(all.contains("base/network"), "{r:?}");
    assert!(
        all.contains("not been deployed")
            || all.contains("never been deployed")
            || all.contains("not deployed"),
        "{r:?}"
    );
    assert!(
        all.contains("strata up"),
        "the error should name the command to run: {r:?}"
    );
    assert!(up_projects(&ws, 0).is_empty(), "{}", calls_text(&ws));
}
