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

/// Issue 42: a repository's own backends, stack configs and secrets, as Pulumi runs them.
mod adopt;
/// Issue 32 with the real CLI: backend layouts, checkpoint forms, foreign locks.
mod backend;
/// Plan bundles saved by `preview --save-plan` and applied by `up --plan`.
mod bundles;
/// `strata exec`: the environment a command gets reaches each project's real stack.
mod exec;
/// Issue 35: policy rules on the real preview and the real update plan.
pub(crate) mod gates;
/// Ctrl-C, `kill -9` and live locks in the middle of a real update.
mod interrupts;
/// Issue 33: Pulumi's own Kubernetes provider on the throwaway control plane.
mod kubernetes;
/// The shipped `local-pulumi` profile's runs, from the first `up` to `destroy`.
mod lifecycle;
/// Issue 33: the shipped `local-kube` profile, whose cluster project starts its own.
mod local_kube;
/// Issue 35: orphans destroyed by the real CLI from the last revision that had them.
mod orphans;
/// strata's previews against the real CLI's own.
mod previews;
/// Issue 45: `up` asks like `pulumi up`; fresh bundles wave by wave; output contracts.
mod reviews;
/// Pulumi's spans in the run's trace.
mod traces;

const HINT: &str = "build it with `scripts/install-pulumi.sh` (Go 1.26+ and the Go module proxy), or set STRATA_PULUMI_BIN_DIR to a folder holding pulumi, pulumi-language-yaml and pulumi-resource-command";
const BINARIES: [&str; 3] = ["pulumi", "pulumi-language-yaml", "pulumi-resource-command"];
/// The registry password the store hands lp-registry; never to be seen in clear.
const REGISTRY_PASSWORD: &str = "reg-Pa55-9f1c2e77";

/// The folder holding the real binaries, or `None` (skipped) outside CI.
pub(crate) fn real_bin_dir(test: &str) -> Option<PathBuf> {
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
        let mut c = self.cli_in(project, args);
        c.env(
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

    /// The real CLI with `args` in `projects/<project>`, as a user starts it there: a
    /// clean environment with the workspace's PATH and HOME (the caller adds the rest).
    fn cli_in(&self, project: &str, args: &[&str]) -> std::process::Command {
        let mut c = std::process::Command::new(self.ws.bin.join("pulumi"));
        c.args(args)
            .current_dir(self.ws.path(&format!("projects/{project}")))
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", self.ws.bin.display()),
            )
            .env("HOME", self.ws.path("home"));
        c
    }

    /// `pulumi ARGS --stack dev --config-file CONFIG` in a project folder (see `pulumi`).
    pub(crate) fn pulumi_with(&self, project: &str, config: &Path, args: &[&str]) -> Run {
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

    /// The one `pulumi destroy` among the calls [`Real::take_calls`] takes (asserting it
    /// is the only one), and all those calls for a message.
    #[track_caller]
    pub(crate) fn take_the_one_destroy(&self) -> (String, Vec<String>) {
        let calls = self.take_calls();
        let destroys: Vec<&String> = calls.iter().filter(|c| c.starts_with("destroy")).collect();
        assert_eq!(destroys.len(), 1, "{calls:?}");
        (destroys[0].clone(), calls)
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
