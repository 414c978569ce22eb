//! `up`, `preview`, `refresh`, `destroy`: the run pipeline's stages, in order.

use crate::display::Reporter;
use crate::engine::Operation;
use crate::error::{Result, exit};
use crate::pipeline::{Request, ask, execute, lock, preflight, record, resolve, write};
use crate::settings::Settings;
use crate::workspace::Target;

pub fn run(target: &Target, settings: &Settings, req: Request) -> Result<i32> {
    let mut r = resolve::resolve(target, settings, &req, None)?;
    let mut pre = preflight::check(&r)?;
    if r.stack.is_none() {
        // A first run on a terminal with no stack named anywhere: the one question that
        // comes before the rest is resolved (the stack's own config may exist).
        let name = ask::stack_name()?;
        r = resolve::resolve(target, settings, &req, Some(name))?;
        pre = preflight::check(&r)?;
    }
    if let Some(why) = &r.nothing_to_do {
        eprintln!("{why}");
        return Ok(exit::OK);
    }
    // A destroy deletes what `deny: [delete]` keeps: refused unless overridden.
    if r.req.op == Operation::Destroy
        && !r.req.orphans
        && !r.req.override_deny
        && let Some(why) = crate::plan::rules::destroy_refusal(&r.plan)
    {
        eprintln!("{why}");
        return Ok(exit::DENIED);
    }
    let mut answers = ask::ask(&r, settings)?;
    if !answers.confirmed {
        eprintln!("Nothing was destroyed.");
        return Ok(exit::FAILED);
    }
    let held = if r.req.op == Operation::Preview {
        // A preview changes nothing and takes no stack lock for its run; what it writes
        // (its answers, the digest of the store it opened) is written under the lock,
        // taken without waiting and released before it runs. While another strata
        // holds the lock, nothing is written: the answers serve this preview only.
        // A preview with nothing to write takes no lock at all.
        let writes = answers.writes_anything() || answers.secrets.read.is_some();
        let saving = if writes {
            lock::try_acquire(&r).map(Some)
        } else {
            Ok(None)
        };
        match saving {
            Ok(saving) => {
                write::write(&mut r, &mut answers)?;
                drop(saving);
            }
            Err(e) if e.exit_code() == exit::CONFIG => {
                if answers.writes_anything() {
                    pre.notices.push(format!(
                        "note: the answers of this preview are not saved: {}",
                        e.message.lines().next().unwrap_or("the stack is in use")
                    ))
                }
            }
            Err(e) => return Err(e),
        }
        lock::signals_only()?
    } else {
        let held = lock::acquire(&r)?;
        held.caught.check("while taking the stack lock")?;
        write::write(&mut r, &mut answers)?;
        held.caught.check("after saving the answers")?;
        held
    };
    let reporter = Reporter::stdout(settings.display);
    let done = execute::execute(&r, pre, answers, held, &reporter, settings.verbose)?;
    record::finish(&r, done, &reporter, settings)
}
