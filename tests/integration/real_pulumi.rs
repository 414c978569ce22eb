//! The real-Pulumi tier: strata against the real `pulumi` CLI, its YAML language host and
//! a command provider (built by `scripts/install-pulumi.sh`), on the `local-pulumi`
//! profile this repository ships and on fixtures of its own. Each test has its own
//! workspace, `PULUMI_HOME` and file backend; nothing reaches a network.
//!
//! The binaries are found in `STRATA_PULUMI_BIN_DIR`, else in the folder the install
//! script points `~/.cache/strata/pulumi/current` at. Missing under `CI=true`: the test
//! fails with the install hint; elsewhere it is skipped, saying so.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{PASSPHRASE, Run, Ws};

/// Issue 32 with the real CLI: backend layouts, checkpoint forms, foreign locks.
mod backend;
/// Issue 35: policy rules on the real preview and the real update plan.
mod gates;
/// Issue 33: Pulumi's own Kubernetes provider on the throwaway control plane.
mod kubernetes;
/// Issue 33: the shipped `local-kube` profile, whose cluster project starts its own.
mod local_kube;
/// Issue 35: orphans destroyed by the real CLI from the last revision that had them.
mod orphans;

const HINT: &str = "build it with `scripts/install-pulumi.sh` (Go 1.26+ and the Go module proxy), or set STRATA_PULUMI_BIN_DIR to a folder holding pulumi, pulumi-language-yaml and pulumi-resource-command";
const BINARIES: [&str; 3] = ["pulumi", "pulumi-language-yaml", "pulumi-resource-command"];
/// The registry password the store hands lp-registry; never to be seen in clear.
const REGISTRY_PASSWORD: &str = "reg-Pa55-9f1c2e77";

/// The folder holding the real binaries, or `None` (skipped) outside CI.
fn real_bin_dir(test: &str) -> Option<PathBuf> {
    crate::support::real_bin_dir(
        test,
        "the real Pulumi",
        "STRATA_PULUMI_BIN_DIR",
        "pulumi",
        &BINARIES,
        HINT,
    )
}

/// A workspace whose `pulumi` is the real CLI (behind a wrapper that logs each call).
pub(crate) struct Real {
    pub(crate) ws: Ws,
}

impl Real {
    pub(crate) fn new(test: &str) -> Option<Real> {
        let dir = real_bin_dir(test)?;
        let mut ws = Ws::new();
        std::fs::remove_file(ws.bin.join("pulumi")).unwrap();
        for b in &BINARIES[1..] {
            std::os::unix::fs::symlink(dir.join(b), ws.bin.join(b)).unwrap();
        }
        // Every call logged as one line (its working folder and arguments), then exec'd:
        // the process strata started is the real CLI itself.
        let log = ws.path("pulumi-calls.log");
        let wrapper = format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >>'{}'\nexec '{}' \"$@\"\n",
            log.display(),
            dir.join("pulumi").display()
        );
        let w = ws.bin.join("pulumi");
        std::fs::write(&w, wrapper).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).unwrap();
        let home = ws.path("home/.pulumi");
        ws.set_env("PULUMI_HOME", home.to_str().unwrap())
            .set_env("PULUMI_SKIP_UPDATE_CHECK", "true")
            .set_env("PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION", "true")
            .set_env("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)
            .set_env("STRATA_PASSPHRASE", "store-passphrase-for-tests")
            .set_env("STRATA_SECRET_LP_REGISTRY_PASSWORD", REGISTRY_PASSWORD);
        Some(Real { ws })
    }

    /// The repository's `local-pulumi` profile and projects, copied in.
    pub(crate) fn with_local_pulumi(test: &str) -> Option<Real> {
        let r = Real::new(test)?;
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        crate::support::copy_path(
            &repo.join("providers/local-pulumi.yaml"),
            &r.ws.path("providers/local-pulumi.yaml"),
        );
        crate::support::copy_path(
            &repo.join("projects/local-pulumi"),
            &r.ws.path("projects/local-pulumi"),
        );
        Some(r)
    }

    /// The `local-pulumi` profile, deployed by a first `up` (which must succeed, every
    /// project of it); that `up`'s run.
    pub(crate) fn deployed(test: &str) -> Option<(Real, Run)> {
        let r = Real::with_local_pulumi(test)?;
        let first = up(&r);
        assert_eq!(first.code, 0, "{first:?}");
        for p in ALL {
            assert_eq!(status_of(&first, p), "succeeded", "{first:?}");
        }
        Some((r, first))
    }

    pub(crate) fn strata(&self, args: &[&str]) -> Run {
        self.ws.strata(args)
    }

    /// `strata ARGS --provider PROVIDER --stack dev`.
    pub(crate) fn on(&self, provider: &str, args: &[&str]) -> Run {
        let mut all = args.to_vec();
        all.extend(["--provider", provider, "--stack", "dev"]);
        self.strata(&all)
    }

    /// Replaces `from` (which must be there) with `to` in the workspace file `rel`: a
    /// change made by hand, as a user would.
    pub(crate) fn edit(&self, rel: &str, from: &str, to: &str) {
        let text = self.ws.read(rel);
        assert!(text.contains(from), "no {from:?} in {rel}:\n{text}");
        self.ws.write(rel, &text.replace(from, to));
    }

    /// Runs the real CLI directly in a project folder of the workspace (for comparing).
    fn pulumi(&self, project: &str, args: &[&str]) -> Run {
        let mut c = std::process::Command::new(self.ws.bin.join("pulumi"));
        c.args(args)
            .current_dir(self.ws.path(&format!("projects/{project}")))
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", self.ws.bin.display()),
            )
            .env("HOME", self.ws.path("home"))
            .env(
                "PULUMI_BACKEND_URL",
                format!("file://{}", self.ws.path(".strata/backend").display()),
            )
            .env("STRATA_ROOT", &self.ws.root)
            .env("STRATA_STACK", "dev");
        for (k, v) in &self.ws.env {
            c.env(k, v);
        }
        crate::real_kube::ran(c.stdin(std::process::Stdio::null()).output().unwrap())
    }

    /// `pulumi ARGS --stack dev --config-file CONFIG` in a project folder (see `pulumi`).
    fn pulumi_with(&self, project: &str, config: &Path, args: &[&str]) -> Run {
        let mut all = args.to_vec();
        all.extend(["--stack", "dev", "--config-file", config.to_str().unwrap()]);
        self.pulumi(project, &all)
    }

    /// The Pulumi calls logged since the last `take_calls`, per project folder name.
    pub(crate) fn take_calls(&self) -> Vec<String> {
        let p = self.ws.path("pulumi-calls.log");
        let text = std::fs::read_to_string(&p).unwrap_or_default();
        let _ = std::fs::remove_file(&p);
        text.lines().map(str::to_string).collect()
    }

    /// The project's own copy of the stack config, which strata hands the CLI.
    fn config_copy(&self, project: &str) -> PathBuf {
        let file = project.replace('/', "_2f");
        self.ws.path(&format!(".strata/dev/config/{file}.yaml"))
    }

    fn env_dir(&self) -> PathBuf {
        self.ws.path(".strata/dev/local-pulumi-env")
    }
}

/// Two YAML projects without resources: `rp-up1` outputs `value`, `rp-down1` takes it as
/// its config `v` (strata `inputs:`) and outputs it again as `got`.
pub(crate) fn wired_projects(r: &Real) {
    r.ws.profile(
        "wired",
        "description: two wired projects\ninfra_type: test\ninfrastructure:\n  - path: up1\n  - path: down1\n    inputs:\n      rp-down1:v: up1:value\n",
    );
    r.ws.pulumi_project("up1", "rp-up1", "outputs:\n  value: from-up1\n");
    r.ws.pulumi_project(
        "down1",
        "rp-down1",
        "config:\n  v:\n    type: string\noutputs:\n  got: ${v}\n",
    );
}

/// How many logged calls ran in `projects/<project>` (strata passes `--cwd`).
pub(crate) fn calls_for(calls: &[String], project: &str) -> usize {
    let needle = format!("projects/{project} ");
    calls.iter().filter(|c| c.contains(&needle)).count()
}

fn finished(r: &Run) -> Vec<(String, String)> {
    r.events()
        .into_iter()
        .filter(|e| e["event"] == "project_finished")
        .map(|e| {
            (
                e["project"].as_str().unwrap_or("").to_string(),
                e["status"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

pub(crate) fn status_of(r: &Run, project: &str) -> String {
    finished(r)
        .into_iter()
        .find(|(p, _)| p == project)
        .map(|(_, s)| s)
        .unwrap_or_else(|| panic!("{project} did not finish: {r:?}"))
}

/// Each `(project, status)` of `want` is how that project finished in `run`.
pub(crate) fn assert_statuses(run: &Run, want: &[(&str, &str)]) {
    for (project, status) in want {
        assert_eq!(status_of(run, project), *status, "{project}: {run:?}");
    }
}

pub(crate) const ALL: [&str; 6] = [
    "local-pulumi/network",
    "local-pulumi/registry",
    "local-pulumi/cluster",
    "local-pulumi/ingress",
    "local-pulumi/logstore",
    "local-pulumi/app",
];

/// `strata ARGS` on the shipped `local-pulumi` profile's `dev` stack, events in JSON.
pub(crate) fn lp(r: &Real, args: &[&str]) -> Run {
    let mut all = args.to_vec();
    all.extend(["--output", "json"]);
    r.on("local-pulumi", &all)
}

pub(crate) fn up(r: &Real) -> Run {
    lp(r, &["up"])
}

/// Every text file under `.strata/` and the workspace's logs: none may hold a secret.
fn assert_no_clear_secret(r: &Real, secrets: &[&str], runs: &[&Run]) {
    for run in runs {
        for s in secrets {
            assert!(
                !run.all().contains(s),
                "secret {s:?} in strata's output: {run:?}"
            );
        }
    }
    for (path, bytes) in r.ws.files_under(".strata") {
        // Pulumi's own state (`.strata/backend/`) included: its secrets must be ciphertext.
        let p = path.display().to_string();
        let text = String::from_utf8_lossy(&bytes);
        for s in secrets {
            assert!(!text.contains(s), "secret {s:?} in clear in {p}");
        }
    }
    for (path, bytes) in r.ws.files_under("projects") {
        let text = String::from_utf8_lossy(&bytes);
        for s in secrets {
            assert!(
                !text.contains(s),
                "secret {s:?} in clear in {}",
                path.display()
            );
        }
    }
}

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
    assert!(kube.contains("current-context: dev-cluster"), "{kube}");

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

/// The change counts of strata's preview, per project, against `pulumi preview --json`.
fn preview_counts(run: &Run) -> Vec<(String, String, Value)> {
    run.events()
        .into_iter()
        .filter(|e| e["event"] == "project_finished")
        .map(|e| {
            (
                e["project"].as_str().unwrap().to_string(),
                e["status"].as_str().unwrap().to_string(),
                e["changes"].clone(),
            )
        })
        .collect()
}

fn pulumi_preview_summary(r: &Real, project: &str, config: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["preview", "--json", "--non-interactive"];
    args.extend(extra);
    let run = r.pulumi_with(project, config, &args);
    let doc: Value = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("preview --json of {project}: {e}: {run:?}"));
    doc["changeSummary"].clone()
}

#[test]
fn preview_counts_equal_the_real_previews_fresh_and_after_a_change() {
    let Some(r) = Real::with_local_pulumi("real_pulumi::preview_counts") else {
        return;
    };
    // A fresh environment: the first wave previews, what reads it is blocked.
    let fresh = lp(&r, &["preview"]);
    assert_eq!(fresh.code, 0, "{fresh:?}");
    let rows = preview_counts(&fresh);
    let row = |p: &str| {
        rows.iter()
            .find(|(q, _, _)| q == p)
            .unwrap_or_else(|| panic!("{p}: {fresh:?}"))
            .clone()
    };
    assert_eq!(row("local-pulumi/network").1, "succeeded", "{fresh:?}");
    assert_eq!(row("local-pulumi/network").2["create"], 2, "{fresh:?}");
    assert_eq!(row("local-pulumi/app").1, "blocked", "{fresh:?}");
    let shared = r.ws.path("config/pulumi/Pulumi.dev.yaml");
    assert_eq!(
        row("local-pulumi/network").2,
        pulumi_preview_summary(&r, "local-pulumi/network", &shared, &[]),
        "strata's counts are Pulumi's"
    );

    assert_eq!(r.on("local-pulumi", &["up"]).code, 0);
    // A program change: lp-logstore's command changes (an update of one resource).
    r.edit(
        "projects/local-pulumi/logstore/Pulumi.yaml",
        "logs of ",
        "log store of ",
    );
    r.take_calls();
    let changed = lp(&r, &["preview"]);
    assert_eq!(changed.code, 0, "{changed:?}");
    // Upstream outputs come from the file backend's checkpoints, the secret input
    // lp-ingress takes from lp-cluster decrypted there too: one `preview` per project,
    // nothing else.
    let calls = r.take_calls();
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("preview ")).count(),
        6,
        "{calls:#?}"
    );
    assert_eq!(calls.len(), 6, "{calls:#?}");
    let rows = preview_counts(&changed);
    for (project, status, counts) in &rows {
        assert_eq!(status, "succeeded", "{project}: {changed:?}");
        assert_counts_are_pulumis(&r, project, counts);
    }
    let logstore = rows
        .iter()
        .find(|(p, _, _)| p == "local-pulumi/logstore")
        .unwrap();
    assert_eq!(logstore.2["update"], 1, "{changed:?}");

    // --expect-no-changes: 4 with the change pending, 0 once it is applied.
    let strict = ["preview", "--expect-no-changes"];
    assert_eq!(lp(&r, &strict).code, 4);
    assert_eq!(r.on("local-pulumi", &["up"]).code, 0);
    let clean = lp(&r, &strict);
    assert_eq!(clean.code, 0, "{clean:?}");
}

/// strata's change counts of `project` are what the real CLI previews on the project's
/// own copy of the stack config, the one strata handed it.
fn assert_counts_are_pulumis(r: &Real, project: &str, counts: &Value) {
    let real = pulumi_preview_summary(r, project, &r.config_copy(project), &[]);
    assert_eq!(counts, &real, "{project}: strata's counts are Pulumi's");
}

/// Someone updates lp-network by hand, outside strata: `preview --refresh` of lp-cluster,
/// which reads it through a StackReference, shows the update that change brings, with
/// Pulumi's own counts.
#[test]
fn refresh_preview_sees_an_out_of_band_change() {
    let Some((r, _)) = Real::deployed("real_pulumi::refresh") else {
        return;
    };
    let cluster = ["preview", "--project", "local-pulumi/cluster", "--refresh"];
    let before = lp(&r, &cluster);
    assert_eq!(before.code, 0, "{before:?}");
    assert_eq!(
        preview_counts(&before)[0].2["update"],
        Value::Null,
        "{before:?}"
    );

    // The out-of-band change: a new CIDR, applied with the real CLI directly.
    let network = "local-pulumi/network";
    let copy = r.config_copy(network);
    let set = r.pulumi_with(network, &copy, &["config", "set", "cidr", "10.78.0.0/24"]);
    assert_eq!(set.code, 0, "{set:?}");
    let by_hand = ["up", "--yes", "--skip-preview", "--non-interactive"];
    let by_hand = r.pulumi_with(network, &copy, &by_hand);
    assert_eq!(by_hand.code, 0, "{by_hand:?}");

    let after = lp(&r, &cluster);
    assert_eq!(after.code, 0, "{after:?}");
    let rows = preview_counts(&after);
    assert_eq!(rows.len(), 1, "{after:?}");
    assert_eq!(rows[0].2["update"], 1, "{after:?}");
    let own = r.config_copy("local-pulumi/cluster");
    let real = pulumi_preview_summary(&r, "local-pulumi/cluster", &own, &["--refresh"]);
    assert_eq!(rows[0].2, real, "strata's counts are Pulumi's");
    let strict = [&cluster[..], &["--expect-no-changes"]].concat();
    assert_eq!(lp(&r, &strict).code, 4);
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

/// Each of `first` finished before the next one in `order` (the projects in the order
/// they finished), each of them there.
pub(crate) fn assert_in_order(order: &[String], first: &[&str]) {
    let at = |p: &str| {
        order
            .iter()
            .position(|q| q == p)
            .unwrap_or_else(|| panic!("{p} did not finish: {order:?}"))
    };
    for pair in first.windows(2) {
        assert!(at(pair[0]) < at(pair[1]), "{} first: {order:?}", pair[0]);
    }
}

/// A project whose second resource takes a while, with markers on disk that say how far
/// its creates got.
fn slow_project(r: &Real) {
    r.ws.profile(
        "slow",
        "description: one slow project\ninfra_type: test\ninfrastructure:\n  - path: slow\n",
    );
    r.ws.pulumi_project(
        "slow",
        "rp-slow",
        "resources:\n  a:\n    type: command:local:Command\n    properties:\n      create: touch \"$STRATA_ROOT/a-done\"\n  b:\n    type: command:local:Command\n    properties:\n      create: touch \"$STRATA_ROOT/b-started\"; sleep 6; touch \"$STRATA_ROOT/b-done\"\n    options:\n      dependsOn: [\"${a}\"]\noutputs:\n  done: ${b.id}\n",
    );
}

/// `up` of the slow project, started; returned once b's create runs.
fn slow_up_under_way(r: &Real) -> std::process::Child {
    slow_project(r);
    let child = r.ws.spawn(&["up", "--provider", "slow", "--stack", "dev"]);
    wait_for("b's create to start", || r.ws.exists("b-started"));
    child
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let t0 = std::time::Instant::now();
    while !ok() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "waited a minute for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn lock_files(r: &Real) -> Vec<PathBuf> {
    std::fs::read_dir(r.ws.path(".strata/backend/.pulumi/locks/organization/rp-slow/dev"))
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default()
}

/// The processes whose working folder is inside `root` (a test's workspace): Pulumi and
/// its plugins run in the project's folder.
fn processes_in(root: &Path) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let proc = entry.path();
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let in_root = std::fs::read_link(proc.join("cwd")).is_ok_and(|cwd| cwd.starts_with(root));
        if let (true, Ok(cmd)) = (in_root, std::fs::read_to_string(proc.join("cmdline"))) {
            found.push((pid, cmd.replace('\0', " ").trim().to_string()));
        }
    }
    found
}

/// A second Ctrl-C kills the update outright: Pulumi's plugins, each in a process group
/// of its own, are killed with it, not orphaned (they ran on, one pair per run).
#[test]
fn a_second_ctrl_c_leaves_no_plugin_running() {
    let Some(r) = Real::new("real_pulumi::second_ctrl_c") else {
        return;
    };
    let child = slow_up_under_way(&r);
    assert!(
        processes_in(&r.ws.root)
            .iter()
            .any(|(_, c)| c.contains("pulumi-resource-command")),
        "the provider runs: {:?}",
        processes_in(&r.ws.root)
    );
    for _ in 0..2 {
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let out = child.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    wait_for("the plugins to be gone", || {
        processes_in(&r.ws.root).is_empty()
    });
}

/// A Pulumi lock file on rp-slow's stack as the real file backend writes one, taken by
/// `pid` on this host's name.
fn write_slow_lock(r: &Real, file: &str, pid: u32) {
    let dir =
        r.ws.path(".strata/backend/.pulumi/locks/organization/rp-slow/dev");
    std::fs::create_dir_all(&dir).unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    std::fs::write(
        dir.join(file),
        format!(
            "{{\"pid\":{pid},\"username\":\"someone\",\"hostname\":\"{}\",\"timestamp\":\"2026-01-01T00:00:00Z\"}}",
            host.trim()
        ),
    )
    .unwrap();
}

/// `kill -9` of strata and of the Pulumi update it ran: the real file backend keeps the
/// update's lock file and a pending create in the checkpoint. `up --resume` clears the
/// lock (its process is gone from this host), and Pulumi finishes the update.
#[test]
fn kill_9_in_the_middle_of_a_real_update_then_resume_finishes_without_a_human() {
    let Some(r) = Real::new("real_pulumi::kill_9_resume") else {
        return;
    };
    let mut child = slow_up_under_way(&r);
    // Both at once, as a lost machine or the OOM killer would: strata, then every
    // process group it recorded for its children.
    let groups = r.ws.read(".strata/dev/lock.children");
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let last: Vec<(i32, String)> = groups
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .next_back()
        .expect("the children strata recorded");
    assert!(!last.is_empty(), "{groups}");
    for (pgid, _) in &last {
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    wait_for("the killed groups to be gone", || {
        last.iter().all(|(g, _)| unsafe { libc::kill(-g, 0) } != 0)
    });
    // Pulumi's plugins run in groups of their own: with strata and Pulumi killed, they
    // are orphans that nothing will stop, as after a lost machine's reboot they would
    // not exist. This test made them, so it ends them.
    for (pid, _) in processes_in(&r.ws.root) {
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    wait_for("the orphaned plugins to be gone", || {
        processes_in(&r.ws.root).is_empty()
    });
    assert!(!r.ws.exists("b-done"));
    assert_eq!(lock_files(&r).len(), 1, "Pulumi's lock is left behind");
    let checkpoint = r.ws.read(".strata/backend/.pulumi/stacks/rp-slow/dev.json");
    assert!(checkpoint.contains("pending_operations"), "{checkpoint}");

    let resumed = r.on("slow", &["up", "--resume"]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert!(resumed.all().contains("pulumi cancel"), "{resumed:?}");
    assert!(lock_files(&r).is_empty());
    assert!(r.ws.exists("b-done"), "the interrupted create ran again");
    let steady = r.on("slow", &["up"]);
    assert_eq!(steady.code, 0, "{steady:?}");
}

/// A lock whose process is alive is never cleared: the run fails and names the one
/// command that clears it.
#[test]
fn a_live_pulumi_lock_is_left_alone_and_the_command_to_clear_it_is_named() {
    let Some(r) = Real::new("real_pulumi::live_lock") else {
        return;
    };
    slow_project(&r);
    assert_eq!(r.on("slow", &["up"]).code, 0);
    let mut holder = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    write_slow_lock(&r, "0d1f2e3c-live.json", holder.id());
    let run = r.on("slow", &["up"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.all().contains("the stack is currently locked"),
        "{run:?}"
    );
    assert!(
        run.all().contains("pulumi cancel --yes --stack dev --cwd"),
        "{run:?}"
    );
    assert_eq!(lock_files(&r).len(), 1, "a live holder's lock is kept");
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

/// Ctrl-C during a real update: strata forwards one SIGINT to Pulumi's process group,
/// Pulumi cancels gracefully and saves its state, strata exits 130, and the stack is
/// left consistent: no lock, no pending operation. (The engine waits for the step in
/// flight, but a pulumi-go-provider provider, as pulumi-command is, aborts its command
/// when the engine cancels: that create fails and is not recorded, so the next `up`
/// creates it. The fake instead lets it complete.)
#[test]
fn ctrl_c_during_a_real_update_leaves_the_stack_consistent() {
    let Some(r) = Real::new("real_pulumi::ctrl_c") else {
        return;
    };
    let child = slow_up_under_way(&r);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert!(
        text.contains("^C received; cancelling"),
        "Pulumi got one SIGINT: {text}"
    );
    assert!(
        !text.contains("^C received; terminating"),
        "and only one: {text}"
    );
    let calls = r.take_calls();
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("up ")).count(),
        1,
        "{calls:#?}"
    );
    assert!(lock_files(&r).is_empty(), "no Pulumi lock left: {text}");
    let checkpoint = r.ws.read(".strata/backend/.pulumi/stacks/rp-slow/dev.json");
    let doc: Value = serde_json::from_str(&checkpoint).unwrap();
    let pending = &doc["checkpoint"]["latest"]["pending_operations"];
    assert!(
        pending.is_null() || pending.as_array().is_some_and(|a| a.is_empty()),
        "{pending}"
    );
    // a was saved; b, cancelled, is created by the next run, which then is steady.
    let again = r.on("slow", &["up", "--resume"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(r.ws.exists("b-done"), "{again:?}");
    let steady = r.on("slow", &["preview", "--expect-no-changes"]);
    assert_eq!(steady.code, 0, "{steady:?}");
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

// ---------------------------------------------------------------------------------
// Plan bundles (issue 24): `preview --save-plan`, then `up --plan`, with the real CLI
// ---------------------------------------------------------------------------------

/// A bundle is saved (one real update plan per Pulumi project, the manifest, the
/// summary), applied exactly (each `up` held to its plan, Pulumi's own preview first),
/// then refused as applied; a code change and a stack-config change refuse a later
/// bundle before anything runs, and an upstream whose outputs come out other than the
/// preview saw stops its dependents.
#[test]
fn a_plan_bundle_is_saved_applied_once_and_refused_when_anything_moved() {
    let Some((r, _)) = Real::deployed("a_plan_bundle_is_saved_applied_once") else {
        return;
    };
    // A change to review: the app's replicas.
    let app = "projects/local-pulumi/app/Pulumi.yaml";
    r.edit(app, "default: 1", "default: 2");
    r.take_calls();
    save_plan(&r, "bundle", &[]);
    assert_a_bundle_of_real_plans(&r, "bundle");
    let calls = r.take_calls();
    assert_eq!(
        calls
            .iter()
            .filter(|c| c.starts_with("preview ") && c.contains("--save-plan"))
            .count(),
        ALL.len(),
        "every preview saved its plan: {calls:#?}"
    );

    let applied = lp(&r, &["up", "--plan", "bundle"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    for p in ALL {
        assert_eq!(status_of(&applied, p), "succeeded", "{p}");
    }
    let calls = r.take_calls();
    let ups: Vec<&String> = calls.iter().filter(|c| c.starts_with("up ")).collect();
    assert_eq!(ups.len(), ALL.len(), "{calls:#?}");
    for c in &ups {
        assert!(
            c.contains("--plan ") && !c.contains("--skip-preview"),
            "held to its plan: {c}"
        );
    }
    let deployed = r.ws.read(".strata/dev/local-pulumi-env/app/app");
    assert!(
        deployed.contains(" x2 at "),
        "the reviewed change was applied: {deployed}"
    );

    let again = lp(&r, &["up", "--plan", "bundle"]);
    assert_eq!(again.code, 3, "{again:?}");
    assert!(again.all().contains("applied already"), "{again:?}");
    assert!(r.take_calls().is_empty(), "nothing ran");

    // A code change after the preview.
    let code = "local-pulumi/app: its code, inputs or secrets changed since the preview";
    refused_after_a_change(&r, "b-code", app, "\n# reviewed? no\n", &[code]);
    // A stack-config change after the preview.
    let config = "config/pulumi/Pulumi.dev.yaml";
    let why = [
        "stack config: ",
        "Pulumi.dev.yaml changed since the preview",
    ];
    refused_after_a_change(&r, "b-config", config, "  lp-app:extra: one more\n", &why);

    // A bundle of one project whose upstream (not in the bundle) hands it a secret
    // through `inputs:`: the upstream's outputs are read from its checkpoint, the secret
    // decrypted there (the passphrase provider), without a Pulumi process.
    save_plan(&r, "b-ingress", &["--project", "local-pulumi/ingress"]);
    r.take_calls();
    let applied = lp(&r, &["up", "--plan", "b-ingress"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    assert_eq!(status_of(&applied, "local-pulumi/ingress"), "succeeded");
    let calls = r.take_calls();
    assert_eq!(starting(&calls, "stack output"), 0, "{calls:#?}");

    // The network's outputs change in the bundle itself: what the cluster was previewed
    // with no longer holds, so the network is applied and the cluster stops there.
    let net = "projects/local-pulumi/network/Pulumi.yaml";
    r.edit(net, "10.77.0.0/24", "10.78.0.0/24");
    save_plan(&r, "b-upstream", &[]);
    r.take_calls();
    let stopped = lp(&r, &["up", "--plan", "b-upstream"]);
    assert_eq!(stopped.code, 1, "{stopped:?}");
    assert_statuses(
        &stopped,
        &[
            ("local-pulumi/network", "succeeded"),
            ("local-pulumi/cluster", "failed"),
            ("local-pulumi/ingress", "skipped"),
        ],
    );
    assert!(
        stopped
            .all()
            .contains("the outputs of local-pulumi/network changed since the preview"),
        "{stopped:?}"
    );
    let calls = r.take_calls();
    assert_eq!(
        starting(&calls, "up "),
        2,
        "network and registry only: {calls:#?}"
    );
    assert!(
        !r.ws.path("b-upstream/applied.json").exists(),
        "a bundle applied in part is not spent"
    );
}

/// How many of the logged `calls` are the Pulumi command `prefix`.
fn starting(calls: &[String], prefix: &str) -> usize {
    calls.iter().filter(|c| c.starts_with(prefix)).count()
}

/// `preview --save-plan BUNDLE` (with `extra`), which must succeed.
fn save_plan(r: &Real, bundle: &str, extra: &[&str]) {
    let saved = lp(r, &[&["preview", "--save-plan", bundle], extra].concat());
    assert_eq!(saved.code, 0, "{saved:?}");
}

/// The bundle in `dir` holds one real update plan per project, the app's upstream
/// outputs, a summary, and no secret in clear.
fn assert_a_bundle_of_real_plans(r: &Real, dir: &str) {
    let manifest: Value =
        serde_json::from_str(&r.ws.read(&format!("{dir}/manifest.json"))).expect("a manifest");
    for p in ALL {
        let step = &manifest["steps"][p];
        assert_eq!(step["status"], "succeeded", "{p}: {manifest:#}");
        let plan = step["plan"]
            .as_str()
            .unwrap_or_else(|| panic!("{p} has a plan"));
        let doc: Value = serde_json::from_str(&r.ws.read(&format!("{dir}/{plan}")))
            .unwrap_or_else(|e| panic!("{p}'s plan is Pulumi's JSON: {e}"));
        assert!(
            doc["resourcePlans"].is_object(),
            "a real update plan: {doc:#}"
        );
    }
    assert_eq!(
        manifest["steps"]["local-pulumi/app"]["upstream_outputs"]
            .as_object()
            .map(|m| m.len()),
        Some(3),
        "registry, ingress and logstore"
    );
    assert!(
        r.ws.read(&format!("{dir}/summary.md"))
            .contains("local-pulumi/app")
    );
    for (path, bytes) in r.ws.files_under(dir) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(REGISTRY_PASSWORD) && !text.contains(PASSPHRASE),
            "a secret in clear in {}",
            path.display()
        );
    }
}

/// A bundle saved as `bundle`, then `added` appended to the file `rel`: `up --plan`
/// refuses it (exit 3) saying each of `why`, and runs no update. The file is put back.
fn refused_after_a_change(r: &Real, bundle: &str, rel: &str, added: &str, why: &[&str]) {
    save_plan(r, bundle, &[]);
    let text = r.ws.read(rel);
    r.ws.write(rel, &format!("{text}{added}"));
    r.take_calls();
    let refused = lp(r, &["up", "--plan", bundle]);
    assert_eq!(refused.code, 3, "{refused:?}");
    for part in why {
        assert!(refused.all().contains(part), "{part}: {refused:?}");
    }
    assert_eq!(starting(&r.take_calls(), "up "), 0, "nothing ran");
    r.ws.write(rel, &text);
}

/// Projected previews (issue 24) on the real CLI: a fresh `local-pulumi`, with mocks for
/// lp-cluster's outputs and one more project, lp-edge, that takes lp-ingress's hostname
/// and lp-registry's URL. lp-ingress previews on the mocks; lp-edge on what the real
/// previews of lp-ingress (itself projected) and lp-registry already know, read from the
/// update plans they saved; what reads the backend through a StackReference stays
/// blocked. The counts are the real CLI's own preview on the same config.
#[test]
fn a_fresh_local_pulumi_preview_projects_downstream_rows_with_change_counts() {
    let Some(r) = Real::with_local_pulumi("real_pulumi::projected_preview") else {
        return;
    };
    let profile = r.ws.path("providers/local-pulumi.yaml");
    let text = std::fs::read_to_string(&profile).unwrap();
    let text = text.replace(
        "    needs: [local-pulumi/network]\n",
        "    needs: [local-pulumi/network]\n    mock_outputs:\n      lb_address: 10.77.0.1\n      admin_token: mock-token\n",
    ) + "  - path: local-pulumi/edge\n    description: Edge\n    needs: [local-pulumi/ingress, local-pulumi/registry]\n    inputs:\n      lp-edge:host: local-pulumi/ingress:hostname\n      lp-edge:image: local-pulumi/registry:registry_url\n";
    std::fs::write(&profile, text).unwrap();
    r.ws.pulumi_project(
        "local-pulumi/edge",
        "lp-edge",
        "config:\n  host:\n    type: string\n  image:\n    type: string\nresources:\n  edge:\n    type: command:local:Command\n    properties:\n      create: echo ${image} at ${host}\noutputs:\n  seen: ${host}\n",
    );
    let fresh = lp(&r, &["preview"]);
    assert_eq!(fresh.code, 0, "{fresh:?}");
    let rows: std::collections::BTreeMap<String, Value> = fresh
        .events()
        .into_iter()
        .filter(|e| e["event"] == "project_finished")
        .map(|e| (e["project"].as_str().unwrap().to_string(), e))
        .collect();
    let row = |p: &str| rows[&format!("local-pulumi/{p}")].clone();
    let msg = |p: &str| row(p)["message"].as_str().unwrap_or("").to_string();
    for p in ["network", "registry", "ingress", "edge"] {
        assert_eq!(row(p)["status"], "succeeded", "{p}: {fresh:?}");
    }
    for p in ["cluster", "logstore", "app"] {
        assert_eq!(row(p)["status"], "blocked", "{p}: {fresh:?}");
        assert!(
            msg(p).contains("through a StackReference"),
            "{p}: {}",
            msg(p)
        );
    }
    assert_eq!(
        msg("ingress"),
        "2 to create · projected: mocks: lp-ingress:admin_token (local-pulumi/cluster), lp-ingress:lb_address (local-pulumi/cluster)"
    );
    assert_eq!(
        msg("edge"),
        "2 to create · projected: lp-edge:host from local-pulumi/ingress's preview; lp-edge:image from local-pulumi/registry's preview"
    );
    // The counts are what the real CLI previews with the same (projected) config.
    for p in ["ingress", "edge"] {
        assert_counts_are_pulumis(&r, &format!("local-pulumi/{p}"), &row(p)["changes"]);
        assert_eq!(row(p)["changes"]["create"], 2, "{p}: {}", row(p));
    }
    let cfg = std::fs::read_to_string(r.config_copy("local-pulumi/edge")).unwrap();
    assert!(
        cfg.contains("app.dev.local") && cfg.contains("registry.local/dev"),
        "{cfg}"
    );
    // Nothing was deployed.
    assert!(!r.env_dir().exists(), "a preview created files");
}

/// The `TRACEPARENT` and `--otel-traces` strata hands the real CLI: Pulumi's own spans
/// (the CLI's, its engine's, its plugins') land in the run's trace, each one's parent
/// chain reaching the span of the project whose step ran it. (Pulumi 3.274.1 also sends
/// a few spans it starts with no parent, each its own trace: the engine's `Engine/Log`
/// server calls, a provider's handshake, schema and health checks, stack reference
/// reads; docs/research/pulumi-tracing.md.)
#[test]
fn pulumi_spans_nest_under_the_project_span_that_ran_them() {
    let Some(mut r) = Real::with_local_pulumi("real_pulumi::traces") else {
        return;
    };
    let otlp = crate::otlp::Receiver::start();
    r.ws.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp.endpoint());
    let run = up(&r);
    assert_eq!(run.code, 0, "{run:?}");
    let url = format!("--otel-traces={}/v1/traces", otlp.endpoint());
    let calls = r.take_calls();
    for c in calls.iter().filter(|c| c.contains("--stack")) {
        assert!(
            c.contains(&url),
            "a project's Pulumi call without {url}: {c}"
        );
    }
    // Pulumi sends its spans as it exits, strata at the end of its run: all are in.
    assert!(otlp.problems().is_empty(), "{:?}", otlp.problems());
    let spans = otlp.spans();
    let by_id: std::collections::BTreeMap<&str, &crate::otlp::Span> =
        spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let root = spans
        .iter()
        .find(|s| s.parent.is_empty() && s.service == "strata")
        .unwrap_or_else(|| panic!("no run span: {spans:#?}"));
    let projects = spans
        .iter()
        .filter(|s| s.service == "strata" && s.parent == root.span_id)
        .count();
    assert_eq!(projects, ALL.len(), "{spans:#?}");
    // Per project: the Pulumi spans under it, by name.
    let mut under = std::collections::BTreeMap::<String, Vec<String>>::new();
    for s in spans
        .iter()
        .filter(|s| s.service != "strata" && s.trace_id == root.trace_id)
    {
        let mut at = s;
        let mut hops = 0;
        while at.service != "strata" {
            at = by_id
                .get(at.parent.as_str())
                .unwrap_or_else(|| panic!("{s:#?}: the chain breaks at {at:#?}"));
            hops += 1;
            assert!(hops < 100, "a circle of parents at {s:#?}");
        }
        assert_eq!(
            at.parent, root.span_id,
            "{s:#?} reaches {at:#?}, not a project"
        );
        under
            .entry(at.name.clone())
            .or_default()
            .push(s.name.clone());
    }
    for p in ALL {
        let names = under.get(p).cloned().unwrap_or_default();
        // The CLI's root span, its engine's update, the program's resources, and the
        // provider's own spans (the command provider, through its gRPC server).
        for want in [
            "pulumi",
            "pulumi-plan",
            "pulumirpc.ResourceMonitor/RegisterResource",
            "pulumirpc.ResourceProvider/Create",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{p}: no {want} among {names:?}"
            );
        }
    }
    // Each CLI call's root span is a child of its project's span itself.
    for s in spans
        .iter()
        .filter(|s| s.name == "pulumi" && s.service == "pulumi-cli")
    {
        let parent = by_id[s.parent.as_str()];
        assert_eq!(
            (parent.service.as_str(), parent.parent.as_str()),
            ("strata", root.span_id.as_str())
        );
    }
    let text = format!("{spans:?}");
    // Neither strata's spans nor Pulumi's carry a secret or an output (the network's).
    assert!(!text.contains("10.77.0.0"), "an output in the trace");
    for secret in [REGISTRY_PASSWORD, PASSPHRASE, "store-passphrase-for-tests"] {
        assert!(!text.contains(secret), "{secret:?} in the trace");
    }
}
