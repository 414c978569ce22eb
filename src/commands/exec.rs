//! `strata exec -- CMD [ARGS...]`: one command run in each selected project's folder, in
//! dependency order (in parallel where the graph allows, `-j`), by the run's scheduler
//! under the run's Ctrl-C handling. Each command gets the environment strata gives
//! projects plus `STRATA_PROJECT` and `STRATA_STACK`; its output goes to its own log.
//! No lock, journal or stack is touched: nothing but logs is written.

use crate::engine::{Control, Operation};
use crate::error::{Error, Result, exit};
use crate::pipeline::env;
use crate::plan::Plan;
use crate::plan::select::Selector;
use crate::run::done::Done;
use crate::run::events::{Counts, RunEvent, Status};
use crate::run::exec::{ExecJob, ExecRunner, not_found, resolve_program};
use crate::run::pools::Pools;
use crate::run::{scheduler, signals};
use crate::settings::{Display, Settings};
use crate::util::{display_path, human_duration, now_ms, plural, rfc3339};
use crate::workspace::Target;

/// What `exec` was asked, past the selection.
pub struct Options {
    pub parallel: u16,
    pub keep_going: bool,
    /// The command and its arguments (never empty: clap requires one).
    pub argv: Vec<String>,
}

pub fn run(target: &Target, settings: &Settings, sel: &Selector, opts: &Options) -> Result<i32> {
    if opts.argv.is_empty() {
        return Err(Error::usage(
            "no command given: put it after `--`, as in `strata exec -- npm ci`.",
        ));
    }
    let loaded = super::load(target, false)?;
    let Some(stack) = loaded.stack.clone() else {
        return Err(Error::config(format!(
            "no stack named: pass -s NAME, or set PULUMI_STACK in {}.",
            display_path(&loaded.ws.env_file.path)
        )));
    };
    let (plan, empty_because) = super::selected(&loaded, sel)?;
    if let Some(why) = empty_because {
        eprintln!("{why}");
        return Ok(exit::OK);
    }
    let plan = projects_only(&plan);
    if plan.nodes.is_empty() {
        eprintln!("No project selected: nothing to run.");
        return Ok(exit::OK);
    }
    let jobs = jobs(&loaded, &plan, &stack);
    check_program(&opts.argv[0], &jobs)?;
    let logs_dir = loaded.ws.state_dir(&stack).join("logs");
    let control = Control::new();
    let runner = ExecRunner::new(&opts.argv, jobs, logs_dir, &stack, &control);
    let show = Show {
        display: settings.display,
        verbose: settings.verbose,
        plan: &plan,
        runner: &runner,
    };
    let emit = |e: RunEvent| show.event(&e);
    let run_id = format!(
        "{}-{}",
        rfc3339(now_ms()).replace([':', '-'], ""),
        std::process::id()
    );
    let started = now_ms();
    emit(RunEvent::RunStarted {
        schema_version: crate::run::events::SCHEMA_VERSION,
        run_id: run_id.clone(),
        // Shown as `exec` (see `Show::event`).
        operation: Operation::Up,
        provider: loaded.profile.name.clone(),
        stack: stack.clone(),
        projects: plan
            .order
            .iter()
            .map(|&i| plan.nodes[i].path.clone())
            .collect(),
        parallel: opts.parallel as usize,
    });
    let sched = scheduler::Options {
        parallel: opts.parallel as usize,
        keep_going: opts.keep_going,
        operation: Operation::Up,
    };
    // The profile's pools pace Pulumi's calls to a provider's API; a command here is
    // bounded by -j alone.
    let no_pools = Pools::new(&[], &Default::default());
    let grace = signals::grace(&env::pulumi_env(&loaded.ws));
    let results = under_signals(&control, grace, &emit, || {
        scheduler::run(&plan, sched, &no_pools, &runner, &control, &emit)
    })?;
    let mut counts = Counts::default();
    for r in &results {
        counts.add(r.status);
    }
    let status = match (control.signal(), counts.failed) {
        (Some(_), _) => Status::Cancelled,
        (None, 0) => Status::Succeeded,
        _ => Status::Failed,
    };
    let duration_ms = now_ms().saturating_sub(started);
    emit(RunEvent::RunFinished {
        run_id,
        operation: Operation::Up,
        status,
        duration_ms,
        counts: counts.clone(),
        cpu_ms: crate::util::self_cpu_ms(),
        processes: results.iter().filter(|r| r.log.is_some()).count() as u32,
    });
    if settings.display != Display::Json {
        println!("{}", headline(&counts, duration_ms, opts.keep_going));
    }
    Ok(match (control.signal(), status) {
        (Some(sig), _) => 128 + sig,
        (None, Status::Succeeded) => exit::OK,
        _ => exit::FAILED,
    })
}

/// The selected plan without the built-in secrets step: only projects have a folder.
fn projects_only(plan: &Plan) -> Plan {
    let keep: Vec<bool> = plan.nodes.iter().map(|n| n.project.is_some()).collect();
    plan.subplan(&keep)
}

/// Each node's folder and environment: the children's environment of a run, that
/// project's backend, `STRATA_PROJECT` (its path) and `STRATA_STACK` (its own name of
/// the stack, `stack:` of its entry).
fn jobs(loaded: &super::Loaded, plan: &Plan, stack: &str) -> Vec<ExecJob> {
    let ws = &loaded.ws;
    let org = env::known_org(&env::pulumi_env(ws));
    let base = env::child_env(ws, stack, &loaded.profile, org.as_deref());
    plan.nodes
        .iter()
        .map(|n| {
            let mut env = base.clone();
            env.insert(
                "PULUMI_BACKEND_URL".into(),
                loaded.backends.of(&n.path).url.clone(),
            );
            env.insert("STRATA_PROJECT".into(), n.path.clone());
            let own = n.entry.as_ref().map(|e| e.stack_name(stack));
            env.insert("STRATA_STACK".into(), own.unwrap_or_else(|| stack.into()));
            ExecJob {
                path: n.path.clone(),
                dir: n
                    .project
                    .as_ref()
                    .map(|p| p.dir.clone())
                    .unwrap_or_default(),
                env,
            }
        })
        .collect()
}

/// A bare command name that is on no project's `PATH` is refused before anything runs
/// (a path, `./build.sh`, is looked for in each project's folder as it starts).
fn check_program(program: &str, jobs: &[ExecJob]) -> Result<()> {
    if program.contains('/') {
        return Ok(());
    }
    let missing: Vec<&str> = jobs
        .iter()
        .filter(|j| resolve_program(program, &j.dir, &j.env).is_none())
        .map(|j| j.path.as_str())
        .collect();
    match missing.first() {
        None => Ok(()),
        Some(first) => Err(Error::config(format!(
            "{}{}. Nothing was run.",
            not_found(program, first),
            if missing.len() > 1 {
                format!(" (nor for {} other project(s))", missing.len() - 1)
            } else {
                String::new()
            }
        ))),
    }
}

/// Runs `f` (the scheduler) with Ctrl-C, SIGTERM and SIGHUP answered as in a run: the
/// first stops new starts and sends one SIGINT to each running command, a second (or the
/// end of the grace period) kills them; whatever is left when `f` returns is killed.
fn under_signals<T>(
    control: &Control,
    grace: std::time::Duration,
    emit: &(dyn Fn(RunEvent) + Sync),
    f: impl FnOnce() -> T,
) -> Result<T> {
    let signals = signals::install()
        .map_err(|e| Error::failed(format!("cannot install the signal handlers: {e}")))?;
    let handle = signals.handle();
    let done = Done::new();
    let out = std::thread::scope(|s| {
        s.spawn(|| signals::watch(signals, control, &done, grace, emit));
        // Set however `f` ends, so the watcher (and the scope) always ends.
        let _done = done.on_drop();
        f()
    });
    handle.close();
    // Nothing may outlive the run.
    control.kill();
    Ok(out)
}

/// How the run is shown: JSON Lines events (operation `exec`), or a line per project
/// (its output too with `-v`; with `-q` only failures).
struct Show<'a> {
    display: Display,
    verbose: bool,
    plan: &'a Plan,
    runner: &'a ExecRunner<'a>,
}

impl Show<'_> {
    fn event(&self, e: &RunEvent) {
        if let RunEvent::Notice { message } = e {
            eprintln!("{message}");
            return;
        }
        if self.display == Display::Json {
            if let Some(line) = json_line(e) {
                crate::commands::print(&format!("{line}\n")).ok();
            }
            return;
        }
        let quiet = self.display == Display::Quiet;
        let text = match e {
            RunEvent::RunStarted {
                provider,
                stack,
                projects,
                parallel,
                ..
            } if !quiet => format!(
                "strata exec · provider {provider} · stack {stack} · {} project{} · up to {parallel} at once · $ {}",
                projects.len(),
                plural(projects.len()),
                self.runner.command_shown()
            ),
            RunEvent::ProjectStarted { project, .. } if !quiet => format!("[{project}] started"),
            RunEvent::ProjectOutput { project, line } if self.verbose => {
                format!("[{project}] {line}")
            }
            RunEvent::ProjectFinished {
                project,
                status,
                duration_ms,
                message,
                log,
                exit_code,
                ..
            } => match status {
                Status::Succeeded if !quiet => {
                    format!("[{project}] ok in {}", human_duration(*duration_ms))
                }
                Status::Failed => self.failure(project, *duration_ms, message, log, *exit_code),
                Status::Skipped | Status::Cancelled if !quiet => format!(
                    "[{project}] {}{}",
                    status.as_str(),
                    message
                        .as_ref()
                        .filter(|m| !m.is_empty())
                        .map(|m| format!(": {m}"))
                        .unwrap_or_default()
                ),
                _ => return,
            },
            _ => return,
        };
        crate::commands::print(&format!("{text}\n")).ok();
    }

    /// A failed project: its exit code, its log, and the last lines it printed (unless
    /// `-v` showed them already).
    fn failure(
        &self,
        project: &str,
        duration_ms: u64,
        message: &Option<String>,
        log: &Option<String>,
        exit_code: Option<i32>,
    ) -> String {
        let mut text = match exit_code {
            Some(c) => format!(
                "[{project}] failed (exit {c}) in {}",
                human_duration(duration_ms)
            ),
            None => format!(
                "[{project}] failed: {}",
                message.as_deref().unwrap_or("unknown error")
            ),
        };
        if let Some(log) = log {
            text.push_str(&format!("\n    log: {log}"));
        }
        let tail = self
            .plan
            .index_of(project)
            .map(|i| self.runner.tail(i))
            .unwrap_or_default();
        if !self.verbose && !tail.is_empty() {
            text.push_str("\n    last lines:");
            for l in tail {
                text.push_str(&format!("\n    | {l}"));
            }
        }
        text
    }
}

/// `e` as its JSON line, its `operation` being `exec`; `None` for what is not part of
/// the stream.
fn json_line(e: &RunEvent) -> Option<String> {
    if matches!(e, RunEvent::ProjectProgress { .. }) {
        return None;
    }
    let mut v = serde_json::to_value(e).ok()?;
    if let Some(op) = v.get_mut("operation") {
        *op = serde_json::Value::from("exec");
    }
    serde_json::to_string(&v).ok()
}

/// The last line: what ran, what failed, what was left out.
fn headline(counts: &Counts, duration_ms: u64, keep_going: bool) -> String {
    let mut parts = vec![format!("{} ok", counts.succeeded)];
    for (n, word) in [
        (counts.failed, "failed"),
        (counts.skipped, "skipped"),
        (counts.cancelled, "cancelled"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {word}"));
        }
    }
    let mut line = format!(
        "exec: {} in {}",
        parts.join(", "),
        human_duration(duration_ms)
    );
    if counts.failed > 0 && counts.skipped > 0 && !keep_going {
        line.push_str(" (--keep-going runs what does not need a failed project)");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_takes_the_selection_and_everything_after_the_double_dash() {
        use crate::cli::{Cli, Command};
        use clap::Parser;
        let c = Cli::try_parse_from([
            "strata",
            "exec",
            "--filter",
            "a...",
            "-j",
            "2",
            "--keep-going",
            "--",
            "npm",
            "ci",
            "--filter",
            "-j",
        ])
        .unwrap();
        let Command::Exec {
            select,
            parallel,
            keep_going,
            command,
        } = c.command
        else {
            panic!("not exec");
        };
        assert_eq!(select.filters, ["a..."]);
        assert_eq!((parallel, keep_going), (2, true));
        assert_eq!(command, ["npm", "ci", "--filter", "-j"]);
        for bad in [
            &["strata", "exec"][..],
            &["strata", "exec", "--"],
            &["strata", "exec", "npm"],
        ] {
            let e = Cli::try_parse_from(bad).unwrap_err();
            assert_eq!(e.exit_code(), exit::USAGE, "{bad:?}");
        }
        assert!(Cli::try_parse_from(["strata", "exec", "-j", "0", "--", "x"]).is_err());
    }

    #[test]
    fn json_events_say_exec() {
        let e = RunEvent::project_finished("a".into(), Operation::Up, Status::Failed, 5, None);
        let v: serde_json::Value = serde_json::from_str(&json_line(&e).unwrap()).unwrap();
        assert_eq!(v["operation"], "exec");
        assert_eq!(v["event"], "project_finished");
        let out = RunEvent::ProjectOutput {
            project: "a".into(),
            line: "hi".into(),
        };
        let v: serde_json::Value = serde_json::from_str(&json_line(&out).unwrap()).unwrap();
        assert!(v.get("operation").is_none());
        let progress = RunEvent::ProjectProgress {
            project: "a".into(),
            done: 1,
            started: 1,
            current: None,
        };
        assert!(json_line(&progress).is_none());
    }

    #[test]
    fn the_headline_counts_and_hints_at_keep_going() {
        let mut c = Counts::default();
        for s in [Status::Succeeded, Status::Failed, Status::Skipped] {
            c.add(s);
        }
        let line = headline(&c, 1500, false);
        assert!(
            line.starts_with("exec: 1 ok, 1 failed, 1 skipped in 1.5s"),
            "{line}"
        );
        assert!(line.contains("--keep-going"));
        assert!(!headline(&c, 1500, true).contains("--keep-going"));
    }

    #[test]
    fn a_bare_command_on_no_path_is_refused_naming_it() {
        let job = |p: &str| ExecJob {
            path: p.into(),
            dir: std::env::temp_dir(),
            env: [("PATH".to_string(), "/nonexistent".to_string())].into(),
        };
        let e = check_program("npm", &[job("a"), job("b")]).unwrap_err();
        e.assert_says("`npm` not found for project a");
        e.assert_says("nor for 1 other project");
        e.assert_says("Nothing was run");
        assert!(check_program("./x.sh", &[job("a")]).is_ok());
    }
}
