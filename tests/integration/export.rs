//! `strata export --format github-actions|pko|argo`: the plan handed to distributed
//! engines, driven through the real binary. Every export is parsed back with serde_yaml
//! and its edges compared with `strata show --format json` (the built-in `@secrets`
//! step bridged: whatever needs it needs what it needs).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use serde_yaml::Value as Yaml;

use crate::support::*;

// ---------------------------------------------------------------------------------------
// helpers

/// A profile with secrets (so an `@secrets` step), Pulumi projects wired by `inputs:`,
/// and two command projects in the kubernetes stage, one feeding the other.
const MIXED: &str = "cluster: {kubeconfig: kubeconfig, context: dev}
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
  - path: k8s/build
  - path: k8s/push
    inputs:
      push:image: k8s/build:image
  - path: k8s/ns
    needs: []
  - path: k8s/app
    needs: [k8s/push, k8s/ns]
";

/// The same graph with Pulumi projects only (an operator can run it).
const PULUMI_ONLY: &str = "cluster: {kubeconfig: kubeconfig, context: dev}
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
  - path: k8s/ns
  - path: k8s/logs
    needs: []
  - path: k8s/app
    needs: [k8s/ns, k8s/logs]
";

const COMMANDS: [&str; 2] = ["k8s/build", "k8s/push"];

/// A workspace with profile `t` = HEAD + `body`; every path is a Pulumi project named
/// after its last component, except `COMMANDS`, which are command projects.
fn workspace(body: &str) -> Ws {
    let ws = Ws::new();
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
struct Shown {
    order: Vec<String>,
    needs: BTreeMap<String, BTreeSet<String>>,
    kind: BTreeMap<String, String>,
    name: BTreeMap<String, String>,
}

fn shown(r: &Run) -> Shown {
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

fn yaml(text: &str) -> Yaml {
    serde_yaml::from_str(text).unwrap_or_else(|e| panic!("not YAML: {e}\n{text}"))
}

fn yaml_docs(text: &str) -> Vec<Yaml> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Yaml::deserialize(d).unwrap_or_else(|e| panic!("not YAML: {e}\n{text}")))
        .collect()
}

fn strs(v: Option<&Yaml>) -> Vec<String> {
    v.and_then(|s| s.as_sequence())
        .map(|s| s.iter().map(|x| x.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn assert_header(text: &str, format: &str, provider: &str) {
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

/// Checks that the workflow runs exactly the plan: a build job every other job needs,
/// each project in one job (a job runs a chain of command projects and what lies
/// between them, named `a + b`), and every need of a project either earlier in its own
/// job or in a job its job needs; no job needs another without a reason. Returns the
/// projects in job order.
fn assert_gha_follows(doc: &Yaml, plan: &Shown) -> Vec<String> {
    let jobs = doc["jobs"].as_mapping().expect("jobs");
    let mut job_of: BTreeMap<String, (String, usize)> = BTreeMap::new();
    let mut order = Vec::new();
    for (id, job) in jobs {
        let id = id.as_str().unwrap().to_string();
        assert!(
            id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
            "invalid job id {id}"
        );
        if id == "build-strata" {
            continue;
        }
        assert_eq!(
            strs(job.get("needs")).first().map(String::as_str),
            Some("build-strata"),
            "{id}"
        );
        for (k, p) in job["name"].as_str().unwrap().split(" + ").enumerate() {
            assert!(
                job_of.insert(p.to_string(), (id.clone(), k)).is_none(),
                "{p} in two jobs"
            );
            order.push(p.to_string());
        }
    }
    let bridged = plan.bridged();
    let mut wanted: BTreeSet<(String, String)> = BTreeSet::new();
    for (p, needs) in &bridged {
        let (job, k) = job_of.get(p).unwrap_or_else(|| panic!("no job runs {p}"));
        let job_needs = strs(jobs[&Yaml::from(job.as_str())].get("needs"));
        for q in needs {
            let (qjob, qk) = &job_of[q];
            if qjob == job {
                assert!(qk < k, "{q} runs after {p} in job {job}");
            } else {
                assert!(
                    job_needs.contains(qjob),
                    "job {job} ({p}) must need {qjob} ({q})"
                );
                wanted.insert((job.clone(), qjob.clone()));
            }
        }
    }
    for (id, job) in jobs {
        let id = id.as_str().unwrap();
        for n in strs(job.get("needs"))
            .into_iter()
            .filter(|n| n != "build-strata")
        {
            assert!(
                wanted.contains(&(id.to_string(), n.clone())),
                "job {id} needs {n} for no reason"
            );
        }
    }
    assert_eq!(job_of.len(), bridged.len(), "every project has a job");
    order
}

/// The `strata up` command of the job that runs `path`.
fn gha_command(doc: &Yaml, path: &str) -> String {
    let job = doc["jobs"]
        .as_mapping()
        .unwrap()
        .values()
        .find(|j| {
            j["name"]
                .as_str()
                .is_some_and(|n| n.split(" + ").any(|p| p == path))
        })
        .unwrap_or_else(|| panic!("no job for {path}"));
    job["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|s| s["run"].as_str())
        .find(|r| r.starts_with("strata up"))
        .unwrap()
        .to_string()
}

/// The Argo DAG as path -> dependencies (as paths), tasks in file order.
fn argo_graph(doc: &Yaml) -> (Vec<String>, BTreeMap<String, BTreeSet<String>>) {
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
            assert!(
                !name.is_empty()
                    && name.len() <= 63
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !name.starts_with('-')
                    && !name.ends_with('-'),
                "invalid task name {name}"
            );
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

/// The PKO Stacks as path -> (metadata.name, prerequisites as paths).
fn pko_graph(docs: &[Yaml]) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let path_of: BTreeMap<String, String> = docs
        .iter()
        .map(|d| {
            assert_eq!(d["apiVersion"], "pulumi.com/v1");
            assert_eq!(d["kind"], "Stack");
            let name = d["metadata"]["name"].as_str().unwrap().to_string();
            assert!(
                !name.is_empty()
                    && name.len() <= 63
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !name.starts_with('-')
                    && !name.ends_with('-'),
                "invalid metadata.name {name}"
            );
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

// ---------------------------------------------------------------------------------------
// github-actions

#[test]
fn github_actions_jobs_follow_the_plan() {
    let ws = workspace(MIXED);
    let plan = shown(&ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "json"]));
    let r = ws.run_ok("export", &["--format", "github-actions"]);
    assert_header(&r.stdout, "github-actions", "t");
    let doc = yaml(&r.stdout);
    let order = assert_gha_follows(&doc, &plan);
    for path in &order {
        assert!(
            gha_command(&doc, path)
                .starts_with("strata up --provider t --stack \"$PULUMI_STACK\" --project "),
            "{path}"
        );
        assert!(
            gha_command(&doc, path).contains(&format!("--project {path}")),
            "{path}"
        );
    }
    assert_eq!(doc["env"]["PULUMI_STACK"], "${{ inputs.stack }}");
    assert_eq!(
        doc["on"]["workflow_dispatch"]["inputs"]["stack"]["default"],
        "dev"
    );
    for k in [
        "PULUMI_BACKEND_URL",
        "PULUMI_ACCESS_TOKEN",
        "PULUMI_CONFIG_PASSPHRASE",
    ] {
        assert_eq!(doc["env"][k], Yaml::from(format!("${{{{ secrets.{k} }}}}")));
    }
    // Only jobs that run Pulumi (or read a Pulumi project's outputs) install its CLI.
    let uses = |path: &str| -> Vec<String> {
        doc["jobs"]
            .as_mapping()
            .unwrap()
            .values()
            .find(|j| {
                j["name"]
                    .as_str()
                    .is_some_and(|n| n.split(" + ").any(|p| p == path))
            })
            .unwrap()["steps"]
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(|s| s["uses"].as_str().map(String::from))
            .collect()
    };
    assert!(uses("infra/net").contains(&"pulumi/actions@v6".into()));
    // The image build and its push (command projects) share one job and one runner.
    assert!(gha_command(&doc, "k8s/push").contains("--project k8s/build --project k8s/push"));
    assert!(!uses("k8s/build").contains(&"pulumi/actions@v6".into()));
    assert!(
        r.stdout.contains("--project @secrets"),
        "the header says how to write the secrets"
    );
}

#[test]
fn export_writes_a_file_with_out() {
    let ws = workspace(MIXED);
    let stdout = ws.run_ok("export", &["--format", "argo"]);
    let r = ws.run_ok("export", &["--format", "argo", "-o", "ci/strata.yaml"]);
    assert!(r.stdout.is_empty(), "nothing on stdout with -o\n{r:?}");
    assert_eq!(ws.read("ci/strata.yaml"), stdout.stdout);
    let workflow = ".github/workflows/strata.yaml";
    ws.run_ok("export", &["--format", "github-actions", "--out", workflow]);
    yaml(&ws.read(".github/workflows/strata.yaml"));
}

#[test]
fn export_is_deterministic_and_needs_no_pulumi_or_stack_config() {
    let ws = Ws::without_pulumi();
    ws.profile("t", &format!("{HEAD}{MIXED}"));
    for line in MIXED.lines() {
        if let Some(path) = line.trim().strip_prefix("- path: ") {
            if COMMANDS.contains(&path) {
                ws.command_project(path, "true", "true");
            } else {
                ws.pulumi_project(path, path.rsplit('/').next().unwrap(), "");
            }
        }
    }
    for format in ["github-actions", "argo"] {
        let a = ws.strata(&["-p", "t", "-s", "dev", "export", "--format", format]);
        let b = ws.strata(&["-p", "t", "-s", "dev", "export", "--format", format]);
        assert_eq!(a.code, 0, "{a:?}");
        assert_eq!(a.stdout, b.stdout, "{format} output is stable");
    }
    assert!(
        !ws.exists("config/pulumi/Pulumi.dev.yaml"),
        "export writes no stack config"
    );
    assert!(!ws.exists(".strata/dev"), "export touches no local state");
}

#[test]
fn export_without_a_stack_is_refused() {
    let ws = workspace(MIXED);
    let r = ws.strata(&["-p", "t", "export", "--format", "argo"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("--stack"), "{r:?}");
    assert!(r.stdout.is_empty());
}

#[test]
fn export_stack_comes_from_the_env_file() {
    let ws = workspace(MIXED);
    ws.env_file("PULUMI_STACK=dev\n");
    let r = ws.strata(&["-p", "t", "export", "--format", "argo"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_header(&r.stdout, "argo", "t");
}

#[test]
fn unknown_format_is_a_usage_error() {
    let ws = workspace(MIXED);
    let r = ws.strata(&["-p", "t", "-s", "dev", "export", "--format", "jenkins"]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = ws.strata(&["-p", "t", "-s", "dev", "export"]);
    assert_eq!(r.code, 2, "--format is required\n{r:?}");
}

#[test]
fn review_apply_is_a_github_actions_mode_only() {
    let ws = workspace(MIXED);
    for format in ["pko", "argo", "github-actions"] {
        let r = ws.run("export", &["--format", format, "--review-apply"]);
        if format == "github-actions" {
            assert_eq!(r.code, 0, "{r:?}");
            assert_header(&r.stdout, "github-actions --review-apply", "t");
            continue;
        }
        assert_eq!(r.code, 2, "{format}: {r:?}");
        assert!(
            r.stderr
                .contains("--review-apply is a mode of --format github-actions"),
            "{r:?}"
        );
        assert!(r.stdout.is_empty(), "{r:?}");
    }
}

// ---------------------------------------------------------------------------------------
// argo

#[test]
fn argo_dag_follows_the_plan() {
    let ws = workspace(MIXED);
    let plan = shown(&ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "json"]));
    let r = ws.strata(&["-p", "t", "-s", "dev", "export", "--format", "argo"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_header(&r.stdout, "argo", "t");
    let doc = yaml(&r.stdout);
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

// ---------------------------------------------------------------------------------------
// pko

#[test]
fn pko_stacks_follow_the_plan() {
    let ws = workspace(PULUMI_ONLY);
    let plan = shown(&ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "json"]));
    let r = ws.strata(&["-p", "t", "-s", "dev", "export", "--format", "pko"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_header(&r.stdout, "pko", "t");
    let docs = yaml_docs(&r.stdout);
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
    let r = ws.strata(&["-p", "t", "-s", "dev", "export", "--format", "pko"]);
    assert_eq!(r.code, 0, "{r:?}");
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

#[test]
fn repo_aws_profile_exports_to_every_format() {
    let plan = shown(&repo(&[
        "-p", "aws", "-s", "dev", "show", "--format", "json",
    ]));
    assert!(plan.needs.contains_key("@secrets"), "aws has secrets");

    let r = repo(&[
        "-p",
        "aws",
        "-s",
        "dev",
        "export",
        "--format",
        "github-actions",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_header(&r.stdout, "github-actions", "aws");
    let doc = yaml(&r.stdout);
    assert_gha_follows(&doc, &plan);
    assert_eq!(
        gha_command(&doc, "kubernetes/applications/sirius"),
        "strata up --provider aws --stack \"$PULUMI_STACK\" --project kubernetes/applications/sirius --non-interactive"
    );

    let r = repo(&["-p", "aws", "-s", "dev", "export", "--format", "argo"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_header(&r.stdout, "argo", "aws");
    let (order, graph) = argo_graph(&yaml(&r.stdout));
    assert_eq!(order, plan.order_without_secrets());
    assert_eq!(graph, plan.bridged());

    // The operator runs Pulumi programs only; aws builds the ingress controller image
    // with command projects: they are left out and named, the rest is exported.
    let commands: Vec<&String> = plan
        .kind
        .iter()
        .filter(|(_, k)| k.as_str() == "command")
        .map(|(p, _)| p)
        .collect();
    assert!(!commands.is_empty());
    let r = repo(&["-p", "aws", "-s", "dev", "export", "--format", "pko"]);
    assert_eq!(r.code, 0, "{r:?}");
    for c in commands {
        assert!(r.stderr.contains(c.as_str()), "stderr lacks {c}\n{r:?}");
    }
}

#[test]
fn repo_profiles_all_export_to_github_actions_and_argo() {
    for provider in ["aws", "do", "linode", "kubeconfig", "local"] {
        let plan = shown(&repo(&[
            "-p", provider, "-s", "dev", "show", "--format", "json",
        ]));
        for format in ["github-actions", "argo"] {
            let r = repo(&["-p", provider, "-s", "dev", "export", "--format", format]);
            assert_eq!(r.code, 0, "{provider} {format}\n{r:?}");
            let doc = yaml(&r.stdout);
            if format == "argo" {
                let (_, graph) = argo_graph(&doc);
                assert_eq!(graph, plan.bridged(), "{provider} {format}");
            } else {
                assert_gha_follows(&doc, &plan);
            }
        }
    }
}
