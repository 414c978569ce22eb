//! The command line: clap definitions only.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "strata",
    version,
    about = "Bring up a whole environment made of many Pulumi projects, in dependency order",
    after_help = "Exit codes: 0 success, 1 a project or hook failed, 2 usage error, \
                  3 invalid configuration or missing input, 4 changes pending (preview \
                  --expect-no-changes), 5 a policy: rule denied a project, 6 a project awaits an \
                  approval (strata approve), 128+n stopped by signal n after a graceful shutdown \
                  (130 SIGINT, 143 SIGTERM, 129 SIGHUP)."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Provider profile (providers/NAME.yaml); default: the stack's kubernetes:infra_type
    #[arg(
        short = 'p',
        long,
        env = "STRATA_PROVIDER",
        hide_env_values = true,
        global = true,
        value_name = "NAME"
    )]
    pub provider: Option<String>,

    /// Stack name [default: PULUMI_STACK of config/pulumi/environment, else of the environment]
    #[arg(short = 's', long, global = true, value_name = "NAME")]
    pub stack: Option<String>,

    /// Workspace root [default: nearest ancestor with a providers/ folder]
    #[arg(
        short = 'C',
        long,
        env = "STRATA_ROOT",
        hide_env_values = true,
        global = true,
        value_name = "DIR"
    )]
    pub root: Option<PathBuf>,

    /// Never prompt (implied when stdin is not a terminal or CI is set)
    #[arg(long, global = true)]
    pub non_interactive: bool,

    /// Print only warnings, errors and the final line of a run
    #[arg(short = 'q', long, global = true)]
    pub quiet: bool,

    /// Plain lines (no progress bars) with every line the projects print
    #[arg(short = 'v', long, global = true, conflicts_with = "quiet")]
    pub verbose: bool,

    /// Output format: human, or json (JSON Lines events on stdout)
    #[arg(
        long,
        value_enum,
        default_value_t = OutputFormat::Human,
        global = true
    )]
    pub output: OutputFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    Human,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Adopt the Pulumi projects of this repository where they are: write a workspace around them
    #[command(
        args = init_global_args(),
        after_help = "For init, -p, -s and -C say what it writes, shows and reads (above), not what \
                      they say for a run. Nothing of the repository is moved or rewritten; .gitignore \
                      only gains lines. Exit 0, or 3 when validate finds a problem in what was written."
    )]
    Init(InitArgs),
    /// Bring every project up, in dependency order
    Up(UpArgs),
    /// Show what `up` would change, project by project
    Preview(PreviewArgs),
    /// Refresh the state of every project
    Refresh(RefreshArgs),
    /// Destroy every project, in reverse dependency order
    #[command(alias = "down")]
    Destroy(DestroyArgs),
    /// Run a command in each selected project's folder, in dependency order
    #[command(
        next_help_heading = "Run options",
        after_help = "Each command runs in its project's folder with the environment strata gives \
                      projects (the env file's values, that project's PULUMI_BACKEND_URL), plus \
                      STRATA_PROJECT (its path in the profile) and STRATA_STACK (its own name of the \
                      stack). Its output goes to .strata/<stack>/logs/<path>/exec-<time>.log. No \
                      stack, lock or journal is touched. Exit 0, 1 when a command failed, 2 without \
                      a command after `--`, 3 when the selection or the workspace is wrong or the \
                      command is on no project's PATH (nothing is run)."
    )]
    Exec {
        #[command(flatten)]
        select: SelectArgs,
        /// Projects at once
        #[arg(short = 'j', long = "parallel", value_name = "N", default_value_t = 4,
              value_parser = clap::value_parser!(u16).range(1..))]
        parallel: u16,
        /// After a failure, still start what does not depend on it
        #[arg(long)]
        keep_going: bool,
        /// The command and its arguments, after `--` (run as is, not through a shell)
        #[arg(last = true, required = true, value_name = "CMD")]
        command: Vec<String>,
    },
    /// Show the execution order
    #[command(alias = "show-execution")]
    Show(ShowArgs),
    /// Check env file, stack, stack config, profile, projects and secrets; change nothing
    Validate(ValidateArgs),
    /// List the provider profiles
    #[command(alias = "list-providers")]
    Providers,
    /// Manage the encrypted secrets of the stack
    #[command(subcommand)]
    Secrets(SecretsCommand),
    /// Stack outputs (secrets masked unless --show-secrets)
    Outputs(OutputsArgs),
    /// The last result of every project of the stack
    Status(StatusArgs),
    /// The last runs of the stack, newest first: when, who, what, how they ended
    History(HistoryArgs),
    /// Show who holds the stack's lease in a shared (s3://) backend, and free it
    Unlock(UnlockArgs),
    /// Approve the plan a `policy:` `approve:` rule holds for a project
    #[command(
        after_help = "An `up` stops a project an `approve:` rule holds at `awaiting` (exit 6) and keeps \
                      its plan in .strata/<stack>/approvals/ (and, on an s3:// backend, in the bucket's \
                      .strata/approvals/<stack>/, for every machine). This shows that plan's changes and, \
                      once the project's path is typed (or --yes), records who approved it, when, and the \
                      plan's sha256 in the journal and beside the plan. The next `strata up` (on any \
                      machine, on a bucket) applies exactly that plan if a \
                      fresh preview plans the same changes, and otherwise holds the new plan for a new \
                      approval. Exit 0, 2 without a terminal or --yes, 3 when nothing awaits."
    )]
    Approve(ApproveArgs),
    /// The plan for an engine that runs beyond one machine
    Export(ExportArgs),
    /// The last run (or --run ID) as a timeline: an HTML page, a Mermaid gantt or JSON
    Report(ReportArgs),
    /// Shell completions, on stdout (e.g. `strata completions bash > /etc/bash_completion.d/strata`)
    Completions {
        /// bash, zsh, fish, elvish or powershell
        shell: clap_complete::Shell,
    },
    /// The man page (roff), on stdout (e.g. `strata man | man -l -`)
    Man,
}

/// The global options whose help says something else for `init`: the same flags (and
/// ids, so their values still reach [`GlobalArgs`]), with init's meaning and default.
fn init_global_args() -> Vec<clap::Arg> {
    let help = |id: &str| match id {
        "provider" => Some("The profile to write (providers/NAME.yaml) [default: main]"),
        "stack" => Some(
            "The stack to show and validate [default: the one most projects have a \
             Pulumi.<stack>.yaml for, else dev]",
        ),
        "root" => Some("The repository's root [default: the current folder]"),
        _ => None,
    };
    let globals = GlobalArgs::augment_args(clap::Command::new("init"));
    globals
        .get_arguments()
        .filter_map(|a| help(a.get_id().as_str()).map(|h| a.clone().help(h)))
        .collect()
}

#[derive(Debug, Args, Clone)]
pub struct InitArgs {
    /// Say what would be found and written; write nothing
    #[arg(long)]
    pub dry_run: bool,
    /// Edit the existing profile: add the projects found since, drop those whose folder is gone (edits and comments kept)
    #[arg(long)]
    pub update: bool,
}

#[derive(Debug, Args, Clone)]
pub struct ExportArgs {
    /// The engine to export for
    #[arg(long, value_enum)]
    pub format: ExportFormat,
    /// Write to FILE instead of stdout
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// github-actions only: one workflow that previews each pull request into a plan
    /// bundle (an artifact) and, after the merge, applies exactly that bundle
    #[arg(long)]
    pub review_apply: bool,
    /// github-actions only: where the runners get strata, pinned: `path` (this repository
    /// is strata's source; the default there), `crate:VERSION`, `git:URL@REV` (a commit or
    /// a tag), or `url:URL#sha256=HEX` (a release tarball and its checksum)
    #[arg(long, value_name = "SOURCE")]
    pub strata_from: Option<String>,

    #[command(flatten)]
    pub select: SelectArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// A GitHub Actions workflow: one job per project, `needs:` from the graph
    GithubActions,
    /// Pulumi Kubernetes Operator `Stack` resources with `spec.prerequisites`
    Pko,
    /// An Argo Workflows `Workflow` with one DAG task per project
    Argo,
}

#[derive(Debug, Args, Clone)]
pub struct ReportArgs {
    /// The run to draw: an ID from the journal, or the start of one [default: the last run of the stack]
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// How to draw it [default: html, or json with --output json]
    #[arg(long, value_enum)]
    pub format: Option<ReportFormat>,
    /// Write to FILE (`-`: stdout) [default: html to .strata/<stack>/report.html, the others to stdout]
    #[arg(short = 'o', long = "out", value_name = "FILE")]
    pub out: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// One self-contained page: a Gantt timeline by wave, the critical path, totals, failures' logs
    Html,
    /// A Mermaid gantt chart, for a README or a pull request
    Mermaid,
    /// The run's journal records and the timeline, as one JSON document
    Json,
}

#[derive(Debug, Subcommand)]
pub enum SecretsCommand {
    /// Store a secret (value from a no-echo prompt, or stdin when piped)
    Set {
        /// namespace:name (the namespace is the Kubernetes namespace it goes to)
        key: String,
    },
    /// Stored keys and the project that declares each; never values
    List,
    /// Remove a secret
    Rm { key: String },
    /// Store many secrets at once: from a file (KEY=VALUE lines or a JSON object), or
    /// the secure values of a project's own Pulumi config
    Import(SecretsImportArgs),
}

/// Where `strata secrets import` reads values from (one of the two).
#[derive(Debug, Args, Clone)]
#[command(group(clap::ArgGroup::new("source").required(true).args(["from_file", "from_pulumi"])))]
pub struct SecretsImportArgs {
    /// A file of `namespace:name=VALUE` lines (`#` comments, values optionally quoted) or a JSON object of them
    #[arg(long, value_name = "FILE")]
    pub from_file: Option<std::path::PathBuf>,
    /// A Pulumi project of the profile (its path): the secure values of its own stack
    /// config, as `pulumi config --show-secrets` reads them
    #[arg(long, value_name = "PROJECT")]
    pub from_pulumi: Option<String>,
    /// Only these keys (repeatable); default: all the source holds
    #[arg(long = "key", value_name = "KEY")]
    pub keys: Vec<String>,
}

#[derive(Debug, Args, Clone)]
pub struct OutputsArgs {
    /// One project (path or Pulumi project name); default: all
    pub project: Option<String>,
    /// Show secret values instead of [secret]
    #[arg(long)]
    pub show_secrets: bool,
}

/// The help heading of the selection flags.
const SELECTING: &str = "Selecting projects";

/// Which projects a command takes: `--filter` and its shorthands (under their own help
/// heading, whatever the heading around them).
#[derive(Debug, Args, Clone, Default)]
pub struct SelectArgs {
    /// Only the projects EXPR selects; repeatable (their union, less the negated ones).
    /// EXPR: a path or Pulumi name, a glob (`infra/*`, `kubernetes/**`), `tag:NAME`,
    /// `[main...HEAD]` or `[REF]` (changed in git), `X...` (X and what it needs), `...X`
    /// (X and what needs it), `^` to leave X out (`X^...`), `!EXPR` (not), `A | B` (both)
    #[arg(long = "filter", value_name = "EXPR", help_heading = SELECTING)]
    pub filters: Vec<String>,

    /// Only these projects (path, or Pulumi project name); repeatable (= --filter PATH)
    #[arg(long = "project", value_name = "PATH", help_heading = SELECTING)]
    pub projects: Vec<String>,

    /// With --project: also the projects they need (`PATH...`); for destroy, what
    /// depends on them (`...PATH`)
    #[arg(long, help_heading = SELECTING)]
    pub with_deps: bool,

    /// Skip what is ordered before PATH in the run (= `| from:PATH` on each filter)
    #[arg(long, value_name = "PATH", help_heading = SELECTING)]
    pub from: Option<String>,
}

#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Run options")]
pub struct RunArgs {
    #[command(flatten)]
    pub select: SelectArgs,

    /// Projects at once
    #[arg(short = 'j', long = "parallel", value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub parallel: u16,

    /// After a failure, still run what does not depend on it
    #[arg(long)]
    pub keep_going: bool,
}

/// `--yes`, of the commands that ask before they change something.
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Run options")]
pub struct ConfirmArgs {
    /// Do not ask for confirmation (required for destroy when non-interactive)
    #[arg(short = 'y', long)]
    pub yes: bool,
}

/// `--lock-timeout`, of the commands that hold the stack (a preview does not).
#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Run options")]
pub struct LockArgs {
    /// Wait up to DURATION (`90s`, `10m`) while another run holds the stack: this
    /// checkout's lock, or on a shared (s3://) backend the lease of another checkout or
    /// machine (a lease left unrenewed for its whole TTL is taken over) [default: refuse
    /// at once, naming the holder]
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub lock_timeout: Option<std::time::Duration>,
}

#[derive(Debug, Args, Clone)]
pub struct RefreshArgs {
    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub lock: LockArgs,
}

#[derive(Debug, Args, Clone)]
pub struct DestroyArgs {
    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub confirm: ConfirmArgs,

    #[command(flatten)]
    pub lock: LockArgs,

    /// Destroy the orphans instead: projects an `up` deployed that the profile no longer
    /// has (`strata status` lists them), in reverse dependency order; a program whose
    /// folder is gone is taken from the last git revision that had it
    #[arg(long, conflicts_with_all = ["filters", "projects", "with_deps", "from"])]
    pub orphans: bool,

    /// Destroy projects whose `policy:` rules deny deletes too; without it such a destroy
    /// is refused (exit 5), naming the rule and the projects
    #[arg(long)]
    pub override_deny: bool,
}

#[derive(Debug, Args, Clone)]
pub struct UpArgs {
    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub confirm: ConfirmArgs,

    #[command(flatten)]
    pub lock: LockArgs,

    /// Only what did not succeed in the last `up` of this stack, and what depends on it
    #[arg(long, conflicts_with_all = ["filters", "projects", "from"])]
    pub resume: bool,

    /// Skip projects whose inputs are unchanged since their last successful `up`
    #[arg(long)]
    pub changed: bool,

    /// Let the secrets step take over fields of its Secrets that another field manager
    /// set (server-side apply's force); without it such a conflict fails the step
    #[arg(long)]
    pub force_conflicts: bool,

    /// Apply exactly the plan bundle that `preview --save-plan DIR` wrote: refused when
    /// code, inputs, secrets, the stack config or the profile moved since, or when it was
    /// applied before
    #[arg(long, value_name = "DIR", conflicts_with_all = ["filters", "projects", "from", "with_deps", "resume", "changed"])]
    pub plan: Option<PathBuf>,
}

#[derive(Debug, Args, Clone, Default)]
#[command(next_help_heading = "Preview options")]
pub struct PreviewOptions {
    /// Exit 4 when any project would change (drift or pending work)
    #[arg(long)]
    pub expect_no_changes: bool,

    /// Refresh each stack's state before its preview (drift detection)
    #[arg(long)]
    pub refresh: bool,

    /// Write a Markdown summary (one row per project, what would change); it is also
    /// appended to $GITHUB_STEP_SUMMARY when that is set
    #[arg(long, value_name = "FILE")]
    pub summary_file: Option<std::path::PathBuf>,

    /// Write a plan bundle into DIR (new or empty): each Pulumi project's update plan,
    /// a manifest of what the preview saw, and the Markdown summary; `up --plan DIR`
    /// applies exactly that
    #[arg(long, value_name = "DIR")]
    pub save_plan: Option<std::path::PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct PreviewArgs {
    #[command(flatten)]
    pub run: RunArgs,

    #[command(flatten)]
    pub preview: PreviewOptions,
}

#[derive(Debug, Args, Clone)]
pub struct ValidateArgs {
    /// Warnings (stack references out of order, unknown projects) fail too (exit 3)
    #[arg(long)]
    pub strict: bool,
}

#[derive(Debug, Args, Clone)]
pub struct ShowArgs {
    /// How to draw the plan [default: tree, or json with --output json]
    #[arg(long, value_enum)]
    pub format: Option<ShowFormat>,

    #[command(flatten)]
    pub select: SelectArgs,
}

#[derive(Debug, Args, Clone)]
pub struct StatusArgs {
    #[command(flatten)]
    pub select: SelectArgs,
}

#[derive(Debug, Args, Clone)]
pub struct HistoryArgs {
    /// How many runs to show, newest first (at most 50)
    #[arg(short = 'n', long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..=50))]
    pub last: u16,
}

#[derive(Debug, Args, Clone)]
pub struct ApproveArgs {
    /// The project whose held plan to approve (its path, e.g. kubernetes/ingress)
    pub project: String,
    /// Approve without asking to type the project's path (for scripts)
    #[arg(short = 'y', long)]
    pub yes: bool,
}

#[derive(Debug, Args, Clone)]
pub struct UnlockArgs {
    /// Free it without asking to type the stack's name (for scripts)
    #[arg(short = 'y', long)]
    pub yes: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ShowFormat {
    Tree,
    Dot,
    Mermaid,
    Json,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn aliases_parse() {
        let c = Cli::try_parse_from(["strata", "down", "--yes"]).unwrap();
        assert!(matches!(c.command, Command::Destroy(ref a) if a.confirm.yes));
        let c = Cli::try_parse_from(["strata", "show-execution", "--format", "json"]).unwrap();
        assert!(matches!(c.command, Command::Show(ref a) if a.format == Some(ShowFormat::Json)));
        let c = Cli::try_parse_from(["strata", "list-providers"]).unwrap();
        assert!(matches!(c.command, Command::Providers));
    }

    #[test]
    fn flags_that_would_do_nothing_are_refused() {
        for (cmd, flag) in [
            ("preview", "--yes"),
            ("preview", "-y"),
            ("preview", "--lock-timeout=1m"),
            ("refresh", "--yes"),
        ] {
            let e = Cli::try_parse_from(["strata", cmd, flag]).unwrap_err();
            assert_eq!(
                e.kind(),
                clap::error::ErrorKind::UnknownArgument,
                "{cmd} {flag}"
            );
        }
        for (cmd, flag) in [
            ("up", "--yes"),
            ("up", "--lock-timeout=1m"),
            ("destroy", "--lock-timeout=1m"),
            ("refresh", "--lock-timeout=1m"),
        ] {
            Cli::try_parse_from(["strata", cmd, flag])
                .unwrap_or_else(|e| panic!("{cmd} {flag}: {e}"));
        }
    }

    #[test]
    fn every_command_that_takes_projects_takes_filter() {
        for cmd in [
            "up", "preview", "refresh", "destroy", "show", "status", "export",
        ] {
            let mut argv = vec!["strata", cmd, "--filter", "a...", "--filter", "!b"];
            if cmd == "export" {
                argv.extend(["--format", "argo"]);
            }
            let c = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{cmd}: {e}"));
            let sel = match c.command {
                Command::Up(a) => a.run.select,
                Command::Preview(a) => a.run.select,
                Command::Refresh(a) => a.run.select,
                Command::Destroy(a) => a.run.select,
                Command::Show(a) => a.select,
                Command::Status(a) => a.select,
                Command::Export(a) => a.select,
                _ => unreachable!(),
            };
            assert_eq!(sel.filters, ["a...", "!b"], "{cmd}");
        }
        // What replaces the selection does not mix with it.
        for other in ["--resume", "--plan=x"] {
            assert!(Cli::try_parse_from(["strata", "up", "--filter", "a", other]).is_err());
        }
    }

    #[test]
    fn parallel_must_be_positive() {
        assert!(Cli::try_parse_from(["strata", "up", "-j", "0"]).is_err());
    }
}
