//! Issue 42 with the real CLI: a repository that already has its Pulumi settings runs as
//! Pulumi would run it. Each project's backend by the CLI's precedence, each project's own
//! `Pulumi.<stack>.yaml` (a later `pulumi config set` included), `secure:` keys under
//! Pulumi's passphrase with no secret of strata's, and no committed file touched.

use std::path::{Path, PathBuf};

use super::Real;
use crate::support::{Run, stack_outputs};

/// The real CLI run by hand in `projects/<project>`, as a user runs it there: the
/// workspace's environment (PULUMI_HOME, the passphrase), no backend of strata's.
fn by_hand(r: &Real, project: &str, args: &[&str], stdin: Option<&str>) -> Run {
    let mut c = r.cli_in(project, args);
    c.envs(r.ws.env.iter().map(|(k, v)| (k, v)));
    crate::support::run_with_stdin(c, stdin.unwrap_or(""))
}

/// A repository logged in to a file backend of its own (`state/`, made), with the
/// profile `estate` of `entries`: what each test starts from. Returns the backend folder.
fn estate(r: &Real, entries: &str) -> PathBuf {
    let backend = r.ws.path("state");
    std::fs::create_dir_all(&backend).unwrap();
    logged_in(r, &backend);
    r.ws.profile(
        "estate",
        &format!("description: an estate\ninfrastructure:\n{entries}"),
    );
    backend
}

/// `pulumi login file://DIR` as the user did it once: the credentials file under the
/// workspace's PULUMI_HOME names DIR as the current backend.
fn logged_in(r: &Real, dir: &Path) {
    let creds = r.ws.path("home/.pulumi/credentials.json");
    std::fs::create_dir_all(creds.parent().unwrap()).unwrap();
    std::fs::write(
        creds,
        format!("{{\"current\": \"file://{}\"}}\n", dir.display()),
    )
    .unwrap();
}

fn checkpoint(backend: &Path, project: &str) -> PathBuf {
    backend.join(format!(".pulumi/stacks/{project}/dev.json"))
}

/// Pulumi's precedence, with the real CLI: a project's `backend.url` wins over `pulumi
/// login`, which serves the others; strata's own `.strata/backend` is not made; and
/// PULUMI_BACKEND_URL wins over both, for every project.
#[test]
fn each_project_runs_on_the_backend_pulumi_would_choose() {
    let Some(r) = Real::new("real_pulumi::adopt_backends") else {
        return;
    };
    r.ws.profile(
        "estate",
        "description: two projects\ninfrastructure:\n  - path: own\n    needs: []\n  - path: plain\n    needs: []\n",
    );
    r.ws.pulumi_project(
        "own",
        "rp-own",
        "backend:\n  url: file://./state\noutputs:\n  where: own\n",
    );
    r.ws.pulumi_project("plain", "rp-plain", "outputs:\n  where: plain\n");
    let login = r.ws.path("login-state");
    // Pulumi opens a file backend's folder, it does not make it: the team has both.
    std::fs::create_dir_all(&login).unwrap();
    std::fs::create_dir_all(r.ws.path("projects/own/state")).unwrap();
    logged_in(&r, &login);
    let run = r.on("estate", &["up"]);
    assert_eq!(run.code, 0, "{run:?}");
    let own = r.ws.path("projects/own/state");
    assert!(checkpoint(&own, "rp-own").is_file(), "{run:?}");
    assert!(checkpoint(&login, "rp-plain").is_file(), "{run:?}");
    assert!(!checkpoint(&login, "rp-own").exists(), "backend.url wins");
    assert!(!r.ws.exists(".strata/backend"), "no backend of strata's");
    assert!(
        run.stdout.contains("backends: 2"),
        "the header names both: {run:?}"
    );
    // The user's own CLI, in the project, sees the stack strata made.
    let mine = by_hand(
        &r,
        "plain",
        &["stack", "output", "where", "--stack", "dev"],
        None,
    );
    assert_eq!(mine.stdout.trim(), "plain", "{mine:?}");

    let env_set = r.ws.path("env-state");
    std::fs::create_dir_all(&env_set).unwrap();
    r.ws.env_file(&format!(
        "PULUMI_BACKEND_URL=file://{}\n",
        env_set.display()
    ));
    let again = r.on("estate", &["up"]);
    assert_eq!(again.code, 0, "{again:?}");
    for p in ["rp-own", "rp-plain"] {
        assert!(checkpoint(&env_set, p).is_file(), "{p}: {again:?}");
    }
}

/// Each project runs with its own `Pulumi.dev.yaml`: a key that differs between
/// projects keeps each project's value, and a later `pulumi config set` in one project
/// is what its next `up` deploys. The committed file is never written by strata.
#[test]
fn each_project_runs_with_its_own_stack_config_and_a_later_config_set() {
    let Some(r) = Real::new("real_pulumi::adopt_config") else {
        return;
    };
    let backend = estate(
        &r,
        "  - path: a\n    needs: []\n  - path: b\n    needs: []\n",
    );
    let tiered = "config:\n  tier:\n    type: string\n  max:\n    type: integer\noutputs:\n  tier: ${tier}\n  max: ${max}\n";
    r.ws.pulumi_project("a", "rp-a", tiered);
    r.ws.pulumi_project("b", "rp-b", tiered);
    let a_file = "# a's own settings\nconfig:\n  rp-a:tier: gold\n  rp-a:max: 5\n";
    r.ws.write("projects/a/Pulumi.dev.yaml", a_file);
    r.ws.write(
        "projects/b/Pulumi.dev.yaml",
        "config:\n  rp-b:tier: silver\n  rp-b:max: 10\n",
    );
    let first = r.on("estate", &["up"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(stack_outputs(&backend, "rp-a", "dev")["tier"], "gold");
    assert_eq!(stack_outputs(&backend, "rp-a", "dev")["max"], 5);
    assert_eq!(stack_outputs(&backend, "rp-b", "dev")["tier"], "silver");
    assert_eq!(stack_outputs(&backend, "rp-b", "dev")["max"], 10);
    assert_eq!(
        r.ws.read("projects/a/Pulumi.dev.yaml"),
        a_file,
        "strata wrote into a's own stack config"
    );

    let set = by_hand(
        &r,
        "a",
        &["config", "set", "tier", "platinum", "--stack", "dev"],
        None,
    );
    assert_eq!(set.code, 0, "{set:?}");
    let later = r.on("estate", &["up"]);
    assert_eq!(later.code, 0, "{later:?}");
    assert_eq!(
        stack_outputs(&backend, "rp-a", "dev")["tier"],
        "platinum",
        "{later:?}"
    );
    let v = r.on("estate", &["validate"]);
    assert_eq!(v.code, 0, "{v:?}");
}

/// A `secure:` key of a project's own stack config stays Pulumi's: the run needs only
/// Pulumi's passphrase (no secret of strata's, no store passphrase), and the value is
/// nowhere in clear.
#[test]
fn secure_keys_stay_in_pulumi_config_under_its_passphrase() {
    let Some(mut r) = Real::new("real_pulumi::adopt_secure") else {
        return;
    };
    r.ws.env.retain(|(k, _)| !k.starts_with("STRATA_"));
    estate(&r, "  - path: db\n    needs: []\n");
    r.ws.pulumi_project(
        "db",
        "rp-db",
        "config:\n  password:\n    type: string\n    secret: true\noutputs:\n  pw: ${password}\n",
    );
    let init = by_hand(&r, "db", &["stack", "init", "dev"], None);
    assert_eq!(init.code, 0, "{init:?}");
    let secret = "Adopted-Secret-91c2";
    let set = by_hand(
        &r,
        "db",
        &["config", "set", "--secret", "password", "--stack", "dev"],
        Some(secret),
    );
    assert_eq!(set.code, 0, "{set:?}");
    let own = r.ws.read("projects/db/Pulumi.dev.yaml");
    assert!(own.contains("secure:"), "{own}");
    let run = r.on("estate", &["up"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(r.ws.read("projects/db/Pulumi.dev.yaml"), own, "untouched");
    assert!(!r.ws.exists("config/secrets"), "no store of strata's");
    super::assert_no_clear_secret(&r, &[secret], &[&run]);
}

/// After `up`, `git status` shows no tracked file changed: strata writes only under
/// `.strata/` (git-ignored) and never into a project's files.
#[test]
fn git_status_is_clean_after_up() {
    let Some(r) = Real::new("real_pulumi::adopt_git") else {
        return;
    };
    estate(&r, "  - path: a\n    needs: []\n");
    r.ws.pulumi_project(
        "a",
        "rp-a",
        "config:\n  tier:\n    type: string\noutputs:\n  tier: ${tier}\n",
    );
    r.ws.write("projects/a/Pulumi.dev.yaml", "config:\n  rp-a:tier: gold\n");
    // What `strata init` adds (.strata/, the environment file), and the test's own.
    r.ws.write(
        ".gitignore",
        ".strata/\nconfig/pulumi/environment\nhome/\nstate/\nbin/\npulumi-calls.log\ncalls.jsonl\n",
    );
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&r.ws.root)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
            .output()
            .expect("git");
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "the repository as the team has it"]);
    let run = r.on("estate", &["up"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(git(&["status", "--porcelain"]), "", "{run:?}");
}

/// A reference whose name the reader takes from its own stack config is resolved
/// through that config by `strata init`, so the reader runs after what it reads: its
/// output is never null on the first `up`, nor stale after its source changes.
#[test]
fn a_reference_named_by_config_orders_the_reader_after_its_source() {
    let Some(r) = Real::new("real_pulumi::adopt_config_reference") else {
        return;
    };
    let backend = r.ws.path("state");
    std::fs::create_dir_all(&backend).unwrap();
    logged_in(&r, &backend);
    r.ws.pulumi_project("net", "rp-net", "outputs:\n  id: net-1\n");
    r.ws.pulumi_project(
        "reader",
        "rp-reader",
        "config:\n  netStack:\n    type: string\nresources:\n  net:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${netStack}\noutputs:\n  seen: ${net.outputs[\"id\"]}\n",
    );
    r.ws.write(
        "projects/reader/Pulumi.dev.yaml",
        "config:\n  rp-reader:netStack: organization/rp-net/dev\n",
    );
    let init = r.strata(&["init"]);
    assert_eq!(init.code, 0, "{init:?}");
    assert!(
        init.stdout.contains("reader -> projects/net")
            || init.stdout.contains("projects/reader -> projects/net"),
        "{init:?}"
    );
    let up = r.strata(&["up", "-s", "dev"]);
    assert_eq!(up.code, 0, "{up:?}");
    assert_eq!(stack_outputs(&backend, "rp-reader", "dev")["seen"], "net-1");
    r.ws.pulumi_project("net", "rp-net", "outputs:\n  id: net-2\n");
    let again = r.strata(&["up", "-s", "dev"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert_eq!(stack_outputs(&backend, "rp-reader", "dev")["seen"], "net-2");
}
