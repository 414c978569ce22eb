//! The plan as a GitHub Actions workflow: one job per project, `needs:` from the graph,
//! each job running `strata up --project <path>` on its own runner.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_yaml::{Mapping, Value};

use super::{ExportContext, Format};
use crate::error::Result;
use crate::plan::{NodeKind, Plan};

/// Where a job keeps the outputs of command projects (strata's local state).
const OUTPUTS_DIR: &str = ".strata/${{ inputs.stack }}/outputs";

#[derive(Serialize)]
struct Workflow {
    name: String,
    on: On,
    permissions: Mapping,
    concurrency: Concurrency,
    env: Mapping,
    jobs: Mapping,
}

#[derive(Serialize)]
struct On {
    workflow_dispatch: Dispatch,
}

#[derive(Serialize)]
struct Dispatch {
    inputs: DispatchInputs,
}

#[derive(Serialize)]
struct DispatchInputs {
    stack: DispatchInput,
}

#[derive(Serialize)]
struct DispatchInput {
    description: String,
    required: bool,
    default: String,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(Serialize)]
struct Concurrency {
    group: String,
    #[serde(rename = "cancel-in-progress")]
    cancel_in_progress: bool,
}

#[derive(Serialize)]
struct Job {
    name: String,
    #[serde(rename = "runs-on")]
    runs_on: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    needs: Vec<String>,
    steps: Vec<Step>,
}

#[derive(Serialize, Default)]
struct Step {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uses: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    with: Option<Mapping>,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<String>,
}

/// A valid job id from a path: letters, digits, `-` and `_`, starting with a letter or
/// `_`.
pub fn job_id(path: &str) -> String {
    let mut id: String = path
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if !id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_') {
        id.insert(0, '_');
    }
    id
}

/// Whether `id` is a valid GitHub Actions job id.
pub fn is_valid_job_id(id: &str) -> bool {
    id.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// The job id of every step of `plan` (indexed like `plan.nodes`), unique.
fn job_ids(plan: &Plan) -> Vec<String> {
    super::names_in_order(plan, job_id, |base, _| base.to_string())
}

/// Whether the job of node `i` needs the pulumi CLI: a Pulumi project, or a project
/// that reads outputs of a Pulumi project through `inputs:`.
fn needs_pulumi_cli(plan: &Plan, i: usize) -> bool {
    let node = &plan.nodes[i];
    node.kind == NodeKind::Pulumi
        || node
            .entry
            .iter()
            .flat_map(|e| e.inputs.iter())
            .any(|input| {
                plan.index_of(&input.project)
                    .is_some_and(|j| plan.nodes[j].kind == NodeKind::Pulumi)
            })
}

fn map(pairs: &[(&str, &str)]) -> Mapping {
    pairs
        .iter()
        .map(|(k, v)| (Value::from(*k), Value::from(*v)))
        .collect()
}

pub fn render(full: &Plan, ctx: &ExportContext) -> Result<String> {
    let plan = super::without_builtin(full);
    let ids = job_ids(&plan);
    let carried = super::command_output_sources(&plan);
    let mut jobs = Mapping::new();
    for &i in &plan.order {
        let node = &plan.nodes[i];
        let mut steps = vec![Step {
            uses: Some("actions/checkout@v4".into()),
            ..Default::default()
        }];
        // Outputs of command projects this one takes `inputs:` from.
        let sources: BTreeSet<&str> = node
            .entry
            .iter()
            .flat_map(|e| e.inputs.iter())
            .map(|input| input.project.as_str())
            .filter(|p| carried.contains(*p))
            .collect();
        for &j in &plan.order {
            if sources.contains(plan.nodes[j].path.as_str()) {
                steps.push(Step {
                    name: Some(format!("Outputs of {}", plan.nodes[j].path)),
                    uses: Some("actions/download-artifact@v4".into()),
                    with: Some(map(&[
                        ("name", &format!("strata-outputs-{}", ids[j])),
                        ("path", OUTPUTS_DIR),
                    ])),
                    ..Default::default()
                });
            }
        }
        if needs_pulumi_cli(&plan, i) {
            steps.push(Step {
                name: Some("Install the Pulumi CLI".into()),
                uses: Some("pulumi/actions@v6".into()),
                ..Default::default()
            });
        }
        steps.push(Step {
            name: Some("Install strata".into()),
            run: Some("cargo install --locked --path .".into()),
            ..Default::default()
        });
        steps.push(Step {
            name: Some(format!("strata up {}", node.path)),
            run: Some(format!(
                "strata up --provider {} --stack \"$PULUMI_STACK\" --project {} --non-interactive",
                ctx.provider, node.path
            )),
            ..Default::default()
        });
        if carried.contains(&node.path) {
            steps.push(Step {
                name: Some(format!("Keep the outputs of {}", node.path)),
                uses: Some("actions/upload-artifact@v4".into()),
                with: Some({
                    let mut with = map(&[
                        ("name", &format!("strata-outputs-{}", ids[i])),
                        (
                            "path",
                            &format!("{OUTPUTS_DIR}/{}.json", crate::util::slug(&node.path)),
                        ),
                        ("if-no-files-found", "error"),
                    ]);
                    with.insert("retention-days".into(), 1.into());
                    with
                }),
                ..Default::default()
            });
        }
        let job = Job {
            name: node.path.clone(),
            runs_on: "ubuntu-latest",
            needs: super::needs_in_order(&plan, i)
                .into_iter()
                .map(|j| ids[j].clone())
                .collect(),
            steps,
        };
        let value = serde_yaml::to_value(job).map_err(|e| {
            crate::error::Error::failed(format!("cannot write the export as YAML: {e}"))
        })?;
        jobs.insert(Value::from(ids[i].clone()), value);
    }

    let workflow = Workflow {
        name: format!("strata up ({})", ctx.provider),
        on: On {
            workflow_dispatch: Dispatch {
                inputs: DispatchInputs {
                    stack: DispatchInput {
                        description:
                            "Pulumi stack (config/pulumi/Pulumi.<stack>.yaml must be committed)"
                                .into(),
                        required: true,
                        default: ctx.stack.to_string(),
                        kind: "string",
                    },
                },
            },
        },
        permissions: map(&[("contents", "read")]),
        concurrency: Concurrency {
            group: format!("strata-{}-${{{{ inputs.stack }}}}", ctx.provider),
            cancel_in_progress: false,
        },
        env: map(&[
            ("PULUMI_STACK", "${{ inputs.stack }}"),
            ("PULUMI_BACKEND_URL", "${{ secrets.PULUMI_BACKEND_URL }}"),
            ("PULUMI_ACCESS_TOKEN", "${{ secrets.PULUMI_ACCESS_TOKEN }}"),
            (
                "PULUMI_CONFIG_PASSPHRASE",
                "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}",
            ),
            ("STRATA_PASSPHRASE", "${{ secrets.STRATA_PASSPHRASE }}"),
        ]),
        jobs,
    };

    let mut notes = vec![
        format!(
            "One job per project of profile `{}` (infra_type {}); `needs:` is strata's dependency graph, so what does not depend on each other runs at the same time. Each job runs `strata up --project <path>` for its project on a fresh runner.",
            ctx.provider, ctx.infra_type
        ),
        "Before the first run:".to_string(),
        "- Set the repository secret PULUMI_BACKEND_URL to a backend every runner shares (s3://..., azblob://..., gs://..., or https://api.pulumi.com with PULUMI_ACCESS_TOKEN): the default file backend under .strata/ is gone when a job ends, and later jobs read earlier outputs from the backend.".to_string(),
        "- Set PULUMI_CONFIG_PASSPHRASE if the stacks use the passphrase secrets provider, and STRATA_PASSPHRASE if the profile has secrets (config/secrets/<stack>.age). Unset secrets are empty and ignored.".to_string(),
        "- Commit config/pulumi/Pulumi.<stack>.yaml: a job cannot prompt for missing config.".to_string(),
        "- Jobs install strata from this repository (`cargo install --locked --path .`); if your workspace repository does not hold strata's source, install it another way in that step. Install the language runtimes your Pulumi projects need (Node.js, Python, ...) next to the Pulumi CLI.".to_string(),
    ];
    if super::has_builtin(full) {
        notes.push(format!(
            "- The built-in secrets step (@secrets) is not a job: it writes the secrets into the cluster with the kubeconfig of the machine that ran the infrastructure stage, which a fresh runner does not have. The kubernetes jobs wait for what it waits for instead. Get the secrets into the cluster before they run: `strata up -p {} -s <stack> --project @secrets` on a machine with the cluster's kubeconfig, or the cluster's own mechanism (External Secrets, Sealed Secrets).",
            ctx.provider
        ));
    }
    if plan.nodes.iter().any(|n| n.kind == NodeKind::Command) {
        notes.push(
            "- Command projects run on their own runner too: the outputs they write are handed to the jobs that take them as `inputs:` (artifacts strata-outputs-<job>, kept one day), but files or images they leave on their runner are not."
                .to_string(),
        );
    }
    let mut text = super::header(Format::GithubActions, ctx, &notes);
    text.push_str(&super::to_yaml(&[workflow])?);
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use std::collections::BTreeMap;

    fn parse(text: &str) -> serde_yaml::Value {
        serde_yaml::from_str(text).unwrap_or_else(|e| panic!("not YAML: {e}\n{text}"))
    }

    fn jobs(doc: &Value) -> &Mapping {
        doc["jobs"].as_mapping().expect("jobs")
    }

    /// path -> (job id, needs as paths)
    fn job_graph(doc: &Value) -> BTreeMap<String, (String, Vec<String>)> {
        let by_id: BTreeMap<String, String> = jobs(doc)
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().unwrap().to_string(),
                    v["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        jobs(doc)
            .iter()
            .map(|(k, v)| {
                let needs = v
                    .get("needs")
                    .and_then(|n| n.as_sequence())
                    .map(|s| {
                        s.iter()
                            .map(|x| by_id[x.as_str().unwrap()].clone())
                            .collect()
                    })
                    .unwrap_or_default();
                (
                    v["name"].as_str().unwrap().to_string(),
                    (k.as_str().unwrap().to_string(), needs),
                )
            })
            .collect()
    }

    #[test]
    fn job_ids_are_valid() {
        for p in ["infrastructure/aws/vpc", "1st/x", "a.b c", "-x", "ü/x"] {
            let id = job_id(p);
            assert!(is_valid_job_id(&id), "{p} -> {id}");
        }
        assert_eq!(job_id("infrastructure/aws/vpc"), "infrastructure-aws-vpc");
        assert!(!is_valid_job_id("1a"));
        assert!(!is_valid_job_id("a/b"));
    }

    #[test]
    fn job_ids_are_unique_when_paths_collide() {
        let plan = plan_of(
            &format!("{HEAD}infrastructure:\n  - path: a/b\n  - path: a-b\n  - path: a.b\n"),
            &[],
        )
        .unwrap();
        let text = render(&plan, &CTX).unwrap();
        let doc = parse(&text);
        let ids: Vec<&str> = jobs(&doc).keys().map(|k| k.as_str().unwrap()).collect();
        assert_eq!(ids, ["a-b", "a-b-2", "a-b-3"]);
        let g = job_graph(&doc);
        assert_eq!(g["a-b"].1, ["a/b"]);
        assert_eq!(g["a.b"].1, ["a-b"]);
    }

    #[test]
    fn needs_match_the_plan_bridged_through_secrets() {
        let plan = plan_of(&sample(), &[]).unwrap();
        let text = render(&plan, &CTX).unwrap();
        let doc = parse(&text);
        let g = job_graph(&doc);
        assert!(!g.contains_key("@secrets"), "no job for the secrets step");
        assert!(!text.contains("--project @secrets\n"));
        let bridged = crate::export::without_builtin(&plan);
        assert_eq!(g.len(), bridged.nodes.len());
        for (i, n) in bridged.nodes.iter().enumerate() {
            let mut want: Vec<&str> = bridged.needs_paths(i);
            want.sort();
            let mut got = g[&n.path].1.clone();
            got.sort();
            assert_eq!(got, want, "needs of {}", n.path);
        }
        // The barrier survives: the kubernetes roots wait for the infrastructure sinks.
        let mut ns = g["k8s/ns"].1.clone();
        ns.sort();
        assert_eq!(ns, ["infra/ecr", "infra/eks"]);
        assert_eq!(g["k8s/app"].1, ["k8s/ns", "k8s/logs"]);
        assert!(g["infra/vpc"].1.is_empty());
        // Jobs come in execution order.
        let order: Vec<&str> = jobs(&doc)
            .values()
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        let want: Vec<&str> = bridged
            .order
            .iter()
            .map(|&i| bridged.nodes[i].path.as_str())
            .collect();
        assert_eq!(order, want);
        assert!(
            text.contains("@secrets"),
            "the header explains the secrets step"
        );
    }

    #[test]
    fn workflow_shape() {
        let plan = plan_of(&sample(), &[]).unwrap();
        let text = render(&plan, &CTX).unwrap();
        assert!(
            text.starts_with("# Generated by `strata export --format github-actions -p p -s dev`.")
        );
        let doc = parse(&text);
        let on = doc.get("on").expect("an `on` key");
        assert_eq!(on["workflow_dispatch"]["inputs"]["stack"]["default"], "dev");
        assert_eq!(
            doc["env"]["PULUMI_BACKEND_URL"],
            "${{ secrets.PULUMI_BACKEND_URL }}"
        );
        assert_eq!(
            doc["env"]["PULUMI_CONFIG_PASSPHRASE"],
            "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}"
        );
        assert!(
            doc["concurrency"]["group"]
                .as_str()
                .unwrap()
                .contains("${{ inputs.stack }}")
        );
        let job = &doc["jobs"]["infra-eks"];
        let steps = job["steps"].as_sequence().unwrap();
        assert_eq!(steps[0]["uses"], "actions/checkout@v4");
        assert!(steps.iter().any(|s| s["uses"] == "pulumi/actions@v6"));
        assert!(
            steps
                .iter()
                .any(|s| s["run"] == "cargo install --locked --path .")
        );
        let last = steps.last().unwrap()["run"].as_str().unwrap();
        assert_eq!(
            last,
            "strata up --provider p --stack \"$PULUMI_STACK\" --project infra/eks --non-interactive"
        );
    }

    #[test]
    fn command_projects_skip_pulumi_and_pass_outputs_on() {
        let plan = plan_of(
            &format!(
                "{HEAD}infrastructure:\n  - path: net\n  - path: build\n  - path: push\n    inputs:\n      'k:img': build:image\n      'k:net': net:id\n"
            ),
            &["build", "push"],
        )
        .unwrap();
        let text = render(&plan, &CTX).unwrap();
        let doc = parse(&text);
        let steps = |id: &str| doc["jobs"][id]["steps"].as_sequence().unwrap().clone();
        let uses = |id: &str| -> Vec<String> {
            steps(id)
                .iter()
                .filter_map(|s| s["uses"].as_str().map(String::from))
                .collect()
        };
        assert!(uses("net").contains(&"pulumi/actions@v6".to_string()));
        // A command project: no Pulumi CLI, unless it reads a Pulumi project's outputs.
        assert!(!uses("build").contains(&"pulumi/actions@v6".to_string()));
        assert!(uses("push").contains(&"pulumi/actions@v6".to_string()));
        // build's outputs travel to push as an artifact.
        let up = steps("build")
            .into_iter()
            .find(|s| s["uses"] == "actions/upload-artifact@v4")
            .expect("upload");
        assert_eq!(up["with"]["name"], "strata-outputs-build");
        assert_eq!(
            up["with"]["path"],
            ".strata/${{ inputs.stack }}/outputs/build.json"
        );
        let down = steps("push")
            .into_iter()
            .find(|s| s["uses"] == "actions/download-artifact@v4")
            .expect("download");
        assert_eq!(down["with"]["name"], "strata-outputs-build");
        assert!(!uses("net").contains(&"actions/upload-artifact@v4".to_string()));
        assert!(!uses("push").contains(&"actions/upload-artifact@v4".to_string()));
    }

    #[test]
    fn output_is_deterministic() {
        let plan = plan_of(&sample(), &[]).unwrap();
        assert_eq!(render(&plan, &CTX).unwrap(), render(&plan, &CTX).unwrap());
    }
}
