//! Issue 5: state between projects and between runs — `inputs:` wired into per-project
//! config, stack references, `on_success` hooks (run, kubeconfig), the journal, the stack
//! lock, `up --resume`, `up --changed`, `status` and `outputs`. Every test drives the
//! real `strata` binary with the fake `pulumi` first on PATH and reads the fake's call
//! log to see exactly which Pulumi processes ran, with which config. Here: the fixtures
//! and the call-log, journal and summary readers the tests share.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::support::*;

/// `on_success` hooks: `run` and `kubeconfig`, and a failing hook.
mod hooks;
/// Outputs wired through `inputs:` into downstream config and command projects.
mod inputs;
/// The journal: one JSON line per project operation, append-only, without secrets.
mod journal;
/// The stack lock: one run per stack, taken over from the dead, always released.
mod lock;
/// A project run alone reads its inputs from the deployed upstream stacks.
mod piecemeal;
/// Stack references and the organization they are built with.
mod references;
/// `up --resume` and `up --changed`: what a later run runs again.
mod resume;
/// Secret outputs handed on as secrets, redacted wherever strata prints or writes.
mod secrets;
/// `status` and `outputs`: what the last runs left, read locally.
mod status;

/// A stack-config key every profile declares (default taken non-interactively), so the
/// per-project config files can be checked to keep the shared config.
const REGION_KEY: &str =
    "config:\n  - key: test:region\n    prompt: Region\n    default: eu-north-1\n";

/// `base/network` (Pulumi project `network`): one resource; `vpc_id` is `vpc-id` unless
/// FAKE_PULUMI_OUTPUTS_NETWORK overrides it.
const NETWORK: &str = "resources:\n  vpc:\n    type: fake:index:Vpc\n    properties:\n      cidr: 10.0.0.0/16\noutputs:\n  vpc_id: ${vpc.id}\n";

/// `apps/web` (Pulumi project `web`): declares `vpc_id` without a default, so the fake
/// itself refuses to run when the wired input is missing.
const WEB: &str = "config:\n  vpc_id:\n    type: string\nresources:\n  app:\n    type: fake:index:App\n    properties:\n      vpcId: ${vpc_id}\noutputs:\n  app_vpc: ${app.vpcId}\n";

/// A Pulumi project body with one resource.
fn simple(label: &str) -> String {
    format!(
        "resources:\n  thing:\n    type: fake:index:Thing\n    properties:\n      label: {label}\noutputs:\n  label: ${{thing.label}}\n"
    )
}

/// A workspace with stack `dev` (env file), provider `test` (STRATA_PROVIDER) and the
/// profile `providers/test.yaml` = HEAD + the region key + `entries`.
fn workspace(entries: &str) -> Ws {
    let mut ws = Ws::new();
    ws.env_file("PULUMI_STACK=dev\n");
    ws.set_env("STRATA_PROVIDER", "test");
    ws.profile("test", &format!("{HEAD}{REGION_KEY}{entries}"));
    ws
}

/// A workspace of `base/network` ([`NETWORK`]) then `apps/web` ([`WEB`]): `hooks` are
/// network's `on_success` items (`- run: …`); `inputs` wire each (key, output) as
/// `web:<key>: base/network:<output>`.
fn network_and_web(hooks: &[&str], inputs: &[(&str, &str)]) -> Ws {
    let items: String = hooks.iter().map(|h| format!("      {h}\n")).collect();
    let on_success = match hooks {
        [] => String::new(),
        _ => format!("    on_success:\n{items}"),
    };
    let wired: String = (inputs.iter())
        .map(|(key, output)| format!("      web:{key}: base/network:{output}\n"))
        .collect();
    let ws = workspace(&format!(
        "infrastructure:\n  - path: base/network\n{on_success}  - path: apps/web\n    inputs:\n{wired}"
    ));
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    ws
}

/// The chain ([`chain_workspace`]) after an `up --keep-going` in which `apps/web` failed:
/// network and side succeeded, frontend (after web) never ran. Web no longer fails.
fn chain_after_web_failed() -> Ws {
    let mut ws = chain_workspace();
    ws.set_env("FAKE_PULUMI_FAIL_WEB", "up");
    ws.strata(&["up", "--keep-going"]).expect_code(1);
    ws.env.retain(|(k, _)| k != "FAKE_PULUMI_FAIL_WEB");
    ws
}

/// network -> web (input web:vpc_id) -> frontend (the entry before it); side needs only
/// network.
const CHAIN: &str = "infrastructure:\n  - path: base/network\n  - path: apps/web\n    inputs:\n      web:vpc_id: base/network:vpc_id\n  - path: apps/frontend\n  - path: apps/side\n    needs: [base/network]\n";

fn chain_workspace() -> Ws {
    let ws = workspace(CHAIN);
    ws.pulumi_project("base/network", "network", NETWORK);
    ws.pulumi_project("apps/web", "web", WEB);
    ws.pulumi_project("apps/frontend", "frontend", &simple("front"));
    ws.pulumi_project("apps/side", "side", &simple("side"));
    ws
}

/// `end` lines of the fake's call log from line `since` on.
fn ends(ws: &Ws, since: usize) -> Vec<Value> {
    ws.calls()
        .into_iter()
        .skip(since)
        .filter(|c| c["event"] == "end")
        .collect()
}

/// Every Pulumi `up` that really ran (not the probe that finds no stack, exit 6), from
/// call-log line `since` on: (project name, exit code, end line).
fn ups(ws: &Ws, since: usize) -> Vec<(String, i64, Value)> {
    ends(ws, since)
        .into_iter()
        .filter(|c| c["command"] == "up" && c["exit_code"] != 6)
        .map(|c| {
            (
                c["project"].as_str().unwrap_or("?").to_string(),
                c["exit_code"].as_i64().unwrap_or(-1),
                c,
            )
        })
        .collect()
}

fn up_projects(ws: &Ws, since: usize) -> BTreeSet<String> {
    ups(ws, since).into_iter().map(|(p, _, _)| p).collect()
}

/// The end line of the one `up` of `project` that ran from line `since` on.
fn the_up(ws: &Ws, since: usize, project: &str) -> Value {
    let mut found: Vec<Value> = ups(ws, since)
        .into_iter()
        .filter(|(p, _, _)| p == project)
        .map(|(_, _, c)| c)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected exactly one `pulumi up` of {project}; call log:\n{}",
        calls_text(ws)
    );
    found.remove(0)
}

fn calls_text(ws: &Ws) -> String {
    ws.calls()
        .iter()
        .map(|c| {
            format!(
                "{} {} {} exit={} argv={}",
                c["event"], c["project"], c["command"], c["exit_code"], c["argv"]
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `.strata/dev/journal.jsonl`, every line parsed (a line that is not JSON fails).
fn journal(ws: &Ws) -> Vec<Value> {
    ws.read(".strata/dev/journal.jsonl")
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l)
                .unwrap_or_else(|e| panic!("journal line is not JSON ({e}): {l}"))
        })
        .collect()
}

/// Journal records of project operations (they carry `project`).
fn project_records(ws: &Ws) -> Vec<Value> {
    journal(ws)
        .into_iter()
        .filter(|r| r.get("project").is_some())
        .collect()
}

/// The part of a human run's stdout from the summary table on.
fn summary(r: &Run) -> String {
    match r.stdout.rfind("\nproject ") {
        Some(i) => r.stdout[i..].to_string(),
        None => r.stdout.clone(),
    }
}

/// A summary row of `project` (the table line that starts with its path).
fn summary_row(r: &Run, project: &str) -> String {
    summary(r)
        .lines()
        .find(|l| l.starts_with(&format!("{project} ")))
        .unwrap_or_else(|| panic!("no summary row for {project}:\n{r:?}"))
        .to_string()
}
