//! The tests' shared words, so a test shows only what it is about: a workspace with the
//! test profile `t`, a run on stack `dev`, and assertions that print what they saw.

use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use super::{HEAD, Run, Ws};

impl Ws {
    /// A workspace whose profile `t` is [`HEAD`] followed by `body`.
    pub fn with_profile(body: &str) -> Ws {
        let ws = Ws::new();
        ws.profile("t", &format!("{HEAD}{body}"));
        ws
    }

    /// A workspace whose profile `t` has one infrastructure entry, the command project
    /// `path` that runs `up` (and whose destroy does nothing).
    pub fn with_command(path: &str, up: &str) -> Ws {
        let ws = Ws::with_profile(&format!("infrastructure:\n  - path: {path}\n"));
        ws.command_project(path, up, "true");
        ws
    }

    /// `strata <command> -p t -s dev <extra…>`: the command on the test profile and stack.
    pub fn run(&self, command: &str, extra: &[&str]) -> Run {
        let mut args = vec![command, "-p", "t", "-s", "dev"];
        args.extend_from_slice(extra);
        self.strata(&args)
    }

    /// [`Ws::run`] with `--output json`.
    pub fn run_json(&self, command: &str, extra: &[&str]) -> Run {
        let mut args = vec!["--output", "json"];
        args.extend_from_slice(extra);
        self.run(command, &args)
    }

    /// [`Ws::run`], asserting it exits 0.
    #[track_caller]
    pub fn run_ok(&self, command: &str, extra: &[&str]) -> Run {
        let r = self.run(command, extra);
        r.expect_code(0);
        r
    }

    /// The GitHub Actions workflow of the test profile and stack, exported to `wf.yml`
    /// (strata built from this checkout's path): its text and its YAML.
    #[track_caller]
    pub fn github_workflow(&self) -> (String, serde_yaml::Value) {
        let args = [
            "--format",
            "github-actions",
            "--strata-from",
            "path",
            "-o",
            "wf.yml",
        ];
        self.run_ok("export", &args);
        let text = self.read("wf.yml");
        let doc = serde_yaml::from_str(&text).unwrap();
        (text, doc)
    }
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Run {
    /// Asserts the exit code, printing the whole run when it differs.
    #[track_caller]
    pub fn expect_code(&self, code: i32) -> &Run {
        assert_eq!(self.code, code, "{self:?}");
        self
    }

    /// Asserts stderr holds each of `parts`, printing the whole run when one is missing.
    #[track_caller]
    pub fn expect_stderr(&self, parts: &[&str]) -> &Run {
        self.expect_in("stderr", &self.stderr, parts)
    }

    /// Asserts stdout holds each of `parts`, printing the whole run when one is missing.
    #[track_caller]
    pub fn expect_stdout(&self, parts: &[&str]) -> &Run {
        self.expect_in("stdout", &self.stdout, parts)
    }

    #[track_caller]
    fn expect_in(&self, stream: &str, text: &str, parts: &[&str]) -> &Run {
        for part in parts {
            assert!(text.contains(part), "no {part:?} on {stream}: {self:?}");
        }
        self
    }

    /// The first line of stderr that `pick` takes; fails printing the run when none does.
    #[track_caller]
    pub fn stderr_line(&self, pick: impl Fn(&str) -> bool) -> &str {
        let found = self.stderr.lines().find(|l| pick(l));
        found.unwrap_or_else(|| panic!("no such line on stderr: {self:?}"))
    }

    /// Stdout as one JSON document (`--output json` of a read command, `--format json`).
    #[track_caller]
    pub fn json(&self) -> Value {
        let doc = serde_json::from_str(&self.stdout);
        doc.unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {self:?}"))
    }

    /// The `project_finished` events of a JSON run: project path → status.
    pub fn statuses(&self) -> BTreeMap<String, String> {
        self.events()
            .into_iter()
            .filter(|e| e["event"] == "project_finished")
            .map(|e| (text(&e["project"]), text(&e["status"])))
            .collect()
    }

    /// The projects whose `project_finished` status is `status`, sorted (a project that
    /// finished twice is there twice).
    pub fn finished_with(&self, status: &str) -> Vec<String> {
        let mut found: Vec<String> = (self.events().into_iter())
            .filter(|e| e["event"] == "project_finished" && e["status"] == status)
            .map(|e| text(&e["project"]))
            .collect();
        found.sort();
        found
    }
}

/// Runs strata with `input` piped on stdin (so not a terminal).
pub fn strata_stdin(ws: &Ws, args: &[&str], input: &str) -> Run {
    let mut child = ws
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn strata");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    Run::from(child.wait_with_output().expect("wait for strata"))
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or("").to_string()
}

/// Asserts `text` holds each of `parts`, printing the text when one is missing.
#[track_caller]
pub fn assert_has(text: &str, parts: &[&str]) {
    for part in parts {
        assert!(text.contains(part), "no {part:?} in:\n{text}");
    }
}

/// The object of the JSON array `list` whose `key` is `value`; fails printing the list.
#[track_caller]
pub fn item<'a>(list: &'a Value, key: &str, value: &str) -> &'a Value {
    let found = items(list).iter().find(|i| i[key] == value);
    found.unwrap_or_else(|| panic!("no {key} = {value:?} in {list:#}"))
}

/// The strings of the JSON array `list`; fails printing it when it is not one.
#[track_caller]
pub fn strings(list: &Value) -> Vec<&str> {
    let each = items(list).iter().map(|v| v.as_str());
    each.map(|s| s.unwrap_or_else(|| panic!("not all strings: {list}")))
        .collect()
}

/// The elements of the JSON array `list`; fails printing it when it is not one.
#[track_caller]
pub fn items(list: &Value) -> &Vec<Value> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
}

/// Sends `signal` (`INT`, `TERM`, `KILL`…) to the process `pid` with `kill`.
#[track_caller]
pub fn send_signal(pid: u32, signal: &str) {
    let st = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -{signal} {pid}");
}

/// Runs `cmd`, asserting it succeeds (printing it and its stderr); its stdout.
#[track_caller]
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?}: {err}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Ws {
    /// [`Ws::strata`], asserting it exits 0 (printing the whole run when it does not).
    #[track_caller]
    pub fn strata_ok(&self, args: &[&str]) -> Run {
        let r = self.strata(args);
        r.expect_code(0);
        r
    }

    /// Appends `text` to the file `rel` (made when it does not exist yet).
    pub fn append(&self, rel: &str, text: &str) -> &Self {
        self.write(rel, &format!("{}{text}", self.read_opt(rel)))
    }

    /// The outputs the fake pulumi gives the Pulumi project `project` (a JSON object), on
    /// top of its program's: `FAKE_PULUMI_OUTPUTS_<PROJECT>`.
    pub fn fake_outputs(&mut self, project: &str, outputs: Value) -> &mut Self {
        self.set_env(&fake_hook("OUTPUTS", project), &outputs.to_string())
    }

    /// [`Ws::fake_outputs`], as secret outputs: `FAKE_PULUMI_SECRET_OUTPUTS_<PROJECT>`.
    pub fn fake_secret_outputs(&mut self, project: &str, outputs: Value) -> &mut Self {
        self.set_env(&fake_hook("SECRET_OUTPUTS", project), &outputs.to_string())
    }

    /// The fake's stand-in for Pulumi Cloud as the backend, its state under `dir`: the
    /// user is `alice`, whose default organization (`acme-default`) is not hers.
    pub fn on_fake_pulumi_cloud(&mut self, dir: &std::path::Path) -> &mut Self {
        self.set_env("PULUMI_BACKEND_URL", "https://api.pulumi.com");
        self.set_env("FAKE_PULUMI_CLOUD_DIR", dir.to_str().unwrap());
        self.set_env("FAKE_PULUMI_USER", "alice");
        self.set_env("FAKE_PULUMI_DEFAULT_ORG", "acme-default")
    }

    /// The text of every file under `rel` (a stack's `.strata/<stack>/logs`), joined.
    pub fn texts_under(&self, rel: &str) -> String {
        let files = self.files_under(rel);
        let texts = files.iter().map(|(_, b)| String::from_utf8_lossy(b));
        texts.collect()
    }
}

/// The fake's `FAKE_PULUMI_<WHAT>_<PROJECT>` variable: the project name upper-cased, every
/// other character as `_` (as the fake reads it).
pub fn fake_hook(what: &str, project: &str) -> String {
    let key: String = (project.chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("FAKE_PULUMI_{what}_{key}")
}

/// Asserts no file under `rel` holds `secret` in plaintext, naming the first that does.
#[track_caller]
pub fn assert_nowhere_under(ws: &Ws, rel: &str, secret: &str) {
    for (path, bytes) in ws.files_under(rel) {
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(secret), "{secret:?} in {}", path.display());
    }
}

/// A Pulumi YAML `resources:` entry: the stack reference `resource` to the stack `stack`
/// (`org/project/stack`; `${…}` interpolations are left to the program).
pub fn stack_reference(resource: &str, stack: &str) -> String {
    format!(
        "  {resource}:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: {stack}\n"
    )
}

impl Ws {
    /// A command project at `projects/<path>` that runs `up`, previews with `preview` and
    /// whose destroy does nothing.
    pub fn previewing_project(&self, path: &str, up: &str, preview: &str) -> &Self {
        self.command_project(path, up, "true");
        let line = format!("preview: {}\n", serde_json::to_string(preview).unwrap());
        self.append(&format!("projects/{path}/Strata.yaml"), &line)
    }

    /// The stack config file of `stack`: `config/pulumi/Pulumi.<stack>.yaml`.
    pub fn stack_config(&self, stack: &str, yaml: &str) -> &Self {
        self.write(&format!("config/pulumi/Pulumi.{stack}.yaml"), yaml)
    }
}

/// Runs `c` to its end with `stdin` piped in (then closed).
pub fn run_with_stdin(mut c: std::process::Command, stdin: &str) -> Run {
    use std::io::Write;
    let mut child = c
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut input = child.stdin.take().expect("stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    Run::from(child.wait_with_output().expect("wait"))
}

/// A stack's outputs as its checkpoint in the file backend `backend` holds them (the
/// stack resource's outputs); fails naming the file when there is none.
#[track_caller]
pub fn stack_outputs(backend: &std::path::Path, project: &str, stack: &str) -> Value {
    let file = backend.join(format!(".pulumi/stacks/{project}/{stack}.json"));
    let text = std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("no checkpoint {}: {e}", file.display()));
    let doc: Value = serde_json::from_str(&text).expect("a checkpoint is JSON");
    doc["checkpoint"]["latest"]["resources"]
        .as_array()
        .and_then(|rs| rs.iter().find(|r| r["type"] == "pulumi:pulumi:Stack"))
        .map(|r| r["outputs"].clone())
        .unwrap_or_default()
}

/// The value of `--flag value` or `--flag=value` in the argv of a call-log line.
pub fn flag_of(call: &Value, flag: &str) -> Option<String> {
    let argv: Vec<String> = serde_json::from_value(call["argv"].clone()).ok()?;
    let eq = format!("{flag}=");
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            argv.get(i + 1).cloned()
        } else {
            a.strip_prefix(&eq).map(str::to_string)
        }
    })
}
