//! Unit tests of what strata reads from an `s3://` backend, on an in-memory object store
//! made the bucket of a test's own URL: each checkpoint form and the newest of several, a
//! missing stack, the legacy layout, secrets masked and revealed, the key derived early,
//! and a backend that fails (the CLI is asked, and the bucket is not asked again).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStoreExt;
use object_store::memory::InMemory;
use object_store::path::Path as Key;

use super::layout::layout_problem;
use super::source::share;
use super::tests::{
    CHECKPOINTS, GZIP, PLAIN, SECRETS, ZSTD, assert_reads_the_testdata, derives_early, job,
};
use super::*;
use crate::backend::Backend;

/// A bucket of the test's own (`s3://<name>/team/`), empty; its store and a job on it.
fn bucket(name: &str) -> (Arc<InMemory>, Job) {
    let store = Arc::new(InMemory::new());
    let j = job(&format!("s3://{name}/team"));
    let backend = Backend::new(format!("s3://{name}/team"), store.clone(), "team/".into());
    share(&j.env, backend.unwrap());
    (store, j)
}

fn put(store: &InMemory, key: &str, bytes: &[u8]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(store.put(&Key::from(format!("team/{key}")), bytes.to_vec().into()))
        .unwrap();
}

/// A project-mode bucket holding `files` in aws-vpc's folder, written in that order.
fn project_bucket(name: &str, files: &[(&str, &[u8])]) -> (Arc<InMemory>, Job) {
    let (store, j) = bucket(name);
    put(&store, ".pulumi/meta.yaml", b"version: 1\n");
    for (file, bytes) in files {
        put(&store, &format!(".pulumi/stacks/aws-vpc/{file}"), bytes);
    }
    (store, j)
}

#[test]
fn every_checkpoint_form_is_read_from_a_bucket() {
    for (name, bytes) in CHECKPOINTS {
        let (_s, j) = project_bucket(&format!("forms-{}", name.len()), &[(name, bytes)]);
        assert_reads_the_testdata(&j, name);
    }
    // Another stack's checkpoint, or a backup beside it, is not this stack's.
    let (_s, j) = project_bucket("forms-none", &[("prod.json", PLAIN), ("dev.jsonx", PLAIN)]);
    assert_eq!(checkpoint_stack_missing(&j), Some(true));
    assert_eq!(PulumiEngine::stack_outputs_from_checkpoint(&j), None);
    // Broken or unknown: the CLI is asked.
    let (_s, j) = project_bucket("forms-broken", &[("dev.json.zst", &ZSTD[..40])]);
    assert_eq!(checkpoint_stack_missing(&j), Some(false));
    assert_eq!(PulumiEngine::stack_outputs_from_checkpoint(&j), None);
}

#[test]
fn of_several_forms_in_a_bucket_the_last_written_is_read() {
    let stale = String::from_utf8_lossy(PLAIN).replace("vpc-123", "vpc-old");
    let (store, j) = project_bucket("newest", &[("dev.json", stale.as_bytes())]);
    std::thread::sleep(Duration::from_millis(20));
    put(&store, ".pulumi/stacks/aws-vpc/dev.json.zst", ZSTD);
    let out = PulumiEngine::stack_outputs_from_checkpoint(&j).unwrap();
    assert_eq!(out["vpcId"], "vpc-123", "the newer .json.zst");
    std::thread::sleep(Duration::from_millis(20));
    put(&store, ".pulumi/stacks/aws-vpc/dev.json", stale.as_bytes());
    let out = PulumiEngine::stack_outputs_from_checkpoint(&j).unwrap();
    assert_eq!(out["vpcId"], "vpc-old", "now the plain one is newer");
}

#[test]
fn a_legacy_bucket_is_refused_and_never_read() {
    let (store, j) = bucket("legacy-meta");
    put(&store, ".pulumi/meta.yaml", b"version: 0\n");
    put(&store, ".pulumi/stacks/aws-vpc/dev.json", PLAIN);
    let p = layout_problem(&j.env).expect("version 0 refused");
    assert!(p.contains("legacy layout"), "{p}");
    assert!(p.contains("pulumi state upgrade"), "{p}");
    assert_eq!(checkpoint_stack_missing(&j), None);
    assert_eq!(PulumiEngine::stack_outputs_from_checkpoint(&j), None);

    // No meta.yaml, a stack at the top of .pulumi/stacks/: legacy, named.
    let (store, j) = bucket("legacy-stacks");
    put(&store, ".pulumi/stacks/dev.json", PLAIN);
    let p = layout_problem(&j.env).expect("legacy stacks refused");
    assert!(p.contains(": dev"), "{p}");
    assert_eq!(checkpoint_stack_missing(&j), None);

    // A new bucket: Pulumi makes it project mode, unless the variable says legacy.
    let (_s, mut j) = bucket("legacy-new");
    assert_eq!(layout_problem(&j.env), None);
    assert_eq!(checkpoint_stack_missing(&j), Some(true));
    j.env
        .insert("PULUMI_DIY_BACKEND_LEGACY_LAYOUT".into(), "true".into());
    let p = layout_problem(&j.env).expect("legacy var refused");
    assert!(p.contains("PULUMI_DIY_BACKEND_LEGACY_LAYOUT is set"), "{p}");
}

#[test]
fn the_deprecation_bypass_is_refused_only_where_the_layout_cannot_be_read() {
    let ignore = ("PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR", "1");
    // Read: project mode, so the variable lets nothing legacy run.
    let (_s, mut j) = project_bucket("bypass-read", &[]);
    j.env.insert(ignore.0.into(), ignore.1.into());
    assert_eq!(layout_problem(&j.env), None);
    // A bucket that cannot be opened (no credentials) is not read: refused as before.
    let env: BTreeMap<String, String> = [
        (
            "PULUMI_BACKEND_URL".to_string(),
            "s3://bypass-closed".into(),
        ),
        (ignore.0.into(), ignore.1.into()),
    ]
    .into();
    let p = layout_problem(&env).expect("unreadable bucket with the bypass");
    assert!(
        p.contains("Unset PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR"),
        "{p}"
    );
}

#[test]
fn secret_outputs_in_a_bucket_are_revealed_only_with_the_passphrase() {
    let (_s, mut j) = project_bucket("secrets", &[("dev.json", SECRETS)]);
    let masked = PulumiEngine::stack_outputs_from_checkpoint(&j).unwrap();
    assert_eq!(masked["token"], "[secret]");
    assert_eq!(
        PulumiEngine::stack_outputs_from_checkpoint_revealed(&j),
        None
    );
    j.env
        .insert("PULUMI_CONFIG_PASSPHRASE".into(), "wrong".into());
    assert_eq!(
        PulumiEngine::stack_outputs_from_checkpoint_revealed(&j),
        None
    );
    j.env.insert(
        "PULUMI_CONFIG_PASSPHRASE".into(),
        "correct horse battery staple".into(),
    );
    // (The passphrase is no AWS_* variable: the same bucket.)
    let clear = PulumiEngine::stack_outputs_from_checkpoint_revealed(&j).unwrap();
    assert_eq!(clear["token"], "tok-3f9a-known");
    assert_eq!(clear["plain"], "not-a-secret");
    assert_eq!(clear.len(), masked.len());
}

#[test]
fn the_secret_key_of_a_bucket_checkpoint_is_derived_early() {
    let (_s, mut j) = project_bucket("early", &[("dev.json", SECRETS)]);
    assert!(derives_early(&mut j, "bucket-early-2d7e"), "not derived");
}

/// A backend that refuses every call: nothing is read (the CLI is asked), within the
/// bound of one call, and the run does not ask it again.
#[test]
fn a_failing_bucket_is_asked_once_and_the_cli_answers() {
    let env: BTreeMap<String, String> = [
        (
            "PULUMI_BACKEND_URL".to_string(),
            "s3://down/team?endpoint=http://127.0.0.1:1&use_path_style=true".to_string(),
        ),
        ("AWS_ACCESS_KEY_ID".into(), "AK".into()),
        ("AWS_SECRET_ACCESS_KEY".into(), "SK".into()),
        ("AWS_REGION".into(), "us-east-1".into()),
    ]
    .into();
    let mut j = job("");
    j.env = env;
    let t0 = Instant::now();
    assert_eq!(checkpoint_stack_missing(&j), None);
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());
    let t1 = Instant::now();
    assert_eq!(PulumiEngine::stack_outputs_from_checkpoint(&j), None);
    assert_eq!(checkpoint_stack_missing(&j), None);
    assert!(
        t1.elapsed() < Duration::from_millis(200),
        "{:?}",
        t1.elapsed()
    );
    // Its layout unknown, the variable that only serves the legacy one is refused.
    let ignore = "PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR";
    j.env.insert(ignore.into(), "1".into());
    let p = layout_problem(&j.env).expect("bypass on an unreadable bucket");
    assert!(p.contains(&format!("Unset {ignore}")), "{p}");
}

/// A stack `stack init` finds existing is this project's only when its checkpoint is in
/// the project's folder of the bucket.
#[test]
fn an_existing_stack_in_a_bucket_is_ours_only_with_its_checkpoint() {
    let name = "organization/aws-vpc/dev";
    let (store, j) = project_bucket("ours", &[("prod.json", PLAIN)]);
    assert!(!super::stack::existing_stack_is_ours(&j, name));
    put(&store, ".pulumi/stacks/aws-vpc/dev.json.gz", GZIP);
    assert!(super::stack::existing_stack_is_ours(&j, name));
}
