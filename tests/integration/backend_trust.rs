//! No Pulumi backend layout loses resources (issue 32): a file backend in Pulumi's legacy
//! layout (one `dev` for every project) is refused before anything runs; checkpoints in
//! every form the CLI writes (plain, gzip, zstd) are read; a Pulumi lock is cleared only
//! when strata can prove its process is gone.

use serde_json::Value;

use crate::run::{BODY, name, run, s, starts};
use crate::support::*;

/// Two projects that need nothing of each other, both on stack `dev`.
const TWO: &str = "  - path: alpha\n    needs: []\n  - path: bravo\n    needs: []\n";

/// `up1` and `down1`, which takes `up1`'s output `value` as its config `v`.
const WIRED: &str = "  - path: up1\n  - path: down1\n    inputs:\n      proj-down1:v: up1:value\n";

fn ws_with(entries: &str, paths: &[&str]) -> Ws {
    let ws = Ws::new();
    ws.profile("t", &format!("{HEAD}infrastructure:\n{entries}"));
    for p in paths {
        ws.pulumi_project(p, &name(p), BODY);
    }
    ws
}

const BACKEND: &str = ".strata/backend/.pulumi";

/// A checkpoint as a Pulumi CLI older than 3.61 left it: `.pulumi/stacks/dev.json`,
/// no `meta.yaml`.
fn legacy_checkpoint(ws: &Ws, project: &str) {
    let stack_urn = format!("urn:pulumi:dev::{project}::pulumi:pulumi:Stack::{project}-dev");
    let doc = serde_json::json!({
        "version": 3,
        "checkpoint": {"stack": "dev", "latest": {
            "manifest": {"time": "2023-01-01T00:00:00Z", "magic": "m", "version": "v3.50.0"},
            "resources": [
                {"urn": stack_urn, "custom": false, "type": "pulumi:pulumi:Stack",
                 "outputs": {"value": 1}},
                {"urn": format!("urn:pulumi:dev::{project}::fake:index:Thing::first"),
                 "custom": true, "id": "first-id", "type": "fake:index:Thing",
                 "parent": stack_urn}
            ]
        }}
    });
    ws.write(&format!("{BACKEND}/stacks/dev.json"), &doc.to_string());
}

fn engine_calls(ws: &Ws) -> Vec<String> {
    starts(&ws.calls())
        .into_iter()
        .map(|c| s(c, "command").to_string())
        .filter(|c| ["up", "preview", "destroy", "refresh", "stack init"].contains(&c.as_str()))
        .collect()
}

/// Issue 32, defect 1: on a legacy-layout backend every project's `dev` is one stack,
/// so the second project's `up` would replace the first one's resources. Refused as a
/// configuration error before any Pulumi process runs, naming `pulumi state upgrade`.
#[test]
fn a_legacy_layout_file_backend_is_refused_before_anything_runs() {
    let mut ws = ws_with(TWO, &["alpha", "bravo"]);
    ws.set_env("PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR", "1");
    legacy_checkpoint(&ws, &name("alpha"));
    let before = ws.read(&format!("{BACKEND}/stacks/dev.json"));
    for cmd in ["up", "preview", "destroy"] {
        let yes: &[&str] = if cmd == "preview" { &[] } else { &["--yes"] };
        let r = run(&ws, cmd, yes);
        assert_eq!(r.code, 3, "{cmd}: a configuration error: {r:?}");
        let all = r.all();
        assert!(all.contains("legacy layout"), "{cmd}: {r:?}");
        assert!(all.contains("pulumi state upgrade"), "{cmd}: {r:?}");
        assert!(
            all.contains(".pulumi/stacks/dev.json") || all.contains("dev"),
            "{r:?}"
        );
    }
    assert!(
        engine_calls(&ws).is_empty(),
        "nothing ran: {:?}",
        ws.calls()
    );
    assert_eq!(ws.read(&format!("{BACKEND}/stacks/dev.json")), before);
}

/// A new backend that `PULUMI_DIY_BACKEND_LEGACY_LAYOUT` would make legacy, and one whose
/// `meta.yaml` says version 0, are refused the same way; a project-mode backend with the
/// deprecation variable set (it then does nothing) is not.
#[test]
fn legacy_layout_by_variable_or_meta_version_0_is_refused_project_mode_is_not() {
    let mut ws = ws_with(TWO, &["alpha", "bravo"]);
    ws.set_env("PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR", "1");
    ws.set_env("PULUMI_SELF_MANAGED_STATE_LEGACY_LAYOUT", "true");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.all().contains("PULUMI_SELF_MANAGED_STATE_LEGACY_LAYOUT"),
        "{r:?}"
    );
    assert!(engine_calls(&ws).is_empty(), "nothing ran");

    ws.set_env("PULUMI_SELF_MANAGED_STATE_LEGACY_LAYOUT", "");
    ws.write(&format!("{BACKEND}/meta.yaml"), "version: 0\n");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.all().contains("pulumi state upgrade"), "{r:?}");
    assert!(engine_calls(&ws).is_empty(), "nothing ran");

    ws.write(&format!("{BACKEND}/meta.yaml"), "version: 1\n");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    for p in ["alpha", "bravo"] {
        assert!(
            ws.exists(&format!("{BACKEND}/stacks/{}/dev.json", name(p))),
            "{p}'s own stack"
        );
    }
}

fn outputs_calls(ws: &Ws, path: &str) -> usize {
    starts(&ws.calls())
        .into_iter()
        .filter(|c| s(c, "project") == name(path) && s(c, "command") == "stack output")
        .count()
}

/// The value `down1`'s last Pulumi call of `command` was given for its config `v`.
fn down1_v(ws: &Ws, command: &str) -> Value {
    starts(&ws.calls())
        .into_iter()
        .rfind(|c| s(c, "project") == name("down1") && s(c, "command") == command)
        .map(|c| c["config"]["proj-down1:v"].clone())
        .unwrap_or(Value::Null)
}

/// Issue 32, defect 2: with `PULUMI_SELF_MANAGED_STATE_ZSTD` every checkpoint is
/// `<stack>.json.zst`. A deployed upstream is deployed: `up --filter` reads its outputs
/// (from the file, no process), a preview takes its real values (no projection plan),
/// and a plan bundle applies.
#[test]
fn zstd_checkpoints_are_read_as_deployed_stacks() {
    let mut ws = ws_with(WIRED, &["up1", "down1"]);
    ws.set_env("PULUMI_SELF_MANAGED_STATE_ZSTD", "true");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let zst = format!("{BACKEND}/stacks/{}/dev.json.zst", name("up1"));
    assert!(ws.exists(&zst), "the fake writes zstd as Pulumi does");
    assert!(!ws.exists(&format!("{BACKEND}/stacks/{}/dev.json", name("up1"))));

    std::fs::remove_file(ws.path("calls.jsonl")).unwrap();
    let r = run(&ws, "up", &["--filter", "down1"]);
    assert_eq!(r.code, 0, "up1 is deployed: {r:?}");
    assert_eq!(down1_v(&ws, "up"), Value::from(1), "{:?}", ws.calls());
    assert_eq!(outputs_calls(&ws, "up1"), 0, "read from the checkpoint");

    std::fs::remove_file(ws.path("calls.jsonl")).unwrap();
    let r = run(&ws, "preview", &["--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    // (up1's preview saves its plan, down1 reading its outputs: `contracts`.)
    let projected: Vec<Value> = r
        .events()
        .into_iter()
        .filter(|e| e["event"] == "project_finished")
        .filter(|e| e["message"].to_string().contains("projected"))
        .collect();
    assert!(
        projected.is_empty(),
        "no upstream is taken as never deployed: {projected:?}"
    );
    assert_eq!(down1_v(&ws, "preview"), Value::from(1));

    ws.pulumi_project("down1", &name("down1"), &BODY.replace("x: 1", "x: 2"));
    let r = run(&ws, "preview", &["--save-plan", "b"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(&ws, "up", &["--plan", "b"]);
    assert_eq!(r.code, 0, "the bundle applies: {r:?}");
}

/// gzip checkpoints (`PULUMI_DIY_BACKEND_GZIP`) are read for outputs too: no
/// `stack output` process for an upstream.
#[test]
fn gzip_checkpoints_are_read_for_outputs() {
    let mut ws = ws_with(WIRED, &["up1", "down1"]);
    ws.set_env("PULUMI_DIY_BACKEND_GZIP", "1");
    assert_eq!(run(&ws, "up", &[]).code, 0);
    assert!(ws.exists(&format!("{BACKEND}/stacks/{}/dev.json.gz", name("up1"))));
    std::fs::remove_file(ws.path("calls.jsonl")).unwrap();
    let r = run(&ws, "up", &["--filter", "down1"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(down1_v(&ws, "up"), Value::from(1));
    assert_eq!(outputs_calls(&ws, "up1"), 0, "read from the checkpoint");
}

/// Issue 32, defect 3: a Pulumi lock with this host's name whose pid does not exist
/// here may belong to a live update in another PID namespace (containers that share
/// the hostname, a `file:///shared` backend). strata did not start it, so it cannot
/// prove its process is gone: it leaves the lock and names the command that clears it.
#[test]
fn a_lock_strata_cannot_prove_stale_is_left_and_the_command_named() {
    let ws = ws_with("  - path: app\n", &["app"]);
    assert_eq!(run(&ws, "up", &[]).code, 0);
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let lock = format!(
        "{BACKEND}/locks/organization/{}/dev/7d1c9a9e-5b1e-4c4e-9d59-0a1b2c3d4e5f.json",
        name("app")
    );
    let now = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    let now = String::from_utf8_lossy(&now.stdout).trim().to_string();
    ws.write(
        &lock,
        &format!(
            r#"{{"pid":{dead},"username":"someone","hostname":"{}","timestamp":"{now}"}}"#,
            host.trim()
        ),
    );
    std::fs::remove_file(ws.path("calls.jsonl")).unwrap();
    let r = run(&ws, "up", &[]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(ws.exists(&lock), "the lock is kept");
    let cancels = starts(&ws.calls())
        .into_iter()
        .filter(|c| s(c, "command") == "cancel")
        .count();
    assert_eq!(cancels, 0, "no `pulumi cancel`");
    let all = r.all();
    assert!(
        all.contains(&format!(
            "pulumi cancel --yes --stack dev --cwd {}",
            ws.path("projects/app").display()
        )),
        "{r:?}"
    );
    assert!(all.contains("cannot prove"), "says why it was left: {r:?}");
}

/// `strata outputs` on a legacy-layout backend would show another project's outputs as
/// this one's (one `dev` for all): refused the same way.
#[test]
fn outputs_on_a_legacy_layout_backend_are_refused() {
    let mut ws = ws_with(TWO, &["alpha", "bravo"]);
    ws.set_env("PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR", "1");
    legacy_checkpoint(&ws, &name("alpha"));
    let r = ws.strata(&["outputs", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.all().contains("pulumi state upgrade"), "{r:?}");
    assert!(!r.stdout.contains("value"), "no outputs shown: {r:?}");
}
