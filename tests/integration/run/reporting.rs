//! What a run prints: `--output json` holds only the documented events, a failure
//! included; off a terminal, plain lines prefixed with their project.

use serde_json::Value;

use super::{CHAIN, CHAIN_PATHS, failing_up, ok, run, s, workspace};

#[test]
fn json_output_emits_the_documented_events() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    let r = ok(&ws, "up", &["--output", "json"]);
    for l in r.stdout.lines().filter(|l| !l.trim().is_empty()) {
        assert!(l.starts_with('{'), "stdout holds only JSON lines, got: {l}");
    }
    let ev = r.events();
    let kinds: Vec<&str> = ev.iter().map(|e| s(e, "event")).collect();
    assert_eq!(kinds.first(), Some(&"run_started"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"run_finished"), "{kinds:?}");
    for p in CHAIN_PATHS {
        let of = |k: &str| -> Vec<&Value> {
            ev.iter()
                .filter(|e| s(e, "event") == k && s(e, "project") == *p)
                .collect()
        };
        assert_eq!(of("project_started").len(), 1, "{p}: {kinds:?}");
        assert!(!of("project_output").is_empty(), "{p}: no project_output");
        for o in of("project_output") {
            assert!(o["line"].is_string(), "{o}");
        }
        let fin = of("project_finished");
        assert_eq!(fin.len(), 1, "{p}");
        assert_eq!(fin[0]["operation"], "up", "{}", fin[0]);
        assert_eq!(fin[0]["status"], "succeeded", "{}", fin[0]);
        assert!(fin[0]["duration_ms"].is_u64(), "{}", fin[0]);
    }
    let last = ev.last().unwrap();
    assert_eq!(last["status"], "succeeded", "{last}");
    assert_eq!(last["counts"]["succeeded"], 3, "{last}");
    assert_eq!(last["counts"]["failed"], 0, "{last}");
}

#[test]
fn json_output_reports_a_failure() {
    let ws = failing_up(CHAIN, CHAIN_PATHS, "bravo");
    let r = run(&ws, "up", &["--output", "json"]);
    r.expect_code(1);
    let ev = r.events();
    let fin = |p: &str| {
        ev.iter()
            .find(|e| s(e, "event") == "project_finished" && s(e, "project") == p)
            .cloned()
            .unwrap_or_else(|| panic!("no project_finished for {p}"))
    };
    assert_eq!(fin("alpha")["status"], "succeeded");
    assert_eq!(fin("bravo")["status"], "failed");
    assert_ne!(fin("charlie")["status"], "succeeded");
    let last = ev.last().unwrap();
    assert_eq!(last["event"], "run_finished");
    assert_eq!(last["status"], "failed");
    assert_eq!(last["counts"]["failed"], 1, "{last}");
}

#[test]
fn human_output_off_a_terminal_is_plain_prefixed_lines() {
    let ws = workspace(CHAIN, CHAIN_PATHS);
    let r = ok(&ws, "up", &[]);
    let out = r.all();
    assert!(
        !out.contains('\u{1b}') && !out.contains('\r'),
        "no escape codes or carriage returns off a terminal: {r:?}"
    );
    for p in CHAIN_PATHS {
        let prefix = format!("[{p}] ");
        assert!(
            out.lines().any(|l| l.starts_with(&prefix)),
            "lines of {p} are prefixed with [{p}]: {r:?}"
        );
    }
    // Child output (the fake's step lines) only ever appears behind its project's prefix.
    let child: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("fake:index:Thing"))
        .collect();
    assert!(!child.is_empty(), "the children's progress is shown: {r:?}");
    for l in child {
        assert!(
            CHAIN_PATHS
                .iter()
                .any(|p| l.starts_with(&format!("[{p}] "))),
            "unprefixed child output line: {l}"
        );
    }
}

/// Pulumi's event stream carries debug diagnostics that `pulumi up` shows only with
/// `-v`/`--debug`, and a plugin warning once per plugin load (issue 46): off a terminal
/// strata shows no debug line (`-v` does; the log keeps them) and a repeated warning once.
#[test]
fn debug_diagnostics_are_hidden_and_a_repeated_warning_is_shown_once() {
    let ws = workspace("  - path: alpha\n", &["alpha"]);
    let debug = r#"{"diagnosticEvent":{"prefix":"debug: ","message":"Registering config fake:x\n","color":"never","severity":"debug"}}"#;
    let warning = r#"{"diagnosticEvent":{"prefix":"warning: ","message":"using pulumi-resource-command from $PATH at /usr/bin\n","color":"never","severity":"warning"}}"#;
    // The fake, behind a wrapper that says these before an `up`'s events.
    let pulumi = ws.path("bin/pulumi");
    std::fs::remove_file(&pulumi).unwrap();
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = up ]; then\n  for i in 1 2 3; do\n    printf '%s\\n' '{debug}' '{warning}'\n  done\nfi\nexec '{}' \"$@\"\n",
        crate::support::fake_pulumi().display()
    );
    ws.write("bin/pulumi", &script);
    let mut perms = std::fs::metadata(&pulumi).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&pulumi, perms).unwrap();

    let r = ok(&ws, "up", &[]);
    let out = r.all();
    assert!(!out.contains("Registering config"), "a debug line: {r:?}");
    let warned = out
        .lines()
        .filter(|l| l.contains("using pulumi-resource-command"))
        .count();
    assert_eq!(warned, 1, "the warning once: {r:?}");
    let logs = ws.files_under(".strata/dev/logs/alpha");
    assert!(
        logs.iter()
            .any(|(_, b)| String::from_utf8_lossy(b).contains("Registering config")),
        "the log keeps the debug lines"
    );

    let r = ok(&ws, "up", &["-v"]);
    assert!(
        r.all().contains("debug: Registering config fake:x"),
        "-v shows them: {r:?}"
    );
}
