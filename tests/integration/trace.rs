//! Traces of a run (issue 27): the shipped `local` profile run with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a real OTLP/HTTP receiver (`otlp.rs`, which
//! decodes the protobuf payloads), and what each child sees in `TRACEPARENT`.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::otlp::{Receiver, Span};
use crate::run::{Background, sigint};
use crate::support::*;

const PROJECTS: [&str; 7] = [
    "local/network",
    "local/registry",
    "local/cluster",
    "local/ingress",
    "local/logstore",
    "local/app",
    "local/broken",
];

/// Where a project's children write the `TRACEPARENT` they saw.
fn seen_file(project: &str) -> String {
    format!("tp-{}", project.replace('/', "-"))
}

/// The `local` profile, whose projects and the cluster's hook write the `TRACEPARENT`
/// they see; `local/logstore` fails its first try with a throttling error its `retry:`
/// retries; with `broken`, a seventh project (`local/broken`, last, that nothing needs)
/// always fails.
fn traced_workspace(broken: bool) -> Ws {
    let ws = Ws::without_pulumi();
    let record =
        |to: &str| format!("printf '%s\\n' \"${{TRACEPARENT:-none}}\" >> \"$STRATA_ROOT/{to}\"");
    let hooks = local_profile(
        &ws,
        |up| {
            format!(
                "printf '%s\\n' \"${{TRACEPARENT:-none}}\" >> \"$STRATA_ROOT/tp-$(printf %s \"$STRATA_PROJECT\" | tr / -)\"\n\
                 if [ \"$STRATA_PROJECT\" = local/logstore ] && [ ! -e \"$STRATA_ROOT/logstore-tried\" ]; then\n\
                 : > \"$STRATA_ROOT/logstore-tried\"; echo 'error: Rate exceeded'; exit 1\n\
                 fi\n{up}"
            )
        },
        |path, run| {
            if path == "local/cluster" {
                format!("{}; {run}", record("tp-hook-local-cluster"))
            } else {
                run.to_string()
            }
        },
    );
    assert!(hooks >= 1, "the cluster's hook is wrapped");
    let profile = ws.path("providers/local.yaml");
    let mut doc: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(&profile).unwrap()).unwrap();
    for entry in doc["kubernetes"].as_sequence_mut().unwrap() {
        if entry["path"] == "local/logstore" {
            entry["retry"] =
                serde_yaml::from_str("{ attempts: 3, delay: 10ms, on: [\"Rate exceeded\"] }")
                    .unwrap();
        }
    }
    if broken {
        doc["kubernetes"]
            .as_sequence_mut()
            .unwrap()
            .push(serde_yaml::from_str("{ path: local/broken, needs: [] }").unwrap());
        ws.command_project(
            "local/broken",
            &format!(
                "{}; echo 'error: local/broken always fails' >&2; exit 3",
                record(&seen_file("local/broken"))
            ),
            "true",
        );
    }
    std::fs::write(&profile, serde_yaml::to_string(&doc).unwrap()).unwrap();
    ws
}

fn up(ws: &Ws) -> Run {
    ws.strata(&[
        "up",
        "--provider",
        "local",
        "--stack",
        "dev",
        "--keep-going",
        "--output",
        "json",
    ])
}

/// The lines a project's children wrote.
fn seen(ws: &Ws, file: &str) -> Vec<String> {
    ws.read_opt(file).lines().map(String::from).collect()
}

fn by_name(spans: &[Span]) -> BTreeMap<String, Span> {
    spans.iter().map(|s| (s.name.clone(), s.clone())).collect()
}

#[test]
fn a_traced_up_is_one_root_and_one_span_per_project_that_its_children_see() {
    let otlp = Receiver::start();
    let mut ws = traced_workspace(true);
    ws.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp.endpoint());
    let r = up(&ws);
    assert_eq!(r.code, 1, "local/broken fails the run: {r:?}");
    assert!(otlp.problems().is_empty(), "{:?}", otlp.problems());
    let run_id = r.events()[0]["run_id"].as_str().unwrap().to_string();

    let spans = otlp.spans();
    assert_eq!(spans.len(), 1 + PROJECTS.len(), "{spans:#?}");
    let roots: Vec<&Span> = spans.iter().filter(|s| s.parent.is_empty()).collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    let root = roots[0];
    assert_eq!(root.name, "strata up");
    assert_eq!(root.service, "strata");
    for (k, v) in [
        ("strata.operation", "up"),
        ("strata.stack", "dev"),
        ("strata.provider", "local"),
        ("strata.run_id", run_id.as_str()),
        ("strata.status", "failed"),
        ("strata.failed", "1"),
        ("strata.succeeded", "6"),
    ] {
        assert_eq!(
            root.attrs.get(k).map(String::as_str),
            Some(v),
            "{k}: {root:#?}"
        );
    }
    assert_eq!(root.status, 2, "a failed run's span is an error");

    let spans = by_name(&spans);
    for p in PROJECTS {
        let s = spans
            .get(p)
            .unwrap_or_else(|| panic!("no span for {p}: {spans:#?}"));
        assert_eq!(s.trace_id, root.trace_id, "{p}");
        assert_eq!(s.parent, root.span_id, "{p}: child of the run's span");
        assert_eq!(s.attrs["strata.project"], p);
        assert_eq!(s.attrs["strata.operation"], "up");
        assert!(s.attrs.contains_key("strata.attempt"), "{p}: {s:#?}");
        // The local profile declares no pool.
        assert!(!s.attrs.contains_key("strata.pool"), "{p}: {s:#?}");
        // Every child the step started saw its span's context, and only that.
        let seen = seen(&ws, &seen_file(p));
        assert!(!seen.is_empty(), "{p} wrote no TRACEPARENT");
        for tp in &seen {
            assert_eq!(tp, &s.traceparent(), "{p}");
        }
        if p == "local/broken" {
            assert_eq!(s.attrs["strata.status"], "failed");
            assert_eq!(s.attrs["strata.exit_code"], "3");
            assert_eq!(s.status, 2, "{s:#?}");
            assert!(s.status_message.contains("exit"), "{s:#?}");
        } else {
            assert_eq!(s.attrs["strata.status"], "succeeded", "{p}");
            assert_eq!(s.status, 1, "{p}: {s:#?}");
        }
    }
    // The retried project: two tries, the retry an event on its span, both tries with
    // the same TRACEPARENT.
    let logstore = &spans["local/logstore"];
    assert_eq!(logstore.attrs["strata.attempt"], "2");
    assert_eq!(seen(&ws, &seen_file("local/logstore")).len(), 2);
    let retries: Vec<&BTreeMap<String, String>> = logstore
        .events
        .iter()
        .filter(|(n, _)| n == "project_retry")
        .map(|(_, a)| a)
        .collect();
    assert_eq!(retries.len(), 1, "{logstore:#?}");
    assert_eq!(retries[0]["strata.attempt"], "2");
    assert_eq!(retries[0]["strata.reason"], "Rate exceeded");
    assert_eq!(spans["local/network"].attrs["strata.attempt"], "1");
    for (p, s) in &spans {
        if p != "local/logstore" {
            assert!(
                !s.events.iter().any(|(n, _)| n == "project_retry"),
                "{p}: {s:#?}"
            );
        }
    }
    // The cluster's on_success hook ran under the cluster's span.
    assert_eq!(
        seen(&ws, "tp-hook-local-cluster"),
        [spans["local/cluster"].traceparent()]
    );
    // What projects print and output never becomes an attribute.
    let all = format!("{spans:?}");
    assert!(!all.contains("10.42.0."), "an output in the trace: {all}");
}

#[test]
fn an_untraced_up_sends_nothing_and_sets_no_traceparent() {
    let otlp = Receiver::start();
    let ws = traced_workspace(false);
    let r = up(&ws);
    assert_eq!(r.code, 0, "{r:?}");
    for p in &PROJECTS[..6] {
        let seen = seen(&ws, &seen_file(p));
        assert!(!seen.is_empty(), "{p} ran");
        assert!(seen.iter().all(|l| l == "none"), "{p}: {seen:?}");
    }
    assert_eq!(seen(&ws, "tp-hook-local-cluster"), ["none"]);
    assert!(!r.stderr.contains("trace"), "{r:?}");
    assert_eq!(otlp.requests(), 0);
}

#[test]
fn grpc_asked_is_one_warning_and_the_run_goes_on_untraced() {
    let otlp = Receiver::start();
    let mut ws = traced_workspace(false);
    ws.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp.endpoint())
        .set_env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc");
    let r = up(&ws);
    assert_eq!(r.code, 0, "{r:?}");
    let warnings: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"))
        .collect();
    assert_eq!(warnings.len(), 1, "{r:?}");
    assert!(warnings[0].starts_with("warning: "), "{r:?}");
    assert_eq!(seen(&ws, &seen_file("local/network")), ["none"]);
    assert_eq!(otlp.requests(), 0);
}

#[test]
fn a_dead_collector_is_one_warning_and_changes_neither_the_exit_code_nor_the_pace() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let ws = traced_workspace(false);
    let t0 = Instant::now();
    let r = up(&ws);
    let untraced = t0.elapsed();
    assert_eq!(r.code, 0, "{r:?}");

    let mut ws = traced_workspace(false);
    ws.set_env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        &format!("http://127.0.0.1:{closed}"),
    );
    let t0 = Instant::now();
    let r = up(&ws);
    let traced = t0.elapsed();
    assert_eq!(r.code, 0, "{r:?}");
    let warnings: Vec<&str> = r.stderr.lines().filter(|l| l.contains("trace")).collect();
    assert_eq!(warnings.len(), 1, "{r:?}");
    assert!(
        warnings[0].starts_with("warning: this run's trace could not be sent")
            && warnings[0].contains(&closed.to_string()),
        "{r:?}"
    );
    // The end of the run waits for the collector 5 s at the most.
    assert!(
        traced < untraced + Duration::from_secs(6),
        "traced {traced:?}, untraced {untraced:?}"
    );
    // The children still got their context.
    assert!(seen(&ws, &seen_file("local/network"))[0].starts_with("00-"));
}

#[test]
fn ctrl_c_while_the_trace_is_sent_is_answered_at_once() {
    // A collector that takes connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let mut ws = traced_workspace(false);
    ws.set_env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        &format!("http://{}", silent.local_addr().unwrap()),
    )
    .set_env("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")
    .set_env("OTEL_BSP_SCHEDULE_DELAY", "600000");
    let bg = Background::start(&ws, &["up", "--provider", "local", "--stack", "dev"]);
    // The spans go out at the end of the run (no batch before: the delay is long).
    let (conn, _) = silent.accept().unwrap();
    let t0 = Instant::now();
    sigint(bg.pid);
    let r = bg.wait(Duration::from_secs(10));
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert_eq!(r.code, 130, "{r:?}");
    assert!(r.stderr.contains("while sending the run's trace"), "{r:?}");
    drop(conn);
}

/// A throttled pool (the pools' own estate: eight projects in `aws`, whose fake cloud
/// takes two at once): each pooled span names its pool, and every change of the pool's
/// limit the run's events show is an event of the run's span. Sent where the traces
/// endpoint says, with the headers and service name the variables give.
#[test]
fn a_pooled_step_names_its_pool_and_each_limit_change_is_on_the_run_span() {
    let otlp = Receiver::start();
    let mut ws = Ws::new();
    crate::pools::estate(&ws, "{aws: 4}", 8, "aws");
    // The standard variables: a base endpoint with a path, headers, the service name.
    ws.set_env(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        &format!("{}/v1/traces", otlp.endpoint()),
    )
    .set_env(
        "OTEL_EXPORTER_OTLP_HEADERS",
        "x-tenant=platform,authorization=Bearer%20t0ken",
    )
    .set_env("OTEL_SERVICE_NAME", "platform-ci");
    let r = ws.strata(&["up", "-p", "t", "-s", "dev", "-j", "8", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let headers = otlp.headers();
    assert!(!headers.is_empty());
    for h in &headers {
        assert_eq!(h.get("x-tenant").map(String::as_str), Some("platform"));
        assert_eq!(
            h.get("authorization").map(String::as_str),
            Some("Bearer t0ken")
        );
    }
    let all = otlp.spans();
    assert!(all.iter().all(|s| s.service == "platform-ci"), "{all:#?}");
    assert!(
        !format!("{all:?}").contains("t0ken"),
        "a header in the trace"
    );
    let spans = by_name(&all);
    assert_eq!(spans.len(), 1 + 9, "one span per project: {spans:#?}");
    for i in 0..8 {
        assert_eq!(spans[&format!("p{i}")].attrs["strata.pool"], "aws");
    }
    assert!(!spans["free"].attrs.contains_key("strata.pool"));
    let mut changes: Vec<(String, String, String)> = r
        .events()
        .iter()
        .filter(|e| e["event"] == "pool_limit")
        .map(|e| {
            (
                e["pool"].as_str().unwrap().to_string(),
                e["previous"].to_string(),
                e["limit"].to_string(),
            )
        })
        .collect();
    assert!(!changes.is_empty(), "the pool was throttled: {r:?}");
    let mut on_root: Vec<(String, String, String)> = spans["strata up"]
        .events
        .iter()
        .filter(|(n, _)| n == "pool_limit")
        .map(|(_, a)| {
            (
                a["strata.pool"].clone(),
                a["strata.previous"].clone(),
                a["strata.limit"].clone(),
            )
        })
        .collect();
    // Two steps' changes may reach the two observers in either order.
    changes.sort();
    on_root.sort();
    assert_eq!(on_root, changes);
}

/// Pulumi projects through the fake CLI (v3.230, which has `--otel-traces`): every call of
/// a traced step carries the flag with the run's traces URL and its project's
/// `TRACEPARENT`; headers stay off the command line, with one note; untraced, neither.
#[test]
fn every_pulumi_call_of_a_traced_step_gets_otel_traces_and_its_traceparent() {
    use crate::run::{DIAMOND, DIAMOND_PATHS, name, workspace};
    let otlp = Receiver::start();
    let mut ws = workspace(DIAMOND, DIAMOND_PATHS);
    ws.set_env("FAKE_PULUMI_LOG_ENV", "TRACEPARENT");
    let r = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 0, "{r:?}");
    for c in ws.calls().iter().filter(|c| c["event"] == "start") {
        let argv = c["argv"].to_string();
        assert!(!argv.contains("--otel-traces"), "{c}");
        assert!(c["env"].get("TRACEPARENT").is_none(), "{c}");
    }
    let _ = std::fs::remove_file(ws.path("calls.jsonl"));

    ws.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp.endpoint())
        .set_env("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20t0ken");
    let r = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 0, "{r:?}");
    let all = r.all();
    let notes: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("OTEL_EXPORTER_OTLP_HEADERS"))
        .collect();
    assert_eq!(notes.len(), 1, "{r:?}");
    let spans = by_name(&otlp.spans());
    let flag = format!("--otel-traces={}/v1/traces", otlp.endpoint());
    let mut calls = 0;
    for c in ws.calls().iter().filter(|c| c["event"] == "start") {
        let argv: Vec<&str> = c["argv"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a.as_str())
            .collect();
        if !argv.contains(&"--stack") {
            continue; // `--help`, asked once
        }
        calls += 1;
        assert!(argv.contains(&flag.as_str()), "{c}");
        assert!(
            !c.to_string().contains("t0ken"),
            "a header on a command line: {c}"
        );
        let project = DIAMOND_PATHS
            .iter()
            .find(|p| c["project"] == name(p))
            .unwrap_or_else(|| panic!("{c}"));
        assert_eq!(
            c["env"]["TRACEPARENT"].as_str(),
            Some(spans[*project].traceparent().as_str()),
            "{c}"
        );
    }
    assert!(calls >= DIAMOND_PATHS.len(), "{calls}");
}
