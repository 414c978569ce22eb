//! Pulumi's own spans under a project's: the CLI's `--otel-traces` (public since 3.226),
//! which parents its root span on the `TRACEPARENT` of its environment and sends its
//! engine's and plugins' spans to the same endpoint (docs/research/pulumi-tracing.md).

use std::collections::BTreeMap;
use std::path::Path;

use super::super::Job;

/// Whether this CLI has `--otel-traces`: its `--help` lists the flag. A CLI without it
/// refuses any command that carries it, so it is asked before.
pub fn has_otel_traces(binary: &Path, env: &BTreeMap<String, String>) -> bool {
    crate::engine::process::run_captured(
        duct::cmd(binary, ["--help"]).full_env(env),
        &crate::engine::Control::new(),
        "pulumi --help",
        None,
    )
    .is_ok_and(|out| {
        out.exit.success() && String::from_utf8_lossy(&out.stdout).contains("--otel-traces")
    })
}

/// `args` with `--otel-traces=<endpoint>` when the job's children are traced (they have
/// a `TRACEPARENT`) and the CLI takes the flag.
pub fn traced(args: &[String], endpoint: Option<&str>, job: &Job) -> Vec<String> {
    let mut v = args.to_vec();
    if let Some(url) = endpoint
        && job.env.contains_key("TRACEPARENT")
    {
        v.push(format!("--otel-traces={url}"));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(env: &[(&str, &str)]) -> Job {
        Job {
            env: crate::util::string_map(env),
            ..Job::for_tests("p", "p")
        }
    }

    #[test]
    fn the_flag_goes_only_to_a_traced_child_of_a_cli_that_has_it() {
        let args = vec!["up".to_string(), "--yes".to_string()];
        let tp = (
            "TRACEPARENT",
            "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        );
        assert_eq!(traced(&args, None, &job(&[tp])), args);
        assert_eq!(
            traced(&args, Some("http://c:4318/v1/traces"), &job(&[])),
            args
        );
        assert_eq!(
            traced(&args, Some("http://c:4318/v1/traces"), &job(&[tp])),
            ["up", "--yes", "--otel-traces=http://c:4318/v1/traces"]
        );
    }

    #[test]
    fn the_help_text_says_whether_the_cli_has_the_flag() {
        let d = tempfile::tempdir().unwrap();
        let path = std::env::var("PATH").unwrap_or_default();
        let env: BTreeMap<String, String> = [("PATH".to_string(), path)].into();
        let script = |name: &str, help: &str| {
            let p = d.path().join(name);
            std::fs::write(&p, format!("#!/bin/sh\nprintf '%s\\n' '{help}'\n")).unwrap();
            let mut perm = std::fs::metadata(&p).unwrap().permissions();
            std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
            std::fs::set_permissions(&p, perm).unwrap();
            p
        };
        let new = script(
            "new",
            "      --otel-traces string   Export OpenTelemetry traces to the specified endpoint",
        );
        let old = script(
            "old",
            "      --tracing file:   Emit tracing to the specified endpoint",
        );
        assert!(has_otel_traces(&new, &env));
        assert!(!has_otel_traces(&old, &env));
        assert!(!has_otel_traces(&d.path().join("missing"), &env));
    }
}
