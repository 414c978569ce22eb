//! The exported GitHub Actions workflows run for real under nektos/act (issue 44): jobs
//! on this host (no container daemon), the marketplace actions swapped for stand-ins
//! written here (`real_act/actions/`), strata downloaded over HTTPS and checked against
//! its sha256 as the workflow says, the real Pulumi, and the state in the real S3
//! server's bucket. Where act differs from GitHub's runners: docs/book/src/exports.md.
//!
//! act is found on PATH, else where `scripts/install-tools.sh` builds it; the real Pulumi
//! and the S3 server as their tiers find them. Missing under `CI=true`: the test fails
//! with the install hint; elsewhere it is skipped, saying so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::leftovers::leftover_language_hosts;
use crate::real_pulumi::Real;
use crate::real_s3::pulumi::on_s3;
use crate::real_s3::{Server, server};
use crate::support::{find_tool, missing};

/// A held project's job under its GitHub environment.
mod environment;
/// The review/apply pair: the bundle reviewed in one run, applied exactly in another.
mod review_apply;
/// `strata up` of the `local-pulumi` profile as jobs, and its wall time against one
/// machine's.
mod up;

const ACT_HINT: &str = "scripts/install-tools.sh builds it (github.com/nektos/act v0.2.89, from the Go module proxy): put the folder it prints first on PATH";
/// The workflow file, in the repository the jobs check out.
const WORKFLOW: &str = ".github/workflows/strata.yml";
/// A whole exported workflow on a loaded machine.
const BOUND: Duration = Duration::from_secs(900);

/// act: on PATH, else where scripts/install-tools.sh builds it; missing, see
/// [`missing`] (fails under `CI=true`).
fn act_bin() -> Option<PathBuf> {
    let tools = std::env::var_os("HOME")
        .map(|h| Path::new(&h).join(".cache/strata/tools/bin/act"))
        .filter(|p| p.is_file());
    let found = find_tool(&["act"]).or(tools);
    if found.is_none() {
        missing("act", "is not installed", ACT_HINT);
    }
    found
}

/// This tier's fixtures: the stand-in actions and the `gh` stand-in.
fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/integration/real_act")
}

/// Runs `cmd`, which must succeed; its stdout.
fn ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The built strata, stripped, in a tarball served over HTTPS on loopback by
/// `openssl s_server` with a self-signed certificate of its own; stopped when dropped.
struct Release {
    server: Child,
    dir: tempfile::TempDir,
    url: String,
    sha256: String,
}

impl Release {
    fn serve() -> Release {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path();
        let www = d.join("www");
        std::fs::create_dir_all(d.join("pack")).unwrap();
        std::fs::create_dir_all(&www).unwrap();
        ok(
            Command::new("strip")
                .arg("-o")
                .arg(d.join("pack/strata"))
                .arg(env!("CARGO_BIN_EXE_strata")),
            "strip strata",
        );
        let tarball = www.join("strata.tar.gz");
        ok(
            Command::new("tar")
                .arg("-czf")
                .arg(&tarball)
                .arg("-C")
                .arg(d.join("pack"))
                .arg("strata"),
            "tar strata",
        );
        let sum = ok(Command::new("sha256sum").arg(&tarball), "sha256sum");
        let sha256 = sum.split_whitespace().next().unwrap().to_string();
        ok(
            Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                ])
                .args([
                    "-subj",
                    "/CN=127.0.0.1",
                    "-addext",
                    "subjectAltName=IP:127.0.0.1",
                ])
                .arg("-keyout")
                .arg(d.join("key.pem"))
                .arg("-out")
                .arg(d.join("ca.pem")),
            "openssl req (the server's self-signed certificate)",
        );
        for attempt in 0.. {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut server = Command::new("openssl")
                .args(["s_server", "-quiet", "-WWW"])
                .args(["-accept", &format!("127.0.0.1:{port}")])
                .arg("-cert")
                .arg(d.join("ca.pem"))
                .arg("-key")
                .arg(d.join("key.pem"))
                .current_dir(&www)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("openssl s_server");
            let t0 = Instant::now();
            while t0.elapsed() < Duration::from_secs(10) {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Release {
                        server,
                        dir,
                        url: format!("https://127.0.0.1:{port}/strata.tar.gz"),
                        sha256,
                    };
                }
                if server.try_wait().ok().flatten().is_some() {
                    break; // the port was taken meanwhile: another one
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = server.kill();
            let _ = server.wait();
            assert!(
                attempt < 5,
                "openssl s_server did not listen, 5 ports tried"
            );
        }
        unreachable!()
    }

    /// The CA the jobs trust (the server's own certificate).
    fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// `--strata-from` for this release.
    fn strata_from(&self) -> String {
        format!("url:{}#sha256={}", self.url, self.sha256)
    }
}

impl Drop for Release {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

/// A workspace of the `local-pulumi` profile as a git repository with its state in a
/// bucket of the S3 server, its exported workflow, and what act needs to run it: the
/// stand-ins, the release, the artifact folder, the secrets and the runner's
/// environment (files, so no secret is on a command line).
pub(crate) struct Actions {
    pub s: Arc<Server>,
    pub r: Real,
    pub bucket: String,
    act: PathBuf,
    pulumi_dir: PathBuf,
    release: Release,
    /// act's cache and host workspaces, the artifacts, the GitHub stand-in's records.
    dir: tempfile::TempDir,
}

/// The registry password in strata's store, committed encrypted (config/secrets/dev.age).
const REGISTRY_PASSWORD: &str = "reg-Pa55-act-7c41d0";

impl Actions {
    /// `None` when act, the real Pulumi or the S3 server is missing (outside CI).
    pub(crate) fn new(test: &str, bucket: &str) -> Option<Actions> {
        let act = act_bin()?;
        if find_tool(&["openssl"]).is_none() {
            missing("openssl", "is not installed", "apt-get install openssl");
            return None;
        }
        let pulumi_dir = crate::real_pulumi::real_bin_dir(test)?;
        let s = server(test)?;
        let mut r = Real::with_local_pulumi(test)?;
        on_s3(&mut r, &s, bucket);
        let dir = tempfile::tempdir().expect("tempdir");
        // The registry's password comes from the committed store only; the resources of
        // a run here (the first deployment of a stack) go where the jobs' go.
        r.ws.env
            .retain(|(k, _)| k != "STRATA_SECRET_LP_REGISTRY_PASSWORD");
        r.ws.set_env(
            "LOCAL_PULUMI_ENV",
            dir.path().join("cloud").to_str().unwrap(),
        );
        for d in ["artifacts", "github/pulls", "act-cache", "cloud"] {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        }
        std::fs::write(dir.path().join("github/runs.json"), "[]").unwrap();
        let a = Actions {
            release: Release::serve(),
            s,
            r,
            bucket: bucket.to_string(),
            act,
            pulumi_dir,
            dir,
        };
        a.store_registry_password();
        a.r.ws.write(
            ".gitignore",
            "/bin/\n/home/\n/.strata/\n/pulumi-calls.log\n/calls.jsonl\n",
        );
        ok(
            Command::new("git")
                .args(["init", "-q", "-b", "main"])
                .current_dir(&a.r.ws.root),
            "git init",
        );
        Some(a)
    }

    /// The registry's secret into strata's store, as a user does before committing it.
    fn store_registry_password(&self) {
        use std::io::Write;
        let mut c = self.r.ws.command(&[
            "secrets",
            "set",
            "lp-registry:password",
            "-p",
            "local-pulumi",
            "-s",
            "dev",
        ]);
        let mut child = c
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("strata secrets set");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(REGISTRY_PASSWORD.as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "strata secrets set: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(self.r.ws.exists("config/secrets/dev.age"));
    }

    /// `strata export --format github-actions ARGS` of the profile into the workflow file,
    /// strata coming from the release.
    pub(crate) fn export(&self, args: &[&str]) {
        let from = self.release.strata_from();
        let mut all = vec![
            "export",
            "--format",
            "github-actions",
            "-p",
            "local-pulumi",
            "-s",
            "dev",
            "--strata-from",
            &from,
            "-o",
            WORKFLOW,
        ];
        all.extend(args);
        std::fs::create_dir_all(self.r.ws.path(".github/workflows")).unwrap();
        let run = self.r.strata(&all);
        assert_eq!(run.code, 0, "{run:?}");
    }

    /// Commits everything the repository holds (the stand-in of a push); the commit.
    pub(crate) fn commit(&self, message: &str) -> String {
        let git = |args: &[&str]| {
            ok(
                Command::new("git")
                    .args([
                        "-c",
                        "user.name=tester",
                        "-c",
                        "user.email=tester@example.invalid",
                    ])
                    .args(args)
                    .current_dir(&self.r.ws.root),
                &format!("git {}", args.join(" ")),
            )
        };
        git(&["add", "-A"]);
        git(&["commit", "-q", "--allow-empty", "-m", message]);
        git(&["rev-parse", "HEAD"]).trim().to_string()
    }

    /// The runner's environment (act `--env-file`) and the repository secrets the
    /// workflow's header asks for (act `--secret-file`); their paths.
    fn env_files(&self) -> (PathBuf, PathBuf) {
        let line = |k: &str, v: &str| {
            assert!(!v.contains('\''), "{k}: a quote in {v:?}");
            format!("{k}='{v}'\n")
        };
        let ws = &self.r.ws;
        let env_of = |k: &str| {
            ws.env
                .iter()
                .find(|(a, _)| a == k)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{k} not in the workspace's environment"))
        };
        let ca = self.release.ca();
        let d = self.dir.path();
        let mut env = String::new();
        for (k, v) in [
            ("STRATA_ACT_REPO", ws.root.display().to_string()),
            (
                "STRATA_ACT_ARTIFACTS",
                d.join("artifacts").display().to_string(),
            ),
            ("STRATA_ACT_GITHUB", d.join("github").display().to_string()),
            (
                "STRATA_ACT_PULUMI_DIR",
                self.pulumi_dir.display().to_string(),
            ),
            // The release's server is trusted as a runner trusts a public one.
            ("CURL_CA_BUNDLE", ca.display().to_string()),
            ("SSL_CERT_FILE", ca.display().to_string()),
        ] {
            env.push_str(&line(k, &v));
        }
        // The bucket's keys and the Pulumi home: the runner's own environment here (the
        // profile's `credentials:` is empty, so the workflow maps no secret to them).
        for k in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_REGION",
            // The profile's "cloud", one folder every runner reaches (its README).
            "LOCAL_PULUMI_ENV",
            "PULUMI_HOME",
            "PULUMI_SKIP_UPDATE_CHECK",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION",
        ] {
            env.push_str(&line(k, &env_of(k)));
        }
        let mut secrets = String::new();
        for k in [
            "PULUMI_BACKEND_URL",
            "PULUMI_CONFIG_PASSPHRASE",
            "STRATA_PASSPHRASE",
        ] {
            secrets.push_str(&line(k, &env_of(k)));
        }
        let (e, s) = (d.join("act.env"), d.join("secrets.env"));
        std::fs::write(&e, env).unwrap();
        std::fs::write(&s, secrets).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&s, std::fs::Permissions::from_mode(0o600)).unwrap();
        (e, s)
    }

    /// act runs the committed workflow for `event` as run `run_id` (`payload`: the
    /// event's JSON), every job on this host; the run, once act has exited (within
    /// [`BOUND`], else it is killed and the test fails).
    pub(crate) fn act(&self, event: &str, run_id: u32, payload: &Value) -> ActRun {
        let (env_file, secret_file) = self.env_files();
        let d = self.dir.path();
        let event_file = d.join(format!("event-{run_id}.json"));
        std::fs::write(&event_file, payload.to_string()).unwrap();
        let actions = fixtures().join("actions");
        let mut c = Command::new(&self.act);
        c.arg(event)
            .args(["-W", WORKFLOW, "--json"])
            .args([
                "-P",
                "ubuntu-latest=-self-hosted",
                "--container-daemon-socket",
                "-",
            ])
            .args(["--no-skip-checkout", "--no-cache-server"])
            // act's default is the host's CPU count; GitHub starts every ready job.
            .args(["--concurrent-jobs", "4"])
            .arg("--action-cache-path")
            .arg(d.join("act-cache"))
            .arg("--env-file")
            .arg(&env_file)
            .arg("--secret-file")
            .arg(&secret_file)
            .arg("--eventpath")
            .arg(&event_file)
            .args(["--env", &format!("GITHUB_RUN_ID={run_id}")])
            // GitHub sets it, act does not (the apply job reads the workflow's file name).
            .args([
                "--env",
                &format!("GITHUB_WORKFLOW_REF=local/strata/{WORKFLOW}@refs/heads/main"),
            ]);
        for (uses, folder) in [
            ("actions/checkout@v4", "checkout"),
            ("actions/upload-artifact@v4", "upload-artifact"),
            ("actions/download-artifact@v4", "download-artifact"),
            ("pulumi/actions@v6", "pulumi"),
        ] {
            c.arg("--local-repository")
                .arg(format!("{uses}={}", actions.join(folder).display()));
        }
        if event == "workflow_dispatch" {
            c.args(["--input", "stack=dev"]);
        }
        // A runner's PATH: no strata, no Pulumi (the workflow installs them), `gh`.
        c.current_dir(&self.r.ws.root)
            .env_clear()
            .env(
                "PATH",
                format!(
                    "{}:/usr/local/bin:/usr/bin:/bin",
                    fixtures().join("bin").display()
                ),
            )
            .env("HOME", self.r.ws.path("home"));
        let log = d.join(format!("act-{run_id}.jsonl"));
        let err = d.join(format!("act-{run_id}.stderr"));
        // act stays in the test's process group: a Ctrl-C reaches it too, and it cancels
        // its jobs.
        let t0 = Instant::now();
        let mut child = c
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(&err).unwrap())
            .spawn()
            .expect("run act");
        let status = loop {
            if let Some(s) = child.try_wait().expect("wait for act") {
                break s;
            }
            if t0.elapsed() > BOUND {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "act ran the workflow for more than {BOUND:?}; killed. Its log: {}",
                    log.display()
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let elapsed = t0.elapsed();
        let left = self.processes_left(Duration::from_secs(10));
        assert!(
            left.is_empty(),
            "act's run left running:\n{}",
            left.join("\n")
        );
        let text = std::fs::read_to_string(&log).unwrap();
        ActRun {
            code: status.code().unwrap_or(-1),
            lines: text
                .lines()
                .filter_map(|l| serde_json::from_str(l).ok())
                .collect(),
            stderr: std::fs::read_to_string(&err).unwrap_or_default(),
            elapsed,
        }
    }

    /// act runs the committed workflow as run `run_id` of a `workflow_dispatch` on stack
    /// `dev`, as a user starts it from the Actions tab; the run, its timings printed.
    pub(crate) fn dispatch(&self, run_id: u32, test: &str) -> ActRun {
        let run = self.act(
            "workflow_dispatch",
            run_id,
            &serde_json::json!({ "inputs": { "stack": "dev" } }),
        );
        run.print(test);
        run
    }

    /// Records run `run_id` of `event` on `head_sha` as GitHub would list it (for the
    /// `gh` stand-in): its conclusion from act's exit.
    pub(crate) fn record_run(&self, run_id: u32, event: &str, head_sha: &str, run: &ActRun) {
        let p = self.dir.path().join("github/runs.json");
        let mut runs: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        runs.push(serde_json::json!({
            "id": run_id,
            "workflow": Path::new(WORKFLOW).file_name().unwrap().to_str(),
            "event": event,
            "head_sha": head_sha,
            "conclusion": if run.code == 0 { "success" } else { "failure" },
        }));
        std::fs::write(&p, Value::from(runs).to_string()).unwrap();
    }

    /// The pull request `number`, whose head was `head_sha`, merged as commit `merge_sha`
    /// (for the `gh` stand-in).
    pub(crate) fn record_merge(&self, merge_sha: &str, number: u32, head_sha: &str) {
        let pulls = serde_json::json!([{
            "number": number,
            "merged_at": "2026-01-01T00:00:00Z",
            "head": { "sha": head_sha },
        }]);
        std::fs::write(
            self.dir
                .path()
                .join(format!("github/pulls/{merge_sha}.json")),
            pulls.to_string(),
        )
        .unwrap();
    }

    /// The files of artifact `name` of run `run_id`.
    pub(crate) fn artifact(&self, run_id: u32, name: &str) -> Vec<PathBuf> {
        let dir = self.dir.path().join(format!("artifacts/{run_id}/{name}"));
        let mut out = Vec::new();
        let mut todo = vec![dir];
        while let Some(d) = todo.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.path().is_dir() {
                    todo.push(e.path());
                } else {
                    out.push(e.path());
                }
            }
        }
        out
    }

    /// Where the jobs' `local-pulumi` resources are (`LOCAL_PULUMI_ENV`).
    pub(crate) fn cloud(&self) -> PathBuf {
        self.dir.path().join("cloud")
    }

    /// The language hosts still running in the workspace or under act's folder.
    pub(crate) fn leftover_language_hosts(&self) -> Vec<String> {
        let mut left = leftover_language_hosts(&self.r.ws.root);
        left.extend(leftover_language_hosts(self.dir.path()));
        left
    }

    /// The processes working in the repository or under act's folder (the jobs' steps,
    /// strata, Pulumi and its plugins): (pid, what `ps` would say of it).
    fn processes_here(&self) -> Vec<(i32, String)> {
        let roots: Vec<PathBuf> = [self.r.ws.root.as_path(), self.dir.path()]
            .iter()
            .map(|r| r.canonicalize().unwrap_or_else(|_| r.to_path_buf()))
            .collect();
        crate::leftovers::processes(|p| roots.iter().any(|r| p.cwd.starts_with(r)))
    }

    /// Those still running once `grace` has passed (or none are left).
    fn processes_left(&self, grace: Duration) -> Vec<String> {
        let t0 = Instant::now();
        loop {
            let left = self.processes_here();
            if left.is_empty() || t0.elapsed() > grace {
                return left.into_iter().map(|(_, d)| d).collect();
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Pulumi's own updates of `project` (a Pulumi project name) in the bucket.
    pub(crate) fn updates(&self, project: &str) -> Vec<(i64, i64)> {
        crate::real_s3::two_machines::updates(&self.s, &self.bucket, project)
    }
}

impl Drop for Actions {
    /// A failed test leaves nothing of its runs behind: what works in its folders is
    /// killed, by pid.
    fn drop(&mut self) {
        for (pid, _) in self.processes_here() {
            // SAFETY: kill(2) of a process working in this test's own folders.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// What act said: its exit, its JSON log lines, its stderr, how long it ran.
pub(crate) struct ActRun {
    pub code: i32,
    lines: Vec<Value>,
    stderr: String,
    pub elapsed: Duration,
}

impl ActRun {
    /// Each job's result (`success`, `failure`), by job id.
    pub(crate) fn results(&self) -> BTreeMap<String, String> {
        self.lines
            .iter()
            .filter_map(|l| Some((l["jobID"].as_str()?, l["jobResult"].as_str()?)))
            .map(|(j, r)| (j.to_string(), r.to_string()))
            .collect()
    }

    /// The jobs that ran, exactly `jobs`, each green.
    pub(crate) fn assert_green(&self, jobs: &[&str]) {
        let want: BTreeMap<String, String> = jobs
            .iter()
            .map(|j| (j.to_string(), "success".to_string()))
            .collect();
        assert_eq!(self.results(), want, "{self:?}");
    }

    /// Whether any line of act's log (every job's) holds `text`.
    pub(crate) fn mentions(&self, text: &str) -> bool {
        self.lines
            .iter()
            .any(|l| l["msg"].as_str().is_some_and(|m| m.contains(text)))
            || self.stderr.contains(text)
    }

    /// What job `job`'s steps printed.
    pub(crate) fn output_of(&self, job: &str) -> String {
        self.lines
            .iter()
            .filter(|l| l["jobID"] == job && l["raw_output"] == true)
            .filter_map(|l| l["msg"].as_str())
            .collect()
    }

    /// When job `job` logged first and last (seconds since the epoch).
    pub(crate) fn span(&self, job: &str) -> (i64, i64) {
        let times: Vec<i64> = self
            .lines
            .iter()
            .filter(|l| l["jobID"] == job)
            .filter_map(|l| l["time"].as_str().map(epoch))
            .collect();
        match (times.iter().min(), times.iter().max()) {
            (Some(a), Some(b)) => (*a, *b),
            _ => panic!("job {job} logged nothing: {self:?}"),
        }
    }

    /// Says on stderr how the run went and each job's span (for the test's output).
    pub(crate) fn print(&self, what: &str) {
        eprintln!(
            "{what}: act exit {} in {:.1}s; jobs (1 s resolution):\n{}",
            self.code,
            self.elapsed.as_secs_f64(),
            self.timings()
        );
    }

    /// Each job's span, as `job start+seconds (seconds)` from the first job's start.
    pub(crate) fn timings(&self) -> String {
        let jobs: Vec<String> = self.results().into_keys().collect();
        let spans: Vec<(String, (i64, i64))> = jobs
            .into_iter()
            .map(|j| (j.clone(), self.span(&j)))
            .collect();
        let t0 = spans.iter().map(|(_, (a, _))| *a).min().unwrap_or(0);
        let mut spans = spans;
        spans.sort_by_key(|(_, (a, _))| *a);
        spans
            .iter()
            .map(|(j, (a, b))| format!("  {j}: +{}s..+{}s ({}s)\n", a - t0, b - t0, b - a))
            .collect()
    }
}

impl std::fmt::Debug for ActRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text: Vec<String> = self
            .lines
            .iter()
            .map(|l| {
                format!(
                    "[{}] {}",
                    l["jobID"].as_str().unwrap_or("-"),
                    l["msg"].as_str().unwrap_or("").trim_end()
                )
            })
            .collect();
        let from = text.len().saturating_sub(300);
        write!(
            f,
            "act exit {} after {:?}; jobs {:?}\n--- log (last 300 lines)\n{}\n--- stderr\n{}",
            self.code,
            self.elapsed,
            self.results(),
            text[from..].join("\n"),
            self.stderr
        )
    }
}

/// Seconds since the epoch of act's `YYYY-MM-DDTHH:MM:SSZ`.
fn epoch(t: &str) -> i64 {
    let n = |r: std::ops::Range<usize>| -> i64 {
        t.get(r)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("unreadable time {t:?}"))
    };
    let (y, m, d) = (n(0..4), n(5..7), n(8..10));
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    days * 86_400 + n(11..13) * 3600 + n(14..16) * 60 + n(17..19)
}

#[test]
fn act_times_read_as_seconds_since_the_epoch() {
    assert_eq!(epoch("1970-01-01T00:00:00Z"), 0);
    assert_eq!(epoch("2026-12-02T17:27:54Z"), 1_796_232_474);
    assert_eq!(epoch("2000-02-29T12:00:01Z"), 951_825_601);
}
