//! One module per command; `dispatch` picks it. Shared loading lives here.

mod approve;
mod docs;
mod exec;
mod export;
mod history;
mod init;
pub mod outputs;
mod providers;
mod report;
mod run;
mod secrets;
mod shared;
mod show;
mod status;
mod unlock;
mod validate;

use std::collections::BTreeMap;
use std::io::Write;

use crate::cli::{
    Cli, Command, GlobalArgs, LockArgs, OutputFormat, PreviewOptions, RunArgs, SelectArgs,
};
use crate::engine::Operation;
use crate::error::{Error, Result};
use crate::pipeline::{self, Request};
use crate::plan::Plan;
use crate::plan::select::{self, Selector, Shorthands};
use crate::settings::Asked;
use crate::settings::Settings;
use crate::workspace::{Profile, StackConfig, Target, Workspace};

/// Runs the parsed command; returns the exit code. The command line stops here: what
/// the commands pass on are the domain's own types.
pub fn dispatch(cli: Cli) -> Result<i32> {
    let settings = Settings::resolve(asked(&cli.global));
    let target = &target(&cli.global);
    let run = |op, args: &RunArgs, yes: bool, lock: &LockArgs| -> Result<Request> {
        Ok(Request {
            op,
            args: run_options(args, op == Operation::Destroy, yes, lock)?,
            resume: false,
            changed: false,
            force_conflicts: false,
            preview: Default::default(),
            plan: None,
            unbound_blocked: false,
            orphans: false,
            override_deny: false,
        })
    };
    match &cli.command {
        Command::Init(a) => init::run(target, &settings, &init_options(a)),
        Command::Providers => providers::run(target, &settings),
        Command::Show(a) => show::run(target, a, &selector(&a.select, false)?, settings.json),
        Command::Validate(a) => validate::run(target, &settings, a.strict),
        Command::Secrets(c) => secrets::run(target, &settings, c),
        Command::Outputs(a) => outputs::run(target, &settings, a),
        Command::Status(a) => status::run(target, &settings, &selector(&a.select, false)?),
        Command::Export(a) => export::run(target, a, &selector(&a.select, false)?),
        Command::Report(a) => report::run(target, &settings, a),
        Command::History(a) => history::run(target, &settings, a.last as usize),
        Command::Unlock(a) => unlock::run(target, &settings, a.yes),
        Command::Approve(a) => approve::run(target, &settings, &a.project, a.yes),
        Command::Completions { shell } => docs::completions(*shell),
        Command::Man => docs::man(),
        Command::Exec {
            select,
            parallel,
            keep_going,
            command,
        } => exec::run(
            target,
            &settings,
            &selector(select, false)?,
            &exec::Options {
                parallel: *parallel,
                keep_going: *keep_going,
                argv: command.clone(),
            },
        ),
        Command::Up(a) => run::run(
            target,
            &settings,
            Request {
                resume: a.resume,
                changed: a.changed,
                force_conflicts: a.force_conflicts,
                plan: a.plan.as_deref().map(absolute),
                ..run(Operation::Up, &a.run, a.confirm.yes, &a.lock)?
            },
        ),
        Command::Preview(a) => run::run(
            target,
            &settings,
            Request {
                preview: preview_options(&a.preview),
                ..run(Operation::Preview, &a.run, false, &LockArgs::default())?
            },
        ),
        Command::Refresh(a) => run::run(
            target,
            &settings,
            run(Operation::Refresh, &a.run, false, &a.lock)?,
        ),
        Command::Destroy(a) => run::run(
            target,
            &settings,
            Request {
                orphans: a.orphans,
                override_deny: a.override_deny,
                ..run(Operation::Destroy, &a.run, a.confirm.yes, &a.lock)?
            },
        ),
    }
}

/// A folder the user named, as an absolute path: the projects' processes run in their
/// own folders.
fn absolute(p: &std::path::Path) -> std::path::PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn asked(g: &GlobalArgs) -> Asked {
    Asked {
        json: g.output == OutputFormat::Json,
        quiet: g.quiet,
        verbose: g.verbose,
        non_interactive: g.non_interactive,
    }
}

fn target(g: &GlobalArgs) -> Target {
    Target {
        root: g.root.clone(),
        stack: g.stack.clone(),
        provider: g.provider.clone(),
    }
}

fn run_options(
    a: &RunArgs,
    destroy: bool,
    yes: bool,
    lock: &LockArgs,
) -> Result<pipeline::RunOptions> {
    Ok(pipeline::RunOptions {
        selector: selector(&a.select, destroy)?,
        parallel: a.parallel,
        keep_going: a.keep_going,
        yes,
        lock_timeout: lock.lock_timeout.unwrap_or_default(),
    })
}

/// `--filter` and its shorthands, parsed (a usage error when one does not parse).
fn selector(a: &SelectArgs, destroy: bool) -> Result<Selector> {
    let short = Shorthands {
        projects: a.projects.clone(),
        with_deps: a.with_deps,
        from: a.from.clone(),
    };
    Selector::new(&a.filters, &short, destroy)
}

fn init_options(a: &crate::cli::InitArgs) -> init::Options {
    init::Options {
        dry_run: a.dry_run,
        update: a.update,
    }
}

fn preview_options(a: &PreviewOptions) -> pipeline::PreviewOptions {
    pipeline::PreviewOptions {
        expect_no_changes: a.expect_no_changes,
        refresh: a.refresh,
        summary_file: a.summary_file.clone(),
        save_plan: a.save_plan.as_deref().map(absolute),
        for_up: false,
    }
}

/// Opens the workspace the command points at.
pub fn open_workspace(target: &Target) -> Result<Workspace> {
    crate::pipeline::resolve::open_workspace(target)
}

/// The workspace, stack, stack config, profile and full plan of a command.
pub struct Loaded {
    pub ws: Workspace,
    pub stack: Option<String>,
    pub stack_config: Option<StackConfig>,
    pub profile: Profile,
    pub plan: Plan,
    /// The Pulumi backend of each project.
    pub backends: crate::workspace::backend::Backends,
}

impl Loaded {
    /// Each Pulumi project's backend as shown (credentials masked), by path; and where
    /// each distinct one comes from (`PULUMI_BACKEND_URL`, a `backend.url`, `pulumi
    /// login`...), by URL.
    pub fn shown_backends(&self) -> (BTreeMap<String, String>, BTreeMap<String, String>) {
        let mut by_path = BTreeMap::new();
        let mut why = BTreeMap::new();
        for n in self
            .plan
            .nodes
            .iter()
            .filter(|n| n.kind == crate::plan::NodeKind::Pulumi)
        {
            let b = self.backends.of(&n.path);
            let url = crate::secrets::url::masked(&b.url);
            why.insert(url.clone(), b.why());
            by_path.insert(n.path.clone(), url);
        }
        (by_path, why)
    }
}

/// Loads everything a command plans with. The stack config is read only when the
/// provider must come from it or `read_stack_config` asks for it.
/// Read-only: any `--stack` is accepted, whatever the env file names.
pub fn load(target: &Target, read_stack_config: bool) -> Result<Loaded> {
    let ws = open_workspace(target)?;
    let stack = ws.stack_to_read(target.stack.as_deref())?;
    let stack_config = match (&stack, read_stack_config || target.provider.is_none()) {
        (Some(s), true) => StackConfig::load(&ws.stack_config_path(s))?,
        _ => None,
    };
    let (profile, plan, backends) = crate::pipeline::resolve::planned(
        &ws,
        target.provider.as_deref(),
        stack.as_deref(),
        stack_config.as_ref(),
    )?;
    Ok(Loaded {
        ws,
        stack,
        stack_config,
        profile,
        plan,
        backends,
    })
}

/// The part of the loaded plan `sel` picks (in the plan's order; bridged where it
/// leaves steps out), and the sentence to print when it is empty because no project
/// changed in a git range.
pub fn selected(loaded: &Loaded, sel: &Selector) -> Result<(Plan, Option<String>)> {
    if sel.is_empty() {
        return Ok((loaded.plan.clone(), None));
    }
    let git = select::Git::new(&loaded.ws.root);
    let ctx = select::Context {
        order: &loaded.plan.order,
        root: &loaded.ws.root,
        watch: &loaded.profile.watch,
        changes: &git,
    };
    let chosen = sel.evaluate(&loaded.plan, &ctx)?;
    Ok((loaded.plan.subplan(&chosen.keep), chosen.empty_because))
}

/// Writes to stdout; a closed pipe (`strata show | head`) is not an error.
pub fn print(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::failed(format!("cannot write to stdout: {e}"))),
    }
}

/// The current fingerprint of every step, when the secrets can be read without asking
/// (`None` when they cannot: the comparison is then unknown).
pub fn current_fingerprints(loaded: &Loaded, stack: &str) -> Option<BTreeMap<String, String>> {
    let cfg = loaded.stack_config.as_ref()?;
    let keys = loaded.profile.all_secrets();
    // The store's digest, never the store: a passphrase store costs its scrypt work
    // factor to open. A stale digest leaves out the projects that take a secret.
    let (hashes, stale) = if keys.is_empty() {
        (BTreeMap::new(), false)
    } else {
        match crate::secrets::digest::read_fresh(&loaded.ws, stack) {
            Some(h) => (h, false),
            None => (BTreeMap::new(), true),
        }
    };
    let cache_file = loaded.ws.state_dir(stack).join("fingerprint.cache");
    let extra = crate::state::fingerprint::Extra {
        root: &loaded.ws.root,
        env: &loaded.ws.env_file.vars,
        // Read, never written: `status` takes no lock.
        cache: Some((&cache_file, false)),
    };
    let mut fps =
        crate::state::fingerprint::of_plan(&loaded.plan, &loaded.profile, cfg, &hashes, &extra);
    if stale {
        let profile_wide = !loaded.profile.secrets.is_empty();
        fps.retain(|path, _| {
            let own = loaded
                .profile
                .entry(path)
                .is_some_and(|e| !e.secrets.is_empty());
            let builtin = loaded.profile.entry(path).is_none();
            !(profile_wide || own || builtin)
        });
    }
    Some(fps)
}

/// What a typed confirmation (of `unlock` and `approve`) is about.
struct Typed<'a> {
    /// What must be typed (a stack's name, a project's path) and what it names:
    /// `the stack's name`.
    expected: &'a str,
    named: &'a str,
    /// The action, as `free the lease of stack `dev``.
    action: String,
    /// The same command with `--yes`, for a run with no terminal.
    with_yes: String,
}

/// Asks on the terminal for `t.expected` to be typed (surrounding spaces aside); refused
/// without a terminal (usage, naming the `--yes` command) or when something else was
/// typed (configuration: nothing was done).
fn typed_confirmation(t: &Typed, interactive: bool) -> Result<()> {
    if !interactive {
        return Err(Error::usage(format!(
            "not going to {} without a confirmation, and there is no terminal to ask on. Run `{}` to do it.",
            t.action, t.with_yes
        )));
    }
    let typed: String = dialoguer::Input::with_theme(&dialoguer::theme::ColorfulTheme::default())
        .with_prompt(format!("Type {} ({}) to {}", t.named, t.expected, t.action))
        .allow_empty(true)
        .interact_text()
        .map_err(Error::prompt)?;
    if typed.trim() == t.expected {
        Ok(())
    } else {
        Err(Error::config(format!(
            "you did not type `{}`: nothing was done (not going to {}).",
            t.expected, t.action
        )))
    }
}
