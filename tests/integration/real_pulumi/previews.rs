//! Previews with the real CLI: strata's change counts are `pulumi preview`'s, a refresh
//! preview sees an out-of-band change, and a fresh profile's downstream rows are projected.

use super::*;

fn pulumi_preview_summary(r: &Real, project: &str, config: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["preview", "--json", "--non-interactive"];
    args.extend(extra);
    let run = r.pulumi_with(project, config, &args);
    let doc: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("preview --json of {project}: {e}: {run:?}"));
    doc["changeSummary"].clone()
}

#[test]
fn preview_counts_equal_the_real_previews_fresh_and_after_a_change() {
    let Some(r) = Real::with_local_pulumi("real_pulumi::preview_counts") else {
        return;
    };
    // A fresh environment: the first wave previews, what reads it is blocked.
    let fresh = lp(&r, &["preview"]);
    assert_eq!(fresh.code, 0, "{fresh:?}");
    let rows = preview_counts(&fresh);
    let row = |p: &str| {
        rows.iter()
            .find(|(q, _, _)| q == p)
            .unwrap_or_else(|| panic!("{p}: {fresh:?}"))
            .clone()
    };
    assert_eq!(row("local-pulumi/network").1, "succeeded", "{fresh:?}");
    assert_eq!(row("local-pulumi/network").2["create"], 2, "{fresh:?}");
    assert_eq!(row("local-pulumi/app").1, "blocked", "{fresh:?}");
    let shared = r.ws.path("config/pulumi/Pulumi.dev.yaml");
    assert_eq!(
        row("local-pulumi/network").2,
        pulumi_preview_summary(&r, "local-pulumi/network", &shared, &[]),
        "strata's counts are Pulumi's"
    );

    assert_eq!(r.on("local-pulumi", &["up"]).code, 0);
    // A program change: lp-logstore's command changes (an update of one resource).
    r.edit(
        "projects/local-pulumi/logstore/Pulumi.yaml",
        "logs of ",
        "log store of ",
    );
    r.take_calls();
    let changed = lp(&r, &["preview"]);
    assert_eq!(changed.code, 0, "{changed:?}");
    // Upstream outputs come from the file backend's checkpoints, the secret input
    // lp-ingress takes from lp-cluster decrypted there too: one `preview` per project,
    // nothing else.
    let calls = r.take_calls();
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("preview ")).count(),
        6,
        "{calls:#?}"
    );
    assert_eq!(calls.len(), 6, "{calls:#?}");
    let rows = preview_counts(&changed);
    for (project, status, counts) in &rows {
        assert_eq!(status, "succeeded", "{project}: {changed:?}");
        assert_counts_are_pulumis(&r, project, counts);
    }
    let logstore = rows
        .iter()
        .find(|(p, _, _)| p == "local-pulumi/logstore")
        .unwrap();
    assert_eq!(logstore.2["update"], 1, "{changed:?}");

    // --expect-no-changes: 4 with the change pending, 0 once it is applied.
    let strict = ["preview", "--expect-no-changes"];
    assert_eq!(lp(&r, &strict).code, 4);
    assert_eq!(r.on("local-pulumi", &["up"]).code, 0);
    let clean = lp(&r, &strict);
    assert_eq!(clean.code, 0, "{clean:?}");
}

/// strata's change counts of `project` are what the real CLI previews on the project's
/// own copy of the stack config, the one strata handed it.
fn assert_counts_are_pulumis(r: &Real, project: &str, counts: &Value) {
    let real = pulumi_preview_summary(r, project, &r.config_copy(project), &[]);
    assert_eq!(counts, &real, "{project}: strata's counts are Pulumi's");
}

/// Someone updates lp-network by hand, outside strata: `preview --refresh` of lp-cluster,
/// which reads it through a StackReference, shows the update that change brings, with
/// Pulumi's own counts.
#[test]
fn refresh_preview_sees_an_out_of_band_change() {
    let Some((r, _)) = Real::deployed("real_pulumi::refresh") else {
        return;
    };
    let cluster = ["preview", "--project", "local-pulumi/cluster", "--refresh"];
    let before = lp(&r, &cluster);
    assert_eq!(before.code, 0, "{before:?}");
    assert_eq!(
        preview_counts(&before)[0].2["update"],
        Value::Null,
        "{before:?}"
    );

    // The out-of-band change: a new CIDR, applied with the real CLI directly.
    let network = "local-pulumi/network";
    let copy = r.config_copy(network);
    let set = r.pulumi_with(network, &copy, &["config", "set", "cidr", "10.78.0.0/24"]);
    assert_eq!(set.code, 0, "{set:?}");
    let by_hand = ["up", "--yes", "--skip-preview", "--non-interactive"];
    let by_hand = r.pulumi_with(network, &copy, &by_hand);
    assert_eq!(by_hand.code, 0, "{by_hand:?}");

    let after = lp(&r, &cluster);
    assert_eq!(after.code, 0, "{after:?}");
    let rows = preview_counts(&after);
    assert_eq!(rows.len(), 1, "{after:?}");
    assert_eq!(rows[0].2["update"], 1, "{after:?}");
    let own = r.config_copy("local-pulumi/cluster");
    let real = pulumi_preview_summary(&r, "local-pulumi/cluster", &own, &["--refresh"]);
    assert_eq!(rows[0].2, real, "strata's counts are Pulumi's");
    let strict = [&cluster[..], &["--expect-no-changes"]].concat();
    assert_eq!(lp(&r, &strict).code, 4);
}

/// Projected previews (issue 24) on the real CLI: a fresh `local-pulumi`, with mocks for
/// lp-cluster's outputs and one more project, lp-edge, that takes lp-ingress's hostname
/// and lp-registry's URL. lp-ingress previews on the mocks; lp-edge on what the real
/// previews of lp-ingress (itself projected) and lp-registry already know, read from the
/// update plans they saved; what reads the backend through a StackReference stays
/// blocked. The counts are the real CLI's own preview on the same config.
#[test]
fn a_fresh_local_pulumi_preview_projects_downstream_rows_with_change_counts() {
    let Some(r) = Real::with_local_pulumi("real_pulumi::projected_preview") else {
        return;
    };
    let profile = r.ws.path("providers/local-pulumi.yaml");
    let text = std::fs::read_to_string(&profile).unwrap();
    let text = text.replace(
        "    needs: [local-pulumi/network]\n",
        "    needs: [local-pulumi/network]\n    mock_outputs:\n      lb_address: 10.77.0.1\n      admin_token: mock-token\n",
    ) + "  - path: local-pulumi/edge\n    description: Edge\n    needs: [local-pulumi/ingress, local-pulumi/registry]\n    inputs:\n      lp-edge:host: local-pulumi/ingress:hostname\n      lp-edge:image: local-pulumi/registry:registry_url\n";
    std::fs::write(&profile, text).unwrap();
    r.ws.pulumi_project(
        "local-pulumi/edge",
        "lp-edge",
        "config:\n  host:\n    type: string\n  image:\n    type: string\nresources:\n  edge:\n    type: command:local:Command\n    properties:\n      create: echo ${image} at ${host}\noutputs:\n  seen: ${host}\n",
    );
    let fresh = lp(&r, &["preview"]);
    assert_eq!(fresh.code, 0, "{fresh:?}");
    let rows: std::collections::BTreeMap<String, Value> = fresh
        .events()
        .into_iter()
        .filter(|e| e["event"] == "project_finished")
        .map(|e| (e["project"].as_str().unwrap().to_string(), e))
        .collect();
    let row = |p: &str| rows[&format!("local-pulumi/{p}")].clone();
    let msg = |p: &str| row(p)["message"].as_str().unwrap_or("").to_string();
    for p in ["network", "registry", "ingress", "edge"] {
        assert_eq!(row(p)["status"], "succeeded", "{p}: {fresh:?}");
    }
    for p in ["cluster", "logstore", "app"] {
        assert_eq!(row(p)["status"], "blocked", "{p}: {fresh:?}");
        assert!(
            msg(p).contains("through a StackReference"),
            "{p}: {}",
            msg(p)
        );
    }
    assert_eq!(
        msg("ingress"),
        "2 to create · created the missing stack dev (empty) in the backend · projected: mocks: lp-ingress:admin_token (local-pulumi/cluster), lp-ingress:lb_address (local-pulumi/cluster)",
        "a preview says it created the missing stack (issue 43, 13)"
    );
    assert_eq!(
        msg("edge"),
        "2 to create · created the missing stack dev (empty) in the backend · projected: lp-edge:host from local-pulumi/ingress's preview; lp-edge:image from local-pulumi/registry's preview"
    );
    // The counts are what the real CLI previews with the same (projected) config.
    for p in ["ingress", "edge"] {
        assert_counts_are_pulumis(&r, &format!("local-pulumi/{p}"), &row(p)["changes"]);
        assert_eq!(row(p)["changes"]["create"], 2, "{p}: {}", row(p));
    }
    let cfg = std::fs::read_to_string(r.config_copy("local-pulumi/edge")).unwrap();
    assert!(
        cfg.contains("app.dev.local") && cfg.contains("registry.local/dev"),
        "{cfg}"
    );
    // Nothing was deployed.
    assert!(!r.env_dir().exists(), "a preview created files");
}
