//! A plan bundle as one step sees it: `preview --save-plan` has Pulumi write the
//! project's update plan into the bundle and notes the digest of every upstream's
//! outputs the project would read; `up --plan` holds the project to its plan and stops
//! it, before anything runs, when an upstream's outputs came out other than that.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::{Ran, StepRunner};
use crate::bundle::Manifest;
use crate::engine::{PlanFile, Progress};
use crate::run::events::Status;

/// The bundle a run writes or applies.
pub enum PlanBundle {
    /// `preview --save-plan DIR`.
    Save { dir: PathBuf },
    /// `up --plan DIR`, with the bundle's manifest.
    Apply {
        dir: PathBuf,
        manifest: Box<Manifest>,
        /// The steps its preview could not preview run without a plan (the `up` a
        /// terminal user said yes to, `Request::unbound_blocked`).
        unbound_blocked: bool,
    },
}

impl PlanBundle {
    /// The update plan file a Pulumi project's job writes or is held to: always the one
    /// the preview writes for `path`, inside the bundle (never a path the manifest
    /// names, and never none under `up --plan`, where every Pulumi project is held to a
    /// plan: but for a blocked one of an `up` a terminal user said yes to).
    pub fn plan_file(&self, path: &str) -> Option<PlanFile> {
        let file = |dir: &PathBuf| dir.join(crate::bundle::plan_path(path));
        Some(match self {
            PlanBundle::Save { dir } => PlanFile::Save(file(dir)),
            PlanBundle::Apply {
                unbound_blocked: true,
                manifest,
                ..
            } if manifest.is_blocked(path) => return None,
            PlanBundle::Apply { dir, .. } => PlanFile::Apply(file(dir)),
        })
    }
}

/// The digest of a project's outputs as a bundle compares them: secret outputs count by
/// name only (their values are the stack's; Pulumi's plan checks them where they land)
/// and a store secret repeated in a plain output by its digest under the store's key,
/// so the same outputs digest alike on the machine that previews and the one that
/// applies.
fn digest(
    values: &Map<String, Value>,
    secret: &std::collections::BTreeSet<String>,
    mask: impl Fn(&Value) -> Value,
) -> String {
    let shown: BTreeMap<&String, Value> = values
        .iter()
        .map(|(k, v)| {
            let v = if secret.contains(k) {
                Value::String(crate::secrets::redact::MASK.into())
            } else {
                mask(v)
            };
            (k, v)
        })
        .collect();
    crate::util::sha256_hex(serde_json::to_string(&shown).unwrap_or_default().as_bytes())
}

impl StepRunner<'_> {
    /// The digest of each upstream's outputs as `path` would read them now.
    fn upstream_digests(
        &self,
        path: &str,
        log: &mut dyn FnMut(Progress),
    ) -> Result<BTreeMap<String, String>, String> {
        let secrets = self.store_secrets();
        let mut out = BTreeMap::new();
        for up in self.ctx.upstreams.get(path).into_iter().flatten() {
            // What dependents read of it, as every other reader asks (the outputs are
            // kept for the rest of the run: never a masked copy where a secret is wired).
            let needed = self.ctx.needed.get(up).cloned().unwrap_or_default();
            let wanted: Vec<&str> = needed.iter().map(String::as_str).collect();
            let o = self
                .outputs_of(up, path, &wanted, log)
                .map_err(|(m, _)| m)?;
            let d = digest(&o.values, &o.secret, |v| self.mask_secrets(v, &secrets));
            out.insert(up.clone(), d);
        }
        Ok(out)
    }

    /// Under a bundle, before `path` runs: notes what its upstreams left (a preview) or
    /// stops it when that moved since the preview (`up --plan`).
    pub(super) fn hold_to_bundle(
        &self,
        path: &str,
        log: &mut dyn FnMut(Progress),
    ) -> Result<(), Box<Ran>> {
        let Some(bundle) = &self.ctx.bundle else {
            return Ok(());
        };
        if let PlanBundle::Apply { manifest, .. } = bundle
            && (manifest.is_projected(path) || manifest.is_blocked(path))
        {
            // Previewed on projected outputs, or not at all: no digest to compare with.
            // A projected one is previewed again on the real ones (`review_projected`);
            // a blocked one runs here only in an `up` a terminal user said yes to.
            return Ok(());
        }
        let now = self
            .upstream_digests(path, log)
            .map_err(|m| Box::new(Ran::new(Status::Failed, Some(m), None)))?;
        let state = self.state_written_at(path);
        match bundle {
            PlanBundle::Save { .. } => {
                if let Ok(mut seen) = self.bundle_reads.lock() {
                    seen.insert(path.to_string(), now);
                }
                if let (Some(state), Ok(mut states)) = (state, self.bundle_states.lock()) {
                    states.insert(path.to_string(), state);
                }
                Ok(())
            }
            PlanBundle::Apply { manifest, .. } => {
                let then = manifest.steps.get(path).and_then(|s| s.state.clone());
                if let Some(why) = state_moved(path, self.ctx.stack_of(path), then, state) {
                    return Err(Box::new(Ran::new(Status::Failed, Some(why), None)));
                }
                let then = manifest
                    .steps
                    .get(path)
                    .map(|s| s.upstream_outputs.clone())
                    .unwrap_or_default();
                let moved: Vec<&String> = then
                    .keys()
                    .chain(now.keys())
                    .filter(|u| then.get(*u) != now.get(*u))
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                if moved.is_empty() {
                    return Ok(());
                }
                let names: Vec<&str> = moved.iter().map(|s| s.as_str()).collect();
                Err(Box::new(Ran::new(
                    Status::Failed,
                    Some(format!(
                        "the outputs of {} changed since the preview that made this bundle, so the plan of {path} no longer holds: nothing of it was applied (what ran before it was). Preview again (strata preview --save-plan DIR) to review what {path} does with the new outputs, and apply that bundle.",
                        names.join(", ")
                    )),
                    None,
                )))
            }
        }
    }

    /// Under `up --plan`, a Pulumi project whose reviewed preview ran on projected
    /// inputs (an upstream was not deployed yet), now that its upstreams are up: previewed
    /// again on their real outputs (`job` has them). When that preview plans what the
    /// reviewed plan does (as an approval's check compares plans), the reviewed plan is
    /// applied (`None`: the job keeps it); otherwise the fresh plan waits at the project's
    /// gate for `strata approve`, and an approval of it is applied (`at_the_gate`).
    pub(super) fn review_projected(
        &self,
        i: usize,
        job: &crate::engine::Job,
        emit: &(dyn Fn(crate::run::events::RunEvent) + Sync),
        sink: &mut dyn FnMut(Progress),
    ) -> Result<Option<PlanFile>, Box<Ran>> {
        let path = &self.ctx.plan.nodes[i].path;
        let (Some(PlanBundle::Apply { manifest, .. }), Some(PlanFile::Apply(reviewed))) =
            (&self.ctx.bundle, &job.plan)
        else {
            return Ok(None);
        };
        if !manifest.is_projected(path) {
            return Ok(None);
        }
        let fresh = job.scratch_dir.join("real-outputs-plan.json");
        sink(Progress::Line(
            "its reviewed plan was made on projected inputs: previewing it again on its upstreams' real outputs".into(),
        ));
        let now = self.preview_saving(i, job, &fresh, emit, sink)?;
        if crate::gates::approvals::same_plan(reviewed, &fresh) {
            sink(Progress::Line(
                "the same changes as the reviewed plan: applying the reviewed plan".into(),
            ));
            return Ok(None);
        }
        let reviewed_changes = std::fs::read_to_string(reviewed)
            .ok()
            .and_then(|t| crate::engine::digest::plan_changes(&t))
            .unwrap_or_default();
        let then = crate::gates::approvals::Summary::of(&reviewed_changes);
        let hold = crate::gates::denial::Denial {
            rule: "its review".into(),
            reason: format!(
                "its plan on its upstreams' real outputs is not the one reviewed on projected inputs ({})",
                then.changed_to(&crate::gates::approvals::Summary::of(&now))
            ),
            resources: Vec::new(),
        };
        self.at_the_gate(i, &fresh, now, hold, sink).map(Some)
    }

    /// When `path`'s Pulumi stack state was last written (see
    /// [`crate::engine::pulumi::checkpoint_written_at`]); `None` for a command project, or
    /// where strata does not read checkpoints.
    fn state_written_at(&self, path: &str) -> Option<String> {
        let project = self.ctx.projects.get(path)?;
        if !matches!(project.kind, crate::workspace::ProjectKind::Pulumi { .. }) {
            return None;
        }
        let job = self.job_for(path, crate::engine::Operation::Preview)?;
        crate::engine::pulumi::checkpoint_written_at(&job)
    }

    /// When each Pulumi stack's state was last written as its `preview --save-plan` began.
    pub fn bundle_states(&self) -> BTreeMap<String, String> {
        self.bundle_states
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }

    /// What each step of a `preview --save-plan` saw of its upstreams' outputs.
    pub fn bundle_reads(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.bundle_reads
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }
}

/// Why `path`'s plan no longer holds when its stack's state was written since the
/// preview (`then`, as the bundle has it) and now (`now`); `None` when it was not, or when
/// either is unknown (a bundle made before this check, a backend strata does not read).
fn state_moved(
    path: &str,
    stack: &str,
    then: Option<String>,
    now: Option<String>,
) -> Option<String> {
    let (then, now) = (then?, now?);
    if then == now {
        return None;
    }
    let at = |t: &str| match t {
        "" => "no deployment".to_string(),
        t => format!("state written at {t}"),
    };
    Some(format!(
        "the stack {stack} of {path} changed since the preview that made this bundle ({} then, {} now: an update, refresh, import or state edit made elsewhere), so its plan would undo that: nothing of it was applied (what ran before it was). See what changed with `pulumi stack history --stack {stack}` in its folder, then preview again (strata preview --save-plan DIR) and apply that bundle.",
        at(&then),
        at(&now)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under `up --plan` a Pulumi project is held to the plan the preview wrote for it,
    /// whatever the manifest names (another path, or none).
    #[test]
    fn a_pulumi_project_is_held_to_the_plan_the_preview_wrote() {
        let mut manifest: crate::bundle::Manifest = serde_json::from_value(serde_json::json!({
            "version": crate::bundle::VERSION, "id": "20261126T000000.000Z-1",
            "created_at": "", "strata_version": "", "git": null, "stack": "dev",
            "profile": "p", "profile_hash": "", "stack_config_hash": "", "files": {},
            "steps": {"infra/vpc": {"kind": "command", "status": "succeeded",
                "fingerprint": null, "plan": "/etc/passwd"}}
        }))
        .unwrap();
        let dir = PathBuf::from("/b");
        let want = dir.join("plans/infra_2fvpc.json");
        for plan in [Some("/etc/passwd".to_string()), None] {
            manifest.steps.get_mut("infra/vpc").unwrap().plan = plan;
            let b = PlanBundle::Apply {
                dir: dir.clone(),
                manifest: Box::new(manifest.clone()),
                unbound_blocked: false,
            };
            assert_eq!(
                b.plan_file("infra/vpc"),
                Some(PlanFile::Apply(want.clone()))
            );
        }
    }

    #[test]
    fn a_state_written_since_the_preview_moves_the_plan_and_an_unknown_one_does_not() {
        let t = |s: &str| Some(s.to_string());
        assert_eq!(state_moved("a", "dev", t("T1"), t("T1")), None);
        assert_eq!(
            state_moved("a", "dev", None, t("T1")),
            None,
            "an older bundle"
        );
        assert_eq!(
            state_moved("a", "dev", t("T1"), None),
            None,
            "a backend not read"
        );
        let why = state_moved("a", "dev", t(""), t("T2")).unwrap();
        assert!(
            why.contains("no deployment then, state written at T2 now"),
            "{why}"
        );
        assert!(why.contains("pulumi stack history --stack dev"), "{why}");
    }

    #[test]
    fn secret_outputs_digest_by_name_and_plain_ones_by_value() {
        let values: Map<String, Value> =
            serde_json::from_str(r#"{"id":"vpc-1","token":"s3cr3t"}"#).unwrap();
        let secret = ["token".to_string()].into();
        let d = digest(&values, &secret, Value::clone);
        let mut masked = values.clone();
        masked.insert("token".into(), Value::String("[secret]".into()));
        assert_eq!(
            d,
            digest(&masked, &secret, Value::clone),
            "a secret's value never counts"
        );
        let mut other = values.clone();
        other.insert("id".into(), Value::String("vpc-2".into()));
        assert_ne!(d, digest(&other, &secret, Value::clone));
        assert_ne!(d, digest(&values, &Default::default(), Value::clone));
    }
}
