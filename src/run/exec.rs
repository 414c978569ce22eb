//! `strata exec`'s step: one command (not a shell line) run in a project's folder as a
//! scheduler step. It owns where the command is found, its log file
//! (`.strata/<stack>/logs/<path>/exec-<time>.log`), its process (its own group, stdin
//! closed, registered with [`Control`] so Ctrl-C reaches it and nothing outlives the run)
//! and the last lines it printed, kept for a failure's message. No journal, lock or
//! stack is touched.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::events::{RunEvent, Status};
use super::scheduler::{Executor, StepResult};
use super::step::log;
use crate::engine::Control;
use crate::engine::process::{find_program, run_streaming};
use crate::util::{display_path, now_ms, rfc3339};

/// What an `exec` step's log is named by: `<logs>/<path>/exec-<time>.log`.
const LOG_NAME: &str = "exec";

/// How many of a command's last lines a failure shows.
pub const TAIL_LINES: usize = 20;

/// One project's command: where it runs and with what environment.
#[derive(Debug, Clone)]
pub struct ExecJob {
    /// The project's path in the profile.
    pub path: String,
    /// Its folder: the command's working directory.
    pub dir: PathBuf,
    /// The command's complete environment.
    pub env: BTreeMap<String, String>,
}

/// Runs `argv` for each job, job `i` being node `i` of the scheduler's plan.
pub struct ExecRunner<'a> {
    argv: &'a [String],
    jobs: Vec<ExecJob>,
    /// `.strata/<stack>/logs`.
    logs_dir: PathBuf,
    stack: String,
    control: &'a Control,
    logs: Mutex<BTreeMap<usize, PathBuf>>,
    tails: Mutex<BTreeMap<usize, Vec<String>>>,
}

/// Where `program` is for a command run in `dir` with `env`: a path with a slash is taken
/// from `dir` (`./build.sh` is the project's), a bare name is looked up on `env`'s `PATH`.
/// `None`: not there, or not executable.
pub fn resolve_program(
    program: &str,
    dir: &Path,
    env: &BTreeMap<String, String>,
) -> Option<PathBuf> {
    if program.contains('/') {
        let p = Path::new(program);
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            dir.join(p)
        };
        return find_program(&p.to_string_lossy(), env);
    }
    find_program(program, env)
}

/// Why `program` cannot be run for `project`, for people.
pub fn not_found(program: &str, project: &str) -> String {
    if program.contains('/') {
        format!(
            "command `{program}` not found for project {project}: no executable file at that path (relative paths start from the project's folder)"
        )
    } else {
        format!(
            "command `{program}` not found for project {project}: it is not on the PATH strata gives the project (install it, or give its path)"
        )
    }
}

impl<'a> ExecRunner<'a> {
    pub fn new(
        argv: &'a [String],
        jobs: Vec<ExecJob>,
        logs_dir: PathBuf,
        stack: &str,
        control: &'a Control,
    ) -> ExecRunner<'a> {
        ExecRunner {
            argv,
            jobs,
            logs_dir,
            stack: stack.to_string(),
            control,
            logs: Mutex::new(BTreeMap::new()),
            tails: Mutex::new(BTreeMap::new()),
        }
    }

    /// The log of step `i`, once it started.
    pub fn log_path(&self, i: usize) -> Option<PathBuf> {
        self.logs.lock().ok()?.get(&i).cloned()
    }

    /// The last lines step `i` printed (at most [`TAIL_LINES`]).
    pub fn tail(&self, i: usize) -> Vec<String> {
        self.tails
            .lock()
            .ok()
            .and_then(|t| t.get(&i).cloned())
            .unwrap_or_default()
    }

    /// The command as one line (quoted where a word needs it), for the log and header.
    pub fn command_shown(&self) -> String {
        self.argv
            .iter()
            .map(|a| {
                if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
                    format!("'{}'", a.replace('\'', "'\\''"))
                } else {
                    a.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn run(&self, i: usize, emit: &(dyn Fn(RunEvent) + Sync)) -> StepResult {
        let job = &self.jobs[i];
        let started = now_ms();
        let mut file = self
            .log_path(i)
            .and_then(|p| crate::files::open_private_append(&p).ok());
        let mut log = |line: &str| {
            if let Some(f) = file.as_mut() {
                let _ = writeln!(f, "{line}");
            }
        };
        log(&format!(
            "# strata exec in {} · stack {} · {}\n$ {}",
            job.path,
            self.stack,
            rfc3339(started),
            self.command_shown()
        ));
        let log_shown = self.log_path(i).map(|p| display_path(&p));
        let ended = |status: Status, message: String, exit_code: Option<i32>| StepResult {
            duration_ms: now_ms().saturating_sub(started),
            log: log_shown.clone(),
            exit_code,
            ..StepResult::not_run(status, message)
        };
        let program = self.argv.first().map(String::as_str).unwrap_or_default();
        let Some(found) = resolve_program(program, &job.dir, &job.env) else {
            let message = not_found(program, &job.path);
            log(&format!("# failed: {message}"));
            return ended(Status::Failed, message, None);
        };
        let expr = duct::cmd(found, &self.argv[1..])
            .dir(&job.dir)
            .full_env(&job.env);
        let mut tail: VecDeque<String> = VecDeque::with_capacity(TAIL_LINES);
        let exit = run_streaming(expr, self.control, &job.path, &mut |line| {
            log(&line);
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(line.clone());
            emit(RunEvent::ProjectOutput {
                project: job.path.clone(),
                line,
            });
        });
        if let Ok(mut t) = self.tails.lock() {
            t.insert(i, tail.into_iter().collect());
        }
        let (status, message, code) = match exit {
            Err(e) => (
                Status::Failed,
                format!("could not start `{program}` for project {}: {e}", job.path),
                None,
            ),
            Ok(exit) if exit.success() => (Status::Succeeded, String::new(), Some(0)),
            Ok(_) if self.control.is_cancelled() => {
                (Status::Cancelled, "interrupted".to_string(), None)
            }
            Ok(exit) => (
                Status::Failed,
                match (exit.code, exit.signal) {
                    (Some(c), _) => format!("exit {c}"),
                    (_, Some(s)) => format!("killed by signal {s}"),
                    _ => "unknown exit".to_string(),
                },
                exit.code,
            ),
        };
        let r = ended(status, message, code);
        log(&format!(
            "# {} in {}ms{}",
            status.as_str(),
            r.duration_ms,
            r.message
                .as_ref()
                .filter(|m| !m.is_empty())
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
        if let Some(path) = self.log_path(i) {
            log::prune(&path, LOG_NAME, log::KEPT_PER_OPERATION);
        }
        r
    }
}

impl Executor for ExecRunner<'_> {
    /// The step's log file, made before it starts: `<logs>/<path>/exec-<time>.log`.
    fn prepare(&self, i: usize) -> Option<String> {
        let dir = self
            .logs_dir
            .join(self.jobs[i].path.trim_start_matches('@'));
        let stamp = rfc3339(now_ms()).replace(':', "-");
        let (path, _) = log::create(&dir, LOG_NAME, &stamp)?;
        if let Ok(mut l) = self.logs.lock() {
            l.insert(i, path.clone());
        }
        Some(display_path(&path))
    }

    fn execute(&self, i: usize, emit: &(dyn Fn(RunEvent) + Sync)) -> StepResult {
        self.run(i, emit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::Operation;
    use crate::run::pools::Pools;
    use crate::run::scheduler::{self, Options};

    fn env() -> BTreeMap<String, String> {
        [(
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_default(),
        )]
        .into()
    }

    #[test]
    fn a_bare_name_is_looked_up_on_path_and_a_relative_path_in_the_folder() {
        let d = tempfile::tempdir().unwrap();
        assert!(resolve_program("sh", d.path(), &env()).is_some());
        assert!(resolve_program("no-such-program-strata", d.path(), &env()).is_none());
        assert!(resolve_program("./build.sh", d.path(), &env()).is_none());
        let script = d.path().join("build.sh");
        std::fs::write(&script, "#!/bin/sh\necho hi\n").unwrap();
        // Not executable yet: not a command.
        assert!(resolve_program("./build.sh", d.path(), &env()).is_none());
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(
            resolve_program("./build.sh", d.path(), &env()).unwrap(),
            d.path().join("./build.sh")
        );
        let msg = not_found("nmp", "infra/net");
        assert!(msg.contains("`nmp`") && msg.contains("infra/net") && msg.contains("PATH"));
    }

    /// Runs `argv` in two independent projects `a` (folder `a/`) and `b` (folder `b/`)
    /// under the scheduler; returns the results, the runner's logs and tails.
    fn run_two(argv: &[&str]) -> (Vec<StepResult>, Vec<String>, Vec<Vec<String>>) {
        let d = tempfile::tempdir().unwrap();
        let plan = crate::plan::testing::plan_of(
            "description: d\ninfra_type: T\ninfrastructure:\n  - path: a\n  - path: b\n    needs: []\n",
            &[],
        )
        .unwrap();
        let jobs: Vec<ExecJob> = plan
            .nodes
            .iter()
            .map(|n| {
                let dir = d.path().join(&n.path);
                std::fs::create_dir_all(&dir).unwrap();
                ExecJob {
                    path: n.path.clone(),
                    dir,
                    env: env(),
                }
            })
            .collect();
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let control = Control::new();
        let runner = ExecRunner::new(&argv, jobs, d.path().join("logs"), "dev", &control);
        let opts = Options {
            parallel: 2,
            keep_going: true,
            operation: Operation::Up,
        };
        let results = scheduler::run(&plan, opts, &Pools::none(), &runner, &control, &|_| {});
        let logs = (0..2)
            .map(|i| std::fs::read_to_string(runner.log_path(i).unwrap()).unwrap())
            .collect();
        let tails = (0..2).map(|i| runner.tail(i)).collect();
        (results, logs, tails)
    }

    #[test]
    fn each_command_runs_in_its_folder_and_logs_what_it_printed() {
        let (results, logs, tails) = run_two(&["sh", "-c", "pwd; echo err >&2"]);
        for (i, p) in ["a", "b"].iter().enumerate() {
            assert_eq!(results[i].status, Status::Succeeded, "{:?}", results[i]);
            assert!(
                logs[i].contains("$ sh -c 'pwd; echo err >&2'"),
                "{}",
                logs[i]
            );
            let pwd = &tails[i][0];
            assert!(pwd.ends_with(&format!("/{p}")), "{pwd}");
            assert!(logs[i].contains("err\n") && logs[i].contains("# succeeded"));
        }
    }

    #[test]
    fn a_failure_says_its_exit_code_and_keeps_only_the_last_lines() {
        let (results, logs, tails) = run_two(&["sh", "-c", "seq 1 30; exit 7"]);
        assert_eq!(results[0].status, Status::Failed);
        assert_eq!(results[0].exit_code, Some(7));
        assert_eq!(results[0].message.as_deref(), Some("exit 7"));
        assert!(results[0].log.is_some());
        assert_eq!(tails[0].len(), TAIL_LINES);
        assert_eq!(tails[0].last().map(String::as_str), Some("30"));
        assert!(logs[0].contains("\n1\n") && logs[0].contains("# failed"));
    }

    #[test]
    fn a_missing_command_fails_naming_it_and_the_project() {
        let (results, logs, _) = run_two(&["no-such-program-strata", "x"]);
        let m = results[1].message.clone().unwrap();
        assert_eq!(results[1].status, Status::Failed);
        assert!(
            m.contains("`no-such-program-strata`") && m.contains("project b"),
            "{m}"
        );
        assert!(logs[1].contains("not found"));
    }
}
