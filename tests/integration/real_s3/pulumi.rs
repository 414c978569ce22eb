//! Pulumi's own CLI (the real-Pulumi tier's `Real`) with its state in the object store:
//! `PULUMI_BACKEND_URL=s3://BUCKET?endpoint=…&use_path_style=true&region=…` and the usual
//! `AWS_*` credentials, a bucket per test.

use super::{Server, server};
use crate::leftovers::{KillLeftovers, leftover_language_hosts};
use crate::real_pulumi::{ALL, Real, calls_for, status_of, up, wired_projects};

/// The workspace's Pulumi calls go to `bucket` (created here) on the server.
pub(crate) fn on_s3(r: &mut Real, s: &Server, bucket: &str) {
    s.bucket(bucket);
    r.ws.set_env("PULUMI_BACKEND_URL", &s.backend_url(bucket))
        .set_env("AWS_ACCESS_KEY_ID", s.var("AWS_ACCESS_KEY_ID"))
        .set_env("AWS_SECRET_ACCESS_KEY", s.var("AWS_SECRET_ACCESS_KEY"))
        .set_env("AWS_REGION", s.var("AWS_REGION"));
}

/// strata `up` of two wired YAML projects with the real CLI on the object store: both
/// stacks are created and updated, their checkpoints are objects in the bucket (none on
/// disk) after a `stack init` each (strata reads in the bucket that they do not exist yet),
/// the upstream's output reaches the downstream, and a steady `up` succeeds with
/// one `pulumi up` per project and nothing else: the output the downstream needs is in
/// the upstream's update events, so no `stack output` is asked for.
#[test]
fn the_real_cli_keeps_its_state_in_the_object_store() {
    let Some(s) = server("real_s3::pulumi_state") else {
        return;
    };
    let Some(mut r) = Real::new("real_s3::pulumi_state") else {
        return;
    };
    let _guard = KillLeftovers(r.ws.root.clone());
    on_s3(&mut r, &s, "pulumi-state");
    wired_projects(&r);
    let args = ["up", "--output", "json"];
    let first = r.on("wired", &args);
    assert_eq!(first.code, 0, "{first:?}");
    for p in ["up1", "down1"] {
        assert_eq!(status_of(&first, p), "succeeded", "{first:?}");
    }
    let keys = s.list("pulumi-state", ".pulumi/");
    for name in ["rp-up1", "rp-down1"] {
        let checkpoint = format!(".pulumi/stacks/{name}/dev.json");
        assert!(keys.contains(&checkpoint), "no {checkpoint} in {keys:#?}");
    }
    assert!(keys.contains(&".pulumi/meta.yaml".to_string()), "{keys:#?}");
    assert!(!r.ws.exists(".strata/backend"), "no file backend was used");
    let got = s.request(
        "GET",
        "/pulumi-state/.pulumi/stacks/rp-down1/dev.json",
        &[],
        None,
    );
    let checkpoint: serde_json::Value = serde_json::from_str(&got.body).expect("checkpoint");
    assert_eq!(
        checkpoint["checkpoint"]["latest"]["resources"][0]["outputs"]["got"], "from-up1",
        "{got:?}"
    );

    // strata saw in the bucket that neither stack exists: `stack init` (in the project's
    // scratch copy), then `up`, and no `up` that fails for want of a stack.
    let first_calls = r.take_calls();
    for p in ["up1", "down1"] {
        let mine: Vec<&String> = first_calls
            .iter()
            .filter(|c| c.contains(&format!("/{p} ")) || c.contains(&format!("/work/{p}/")))
            .collect();
        assert_eq!(mine.len(), 2, "{p}: {first_calls:#?}");
        assert!(mine[0].starts_with("stack init"), "{p}: {first_calls:#?}");
        assert!(mine[1].starts_with("up "), "{p}: {first_calls:#?}");
    }
    let steady = r.on("wired", &args);
    assert_eq!(steady.code, 0, "{steady:?}");
    let calls = r.take_calls();
    for p in ["up1", "down1"] {
        assert_eq!(calls_for(&calls, p), 1, "{p}: {calls:#?}");
    }
    assert!(calls.iter().all(|c| c.starts_with("up ")), "{calls:#?}");
    // No language host of either run is left.
    let left = leftover_language_hosts(&r.ws.root);
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
}

/// The real-Pulumi profile on the object store (`extra`: more of Pulumi's environment):
/// a first `up` creates every stack, a steady `up` succeeds at one Pulumi process per
/// project, and no `pulumi-language-yaml` is left running after either. The secret admin
/// token lp-ingress takes from lp-cluster through `inputs:` (blinded in the update's
/// events) is read from lp-cluster's checkpoint in the bucket and decrypted by strata,
/// not asked of a `stack output --show-secrets`. Returns the bucket's keys.
fn steady_local_pulumi_on_s3(test: &str, bucket: &str, extra: &[(&str, &str)]) -> Vec<String> {
    let Some(s) = server(test) else {
        return Vec::new();
    };
    let Some(mut r) = Real::with_local_pulumi(test) else {
        return Vec::new();
    };
    let _guard = KillLeftovers(r.ws.root.clone());
    on_s3(&mut r, &s, bucket);
    for (k, v) in extra {
        r.ws.set_env(k, v);
    }
    up_leaving_no_language_host(&r, "first");
    let calls = up_leaving_no_language_host(&r, "steady");
    for p in ALL {
        assert_eq!(calls_for(&calls, p), 1, "{p}: {calls:#?}");
    }
    assert!(calls.iter().all(|c| c.starts_with("up ")), "{calls:#?}");
    s.list(bucket, ".pulumi/")
}

/// An `up` of the whole profile (`which` names it in a failure): every project succeeds
/// and no language host is left running after it. The Pulumi calls it made.
fn up_leaving_no_language_host(r: &Real, which: &str) -> Vec<String> {
    let run = up(r);
    assert_eq!(run.code, 0, "{which} up: {run:?}");
    for p in ALL {
        assert_eq!(status_of(&run, p), "succeeded", "{which} up: {run:?}");
    }
    let calls = r.take_calls();
    let left = leftover_language_hosts(&r.ws.root);
    assert!(
        left.is_empty(),
        "language hosts left by the {which} up:\n{}\ncalls:\n{}",
        left.join("\n"),
        calls.join("\n")
    );
    calls
}

/// On the object store as on a file backend, a steady `up` of the real-Pulumi profile is
/// one Pulumi process per project, lp-cluster's secret output included.
#[test]
fn the_real_pulumi_profile_on_s3_is_one_process_per_project() {
    let keys = steady_local_pulumi_on_s3("real_s3::local_pulumi", "local-pulumi", &[]);
    if keys.is_empty() {
        return;
    }
    let plain = ".pulumi/stacks/lp-cluster/dev.json".to_string();
    assert!(keys.contains(&plain), "{keys:#?}");
}

/// The same with Pulumi writing its checkpoints compressed with zstd: only `.json.zst`
/// objects, read by strata all the same.
#[test]
fn the_real_pulumi_profile_on_s3_with_zstd_checkpoints_is_one_process_per_project() {
    let zstd = [("PULUMI_SELF_MANAGED_STATE_ZSTD", "true")];
    let keys = steady_local_pulumi_on_s3("real_s3::local_pulumi_zstd", "zstd-state", &zstd);
    if keys.is_empty() {
        return;
    }
    let checkpoints: Vec<&String> = keys
        .iter()
        .filter(|k| k.starts_with(".pulumi/stacks/") && !k.ends_with(".bak"))
        .collect();
    for p in ALL {
        let name = p.replace("local-pulumi/", "lp-");
        let zst = format!(".pulumi/stacks/{name}/dev.json.zst");
        assert!(checkpoints.contains(&&zst), "{zst}: {checkpoints:#?}");
    }
    assert!(
        checkpoints.iter().all(|k| k.ends_with(".json.zst")),
        "{checkpoints:#?}"
    );
}

/// A filtered `up` of a project whose secret input changed (lp-cluster's admin token,
/// brought up again alone with a new value) is one Pulumi process for it on the object
/// store: strata writes the new value into the project's config as `pulumi config set
/// --secret` would (the copy's passphrase salt, AES-256-GCM), no `pulumi config`
/// process, and the real CLI reads it back.
#[test]
fn a_filtered_up_whose_secret_input_changed_is_one_process_on_s3() {
    let test = "real_s3::filtered_secret_input";
    let Some(s) = server(test) else {
        return;
    };
    let Some(mut r) = Real::with_local_pulumi(test) else {
        return;
    };
    let _guard = KillLeftovers(r.ws.root.clone());
    on_s3(&mut r, &s, "filtered-secret");
    up_leaving_no_language_host(&r, "first");
    r.edit(
        "projects/local-pulumi/cluster/Pulumi.yaml",
        "fn::secret: token-${pulumi.stack}",
        "fn::secret: token2-${pulumi.stack}",
    );
    let cluster = r.on(
        "local-pulumi",
        &[
            "up",
            "--project",
            "local-pulumi/cluster",
            "--output",
            "json",
        ],
    );
    assert_eq!(cluster.code, 0, "{cluster:?}");
    r.take_calls();

    let ingress = "local-pulumi/ingress";
    let run = r.on(
        "local-pulumi",
        &["up", "--project", ingress, "--output", "json"],
    );
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(status_of(&run, ingress), "succeeded", "{run:?}");
    let calls = r.take_calls();
    assert_eq!(calls_for(&calls, ingress), 1, "{calls:#?}");
    assert!(
        calls.iter().all(|c| c.starts_with("up ")),
        "no `pulumi config`: {calls:#?}"
    );
    let copy = r.ws.path(".strata/dev/config/local-pulumi_2fingress.yaml");
    let text = std::fs::read_to_string(&copy).unwrap();
    assert!(!text.contains("token2-"), "encrypted: {text}");
    let got = r.pulumi_with(ingress, &copy, &["config", "get", "lp-ingress:admin_token"]);
    assert_eq!(got.code, 0, "{got:?}");
    assert!(got.stdout.trim().starts_with("token2-dev-"), "{got:?}");
}
