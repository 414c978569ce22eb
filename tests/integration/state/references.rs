//! Stack references: a Pulumi YAML project reads another's deployed outputs, with the
//! stack, provider and organization strata gives every child (on Pulumi Cloud, the
//! `whoami` user).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use super::{NETWORK, WEB, chain_workspace, the_up, workspace};
use crate::support::*;

#[test]
fn stack_reference_in_pulumi_yaml_project_resolves() {
    let mut ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: base/cluster\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/cluster:cluster_vpc\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project(
        "base/cluster",
        "cluster",
        "resources:\n  netRef:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${pulumi.organization}/network/${pulumi.stack}\n  cluster:\n    type: fake:eks:Cluster\n    properties:\n      vpcId: ${netRef.outputs[\"vpc_id\"]}\noutputs:\n  cluster_vpc: ${cluster.vpcId}\n",
    );
    ws.pulumi_project("apps/web", "web", WEB);
    ws.fake_outputs("network", json!({"vpc_id": "vpc-from-ref-42"}));
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        r#"{"web:vpc_id":"vpc-from-ref-42"}"#,
    );

    ws.strata_ok(&["up"]);

    // Every child knows the stack, provider, infra type and organization.
    let cluster = the_up(&ws, 0, "cluster");
    assert_eq!(cluster["exit_code"], 0);
    let env = &cluster["env"];
    assert_eq!(env["STRATA_STACK"], "dev", "{env}");
    assert_eq!(env["STRATA_PROVIDER"], "test");
    assert_eq!(env["STRATA_INFRA_TYPE"], "test");
    assert_eq!(env["STRATA_ORG"], "organization");
    assert!(
        env["PULUMI_BACKEND_URL"]
            .as_str()
            .is_some_and(|u| u.starts_with("file://") && u.ends_with(".strata/backend")),
        "{env}"
    );

    // The reference read network's deployed stack from the file backend...
    let state = ws.read(".strata/backend/.pulumi/stacks/cluster/dev.json");
    assert!(state.contains("vpc-from-ref-42"), "{state}");
    // ...and its output flowed on into web's config (the fake checked it).
    let web = the_up(&ws, 0, "web");
    assert_eq!(web["config"]["web:vpc_id"], "vpc-from-ref-42");
}

/// On Pulumi Cloud (a backend that is not `file://`) and without STRATA_ORG/PULUMI_ORG,
/// the organization for stack references is the `pulumi whoami` user, asked once per run.
#[test]
fn on_pulumi_cloud_strata_org_is_the_whoami_user_asked_once() {
    let mut ws = chain_workspace();
    // The fake's Pulumi Cloud stand-in, whose default organization is not the user.
    ws.on_fake_pulumi_cloud(&ws.path("cloud-state"));
    ws.set_env("FAKE_PULUMI_LOG_ENV", "STRATA_ORG");
    let whoamis = |ws: &Ws| {
        ws.calls()
            .into_iter()
            .filter(|c| c["event"] == "start" && c["command"] == "whoami")
            .count()
    };
    ws.strata_ok(&["up"]);
    assert_eq!(whoamis(&ws), 1, "whoami once per run, not per project");
    let ups: Vec<Value> = ws
        .calls()
        .into_iter()
        .filter(|c| c["event"] == "start" && c["command"] == "up")
        .collect();
    // Not a file backend: the first `up` of each project finds no stack (exit 6), then
    // strata runs `stack init` and the `up` again.
    let projects: BTreeSet<String> = ups
        .iter()
        .filter_map(|c| c["project"].as_str().map(String::from))
        .collect();
    assert_eq!(projects.len(), 4, "{ups:#?}");
    for c in ups {
        assert_eq!(c["env"]["STRATA_ORG"], "alice", "{c}");
    }
    // With STRATA_ORG in the environment file, whoami is not asked.
    ws.env_file("PULUMI_STACK=dev\nSTRATA_ORG=acme\n");
    ws.strata_ok(&["up"]);
    assert_eq!(whoamis(&ws), 1, "no second whoami");
}
