//! Unit tests of the Pulumi engine: exit codes, missing stacks, error lines, stale locks.

use super::failure::describe_exit;
use super::file_backend::PulumiLock;
use super::*;

#[test]
fn exit_codes_have_messages() {
    assert!(describe_exit(3).contains("pulumi login"));
    assert!(describe_exit(6).contains("not found"));
    assert!(describe_exit(8).contains("cancelled"));
}

fn job(backend: &str) -> Job {
    Job {
        path: "infra/vpc".into(),
        name: "aws-vpc".into(),
        dir: "/tmp".into(),
        op: Operation::Up,
        stack: "dev".into(),
        env: [("PULUMI_BACKEND_URL".to_string(), backend.to_string())].into(),
        config_file: "/tmp/c.yaml".into(),
        inputs: Default::default(),
        needed_outputs: vec![],
        scratch_dir: "/tmp".into(),
        secret_config: Default::default(),
        refresh: false,
        plan: None,
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
fn a_pulumi_lock_is_stale_only_when_its_process_is_gone_from_this_host() {
    let host = crate::util::hostname();
    let lock = |pid: i64, hostname: &str| PulumiLock {
        pid,
        hostname: hostname.to_string(),
        timestamp: String::new(),
    };
    assert!(!lock(std::process::id() as i64, &host).stale(), "alive");
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id() as i64;
    child.wait().unwrap();
    assert!(lock(dead, &host).stale(), "gone");
    assert!(!lock(dead, "another-host").stale(), "another host: never");
    assert!(!lock(-1, &host).stale(), "unreadable: never");
}

#[test]
fn file_backend_stack_lookup() {
    let d = tempfile::tempdir().unwrap();
    let url = format!("file://{}", d.path().display());
    assert_eq!(file_backend_stack_missing(&job(&url)), Some(true));
    let f = d.path().join(".pulumi/stacks/aws-vpc/dev.json");
    std::fs::create_dir_all(f.parent().unwrap()).unwrap();
    std::fs::write(&f, "{}").unwrap();
    assert_eq!(file_backend_stack_missing(&job(&url)), Some(false));
    assert_eq!(
        file_backend_stack_missing(&job("https://api.pulumi.com")),
        None
    );
}
