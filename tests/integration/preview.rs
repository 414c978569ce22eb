//! `strata preview` across the whole environment (issue 11, DESIGN.md §2-3): a fresh
//! stack previews its roots and blocks the rest, previews run at once without the stack
//! lock, change counts come from Pulumi's PreviewDigest, a Markdown summary for pull
//! requests, `--refresh` and `--expect-no-changes` for drift.

use std::time::Duration;

use serde_json::Value;

use crate::run::{
    BODY, CHAIN, CHAIN_PATHS, args, argv, clear_calls, has_flag, hook_key, name, ok, records, run,
    s, starts, t, wait_for, workspace,
};
use crate::support::*;

/// The `project_finished` events of a JSON run, by project path.
fn finished(r: &Run) -> std::collections::BTreeMap<String, Value> {
    r.events()
        .into_iter()
        .filter(|e| e["event"] == "project_finished")
        .map(|e| (e["project"].as_str().unwrap_or("").to_string(), e))
        .collect()
}

/// Asserts the project `path` finished `status`, its message holding each of `parts`,
/// printing its event when not; the event, for more checks.
#[track_caller]
fn expect_finished<'a>(
    f: &'a std::collections::BTreeMap<String, Value>,
    path: &str,
    status: &str,
    parts: &[&str],
) -> &'a Value {
    let e = (f.get(path)).unwrap_or_else(|| panic!("{path} did not finish: {f:?}"));
    assert_eq!(e["status"], status, "{path}: {e:?}");
    for part in parts {
        assert!(
            s(e, "message").contains(part),
            "{path}: no {part:?} in {e:?}"
        );
    }
    e
}

fn preview_json(ws: &Ws, extra: &[&str]) -> Run {
    let mut a = vec!["--output", "json"];
    a.extend_from_slice(extra);
    run(ws, "preview", &a)
}

/// The chain alpha → bravo → charlie, plus delta, which needs nothing.
fn chain_and_root() -> Ws {
    workspace(
        &format!("{CHAIN}  - path: delta\n    needs: []\n"),
        &[CHAIN_PATHS, &["delta"]].concat(),
    )
}

#[test]
fn a_fresh_stack_previews_its_roots_and_blocks_the_rest() {
    let ws = chain_and_root();
    let r = preview_json(&ws, &[]);
    assert_eq!(r.code, 0, "a first preview is not a failure: {r:?}");
    let f = finished(&r);
    for root in ["alpha", "delta"] {
        expect_finished(&f, root, "succeeded", &[]);
        // Three resources: the stack and the program's two.
        assert_eq!(f[root]["changes"]["create"], 3, "{root}: {:?}", f[root]);
    }
    expect_finished(&f, "bravo", "blocked", &["alpha"]);
    assert_eq!(f["bravo"]["upstream"], "alpha");
    expect_finished(&f, "charlie", "blocked", &[]);
    assert_eq!(f["charlie"]["upstream"], "bravo");
    let end = r
        .events()
        .into_iter()
        .find(|e| e["event"] == "run_finished")
        .unwrap();
    assert_eq!(end["status"], "succeeded", "{end}");
    assert_eq!(end["counts"]["blocked"], 2, "{end}");
    assert_eq!(end["counts"]["succeeded"], 2, "{end}");

    let calls = ws.calls();
    for c in starts(&calls) {
        assert!(
            !["up", "destroy", "refresh"].contains(&s(c, "command")),
            "a preview ran `pulumi {}`: {c}",
            s(c, "command")
        );
    }
    for blocked in ["bravo", "charlie"] {
        assert!(
            !starts(&calls)
                .iter()
                .any(|c| s(c, "project") == name(blocked) && s(c, "command") == "preview"),
            "{blocked} is blocked and must not be previewed"
        );
    }
    // The journal says so too.
    let journal = ws.read(".strata/dev/journal.jsonl");
    let blocked = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["status"] == "blocked")
        .count();
    assert_eq!(blocked, 2, "{journal}");

    // The human summary.
    let human = run(&ws, "preview", &[]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(human.stdout.contains("blocked"), "{}", human.stdout);
    assert!(
        human.stdout.contains("+3 ~0 -0 ±0"),
        "counts per project: {}",
        human.stdout
    );
    assert!(human.stdout.contains("2 blocked"), "{}", human.stdout);
    // A bundle of that preview says what it holds no plan of, and why its apply would
    // be refused.
    let saved = preview_json(&ws, &["--save-plan", "bundle"]);
    assert_eq!(saved.code, 0, "{saved:?}");
    saved.expect_stderr(&[
        "the bundle holds no plan for bravo, charlie (blocked",
        "`strata up --plan` will refuse it",
    ]);
}

#[test]
fn previews_of_a_deployed_stack_run_at_once_and_take_no_lock() {
    let ws = chain_and_root();
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    let mut ws = ws;
    ws.set_env("FAKE_PULUMI_DELAY_MS", "1500");
    let r = preview_json(&ws, &["-j", "4"]);
    assert_eq!(r.code, 0, "{r:?}");
    let calls = ws.calls();
    let previews: Vec<&Value> = starts(&calls)
        .into_iter()
        .filter(|c| s(c, "command") == "preview")
        .collect();
    assert_eq!(previews.len(), 4, "{calls:#?}");
    let ends: Vec<u64> = records(&calls, "end")
        .into_iter()
        .filter(|c| s(c, "command") == "preview")
        .map(t)
        .collect();
    let last_start = previews.iter().map(|c| t(c)).max().unwrap();
    let first_end = ends.iter().copied().min().unwrap();
    assert!(
        last_start < first_end,
        "every preview starts before the first one ends (chain ignored): last start {last_start}, first end {first_end}"
    );
    let f = finished(&r);
    for p in ["alpha", "bravo", "charlie", "delta"] {
        expect_finished(&f, p, "succeeded", &[]);
        assert_eq!(f[p]["changes"]["same"], 3, "{p}: {:?}", f[p]);
    }

    // A preview runs beside an `up` that holds the stack lock.
    ws.set_env("FAKE_PULUMI_DELAY_MS", "0");
    ws.set_env(
        &format!("FAKE_PULUMI_DELAY_MS_{}", hook_key("alpha")),
        "4000",
    );
    let mut up = ws.spawn(&args("up", &[]));
    wait_for(Duration::from_secs(20), "the up to hold the lock", || {
        ws.exists(".strata/dev/lock")
    });
    let p = run(&ws, "preview", &[]);
    let _ = up.wait();
    assert_eq!(
        p.code, 0,
        "a preview does not wait for the stack lock: {p:?}"
    );
}

#[test]
fn counts_follow_the_digest_and_expect_no_changes_exits_4() {
    let ws = chain_and_root();
    ok(&ws, "up", &[]);
    let r = preview_json(&ws, &["--expect-no-changes"]);
    assert_eq!(r.code, 0, "nothing changed: {r:?}");
    for (_, e) in finished(&r) {
        assert_eq!(e["changes"].get("create"), None, "{e}");
    }
    // A program change: one resource more in bravo, one changed in delta.
    ws.pulumi_project(
        "bravo",
        &name("bravo"),
        &BODY.replace(
            "outputs:",
            "  third:\n    type: fake:index:Thing\n    properties:\n      z: 3\noutputs:",
        ),
    );
    ws.pulumi_project("delta", &name("delta"), &BODY.replace("x: 1", "x: 2"));
    let r = preview_json(&ws, &["--expect-no-changes"]);
    assert_eq!(r.code, 4, "changes pending: {r:?}");
    let f = finished(&r);
    assert_eq!(f["bravo"]["changes"]["create"], 1, "{:?}", f["bravo"]);
    assert_eq!(f["bravo"]["changes"]["same"], 3, "{:?}", f["bravo"]);
    assert!(
        f["delta"]["changes"]["update"].as_u64().unwrap_or(0) >= 1,
        "{:?}",
        f["delta"]
    );
    assert_eq!(f["alpha"]["changes"].get("update"), None);
    assert!(
        r.stderr.contains("bravo") && r.stderr.contains("delta"),
        "{}",
        r.stderr
    );
    // Without the flag, pending changes are not an error.
    assert_eq!(preview_json(&ws, &[]).code, 0);
}

#[test]
fn refresh_reaches_every_pulumi_preview() {
    let ws = chain_and_root();
    ok(&ws, "up", &[]);
    clear_calls(&ws);
    ok(&ws, "preview", &["--refresh"]);
    let calls = ws.calls();
    let previews: Vec<Vec<String>> = starts(&calls)
        .into_iter()
        .filter(|c| s(c, "command") == "preview")
        .map(argv)
        .collect();
    assert_eq!(previews.len(), 4);
    for a in &previews {
        assert!(has_flag(a, "--refresh"), "{a:?}");
        assert!(has_flag(a, "--json"), "{a:?}");
    }
    clear_calls(&ws);
    ok(&ws, "preview", &[]);
    for c in starts(&ws.calls()) {
        assert!(!has_flag(&argv(c), "--refresh"), "{c}");
    }
}

#[test]
fn summary_file_and_github_step_summary() {
    let mut ws = chain_and_root();
    ws.write("summary.md", "# Earlier step\n\nkept\n");
    ws.set_env(
        "GITHUB_STEP_SUMMARY",
        ws.path("summary.md").to_str().unwrap(),
    );
    let r = run(&ws, "preview", &["--summary-file", "out/preview.md"]);
    assert_eq!(r.code, 0, "{r:?}");
    let md = ws.read("out/preview.md");
    let table = [
        "| project | status | + create | ~ update | - delete | ± replace | note |",
        "| `alpha` | ✅ previewed | 3 | 0 | 0 | 0 |",
        "| `bravo` | ⏸ blocked |",
        "| **total** | | **6** | **0** | **0** | **0** |",
    ];
    assert_has(&md, &table);
    let details = [
        "<details><summary><code>alpha</code>: +3 ~0 -0 ±0</summary>",
        "- `create` fake:index:Thing first",
    ];
    assert_has(&md, &details);
    assert!(!md.contains("http"), "no links: {md}");
    let step = ws.read("summary.md");
    assert!(step.starts_with("# Earlier step\n\nkept\n"), "{step}");
    assert!(step.contains(md.trim_end()), "{step}");
}

#[test]
fn streamed_preview_events_give_the_same_counts() {
    let mut ws = chain_and_root();
    ws.set_env("PULUMI_ENABLE_STREAMING_JSON_PREVIEW", "true");
    let r = preview_json(&ws, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let f = finished(&r);
    assert_eq!(f["alpha"]["changes"]["create"], 3, "{:?}", f["alpha"]);
}

#[test]
fn command_projects_preview_with_their_command_or_are_skipped() {
    let ws = Ws::with_profile(
        "infrastructure:\n  - path: build\n  - path: push\n    needs: []\n  - path: alpha\n    needs: []\n",
    );
    ws.command_project("build", "echo built", "true");
    ws.previewing_project("push", "echo pushed", "echo would push image app:1.2");
    ws.pulumi_project("alpha", &name("alpha"), BODY);
    let r = preview_json(&ws, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let f = finished(&r);
    expect_finished(&f, "build", "skipped", &["no `preview:` command"]);
    expect_finished(&f, "push", "succeeded", &[]);
    assert_eq!(s(&f["push"], "message"), "would push image app:1.2");
    assert!(
        f["push"].get("changes").is_none(),
        "no counts: {:?}",
        f["push"]
    );
    assert_eq!(f["alpha"]["changes"]["create"], 3);
}

#[test]
fn a_failed_preview_fails_the_run_but_the_others_still_preview() {
    let mut ws = chain_and_root();
    ws.set_env(
        &format!("FAKE_PULUMI_FAIL_{}", hook_key("alpha")),
        "preview",
    );
    let r = preview_json(&ws, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    let f = finished(&r);
    expect_finished(&f, "alpha", "failed", &[]);
    expect_finished(&f, "delta", "succeeded", &[]);
    expect_finished(&f, "bravo", "blocked", &[]);
}

/// The report of a preview shows what it found: blocked projects and change counts.
#[test]
fn the_report_of_a_preview_shows_blocked_projects_and_change_counts() {
    let ws = chain_and_root();
    let r = run(&ws, "preview", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("report: "), "{}", r.stdout);
    let doc = ws.strata(&["report", "-p", "t", "-s", "dev", "--format", "json"]);
    assert_eq!(doc.code, 0, "{doc:?}");
    let doc: Value = serde_json::from_str(&doc.stdout).unwrap();
    let text = doc.to_string();
    assert!(text.contains("\"blocked\""), "{text}");
    assert!(text.contains("\"create\":3"), "{text}");
    let html = ws.read(".strata/dev/report.html");
    assert!(html.contains("blocked"), "the page names blocked projects");
}

/// A first preview has answers to save (the stack config's infra_type); while another
/// strata holds the stack lock it runs anyway, without saving them, and says so.
#[test]
fn a_preview_beside_a_held_lock_runs_without_saving_its_answers() {
    let ws = chain_and_root();
    let host = crate::pipeline::hostname();
    ws.write(
        ".strata/dev/lock",
        &serde_json::json!({
            "pid": std::process::id(),
            "host": host.trim(),
            "command": "strata up",
            "since": "2026-11-25T00:00:00.000Z",
        })
        .to_string(),
    );
    let r = run(&ws, "preview", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.all().contains("not saved"), "{r:?}");
    // (Pulumi itself writes its encryption salt into the config file it is given.)
    assert!(
        !ws.read_opt("config/pulumi/Pulumi.dev.yaml")
            .contains("infra_type"),
        "strata saved nothing"
    );
    assert!(r.stdout.contains("+3 ~0 -0 ±0"), "{}", r.stdout);
}

/// `--expect-no-changes` on an environment that was never deployed: a command project
/// that would be created (it has no counts, but no `up` of it ever succeeded) and every
/// project blocked behind it are changes, so the run exits 4 and names them (issue 25).
/// Once deployed, the same preview passes.
#[test]
fn expect_no_changes_counts_what_would_be_created_and_what_is_blocked_behind_it() {
    let ws = Ws::new();
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: net\n  - path: cluster\n  - path: tools\n    needs: []\n"
        ),
    );
    for p in ["net", "cluster"] {
        ws.previewing_project(p, crate::policy::OK, &format!("echo would create {p}"));
    }
    // No `preview:` command: never deployed, it would be created all the same.
    ws.command_project("tools", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    let r = preview_json(&ws, &["--expect-no-changes"]);
    let f = finished(&r);
    assert_eq!(f["cluster"]["status"], "blocked", "{r:?}");
    assert_eq!(r.code, 4, "a never-deployed environment has changes: {r:?}");
    for p in ["net", "cluster", "tools"] {
        assert!(r.stderr.contains(p), "{p} is named: {}", r.stderr);
    }
    ok(&ws, "up", &[]);
    let r = preview_json(&ws, &["--expect-no-changes"]);
    assert_eq!(r.code, 0, "deployed, nothing pending: {r:?}");
}

/// Projected previews (issue 24): `ref` reads `src` through a StackReference, so it stays
/// blocked; `app` takes `src`'s literal output from `src`'s own preview and `ref`'s from
/// its `mock_outputs:`, previews for real on them, and says so; `odd` wants an output of
/// `ref` that no preview knows and no mock gives, so it stays blocked, saying why.
#[test]
fn a_fresh_stack_projects_known_outputs_and_mocks_into_downstream_previews() {
    let mut ws = Ws::with_profile(
        "infrastructure:\n  - path: src\n  - path: ref\n    needs: [src]\n    mock_outputs: { port: 8080 }\n  - path: app\n    needs: [src, ref]\n    inputs:\n      app:host: src:host\n      app:port: ref:port\n  - path: odd\n    needs: [ref]\n    inputs:\n      odd:x: ref:other\n",
    );
    ws.pulumi_project(
        "src",
        "src",
        "resources:\n  thing:\n    type: fake:index:Thing\n    properties:\n      x: 1\noutputs:\n  host: h-${pulumi.stack}\n",
    );
    let src_ref = stack_reference("up", "organization/src/${pulumi.stack}");
    let reads_src =
        format!("resources:\n{src_ref}outputs:\n  port: 1\n  other: ${{up.outputs[\"host\"]}}\n");
    ws.pulumi_project("ref", "ref", &reads_src);
    let app = "config:\n  host:\n    type: string\n  port:\n    type: integer\nresources:\n  a:\n    type: fake:index:Thing\n    properties:\n      at: ${host}:${port}\n";
    ws.pulumi_project("app", "app", app);
    ws.pulumi_project("odd", "odd", "config:\n  x:\n    type: string\n");
    ws.env_file("PULUMI_STACK=dev\n");
    // The fake checks what reached app's config before it previews.
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_APP",
        r#"{"app:host": "h-dev", "app:port": "8080"}"#,
    );
    // src takes long: app must wait for its preview, not read a stack that is not there.
    ws.set_env("FAKE_PULUMI_DELAY_MS_SRC", "300");
    let r = preview_json(&ws, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    let f = finished(&r);
    expect_finished(&f, "src", "succeeded", &[]);
    expect_finished(&f, "ref", "blocked", &["through a StackReference"]);
    expect_finished(&f, "app", "succeeded", &[]);
    assert_eq!(
        s(&f["app"], "message"),
        "2 to create · created the missing stack dev (empty) in the backend · projected: app:host from src's preview; mocks: app:port (ref)"
    );
    assert_eq!(f["app"]["changes"]["create"], 2, "{:?}", f["app"]);
    let odd = ["its preview cannot tell `other`", "mock_outputs:"];
    expect_finished(&f, "odd", "blocked", &odd);

    // The human rows.
    let human = run(&ws, "preview", &[]);
    assert_eq!(human.code, 0, "{human:?}");
    assert!(
        human
            .stdout
            .contains("projected: app:host from src's preview"),
        "{}",
        human.stdout
    );

    // A bundle keeps a projected step's plan, saying it was projected; this one cannot
    // be applied for the steps that stayed blocked.
    let manifest = saved_with_app_projected(&ws);
    assert_eq!(
        manifest["steps"]["app"]["plan"], "plans/app.json",
        "{manifest}"
    );
    let up = run(&ws, "up", &["--plan", "bundle"]);
    assert_ne!(up.code, 0, "{up:?}");
    up.expect_stderr(&["ref: its preview did not succeed (blocked"]);
}

/// `preview --save-plan bundle`, which succeeds with `app` previewed on projected
/// inputs: the bundle's manifest.
fn saved_with_app_projected(ws: &Ws) -> Value {
    let b = run(ws, "preview", &["--save-plan", "bundle"]);
    assert_eq!(b.code, 0, "{b:?}");
    let manifest: Value = serde_json::from_str(&ws.read("bundle/manifest.json")).unwrap();
    assert_eq!(
        manifest["steps"]["app"]["status"], "projected",
        "{manifest}"
    );
    manifest
}

/// A fresh environment reviewed once (issue 45): `up --plan` applies it wave by wave.
/// `app`, previewed on `src`'s projected output, is previewed again once `src` is up:
/// when `src`'s preview already knew that output, the same plan goes out as reviewed.
/// When a mock stood in (`src` is a command project: its preview tells no outputs) and
/// the real output differs, `app` waits (`awaiting`, exit 6) with its real plan held for
/// `strata approve`, and the next `up` applies the approved plan.
#[test]
fn a_fresh_bundle_goes_out_wave_by_wave_and_a_dependent_whose_real_plan_differs_waits() {
    let fresh = |src: &dyn Fn(&Ws)| {
        let ws = Ws::with_profile(
            "infrastructure:\n  - path: src\n    mock_outputs: { port: \"9\" }\n  - path: app\n    needs: [src]\n    inputs:\n      app:port: src:port\n",
        );
        src(&ws);
        let app = "config:\n  port:\n    type: string\nresources:\n  a:\n    type: fake:index:Thing\n    properties:\n      at: ${port}\n";
        ws.pulumi_project("app", "app", app);
        ws.env_file("PULUMI_STACK=dev\n");
        saved_with_app_projected(&ws);
        ws
    };
    let app_calls = |ws: &Ws| -> Vec<String> {
        ws.calls()
            .iter()
            .filter(|c| c["project"] == "app")
            .map(|c| c["argv"].to_string())
            .collect()
    };
    // src's preview knew the output: the reviewed plan goes out.
    let ws = fresh(&|ws| {
        ws.pulumi_project(
            "src",
            "src",
            "resources:\n  thing:\n    type: fake:index:Thing\n    properties:\n      x: 1\noutputs:\n  port: \"1\"\n",
        );
    });
    let up = run(&ws, "up", &["--plan", "bundle", "--output", "json"]);
    assert_eq!(up.code, 0, "{up:?}");
    let f = finished(&up);
    expect_finished(&f, "src", "succeeded", &[]);
    expect_finished(&f, "app", "succeeded", &[]);
    let calls = app_calls(&ws);
    let last = calls.last().unwrap();
    assert!(
        last.contains("\"up\"") && last.contains("bundle/plans/app.json"),
        "the reviewed plan: {calls:#?}"
    );

    // A mock stood in for an output src's preview could not tell, and the real one is
    // another: app's real plan is another, and waits for an approval.
    let ws = fresh(&|ws| {
        let preview = "preview: echo would make port 1\n";
        ws.command_project(
            "src",
            "printf '{\"port\":\"1\"}' > \"$STRATA_OUTPUTS_FILE\"",
            "true",
        );
        let file = ws.path("projects/src/Strata.yaml");
        let text = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, format!("{text}{preview}")).unwrap();
    });
    let up = run(&ws, "up", &["--plan", "bundle", "--output", "json"]);
    assert_eq!(up.code, 6, "{up:?}");
    let f = finished(&up);
    expect_finished(&f, "src", "succeeded", &[]);
    expect_finished(
        &f,
        "app",
        "awaiting",
        &[
            "not the one reviewed on projected inputs",
            "strata approve app",
        ],
    );
    let approved = run(&ws, "approve", &["app", "--yes"]);
    assert_eq!(approved.code, 0, "{approved:?}");
    let again = run(&ws, "up", &["--output", "json"]);
    assert_eq!(again.code, 0, "{again:?}");
    expect_finished(&finished(&again), "app", "succeeded", &[]);
    let calls = app_calls(&ws);
    let last = calls.last().unwrap();
    assert!(
        last.contains("approvals/app/plan.json"),
        "the approved plan: {calls:#?}"
    );
}
