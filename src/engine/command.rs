//! Command projects (`Strata.yaml`): shell commands run with `sh -c` in the project
//! folder; outputs are the JSON object written to `$STRATA_OUTPUTS_FILE`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::process::{Control, run_streaming};
use super::{Engine, Failure, Job, Operation, Outcome, Progress};
use crate::workspace::project::CommandSpec;

/// Runs command projects; the spec is looked up by project path.
pub struct CommandEngine {
    pub specs: std::collections::BTreeMap<String, std::sync::Arc<CommandSpec>>,
}

/// The environment variable of an input key: `STRATA_INPUT_<KEY>`.
pub fn input_var(key: &str) -> String {
    format!("STRATA_INPUT_{}", crate::util::env_key(key))
}

impl Engine for CommandEngine {
    fn run(
        &self,
        job: &Job,
        control: &Control,
        report: &mut dyn FnMut(Progress),
    ) -> Result<Outcome, Failure> {
        let Some(spec) = self.specs.get(&job.path) else {
            return Err(failed(format!("{} is not a command project", job.path)));
        };
        let Some(script) = script_of(spec, job.op) else {
            return Ok(nothing_to_do(job.op, report));
        };
        let files = ScratchFiles::prepare(job)?;
        let env = script_env(job, &files);
        let ran = run_script(job, script, &env, control, report)
            .and_then(|last_line| Ok((last_line, read_outputs(job, &files.outputs)?)));
        files.clear();
        let (last_line, outputs) = ran?;
        Ok(outcome(job.op, last_line, outputs))
    }
}

/// A failure of the project (not of a process strata could stop).
fn failed(message: String) -> Failure {
    Failure::Failed {
        message,
        exit_code: None,
        processes: 0,
    }
}

/// The command of `op` in Strata.yaml; `preview` and `refresh` may have none.
fn script_of(spec: &CommandSpec, op: Operation) -> Option<&String> {
    match op {
        Operation::Up => Some(&spec.up),
        Operation::Destroy => Some(&spec.destroy),
        Operation::Preview => spec.preview.as_ref(),
        Operation::Refresh => spec.refresh.as_ref(),
    }
}

/// The outcome of an operation Strata.yaml has no command for: nothing ran.
fn nothing_to_do(op: Operation, report: &mut dyn FnMut(Progress)) -> Outcome {
    report(Progress::Line(format!(
        "no `{}` command in Strata.yaml: nothing to do",
        op.as_str()
    )));
    Outcome {
        summary: format!("no {} command", op.as_str()),
        ..Outcome::default()
    }
}

/// The files a command reads and writes: its inputs, and where it writes its outputs.
struct ScratchFiles {
    outputs: PathBuf,
    inputs: PathBuf,
}

impl ScratchFiles {
    /// The scratch folder made, no outputs file left from before, the inputs written.
    fn prepare(job: &Job) -> Result<ScratchFiles, Failure> {
        // The scratch folder exists after the first run: create it only when missing.
        if !job.scratch_dir.is_dir() {
            crate::files::private_dir(&job.scratch_dir).map_err(|e| failed(e.message))?;
        }
        // Absent, not emptied: the shell's `>` then makes a new file. On ext4, `>` on a
        // file that exists (even an empty one) truncates it, and closing a file written
        // after a truncation to zero starts its write-back at once (`auto_da_alloc`):
        // a disk write per project and run for a file read a moment later. No file
        // afterwards = no outputs.
        let outputs = job.scratch_dir.join("outputs.json");
        remove_if_there(&outputs).map_err(|e| {
            failed(format!(
                "cannot remove the outputs file {} left from an earlier run: {e}",
                outputs.display()
            ))
        })?;
        Ok(ScratchFiles {
            outputs,
            inputs: write_inputs(job)?,
        })
    }

    /// Removes the outputs file once read: written and removed before the disk's
    /// write-back comes round, it never reaches the disk. One that cannot be removed is
    /// removed, or reported, before the next run.
    fn clear(&self) {
        let _ = remove_if_there(&self.outputs);
    }
}

/// Removes `path`; a file that is not there is not an error.
fn remove_if_there(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Writes the job's inputs as JSON and returns the file. Inputs are derived again on
/// every run: written in place, no fsync; a project without inputs reads one shared `{}`.
fn write_inputs(job: &Job) -> Result<PathBuf, Failure> {
    if job.inputs.is_empty() {
        let shared = job
            .scratch_dir
            .parent()
            .unwrap_or(&job.scratch_dir)
            .join("no-inputs.json");
        if std::fs::read(&shared).ok().as_deref() != Some(b"{}\n".as_slice()) {
            crate::files::write_private(&shared, b"{}\n").map_err(|e| failed(e.message))?;
        }
        return Ok(shared);
    }
    let file = job.scratch_dir.join("inputs.json");
    let inputs = Value::Object(job.inputs.clone().into_iter().collect());
    crate::files::write_private(
        &file,
        serde_json::to_string_pretty(&inputs)
            .unwrap_or_default()
            .as_bytes(),
    )
    .map_err(|e| failed(e.message))?;
    Ok(file)
}

/// The command's environment: the job's, the `STRATA_*` variables that tell it its
/// project, operation and files, and a `STRATA_INPUT_<KEY>` per input.
fn script_env(job: &Job, files: &ScratchFiles) -> BTreeMap<String, String> {
    let mut env = job.env.clone();
    env.insert(
        "STRATA_OUTPUTS_FILE".into(),
        files.outputs.display().to_string(),
    );
    env.insert(
        "STRATA_INPUTS_FILE".into(),
        files.inputs.display().to_string(),
    );
    env.insert("STRATA_PROJECT".into(), job.path.clone());
    env.insert("STRATA_OPERATION".into(), job.op.as_str().into());
    env.insert(
        "STRATA_CONFIG_FILE".into(),
        job.config_file.display().to_string(),
    );
    for (k, v) in &job.inputs {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        env.insert(input_var(k), text);
    }
    env
}

/// Runs `script` with `sh -c` in the project folder, its lines reported as they come;
/// returns its last line that is not blank, or how it failed or was cancelled.
fn run_script(
    job: &Job,
    script: &str,
    env: &BTreeMap<String, String>,
    control: &Control,
    report: &mut dyn FnMut(Progress),
) -> Result<String, Failure> {
    report(Progress::Raw(format!(
        "$ sh -c <{} command>",
        job.op.as_str()
    )));
    let expr = duct::cmd(super::process::shell(env), ["-c", script])
        .dir(&job.dir)
        .full_env(env);
    let mut last_line = String::new();
    let exit = run_streaming(expr, control, &job.path, &mut |line| {
        report(Progress::Raw(line.clone()));
        if !line.trim().is_empty() {
            last_line = line.trim().to_string();
        }
        report(Progress::Line(line));
    })
    .map_err(|e| failed(format!("could not run sh for {}: {e}", job.path)))?;
    if exit.success() {
        return Ok(last_line);
    }
    if control.is_cancelled() {
        return Err(Failure::Cancelled {
            message: format!("{} of {} was cancelled", job.op.as_str(), job.path),
            processes: 1,
        });
    }
    Err(Failure::Failed {
        message: format!(
            "the `{}` command of {} failed ({})",
            job.op.as_str(),
            job.path,
            match (exit.code, exit.signal) {
                (Some(c), _) => format!("exit {c}"),
                (_, Some(s)) => format!("signal {s}"),
                _ => "unknown exit".into(),
            }
        ),
        exit_code: exit.code,
        processes: 1,
    })
}

/// The outputs an `up` wrote to `outputs_file`: a JSON object, or nothing.
fn read_outputs(job: &Job, outputs_file: &Path) -> Result<Map<String, Value>, Failure> {
    let written = match job.op {
        Operation::Up => std::fs::read_to_string(outputs_file).unwrap_or_default(),
        _ => String::new(),
    };
    if written.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(&written) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(failed(format!(
            "the `up` command of {} wrote something that is not a JSON object to $STRATA_OUTPUTS_FILE",
            job.path
        ))),
    }
}

/// What a command that succeeded did: its outputs, summed up.
fn outcome(op: Operation, last_line: String, outputs: Map<String, Value>) -> Outcome {
    Outcome {
        // A preview command's answer is what it printed: its last line.
        summary: if op == Operation::Preview {
            last_line
        } else if outputs.is_empty() {
            String::new()
        } else {
            format!(
                "{} output{}",
                outputs.len(),
                crate::util::plural(outputs.len())
            )
        },
        outputs,
        secret_outputs: Default::default(),
        processes: 1,
        changes: None,
        // A command project's preview says nothing of its outputs.
        planned_outputs: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn job(dir: &std::path::Path, op: Operation) -> Job {
        Job {
            dir: dir.to_path_buf(),
            op,
            env: [(
                "PATH".to_string(),
                std::env::var("PATH").unwrap_or_default(),
            )]
            .into(),
            config_file: dir.join("cfg.yaml"),
            inputs: [("local:cidr".to_string(), Value::from("10.0.0.0/16"))].into(),
            scratch_dir: dir.join("scratch"),
            ..Job::for_tests("local/x", "x")
        }
    }

    fn engine(up: &str) -> CommandEngine {
        CommandEngine {
            specs: [(
                "local/x".to_string(),
                CommandSpec {
                    name: None,
                    description: None,
                    up: up.into(),
                    destroy: "echo bye".into(),
                    preview: None,
                    refresh: None,
                }
                .into(),
            )]
            .into(),
        }
    }

    #[test]
    fn inputs_in_env_and_outputs_from_file() {
        let d = tempfile::tempdir().unwrap();
        let e = engine(
            "echo \"cidr=$STRATA_INPUT_LOCAL_CIDR\"; printf '{\"net\":\"%s\"}' \"$STRATA_INPUT_LOCAL_CIDR\" > \"$STRATA_OUTPUTS_FILE\"",
        );
        let mut lines = Vec::new();
        let out = e
            .run(&job(d.path(), Operation::Up), &Control::new(), &mut |p| {
                if let Progress::Line(l) = p {
                    lines.push(l)
                }
            })
            .unwrap();
        assert_eq!(out.outputs["net"], "10.0.0.0/16");
        assert_eq!(lines, ["cidr=10.0.0.0/16"]);
        let inputs: BTreeMap<String, String> = serde_json::from_str(
            &std::fs::read_to_string(d.path().join("scratch/inputs.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(inputs["local:cidr"], "10.0.0.0/16");
    }

    #[test]
    fn failure_and_bad_outputs() {
        let d = tempfile::tempdir().unwrap();
        let err = engine("exit 7")
            .run(&job(d.path(), Operation::Up), &Control::new(), &mut |_| {})
            .unwrap_err();
        assert!(err.message().contains("exit 7"));
        let err = engine("echo nope > \"$STRATA_OUTPUTS_FILE\"")
            .run(&job(d.path(), Operation::Up), &Control::new(), &mut |_| {})
            .unwrap_err();
        assert!(err.message().contains("not a JSON object"));
    }

    #[test]
    fn the_outputs_file_is_gone_once_read_and_a_leftover_is_not_read() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("scratch/outputs.json");
        let out = engine("echo '{\"a\": 1}' > \"$STRATA_OUTPUTS_FILE\"")
            .run(&job(d.path(), Operation::Up), &Control::new(), &mut |_| {})
            .unwrap();
        assert_eq!(out.outputs["a"], 1);
        assert!(!file.exists(), "the outputs file stays after it was read");
        // An outputs file left by a run that ended before reading it (a crash) is not
        // this run's outputs, and the command's `>` makes a new file.
        std::fs::write(&file, "{\"stale\": true}").unwrap();
        let out = engine("test ! -e \"$STRATA_OUTPUTS_FILE\"")
            .run(&job(d.path(), Operation::Up), &Control::new(), &mut |_| {})
            .unwrap();
        assert!(out.outputs.is_empty(), "{:?}", out.outputs);
        // A failed command's file goes too.
        engine("echo '{}' > \"$STRATA_OUTPUTS_FILE\"; exit 3")
            .run(&job(d.path(), Operation::Up), &Control::new(), &mut |_| {})
            .unwrap_err();
        assert!(!file.exists());
    }

    #[test]
    fn missing_optional_command_is_nothing_to_do() {
        let d = tempfile::tempdir().unwrap();
        let out = engine("true")
            .run(
                &job(d.path(), Operation::Preview),
                &Control::new(),
                &mut |_| {},
            )
            .unwrap();
        assert_eq!(out.processes, 0);
    }
}
