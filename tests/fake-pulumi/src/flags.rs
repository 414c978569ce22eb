//! The flags each command of the real CLI accepts (Pulumi's CLI reference, v3.2xx):
//! cobra rejects any other with `unknown flag: --x` before the command runs, and the
//! 3.226+ CLI exits 2 (invalid arguments).

/// Persistent flags every command takes.
const GLOBAL: &[&str] = &[
    "color",
    "cwd",
    "disable-integrity-checking",
    "emoji",
    "fully-qualify-stack-names",
    "logflow",
    "logtostderr",
    "memprofilerate",
    "non-interactive",
    // 3.226+: OpenTelemetry traces (the fake accepts it and sends nothing).
    "otel-traces",
    "profiling",
    "tracing",
    "tracing-header",
    "verbose",
    "help",
];

/// Flags shared by the engine operations (up, preview, refresh, destroy).
const ENGINE: &[&str] = &[
    "attach-debugger",
    "config-file",
    "debug",
    "diff",
    "exclude",
    "exclude-dependents",
    "exec-agent",
    "exec-kind",
    "expect-no-changes",
    "json",
    "message",
    "neo",
    "parallel",
    "run-program",
    "show-replacement-steps",
    "show-sames",
    "stack",
    "suppress-outputs",
    "suppress-permalink",
    "suppress-progress",
    "target",
    "target-dependents",
];

/// The flags of one command beyond the global and engine ones.
fn own(command: &str) -> Option<(&'static [&'static str], bool)> {
    // (flags, takes the engine flags too)
    Some(match command {
        "up" => (
            &[
                "client",
                "config",
                "config-path",
                "continue-on-error",
                "import-pending-creates",
                "plan",
                "policy-pack",
                "policy-pack-config",
                "refresh",
                "replace",
                "secrets-provider",
                "show-config",
                "show-full-output",
                "show-policy-remediations",
                "show-reads",
                "show-secrets",
                "skip-preview",
                "strict",
                "target-replace",
                "yes",
            ],
            true,
        ),
        "preview" => (
            &[
                "client",
                "config",
                "config-path",
                "import-file",
                "policy-pack",
                "policy-pack-config",
                "refresh",
                "replace",
                "save-plan",
                "secrets-provider",
                "show-config",
                "show-full-output",
                "show-policy-remediations",
                "show-reads",
                "show-secrets",
                "target-replace",
            ],
            true,
        ),
        "refresh" => (
            &[
                "clear-pending-creates",
                "import-pending-creates",
                "preview-only",
                "skip-pending-creates",
                "skip-preview",
                "yes",
            ],
            true,
        ),
        "destroy" => (
            &[
                "continue-on-error",
                "exclude-protected",
                "preview-only",
                "refresh",
                "remove",
                "show-config",
                "skip-preview",
                "yes",
            ],
            true,
        ),
        "stack init" => (
            &[
                "copy-config-from",
                "no-select",
                "secrets-provider",
                "stack",
                "teams",
            ],
            false,
        ),
        "stack output" => (&["json", "shell", "show-secrets", "stack"], false),
        "stack ls" => (&["all", "json", "organization", "project", "tag"], false),
        "stack rm" => (
            &["force", "preserve-config", "remove-backups", "stack", "yes"],
            false,
        ),
        "config" => (
            &["config-file", "json", "open", "show-secrets", "stack"],
            false,
        ),
        "config get" => (&["config-file", "json", "open", "path", "stack"], false),
        "config set" => (
            &[
                "config-file",
                "path",
                "plaintext",
                "secret",
                "stack",
                "type",
            ],
            false,
        ),
        "config rm" => (&["config-file", "path", "stack"], false),
        "whoami" => (&["json"], false),
        "version" => (&[], false),
        "about" => (&["json", "stack", "transitive"], false),
        "cancel" => (&["stack", "yes"], false),
        _ => return None,
    })
}

/// The first flag in `given` that `command` does not accept (unknown commands are
/// left to the command dispatch).
pub fn unknown<'a>(command: &str, given: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let (flags, engine) = own(command)?;
    given
        .into_iter()
        .find(|f| !(GLOBAL.contains(f) || flags.contains(f) || (engine && ENGINE.contains(f))))
        .map(|f| f.trim_start_matches('-').to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_command_flag_sets() {
        assert_eq!(
            unknown("up", ["yes", "skip-preview", "json", "config-file", "cwd"]),
            None
        );
        assert_eq!(
            unknown("stack init", ["config-file"]).as_deref(),
            Some("config-file")
        );
        assert_eq!(
            unknown("stack output", ["config-file"]).as_deref(),
            Some("config-file")
        );
        assert_eq!(unknown("preview", ["yes"]).as_deref(), Some("yes"));
        assert_eq!(unknown("destroy", ["preview-only", "yes"]), None);
        assert_eq!(unknown("no such command", ["x"]), None);
    }
}
