//! The exported workflow of the shipped `local-pulumi` profile under act: every job green,
//! the jobs of a wave at the same time (Pulumi's own update history in the bucket says
//! so), outputs handed on through the bucket. And, run on purpose (`--ignored`), its wall
//! time against one `strata up` of the same profile (docs/book/src/measurements.md).

use std::collections::BTreeMap;
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

/// The two projects of each wave of two: `network` and `registry`, `ingress` and `logstore`.
const WAVES: [(&str, &str); 2] = [("network", "registry"), ("ingress", "logstore")];

/// `me`'s resource (in the workspace's copy of the profile) first waits, a minute at most,
/// for `other`'s to start, then holds 2 s: their updates can only succeed side by side,
/// and then overlap by seconds in Pulumi's history (kept to the second).
fn meet(a: &Actions, me: &str, other: &str) {
    let wait = format!(
        "set -eu\n        touch \"$LOCAL_PULUMI_ENV/started-{me}\"; n=0\n        until [ -e \"$LOCAL_PULUMI_ENV/started-{other}\" ]; do n=$((n+1)); if [ $n -gt 600 ]; then echo \"{other} did not start beside {me}\" >&2; exit 1; fi; sleep 0.1; done\n        sleep 2\n"
    );
    a.r.edit(
        &format!("projects/local-pulumi/{me}/Pulumi.yaml"),
        "set -eu\n",
        &wait,
    );
}

/// Pulumi's one update of each stack of the profile in the bucket, by project name.
fn one_update_each(a: &Actions) -> BTreeMap<String, (i64, i64)> {
    ALL.iter()
        .map(|p| {
            let name = p.replace("local-pulumi/", "lp-");
            let u = a.updates(&name);
            assert_eq!(u.len(), 1, "{name}: {u:?}");
            (name, u[0])
        })
        .collect()
}

#[test]
fn the_exported_workflow_brings_local_pulumi_up_under_act() {
    let Some(a) = Actions::new("real_act::up", "act-up") else {
        return;
    };
    for (x, y) in WAVES {
        meet(&a, x, y);
        meet(&a, y, x);
    }
    a.export(&[]);
    a.commit("the local-pulumi profile, its encrypted secret and its workflow");
    let run = a.dispatch(1, "real_act::up");
    assert_eq!(run.code, 0, "{run:?}");
    run.assert_green(&JOBS);
    // strata came from the release, downloaded and checked as the workflow says.
    let build = run.output_of("build-strata");
    assert!(build.contains("strata-release: OK"), "{run:?}");

    let updates = one_update_each(&a);
    eprintln!("real_act::up: Pulumi's updates (start, end): {updates:?}");
    // The two jobs of a wave ran at once: their Pulumi updates overlap.
    for (x, y) in WAVES.map(|(x, y)| (format!("lp-{x}"), format!("lp-{y}"))) {
        assert!(
            overlap(updates[&x], updates[&y]),
            "{x} {:?} and {y} {:?} did not overlap",
            updates[&x],
            updates[&y]
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
    // What the app's resource did, in the environment's "cloud" all jobs reach.
    let cloud = a.cloud();
    let app = std::fs::read_to_string(cloud.join("app/app")).unwrap_or_default();
    assert_eq!(app, "registry.local/dev x1 at https://app.dev.local/\n");
    let log = std::fs::read_to_string(cloud.join("logstore/logs/app.log")).unwrap_or_default();
    assert_eq!(log, "started\n");
    // No secret reached the log in clear: act masks the repository secrets, strata
    // the store's.
    for secret in [super::REGISTRY_PASSWORD, crate::support::PASSPHRASE] {
        assert!(!run.mentions(secret), "{secret:?} in act's log");
    }
    let left = a.leftover_language_hosts();
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
}

/// The measurement of docs/book/src/measurements.md, in one run: the exported workflow
/// under act, then one `strata up` of the same profile, each on a fresh bucket of the
/// same server; wall times and the machine's load on stderr.
#[test]
#[ignore = "a measurement: run it with --ignored"]
fn measure_the_exported_workflow_under_act_against_one_machine() {
    let Some(a) = Actions::new("real_act::measure", "act-measure") else {
        return;
    };
    a.export(&[]);
    a.commit("the local-pulumi profile, its encrypted secret and its workflow");
    let load_before = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let run = a.dispatch(1, "real_act::measure");
    assert_eq!(run.code, 0, "{run:?}");
    run.assert_green(&JOBS);
    one_update_each(&a);

    let mut one = Real::with_local_pulumi("real_act::measure").expect("found above");
    on_s3(&mut one, &a.s, "act-measure-one-machine");
    let t0 = Instant::now();
    let local = up(&one);
    let wall = t0.elapsed();
    assert_eq!(local.code, 0, "{local:?}");
    assert_statuses(&local, &ALL.map(|p| (p, "succeeded")));
    let load_after = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    eprintln!(
        "real_act::measure: the exported workflow under act {:.1}s (7 jobs), one `strata up` {:.1}s; load average before {} after {}",
        run.elapsed.as_secs_f64(),
        wall.as_secs_f64(),
        load_before.trim(),
        load_after.trim()
    );
}
