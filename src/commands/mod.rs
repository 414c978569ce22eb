//! One module per command; `dispatch` picks it. Shared loading lives here.

mod docs;
pub mod outputs;
mod providers;
mod report;
mod run;
mod secrets;
mod show;
mod status;
mod validate;

use std::collections::BTreeMap;
use std::io::Write;

use crate::cli::{Cli, Command, GlobalArgs};
use crate::engine::Operation;
use crate::error::{Error, Result};
use crate::plan::Plan;
use crate::settings::Settings;
use crate::workspace::{Profile, StackConfig, Workspace};

/// Runs the parsed command; returns the exit code.
pub fn dispatch(cli: Cli) -> Result<i32> {
    let settings = Settings::resolve(&cli.global);
    match &cli.command {
        Command::Providers => providers::run(&cli.global, &settings),
        Command::Show(args) => show::run(&cli.global, args, settings.json),
        Command::Validate(a) => validate::run(&cli.global, &settings, a.strict),
        Command::Secrets(c) => secrets::run(&cli.global, &settings, c),
        Command::Outputs(a) => outputs::run(&cli.global, &settings, a),
        Command::Status => status::run(&cli.global, &settings),
        Command::Export(a) => crate::export::run(&cli.global, a.format, a.out.as_deref()),
        Command::Report(a) => report::run(&cli.global, &settings, a),
        Command::Completions { shell } => docs::completions(*shell),
        Command::Man => docs::man(),
        Command::Up(a) => run::run(
            &cli.global,
            &settings,
            crate::pipeline::Request {
                op: Operation::Up,
                args: a.run.clone(),
                resume: a.resume,
                changed: a.changed,
                force_conflicts: a.force_conflicts,
                preview: Default::default(),
            },
        ),
        Command::Preview(a) => run::run(
            &cli.global,
            &settings,
            crate::pipeline::Request {
                op: Operation::Preview,
                args: a.run.clone(),
                resume: false,
                changed: false,
                force_conflicts: false,
                preview: a.preview.clone(),
            },
        ),
        Command::Refresh(a) | Command::Destroy(a) => {
            let op = match &cli.command {
                Command::Refresh(_) => Operation::Refresh,
                _ => Operation::Destroy,
            };
            run::run(
                &cli.global,
                &settings,
                crate::pipeline::Request {
                    op,
                    args: a.clone(),
                    resume: false,
                    changed: false,
                    force_conflicts: false,
                    preview: Default::default(),
                },
            )
        }
    }
}

/// Opens the workspace named by the global options.
pub fn open_workspace(g: &GlobalArgs) -> Result<Workspace> {
    crate::pipeline::resolve::open_workspace(g)
}

/// The workspace, stack, stack config, profile and full plan of a command.
pub struct Loaded {
    pub ws: Workspace,
    pub stack: Option<String>,
    pub stack_config: Option<StackConfig>,
    pub profile: Profile,
    pub plan: Plan,
}

/// Loads everything a command plans with. The stack config is read only when the
/// provider must come from it or `read_stack_config` asks for it.
/// Read-only: any `--stack` is accepted, whatever the env file names.
pub fn load(g: &GlobalArgs, read_stack_config: bool) -> Result<Loaded> {
    let ws = open_workspace(g)?;
    let stack = ws.stack_to_read(g.stack.as_deref())?;
    let stack_config = match (&stack, read_stack_config || g.provider.is_none()) {
        (Some(s), true) => StackConfig::load(&ws.stack_config_path(s))?,
        _ => None,
    };
    let provider = ws.select_provider(g.provider.as_deref(), stack_config.as_ref())?;
    let profile = ws.profile(&provider)?;
    let projects = ws.projects(&profile)?;
    let plan = Plan::build(&profile, projects)?;
    Ok(Loaded {
        ws,
        stack,
        stack_config,
        profile,
        plan,
    })
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
    let extra = crate::run::fingerprint::Extra {
        root: &loaded.ws.root,
        env: &loaded.ws.env_file.vars,
        // Read, never written: `status` takes no lock.
        cache: Some((&cache_file, false)),
    };
    let mut fps =
        crate::run::fingerprint::of_plan(&loaded.plan, &loaded.profile, cfg, &hashes, &extra);
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
