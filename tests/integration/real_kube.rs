//! The real-Kubernetes tier: the `@secrets` step and the kubeconfig paths against a real
//! `kube-apiserver` (with etcd), built by `scripts/install-kube.sh` and started on
//! loopback by `scripts/kube-test-cluster.sh`: TLS with a generated CA, RBAC, static
//! tokens for `admin` (system:masters), `writer` (Secrets in namespace `team` only) and
//! `reader` (nothing). The infrastructure stage is a command project that outputs a
//! kubeconfig of that cluster, so the only real thing is the API server.
//!
//! The binaries are found in `STRATA_KUBE_BIN_DIR`, else in the folder the install script
//! points `~/.cache/strata/kube/current` at. Missing under `CI=true`: the test fails with
//! the install hint; elsewhere it is skipped, saying so.
//!
//! One control plane is shared by the tests that run at the same time (each uses its own
//! Secret name and namespaces); the last one to finish stops it (a Drop guard, also on a
//! panic), and a watchdog stops it if the test binary dies first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex, Weak};

use serde_json::{Value, json};

use crate::support::{HEAD, Run, Ws, find_tool, missing, strata_stdin};
use service::{Kind, Service};

/// A server a test script starts, shared by the tests running at the same time; also the
/// object-store tier's.
pub(crate) mod service;

const ADMIN: &str = "adm1n-REAL-VALUE-6d2f";
const DB: &str = "db-REAL-VALUE-91ab";
const API: &str = "api-REAL-VALUE-c07e";

const CONTROL_PLANE: Kind = Kind {
    what: "the real Kubernetes API server",
    script: "kube-test-cluster.sh",
    env_file: "cluster.env",
    name: "kube",
    bin_var: "STRATA_KUBE_BIN_DIR",
    binaries: &["kube-apiserver", "kube-controller-manager", "etcd"],
    hint: "build them with `scripts/install-kube.sh` (Go 1.24+ and the Go module proxy), or set STRATA_KUBE_BIN_DIR to a folder holding kube-apiserver, kube-controller-manager and etcd",
};

/// The folder holding the real binaries, or `None` (skipped) outside CI.
pub(crate) fn real_bin_dir(test: &str) -> Option<PathBuf> {
    service::real_bin_dir(&CONTROL_PLANE, test)
}

pub(crate) fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scripts")
        .join(name)
}

/// A running control plane (scripts/kube-test-cluster.sh); stopped when dropped.
pub(crate) struct Cluster(Service);

impl Cluster {
    pub(crate) fn var(&self, key: &str) -> &str {
        self.0.var(key)
    }

    /// The kubeconfig of `user` (admin, writer, reader), as text.
    pub(crate) fn kubeconfig(&self, user: &str) -> String {
        std::fs::read_to_string(self.0.dir().join(format!("{user}.kubeconfig")))
            .expect("kubeconfig")
    }

    /// A request to the API server as `user`; the status code and the JSON body.
    pub(crate) fn request(
        &self,
        user: &str,
        method: &str,
        path: &str,
        body: Option<(&str, &Value)>,
    ) -> (u16, Value) {
        let token = self.var(&format!("{}_TOKEN", user.to_uppercase()));
        let mut c = Command::new("curl");
        c.args(["-sS", "--max-time", "30", "--cacert", self.var("CA_FILE")])
            .args(["-H", &format!("Authorization: Bearer {token}")])
            .args(["-X", method, "-w", "\n%{http_code}"]);
        if let Some((content_type, body)) = body {
            c.args(["-H", &format!("Content-Type: {content_type}")])
                .args(["--data-binary", &body.to_string()]);
        }
        let out = c
            .arg(format!("{}{path}", self.var("SERVER")))
            .output()
            .expect("curl");
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
        (
            code.trim().parse().unwrap_or(0),
            serde_json::from_str(body).unwrap_or(Value::Null),
        )
    }

    /// The Secret as the admin reads it, if it exists.
    fn secret(&self, namespace: &str, name: &str) -> Option<Value> {
        let (code, body) = self.request(
            "admin",
            "GET",
            &format!("/api/v1/namespaces/{namespace}/secrets/{name}"),
            None,
        );
        match code {
            200 => Some(body),
            404 => None,
            _ => panic!("GET secret {namespace}/{name}: {code} {body}"),
        }
    }

    /// The Secret's data, decoded.
    fn secret_data(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, String>> {
        let secret = self.secret(namespace, name)?;
        Some(
            secret["data"]
                .as_object()
                .cloned()
                .unwrap_or_default()
                .iter()
                .map(|(k, v)| {
                    use base64::Engine;
                    let bytes = base64::engine::general_purpose::STANDARD
                        .decode(v.as_str().unwrap_or_default())
                        .expect("base64");
                    (k.clone(), String::from_utf8(bytes).expect("utf8"))
                })
                .collect(),
        )
    }

    fn namespaces(&self) -> Vec<String> {
        let (code, body) = self.request("admin", "GET", "/api/v1/namespaces", None);
        assert_eq!(code, 200, "{body}");
        body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["metadata"]["name"].as_str().unwrap().to_string())
            .collect()
    }
}

/// The control plane, shared by the tests running now; `None` when skipped.
pub(crate) fn cluster(test: &str) -> Option<Arc<Cluster>> {
    static SHARED: Mutex<Weak<Cluster>> = Mutex::new(Weak::new());
    let bin = real_bin_dir(test)?;
    Some(service::shared(&SHARED, || {
        Cluster(Service::start(&CONTROL_PLANE, &bin))
    }))
}

/// A workspace whose infrastructure project outputs `kubeconfig` (merged by the hook as
/// context `context`), with a profile-level secret `<ns>:adminpass` and a kubernetes
/// project declaring `<ns>:db-password` and, with `api_key`, `<ns>:api-key`.
fn workspace(kubeconfig: &str, context: &str, secret_name: &str, ns: &str, api_key: bool) -> Ws {
    let mut ws = Ws::new();
    ws.profile("lab", &profile(context, secret_name, ns, api_key));
    ws.write(
        "projects/infra/cluster/outputs.json",
        &json!({ "kubeconfig": kubeconfig }).to_string(),
    );
    ws.command_project(
        "infra/cluster",
        "echo infra up; cat outputs.json > \"$STRATA_OUTPUTS_FILE\"",
        "echo infra down",
    );
    ws.command_project(
        "k8s/app",
        "echo \"app sees db=$STRATA_SECRET_TEAM_DB_PASSWORD\"",
        "echo app down",
    );
    ws.env_file("PULUMI_STACK=dev\n");
    ws.set_env("STRATA_PASSPHRASE", "store-passphrase-for-tests")
        .set_env("STRATA_PROVIDER", "lab");
    let up = ns.to_uppercase().replace('-', "_");
    ws.set_env(&format!("STRATA_SECRET_{up}_ADMINPASS"), ADMIN)
        .set_env(&format!("STRATA_SECRET_{up}_DB_PASSWORD"), DB)
        .set_env(&format!("STRATA_SECRET_{up}_API_KEY"), API);
    ws
}

/// The shared control plane, and a [`workspace`] on it as `user` (context `lab-USER`);
/// `None` when skipped.
fn lab(test: &str, user: &str, name: &str, ns: &str, api_key: bool) -> Option<(Arc<Cluster>, Ws)> {
    let k = cluster(test)?;
    let ws = workspace(
        &k.kubeconfig(user),
        &format!("lab-{user}"),
        name,
        ns,
        api_key,
    );
    Some((k, ws))
}

fn profile(context: &str, secret_name: &str, ns: &str, api_key: bool) -> String {
    let mut y = format!(
        "{HEAD}secret_name: {secret_name}\n\
         secrets:\n  - key: {ns}:adminpass\n    prompt: Admin password\n\
         infrastructure:\n  - path: infra/cluster\n    on_success:\n      - kubeconfig: {{ output: kubeconfig, name: {context} }}\n\
         kubernetes:\n  - path: k8s/app\n    secrets:\n      - key: {ns}:db-password\n        prompt: Database password\n"
    );
    if api_key {
        y.push_str(&format!(
            "      - key: {ns}:api-key\n        prompt: API key\n"
        ));
    }
    y
}

pub(crate) fn b64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// No value (nor its base64) in what strata printed, nor in any file of the workspace
/// but the encrypted store.
fn assert_no_value_leaked(ws: &Ws, runs: &[&Run], values: &[&str]) {
    for r in runs {
        for v in values {
            assert!(!r.all().contains(v) && !r.all().contains(&b64(v)), "{r:?}");
        }
    }
    for (path, bytes) in ws.files_under("") {
        let rel = path.strip_prefix(&ws.root).unwrap().display().to_string();
        if rel.starts_with("bin/") || rel.starts_with("config/secrets/") {
            continue;
        }
        let text = String::from_utf8_lossy(&bytes);
        for v in values {
            assert!(
                !text.contains(v) && !text.contains(&b64(v)),
                "{rel} holds a value"
            );
        }
    }
}

fn secrets_line(r: &Run) -> String {
    r.stdout
        .lines()
        .find(|l| l.starts_with("[@secrets] succeeded") || l.starts_with("[@secrets] failed"))
        .unwrap_or_else(|| panic!("no @secrets line: {r:?}"))
        .to_string()
}

fn managers(secret: &Value) -> Vec<(String, String)> {
    secret["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            (
                m["manager"].as_str().unwrap_or_default().to_string(),
                m["operation"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------

/// As `writer` (Secrets in `team` only, no permission on Namespaces): the Secret is
/// created, left alone when nothing changed, updated when a value changes, and loses a
/// key dropped from the profile; `managedFields` name `strata`; no value anywhere.
#[test]
fn secrets_step_creates_updates_and_prunes_a_real_secret() {
    let test = "secrets_step_creates_updates_and_prunes_a_real_secret";
    let name = "life-cycle";
    let Some((k, ws)) = lab(test, "writer", name, "team", true) else {
        return;
    };

    let first = ws.strata(&["up"]);
    assert_eq!(first.code, 0, "{first:?}");
    assert_eq!(
        k.secret_data("team", name).unwrap(),
        BTreeMap::from([
            ("adminpass".to_string(), ADMIN.to_string()),
            ("api-key".to_string(), API.to_string()),
            ("db-password".to_string(), DB.to_string()),
        ])
    );
    let secret = k.secret("team", name).unwrap();
    assert_eq!(
        managers(&secret),
        [("strata".to_string(), "Apply".to_string())],
        "{secret}"
    );
    assert_eq!(secret["type"], json!("Opaque"));
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        json!("strata")
    );
    let version = secret["metadata"]["resourceVersion"].clone();

    // Nothing changed: the real server keeps the resourceVersion of a no-op apply.
    let second = ws.strata(&["up"]);
    assert_eq!(second.code, 0, "{second:?}");
    assert!(secrets_line(&second).contains("unchanged"), "{second:?}");
    let secret = k.secret("team", name).unwrap();
    assert_eq!(secret["metadata"]["resourceVersion"], version);

    // A value changes in the store: the Secret follows.
    let set = strata_stdin(
        &ws,
        &["secrets", "set", "team:db-password"],
        "db-NEW-VALUE-42\n",
    );
    assert_eq!(set.code, 0, "{set:?}");
    let third = ws.strata(&["up"]);
    assert_eq!(third.code, 0, "{third:?}");
    assert!(secrets_line(&third).contains("applied"), "{third:?}");
    assert_eq!(
        k.secret_data("team", name).unwrap()["db-password"],
        "db-NEW-VALUE-42"
    );
    assert_ne!(
        k.secret("team", name).unwrap()["metadata"]["resourceVersion"],
        version
    );

    // A key dropped from the profile is dropped from the Secret.
    ws.profile("lab", &profile("lab-writer", name, "team", false));
    let fourth = ws.strata(&["up"]);
    assert_eq!(fourth.code, 0, "{fourth:?}");
    let data = k.secret_data("team", name).unwrap();
    assert_eq!(
        data.keys().collect::<Vec<_>>(),
        ["adminpass", "db-password"],
        "{data:?}"
    );
    let secret = k.secret("team", name).unwrap();
    assert_eq!(
        managers(&secret),
        [("strata".to_string(), "Apply".to_string())]
    );

    let json_run = ws.strata(&["--output", "json", "up"]);
    assert_eq!(json_run.code, 0, "{json_run:?}");
    assert_no_value_leaked(
        &ws,
        &[&first, &second, &set, &third, &fourth, &json_run],
        &[ADMIN, DB, API, "db-NEW-VALUE-42"],
    );
}

/// A field of the Secret another manager set to another value: strata's apply fails
/// naming that manager and the field, changes nothing, and takes the field over only
/// with `up --force-conflicts`.
#[test]
fn a_field_owned_by_another_manager_is_a_conflict_in_words() {
    let test = "a_field_owned_by_another_manager_is_a_conflict_in_words";
    let name = "conflicted";
    let Some((k, ws)) = lab(test, "writer", name, "team", false) else {
        return;
    };
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    // Someone edits the value by hand (an update by field manager `ops-console`).
    let (code, body) = k.request(
        "admin",
        "PATCH",
        &format!("/api/v1/namespaces/team/secrets/{name}?fieldManager=ops-console"),
        Some((
            "application/merge-patch+json",
            &json!({"data": {"adminpass": b64("edited-by-hand")}}),
        )),
    );
    assert_eq!(code, 200, "{body}");

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    let all = r.all();
    assert!(
        all.contains("ops-console"),
        "names the other manager: {r:?}"
    );
    assert!(all.contains(".data.adminpass"), "names the field: {r:?}");
    assert!(all.contains("--force-conflicts"), "{r:?}");
    assert!(
        !all.contains(ADMIN) && !all.contains("edited-by-hand"),
        "{r:?}"
    );
    assert_eq!(
        k.secret_data("team", name).unwrap()["adminpass"],
        "edited-by-hand",
        "nothing changed"
    );

    let r = ws.strata(&["up", "--force-conflicts"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(k.secret_data("team", name).unwrap()["adminpass"], ADMIN);
    let secret = k.secret("team", name).unwrap();
    let owners: Vec<String> = secret["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["fieldsV1"]["f:data"].get("f:adminpass").is_some())
        .map(|m| m["manager"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(owners, ["strata"], "{secret}");
}

/// `reader` may do nothing: the step fails naming the user, the verb and the namespace,
/// exit 1, and its Secret is not written. `writer` may do nothing outside `team`: a key
/// in a namespace that does not exist fails the same way (RBAC answers before the
/// namespace is looked up), and that namespace is not created. The control plane is
/// shared with the other tests running now, so this one looks only at what it owns: its
/// Secret `forbidden` and the namespace `no-such-ns` (another test may create its own
/// namespaces meanwhile).
#[test]
fn a_user_without_permission_gets_a_clear_error_and_nothing_changes() {
    let test = "a_user_without_permission_gets_a_clear_error_and_nothing_changes";
    let name = "forbidden";
    let Some((k, ws)) = lab(test, "reader", name, "team", false) else {
        return;
    };
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    let all = r.all();
    assert!(all.contains("user `reader`"), "{r:?}");
    assert!(all.contains("`get`"), "the verb: {r:?}");
    assert!(all.contains("namespace `team`"), "{r:?}");
    assert!(k.secret("team", name).is_none());
    assert_no_value_leaked(&ws, &[&r], &[ADMIN, DB]);

    let ws = workspace(
        &k.kubeconfig("writer"),
        "lab-writer",
        name,
        "no-such-ns",
        false,
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.all()
            .contains("user `writer` may not `get` secrets in namespace `no-such-ns`"),
        "{r:?}"
    );
    assert!(k.secret("no-such-ns", name).is_none());
    assert!(!k.namespaces().contains(&"no-such-ns".to_string()));
}

/// A namespace that does not exist is created (README: "created if missing"), by field
/// manager `strata`, when the user may create Namespaces.
#[test]
fn a_missing_namespace_is_created() {
    let test = "a_missing_namespace_is_created";
    let Some((k, ws)) = lab(test, "admin", "fresh", "fresh-ns", false) else {
        return;
    };
    assert!(!k.namespaces().contains(&"fresh-ns".to_string()));
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(k.namespaces().contains(&"fresh-ns".to_string()));
    let (_, ns) = k.request("admin", "GET", "/api/v1/namespaces/fresh-ns", None);
    assert!(managers(&ns).iter().any(|(m, _)| m == "strata"), "{ns}");
    assert_eq!(
        k.secret_data("fresh-ns", "fresh").unwrap()["adminpass"],
        ADMIN
    );
    // Again: the namespace exists, nothing changes.
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(secrets_line(&r).contains("unchanged"), "{r:?}");
}

/// An EKS/GKE/AKS-style kubeconfig: an exec plugin prints an `ExecCredential` with the
/// token, and fails without a credential only the env file holds.
#[test]
fn an_exec_plugin_kubeconfig_reaches_the_real_server() {
    let Some(k) = cluster("an_exec_plugin_kubeconfig_reaches_the_real_server") else {
        return;
    };
    let token = k.var("WRITER_TOKEN").to_string();
    let mut kubeconfig: serde_yaml::Value = serde_yaml::from_str(&k.kubeconfig("writer")).unwrap();
    let mut ws = workspace("", "lab-exec", "via-exec", "team", false);
    let plugin = ws.path("bin/cloud-auth");
    std::fs::write(
        &plugin,
        format!(
            "#!/bin/sh\nif [ -z \"$CLOUD_CRED_FOR_TEST\" ]; then echo \"cloud-auth: no credentials (CLOUD_CRED_FOR_TEST is not set)\" >&2; exit 3; fi\nprintf '{{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    kubeconfig["users"][0]["user"] = serde_yaml::from_str(&format!(
        "exec:\n  apiVersion: client.authentication.k8s.io/v1beta1\n  command: {}\n  args: [token, --cluster, lab]\n  interactiveMode: IfAvailable\n",
        plugin.display()
    ))
    .unwrap();
    ws.write(
        "projects/infra/cluster/outputs.json",
        &json!({ "kubeconfig": serde_yaml::to_string(&kubeconfig).unwrap() }).to_string(),
    );

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.all().contains("cloud-auth"), "{r:?}");
    assert!(r.all().contains("CLOUD_CRED_FOR_TEST is not set"), "{r:?}");
    assert!(k.secret("team", "via-exec").is_none());

    ws.env_file("PULUMI_STACK=dev\nCLOUD_CRED_FOR_TEST=yes\n");
    ws.set_env("CLOUD_CRED_FOR_TEST", "");
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        k.secret_data("team", "via-exec").unwrap()["adminpass"],
        ADMIN
    );
    assert!(!r.all().contains(&token), "{r:?}");
}

/// kubectl: on PATH, else where scripts/install-tools.sh builds it; missing, see
/// [`missing`] (fails under `CI=true`).
pub(crate) fn kubectl() -> Option<PathBuf> {
    let tools = std::env::var_os("HOME")
        .map(|h| Path::new(&h).join(".cache/strata/tools/bin/kubectl"))
        .filter(|p| p.is_file());
    let found = find_tool(&["kubectl"]).or(tools);
    if found.is_none() {
        missing(
            "kubectl",
            "is not installed",
            "scripts/install-tools.sh builds it (k8s.io/kubectl, from the Go module proxy): put the folder it prints first on PATH",
        );
    }
    found
}

/// `kubectl ARGS` with the workspace's kubeconfig (the one strata's hook merged into).
pub(crate) fn kubectl_in(kubectl: &Path, ws: &Ws, args: &[&str]) -> Run {
    let out = Command::new(kubectl)
        .args(args)
        .env("KUBECONFIG", ws.path("home/.kube/config"))
        .env("HOME", ws.path("home"))
        .output()
        .unwrap();
    ran(out)
}

/// What a finished process did, as a [`Run`].
pub(crate) fn ran(out: std::process::Output) -> Run {
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The kubeconfig the hook merged is one kubectl uses against the real server.
#[test]
fn kubectl_reads_the_secret_through_the_merged_kubeconfig() {
    let test = "kubectl_reads_the_secret_through_the_merged_kubeconfig";
    let Some(k) = cluster(test) else {
        return;
    };
    let Some(kubectl) = kubectl() else {
        return;
    };
    let ws = workspace(
        &k.kubeconfig("writer"),
        "lab-kubectl",
        "for-kubectl",
        "team",
        false,
    );
    // The user's own kubeconfig already has an entry: it is kept.
    ws.write("home/.kube/config", &k.kubeconfig("reader"));
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let get = "--context lab-kubectl -n team get secret for-kubectl --show-managed-fields -o";
    let mut get: Vec<&str> = get.split(' ').collect();
    get.push("jsonpath={.metadata.name} {.metadata.managedFields[0].manager}");
    let got = kubectl_in(&kubectl, &ws, &get);
    assert_eq!(got.code, 0, "{got:?}");
    assert_eq!(got.stdout, "for-kubectl strata");
    // The user's own context is still there and still the reader.
    let theirs = "--context reader -n team get secret for-kubectl";
    let theirs = kubectl_in(&kubectl, &ws, &theirs.split(' ').collect::<Vec<_>>());
    assert_ne!(theirs.code, 0, "{theirs:?}");
    assert!(
        theirs
            .stderr
            .contains("\"reader\" cannot get resource \"secrets\""),
        "{theirs:?}"
    );
}
