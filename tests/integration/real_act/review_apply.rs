//! The `--review-apply` workflow under act, one act run per GitHub event, on a stack
//! deployed once by hand: a pull request's run previews into a plan bundle kept as an
//! artifact; the push that merges it applies exactly that bundle (found through the `gh`
//! stand-in, downloaded from the pull request's run); a second apply of it, and a program
//! changed after its review, are refused.

use serde_json::json;

use super::Actions;
use crate::real_pulumi::{ALL, up};

/// Pulumi's update count of each stack of the profile, in the bucket.
fn update_counts(a: &Actions) -> Vec<(String, usize)> {
    ALL.iter()
        .map(|p| {
            let name = p.replace("local-pulumi/", "lp-");
            let n = a.updates(&name).len();
            (name, n)
        })
        .collect()
}

fn pull_request(number: u32, head: &str) -> serde_json::Value {
    json!({ "number": number, "pull_request": { "number": number, "head": { "sha": head } } })
}

fn push(after: &str) -> serde_json::Value {
    json!({ "ref": "refs/heads/main", "after": after })
}

#[test]
fn the_reviewed_bundle_is_applied_exactly_once_and_a_change_after_review_is_refused() {
    if !crate::support::require_tool("jq", "apt-get install jq; or run scripts/install-tools.sh") {
        return;
    }
    let Some(a) = Actions::new("real_act::review_apply", "act-review") else {
        return;
    };
    a.export(&["--review-apply"]);
    a.commit("the local-pulumi profile and its review/apply workflow");
    // The stack, deployed once by hand: a bundle only holds plans of stacks whose
    // upstreams are deployed (a preview of the rest is blocked).
    let first = up(&a.r);
    assert_eq!(first.code, 0, "{first:?}");
    let deployed: Vec<(String, usize)> = ALL
        .iter()
        .map(|p| (p.replace("local-pulumi/", "lp-"), 1))
        .collect();
    assert_eq!(update_counts(&a), deployed);
    // No stack config is committed with a salt: each runner's checkout takes its stacks'
    // passphrase salt from their checkpoints in the bucket, so a bundle previewed on one
    // runner opens on another (it failed with "cipher: message authentication failed"
    // while each checkout made a salt of its own).
    let app_file = a.cloud().join("app/app");
    let app_says = || std::fs::read_to_string(&app_file).unwrap_or_default();
    assert!(app_says().contains(" x1 at "), "{}", app_says());

    // Pull request 7 asks for two app replicas: its run previews into a bundle and
    // applies nothing.
    let app = "projects/local-pulumi/app/Pulumi.yaml";
    a.r.edit(app, "default: 1", "default: 2");
    let head7 = a.commit("pull request 7: two app replicas");
    let review = a.act("pull_request", 11, &pull_request(7, &head7));
    review.print("real_act::review_apply: review run");
    assert_eq!(review.code, 0, "{review:?}");
    review.assert_green(&["build-strata", "preview"]);
    a.record_run(11, "pull_request", &head7, &review);
    let bundle = a.artifact(11, &format!("strata-plan-dev-{head7}"));
    assert!(
        bundle.iter().any(|f| f.ends_with("manifest.json")),
        "{bundle:#?}"
    );
    assert_eq!(update_counts(&a), deployed, "a preview applies nothing");

    // Its merge: the push applies exactly the bundle of run 11.
    let merge7 = a.commit("Merge pull request #7");
    a.record_merge(&merge7, 7, &head7);
    let apply = a.act("push", 12, &push(&merge7));
    apply.print("real_act::review_apply: apply run");
    assert_eq!(apply.code, 0, "{apply:?}");
    apply.assert_green(&["build-strata", "apply"]);
    assert!(
        apply
            .output_of("apply")
            .contains("Applying the plan bundle of pull request #7, previewed in run 11."),
        "{apply:?}"
    );
    assert!(app_says().contains(" x2 at "), "{}", app_says());
    let applied = update_counts(&a);
    assert!(
        applied.iter().any(|(p, n)| p == "lp-app" && *n == 2),
        "{applied:?}"
    );
    assert!(
        !a.artifact(12, &format!("strata-applied-dev-{head7}"))
            .is_empty(),
        "the bundle is marked applied"
    );

    // The same push again: a bundle applies once.
    let again = a.act("push", 13, &push(&merge7));
    assert_ne!(again.code, 0, "{again:?}");
    assert_eq!(again.results()["apply"], "failure", "{again:?}");
    let once = format!("The plan bundle of pull request #7 ({head7}) was applied already");
    assert!(format!("{again:?}").contains(&once), "{again:?}");
    assert_eq!(update_counts(&a), applied, "nothing applied twice");

    // Pull request 8 asks for three replicas and is reviewed; then its program changes
    // again before the merge, unreviewed: the apply refuses the bundle, changes nothing.
    a.r.edit(app, "default: 2", "default: 3");
    let head8 = a.commit("pull request 8: three app replicas");
    let review8 = a.act("pull_request", 14, &pull_request(8, &head8));
    assert_eq!(review8.code, 0, "{review8:?}");
    a.record_run(14, "pull_request", &head8, &review8);
    a.r.edit(app, "default: 3", "default: 4");
    let merge8 = a.commit("Merge pull request #8, with a change nobody reviewed");
    a.record_merge(&merge8, 8, &head8);
    let refused = a.act("push", 15, &push(&merge8));
    refused.print("real_act::review_apply: refused apply run");
    assert_ne!(refused.code, 0, "{refused:?}");
    assert_eq!(refused.results()["apply"], "failure", "{refused:?}");
    assert!(
        format!("{refused:?}")
            .contains("local-pulumi/app: its code, inputs or secrets changed since the preview"),
        "{refused:?}"
    );
    assert_eq!(update_counts(&a), applied, "nothing of that bundle applied");
    assert!(app_says().contains(" x2 at "), "{}", app_says());
    assert!(
        a.artifact(15, &format!("strata-applied-dev-{head8}"))
            .is_empty(),
        "a refused bundle is not marked applied"
    );
    let left = a.leftover_language_hosts();
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
}
