//! Building the report of one run from the journal, in stages: gather the run's lines,
//! place each step in time, on the plan's graph (or, without it, on what its timing
//! allows), mark the critical path, read the tails of failures, and count.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::journal::Journal;
use super::model::{Graph, Report, Retry, Step, Totals, epoch_ms};
use super::tail::{TAIL_LINES, tail_of};
use crate::plan::Plan;
use crate::state::journal::Record;
use crate::util::display_path;

/// A journal line, as written, and as read.
type Line<'a> = (&'a Arc<str>, &'a Record);

/// The journal's lines of one run, borrowed (a run of thousands of projects is not
/// copied again).
#[derive(Default)]
struct RunLines<'a> {
    /// The run's own line, and what it says.
    run_record: Option<Arc<str>>,
    operation: String,
    provider: String,
    stack: String,
    command: String,
    started_at: String,
    /// The projects its run record lists (borrowed: thousands of paths).
    listed: &'a [String],
    /// The last record of each step, and the order steps were first recorded in.
    records: BTreeMap<&'a str, Line<'a>>,
    order: Vec<&'a str>,
    retries: BTreeMap<&'a str, Vec<Line<'a>>>,
    pool_lines: Vec<Line<'a>>,
}

impl<'a> RunLines<'a> {
    fn gather(journal: &'a Journal, run_id: &str) -> RunLines<'a> {
        let mut run = RunLines::default();
        let mut seen: BTreeSet<&str> = BTreeSet::new();
        for (text, line) in journal.lines.iter().filter(|(_, l)| l.run_id() == run_id) {
            match line {
                Record::Run {
                    operation,
                    provider,
                    stack,
                    projects,
                    started_at,
                    command,
                    ..
                } => {
                    run.run_record = Some(text.clone());
                    run.operation = operation.clone();
                    run.provider = provider.clone();
                    run.stack = stack.clone();
                    run.command = command.clone();
                    run.started_at = started_at.clone();
                    run.listed = projects;
                }
                Record::Retry { project, .. } => {
                    run.retries.entry(project).or_default().push((text, line));
                }
                Record::PoolLimit { .. } => run.pool_lines.push((text, line)),
                Record::Approval { .. } | Record::End { .. } => {}
                Record::Project { project, .. } => {
                    if seen.insert(project) {
                        run.order.push(project);
                    }
                    // The last record of a step wins.
                    run.records.insert(project, (text, line));
                }
            }
        }
        run
    }

    /// Every step the run listed, then any it recorded without listing it.
    fn paths(&self) -> Vec<&'a str> {
        let mut paths: Vec<&'a str> = Vec::new();
        let mut listed: BTreeSet<&str> = BTreeSet::new();
        for p in self
            .listed
            .iter()
            .map(String::as_str)
            .chain(self.order.iter().copied())
        {
            if listed.insert(p) {
                paths.push(p);
            }
        }
        paths
    }

    /// When each step started (epoch milliseconds), if its record says.
    fn start_of(&self, path: &str) -> Option<u64> {
        match self.records.get(path) {
            Some((
                _,
                Record::Project {
                    started_at,
                    ended_at,
                    duration_ms,
                    ..
                },
            )) => epoch_ms(started_at)
                .or_else(|| epoch_ms(ended_at).map(|e| e.saturating_sub(*duration_ms))),
            _ => None,
        }
    }

    /// One step as its last record and its retries tell it, in time from `origin_ms`.
    fn step(&self, path: &str, start: Option<u64>, origin_ms: u64) -> Step {
        let mut step = Step {
            path: path.to_string(),
            status: "not recorded".into(),
            wave: 0,
            start_ms: start.map(|s| s.saturating_sub(origin_ms)).unwrap_or(0),
            duration_ms: 0,
            exit_code: None,
            message: None,
            log: None,
            changes: Vec::new(),
            retries: Vec::new(),
            needs: Vec::new(),
            critical: false,
            tail: Vec::new(),
            tail_note: None,
            record: None,
        };
        if let Some((
            text,
            Record::Project {
                status,
                duration_ms,
                exit_code,
                message,
                log,
                changes,
                ..
            },
        )) = self.records.get(path).copied()
        {
            step.status = status.clone();
            step.duration_ms = *duration_ms;
            step.exit_code = *exit_code;
            step.message = message.clone().filter(|m| !m.trim().is_empty());
            step.log = log.clone();
            step.changes = change_counts(changes.as_ref());
            step.record = Some(text.clone());
        }
        for &(text, line) in self.retries.get(path).into_iter().flatten() {
            if let Record::Retry {
                attempt,
                delay_ms,
                reason,
                at,
                ..
            } = line
            {
                step.retries.push(Retry {
                    attempt: *attempt,
                    at_ms: epoch_ms(at)
                        .map(|a| a.saturating_sub(origin_ms))
                        .unwrap_or(step.start_ms),
                    delay_ms: *delay_ms,
                    reason: reason.clone(),
                    record: text.clone(),
                });
            }
        }
        step
    }
}

/// Builds the report of run `run_id` (which `Journal::select` returned). `plan` is the
/// full plan of the run's profile, or why it could not be resolved; `root` is the
/// workspace root, where the logs recorded in the journal are.
pub fn build(
    journal: &Journal,
    run_id: &str,
    plan: std::result::Result<&Plan, String>,
    root: &Path,
) -> Report {
    let run = RunLines::gather(journal, run_id);
    let paths = run.paths();
    let starts: Vec<Option<u64>> = paths.iter().map(|p| run.start_of(p)).collect();
    // Time 0: the start of the run (or of its first step, when that is earlier).
    let origin_ms = epoch_ms(&run.started_at)
        .into_iter()
        .chain(starts.iter().flatten().copied())
        .min()
        .unwrap_or(0);
    let mut steps: Vec<Step> = paths
        .iter()
        .zip(&starts)
        .map(|(path, start)| run.step(path, *start, origin_ms))
        .collect();
    let wall_ms = steps.iter().map(Step::end_ms).max().unwrap_or(0);
    // A step without a record did not end within the run: drawn at its end.
    for s in steps.iter_mut().filter(|s| !s.recorded()) {
        s.start_ms = wall_ms;
    }
    let graph = place_on_graph(&mut steps, plan, &run.operation, &paths);
    let critical = critical_path(&steps);
    for &i in &critical {
        steps[i].critical = true;
    }
    read_failure_tails(&mut steps, root);
    let totals = totals(&steps, &critical, wall_ms);
    let status = status_of(&steps);
    let pool_changes = super::pools::changes(run.pool_lines, |at| {
        epoch_ms(at).map_or(0, |a| a.saturating_sub(origin_ms))
    });
    let mut report = Report {
        run_id: run_id.to_string(),
        operation: run.operation,
        provider: run.provider,
        stack: run.stack,
        command: run.command,
        started_at: run.started_at,
        status,
        origin_ms,
        steps,
        graph,
        critical,
        totals,
        pool_changes,
        journal: display_path(&journal.path),
        run_record: run.run_record,
    };
    sort_for_drawing(&mut report);
    report
}

/// Sets each step's wave and `needs` from the plan of its profile; when that no longer
/// resolves, its `needs` are what had ended before it started (what could have held it
/// up), and the graph says why.
fn place_on_graph(
    steps: &mut [Step],
    plan: std::result::Result<&Plan, String>,
    operation: &str,
    paths: &[&str],
) -> Graph {
    match plan.and_then(|p| graph_of(p, operation, paths)) {
        Ok((waves, needs)) => {
            for ((s, w), n) in steps.iter_mut().zip(waves).zip(needs) {
                s.wave = w;
                s.needs = n;
            }
            Graph::Plan
        }
        Err(why) => {
            let ends: Vec<(bool, u64, u64)> = steps
                .iter()
                .map(|s| (s.recorded(), s.start_ms, s.end_ms()))
                .collect();
            for (i, s) in steps.iter_mut().enumerate() {
                s.needs = (0..ends.len())
                    .filter(|&j| {
                        j != i && ends[j].0 && ends[i].0 && ends[j].2 <= ends[i].1 && {
                            // Zero-length steps at the same instant: keep the edge one way.
                            ends[j].1 < ends[i].1 || j < i
                        }
                    })
                    .collect();
            }
            Graph::Timing(why)
        }
    }
}

/// The last lines of each failure's log, or why they are missing.
fn read_failure_tails(steps: &mut [Step], root: &Path) {
    for s in steps.iter_mut().filter(|s| s.kind() == "failed") {
        match s.log.as_deref() {
            Some(log) => match tail_of(root, log, TAIL_LINES) {
                Ok(lines) => s.tail = lines,
                Err(why) => s.tail_note = Some(why),
            },
            None => s.tail_note = Some("no log was recorded for it".into()),
        }
    }
}

fn totals(steps: &[Step], critical: &[usize], wall_ms: u64) -> Totals {
    let mut totals = Totals {
        wall_ms,
        sum_ms: steps
            .iter()
            .fold(0u64, |a, s| a.saturating_add(s.duration_ms)),
        critical_ms: critical
            .iter()
            .fold(0u64, |a, &i| a.saturating_add(steps[i].duration_ms)),
        counts: BTreeMap::new(),
    };
    for s in steps {
        *totals.counts.entry(s.status.clone()).or_default() += 1;
    }
    totals
}

/// The run's status: the worst of its steps', `incomplete` when one has no record.
fn status_of(steps: &[Step]) -> &'static str {
    if steps.iter().any(|s| s.kind() == "failed") {
        "failed"
    } else if steps.iter().any(|s| s.kind() == "cancelled") {
        "cancelled"
    } else if steps.iter().any(|s| s.kind() == "denied") {
        "denied"
    } else if steps.iter().any(|s| s.kind() == "awaiting") {
        "awaiting"
    } else if steps.iter().any(|s| !s.recorded()) {
        "incomplete"
    } else {
        "succeeded"
    }
}

/// The waves and the `needs` (indices into `paths`) of the run's steps, from the plan of
/// its profile; an error (why) when the plan no longer has one of them.
fn graph_of(
    full: &Plan,
    operation: &str,
    paths: &[&str],
) -> std::result::Result<(Vec<usize>, Vec<Vec<usize>>), String> {
    // Not copied for an up: the plan of thousands of projects is large.
    let reversed;
    let base = if operation == "destroy" {
        reversed = full.reversed();
        &reversed
    } else {
        full
    };
    let missing: Vec<&str> = paths
        .iter()
        .filter(|p| base.index_of(p).is_none())
        .copied()
        .collect();
    if !missing.is_empty() {
        return Err(format!("the profile no longer has {}", missing.join(", ")));
    }
    let wanted: BTreeSet<&str> = paths.iter().copied().collect();
    let keep: Vec<bool> = base
        .nodes
        .iter()
        .map(|n| wanted.contains(n.path.as_str()))
        .collect();
    // The run kept every project (a whole `up`): its graph is the plan's own.
    let sub = if keep.iter().all(|k| *k) {
        std::borrow::Cow::Borrowed(base)
    } else {
        std::borrow::Cow::Owned(base.subplan(&keep))
    };
    let index: BTreeMap<&str, usize> = paths
        .iter()
        .enumerate()
        .rev()
        .map(|(i, p)| (*p, i))
        .collect();
    let at = |path: &str| index.get(path).copied();
    let mut waves = vec![0; paths.len()];
    let mut needs = vec![Vec::new(); paths.len()];
    for node in &sub.nodes {
        if let Some(i) = at(&node.path) {
            waves[i] = node.wave;
            needs[i] = node
                .needs
                .iter()
                .filter_map(|&j| at(&sub.nodes[j].path))
                .collect();
        }
    }
    Ok((waves, needs))
}

/// The longest chain of steps by duration through the `needs` edges, first step first.
/// Empty when no step took any time.
fn critical_path(steps: &[Step]) -> Vec<usize> {
    let n = steps.len();
    // A topological order: by the edges (Kahn), whatever the steps' order.
    let mut remaining: Vec<usize> = steps.iter().map(|s| s.needs.len()).collect();
    let mut dependents = vec![Vec::new(); n];
    for (i, s) in steps.iter().enumerate() {
        for &j in &s.needs {
            dependents[j].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| remaining[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop() {
        order.push(i);
        for &d in &dependents[i] {
            remaining[d] -= 1;
            if remaining[d] == 0 {
                ready.push(d);
            }
        }
    }
    let mut finish = vec![0u64; n];
    let mut pred: Vec<Option<usize>> = vec![None; n];
    for &i in &order {
        let best = steps[i]
            .needs
            .iter()
            .copied()
            .max_by_key(|&j| (finish[j], std::cmp::Reverse(j)));
        let before = best.map(|j| finish[j]).unwrap_or(0);
        pred[i] = best.filter(|&j| finish[j] > 0);
        finish[i] = before.saturating_add(steps[i].duration_ms);
    }
    let Some(last) = (0..n)
        .filter(|&i| finish[i] > 0)
        .max_by_key(|&i| (finish[i], std::cmp::Reverse(i)))
    else {
        return Vec::new();
    };
    let mut chain = vec![last];
    let mut cur = last;
    while let Some(p) = pred[cur] {
        if chain.contains(&p) {
            break;
        }
        chain.push(p);
        cur = p;
    }
    chain.reverse();
    chain.retain(|&i| steps[i].duration_ms > 0);
    chain
}

/// Puts the steps in drawing order (by wave, then start, then as listed) and renumbers
/// every index that points at them.
fn sort_for_drawing(r: &mut Report) {
    let mut idx: Vec<usize> = (0..r.steps.len()).collect();
    idx.sort_by_key(|&i| {
        let s = &r.steps[i];
        (s.wave, !s.recorded(), s.start_ms, i)
    });
    let mut new_of = vec![0; idx.len()];
    for (new, &old) in idx.iter().enumerate() {
        new_of[old] = new;
    }
    // Moved into place one cycle of the permutation at a time, never copied: the steps
    // of thousands of projects are megabytes.
    let mut placed = vec![false; idx.len()];
    for start in 0..idx.len() {
        let mut at = start;
        while !placed[at] {
            placed[at] = true;
            if idx[at] != start {
                r.steps.swap(at, idx[at]);
            }
            at = idx[at];
        }
    }
    for s in r.steps.iter_mut() {
        for j in s.needs.iter_mut() {
            *j = new_of[*j];
        }
    }
    for i in r.critical.iter_mut() {
        *i = new_of[*i];
    }
}

/// The change counts worth showing, in Pulumi's order: everything but `same`.
fn change_counts(changes: Option<&Value>) -> Vec<(String, u64)> {
    const ORDER: [&str; 5] = ["create", "update", "delete", "replace", "read"];
    let Some(Value::Object(map)) = changes else {
        return Vec::new();
    };
    let mut out: Vec<(String, u64)> = map
        .iter()
        .filter(|(k, _)| k.as_str() != "same")
        .filter_map(|(k, v)| Some((k.clone(), v.as_u64()?)))
        .filter(|(_, n)| *n > 0)
        .collect();
    out.sort_by_key(|(k, _)| {
        (
            ORDER.iter().position(|o| o == k).unwrap_or(ORDER.len()),
            k.clone(),
        )
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::{at, journal_of, project_line, run_line, sample};

    fn paths(r: &Report, idx: &[usize]) -> Vec<String> {
        idx.iter().map(|&i| r.steps[i].path.clone()).collect()
    }

    #[test]
    fn waves_critical_path_and_totals_come_from_the_plan() {
        let r = sample();
        assert_eq!(r.graph, Graph::Plan);
        let waves: Vec<(String, usize)> =
            r.steps.iter().map(|s| (s.path.clone(), s.wave)).collect();
        assert_eq!(
            waves,
            [
                ("alpha".into(), 1),
                ("bravo".into(), 1),
                ("charlie".into(), 2),
                ("delta".into(), 3)
            ]
        );
        assert_eq!(paths(&r, &r.critical), ["bravo", "charlie"]);
        assert_eq!(r.totals.wall_ms, 520);
        assert_eq!(r.totals.sum_ms, 600);
        assert_eq!(r.totals.critical_ms, 500);
        let p = r.totals.parallelism().unwrap();
        assert!((p - 600.0 / 520.0).abs() < 1e-9, "{p}");
        assert_eq!(r.status, "succeeded");
        assert_eq!(r.groups().len(), 3);
    }

    #[test]
    fn without_the_plan_the_order_and_the_critical_path_come_from_timing() {
        let j = journal_of(&[
            run_line("r1", "up", &["a", "b", "c"]),
            project_line("r1", "c", "succeeded", 500, 100),
            project_line("r1", "a", "succeeded", 0, 400),
            project_line("r1", "b", "failed", 50, 100),
        ]);
        let r = build(&j, "r1", Err("gone".into()), Path::new("/nonexistent"));
        assert_eq!(r.graph, Graph::Timing("gone".into()));
        assert_eq!(paths(&r, &[0, 1, 2]), ["a", "b", "c"], "start order");
        assert_eq!(paths(&r, &r.critical), ["a", "c"]);
        assert_eq!(r.status, "failed");
        assert_eq!(
            r.steps[1].tail_note.as_deref(),
            Some("no log was recorded for it")
        );
    }

    #[test]
    fn a_plan_that_lost_a_project_falls_back_to_timing() {
        let j = journal_of(&[
            run_line("r1", "up", &["alpha", "zulu"]),
            project_line("r1", "alpha", "succeeded", 0, 10),
            project_line("r1", "zulu", "succeeded", 10, 10),
        ]);
        let plan = crate::plan::testing::plan_of(
            "description: d\ninfra_type: T\ninfrastructure:\n  - path: alpha\n",
            &[],
        )
        .unwrap();
        let r = build(&j, "r1", Ok(&plan), Path::new("/x"));
        assert!(
            matches!(&r.graph, Graph::Timing(why) if why.contains("zulu")),
            "{:?}",
            r.graph
        );
    }

    #[test]
    fn retries_changes_and_unrecorded_steps_are_kept() {
        let mut p =
            serde_json::from_str::<Value>(&project_line("r1", "a", "succeeded", 0, 900)).unwrap();
        p["changes"] = serde_json::json!({"create": 2, "same": 7, "update": 1, "future": "x"});
        p["blocked_by"] = serde_json::json!("whatever a later strata adds");
        let retry = serde_json::json!({
            "record": "retry", "run_id": "r1", "project": "a", "operation": "up",
            "attempt": 2, "delay_ms": 50, "reason": "TooManyRequests", "at": at(300),
        });
        let j = journal_of(&[
            run_line("r1", "preview", &["a", "b"]),
            p.to_string(),
            retry.to_string(),
        ]);
        let r = build(&j, "r1", Err("x".into()), Path::new("/x"));
        let a = &r.steps[0];
        assert_eq!(a.changes, [("create".into(), 2), ("update".into(), 1)]);
        assert_eq!(a.retries.len(), 1);
        assert_eq!((a.retries[0].attempt, a.retries[0].at_ms), (2, 300));
        let b = &r.steps[1];
        assert_eq!((b.status.as_str(), b.recorded()), ("not recorded", false));
        assert_eq!(b.start_ms, 900, "drawn at the end of what was recorded");
        assert_eq!(r.status, "incomplete");
    }
}
