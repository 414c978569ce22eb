//! A project a `policy:` `approve:` rule holds: the export puts its job under the GitHub
//! environment named after the rule, whose required reviewers approve the job before it
//! starts. act has no reviewers and runs the job at once; the job then does what the
//! export says: `strata up` stops at strata's gate (exit 6), the approval is recorded
//! (`strata approve --yes`) and the update applies the plan that was held.

use super::Actions;
use crate::real_pulumi::gates::set_policy;

const RULE: &str = "  - name: network-review\n    select: local-pulumi/network\n    approve: [create, update, delete, replace]\n";

#[test]
fn a_held_projects_job_runs_under_its_environment_and_applies_the_held_plan() {
    let Some(a) = Actions::new("real_act::environment", "act-environment") else {
        return;
    };
    set_policy(&a.r, RULE);
    a.export(&["--project", "local-pulumi/network"]);
    let workflow = a.r.ws.read(super::WORKFLOW);
    assert!(
        workflow.contains("  local-pulumi-network:\n    name: local-pulumi/network\n    runs-on: ubuntu-latest\n    environment: network-review\n"),
        "{workflow}"
    );
    a.commit("the network under review");
    let run = a.dispatch(21, "real_act::environment");
    assert_eq!(run.code, 0, "{run:?}");
    run.assert_green(&["build-strata", "local-pulumi-network"]);
    let said = run.output_of("local-pulumi-network");
    // Held at strata's gate first, then approved and applied in the same job.
    for part in [
        "held by network-review: would create 2 resources",
        "strata up awaiting: 0 succeeded, 0 failed, 0 skipped, 0 cancelled, 1 awaiting",
        "approved by ",
        "strata up succeeded: 1 succeeded",
    ] {
        assert!(said.contains(part), "no {part:?} in {run:?}");
    }
    let at = |part: &str| said.find(part).unwrap();
    assert!(at("awaiting") < at("approved by ") && at("approved by ") < at("up succeeded"));
    // One update by Pulumi: the held plan, applied (the gate's preview is no update).
    assert_eq!(a.updates("lp-network").len(), 1, "{run:?}");
    // Applied, the held plan and its approval are cleared, in the bucket too.
    let kept = a.s.list(&a.bucket, ".strata/approvals/");
    assert!(kept.is_empty(), "{kept:#?}");
    let left = a.leftover_language_hosts();
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
}
