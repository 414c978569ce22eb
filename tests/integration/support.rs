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

    /// Replaces `from` with `to` in the file, as a user's edit would; panics when `from`
    /// is not there (the edit would silently do nothing).
    pub fn replace_in(&self, rel: &str, from: &str, to: &str) -> &Self {
        let text = self.read(rel);
        assert!(text.contains(from), "no {from:?} in {rel}:\n{text}");
        self.write(rel, &text.replace(from, to))
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
        Run::from(out)
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

/// What a user's run leaves in a workspace and git ignores (see .gitignore): never part
/// of a copy of the repository's workspace.
fn left_by_a_run(rel: &Path, is_dir: bool) -> bool {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let s = rel.to_string_lossy();
    if is_dir {
        return s == "config/secrets"
            || [
                ".git",
                ".strata",
                "node_modules",
                "__pycache__",
                ".venv",
                "venv",
                "target",
            ]
            .contains(&name);
    }
    s == "config/pulumi/environment"
        || (name.starts_with("Pulumi.")
            && (name.ends_with(".yaml") || name.ends_with(".yml"))
            && name != "Pulumi.yaml"
            && name != "Pulumi.yml")
}

fn copy_tree(base: &Path, from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let (src, dst) = (e.path(), to.join(e.file_name()));
        let rel = src.strip_prefix(base).unwrap();
        let ft = e.file_type().unwrap();
        if left_by_a_run(rel, ft.is_dir()) {
            continue;
        }
        if ft.is_symlink() {
            std::os::unix::fs::symlink(std::fs::read_link(&src).unwrap(), &dst).unwrap();
        } else if ft.is_dir() {
            copy_tree(base, &src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A copy of the workspace at `from` (its providers/, projects/ and config/, and its
/// Cargo.toml: strata's own repository stays strata's source) as git
/// holds it: without what a user's run leaves there (`config/pulumi/environment` with
/// its `PULUMI_STACK`, stack configs, the secret store, `.strata/`), so a test of the
/// shipped profiles does not depend on what the README's first command wrote.
pub fn workspace_copy(from: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for d in ["providers", "projects", "config"] {
        if from.join(d).is_dir() {
            copy_tree(from, &from.join(d), &dir.path().join(d));
        }
    }
    // strata's own repository stays strata's source: its workflow builds it (`--path .`).
    if from.join("Cargo.toml").is_file() {
        std::fs::copy(from.join("Cargo.toml"), dir.path().join("Cargo.toml")).unwrap();
    }
    dir
}

/// Runs strata against the workspace at `root`, with a clean environment, a throw-away
/// HOME and stdin closed.
pub fn strata_at(root: &Path, args: &[&str]) -> Run {
    let home = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("--root")
        .arg(root)
        .args(args)
        .current_dir(home.path())
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", home.path())
        .env("KUBECONFIG", home.path().join("kubeconfig"))
        .stdin(Stdio::null())
        .output()
        .expect("run strata");
    Run::from(out)
}

/// Runs strata against the workspace this repository ships, copied
/// ([`workspace_copy`]) so nothing a user's run left in the clone changes the result.
pub fn repo(args: &[&str]) -> Run {
    let copy = workspace_copy(Path::new(env!("CARGO_MANIFEST_DIR")));
    strata_at(copy.path(), args)
}

/// A profile header.
pub const HEAD: &str = "description: test profile\ninfra_type: test\n";

/// `up` of profile `t`, stack `dev`, going on past a failure, in JSON events.
pub const UP_KEEP_GOING_JSON: [&str; 8] = [
    "up",
    "-p",
    "t",
    "-s",
    "dev",
    "--keep-going",
    "--output",
    "json",
];

/// Whether this is CI's run (`CI=true`, as `.ci/run` is run): there a test whose tool is
/// missing fails instead of skipping.
pub fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Run `scripts/install-tools.sh` (what `.ci/run` does) to install every tool below.
pub const INSTALL_TOOLS: &str = "or run scripts/install-tools.sh";

/// `what` (a tool or a file), which the running test checks strata's output with, is
/// not here (`why`): under `CI=true` the test fails with `hint`; elsewhere it says on
/// stderr what it skipped, and the caller skips that check.
pub fn missing(what: &str, why: &str, hint: &str) {
    if under_ci() {
        panic!("{what} is required under CI=true: {hint}");
    }
    // cargo's test threads are named after their test.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("this test");
    eprintln!("skipped: {test}: {what} {why} ({hint})");
}

/// The first of `names` found on PATH.
pub fn find_tool(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    names.iter().find_map(|name| {
        std::env::split_paths(&path)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// Whether `name` is on PATH; when not, see [`missing`] (fails under `CI=true`).
pub fn require_tool(name: &str, hint: &str) -> bool {
    if find_tool(&[name]).is_some() {
        return true;
    }
    missing(name, "is not installed", hint);
    false
}

/// Headless Chromium (`chromium`, or `chromium-browser`); when absent, see [`missing`].
pub fn require_chromium() -> Option<PathBuf> {
    let found = find_tool(&["chromium", "chromium-browser"]);
    if found.is_none() {
        missing(
            "chromium",
            "is not installed",
            &format!("apt-get install chromium; {INSTALL_TOOLS}"),
        );
    }
    found
}

/// Whether the file `path` exists; when not, see [`missing`] (fails under `CI=true`).
pub fn require_file(path: &Path, hint: &str) -> bool {
    if path.exists() {
        return true;
    }
    missing(&path.display().to_string(), "is absent", hint);
    false
}

/// `tools/<name>` of the project's shared folder, beside the repository (or beside the
/// folder of its work trees): the real validators the tests use. The first candidate
/// when neither exists.
pub fn shared_tool(name: &str) -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates = ["../shared/tools", "../../shared/tools"].map(|d| here.join(d).join(name));
    candidates
        .iter()
        .find(|p| p.exists())
        .unwrap_or(&candidates[0])
        .clone()
}

/// The hint for a file of `shared/tools/`.
pub const SHARED_TOOLS: &str =
    "the project's shared/ folder, beside the clone, holds it in tools/ (CI lays it there)";

/// Whether `shared/tools/<name>` exists (see [`shared_tool`]), else see [`missing`].
pub fn require_shared_tool(name: &str) -> Option<PathBuf> {
    let p = shared_tool(name);
    require_file(&p, SHARED_TOOLS).then_some(p)
}

/// `dot -Tsvg` of `text` (asserting graphviz accepts it); `None` (skipped) without
/// graphviz outside CI.
pub fn dot_svg(ws: &Ws, text: &str) -> Option<String> {
    if !require_tool("dot", &format!("apt-get install graphviz; {INSTALL_TOOLS}")) {
        return None;
    }
    let f = ws.path("plan.dot");
    std::fs::write(&f, text).unwrap();
    Some(stdout_of(
        std::process::Command::new("dot").arg("-Tsvg").arg(&f),
    ))
}

/// Whether python3 is on PATH, else see [`missing`].
pub fn require_python3() -> bool {
    require_tool(
        "python3",
        &format!("apt-get install python3; {INSTALL_TOOLS}"),
    )
}

/// Runs the real Mermaid parser (`shared/tools/validate_mermaid.py`, headless Chromium)
/// on `text` and asserts it accepts it; skipped (outside CI) when either is absent.
pub fn check_mermaid(ws: &Ws, text: &str) {
    let Some(validator) = require_shared_tool("validate_mermaid.py") else {
        return;
    };
    if require_chromium().is_none() || !require_python3() {
        return;
    }
    let f = ws.path("plan.mmd");
    std::fs::write(&f, text).unwrap();
    // The validator's page and Chromium's profile go to the workspace's temp folder,
    // removed with it (the tool itself leaves its `mmd-*` folder behind).
    let tmp = ws.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let out = std::process::Command::new("python3")
        .arg(&validator)
        .arg(&f)
        .env("HOME", ws.path("home"))
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains(": ok"),
        "mermaid: {said} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The folder of real binaries a tier runs against (the real Pulumi, the real API
/// server): `env_var`, else `<cache>/strata/<cache_dir>/current` (the link the install
/// script keeps). When one of `binaries` is missing: under `CI=true` the test fails with
/// `hint`; elsewhere it prints `skipped: …` and gets `None`.
pub fn real_bin_dir(
    test: &str,
    what: &str,
    env_var: &str,
    cache_dir: &str,
    binaries: &[&str],
    hint: &str,
) -> Option<PathBuf> {
    let dir = std::env::var_os(env_var).map(PathBuf::from).or_else(|| {
        let home = std::env::var_os("HOME")?;
        let cache = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(&home).join(".cache"));
        Some(cache.join("strata").join(cache_dir).join("current"))
    });
    let absent: Vec<&str> = binaries
        .iter()
        .copied()
        .filter(|b| !dir.as_ref().is_some_and(|d| d.join(b).is_file()))
        .collect();
    if absent.is_empty() {
        return dir;
    }
    let text = format!(
        "{test}: {what} is not installed ({} missing in {}): {hint}",
        absent.join(", "),
        dir.map(|d| d.display().to_string())
            .unwrap_or_else(|| "no folder".into())
    );
    if under_ci() {
        panic!("required under CI=true: {text}");
    }
    eprintln!("skipped: {text}");
    None
}

/// The spans of a log that test projects append to: lines `start KEY… MS` and
/// `end KEY… MS` (`date +%s%3N`), paired by KEY. A span still open at the end ends at
/// `u128::MAX`. Any other line fails the test: a torn or foreign line must not pass as
/// no overlap.
pub fn spans(log: &str) -> Vec<(Vec<String>, u128, u128)> {
    let mut open: std::collections::BTreeMap<Vec<String>, u128> = Default::default();
    let mut out = Vec::new();
    for l in log.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (Some(what), Some(t), true) = (f.first(), f.last(), f.len() >= 3) else {
            panic!("unreadable span line {l:?}");
        };
        let t: u128 = t
            .parse()
            .unwrap_or_else(|_| panic!("unreadable timestamp in span line {l:?}"));
        let key: Vec<String> = f[1..f.len() - 1].iter().map(|s| s.to_string()).collect();
        match *what {
            "start" => {
                open.insert(key, t);
            }
            "end" => {
                if let Some(s) = open.remove(&key) {
                    out.push((key, s, t));
                }
            }
            _ => panic!("span line {l:?}"),
        }
    }
    out.extend(open.into_iter().map(|(key, s)| (key, s, u128::MAX)));
    out
}

/// Copies a file or a folder (recursively) to `to`.
pub fn copy_path(from: &Path, to: &Path) {
    if from.is_file() {
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(from, to).unwrap();
        return;
    }
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        copy_path(&e.path(), &to.join(e.file_name()));
    }
}

/// This repository's `providers/` and `projects/local` copied into `ws`, with the `up`
/// script of each `local/*` command project rewritten by `up` and each `run:` hook of the
/// `local` profile by `hook(entry path, command)`. Returns how many hooks it rewrote.
pub fn local_profile(
    ws: &Ws,
    up: impl Fn(&str) -> String,
    hook: impl Fn(&str, &str) -> String,
) -> usize {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    copy_path(&repo.join("providers"), &ws.path("providers"));
    copy_path(&repo.join("projects/local"), &ws.path("projects/local"));
    for e in std::fs::read_dir(ws.path("projects/local"))
        .unwrap()
        .flatten()
    {
        let f = e.path().join("Strata.yaml");
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let script = doc["up"].as_str().unwrap().to_string();
        doc["up"] = serde_yaml::Value::String(up(&script));
        std::fs::write(&f, serde_yaml::to_string(&doc).unwrap()).unwrap();
    }
    let profile = ws.path("providers/local.yaml");
    let mut doc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    let mut hooks = 0;
    for stage in ["infrastructure", "kubernetes"] {
        for entry in doc[stage].as_sequence_mut().into_iter().flatten() {
            let path = entry["path"].as_str().unwrap_or("").to_string();
            let Some(on_success) = entry.get_mut("on_success") else {
                continue;
            };
            for h in on_success.as_sequence_mut().into_iter().flatten() {
                if let Some(run) = h["run"].as_str() {
                    h["run"] = serde_yaml::Value::String(hook(&path, run));
                    hooks += 1;
                }
            }
        }
    }
    std::fs::write(&profile, serde_yaml::to_string(&doc).unwrap()).unwrap();
    hooks
}

// The shared words of the tests (a profile builder, runs on `t`/`dev`, assertions that
// print what they saw) live in their own file.
mod vocab;
pub use vocab::*;
