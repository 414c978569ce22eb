//! `strata unlock`: shows who holds the stack's lease in its shared backend and frees it
//! once the stack's name is typed (or `--yes`).

use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::state::lock::lease::{self, Where};
use crate::workspace::Target;

pub fn run(target: &Target, settings: &Settings, yes: bool) -> Result<i32> {
    let ws = super::open_workspace(target)?;
    let Some(stack) = ws.stack_to_read(target.stack.as_deref())? else {
        return Err(crate::workspace::no_stack_error(&ws));
    };
    let env = crate::pipeline::env::pulumi_env(&ws);
    let url = crate::secrets::url::masked(
        env.get("PULUMI_BACKEND_URL")
            .map(String::as_str)
            .unwrap_or(""),
    );
    let backend = match Where::of(&env)? {
        Where::S3(b) => b,
        _ => {
            eprintln!(
                "stack `{stack}`: its Pulumi backend {url} holds no lease of strata's (only s3:// backends do), so there is nothing to free. This checkout's lock, .strata/{stack}/lock, is held only while its strata runs, and goes with it."
            );
            return Ok(0);
        }
    };
    let Some(found) =
        lease::read(&backend, &stack)?.filter(|f| !f.readable || !f.holders.is_empty())
    else {
        eprintln!(
            "stack `{stack}` has no lease held in {}: nothing to free.",
            backend.name
        );
        return Ok(0);
    };
    let who = match found.readable {
        false => format!(
            "a lease strata cannot read ({})",
            lease::key(&backend, &stack)
        ),
        true => found
            .holders
            .iter()
            .map(lease::Holder::describe)
            .collect::<Vec<_>>()
            .join("; "),
    };
    eprintln!(
        "stack `{stack}`'s lease in {} is held by {who}.\n  Freeing it lets another run start now; if that run is still alive, it is cancelled at its next renewal.",
        backend.name
    );
    if !yes {
        super::typed_confirmation(
            &super::Typed {
                expected: &stack,
                named: "the stack's name",
                action: format!("free the lease of stack `{stack}`"),
                with_yes: format!("strata unlock -s {stack} --yes"),
            },
            settings.interactive,
        )?;
    }
    if lease::free(&backend, &stack, &found)? {
        eprintln!("freed the lease of stack `{stack}`.");
        Ok(0)
    } else {
        Err(Error::config(format!(
            "the lease of stack `{stack}` changed while you confirmed (renewed or taken by another run): it was not freed. Run `strata unlock -s {stack}` again to see its holder now."
        )))
    }
}
