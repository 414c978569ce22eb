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
    },
}

impl PlanBundle {
    /// The update plan file a Pulumi project's job writes or is held to: always the one
    /// the preview writes for `path`, inside the bundle (never a path the manifest
    /// names, and never none: under `up --plan` every Pulumi project is held to a plan).
    pub fn plan_file(&self, path: &str) -> Option<PlanFile> {
        let file = |dir: &PathBuf| dir.join(crate::bundle::plan_path(path));
        Some(match self {
            PlanBundle::Save { dir } => PlanFile::Save(file(dir)),
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
        let now = self
            .upstream_digests(path, log)
            .map_err(|m| Box::new(Ran::new(Status::Failed, Some(m), None)))?;
        match bundle {
            PlanBundle::Save { .. } => {
                if let Ok(mut seen) = self.bundle_reads.lock() {
                    seen.insert(path.to_string(), now);
                }
                Ok(())
            }
            PlanBundle::Apply { manifest, .. } => {
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

    /// What each step of a `preview --save-plan` saw of its upstreams' outputs.
    pub fn bundle_reads(&self) -> BTreeMap<String, BTreeMap<String, String>> {
        self.bundle_reads
            .lock()
            .map(|m| m.clone())
            .unwrap_or_default()
    }
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
            };
            assert_eq!(
                b.plan_file("infra/vpc"),
                Some(PlanFile::Apply(want.clone()))
            );
        }
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
