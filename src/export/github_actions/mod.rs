//! The plan as a GitHub Actions workflow: strata built once in a first job and handed on
//! as an artifact; one job per project (a chain of command projects shares one job, so
//! the files and images one leaves are there for the next), `needs:` from the graph;
//! the profile's credentials as secrets, AWS through OIDC when a role is configured.
//! What a runner installs (strata from its pinned source, each project's dependencies
//! by runtime) is [`install`]'s.
//! [`review_apply`] is the other shape: preview a pull request into a plan bundle, apply
//! that bundle after the merge; it shares the build job, the steps and the settings here.

mod install;
mod jobs;
pub mod review_apply;

pub use install::{StrataSource, default_source};

use serde::Serialize;
use serde_yaml::{Mapping, Value};

use super::{ExportContext, Format};
use crate::error::Result;
use crate::plan::{NodeKind, Plan};
use jobs::ProjectJobs;

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

#[derive(Serialize, Clone)]
struct Concurrency {
    group: String,
    #[serde(rename = "cancel-in-progress")]
    cancel_in_progress: bool,
}

#[derive(Serialize, Default)]
struct Job {
    name: String,
    #[serde(rename = "if", skip_serializing_if = "Option::is_none")]
    condition: Option<String>,
    #[serde(rename = "runs-on")]
    runs_on: &'static str,
    /// The GitHub environment whose required reviewers hold the job: the `approve:`
    /// rule that holds one of its projects.
    #[serde(skip_serializing_if = "Option::is_none")]
    environment: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    needs: Vec<String>,
    /// The job's own permissions (they replace the workflow's).
    #[serde(skip_serializing_if = "Option::is_none")]
    permissions: Option<Mapping>,
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency: Option<Concurrency>,
    steps: Vec<Step>,
}

/// The job that builds strata once for the whole workflow.
const BUILD_JOB: &str = "build-strata";
const BIN_ARTIFACT: &str = "strata-bin";

#[derive(Serialize, Default)]
struct Step {
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    /// For `steps.<id>.outputs`.
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(rename = "if", skip_serializing_if = "Option::is_none")]
    condition: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    uses: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    with: Option<Mapping>,
    #[serde(skip_serializing_if = "Option::is_none")]
    env: Option<Mapping>,
    /// The folder `run` runs in, relative to the checkout.
    #[serde(rename = "working-directory", skip_serializing_if = "Option::is_none")]
    working_directory: Option<String>,
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

/// A word for a generated shell command: left as it is when it is plainly a word, else
/// single-quoted (`do`, `done`, `in`… are shell keywords; paths may hold anything).
fn shell_word(word: &str) -> String {
    const KEYWORDS: &[&str] = &[
        "if", "then", "else", "elif", "fi", "case", "esac", "for", "select", "while", "until",
        "do", "done", "in", "function", "time", "coproc",
    ];
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:@%+=,".contains(c))
        && !KEYWORDS.contains(&word);
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The workflow of `full` (the secrets step bridged): the build job, then a job per
/// project or chain of command projects, under its header.
pub fn render(full: &Plan, ctx: &ExportContext) -> Result<String> {
    let plan = super::without_builtin(full);
    let projects = ProjectJobs::new(&plan, ctx);
    let mut jobs = Mapping::new();
    insert_job(&mut jobs, BUILD_JOB, build_job(ctx.strata_from))?;
    for lead in projects.leads() {
        insert_job(&mut jobs, &projects.ids[lead], projects.job(lead))?;
    }
    let workflow = dispatch_workflow(ctx, jobs);
    let notes = notes(full, &plan, ctx);
    let mut text = super::header(Format::GithubActions, ctx, &notes);
    text.push_str(&super::to_yaml(&[workflow])?);
    Ok(text)
}

/// Adds `job` to `jobs` under `id`.
fn insert_job(jobs: &mut Mapping, id: &str, job: Job) -> Result<()> {
    jobs.insert(
        Value::from(id),
        serde_yaml::to_value(job).map_err(yaml_error)?,
    );
    Ok(())
}

/// The workflow, run by hand on a stack (workflow_dispatch), one run of a stack at a
/// time.
fn dispatch_workflow(ctx: &ExportContext, jobs: Mapping) -> Workflow {
    Workflow {
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
        permissions: permissions(ctx, &[]),
        concurrency: Concurrency {
            group: format!("strata-{}-${{{{ inputs.stack }}}}", ctx.provider),
            cancel_in_progress: false,
        },
        env: workflow_env(ctx, "${{ inputs.stack }}"),
        jobs,
    }
}

/// The header's notes: what the jobs do, the setup, and what runs otherwise than in
/// strata (the secrets step, command projects, pools).
fn notes(full: &Plan, plan: &Plan, ctx: &ExportContext) -> Vec<String> {
    let mut notes = vec![format!(
        "One job per project of {}; `needs:` is strata's dependency graph, so what does not depend on each other runs at the same time. strata is installed once (job {BUILD_JOB}) and handed to every job as an artifact; each job installs its projects' dependencies and runs `strata up --project <path>` on a fresh runner.",
        ctx.profile_named()
    )];
    notes.extend(setup_notes(ctx));
    if super::has_builtin(full) {
        notes.push(format!(
            "- The built-in secrets step (@secrets) is not a job: it writes the secrets into the cluster with the kubeconfig of the machine that ran the infrastructure stage, which a fresh runner does not have. The kubernetes jobs wait for what it waits for instead. Get the secrets into the cluster before they run: `strata up -p {} -s <stack> --project @secrets` on a machine that knows the stack's cluster (its kubeconfig hook ran there, or the profile's `cluster:` names a kubeconfig it has; strata never writes into whatever context is current), or the cluster's own mechanism (External Secrets, Sealed Secrets).",
            ctx.provider
        ));
    }
    if plan.nodes.iter().any(|n| n.kind == NodeKind::Command) {
        notes.push(
            "- Command projects: a command project that needs another command project runs in that project's job, on the same runner, so files and images one leaves (an image build, then its push) are there for the next. Outputs written for `inputs:` reach jobs on other runners as artifacts (strata-outputs-<job>, kept one day)."
                .to_string(),
        );
    }
    let used = super::used_pools(plan, ctx.pools);
    if !used.is_empty() {
        notes.push(format!(
            "- Pools ({}): each is as many chains of its jobs, in order, as its limit, so no more run at once; a job waits for the one before it in its chain whatever became of it (`if: !cancelled()` and its own needs succeeded). GitHub's `concurrency:` groups are no equivalent: one keeps a single job waiting and cancels the others. The limits are fixed here: halving a pool when a project is throttled happens only inside strata, which retries that job's project.",
            super::at_once(&used)
        ));
    }
    notes
}

fn yaml_error(e: serde_yaml::Error) -> crate::error::Error {
    crate::error::Error::failed(format!("cannot write the export as YAML: {e}"))
}

/// Installs strata once from `source` (checking out the repository only to build its
/// own source) and keeps the binary as an artifact.
fn build_job(source: &StrataSource) -> Job {
    let mut steps = Vec::new();
    if source.needs_checkout() {
        steps.push(checkout());
    }
    steps.push(source.install_step());
    steps.push(upload_step(
        "Hand strata to the other jobs",
        BIN_ARTIFACT,
        "${{ runner.temp }}/strata/bin/strata",
        1,
    ));
    Job {
        name: "build strata".into(),
        runs_on: "ubuntu-latest",
        needs: vec![],
        steps,
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------------------
// Shared with review_apply

/// Whether AWS credentials come through OIDC (the profile reads AWS keys).
fn uses_aws_oidc(ctx: &ExportContext) -> bool {
    ctx.credentials.iter().any(|c| c == "AWS_ACCESS_KEY_ID")
}

/// `contents: read`, `id-token: write` for AWS OIDC, then `extra` (scope, access).
fn permissions(ctx: &ExportContext, extra: &[(&str, &str)]) -> Mapping {
    let mut permissions = map(&[("contents", "read")]);
    if uses_aws_oidc(ctx) {
        permissions.insert("id-token".into(), "write".into());
    }
    permissions.extend(map(extra));
    permissions
}

/// The workflow's environment: `PULUMI_STACK` is `stack` (an expression or a name), the
/// backend and passphrases and the profile's `credentials:` are repository secrets.
fn workflow_env(ctx: &ExportContext, stack: &str) -> Mapping {
    let mut env = map(&[
        ("PULUMI_STACK", stack),
        ("PULUMI_BACKEND_URL", "${{ secrets.PULUMI_BACKEND_URL }}"),
        ("PULUMI_ACCESS_TOKEN", "${{ secrets.PULUMI_ACCESS_TOKEN }}"),
        (
            "PULUMI_CONFIG_PASSPHRASE",
            "${{ secrets.PULUMI_CONFIG_PASSPHRASE }}",
        ),
        ("STRATA_PASSPHRASE", "${{ secrets.STRATA_PASSPHRASE }}"),
    ]);
    for c in ctx.credentials {
        env.insert(c.as_str().into(), format!("${{{{ secrets.{c} }}}}").into());
    }
    env
}

fn checkout() -> Step {
    Step {
        uses: Some("actions/checkout@v4".into()),
        ..Default::default()
    }
}

/// A step that runs the bash script `run`.
fn run_step(name: &str, run: String) -> Step {
    Step {
        name: Some(name.into()),
        run: Some(run),
        ..Default::default()
    }
}

/// The first steps of a job that runs strata: the checkout, then the binary of
/// build-strata on PATH.
fn strata_steps() -> Vec<Step> {
    vec![
        checkout(),
        Step {
            name: Some("Get strata (built once, in build-strata)".into()),
            uses: Some("actions/download-artifact@v4".into()),
            with: Some(map(&[
                ("name", BIN_ARTIFACT),
                ("path", "${{ runner.temp }}/strata-bin"),
            ])),
            ..Default::default()
        },
        Step {
            name: Some("Put strata on PATH".into()),
            run: Some(
                "chmod +x \"$RUNNER_TEMP/strata-bin/strata\" && echo \"$RUNNER_TEMP/strata-bin\" >> \"$GITHUB_PATH\"".into(),
            ),
            ..Default::default()
        },
    ]
}

/// The Pulumi CLI when `pulumi` is true, and AWS credentials through OIDC under the
/// session name `aws_session` when it is set.
fn runner_setup(pulumi: bool, aws_session: Option<String>) -> Vec<Step> {
    let mut steps = Vec::new();
    if pulumi {
        steps.push(Step {
            name: Some("Install the Pulumi CLI".into()),
            uses: Some("pulumi/actions@v6".into()),
            ..Default::default()
        });
    }
    if let Some(session) = aws_session {
        let mut with = map(&[
            ("role-to-assume", "${{ vars.AWS_ROLE_TO_ASSUME }}"),
            ("aws-region", "${{ vars.AWS_REGION }}"),
        ]);
        with.insert("role-session-name".into(), session.into());
        steps.push(Step {
            name: Some("AWS credentials through OIDC (when vars.AWS_ROLE_TO_ASSUME is set)".into()),
            condition: Some("${{ vars.AWS_ROLE_TO_ASSUME != '' }}".into()),
            uses: Some("aws-actions/configure-aws-credentials@v4".into()),
            with: Some(with),
            ..Default::default()
        });
    }
    steps
}

/// Keeps `path` as the artifact `artifact` for `days` days; nothing there fails the step.
fn upload_step(name: &str, artifact: &str, path: &str, days: u32) -> Step {
    let mut with = map(&[
        ("name", artifact),
        ("path", path),
        ("if-no-files-found", "error"),
    ]);
    with.insert("retention-days".into(), days.into());
    Step {
        name: Some(name.into()),
        uses: Some("actions/upload-artifact@v4".into()),
        with: Some(with),
        ..Default::default()
    }
}

/// What to set up before the first run: the shared backend, the passphrases, the
/// committed stack config, how strata is built, the credentials.
fn setup_notes(ctx: &ExportContext) -> Vec<String> {
    let mut notes = vec![
        "Before the first run:".to_string(),
        "- Set the repository secret PULUMI_BACKEND_URL to a backend every runner shares (s3://..., azblob://..., gs://..., or https://api.pulumi.com with PULUMI_ACCESS_TOKEN): the default file backend under .strata/ is gone when a job ends, and later jobs read earlier outputs from the backend.".to_string(),
        "- Set PULUMI_CONFIG_PASSPHRASE if the stacks use the passphrase secrets provider, and STRATA_PASSPHRASE if the profile has secrets (config/secrets/<stack>.age). Unset secrets are empty and ignored.".to_string(),
        "- Commit the stack config: `git add -f config/pulumi/Pulumi.<stack>.yaml` (this repository's .gitignore keeps the ones local runs make out of git, so the file must be added on purpose); a job cannot prompt for missing config.".to_string(),
        format!(
            "- strata comes from one pinned source, set with `--strata-from` when exporting: {}. Job {BUILD_JOB} installs it once and hands the binary to the other jobs. To move to another version, export again with another `--strata-from`.",
            ctx.strata_from.describe()
        ),
        install::dependency_note(),
    ];
    if !ctx.credentials.is_empty() {
        notes.push(format!(
            "- Cloud credentials: the profile's `credentials:` ({}) reach every job as repository secrets of those names.{}",
            ctx.credentials.join(", "),
            if uses_aws_oidc(ctx) {
                " For AWS the recommended way is OIDC, with no long-lived key: set the repository variables AWS_ROLE_TO_ASSUME (an IAM role trusting GitHub's OIDC provider for this repository) and AWS_REGION, and each job assumes the role (aws-actions/configure-aws-credentials); leave the AWS_* secrets unset."
            } else {
                ""
            }
        ));
    }
    notes
}

#[cfg(test)]
mod tests;
