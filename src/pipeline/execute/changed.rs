//! `--changed`: which steps of the plan still need to run, from each one's fingerprint
//! at its last success, the outputs its upstreams left then and now, and what it reads.

use std::collections::BTreeMap;

use crate::plan::{NodeKind, Plan};
use crate::state::journal::{Journal, Record};
use crate::state::records::{self, ProjectResult, RunRecord};
use crate::workspace::Profile;

/// `--changed`'s decision for `plan`, from the last successes the journal and the shared
/// backend's runs know (newest wins), and the fingerprints and outputs of now.
pub(super) fn decide(
    plan: &Plan,
    full: &Plan,
    profile: &Profile,
    (journal, runs): (&Journal, &[RunRecord]),
    last_outputs: &BTreeMap<String, String>,
    fps: &BTreeMap<String, String>,
    at: &crate::plan::references::Context,
) -> Changed {
    let last = records::last_success(journal.last_settled_as(&LastUp::of), runs, &LastUp::of);
    let reads = reads(full, profile, at);
    changed_plan(
        plan,
        Evidence {
            last: &last,
            last_outputs,
            fps,
            reads: &reads,
        },
    )
}

/// What `--changed` weighs each step against: its last success, the outputs hash each
/// project left then, the fingerprints of now, and what each Pulumi project reads.
#[derive(Clone, Copy)]
struct Evidence<'a> {
    last: &'a BTreeMap<String, LastUp>,
    last_outputs: &'a BTreeMap<String, String>,
    fps: &'a BTreeMap<String, String>,
    reads: &'a BTreeMap<String, Reads>,
}

/// What a Pulumi project reads, as far as its `inputs:` and the stack references in
/// its code tell.
#[derive(Debug, Clone, PartialEq)]
enum Reads {
    /// Exactly these projects (paths); the outputs of its other needs do not matter.
    Only(std::collections::BTreeSet<String>),
    /// Any stack: a reference the scanner cannot read, whose entry does not say what it reads.
    Anything,
}

/// What each Pulumi project reads: only what its inputs and references name, when every
/// reference names its project; anything, when one of them cannot be read. Command
/// projects and projects with no inputs and no references are not in the map (their
/// needs are what they read).
fn reads(
    plan: &Plan,
    profile: &Profile,
    at: &crate::plan::references::Context,
) -> BTreeMap<String, Reads> {
    use crate::plan::references;
    let found = references::of_plan(plan, at);
    let mut out = BTreeMap::new();
    for n in plan.nodes.iter().filter(|n| n.kind == NodeKind::Pulumi) {
        let refs = found.get(&n.path).map(Vec::as_slice).unwrap_or_default();
        let entry = profile.entry(&n.path);
        let inputs: Vec<&str> = entry
            .map(|e| e.inputs.iter().map(|i| i.project.as_str()).collect())
            .unwrap_or_default();
        if refs.is_empty() && inputs.is_empty() {
            continue;
        }
        let Some(mut set) = references::read_targets(refs, entry.and_then(|e| e.reads.as_ref()))
        else {
            out.insert(n.path.clone(), Reads::Anything);
            continue;
        };
        set.extend(inputs.into_iter().map(String::from));
        out.insert(n.path.clone(), Reads::Only(set));
    }
    out
}

/// What `--changed` reads of a project's last successful `up`: a whole journal record
/// for every project of a large estate is megabytes.
struct LastUp {
    fingerprint: Option<String>,
    ended_at: String,
    /// Upstream → outputs hash: a list, as a map of one to three entries is ten times
    /// their size.
    upstream_outputs: Option<Vec<(String, String)>>,
}

impl LastUp {
    fn of(r: Record) -> LastUp {
        match r {
            Record::Project {
                fingerprint,
                ended_at,
                upstream_outputs,
                ..
            } => LastUp {
                fingerprint,
                ended_at,
                upstream_outputs: upstream_outputs.map(|m| m.into_iter().collect()),
            },
            _ => LastUp {
                fingerprint: None,
                ended_at: String::new(),
                upstream_outputs: None,
            },
        }
    }
}

/// What `--changed` decided before the run.
#[derive(Default)]
pub(super) struct Changed {
    /// The steps to run (`None`: the whole plan).
    pub plan: Option<Plan>,
    /// Steps dropped, with the reason.
    pub dropped: Vec<(String, String)>,
    /// Steps kept only because an upstream runs: upstream → the outputs hash the step
    /// last ran with. At run time, when every one of them left those outputs again, the
    /// step is skipped ("upstream outputs unchanged").
    pub conditional: BTreeMap<String, BTreeMap<String, String>>,
    /// The last success of each step dropped, for the run's record in a shared backend.
    pub carried: Vec<ProjectResult>,
}

/// `--changed` is output-aware. A step whose fingerprint is the one of its last success
/// is dropped when what it needs was dropped too and left the outputs it last ran with;
/// when some of what it needs runs, it is kept, conditionally (see [`Changed`]). A
/// project that may read anything ([`Reads::Anything`]) is never kept conditionally, and
/// is dropped only when no other Pulumi project runs.
fn changed_plan(plan: &Plan, seen: Evidence) -> Changed {
    let reads = seen.reads;
    let anything = |i: usize| reads.get(&plan.nodes[i].path) == Some(&Reads::Anything);
    // Projects that may read anything, kept because some other Pulumi project runs;
    // keeping one may keep its dependents, so decide again until nothing changes.
    let mut forced = std::collections::BTreeSet::new();
    loop {
        let (skip, out) = changed_once(plan, seen, &forced);
        let runs = |i: usize| !skip[i] && plan.nodes[i].kind == NodeKind::Pulumi;
        let more: Vec<usize> = (0..plan.nodes.len())
            .filter(|&i| skip[i] && anything(i))
            .filter(|&i| (0..plan.nodes.len()).any(|j| j != i && runs(j)))
            .collect();
        if more.is_empty() {
            return out;
        }
        forced.extend(more);
    }
}

/// One pass of [`changed_plan`], with the steps of `forced` kept: which steps are
/// skipped, and the decision.
fn changed_once(
    plan: &Plan,
    seen: Evidence,
    forced: &std::collections::BTreeSet<usize>,
) -> (Vec<bool>, Changed) {
    let Evidence {
        last,
        last_outputs,
        fps,
        reads,
    } = seen;
    let mut skip = vec![false; plan.nodes.len()];
    let mut out = Changed::default();
    for &i in &plan.order {
        let n = &plan.nodes[i];
        if forced.contains(&i) {
            continue;
        }
        let anything = reads.get(&n.path) == Some(&Reads::Anything);
        let Some(LastUp {
            fingerprint: Some(f),
            ended_at,
            upstream_outputs,
        }) = last.get(&n.path)
        else {
            continue;
        };
        if fps.get(&n.path) != Some(f) {
            continue;
        }
        let mut conditional = BTreeMap::new();
        let mut same = true;
        for &j in &n.needs {
            let u = &plan.nodes[j];
            // Where what a project reads is known, the outputs of the others do not
            // matter to it (they still run first).
            if let Some(Reads::Only(r)) = reads.get(&n.path)
                && !r.contains(&u.path)
            {
                continue;
            }
            let seen = upstream_outputs
                .as_ref()
                .map(|m| m.iter().find(|(p, _)| *p == u.path).map(|(_, h)| h));
            match (skip[j], u.kind == NodeKind::Builtin, seen) {
                (true, true, _) => {}
                // A journal from before outputs were recorded: as before, skipped upstreams
                // are enough.
                (true, false, None) => {}
                (true, false, Some(seen)) => same &= seen == last_outputs.get(&u.path),
                // Unchanged outputs of this upstream say nothing about what a project
                // that may read anything reads.
                (false, false, Some(Some(seen))) if !anything => {
                    conditional.insert(u.path.clone(), seen.clone());
                }
                _ => same = false,
            }
        }
        if !same {
            continue;
        }
        if conditional.is_empty() {
            skip[i] = true;
            out.dropped.push((
                n.path.clone(),
                format!("unchanged since its last up ({ended_at})"),
            ));
            out.carried.push(ProjectResult {
                project: n.path.clone(),
                operation: "up".into(),
                status: "succeeded".into(),
                ended_at: ended_at.clone(),
                fingerprint: Some(f.clone()),
                outputs_hash: last_outputs.get(&n.path).cloned(),
                upstream_outputs: upstream_outputs
                    .as_ref()
                    .map(|u| u.iter().cloned().collect()),
                carried: true,
                ..Default::default()
            });
        } else {
            out.conditional.insert(n.path.clone(), conditional);
        }
    }
    let keep: Vec<bool> = skip.iter().map(|s| !s).collect();
    out.plan = Some(plan.subplan(&keep));
    (skip, out)
}
