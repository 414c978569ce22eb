//! Issue 5: state between projects and between runs — `inputs:` wired into per-project
//! config, stack references, `on_success` hooks (run, kubeconfig), the journal, the stack
//! lock, `up --resume`, `up --changed`, `status` and `outputs`. Every test drives the
//! real `strata` binary with the fake `pulumi` first on PATH and reads the fake's call
//! log to see exactly which Pulumi processes ran, with which config.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;

// ---------------------------------------------------------------------------------------
// Fixtures
// ---------------------------------------------------------------------------------------

/// A stack-config key every profile declares (default taken non-interactively), so the
/// per-project config files can be checked to keep the shared config.
const REGION_KEY: &str =
    "config:\n  - key: test:region\n    prompt: Region\n    default: eu-north-1\n";

/// `base/network` (Pulumi project `network`): one resource; `vpc_id` is `vpc-id` unless
/// FAKE_PULUMI_OUTPUTS_NETWORK overrides it.
const NETWORK: &str = "resources:\n  vpc:\n    type: fake:index:Vpc\n    properties:\n      cidr: 10.0.0.0/16\noutputs:\n  vpc_id: ${vpc.id}\n";

/// `apps/web` (Pulumi project `web`): declares `vpc_id` without a default, so the fake
/// itself refuses to run when the wired input is missing.
const WEB: &str = "config:\n  vpc_id:\n    type: string\nresources:\n  app:\n    type: fake:index:App\n    properties:\n      vpcId: ${vpc_id}\noutputs:\n  app_vpc: ${app.vpcId}\n";

/// A Pulumi project body with one resource.
fn simple(label: &str) -> String {
    format!(
        "resources:\n  thing:\n    type: fake:index:Thing\n    properties:\n      label: {label}\noutputs:\n  label: ${{thing.label}}\n"
    )
}

/// A workspace with stack `dev` (env file), provider `test` (STRATA_PROVIDER) and the
/// profile `providers/test.yaml` = HEAD + the region key + `entries`.
fn workspace(entries: &str) -> Ws {
    let mut ws = Ws::new();
    ws.env_file("PULUMI_STACK=dev\n");
    ws.set_env("STRATA_PROVIDER", "test");
    ws.profile("test", &format!("{HEAD}{REGION_KEY}{entries}"));
    ws
}

/// network -> web (input web:vpc_id) -> frontend (the entry before it); side needs only
/// network.
const CHAIN: &str = "infrastructure:\n  - path: base/network\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n  - path: apps/frontend\n  - path: apps/side\n    needs: [base/network]\n";

fn chain_workspace() -> Ws {
    let ws = workspace(CHAIN);
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    ws.pulumi_project("apps/frontend", "frontend", &simple("front"));
    ws.pulumi_project("apps/side", "side", &simple("side"));
    ws
}

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

// ---------------------------------------------------------------------------------------
// Call log, journal, output helpers
// ---------------------------------------------------------------------------------------

/// `end` lines of the fake's call log from line `since` on.
fn ends(ws: &Ws, since: usize) -> Vec<Value> {
    ws.calls()
        .into_iter()
        .skip(since)
        .filter(|c| c["event"] == "end")
        .collect()
}

/// Every Pulumi `up` that really ran (not the probe that finds no stack, exit 6), from
/// call-log line `since` on: (project name, exit code, end line).
fn ups(ws: &Ws, since: usize) -> Vec<(String, i64, Value)> {
    ends(ws, since)
        .into_iter()
        .filter(|c| c["command"] == "up" && c["exit_code"] != 6)
        .map(|c| {
            (
                c["project"].as_str().unwrap_or("?").to_string(),
                c["exit_code"].as_i64().unwrap_or(-1),
                c,
            )
        })
        .collect()
}

fn up_projects(ws: &Ws, since: usize) -> BTreeSet<String> {
    ups(ws, since).into_iter().map(|(p, _, _)| p).collect()
}

/// The end line of the one `up` of `project` that ran from line `since` on.
fn the_up(ws: &Ws, since: usize, project: &str) -> Value {
    let mut found: Vec<Value> = ups(ws, since)
        .into_iter()
        .filter(|(p, _, _)| p == project)
        .map(|(_, _, c)| c)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one `pulumi up` of {project}; call log:\n{}",
        calls_text(ws)
    );
    found.remove(0)
}

fn calls_text(ws: &Ws) -> String {
    ws.calls()
        .iter()
        .map(|c| {
            format!(
                "{} {} {} exit={} argv={}",
                c["event"], c["project"], c["command"], c["exit_code"], c["argv"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of `--config-file` in an argv.
fn config_file_arg(call: &Value) -> Option<String> {
    let argv: Vec<String> = call["argv"]
        .as_array()?
        .iter()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    for (i, a) in argv.iter().enumerate() {
        if a == "--config-file" {
            return argv.get(i + 1).cloned();
        }
        if let Some(v) = a.strip_prefix("--config-file=") {
            return Some(v.to_string());
        }
    }
    None
}

/// `.strata/dev/journal.jsonl`, every line parsed (a line that is not JSON fails).
fn journal(ws: &Ws) -> Vec<Value> {
    ws.read(".strata/dev/journal.jsonl")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap_or_else(|e| panic!("journal line is not JSON ({e}): {l}"))
        })
        .collect()
}

/// Journal records of project operations (they carry `project`).
fn project_records(ws: &Ws) -> Vec<Value> {
    journal(ws)
        .into_iter()
        .filter(|r| r.get("project").is_some())
        .collect()
}

/// The part of a human run's stdout from the summary table on.
fn summary(r: &Run) -> String {
    match r.stdout.rfind("\nproject ") {
        Some(i) => r.stdout[i..].to_string(),
        None => r.stdout.clone(),
    }
}

/// A summary row of `project` (the table line that starts with its path).
fn summary_row(r: &Run, project: &str) -> String {
    summary(r)
        .lines()
        .find(|l| l.starts_with(&format!("{project} ")))
        .unwrap_or_else(|| panic!("no summary row for {project}:\n{r:?}"))
        .to_string()
}

/// JSON printed by `status`/`outputs --output json`: one document, or JSON Lines.
fn json_docs(r: &Run) -> Vec<Value> {
    if let Ok(v) = serde_json::from_str::<Value>(r.stdout.trim()) {
        return vec![v];
    }
    r.stdout
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{r:?}")))
        .collect()
}

/// Every (key, value) pair anywhere in a JSON tree.
fn walk<'a>(v: &'a Value, out: &mut Vec<(Option<&'a str>, &'a Value)>, key: Option<&'a str>) {
    out.push((key, v));
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                walk(x, out, Some(k));
            }
        }
        Value::Array(a) => {
            for x in a {
                walk(x, out, key);
            }
        }
        _ => {}
    }
}

fn values_of_key<'a>(docs: &'a [Value], key: &str) -> Vec<&'a Value> {
    let mut all = Vec::new();
    for d in docs {
        walk(d, &mut all, None);
    }
    all.into_iter()
        .filter(|(k, _)| *k == Some(key))
        .map(|(_, v)| v)
        .collect()
}

/// The per-project entries of a `status --output json`: objects naming a project (by
/// `project` or `path`), wherever they sit in the document(s).
fn status_entries(docs: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    for d in docs {
        let mut all = Vec::new();
        walk(d, &mut all, None);
        for (_, v) in all {
            if let Value::Object(m) = v {
                let names = m.get("project").or_else(|| m.get("path"));
                if names.is_some_and(|n| n.is_string()) && m.len() > 1 {
                    out.push(v.clone());
                }
            }
        }
        // A map keyed by project path: {"projects": {"base/network": {...}}}.
        if let Some(Value::Object(projects)) = d.get("projects") {
            for (path, v) in projects {
                if let Value::Object(m) = v {
                    let mut m = m.clone();
                    m.insert("project".into(), json!(path));
                    out.push(Value::Object(m));
                }
            }
        }
    }
    out
}

fn entry_for<'a>(entries: &'a [Value], project: &str) -> &'a Value {
    entries
        .iter()
        .find(|e| {
            e.get("project").and_then(Value::as_str) == Some(project)
                || e.get("path").and_then(Value::as_str) == Some(project)
        })
        .unwrap_or_else(|| panic!("no status entry for {project} in {entries:#?}"))
}

/// The first present field among `names`.
fn field<'a>(e: &'a Value, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| e.get(*n).filter(|v| !v.is_null()))
}

/// The entry's "inputs changed" flag: a boolean field whose name mentions `changed`.
fn changed_flag(e: &Value) -> Option<bool> {
    e.as_object()?
        .iter()
        .find(|(k, v)| k.contains("changed") && v.is_boolean())
        .and_then(|(_, v)| v.as_bool())
}

/// A running strata with its output drained in the background.
struct Bg {
    child: Child,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
}

fn bg(ws: &Ws, args: &[&str]) -> Bg {
    let mut child = ws.spawn(args);
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = so.read_to_string(&mut s);
        s
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = se.read_to_string(&mut s);
        s
    });
    Bg { child, out, err }
}

impl Bg {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn finish(mut self, limit: Duration) -> Run {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("strata did not finish within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Run {
            code: status.code().unwrap_or(-1),
            stdout: self.out.join().unwrap(),
            stderr: self.err.join().unwrap(),
        }
    }
}

fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// True while some Pulumi `up` has been running for at least `ms` (so it is the real
/// update, not the quick probe that finds no stack).
fn up_running_for(ws: &Ws, ms: u64) -> bool {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let calls = ws.calls();
    let ended: BTreeSet<u64> = calls
        .iter()
        .filter(|c| c["event"] == "end")
        .filter_map(|c| c["pid"].as_u64())
        .collect();
    calls.iter().any(|c| {
        c["event"] == "start"
            && c["command"] == "up"
            && c["pid"].as_u64().is_some_and(|p| !ended.contains(&p))
            && c["time_ms"].as_u64().is_some_and(|t| t + ms <= now)
    })
}

fn hostname() -> String {
    let out = Command::new("hostname").output().expect("run hostname");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A pid that is certainly gone: a child that has been reaped.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

fn mode_of(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

// ---------------------------------------------------------------------------------------
// inputs: outputs wired into downstream config
// ---------------------------------------------------------------------------------------

#[test]
fn outputs_flow_through_inputs_into_downstream_config() {
    let mut ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n      web:subnets: base/network:subnets\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    ws.set_env(
        "FAKE_PULUMI_OUTPUTS_NETWORK",
        r#"{"vpc_id":"vpc-0abc123","subnets":["subnet-a","subnet-b"]}"#,
    );
    // The fake refuses (exit 2) unless web's config holds exactly these values.
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        r#"{"web:vpc_id":"vpc-0abc123","web:subnets":["subnet-a","subnet-b"]}"#,
    );

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    let web = the_up(&ws, 0, "web");
    assert_eq!(web["exit_code"], 0);
    assert_eq!(web["config"]["web:vpc_id"], "vpc-0abc123", "{web:#}");
    assert_eq!(
        web["config"]["web:subnets"],
        json!(["subnet-a", "subnet-b"])
    );
    // The shared stack config reaches web too.
    assert_eq!(web["config"]["test:region"], "eu-north-1");
    assert_eq!(web["config"]["kubernetes:infra_type"], "test");

    // web ran with the per-project config file; network with the shared one.
    let file = config_file_arg(&web).expect("web's up has --config-file");
    let expected = ws.path(".strata/dev/config/apps_2fweb.yaml");
    assert_eq!(
        std::fs::canonicalize(&file).unwrap(),
        std::fs::canonicalize(&expected).unwrap()
    );
    let per_project: serde_yaml::Value =
        serde_yaml::from_str(&ws.read(".strata/dev/config/apps_2fweb.yaml")).unwrap();
    assert_eq!(
        per_project["config"]["web:vpc_id"].as_str(),
        Some("vpc-0abc123")
    );
    assert_eq!(
        per_project["config"]["test:region"].as_str(),
        Some("eu-north-1")
    );
    // network, with no inputs, runs with its own copy too: Pulumi never writes the shared
    // file (see `per_project_config_salts`).
    let network = the_up(&ws, 0, "network");
    let own = config_file_arg(&network).expect("network's up has --config-file");
    assert_eq!(
        std::fs::canonicalize(&own).unwrap(),
        std::fs::canonicalize(ws.path(".strata/dev/config/base_2fnetwork.yaml")).unwrap()
    );
    // The inputs never leak into the shared stack config.
    let shared_text = ws.read("config/pulumi/Pulumi.dev.yaml");
    assert!(!shared_text.contains("vpc-0abc123"), "{shared_text}");
    assert!(!shared_text.contains("web:vpc_id"), "{shared_text}");
}

/// The salt of each project's copy of the stack config. Pulumi writes one into the file
/// `--config-file` names when it has none; strata gives each project its own copy, so
/// on a fresh stack each copy gets its own salt (no two processes write one file) and
/// keeps it. Once the shared file has a salt (its `secure:` values are encrypted with
/// it), every copy carries that one.
#[test]
fn per_project_config_salts() {
    let ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    let salt_of = |rel: &str| -> Option<String> {
        let doc: serde_yaml::Value = serde_yaml::from_str(&ws.read(rel)).unwrap();
        doc.get("encryptionsalt")
            .and_then(|v| v.as_str())
            .map(String::from)
    };
    const WEB_COPY: &str = ".strata/dev/config/apps_2fweb.yaml";
    const NET_COPY: &str = ".strata/dev/config/base_2fnetwork.yaml";
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(salt_of("config/pulumi/Pulumi.dev.yaml"), None);
    let web = salt_of(WEB_COPY).expect("pulumi wrote a salt into web's copy");
    let net = salt_of(NET_COPY).expect("pulumi wrote a salt into network's copy");
    // And each stays the same on the next run.
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(salt_of(WEB_COPY).as_deref(), Some(web.as_str()));
    assert_eq!(salt_of(NET_COPY).as_deref(), Some(net.as_str()));

    // A shared file with a salt of its own: every copy takes it.
    let shared = ws.read("config/pulumi/Pulumi.dev.yaml");
    ws.write(
        "config/pulumi/Pulumi.dev.yaml",
        &format!("encryptionsalt: {web}\n{shared}"),
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(salt_of(WEB_COPY).as_deref(), Some(web.as_str()));
    assert_eq!(salt_of(NET_COPY).as_deref(), Some(web.as_str()));
}

#[test]
fn command_project_gets_inputs_as_env_vars_and_json_file() {
    let mut ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: tools/report\n    inputs:\n      report:vpc: base/network:vpc_id\n      report:subnets: base/network:subnets\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    let up = format!(
        "printf '%s' \"$STRATA_INPUT_REPORT_VPC\" > {}; cp \"$STRATA_INPUTS_FILE\" {}",
        ws.path("env-vpc.txt").display(),
        ws.path("inputs-copy.json").display()
    );
    ws.command_project("tools/report", &up, "true");
    ws.set_env(
        "FAKE_PULUMI_OUTPUTS_NETWORK",
        r#"{"vpc_id":"vpc-77","subnets":["s-1","s-2"]}"#,
    );

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.read("env-vpc.txt"), "vpc-77");
    let inputs: Value = serde_json::from_str(&ws.read("inputs-copy.json")).unwrap();
    assert_eq!(inputs["report:vpc"], "vpc-77", "{inputs}");
    assert_eq!(inputs["report:subnets"], json!(["s-1", "s-2"]));
}

/// A project without inputs still gets a readable `{}` at $STRATA_INPUTS_FILE, and a
/// project that writes no outputs is recorded with none.
#[test]
fn command_project_without_inputs_reads_an_empty_object() {
    let ws = workspace("infrastructure:\n  - path: tools/a\n  - path: tools/b\n");
    let copy = |n: &str| {
        format!(
            "cp \"$STRATA_INPUTS_FILE\" {}",
            ws.path(&format!("inputs-{n}.json")).display()
        )
    };
    ws.command_project("tools/a", &copy("a"), "true");
    ws.command_project("tools/b", &copy("b"), "true");
    for _ in 0..2 {
        let r = ws.strata(&["up"]);
        assert_eq!(r.code, 0, "{r:?}");
        for n in ["a", "b"] {
            let v: Value = serde_json::from_str(&ws.read(&format!("inputs-{n}.json"))).unwrap();
            assert_eq!(v, json!({}));
        }
        let v: Value =
            serde_json::from_str(&ws.read(".strata/dev/outputs/tools_2fa.json")).unwrap();
        assert_eq!(v, json!({}));
    }
}

#[test]
fn command_project_outputs_flow_into_a_pulumi_project_also_piecemeal() {
    let mut ws = workspace(
        "infrastructure:\n  - path: tools/image\n  - path: apps/web\n    inputs:\n      web:vpc_id: tools/image:tag\n",
    );
    ws.command_project(
        "tools/image",
        "printf '{\"tag\":\"img-1.2.3\"}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    ws.pulumi_project("apps/web", "web", WEB);
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        r#"{"web:vpc_id":"img-1.2.3"}"#,
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(the_up(&ws, 0, "web")["config"]["web:vpc_id"], "img-1.2.3");
    // The outputs the project wrote are kept, private.
    {
        use std::os::unix::fs::PermissionsExt;
        let kept = ws.path(".strata/dev/outputs/tools_2fimage.json");
        let v: Value =
            serde_json::from_str(&ws.read(".strata/dev/outputs/tools_2fimage.json")).unwrap();
        assert_eq!(v["tag"], "img-1.2.3");
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "outputs are private");
    }

    // Only web: the command project's outputs are remembered from its last up.
    let since = ws.calls().len();
    let r = ws.strata(&["up", "--project", "apps/web"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        the_up(&ws, since, "web")["config"]["web:vpc_id"],
        "img-1.2.3"
    );
}

#[test]
fn secret_output_wired_as_input_arrives_as_secure_value() {
    const SECRET: &str = "hunter2-Zq9-never-in-plaintext";
    let mut ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n      web:db_password: base/network:db_password\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    ws.set_env(
        "FAKE_PULUMI_SECRET_OUTPUTS_NETWORK",
        &format!(r#"{{"db_password":"{SECRET}"}}"#),
    );
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        &format!(r#"{{"web:db_password":"{SECRET}","web:vpc_id":"vpc-id"}}"#),
    );

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    // Pulumi saw a secure value, whose decryption is the secret (the fake checked it).
    let web = the_up(&ws, 0, "web");
    assert_eq!(web["config"]["web:db_password"], "[secure]", "{web:#}");
    assert_eq!(web["config"]["web:vpc_id"], "vpc-id");

    // The per-project config file holds it as `secure:`, never in plaintext.
    let text = ws.read(".strata/dev/config/apps_2fweb.yaml");
    assert!(
        !text.contains(SECRET),
        "plaintext secret in the config file:\n{text}"
    );
    let cfg: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    assert!(
        cfg["config"]["web:db_password"].get("secure").is_some(),
        "not a secure value:\n{text}"
    );

    // It went to Pulumi on stdin, never on a command line.
    for c in ws.calls() {
        assert!(
            !c["argv"].to_string().contains(SECRET),
            "secret in argv: {c}"
        );
    }
    let sets: Vec<Value> = ends(&ws, 0)
        .into_iter()
        .filter(|c| c["command"] == "config set" && c["project"] == "web")
        .collect();
    assert!(
        !sets.is_empty(),
        "no `pulumi config set --secret` for web:\n{}",
        calls_text(&ws)
    );
    for s in &sets {
        assert_eq!(s["stdin"], "pipe", "{s}");
    }

    // Not in strata's output, and nowhere under .strata in plaintext.
    assert!(!r.all().contains(SECRET), "{r:?}");
    for (p, bytes) in ws.files_under(".strata") {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "plaintext secret in {}",
            p.display()
        );
    }
}

// ---------------------------------------------------------------------------------------
// Stack references
// ---------------------------------------------------------------------------------------

#[test]
fn stack_reference_in_pulumi_yaml_project_resolves() {
    let mut ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: base/cluster\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/cluster:cluster_vpc\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project(
        "base/cluster",
        "cluster",
        "resources:\n  netRef:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${pulumi.organization}/network/${pulumi.stack}\n  cluster:\n    type: fake:eks:Cluster\n    properties:\n      vpcId: ${netRef.outputs[\"vpc_id\"]}\noutputs:\n  cluster_vpc: ${cluster.vpcId}\n",
    );
    ws.pulumi_project("apps/web", "web", WEB);
    ws.set_env(
        "FAKE_PULUMI_OUTPUTS_NETWORK",
        r#"{"vpc_id":"vpc-from-ref-42"}"#,
    );
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        r#"{"web:vpc_id":"vpc-from-ref-42"}"#,
    );

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    // Every child knows the stack, provider, infra type and organization.
    let cluster = the_up(&ws, 0, "cluster");
    assert_eq!(cluster["exit_code"], 0);
    let env = &cluster["env"];
    assert_eq!(env["STRATA_STACK"], "dev", "{env}");
    assert_eq!(env["STRATA_PROVIDER"], "test");
    assert_eq!(env["STRATA_INFRA_TYPE"], "test");
    assert_eq!(env["STRATA_ORG"], "organization");
    assert!(
        env["PULUMI_BACKEND_URL"]
            .as_str()
            .is_some_and(|u| u.starts_with("file://") && u.ends_with(".strata/backend")),
        "{env}"
    );

    // The reference read network's deployed stack from the file backend...
    let state = ws.read(".strata/backend/.pulumi/stacks/cluster/dev.json");
    assert!(state.contains("vpc-from-ref-42"), "{state}");
    // ...and its output flowed on into web's config (the fake checked it).
    let web = the_up(&ws, 0, "web");
    assert_eq!(web["config"]["web:vpc_id"], "vpc-from-ref-42");
}

// ---------------------------------------------------------------------------------------
// Input errors and piecemeal runs
// ---------------------------------------------------------------------------------------

#[test]
fn missing_upstream_output_names_both_projects_and_the_output() {
    let ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:no_such_output\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 3, "a missing input is exit 3: {r:?}");
    let all = r.all();
    for name in ["base/network", "apps/web", "no_such_output"] {
        assert!(all.contains(name), "the error should name `{name}`: {r:?}");
    }
    assert_eq!(up_projects(&ws, 0), BTreeSet::from(["network".to_string()]));
}

#[test]
fn piecemeal_project_reads_inputs_from_the_deployed_upstream_stack() {
    const TOKEN: &str = "tok-deployed-s3cr3t";
    let mut ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n      web:token: base/network:token\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    ws.set_env(
        "FAKE_PULUMI_OUTPUTS_NETWORK",
        r#"{"vpc_id":"vpc-deployed-1"}"#,
    );
    ws.set_env(
        "FAKE_PULUMI_SECRET_OUTPUTS_NETWORK",
        &format!(r#"{{"token":"{TOKEN}"}}"#),
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    // Were network to run again, its output would change: web must get what is deployed.
    let since = ws.calls().len();
    ws.set_env(
        "FAKE_PULUMI_OUTPUTS_NETWORK",
        r#"{"vpc_id":"vpc-WRONG-rerun"}"#,
    );
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        &format!(r#"{{"web:vpc_id":"vpc-deployed-1","web:token":"{TOKEN}"}}"#),
    );
    let r = ws.strata(&["up", "--project", "apps/web"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(up_projects(&ws, since), BTreeSet::from(["web".to_string()]));
    let web = the_up(&ws, since, "web");
    assert_eq!(web["config"]["web:vpc_id"], "vpc-deployed-1");
    assert_eq!(web["config"]["web:token"], "[secure]");
    // The upstream outputs were read from its stack.
    assert!(
        ends(&ws, since)
            .iter()
            .any(|c| c["project"] == "network" && c["command"] == "stack output"),
        "{}",
        calls_text(&ws)
    );
    assert!(!r.all().contains(TOKEN), "{r:?}");
}

#[test]
fn upstream_never_deployed_is_an_error_naming_the_command_to_run() {
    let ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);

    let r = ws.strata(&["up", "--project", "apps/web"]);
    assert_eq!(r.code, 3, "a missing input is exit 3 (DESIGN §2): {r:?}");
    let all = r.all();
    assert!(all.contains("base/network"), "{r:?}");
    assert!(
        all.contains("not been deployed")
            || all.contains("never been deployed")
            || all.contains("not deployed"),
        "{r:?}"
    );
    assert!(
        all.contains("strata up"),
        "the error should name the command to run: {r:?}"
    );
    assert!(up_projects(&ws, 0).is_empty(), "{}", calls_text(&ws));
}

// ---------------------------------------------------------------------------------------
// on_success hooks
// ---------------------------------------------------------------------------------------

#[test]
fn run_hook_sees_outputs_config_and_env_before_dependents_start() {
    let mut ws = Ws::new();
    ws.env_file("PULUMI_STACK=dev\n");
    ws.set_env("STRATA_PROVIDER", "test");
    ws.set_env("HOOK_GREETING", "hello-from-env");
    let hook_file = ws.path("hook.txt");
    let hook = format!(
        "printf 'vpc=%s region=%s greet=%s var=%s\\n' \"${{outputs.vpc_id}}\" \"${{config.test:region}}\" \"${{env.HOOK_GREETING}}\" \"$STRATA_OUTPUT_VPC_ID\" > {}",
        hook_file.display()
    );
    ws.profile(
        "test",
        &format!(
            "{HEAD}{REGION_KEY}infrastructure:\n  - path: base/network\n    on_success:\n      - run: {}\n  - path: tools/after\n",
            yaml_str(&hook)
        ),
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.set_env(
        "FAKE_PULUMI_OUTPUTS_NETWORK",
        r#"{"vpc_id":"vpc-hooked-9"}"#,
    );
    // The dependent copies the hook's file: it exists only if the hook ran first.
    ws.command_project(
        "tools/after",
        &format!(
            "cp {} {}",
            hook_file.display(),
            ws.path("seen.txt").display()
        ),
        "true",
    );

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let expected = "vpc=vpc-hooked-9 region=eu-north-1 greet=hello-from-env var=vpc-hooked-9\n";
    assert_eq!(ws.read("hook.txt"), expected);
    assert_eq!(
        ws.read("seen.txt"),
        expected,
        "the dependent started before the hook ran"
    );
}

const KUBE_EXISTING: &str = "apiVersion: v1\nkind: Config\npreferences: {}\nclusters:\n- name: old-cluster\n  cluster:\n    server: https://old.example:6443\nusers:\n- name: old-user\n  user:\n    token: old-token\ncontexts:\n- name: old-ctx\n  context:\n    cluster: old-cluster\n    user: old-user\ncurrent-context: old-ctx\n";

fn kubeconfig(name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}-cluster\n  cluster:\n    server: https://{name}.example:6443\nusers:\n- name: {name}-user\n  user:\n    token: {name}-token\ncontexts:\n- name: {name}-ctx\n  context:\n    cluster: {name}-cluster\n    user: {name}-user\ncurrent-context: {name}-ctx\n"
    )
}

fn names(doc: &serde_yaml::Value, section: &str) -> BTreeSet<String> {
    doc[section]
        .as_sequence()
        .unwrap_or_else(|| panic!("no {section} in {doc:?}"))
        .iter()
        .filter_map(|e| e["name"].as_str().map(String::from))
        .collect()
}

#[test]
fn kubeconfig_hook_merges_keeping_existing_contexts_with_mode_0600() {
    use base64::Engine;
    let mut ws = workspace(
        "infrastructure:\n  - path: base/cluster\n    on_success:\n      - kubeconfig: { output: kubeconfig }\n  - path: base/cluster2\n    on_success:\n      - kubeconfig: { output: kubeconfig, context: renamed-ctx }\n",
    );
    ws.pulumi_project("base/cluster", "cluster", &simple("one"));
    ws.pulumi_project("base/cluster2", "cluster2", &simple("two"));
    // A plain YAML kubeconfig, and a base64 one that is a secret output.
    ws.set_env(
        "FAKE_PULUMI_OUTPUTS_CLUSTER",
        &json!({ "kubeconfig": kubeconfig("first") }).to_string(),
    );
    ws.set_env(
        "FAKE_PULUMI_SECRET_OUTPUTS_CLUSTER2",
        &json!({ "kubeconfig": base64::engine::general_purpose::STANDARD.encode(kubeconfig("second")) })
            .to_string(),
    );
    ws.write("home/.kube/config", KUBE_EXISTING);
    let target = ws.path("home/.kube/config");
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o644)).unwrap();

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    let doc: serde_yaml::Value = serde_yaml::from_str(&ws.read("home/.kube/config")).unwrap();
    // The incoming context, cluster and user take the hook's name: `name:`/`context:`,
    // else `<stack>-<project folder>`.
    let all =
        |extra: [&str; 2]| -> BTreeSet<String> { extra.iter().map(|s| s.to_string()).collect() };
    for (section, old) in [
        ("contexts", "old-ctx"),
        ("clusters", "old-cluster"),
        ("users", "old-user"),
    ] {
        let mut want = all(["dev-cluster", "renamed-ctx"]);
        want.insert(old.to_string());
        assert_eq!(names(&doc, section), want, "{section}: {doc:?}");
    }
    assert_eq!(doc["current-context"].as_str(), Some("renamed-ctx"));
    // What was there is kept as it was.
    let old = doc["users"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "old-user")
        .unwrap();
    assert_eq!(old["user"]["token"].as_str(), Some("old-token"));
    assert!(
        doc.get("preferences").is_some(),
        "unknown keys are kept: {doc:?}"
    );
    assert_eq!(mode_of(&target), 0o600, "the kubeconfig holds credentials");
    // Written atomically: no temporary file left beside it.
    let leftovers: Vec<String> = std::fs::read_dir(ws.path("home/.kube"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "config")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // The secret kubeconfig's token is not printed.
    assert!(!r.all().contains("second-token"), "{r:?}");
}

#[test]
fn kubeconfig_hook_creates_a_missing_file_with_mode_0600() {
    let mut ws = workspace(
        "infrastructure:\n  - path: base/cluster\n    on_success:\n      - kubeconfig: { output: kubeconfig }\n",
    );
    ws.pulumi_project("base/cluster", "cluster", &simple("one"));
    ws.set_env(
        "FAKE_PULUMI_OUTPUTS_CLUSTER",
        &json!({ "kubeconfig": kubeconfig("first") }).to_string(),
    );
    assert!(!ws.exists("home/.kube/config"));
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let doc: serde_yaml::Value = serde_yaml::from_str(&ws.read("home/.kube/config")).unwrap();
    assert_eq!(doc["current-context"].as_str(), Some("dev-cluster"));
    assert_eq!(mode_of(&ws.path("home/.kube/config")), 0o600);
}

#[test]
fn failing_hook_fails_its_project_and_stops_dependents() {
    let ws = workspace(
        "infrastructure:\n  - path: base/network\n    on_success:\n      - run: echo checking; exit 7\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n  - path: apps/frontend\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    ws.pulumi_project("apps/frontend", "frontend", &simple("front"));

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    // Pulumi itself succeeded; nothing after it ran.
    let ran = ups(&ws, 0);
    assert_eq!(ran.len(), 1, "{}", calls_text(&ws));
    assert_eq!((ran[0].0.as_str(), ran[0].1), ("network", 0));

    // The summary blames the hook, not Pulumi.
    let row = summary_row(&r, "base/network");
    assert!(row.contains("failed"), "{row}");
    let s = summary(&r);
    let blame: Vec<&str> = s
        .lines()
        .filter(|l| l.starts_with("✗ base/network"))
        .collect();
    assert_eq!(blame.len(), 1, "{s}");
    assert!(blame[0].contains("hook"), "{s}");
    assert!(blame[0].contains("exit 7"), "{s}");
    assert!(
        !blame[0].to_lowercase().contains("pulumi"),
        "the hook failed, not pulumi: {s}"
    );
    for p in ["apps/web", "apps/frontend"] {
        let row = summary_row(&r, p);
        assert!(!row.contains("succeeded"), "{row}");
    }
    // The journal says the same.
    let recs = project_records(&ws);
    let net = recs
        .iter()
        .find(|r| r["project"] == "base/network")
        .unwrap();
    assert_eq!(net["status"], "failed");
    assert!(
        net["message"].as_str().unwrap_or("").contains("hook"),
        "{net}"
    );
    for p in ["apps/web", "apps/frontend"] {
        assert!(
            recs.iter()
                .all(|r| r["project"] != p || r["status"] != "succeeded"),
            "{recs:#?}"
        );
    }
}

#[test]
fn failing_hook_is_reported_in_json_events() {
    let ws = workspace(
        "infrastructure:\n  - path: base/network\n    on_success:\n      - run: exit 5\n  - path: apps/frontend\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/frontend", "frontend", &simple("front"));
    let r = ws.strata(&["up", "--output", "json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let events = r.events();
    let hook = events
        .iter()
        .find(|e| e["event"] == "hook_finished")
        .unwrap_or_else(|| panic!("no hook_finished: {events:#?}"));
    assert_eq!(hook["project"], "base/network");
    assert_eq!(hook["status"], "failed");
    let fin = events
        .iter()
        .find(|e| e["event"] == "project_finished" && e["project"] == "base/network")
        .unwrap();
    assert_eq!(fin["status"], "failed");
    assert!(!events.iter().any(|e| e["event"] == "project_finished"
        && e["project"] == "apps/frontend"
        && e["status"] == "succeeded"));
    let run = events
        .iter()
        .find(|e| e["event"] == "run_finished")
        .unwrap();
    assert_eq!(run["status"], "failed");
}

// ---------------------------------------------------------------------------------------
// Journal
// ---------------------------------------------------------------------------------------

#[test]
fn journal_lines_are_json_one_per_project_operation_without_secrets() {
    const SECRET: &str = "journal-leak-canary-8d1f";
    let mut ws = workspace(
        "infrastructure:\n  - path: base/network\n    on_success:\n      - run: echo \"got ${outputs.db_password}\" > /dev/null\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n      web:db_password: base/network:db_password\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    ws.set_env(
        "FAKE_PULUMI_SECRET_OUTPUTS_NETWORK",
        &format!(r#"{{"db_password":"{SECRET}"}}"#),
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let first_text = ws.read(".strata/dev/journal.jsonl");

    let recs = project_records(&ws);
    assert_eq!(recs.len(), 2, "one record per project operation: {recs:#?}");
    let run_id = recs[0]["run_id"].as_str().expect("run_id").to_string();
    assert!(!run_id.is_empty());
    for (rec, project) in recs.iter().zip(["base/network", "apps/web"]) {
        assert_eq!(rec["project"], project, "{rec}");
        assert_eq!(rec["run_id"], run_id.as_str(), "{rec}");
        assert_eq!(rec["operation"], "up", "{rec}");
        assert_eq!(rec["status"], "succeeded", "{rec}");
        for k in ["started_at", "ended_at"] {
            let t = rec[k].as_str().unwrap_or_else(|| panic!("no {k}: {rec}"));
            assert!(
                t.len() >= 20 && t.as_bytes()[4] == b'-' && t.contains('T'),
                "{k} is not RFC 3339: {t}"
            );
        }
        assert!(
            rec["started_at"].as_str() <= rec["ended_at"].as_str(),
            "{rec}"
        );
        let fp = rec["fingerprint"]
            .as_str()
            .unwrap_or_else(|| panic!("no fingerprint: {rec}"));
        assert!(fp.len() >= 16, "{rec}");
    }
    assert!(
        !first_text.contains(SECRET),
        "secret in the journal:\n{first_text}"
    );

    // A second run appends: the first lines stay as they were.
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let text = ws.read(".strata/dev/journal.jsonl");
    assert!(text.starts_with(&first_text), "the journal is append-only");
    assert_eq!(project_records(&ws).len(), 4);
    let ids: BTreeSet<String> = project_records(&ws)
        .iter()
        .map(|r| r["run_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 2, "each run has its own run_id");
    assert!(!text.contains(SECRET), "secret in the journal:\n{text}");
    // Nor in the logs of the run.
    for (p, bytes) in ws.files_under(".strata/dev/logs") {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(SECRET),
            "secret in {}",
            p.display()
        );
    }
}

// ---------------------------------------------------------------------------------------
// Lock
// ---------------------------------------------------------------------------------------

#[test]
fn concurrent_up_on_one_stack_second_exits_3_and_nothing_runs_twice() {
    let mut ws = chain_workspace();
    ws.set_env("FAKE_PULUMI_DELAY_MS_NETWORK", "4000");
    let first = bg(&ws, &["up"]);
    let pid = first.pid();
    wait_until(
        "the first strata to hold the lock and run pulumi",
        Duration::from_secs(60),
        || ws.exists(".strata/dev/lock") && up_running_for(&ws, 300),
    );
    let lock: Value = serde_json::from_str(&ws.read(".strata/dev/lock")).expect("the lock is JSON");
    assert_eq!(lock["pid"], pid, "{lock}");

    let second = ws.strata(&["up"]);
    assert_eq!(second.code, 3, "{second:?}");
    // It did not wait for the first: that one still holds the lock and runs.
    let still: Value = serde_json::from_str(&ws.read(".strata/dev/lock")).expect("lock");
    assert_eq!(still["pid"], pid, "the first strata still holds the lock");
    let msg = second.all();
    assert!(msg.contains(&pid.to_string()), "names the pid: {msg}");
    assert!(msg.contains(&hostname()), "names the host: {msg}");
    assert!(msg.contains("strata up"), "names the command: {msg}");
    assert!(
        msg.contains(lock["since"].as_str().unwrap()),
        "says since when: {msg}"
    );
    // The holder's lock is untouched.
    assert!(ws.exists(".strata/dev/lock"));

    let r = first.finish(Duration::from_secs(120));
    assert_eq!(r.code, 0, "{r:?}");
    let ran = ups(&ws, 0);
    let mut names: Vec<&str> = ran.iter().map(|(p, _, _)| p.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        ["frontend", "network", "side", "web"],
        "{}",
        calls_text(&ws)
    );
    assert!(!ws.exists(".strata/dev/lock"));
}

#[test]
fn lock_held_by_a_live_process_is_refused_and_left_alone() {
    let ws = chain_workspace();
    let holder = json!({
        "pid": std::process::id(),
        "host": hostname(),
        "command": "strata destroy",
        "since": "2024-05-06T07:08:09Z",
    })
    .to_string();
    ws.write(".strata/dev/lock", &holder);
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 3, "{r:?}");
    let msg = r.all();
    assert!(msg.contains(&std::process::id().to_string()), "{msg}");
    assert!(msg.contains("strata destroy"), "{msg}");
    assert!(msg.contains("2024-05-06T07:08:09Z"), "{msg}");
    assert_eq!(
        ws.read(".strata/dev/lock"),
        holder,
        "someone else's lock is not touched"
    );
    assert!(ws.calls().is_empty(), "nothing ran:\n{}", calls_text(&ws));
}

#[test]
fn stale_lock_of_a_dead_process_is_taken_over_with_a_warning() {
    let ws = chain_workspace();
    let dead = dead_pid();
    ws.write(
        ".strata/dev/lock",
        &json!({
            "pid": dead,
            "host": hostname(),
            "command": "strata up",
            "since": "2020-01-01T00:00:00Z",
        })
        .to_string(),
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let warning = r
        .all()
        .lines()
        .find(|l| l.contains("warning") && l.contains(&dead.to_string()))
        .map(String::from);
    assert!(warning.is_some(), "a warning naming the dead owner: {r:?}");
    assert_eq!(up_projects(&ws, 0).len(), 4);
    assert!(!ws.exists(".strata/dev/lock"), "released after the run");
}

#[test]
fn lock_is_released_after_success_failure_and_ctrl_c() {
    let mut ws = chain_workspace();
    // Success.
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!ws.exists(".strata/dev/lock"), "after success");

    // A project fails.
    ws.set_env("FAKE_PULUMI_FAIL_WEB", "up");
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(!ws.exists(".strata/dev/lock"), "after a failure");
    ws.env.retain(|(k, _)| k != "FAKE_PULUMI_FAIL_WEB");

    // Ctrl-C while Pulumi runs.
    ws.set_env("FAKE_PULUMI_DELAY_MS_NETWORK", "8000");
    let since = ws.calls().len();
    let run = bg(&ws, &["up"]);
    wait_until("pulumi up to be running", Duration::from_secs(60), || {
        ws.exists(".strata/dev/lock") && up_running_for(&ws, 500) && ws.calls().len() > since
    });
    let st = Command::new("kill")
        .args(["-INT", &run.pid().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let r = run.finish(Duration::from_secs(90));
    assert_eq!(r.code, 130, "{r:?}");
    assert!(!ws.exists(".strata/dev/lock"), "after Ctrl-C: {r:?}");
    // Pulumi got exactly one SIGINT and cancelled gracefully.
    let net = ends(&ws, since)
        .into_iter()
        .find(|c| c["command"] == "up" && c["project"] == "network" && c["exit_code"] != 6)
        .unwrap_or_else(|| panic!("{}", calls_text(&ws)));
    assert_eq!(net["signals"], json!(["SIGINT"]), "{net}");
    assert_eq!(net["exit_code"], 8, "{net}");

    // The interrupted run can be resumed: what was cancelled or not reached runs again.
    ws.env.retain(|(k, _)| k != "FAKE_PULUMI_DELAY_MS_NETWORK");
    let since = ws.calls().len();
    let r = ws.strata(&["up", "--resume"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(up_projects(&ws, since).len(), 4, "{}", calls_text(&ws));
    assert!(!ws.exists(".strata/dev/lock"));
}

#[test]
fn lock_is_released_when_the_run_stops_with_a_configuration_error() {
    // A profile secret that is missing in a non-interactive run: exit 3, after the lock.
    let mut ws = workspace(
        "secrets:\n  - key: lab:token\n    prompt: Token\ninfrastructure:\n  - path: base/network\n",
    );
    ws.set_env("STRATA_PASSPHRASE", "store passphrase");
    ws.pulumi_project("base/network", "network", NETWORK);
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.all().contains("lab:token"), "{r:?}");
    assert!(!ws.exists(".strata/dev/lock"), "the lock outlived the run");
    assert!(up_projects(&ws, 0).is_empty());
}

// ---------------------------------------------------------------------------------------
// --resume and --changed
// ---------------------------------------------------------------------------------------

#[test]
fn resume_after_a_failure_reruns_only_the_failed_branch() {
    let mut ws = chain_workspace();
    ws.set_env("FAKE_PULUMI_FAIL_WEB", "up");
    let r = ws.strata(&["up", "--keep-going"]);
    assert_eq!(r.code, 1, "{r:?}");
    let first: Vec<(String, i64)> = ups(&ws, 0).into_iter().map(|(p, c, _)| (p, c)).collect();
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        [("network".into(), 0), ("side".into(), 0), ("web".into(), 1)],
        "{}",
        calls_text(&ws)
    );
    // The journal records the failure with its exit code.
    let recs = project_records(&ws);
    let web = recs.iter().find(|r| r["project"] == "apps/web").unwrap();
    assert_eq!(web["status"], "failed", "{web}");
    assert_eq!(web["exit_code"], 1, "{web}");
    let front = recs
        .iter()
        .find(|r| r["project"] == "apps/frontend")
        .unwrap();
    assert_ne!(front["status"], "succeeded", "{front}");

    ws.env.retain(|(k, _)| k != "FAKE_PULUMI_FAIL_WEB");
    let since = ws.calls().len();
    let r = ws.strata(&["up", "--resume"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        up_projects(&ws, since),
        BTreeSet::from(["web".to_string(), "frontend".to_string()]),
        "{}",
        calls_text(&ws)
    );
    for (_, code, _) in ups(&ws, since) {
        assert_eq!(code, 0);
    }
    // web still got network's output (read from its deployed stack).
    let web = the_up(&ws, since, "web");
    assert_eq!(web["config"]["web:vpc_id"], "vpc-id");

    // Everything succeeded: a second resume has nothing to do.
    let since = ws.calls().len();
    let r = ws.strata(&["up", "--resume"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(up_projects(&ws, since).is_empty(), "{}", calls_text(&ws));
}

#[test]
fn changed_after_a_clean_up_starts_no_pulumi_process_and_says_why() {
    let ws = chain_workspace();
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    let since = ws.calls().len();
    let r = ws.strata(&["up", "--changed"]);
    assert_eq!(r.code, 0, "{r:?}");
    let new_calls: Vec<Value> = ws.calls().into_iter().skip(since).collect();
    assert!(
        new_calls.is_empty(),
        "a no-change `up --changed` started Pulumi processes:\n{}",
        calls_text(&ws)
    );
    for p in ["base/network", "apps/web", "apps/frontend", "apps/side"] {
        let row = summary_row(&r, p);
        assert!(row.contains("skipped"), "{row}");
        assert!(row.contains("unchanged"), "the summary says why: {row}");
    }
    assert!(summary(&r).contains("0 processes started"), "{r:?}");

    // The same in JSON events.
    let r = ws.strata(&["up", "--changed", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.calls().len(), since, "{}", calls_text(&ws));
    let events = r.events();
    let skipped: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "project_finished" && e["status"] == "skipped")
        .collect();
    assert_eq!(skipped.len(), 4, "{events:#?}");
    for e in skipped {
        assert!(
            e["message"].as_str().unwrap_or("").contains("unchanged"),
            "why it was skipped: {e}"
        );
    }
}

#[test]
fn changed_file_reruns_that_project_and_what_its_changed_outputs_reach() {
    let ws = chain_workspace();
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    // A new file in apps/web: web re-runs; frontend (after it) only if web's outputs
    // changed, and they did not; network and side not at all.
    ws.write("projects/apps/web/notes.txt", "a change\n");
    let since = ws.calls().len();
    let r = ws.strata(&["up", "--changed"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        up_projects(&ws, since),
        BTreeSet::from(["web".to_string()]),
        "{}",
        calls_text(&ws)
    );
    let web = the_up(&ws, since, "web");
    assert_eq!(
        web["config"]["web:vpc_id"], "vpc-id",
        "inputs of a skipped upstream still arrive"
    );
    for p in ["base/network", "apps/side"] {
        let row = summary_row(&r, p);
        assert!(
            row.contains("skipped") && row.contains("unchanged"),
            "{row}"
        );
    }
    assert!(summary_row(&r, "apps/web").contains("succeeded"), "{r:?}");
    assert!(
        summary_row(&r, "apps/frontend").contains("upstream outputs unchanged"),
        "{r:?}"
    );

    // That run is now the last success: nothing left to do.
    let since = ws.calls().len();
    let r = ws.strata(&["up", "--changed"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.calls().len(), since, "{}", calls_text(&ws));

    // An edit of the upstream that keeps its outputs re-runs it alone.
    ws.write(
        "projects/base/network/Pulumi.yaml",
        &format!("name: network\nruntime: yaml\ndescription: edited\n{NETWORK}"),
    );
    let since = ws.calls().len();
    let r = ws.strata(&["up", "--changed"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        up_projects(&ws, since),
        BTreeSet::from(["network".to_string()]),
        "{}",
        calls_text(&ws)
    );
    // One that changes them re-runs what depends on it, as far as outputs change.
    ws.write(
        "projects/base/network/Pulumi.yaml",
        &format!(
            "name: network\nruntime: yaml\n{}",
            NETWORK.replace("outputs:\n", "outputs:\n  region: eu-west-1\n")
        ),
    );
    let since = ws.calls().len();
    let r = ws.strata(&["up", "--changed"]);
    assert_eq!(r.code, 0, "{r:?}");
    let ran = up_projects(&ws, since);
    assert!(
        ran.contains("network") && ran.contains("web") && ran.contains("side"),
        "{ran:?} {}",
        calls_text(&ws)
    );
}

// ---------------------------------------------------------------------------------------
// status and outputs
// ---------------------------------------------------------------------------------------

#[test]
fn status_shows_last_result_of_every_project() {
    let mut ws = chain_workspace();
    ws.set_env("FAKE_PULUMI_FAIL_WEB", "up");
    let r = ws.strata(&["up", "--keep-going"]);
    assert_eq!(r.code, 1, "{r:?}");
    ws.env.retain(|(k, _)| k != "FAKE_PULUMI_FAIL_WEB");
    let since = ws.calls().len();

    // Human.
    let r = ws.strata(&["status"]);
    assert_eq!(r.code, 0, "{r:?}");
    for (p, want) in [
        ("base/network", "succeeded"),
        ("apps/web", "failed"),
        ("apps/side", "succeeded"),
    ] {
        let line = r
            .stdout
            .lines()
            .find(|l| l.contains(p))
            .unwrap_or_else(|| panic!("{p} missing: {r:?}"));
        assert!(line.contains(want), "{p} should be {want}: {line}");
        assert!(line.contains("up"), "{p}: the operation: {line}");
    }
    assert!(
        r.stdout.contains("apps/frontend"),
        "every project of the profile: {r:?}"
    );

    // JSON.
    let r = ws.strata(&["status", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let entries = status_entries(&json_docs(&r));
    let net = entry_for(&entries, "base/network");
    assert_eq!(
        field(net, &["operation", "last_operation"]),
        Some(&json!("up")),
        "{net}"
    );
    assert_eq!(
        field(net, &["status", "result"]),
        Some(&json!("succeeded")),
        "{net}"
    );
    assert!(
        field(
            net,
            &["ended_at", "when", "finished_at", "started_at", "at"]
        )
        .is_some_and(Value::is_string),
        "when: {net}"
    );
    assert!(
        field(net, &["duration_ms", "duration"]).is_some(),
        "how long: {net}"
    );
    assert_eq!(changed_flag(net), Some(false), "{net}");
    let web = entry_for(&entries, "apps/web");
    assert_eq!(
        field(web, &["status", "result"]),
        Some(&json!("failed")),
        "{web}"
    );
    let front = entry_for(&entries, "apps/frontend");
    assert_ne!(
        field(front, &["status", "result"]),
        Some(&json!("succeeded")),
        "{front}"
    );

    // A changed file shows as changed inputs; the others do not.
    ws.write("projects/base/network/extra.txt", "x");
    let r = ws.strata(&["status", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let entries = status_entries(&json_docs(&r));
    assert_eq!(
        changed_flag(entry_for(&entries, "base/network")),
        Some(true),
        "{entries:#?}"
    );
    assert_eq!(
        changed_flag(entry_for(&entries, "apps/side")),
        Some(false),
        "{entries:#?}"
    );
    // status reads local state only: no Pulumi process.
    assert_eq!(up_projects(&ws, since).len(), 0);
}

#[test]
fn status_before_any_run_lists_projects_as_never_run() {
    let ws = chain_workspace();
    let r = ws.strata(&["status", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let entries = status_entries(&json_docs(&r));
    for p in ["base/network", "apps/web", "apps/frontend", "apps/side"] {
        let e = entry_for(&entries, p);
        assert_ne!(
            field(e, &["status", "result"]),
            Some(&json!("succeeded")),
            "{e}"
        );
    }
}

#[test]
fn outputs_masks_secrets_unless_show_secrets() {
    const SECRET: &str = "outputs-secret-value-5150";
    let mut ws = workspace("infrastructure:\n  - path: base/network\n  - path: tools/report\n");
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.command_project(
        "tools/report",
        "printf '{\"endpoint\":\"https://report.example\"}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    ws.set_env(
        "FAKE_PULUMI_OUTPUTS_NETWORK",
        r#"{"vpc_id":"vpc-outputs-1"}"#,
    );
    ws.set_env(
        "FAKE_PULUMI_SECRET_OUTPUTS_NETWORK",
        &format!(r#"{{"db_password":"{SECRET}"}}"#),
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    // One project, human.
    let r = ws.strata(&["outputs", "base/network"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("vpc_id") && r.stdout.contains("vpc-outputs-1"),
        "{r:?}"
    );
    assert!(r.stdout.contains("db_password"), "{r:?}");
    assert!(
        !r.all().contains(SECRET),
        "masked without --show-secrets: {r:?}"
    );

    let r = ws.strata(&["outputs", "base/network", "--show-secrets"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(SECRET), "{r:?}");

    // All projects, JSON (command projects too).
    let r = ws.strata(&["outputs", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.all().contains(SECRET), "{r:?}");
    let docs = json_docs(&r);
    assert_eq!(
        values_of_key(&docs, "vpc_id"),
        [&json!("vpc-outputs-1")],
        "{docs:#?}"
    );
    assert_eq!(
        values_of_key(&docs, "endpoint"),
        [&json!("https://report.example")],
        "{docs:#?}"
    );
    let masked = values_of_key(&docs, "db_password");
    assert_eq!(masked.len(), 1, "{docs:#?}");
    assert_ne!(masked[0], &json!(SECRET));

    // One project, JSON, secrets shown.
    let r = ws.strata(&[
        "outputs",
        "base/network",
        "--show-secrets",
        "--output",
        "json",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let docs = json_docs(&r);
    assert_eq!(
        values_of_key(&docs, "db_password"),
        [&json!(SECRET)],
        "{docs:#?}"
    );
    assert_eq!(values_of_key(&docs, "vpc_id"), [&json!("vpc-outputs-1")]);
    assert!(
        values_of_key(&docs, "endpoint").is_empty(),
        "only that project: {docs:#?}"
    );
}

/// On Pulumi Cloud (a backend that is not `file://`) and without STRATA_ORG/PULUMI_ORG,
/// the organization for stack references is the `pulumi whoami` user, asked once per run.
#[test]
fn on_pulumi_cloud_strata_org_is_the_whoami_user_asked_once() {
    let mut ws = chain_workspace();
    // The fake's Pulumi Cloud stand-in, whose default organization is not the user.
    ws.set_env("PULUMI_BACKEND_URL", "https://api.pulumi.com");
    ws.set_env(
        "FAKE_PULUMI_CLOUD_DIR",
        ws.root.join("cloud-state").to_str().unwrap(),
    );
    ws.set_env("FAKE_PULUMI_USER", "alice");
    ws.set_env("FAKE_PULUMI_DEFAULT_ORG", "acme-default");
    ws.set_env("FAKE_PULUMI_LOG_ENV", "STRATA_ORG");
    let whoamis = |ws: &Ws| {
        ws.calls()
            .into_iter()
            .filter(|c| c["event"] == "start" && c["command"] == "whoami")
            .count()
    };
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(whoamis(&ws), 1, "whoami once per run, not per project");
    let ups: Vec<Value> = ws
        .calls()
        .into_iter()
        .filter(|c| c["event"] == "start" && c["command"] == "up")
        .collect();
    // Not a file backend: the first `up` of each project finds no stack (exit 6), then
    // strata runs `stack init` and the `up` again.
    let projects: BTreeSet<String> = ups
        .iter()
        .filter_map(|c| c["project"].as_str().map(String::from))
        .collect();
    assert_eq!(projects.len(), 4, "{ups:#?}");
    for c in ups {
        assert_eq!(c["env"]["STRATA_ORG"], "alice", "{c}");
    }
    // With STRATA_ORG in the environment file, whoami is not asked.
    ws.env_file("PULUMI_STACK=dev\nSTRATA_ORG=acme\n");
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(whoamis(&ws), 1, "no second whoami");
}

// ---------------------------------------------------------------------------------
// Regressions found in review
// ---------------------------------------------------------------------------------

/// `up` = a Pulumi project `base/a` with a plain output `out` and a secret output
/// `tok`, and a command project `apps/b` taking both as inputs, which checks them and
/// prints only whether they match (and a hook that echoes the secret).
fn secret_pair_workspace() -> Ws {
    let mut ws = workspace(
        "infrastructure:\n  - path: base/a\n    on_success:\n      - run: echo \"hook sees ${outputs.tok}\"\n  - path: apps/b\n    inputs:\n      b:o: base/a:out\n      b:t: base/a:tok\n",
    );
    ws.pulumi_project("base/a", "a", "outputs:\n  out: hello\n");
    ws.set_env(
        "FAKE_PULUMI_SECRET_OUTPUTS_A",
        r#"{"tok":"SUPERSECRETOUT"}"#,
    );
    ws.command_project(
        "apps/b",
        "test \"$STRATA_INPUT_B_O\" = hello && test \"$STRATA_INPUT_B_T\" = SUPERSECRETOUT && echo inputs-ok; echo \"b sees $STRATA_INPUT_B_T\"; env | sort > \"$HOME/b-env\"",
        "true",
    );
    ws
}

#[test]
fn a_piecemeal_run_hands_downstream_the_secret_output_not_its_mask() {
    let ws = secret_pair_workspace();
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("inputs-ok"), "{r:?}");
    let r = ws.strata(&["up", "--project", "apps/b"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("inputs-ok"),
        "the secret input arrives in plaintext when its upstream is not run: {r:?}"
    );
}

#[test]
fn secret_outputs_are_redacted_in_hooks_command_output_and_logs() {
    let ws = secret_pair_workspace();
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("hook sees [secret]"), "{r:?}");
    assert!(r.stdout.contains("b sees [secret]"), "{r:?}");
    assert!(!r.all().contains("SUPERSECRETOUT"), "{r:?}");
    for (path, bytes) in ws.files_under(".strata/dev") {
        if path.components().any(|c| c.as_os_str() == "backend") {
            continue; // the fake's own (encrypted) state
        }
        assert!(
            !String::from_utf8_lossy(&bytes).contains("SUPERSECRETOUT"),
            "secret output in {}",
            path.display()
        );
    }
}

#[test]
fn children_never_get_stratas_own_secret_variables() {
    let mut ws = secret_pair_workspace();
    ws.set_env("STRATA_PASSPHRASE", "age-pass-XYZ");
    ws.set_env("STRATA_SECRET_OTHER_PW", "other-SECRET2");
    ws.set_env(
        "FAKE_PULUMI_LOG_ENV",
        "STRATA_PASSPHRASE,STRATA_SECRET_OTHER_PW",
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let env = ws.read("home/b-env");
    assert!(!env.contains("STRATA_PASSPHRASE="), "{env}");
    assert!(!env.contains("STRATA_SECRET_OTHER_PW="), "{env}");
    for c in ws.calls() {
        if let Some(e) = c["env"].as_object() {
            assert!(!e.contains_key("STRATA_PASSPHRASE"), "{c}");
            assert!(!e.contains_key("STRATA_SECRET_OTHER_PW"), "{c}");
        }
    }
    assert!(!r.all().contains("age-pass-XYZ") && !r.all().contains("other-SECRET2"));
}

#[test]
fn changed_after_destroy_runs_everything_again() {
    let ws = chain_workspace();
    assert_eq!(ws.strata(&["up"]).code, 0);
    let r = ws.strata(&["destroy", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let before = ws.calls().len();
    let r = ws.strata(&["up", "--changed", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let finished = r
        .events()
        .into_iter()
        .find(|e| e["event"] == "run_finished")
        .expect("run_finished");
    assert_eq!(finished["counts"]["succeeded"], 4, "{r:?}");
    assert_eq!(finished["counts"]["skipped"], 0, "{r:?}");
    assert!(ws.calls().len() > before);
}

#[test]
fn json_stdout_holds_only_the_documented_events_even_with_a_warning() {
    let ws = chain_workspace();
    let host = String::from_utf8(Command::new("hostname").output().unwrap().stdout).unwrap();
    ws.write(
        ".strata/dev/lock",
        &json!({"pid": 999_999_999u64, "host": host.trim(), "command": "strata up", "since": "2020-01-01T00:00:00Z"})
            .to_string(),
    );
    let r = ws.strata(&["up", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let documented = [
        "run_started",
        "project_started",
        "project_output",
        "project_finished",
        "hook_finished",
        "run_finished",
    ];
    for e in r.events() {
        let name = e["event"].as_str().unwrap_or("");
        assert!(
            documented.contains(&name),
            "undocumented event on stdout: {e}"
        );
    }
    assert!(
        r.stderr.contains("taking over"),
        "the warning goes to stderr: {r:?}"
    );
}

#[test]
fn a_failing_hooks_output_is_in_the_failure_summary() {
    let ws = workspace(
        "infrastructure:\n  - path: base/a\n    on_success:\n      - run: echo hook-broke-here; exit 4\n",
    );
    ws.pulumi_project("base/a", "a", &simple("a"));
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains("│ hook-broke-here"), "{r:?}");
}

/// Issue 25: all six `local` projects source `projects/local/lib.sh`; after editing it,
/// `up --changed` skipped all six as unchanged. The profile's `watch:` makes it part of
/// each fingerprint. An environment-file value is an input too; a secret-looking one is
/// not (a rotated token changes no infrastructure).
#[test]
fn changed_sees_watched_files_and_environment_values() {
    let ws = Ws::new();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (from, to) in [
        ("providers/local.yaml", "providers/local.yaml"),
        ("projects/local", "projects/local"),
    ] {
        copy_path(&repo.join(from), &ws.path(to));
    }
    let up = [
        "up",
        "--provider",
        "local",
        "--stack",
        "dev",
        "--output",
        "json",
    ];
    let changed = [
        "up",
        "--provider",
        "local",
        "--stack",
        "dev",
        "--changed",
        "--output",
        "json",
    ];
    assert_eq!(ws.strata(&up).code, 0);
    let ran = |r: &Run| -> usize {
        r.events()
            .iter()
            .filter(|e| e["event"] == "project_finished" && e["status"] == "succeeded")
            .count()
    };
    let r = ws.strata(&changed);
    assert_eq!((r.code, ran(&r)), (0, 0), "{r:?}");

    let lib = ws.path("projects/local/lib.sh");
    let text = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(&lib, format!("{text}\n# a helper changed\n")).unwrap();
    let r = ws.strata(&changed);
    assert_eq!(
        (r.code, ran(&r)),
        (0, 6),
        "lib.sh is read by all six: {r:?}"
    );

    ws.write(
        "config/pulumi/environment",
        &format!(
            "{}LOCAL_TIER=gold\n",
            ws.read_opt("config/pulumi/environment")
        ),
    );
    let r = ws.strata(&changed);
    assert_eq!((r.code, ran(&r)), (0, 6), "an environment value: {r:?}");
    ws.write(
        "config/pulumi/environment",
        &format!(
            "{}API_TOKEN=t-1\n",
            ws.read_opt("config/pulumi/environment")
        ),
    );
    let r = ws.strata(&changed);
    assert_eq!((r.code, ran(&r)), (0, 0), "a token is not an input: {r:?}");
}
