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
    let mut ws = repo_copy(&fixture("repo"));
    ws.set_env("STRATA_SECRET_EKS_ADMINPASSWORD", "hunter2-but-longer");
    ws.set_env("STRATA_PASSPHRASE", "store pass");
    ws
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/init")
        .join(name)
}

/// A workspace folder holding a copy of the repository `from`, and none of strata's
/// folders yet (the fake pulumi on PATH).
fn repo_copy(from: &Path) -> Ws {
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
    let agreed = [
        "aws:region: us-west-2",
        "vpc:cidr: 10.0.0.0/16",
        "db:size: small",
        "kubernetes:infra_type: main",
    ];
    assert_has(&cfg, &agreed);
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

// ---------------------------------------------------------------------------------
// A real repository: NGINX's MARA (tests/fixtures/init/mara, Apache-2.0)
// ---------------------------------------------------------------------------------

/// The order MARA's authors run on AWS: their runner's `infra_execution_order` (aws.py)
/// then `k8s_execution_order` (base_provider.py), read from their files.
fn mara_authors_order(fixture: &Path) -> Vec<String> {
    let providers = fixture.join("pulumi/python/automation/providers");
    ["aws.py", "base_provider.py"]
        .iter()
        .flat_map(|f| {
            std::fs::read_to_string(providers.join(f))
                .unwrap()
                .lines()
                .filter_map(|l| l.split("PulumiProject(path='").nth(1))
                .map(|rest| rest.split('\'').next().unwrap().to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// What each reference strata could not resolve reads, as a reader of MARA's code finds
/// it (the helper called on the line above builds the name from the other project's
/// folder): (file:line as init lists it, the project it reads on AWS, or `None` where
/// the branch is another provider's).
const MARA_ANSWERS: &[(&str, Option<&str>)] = &[
    (
        "infrastructure/aws/eks/__main__.py:58",
        Some("infrastructure/aws/vpc"),
    ),
    (
        "infrastructure/kubeconfig/__main__.py:41",
        Some("infrastructure/aws/eks"),
    ),
    ("infrastructure/kubeconfig/__main__.py:56", None), // DigitalOcean's cluster
    ("infrastructure/kubeconfig/__main__.py:72", None), // Linode's cluster
    (
        "utility/kic-image-push/__main__.py:50",
        Some("utility/kic-image-build"),
    ),
    (
        "kubernetes/secrets/__main__.py:24",
        Some("infrastructure/kubeconfig"),
    ),
    (
        "kubernetes/nginx/ingress-controller-namespace/__main__.py:21",
        Some("infrastructure/kubeconfig"),
    ),
    (
        "kubernetes/nginx/ingress-controller/__main__.py:164",
        Some("infrastructure/kubeconfig"),
    ),
    (
        "kubernetes/nginx/ingress-controller/__main__.py:169",
        Some("kubernetes/nginx/ingress-controller-namespace"),
    ),
    (
        "kubernetes/nginx/ingress-controller/__main__.py:174",
        Some("utility/kic-image-push"),
    ),
    (
        "kubernetes/logstore/__main__.py:66",
        Some("infrastructure/kubeconfig"),
    ),
    (
        "kubernetes/logagent/__main__.py:51",
        Some("infrastructure/kubeconfig"),
    ),
    (
        "kubernetes/logagent/__main__.py:64",
        Some("kubernetes/logstore"),
    ),
    (
        "kubernetes/certmgr/__main__.py:27",
        Some("infrastructure/kubeconfig"),
    ),
    (
        "kubernetes/prometheus/__main__.py:48",
        Some("infrastructure/kubeconfig"),
    ),
    (
        "kubernetes/prometheus/__main__.py:53",
        Some("kubernetes/secrets"),
    ),
    (
        "kubernetes/observability/__main__.py:45",
        Some("infrastructure/kubeconfig"),
    ),
    (
        "kubernetes/applications/sirius/__main__.py:103",
        Some("infrastructure/kubeconfig"),
    ),
    (
        "kubernetes/applications/sirius/__main__.py:110",
        Some("kubernetes/secrets"),
    ),
    ("kubernetes/applications/sirius/__main__.py:129", None), // ingress-controller-repo-only, not run
    (
        "kubernetes/applications/sirius/__main__.py:144",
        Some("kubernetes/nginx/ingress-controller"),
    ),
];

/// MARA names every stack it reads through a helper that reads the other project's
/// Pulumi.yaml, so strata resolves none of them: it lists each, by file and line, and
/// guesses no need. It places the projects that use the Kubernetes provider in the
/// kubernetes stage; against the authors' order, the only pairs it runs the other way
/// are the image build and push before the secrets project, which reads only the
/// kubeconfig stack. With the needs the listed lines name filled in, the workspace
/// validates and runs every reader after what it reads, as the authors' order does.
#[test]
fn mara_is_adopted_with_every_computed_reference_listed_and_its_authors_order_kept() {
    let authors = mara_authors_order(&fixture("mara"));
    assert_eq!(authors.len(), 15, "{authors:?}");
    let ws = repo_copy(&fixture("mara"));
    let r = ok(ws.strata(&["init", "-p", "aws"]));
    let profile = ws.read("providers/aws.yaml");
    assert!(profile.contains("projects: pulumi/python   #"), "{profile}");

    // Every reference is listed, at its line, and nothing else.
    let listed: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("pulumi/python/"))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|at| at.contains("/__main__.py:"))
        .collect();
    let answers: Vec<&str> = MARA_ANSWERS.iter().map(|(at, _)| *at).collect();
    assert_eq!(
        listed
            .iter()
            .copied()
            .collect::<std::collections::BTreeSet<_>>(),
        answers.iter().copied().collect(),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("left for you: 21 stack references"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("needs read from stack references in the code:\n  none\n"),
        "{}",
        r.stdout
    );

    // The projects are the authors'; the stages never contradict a real need.
    let order = shown(&ws);
    let mut paths: Vec<&str> = order.iter().map(|(p, ..)| p.as_str()).collect();
    paths.sort();
    let mut expected: Vec<&str> = authors.iter().map(String::as_str).collect();
    expected.sort();
    assert_eq!(paths, expected);
    let stage = |p: &str| order.iter().find(|(x, ..)| x == p).unwrap().1.clone();
    let pos = |p: &str| authors.iter().position(|a| a == p).unwrap();
    let mut inverted = Vec::new();
    for a in &authors {
        for b in &authors {
            if stage(a) == "infrastructure" && stage(b) == "kubernetes" && pos(b) < pos(a) {
                inverted.push(format!("{a} before {b}"));
            }
        }
    }
    assert_eq!(
        inverted,
        [
            "utility/kic-image-build before kubernetes/secrets",
            "utility/kic-image-push before kubernetes/secrets"
        ]
    );
    for (at, reads) in MARA_ANSWERS {
        let reader = at.rsplit_once("/__main__.py").unwrap().0;
        if let Some(t) = reads {
            assert!(
                pos(t) < pos(reader),
                "the authors run {reader} before {t}, which it reads"
            );
            assert!(
                !inverted
                    .iter()
                    .any(|i| i.starts_with(reader) && i.ends_with(t))
            );
        }
    }

    // The user fills in the needs the listed lines name; strata keeps that order.
    let mut text = profile.clone();
    for (at, reads) in MARA_ANSWERS {
        let reader = at.rsplit_once("/__main__.py").unwrap().0;
        let Some(t) = reads.filter(|t| stage(t) == stage(reader)) else {
            continue;
        };
        let head = format!("  - path: {reader}\n");
        let start = text.find(&head).unwrap();
        let needs = start + text[start..].find("    needs: [").unwrap() + "    needs: [".len();
        let sep = if text[needs..].starts_with(']') {
            ""
        } else {
            ", "
        };
        text.insert_str(needs, &format!("{t}{sep}"));
    }
    ws.write("providers/aws.yaml", &text);
    ok(ws.strata(&["validate", "-s", "dev"]));
    let order = shown(&ws);
    let waves = ok(ws.strata(&["show", "-s", "dev", "--format", "json"]));
    let doc: Value = serde_json::from_str(&waves.stdout).unwrap();
    let wave = |p: &str| {
        doc["projects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["path"] == p)
            .unwrap()["wave"]
            .as_u64()
            .unwrap()
    };
    for (at, reads) in MARA_ANSWERS {
        let reader = at.rsplit_once("/__main__.py").unwrap().0;
        if let Some(t) = reads {
            assert!(
                wave(t) < wave(reader),
                "{reader} runs in wave {} but reads {t} (wave {})",
                wave(reader),
                wave(t)
            );
        }
    }
    assert_eq!(order.len(), 15);
}
