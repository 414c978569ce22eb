//! `export --format github-actions --review-apply`: one workflow, two paths. On a pull
//! request into the default branch, `preview` saves a plan bundle
//! (`strata preview --save-plan`) and uploads it as an artifact named after the stack and
//! the pull request's head commit; on the push that merges it, `apply` finds that
//! artifact in the pull request's last successful run and applies exactly that bundle
//! (`strata up --plan`). No bundle, no apply: it never falls back to a plain `up`.
//!
//! strata is built once per run by the build job of the per-project export, and every
//! step and setting (secrets, the Pulumi CLI, AWS OIDC) is that export's.

use serde::Serialize;
use serde_yaml::Mapping;

use super::{
    BUILD_JOB, Concurrency, Job, Step, build_job, insert_job, install, map, needs_pulumi_cli,
    permissions, run_step, runner_setup, setup_notes, shell_word, strata_steps, upload_step,
    uses_aws_oidc, workflow_env,
};
use crate::error::Result;
use crate::export::{ExportContext, Format};
use crate::plan::Plan;

/// The branch merges land on (`on.push`, `on.pull_request`).
const DEFAULT_BRANCH: &str = "main";
const PREVIEW_JOB: &str = "preview";
const APPLY_JOB: &str = "apply";
/// The bundle's folder in the checkout, where preview writes it and apply reads it.
const BUNDLE_DIR: &str = "strata-plan";
/// The preview's Markdown summary (it also goes to `$GITHUB_STEP_SUMMARY`).
const SUMMARY_FILE: &str = "strata-preview.md";
/// Days a bundle stays downloadable: a pull request merged later needs a new preview.
const BUNDLE_DAYS: u32 = 30;
/// Days the mark of an applied bundle is kept (GitHub's longest).
const APPLIED_DAYS: u32 = 90;

#[derive(Serialize)]
struct Workflow {
    name: String,
    on: On,
    permissions: Mapping,
    env: Mapping,
    jobs: Mapping,
}

#[derive(Serialize)]
struct On {
    pull_request: Branches,
    push: Branches,
}

#[derive(Serialize)]
struct Branches {
    branches: Vec<&'static str>,
}

/// The artifact names of the stack's bundles (`strata-plan-<stack>-`) and of the
/// bundles applied (`strata-applied-<stack>-`); the head commit of the pull request
/// follows.
fn artifact_prefixes(stack: &str) -> (String, String) {
    let stack = crate::util::slug(stack);
    (
        format!("strata-plan-{stack}-"),
        format!("strata-applied-{stack}-"),
    )
}

/// The apply job's search, in bash: the pull request this push merged, this
/// workflow's last successful run on its head commit, and whether its bundle was
/// applied already. Sets the step outputs `run-id` and `head-sha`, or fails saying why.
const FIND_BUNDLE: &str = r#"# No reviewed bundle: this step fails and says why; the job never falls back to a plain `strata up`.
# The pull request this push merged (GitHub associates the merge or squash commit with it).
pr=$(gh api "repos/$GITHUB_REPOSITORY/commits/$GITHUB_SHA/pulls" \
  --jq '[.[] | select(.merged_at != null)][0] // empty | "\(.number) \(.head.sha)"')
if [ -z "$pr" ]; then
  echo "::error::No merged pull request for $GITHUB_SHA, so no reviewed plan bundle. strata applies only what a pull request previewed: open one."
  exit 1
fi
read -r number head_sha <<< "$pr"
# This workflow's last successful run on the pull request's head commit made the bundle.
workflow=${GITHUB_WORKFLOW_REF%%@*}
workflow=${workflow##*/}
run_id=$(gh api "repos/$GITHUB_REPOSITORY/actions/workflows/$workflow/runs?event=pull_request&status=success&head_sha=$head_sha&per_page=1" \
  --jq '.workflow_runs[0].id // empty')
if [ -z "$run_id" ]; then
  echo "::error::Pull request #$number has no successful preview of its last commit $head_sha, so no plan bundle to apply. Re-run its preview job (or open a new pull request), then re-run this job."
  exit 1
fi
applied=$(gh api "repos/$GITHUB_REPOSITORY/actions/artifacts?name=$APPLIED_PREFIX$head_sha" \
  --jq '[.artifacts[] | select(.expired | not)] | length')
if [ "$applied" != 0 ]; then
  echo "::error::The plan bundle of pull request #$number ($head_sha) was applied already (artifact $APPLIED_PREFIX$head_sha); a bundle applies once."
  exit 1
fi
echo "Applying the plan bundle of pull request #$number, previewed in run $run_id."
{
  echo "run-id=$run_id"
  echo "head-sha=$head_sha"
} >> "$GITHUB_OUTPUT"
"#;

pub fn render(plan: &Plan, ctx: &ExportContext) -> Result<String> {
    let runner = Runner::of(plan, ctx);
    let jobs: Vec<(&str, Job)> = vec![
        (BUILD_JOB, build_job(ctx.strata_from)),
        (PREVIEW_JOB, preview_job(ctx, preview_steps(ctx, &runner))),
        (APPLY_JOB, apply_job(ctx, apply_steps(ctx, &runner))),
    ];
    let mut job_map = Mapping::new();
    for (id, job) in jobs {
        insert_job(&mut job_map, id, job)?;
    }
    let workflow = Workflow {
        name: format!("strata review and apply ({}, {})", ctx.provider, ctx.stack),
        on: On {
            pull_request: Branches {
                branches: vec![DEFAULT_BRANCH],
            },
            push: Branches {
                branches: vec![DEFAULT_BRANCH],
            },
        },
        permissions: permissions(ctx, &[]),
        env: workflow_env(ctx, ctx.stack),
        jobs: job_map,
    };
    let mut text = super::super::header(Format::GithubActionsReviewApply, ctx, &notes(ctx));
    text.push_str(&super::super::to_yaml(&[workflow])?);
    Ok(text)
}

/// What both jobs set up before strata runs: the Pulumi CLI when a project needs it,
/// an AWS session when the profile uses OIDC, and every project's dependencies (both
/// jobs run the whole profile).
struct Runner {
    pulumi: bool,
    aws: bool,
    deps: Vec<install::Deps>,
}

impl Runner {
    fn of(plan: &Plan, ctx: &ExportContext) -> Runner {
        Runner {
            pulumi: (0..plan.nodes.len()).any(|i| needs_pulumi_cli(plan, i)),
            aws: uses_aws_oidc(ctx),
            deps: plan
                .order
                .iter()
                .filter_map(|&i| install::deps_of(&plan.nodes[i], ctx.projects_dir))
                .collect(),
        }
    }

    /// The runner set up (an AWS session named `session`), the dependencies installed,
    /// then strata's `command` as the step `name`.
    fn then_run(&self, session: &str, name: &str, command: String) -> Vec<Step> {
        let mut steps = runner_setup(self.pulumi, self.aws.then(|| session.into()));
        steps.extend(install::dependency_steps(&self.deps));
        steps.push(run_step(name, command));
        steps
    }
}

/// The pull request's path: preview everything into a plan bundle, kept as an artifact
/// named after the head commit.
fn preview_steps(ctx: &ExportContext, runner: &Runner) -> Vec<Step> {
    let (bundle_prefix, _) = artifact_prefixes(ctx.stack);
    let (provider, stack) = (shell_word(ctx.provider), shell_word(ctx.stack));
    let mut steps = strata_steps();
    steps.extend(runner.then_run(
        "strata-preview",
        "Preview the whole environment and save the plan bundle",
        format!(
            "strata preview --provider {provider} --stack {stack} --save-plan {BUNDLE_DIR} --summary-file {SUMMARY_FILE} --non-interactive"
        ),
    ));
    steps.push(upload_step(
        "Keep the plan bundle for the apply after the merge",
        &format!("{bundle_prefix}${{{{ github.event.pull_request.head.sha }}}}"),
        BUNDLE_DIR,
        BUNDLE_DAYS,
    ));
    steps
}

/// The merge's path: find the bundle the merged pull request reviewed, apply exactly
/// it, and mark it applied.
fn apply_steps(ctx: &ExportContext, runner: &Runner) -> Vec<Step> {
    let (bundle_prefix, applied_prefix) = artifact_prefixes(ctx.stack);
    let (provider, stack) = (shell_word(ctx.provider), shell_word(ctx.stack));
    let mut steps = strata_steps();
    steps.push(Step {
        name: Some("Find the plan bundle the merged pull request reviewed".into()),
        id: Some("bundle".into()),
        env: Some(map(&[
            ("GH_TOKEN", "${{ github.token }}"),
            ("APPLIED_PREFIX", &applied_prefix),
        ])),
        run: Some(FIND_BUNDLE.into()),
        ..Default::default()
    });
    steps.push(Step {
        name: Some("Get the plan bundle".into()),
        uses: Some("actions/download-artifact@v4".into()),
        with: Some(map(&[
            (
                "name",
                &format!("{bundle_prefix}${{{{ steps.bundle.outputs.head-sha }}}}"),
            ),
            ("path", BUNDLE_DIR),
            ("run-id", "${{ steps.bundle.outputs.run-id }}"),
            ("github-token", "${{ github.token }}"),
        ])),
        ..Default::default()
    });
    steps.extend(runner.then_run(
        "strata-apply",
        "Apply exactly the reviewed plan bundle",
        format!(
            "strata up --provider {provider} --stack {stack} --plan {BUNDLE_DIR} --non-interactive"
        ),
    ));
    steps.push(upload_step(
        "Mark the plan bundle applied",
        &format!("{applied_prefix}${{{{ steps.bundle.outputs.head-sha }}}}"),
        BUNDLE_DIR,
        APPLIED_DAYS,
    ));
    steps
}

/// The preview job, on pull requests only; a newer commit cancels it.
fn preview_job(ctx: &ExportContext, steps: Vec<Step>) -> Job {
    Job {
        name: format!("preview {} {} into a plan bundle", ctx.provider, ctx.stack),
        condition: Some("github.event_name == 'pull_request'".into()),
        runs_on: "ubuntu-latest",
        needs: vec![BUILD_JOB.into()],
        concurrency: Some(Concurrency {
            // A newer commit of the pull request makes this preview's bundle stale.
            group: format!(
                "strata-{}-{}-preview-${{{{ github.event.pull_request.number }}}}",
                ctx.provider, ctx.stack
            ),
            cancel_in_progress: true,
        }),
        steps,
        ..Default::default()
    }
}

/// The apply job, on pushes to the default branch: reads the runs' artifacts, one at a
/// time per stack.
fn apply_job(ctx: &ExportContext, steps: Vec<Step>) -> Job {
    Job {
        name: format!("apply the reviewed plan bundle to {}", ctx.stack),
        condition: Some("github.event_name == 'push'".into()),
        runs_on: "ubuntu-latest",
        environment: None,
        needs: vec![BUILD_JOB.into()],
        permissions: Some(permissions(
            ctx,
            &[("actions", "read"), ("pull-requests", "read")],
        )),
        // The per-project export's group: one `up` of the stack at a time, never
        // cancelled half-way.
        concurrency: Some(Concurrency {
            group: format!("strata-{}-{}", ctx.provider, ctx.stack),
            cancel_in_progress: false,
        }),
        steps,
    }
}

/// The header: what the two paths do, when apply refuses, then the setup.
fn notes(ctx: &ExportContext) -> Vec<String> {
    let (bundle, applied) = artifact_prefixes(ctx.stack);
    let mut notes = vec![
        format!(
            "Review, then apply (docs/book/src/previews.md, \"Review, then apply\"), for {}, stack `{}`, the whole environment in one job per path; strata is installed once per run (job {BUILD_JOB}).",
            ctx.profile_named(),
            ctx.stack
        ),
        format!(
            "- On a pull request into {DEFAULT_BRANCH}, job {PREVIEW_JOB} runs `strata preview --save-plan {BUNDLE_DIR}` and uploads the plan bundle (each project's update plan, the manifest, summary.md) as the artifact {bundle}<head commit>, kept {BUNDLE_DAYS} days. The summary is on the run's page."
        ),
        format!(
            "- On the push to {DEFAULT_BRANCH} that merges it, job {APPLY_JOB} downloads that bundle from the pull request's last successful run and runs `strata up --plan {BUNDLE_DIR}`: it applies exactly what was reviewed, and refuses (exit 3, before anything runs) if a project's code, inputs or secrets, the stack config or the profile moved since the preview. An applied bundle is kept as {applied}<head commit>, and a bundle applies once."
        ),
        format!(
            "- No bundle, no apply: a push that merged no pull request, a pull request whose last commit has no successful preview (or whose bundle expired), or a bundle applied already fails job {APPLY_JOB} with a message. It never falls back to a plain `strata up`: re-run the pull request's {PREVIEW_JOB} job, or open a new pull request, then re-run {APPLY_JOB}."
        ),
        format!(
            "- The default branch is taken to be `{DEFAULT_BRANCH}`: edit both `branches:` if yours is named otherwise. Require pull requests to be up to date before merging (branch protection): a bundle previewed before another merge moved its projects is refused."
        ),
        "- Applies of the stack run one at a time and are never cancelled (the concurrency group of the per-project export). GitHub keeps only the newest waiting run of a group, so when merges come faster than applies a waiting apply is cancelled: re-run it.".to_string(),
        "- Pull requests from forks get no secrets, so their preview fails; a bundle holds the stack's secrets only as the backend's ciphertext.".to_string(),
    ];
    if uses_aws_oidc(ctx) {
        notes.push(format!(
            "- AWS OIDC: the role must trust this repository's `pull_request` subject (preview) and `ref:refs/heads/{DEFAULT_BRANCH}` (apply)."
        ));
    }
    notes.extend(setup_notes(ctx));
    notes
}

#[cfg(test)]
mod tests {
    use super::super::super::testutil::*;
    use super::*;
    use serde_yaml::Value;

    fn doc(ctx: &ExportContext) -> (String, Value) {
        let plan = plan_of(&sample(), &[]).unwrap();
        let text = render(&plan, ctx).unwrap();
        let doc = serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        (text, doc)
    }

    fn steps(doc: &Value, job: &str) -> Vec<Value> {
        doc["jobs"][job]["steps"].as_sequence().unwrap().clone()
    }

    fn runs(doc: &Value, job: &str) -> Vec<String> {
        steps(doc, job)
            .iter()
            .filter_map(|s| s["run"].as_str().map(String::from))
            .collect()
    }

    fn uses(step: &Value, action: &str) -> bool {
        step["uses"].as_str() == Some(action)
    }

    #[test]
    fn two_triggers_on_the_default_branch_and_nothing_else() {
        let (text, doc) = doc(&CTX);
        assert!(text.starts_with(
            "# Generated by `strata export --format github-actions --review-apply -p p -s dev`."
        ));
        let on = doc["on"].as_mapping().unwrap();
        assert_eq!(on.len(), 2, "{text}");
        assert_eq!(doc["on"]["pull_request"]["branches"][0], "main");
        assert_eq!(doc["on"]["push"]["branches"][0], "main");
        assert_eq!(doc["env"]["PULUMI_STACK"], "dev");
        assert_eq!(doc["permissions"]["contents"], "read");
        assert_eq!(doc["permissions"].as_mapping().unwrap().len(), 1);
    }

    #[test]
    fn one_job_per_path_after_the_one_build() {
        let (text, doc) = doc(&CTX);
        let ids: Vec<&str> = doc["jobs"]
            .as_mapping()
            .unwrap()
            .keys()
            .map(|k| k.as_str().unwrap())
            .collect();
        assert_eq!(ids, [BUILD_JOB, PREVIEW_JOB, APPLY_JOB]);
        assert_eq!(text.matches("cargo install").count(), 2, "step and header");
        let preview = &doc["jobs"][PREVIEW_JOB];
        let apply = &doc["jobs"][APPLY_JOB];
        assert_eq!(preview["if"], "github.event_name == 'pull_request'");
        assert_eq!(apply["if"], "github.event_name == 'push'");
        for job in [preview, apply] {
            assert_eq!(job["needs"][0], BUILD_JOB);
            let s = job["steps"].as_sequence().unwrap();
            assert!(uses(&s[0], "actions/checkout@v4"));
            assert!(
                uses(&s[1], "actions/download-artifact@v4") && s[1]["with"]["name"] == "strata-bin"
            );
            assert!(s.iter().any(|s| uses(s, "pulumi/actions@v6")));
        }
        assert_eq!(preview["concurrency"]["cancel-in-progress"], true);
        assert_eq!(apply["concurrency"]["group"], "strata-p-dev");
        assert_eq!(apply["concurrency"]["cancel-in-progress"], false);
        let perms = apply["permissions"].as_mapping().unwrap();
        assert_eq!(perms.len(), 3);
        assert_eq!(apply["permissions"]["actions"], "read");
        assert_eq!(apply["permissions"]["pull-requests"], "read");
        assert!(
            preview.get("permissions").is_none(),
            "the workflow's: contents read"
        );
    }

    #[test]
    fn the_exact_strata_commands() {
        let (_, doc) = doc(&CTX);
        assert_eq!(
            runs(&doc, PREVIEW_JOB).last().unwrap(),
            "strata preview --provider p --stack dev --save-plan strata-plan --summary-file strata-preview.md --non-interactive"
        );
        let apply = runs(&doc, APPLY_JOB);
        assert_eq!(
            apply.last().unwrap(),
            "strata up --provider p --stack dev --plan strata-plan --non-interactive"
        );
        let ups: Vec<&String> = apply
            .iter()
            .filter(|r| r.trim_start().starts_with("strata up"))
            .collect();
        assert_eq!(ups.len(), 1, "never a plain up: {apply:?}");
    }

    #[test]
    fn the_bundle_travels_from_the_pull_request_to_the_merge() {
        let (_, doc) = doc(&CTX);
        let preview = steps(&doc, PREVIEW_JOB);
        let upload = preview.last().unwrap();
        assert!(uses(upload, "actions/upload-artifact@v4"));
        assert_eq!(
            upload["with"]["name"],
            "strata-plan-dev-${{ github.event.pull_request.head.sha }}"
        );
        assert_eq!(upload["with"]["path"], BUNDLE_DIR);
        assert_eq!(upload["with"]["if-no-files-found"], "error");
        assert_eq!(upload["with"]["retention-days"], BUNDLE_DAYS);

        let apply = steps(&doc, APPLY_JOB);
        let find = apply.iter().position(|s| s["id"] == "bundle").unwrap();
        let get = apply
            .iter()
            .position(|s| {
                uses(s, "actions/download-artifact@v4") && s["with"]["path"] == BUNDLE_DIR
            })
            .unwrap();
        let up = apply
            .iter()
            .position(|s| s["run"].as_str().is_some_and(|r| r.contains("--plan")))
            .unwrap();
        assert!(find < get && get < up);
        let with = &apply[get]["with"];
        assert_eq!(
            with["name"],
            "strata-plan-dev-${{ steps.bundle.outputs.head-sha }}"
        );
        assert_eq!(with["run-id"], "${{ steps.bundle.outputs.run-id }}");
        assert_eq!(with["github-token"], "${{ github.token }}");
        let env = &apply[find]["env"];
        assert_eq!(env["GH_TOKEN"], "${{ github.token }}");
        assert_eq!(env["APPLIED_PREFIX"], "strata-applied-dev-");
        let script = apply[find]["run"].as_str().unwrap();
        for part in [
            "commits/$GITHUB_SHA/pulls",
            "event=pull_request&status=success&head_sha=$head_sha",
            "actions/artifacts?name=$APPLIED_PREFIX$head_sha",
            "run-id=$run_id",
            "head-sha=$head_sha",
            "Re-run its preview job",
        ] {
            assert!(script.contains(part), "{part}");
        }
        // The applied mark is the applied bundle, kept after the apply.
        let mark = apply.last().unwrap();
        assert!(uses(mark, "actions/upload-artifact@v4"));
        assert_eq!(
            mark["with"]["name"],
            "strata-applied-dev-${{ steps.bundle.outputs.head-sha }}"
        );
    }

    #[test]
    fn bundles_hold_no_hidden_files() {
        // upload-artifact leaves out dot files unless include-hidden-files is set.
        for name in [
            crate::bundle::MANIFEST,
            crate::bundle::SUMMARY,
            crate::bundle::PLANS,
            crate::bundle::APPLIED,
            BUNDLE_DIR,
        ] {
            assert!(!name.starts_with('.'), "{name}");
        }
        assert!(!crate::util::slug(".x/y").starts_with('.'));
    }

    #[test]
    fn credentials_and_aws_oidc_reach_both_jobs() {
        let creds = vec![
            "AWS_ACCESS_KEY_ID".to_string(),
            "AWS_SECRET_ACCESS_KEY".to_string(),
        ];
        let ctx = ExportContext {
            credentials: &creds,
            ..CTX
        };
        let (text, doc) = doc(&ctx);
        assert_eq!(
            doc["env"]["AWS_SECRET_ACCESS_KEY"],
            "${{ secrets.AWS_SECRET_ACCESS_KEY }}"
        );
        assert_eq!(doc["permissions"]["id-token"], "write");
        assert_eq!(doc["jobs"][APPLY_JOB]["permissions"]["id-token"], "write");
        for job in [PREVIEW_JOB, APPLY_JOB] {
            assert!(
                steps(&doc, job)
                    .iter()
                    .any(|s| uses(s, "aws-actions/configure-aws-credentials@v4")),
                "{job}"
            );
        }
        assert!(text.contains("pull_request` subject"), "{text}");
    }

    #[test]
    fn command_projects_alone_need_no_pulumi_and_names_stay_words() {
        let plan = planned("infrastructure:\n  - path: net\n", &["net"]);
        let ctx = ExportContext {
            stack: "org/do",
            ..CTX
        };
        let text = render(&plan, &ctx).unwrap();
        let doc: Value = serde_yaml::from_str(&text).unwrap();
        for job in [PREVIEW_JOB, APPLY_JOB] {
            assert!(
                !steps(&doc, job)
                    .iter()
                    .any(|s| uses(s, "pulumi/actions@v6"))
            );
        }
        assert!(
            runs(&doc, APPLY_JOB)
                .last()
                .unwrap()
                .contains("--stack org/do ")
        );
        let name = steps(&doc, PREVIEW_JOB).last().unwrap()["with"]["name"].clone();
        assert!(!name.as_str().unwrap().contains('/'), "{name:?}");
        assert_eq!(render(&plan, &ctx).unwrap(), text, "deterministic");
    }
}
