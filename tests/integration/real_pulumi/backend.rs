//! The real-Pulumi tier on backends (issue 32): a legacy layout made by the real CLI is
//! refused, its zstd checkpoints are read, a lock strata did not take is kept.

use super::{Real, lock_files, slow_project, wired_projects, write_slow_lock};

/// Issue 32: a backend in Pulumi's legacy layout, made by the real CLI itself (with
/// PULUMI_DIY_BACKEND_LEGACY_LAYOUT on a new backend): no meta.yaml, stacks at
/// `.pulumi/stacks/<stack>.json`, and a second project's `stack init dev` answers
/// `stack 'dev' already exists`. strata refuses that backend before any Pulumi runs.
#[test]
fn a_legacy_layout_backend_made_by_the_real_cli_is_refused() {
    let Some(mut r) = Real::new("real_pulumi::legacy_layout") else {
        return;
    };
    wired_projects(&r);
    r.ws.set_env("PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR", "1")
        .set_env("PULUMI_DIY_BACKEND_LEGACY_LAYOUT", "1");
    std::fs::create_dir_all(r.ws.path(".strata/backend")).unwrap();
    let init = r.pulumi("up1", &["stack", "init", "dev", "--non-interactive"]);
    assert_eq!(init.code, 0, "{init:?}");
    assert!(
        r.ws.exists(".strata/backend/.pulumi/stacks/dev.json"),
        "{init:?}"
    );
    assert!(!r.ws.exists(".strata/backend/.pulumi/meta.yaml"));
    let again = r.pulumi("down1", &["stack", "init", "dev", "--non-interactive"]);
    assert_ne!(again.code, 0, "{again:?}");
    assert!(
        again.stderr.contains("error: stack 'dev' already exists"),
        "the bare name strata refuses to take as its own: {again:?}"
    );
    // Without the bypass the CLI itself refuses the layout (3.257+).
    r.ws.env
        .retain(|(k, _)| !k.starts_with("PULUMI_DIY_BACKEND_"));
    let refused = r.pulumi("up1", &["stack", "ls", "--non-interactive"]);
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(
        refused.stderr.contains("pulumi state upgrade"),
        "{refused:?}"
    );
    r.ws.set_env("PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR", "1");
    r.take_calls();
    let run = r.strata(&["up", "--provider", "wired", "--stack", "dev"]);
    assert_eq!(run.code, 3, "{run:?}");
    assert!(run.all().contains("legacy layout"), "{run:?}");
    assert!(run.all().contains("pulumi state upgrade"), "{run:?}");
    let calls = r.take_calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("up ") || c.starts_with("stack init")),
        "no Pulumi operation ran: {calls:?}"
    );
}

/// Issue 32: with PULUMI_SELF_MANAGED_STATE_ZSTD the real CLI writes `<stack>.json.zst`
/// (klauspost/compress). strata reads the upstream's outputs from it: `up --filter
/// down1` passes the real value without a `stack output` process.
#[test]
fn zstd_checkpoints_of_the_real_cli_are_read_for_outputs() {
    let Some(mut r) = Real::new("real_pulumi::zstd_outputs") else {
        return;
    };
    wired_projects(&r);
    r.ws.set_env("PULUMI_SELF_MANAGED_STATE_ZSTD", "true");
    let first = r.strata(&["up", "--provider", "wired", "--stack", "dev"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert!(r.ws.exists(".strata/backend/.pulumi/stacks/rp-up1/dev.json.zst"));
    assert!(
        !r.ws
            .exists(".strata/backend/.pulumi/stacks/rp-up1/dev.json")
    );
    r.take_calls();
    let filtered = r.strata(&[
        "up",
        "--provider",
        "wired",
        "--stack",
        "dev",
        "--filter",
        "down1",
    ]);
    assert_eq!(filtered.code, 0, "up1 is deployed: {filtered:?}");
    let calls = r.take_calls();
    assert!(
        !calls
            .iter()
            .any(|c| c.starts_with("stack output") && c.contains("projects/up1")),
        "read from the .json.zst checkpoint: {calls:?}"
    );
    let got = r.pulumi("down1", &["stack", "output", "got", "--stack", "dev"]);
    assert_eq!(got.stdout.trim(), "from-up1", "{got:?}");
}

/// Issue 32: a lock with this host's name and a pid that does not exist here, which no
/// Pulumi process of strata's took (another container's, sharing the hostname): left,
/// and the run names the command that clears it.
#[test]
fn a_foreign_lock_with_this_hostname_is_not_cleared() {
    let Some(r) = Real::new("real_pulumi::foreign_lock") else {
        return;
    };
    slow_project(&r);
    let first = r.strata(&["up", "--provider", "slow", "--stack", "dev"]);
    assert_eq!(first.code, 0, "{first:?}");
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let pid = gone.id();
    gone.wait().unwrap();
    write_slow_lock(&r, "5e1f2a3b-foreign.json", pid);
    let run = r.strata(&["up", "--provider", "slow", "--stack", "dev"]);
    assert_ne!(run.code, 0, "{run:?}");
    assert!(run.all().contains("cannot prove"), "{run:?}");
    assert!(
        run.all().contains("pulumi cancel --yes --stack dev --cwd"),
        "{run:?}"
    );
    assert_eq!(lock_files(&r).len(), 1, "the lock is kept");
}
