//! Issue 42, the fast tier (the fake pulumi, which follows the real CLI here): a
//! repository's own settings win where Pulumi defines them. Each project's own stack
//! config is what runs, with the profile's keys laid over it (and `validate` naming the
//! keys it overrides); an entry's `config:` and `stack:`; a passphrase only for stacks
//! that use Pulumi's passphrase provider; `reads:` as needs.

use crate::support::*;

/// A profile without `infra_type:` (as `strata init` writes it) over `entries`.
fn adopted(entries: &str) -> Ws {
    let ws = Ws::new();
    ws.profile(
        "main",
        &format!("description: an adopted repository\ninfrastructure:\n{entries}"),
    );
    ws
}

/// What the project `name`'s stack outputs, in strata's own backend (no other is named
/// in these workspaces).
fn outputs_of(ws: &Ws, name: &str, stack: &str) -> serde_json::Value {
    let backend = ws.path(".strata/backend");
    stack_outputs(&backend, name, stack)
}

const TIERED: &str = "config:\n  tier:\n    type: string\noutputs:\n  tier: ${tier}\n";

#[test]
fn a_projects_own_stack_config_runs_under_what_the_profile_lays_over_it() {
    let ws = adopted(
        "  - path: a\n    needs: []\n  - path: b\n    needs: []\n    config:\n      b:tier: entry-tier\n",
    );
    ws.pulumi_project("a", "a", TIERED);
    ws.pulumi_project("b", "b", TIERED);
    // What `pulumi stack init` leaves is a file without `config:`; a's has one.
    let own = "# a's own\nconfig:\n  a:tier: gold\n";
    ws.write("projects/a/Pulumi.dev.yaml", own);
    ws.write("projects/b/Pulumi.dev.yaml", "config:\n  b:tier: silver\n");
    let up = ws.strata(&["up", "-s", "dev"]);
    assert_eq!(up.code, 0, "{up:?}");
    assert_eq!(outputs_of(&ws, "a", "dev")["tier"], "gold");
    assert_eq!(
        outputs_of(&ws, "b", "dev")["tier"],
        "entry-tier",
        "config: wins"
    );
    assert_eq!(ws.read("projects/a/Pulumi.dev.yaml"), own, "never written");
    // validate names the key whose own value does not run, not its values.
    let v = ws.strata(&["validate", "-s", "dev"]);
    assert_eq!(v.code, 0, "{v:?}");
    assert_has(
        &v.stdout,
        &[
            "b: `b:tier` in projects/b/Pulumi.dev.yaml is not what runs",
            "the entry's config:",
        ],
    );
    assert!(
        !v.stdout.contains("silver") && !v.stdout.contains("entry-tier"),
        "{v:?}"
    );
    let strict = ws.strata(&["validate", "-s", "dev", "--strict"]);
    assert_eq!(strict.code, 3, "{strict:?}");
    // A later change to the own file is what the next up deploys.
    ws.write(
        "projects/a/Pulumi.dev.yaml",
        "config:\n  a:tier: platinum\n",
    );
    assert_eq!(ws.strata(&["up", "-s", "dev"]).code, 0);
    assert_eq!(outputs_of(&ws, "a", "dev")["tier"], "platinum");
}

/// `stack:` maps the run's stack to the project's own name of it.
#[test]
fn an_entry_with_its_own_stack_name_runs_that_stack() {
    let ws = adopted("  - path: apps\n    needs: []\n    stack: applications.${stack}\n");
    ws.pulumi_project("apps", "apps", TIERED);
    ws.write(
        "projects/apps/Pulumi.applications.qa.yaml",
        "config:\n  apps:tier: qa-tier\n",
    );
    let up = ws.strata(&["up", "-s", "qa"]);
    assert_eq!(up.code, 0, "{up:?}");
    assert_eq!(
        outputs_of(&ws, "apps", "applications.qa")["tier"],
        "qa-tier"
    );
    let stacks: Vec<String> = ws
        .calls()
        .iter()
        .filter(|c| c["event"] == "start")
        .filter_map(|c| flag_of(c, "--stack"))
        .collect();
    assert!(
        !stacks.is_empty() && stacks.iter().all(|s| s == "applications.qa"),
        "{stacks:?}"
    );
}

/// Only a stack that encrypts with Pulumi's passphrase needs one: a project whose own
/// stack config names a KMS key does not (on a self-managed backend too).
#[test]
fn only_passphrase_stacks_need_the_passphrase() {
    let mut ws = adopted("  - path: kms\n    needs: []\n  - path: plain\n    needs: []\n");
    ws.env.retain(|(k, _)| k != "PULUMI_CONFIG_PASSPHRASE");
    ws.pulumi_project("kms", "kms", "");
    ws.write(
        "projects/kms/Pulumi.dev.yaml",
        "secretsprovider: awskms://alias/team?region=eu-west-1\nencryptedkey: AQICAHh=\nconfig: {}\n",
    );
    ws.pulumi_project("plain", "plain", "");
    let v = ws.strata(&["validate", "-s", "dev"]);
    assert_eq!(v.code, 3, "{v:?}");
    assert_has(
        &v.all(),
        &["plain encrypts its stack's secrets with Pulumi's passphrase"],
    );
    assert!(
        !v.all().contains("kms,") && !v.all().contains("kms encrypts"),
        "{v:?}"
    );
    let only_kms = adopted("  - path: kms\n    needs: []\n");
    only_kms.pulumi_project("kms", "kms", "");
    only_kms.write(
        "projects/kms/Pulumi.dev.yaml",
        &ws.read("projects/kms/Pulumi.dev.yaml"),
    );
    let mut only_kms = only_kms;
    only_kms
        .env
        .retain(|(k, _)| k != "PULUMI_CONFIG_PASSPHRASE");
    let v = only_kms.strata(&["validate", "-s", "dev"]);
    assert!(!v.all().contains("PULUMI_CONFIG_PASSPHRASE"), "{v:?}");
}

/// `reads:` names what a project's unresolved stack references read: those projects
/// run before it, like its needs; a path that is no entry is refused.
#[test]
fn reads_are_needs() {
    let ws =
        adopted("  - path: net\n    needs: []\n  - path: app\n    needs: []\n    reads: [net]\n");
    ws.pulumi_project("net", "net", "outputs:\n  id: n-1\n");
    ws.pulumi_project("app", "app", "");
    let show = ws.strata(&["show", "-s", "dev", "--format", "json"]);
    assert_eq!(show.code, 0, "{show:?}");
    let doc = show.json();
    let app = items(&doc["projects"])
        .iter()
        .find(|p| p["path"] == "app")
        .unwrap();
    assert_eq!(app["needs"], serde_json::json!(["net"]), "{doc}");
    ws.profile(
        "main",
        "description: d\ninfrastructure:\n  - path: net\n    needs: []\n  - path: app\n    reads: [nett]\n",
    );
    let bad = ws.strata(&["show", "-s", "dev"]);
    assert_eq!(bad.code, 3, "{bad:?}");
    assert_has(&bad.stderr, &["reads `nett`", "Did you mean `net`?"]);
}

/// A stack reference strata cannot resolve is never an empty `needs:`: `validate` and
/// `up` refuse its project (naming the reference by file and line, and how to declare
/// it) until its entry says what it reads; declared, the warning is gone and the
/// project runs after what it reads.
#[test]
fn an_unresolved_reference_is_refused_until_reads_declares_it() {
    let reader = "config:\n  netStack:\n    type: string\nresources:\n  net:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${netStack}\n";
    let ws = adopted("  - path: net\n    needs: []\n  - path: app\n    needs: []\n");
    ws.pulumi_project("net", "net", "outputs:\n  id: n-1\n");
    ws.pulumi_project("app", "app", reader);
    let v = ws.strata(&["validate", "-s", "dev"]);
    assert_eq!(v.code, 3, "{v:?}");
    assert_has(
        &v.all(),
        &[
            "app reads stacks strata cannot resolve",
            "projects/app/Pulumi.yaml:",
            "reads: [PATH, ...]",
        ],
    );
    let up = ws.strata(&["up", "-s", "dev"]);
    assert_eq!(up.code, 3, "{up:?}");
    assert!(
        up.stderr.contains("Nothing was asked, written or started"),
        "{up:?}"
    );
    assert!(ws.calls().is_empty(), "nothing started");
    // An export would run it beside what it reads too: refused the same way.
    let export = ws.strata(&["export", "--format", "argo", "-s", "dev", "-o", "wf.yaml"]);
    assert_eq!(export.code, 3, "{export:?}");
    assert_has(
        &export.stderr,
        &["reads: [PATH, ...]", "Nothing was exported"],
    );
    assert!(!ws.exists("wf.yaml"));

    ws.profile(
        "main",
        "description: d\ninfrastructure:\n  - path: net\n    needs: []\n  - path: app\n    needs: []\n    reads: [net]\n",
    );
    let export = ws.strata(&["export", "--format", "argo", "-s", "dev", "-o", "wf.yaml"]);
    assert_eq!(export.code, 0, "declared, it exports: {export:?}");
    let strict = ws.strata(&["validate", "-s", "dev", "--strict"]);
    assert_eq!(
        strict.code, 0,
        "declared, nothing is left to warn of: {strict:?}"
    );
    // The value the program needs to run (it still resolves to what reads: says).
    ws.write(
        "projects/app/Pulumi.dev.yaml",
        "config:\n  app:netStack: organization/net/dev\n",
    );
    let up = ws.strata(&["up", "-s", "dev", "-j", "4"]);
    assert_eq!(up.code, 0, "{up:?}");
    let order: Vec<String> = ws
        .calls()
        .iter()
        .filter(|c| c["event"] == "start" && c["command"] == "up")
        .filter_map(|c| c["project"].as_str().map(str::to_string))
        .collect();
    assert_eq!(order, ["net", "app"], "{up:?}");
}

/// `strata secrets import --from-pulumi`: the secure values of a project's own config
/// go into strata's store (under its passphrase), never printed; `--key` picks one.
#[test]
fn secrets_import_takes_a_projects_secure_values_into_the_store() {
    let mut ws = adopted("  - path: db\n    needs: []\n");
    ws.set_env("STRATA_PASSPHRASE", "store passphrase for tests");
    ws.pulumi_project("db", "db", "");
    let secret = "Imported-Value-77aa";
    let by_hand = |args: &[&str], stdin: &str| {
        let mut c = std::process::Command::new(crate::support::fake_pulumi());
        c.args(args)
            .current_dir(ws.path("projects/db"))
            .env(
                "PULUMI_BACKEND_URL",
                format!("file://{}", ws.path(".strata/backend").display()),
            )
            .env("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE);
        run_with_stdin(c, stdin)
    };
    std::fs::create_dir_all(ws.path(".strata/backend")).unwrap();
    assert_eq!(by_hand(&["stack", "init", "dev"], "").code, 0);
    let set = by_hand(
        &["config", "set", "--secret", "password", "--stack", "dev"],
        secret,
    );
    assert_eq!(set.code, 0, "{set:?}");
    by_hand(&["config", "set", "size", "small", "--stack", "dev"], "");
    let r = ws.strata(&["secrets", "import", "--from-pulumi", "db", "-s", "dev"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("stored 1 secret") && r.stderr.contains("db:password"),
        "{r:?}"
    );
    assert!(!r.all().contains(secret), "{r:?}");
    let list = ws.strata(&["secrets", "list", "-s", "dev"]);
    assert!(
        list.stdout.contains("db:password") && !list.stdout.contains("db:size"),
        "{list:?}"
    );
    let none = ws.strata(&[
        "secrets",
        "import",
        "--from-pulumi",
        "db",
        "--key",
        "db:nope",
        "-s",
        "dev",
    ]);
    assert_eq!(none.code, 3, "{none:?}");
}

/// Projects of one environment on two backends (one names its own `backend.url`): each
/// runs on its own, an input is read from the backend of the project that left it, and
/// `status` names each project's backend (issue 42).
#[test]
fn projects_on_two_backends_run_on_their_own_and_status_names_each() {
    let ws = adopted(
        "  - path: a\n    needs: []\n  - path: b\n    needs: [a]\n    inputs:\n      b:tier: a:tier\n",
    );
    ws.pulumi_project("a", "a", TIERED);
    ws.write(
        "projects/a/Pulumi.yaml",
        &format!(
            "{}backend:\n  url: file://./state\n",
            ws.read("projects/a/Pulumi.yaml")
        ),
    );
    ws.write("projects/a/Pulumi.dev.yaml", "config:\n  a:tier: gold\n");
    ws.pulumi_project("b", "b", TIERED);
    let up = ws.strata(&["up", "-s", "dev"]);
    assert_eq!(up.code, 0, "{up:?}");
    let own = ws.path("projects/a/state");
    assert_eq!(stack_outputs(&own, "a", "dev")["tier"], "gold");
    assert_eq!(
        outputs_of(&ws, "b", "dev")["tier"],
        "gold",
        "read from a's own backend"
    );

    let text = ws.strata(&["status", "-s", "dev"]);
    assert_eq!(text.code, 0, "{text:?}");
    assert_has(
        &text.stdout,
        &[
            &format!("backend file://{}", own.display()),
            "projects/a/Pulumi.yaml",
            &format!("backend file://{}", ws.path(".strata/backend").display()),
        ],
    );
    let doc = ws
        .strata(&["status", "-s", "dev", "--output", "json"])
        .json();
    let backend = |p: &str| {
        items(&doc["projects"])
            .iter()
            .find(|r| r["path"] == p)
            .map(|r| r["backend"].as_str().unwrap_or_default().to_string())
            .unwrap()
    };
    assert_eq!(backend("a"), format!("file://{}", own.display()));
    assert_eq!(
        backend("b"),
        format!("file://{}", ws.path(".strata/backend").display())
    );
}
