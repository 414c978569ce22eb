//! The stack's own commands around an operation: `stack init` (and whether a stack
//! that "already exists" is this project's), clearing a stale lock, secret config, and
//! `stack output`.

use super::scratch::Scratch;
use super::*;

impl PulumiEngine {
    /// `pulumi stack init --no-select`, in a throwaway copy of the project
    /// ([`Scratch`]): the stack is created in the job's backend, and the secrets
    /// provider Pulumi writes goes into the job's stack config, not into the user's
    /// `Pulumi.<stack>.yaml`.
    pub(super) fn stack_init(&self, calls: &mut Calls) -> Result<(), Failure> {
        let job = calls.job;
        calls.stop_if_cancelled()?;
        let scratch = Scratch::new(job).map_err(|why| Failure::Failed {
            message: format!(
                "could not prepare `pulumi stack init` of {}: {why}",
                job.path
            ),
            exit_code: None,
            processes: calls.procs,
        })?;
        let mut args = self.base(job, &["stack", "init", "--no-select"], false);
        if let Some(i) = args.iter().position(|a| a == "--cwd") {
            args[i + 1] = scratch.path().display().to_string();
        }
        let mut seen = Seen::default();
        let exit = self.invoke_with_env(calls, args, &mut seen, scratch.env(job))?;
        let carried = || {
            scratch.carry_provider(job).map_err(|why| Failure::Failed {
                message: format!(
                    "stack `{}` of {} was created, but its secrets provider could not be kept in strata's copy of its config: {why}",
                    job.stack, job.path
                ),
                exit_code: None,
                processes: calls.procs,
            })
        };
        if exit.success() {
            calls.created_stack = true;
            if job.op == Operation::Preview {
                (calls.report)(Progress::Line(format!(
                    "stack {} of {} did not exist: created it, empty, in the backend, for Pulumi to preview against (a preview changes no resource)",
                    job.stack, job.name
                )));
            }
            return carried();
        }
        let Some(name) = seen.tail.iter().find_map(|l| already_exists(l)) else {
            return Err(failure(
                job,
                "stack init",
                &exit,
                &seen,
                calls.control,
                calls.procs,
            ));
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
                if checkpoint_stack_missing(job).is_some() || on_file_backend(job) {
                    " (its checkpoint is not in the project's folder of the backend)"
                } else {
                    ""
                },
                job.stack,
                job.path
            ),
            exit_code: exit.code,
            processes: calls.procs,
        })
    }

    /// A Pulumi update killed outright (strata and its child both SIGKILLed, a timeout's
    /// SIGKILL) leaves its lock file in a file backend, and every later operation on that
    /// stack fails with "the stack is currently locked". strata clears it with `pulumi
    /// cancel` (which on a file backend deletes the lock files) only when it can prove
    /// every lock's process is gone (`locks`: a process strata itself started, in this
    /// boot and PID namespace, that no longer exists). Any other lock is left alone: the
    /// operation then fails, and says which command clears it.
    pub(super) fn clear_stale_lock(&self, calls: &mut Calls) -> Result<(), Failure> {
        let job = calls.job;
        let judged = locks::judge(job);
        if judged.is_empty() {
            return Ok(());
        }
        if judged.iter().any(|(_, why)| why.is_some()) {
            for (l, why) in &judged {
                if let Some(why) = why {
                    (calls.report)(Progress::Line(format!(
                        "the stack is locked by Pulumi process {} on {} (since {}); strata cannot prove that process is gone ({why}), so it leaves the lock",
                        l.pid, l.hostname, l.timestamp
                    )));
                }
            }
            return Ok(());
        }
        for (l, _) in &judged {
            (calls.report)(Progress::Line(format!(
                "the stack was left locked by Pulumi process {} (since {}), which strata started and which is gone: an update was interrupted; clearing the lock with `pulumi cancel`",
                l.pid, l.timestamp
            )));
        }
        let argv = self.base(job, &["cancel", "--yes"], false);
        let (out, err) = self.capture(calls, &argv, None)?;
        if out.exit.success() {
            locks::forget_released(job);
            return Ok(());
        }
        Err(Failure::Failed {
            message: format!(
                "{}. Run: {}",
                call_failed(
                    &format!("could not clear the stale Pulumi lock of {}", job.path),
                    &out.exit,
                    &err
                ),
                cancel_command(job)
            ),
            exit_code: out.exit.code,
            processes: calls.procs,
        })
    }

    /// Sets each secret config value with `pulumi config set --secret KEY`, the value on
    /// stdin; creates the stack first when it does not exist.
    pub(super) fn set_secret_config(&self, calls: &mut Calls) -> Result<(), Failure> {
        let job = calls.job;
        let mut initialised = false;
        for (key, value) in &job.secret_config {
            loop {
                let argv = self.base(job, &["config", "set", "--secret", key.as_str()], true);
                let (out, err) = self.capture(calls, &argv, Some(value.as_bytes()))?;
                if out.exit.success() {
                    break;
                }
                if Self::is_missing_stack(job, &out.exit, err.lines()) && !initialised {
                    initialised = true;
                    self.stack_init(calls)?;
                    continue;
                }
                return Err(Failure::Failed {
                    message: call_failed(
                        &format!("could not set secret config `{key}` of {}", job.path),
                        &out.exit,
                        &err,
                    ),
                    exit_code: out.exit.code,
                    processes: calls.procs,
                });
            }
        }
        Ok(())
    }

    /// `pulumi stack output --json [--show-secrets]` of the job's project and stack.
    pub fn stack_outputs(
        &self,
        calls: &mut Calls,
        show_secrets: bool,
    ) -> Result<Map<String, Value>, Failure> {
        let job = calls.job;
        let mut args = vec!["stack", "output", "--json"];
        if show_secrets {
            args.push("--show-secrets");
        }
        let argv = self.base(job, &args, false);
        let (out, err) = self.capture(calls, &argv, None)?;
        let code = out.exit.code;
        if !out.exit.success() {
            // An old CLI's missing-stack answer is recorded as the code 3.226+ gives it.
            let missing = Self::is_missing_stack(job, &out.exit, err.lines());
            return Err(Failure::Failed {
                message: call_failed(
                    &format!("`pulumi stack output` of {} failed", job.path),
                    &out.exit,
                    &err,
                ),
                exit_code: if missing { Some(6) } else { code },
                processes: calls.procs,
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
                processes: calls.procs,
            }),
        }
    }
}

/// The stack Pulumi's `error: stack '<name>' already exists` names.
pub(super) fn already_exists(line: &str) -> Option<&str> {
    line.trim()
        .strip_prefix("error: stack '")?
        .strip_suffix("' already exists")
}

/// Whether the stack `stack init` found existing is this project's: Pulumi names it
/// fully (`<org>/<project>/<stack>`: project mode and Pulumi Cloud; a legacy backend
/// names a bare `<stack>`, shared by every project) with this project and stack, and on
/// a backend strata reads (a file backend must be) its checkpoint is in this project's
/// folder.
pub(super) fn existing_stack_is_ours(job: &Job, name: &str) -> bool {
    let named = matches!(name.split('/').collect::<Vec<_>>().as_slice(),
        [_, project, stack] if *project == job.name && *stack == job.stack);
    named
        && match checkpoint_stack_missing(job) {
            Some(missing) => !missing,
            None => !on_file_backend(job),
        }
}

pub(super) fn on_file_backend(job: &Job) -> bool {
    super::source::file_backend_dir(job).is_some()
}
