//! Unit tests of the Pulumi engine: exit codes, missing stacks, error lines, what a
//! `stack init` that finds the stack existing means. The file backend's layouts,
//! checkpoints and locks: `backend_tests`; a bucket's: `bucket_tests`.

use super::failure::{describe_exit, error_line};
use super::stack::{already_exists, existing_stack_is_ours};
use super::*;

#[test]
fn exit_codes_have_messages() {
    assert!(describe_exit(3).contains("pulumi login"));
    assert!(describe_exit(6).contains("not found"));
    assert!(describe_exit(8).contains("cancelled"));
}

/// The test stack's checkpoint (outputs `vpcId` and a secret `token`), as Pulumi writes
/// it plain, gzipped and zstd-compressed.
pub(super) const PLAIN: &[u8] = include_bytes!("testdata/dev.json");
pub(super) const GZIP: &[u8] = include_bytes!("testdata/dev.json.gz");
pub(super) const ZSTD: &[u8] = include_bytes!("testdata/dev.json.zst");
/// Each form of the test checkpoint by the file name Pulumi gives it.
pub(super) const CHECKPOINTS: [(&str, &[u8]); 3] = [
    ("dev.json", PLAIN),
    ("dev.json.gz", GZIP),
    ("dev.json.zst", ZSTD),
];

/// A checkpoint with secret outputs, made by the real CLI (testdata/README.md).
pub(super) const SECRETS: &[u8] = include_bytes!("testdata/secrets.json");

/// The salt of the passphrase secrets provider of [`SECRETS`].
pub(super) fn secrets_salt() -> String {
    let doc: Value = serde_json::from_slice(SECRETS).unwrap();
    doc.pointer("/checkpoint/latest/secrets_providers/state/salt")
        .and_then(Value::as_str)
        .unwrap()
        .to_string()
}

/// Sets `phrase` as `j`'s passphrase and `token` (secret in [`SECRETS`]) as the output
/// a dependent needs, and derives its stack's secret key early: whether the key was
/// derived.
pub(super) fn derives_early(j: &mut Job, phrase: &str) -> bool {
    derives_early_for(j, phrase, "token")
}

/// Like [`derives_early`], with `needed` as the output a dependent needs. `phrase` is one
/// no other test uses (the cache of keys is the process's); it is not derived before.
pub(super) fn derives_early_for(j: &mut Job, phrase: &str, needed: &str) -> bool {
    let salt = secrets_salt();
    j.env
        .insert("PULUMI_CONFIG_PASSPHRASE".into(), phrase.into());
    j.needed_outputs = vec![needed.into()];
    assert!(!super::passphrase::derived(&salt, phrase), "{phrase}");
    let sought = PulumiEngine::derive_secret_key_early(j).map(|t| t.join().unwrap());
    assert_eq!(sought, Some(super::passphrase::derived(&salt, phrase)));
    sought == Some(true)
}

/// Asserts that `j`'s stack checkpoint (the form `form`) is found, and read as the test
/// checkpoint's outputs with the secret masked.
pub(super) fn assert_reads_the_testdata(j: &Job, form: &str) {
    let want = serde_json::json!({"vpcId": "vpc-123", "token": "[secret]"});
    assert_eq!(checkpoint_stack_missing(j), Some(false), "{form}");
    let got = PulumiEngine::stack_outputs_from_checkpoint(j);
    assert_eq!(got.map(Value::Object), Some(want), "{form}");
}

pub(super) fn job(backend: &str) -> Job {
    Job {
        env: [("PULUMI_BACKEND_URL".to_string(), backend.to_string())].into(),
        ..Job::for_tests("infra/vpc", "aws-vpc")
    }
}

#[test]
fn missing_stack_is_exit_6_or_an_old_clis_own_error_line() {
    let j = job("https://api.pulumi.com");
    let exit = |code| Exit {
        code: Some(code),
        signal: None,
    };
    let own = ["error: no stack named 'dev' found"];
    assert!(PulumiEngine::is_missing_stack(&j, &exit(6), []));
    assert!(PulumiEngine::is_missing_stack(&j, &exit(255), own));
    assert!(PulumiEngine::is_missing_stack(
        &j,
        &exit(255),
        ["error: no stack named 'acme/aws-vpc/dev' found"]
    ));
    // A resource failure that quotes the text is a failure.
    assert!(!PulumiEngine::is_missing_stack(&j, &exit(4), own));
    assert!(!PulumiEngine::is_missing_stack(&j, &exit(1), own));
    for line in [
        "  aws:s3:Bucket b: error: no stack named 'dev' found",
        "error: deleting: no stack named 'dev' found",
        "error: no stack named 'prod' found",
        "stack not found",
    ] {
        assert!(
            !PulumiEngine::is_missing_stack(&j, &exit(255), [line]),
            "{line}"
        );
    }
    // On a file backend the checkpoint decides: it exists, so the stack exists.
    let dir = tempfile::tempdir().unwrap();
    let stacks = dir.path().join(".pulumi/stacks/aws-vpc");
    std::fs::create_dir_all(&stacks).unwrap();
    std::fs::write(stacks.join("dev.json"), "{}").unwrap();
    let f = job(&format!("file://{}", dir.path().display()));
    assert!(!PulumiEngine::is_missing_stack(&f, &exit(6), own));
}

#[test]
fn the_error_line_is_the_last_error_line() {
    let lines = [
        "Updating",
        "error: the stack is locked",
        "  /x/locks/1.json",
        "",
    ];
    assert_eq!(error_line(lines.into_iter()), "error: the stack is locked");
    assert_eq!(error_line(["a", "b", ""].into_iter()), "b");
}

#[test]
fn file_backend_stack_lookup() {
    let d = tempfile::tempdir().unwrap();
    let url = format!("file://{}", d.path().display());
    assert_eq!(checkpoint_stack_missing(&job(&url)), Some(true));
    let f = d.path().join(".pulumi/stacks/aws-vpc/dev.json");
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(&f, "{}").unwrap();
    assert_eq!(checkpoint_stack_missing(&job(&url)), Some(false));
    assert_eq!(
        checkpoint_stack_missing(&job("https://api.pulumi.com")),
        None
    );
}

#[test]
fn an_existing_stack_is_taken_only_when_pulumi_names_this_projects() {
    assert_eq!(
        already_exists("error: stack 'organization/aws-vpc/dev' already exists"),
        Some("organization/aws-vpc/dev")
    );
    assert_eq!(
        already_exists("  error: stack 'dev' already exists"),
        Some("dev")
    );
    assert_eq!(already_exists("warning: the bucket already exists"), None);
    let cloud = job("https://api.pulumi.com");
    assert!(existing_stack_is_ours(&cloud, "acme/aws-vpc/dev"));
    // The legacy layout names the bare stack, which every project shares.
    assert!(!existing_stack_is_ours(&cloud, "dev"));
    assert!(!existing_stack_is_ours(&cloud, "acme/other/dev"));
    assert!(!existing_stack_is_ours(&cloud, "acme/aws-vpc/prod"));
    // On a file backend the checkpoint must be in the project's folder too.
    let d = tempfile::tempdir().unwrap();
    let file = job(&format!("file://{}", d.path().display()));
    assert!(!existing_stack_is_ours(&file, "organization/aws-vpc/dev"));
    let f = d.path().join(".pulumi/stacks/aws-vpc/dev.json.zst");
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(&f, "x").unwrap();
    assert!(existing_stack_is_ours(&file, "organization/aws-vpc/dev"));
    std::fs::write(d.path().join(".pulumi/stacks/dev.json"), "{}").unwrap();
    assert!(
        !existing_stack_is_ours(&file, "organization/aws-vpc/dev"),
        "a legacy layout: nothing is read from it"
    );
}

/// Each CLI call gets a temp folder of its own inside the user's `TMPDIR`, removed when
/// the call ends: Pulumi's Kubernetes provider writes the cluster's kubeconfig (its
/// token or key included) into the temp folder on every start and never removes it
/// (pulumi-kubernetes `provider.go`, `writeKubeconfigToFile`).
#[test]
fn what_a_call_writes_to_its_temp_folder_goes_with_it() {
    let d = tempfile::tempdir().unwrap();
    let bin = d.path().join("pulumi");
    std::fs::write(
        &bin,
        "#!/bin/sh\nf=$(mktemp \"${TMPDIR:-/tmp}/kubeconfigXXXXXX\")\necho 'token: admin' >\"$f\"\necho \"$f\"\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let outer = d.path().join("tmp");
    std::fs::create_dir(&outer).unwrap();
    let mut j = job("file:///nowhere");
    j.dir = d.path().to_path_buf();
    j.env
        .insert("TMPDIR".into(), outer.to_string_lossy().into_owned());
    let engine = PulumiEngine::new(bin);
    let (out, _) = engine
        .capture(
            &mut Calls {
                job: &j,
                control: &Control::new(),
                report: &mut |_| {},
                procs: 0,
                created_stack: false,
            },
            &["version".into()],
            None,
        )
        .unwrap();
    assert!(out.exit.success());
    let written = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(
        written.starts_with(&outer),
        "{written:?} is in the user's TMPDIR"
    );
    assert!(!written.exists(), "{written:?} is removed with its call");
    let left: Vec<_> = std::fs::read_dir(&outer).unwrap().flatten().collect();
    assert!(left.is_empty(), "nothing is left: {left:?}");
}
