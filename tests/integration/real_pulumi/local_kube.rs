//! The `local-kube` profile this repository ships (issue 33), run as a user runs it: the
//! real CLI, Pulumi's own Kubernetes provider, and a control plane (etcd, kube-apiserver,
//! kube-controller-manager) that the profile's own `cluster` project starts and stops.
//! Each test has its own workspace, so its own control plane: what a test asserts is
//! all its own. The cluster is checked from outside with `kubectl`, through the
//! kubeconfig that strata's hook merged.
//!
//! Needs the real Pulumi with the Kubernetes provider (scripts/install-pulumi.sh), the
//! control plane's binaries (scripts/install-kube.sh) and kubectl
//! (scripts/install-tools.sh); missing under `CI=true`, the test fails with the hint.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Real, assert_no_clear_secret, calls_for, preview_counts, status_of};
use crate::real_kube::b64;
use crate::support::Run;

/// The app's API key: strata's store → the Secret lk-app/strata-secrets → the app's
/// Deployment (`envFrom`). Never to be seen in clear outside the cluster.
const API_KEY: &str = "lk-api-KEY-5e1f90c3";
const INFRA: [&str; 2] = ["local-kube/cluster", "local-kube/registry"];
const KUBE: [&str; 4] = [
    "local-kube/namespaces",
    "local-kube/logstore",
    "local-kube/web",
    "local-kube/app",
];

/// A workspace with the shipped profile, and the control plane its cluster project
/// starts: stopped when the test ends, however it ends.
struct LocalKube {
    r: Real,
    kubectl: PathBuf,
}

impl Drop for LocalKube {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(self.r.ws.path("scripts/kube-test-cluster.sh"))
            .arg("stop")
            .arg(self.control_plane())
            .output();
    }
}

impl LocalKube {
    fn new(test: &str) -> Option<LocalKube> {
        let provider = super::kubernetes::provider_dir(test)?;
        let kube = crate::real_kube::real_bin_dir(test)?;
        let kubectl = crate::real_kube::kubectl()?;
        let mut r = Real::new(test)?;
        let provider = provider.join("pulumi-resource-kubernetes");
        std::os::unix::fs::symlink(provider, r.ws.bin.join("pulumi-resource-kubernetes")).unwrap();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
        for path in [
            "providers/local-kube.yaml",
            "projects/local-kube",
            "scripts/kube-test-cluster.sh",
            "scripts/lib/test-server.sh",
        ] {
            crate::support::copy_path(&repo.join(path), &r.ws.path(path));
        }
        // The user's temp folder, where Pulumi's Kubernetes provider writes the cluster's
        // kubeconfig on every start: checked for leftovers at the end.
        let tmp = r.ws.path("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        r.ws.set_env("TMPDIR", tmp.to_str().unwrap())
            .set_env("STRATA_KUBE_BIN_DIR", kube.to_str().unwrap())
            // The control plane outlives strata (it is the stack's cluster); a watchdog
            // stops it if this test binary dies before the guard runs.
            .set_env("STRATA_KUBE_WATCH_PID", &std::process::id().to_string());
        let lk = LocalKube { r, kubectl };
        let set = lk.secrets_set(API_KEY);
        assert_eq!(set.code, 0, "{set:?}");
        Some(lk)
    }

    /// [`LocalKube::new`], brought up by a first `up --yes` (which must succeed); that run.
    fn deployed(test: &str) -> Option<(LocalKube, Run)> {
        let lk = LocalKube::new(test)?;
        let first = lk.strata("up", &["--yes"]);
        assert_eq!(first.code, 0, "{first:?}");
        Some((lk, first))
    }

    /// `strata secrets set lk-app:api_key`, the value piped on stdin.
    fn secrets_set(&self, value: &str) -> Run {
        let args = ["secrets", "set", "lk-app:api_key", "--stack", "dev"];
        crate::support::strata_stdin(&self.r.ws, &args, value)
    }

    /// Where the cluster project keeps its control plane (under the user's state home).
    fn control_plane(&self) -> PathBuf {
        self.r
            .ws
            .path("home/.local/state/strata/local-kube/dev/cluster")
    }

    /// `strata COMMAND --provider local-kube --stack dev --output json ARGS…`.
    fn strata(&self, command: &str, args: &[&str]) -> Run {
        let mut all = vec![
            command,
            "--provider",
            "local-kube",
            "--stack",
            "dev",
            "--output",
            "json",
        ];
        all.extend_from_slice(args);
        self.r.strata(&all)
    }

    /// kubectl with the workspace's kubeconfig (the one strata's hook merged into).
    fn kubectl(&self, args: &[&str]) -> Run {
        crate::real_kube::kubectl_in(&self.kubectl, &self.r.ws, args)
    }

    /// An object as kubectl reads it, managed fields included; `None` when not found.
    fn get(&self, namespace: &str, what: &str) -> Option<Value> {
        // The context the hook merged, whatever the current one is.
        let mut args = vec!["--context", "dev-cluster", "get", what, "-o", "json"];
        args.push("--show-managed-fields");
        if !namespace.is_empty() {
            args.extend(["-n", namespace]);
        }
        let run = self.kubectl(&args);
        if run.code != 0 && run.stderr.contains("NotFound") {
            return None;
        }
        assert_eq!(run.code, 0, "kubectl get {what}: {run:?}");
        Some(serde_json::from_str(&run.stdout).unwrap())
    }

    fn must_get(&self, namespace: &str, what: &str) -> Value {
        self.get(namespace, what)
            .unwrap_or_else(|| panic!("no {what} in namespace {namespace:?}"))
    }

    /// The pids of the control plane, by name (`APISERVER`, `ETCD`,
    /// `CONTROLLER_MANAGER`), from the cluster.env its start wrote.
    fn control_plane_pids(&self) -> Vec<(String, i32)> {
        let env = std::fs::read_to_string(self.control_plane().join("cluster.env"))
            .expect("cluster.env of the control plane");
        env.lines()
            .filter_map(|l| l.split_once('='))
            .filter_map(|(k, v)| Some((k.strip_suffix("_PID")?.to_string(), v.parse().ok()?)))
            .collect()
    }
}

fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// The field managers of an object.
fn managers(object: &Value) -> Vec<String> {
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["manager"].as_str().map(str::to_string))
        .collect()
}

fn assert_managed_by_pulumi(object: &Value) {
    assert!(
        managers(object)
            .iter()
            .any(|m| m.starts_with("pulumi-kubernetes")),
        "not written by Pulumi's provider: {object}"
    );
}

/// Projects in the order their `project_finished` events came.
fn finish_order(run: &Run) -> Vec<String> {
    run.events()
        .into_iter()
        .filter(|e| e["event"] == "project_finished")
        .filter_map(|e| e["project"].as_str().map(str::to_string))
        .collect()
}

fn position(order: &[String], project: &str) -> usize {
    order
        .iter()
        .position(|p| p == project)
        .unwrap_or_else(|| panic!("{project} not in {order:?}"))
}

/// The change counts of a preview, per project, without the projects that change nothing.
fn changing(run: &Run) -> Vec<(String, Value)> {
    preview_counts(run)
        .into_iter()
        .filter(|(_, _, c)| {
            c.as_object()
                .is_some_and(|m| m.iter().any(|(k, v)| k != "same" && v != 0))
        })
        .map(|(p, _, c)| (p, c))
        .collect()
}

/// First `up`, steady `up`, a program change, drift, `@secrets` with another current
/// context, and `destroy`: each checked in the cluster with kubectl.
#[test]
fn local_kube_comes_up_stays_steady_follows_changes_and_goes_away() {
    let test = "real_pulumi::local_kube_lifecycle";
    let Some((lk, first)) = LocalKube::deployed(test) else {
        return;
    };
    for p in INFRA.iter().chain(&KUBE).chain(&["@secrets"]) {
        assert_eq!(status_of(&first, p), "succeeded", "{p}: {first:?}");
    }
    // The secrets step finished before the first Kubernetes project started.
    let events = first.events();
    let at = |event: &str, project: &str| {
        events
            .iter()
            .position(|e| e["event"] == event && e["project"] == project)
            .unwrap_or_else(|| panic!("no {event} of {project}: {first:?}"))
    };
    for p in KUBE {
        assert!(
            at("project_finished", "@secrets") < at("project_started", p),
            "{p}"
        );
    }
    let runs = vec![first];
    the_objects_are_as_declared(&lk);

    let runs = steady_state(&lk, runs);
    let runs = a_program_change_is_one_update(&lk, runs);
    let runs = drift_is_seen_by_a_refreshing_preview(&lk, runs);
    let runs = secrets_go_to_the_stacks_cluster_whatever_the_current_context(&lk, runs);
    let runs = destroy_goes_in_reverse_and_stops_the_control_plane(&lk, runs);

    let token = lk
        .kubectl(&[
            "config",
            "view",
            "--raw",
            "-o",
            "jsonpath={.users[0].user.token}",
        ])
        .stdout;
    let refs: Vec<&Run> = runs.iter().collect();
    let mut secrets = vec![API_KEY, "lk-api-KEY-rotated-77b2"];
    if !token.is_empty() {
        secrets.push(&token);
    }
    assert_no_clear_secret(&lk.r, &secrets, &refs);
    let left: Vec<String> =
        lk.r.ws
            .files_under("tmp")
            .into_iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
    assert_eq!(left, Vec::<String>::new(), "left in the user's TMPDIR");
    assert_eq!(
        super::kubernetes::providers_left(&lk.r),
        Vec::<String>::new(),
        "Pulumi plugins left running"
    );
}

/// Every object exists as the programs declare it, written by Pulumi's provider (the
/// Helm release's by Helm, under the provider); the secrets step's Secret is there.
fn the_objects_are_as_declared(lk: &LocalKube) {
    for ns in ["lk-web", "lk-logs"] {
        let n = lk.must_get("", &format!("namespace/{ns}"));
        assert_eq!(n["status"]["phase"], "Active", "{n}");
        assert_eq!(
            n["metadata"]["labels"]["app.kubernetes.io/part-of"],
            "local-kube"
        );
        assert_managed_by_pulumi(&n);
    }
    let settings = lk.must_get("lk-logs", "configmap/logstore-settings");
    assert_eq!(settings["data"]["retention_days"], "7", "{settings}");
    assert_managed_by_pulumi(&settings);
    let logstore = lk.must_get("lk-logs", "deployment/logstore");
    assert_eq!(
        logstore["metadata"]["annotations"]["pulumi.com/skipAwait"],
        "true"
    );
    assert_managed_by_pulumi(&logstore);
    // The controller manager's deployment controller made its ReplicaSet; no kubelet runs,
    // so nothing is ready.
    assert_eq!(
        logstore["status"]["readyReplicas"],
        Value::Null,
        "{logstore}"
    );
    assert_managed_by_pulumi(&lk.must_get("lk-logs", "service/logstore"));

    // The Helm release of the chart kept in the repo.
    let web = lk.must_get("lk-web", "deployment/web");
    assert_eq!(
        web["metadata"]["annotations"]["meta.helm.sh/release-name"],
        "web"
    );
    let content = lk.must_get("lk-web", "configmap/web-content");
    assert_eq!(
        content["data"]["index.html"],
        "hello from the local-kube web front"
    );
    lk.must_get("lk-web", "secret/sh.helm.release.v1.web.v1");

    let app = lk.must_get("lk-app", "configmap/app-settings");
    assert_eq!(app["data"]["GREETING"], "hello from the local-kube app");
    assert_eq!(
        app["data"]["LOG_ENDPOINT"],
        "http://logstore.lk-logs.svc:9200"
    );
    assert_eq!(app["data"]["WEB_URL"], "http://web.lk-web.svc");
    let deployment = lk.must_get("lk-app", "deployment/app");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.local-kube.test/dev:1.0");
    assert_eq!(
        container["envFrom"][1]["secretRef"]["name"], "strata-secrets",
        "{deployment}"
    );
    let secret = lk.must_get("lk-app", "secret/strata-secrets");
    assert_eq!(managers(&secret), ["strata"], "{secret}");
    assert_eq!(secret["data"]["api_key"], b64(API_KEY));
}

/// A steady `up`: one Pulumi process per project, nothing written; then a preview that
/// expects no changes passes.
fn steady_state(lk: &LocalKube, mut runs: Vec<Run>) -> Vec<Run> {
    let before = lk.must_get("lk-app", "configmap/app-settings");
    lk.r.take_calls();
    let steady = lk.strata("up", &["--yes"]);
    assert_eq!(steady.code, 0, "{steady:?}");
    let calls = lk.r.take_calls();
    for p in INFRA.iter().chain(&KUBE) {
        assert_eq!(calls_for(&calls, p), 1, "{p}: Pulumi processes: {calls:#?}");
    }
    let after = lk.must_get("lk-app", "configmap/app-settings");
    assert_eq!(
        before["metadata"]["resourceVersion"], after["metadata"]["resourceVersion"],
        "the steady up rewrote app-settings"
    );
    let quiet = lk.strata("preview", &["--expect-no-changes"]);
    assert_eq!(quiet.code, 0, "{quiet:?}");
    runs.extend([steady, quiet]);
    runs
}

/// A ConfigMap's data changed in the program: the preview counts one update, in that
/// project only; `up` applies it in place.
fn a_program_change_is_one_update(lk: &LocalKube, mut runs: Vec<Run>) -> Vec<Run> {
    let program = lk.r.ws.path("projects/local-kube/app/Pulumi.yaml");
    let text = std::fs::read_to_string(&program).unwrap();
    let changed = text.replace(
        "GREETING: hello from the local-kube app",
        "GREETING: hello after a change",
    );
    assert_ne!(text, changed, "the fixture's greeting moved");
    std::fs::write(&program, changed).unwrap();
    let preview = lk.strata("preview", &[]);
    assert_eq!(preview.code, 0, "{preview:?}");
    let changes = changing(&preview);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].0, "local-kube/app");
    assert_eq!(changes[0].1["update"], 1, "{changes:?}");
    let up = lk.strata("up", &["--yes"]);
    assert_eq!(up.code, 0, "{up:?}");
    let app = lk.must_get("lk-app", "configmap/app-settings");
    assert_eq!(app["data"]["GREETING"], "hello after a change", "{app}");
    runs.extend([preview, up]);
    runs
}

/// Someone edits a Pulumi-owned field with kubectl (another field manager): a plain
/// preview does not see it, a refreshing one counts one update in that project only,
/// and `refresh` then `up` takes the field back.
fn drift_is_seen_by_a_refreshing_preview(lk: &LocalKube, mut runs: Vec<Run>) -> Vec<Run> {
    let patch = lk.kubectl(&[
        "-n",
        "lk-logs",
        "patch",
        "configmap",
        "logstore-settings",
        "--field-manager",
        "someone-else",
        "-p",
        r#"{"data":{"shards":"3"}}"#,
    ]);
    assert_eq!(patch.code, 0, "{patch:?}");
    let plain = lk.strata("preview", &[]);
    assert_eq!(changing(&plain), Vec::new(), "{plain:?}");
    let refreshed = lk.strata("preview", &["--refresh"]);
    assert_eq!(refreshed.code, 0, "{refreshed:?}");
    let changes = changing(&refreshed);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(changes[0].0, "local-kube/logstore");
    assert_eq!(changes[0].1["update"], 1, "{changes:?}");
    let refresh = lk.strata("refresh", &[]);
    assert_eq!(refresh.code, 0, "{refresh:?}");
    let up = lk.strata("up", &["--yes"]);
    assert_eq!(up.code, 0, "{up:?}");
    let settings = lk.must_get("lk-logs", "configmap/logstore-settings");
    assert_eq!(settings["data"]["shards"], "1", "{settings}");
    runs.extend([plain, refreshed, refresh, up]);
    runs
}

/// With the user's current context switched to another cluster, a rotated secret is
/// written by `up --filter @secrets` into this stack's cluster only.
fn secrets_go_to_the_stacks_cluster_whatever_the_current_context(
    lk: &LocalKube,
    mut runs: Vec<Run>,
) -> Vec<Run> {
    for args in [
        &[
            "config",
            "set-cluster",
            "elsewhere",
            "--server",
            "https://127.0.0.1:9",
        ][..],
        &[
            "config",
            "set-context",
            "elsewhere",
            "--cluster",
            "elsewhere",
        ],
        &["config", "use-context", "elsewhere"],
    ] {
        let r = lk.kubectl(args);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let rotated = "lk-api-KEY-rotated-77b2";
    let set = lk.secrets_set(rotated);
    assert_eq!(set.code, 0, "{set:?}");
    let up = lk.strata("up", &["--yes", "--filter", "@secrets"]);
    assert_eq!(up.code, 0, "{up:?}");
    assert_eq!(status_of(&up, "@secrets"), "succeeded", "{up:?}");
    let current = lk.kubectl(&["config", "current-context"]);
    assert_eq!(
        current.stdout.trim(),
        "elsewhere",
        "strata moved the current context"
    );
    let secret = lk.must_get("lk-app", "secret/strata-secrets");
    assert_eq!(secret["data"]["api_key"], b64(rotated), "{up:?}");
    let back = lk.kubectl(&["config", "use-context", "dev-cluster"]);
    assert_eq!(back.code, 0, "{back:?}");
    runs.extend([set, up]);
    runs
}

/// `destroy` of all that needs the cluster: the Kubernetes stage in reverse, every
/// object gone (the namespace controller emptied and removed the namespaces), the
/// cluster still up; then `destroy` of the rest stops the control plane.
fn destroy_goes_in_reverse_and_stops_the_control_plane(
    lk: &LocalKube,
    mut runs: Vec<Run>,
) -> Vec<Run> {
    let pids: Vec<i32> = lk
        .control_plane_pids()
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    assert_eq!(
        pids.len(),
        3,
        "etcd, kube-apiserver, kube-controller-manager"
    );
    let kube = lk.strata("destroy", &["--yes", "--filter", "...^local-kube/cluster"]);
    assert_eq!(kube.code, 0, "{kube:?}");
    let order = finish_order(&kube);
    let at = |p: &str| position(&order, p);
    assert!(
        at("local-kube/app") < at("local-kube/logstore"),
        "{order:?}"
    );
    assert!(at("local-kube/app") < at("local-kube/web"), "{order:?}");
    assert!(
        at("local-kube/web") < at("local-kube/namespaces"),
        "{order:?}"
    );
    assert!(
        at("local-kube/logstore") < at("local-kube/namespaces"),
        "{order:?}"
    );
    assert!(
        !order.iter().any(|p| INFRA.contains(&p.as_str())),
        "{order:?}"
    );
    for (ns, what) in [
        ("", "namespace/lk-web"),
        ("", "namespace/lk-logs"),
        ("lk-app", "deployment/app"),
        ("lk-app", "configmap/app-settings"),
        ("lk-app", "service/app"),
    ] {
        assert_eq!(lk.get(ns, what), None, "{what} is left: {kube:?}");
    }
    assert!(
        pids.iter().all(|p| alive(*p)),
        "the cluster stopped too early"
    );

    let rest = lk.strata("destroy", &["--yes"]);
    assert_eq!(rest.code, 0, "{rest:?}");
    for p in INFRA {
        assert_eq!(status_of(&rest, p), "succeeded", "{p}: {rest:?}");
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    let left: Vec<i32> = pids.into_iter().filter(|p| alive(*p)).collect();
    assert_eq!(left, Vec::<i32>::new(), "control plane still running");
    assert!(
        !lk.control_plane().exists(),
        "the control plane's files are left"
    );
    runs.extend([kube, rest]);
    runs
}

/// The control plane's pid of `name` (`APISERVER`, `ETCD`, `CONTROLLER_MANAGER`).
fn pid_of(lk: &LocalKube, name: &str) -> i32 {
    lk.control_plane_pids()
        .into_iter()
        .find_map(|(n, p)| (n == name).then_some(p))
        .unwrap_or_else(|| panic!("no {name}_PID in cluster.env"))
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) of a process this test's control plane started.
    assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill {pid} {sig}");
}

/// The cluster gone. Hung first (its API server stopped with SIGSTOP: connections are
/// taken, never answered): Ctrl-C ends a refreshing preview that waits on it. Then
/// stopped for good: `up` fails at the secrets step in words and runs no Kubernetes
/// project; a refreshing preview and a change of a Kubernetes project fail naming the
/// project and the unreachable cluster.
#[test]
fn a_cluster_that_is_gone_fails_in_words_and_a_hung_one_answers_ctrl_c() {
    let test = "real_pulumi::local_kube_cluster_gone";
    let Some((lk, first)) = LocalKube::deployed(test) else {
        return;
    };
    let apiserver = pid_of(&lk, "APISERVER");

    signal(apiserver, libc::SIGSTOP);
    lk.r.take_calls();
    let child = lk.r.ws.spawn(&[
        "preview",
        "--provider",
        "local-kube",
        "--stack",
        "dev",
        "--refresh",
        "--filter",
        "local-kube/namespaces",
    ]);
    super::wait_for("the refreshing preview to start", || {
        std::fs::read_to_string(lk.r.ws.path("pulumi-calls.log"))
            .is_ok_and(|c| c.contains("preview"))
    });
    std::thread::sleep(Duration::from_secs(3));
    signal(child.id() as i32, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(130), "{text}");

    signal(apiserver, libc::SIGCONT);
    signal(apiserver, libc::SIGKILL);
    let up = lk.strata("up", &["--yes"]);
    assert_ne!(up.code, 0, "{up:?}");
    assert_eq!(status_of(&up, "@secrets"), "failed", "{up:?}");
    assert!(
        up.all().contains("check that the cluster is reachable"),
        "{up:?}"
    );
    for p in KUBE {
        assert_eq!(status_of(&up, p), "skipped", "{p}: {up:?}");
    }

    let refresh = lk.strata(
        "preview",
        &["--refresh", "--filter", "local-kube/namespaces"],
    );
    assert_ne!(refresh.code, 0, "{refresh:?}");
    assert!(
        refresh.all().contains("local-kube/namespaces failed")
            && refresh.all().contains("due to unreachable cluster"),
        "{refresh:?}"
    );

    let program = lk.r.ws.path("projects/local-kube/app/Pulumi.yaml");
    let text = std::fs::read_to_string(&program).unwrap();
    std::fs::write(
        &program,
        text.replace("hello from", "hello, while gone, from"),
    )
    .unwrap();
    let change = lk.strata("up", &["--yes", "--filter", "local-kube/app"]);
    assert_ne!(change.code, 0, "{change:?}");
    assert!(
        change.all().contains("local-kube/app failed")
            && change.all().contains("cluster is unreachable"),
        "{change:?}"
    );
    assert_no_clear_secret(&lk.r, &[API_KEY], &[&first, &up, &refresh, &change]);
}
