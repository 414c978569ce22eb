//! Plan bundles (issue 24) with the real CLI: `preview --save-plan`, then `up --plan`.

use super::*;

/// The app's program, whose replicas a test changes to review.
const APP: &str = "projects/local-pulumi/app/Pulumi.yaml";

// ---------------------------------------------------------------------------------
// Plan bundles (issue 24): `preview --save-plan`, then `up --plan`, with the real CLI
// ---------------------------------------------------------------------------------

/// A bundle is saved (one real update plan per Pulumi project, the manifest, the
/// summary), applied exactly (each `up` held to its plan, Pulumi's own preview first),
/// then refused as applied; a code change and a stack-config change refuse a later
/// bundle before anything runs, and an upstream whose outputs come out other than the
/// preview saw stops its dependents.
#[test]
fn a_plan_bundle_is_saved_applied_once_and_refused_when_anything_moved() {
    let Some(r) = deployed_then_changed("a_plan_bundle_is_saved_applied_once") else {
        return;
    };
    r.take_calls();
    save_plan(&r, "bundle", &[]);
    assert_a_bundle_of_real_plans(&r, "bundle");
    let calls = r.take_calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.starts_with("preview ") && c.contains("--save-plan"))
            .count(),
        ALL.len(),
        "every preview saved its plan: {calls:#?}"
    );

    let applied = lp(&r, &["up", "--plan", "bundle"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    for p in ALL {
        assert_eq!(status_of(&applied, p), "succeeded", "{p}");
    }
    let calls = r.take_calls();
    let ups: Vec<&String> = calls.iter().filter(|c| c.starts_with("up ")).collect();
    assert_eq!(ups.len(), ALL.len(), "{calls:#?}");
    for c in &ups {
        assert!(
            c.contains("--plan ") && !c.contains("--skip-preview"),
            "held to its plan: {c}"
        );
    }
    let deployed = r.ws.read(".strata/dev/local-pulumi-env/app/app");
    assert!(
        deployed.contains(" x2 at "),
        "the reviewed change was applied: {deployed}"
    );

    let again = lp(&r, &["up", "--plan", "bundle"]);
    assert_eq!(again.code, 3, "{again:?}");
    assert!(again.all().contains("applied already"), "{again:?}");
    assert!(r.take_calls().is_empty(), "nothing ran");

    // A code change after the preview.
    let code = "local-pulumi/app: its code, inputs or secrets changed since the preview";
    refused_after_a_change(&r, "b-code", APP, "\n# reviewed? no\n", &[code]);
    // A stack-config change after the preview.
    let config = "config/pulumi/Pulumi.dev.yaml";
    let why = [
        "stack config: ",
        "Pulumi.dev.yaml changed since the preview",
    ];
    refused_after_a_change(&r, "b-config", config, "  lp-app:extra: one more\n", &why);

    // A bundle of one project whose upstream (not in the bundle) hands it a secret
    // through `inputs:`: the upstream's outputs are read from its checkpoint, the secret
    // decrypted there (the passphrase provider), without a Pulumi process.
    save_plan(&r, "b-ingress", &["--project", "local-pulumi/ingress"]);
    r.take_calls();
    let applied = lp(&r, &["up", "--plan", "b-ingress"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    assert_eq!(status_of(&applied, "local-pulumi/ingress"), "succeeded");
    let calls = r.take_calls();
    assert_eq!(starting(&calls, "stack output"), 0, "{calls:#?}");

    // The network's outputs change in the bundle itself: what the cluster was previewed
    // with no longer holds, so the network is applied and the cluster stops there.
    let net = "projects/local-pulumi/network/Pulumi.yaml";
    r.edit(net, "10.77.0.0/24", "10.78.0.0/24");
    save_plan(&r, "b-upstream", &[]);
    r.take_calls();
    let stopped = lp(&r, &["up", "--plan", "b-upstream"]);
    assert_eq!(stopped.code, 1, "{stopped:?}");
    assert_statuses(
        &stopped,
        &[
            ("local-pulumi/network", "succeeded"),
            ("local-pulumi/cluster", "failed"),
            ("local-pulumi/ingress", "skipped"),
        ],
    );
    assert!(
        stopped
            .all()
            .contains("the outputs of local-pulumi/network changed since the preview"),
        "{stopped:?}"
    );
    let calls = r.take_calls();
    assert_eq!(
        starting(&calls, "up "),
        2,
        "network and registry only: {calls:#?}"
    );
    assert!(
        !r.ws.path("b-upstream/applied.json").exists(),
        "a bundle applied in part is not spent"
    );
}

/// How many of the logged `calls` are the Pulumi command `prefix`.
fn starting(calls: &[String], prefix: &str) -> usize {
    calls.iter().filter(|c| c.starts_with(prefix)).count()
}

/// `preview --save-plan BUNDLE` (with `extra`), which must succeed.
/// [`Real::deployed`] (`None`: skipped), then a change to review: the app's replicas,
/// 1 to 2.
fn deployed_then_changed(test: &str) -> Option<Real> {
    let (r, _) = Real::deployed(test)?;
    r.edit(APP, "default: 1", "default: 2");
    Some(r)
}

fn save_plan(r: &Real, bundle: &str, extra: &[&str]) {
    let saved = lp(r, &[&["preview", "--save-plan", bundle], extra].concat());
    assert_eq!(saved.code, 0, "{saved:?}");
}

/// The bundle in `dir` holds one real update plan per project, the app's upstream
/// outputs, a summary, and no secret in clear.
fn assert_a_bundle_of_real_plans(r: &Real, dir: &str) {
    let manifest: Value =
        serde_json::from_str(&r.ws.read(&format!("{dir}/manifest.json"))).expect("a manifest");
    for p in ALL {
        let step = &manifest["steps"][p];
        assert_eq!(step["status"], "succeeded", "{p}: {manifest:#}");
        let plan = step["plan"]
            .as_str()
            .unwrap_or_else(|| panic!("{p} has a plan"));
        let doc: Value = serde_json::from_str(&r.ws.read(&format!("{dir}/{plan}")))
            .unwrap_or_else(|e| panic!("{p}'s plan is Pulumi's JSON: {e}"));
        assert!(
            doc["resourcePlans"].is_object(),
            "a real update plan: {doc:#}"
        );
    }
    assert_eq!(
        manifest["steps"]["local-pulumi/app"]["upstream_outputs"]
            .as_object()
            .map(|m| m.len()),
        Some(3),
        "registry, ingress and logstore"
    );
    assert!(
        r.ws.read(&format!("{dir}/summary.md"))
            .contains("local-pulumi/app")
    );
    for (path, bytes) in r.ws.files_under(dir) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(REGISTRY_PASSWORD) && !text.contains(PASSPHRASE),
            "a secret in clear in {}",
            path.display()
        );
    }
}

/// A bundle saved as `bundle`, then `added` appended to the file `rel`: `up --plan`
/// refuses it (exit 3) saying each of `why`, and runs no update. The file is put back.
fn refused_after_a_change(r: &Real, bundle: &str, rel: &str, added: &str, why: &[&str]) {
    save_plan(r, bundle, &[]);
    let text = r.ws.read(rel);
    r.ws.write(rel, &format!("{text}{added}"));
    r.take_calls();
    let refused = lp(r, &["up", "--plan", bundle]);
    assert_eq!(refused.code, 3, "{refused:?}");
    for part in why {
        assert!(refused.all().contains(part), "{part}: {refused:?}");
    }
    assert_eq!(starting(&r.take_calls(), "up "), 0, "nothing ran");
    r.ws.write(rel, &text);
}

/// Issue 45: a bundle is tied to each stack's state. A `pulumi refresh` made by hand on
/// the ingress's stack between review and apply (a new checkpoint, an entry of its
/// history) makes `up --plan` refuse the ingress, naming its stack and what to do,
/// while the stacks nobody touched are applied.
#[test]
fn a_stack_changed_by_hand_after_the_review_is_refused_by_up_plan() {
    let Some(r) = deployed_then_changed("a_stack_changed_by_hand_after_the_review") else {
        return;
    };
    save_plan(&r, "bundle", &[]);
    let ingress = "local-pulumi/ingress";
    let by_hand = r.pulumi(ingress, &["refresh", "--yes", "--stack", "dev"]);
    assert_eq!(by_hand.code, 0, "{by_hand:?}");
    let applied = lp(&r, &["up", "--plan", "bundle"]);
    assert_eq!(applied.code, 1, "{applied:?}");
    assert_eq!(status_of(&applied, ingress), "failed", "{applied:?}");
    assert_eq!(status_of(&applied, "local-pulumi/network"), "succeeded");
    assert!(
        applied
            .all()
            .contains("the stack dev of local-pulumi/ingress changed since the preview"),
        "{applied:?}"
    );
    assert!(!r.ws.path("bundle/applied.json").exists());
}
