//! Unit tests of the run records on an in-memory object store: written once, read back
//! newest first and bounded, a bad one left out with a warning, merged with a journal.

use std::sync::Arc;

use object_store::memory::InMemory;

use super::*;
use crate::state::journal;

fn backend(store: &Arc<InMemory>) -> Backend {
    Backend::new("s3://test/team".into(), store.clone(), "team/".into()).unwrap()
}

fn result(project: &str, op: &str, status: &str, ended_at: &str) -> ProjectResult {
    ProjectResult {
        project: project.into(),
        operation: op.into(),
        status: status.into(),
        ended_at: ended_at.into(),
        fingerprint: Some(format!("fp-{project}-{ended_at}")),
        outputs_hash: Some(format!("out-{project}-{ended_at}")),
        ..Default::default()
    }
}

fn run(id: &str, projects: Vec<ProjectResult>) -> RunRecord {
    RunRecord {
        run_id: id.into(),
        stack: "prod".into(),
        user: "alice".into(),
        host: "host-a".into(),
        command: "strata up".into(),
        projects,
        ..Default::default()
    }
}

#[test]
fn runs_are_read_back_newest_first_and_bounded() {
    let store = Arc::new(InMemory::new());
    let b = backend(&store);
    for (i, ms) in [1_000u64, 3_000, 2_000].into_iter().enumerate() {
        write(&b, &run(&format!("r{i}"), vec![]), ms).unwrap();
    }
    // Another stack's runs are not this one's.
    let mut other = run("x", vec![]);
    other.stack = "dev".into();
    write(&b, &other, 5_000).unwrap();
    let mut warned = Vec::new();
    let got = recent(&b, "prod", 10, &mut |w| warned.push(w)).unwrap();
    let ids: Vec<&str> = got.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["r1", "r2", "r0"]);
    assert!(warned.is_empty(), "{warned:?}");
    let two = recent(&b, "prod", 2, &mut |w| warned.push(w)).unwrap();
    assert_eq!(two.len(), 2);
    assert_eq!(two[0].run_id, "r1");
    assert!(
        key(&b, "prod", 3_000, "r1").starts_with("team/.strata/runs/prod/9999999996999-"),
        "{}",
        key(&b, "prod", 3_000, "r1")
    );
    // Written once: a second write of the same run changes nothing.
    let mut again = run("r1", vec![result("a", "up", "failed", "t")]);
    again.stack = "prod".into();
    write(&b, &again, 3_000).unwrap();
    let got = recent(&b, "prod", 10, &mut |_| {}).unwrap();
    assert!(got[0].projects.is_empty());
}

#[test]
fn a_record_that_does_not_parse_is_left_out_with_one_warning() {
    let store = Arc::new(InMemory::new());
    let b = backend(&store);
    write(&b, &run("good", vec![]), 1_000).unwrap();
    b.create(
        "team/.strata/runs/prod/0000000000001-bad.json",
        b"{not json",
    )
    .unwrap();
    let mut warned = Vec::new();
    let got = recent(&b, "prod", 10, &mut |w| warned.push(w)).unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(warned.len(), 1, "{warned:?}");
    assert!(warned[0].contains("bad.json"), "{warned:?}");
    assert!(warned[0].contains("s3://test/team"), "{warned:?}");
}

fn local_up(project: &str, ended_at: &str) -> journal::Record {
    result(project, "up", "succeeded", ended_at).record("local")
}

fn settled(records: Vec<journal::Record>) -> BTreeMap<String, Settled<journal::Record>> {
    let mut out = BTreeMap::new();
    for r in records {
        note_settled(&mut out, r, &|r| r);
    }
    out
}

fn fingerprints(m: &BTreeMap<String, journal::Record>) -> BTreeMap<String, String> {
    m.iter()
        .map(|(p, r)| match r {
            journal::Record::Project { fingerprint, .. } => {
                (p.clone(), fingerprint.clone().unwrap_or_default())
            }
            _ => (p.clone(), String::new()),
        })
        .collect()
}

#[test]
fn the_newest_success_wins_and_a_newer_destroy_removes_it() {
    let local = settled(vec![
        local_up("a", "2026-01-01T00:00:02Z"),
        local_up("b", "2026-01-01T00:00:05Z"),
        local_up("c", "2026-01-01T00:00:01Z"),
        result("d", "destroy", "succeeded", "2026-01-01T00:00:09Z").record("local"),
    ]);
    let runs = vec![run(
        "remote",
        vec![
            // Newer than the local one: wins.
            result("a", "up", "succeeded", "2026-01-01T00:00:03Z"),
            // Older than the local one: loses.
            result("b", "up", "succeeded", "2026-01-01T00:00:04Z"),
            // A newer destroy elsewhere: gone.
            result("c", "destroy", "succeeded", "2026-01-01T00:00:02Z"),
            // An older up than the local destroy: still gone.
            result("d", "up", "succeeded", "2026-01-01T00:00:08Z"),
            // Only there: taken; a failure is no success.
            result("e", "up", "succeeded", "2026-01-01T00:00:01Z"),
            result("f", "up", "failed", "2026-01-01T00:00:01Z"),
        ],
    )];
    let last = last_success(local, &runs, &|r| r);
    assert_eq!(
        fingerprints(&last),
        BTreeMap::from([
            ("a".into(), "fp-a-2026-01-01T00:00:03Z".into()),
            ("b".into(), "fp-b-2026-01-01T00:00:05Z".into()),
            ("e".into(), "fp-e-2026-01-01T00:00:01Z".into()),
        ])
    );
    // Without records it is the journal's own last success.
    let alone = last_success(
        settled(vec![local_up("a", "2026-01-01T00:00:02Z")]),
        &[],
        &|r| r,
    );
    assert_eq!(alone.len(), 1);
}

#[test]
fn merged_with_the_journal_the_last_result_of_each_project_is_the_newest() {
    let local = vec![
        local_up("a", "2026-01-01T00:00:02Z"),
        result("b", "up", "failed", "2026-01-01T00:00:09Z").record("local"),
    ];
    let runs = vec![run(
        "remote",
        vec![
            result("a", "up", "failed", "2026-01-01T00:00:03Z"),
            result("b", "up", "succeeded", "2026-01-01T00:00:04Z"),
        ],
    )];
    let all = merged(local, &runs);
    let last = journal::last_by_project(&all, &[]);
    let status = |p: &str| match &last[p] {
        journal::Record::Project { status, run_id, .. } => (status.clone(), run_id.clone()),
        _ => unreachable!(),
    };
    assert_eq!(status("a"), ("failed".into(), "remote".into()));
    assert_eq!(status("b"), ("failed".into(), "local".into()));
    let ups = journal::last_success(&all);
    assert!(ups.contains_key("a") && ups.contains_key("b"));
}

#[test]
fn a_journals_runs_are_listed_newest_first_and_merged_with_the_backends() {
    let start = |id: &str, at: &str| journal::Record::Run {
        run_id: id.into(),
        operation: "up".into(),
        provider: "t".into(),
        stack: "prod".into(),
        projects: vec![],
        started_at: at.into(),
        command: String::new(),
        user: String::new(),
        host: String::new(),
        graph: vec![],
    };
    let records = vec![
        start("one", "2026-01-01T00:00:01Z"),
        result("a", "up", "succeeded", "2026-01-01T00:00:02Z").record("one"),
        start("two", "2026-01-01T00:00:05Z"),
        result("a", "up", "failed", "2026-01-01T00:00:06Z").record("two"),
        result("b", "up", "succeeded", "2026-01-01T00:00:07Z").record("two"),
    ];
    let local = from_journal(&records, false);
    let ids: Vec<&str> = local.iter().map(|r| r.run_id.as_str()).collect();
    assert_eq!(ids, ["two", "one"]);
    assert_eq!(local[0].status, "failed");
    assert_eq!(local[0].command, "strata up");
    assert_eq!(local[0].ended_at, "2026-01-01T00:00:07Z");
    assert_eq!(
        local[0].counts,
        BTreeMap::from([("failed".into(), 1), ("succeeded".into(), 1)])
    );
    assert_eq!(local[1].status, "succeeded");
    let mut remote = run("two", vec![]);
    remote.started_at = "2026-01-01T00:00:05Z".into();
    let mut newer = run("three", vec![]);
    newer.started_at = "2026-01-01T00:00:09Z".into();
    let all = with_local(vec![newer, remote], local, 2);
    let ids: Vec<(&str, &str)> = all
        .iter()
        .map(|r| (r.run_id.as_str(), r.host.as_str()))
        .collect();
    assert_eq!(ids, [("three", "host-a"), ("two", "host-a")]);
}
