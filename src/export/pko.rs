//! The plan as Pulumi Kubernetes Operator `Stack` resources (`pulumi.com/v1`): one per
//! Pulumi project, ordered by `spec.prerequisites`.
//!
//! The operator runs Pulumi programs only: command projects and the built-in secrets
//! step are left out and bridged (A → command → B becomes A → B), and the header lists
//! the command projects for the user to run elsewhere. Names fit the CRD's rule (at
//! most 42 characters) and stay unique.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{ExportContext, Format};
use crate::error::{Error, Result};
use crate::plan::graph::Node;
use crate::plan::{NodeKind, Plan};

/// The Secret the Stacks read PULUMI_ACCESS_TOKEN / PULUMI_CONFIG_PASSPHRASE from.
pub const SECRET: &str = "strata-pulumi";
/// The ServiceAccount the operator's workspaces run as (the operator's quickstart
/// creates one named `pulumi`).
pub const SERVICE_ACCOUNT: &str = "pulumi";
/// Placeholder for the git repository that holds the workspace.
pub const REPO_PLACEHOLDER: &str = "https://github.com/CHANGE-ME/CHANGE-ME.git";
/// How recently a prerequisite must have succeeded.
pub const SUCCEEDED_WITHIN: &str = "24h";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Stack {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: StackSpec,
}

#[derive(Serialize)]
struct Metadata {
    name: String,
    labels: BTreeMap<&'static str, String>,
    annotations: BTreeMap<&'static str, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StackSpec {
    stack: String,
    project_repo: &'static str,
    branch: &'static str,
    repo_dir: String,
    service_account_name: &'static str,
    refresh: bool,
    destroy_on_finalize: bool,
    env_refs: BTreeMap<&'static str, EnvRef>,
    /// `inputs:` whose upstream output is known now, as literal config.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    config: BTreeMap<String, serde_json::Value>,
    /// `inputs:` not known at export time: read from a ConfigMap.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    config_ref: BTreeMap<String, ConfigMapRef>,
    /// `inputs:` from secret outputs: read from a Secret, as secret config.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    secrets_ref: BTreeMap<String, EnvRef>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    prerequisites: Vec<Prerequisite>,
}

#[derive(Serialize)]
struct ConfigMapRef {
    name: String,
    key: String,
    /// Always true: the ConfigMap holds the output's JSON, so a structured output (an
    /// object, a list) reaches the stack as structured config, and a string as a string.
    json: bool,
}

#[derive(Serialize)]
struct EnvRef {
    #[serde(rename = "type")]
    kind: &'static str,
    secret: SecretRef,
}

#[derive(Serialize)]
struct SecretRef {
    name: String,
    key: String,
}

#[derive(Serialize)]
struct Prerequisite {
    name: String,
    requirement: Requirement,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Requirement {
    succeeded_within_duration: &'static str,
}

/// The CRD's `x-kubernetes-validations` rule: `size(self.metadata.name) <= 42`.
pub const MAX_NAME: usize = 42;

/// The `metadata.name` of the Stack of every step (indexed like `plan.nodes`): a
/// DNS-1123 label of at most 42 characters made from the stack and the path (a hash
/// keeps long ones apart), unique.
fn stack_names(plan: &Plan, stack: &str) -> Vec<String> {
    super::names_in_order(
        plan,
        |path| super::dns_label(&format!("{stack}-{path}"), MAX_NAME),
        |base, extra| {
            let room = MAX_NAME.saturating_sub(extra);
            base[..base.len().min(room)]
                .trim_end_matches('-')
                .to_string()
        },
    )
}

/// The command projects of `plan`, in execution order: the operator cannot run them.
pub fn left_out(plan: &Plan) -> Vec<&str> {
    plan.order
        .iter()
        .map(|&i| &plan.nodes[i])
        .filter(|n| n.kind == NodeKind::Command)
        .map(|n| n.path.as_str())
        .collect()
}

fn env_ref(name: &str, key: &str) -> EnvRef {
    EnvRef {
        kind: "Secret",
        secret: SecretRef {
            name: name.to_string(),
            key: key.to_string(),
        },
    }
}

/// The ConfigMap and Secret that hold the inputs strata could not write in the export.
pub fn inputs_object(stack: &str) -> String {
    super::dns_label(&format!("strata-{stack}-inputs"), 63)
}

/// The key of one input in that ConfigMap or Secret: `<consumer path>.<config key>`,
/// made of the characters a ConfigMap key allows.
fn inputs_key(consumer: &str, key: &str) -> String {
    format!("{consumer}.{key}")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// One Stack per Pulumi project of `full`, under the header; an error when there is none.
pub fn render(full: &Plan, ctx: &ExportContext) -> Result<String> {
    let plan = pulumi_projects(full, ctx)?;
    let names = stack_names(&plan, ctx.stack);
    let mut to_create = ToCreate::default();
    let docs: Vec<Stack> = plan
        .order
        .iter()
        .map(|&i| stack(&plan, i, &names, ctx, &mut to_create))
        .collect();
    let notes = notes(full, &plan, ctx, &to_create);
    let mut text = super::header(Format::Pko, ctx, &notes);
    text.push_str(&super::to_yaml(&docs)?);
    Ok(text)
}

/// The plan of the Pulumi projects only (what they needed through the others, they
/// need directly); an error when there is none.
fn pulumi_projects(full: &Plan, ctx: &ExportContext) -> Result<Plan> {
    let keep: Vec<bool> = full
        .nodes
        .iter()
        .map(|n| n.kind == NodeKind::Pulumi)
        .collect();
    let plan = full.subplan(&keep);
    if plan.nodes.is_empty() {
        return Err(Error::config(format!(
            "profile `{}` has no Pulumi project, so there is nothing for the Pulumi Kubernetes Operator to run.\n  Export it with `--format github-actions` or `--format argo`, which run every project through strata.",
            ctx.provider
        )));
    }
    Ok(plan)
}

/// The keys of the inputs object the user creates, for the `inputs:` not known at
/// export time: each `<key> (output <output> of <upstream>)`.
#[derive(Default)]
struct ToCreate {
    /// In the ConfigMap.
    config_map: Vec<String>,
    /// In the Secret: the secret outputs.
    secret: Vec<String>,
}

/// What a Stack's `inputs:` become: literal config, or references to the inputs object.
#[derive(Default)]
struct StackInputs {
    config: BTreeMap<String, serde_json::Value>,
    config_ref: BTreeMap<String, ConfigMapRef>,
    secrets_ref: BTreeMap<String, EnvRef>,
}

/// The `inputs:` of `node`: the value known now as literal config, a secret from the
/// Secret, anything else from the ConfigMap (its key noted in `to_create`).
fn stack_inputs(node: &Node, ctx: &ExportContext, to_create: &mut ToCreate) -> StackInputs {
    let holder = inputs_object(ctx.stack);
    let mut wired = StackInputs::default();
    for input in node.entry.iter().flat_map(|e| &e.inputs) {
        let known = ctx
            .inputs
            .and_then(|m| m.get(&(input.project.clone(), input.output.clone())));
        let k = inputs_key(&node.path, &input.key);
        match known {
            Some(super::InputValue::Known(v)) => {
                wired.config.insert(input.key.clone(), v.clone());
            }
            Some(super::InputValue::Secret) => {
                wired
                    .secrets_ref
                    .insert(input.key.clone(), env_ref(&holder, &k));
                to_create.secret.push(format!(
                    "{k} (output {} of {})",
                    input.output, input.project
                ));
            }
            _ => {
                wired.config_ref.insert(
                    input.key.clone(),
                    ConfigMapRef {
                        name: holder.clone(),
                        key: k.clone(),
                        json: true,
                    },
                );
                to_create.config_map.push(format!(
                    "{k} (output {} of {})",
                    input.output, input.project
                ));
            }
        }
    }
    wired
}

/// The Stack of step `i`: its project folder, credentials, `inputs:` and prerequisites.
fn stack(
    plan: &Plan,
    i: usize,
    names: &[String],
    ctx: &ExportContext,
    to_create: &mut ToCreate,
) -> Stack {
    let node = &plan.nodes[i];
    let inputs = stack_inputs(node, ctx, to_create);
    let mut annotations = BTreeMap::new();
    annotations.insert("strata/path", node.path.clone());
    Stack {
        api_version: "pulumi.com/v1",
        kind: "Stack",
        metadata: Metadata {
            name: names[i].clone(),
            labels: super::labels(ctx),
            annotations,
        },
        spec: StackSpec {
            stack: format!("organization/{}/{}", node.name, ctx.stack),
            project_repo: REPO_PLACEHOLDER,
            branch: "main",
            repo_dir: match ctx.projects_dir {
                "." => node.path.clone(),
                dir => format!("{dir}/{}", node.path),
            },
            service_account_name: SERVICE_ACCOUNT,
            refresh: true,
            destroy_on_finalize: false,
            env_refs: [
                (
                    "PULUMI_ACCESS_TOKEN",
                    env_ref(SECRET, "PULUMI_ACCESS_TOKEN"),
                ),
                (
                    "PULUMI_CONFIG_PASSPHRASE",
                    env_ref(SECRET, "PULUMI_CONFIG_PASSPHRASE"),
                ),
            ]
            .into_iter()
            .collect(),
            config: inputs.config,
            config_ref: inputs.config_ref,
            secrets_ref: inputs.secrets_ref,
            prerequisites: super::needs_in_order(plan, i)
                .into_iter()
                .map(|j| Prerequisite {
                    name: names[j].clone(),
                    requirement: Requirement {
                        succeeded_within_duration: SUCCEEDED_WITHIN,
                    },
                })
                .collect(),
        },
    }
}

/// The header's notes: what was left out, what the Stacks do and what to create
/// before applying them.
fn notes(full: &Plan, plan: &Plan, ctx: &ExportContext, to_create: &ToCreate) -> Vec<String> {
    let commands = left_out(full);
    let holder = inputs_object(ctx.stack);
    let mut notes = Vec::new();
    if !commands.is_empty() {
        notes.push(format!(
            "Left out: the command projects {}. The operator runs Pulumi programs only; run them elsewhere (`strata up -p {} -s {} --project <path>`) before the Stacks that came after them. Their dependents wait for what they waited for.",
            commands.join(", "),
            ctx.provider,
            ctx.stack
        ));
    }
    notes.extend([
        format!(
            "One Pulumi Kubernetes Operator Stack per Pulumi project of {}; spec.prerequisites is strata's dependency graph (each prerequisite must have succeeded within {SUCCEEDED_WITHIN}, else the operator runs it again first).",
            ctx.profile_named()
        ),
        "Before applying:".to_string(),
        format!(
            "- spec.projectRepo ({REPO_PLACEHOLDER}) and spec.branch (main) are placeholders: set them to the git repository that holds this workspace, and add spec.gitAuth if it is private."
        ),
        "- spec.stack is organization/<project>/<stack>: on Pulumi Cloud replace `organization` with your organization; on a self-managed backend set spec.backend (s3://..., azblob://..., gs://...) to the one strata uses.".to_string(),
        format!(
            "- Create the Secret `{SECRET}` in the Stacks' namespace with PULUMI_ACCESS_TOKEN and PULUMI_CONFIG_PASSPHRASE (remove the envRefs entry you do not use), and the ServiceAccount `{SERVICE_ACCOUNT}` the operator's workspaces run as."
        ),
        "- The operator runs `pulumi up` in each project folder, nothing of what strata adds: it reads Pulumi.<stack>.yaml from the project folder, not config/pulumi/Pulumi.<stack>.yaml (copy the keys into spec.config or that file), does not prompt, and runs no on_success hooks.".to_string(),
    ]);
    let used = super::used_pools(plan, ctx.pools);
    if !used.is_empty() {
        notes.push(format!(
            "- Pools are not carried ({}): the operator has no limit per group of Stacks, it reconciles them as its own settings allow. Bring a pool's projects up with strata (`strata up --filter ...`) when their limit matters.",
            super::at_once(&used)
        ));
    }
    let has_inputs = !super::paths_with_inputs(plan).is_empty();
    if has_inputs && to_create.config_map.is_empty() && to_create.secret.is_empty() {
        notes.push(
            "- `inputs:` are wired into spec.config with the upstream outputs as they were at export time: export again after an upstream's outputs change.".to_string(),
        );
    } else if has_inputs {
        notes.push(
            "- `inputs:` whose upstream output was known at export time are in spec.config (export again after it changes); the others are read from the ConfigMap and Secret below.".to_string(),
        );
        if !to_create.config_map.is_empty() {
            notes.push(format!(
                "- Create the ConfigMap `{holder}` with these keys, each holding its JSON of the upstream output it names, a string in quotes (`\"vpc-123\"`), as `strata outputs <upstream> --output json` prints it once it is deployed (spec.configRef reads them with `json: true`, so objects and lists stay structured): {}.",
                to_create.config_map.join(", ")
            ));
        }
        if !to_create.secret.is_empty() {
            notes.push(format!(
                "- Create the Secret `{holder}` with these keys, each the secret upstream output it names (`strata outputs <upstream> --show-secrets --output json`): {}.",
                to_create.secret.join(", ")
            ));
        }
    }
    if super::has_builtin(full) {
        notes.push(format!(
            "- The built-in secrets step (@secrets) is not a Stack: its dependents wait for what it waits for. Get the profile's secrets into the cluster before the kubernetes Stacks run (`strata up -p {} -s {} --project @secrets` on a machine that knows the stack's cluster: its kubeconfig hook ran there, or the profile's `cluster:` names a kubeconfig it has; or External Secrets/Sealed Secrets); pass those a project needs as Pulumi config through spec.secretsRef.",
            ctx.provider, ctx.stack
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::*;
    use serde::Deserialize;
    use serde_yaml::Value;

    fn docs(text: &str) -> Vec<Value> {
        serde_yaml::Deserializer::from_str(text)
            .map(|d| Value::deserialize(d).unwrap())
            .collect()
    }

    /// The Stack of project `path` among `docs`.
    fn stack_of<'a>(docs: &'a [Value], path: &str) -> &'a Value {
        docs.iter()
            .find(|d| d["metadata"]["annotations"]["strata/path"] == path)
            .unwrap_or_else(|| panic!("no Stack of {path}"))
    }

    fn is_dns_label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 63
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    /// A profile whose projects live outside projects/ (`projects: .` or another folder)
    /// gives the operator the folder where they are.
    #[test]
    fn repo_dir_follows_the_profiles_projects_folder() {
        let plan = plan_of(&sample(), &[]).unwrap();
        for (dir, prefix) in [(".", ""), ("pulumi/python", "pulumi/python/")] {
            let ctx = ExportContext {
                projects_dir: dir,
                ..CTX
            };
            for d in docs(&render(&plan, &ctx).unwrap()) {
                let path = d["metadata"]["annotations"]["strata/path"]
                    .as_str()
                    .unwrap();
                assert_eq!(d["spec"]["repoDir"], Value::from(format!("{prefix}{path}")));
            }
        }
    }

    #[test]
    fn one_stack_per_pulumi_project_with_prerequisites() {
        let plan = plan_of(&sample(), &[]).unwrap();
        let text = render(&plan, &CTX).unwrap();
        assert!(text.starts_with("# Generated by `strata export --format pko -p p -s dev`."));
        let docs = docs(&text);
        let bridged = crate::export::without_builtin(&plan);
        assert_eq!(docs.len(), bridged.nodes.len());
        let by_name: BTreeMap<String, String> = docs
            .iter()
            .map(|d| {
                (
                    d["metadata"]["name"].as_str().unwrap().to_string(),
                    d["metadata"]["annotations"]["strata/path"]
                        .as_str()
                        .unwrap()
                        .to_string(),
                )
            })
            .collect();
        assert_eq!(by_name.len(), docs.len(), "names are unique");
        for d in &docs {
            assert_eq!(d["apiVersion"], "pulumi.com/v1");
            assert_eq!(d["kind"], "Stack");
            let name = d["metadata"]["name"].as_str().unwrap();
            assert!(is_dns_label(name), "{name}");
            let path = by_name[name].clone();
            let spec = &d["spec"];
            assert_eq!(spec["repoDir"], Value::from(format!("projects/{path}")));
            let project = path.rsplit('/').next().unwrap();
            assert_eq!(
                spec["stack"],
                Value::from(format!("organization/{project}/dev"))
            );
            assert_eq!(spec["refresh"], true);
            assert_eq!(spec["destroyOnFinalize"], false);
            assert_eq!(
                spec["envRefs"]["PULUMI_CONFIG_PASSPHRASE"]["secret"]["name"],
                SECRET
            );
            assert_eq!(spec["envRefs"]["PULUMI_ACCESS_TOKEN"]["type"], "Secret");
            let mut prereqs: Vec<String> = spec
                .get("prerequisites")
                .and_then(|p| p.as_sequence())
                .map(|s| {
                    s.iter()
                        .map(|p| {
                            assert_eq!(p["requirement"]["succeededWithinDuration"], "24h");
                            by_name[p["name"].as_str().unwrap()].clone()
                        })
                        .collect()
                })
                .unwrap_or_default();
            prereqs.sort();
            let i = bridged.index_of(&path).unwrap();
            let mut want: Vec<String> = bridged
                .needs_paths(i)
                .into_iter()
                .map(String::from)
                .collect();
            want.sort();
            assert_eq!(prereqs, want, "prerequisites of {path}");
        }
        let ns = stack_of(&docs, "k8s/ns");
        assert_eq!(
            ns["spec"]["prerequisites"].as_sequence().unwrap().len(),
            2,
            "bridged through @secrets to both infrastructure sinks"
        );
        assert!(
            text.contains("infra/eks"),
            "the header lists projects with inputs"
        );
    }

    #[test]
    fn names_are_valid_and_unique_even_when_long_or_colliding() {
        let long = "very-long-segment/".repeat(6);
        let plan = planned(
            &format!(
                "infrastructure:\n  - path: A_b\n  - path: a.b\n  - path: {long}x\n  - path: {long}y\n"
            ),
            &[],
        );
        let docs = docs(&render(&plan, &CTX).unwrap());
        let names: Vec<&str> = docs
            .iter()
            .map(|d| d["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names[0], "dev-a-b");
        assert_eq!(names[1], "dev-a-b-2");
        for n in &names {
            assert!(is_dns_label(n), "{n}");
        }
        let set: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(set.len(), names.len());
        // Prerequisites name the (possibly shortened) names.
        assert_eq!(docs[3]["spec"]["prerequisites"][0]["name"], names[2]);
    }

    #[test]
    fn command_projects_are_left_out_and_bridged() {
        let plan = planned(
            "infrastructure:\n  - path: vpc\n  - path: build\nkubernetes:\n  - path: push\n  - path: app\n",
            &["build", "push"],
        );
        let text = render(&plan, &CTX).unwrap();
        assert!(
            text.contains("Left out: the command projects build, push"),
            "{text}"
        );
        let docs: Vec<Value> = serde_yaml::Deserializer::from_str(&text)
            .map(|d| Value::deserialize(d).unwrap())
            .collect();
        let names: Vec<&str> = docs
            .iter()
            .map(|d| d["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["dev-vpc", "dev-app"]);
        // vpc → build → push → app became vpc → app.
        assert_eq!(docs[1]["spec"]["prerequisites"][0]["name"], "dev-vpc");
        // Only command projects: nothing to export.
        let only = planned("infrastructure:\n  - path: build\n", &["build"]);
        let e = render(&only, &CTX).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        e.assert_says("github-actions");
    }

    #[test]
    fn inputs_are_wired_into_config_config_ref_and_secrets_ref() {
        let p = planned(
            "infrastructure:\n  - path: infra/vpc\n  - path: infra/eks\n    inputs:\n      'eks:vpc': infra/vpc:id\n      cidr: infra/vpc:cidr\n      token: infra/vpc:token\n      later: infra/vpc:later\n",
            &[],
        );
        let mut known = super::super::InputValues::new();
        let key = |o: &str| ("infra/vpc".to_string(), o.to_string());
        known.insert(
            key("id"),
            super::super::InputValue::Known(serde_json::json!("vpc-123")),
        );
        known.insert(
            key("cidr"),
            super::super::InputValue::Known(serde_json::json!({"a": [1, 2]})),
        );
        known.insert(key("token"), super::super::InputValue::Secret);
        known.insert(key("later"), super::super::InputValue::Unknown);
        let ctx = ExportContext {
            inputs: Some(&known),
            ..CTX
        };
        let text = render(&p, &ctx).unwrap();
        let docs_of = docs;
        let docs = docs_of(&text);
        let eks = stack_of(&docs, "infra/eks");
        let spec = &eks["spec"];
        assert_eq!(spec["config"]["eks:vpc"], "vpc-123");
        assert_eq!(
            spec["config"]["cidr"]["a"][1], 2,
            "structured values stay structured"
        );
        assert!(
            spec["config"].get("token").is_none(),
            "a secret is never literal"
        );
        assert_eq!(spec["secretsRef"]["token"]["type"], "Secret");
        assert_eq!(
            spec["secretsRef"]["token"]["secret"]["name"],
            "strata-dev-inputs"
        );
        assert_eq!(
            spec["secretsRef"]["token"]["secret"]["key"],
            "infra_eks.token"
        );
        assert_eq!(spec["configRef"]["later"]["name"], "strata-dev-inputs");
        assert_eq!(spec["configRef"]["later"]["key"], "infra_eks.later");
        // The value may be structured (an object, a list): the ConfigMap holds its JSON.
        assert_eq!(spec["configRef"]["later"]["json"], true, "{text}");
        assert!(text.contains("its JSON"), "{text}");
        assert!(
            text.contains("Create the ConfigMap `strata-dev-inputs`"),
            "{text}"
        );
        assert!(
            text.contains("Create the Secret `strata-dev-inputs`"),
            "{text}"
        );
        // Without anything known, every input points at the ConfigMap.
        let text = render(&p, &CTX).unwrap();
        let docs = docs_of(&text);
        let eks = stack_of(&docs, "infra/eks");
        assert_eq!(
            eks["spec"]["configRef"].as_mapping().unwrap().len(),
            4,
            "{text}"
        );
    }

    #[test]
    fn names_fit_the_crd_rule_and_stay_unique() {
        let long = "kubernetes/nginx/ingress-controller-namespace";
        let plan = planned(
            &format!("infrastructure:\n  - path: {long}\n  - path: {long}-x\n  - path: {long}/x\n"),
            &[],
        );
        let names = stack_names(&plan, "dev");
        for n in &names {
            assert!(n.len() <= MAX_NAME, "{n}");
        }
        let unique: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }
}
