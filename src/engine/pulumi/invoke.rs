//! Starting the CLI for one call and reading what it says: its arguments (`--stack`,
//! `--cwd`, the config file), its streamed events and last lines (`Seen`), its captured
//! output, whether it said the stack is missing, and the plugins it left behind.

use std::collections::BTreeMap;

use crate::engine::events::Shown;

use super::*;

/// What one CLI process printed: its engine events and its last lines.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) state: EventState,
    pub(super) tail: Vec<String>,
    /// `preview --json`: stdout, which holds one PreviewDigest document. `up --plan
    /// --json` prints its preview's digest before the update's event lines.
    pub(super) digest: Option<String>,
    /// The digest ends where the event lines start (`up --plan`).
    pub(super) digest_then_events: bool,
    /// A locking operation whose first event has not come yet: at that event Pulumi
    /// holds the stack's lock, and strata notes it (`locks`).
    pub(super) lock_to_note: bool,
}

/// A project's calls of the CLI in one operation: its job, the run's control (a
/// Ctrl-C stops them), where their lines go, and how many processes they have started
/// (what a failure reports).
pub struct Calls<'a> {
    pub job: &'a Job,
    pub control: &'a Control,
    pub report: &'a mut dyn FnMut(Progress),
    pub procs: u32,
    /// A stack these calls created (`stack init`): a preview says so.
    pub created_stack: bool,
}

impl Calls<'_> {
    /// Stops before starting another Pulumi process once a Ctrl-C came.
    pub(super) fn stop_if_cancelled(&self) -> Result<(), Failure> {
        if self.control.is_cancelled() {
            return Err(Failure::Cancelled {
                message: format!(
                    "{} of {} was cancelled",
                    self.job.op.as_str(),
                    self.job.path
                ),
                processes: self.procs,
            });
        }
        Ok(())
    }
}

/// True when the CLI streams preview events instead of printing one digest.
pub(super) fn streaming_preview(job: &Job) -> bool {
    job.env
        .get("PULUMI_ENABLE_STREAMING_JSON_PREVIEW")
        .is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

impl PulumiEngine {
    pub(super) fn base(&self, job: &Job, args: &[&str], config_file: bool) -> Vec<String> {
        let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        v.extend([
            "--cwd".to_string(),
            job.dir.display().to_string(),
            "--stack".to_string(),
            stack_arg(job),
            "--non-interactive".to_string(),
        ]);
        if config_file {
            v.push("--config-file".to_string());
            v.push(job.config_file.display().to_string());
        }
        v
    }

    pub(super) fn invoke(
        &self,
        calls: &mut Calls,
        args: Vec<String>,
        seen: &mut Seen,
    ) -> Result<Exit, Failure> {
        let env = calls.job.env.clone();
        self.invoke_with_env(calls, args, seen, env)
    }

    /// [`Self::invoke`] with the child's environment `env` (the job's, adjusted).
    pub(super) fn invoke_with_env(
        &self,
        calls: &mut Calls,
        args: Vec<String>,
        seen: &mut Seen,
        env: BTreeMap<String, String>,
    ) -> Result<Exit, Failure> {
        let Seen {
            state,
            tail,
            digest,
            digest_then_events,
            lock_to_note,
        } = seen;
        let (expr, call) = self.start(calls, &args, "", env);
        let (job, report) = (calls.job, &mut *calls.report);
        let mut last_progress = (usize::MAX, usize::MAX);
        let exit = run_streaming_tagged(expr, calls.control, &job.path, &mut |from, line| {
            report(Progress::Raw(line.clone()));
            if *lock_to_note && from == Stream::Stdout && line.starts_with("{\"sequence\"") {
                *lock_to_note = false;
                locks::note_own_locks(job);
            }
            if from == Stream::Stdout
                && let Some(buf) = digest.as_mut()
                && !(*digest_then_events && line.starts_with("{\"sequence\""))
            {
                buf.push_str(&line);
                buf.push('\n');
                return;
            }
            match state.read(&line) {
                Some(Shown::Line(shown)) => {
                    tail.push(shown.clone());
                    if tail.len() > 40 {
                        tail.remove(0);
                    }
                    report(Progress::Line(shown));
                }
                Some(Shown::Debug(shown)) => report(Progress::Debug(shown)),
                None => {}
            }
            if (state.done, state.started) != last_progress {
                last_progress = (state.done, state.started);
                report(state.progress());
            }
        })
        .map_err(|e| Failure::Failed {
            message: format!(
                "could not run {}: {e}. Install the Pulumi CLI or point STRATA_PULUMI at it.",
                self.binary.display()
            ),
            exit_code: None,
            processes: calls.procs,
        })?;
        report_left(call, calls.report);
        Ok(exit)
    }

    /// A call about to start: counted, its arguments traced (see [`otel`]) and logged
    /// (`$ pulumi …`, then `note`), and its command (see [`Self::cmd`]).
    fn start(
        &self,
        calls: &mut Calls,
        args: &[String],
        note: &str,
        env: BTreeMap<String, String>,
    ) -> (duct::Expression, Call) {
        calls.procs += 1;
        let args = otel::traced(args, self.otel_traces.as_deref(), calls.job);
        (calls.report)(Progress::Raw(format!("$ pulumi {}{note}", args.join(" "))));
        self.cmd_in(calls.job, &args, env)
    }

    /// The CLI with `args` in the job's folder and the environment `env`, with the
    /// call's name and temp folder in it (see [`Call`]); and the call.
    fn cmd_in(
        &self,
        job: &Job,
        args: &[String],
        mut env: BTreeMap<String, String>,
    ) -> (duct::Expression, Call) {
        let call = Call::new(&job.env);
        env.insert(descendants::CALL_VAR.to_string(), call.id.clone());
        if let Some(tmp) = &call.tmp {
            env.insert("TMPDIR".into(), tmp.path().to_string_lossy().into_owned());
        }
        let expr = duct::cmd(&self.binary, args).dir(&job.dir).full_env(env);
        (expr, call)
    }

    /// Pulumi's "the stack does not exist": exit 6 (CLI 3.226+). Older CLIs exit 255 on
    /// every error; for them only the one error line Pulumi prints for it,
    /// `error: no stack named '<stack>' found` naming this stack, counts. Never any other
    /// line: a provider error that quotes that text is a failure, not a missing stack.
    /// On a file or S3 backend whose checkpoint exists, the stack exists, whatever was printed.
    pub(super) fn is_missing_stack<'a>(
        job: &Job,
        exit: &Exit,
        lines: impl IntoIterator<Item = &'a str>,
    ) -> bool {
        if checkpoint_stack_missing(job) == Some(false) {
            return false;
        }
        exit.code == Some(6)
            || (exit.code == Some(255) && lines.into_iter().any(|l| names_missing_stack(l, job)))
    }

    /// Runs one captured CLI call (`config set`, `stack output`): counted, logged with its
    /// stderr, in its own process group; `stdin` piped in when given.
    pub(super) fn capture(
        &self,
        calls: &mut Calls,
        argv: &[String],
        stdin: Option<&[u8]>,
    ) -> Result<(Captured, String), Failure> {
        calls.stop_if_cancelled()?;
        let note = if stdin.is_some() {
            " (value on stdin)"
        } else {
            ""
        };
        let (expr, call) = self.start(calls, argv, note, calls.job.env.clone());
        let out = run_captured(expr, calls.control, &calls.job.path, stdin).map_err(|e| {
            Failure::Failed {
                message: format!("could not run {}: {e}", self.binary.display()),
                exit_code: None,
                processes: calls.procs,
            }
        })?;
        report_left(call, calls.report);
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        for l in err.lines() {
            (calls.report)(Progress::Raw(l.to_string()));
        }
        if !out.exit.success() {
            calls.stop_if_cancelled()?;
        }
        Ok((out, err))
    }
}

/// One CLI process as strata starts it: its name in the environment of everything it
/// starts ([`descendants::CALL_VAR`]), so that the plugins it leaves are found, and a
/// temp folder of its own (`TMPDIR`, inside the user's), removed with the call and
/// whatever the CLI and its plugins wrote there. Pulumi's Kubernetes provider writes
/// the cluster's kubeconfig, credentials included, to a temp file on every start and
/// never removes it (pulumi-kubernetes `provider.go`, `writeKubeconfigToFile`).
pub(super) struct Call {
    id: String,
    /// `None` when the folder could not be made: the CLI gets the user's `TMPDIR`.
    tmp: Option<tempfile::TempDir>,
}

impl Call {
    fn new(env: &std::collections::BTreeMap<String, String>) -> Call {
        let base = env
            .get("TMPDIR")
            .filter(|t| !t.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(std::env::temp_dir);
        Call {
            id: descendants::new_call(),
            tmp: tempfile::Builder::new()
                .prefix("strata-pulumi-")
                .tempdir_in(base)
                .ok(),
        }
    }
}

/// Stops the plugins the call left running (see [`descendants::stop_plugins_left_by`]),
/// saying so in the project's log, then removes its temp folder.
pub(super) fn report_left(call: Call, report: &mut dyn FnMut(Progress)) {
    if let Some(line) = descendants::stop_plugins_left_by(&call.id) {
        report(Progress::Raw(line));
    }
}

/// The `--stack` of every call. On Pulumi Cloud with a known organization it is
/// `org/project/stack`: `stack init --stack dev` would create the stack in the CLI's
/// default organization, which may not be the one stack references name (MARA #223).
pub(super) fn stack_arg(job: &Job) -> String {
    let cloud = job
        .env
        .get("PULUMI_BACKEND_URL")
        .is_some_and(|u| u.starts_with("https://") || u.starts_with("http://"));
    match job.env.get("STRATA_ORG").filter(|o| cloud && !o.is_empty()) {
        Some(org) => format!("{org}/{}/{}", job.name, job.stack),
        None => job.stack.clone(),
    }
}

/// Whether `line` is exactly Pulumi's error for a missing stack naming the job's stack
/// (`error: no stack named 'dev' found`, the name possibly `org/project/dev`).
pub(super) fn names_missing_stack(line: &str, job: &Job) -> bool {
    let Some(name) = line
        .trim()
        .strip_prefix("error: no stack named '")
        .and_then(|rest| rest.strip_suffix("' found"))
    else {
        return false;
    };
    name == job.stack || name.ends_with(&format!("/{}", job.stack))
}
