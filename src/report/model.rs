//! The run model a report draws: one run of the journal as steps with their waves, start
//! and end, `needs` edges (from the plan, else from timing), the critical path and the
//! totals. Renderers read it; nothing here writes text for people.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::journal::Journal;
pub use super::pools::PoolChange;
use super::tail::{TAIL_LINES, tail_of};
use crate::plan::Plan;
use crate::run::journal::Record;
use crate::util::display_path;

/// Where the graph of a report comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Graph {
    /// The profile still resolves: waves and `needs` edges are the plan's.
    Plan,
    /// It does not (the reason): projects in start order, the critical path from timing.
    Timing(String),
}

/// A failed try of a project that was run again (`retry:`).
#[derive(Debug, Clone)]
pub struct Retry {
    /// The try that followed.
    pub attempt: u32,
    /// When the failed try ended, from the start of the run.
    pub at_ms: u64,
    pub delay_ms: u64,
    pub reason: String,
    /// Its journal line, as written.
    pub(super) record: Arc<str>,
}

/// One project (or built-in step) of the run.
#[derive(Debug, Clone)]
pub struct Step {
    pub path: String,
    /// As recorded (`succeeded`, `failed`, `skipped`, `cancelled`, `blocked`), or
    /// `not recorded` when the run stopped before it recorded this step.
    pub status: String,
    /// 1-based; 0 when the graph is not known.
    pub wave: usize,
    /// From the start of the run.
    pub start_ms: u64,
    pub duration_ms: u64,
    pub exit_code: Option<i32>,
    pub message: Option<String>,
    /// The log, as recorded (relative to the workspace root).
    pub log: Option<String>,
    /// A preview's change counts (`create`, `update`, ...), `same` left out.
    pub changes: Vec<(String, u64)>,
    pub retries: Vec<Retry>,
    /// Indices (into `Report::steps`) of the steps it needs, when the graph is known.
    pub needs: Vec<usize>,
    pub critical: bool,
    /// The last lines of the log of a failure.
    pub tail: Vec<String>,
    /// Why the tail is missing, when it is.
    pub tail_note: Option<String>,
    /// Its journal line, as written (shared with the journal read: not copied).
    pub(super) record: Option<Arc<str>>,
}

impl Step {
    pub fn end_ms(&self) -> u64 {
        self.start_ms.saturating_add(self.duration_ms)
    }

    pub fn recorded(&self) -> bool {
        self.record.is_some()
    }

    /// The status class: what colour the step is drawn in.
    pub fn kind(&self) -> &'static str {
        status_kind(&self.status)
    }
}

/// The class of a status: one of `succeeded failed cancelled skipped blocked unknown`.
pub fn status_kind(status: &str) -> &'static str {
    match status {
        "succeeded" => "succeeded",
        "failed" => "failed",
        "cancelled" => "cancelled",
        "skipped" => "skipped",
        "blocked" => "blocked",
        _ => "unknown",
    }
}

/// Wall time, the sum of the projects' times, and the critical path's.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub wall_ms: u64,
    pub sum_ms: u64,
    pub critical_ms: u64,
    /// How many steps ended with each status.
    pub counts: BTreeMap<String, usize>,
}

impl Totals {
    /// The parallelism achieved: the sum of the projects' times over the wall time.
    pub fn parallelism(&self) -> Option<f64> {
        (self.wall_ms > 0).then(|| self.sum_ms as f64 / self.wall_ms as f64)
    }
}

/// One run, ready to draw.
#[derive(Debug, Clone)]
pub struct Report {
    pub run_id: String,
    pub operation: String,
    pub provider: String,
    pub stack: String,
    pub command: String,
    pub started_at: String,
    /// `succeeded`, `failed`, `cancelled`, or `incomplete` (a step has no record).
    pub status: &'static str,
    /// Epoch milliseconds of the report's time 0 (the start of the run).
    pub origin_ms: u64,
    /// In drawing order: by wave, then by start time.
    pub steps: Vec<Step>,
    pub graph: Graph,
    /// The critical path (indices into `steps`), first step first.
    pub critical: Vec<usize>,
    pub totals: Totals,
    /// Each change of a pool's limit, in the order they happened.
    pub pool_changes: Vec<PoolChange>,
    pub journal: String,
    /// The run's journal line, as written.
    pub(super) run_record: Option<Arc<str>>,
}

impl Report {
    /// The steps of each wave (indices into `steps`), in order; one group with wave 0
    /// when the graph is not known.
    pub fn groups(&self) -> Vec<(usize, Vec<usize>)> {
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for (i, s) in self.steps.iter().enumerate() {
            match groups.last_mut() {
                Some((w, members)) if *w == s.wave => members.push(i),
                _ => groups.push((s.wave, vec![i])),
            }
        }
        groups
    }

    /// `strata up of stack dev (provider local)`.
    pub fn title(&self) -> String {
        format!(
            "strata {} of stack {} (provider {})",
            self.operation, self.stack, self.provider
        )
    }
}

/// Milliseconds since the epoch of an RFC 3339 time (`None` when it is not one).
pub(super) fn epoch_ms(text: &str) -> Option<u64> {
    let t = humantime::parse_rfc3339_weak(text.trim()).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
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
    let mut run_record = None;
    let mut info = (String::new(), String::new(), String::new(), String::new());
    let mut started_at = String::new();
    let mut listed: Vec<String> = Vec::new();
    // Borrowed from the journal: a run of thousands of projects is not copied again.
    let mut records: BTreeMap<&str, (&Arc<str>, &Record)> = BTreeMap::new();
    let mut order: Vec<&str> = Vec::new();
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    let mut retries: BTreeMap<&str, Vec<(&Arc<str>, &Record)>> = BTreeMap::new();
    let mut pool_lines: Vec<(&Arc<str>, &Record)> = Vec::new();
    for (text, line) in journal.lines.iter().filter(|(_, l)| l.run_id() == run_id) {
        match line {
            Record::Run {
                operation,
                provider,
                stack,
                projects,
                started_at: at,
                command,
                ..
            } => {
                run_record = Some(text.clone());
                info = (
                    operation.clone(),
                    provider.clone(),
                    stack.clone(),
                    command.clone(),
                );
                started_at = at.clone();
                listed = projects.clone();
            }
            Record::Retry { project, .. } => {
                retries.entry(project).or_default().push((text, line));
            }
            Record::PoolLimit { .. } => pool_lines.push((text, line)),
            Record::Project { project, .. } => {
                if seen.insert(project) {
                    order.push(project);
                }
                // The last record of a step wins.
                records.insert(project, (text, line));
            }
        }
    }
    let (operation, provider, stack, command) = info;
    // Every step the run listed, then any it recorded without listing it.
    let mut paths: Vec<String> = Vec::new();
    let mut listed_set: BTreeSet<&str> = BTreeSet::new();
    for p in listed
        .iter()
        .map(String::as_str)
        .chain(order.iter().copied())
    {
        if listed_set.insert(p) {
            paths.push(p.to_string());
        }
    }

    // Time 0: the start of the run (or of its first step, when that is earlier).
    let starts: Vec<Option<u64>> = paths
        .iter()
        .map(|p| match records.get(p.as_str()) {
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
        })
        .collect();
    let origin_ms = epoch_ms(&started_at)
        .into_iter()
        .chain(starts.iter().flatten().copied())
        .min()
        .unwrap_or(0);

    let mut steps: Vec<Step> = paths
        .iter()
        .zip(&starts)
        .map(|(path, start)| {
            let mut step = Step {
                path: path.clone(),
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
            )) = records.get(path.as_str()).copied()
            {
                step.status = status.clone();
                step.duration_ms = *duration_ms;
                step.exit_code = *exit_code;
                step.message = message.clone().filter(|m| !m.trim().is_empty());
                step.log = log.clone();
                step.changes = change_counts(changes.as_ref());
                step.record = Some(text.clone());
            }
            for &(text, line) in retries.get(path.as_str()).into_iter().flatten() {
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
        })
        .collect();
    let wall_ms = steps.iter().map(Step::end_ms).max().unwrap_or(0);
    // A step without a record did not end within the run: drawn at its end.
    for s in steps.iter_mut().filter(|s| !s.recorded()) {
        s.start_ms = wall_ms;
    }

    let graph = match plan.and_then(|p| graph_of(p, &operation, &paths)) {
        Ok((waves, needs)) => {
            for ((s, w), n) in steps.iter_mut().zip(waves).zip(needs) {
                s.wave = w;
                s.needs = n;
            }
            Graph::Plan
        }
        Err(why) => {
            // What had ended before a step started could have held it up.
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
    };

    let critical = critical_path(&steps);
    for &i in &critical {
        steps[i].critical = true;
    }

    for s in steps.iter_mut().filter(|s| s.kind() == "failed") {
        match s.log.as_deref() {
            Some(log) => match tail_of(root, log, TAIL_LINES) {
                Ok(lines) => s.tail = lines,
                Err(why) => s.tail_note = Some(why),
            },
            None => s.tail_note = Some("no log was recorded for it".into()),
        }
    }

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
    for s in &steps {
        *totals.counts.entry(s.status.clone()).or_default() += 1;
    }
    let status = if steps.iter().any(|s| s.kind() == "failed") {
        "failed"
    } else if steps.iter().any(|s| s.kind() == "cancelled") {
        "cancelled"
    } else if steps.iter().any(|s| !s.recorded()) {
        "incomplete"
    } else {
        "succeeded"
    };

    let pool_changes = super::pools::changes(pool_lines, |at| {
        epoch_ms(at).map_or(0, |a| a.saturating_sub(origin_ms))
    });
    let mut report = Report {
        run_id: run_id.to_string(),
        operation,
        provider,
        stack,
        command,
        started_at,
        status,
        origin_ms,
        steps,
        graph,
        critical,
        totals,
        pool_changes,
        journal: display_path(&journal.path),
        run_record,
    };
    sort_for_drawing(&mut report);
    report
}

/// The waves and the `needs` (indices into `paths`) of the run's steps, from the plan of
/// its profile; an error (why) when the plan no longer has one of them.
fn graph_of(
    full: &Plan,
    operation: &str,
    paths: &[String],
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
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(format!("the profile no longer has {}", missing.join(", ")));
    }
    let wanted: BTreeSet<&str> = paths.iter().map(String::as_str).collect();
    let keep: Vec<bool> = base
        .nodes
        .iter()
        .map(|n| wanted.contains(n.path.as_str()))
        .collect();
    let sub = base.subplan(&keep);
    let index: BTreeMap<&str, usize> = paths
        .iter()
        .enumerate()
        .rev()
        .map(|(i, p)| (p.as_str(), i))
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
