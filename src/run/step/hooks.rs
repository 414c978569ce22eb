//! The hooks after a step: its `on_success` hooks, run after a successful `up` and
//! before any dependent starts: `run:` shell commands (values reach the shell as
//! environment variables, never on a command line) and the built-in `kubeconfig` merge.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use super::StepRunner;
use crate::engine::process::run_streaming;
use crate::engine::{Control, Job};
use crate::run::events::{RunEvent, Status};
use crate::util::{env_key, now_ms};
use crate::workspace::profile::Hook;

/// The outputs a `run:` hook names (`${outputs.NAME}`), in order.
pub fn outputs_named(command: &str) -> impl Iterator<Item = &str> {
    crate::util::placeholders(command).filter_map(|(_, inner)| inner.strip_prefix("outputs."))
}

/// Rewrites `${outputs.NAME}`, `${config.KEY}` and `${env.NAME}` into shell parameter
/// expansions of the variables [`hook_env`] sets, so the shell substitutes the values.
pub fn to_shell(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    let mut last = 0;
    for (at, inner) in crate::util::placeholders(command) {
        out.push_str(&command[last..at.start]);
        let replaced = if let Some(name) = inner.strip_prefix("outputs.") {
            Some(format!("${{STRATA_OUTPUT_{}}}", env_key(name)))
        } else if let Some(key) = inner.strip_prefix("config.") {
            Some(format!("${{STRATA_CONFIG_{}}}", env_key(key)))
        } else {
            inner
                .strip_prefix("env.")
                .map(|name| format!("${{{name}}}"))
        };
        match replaced {
            Some(r) => out.push_str(&r),
            None => out.push_str(&command[at.clone()]),
        }
        last = at.end;
    }
    out.push_str(&command[last..]);
    out
}

/// The environment of a hook: the project's, plus `STRATA_OUTPUT_<NAME>` for each output
/// and `STRATA_CONFIG_<KEY>` for each stack-config value.
pub fn hook_env(
    base: &BTreeMap<String, String>,
    outputs: &Map<String, Value>,
    config: &serde_yaml::Mapping,
) -> BTreeMap<String, String> {
    let mut env = base.clone();
    for (k, v) in outputs {
        let text = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        env.insert(format!("STRATA_OUTPUT_{}", env_key(k)), text);
    }
    for (k, v) in config {
        if let (Some(k), Some(v)) = (k.as_str(), crate::workspace::stack_config::scalar_string(v)) {
            env.insert(format!("STRATA_CONFIG_{}", env_key(k)), v);
        }
    }
    env
}

/// Runs a `run:` hook in `dir`; lines go to `on_line`. Err has a message for people.
pub fn run_command(
    command: &str,
    dir: &std::path::Path,
    env: &BTreeMap<String, String>,
    control: &Control,
    project: &str,
    on_line: &mut dyn FnMut(String),
) -> Result<(), String> {
    let script = to_shell(command);
    let expr = duct::cmd(crate::engine::process::shell(env), ["-c", script.as_str()])
        .dir(dir)
        .full_env(env);
    match run_streaming(expr, control, project, on_line) {
        Ok(exit) if exit.success() => Ok(()),
        Ok(exit) => Err(format!(
            "the hook `run: {}` failed ({})",
            command.lines().next().unwrap_or(""),
            match (exit.code, exit.signal) {
                (Some(c), _) => format!("exit {c}"),
                (_, Some(s)) => format!("signal {s}"),
                _ => "unknown exit".into(),
            }
        )),
        Err(e) => Err(format!("the hook `run: {command}` could not start: {e}")),
    }
}

impl StepRunner<'_> {
    /// Runs the `on_success` hooks of step `i` after its `up` left `outputs`, in order,
    /// each shown and emitted; the first that fails ends the step (Err: its message).
    pub(super) fn run_hooks(
        &self,
        i: usize,
        hooks: &[Hook],
        job: &Job,
        outputs: &Map<String, Value>,
        emit: &(dyn Fn(RunEvent) + Sync),
        log: &mut dyn FnMut(&str),
    ) -> Result<(), String> {
        let ctx = self.ctx;
        let env = hook_env(&job.env, outputs, ctx.stack_config.config());
        for hook in hooks {
            let start = now_ms();
            let res = self.run_hook(hook, &job.path, &job.dir, &env, outputs, &mut |l| {
                log(&l);
                self.show(i, &l, emit);
            });
            let status = if res.is_ok() {
                Status::Succeeded
            } else {
                Status::Failed
            };
            emit(RunEvent::HookFinished {
                project: job.path.clone(),
                hook: hook.describe(),
                status,
                duration_ms: now_ms().saturating_sub(start),
                message: res.as_ref().err().map(|m| ctx.redact(m)),
            });
            if let Err(msg) = res {
                log(&format!("hook failed: {msg}"));
                return Err(msg);
            }
        }
        Ok(())
    }

    fn run_hook(
        &self,
        hook: &Hook,
        path: &str,
        dir: &Path,
        env: &BTreeMap<String, String>,
        outputs: &Map<String, Value>,
        on_line: &mut dyn FnMut(String),
    ) -> Result<(), String> {
        self.processes
            .fetch_add(u32::from(matches!(hook, Hook::Run(_))), Ordering::SeqCst);
        match hook {
            Hook::Run(cmd) => run_command(cmd, dir, env, self.control, path, on_line),
            Hook::Kubeconfig(k) => {
                let value = match outputs.get(&k.output) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => {
                        return Err(format!(
                            "the kubeconfig hook of {path} needs output `{}`, which the project did not export",
                            k.output
                        ));
                    }
                    Some(other) => other.to_string(),
                };
                let target = crate::kube::kubeconfig::default_target(env);
                let name = self.kubeconfig_name(k, path);
                let merge = if k.current {
                    crate::kube::kubeconfig::merge_kubeconfig
                } else {
                    crate::kube::kubeconfig::merge_kubeconfig_keeping_current
                };
                let report = merge(&target, &value, &name)
                    .map_err(|e| format!("the kubeconfig hook of {path} failed: {e}"))?;
                // The stack's cluster from now on, for `@secrets`: this context, whatever
                // the file's current context becomes.
                crate::kube::target::remember(&self.ctx.state_dir, path, &target, &report.context)
                    .map_err(|e| format!("the kubeconfig hook of {path} failed: {e}"))?;
                on_line(if k.current {
                    format!(
                        "merged kubeconfig into {} (current context {})",
                        target.display(),
                        report.context
                    )
                } else {
                    format!(
                        "merged kubeconfig into {} (context {}; the current context is left as it was)",
                        target.display(),
                        report.context
                    )
                });
                Ok(())
            }
        }
    }

    /// The name a kubeconfig hook of `path` gives its entries: its `name:`, else
    /// `<stack>-<project folder>` (one stack never overwrites another's, nor the user's).
    fn kubeconfig_name(&self, k: &crate::workspace::profile::KubeconfigHook, path: &str) -> String {
        k.context.clone().unwrap_or_else(|| {
            format!(
                "{}-{}",
                self.ctx.stack,
                path.rsplit('/').next().unwrap_or(path)
            )
        })
    }

    /// After a destroy of `path`: the kubeconfig entries its hooks merged are removed
    /// (its cluster is gone), and said on its lines; a failure to remove them is said,
    /// never the destroy's failure.
    pub(super) fn forget_kubeconfigs(
        &self,
        hooks: &[Hook],
        path: &str,
        env: &BTreeMap<String, String>,
        on_line: &mut dyn FnMut(String),
    ) {
        for k in hooks.iter().filter_map(|h| match h {
            Hook::Kubeconfig(k) => Some(k),
            Hook::Run(_) => None,
        }) {
            let target = crate::kube::kubeconfig::default_target(env);
            let name = self.kubeconfig_name(k, path);
            match crate::kube::kubeconfig::forget_kubeconfig(&target, &name) {
                Ok(true) => on_line(format!(
                    "removed context {name} from {} (its cluster was destroyed)",
                    target.display()
                )),
                Ok(false) => {}
                Err(e) => on_line(format!(
                    "warning: could not remove context {name} from {}: {e}",
                    target.display()
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_shell_expansions() {
        assert_eq!(
            to_shell("echo ${outputs.cluster_name} ${config.aws:region} ${env.HOME} ${other} $${x"),
            "echo ${STRATA_OUTPUT_CLUSTER_NAME} ${STRATA_CONFIG_AWS_REGION} ${HOME} ${other} $${x"
        );
    }

    #[test]
    fn outputs_named_are_those_the_command_renders() {
        let cmd = "echo ${outputs.a} ${config.b} ${env.C} ${outputs.d_e} ${outputs.f";
        assert_eq!(outputs_named(cmd).collect::<Vec<_>>(), ["a", "d_e"]);
        assert_eq!(to_shell("a ${outputs.x"), "a ${outputs.x");
    }

    #[test]
    fn hook_sees_outputs_without_argv() {
        let d = tempfile::tempdir().unwrap();
        let outputs: Map<String, Value> =
            serde_json::from_str(r#"{"cluster_name":"c1","n":3}"#).unwrap();
        let mut cfg = serde_yaml::Mapping::new();
        cfg.insert("aws:region".into(), "eu-west-1".into());
        let base: BTreeMap<String, String> =
            [("PATH".to_string(), std::env::var("PATH").unwrap())].into();
        let env = hook_env(&base, &outputs, &cfg);
        let mut lines = Vec::new();
        run_command(
            "echo \"${outputs.cluster_name} ${outputs.n} ${config.aws:region}\"",
            d.path(),
            &env,
            &Control::new(),
            "p",
            &mut |l| lines.push(l),
        )
        .unwrap();
        assert_eq!(lines, ["c1 3 eu-west-1"]);
        let err =
            run_command("exit 4", d.path(), &env, &Control::new(), "p", &mut |_| {}).unwrap_err();
        assert!(err.contains("exit 4"));
    }
}
