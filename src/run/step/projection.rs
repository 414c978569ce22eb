//! Projected previews of a fresh environment. A preview runs every project at once
//! (no order: `pipeline::execute`), reading what its upstreams left on their stacks.
//! When an upstream has never been deployed there is nothing to read; instead of
//! stopping there (`blocked`), a downstream that takes that upstream's outputs through
//! `inputs:` may preview on *projected* values:
//!
//! - what the upstream's own preview already knows (a literal, a config value): the
//!   stack outputs of the update plan that preview saves (`planned_outputs`);
//! - else the upstream entry's `mock_outputs:` (Terragrunt's name), when allowed for
//!   `preview`.
//!
//! The order: a downstream waits for its never-deployed upstream's preview, and for
//! nothing else, so a deployed environment keeps previewing everything at once. The
//! wait cannot deadlock: the scheduler starts steps in the plan's (topological) order
//! even when they have no order between them, so an upstream has always started (and
//! holds a `-j` slot) before its downstream waits for it.
//!
//! What stays `blocked`: a project that reads a never-deployed upstream through a
//! StackReference (Pulumi reads the backend, which has nothing), one that declares a
//! need of it (`needs:`, or the previous entry when it has none) without any input from
//! it, and one with an input no preview knows and no mock gives. The kubernetes stage's
//! wait for every infrastructure entry is an order, not a read: it blocks nothing.
//!
//! Every project's preview starts here (`StepRunner::before_preview`), since deciding to
//! project is its first question: a command project without a `preview:` command is
//! skipped before it, one with never-deployed upstreams is projected, and one whose
//! preview a projection will read saves its plan.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};

use super::{Ran, StepRunner};
use crate::engine::{Job, Operation, Progress};
use crate::run::events::Status;
use crate::workspace::{Entry, ProjectKind};

/// What other steps learn from each finished preview: the outputs it already knows
/// (empty when it knows none, failed, or was blocked).
#[derive(Default)]
pub(super) struct Previews {
    known: Mutex<BTreeMap<String, Map<String, Value>>>,
    done: Condvar,
}

/// Where a projected input came from.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Source {
    /// The upstream's preview knew it.
    Preview,
    /// The upstream entry's `mock_outputs:`.
    Mock,
}

/// The inputs of one step that are projected, by config key.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Projected {
    pub values: BTreeMap<String, (Value, Source, String)>,
}

impl Projected {
    /// `projected: lp-app:hostname from local-pulumi/ingress's preview; mocks:
    /// lp-app:log_dir (local-pulumi/logstore)`.
    pub fn describe(&self) -> String {
        let mut from_preview: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut mocks = Vec::new();
        for (key, (_, source, up)) in &self.values {
            match source {
                Source::Preview => from_preview.entry(up).or_default().push(key),
                Source::Mock => mocks.push(format!("{key} ({up})")),
            }
        }
        let mut parts: Vec<String> = from_preview
            .iter()
            .map(|(up, keys)| format!("{} from {up}'s preview", keys.join(", ")))
            .collect();
        if !mocks.is_empty() {
            parts.push(format!("mocks: {}", mocks.join(", ")));
        }
        format!("projected: {}", parts.join("; "))
    }
}

impl Previews {
    pub fn publish(&self, path: &str, known: Map<String, Value>) {
        if let Ok(mut m) = self.known.lock() {
            m.insert(path.to_string(), known);
        }
        self.done.notify_all();
    }
}

impl StepRunner<'_> {
    /// Tells any projected dependent waiting for `path` what its preview knew. Only a
    /// preview projects: for any other operation nothing is kept (a run of thousands of
    /// projects would hold an entry for each).
    pub(super) fn publish_preview(&self, path: &str, known: Map<String, Value>) {
        if self.ctx.op == Operation::Preview {
            self.previews.publish(path, known);
        }
    }

    /// Waits for the preview of `upstream` in this run and returns what it knew; `None`
    /// when it is not part of this run or the run was cancelled.
    fn preview_of(&self, upstream: &str) -> Option<Map<String, Value>> {
        if !self.ctx.plan.nodes.iter().any(|n| n.path == upstream) {
            return None;
        }
        let mut known = self.previews.known.lock().ok()?;
        loop {
            if let Some(k) = known.get(upstream) {
                return Some(k.clone());
            }
            if self.control.is_cancelled() {
                return None;
            }
            known = self
                .previews
                .done
                .wait_timeout(known, Duration::from_millis(200))
                .ok()?
                .0;
        }
    }

    /// Preview of `path`, whose upstreams `undeployed` were never deployed: the
    /// projected value of each input from them, or how the step ends (`blocked`, with
    /// why).
    pub(super) fn project(
        &self,
        path: &str,
        entry: &Entry,
        undeployed: &[String],
    ) -> Result<Projected, Box<Ran>> {
        let stack = &self.ctx.stack;
        // First what no projection can help: the backend read, a need with no input.
        for up in undeployed {
            let why = match self.ctx.reads_backend.get(path) {
                Some(Some(targets)) if targets.contains(up) => Some(format!(
                    "reads {up} through a StackReference, and {up} has never been deployed on stack `{stack}`: the backend has nothing to read yet (a StackReference cannot be projected)"
                )),
                // A reference whose stack the scanner cannot read may read any stack:
                // said as such, not as a read of this one.
                Some(None) => Some(format!(
                    "has a StackReference whose stack strata cannot tell (it may read {up}), and {up} has never been deployed on stack `{stack}`: a StackReference cannot be projected (`reads:` on its entry names what it reads)"
                )),
                _ => None,
            };
            if let Some(why) = why {
                return Err(Box::new(Ran::blocked_because(up, why)));
            }
            let declared = self
                .ctx
                .declared_needs
                .get(path)
                .is_some_and(|n| n.contains(up));
            if declared && !entry.inputs.iter().any(|i| &i.project == up) {
                return Err(Box::new(Ran::blocked_because(
                    up,
                    format!(
                        "needs {up}, which has never been deployed on stack `{stack}`; it takes no `inputs:` from it, so nothing can be projected"
                    ),
                )));
            }
        }
        let mut projected = Projected::default();
        for up in undeployed {
            let known = self.preview_of(up).unwrap_or_default();
            if self.control.is_cancelled() {
                return Err(Box::new(Ran::new(
                    Status::Cancelled,
                    Some("cancelled".into()),
                    None,
                )));
            }
            let mocks = self.ctx.mocks.get(up);
            let mut unknown = Vec::new();
            for input in entry.inputs.iter().filter(|i| &i.project == up) {
                let value = match (
                    known.get(&input.output),
                    mocks.and_then(|m| m.get(&input.output)),
                ) {
                    (Some(v), _) => (v.clone(), Source::Preview, up.clone()),
                    (None, Some(v)) => (v.clone(), Source::Mock, up.clone()),
                    (None, None) => {
                        unknown.push(input.output.as_str());
                        continue;
                    }
                };
                projected.values.insert(input.key.clone(), value);
            }
            if !unknown.is_empty() {
                return Err(Box::new(Ran::blocked_because(
                    up,
                    format!(
                        "needs {up}, which has never been deployed on stack `{stack}`, and its preview cannot tell {} (known only once deployed); `mock_outputs:` on its entry would let this preview go on",
                        unknown
                            .iter()
                            .map(|o| format!("`{o}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )));
            }
        }
        Ok(projected)
    }
}

impl StepRunner<'_> {
    /// Prepares a preview of the project at `path` (nothing for another operation): a
    /// command project without a `preview:` command is skipped (held by its fingerprint
    /// alone under a bundle); one with never-deployed upstreams is projected on what they
    /// know; one that feeds a projection saves its plan. The project's projection, if any.
    pub(super) fn before_preview(
        &self,
        path: &str,
        entry: &Entry,
        kind: &ProjectKind,
        job: &mut Job,
        sink: &mut dyn FnMut(Progress),
    ) -> Result<Option<Projected>, Box<Ran>> {
        if self.ctx.op == Operation::Preview {
            if let ProjectKind::Command(spec) = kind
                && spec.preview.is_none()
            {
                // Held by its fingerprint alone under a bundle, with what its upstreams
                // left (none yet, when one was never deployed: applying then refuses).
                let _ = self.hold_to_bundle(path, sink);
                return Err(Box::new(Ran::new(
                    Status::Skipped,
                    Some("no `preview:` command in its Strata.yaml: nothing to preview".into()),
                    None,
                )));
            }
            let undeployed = self
                .undeployed_upstreams(path, sink)
                .map_err(|(status, msg)| Box::new(Ran::new(status, Some(msg), None)))?;
            if !undeployed.is_empty() {
                let p = self.project(path, entry, &undeployed)?;
                if let Ok(mut m) = self.projected.lock() {
                    m.insert(path.to_string(), p);
                }
            }
            // Saved also where other projects read its outputs: the reads its update
            // would break are found in that plan (`contracts`).
            let read = matches!(kind, ProjectKind::Pulumi { .. }) && self.is_read(path);
            if job.plan.is_none() && (self.feeds_a_projection(path) || read) {
                job.plan = self.projection_plan(job);
            }
        }
        Ok(self
            .projected
            .lock()
            .ok()
            .and_then(|m| m.get(path).cloned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_names_preview_values_and_mocks() {
        let mut p = Projected::default();
        p.values.insert(
            "lp-app:hostname".into(),
            (Value::from("h"), Source::Preview, "lp/ingress".into()),
        );
        p.values.insert(
            "lp-app:image".into(),
            (Value::from("i"), Source::Preview, "lp/ingress".into()),
        );
        p.values.insert(
            "lp-app:log_dir".into(),
            (Value::from("/tmp"), Source::Mock, "lp/logstore".into()),
        );
        assert_eq!(
            p.describe(),
            "projected: lp-app:hostname, lp-app:image from lp/ingress's preview; mocks: lp-app:log_dir (lp/logstore)"
        );
    }

    #[test]
    fn a_published_preview_wakes_who_waits() {
        let p = Previews::default();
        std::thread::scope(|s| {
            let h = s.spawn(|| {
                let mut k = p.known.lock().unwrap();
                while !k.contains_key("a") {
                    k = p.done.wait(k).unwrap();
                }
                k["a"].clone()
            });
            let mut m = Map::new();
            m.insert("x".into(), Value::from(1));
            p.publish("a", m.clone());
            assert_eq!(h.join().unwrap(), m);
        });
    }
}
