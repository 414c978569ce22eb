//! The built-in step that writes the store's secrets into the cluster, as a Kubernetes
//! Secret per namespace, through a client on a tokio runtime of its own.

use std::collections::{BTreeMap, BTreeSet};

use super::{Ctx, Ran};
use crate::engine::Operation;
use crate::kube::target::{self, ClusterTarget, Lookup, Written};
use crate::run::events::Status;
use crate::workspace::profile::ClusterSource;

/// Writes the secrets into the cluster (up only); `log` gets the step's lines.
pub(super) fn run(ctx: &Ctx, log: &mut dyn FnMut(&str)) -> Ran {
    let (status, message) = apply(ctx, log);
    Ran::new(status, message, None)
}

fn apply(ctx: &Ctx, log: &mut dyn FnMut(&str)) -> (Status, Option<String>) {
    if let Some(done) = not_up(ctx) {
        return done;
    }
    let target = match stacks_cluster(ctx) {
        Ok(t) => t,
        Err(why) => return (Status::Failed, Some(format!("{why}. Nothing was written."))),
    };
    log(&format!(
        "writing {} secret(s) into Secret `{}` in {target}",
        ctx.secrets.len(),
        ctx.secret_name,
    ));
    let state_file = ctx.state_dir.join("kubernetes-namespaces.json");
    let stale = stale_namespaces(ctx, &target, &state_file, log);
    match write_secrets(ctx, &target, &stale) {
        Ok(report) => {
            let namespaces = report.namespaces();
            let written = Written {
                server: target.server.clone(),
                context: target.context.clone(),
                namespaces: namespaces.clone(),
            };
            let _ = crate::files::write_atomic(
                &state_file,
                serde_json::to_string(&written)
                    .unwrap_or_default()
                    .as_bytes(),
                None,
            );
            let line = format!(
                "{} in {} namespace(s){}",
                if report.changed() {
                    "applied"
                } else {
                    "unchanged"
                },
                namespaces.len(),
                if stale.is_empty() {
                    String::new()
                } else {
                    format!(", removed from {}", stale.join(", "))
                }
            );
            log(&line);
            (Status::Succeeded, Some(line))
        }
        Err(e) => (Status::Failed, Some(e)),
    }
}

/// What the step says for an operation other than `up`, which writes nothing.
fn not_up(ctx: &Ctx) -> Option<(Status, Option<String>)> {
    let message = match ctx.op {
        Operation::Up => return None,
        Operation::Destroy => "left to the cluster's own teardown".to_string(),
        Operation::Preview => format!(
            "would write {} secret(s) into Secret `{}`",
            ctx.secrets.len(),
            ctx.secret_name
        ),
        Operation::Refresh => "nothing to refresh".to_string(),
    };
    Some((Status::Succeeded, Some(message)))
}

/// The namespaces strata wrote the Secret into before (recorded in `state_file`, for the
/// same cluster) that no secret names now: the Secret is removed from them.
fn stale_namespaces(
    ctx: &Ctx,
    target: &ClusterTarget,
    state_file: &std::path::Path,
    log: &mut dyn FnMut(&str),
) -> Vec<String> {
    let (previous, note) =
        Written::previous(std::fs::read_to_string(state_file).ok().as_deref(), target);
    if let Some(note) = note {
        log(&note);
    }
    let wanted: BTreeSet<String> = ctx
        .secrets
        .keys()
        .filter_map(|k| k.split_once(':').map(|(ns, _)| ns.to_string()))
        .collect();
    previous
        .into_iter()
        .filter(|ns| !wanted.contains(ns))
        .collect()
}

/// Applies the Secret in every namespace its secrets name and removes it from `stale`,
/// through a client on a runtime of its own.
fn write_secrets(
    ctx: &Ctx,
    target: &ClusterTarget,
    stale: &[String],
) -> Result<crate::kube::secrets::ApplyReport, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the Kubernetes client: {e}"))?;
    rt.block_on(async {
        let client = crate::kube::secrets::client::client_from_kubeconfig(
            Some(&target.kubeconfig),
            Some(&target.context),
            &ctx.env,
        )
        .await?;
        crate::kube::secrets::apply::apply_secrets(
            client,
            &ctx.secret_name,
            &ctx.secrets,
            stale,
            ctx.force_conflicts,
        )
        .await
    })
    .map_err(|e| format!("writing secrets into the cluster failed: {e}"))
}

/// The stack's cluster (see `crate::kube::target`), or why strata cannot know it.
fn stacks_cluster(ctx: &Ctx) -> Result<ClusterTarget, String> {
    let Some(source) = &ctx.cluster else {
        return Err(
            "the profile does not say which cluster is the stack's (a `cluster:` or one kubeconfig hook)"
                .into(),
        );
    };
    let config: BTreeMap<String, String> = ctx
        .stack_config
        .config()
        .iter()
        .filter_map(|(k, v)| {
            Some((
                k.as_str()?.to_string(),
                crate::workspace::stack_config::scalar_string(v)?,
            ))
        })
        .collect();
    let at = Lookup {
        stack: &ctx.stack,
        root: &ctx.root,
        state_dir: &ctx.state_dir,
        config: &config,
        env: &ctx.env,
    };
    match source {
        ClusterSource::Profile(c) => target::from_profile(&c.kubeconfig, c.context.as_deref(), &at),
        ClusterSource::Hook { project } => target::from_hook(project, &at),
    }
}
