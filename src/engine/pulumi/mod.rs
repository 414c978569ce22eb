//! The Pulumi engine: one project through the real `pulumi` CLI (duct). One process per
//! project in the steady state: `up --json` streams events that carry the outputs;
//! `stack init` only for a new stack, `stack output --show-secrets` only for a needed
//! secret output that `passphrase` cannot decrypt. A failure put into words is
//! `failure`'s; what is read from a `file://` backend without a process is
//! `file_backend`'s, the layouts strata refuses `layout`'s, and which Pulumi locks strata
//! may clear `locks`'.

mod failure;
mod file_backend;
mod layout;
mod locks;
pub mod otel;
mod passphrase;

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::descendants;
use super::digest::{self, Changes};
use super::events::EventState;
use super::process::{Captured, Control, Exit, Stream, run_captured, run_streaming_tagged};
use super::{Engine, Failure, Job, Operation, Outcome, PlanFile, Progress, contains_secret_mask};
use failure::{cancel_command, error_line, exit_text, failure};
pub use file_backend::file_backend_stack_missing;
pub use layout::layout_problem;

/// What one CLI process printed: its engine events and its last lines.
#[derive(Default)]
struct Seen {
    state: EventState,
    tail: Vec<String>,
    /// `preview --json`: stdout, which holds one PreviewDigest document. `up --plan
    /// --json` prints its preview's digest before the update's event lines.
    digest: Option<String>,
    /// The digest ends where the event lines start (`up --plan`).
    digest_then_events: bool,
    /// A locking operation whose first event has not come yet: at that event Pulumi
    /// holds the stack's lock, and strata notes it (`locks`).
    lock_to_note: bool,
}

/// True when the CLI streams preview events instead of printing one digest.
fn streaming_preview(job: &Job) -> bool {
    job.env
        .get("PULUMI_ENABLE_STREAMING_JSON_PREVIEW")
        .is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

pub struct PulumiEngine {
    pub binary: PathBuf,
    /// A traced run's OTLP traces URL, when this CLI takes `--otel-traces`: every call
    /// of a traced step passes it, so Pulumi's spans nest under the step's.
    pub otel_traces: Option<String>,
}

impl PulumiEngine {
    pub fn new(binary: PathBuf) -> PulumiEngine {
        PulumiEngine {
            binary,
            otel_traces: None,
        }
    }

    fn base(&self, job: &Job, args: &[&str], config_file: bool) -> Vec<String> {
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

    fn invoke(
        &self,
        job: &Job,
        args: Vec<String>,
        control: &Control,
        report: &mut dyn FnMut(Progress),
        seen: &mut Seen,
        procs: &mut u32,
    ) -> Result<Exit, Failure> {
        let Seen {
            state,
            tail,
            digest,
            digest_then_events,
            lock_to_note,
        } = seen;
        *procs += 1;
        let args = otel::traced(&args, self.otel_traces.as_deref(), job);
        report(Progress::Raw(format!("$ pulumi {}", args.join(" "))));
        let (expr, call) = self.cmd(job, &args);
        let mut last_progress = (usize::MAX, usize::MAX);
        let exit = run_streaming_tagged(expr, control, &job.path, &mut |from, line| {
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
            if let Some(shown) = state.feed(&line) {
                tail.push(shown.clone());
                if tail.len() > 40 {
                    tail.remove(0);
                }
                report(Progress::Line(shown));
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
            processes: *procs,
        })?;
        report_left(&call, report);
        Ok(exit)
    }

    /// The CLI with `args` in the job's folder and environment, which names the call
    /// ([`descendants::CALL_VAR`]) so that the plugins it leaves are found; and the name.
    fn cmd(&self, job: &Job, args: &[String]) -> (duct::Expression, String) {
        let call = descendants::new_call();
        let mut env = job.env.clone();
        env.insert(descendants::CALL_VAR.to_string(), call.clone());
        let expr = duct::cmd(&self.binary, args).dir(&job.dir).full_env(env);
        (expr, call)
    }

    /// Pulumi's "the stack does not exist": exit 6 (CLI 3.226+). Older CLIs exit 255 on
    /// every error; for them only the one error line Pulumi prints for it,
    /// `error: no stack named '<stack>' found` naming this stack, counts. Never any other
    /// line: a provider error that quotes that text is a failure, not a missing stack.
    /// On a file backend whose checkpoint exists, the stack exists, whatever was printed.
    fn is_missing_stack<'a>(
        job: &Job,
        exit: &Exit,
        lines: impl IntoIterator<Item = &'a str>,
    ) -> bool {
        if file_backend_stack_missing(job) == Some(false) {
            return false;
        }
        exit.code == Some(6)
            || (exit.code == Some(255) && lines.into_iter().any(|l| names_missing_stack(l, job)))
    }

    /// Runs one captured CLI call (`config set`, `stack output`): counted, logged with its
    /// stderr, in its own process group; `stdin` piped in when given.
    fn capture(
        &self,
        job: &Job,
        argv: &[String],
        stdin: Option<&[u8]>,
        control: &Control,
        report: &mut dyn FnMut(Progress),
        procs: &mut u32,
    ) -> Result<(Captured, String), Failure> {
        stop_if_cancelled(job, control, *procs)?;
        *procs += 1;
        let argv = &otel::traced(argv, self.otel_traces.as_deref(), job);
        report(Progress::Raw(format!(
            "$ pulumi {}{}",
            argv.join(" "),
            if stdin.is_some() {
                " (value on stdin)"
            } else {
                ""
            }
        )));
        let (expr, call) = self.cmd(job, argv);
        let out = run_captured(expr, control, &job.path, stdin).map_err(|e| Failure::Failed {
            message: format!("could not run {}: {e}", self.binary.display()),
            exit_code: None,
            processes: *procs,
        })?;
        report_left(&call, report);
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        for l in err.lines() {
            report(Progress::Raw(l.to_string()));
        }
        if !out.exit.success() {
            stop_if_cancelled(job, control, *procs)?;
        }
        Ok((out, err))
    }
}

/// What a preview would change: from its digest (shown as one line per changed
/// resource; its error diagnostics kept for the failure message), or from the streamed
/// events when the CLI streams.
fn preview_changes(seen: &mut Seen, report: &mut dyn FnMut(Progress)) -> Changes {
    let mut changes = Changes::default();
    match seen.digest.take() {
        Some(text) => {
            if let Some(d) = digest::parse(&text) {
                changes = d.changes;
                let mut errors = d.errors;
                errors.append(&mut seen.state.errors);
                seen.state.errors = errors;
            } else {
                // Not a digest (an error before the engine ran): its lines, as printed.
                for l in text.lines().filter(|l| !l.trim().is_empty()) {
                    seen.tail.push(l.to_string());
                    report(Progress::Line(l.to_string()));
                }
                return changes;
            }
        }
        None => {
            if let Some(c) = &seen.state.changes {
                for (op, n) in c {
                    if let Some(n) = n.as_u64() {
                        changes.counts.insert(op.clone(), n);
                    }
                }
            }
            for (op, urn) in &seen.state.steps {
                if !urn.contains("::pulumi:pulumi:Stack::") {
                    changes.add_step(op, urn);
                }
            }
            return changes;
        }
    }
    for (op, urn) in &changes.steps {
        report(Progress::Line(format!(
            "{} {}",
            super::events::op_symbol(op),
            digest::short_urn(urn)
        )));
    }
    changes
}

/// "2 to create, 1 to replace" (or "no changes").
fn preview_summary(c: &Changes) -> String {
    let parts: Vec<String> = digest::CHANGING
        .iter()
        .filter(|op| c.count(op) > 0)
        .map(|op| format!("{} to {op}", c.count(op)))
        .collect();
    if parts.is_empty() {
        "no changes".into()
    } else {
        parts.join(", ")
    }
}

/// `up --plan`: the errors of the preview Pulumi ran first (where a plan that no longer
/// holds is reported), and words for the failure Pulumi leaves without any: a stack
/// output other than the plan's.
fn plan_errors(seen: &mut Seen, exit: &Exit) {
    if let Some(d) = seen.digest.take().and_then(|text| digest::parse(&text)) {
        let mut errors = d.errors;
        errors.append(&mut seen.state.errors);
        seen.state.errors = errors;
    }
    if !exit.success() && seen.state.errors.is_empty() {
        seen.state.errors.push(
            "the update does not match its plan, and Pulumi gave no reason: it fails this way when the stack's outputs would differ from the plan's (an upstream output it passes on changed since the preview)".into(),
        );
    }
}

/// Stops before starting another Pulumi process once a Ctrl-C came.
fn stop_if_cancelled(job: &Job, control: &Control, procs: u32) -> Result<(), Failure> {
    if control.is_cancelled() {
        return Err(Failure::Cancelled {
            message: format!("{} of {} was cancelled", job.op.as_str(), job.path),
            processes: procs,
        });
    }
    Ok(())
}

impl Engine for PulumiEngine {
    fn run(
        &self,
        job: &Job,
        control: &Control,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Outcome, Failure> {
        let mut procs = 0u32;
        let plan = match &job.plan {
            Some(PlanFile::Save(f) | PlanFile::Apply(f)) => f.to_string_lossy().into_owned(),
            None => String::new(),
        };
        let op_args: Vec<&str> = match (job.op, &job.plan) {
            // Held to a plan: Pulumi's own preview runs first, so a plan that no longer
            // holds fails before anything is applied (with --skip-preview the resources
            // that still conform would be applied first).
            (Operation::Up, Some(PlanFile::Apply(_))) => {
                vec!["up", "--yes", "--json", "--plan", &plan]
            }
            (Operation::Up, _) => vec!["up", "--yes", "--skip-preview", "--json"],
            (Operation::Destroy, _) => vec!["destroy", "--yes", "--skip-preview", "--json"],
            (Operation::Refresh, _) => vec!["refresh", "--yes", "--skip-preview", "--json"],
            (Operation::Preview, _) => {
                let mut a = vec!["preview", "--json"];
                if job.refresh {
                    a.push("--refresh");
                }
                if let Some(PlanFile::Save(_)) = &job.plan {
                    a.extend(["--save-plan", plan.as_str()]);
                }
                a
            }
        };
        let digest_mode = job.op == Operation::Preview && !streaming_preview(job);
        let held_to_plan = job.op == Operation::Up && matches!(job.plan, Some(PlanFile::Apply(_)));
        // A new stack on a file backend: create it first instead of learning it from a
        // failed operation (a wrong guess only costs an "already exists").
        if matches!(job.op, Operation::Up | Operation::Preview)
            && file_backend_stack_missing(job) == Some(true)
        {
            self.stack_init(job, control, report, &mut procs)?;
        }
        if matches!(
            job.op,
            Operation::Up | Operation::Destroy | Operation::Refresh
        ) {
            self.clear_stale_lock(job, control, report, &mut procs)?;
        }
        if !job.secret_config.is_empty() && job.op != Operation::Destroy {
            self.set_secret_config(job, control, report, &mut procs)?;
        }
        // While Pulumi updates the stack, the key its secret outputs will need (a
        // dependent's input, a hook) is derived beside it, off the critical path.
        if job.op == Operation::Up && !job.needed_outputs.is_empty() {
            Self::derive_secret_key_early(job);
        }
        // The operation; when Pulumi says the stack does not exist, create it and retry once.
        let mut created = false;
        let (exit, mut seen) = loop {
            stop_if_cancelled(job, control, procs)?;
            let mut seen = Seen {
                digest: (digest_mode || held_to_plan).then(String::new),
                digest_then_events: held_to_plan,
                lock_to_note: job.op != Operation::Preview,
                ..Seen::default()
            };
            let exit = self.invoke(
                job,
                self.base(job, &op_args, true),
                control,
                report,
                &mut seen,
                &mut procs,
            )?;
            let missing = !exit.success()
                && Self::is_missing_stack(job, &exit, seen.tail.iter().map(String::as_str))
                && !control.is_cancelled();
            if !missing || created {
                break (exit, seen);
            }
            if matches!(job.op, Operation::Destroy | Operation::Refresh) {
                report(Progress::Line(format!(
                    "stack {} of {} does not exist: nothing to {}",
                    job.stack,
                    job.name,
                    job.op.as_str()
                )));
                return Ok(Outcome {
                    summary: "no stack: nothing to do".into(),
                    processes: procs,
                    ..Outcome::default()
                });
            }
            self.stack_init(job, control, report, &mut procs)?;
            if !job.secret_config.is_empty() {
                self.set_secret_config(job, control, report, &mut procs)?;
            }
            created = true;
        };
        let changes = (job.op == Operation::Preview).then(|| preview_changes(&mut seen, report));
        if held_to_plan {
            plan_errors(&mut seen, &exit);
        }
        if !exit.success() {
            return Err(failure(job, job.op.as_str(), &exit, &seen, control, procs));
        }
        let summary = match &changes {
            Some(c) => preview_summary(c),
            None => seen.state.change_summary(),
        };
        let state = seen.state;
        let mut outputs = match job.op {
            Operation::Up => state.stack_outputs.clone().unwrap_or_default(),
            _ => Map::new(),
        };
        let secret_outputs = outputs
            .iter()
            .filter(|(_, v)| contains_secret_mask(v))
            .map(|(k, _)| k.clone())
            .collect();
        let secret_needed = job
            .needed_outputs
            .iter()
            .any(|k| outputs.get(k).is_some_and(contains_secret_mask));
        // A CLI whose events lack an output a dependent needs: ask for the outputs once.
        // On a file backend with the passphrase provider strata reads them itself.
        let missing_needed =
            job.op == Operation::Up && job.needed_outputs.iter().any(|k| !outputs.contains_key(k));
        if secret_needed || missing_needed {
            outputs = match Self::stack_outputs_from_file_revealed(job) {
                Some(clear) => clear,
                None => self.stack_outputs(job, control, report, true, &mut procs)?,
            };
        }
        let planned_outputs = match (&job.op, &job.plan) {
            (Operation::Preview, Some(PlanFile::Save(f))) => std::fs::read_to_string(f)
                .ok()
                .and_then(|t| digest::planned_outputs(&t)),
            _ => None,
        };
        Ok(Outcome {
            outputs,
            secret_outputs,
            summary,
            processes: procs,
            changes,
            planned_outputs,
        })
    }
}

impl PulumiEngine {
    /// `pulumi stack init`. It selects the new stack in the project's own workspace
    /// file, which is per project, so parallel projects do not race on it.
    fn stack_init(
        &self,
        job: &Job,
        control: &Control,
        report: &mut dyn FnMut(Progress),
        procs: &mut u32,
    ) -> Result<(), Failure> {
        stop_if_cancelled(job, control, *procs)?;
        let mut seen = Seen::default();
        let exit = self.invoke(
            job,
            self.base(job, &["stack", "init"], false),
            control,
            report,
            &mut seen,
            procs,
        )?;
        if exit.success() {
            return Ok(());
        }
        let Some(name) = seen.tail.iter().find_map(|l| already_exists(l)) else {
            return Err(failure(job, "stack init", &exit, &seen, control, *procs));
        };
        if existing_stack_is_ours(job, name) {
            return Ok(());
        }
        Err(Failure::Failed {
            message: format!(
                "`pulumi stack init` of {} says stack `{name}` already exists, and strata cannot tell it is {}'s own {} stack{}. On a backend in Pulumi's legacy layout every project's `{}` is one stack: an `up` would replace that stack's resources with this project's. Nothing of {} was run.\n  If the backend is in the legacy layout, upgrade it once with `pulumi state upgrade` (with PULUMI_BACKEND_URL set as for strata).",
                job.path,
                job.name,
                job.stack,
                if on_file_backend(job) {
                    " (its checkpoint is not in the project's folder of the file backend)"
                } else {
                    ""
                },
                job.stack,
                job.path
            ),
            exit_code: exit.code,
            processes: *procs,
        })
    }

    /// A Pulumi update killed outright (strata and its child both SIGKILLed, a timeout's
    /// SIGKILL) leaves its lock file in a file backend, and every later operation on that
    /// stack fails with "the stack is currently locked". strata clears it with `pulumi
    /// cancel` (which on a file backend deletes the lock files) only when it can prove
    /// every lock's process is gone (`locks`: a process strata itself started, in this
    /// boot and PID namespace, that no longer exists). Any other lock is left alone: the
    /// operation then fails, and says which command clears it.
    fn clear_stale_lock(
        &self,
        job: &Job,
        control: &Control,
        report: &mut dyn FnMut(Progress),
        procs: &mut u32,
    ) -> Result<(), Failure> {
        let judged = locks::judge(job);
        if judged.is_empty() {
            return Ok(());
        }
        if judged.iter().any(|(_, why)| why.is_some()) {
            for (l, why) in &judged {
                if let Some(why) = why {
                    report(Progress::Line(format!(
                        "the stack is locked by Pulumi process {} on {} (since {}); strata cannot prove that process is gone ({why}), so it leaves the lock",
                        l.pid, l.hostname, l.timestamp
                    )));
                }
            }
            return Ok(());
        }
        for (l, _) in &judged {
            report(Progress::Line(format!(
                "the stack was left locked by Pulumi process {} (since {}), which strata started and which is gone: an update was interrupted; clearing the lock with `pulumi cancel`",
                l.pid, l.timestamp
            )));
        }
        let argv = self.base(job, &["cancel", "--yes"], false);
        let (out, err) = self.capture(job, &argv, None, control, report, procs)?;
        if out.exit.success() {
            locks::forget_released(job);
            return Ok(());
        }
        Err(Failure::Failed {
            message: format!(
                "could not clear the stale Pulumi lock of {} ({}): {}. Run: {}",
                job.path,
                exit_text(&out.exit),
                error_line(err.lines()),
                cancel_command(job)
            ),
            exit_code: out.exit.code,
            processes: *procs,
        })
    }

    /// Sets each secret config value with `pulumi config set --secret KEY`, the value on
    /// stdin; creates the stack first when it does not exist.
    fn set_secret_config(
        &self,
        job: &Job,
        control: &Control,
        report: &mut dyn FnMut(Progress),
        procs: &mut u32,
    ) -> Result<(), Failure> {
        let mut initialised = false;
        for (key, value) in &job.secret_config {
            loop {
                let argv = self.base(job, &["config", "set", "--secret", key.as_str()], true);
                let (out, err) =
                    self.capture(job, &argv, Some(value.as_bytes()), control, report, procs)?;
                if out.exit.success() {
                    break;
                }
                if Self::is_missing_stack(job, &out.exit, err.lines()) && !initialised {
                    initialised = true;
                    self.stack_init(job, control, report, procs)?;
                    continue;
                }
                return Err(Failure::Failed {
                    message: format!(
                        "could not set secret config `{key}` of {} ({}): {}",
                        job.path,
                        exit_text(&out.exit),
                        error_line(err.lines())
                    ),
                    exit_code: out.exit.code,
                    processes: *procs,
                });
            }
        }
        Ok(())
    }

    /// `pulumi stack output --json [--show-secrets]` of the job's project and stack.
    pub fn stack_outputs(
        &self,
        job: &Job,
        control: &Control,
        report: &mut dyn FnMut(Progress),
        show_secrets: bool,
        procs: &mut u32,
    ) -> Result<Map<String, Value>, Failure> {
        let mut args = vec!["stack", "output", "--json"];
        if show_secrets {
            args.push("--show-secrets");
        }
        let argv = self.base(job, &args, false);
        let (out, err) = self.capture(job, &argv, None, control, report, procs)?;
        let code = out.exit.code;
        if !out.exit.success() {
            // An old CLI's missing-stack answer is recorded as the code 3.226+ gives it.
            let missing = Self::is_missing_stack(job, &out.exit, err.lines());
            return Err(Failure::Failed {
                message: format!(
                    "`pulumi stack output` of {} failed ({}): {}",
                    job.path,
                    exit_text(&out.exit),
                    error_line(err.lines())
                ),
                exit_code: if missing { Some(6) } else { code },
                processes: *procs,
            });
        }
        match serde_json::from_slice::<Value>(&out.stdout) {
            Ok(Value::Object(m)) => Ok(m),
            _ => Err(Failure::Failed {
                message: format!(
                    "`pulumi stack output --json` of {} did not print a JSON object",
                    job.path
                ),
                exit_code: code,
                processes: *procs,
            }),
        }
    }
}
/// Stops the plugins the call left running (see [`descendants::stop_plugins_left_by`]),
/// saying so in the project's log.
fn report_left(call: &str, report: &mut dyn FnMut(Progress)) {
    if let Some(line) = descendants::stop_plugins_left_by(call) {
        report(Progress::Raw(line));
    }
}

/// The `--stack` of every call. On Pulumi Cloud with a known organization it is
/// `org/project/stack`: `stack init --stack dev` would create the stack in the CLI's
/// default organization, which may not be the one stack references name (MARA #223).
fn stack_arg(job: &Job) -> String {
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
fn names_missing_stack(line: &str, job: &Job) -> bool {
    let Some(name) = line
        .trim()
        .strip_prefix("error: no stack named '")
        .and_then(|rest| rest.strip_suffix("' found"))
    else {
        return false;
    };
    name == job.stack || name.ends_with(&format!("/{}", job.stack))
}

/// The stack Pulumi's `error: stack '<name>' already exists` names.
fn already_exists(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix("error: stack '")?
        .strip_suffix("' already exists")
}

/// Whether the stack `stack init` found existing is this project's: Pulumi names it
/// fully (`<org>/<project>/<stack>`: project mode and Pulumi Cloud; a legacy backend
/// names a bare `<stack>`, shared by every project) with this project and stack, and on
/// a file backend its checkpoint is in this project's folder.
fn existing_stack_is_ours(job: &Job, name: &str) -> bool {
    let named = matches!(name.split('/').collect::<Vec<_>>().as_slice(),
        [_, project, stack] if *project == job.name && *stack == job.stack);
    named && (!on_file_backend(job) || file_backend_stack_missing(job) == Some(false))
}

fn on_file_backend(job: &Job) -> bool {
    layout::file_backend_dir(job).is_some()
}

#[cfg(test)]
mod backend_tests;
#[cfg(test)]
mod tests;
