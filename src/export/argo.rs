//! The plan as an Argo Workflows `Workflow`: a DAG with one task per project, each
//! running `strata up --project <path>` in its own pod on a fresh git checkout.

use serde::Serialize;

use super::{ExportContext, Format};
use crate::error::Result;
use crate::plan::{NodeKind, Plan};
use crate::workspace::profile::Pool;

/// The default image: strata and the Pulumi CLI (and the projects' runtimes).
pub const IMAGE: &str = "ghcr.io/example/strata:latest";
/// Placeholder for the git repository that holds the workspace.
pub const REPO_PLACEHOLDER: &str = "https://github.com/CHANGE-ME/CHANGE-ME.git";
/// Where the workspace is checked out in each pod.
pub const WORKDIR: &str = "/workspace";
/// The Kubernetes Secret the pods take Pulumi and strata credentials from.
pub const SECRET: &str = "strata";
/// The shared volume that carries command projects' outputs between pods.
pub const OUTPUTS_VOLUME: &str = "strata-outputs";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Workflow {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: Spec,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Metadata {
    generate_name: String,
    labels: std::collections::BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    entrypoint: &'static str,
    arguments: Arguments,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    volume_claim_templates: Vec<ClaimTemplate>,
    templates: Vec<Template>,
}

#[derive(Serialize)]
struct ClaimTemplate {
    metadata: ClaimMeta,
    spec: ClaimSpec,
}

#[derive(Serialize)]
struct ClaimMeta {
    name: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClaimSpec {
    access_modes: Vec<&'static str>,
    resources: ClaimResources,
}

#[derive(Serialize)]
struct ClaimResources {
    requests: std::collections::BTreeMap<&'static str, &'static str>,
}

#[derive(Serialize, Clone)]
struct Arguments {
    parameters: Vec<Parameter>,
}

#[derive(Serialize, Clone)]
struct Parameter {
    name: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
}

#[derive(Serialize, Clone)]
struct Template {
    name: String,
    /// A pool: the semaphore that holds its tasks to its limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    synchronization: Option<Synchronization>,
    #[serde(skip_serializing_if = "Option::is_none")]
    dag: Option<Dag>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inputs: Option<Inputs>,
    #[serde(skip_serializing_if = "Option::is_none")]
    container: Option<Container>,
}

#[derive(Serialize, Clone)]
struct Synchronization {
    semaphores: Vec<SemaphoreRef>,
}

#[derive(Serialize, Clone)]
#[serde(rename_all = "camelCase")]
struct SemaphoreRef {
    config_map_key_ref: ConfigMapKey,
}

#[derive(Serialize, Clone)]
struct ConfigMapKey {
    name: String,
    key: String,
}

/// The ConfigMap whose keys are the pools' limits (Argo reads a semaphore's limit there).
pub const POOLS_CONFIGMAP: &str = "strata-pools";

/// The template a task of `pool` runs: `project`, or `project-<pool>`.
fn template_name(pool: Option<&str>) -> String {
    match pool {
        None => "project".into(),
        Some(p) => super::dns_label(&format!("project-{p}"), 63),
    }
}

#[derive(Serialize, Clone)]
struct Dag {
    tasks: Vec<Task>,
}

#[derive(Serialize, Clone)]
struct Task {
    name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dependencies: Vec<String>,
    template: String,
    arguments: Arguments,
}

#[derive(Serialize, Clone)]
struct Inputs {
    parameters: Vec<Parameter>,
    artifacts: Vec<Artifact>,
}

#[derive(Serialize, Clone)]
struct Artifact {
    name: &'static str,
    path: &'static str,
    git: Git,
}

#[derive(Serialize, Clone)]
struct Git {
    repo: &'static str,
    revision: &'static str,
    depth: u32,
}

#[derive(Serialize, Clone)]
#[serde(rename_all = "camelCase")]
struct Container {
    image: &'static str,
    working_dir: &'static str,
    command: Vec<&'static str>,
    args: Vec<String>,
    env: Vec<Env>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    volume_mounts: Vec<VolumeMount>,
}

#[derive(Serialize, Clone)]
#[serde(rename_all = "camelCase")]
struct Env {
    name: &'static str,
    value_from: ValueFrom,
}

#[derive(Serialize, Clone)]
#[serde(rename_all = "camelCase")]
struct ValueFrom {
    secret_key_ref: SecretKeyRef,
}

#[derive(Serialize, Clone)]
struct SecretKeyRef {
    name: &'static str,
    key: &'static str,
    optional: bool,
}

#[derive(Serialize, Clone)]
#[serde(rename_all = "camelCase")]
struct VolumeMount {
    name: &'static str,
    mount_path: String,
}

/// A DAG task name from a path: a DNS-1123 label (Argo's task names are letters,
/// digits and `-`, starting with a letter or digit).
pub fn task_name(path: &str) -> String {
    super::dns_label(path, 63)
}

/// The task name of every step of `plan` (indexed like `plan.nodes`), unique.
fn task_names(plan: &Plan) -> Vec<String> {
    super::names_in_order(plan, task_name, super::fit_dns)
}

fn secret_env(key: &'static str) -> Env {
    Env {
        name: key,
        value_from: ValueFrom {
            secret_key_ref: SecretKeyRef {
                name: SECRET,
                key,
                optional: true,
            },
        },
    }
}

/// The Workflow of `full` (the secrets step bridged), under its header.
pub fn render(full: &Plan, ctx: &ExportContext) -> Result<String> {
    let plan = super::without_builtin(full);
    // Command projects' outputs live in .strata/<stack>/outputs/, not in the Pulumi
    // backend: when one feeds `inputs:`, every pod mounts one shared volume there.
    let share_outputs = !super::command_output_sources(&plan).is_empty();
    let used = super::used_pools(&plan, ctx.pools);
    let workflow = workflow(&plan, ctx, share_outputs, &used);
    let notes = notes(full, &plan, ctx, share_outputs, &used);
    let mut text = super::header(Format::Argo, ctx, &notes);
    text.push_str(&super::to_yaml(&[workflow])?);
    Ok(text)
}

/// The Workflow: its parameters, the DAG, the template a task runs and one more per pool.
fn workflow(plan: &Plan, ctx: &ExportContext, share_outputs: bool, used: &[&Pool]) -> Workflow {
    let project = project_template(ctx, share_outputs);
    let mut templates = vec![dag_template(plan), project.clone()];
    templates.extend(used.iter().map(|pool| pool_template(&project, &pool.name)));
    Workflow {
        api_version: "argoproj.io/v1alpha1",
        kind: "Workflow",
        metadata: Metadata {
            generate_name: format!(
                "{}-",
                super::dns_label(&format!("strata-{}-{}", ctx.provider, ctx.stack), 57)
            ),
            labels: super::labels(ctx),
        },
        spec: Spec {
            entrypoint: "strata",
            arguments: workflow_parameters(),
            volume_claim_templates: outputs_claim(share_outputs),
            templates,
        },
    }
}

/// What `argo submit -p` sets: the image, and the repository and revision to check out.
fn workflow_parameters() -> Arguments {
    Arguments {
        parameters: vec![
            Parameter {
                name: "image",
                value: Some(IMAGE.into()),
            },
            Parameter {
                name: "repo",
                value: Some(REPO_PLACEHOLDER.into()),
            },
            Parameter {
                name: "revision",
                value: Some("main".into()),
            },
        ],
    }
}

/// The entry template: the DAG, one task per project, its dependencies its needs.
fn dag_template(plan: &Plan) -> Template {
    let names = task_names(plan);
    let tasks: Vec<Task> = plan
        .order
        .iter()
        .map(|&i| Task {
            name: names[i].clone(),
            dependencies: super::needs_in_order(plan, i)
                .into_iter()
                .map(|j| names[j].clone())
                .collect(),
            template: template_name(plan.nodes[i].pool()),
            arguments: Arguments {
                parameters: vec![Parameter {
                    name: "project",
                    value: Some(plan.nodes[i].path.clone()),
                }],
            },
        })
        .collect();
    Template {
        name: "strata".into(),
        synchronization: None,
        dag: Some(Dag { tasks }),
        inputs: None,
        container: None,
    }
}

/// The template a task runs: a pod with the workspace checked out, running strata up
/// on its one project.
fn project_template(ctx: &ExportContext, share_outputs: bool) -> Template {
    Template {
        name: "project".into(),
        synchronization: None,
        dag: None,
        inputs: Some(Inputs {
            parameters: vec![Parameter {
                name: "project",
                value: None,
            }],
            artifacts: vec![Artifact {
                name: "workspace",
                path: WORKDIR,
                git: Git {
                    repo: "{{workflow.parameters.repo}}",
                    revision: "{{workflow.parameters.revision}}",
                    depth: 1,
                },
            }],
        }),
        container: Some(Container {
            image: "{{workflow.parameters.image}}",
            working_dir: WORKDIR,
            command: vec!["strata"],
            args: vec![
                "up".into(),
                "--provider".into(),
                ctx.provider.to_string(),
                "--stack".into(),
                ctx.stack.to_string(),
                "--project".into(),
                "{{inputs.parameters.project}}".into(),
                "--non-interactive".into(),
            ],
            env: vec![
                secret_env("PULUMI_BACKEND_URL"),
                secret_env("PULUMI_ACCESS_TOKEN"),
                secret_env("PULUMI_CONFIG_PASSPHRASE"),
                secret_env("STRATA_PASSPHRASE"),
            ],
            volume_mounts: outputs_mount(ctx, share_outputs),
        }),
    }
}

/// The project template held by the semaphore of `pool`.
fn pool_template(project: &Template, pool: &str) -> Template {
    let mut t = project.clone();
    t.name = template_name(Some(pool));
    t.synchronization = Some(Synchronization {
        semaphores: vec![SemaphoreRef {
            config_map_key_ref: ConfigMapKey {
                name: POOLS_CONFIGMAP.into(),
                key: pool.to_string(),
            },
        }],
    });
    t
}

/// The shared volume for command projects' outputs, when they are shared.
fn outputs_claim(share_outputs: bool) -> Vec<ClaimTemplate> {
    if !share_outputs {
        return Vec::new();
    }
    vec![ClaimTemplate {
        metadata: ClaimMeta {
            name: OUTPUTS_VOLUME,
        },
        spec: ClaimSpec {
            access_modes: vec!["ReadWriteMany"],
            resources: ClaimResources {
                requests: [("storage", "1Mi")].into_iter().collect(),
            },
        },
    }]
}

/// Where each pod mounts that volume: the stack's outputs folder.
fn outputs_mount(ctx: &ExportContext, share_outputs: bool) -> Vec<VolumeMount> {
    if !share_outputs {
        return Vec::new();
    }
    vec![VolumeMount {
        name: OUTPUTS_VOLUME,
        mount_path: format!("{WORKDIR}/.strata/{}/outputs", ctx.stack),
    }]
}

/// The header's notes: what the Workflow does and what to set up before submitting it.
fn notes(
    full: &Plan,
    plan: &Plan,
    ctx: &ExportContext,
    share_outputs: bool,
    used: &[&Pool],
) -> Vec<String> {
    let mut notes = vec![
        format!(
            "An Argo Workflows DAG with one task per project of {}; `dependencies` is strata's dependency graph, so what does not depend on each other runs at the same time. Each task runs `strata up --project <path>` in its own pod.",
            ctx.profile_named()
        ),
        "Before submitting (`argo submit` this file; override the parameters with -p):".to_string(),
        format!(
            "- The workspace comes from a git artifact: set the parameter `repo` (a placeholder: {REPO_PLACEHOLDER}) and `revision` to the repository that holds this workspace, with config/pulumi/Pulumi.<stack>.yaml committed (a task cannot prompt). For a private repository add usernameSecret/passwordSecret or sshPrivateKeySecret to the git artifact. Each pod gets its own checkout, so no two strata share the stack's lock."
        ),
        format!(
            "- The parameter `image` ({IMAGE} is an example) must hold strata, the Pulumi CLI and the language runtimes of the projects."
        ),
        format!(
            "- Create the Secret `{SECRET}` in the workflow's namespace with PULUMI_BACKEND_URL (a backend every pod shares: s3://..., azblob://..., gs://... or https://api.pulumi.com; the default file backend under .strata/ dies with the pod), and as needed PULUMI_ACCESS_TOKEN, PULUMI_CONFIG_PASSPHRASE and STRATA_PASSPHRASE (for config/secrets/<stack>.age). Missing keys are left unset."
        ),
    ];
    if share_outputs {
        notes.push(format!(
            "- Command projects write their outputs to .strata/<stack>/outputs/, not to the Pulumi backend; every pod mounts the volume `{OUTPUTS_VOLUME}` there so that the projects taking them as `inputs:` find them. It is ReadWriteMany: the cluster needs a storage class that offers it. Files or images a command project leaves in its pod do not travel."
        ));
    }
    if super::has_builtin(full) {
        notes.push(format!(
            "- The built-in secrets step (@secrets) is not a task: it writes into the cluster with the kubeconfig of the machine that ran the infrastructure stage, which a pod does not have. The kubernetes tasks wait for what it waits for instead. Get the secrets into the cluster before they run: `strata up -p {} -s {} --project @secrets` on a machine that knows the stack's cluster (its kubeconfig hook ran there, or the profile's `cluster:` names a kubeconfig it has; strata never writes into whatever context is current), or the cluster's own mechanism (External Secrets, Sealed Secrets).",
            ctx.provider, ctx.stack
        ));
    }
    if plan.nodes.iter().any(|n| n.kind == NodeKind::Command) {
        notes.push(
            "- Command projects run their shell commands in the image: it needs the tools they call.".to_string(),
        );
    }
    if !used.is_empty() {
        notes.push(format!(
            "- Pools: the tasks of a pool run the template `project-<pool>`, which an Argo semaphore (synchronization, Argo 3.6 or later) holds to the pool's limit. Its limit is a key of the ConfigMap `{POOLS_CONFIGMAP}` in the workflow's namespace; create it first: `kubectl create configmap {POOLS_CONFIGMAP} {}`. The limits are fixed here: halving a pool when a project is throttled happens only inside strata, which retries that task's project.",
            used.iter()
                .map(|p| format!("--from-literal={}={}", p.name, p.limit))
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use serde_yaml::Value;
    use std::collections::BTreeMap;

    fn parse(text: &str) -> Value {
        serde_yaml::from_str(text).unwrap_or_else(|e| panic!("not YAML: {e}\n{text}"))
    }

    /// path -> dependencies as paths, from the DAG template.
    fn dag(doc: &Value) -> BTreeMap<String, Vec<String>> {
        let tasks = doc["spec"]["templates"][0]["dag"]["tasks"]
            .as_sequence()
            .unwrap();
        let path_of: BTreeMap<&str, &str> = tasks
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap(),
                    t["arguments"]["parameters"][0]["value"].as_str().unwrap(),
                )
            })
            .collect();
        tasks
            .iter()
            .map(|t| {
                let deps = t
                    .get("dependencies")
                    .and_then(|d| d.as_sequence())
                    .map(|s| {
                        s.iter()
                            .map(|d| path_of[d.as_str().unwrap()].to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                (path_of[t["name"].as_str().unwrap()].to_string(), deps)
            })
            .collect()
    }

    #[test]
    fn dag_matches_the_plan_bridged_through_secrets() {
        let plan = plan_of(&sample(), &[]).unwrap();
        let text = render(&plan, &CTX).unwrap();
        assert!(text.starts_with("# Generated by `strata export --format argo -p p -s dev`."));
        let doc = parse(&text);
        let g = dag(&doc);
        let bridged = crate::export::without_builtin(&plan);
        assert_eq!(g.len(), bridged.nodes.len());
        assert!(!g.contains_key("@secrets"));
        for (i, n) in bridged.nodes.iter().enumerate() {
            let mut want: Vec<&str> = bridged.needs_paths(i);
            want.sort();
            let mut got = g[&n.path].clone();
            got.sort();
            assert_eq!(got, want, "dependencies of {}", n.path);
        }
        let mut ns = g["k8s/ns"].clone();
        ns.sort();
        assert_eq!(ns, ["infra/ecr", "infra/eks"]);
        for t in doc["spec"]["templates"][0]["dag"]["tasks"]
            .as_sequence()
            .unwrap()
        {
            let name = t["name"].as_str().unwrap();
            assert!(
                name.len() <= 63
                    && name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !name.starts_with('-'),
                "{name}"
            );
            assert_eq!(t["template"], "project");
        }
    }

    #[test]
    fn workflow_shape() {
        let plan = plan_of(&sample(), &[]).unwrap();
        let doc = parse(&render(&plan, &CTX).unwrap());
        assert_eq!(doc["apiVersion"], "argoproj.io/v1alpha1");
        assert_eq!(doc["kind"], "Workflow");
        assert_eq!(doc["metadata"]["generateName"], "strata-p-dev-");
        assert_eq!(doc["spec"]["entrypoint"], "strata");
        assert_eq!(doc["spec"]["arguments"]["parameters"][0]["name"], "image");
        assert_eq!(doc["spec"]["arguments"]["parameters"][0]["value"], IMAGE);
        let project = &doc["spec"]["templates"][1];
        assert_eq!(project["name"], "project");
        assert_eq!(project["inputs"]["parameters"][0]["name"], "project");
        let c = &project["container"];
        assert_eq!(c["image"], "{{workflow.parameters.image}}");
        let args: Vec<&str> = c["args"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "up",
                "--provider",
                "p",
                "--stack",
                "dev",
                "--project",
                "{{inputs.parameters.project}}",
                "--non-interactive"
            ]
        );
        assert!(doc["spec"].get("volumeClaimTemplates").is_none());
    }

    #[test]
    fn command_outputs_get_a_shared_volume() {
        let plan = planned(
            "infrastructure:\n  - path: build\n  - path: push\n    inputs:\n      'k:img': build:image\n",
            &["build", "push"],
        );
        let doc = parse(&render(&plan, &CTX).unwrap());
        assert_eq!(
            doc["spec"]["volumeClaimTemplates"][0]["metadata"]["name"],
            OUTPUTS_VOLUME
        );
        assert_eq!(
            doc["spec"]["templates"][1]["container"]["volumeMounts"][0]["mountPath"],
            "/workspace/.strata/dev/outputs"
        );
    }
}
