//! The per-project jobs: which steps share a job (a chain of command projects, one
//! runner), the lanes that hold a pool to its limit, and each job's steps and needs.

use std::collections::{BTreeMap, BTreeSet};

use super::{
    BUILD_JOB, Job, OUTPUTS_DIR, Step, install, job_id, map, needs_pulumi_cli, run_step,
    runner_setup, shell_word, strata_steps, upload_step, uses_aws_oidc,
};
use crate::export::{self, ExportContext};
use crate::plan::{NodeKind, Plan};

/// The job id of every step of `plan` (indexed like `plan.nodes`), unique.
fn job_ids(plan: &Plan) -> Vec<String> {
    export::names_in_order(plan, job_id, |base, _| base.to_string())
}

/// Jobs: steps of `plan` grouped so that a command project that needs another command
/// project runs in that project's job (the image it built is on that runner), together
/// with every step on a path between them (an image build, the registry's
/// configuration, then the push: one runner). Returns, per node, the index of its
/// group's first node.
fn groups(plan: &Plan) -> Vec<usize> {
    let mut group: Vec<usize> = (0..plan.nodes.len()).collect();
    fn root(g: &mut [usize], i: usize) -> usize {
        let mut r = i;
        while g[r] != r {
            r = g[r];
        }
        g[i] = r;
        r
    }
    let pos = export::positions(plan);
    for &i in &plan.order {
        if plan.nodes[i].kind != NodeKind::Command {
            continue;
        }
        for &j in &plan.nodes[i].needs {
            if plan.nodes[j].kind == NodeKind::Command {
                let (a, b) = (root(&mut group, i), root(&mut group, j));
                // The group is named after its earliest member.
                let (keep, other) = if pos[a] <= pos[b] { (a, b) } else { (b, a) };
                group[other] = keep;
            }
        }
    }
    let mut group: Vec<usize> = (0..plan.nodes.len()).map(|i| root(&mut group, i)).collect();
    // Convex closure: whatever lies between two members joins them, or the jobs would
    // need each other both ways.
    let n = plan.nodes.len();
    let reach = |from: &[usize], forward: bool| -> Vec<bool> {
        let mut seen = vec![false; n];
        let mut todo: Vec<usize> = from.to_vec();
        while let Some(i) = todo.pop() {
            let next: Vec<usize> = if forward {
                (0..n)
                    .filter(|&k| plan.nodes[k].needs.contains(&i))
                    .collect()
            } else {
                plan.nodes[i].needs.clone()
            };
            for k in next {
                if !seen[k] {
                    seen[k] = true;
                    todo.push(k);
                }
            }
        }
        seen
    };
    let leads: BTreeSet<usize> = group.iter().copied().collect();
    for lead in leads {
        let members: Vec<usize> = (0..n).filter(|&i| group[i] == lead).collect();
        if members.len() < 2 {
            continue;
        }
        let (after, before) = (reach(&members, true), reach(&members, false));
        for k in 0..n {
            if after[k] && before[k] {
                group[k] = lead;
            }
        }
    }
    group
}

/// Per job (by its first node), the jobs before it in the lanes of its pools. A pool
/// of limit N becomes N chains of its jobs, in execution order, so that at most N of
/// them run at once. (A job-level `concurrency:` group is no equivalent: it keeps one
/// job waiting and cancels any other.)
fn pool_lanes(
    plan: &Plan,
    group: &[usize],
    pools: &[crate::workspace::profile::Pool],
) -> BTreeMap<usize, Vec<usize>> {
    let mut before: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for pool in export::used_pools(plan, pools) {
        let mut jobs: Vec<usize> = Vec::new();
        for &i in &plan.order {
            let lead = group[i];
            if plan.nodes[i].pool() == Some(pool.name.as_str()) && !jobs.contains(&lead) {
                jobs.push(lead);
            }
        }
        for (k, &lead) in jobs.iter().enumerate().skip(pool.limit) {
            let prev = jobs[k - pool.limit];
            let list = before.entry(lead).or_default();
            if !list.contains(&prev) {
                list.push(prev);
            }
        }
    }
    before
}

/// The jobs that run the plan's projects: which steps share a job, the jobs' ids and
/// order, and the outputs carried from one runner to another.
pub(super) struct ProjectJobs<'a> {
    plan: &'a Plan,
    provider: &'a str,
    /// The folder of the projects in the repository (the profile's `projects:`).
    projects_dir: &'a str,
    /// The job id of every step (indexed like `plan.nodes`).
    pub(super) ids: Vec<String>,
    /// Per step, the first step of its job (see [`groups`]).
    group: Vec<usize>,
    /// Per job, the jobs before it in its pools' lanes (see [`pool_lanes`]).
    lanes: BTreeMap<usize, Vec<usize>>,
    /// The command projects whose outputs `inputs:` read.
    carried: BTreeSet<String>,
    aws_oidc: bool,
}

impl<'a> ProjectJobs<'a> {
    pub(super) fn new(plan: &'a Plan, ctx: &ExportContext<'a>) -> ProjectJobs<'a> {
        let group = groups(plan);
        ProjectJobs {
            plan,
            provider: ctx.provider,
            projects_dir: ctx.projects_dir,
            ids: job_ids(plan),
            lanes: pool_lanes(plan, &group, ctx.pools),
            group,
            carried: export::command_output_sources(plan),
            aws_oidc: uses_aws_oidc(ctx),
        }
    }

    /// The first step of each job, in execution order.
    pub(super) fn leads(&self) -> impl Iterator<Item = usize> + '_ {
        self.plan
            .order
            .iter()
            .copied()
            .filter(|&i| self.group[i] == i)
    }

    /// The job of the steps led by `lead`: strata, the outputs it takes from other
    /// jobs, the runner's tools, `strata up` of its projects, the outputs it hands on.
    pub(super) fn job(&self, lead: usize) -> Job {
        let members: Vec<usize> = self
            .plan
            .order
            .iter()
            .copied()
            .filter(|&i| self.group[i] == lead)
            .collect();
        let paths: Vec<&str> = members
            .iter()
            .map(|&i| self.plan.nodes[i].path.as_str())
            .collect();
        let mut steps = strata_steps();
        steps.extend(self.download_outputs(lead, &members));
        steps.extend(runner_setup(
            members.iter().any(|&i| needs_pulumi_cli(self.plan, i)),
            self.aws_oidc.then(|| format!("strata-{}", self.ids[lead])),
        ));
        let deps: Vec<_> = members
            .iter()
            .filter_map(|&i| install::deps_of(&self.plan.nodes[i], self.projects_dir))
            .collect();
        steps.extend(install::dependency_steps(&deps));
        let gate = self.gate(&members);
        steps.push(self.up_step(&paths, gate.as_ref().map(|(_, held)| held.as_slice())));
        steps.extend(self.upload_outputs(&members));
        let (needs, condition) = self.needs(lead, &members);
        Job {
            name: paths.join(" + "),
            condition,
            runs_on: "ubuntu-latest",
            environment: gate.map(|(rule, _)| rule),
            needs,
            steps,
            ..Default::default()
        }
    }

    /// Downloads the outputs of command projects in other jobs that `members` take
    /// `inputs:` from.
    fn download_outputs(&self, lead: usize, members: &[usize]) -> Vec<Step> {
        let plan = self.plan;
        let sources: BTreeSet<&str> = members
            .iter()
            .flat_map(|&i| plan.nodes[i].entry.iter().flat_map(|e| e.inputs.iter()))
            .map(|input| input.project.as_str())
            .filter(|p| self.carried.contains(*p))
            .filter(|p| plan.index_of(p).is_none_or(|j| self.group[j] != lead))
            .collect();
        plan.order
            .iter()
            .filter(|&&j| sources.contains(plan.nodes[j].path.as_str()))
            .map(|&j| Step {
                name: Some(format!("Outputs of {}", plan.nodes[j].path)),
                uses: Some("actions/download-artifact@v4".into()),
                with: Some(map(&[
                    ("name", &format!("strata-outputs-{}", self.ids[j])),
                    ("path", OUTPUTS_DIR),
                ])),
                ..Default::default()
            })
            .collect()
    }

    /// The `approve:` rule that holds one of `members` (the first), and the members
    /// that rules of approval hold.
    fn gate(&self, members: &[usize]) -> Option<(String, Vec<String>)> {
        let held = |i: usize| {
            self.plan.nodes[i]
                .rules
                .iter()
                .find(|r| !r.approve.is_empty())
        };
        let rule = members.iter().find_map(|&i| held(i))?.name.clone();
        let paths = members
            .iter()
            .filter(|&&i| held(i).is_some())
            .map(|&i| self.plan.nodes[i].path.clone())
            .collect();
        Some((rule, paths))
    }

    /// `strata up` of the job's projects, `paths`. A job an environment holds: when the
    /// update stops at strata's gate (exit 6), the environment's reviewers approved the
    /// job, so their approval is recorded (`strata approve --yes`) and the update runs
    /// again, applying the plan it held.
    fn up_step(&self, paths: &[&str], held: Option<&[String]>) -> Step {
        let projects: Vec<String> = paths
            .iter()
            .map(|p| format!("--project {}", shell_word(p)))
            .collect();
        let target = format!(
            "--provider {} --stack \"$PULUMI_STACK\"",
            shell_word(self.provider)
        );
        let up = format!(
            "strata up {target} {} --non-interactive",
            projects.join(" ")
        );
        let script = match held {
            None => up,
            Some(held) => {
                let approve: Vec<String> = held
                    .iter()
                    .map(|p| {
                        format!(
                            "  strata approve {} {target} --yes || true\n",
                            shell_word(p)
                        )
                    })
                    .collect();
                format!(
                    "code=0\n{up} || code=$?\nif [ \"$code\" -eq 6 ]; then\n  # The environment's required reviewers approved this job.\n{}  {up}\nelif [ \"$code\" -ne 0 ]; then\n  exit \"$code\"\nfi\n",
                    approve.concat()
                )
            }
        };
        run_step(&format!("strata up {}", paths.join(" + ")), script)
    }

    /// Keeps the outputs of the command projects among `members` that `inputs:` read.
    fn upload_outputs(&self, members: &[usize]) -> Vec<Step> {
        members
            .iter()
            .filter(|&&i| self.carried.contains(&self.plan.nodes[i].path))
            .map(|&i| {
                let node = &self.plan.nodes[i];
                upload_step(
                    &format!("Keep the outputs of {}", node.path),
                    &format!("strata-outputs-{}", self.ids[i]),
                    &format!("{OUTPUTS_DIR}/{}.json", crate::util::slug(&node.path)),
                    1,
                )
            })
            .collect()
    }

    /// The job's `needs:` (the build, the jobs of what `members` need, the job before
    /// it in a pool's lane) and its `if:` when it is in a lane.
    fn needs(&self, lead: usize, members: &[usize]) -> (Vec<String>, Option<String>) {
        let mut needs: Vec<String> = vec![BUILD_JOB.to_string()];
        for &i in members {
            for j in export::needs_in_order(self.plan, i) {
                let id = self.ids[self.group[j]].clone();
                if self.group[j] != lead && !needs.contains(&id) {
                    needs.push(id);
                }
            }
        }
        // A pool's lane: wait for the job before, whatever became of it, and run when
        // what the job really needs succeeded.
        let mut condition = None;
        if let Some(prev) = self.lanes.get(&lead) {
            condition = Some(format!(
                "${{{{ !cancelled() && {} }}}}",
                needs
                    .iter()
                    .map(|id| format!("needs.{id}.result == 'success'"))
                    .collect::<Vec<_>>()
                    .join(" && ")
            ));
            for &j in prev {
                if !needs.contains(&self.ids[j]) {
                    needs.push(self.ids[j].clone());
                }
            }
        }
        (needs, condition)
    }
}
