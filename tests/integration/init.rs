//! `strata init` (issues 36 and 42): an existing repository in its own layout — projects
//! in Python, TypeScript, Go and YAML under infra/ and apps/, a command project, decoys in
//! node_modules and virtualenvs — adopted where it is: the files written (nothing of the
//! projects' own copied), the order inferred from the stack references, the reference it
//! cannot resolve refused until declared, `--dry-run`, a second `init` refused,
//! `--update` keeping the user's edits, then `validate` and `up`; and a platform
//! repository in the shapes real ones have (tests/fixtures/init/estate).

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// The fixture repository copied into a fresh workspace folder (the fake pulumi on PATH;
/// its one `secure:` value is under the tests' Pulumi passphrase).
fn adopted_repo() -> Ws {
    repo_copy(&fixture("repo"))
}

/// tests/fixtures/init/NAME.
pub(crate) fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/init")
        .join(name)
}

/// A workspace folder holding a copy of the repository `from`, and none of strata's
/// folders yet (the fake pulumi on PATH).
pub(crate) fn repo_copy(from: &Path) -> Ws {
    let ws = Ws::new();
    for d in ["providers", "projects", "config"] {
        std::fs::remove_dir_all(ws.path(d)).unwrap();
    }
    copy_path(from, &ws.root);
    ws
}

fn ok(r: Run) -> Run {
    assert_eq!(r.code, 0, "{r:?}");
    r
}

/// The projects of `show --format json`, each with its stage and needs.
fn shown(ws: &Ws) -> Vec<(String, String, Vec<String>)> {
    let doc = ok(ws.strata(&["show", "-s", "dev", "--format", "json"])).json();
    items(&doc["projects"])
        .iter()
        .map(|p| {
            let needs = p["needs"]
                .as_array()
                .map(|n| n.iter().map(|x| x.as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            (
                p["path"].as_str().unwrap().to_string(),
                p["stage"].as_str().unwrap_or("").to_string(),
                needs,
            )
        })
        .collect()
}

#[test]
fn init_writes_a_workspace_around_the_projects_where_they_are() {
    let ws = adopted_repo();
    let r = ok(ws.strata(&["init"]));
    // What it found, said before anything else.
    for said in [
        "strata init: 6 projects",
        "infra/aws/eks -> infra/aws/vpc   (infra/aws/eks/main.go:11)",
        "infra/db -> infra/aws/vpc   (infra/db/__main__.py:3)",
        "apps/api -> infra/aws/vpc   (apps/api/Pulumi.yaml:4)",
        "apps/web -> infra/aws/eks   (apps/web/index.ts:4)",
        "left for you: 1 stack reference",
        "apps/web/index.ts:7",
        "secrets: 1 secure: value in 1 stack config stay in Pulumi config",
        "the order (strata show):",
        "apps/web reads stacks strata cannot resolve",
        "next:",
    ] {
        assert!(r.stdout.contains(said), "no {said:?} in\n{}", r.stdout);
    }
    let profile = ws.read("providers/main.yaml");
    assert!(profile.contains("projects: .   #"), "{profile}");
    for decoy in ["node_modules", ".venv", "pyenv", "decoy"] {
        assert!(!profile.contains(decoy), "{decoy} adopted:\n{profile}");
        assert!(!r.stdout.contains(decoy), "{decoy} reported:\n{}", r.stdout);
    }
    assert!(
        profile.contains(
            "  - path: apps/web\n    needs: [infra/aws/eks]\n    # strata init: apps/web/index.ts:7 reads `${?}`"
        ),
        "the unknown is left for the user where it is: {profile}"
    );
    // The order: needs read from the code, in one list (no stage the repository lacks).
    let order = shown(&ws);
    let find = |p: &str| {
        order
            .iter()
            .find(|(path, ..)| path == p)
            .unwrap_or_else(|| panic!("{p} not in {order:?}"))
    };
    assert_eq!(order.len(), 6, "{order:?}");
    assert_eq!(find("infra/aws/vpc").2, Vec::<String>::new());
    assert_eq!(find("infra/aws/eks").2, ["infra/aws/vpc"]);
    assert_eq!(find("infra/db").2, ["infra/aws/vpc"]);
    assert_eq!(find("apps/api").2, ["infra/aws/vpc"]);
    assert_eq!(find("tools/seed").2, Vec::<String>::new());
    assert!(
        order.iter().all(|(_, stage, _)| stage == "infrastructure"),
        "{order:?}"
    );
    // Nothing of the projects' stack configs is copied: no shared config, no secret.
    assert!(!ws.exists("config/pulumi/Pulumi.dev.yaml"));
    for (path, bytes) in ws
        .files_under("providers")
        .into_iter()
        .chain(ws.files_under("config"))
    {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("gsze7Wq8u1eRIV9C") && !text.contains("adminPassword"),
            "the secure value leaked into {}",
            path.display()
        );
    }
    assert!(
        ws.read("config/pulumi/environment.example")
            .contains("PULUMI_STACK=dev")
    );
    let ignore = ws.read(".gitignore");
    assert!(
        ignore.contains(".strata/\n") && ignore.contains("config/pulumi/environment\n"),
        "{ignore}"
    );
    // Nothing of theirs was moved or rewritten.
    assert_eq!(
        ws.read("infra/aws/vpc/Pulumi.dev.yaml"),
        "config:\n  aws:region: us-west-2\n  vpc:cidr: 10.0.0.0/16\n"
    );
    declare_web_reads(&ws);
    ok(ws.strata(&["validate", "-s", "dev"]));
}

/// apps/web's second reference reads a `cache` stack no project here is: the user says
/// so (`reads: []`), and strata then runs it.
fn declare_web_reads(ws: &Ws) {
    ws.replace_in(
        "providers/main.yaml",
        "    needs: [infra/aws/eks]\n    # strata init: apps/web",
        "    needs: [infra/aws/eks]\n    reads: []\n    # strata init: apps/web",
    );
}

/// In tests/fixtures/init/estate adopted: apps/reports reads platform/network's stack
/// through a name strata cannot resolve; the user says so (`reads:`).
pub(crate) fn declare_reports_reads(ws: &Ws) {
    ws.replace_in(
        "providers/main.yaml",
        "  - path: apps/reports\n    needs: []\n",
        "  - path: apps/reports\n    needs: []\n    reads: [platform/network]\n",
    );
}

#[test]
fn dry_run_writes_nothing_and_a_second_init_refuses() {
    let ws = adopted_repo();
    let before = ws.files_under(".");
    let json = ws.strata(&["init", "--output", "json"]);
    assert_eq!(
        json.code, 2,
        "init has no JSON report: refused before anything is written: {json:?}"
    );
    let r = ok(ws.strata(&["init", "--dry-run"]));
    assert!(r.stdout.contains("--dry-run: nothing was written"), "{r:?}");
    assert!(
        r.stdout
            .contains("  - path: infra/aws/eks\n    needs: [infra/aws/vpc]"),
        "{r:?}"
    );
    // -p names the profile it would write: init's own help for the flag, same value.
    let named = ok(ws.strata(&["init", "--dry-run", "-p", "lab"]));
    assert!(named.stdout.contains("providers/lab.yaml"), "{named:?}");
    assert_eq!(ws.files_under("."), before, "--dry-run wrote something");

    ok(ws.strata(&["init"]));
    let profile = ws.read("providers/main.yaml");
    let again = ws.strata(&["init"]);
    assert_eq!(again.code, 3, "{again:?}");
    assert!(
        again.stderr.contains("adopted already") && again.stderr.contains("strata init --update"),
        "{again:?}"
    );
    assert_eq!(
        ws.read("providers/main.yaml"),
        profile,
        "the second init rewrote the profile"
    );
}

#[test]
fn update_adds_and_drops_projects_and_keeps_the_users_edits() {
    let ws = adopted_repo();
    ok(ws.strata(&["init"]));
    // The user edits the profile: a comment, a description, a need strata could not see.
    ws.replace_in(
        "providers/main.yaml",
        "  - path: apps/web\n",
        "  # the storefront, owned by the web team\n  - path: apps/web\n    description: storefront\n",
    );
    // The repository moves on: a new Python project reads the API; the seed tool goes.
    ws.write("apps/worker/Pulumi.yaml", "name: worker\nruntime: python\n");
    ws.write(
        "apps/worker/__main__.py",
        "import pulumi\napi = pulumi.StackReference(f\"{pulumi.get_organization()}/api/{pulumi.get_stack()}\")\n",
    );
    std::fs::remove_dir_all(ws.path("tools/seed")).unwrap();
    let before = ws.read("providers/main.yaml");
    let dry = ok(ws.strata(&["init", "--update", "--dry-run"]));
    assert!(
        dry.stdout
            .contains("  - path: apps/worker\n    needs: [apps/api]\n"),
        "{dry:?}"
    );
    assert_eq!(
        ws.read("providers/main.yaml"),
        before,
        "--update --dry-run wrote"
    );
    let r = ok(ws.strata(&["init", "--update"]));
    declare_web_reads(&ws);
    assert!(r.stdout.contains("added    apps/worker"), "{r:?}");
    assert!(r.stdout.contains("dropped  tools/seed"), "{r:?}");
    let profile = ws.read("providers/main.yaml");
    assert!(profile.contains("  # the storefront, owned by the web team\n  - path: apps/web\n    description: storefront\n"), "{profile}");
    assert!(!profile.contains("tools/seed"), "{profile}");
    assert!(
        profile.contains("  - path: apps/worker\n    needs: [apps/api]\n"),
        "{profile}"
    );
    let worker = shown(&ws)
        .into_iter()
        .find(|(p, ..)| p == "apps/worker")
        .unwrap();
    assert_eq!(worker.2, ["apps/api"]);
    ok(ws.strata(&["validate", "-s", "dev"]));
}

/// The first start and the last end of the fake's `up` of the project named `name`.
fn up_span(calls: &[Value], name: &str) -> (u64, u64) {
    let of = |event: &str| -> Vec<u64> {
        calls
            .iter()
            .filter(|c| c["event"] == event && c["project"] == name && c["command"] == "up")
            .map(|c| c["time_ms"].as_u64().unwrap())
            .collect()
    };
    let (starts, ends) = (of("start"), of("end"));
    assert!(
        !starts.is_empty() && !ends.is_empty(),
        "no up of {name}: {calls:?}"
    );
    (*starts.iter().min().unwrap(), *ends.iter().max().unwrap())
}

#[test]
fn up_runs_the_adopted_projects_in_the_inferred_order() {
    let ws = adopted_repo();
    ok(ws.strata(&["init"]));
    declare_web_reads(&ws);
    // The only profile needs no --provider.
    let r = ok(ws.strata(&["up", "--stack", "dev", "--yes"]));
    let calls = ws.calls();
    for (need, reader) in [
        ("vpc", "eks"),
        ("vpc", "db"),
        ("vpc", "api"),
        ("eks", "web"),
    ] {
        let (_, need_end) = up_span(&calls, need);
        let (reader_start, _) = up_span(&calls, reader);
        assert!(
            need_end <= reader_start,
            "{reader} started before {need} ended: {r:?}"
        );
    }
    // The YAML reader got the value its reference reads: the order was real.
    let out = ok(ws.strata(&["outputs", "--stack", "dev", "apps/api"]));
    assert!(out.stdout.contains("vpc-1"), "{out:?}");
}

// ---------------------------------------------------------------------------------
// A platform repository in the shapes real ones have (tests/fixtures/init/estate,
// written for these tests): references named by config, through the repository's
// helper functions, with one computed part; docstrings and tests; C#; a KMS stack.
// ---------------------------------------------------------------------------------

/// Every reference form resolves to the project it reads (config per stack, helper and
/// module constants across `lib/`, the one project a computed part fits, reported as
/// inferred); comments, docstrings and test files are no references; a C# project is
/// named as not read; what stays unresolved is listed and refused until declared.
#[test]
fn a_platform_repository_is_adopted_in_the_order_its_code_needs() {
    let ws = repo_copy(&fixture("estate"));
    let r = ok(ws.strata(&["init"]));
    let out = &r.stdout;
    for said in [
        "platform/cluster -> platform/network   (platform/cluster/__main__.py:4)",
        "platform/database -> platform/network   (platform/database/__main__.py:5; through lib/refs.py",
        "services/api -> platform/cluster   (services/api/__main__.py:12; through lib/refs.py",
        "services/api -> platform/database",
        "platform/dns -> platform/edge   (platform/dns/index.ts:5; inferred:",
        "services/web -> services/api   (services/web/main.go:11)",
        "apps/portal -> services/api   (apps/portal/Pulumi.yaml:",
        "left for you: 1 stack reference",
        "apps/reports/__main__.py:10",
        "not read: services/billing (runtime dotnet",
        "apps/portal names the stack `apps.dev` (written as `stack: apps.${stack}`)",
        "not the default, as they look like production: apps.prod, prod",
        "secrets: 2 secure: values in 2 stack configs stay in Pulumi config",
        "strata exec -- pulumi install",
    ] {
        assert!(out.contains(said), "no {said:?} in\n{out}");
    }
    for not_a_reference in ["acme-legacy", "acme-ghost", "tests/test_main.py"] {
        assert!(!out.contains(not_a_reference), "{not_a_reference}:\n{out}");
    }
    // One list, each project after what it reads; nothing copied of the projects.
    let profile = ws.read("providers/main.yaml");
    assert!(
        !profile.contains("kubernetes:") && !profile.contains("secrets:"),
        "{profile}"
    );
    assert!(
        !ws.exists("config/pulumi/Pulumi.dev.yaml"),
        "no shared config is seeded"
    );
    assert!(
        ws.read("config/pulumi/environment.example")
            .contains("PULUMI_STACK=dev\n")
    );
    let order = shown(&ws);
    let needs = |p: &str| order.iter().find(|(x, ..)| x == p).unwrap().2.clone();
    assert_eq!(needs("platform/cluster"), ["platform/network"]);
    assert_eq!(
        needs("services/api"),
        ["platform/cluster", "platform/database"]
    );
    assert_eq!(needs("platform/dns"), ["platform/edge"]);
    assert_eq!(needs("services/billing"), Vec::<String>::new());
    // The unresolved reference is refused until its entry says what it reads.
    let v = ws.strata(&["validate", "-s", "dev"]);
    assert_eq!(v.code, 3, "{v:?}");
    assert!(
        v.all()
            .contains("apps/reports reads stacks strata cannot resolve"),
        "{v:?}"
    );
    declare_reports_reads(&ws);
    let v = ws.strata(&["validate", "-s", "dev"]);
    assert!(!v.all().contains("cannot resolve"), "{v:?}");
}

/// `init` on a large repository: every project found, the order written, exit 0; its
/// time is measured by scripts/bench-init.sh, not here.
#[test]
fn init_exits_zero_once_the_profile_is_written_even_when_validate_finds_problems() {
    let ws = repo_copy(&fixture("estate"));
    let r = ws.strata(&["init"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("next:\n  # fix what validate reports above first"),
        "{r:?}"
    );
}

/// A repository whose files are links (issue 43, 4): init never writes through one. A
/// dangling `environment.example` would create a file outside the repository; a
/// `.gitignore` link would append to one. init refuses before writing anything, naming
/// the link, and the files outside are as they were.
#[test]
fn init_never_writes_through_a_symbolic_link() {
    let outside = tempfile::tempdir().unwrap();
    let keys = outside.path().join("authorized_keys");
    let ignore = outside.path().join("ignore");
    std::fs::write(&ignore, "theirs\n").unwrap();
    for (link, target) in [
        ("config/pulumi/environment.example", &keys),
        (".gitignore", &ignore),
    ] {
        let ws = adopted_repo();
        std::fs::create_dir_all(ws.path(link).parent().unwrap()).unwrap();
        let _ = std::fs::remove_file(ws.path(link));
        std::os::unix::fs::symlink(target, ws.path(link)).unwrap();
        let r = ws.strata(&["init"]);
        assert_eq!(r.code, 3, "{link}: {r:?}");
        assert!(
            r.stderr.contains(link) && r.stderr.contains("symbolic link"),
            "{link}: {r:?}"
        );
        assert!(!ws.exists("providers/main.yaml"), "nothing written: {r:?}");
        assert!(!keys.exists(), "no file created outside the repository");
        assert_eq!(std::fs::read_to_string(&ignore).unwrap(), "theirs\n");
    }
    // A linked folder on the way is refused the same way.
    let ws = adopted_repo();
    std::os::unix::fs::symlink(outside.path(), ws.path("providers")).unwrap();
    let r = ws.strata(&["init"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("providers"), "{r:?}");
    assert!(!outside.path().join("main.yaml").exists());
}
