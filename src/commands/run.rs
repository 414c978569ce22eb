//! `up`, `preview`, `refresh`, `destroy`: the run pipeline's stages, in order.

use crate::display::Reporter;
use crate::engine::Operation;
use crate::error::{Result, exit};
use crate::pipeline::{Request, ask, execute, lock, preflight, record, resolve, write};
use crate::settings::Settings;
use crate::workspace::Target;

pub fn run(target: &Target, settings: &Settings, req: Request) -> Result<i32> {
    if shows_and_asks(&req, settings) {
        return up_as_pulumi_does(target, settings, req);
    }
    run_request(target, settings, req)
}

/// Whether this `up` previews everything, shows it and asks once before it changes
/// anything, as `pulumi up` does: on a terminal, without `--yes`, `--plan` (a plan
/// already reviewed), `--resume` or `--changed` (which decide what runs as they go), and
/// not for JSON events. Off a terminal (`--non-interactive`, CI) an `up` asks nothing.
fn shows_and_asks(req: &Request, settings: &Settings) -> bool {
    req.op == Operation::Up
        && settings.interactive
        && !settings.json
        && !req.args.yes
        && req.plan.is_none()
        && !req.resume
        && !req.changed
}

/// `up` on a terminal: a preview of every selected project that saves its update plans
/// (a plan bundle under `.strata/<stack>/reviews/`), the environment's table, one
/// question, and on "yes" exactly the plans shown (`up --plan`, whose dependents
/// previewed on projected outputs are previewed again on the real ones). A profile whose
/// `approve:` rules hold a selected project runs as without a terminal: its gates, not
/// this question, decide what goes out.
fn up_as_pulumi_does(target: &Target, settings: &Settings, req: Request) -> Result<i32> {
    let r = resolve::resolve(target, settings, &req, None)?;
    let stack = match r.stack.clone() {
        Some(s) => s,
        None => ask::stack_name()?,
    };
    if let Some(held) = r
        .plan
        .nodes
        .iter()
        .find(|n| n.rules.iter().any(|rule| !rule.approve.is_empty()))
    {
        eprintln!(
            "note: an `approve:` rule holds {}: this `up` asks nothing; the rule's gate holds what needs an approval.",
            held.path
        );
        return run_request(target, settings, req);
    }
    let target = Target {
        stack: Some(stack.clone()),
        ..target.clone()
    };
    let dir = review_dir(&r.ws.state_dir(&stack))?;
    let preview = Request {
        op: Operation::Preview,
        args: crate::pipeline::RunOptions {
            yes: false,
            ..req.args.clone()
        },
        preview: crate::pipeline::PreviewOptions {
            save_plan: Some(dir.clone()),
            for_up: true,
            ..Default::default()
        },
        ..req.clone()
    };
    let code = run_request(&target, settings, preview)?;
    if code != exit::OK {
        eprintln!("Nothing was changed.");
        return Ok(code);
    }
    if !ask::perform_the_update()? {
        eprintln!(
            "Nothing was changed. (The plans shown are in {}.)",
            crate::util::display_path(&dir)
        );
        return Ok(exit::FAILED);
    }
    run_request(
        &target,
        settings,
        Request {
            plan: Some(dir),
            unbound_blocked: true,
            ..req
        },
    )
}

/// A new folder for the plans an interactive `up` shows: `<state>/reviews/<time>`.
fn review_dir(state_dir: &std::path::Path) -> Result<std::path::PathBuf> {
    let base = state_dir.join("reviews");
    crate::files::private_dir(&base)?;
    let stamp = crate::util::rfc3339(crate::util::now_ms()).replace([':', '-'], "");
    let mut dir = base.join(&stamp);
    let mut n = 1;
    while dir.exists() {
        n += 1;
        dir = base.join(format!("{stamp}-{n}"));
    }
    Ok(dir)
}

/// One run of the pipeline, as asked.
fn run_request(target: &Target, settings: &Settings, req: Request) -> Result<i32> {
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
