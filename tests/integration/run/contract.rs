//! The contract with the pulumi CLI: the flags and environment of every call, each
//! project's own copy of the stack config, `stack init` for a missing stack, the backend
//! and organization stacks live in, and the environment every child (command projects
//! too) gets.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{
    CHAIN, CHAIN_PATHS, DIAMOND, DIAMOND_EDGES, DIAMOND_PATHS, argv, assert_order, clear_calls,
    commands_of, fill, flag_value, has_flag, hook_key, name, names, ok, projects_called, records,
    run, s, starts, workspace,
};
use crate::support::*;

#[test]
fn every_pulumi_call_passes_the_required_flags_and_environment() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    ok(&ws, "up", &[]);
    ok(&ws, "preview", &[]);
    ok(&ws, "refresh", &[]);
    ok(&ws, "destroy", &["--yes"]);
    let calls = ws.calls();
    let starts = starts(&calls);
    let commands: BTreeSet<&str> = starts.iter().map(|c| s(c, "command")).collect();
    for c in ["up", "preview", "refresh", "destroy"] {
        assert!(commands.contains(c), "no `{c}` call: {commands:?}");
    }
    let backend = format!("file://{}/.strata/backend", ws.root.display());
    let backend_canon = format!(
        "file://{}/.strata/backend",
        ws.root.canonicalize().unwrap().display()
    );
    let config_dir = ws.path(".strata/dev/config");
    for c in &starts {
        let a = argv(c);
        let cmd = s(c, "command");
        let project = s(c, "project").trim_start_matches("proj-").to_string();
        let cwd = flag_value(&a, "--cwd").unwrap_or_else(|| panic!("no --cwd: {a:?}"));
        if cmd == "stack init" {
            // In a throwaway copy of the project (its name and runtime only), so that
            // the salt Pulumi writes never lands in the user's Pulumi.<stack>.yaml.
            let copy = Path::new(&cwd);
            assert!(
                copy.starts_with(ws.path(&format!(".strata/dev/work/{project}"))),
                "stack init of {project} not in its scratch copy: {a:?}"
            );
            assert!(has_flag(&a, "--no-select"), "{a:?}");
        } else {
            assert!(
                Path::new(&cwd).ends_with(format!("projects/{project}")),
                "--cwd {cwd} is not the project dir of {project}: {a:?}"
            );
        }
        assert_eq!(flag_value(&a, "--stack").as_deref(), Some("dev"), "{a:?}");
        assert!(has_flag(&a, "--non-interactive"), "{a:?}");
        assert!(
            !a.iter().any(|x| x == "select"),
            "`stack select` must never be used: {a:?}"
        );
        if ["up", "destroy", "refresh"].contains(&cmd) {
            for f in ["--yes", "--skip-preview", "--json"] {
                assert!(has_flag(&a, f), "`{cmd}` without {f}: {a:?}");
            }
        }
        if ["up", "preview", "refresh", "destroy"].contains(&cmd) {
            let cf = flag_value(&a, "--config-file")
                .unwrap_or_else(|| panic!("`{cmd}` without --config-file: {a:?}"));
            // The project's own copy of the shared stack config.
            assert_eq!(
                Path::new(&cf).parent().and_then(|p| p.canonicalize().ok()),
                config_dir.canonicalize().ok(),
                "`{cmd}` --config-file is not a per-project copy of the stack config: {a:?}"
            );
        }
        assert_eq!(c["own_pgroup"], true, "not in its own process group: {c}");
        assert!(
            ["null", "closed"].contains(&s(c, "stdin")),
            "stdin of a child must be null/closed, was {}: {a:?}",
            s(c, "stdin")
        );
        let env = &c["env"];
        assert_eq!(env["STRATA_STACK"], "dev", "{c}");
        assert_eq!(env["STRATA_PROVIDER"], "t", "{c}");
        assert_eq!(env["STRATA_INFRA_TYPE"], "test", "{c}");
        assert_eq!(env["STRATA_ORG"], "organization", "{c}");
        assert_eq!(env["PULUMI_SKIP_UPDATE_CHECK"], "true", "{c}");
        let url = s(env, "PULUMI_BACKEND_URL");
        assert!(
            url == backend || url == backend_canon,
            "PULUMI_BACKEND_URL {url}, expected {backend}"
        );
    }
}

/// The real CLI writes an `encryptionsalt` into the file `--config-file` names when it
/// has none, with a plain truncate-and-write (no rename), and drops its comments: N
/// projects started at once on a fresh stack raced on the shared stack config, each
/// writing its own salt. strata hands each project its own copy instead, and the file
/// the user keeps in git is never written by Pulumi.
#[test]
fn pulumi_never_writes_the_shared_stack_config() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    let shared = "# the team's settings\nconfig:\n  kubernetes:infra_type: test\n  proj-alpha:size: 3 # small\n";
    ws.write("config/pulumi/Pulumi.dev.yaml", shared);
    ok(&ws, "up", &[]);
    ok(&ws, "up", &[]);
    ok(&ws, "preview", &[]);
    assert_eq!(ws.read("config/pulumi/Pulumi.dev.yaml"), shared);
    let copies = ws.path(".strata/dev/config");
    for c in starts(&ws.calls()) {
        let a = argv(c);
        if let Some(cf) = flag_value(&a, "--config-file") {
            assert!(
                Path::new(&cf).starts_with(&copies),
                "--config-file {cf} is not the project's own copy: {a:?}"
            );
            let copy = std::fs::read_to_string(&cf).unwrap();
            assert!(copy.contains("proj-alpha:size: 3"), "{copy}");
            assert!(copy.contains("encryptionsalt"), "{copy}");
        }
    }
}

#[test]
fn a_backend_url_that_is_set_is_kept() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    let other = ws.path("elsewhere");
    std::fs::create_dir_all(&other).unwrap();
    let url = format!("file://{}", other.display());
    ws.set_env("PULUMI_BACKEND_URL", &url);
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    assert!(!starts(&calls).is_empty());
    for c in starts(&calls) {
        assert_eq!(s(&c["env"], "PULUMI_BACKEND_URL"), url, "{c}");
    }
    assert!(
        !ws.exists(".strata/backend/.pulumi"),
        "the default backend must not be used when PULUMI_BACKEND_URL is set"
    );
}

#[test]
fn a_missing_stack_is_created_with_stack_init_and_a_second_up_is_one_process_per_project() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    for p in DIAMOND_PATHS {
        let cmds = commands_of(&calls, p);
        assert!(
            cmds.contains(&"stack init"),
            "{p}: a missing stack is created with `stack init`: {cmds:?}"
        );
        // On the file backend strata sees the stack is new: init, then up — no failed up.
        assert_eq!(cmds, ["stack init", "up"], "{p}: first run processes");
        assert!(
            !cmds.iter().any(|c| c.contains("select")),
            "{p}: `stack select` used: {cmds:?}"
        );
    }
    for c in starts(&calls) {
        assert!(!argv(c).iter().any(|a| a == "select"), "{c}");
    }

    clear_calls(&ws);
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    for p in DIAMOND_PATHS {
        let cmds = commands_of(&calls, p);
        assert_eq!(
            cmds,
            ["up"],
            "{p}: a second `up` on an existing stack is exactly one pulumi process"
        );
    }
    assert_eq!(starts(&calls).len(), DIAMOND_PATHS.len(), "{calls:#?}");
}

#[test]
fn preview_and_refresh_run_the_matching_pulumi_subcommand() {
    let ws = workspace(DIAMOND, DIAMOND_PATHS);
    ok(&ws, "up", &[]);
    for cmd in ["preview", "refresh"] {
        clear_calls(&ws);
        ok(&ws, cmd, &[]);
        let calls = ws.calls();
        for p in DIAMOND_PATHS {
            let cmds = commands_of(&calls, p);
            assert!(
                cmds.contains(&cmd),
                "`strata {cmd}` must run `pulumi {cmd}` for {p}: {cmds:?}"
            );
            for c in &cmds {
                assert!(
                    !["up", "destroy"].contains(c),
                    "`strata {cmd}` ran `pulumi {c}` for {p}"
                );
            }
        }
        if cmd == "refresh" {
            assert_order(&calls, DIAMOND_EDGES);
        }
    }
}

/// The real CLI (cobra) has no `--config-file` on `stack init` and `stack output`: strata
/// never passes it there (the fake refuses unknown flags per command, exit 2).
#[test]
fn stack_init_and_stack_output_get_no_config_file() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ws.set_env(
        &format!("FAKE_PULUMI_SECRET_OUTPUTS_{}", hook_key("alpha")),
        r#"{"token":"s3cr3t-value"}"#,
    );
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: alpha\n  - path: bravo\n    inputs:\n      bravo:token: alpha:token\n  - path: charlie\n"
        ),
    );
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    let mut seen = BTreeSet::new();
    for c in starts(&calls) {
        let cmd = s(c, "command");
        if cmd == "stack init" || cmd == "stack output" {
            seen.insert(cmd.to_string());
            assert!(!has_flag(&argv(c), "--config-file"), "{c}");
        }
        assert_ne!(c["exit_code"], 2, "a call the real CLI refuses: {c}");
    }
    for c in records(&calls, "end") {
        assert_ne!(c["exit_code"].as_i64(), Some(2), "refused flags: {c}");
    }
    assert_eq!(
        seen,
        BTreeSet::from(["stack init".to_string(), "stack output".to_string()]),
        "both were exercised: {calls:#?}"
    );
}

/// On Pulumi Cloud, stacks are created and addressed fully qualified (`org/project/stack`)
/// whenever the organization is known: the CLI's default organization (here not the
/// user's) must not receive them, or stack references built from STRATA_ORG break.
#[test]
fn pulumi_cloud_stacks_are_fully_qualified_in_the_known_org() {
    for (pulumi_org, expected) in [(Some("team"), "team"), (None, "alice")] {
        let mut ws = workspace(
            "  - path: alpha\n  - path: bravo\n    inputs:\n      bravo:x: alpha:value\n",
            &["alpha", "bravo"],
        );
        let cloud = ws.path("cloud");
        ws.on_fake_pulumi_cloud(&cloud);
        if let Some(o) = pulumi_org {
            ws.set_env("PULUMI_ORG", o);
        }
        let r = run(&ws, "up", &[]);
        assert_eq!(r.code, 0, "{r:?}");
        for p in ["alpha", "bravo"] {
            let f = cloud.join(format!(".pulumi/stacks/{expected}/{}/dev.json", name(p)));
            assert!(f.is_file(), "{} missing: {r:?}", f.display());
        }
        assert!(!cloud.join(".pulumi/stacks/acme-default").exists());
        for c in starts(&ws.calls()) {
            if c["project"].is_string() && s(c, "command") != "whoami" {
                let a = argv(c);
                let i = a.iter().position(|x| x == "--stack").expect("--stack");
                assert_eq!(
                    a[i + 1],
                    format!("{expected}/{}/dev", s(c, "project")),
                    "{c}"
                );
            }
        }
    }
}

#[test]
fn strata_pulumi_names_the_binary() {
    let mut ws = Ws::without_pulumi();
    fill(&ws, CHAIN, CHAIN_PATHS);
    ws.set_env("STRATA_PULUMI", fake_pulumi().to_str().unwrap());
    ok(&ws, "up", &[]);
    assert_eq!(projects_called(&ws.calls()), names(CHAIN_PATHS));
}

#[test]
fn the_environment_file_overlays_the_process_environment_of_children() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ws.env_file("STRATA_TEST_A=from-file\n");
    ws.set_env("STRATA_TEST_A", "from-process");
    ws.set_env("STRATA_TEST_B", "only-process");
    ws.set_env("FAKE_PULUMI_LOG_ENV", "STRATA_TEST_A,STRATA_TEST_B");
    ok(&ws, "up", &[]);
    let calls = ws.calls();
    assert!(!starts(&calls).is_empty());
    for c in starts(&calls) {
        assert_eq!(c["env"]["STRATA_TEST_A"], "from-file", "the file wins: {c}");
        assert_eq!(c["env"]["STRATA_TEST_B"], "only-process", "{c}");
    }
}

#[test]
fn command_projects_get_the_same_environment_own_group_and_no_stdin() {
    let ws = Ws::with_profile("infrastructure:\n  - path: cmd\n");
    let up = r#"set -eu
{
  echo "stack=$STRATA_STACK"
  echo "provider=$STRATA_PROVIDER"
  echo "infra=$STRATA_INFRA_TYPE"
  echo "org=${STRATA_ORG:-}"
  echo "skip=$PULUMI_SKIP_UPDATE_CHECK"
  echo "stdin=$(readlink /proc/$$/fd/0 || echo closed)"
  echo "pid=$$"
  echo "pgrp=$(cut -d')' -f2 /proc/$$/stat | awk '{print $3}')"
} > "$STRATA_ROOT/cmd-env.txt"
echo '{}' > "$STRATA_OUTPUTS_FILE"
"#;
    ws.command_project("cmd", up, "true");
    ok(&ws, "up", &[]);
    let text = ws.read("cmd-env.txt");
    let kv: BTreeMap<&str, &str> = text.lines().filter_map(|l| l.split_once('=')).collect();
    assert_eq!(kv["stack"], "dev", "{text}");
    assert_eq!(kv["provider"], "t", "{text}");
    assert_eq!(kv["infra"], "test", "{text}");
    assert_eq!(kv["org"], "organization", "{text}");
    assert_eq!(kv["skip"], "true", "{text}");
    assert!(
        kv["stdin"] == "/dev/null" || kv["stdin"] == "closed",
        "stdin of a command project: {text}"
    );
    assert_eq!(kv["pid"], kv["pgrp"], "own process group: {text}");
}
