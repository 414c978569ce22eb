//! The shipped `local-pulumi` profile through the real CLI: the first `up` creates every
//! stack, a steady one is one process per project, the kubeconfig hook merges the real
//! output, `destroy` runs in reverse order, `--changed` follows real outputs, and
//! `outputs`, `status`, `report` and the PKO export read them.

use super::*;

#[test]
fn first_up_creates_every_stack_then_a_steady_up_is_one_process_per_project() {
    let Some((r, first)) = Real::deployed("real_pulumi::first_up") else {
        return;
    };
    // Real resources on disk, made by the real provider through the real engine.
    let env = r.env_dir();
    assert_eq!(
        std::fs::read_to_string(env.join("network/cidr")).unwrap(),
        "10.77.0.0/24\n"
    );
    let app = std::fs::read_to_string(env.join("app/app")).unwrap();
    assert!(
        app.contains("registry.local/dev x1 at https://app.dev.local/"),
        "{app}"
    );
    assert!(env.join("logstore/logs/app.log").is_file());
    // One stack per project on the default file backend.
    for name in [
        "lp-network",
        "lp-registry",
        "lp-cluster",
        "lp-ingress",
        "lp-logstore",
        "lp-app",
    ] {
        assert!(
            r.ws.path(&format!(".strata/backend/.pulumi/stacks/{name}/dev.json"))
                .is_file(),
            "no checkpoint of {name}"
        );
    }
    let calls = r.take_calls();
    assert!(
        calls.iter().any(|c| c.starts_with("stack init")),
        "{calls:#?}"
    );

    // The steady state: nothing changed, one Pulumi process per project, its `up`. The
    // secret admin token lp-ingress takes from lp-cluster through `inputs:` (the
    // engine's events carry it blinded) is decrypted by strata from lp-cluster's
    // checkpoint with the passphrase, not asked of `stack output --show-secrets`.
    let steady = up(&r);
    assert_eq!(steady.code, 0, "{steady:?}");
    let calls = r.take_calls();
    for p in ALL {
        let ups = calls
            .iter()
            .filter(|c| c.starts_with("up ") && c.contains(&format!("projects/{p} ")))
            .count();
        assert_eq!(ups, 1, "{p}: one `pulumi up`: {calls:#?}");
        assert_eq!(
            calls_for(&calls, p),
            1,
            "{p}: Pulumi processes in the steady state: {calls:#?}"
        );
    }
    assert!(
        !calls.iter().any(|c| c.starts_with("stack output")),
        "{calls:#?}"
    );
    assert_no_clear_secret(&r, &[REGISTRY_PASSWORD], &[&first, &steady]);
}

#[test]
fn the_kubeconfig_hook_merges_the_real_output_and_secrets_stay_secret() {
    let Some((r, first)) = Real::deployed("real_pulumi::kubeconfig_and_secrets") else {
        return;
    };
    let kube = r.ws.read("home/.kube/config");
    assert!(kube.contains("server: https://10.77.0.1:6443"), "{kube}");
    assert!(kube.contains("name: dev-cluster"), "{kube}");
    // The demo's hook says `current: false`: the user's kubectl is not repointed.
    assert!(!kube.contains("current-context: dev-cluster"), "{kube}");

    // The store's secret reached lp-registry as a real Pulumi secret: a `secure:` value
    // in the config strata handed the CLI, which Pulumi itself decrypts.
    let cfgs: Vec<(PathBuf, Vec<u8>)> = r.ws.files_under(".strata/dev/config");
    let reg = cfgs
        .iter()
        .find(|(p, _)| p.display().to_string().ends_with("registry.yaml"))
        .unwrap_or_else(|| panic!("no config of local-pulumi/registry in {cfgs:?}"));
    let text = String::from_utf8_lossy(&reg.1);
    assert!(text.contains("lp-registry:password:"), "{text}");
    assert!(text.contains("secure:"), "{text}");
    let get = ["config", "get", "lp-registry:password"];
    let got = r.pulumi_with("local-pulumi/registry", &reg.0, &get);
    assert_eq!(got.stdout.trim(), REGISTRY_PASSWORD, "{got:?}");

    // The secret output crossed to lp-app through a StackReference, and the cluster's
    // secret admin token to lp-ingress through `inputs:`: neither in clear anywhere.
    let show = [
        "stack",
        "output",
        "admin_token",
        "--show-secrets",
        "--stack",
        "dev",
    ];
    let out = r.pulumi("local-pulumi/cluster", &show);
    assert_eq!(out.code, 0, "{out:?}");
    let token = out.stdout.trim().to_string();
    assert!(token.starts_with("token-dev-"), "{out:?}");
    let outputs = r.on("local-pulumi", &["outputs"]);
    assert_eq!(outputs.code, 0, "{outputs:?}");
    assert!(outputs.stdout.contains("[secret]"), "{outputs:?}");
    assert_no_clear_secret(&r, &[REGISTRY_PASSWORD, &token], &[&first, &outputs]);

    // Asked for, the secret is shown as the CLI shows it, strata decrypting it from
    // the checkpoint with the passphrase: no Pulumi process, masked or not.
    r.take_calls();
    let shown = lp(&r, &["outputs", "local-pulumi/cluster", "--show-secrets"]);
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(shown.stdout.contains(&token), "{shown:?}");
    assert_eq!(r.take_calls(), Vec::<String>::new(), "{shown:?}");
}

#[test]
fn destroy_runs_in_reverse_order_and_a_failing_delete_is_a_failure() {
    let Some(r) = Real::with_local_pulumi("real_pulumi::destroy") else {
        return;
    };
    // Nothing deployed: every stack is missing, nothing to do.
    let none = lp(&r, &["destroy", "--yes"]);
    assert_eq!(none.code, 0, "{none:?}");
    assert_eq!(up(&r).code, 0);
    let down = lp(&r, &["destroy", "--yes"]);
    assert_eq!(down.code, 0, "{down:?}");
    let order: Vec<String> = finished(&down).into_iter().map(|(p, _)| p).collect();
    assert_in_order(
        &order,
        &[
            "local-pulumi/app",
            "local-pulumi/ingress",
            "local-pulumi/cluster",
            "local-pulumi/network",
        ],
    );
    let left: Vec<_> = std::fs::read_dir(r.env_dir())
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left behind: {left:?}");
    // The cluster's kubeconfig entries went with it.
    let kube = r.ws.read("home/.kube/config");
    assert!(!kube.contains("dev-cluster"), "{kube}");

    // A Command whose delete exits 1: the destroy really fails, and says so.
    r.ws.profile(
        "stuck",
        "description: one project\ninfra_type: local\ninfrastructure:\n  - path: stuck\n",
    );
    r.ws.pulumi_project(
        "stuck",
        "rp-stuck",
        "resources:\n  f:\n    type: command:local:Command\n    properties:\n      create: echo made\n      delete: echo cannot delete >&2; exit 1\n",
    );
    assert_eq!(r.on("stuck", &["up"]).code, 0);
    let failed = r.on("stuck", &["destroy", "--yes", "--output", "json"]);
    assert_ne!(failed.code, 0, "{failed:?}");
    assert_eq!(status_of(&failed, "stuck"), "failed", "{failed:?}");
}

/// `--changed`, output-aware, with the real CLI: a change to lp-network's program that
/// leaves its outputs alone re-runs lp-network only; rotating the registry password
/// (a secret output lp-app reads through a StackReference) re-runs lp-app too.
#[test]
fn changed_follows_outputs_and_a_rotated_secret_output_is_a_change() {
    let Some((r, _)) = Real::deployed("real_pulumi::changed") else {
        return;
    };
    let changed = ["up", "--changed"];
    let nothing = lp(&r, &changed);
    assert_eq!(nothing.code, 0, "{nothing:?}");
    for p in ALL {
        assert_eq!(status_of(&nothing, p), "skipped", "{nothing:?}");
    }
    r.take_calls();

    // A program change that leaves the outputs alone.
    r.edit(
        "projects/local-pulumi/network/Pulumi.yaml",
        "mkdir -p \"$d\"",
        "mkdir -p \"$d\" # v2",
    );
    let run = lp(&r, &changed);
    assert_eq!(run.code, 0, "{run:?}");
    assert_statuses(&run, &[("local-pulumi/network", "succeeded")]);
    for p in &ALL[1..] {
        assert_eq!(status_of(&run, p), "skipped", "{p}: {run:?}");
    }
    let calls = r.take_calls();
    assert!(
        calls
            .iter()
            .all(|c| c.contains("projects/local-pulumi/network ")),
        "only lp-network ran Pulumi: {calls:#?}"
    );

    // A rotated secret: lp-registry re-runs, and so does lp-app, which reads the
    // password through a StackReference (its hash cannot be read from masked events).
    let set = "secrets set lp-registry:password --provider local-pulumi --stack dev";
    let set: Vec<&str> = set.split(' ').collect();
    let out = crate::support::strata_stdin(&r.ws, &set, "rotated-Pa55-0b7e\n");
    assert_eq!(out.code, 0, "{out:?}");
    let run = lp(&r, &changed);
    assert_eq!(run.code, 0, "{run:?}");
    assert_statuses(
        &run,
        &[
            ("local-pulumi/registry", "succeeded"),
            ("local-pulumi/app", "succeeded"),
            ("local-pulumi/cluster", "skipped"),
        ],
    );
    assert_no_clear_secret(&r, &["rotated-Pa55-0b7e", REGISTRY_PASSWORD], &[&run]);
}

/// `outputs`, `status`, `report` and `export --format pko` fed by real outputs.
#[test]
fn outputs_status_report_and_pko_export_read_the_real_outputs() {
    let Some((r, _)) = Real::deployed("real_pulumi::read_back") else {
        return;
    };
    let outputs = lp(&r, &["outputs"]);
    assert_eq!(outputs.code, 0, "{outputs:?}");
    let o: Value = serde_json::from_str(outputs.stdout.trim()).unwrap();
    assert_eq!(o["local-pulumi/network"]["cidr"], "10.77.0.0/24", "{o:#}");
    assert_eq!(o["local-pulumi/network"]["gateway"], "10.77.0.1", "{o:#}");
    assert_eq!(o["local-pulumi/registry"]["password"], "[secret]", "{o:#}");
    assert!(
        o["local-pulumi/cluster"]["kubeconfig"]
            .as_str()
            .is_some_and(|k| k.contains("server: https://10.77.0.1:6443")),
        "{o:#}"
    );
    let shown = lp(&r, &["outputs", "local-pulumi/registry", "--show-secrets"]);
    assert!(shown.stdout.contains(REGISTRY_PASSWORD), "{shown:?}");

    let status = r.on("local-pulumi", &["status"]);
    assert_eq!(status.code, 0, "{status:?}");
    for p in ALL {
        let row = status
            .stdout
            .lines()
            .find(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("{p}: {status:?}"));
        assert!(row.contains("up") && row.contains("succeeded"), "{row}");
    }

    let report = r.on("local-pulumi", &["report", "--format", "json"]);
    assert_eq!(report.code, 0, "{report:?}");
    let rep: Value = serde_json::from_str(&report.stdout).unwrap();
    let projects = rep["projects"].as_array().unwrap();
    assert_eq!(projects.len(), 6, "{rep:#}");
    assert!(
        projects.iter().all(|p| p["status"] == "succeeded"),
        "{rep:#}"
    );
    assert_eq!(
        rep["critical_path"].as_array().unwrap().last().unwrap(),
        "local-pulumi/app"
    );

    let pko = r.ws.path("stacks.yaml");
    let export = ["export", "--format", "pko", "-o", pko.to_str().unwrap()];
    let export = r.on("local-pulumi", &export);
    assert_eq!(export.code, 0, "{export:?}");
    let text = std::fs::read_to_string(&pko).unwrap();
    // Known outputs arrive as literal config; the secret token only through a Secret.
    assert!(text.contains("10.77.0.1"), "{text}");
    assert!(!text.contains("token-dev-"), "{text}");
    assert!(text.contains("strata-dev-inputs"), "{text}");
    let crd = crate::support::shared_tool("pulumi.com_stacks.yaml");
    if let Some((ok, why)) =
        crate::handoff::python_check("validate_pko.py", &[crd.as_path(), pko.as_path()])
    {
        assert!(ok, "the PKO CRD refuses the export: {why}\n{text}");
    }
}
