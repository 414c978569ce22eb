//! The shared workspace (`Ws`: two fixture projects, a stack config file, a file
//! backend, the call log) and the readers every test uses.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

pub const BIN: &str = env!("CARGO_BIN_EXE_pulumi");

pub const VPC: &str = r#"name: vpc
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

pub const EKS: &str = r#"name: eks
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
pub struct Ws {
    root: PathBuf,
}

impl Ws {
    pub fn new(name: &str) -> Ws {
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

    pub fn path(&self, p: &str) -> PathBuf {
        self.root.join(p)
    }

    pub fn cmd(&self, args: &[&str]) -> Command {
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
    pub fn std_args(&self, project: &str, args: &[&str]) -> Vec<String> {
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
    pub fn std_cmd(&self, project: &str, args: &[&str], env: &[(&str, &str)]) -> Command {
        let a = self.std_args(project, args);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let mut c = self.cmd(&a);
        c.envs(env.iter().copied());
        c
    }

    pub fn run(&self, project: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.std_cmd(project, args, env).output().unwrap()
    }

    pub fn ok(&self, project: &str, args: &[&str]) -> Output {
        let out = self.run(project, args, &[]);
        assert!(
            out.status.success(),
            "{args:?} failed: {}",
            text(&out.stderr)
        );
        out
    }

    pub fn spawn(&self, project: &str, args: &[&str], env: &[(&str, &str)]) -> Child {
        let mut c = self.std_cmd(project, args, env);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c.spawn().unwrap()
    }

    /// `stack output --json` and `extra` flags, parsed.
    pub fn outputs(&self, project: &str, extra: &[&str]) -> Value {
        let mut args = vec!["stack", "output", "--json"];
        args.extend(extra);
        serde_json::from_slice(&self.ok(project, &args).stdout).unwrap()
    }

    pub fn state(&self, project: &str) -> Value {
        let p = self
            .path("backend")
            .join(format!(".pulumi/stacks/{project}/dev.json"));
        serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
    }

    pub fn calls(&self) -> Vec<Value> {
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

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

pub fn events(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l}: {e}")))
        .collect()
}

pub const UP: &[&str] = &["up", "--yes", "--skip-preview"];

pub fn up_json(ws: &Ws, project: &str) -> Vec<Value> {
    let mut a = UP.to_vec();
    a.push("--json");
    events(&ws.ok(project, &a))
}

pub fn resources_in_state(ws: &Ws, project: &str) -> Vec<String> {
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
