//! `--format github-actions`: a workflow whose jobs run exactly the plan.

use std::collections::{BTreeMap, BTreeSet};

use serde_yaml::Value as Yaml;

use super::*;

/// Checks that the workflow runs exactly the plan: a build job every other job needs,
/// each project in one job (a job runs a chain of command projects and what lies
/// between them, named `a + b`), and every need of a project either earlier in its own
/// job or in a job its job needs; no job needs another without a reason. Returns the
/// projects in job order.
pub(super) fn assert_gha_follows(doc: &Yaml, plan: &Shown) -> Vec<String> {
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

/// The job that runs `path` (its name lists the projects it runs, `a + b`).
fn gha_job<'a>(doc: &'a Yaml, path: &str) -> &'a Yaml {
    let runs = |j: &&Yaml| {
        j["name"]
            .as_str()
            .is_some_and(|n| n.split(" + ").any(|p| p == path))
    };
    let mut jobs = doc["jobs"].as_mapping().expect("jobs").values();
    jobs.find(runs)
        .unwrap_or_else(|| panic!("no job for {path}"))
}

/// What the steps of the job that runs `path` say under `key` (`run`, `uses`).
fn gha_steps(doc: &Yaml, path: &str, key: &str) -> Vec<String> {
    let steps = gha_job(doc, path)["steps"].as_sequence().expect("steps");
    let said = steps.iter().filter_map(|s| s[key].as_str());
    said.map(String::from).collect()
}

/// The `strata up` command of the job that runs `path`.
pub(super) fn gha_command(doc: &Yaml, path: &str) -> String {
    let runs = gha_steps(doc, path, "run");
    let up = runs.into_iter().find(|r| r.starts_with("strata up"));
    up.unwrap_or_else(|| panic!("no `strata up` in the job of {path}"))
}

#[test]
fn github_actions_jobs_follow_the_plan() {
    let (plan, text) = plan_and_export(MIXED, "github-actions");
    let doc = yaml(&text);
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
    let uses = |path: &str| gha_steps(&doc, path, "uses");
    assert!(uses("infra/net").contains(&"pulumi/actions@v6".into()));
    // The image build and its push (command projects) share one job and one runner.
    assert!(gha_command(&doc, "k8s/push").contains("--project k8s/build --project k8s/push"));
    assert!(!uses("k8s/build").contains(&"pulumi/actions@v6".into()));
    assert!(
        text.contains("--project @secrets"),
        "the header says how to write the secrets"
    );
}
