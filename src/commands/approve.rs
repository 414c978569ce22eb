//! `strata approve PROJECT`: shows the plan an `approve:` rule holds for a project and,
//! once confirmed, records who approved it, when and its digest, in the journal and
//! beside the held plan (in the stack's bucket too, on a shared backend), for the next
//! `up` on any machine to apply.

use crate::error::{Error, Result};
use crate::gates::approvals::{Approval, Gate, Held};
use crate::settings::Settings;
use crate::state::journal::{Journal, Record};
use crate::workspace::Target;

pub fn run(target: &Target, settings: &Settings, project: &str, yes: bool) -> Result<i32> {
    let loaded = super::load(target, false)?;
    let Some(stack) = loaded.stack.clone() else {
        return Err(crate::workspace::no_stack_error(&loaded.ws));
    };
    if !loaded.plan.nodes.iter().any(|n| n.path == project) {
        return Err(Error::config(format!(
            "there is no project `{project}` in this profile. `strata show -s {stack}` lists them; approve one by its path."
        )));
    }
    let state_dir = loaded.ws.state_dir(&stack);
    let gate = Gate::of(&state_dir, project).shared_in(shared_bucket(&loaded)?, &stack, project);
    let held = held_plan(&gate, project, &stack)?;
    eprintln!("{}", describe(&held));
    if let Some((_, a)) = gate.approval() {
        eprintln!(
            "already approved by {} at {}: the next `strata up -s {stack}` applies it.",
            a.by, a.at
        );
        return Ok(0);
    }
    if !yes {
        super::typed_confirmation(
            &super::Typed {
                expected: project,
                named: "the project's path",
                action: format!("approve the plan of `{project}`"),
                with_yes: format!("strata approve {project} -s {stack} --yes"),
            },
            settings.interactive,
        )?;
    }
    let (user, host) = crate::state::lock::lease::who(&std::env::vars().collect())?;
    let approval = Approval {
        by: format!("{user}@{host}"),
        at: crate::util::rfc3339(crate::util::now_ms()),
        digest: held.digest.clone(),
    };
    Journal::new(&state_dir).append(&Record::Approval {
        run_id: held.run_id.clone(),
        project: project.to_string(),
        rule: held.rule.clone(),
        by: approval.by.clone(),
        at: approval.at.clone(),
        digest: approval.digest.clone(),
    })?;
    gate.approve(&approval)?;
    eprintln!(
        "approved by {}: the next `strata up -s {stack}` applies this plan if a fresh preview plans the same changes, and otherwise holds the new plan for a new approval.",
        approval.by
    );
    Ok(0)
}

/// The plan held for `project`, its file intact.
fn held_plan(gate: &Gate, project: &str, stack: &str) -> Result<Held> {
    gate.held_intact()?.ok_or_else(|| {
        Error::config(format!(
            "nothing awaits an approval for `{project}` on stack `{stack}`: only a project an `approve:` rule held in an `up` does (its status is `awaiting`). Run `strata up -s {stack}` first."
        ))
    })
}

/// The stack's bucket, when its backend is one: approvals are kept there for every
/// machine.
fn shared_bucket(
    loaded: &super::Loaded,
) -> Result<Option<std::sync::Arc<crate::backend::Backend>>> {
    let env = crate::pipeline::env::shared_env(&loaded.ws, &loaded.backends);
    Ok(match crate::backend::Where::of(&env)? {
        crate::backend::Where::S3(b) => Some(b),
        _ => None,
    })
}

/// What the held plan changes: the rule, the counts and each resource.
fn describe(held: &Held) -> String {
    let mut s = format!(
        "`{}` on stack `{}` is held by {}: {} ({}), planned by run {} at {}; plan sha256 {}",
        held.project,
        held.stack,
        held.rule,
        held.reason,
        held.summary.short(),
        held.run_id,
        held.held_at,
        held.digest
    );
    for (op, urn) in &held.summary.steps {
        s.push_str(&format!(
            "\n  {op} {}",
            crate::engine::digest::short_urn(urn)
        ));
    }
    s
}
