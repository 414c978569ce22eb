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

/// Flags of the update operations, up and preview (each declares them in the real CLI).
const UPDATE: &[&str] = &[
    "client",
    "config",
    "config-path",
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
    "target-replace",
];

/// The shared flag sets a command takes.
type Shared = &'static [&'static [&'static str]];

/// The flags of one command, and the shared sets it takes too (beyond the global ones).
fn own(command: &str) -> Option<(&'static [&'static str], Shared)> {
    Some(match command {
        "up" => (
            &[
                "continue-on-error",
                "import-pending-creates",
                "plan",
                "skip-preview",
                "strict",
                "yes",
            ],
            &[ENGINE, UPDATE],
        ),
        "preview" => (&["import-file", "save-plan"], &[ENGINE, UPDATE]),
        "refresh" => (
            &[
                "clear-pending-creates",
                "import-pending-creates",
                "preview-only",
                "skip-pending-creates",
                "skip-preview",
                "yes",
            ],
            &[ENGINE],
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
            &[ENGINE],
        ),
        "stack init" => (
            &[
                "copy-config-from",
                "no-select",
                "secrets-provider",
                "stack",
                "teams",
            ],
            &[],
        ),
        "stack output" => (&["json", "shell", "show-secrets", "stack"], &[]),
        "stack ls" => (&["all", "json", "organization", "project", "tag"], &[]),
        "stack rm" => (
            &["force", "preserve-config", "remove-backups", "stack", "yes"],
            &[],
        ),
        "config" => (
            &["config-file", "json", "open", "show-secrets", "stack"],
            &[],
        ),
        "config get" => (&["config-file", "json", "open", "path", "stack"], &[]),
        "config set" => (
            &[
                "config-file",
                "path",
                "plaintext",
                "secret",
                "stack",
                "type",
            ],
            &[],
        ),
        "config rm" => (&["config-file", "path", "stack"], &[]),
        "whoami" => (&["json"], &[]),
        "version" => (&[], &[]),
        "about" => (&["json", "stack", "transitive"], &[]),
        "cancel" => (&["stack", "yes"], &[]),
        _ => return None,
    })
}

/// The first flag in `given` that `command` does not accept (unknown commands are
/// left to the command dispatch).
pub fn unknown<'a>(command: &str, given: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let (flags, shared) = own(command)?;
    let takes = |f: &str| flags.contains(&f) || shared.iter().any(|set| set.contains(&f));
    given
        .into_iter()
        .find(|f| !(GLOBAL.contains(f) || takes(f)))
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
        // up and preview share the update flags; each keeps its own.
        assert_eq!(
            unknown("preview", ["save-plan", "show-reads", "json"]),
            None
        );
        assert_eq!(
            unknown("up", ["plan", "show-reads", "target-replace"]),
            None
        );
        assert_eq!(unknown("up", ["save-plan"]).as_deref(), Some("save-plan"));
        assert_eq!(
            unknown("refresh", ["show-reads"]).as_deref(),
            Some("show-reads")
        );
        assert_eq!(unknown("destroy", ["preview-only", "yes"]), None);
        assert_eq!(unknown("no such command", ["x"]), None);
    }
}
