//! `strata export --format github-actions|pko|argo`: the plan handed to distributed
//! engines, driven through the real binary. Every export is parsed back with serde_yaml
//! and its edges compared with `strata show --format json` (the built-in `@secrets`
//! step bridged: whatever needs it needs what it needs). This file holds the shared
//! profiles and readers; one file per format, the command's own rules, and the shipped
//! profiles below.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_yaml::Value as Yaml;

use crate::support::*;

mod adopted;
mod argo;
mod command;
mod github_actions;
mod pko;
mod repo;

/// The start both profiles below share: secrets (so an `@secrets` step) and an
/// infrastructure stage of Pulumi projects wired by `inputs:`.
macro_rules! secrets_and_infrastructure {
    () => {
        "cluster: {kubeconfig: kubeconfig, context: dev}
secrets:
  - key: app:password
    prompt: App password
infrastructure:
  - path: infra/net
  - path: infra/cluster
    inputs:
      cluster:net_id: infra/net:id
  - path: infra/registry
    needs: []
kubernetes:
"
    };
}

/// A profile with secrets, Pulumi projects wired by `inputs:`, and two command projects
/// in the kubernetes stage, one feeding the other.
pub(super) const MIXED: &str = concat!(
    secrets_and_infrastructure!(),
    "  - path: k8s/build
  - path: k8s/push
    inputs:
      push:image: k8s/build:image
  - path: k8s/ns
    needs: []
  - path: k8s/app
    needs: [k8s/push, k8s/ns]
"
);

/// The same graph with Pulumi projects only (an operator can run it).
pub(super) const PULUMI_ONLY: &str = concat!(
    secrets_and_infrastructure!(),
    "  - path: k8s/ns
  - path: k8s/logs
    needs: []
  - path: k8s/app
    needs: [k8s/ns, k8s/logs]
"
);

pub(super) const COMMANDS: [&str; 2] = ["k8s/build", "k8s/push"];

/// A workspace with profile `t` = HEAD + `body`; every path is a Pulumi project named
/// after its last component, except `COMMANDS`, which are command projects.
pub(super) fn workspace(body: &str) -> Ws {
    with_projects(Ws::new(), body)
}

/// `ws` with the profile and projects of [`workspace`]`(body)`, in a repository that
/// holds strata's own Cargo.toml, so a GitHub Actions workflow builds strata from it
/// (`--strata-from path`, the default there; adopted.rs exports without it).
pub(super) fn with_projects(ws: Ws, body: &str) -> Ws {
    ws.write(
        "Cargo.toml",
        "[package]\nname = \"strata\"\nversion = \"0.1.0\"\n",
    );
    ws.profile("t", &format!("{HEAD}{body}"));
    for line in body.lines() {
        if let Some(path) = line.trim().strip_prefix("- path: ") {
            if COMMANDS.contains(&path) {
                ws.command_project(path, "true", "true");
            } else {
                ws.pulumi_project(path, path.rsplit('/').next().unwrap(), "");
            }
        }
    }
    ws
}

/// What `show --format json` says, per path: (needs, kind).
pub(super) struct Shown {
    order: Vec<String>,
    needs: BTreeMap<String, BTreeSet<String>>,
    kind: BTreeMap<String, String>,
    name: BTreeMap<String, String>,
}

pub(super) fn shown(r: &Run) -> Shown {
    assert_eq!(r.code, 0, "show failed\n{r:?}");
    let j: serde_json::Value = serde_json::from_str(&r.stdout).expect("show json");
    let mut s = Shown {
        order: j["order"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_str().unwrap().to_string())
            .collect(),
        needs: BTreeMap::new(),
        kind: BTreeMap::new(),
        name: BTreeMap::new(),
    };
    for p in j["projects"].as_array().unwrap() {
        let path = p["path"].as_str().unwrap().to_string();
        s.needs.insert(
            path.clone(),
            p["needs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
                .collect(),
        );
        s.kind
            .insert(path.clone(), p["kind"].as_str().unwrap().to_string());
        s.name.insert(path, p["name"].as_str().unwrap().to_string());
    }
    s
}

impl Shown {
    /// The needs of every step but `@secrets`, with `@secrets` replaced by its needs.
    fn bridged(&self) -> BTreeMap<String, BTreeSet<String>> {
        let secrets = self.needs.get("@secrets").cloned().unwrap_or_default();
        self.needs
            .iter()
            .filter(|(p, _)| p.as_str() != "@secrets")
            .map(|(p, needs)| {
                let mut set = BTreeSet::new();
                for n in needs {
                    if n == "@secrets" {
                        set.extend(secrets.iter().cloned());
                    } else {
                        set.insert(n.clone());
                    }
                }
                (p.clone(), set)
            })
            .collect()
    }

    /// The execution order without `@secrets`.
    fn order_without_secrets(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|p| p.as_str() != "@secrets")
            .cloned()
            .collect()
    }
}

pub(super) fn yaml(text: &str) -> Yaml {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("not YAML: {e}\n{text}"))
}

pub(super) fn yaml_docs(text: &str) -> Vec<Yaml> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Yaml::deserialize(d).unwrap_or_else(|e| panic!("not YAML: {e}\n{text}")))
        .collect()
}

pub(super) fn strs(v: Option<&Yaml>) -> Vec<String> {
    v.and_then(|s| s.as_sequence())
        .map(|s| s.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// Asserts `name` is a DNS label (what Kubernetes allows as a name): 1 to 63 lowercase
/// letters, digits and `-`, with no `-` at either end; `what` names it on failure.
#[track_caller]
pub(super) fn assert_dns_label(name: &str, what: &str) {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
    let label = !name.is_empty() && name.len() <= 63 && name.chars().all(allowed);
    let ends = name.starts_with('-') || name.ends_with('-');
    assert!(label && !ends, "invalid {what} {name}");
}

/// What `show --format json` and `export --format <format>` say of [`workspace`]`(body)`
/// on stack `dev`: the plan, and the export, asserted to start with the header that
/// says how to regenerate it.
#[track_caller]
pub(super) fn plan_and_export(body: &str, format: &str) -> (Shown, String) {
    let ws = workspace(body);
    let plan = shown(&ws.run("show", &["--format", "json"]));
    let r = ws.run_ok("export", &["--format", format]);
    assert_header(&r.stdout, format, "t");
    (plan, r.stdout)
}

pub(super) fn assert_header(text: &str, format: &str, provider: &str) {
    let first = text.lines().next().unwrap_or_default();
    assert_eq!(
        first,
        format!("# Generated by `strata export --format {format} -p {provider} -s dev`."),
        "{text}"
    );
    let comment: String = text
        .lines()
        .take_while(|l| l.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(comment.contains("regenerate"), "{comment}");
}
