//! `--format argo`: an Argo Workflow whose DAG is the plan.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml::Value as Yaml;

use super::*;

/// The Argo DAG as path -> dependencies (as paths), tasks in file order.
pub(super) fn argo_graph(doc: &Yaml) -> (Vec<String>, BTreeMap<String, BTreeSet<String>>) {
    assert_eq!(doc["apiVersion"], "argoproj.io/v1alpha1");
    assert_eq!(doc["kind"], "Workflow");
    let entry = doc["spec"]["entrypoint"].as_str().unwrap();
    let templates = doc["spec"]["templates"].as_sequence().unwrap();
    let dag = templates
        .iter()
        .find(|t| t["name"] == entry)
        .expect("the entrypoint template");
    let tasks = dag["dag"]["tasks"].as_sequence().unwrap();
    let path_of: BTreeMap<String, String> = tasks
        .iter()
        .map(|t| {
            let name = t["name"].as_str().unwrap().to_string();
            assert_dns_label(&name, "task name");
            let params = t["arguments"]["parameters"].as_sequence().unwrap();
            let project = params.iter().find(|p| p["name"] == "project").unwrap();
            (name, project["value"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(path_of.len(), tasks.len(), "task names are unique");
    let order = tasks
        .iter()
        .map(|t| path_of[t["name"].as_str().unwrap()].clone())
        .collect();
    let graph = tasks
        .iter()
        .map(|t| {
            let deps = strs(t.get("dependencies"))
                .into_iter()
                .map(|d| path_of[&d].clone())
                .collect();
            (path_of[t["name"].as_str().unwrap()].clone(), deps)
        })
        .collect();
    (order, graph)
}

#[test]
fn argo_dag_follows_the_plan() {
    let (plan, text) = plan_and_export(MIXED, "argo");
    let doc = yaml(&text);
    let (order, graph) = argo_graph(&doc);
    assert_eq!(order, plan.order_without_secrets());
    assert_eq!(graph, plan.bridged(), "dependencies are the plan's edges");
    assert!(
        doc["metadata"]["generateName"]
            .as_str()
            .unwrap()
            .starts_with("strata-t-dev-")
    );
    let params = doc["spec"]["arguments"]["parameters"]
        .as_sequence()
        .unwrap();
    assert!(
        params
            .iter()
            .any(|p| p["name"] == "image" && p["value"] == "ghcr.io/example/strata:latest")
    );
    let project = doc["spec"]["templates"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "project")
        .expect("the project template");
    assert_eq!(
        strs(project["container"].get("args")),
        [
            "up",
            "--provider",
            "t",
            "--stack",
            "dev",
            "--project",
            "{{inputs.parameters.project}}",
            "--non-interactive"
        ]
    );
    // k8s/build feeds k8s/push: their outputs share a volume.
    assert!(doc["spec"].get("volumeClaimTemplates").is_some());
}
