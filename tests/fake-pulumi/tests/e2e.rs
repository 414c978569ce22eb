//! End to end: drives the built `pulumi` double the way strata does.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_pulumi");

const VPC: &str = r#"name: vpc
runtime: yaml
config:
  cidr:
    type: string
    default: 10.0.0.0/16
resources:
  net:
    type: fake:index:Vpc
    properties:
      cidr: ${cidr}
      name: vpc-${pulumi.stack}
  subnet:
    type: fake:index:Subnet
    properties:
      vpcId: ${net.id}
      region: ${aws:region}
outputs:
  vpc_id: ${net.id}
  region: ${subnet.region}
  token:
    fn::secret: tok-${pulumi.stack}
"#;

const EKS: &str = r#"name: eks
runtime: yaml
resources:
  vpc:
    type: pulumi:pulumi:StackReference
    properties:
      name: ${pulumi.organization}/vpc/${pulumi.stack}
  cluster:
    type: fake:eks:Cluster
    properties:
      vpcId: ${vpc.outputs["vpc_id"]}
outputs:
  cluster_vpc: ${cluster.vpcId}
  upstream_token: ${vpc.outputs.token}
"#;

/// A temp workspace: projects, a shared stack config file and a file backend.
struct Ws {
    root: PathBuf,
}

impl Ws {
    fn new(name: &str) -> Ws {
        static N: AtomicUsize = AtomicUsize::new(0);
        let root = std::env::temp_dir().join(format!(
            "fake-pulumi-e2e-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("backend")).unwrap();
        for (dir, text) in [("vpc", VPC), ("eks", EKS)] {
            std::fs::create_dir_all(root.join(dir)).unwrap();
            std::fs::write(root.join(dir).join("Pulumi.yaml"), text).unwrap();
        }
        std::fs::write(
            root.join("stack.yaml"),
            "config:\n  aws:region: us-west-2\n  kubernetes:infra_type: AWS\n",
        )
        .unwrap();
        Ws { root }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.join(p)
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", &self.root)
            .env(
                "PULUMI_BACKEND_URL",
                format!("file://{}", self.path("backend").display()),
            )
            .env("PULUMI_CONFIG_PASSPHRASE", "pw")
            .env("FAKE_PULUMI_LOG", self.path("calls.jsonl"))
            .stdin(Stdio::null());
        c
    }

    /// `pulumi <args> --cwd <project> --stack dev [--config-file stack.yaml]
    /// --non-interactive` (`stack` commands have no `--config-file`, as in the real CLI).
    fn std_args(&self, project: &str, args: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend([
            "--cwd".into(),
            self.path(project).display().to_string(),
            "--stack".into(),
            "dev".into(),
        ]);
        if !matches!(args.first(), Some(&"stack") | Some(&"cancel")) {
            v.extend([
                "--config-file".into(),
                self.path("stack.yaml").display().to_string(),
            ]);
        }
        v.push("--non-interactive".into());
        v
    }

    /// `pulumi` with `std_args` and `env` on top of `cmd`'s environment.
    fn std_cmd(&self, project: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
        let a = self.std_args(project, args);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let mut c = self.cmd(&a);
        c.envs(env.iter().copied());
        c
    }

    fn run(&self, project: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.std_cmd(project, args, env).output().unwrap()
    }

    fn ok(&self, project: &str, args: &[&str]) -> Output {
        let out = self.run(project, args, &[]);
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            text(&out.stderr)
        );
        out
    }

    fn spawn(&self, project: &str, args: &[&str], env: &[(&str, &str)]) -> Child {
        let mut c = self.std_cmd(project, args, env);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c.spawn().unwrap()
    }

    /// `stack output --json` and `extra` flags, parsed.
    fn outputs(&self, project: &str, extra: &[&str]) -> Value {
        let mut args = vec!["stack", "output", "--json"];
        args.extend(extra);
        serde_json::from_slice(&self.ok(project, &args).stdout).unwrap()
    }

    fn state(&self, project: &str) -> Value {
        let p = self
            .path("backend")
            .join(format!(".pulumi/stacks/{project}/dev.json"));
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    fn calls(&self) -> Vec<Value> {
        std::fs::read_to_string(self.path("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for Ws {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

fn events(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

const UP: &[&str] = &["up", "--yes", "--skip-preview"];

fn up_json(ws: &Ws, project: &str) -> Vec<Value> {
    let mut a = UP.to_vec();
    a.push("--json");
    events(&ws.ok(project, &a))
}

fn resources_in_state(ws: &Ws, project: &str) -> Vec<String> {
    ws.state(project)["checkpoint"]["latest"]["resources"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|r| {
                    r["urn"]
                        .as_str()
                        .unwrap()
                        .rsplit("::")
                        .next()
                        .unwrap()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn init_up_outputs_reference_destroy() {
    let ws = Ws::new("flow");
    ws.ok("vpc", &["stack", "init"]);
    // `stack init` has no --config-file: its salt goes beside the project.
    let own = std::fs::read_to_string(ws.path("vpc/Pulumi.dev.yaml")).unwrap();
    assert!(own.starts_with("encryptionsalt: v1:"), "{own}");

    let evs = up_json(&ws, "vpc");
    for (i, e) in evs.iter().enumerate() {
        assert_eq!(e["sequence"], json!(i));
        assert!(e["timestamp"].is_u64());
        let kinds: Vec<&String> = e
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "sequence" && *k != "timestamp")
            .collect();
        assert_eq!(kinds.len(), 1, "{e}");
    }
    assert!(evs[0].get("preludeEvent").is_some());
    assert_eq!(evs[0]["preludeEvent"]["config"]["aws:region"], "us-west-2");
    assert!(evs.last().unwrap().get("cancelEvent").is_some());
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"create": 3}));
    assert_eq!(summary["isPreview"], json!(false));
    let stack_urn = "urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev";
    let first_pre = evs.iter().find_map(|e| e.get("resourcePreEvent")).unwrap();
    assert_eq!(first_pre["metadata"]["urn"], stack_urn);
    let last_out = evs
        .iter()
        .rev()
        .find_map(|e| e.get("resOutputsEvent"))
        .unwrap();
    assert_eq!(last_out["metadata"]["urn"], stack_urn);
    assert_eq!(
        last_out["metadata"]["new"]["outputs"],
        json!({"vpc_id": "net-id", "region": "us-west-2", "token": {
            "4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270",
            "ciphertext": "[secret]"
        }}),
        "engine events serialize a secret with its signature, as the real CLI does"
    );
    assert!(!text(&ws.ok("vpc", &["stack", "output", "--json"]).stdout).contains("tok-dev"));

    // stack output: masked, then shown.
    let masked = ws.outputs("vpc", &[]);
    assert_eq!(masked["token"], "[secret]");
    let shown = ws.outputs("vpc", &["--show-secrets"]);
    assert_eq!(shown["token"], "tok-dev");
    // The secret is encrypted at rest.
    let raw = std::fs::read_to_string(ws.path("backend/.pulumi/stacks/vpc/dev.json")).unwrap();
    assert!(!raw.contains("tok-dev") && raw.contains("ciphertext"));

    // A second project reads the first through a stack reference.
    ws.ok("eks", &["stack", "init"]);
    ws.ok("eks", UP);
    let eks = ws.outputs("eks", &["--show-secrets"]);
    assert_eq!(
        eks,
        json!({"cluster_vpc": "net-id", "upstream_token": "tok-dev"})
    );

    // A second up changes nothing.
    let evs = up_json(&ws, "vpc");
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"same": 3}));

    // destroy keeps the stack, empties it.
    let evs = events(&ws.ok("vpc", &["destroy", "--yes", "--skip-preview", "--json"]));
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"delete": 3}));
    assert!(resources_in_state(&ws, "vpc").is_empty());
    let outs = ws.outputs("vpc", &[]);
    assert_eq!(outs, json!({}));

    // A stack that does not exist: exit 6.
    let eks = ws.path("eks").display().to_string();
    let out = ws
        .cmd(&["up", "--yes", "--cwd", &eks, "--stack", "prod"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(6), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("error: no stack named 'prod' found"));
}

#[test]
fn stack_reference_to_a_missing_stack_fails_the_update() {
    let ws = Ws::new("ref");
    ws.ok("eks", &["stack", "init"]);
    let out = ws.run("eks", &["up", "--yes", "--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&out);
    let diag: Vec<&Value> = evs
        .iter()
        .filter_map(|e| e.get("diagnosticEvent"))
        .collect();
    assert!(
        diag[0]["message"]
            .as_str()
            .unwrap()
            .contains("unknown stack \"organization/vpc/dev\"")
    );
    assert!(evs.iter().any(|e| e.get("resOpFailedEvent").is_some()));
}

/// cobra refuses a flag the command does not have, exit 2, before it runs.
#[test]
fn unknown_flags_are_refused_per_command() {
    let ws = Ws::new("flags");
    let cwd = ws.path("vpc").display().to_string();
    for argv in [
        vec!["stack", "init", "--stack", "dev", "--config-file", "x.yaml"],
        vec![
            "stack",
            "output",
            "--json",
            "--stack",
            "dev",
            "--config-file",
            "x.yaml",
        ],
        vec!["preview", "--stack", "dev", "--yes"],
        vec!["up", "--stack", "dev", "--yes", "--no-such-flag"],
    ] {
        let mut a = argv.clone();
        a.extend(["--cwd", cwd.as_str()]);
        let out = ws.cmd(&a).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{argv:?}");
        assert!(
            text(&out.stderr).contains("unknown flag: --"),
            "{argv:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn cli_contract_errors() {
    let ws = Ws::new("errors");
    // No stack yet: 6.
    let out = ws.run("vpc", UP, &[]);
    assert_eq!(out.status.code(), Some(6));
    ws.ok("vpc", &["stack", "init"]);
    let out = ws.run("vpc", &["stack", "init"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("already exists"));
    // Non-interactive without --yes: 2.
    let out = ws.run("vpc", &["up"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains(
        "--yes or --skip-preview must be passed in to proceed when running in non-interactive mode"
    ));
    // No passphrase.
    let a = ws.std_args("vpc", UP);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let out = ws
        .cmd(&a)
        .env_remove("PULUMI_CONFIG_PASSPHRASE")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("passphrase must be set"));
    // Wrong passphrase (once the shared config holds the stack's salt).
    ws.ok("vpc", UP);
    let out = ws.run("vpc", UP, &[("PULUMI_CONFIG_PASSPHRASE", "nope")]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("incorrect passphrase"));
    // Unknown command.
    let out = ws.cmd(&["frobnicate"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("unknown command \"frobnicate\" for \"pulumi\""));
    // No project.
    let out = ws
        .cmd(&["up", "--cwd", "/", "-s", "dev", "--yes"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no Pulumi.yaml project file found"));
    assert_eq!(
        text(&ws.cmd(&["version"]).output().unwrap().stdout),
        "v3.230.0\n"
    );
}

#[test]
fn secrets_through_stdin_config_and_hooks() {
    let ws = Ws::new("hooks");
    ws.ok("vpc", &["stack", "init"]);
    let a = ws.std_args("vpc", &["config", "set", "--secret", "dbpass"]);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let mut child = ws.cmd(&a).stdin(Stdio::piped()).spawn().unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"s3cr3t\n").unwrap();
    assert!(child.wait().unwrap().success());
    let cfg = std::fs::read_to_string(ws.path("stack.yaml")).unwrap();
    assert!(cfg.contains("vpc:dbpass:") && cfg.contains("secure: v1:") && !cfg.contains("s3cr3t"));

    let listed: Value =
        serde_json::from_slice(&ws.ok("vpc", &["config", "--json"]).stdout).unwrap();
    assert_eq!(listed["vpc:dbpass"], json!({"secret": true}));
    assert_eq!(listed["aws:region"]["value"], "us-west-2");

    // Expected config (decrypted) passes; a mismatch is exit 2.
    let want = r#"{"aws:region":"us-west-2","vpc:dbpass":"s3cr3t"}"#;
    let out = ws.run("vpc", UP, &[("FAKE_PULUMI_EXPECT_CONFIG_VPC", want)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = ws.run(
        "vpc",
        UP,
        &[("FAKE_PULUMI_EXPECT_CONFIG_VPC", r#"{"cidr":"x"}"#)],
    );
    assert_eq!(out.status.code(), Some(2));

    // Extra outputs, secret outputs.
    ws.run(
        "vpc",
        UP,
        &[
            ("FAKE_PULUMI_OUTPUTS_VPC", r#"{"extra":"x"}"#),
            ("FAKE_PULUMI_SECRET_OUTPUTS_VPC", r#"{"kubeconfig":"kc"}"#),
        ],
    );
    let outs = ws.outputs("vpc", &[]);
    assert_eq!(outs["extra"], "x");
    assert_eq!(outs["kubeconfig"], "[secret]");

    // A failing update: diagnostics, resOpFailedEvent, summary; the chosen exit code.
    let out = ws.run(
        "vpc",
        &["up", "--yes", "--skip-preview", "--json"],
        &[
            ("FAKE_PULUMI_FAIL_VPC", "destroy,up"),
            ("FAKE_PULUMI_FAIL_CODE", "4"),
        ],
    );
    assert_eq!(out.status.code(), Some(4));
    let evs = events(&out);
    assert!(evs.iter().any(|e| e.get("resOpFailedEvent").is_some()));
    assert!(
        evs.iter()
            .any(|e| e["diagnosticEvent"]["message"] == "update failed\n")
    );
    assert!(evs.iter().any(|e| e.get("summaryEvent").is_some()));

    // preview --json is one document.
    let out = ws.ok("vpc", &["preview", "--json"]);
    let digest: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(digest["steps"].as_array().unwrap().len() >= 3);
    assert!(digest["changeSummary"].is_object());
    assert_eq!(digest["config"]["vpc:dbpass"], "[secret]");

    // The call log: start and end lines with what strata must get right.
    let calls = ws.calls();
    let end = calls
        .iter()
        .rev()
        .find(|c| c["event"] == "end" && c["command"] == "preview")
        .unwrap();
    assert_eq!(end["exit_code"], 0);
    assert_eq!(end["project"], "vpc");
    assert_eq!(end["stack"], "dev");
    assert_eq!(end["stdin"], "null");
    assert_eq!(end["config"]["vpc:dbpass"], "[secure]");
    assert!(
        end["env"]["PULUMI_BACKEND_URL"]
            .as_str()
            .unwrap()
            .starts_with("file://")
    );
    assert!(
        !std::fs::read_to_string(ws.path("calls.jsonl"))
            .unwrap()
            .contains("s3cr3t")
    );
}

/// Reads the child's stdout until a line contains `needle`.
fn wait_for(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    needle: &str,
) -> Vec<String> {
    let mut seen = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        let hit = l.contains(needle);
        seen.push(l);
        if hit {
            return seen;
        }
    }
    panic!("never saw {needle}: {seen:?}");
}

fn sigint(child: &Child) {
    // SAFETY: sending a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
}

/// The child's stdout, line by line.
type Lines = std::io::Lines<BufReader<ChildStdout>>;

/// Starts `up --json` on a new `vpc` stack with `env` and sends it SIGINT once its first
/// resource is in flight.
fn sigint_mid_update(ws: &Ws, env: &[(&str, &str)]) -> (Child, Lines) {
    ws.ok("vpc", &["stack", "init"]);
    let mut child = ws.spawn("vpc", &["up", "--yes", "--skip-preview", "--json"], env);
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    wait_for(&mut lines, "fake:index:Vpc::net");
    sigint(&child);
    (child, lines)
}

#[test]
fn first_sigint_cancels_and_saves() {
    let ws = Ws::new("sigint1");
    let (mut child, mut lines) = sigint_mid_update(&ws, &[("FAKE_PULUMI_DELAY_MS_VPC", "30000")]);
    let sent = Instant::now();
    let rest = wait_for(&mut lines, "cancelEvent");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(8));
    // Noticed at once: the step in flight completes without waiting out its 10 s (a
    // bound far from both, so a loaded machine cannot break it).
    assert!(
        sent.elapsed() < Duration::from_secs(8),
        "{:?}",
        sent.elapsed()
    );
    assert!(rest.iter().any(|l| l.contains("^C received; cancelling")));
    // The resource in flight completed and was saved; the next one never started.
    assert_eq!(resources_in_state(&ws, "vpc"), ["vpc-dev", "net"]);
    let calls = ws.calls();
    assert!(
        calls
            .iter()
            .any(|c| c["event"] == "signal" && c["signal"] == "SIGINT")
    );
    let end = calls.iter().rev().find(|c| c["event"] == "end").unwrap();
    assert_eq!(
        (end["exit_code"].clone(), end["signals"].clone()),
        (json!(8), json!(["SIGINT"]))
    );
    // The lock was released: a new update runs.
    ws.ok("vpc", UP);
    assert_eq!(resources_in_state(&ws, "vpc"), ["vpc-dev", "net", "subnet"]);
}

#[test]
fn second_sigint_terminates_without_saving() {
    let ws = Ws::new("sigint2");
    let (mut child, mut lines) = sigint_mid_update(
        &ws,
        &[
            ("FAKE_PULUMI_DELAY_MS_VPC", "3000"),
            ("FAKE_PULUMI_CANCEL_MS", "5000"),
        ],
    );
    wait_for(&mut lines, "^C received; cancelling");
    std::thread::sleep(Duration::from_millis(100));
    assert!(child.try_wait().unwrap().is_none(), "still cancelling");
    sigint(&child);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(255));
    assert!(resources_in_state(&ws, "vpc").is_empty());
    // Killed mid-update, it left its lock, as Pulumi does; `pulumi cancel` clears it.
    let out = ws.run("vpc", UP, &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("the stack is currently locked by 1 lock(s)"));
    ws.ok("vpc", &["cancel", "--yes"]);
    ws.ok("vpc", UP);
}

#[test]
fn ignored_first_sigint_then_terminate() {
    let ws = Ws::new("ignore");
    let (mut child, _lines) = sigint_mid_update(
        &ws,
        &[
            ("FAKE_PULUMI_DELAY_MS", "3000"),
            ("FAKE_PULUMI_IGNORE_SIGINT", "1"),
        ],
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the first SIGINT was not ignored"
    );
    sigint(&child);
    assert_eq!(child.wait().unwrap().code(), Some(255));
    let signals: Vec<Value> = ws
        .calls()
        .into_iter()
        .filter(|c| c["event"] == "signal")
        .collect();
    assert_eq!(signals.len(), 2);
}

#[test]
fn own_process_group_is_reported() {
    let ws = Ws::new("pgroup");
    let mut c = ws.cmd(&["version"]);
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    assert!(c.status().unwrap().success());
    let start = ws
        .calls()
        .into_iter()
        .find(|c| c["event"] == "start")
        .unwrap();
    assert_eq!(start["own_pgroup"], true);
    assert_eq!(start["pgid"], start["pid"]);
}

// ---------------------------------------------------------------------------------------
// Update plans (`preview --save-plan`, `up --plan`), as the real CLI v3.274.1 does them:
// docs/research/pulumi-update-plans.md. No test sets PULUMI_EXPERIMENTAL (`cmd` clears
// the environment): neither flag needs it.

fn plan_file(ws: &Ws) -> Value {
    serde_json::from_str(&std::fs::read_to_string(ws.path("plan.json")).unwrap()).unwrap()
}

fn save_plan(ws: &Ws, project: &str) -> Output {
    let plan = ws.path("plan.json").display().to_string();
    let out = ws.ok(project, &["preview", "--save-plan", &plan]);
    assert!(
        text(&out.stderr).contains(&format!(
            "Update plan written to '{plan}'\nRun `pulumi up --plan='{plan}'` to constrain the \
             update to the operations planned by this preview"
        )),
        "{}",
        text(&out.stderr)
    );
    out
}

fn up_plan(ws: &Ws, project: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let plan = ws.path("plan.json").display().to_string();
    let mut a = vec!["up", "--yes", "--plan", &plan];
    a.extend(extra);
    ws.run(project, &a, env)
}

fn violations(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .filter_map(|e| e.get("diagnosticEvent"))
        .filter(|d| d["severity"] == "error")
        .map(|d| d["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn save_plan_then_apply_it_twice() {
    let ws = Ws::new("plan");
    ws.ok("vpc", &["stack", "init"]);
    // A never-deployed stack: every step is a create.
    save_plan(&ws, "vpc");
    let plan = plan_file(&ws);
    let keys: Vec<&String> = plan.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["config", "manifest", "resourcePlans"]);
    assert_eq!(plan["manifest"]["version"], "v3.230.0");
    assert!(plan["manifest"]["magic"].as_str().unwrap().len() == 64);
    // The config file's values, as written (the stack's salt is not config).
    assert_eq!(plan["config"]["aws:region"], "us-west-2");
    assert!(
        plan["config"].get("vpc:cidr").is_none(),
        "no project defaults"
    );
    let rp = &plan["resourcePlans"];
    let net = &rp["urn:pulumi:dev::vpc::fake:index:Vpc::net"];
    assert_eq!(net["steps"], json!(["create"]));
    assert_eq!(net["goal"]["type"], "fake:index:Vpc");
    assert_eq!(net["goal"]["name"], "net");
    assert_eq!(net["goal"]["custom"], true);
    assert_eq!(
        net["goal"]["inputDiff"]["adds"],
        json!({"cidr": "10.0.0.0/16", "name": "vpc-dev"})
    );
    assert_eq!(
        net["goal"]["parent"],
        "urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev"
    );
    assert!(net["seed"].is_string());
    let stack = &rp["urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev"];
    assert_eq!(stack["goal"]["custom"], false);
    assert_eq!(stack["state"]["vpc_id"], "net-id");
    // Secrets are the stack's ciphertext, with Pulumi's signature.
    let token = &stack["state"]["token"];
    assert_eq!(
        token["4dabf18193072939515e22adb298388d"],
        "1b47061264138c4ac30d75fd1eb44270"
    );
    assert!(token["ciphertext"].as_str().unwrap().starts_with("v1:"));
    let raw = std::fs::read_to_string(ws.path("plan.json")).unwrap();
    assert!(!raw.contains("tok-dev"));
    assert!(raw.starts_with("{\n    \"manifest\": {\n") && raw.ends_with("}\n"));

    // strata's argv: --skip-preview --json.
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let evs = events(&out);
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"create": 3}));
    // Pulumi itself accepts the same plan again: a planned create allows a same.
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let evs = events(&out);
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"same": 3}));

    // `preview --json --save-plan`: the usual document, no note on stderr.
    let plan_path = ws.path("plan2.json").display().to_string();
    let out = ws.ok("vpc", &["preview", "--json", "--save-plan", &plan_path]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["changeSummary"], json!({"same": 3}));
    assert_eq!(text(&out.stderr), "");
    let plan2: Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    assert_eq!(
        plan2["resourcePlans"]["urn:pulumi:dev::vpc::fake:index:Vpc::net"]["steps"],
        json!(["same"])
    );
    // --show-secrets writes them in plaintext form.
    ws.ok(
        "vpc",
        &["preview", "--show-secrets", "--save-plan", &plan_path],
    );
    let plan3: Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    assert_eq!(
        plan3["resourcePlans"]["urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev"]["state"]["token"]
            ["plaintext"],
        "\"tok-dev\""
    );
    // A failed preview writes no plan.
    let failing = ws.path("failed.json").display().to_string();
    let out = ws.run(
        "vpc",
        &["preview", "--save-plan", &failing],
        &[("FAKE_PULUMI_FAIL_VPC", "preview")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!ws.path("failed.json").exists());
}

#[test]
fn up_plan_refuses_a_code_or_config_change_and_applies_nothing() {
    let ws = Ws::new("plan-refuse");
    ws.ok("vpc", &["stack", "init"]);
    ws.ok("vpc", UP);
    save_plan(&ws, "vpc");
    let before = ws.state("vpc");

    // The program changed after the preview.
    let yaml = ws.path("vpc/Pulumi.yaml");
    std::fs::write(
        &yaml,
        VPC.replace("name: vpc-${pulumi.stack}", "name: vpcx-${pulumi.stack}"),
    )
    .unwrap();
    let want = "resource urn:pulumi:dev::vpc::fake:index:Vpc::net violates plan: \
                properties changed: =~name[{vpcx-dev}]";
    // Without --skip-preview the constrained preview fails: nothing on stderr, exit 1.
    let out = up_plan(&ws, "vpc", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains(&format!("error: {want}")));
    assert!(text(&out.stdout).starts_with("Previewing update (dev):"));
    assert!(!text(&out.stdout).contains("Updating (dev):"));
    assert_eq!(text(&out.stderr), "");
    // With strata's --skip-preview --json: an error diagnostic on the resource, no
    // resOpFailedEvent, no "update failed".
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&out);
    assert_eq!(violations(&evs), [format!("{want}\n")]);
    let diag = evs.iter().find_map(|e| e.get("diagnosticEvent")).unwrap();
    assert_eq!(diag["urn"], "urn:pulumi:dev::vpc::fake:index:Vpc::net");
    assert!(!evs.iter().any(|e| e.get("resOpFailedEvent").is_some()));
    assert!(evs.last().unwrap().get("cancelEvent").is_some());
    assert_eq!(text(&out.stderr), "");
    // `up --json --plan` without --skip-preview: only the preview's document.
    let out = up_plan(&ws, "vpc", &["--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let diags = doc["diagnostics"].as_array().unwrap();
    assert!(
        diags
            .iter()
            .any(|d| d["severity"] == "error" && d["message"] == format!("error: {want}\n"))
    );
    // Nothing was applied (the stack resource's timestamp and ciphertext may change).
    let custom = |st: &Value| -> Vec<Value> {
        st["checkpoint"]["latest"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["custom"] == true)
            .cloned()
            .collect()
    };
    assert_eq!(custom(&ws.state("vpc")), custom(&before));
    let outs = ws.outputs("vpc", &["--show-secrets"]);
    assert_eq!(
        outs,
        json!({"vpc_id": "net-id", "region": "us-west-2", "token": "tok-dev"})
    );
    std::fs::write(&yaml, VPC).unwrap();

    // A stack config change that reaches a resource's inputs.
    let cfg = ws.path("stack.yaml");
    let orig = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, orig.replace("us-west-2", "eu-west-1")).unwrap();
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        violations(&events(&out)),
        [
            "resource urn:pulumi:dev::vpc::fake:index:Subnet::subnet violates plan: \
          properties changed: =~region[{eu-west-1}]\n"
        ]
    );
    // A config key no resource reads is not checked: the plan's config is informational.
    std::fs::write(
        &cfg,
        orig.replace("config:\n", "config:\n  vpc:unused: x\n"),
    )
    .unwrap();
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    std::fs::write(&cfg, &orig).unwrap();

    // A resource gone from the program while the plan says same.
    std::fs::write(
        &yaml,
        VPC.replace(
            "  subnet:\n    type: fake:index:Subnet\n    properties:\n      vpcId: ${net.id}\n      region: ${aws:region}\n",
            "",
        )
        .replace("  region: ${subnet.region}\n", "  region: us-west-2\n"),
    )
    .unwrap();
    let out = up_plan(&ws, "vpc", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains(
            "error: delete is not allowed by the plan: this resource is constrained to same"
        ),
        "{}",
        text(&out.stdout)
    );
    assert!(resources_in_state(&ws, "vpc").contains(&"subnet".to_string()));

    // With --skip-preview, the steps before a violating one are applied (as for real:
    // the update runs unchecked until a resource leaves the plan).
    std::fs::write(
        &yaml,
        VPC.replace("vpc-${pulumi.stack}", "vpc2-${pulumi.stack}"),
    )
    .unwrap();
    save_plan(&ws, "vpc");
    std::fs::write(&cfg, orig.replace("us-west-2", "eu-west-1")).unwrap();
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(violations(&events(&out))[0].contains("::subnet violates plan"));
    let net = custom(&ws.state("vpc"))
        .into_iter()
        .find(|r| r["id"] == "net-id")
        .unwrap();
    assert_eq!(net["inputs"]["name"], "vpc2-dev");
    // Without it, nothing is.
    std::fs::write(
        &yaml,
        VPC.replace("vpc-${pulumi.stack}", "vpc3-${pulumi.stack}"),
    )
    .unwrap();
    std::fs::write(&cfg, &orig).unwrap();
    save_plan(&ws, "vpc");
    std::fs::write(&cfg, orig.replace("us-west-2", "eu-west-1")).unwrap();
    let out = up_plan(&ws, "vpc", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let net = custom(&ws.state("vpc"))
        .into_iter()
        .find(|r| r["id"] == "net-id")
        .unwrap();
    assert_eq!(net["inputs"]["name"], "vpc2-dev");
    std::fs::write(&cfg, &orig).unwrap();

    // A missing plan file: before the engine starts.
    let missing = ws.path("nope.json").display().to_string();
    let out = ws.run("vpc", &["up", "--yes", "--plan", &missing], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("error: open {missing}: no such file or directory\n")
    );
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn up_plan_and_upstream_outputs() {
    let ws = Ws::new("plan-upstream");
    ws.ok("vpc", &["stack", "init"]);
    ws.ok("vpc", UP);
    ws.ok("eks", &["stack", "init"]);
    ws.ok("eks", UP);
    save_plan(&ws, "eks");
    // StackReferences are not in plans.
    let plan = plan_file(&ws);
    assert!(
        plan["resourcePlans"]
            .get("urn:pulumi:dev::eks::pulumi:pulumi:StackReference::vpc")
            .is_none()
    );

    // An upstream output that only reaches a stack output: the real CLI fails the update
    // (exit 1) without any error message, and keeps the old outputs.
    let run = |env: &[(&str, &str)]| ws.run("vpc", UP, env);
    assert!(
        run(&[("FAKE_PULUMI_SECRET_OUTPUTS_VPC", r#"{"token":"t2"}"#)])
            .status
            .success()
    );
    let out = up_plan(&ws, "eks", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&out);
    assert!(violations(&evs).is_empty(), "{evs:?}");
    assert_eq!(text(&out.stderr), "");
    let outs = ws.outputs("eks", &["--show-secrets"]);
    assert_eq!(outs["upstream_token"], "tok-dev");

    // An upstream output that reaches a resource's inputs: a violation naming it.
    assert!(
        run(&[("FAKE_PULUMI_OUTPUTS_VPC", r#"{"vpc_id":"vpc-2"}"#)])
            .status
            .success()
    );
    let out = up_plan(&ws, "eks", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        violations(&events(&out)),
        [
            "resource urn:pulumi:dev::eks::fake:eks:Cluster::cluster violates plan: \
          properties changed: =~vpcId[{vpc-2}]\n"
        ]
    );
    let cluster = ws.state("eks")["checkpoint"]["latest"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["urn"] == "urn:pulumi:dev::eks::fake:eks:Cluster::cluster")
        .cloned()
        .unwrap();
    assert_eq!(cluster["inputs"]["vpcId"], "net-id");
}

/// A fresh backend, many `stack init`s at once (strata's first wave): each sees
/// `meta.yaml` whole or not at all, as with the real CLI, whose blob writes are a temp
/// file renamed into place. A torn read failed one of them with "corrupt store".
#[test]
fn parallel_stack_inits_on_a_fresh_backend_never_see_a_torn_meta_yaml() {
    for round in 0..100 {
        let ws = Ws::new(&format!("meta-race-{round}"));
        let children: Vec<Child> = (0..8)
            .map(|i| {
                let project = if i % 2 == 0 { "vpc" } else { "eks" };
                let stack = format!("s{i}");
                let dir = ws.path(project).display().to_string();
                let mut c = ws.cmd(&[
                    "stack",
                    "init",
                    "--cwd",
                    &dir,
                    "--stack",
                    &stack,
                    "--non-interactive",
                ]);
                c.stdout(Stdio::piped()).stderr(Stdio::piped());
                c.spawn().unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(out.status.success(), "round {round}: {}", text(&out.stderr));
        }
        let meta = std::fs::read_to_string(ws.path("backend/.pulumi/meta.yaml")).unwrap();
        assert_eq!(meta, "version: 1\n");
    }
}
