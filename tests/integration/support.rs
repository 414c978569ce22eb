//! The test builder: a temp workspace, files and executables in it, the fake `pulumi` on
//! PATH, and the real `strata` binary run with a clean environment.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

pub const PASSPHRASE: &str = "correct horse battery staple";

/// The fake pulumi binary, built once per test run.
pub fn fake_pulumi() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let strata = PathBuf::from(env!("CARGO_BIN_EXE_strata"));
        let dir = strata.parent().expect("target dir").to_path_buf();
        let bin = dir.join("pulumi");
        // `cargo test --workspace` builds it; build it when only this package was built.
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "-q", "-p", "fake-pulumi", "--bin", "pulumi"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo build -p fake-pulumi");
        assert!(status.success(), "building the fake pulumi failed");
        assert!(bin.exists(), "no fake pulumi at {}", bin.display());
        bin
    })
}

pub struct Ws {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub bin: PathBuf,
    pub env: Vec<(String, String)>,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn all(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
    /// The JSON Lines events of `--output json`.
    pub fn events(&self) -> Vec<serde_json::Value> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l}: {e}")))
            .collect()
    }
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

impl Ws {
    /// An empty workspace (providers/, projects/, config/pulumi/) with the fake pulumi
    /// on PATH, a passphrase, and the fake's call log.
    pub fn new() -> Ws {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("ws");
        for d in ["providers", "projects", "config/pulumi", "home", "bin"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let bin = root.join("bin");
        std::os::unix::fs::symlink(fake_pulumi(), bin.join("pulumi")).unwrap();
        let mut ws = Ws {
            dir,
            root,
            bin,
            env: Vec::new(),
        };
        ws.set_env("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE);
        let log = ws.root.join("calls.jsonl");
        ws.set_env("FAKE_PULUMI_LOG", log.to_str().unwrap());
        ws
    }

    /// A workspace without the fake pulumi on PATH.
    pub fn without_pulumi() -> Ws {
        let ws = Ws::new();
        std::fs::remove_file(ws.bin.join("pulumi")).unwrap();
        ws
    }

    pub fn set_env(&mut self, k: &str, v: &str) -> &mut Self {
        self.env.retain(|(a, _)| a != k);
        self.env.push((k.to_string(), v.to_string()));
        self
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    pub fn write(&self, rel: &str, text: &str) -> &Self {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap_or_else(|e| panic!("read {rel}: {e}"))
    }

    /// The file's text, or empty when it does not exist (yet).
    pub fn read_opt(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root.join(rel)).unwrap_or_default()
    }

    pub fn exists(&self, rel: &str) -> bool {
        self.root.join(rel).exists()
    }

    /// `providers/<name>.yaml`.
    pub fn profile(&self, name: &str, yaml: &str) -> &Self {
        self.write(&format!("providers/{name}.yaml"), yaml)
    }

    /// A Pulumi YAML project at `projects/<path>` named `name`, with `body` appended
    /// (resources:, outputs:, config:).
    pub fn pulumi_project(&self, path: &str, name: &str, body: &str) -> &Self {
        self.write(
            &format!("projects/{path}/Pulumi.yaml"),
            &format!("name: {name}\nruntime: yaml\n{body}"),
        )
    }

    /// A command project at `projects/<path>`.
    pub fn command_project(&self, path: &str, up: &str, destroy: &str) -> &Self {
        let yaml = format!(
            "up: {}\ndestroy: {}\n",
            serde_json::to_string(up).unwrap(),
            serde_json::to_string(destroy).unwrap()
        );
        self.write(&format!("projects/{path}/Strata.yaml"), &yaml)
    }

    /// `config/pulumi/environment`.
    pub fn env_file(&self, text: &str) -> &Self {
        self.write("config/pulumi/environment", text)
    }

    /// The strata command of this workspace: clean environment, the fake first on PATH.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_strata"));
        c.args(args)
            .current_dir(&self.root)
            .env_clear()
            .env(
                "PATH",
                format!("{}:/usr/local/bin:/usr/bin:/bin", self.bin.display()),
            )
            .env("HOME", self.root.join("home"))
            .env("KUBECONFIG", self.root.join("home/.kube/config"))
            .env("STRATA_GRACE_SECONDS", "20");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs strata to completion with stdin closed (so non-interactive).
    pub fn strata(&self, args: &[&str]) -> Run {
        let out: Output = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run strata");
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Starts strata without waiting (for Ctrl-C and lock tests).
    pub fn spawn(&self, args: &[&str]) -> std::process::Child {
        self.command(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn strata")
    }

    /// The fake pulumi's call log: one JSON object per start/end/signal.
    pub fn calls(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(self.root.join("calls.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Every file under `rel` (recursively), as (path, bytes).
    pub fn files_under(&self, rel: &str) -> Vec<(PathBuf, Vec<u8>)> {
        fn walk(p: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
            if p.is_dir() {
                for e in std::fs::read_dir(p).unwrap().flatten() {
                    walk(&e.path(), out);
                }
            } else if p.is_file()
                && let Ok(b) = std::fs::read(p)
            {
                out.push((p.to_path_buf(), b));
            }
        }
        let mut out = Vec::new();
        walk(&self.root.join(rel), &mut out);
        out
    }
}

/// Runs strata against the workspace this repository ships (`--root` = the crate dir),
/// with a clean environment, a throw-away HOME and stdin closed.
pub fn repo(args: &[&str]) -> Run {
    let home = tempfile::tempdir().expect("tempdir");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--root")
        .arg(&root)
        .args(args)
        .current_dir(home.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home.path())
        .env("KUBECONFIG", home.path().join("kubeconfig"))
        .stdin(Stdio::null())
        .output()
        .expect("run strata");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A profile header.
pub const HEAD: &str = "description: test profile\ninfra_type: test\n";

/// Whether `name` is installed (a test that needs it says so and skips otherwise).
pub fn tool(name: &str) -> bool {
    let found = std::process::Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: `{name}` is not installed");
    }
    found
}

/// `dot -Tsvg` of `text` (asserting graphviz accepts it); `None` without graphviz.
pub fn dot_svg(ws: &Ws, text: &str) -> Option<String> {
    if !tool("dot") {
        return None;
    }
    let f = ws.path("plan.dot");
    std::fs::write(&f, text).unwrap();
    let out = std::process::Command::new("dot")
        .arg("-Tsvg")
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs the real Mermaid parser (`../shared/tools/validate_mermaid.py`, headless
/// Chromium) on `text` and asserts it accepts it; skips when either is absent.
pub fn check_mermaid(ws: &Ws, text: &str) {
    let validator =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/validate_mermaid.py");
    if !validator.is_file() {
        eprintln!("skipped: {} is absent", validator.display());
        return;
    }
    if !tool("chromium") || !tool("python3") {
        return;
    }
    let f = ws.path("plan.mmd");
    std::fs::write(&f, text).unwrap();
    let out = std::process::Command::new("python3")
        .arg(&validator)
        .arg(&f)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("ok"),
        "mermaid: {said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
