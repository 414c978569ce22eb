//! `on_success` hooks: `run:` shell commands (values reach the shell as environment
//! variables, never on a command line) and the built-in `kubeconfig` merge.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::engine::Control;
use crate::engine::process::run_streaming;
use crate::util::env_key;

/// Rewrites `${outputs.NAME}`, `${config.KEY}` and `${env.NAME}` into shell parameter
/// expansions of the variables [`hook_env`] sets, so the shell substitutes the values.
pub fn to_shell(command: &str) -> String {
    let mut out = String::with_capacity(command.len());
    let mut rest = command;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let inner = &after[..end];
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
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
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
