//! `strata init` (issue 36): an existing repository in its own layout — projects in
//! Python, TypeScript, Go and YAML under infra/ and apps/, a command project, decoys in
//! node_modules and virtualenvs — adopted where it is: the files written, the order
//! inferred from the stack references, the reference it cannot resolve, `--dry-run`, a
//! second `init` refused, `--update` keeping the user's edits, then `validate` and `up`.

use std::path::Path;

use serde_json::Value;

use crate::support::*;

/// The fixture repository copied into a fresh workspace folder (the fake pulumi on PATH),
/// with the one secret its stack configs hold given through the environment.
fn adopted_repo() -> Ws {
    let mut ws = Ws::new();
    for d in ["providers", "projects", "config"] {
        std::fs::remove_dir_all(ws.path(d)).unwrap();
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/init/repo");
    copy_path(&fixture, &ws.root);
    ws.set_env("STRATA_SECRET_EKS_ADMINPASSWORD", "hunter2-but-longer");
    ws.set_env("STRATA_PASSPHRASE", "store pass");
    ws
}

fn ok(r: Run) -> Run {
    assert_eq!(r.code, 0, "{r:?}");
    r
}

/// The projects of `show --format json`, each with its stage and needs.
fn shown(ws: &Ws) -> Vec<(String, String, Vec<String>)> {
    let r = ok(ws.strata(&["show", "-s", "dev", "--format", "json"]));
    let doc: Value = serde_json::from_str(&r.stdout).unwrap();
    doc["projects"]
        .as_array()
        .unwrap()
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
        "eks:adminPassword",
        "the order (strata show):",
        "no problem; warnings are marked ! above",
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
        profile.contains("  - path: apps/web\n    # strata init: apps/web/index.ts:7 reads `${?}`"),
        "the unknown is left for the user where it is: {profile}"
    );
    // The order: needs read from the code, Kubernetes users in their stage.
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
    assert_eq!(find("apps/web").1, "kubernetes");
    assert_eq!(find("infra/aws/eks").1, "infrastructure");
    // The stack config: the keys the projects agree on, never a secure value.
    let cfg = ws.read("config/pulumi/Pulumi.dev.yaml");
    for k in [
        "aws:region: us-west-2",
        "vpc:cidr: 10.0.0.0/16",
        "db:size: small",
        "kubernetes:infra_type: main",
    ] {
        assert!(cfg.contains(k), "no {k} in {cfg}");
    }
    for (path, bytes) in ws
        .files_under("providers")
        .into_iter()
        .chain(ws.files_under("config"))
    {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains("c2VjcmV0Y2lwaGVydGV4dA"),
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
    ok(ws.strata(&["validate", "-s", "dev"]));
}

#[test]
fn dry_run_writes_nothing_and_a_second_init_refuses() {
    let ws = adopted_repo();
    let before = ws.files_under(".");
    let r = ok(ws.strata(&["init", "--dry-run"]));
    assert!(r.stdout.contains("--dry-run: nothing was written"), "{r:?}");
    assert!(
        r.stdout
            .contains("  - path: infra/aws/eks\n    needs: [infra/aws/vpc]"),
        "{r:?}"
    );
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
    let edited = ws.read("providers/main.yaml").replace(
        "  - path: apps/web\n",
        "  # the storefront, owned by the web team\n  - path: apps/web\n    description: storefront\n",
    );
    ws.write("providers/main.yaml", &edited);
    // The repository moves on: a new Python project reads the API; the seed tool goes.
    ws.write("apps/worker/Pulumi.yaml", "name: worker\nruntime: python\n");
    ws.write(
        "apps/worker/__main__.py",
        "import pulumi\napi = pulumi.StackReference(f\"{pulumi.get_organization()}/api/{pulumi.get_stack()}\")\n",
    );
    std::fs::remove_dir_all(ws.path("tools/seed")).unwrap();
    let r = ok(ws.strata(&["init", "--update"]));
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
    // The stack config names the profile (kubernetes:infra_type): no --provider needed.
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
