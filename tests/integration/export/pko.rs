//! `--format pko`: one Pulumi Kubernetes Operator Stack per Pulumi project, its
//! prerequisites the plan's edges; command projects left out, named and bridged.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml::Value as Yaml;

use super::*;

/// The PKO Stacks as path -> (metadata.name, prerequisites as paths).
fn pko_graph(docs: &[Yaml]) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let path_of: BTreeMap<String, String> = docs
        .iter()
        .map(|d| {
            assert_eq!(d["apiVersion"], "pulumi.com/v1");
            assert_eq!(d["kind"], "Stack");
            let name = d["metadata"]["name"].as_str().unwrap().to_string();
            assert_dns_label(&name, "metadata.name");
            let dir = d["spec"]["repoDir"].as_str().unwrap();
            let path = dir
                .strip_prefix("projects/")
                .expect("repoDir under projects/");
            (name, path.to_string())
        })
        .collect();
    assert_eq!(path_of.len(), docs.len(), "metadata.names are unique");
    docs.iter()
        .map(|d| {
            let name = d["metadata"]["name"].as_str().unwrap().to_string();
            let prereqs = d["spec"]
                .get("prerequisites")
                .and_then(|p| p.as_sequence())
                .map(|s| {
                    s.iter()
                        .map(|p| {
                            let n = p["name"].as_str().unwrap();
                            path_of
                                .get(n)
                                .unwrap_or_else(|| panic!("prerequisite names no Stack: {n}"))
                                .clone()
                        })
                        .collect()
                })
                .unwrap_or_default();
            (path_of[&name].clone(), (name, prereqs))
        })
        .collect()
}

#[test]
fn pko_stacks_follow_the_plan() {
    let (plan, text) = plan_and_export(PULUMI_ONLY, "pko");
    let docs = yaml_docs(&text);
    assert_eq!(
        docs.len(),
        plan.order_without_secrets().len(),
        "one Stack per project"
    );
    let order: Vec<String> = docs
        .iter()
        .map(|d| d["spec"]["repoDir"].as_str().unwrap()["projects/".len()..].to_string())
        .collect();
    assert_eq!(
        order,
        plan.order_without_secrets(),
        "Stacks in execution order"
    );
    let graph = pko_graph(&docs);
    let prereqs: BTreeMap<String, BTreeSet<String>> = graph
        .iter()
        .map(|(p, (_, pre))| (p.clone(), pre.clone()))
        .collect();
    assert_eq!(
        prereqs,
        plan.bridged(),
        "spec.prerequisites are the plan's edges"
    );
    for d in &docs {
        let path = &d["spec"]["repoDir"].as_str().unwrap()["projects/".len()..];
        assert_eq!(
            d["spec"]["stack"],
            Yaml::from(format!("organization/{}/dev", plan.name[path]))
        );
        assert_eq!(d["spec"]["refresh"], true);
        assert_eq!(d["spec"]["destroyOnFinalize"], false);
        for k in ["PULUMI_CONFIG_PASSPHRASE", "PULUMI_ACCESS_TOKEN"] {
            assert_eq!(d["spec"]["envRefs"][k]["type"], "Secret", "{k}");
        }
        for p in d["spec"]
            .get("prerequisites")
            .and_then(|p| p.as_sequence())
            .into_iter()
            .flatten()
        {
            assert!(p["requirement"]["succeededWithinDuration"].is_string());
        }
    }
}

#[test]
fn pko_leaves_command_projects_out_names_them_and_bridges() {
    let ws = workspace(MIXED);
    let r = ws.run_ok("export", &["--format", "pko"]);
    for needle in ["k8s/build", "k8s/push"] {
        assert!(r.stderr.contains(needle), "stderr lacks {needle}\n{r:?}");
        assert!(
            r.stdout.contains(needle),
            "the header lacks {needle}\n{r:?}"
        );
    }
    let docs = yaml_docs(&r.stdout);
    let paths: Vec<&str> = docs
        .iter()
        .map(|d| {
            d["metadata"]["annotations"]["strata/path"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert!(
        !paths.contains(&"k8s/build") && !paths.contains(&"k8s/push"),
        "{paths:?}"
    );
    // k8s/app needed k8s/push, which needed k8s/build: bridged to what they needed.
    let app = docs
        .iter()
        .find(|d| d["metadata"]["annotations"]["strata/path"] == "k8s/app")
        .unwrap();
    let pre: Vec<&str> = app["spec"]["prerequisites"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(
        pre.iter()
            .any(|n| n.contains("infra-cluster") || n.contains("infra-registry")),
        "{pre:?}"
    );
}
