//! Unit tests of the journal: its index of runs, and its records.

use super::*;
use crate::engine::Operation;
use std::io::Write;
use std::sync::atomic::Ordering;

/// An empty journal in a temporary folder (kept while the folder lives).
fn journal() -> (tempfile::TempDir, Journal) {
    let d = tempfile::tempdir().unwrap();
    let j = Journal::new(d.path());
    (d, j)
}

/// Project `project`'s record in run `run_id` doing `op`, as a step that ended `status`
/// (spelled as the journal spells it: `succeeded`, `failed`, …) writes it.
fn step_record(
    run_id: &str,
    project: &str,
    op: Operation,
    status: &str,
    fingerprint: Option<String>,
    outputs_hash: Option<String>,
) -> Record {
    let now = crate::util::rfc3339(crate::util::now_ms());
    Record::Project {
        run_id: run_id.into(),
        project: project.into(),
        operation: op.as_str().into(),
        status: status.into(),
        started_at: now.clone(),
        ended_at: now,
        duration_ms: 0,
        exit_code: None,
        fingerprint,
        message: None,
        log: None,
        changes: None,
        outputs_hash,
        upstream_outputs: None,
        pool: None,
        denied: None,
        awaiting: None,
    }
}

mod index {
    use super::*;

    fn run(j: &Journal, id: &str, op: Operation, results: &[(&str, &str)]) {
        j.append(&Record::Run {
            run_id: id.into(),
            operation: op.as_str().into(),
            provider: "p".into(),
            stack: "dev".into(),
            projects: results.iter().map(|(p, _)| p.to_string()).collect(),
            started_at: "t".into(),
            command: String::new(),
            user: String::new(),
            host: String::new(),
            graph: vec![],
        })
        .unwrap();
        for (p, status) in results {
            let fingerprint = Some(format!("{id}-{p}"));
            let outputs_hash = (op == Operation::Up).then(|| format!("h-{id}-{p}"));
            j.append(&step_record(id, p, op, status, fingerprint, outputs_hash))
                .unwrap();
        }
    }

    #[test]
    fn what_is_deployed_is_read_one_record_at_a_time_and_matches_the_whole_read() {
        let (_d, j) = journal();
        run(
            &j,
            "u0",
            Operation::Up,
            &[("a", "succeeded"), ("b", "succeeded"), ("c", "failed")],
        );
        run(&j, "d0", Operation::Destroy, &[("b", "succeeded")]);
        j.update_index().unwrap();
        run(
            &j,
            "u1",
            Operation::Up,
            &[("a", "succeeded"), ("c", "succeeded")],
        );
        // A torn line in the middle is skipped, the records after it still read.
        std::fs::OpenOptions::new()
            .append(true)
            .open(j.path())
            .and_then(|mut f| f.write_all(b"{\"record\":\"proj\n"))
            .unwrap();
        run(&j, "u2", Operation::Up, &[("b", "succeeded")]);
        let streamed = j.last_success();
        assert_eq!(streamed, last_success(&j.read()));
        assert_eq!(streamed, last_success(&j.read_all()));
        let hashes = [("a", "h-u1-a"), ("b", "h-u2-b"), ("c", "h-u1-c")];
        let hashes = hashes.map(|(p, h)| (p.to_string(), h.to_string()));
        assert_eq!(j.last_outputs(), BTreeMap::from(hashes));
        let fp = |p: &str| match &streamed[p] {
            Record::Project { fingerprint, .. } => fingerprint.clone().unwrap(),
            _ => unreachable!(),
        };
        assert_eq!(
            (fp("a"), fp("b"), fp("c")),
            ("u1-a".into(), "u2-b".into(), "u1-c".into())
        );
        // The index written in two passes holds what a whole read would keep.
        j.update_index().unwrap();
        assert_eq!(j.last_success(), streamed);
    }

    /// The index copies a kept record's line as the journal has it (it reads no more of
    /// a record than choosing needs), leaves out a torn line, and keeps a record of a
    /// kind this strata does not know with its run.
    #[test]
    fn the_index_copies_kept_lines_as_written() {
        let (_d, j) = journal();
        run(&j, "u0", Operation::Up, &[("a", "succeeded")]);
        let newer = r#"{"record":"from_a_newer_strata","run_id":"u0","x":[1,2]}"#;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(j.path.clone())
            .unwrap();
        writeln!(f, "{newer}").unwrap();
        writeln!(f, r#"{{"record":"project","run_id":"u0","proj"#).unwrap();
        j.update_index().unwrap();
        let index = std::fs::read_to_string(j.index_path()).unwrap();
        let journal = std::fs::read_to_string(&j.path).unwrap();
        let kept: Vec<&str> = index.lines().skip(1).collect();
        let whole: Vec<&str> = journal.lines().filter(|l| !l.ends_with("\"proj")).collect();
        assert_eq!(kept, whole, "{index}");
        assert_eq!(j.read(), j.read_all(), "{index}");
    }

    #[test]
    fn the_index_keeps_what_readers_need_and_the_journal_keeps_everything() {
        let (_d, j) = journal();
        // An up where b failed (resume needs that run), then many previews.
        run(
            &j,
            "u0",
            Operation::Up,
            &[("a", "succeeded"), ("b", "succeeded")],
        );
        run(
            &j,
            "u1",
            Operation::Up,
            &[("a", "succeeded"), ("b", "failed")],
        );
        for i in 0..30 {
            run(
                &j,
                &format!("p{i}"),
                Operation::Preview,
                &[("a", "succeeded"), ("b", "blocked")],
            );
            j.update_index().unwrap();
        }
        let all = j.read_all();
        let seen = j.read();
        assert!(
            seen.len() < all.len() / 5,
            "{} of {}",
            seen.len(),
            all.len()
        );
        for ops in [&["up", "destroy"][..], &[][..], &["up"][..]] {
            assert_eq!(
                last_by_project(&all, ops),
                last_by_project(&seen, ops),
                "{ops:?}"
            );
        }
        // The last up is whole (resume reads it), and the last success of b is kept.
        assert!(
            seen.iter()
                .any(|r| matches!(r, Record::Run { run_id, .. } if run_id == "u1"))
        );
        assert!(seen.iter().any(
            |r| matches!(r, Record::Project { run_id, project, status, .. }
            if run_id == "u0" && project == "b" && status == "succeeded")
        ));
        // Records appended after the index are read from the journal.
        run(&j, "u2", Operation::Up, &[("a", "succeeded")]);
        let seen = j.read();
        assert!(
            seen.iter()
                .any(|r| matches!(r, Record::Run { run_id, .. } if run_id == "u2"))
        );
        assert_eq!(
            last_by_project(&j.read_all(), &[]),
            last_by_project(&seen, &[])
        );
    }

    #[test]
    fn the_index_keeps_the_last_graph_of_a_deployed_project_the_profile_lost() {
        let d = tempfile::tempdir().unwrap();
        let j = Journal::new(d.path());
        let known = |p: &str| KnownProject {
            project: p.into(),
            dir: format!("projects/{p}"),
            kind: "pulumi".into(),
            name: p.into(),
            stage: "infrastructure".into(),
            needs: vec![],
        };
        let graph_run = |id: &str, graph: Vec<KnownProject>| Record::Run {
            run_id: id.into(),
            operation: "up".into(),
            provider: "p".into(),
            stack: "dev".into(),
            projects: vec![],
            started_at: "t".into(),
            command: String::new(),
            user: String::new(),
            host: String::new(),
            graph,
        };
        // u0 knew a, b and c; b was destroyed; then the profile kept a alone.
        j.append(&graph_run("u0", vec![known("a"), known("b"), known("c")]))
            .unwrap();
        let ok = "succeeded";
        run(&j, "u0b", Operation::Up, &[("a", ok), ("b", ok), ("c", ok)]);
        run(&j, "d0", Operation::Destroy, &[("b", ok)]);
        for i in 0..5 {
            let id = format!("u{}", i + 1);
            j.append(&graph_run(&id, vec![known("a")])).unwrap();
            run(&j, &format!("{id}b"), Operation::Up, &[("a", ok)]);
            j.update_index().unwrap();
        }
        let graphs: Vec<String> = j
            .read()
            .into_iter()
            .filter_map(|r| match r {
                Record::Run { run_id, graph, .. } if !graph.is_empty() => Some(run_id),
                _ => None,
            })
            .collect();
        // u0's graph stays for c (still deployed), the last up's is the last run's.
        assert_eq!(graphs, ["u0", "u5"]);
        assert!(
            !j.read()
                .iter()
                .any(|r| matches!(r, Record::Project { run_id, .. } if run_id == "u0")),
            "only u0's graph is kept, not the rest of that run"
        );
    }

    #[test]
    fn an_index_of_another_journal_is_ignored() {
        let (d, j) = journal();
        run(&j, "u0", Operation::Up, &[("a", "succeeded")]);
        run(&j, "u1", Operation::Up, &[("a", "failed")]);
        j.update_index().unwrap();
        // The journal is replaced (deleted by hand, a new one started).
        std::fs::remove_file(j.path()).unwrap();
        let j = Journal::new(d.path());
        run(&j, "n0", Operation::Up, &[("z", "succeeded")]);
        let seen = j.read();
        assert!(
            seen.iter()
                .all(|r| !matches!(r, Record::Project { project, .. } if project == "a"))
        );
        assert_eq!(seen.len(), 2);
        // Emptied in place (same file) and written again past where the index covered.
        j.update_index().unwrap();
        std::fs::write(j.path(), "").unwrap();
        let j = Journal::new(d.path());
        for k in 0..5 {
            run(&j, &format!("m{k}"), Operation::Up, &[("m", "succeeded")]);
        }
        let seen = j.read();
        assert!(
            seen.iter()
                .all(|r| !matches!(r, Record::Project { project, .. } if project == "z")),
            "{seen:?}"
        );
        assert_eq!(seen.len(), 10);
        let j = Journal::new(d.path());
        // A garbage index is ignored too.
        std::fs::write(d.path().join("journal.index.jsonl"), "not json\n").unwrap();
        assert_eq!(j.read().len(), 10);
    }
}

mod records {
    use super::*;

    /// A record of project `a`'s `up` in run `run`, as a step writes it.
    fn project(run: &str, status: &str) -> Record {
        step_record(run, "a", Operation::Up, status, None, None)
    }

    #[test]
    fn a_torn_line_loses_no_later_record() {
        let (_d, j) = journal();
        j.append(&project("r1", "succeeded")).unwrap();
        // A crash in the middle of the next record, including a torn UTF-8 sequence.
        let mut f = crate::files::open_private_append(j.path()).unwrap();
        f.write_all(b"{\"kind\":\"project\",\"run_id\":\"r2\",\"message\":\"\xc3")
            .unwrap();
        drop(f);
        j.append(&project("r3", "failed")).unwrap();
        let records = j.read();
        assert_eq!(records.len(), 2, "{records:?}");
        assert!(
            matches!(&records[1], Record::Project { run_id, status, .. } if run_id == "r3" && status == "failed")
        );
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(j.path()).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    /// A line longer than the buffer the reader keeps (an `up`'s graph at thousands of
    /// projects), then short ones: every record is read back whole, in order, and the
    /// index rewritten over them keeps the long one as written.
    #[test]
    fn a_long_line_then_short_ones_are_read_whole() {
        let (_d, j) = journal();
        let graph: Vec<KnownProject> = (0..2000)
            .map(|i| KnownProject {
                project: format!("infra/p{i:04}"),
                dir: format!("projects/infra/p{i:04}"),
                kind: "command".into(),
                name: format!("p{i:04}"),
                stage: "infrastructure".into(),
                needs: vec![format!("infra/p{:04}", i / 2)],
            })
            .collect();
        let run = Record::Run {
            run_id: "r1".into(),
            operation: "up".into(),
            provider: "p".into(),
            stack: "dev".into(),
            projects: vec!["a".into()],
            started_at: String::new(),
            command: "strata up".into(),
            user: String::new(),
            host: String::new(),
            graph,
        };
        let long = serde_json::to_string(&run).unwrap();
        assert!(long.len() > 2 * LINE_BUFFER_KEPT, "{}", long.len());
        j.append(&run).unwrap();
        j.append(&project("r1", "succeeded")).unwrap();
        j.append(&project("r2", "failed")).unwrap();
        let whole = j.read();
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0], run);
        assert!(
            matches!(&whole[1], Record::Project { run_id, status, .. } if run_id == "r1" && status == "succeeded")
        );
        assert!(
            matches!(&whole[2], Record::Project { run_id, status, .. } if run_id == "r2" && status == "failed")
        );
        j.update_index().unwrap();
        let index = std::fs::read_to_string(j.index_path()).unwrap();
        assert!(
            index.lines().any(|l| l == long),
            "the up's line is not kept as written"
        );
        assert_eq!(j.read(), whole);
    }

    proptest::proptest! {
        /// Whatever bytes a crash left at the end of the journal, a record appended after
        /// them is read back.
        #[test]
        fn any_garbage_before_a_record_never_loses_it(garbage in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let (_d, j) = journal();
            std::fs::write(j.path(), &garbage).unwrap();
            j.append(&project("after", "failed")).unwrap();
            let records = j.read();
            let found = records.iter().any(|r| matches!(r, Record::Project { run_id, .. } if run_id == "after"));
            proptest::prop_assert!(found, "lost the record after {:?}", garbage);
        }
    }

    /// Steps appending at once: every record whole and in the file, and each append
    /// returned only once an `fdatasync` covered it (one may cover several).
    #[test]
    fn appends_at_once_are_all_kept_and_each_is_synced_before_it_returns() {
        let (_d, j) = journal();
        std::thread::scope(|s| {
            for t in 0..6 {
                let j = &j;
                s.spawn(move || {
                    for n in 0..25 {
                        let before = j.written.load(Ordering::SeqCst);
                        j.append(&project(&format!("t{t}-{n}"), "succeeded"))
                            .unwrap();
                        // This append is numbered after `before`, and synced.
                        assert!(*j.synced.lock().unwrap() > before);
                    }
                });
            }
        });
        let records = j.read();
        assert_eq!(records.len(), 150);
        assert_eq!(*j.synced.lock().unwrap(), 150);
        for t in 0..6 {
            for n in 0..25 {
                let id = format!("t{t}-{n}");
                assert!(
                    records
                        .iter()
                        .any(|r| matches!(r, Record::Project { run_id, .. } if *run_id == id)),
                    "{id} lost"
                );
            }
        }
    }

    /// A record appended unsettled is in the file at once and not yet synced; settling
    /// its number syncs it and every append before it, with one `fdatasync`.
    #[test]
    fn an_unsettled_append_is_written_at_once_and_synced_when_settled() {
        let (_d, j) = journal();
        j.settle(5).unwrap(); // nothing written yet: nothing to sync
        let first = j.append_unsettled(&project("r1", "succeeded")).unwrap();
        let second = j.append_unsettled(&project("r2", "failed")).unwrap();
        assert_eq!((first, second), (1, 2));
        assert_eq!(j.read().len(), 2, "written before it is settled");
        assert_eq!(*j.synced.lock().unwrap(), 0);
        j.settle(first).unwrap();
        assert_eq!(
            *j.synced.lock().unwrap(),
            2,
            "one sync covers what was written"
        );
        j.settle(second).unwrap();
        assert_eq!(*j.synced.lock().unwrap(), 2);
    }

    #[test]
    fn append_and_read_back() {
        let (_d, j) = journal();
        j.append(&Record::Run {
            run_id: "r1".into(),
            operation: "up".into(),
            provider: "local".into(),
            stack: "dev".into(),
            projects: vec!["a".into()],
            started_at: "t".into(),
            command: "strata up".into(),
            user: String::new(),
            host: String::new(),
            graph: vec![],
        })
        .unwrap();
        for status in ["failed", "succeeded"] {
            let fingerprint = Some("f".into());
            j.append(&step_record(
                "r1",
                "a",
                Operation::Up,
                status,
                fingerprint,
                None,
            ))
            .unwrap();
        }
        let records = j.read();
        assert_eq!(records.len(), 3);
        let last = last_by_project(&records, &["up"]);
        assert!(matches!(&last["a"], Record::Project { status, .. } if status == "succeeded"));
        for line in std::fs::read_to_string(j.path()).unwrap().lines() {
            serde_json::from_str::<serde_json::Value>(line).unwrap();
        }
    }

    #[test]
    fn an_approval_is_read_back_and_read_leniently_beside_the_others() {
        let (_d, j) = journal();
        let approval = Record::Approval {
            run_id: "r1".into(),
            project: "db".into(),
            rule: "review".into(),
            by: "ann@box".into(),
            at: "t".into(),
            digest: "abc".into(),
        };
        j.append(&project("r1", "awaiting")).unwrap();
        j.append(&approval).unwrap();
        let line = std::fs::read_to_string(j.path()).unwrap();
        assert!(line.contains("\"record\":\"approval\""), "{line}");
        // A bare approval (an older or newer strata's) still reads.
        std::fs::write(
            j.path(),
            format!(
                "{line}{{\"record\":\"approval\",\"run_id\":\"r2\",\"project\":\"db\",\"new\":1}}\n"
            ),
        )
        .unwrap();
        let records = j.read();
        assert_eq!(records.len(), 3, "{records:?}");
        assert_eq!(records[1], approval);
        assert!(
            matches!(&records[2], Record::Approval { run_id, by, .. } if run_id == "r2" && by.is_empty())
        );
        // What a run is for the readers is left as it was.
        let last = last_by_project(&records, &["up"]);
        assert!(matches!(&last["a"], Record::Project { status, .. } if status == "awaiting"));
    }
}
