//! The exported workflow of the shipped `local-pulumi` profile under act: every job green,
//! the jobs of a wave at the same time (Pulumi's own update history in the bucket says
//! so), outputs handed on through the bucket; then the same profile brought up by one
//! `strata up` on a fresh bucket, for the wall times (docs/book/src/measurements.md).

use std::time::Instant;

use serde_json::Value;

use super::Actions;
use crate::real_pulumi::{ALL, Real, assert_statuses, up};
use crate::real_s3::pulumi::on_s3;

/// The jobs of the export: build-strata, then one per project.
const JOBS: [&str; 7] = [
    "build-strata",
    "local-pulumi-network",
    "local-pulumi-registry",
    "local-pulumi-cluster",
    "local-pulumi-ingress",
    "local-pulumi-logstore",
    "local-pulumi-app",
];

/// Whether two updates' (start, end) overlap: each started before the other ended.
fn overlap(a: (i64, i64), b: (i64, i64)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

#[test]
fn the_exported_workflow_brings_local_pulumi_up_under_act() {
    let Some(a) = Actions::new("real_act::up", "act-up") else {
        return;
    };
    a.export(&[]);
    a.commit("the local-pulumi profile, its encrypted secret and its workflow");
    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let run = a.dispatch(1, "real_act::up");
    assert_eq!(run.code, 0, "{run:?}");
    run.assert_green(&JOBS);
    // strata came from the release, downloaded and checked as the workflow says.
    let build = run.output_of("build-strata");
    assert!(build.contains("strata-release: OK"), "{run:?}");

    // One update of each stack, by the jobs, in the bucket.
    let mut updates = std::collections::BTreeMap::new();
    for p in ALL {
        let name = p.replace("local-pulumi/", "lp-");
        let u = a.updates(&name);
        assert_eq!(u.len(), 1, "{name}: {u:?}");
        updates.insert(name, u[0]);
    }
    eprintln!("real_act::up: Pulumi's updates (start, end): {updates:?}");
    // The two jobs of a wave ran at once: their Pulumi updates overlap.
    for (x, y) in [("lp-network", "lp-registry"), ("lp-ingress", "lp-logstore")] {
        assert!(
            overlap(updates[x], updates[y]),
            "{x} {:?} and {y} {:?} did not overlap",
            updates[x],
            updates[y]
        );
    }
    // Outputs crossed jobs through the bucket: app took registry's and ingress's.
    let got = a.s.request(
        "GET",
        &format!("/{}/.pulumi/stacks/lp-app/dev.json", a.bucket),
        &[],
        None,
    );
    let checkpoint: Value = serde_json::from_str(&got.body).expect("lp-app's checkpoint");
    let outputs = &checkpoint["checkpoint"]["latest"]["resources"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["type"] == "pulumi:pulumi:Stack"))
        .unwrap_or_else(|| panic!("no stack resource: {checkpoint}"))["outputs"];
    assert_eq!(outputs["image"], "registry.local/dev", "{outputs}");
    assert_eq!(outputs["url"], "https://app.dev.local/", "{outputs}");
    let left = a.leftover_language_hosts();
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));

    // The same profile on one machine, a fresh bucket of the same server.
    let mut one = Real::with_local_pulumi("real_act::up").expect("found above");
    on_s3(&mut one, &a.s, "act-up-one-machine");
    let t0 = Instant::now();
    let local = up(&one);
    let wall = t0.elapsed();
    assert_eq!(local.code, 0, "{local:?}");
    assert_statuses(&local, &ALL.map(|p| (p, "succeeded")));
    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "real_act::up: measured: the exported workflow under act {:.1}s (7 jobs), one `strata up` {:.1}s; load average before {} after {}",
        run.elapsed.as_secs_f64(),
        wall.as_secs_f64(),
        load_before.trim(),
        load_after.trim()
    );
}
