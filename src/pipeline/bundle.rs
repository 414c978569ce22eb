//! Plan bundles at the end of a preview: `preview --save-plan` writes the summary and
//! the manifest (with the digest of every file). (What `up --plan` checks before
//! anything runs is [`crate::bundle::check`]; an `up --plan` that applied every
//! project marks the bundle applied before it releases the stack lock, in `execute`.)

use std::collections::BTreeMap;
use std::path::Path;

use crate::bundle::{self, Manifest, Step};
use crate::error::Result;
use crate::plan::NodeKind;
use crate::run::events::Status;
use crate::util::{now_ms, rfc3339};
use crate::workspace::ProjectKind;

use super::execute::Executed;
use super::resolve::Resolved;

/// `preview --save-plan DIR`: the manifest of what the preview saw, and its summary.
pub fn write(
    r: &Resolved,
    dir: &Path,
    done: &Executed,
    summary_md: &str,
    git: Option<bundle::Git>,
) -> Result<()> {
    let stack = r.stack();
    let mut steps = BTreeMap::new();
    for (i, node) in done.plan.nodes.iter().enumerate() {
        let res = &done.results[i];
        let preview = match node.project.as_ref().map(|p| &p.kind) {
            Some(ProjectKind::Command(spec)) => spec.preview.clone(),
            _ => None,
        };
        // A preview on projected inputs is not yet the plan of what will be deployed: its
        // status says so, and `up --plan` previews it again on its upstreams' real
        // outputs before applying its plan (`run::step::bundle`).
        let projected = res.projected && res.status == Status::Succeeded;
        let plan = (node.kind == NodeKind::Pulumi && res.status == Status::Succeeded)
            .then(|| bundle::plan_path(&node.path))
            .filter(|p| dir.join(p).is_file());
        steps.insert(
            node.path.clone(),
            Step {
                kind: bundle::kind_of(node.project.as_deref()).into(),
                status: if projected {
                    bundle::PROJECTED.into()
                } else {
                    res.status.as_str().into()
                },
                fingerprint: done.fingerprints.get(&node.path).cloned(),
                plan,
                preview,
                upstream_outputs: done
                    .bundle_reads
                    .get(&node.path)
                    .cloned()
                    .unwrap_or_default(),
                state: done.bundle_states.get(&node.path).cloned(),
                changes: res.changes.as_ref().map(crate::engine::digest::counts_json),
                message: res.message.clone().map(|m| done.redactor.redact(&m)),
            },
        );
    }
    crate::files::write_atomic(
        &dir.join(bundle::SUMMARY),
        summary_md.as_bytes(),
        Some(0o644),
    )?;
    let manifest = Manifest {
        version: bundle::VERSION,
        id: done.run_id.clone(),
        created_at: rfc3339(now_ms()),
        strata_version: env!("CARGO_PKG_VERSION").into(),
        git,
        stack: stack.into(),
        profile: r.profile.name.clone(),
        profile_hash: bundle::profile_hash(&r.profile, &r.ws.root),
        stack_config_hash: bundle::file_hash(&r.ws.stack_config_path(stack)),
        steps,
        // Last: every file the preview wrote (its plans, the summary).
        files: bundle::contents::digests(dir)?,
    };
    manifest.write(dir)
}
