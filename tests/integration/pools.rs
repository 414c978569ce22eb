//! Concurrency pools (issue 27): a pool caps its projects, its limit halves when one is
//! throttled and grows back after successes, the throttled project is retried; events,
//! journal and report show every change of a limit.

use serde_json::Value;

use crate::support::*;

/// A fake cloud API that allows `allowed` calls at once: a project "calls" it for
/// `hold` seconds, or prints AWS's throttling error and fails when it is already busy.
/// The most calls ever seen at once are kept in `$STRATA_ROOT/cloud/peak`.
fn cloud_call(allowed: usize, hold: &str) -> String {
    format!(
        r#"mkdir -p "$STRATA_ROOT/cloud"; c="$STRATA_ROOT/cloud"
enter() {{ exec 9>"$c/lock"; flock 9; n=$(cat "$c/busy" 2>/dev/null || echo 0); if [ "$n" -ge {allowed} ]; then flock -u 9; return 1; fi; n=$((n+1)); echo $n > "$c/busy"; p=$(cat "$c/peak" 2>/dev/null || echo 0); [ $n -gt $p ] && echo $n > "$c/peak"; echo x >> "$c/calls"; flock -u 9; }}
leave() {{ exec 9>"$c/lock"; flock 9; n=$(cat "$c/busy"); echo $((n-1)) > "$c/busy"; flock -u 9; }}
if ! enter; then echo "api error Throttling: Rate exceeded"; exit 1; fi
sleep {hold}; leave
printf '{{}}' > "$STRATA_OUTPUTS_FILE""#
    )
}

/// `projects` projects that call [`cloud_call`] in the pool `pool` (of `pools`), and one
/// in no pool.
pub(crate) fn estate(ws: &Ws, pools: &str, projects: usize, pool: &str) {
    let mut yaml =
        format!("{HEAD}pools: {pools}\nthrottle: {{attempts: 20, delay: 50ms}}\ninfrastructure:\n");
    for i in 0..projects {
        yaml.push_str(&format!(
            "  - path: p{i}\n    needs: []\n    pool: {pool}\n"
        ));
    }
    yaml.push_str("  - path: free\n    needs: []\n");
    ws.profile("t", &yaml);
    for i in 0..projects {
        ws.command_project(&format!("p{i}"), &cloud_call(2, "0.3"), "true");
    }
    ws.command_project("free", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", "true");
}

/// [`estate`] in a new workspace (`projects` projects in the pool `aws` of `pools`),
/// brought up with `-j 8`; asserts the run succeeds, printing it when not.
#[track_caller]
fn estate_up(pools: &str, projects: usize) -> (Ws, Run) {
    let ws = Ws::new();
    estate(&ws, pools, projects, "aws");
    let r = ws.run_json("up", &["-j", "8"]);
    r.expect_code(0);
    (ws, r)
}

fn of(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == kind)
        .cloned()
        .collect()
}

/// A cloud that allows two calls at once, a pool that starts at four: the first burst
/// is throttled, the pool halves, the throttled projects wait for a slot and succeed;
/// nothing fails.
#[test]
fn a_throttled_pool_halves_retries_and_every_project_succeeds() {
    let (ws, r) = estate_up("{aws: 4}", 8);
    let events = r.events();
    let finished = of(&events, "project_finished");
    assert_eq!(finished.len(), 9);
    assert!(
        finished.iter().all(|e| e["status"] == "succeeded"),
        "{finished:?}"
    );
    // Every project of the pool says so when it starts; the free one has none.
    for e in of(&events, "project_started") {
        let want = if e["project"] == "free" {
            Value::Null
        } else {
            "aws".into()
        };
        assert_eq!(e["pool"], want, "{e}");
    }
    let changes = of(&events, "pool_limit");
    let first = changes.first().expect("the pool's limit changed");
    assert_eq!(
        (
            first["pool"].as_str(),
            first["previous"].as_u64(),
            first["limit"].as_u64()
        ),
        (Some("aws"), Some(4), Some(2)),
        "{first}"
    );
    assert!(
        first["reason"]
            .as_str()
            .unwrap()
            .contains("was throttled (`Throttling`)"),
        "{first}"
    );
    assert!(first["project"].as_str().unwrap().starts_with('p'));
    // Each change halves or adds one, within 1..=4.
    for c in &changes {
        let (prev, now) = (
            c["previous"].as_u64().unwrap(),
            c["limit"].as_u64().unwrap(),
        );
        assert!(now == (prev / 2).max(1) || now == prev + 1, "{c}");
        assert!((1..=4).contains(&now), "{c}");
    }
    let retries = of(&events, "project_retry");
    assert!(!retries.is_empty());
    assert!(
        retries
            .iter()
            .all(|e| e["reason"] == "throttled: Throttling"),
        "{retries:?}"
    );
    // The journal has each change, and the report shows them.
    let journal = ws.read(".strata/dev/journal.jsonl");
    let recorded = journal
        .lines()
        .filter(|l| l.contains("\"record\":\"pool_limit\""))
        .count();
    assert_eq!(recorded, changes.len());
    let report = ws.strata(&["report", "-s", "dev", "--format", "json"]);
    assert_eq!(report.code, 0, "{report:?}");
    let doc: Value = serde_json::from_str(&report.stdout).unwrap();
    assert_eq!(doc["pool_changes"].as_array().unwrap().len(), changes.len());
    assert_eq!(doc["pool_changes"][0]["limit"], 2);
    assert_eq!(item(&doc["projects"], "project", "p0")["pool"], "aws");
    // Both follow their published schemas.
    crate::handoff::assert_run_follows_schemas(&ws, &r, &report);
    let html = ws.strata(&["report", "-s", "dev", "--format", "html", "--out", "r.html"]);
    assert_eq!(html.code, 0, "{html:?}");
    let page = ws.read("r.html");
    assert!(
        page.contains("Pool limits (") && page.contains("4 → 2"),
        "no pool section"
    );
}

/// A pool's limit is a cap, whatever `-j` says, and a step in no pool still runs beside.
#[test]
fn a_pool_never_runs_more_than_its_limit() {
    let (ws, r) = estate_up("{aws: 2}", 6);
    assert_eq!(ws.read("cloud/peak").trim(), "2");
    // At two the cloud never throttles: no retry, no change.
    assert!(of(&r.events(), "project_retry").is_empty(), "{r:?}");
    assert!(of(&r.events(), "pool_limit").is_empty());
    assert_eq!(ws.read("cloud/calls").lines().count(), 6);
}

/// A fixed pool (`adaptive: false`) retries a throttled project but never moves; a
/// project in no pool is not retried on a throttling error (pools are the opt-in).
#[test]
fn a_fixed_pool_keeps_its_limit_and_no_pool_means_no_throttle_retry() {
    let (_estate, r) = estate_up("{aws: {limit: 4, adaptive: false}}", 6);
    assert!(of(&r.events(), "pool_limit").is_empty());
    assert!(!of(&r.events(), "project_retry").is_empty(), "{r:?}");

    let ws = Ws::with_command("a", "echo 'api error Throttling: Rate exceeded'; exit 1");
    let r = ws.run_json("up", &[]);
    r.expect_code(1);
    assert!(of(&r.events(), "project_retry").is_empty());
}

/// Ctrl-C while a throttled project waits for its pool: the run stops promptly and
/// says the project was cancelled.
#[test]
fn a_throttled_project_waiting_for_its_pool_answers_ctrl_c() {
    let ws = Ws::with_profile(
        "pools: {aws: 2}\nthrottle: {attempts: 5, delay: 60s}\ninfrastructure:\n  - path: a\n    pool: aws\n",
    );
    let throttled = "touch \"$STRATA_ROOT/tried\"; echo 'HTTP 429 Too Many Requests'; exit 1";
    ws.command_project("a", throttled, "true");
    let mut child = ws.spawn(&["up", "-p", "t", "-s", "dev"]);
    let t0 = std::time::Instant::now();
    while !ws.exists("tried") && t0.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t1 = std::time::Instant::now();
    let status = child.wait().unwrap();
    assert!(
        t1.elapsed() < std::time::Duration::from_secs(10),
        "took {:?}",
        t1.elapsed()
    );
    assert_eq!(status.code(), Some(130));
}

/// `show` lists the pools and each project's pool, in every format.
#[test]
fn show_lists_the_pools_and_each_projects_pool() {
    let ws = Ws::with_profile(
        "pools: {aws-us-east-1: 4, harbor: {limit: 1, adaptive: false}}\npool: aws-us-east-1\ninfrastructure:\n  - path: vpc\n    tags: [network]\n  - path: registry\n    pool: harbor\n",
    );
    ws.command_project("vpc", "true", "true");
    ws.command_project("registry", "true", "true");
    let tree = ws.strata(&["show", "-p", "t"]);
    tree.expect_code(0).expect_stdout(&[
        "pools: aws-us-east-1 4 at once (adaptive) · harbor 1 at once (fixed)",
        "pool    harbor",
        "tags    network",
    ]);
    let json = ws.strata(&["show", "-p", "t", "--format", "json"]);
    let doc: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        doc["pools"][1],
        serde_json::json!({"name": "harbor", "limit": 1, "adaptive": false})
    );
    assert_eq!(doc["projects"][0]["pool"], "aws-us-east-1");
    assert_eq!(doc["projects"][0]["tags"], serde_json::json!(["network"]));
    let dot = ws.strata(&["show", "-p", "t", "--format", "dot"]);
    assert!(
        dot.stdout.contains("registry · pool harbor"),
        "{}",
        dot.stdout
    );
    if let Some(svg) = dot_svg(&ws, &dot.stdout) {
        assert!(svg.contains("pool harbor"));
    }
    let mermaid = ws.strata(&["show", "-p", "t", "--format", "mermaid"]);
    check_mermaid(&ws, &mermaid.stdout);
}

/// The header comments of an export as one line (they are wrapped).
fn notes(text: &str) -> String {
    text.lines()
        .filter_map(|l| l.strip_prefix("# ").map(str::trim))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A profile with a pool of one and a pool of two, five projects each, for export.
fn pooled_for_export() -> Ws {
    let ws = Ws::new();
    let mut yaml = format!(
        "{HEAD}pools: {{harbor: 1, aws: 2}}\npool: {{infrastructure: aws}}\ninfrastructure:\n"
    );
    for i in 0..5 {
        yaml.push_str(&format!("  - path: a{i}\n    needs: []\n"));
    }
    for i in 0..5 {
        yaml.push_str(&format!(
            "  - path: h{i}\n    needs: []\n    pool: harbor\n"
        ));
    }
    ws.profile("t", &yaml);
    for i in 0..5 {
        ws.pulumi_project(&format!("a{i}"), &format!("a{i}"), "");
        ws.pulumi_project(&format!("h{i}"), &format!("h{i}"), "");
    }
    ws
}

/// GitHub Actions: a pool of N is N chains of its jobs (`needs:` on the job N before
/// it, run whatever became of that one); actionlint passes.
#[test]
fn github_actions_export_chains_a_pools_jobs_into_as_many_lanes_as_its_limit() {
    let ws = pooled_for_export();
    let (text, doc) = ws.github_workflow();
    let needs = |job: &str| -> Vec<String> {
        doc["jobs"][job]["needs"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(needs("h0"), ["build-strata"]);
    for i in 1..5 {
        assert_eq!(
            needs(&format!("h{i}")),
            ["build-strata".to_string(), format!("h{}", i - 1)]
        );
    }
    assert_eq!(needs("a1"), ["build-strata"]);
    assert_eq!(needs("a2"), ["build-strata", "a0"]);
    assert_eq!(needs("a4"), ["build-strata", "a2"]);
    assert_eq!(
        doc["jobs"]["h3"]["if"].as_str(),
        Some("${{ !cancelled() && needs.build-strata.result == 'success' }}")
    );
    assert!(doc["jobs"]["h0"]["if"].is_null());
    assert!(
        notes(&text).contains("- Pools (harbor 1 at once, aws 2 at once)"),
        "{text}"
    );
    if let Some(actionlint) = crate::handoff::require_actionlint() {
        crate::handoff::actionlint_passes(&actionlint, &ws.path("wf.yml"), "pooled workflow");
    }
}

/// Argo: a pool's tasks run a template held by a semaphore whose limit is a ConfigMap
/// key; the Workflow passes the Argo schema. PKO says it cannot carry pools.
#[test]
fn argo_export_holds_a_pools_tasks_with_a_semaphore_and_pko_says_it_cannot() {
    let ws = pooled_for_export();
    ws.run_ok("export", &["--format", "argo", "--out", "wf.yaml"]);
    let text = ws.read("wf.yaml");
    let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
    let templates = doc["spec"]["templates"].as_sequence().unwrap();
    let harbor = templates
        .iter()
        .find(|t| t["name"] == "project-harbor")
        .unwrap();
    assert_eq!(
        harbor["synchronization"]["semaphores"][0]["configMapKeyRef"],
        serde_yaml::from_str::<serde_yaml::Value>("{name: strata-pools, key: harbor}").unwrap()
    );
    assert_eq!(
        harbor["container"], templates[1]["container"],
        "the same project template"
    );
    let task = |name: &str| {
        doc["spec"]["templates"][0]["dag"]["tasks"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["template"]
            .clone()
    };
    assert_eq!(task("h2"), "project-harbor");
    assert_eq!(task("a2"), "project-aws");
    assert!(
        notes(&text).contains(
            "`kubectl create configmap strata-pools --from-literal=harbor=1 --from-literal=aws=2`"
        ),
        "{text}"
    );
    if let Some((ok, out)) = crate::handoff::python_check(
        "validate_argo.py",
        &[&shared_tool("argo-schema.json"), &ws.path("wf.yaml")],
    ) {
        assert!(ok, "{out}");
    }
    let pko = ws.run_ok("export", &["--format", "pko"]);
    assert!(
        notes(&pko.stdout).contains("- Pools are not carried (harbor 1 at once, aws 2 at once)"),
        "{}",
        pko.stdout
    );
}
