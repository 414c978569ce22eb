//! `strata export`: loads the plan like `strata show` (no stack config, no prompts),
//! reads what `inputs:` need for the formats that carry values, and prints the export of
//! [`crate::export`], or writes it to a file.

use crate::cli::{ExportArgs, ExportFormat};
use crate::error::{Error, Result};
use crate::export::github_actions::{StrataSource, default_source};
use crate::export::{self, ExportContext, Format, InputValue, InputValues, pko};
use crate::plan::select::Selector;
use crate::plan::{NodeKind, Plan};
use crate::workspace::Target;

use super::Loaded;
use super::outputs::Reader;

/// `strata export`: loads the plan like `strata show` (no stack config, no prompts) and
/// prints the export of what `sel` selects, or writes it to `out`. Returns the exit code.
/// Refuses (exit 3) a profile with a project whose unresolved stack references no
/// `reads:` declares, as `up` does: the exported jobs would run it beside what it reads.
fn refuse_undeclared_references(loaded: &super::Loaded) -> Result<()> {
    use crate::plan::references;
    let shared = loaded
        .stack
        .as_deref()
        .map(|s| loaded.ws.stack_config_path(s));
    let at = references::Context {
        root: &loaded.ws.root,
        stack: loaded.stack.as_deref(),
        shared: shared.as_deref(),
    };
    match references::refused(&loaded.plan, &loaded.plan, &at, &loaded.profile.file) {
        Some(why) => Err(Error::config(format!("{why}\n  Nothing was exported."))),
        None => Ok(()),
    }
}

pub fn run(target: &Target, args: &ExportArgs, sel: &Selector) -> Result<i32> {
    let format = format(args)?;
    if format == Format::GithubActionsReviewApply && !sel.is_empty() {
        return Err(Error::usage(
            "--review-apply writes one workflow that previews and applies the whole profile (a plan bundle per pull request); it takes no --filter, --project or --from. Drop the selection, or export the selected projects' jobs without --review-apply.",
        ));
    }
    let github = matches!(
        format,
        Format::GithubActions | Format::GithubActionsReviewApply
    );
    let given = match args.strata_from.as_deref() {
        Some(_) if !github => {
            return Err(Error::usage(format!(
                "--strata-from says where GitHub Actions runners get strata; --format {} has none (its engine runs the image or the operator you give it). Drop --strata-from.",
                format.as_str()
            )));
        }
        Some(value) => Some(StrataSource::parse(value)?),
        None => None,
    };
    let out = args.out.as_deref();
    let loaded = super::load(target, false)?;
    // A project that might read any stack must not run beside it: its jobs would.
    refuse_undeclared_references(&loaded)?;
    // Outside strata's own repository, the runners' strata must come from a pinned source.
    let strata_from = match given {
        Some(source) => source,
        None if github => default_source(&loaded.ws.root)?,
        None => StrataSource::Path,
    };
    let Some(stack) = loaded.stack.as_deref() else {
        return Err(Error::config(
            "strata export needs a stack: pass -s/--stack NAME, or set PULUMI_STACK in config/pulumi/environment.",
        ));
    };
    // The selected subgraph; needs through what is left out are bridged.
    let (plan, empty_because) = super::selected(&loaded, sel)?;
    if let Some(why) = empty_because {
        eprintln!("{why} Nothing was exported.");
        return Ok(0);
    }
    let (inputs, unread) = if format == Format::Pko {
        read_input_values(&loaded, &plan, stack)
    } else {
        Default::default()
    };
    if let Some(why) = unread {
        eprintln!(
            "note: the outputs that `inputs:` read could not all be read ({why}); those inputs point at the ConfigMap the header names"
        );
    }
    let ctx = ExportContext {
        provider: &loaded.profile.name,
        stack,
        infra_type: &loaded.profile.infra_type,
        credentials: &loaded.profile.credentials,
        inputs: Some(&inputs),
        pools: &loaded.profile.pools,
        projects_dir: &loaded.profile.projects_dir,
        strata_from: &strata_from,
    };
    let text = export::render(&plan, format, &ctx)?;
    if format == Format::Pko {
        let left = pko::left_out(&plan);
        if !left.is_empty() {
            eprintln!(
                "note: left out of the Pulumi Kubernetes Operator export (command projects, which the operator cannot run; run them with strata): {}",
                left.join(", ")
            );
        }
    }
    match out {
        None => super::print(&text)?,
        Some(path) => {
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| Error::io("create", dir, e))?;
            }
            std::fs::write(path, &text).map_err(|e| Error::io("write", path, e))?;
            eprintln!(
                "wrote {} ({} export of profile {}, stack {stack})",
                crate::util::display_path(path),
                format.as_str(),
                ctx.provider
            );
        }
    }
    Ok(0)
}

/// export's own format for the command line's `--format` and `--review-apply`.
fn format(args: &ExportArgs) -> Result<Format> {
    let format = match args.format {
        ExportFormat::GithubActions => Format::GithubActions,
        ExportFormat::Pko => Format::Pko,
        ExportFormat::Argo => Format::Argo,
    };
    match (format, args.review_apply) {
        (_, false) => Ok(format),
        (Format::GithubActions, true) => Ok(Format::GithubActionsReviewApply),
        (_, true) => Err(Error::usage(format!(
            "--review-apply is a mode of --format github-actions (a pull-request job that saves a plan bundle, a default-branch job that applies it); --format {} has none",
            format.as_str()
        ))),
    }
}

/// Reads the outputs every `inputs:` entry of `plan` (the exported part of the loaded
/// plan) refers to, masked: secret outputs stay `Secret`. Best effort: without the
/// pulumi CLI or a passphrase the Pulumi upstreams are `Unknown`, and the reason is
/// returned.
fn read_input_values(loaded: &Loaded, plan: &Plan, stack: &str) -> (InputValues, Option<String>) {
    let mut wanted: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for n in &plan.nodes {
        for i in n.entry.iter().flat_map(|e| &e.inputs) {
            wanted.entry(&i.project).or_default().push(&i.output);
        }
    }
    let mut values = InputValues::new();
    if wanted.is_empty() {
        return (values, None);
    }
    let pulumi_upstreams = wanted.keys().any(|p| {
        loaded
            .plan
            .nodes
            .iter()
            .any(|n| n.path == *p && n.kind == NodeKind::Pulumi)
    });
    let (reader, mut why) = if pulumi_upstreams {
        match Reader::with_pulumi(loaded, stack) {
            Ok(r) => (r, None),
            Err(e) => (
                Reader::without_pulumi(loaded, stack),
                Some(e.message.lines().next().unwrap_or("").to_string()),
            ),
        }
    } else {
        (Reader::without_pulumi(loaded, stack), None)
    };
    for (project, outputs) in wanted {
        let got = match reader.read(project, false) {
            Ok(m) => m,
            Err(e) => {
                why.get_or_insert(e.message.lines().next().unwrap_or("").to_string());
                None
            }
        };
        for output in outputs {
            let v = match got.as_ref().and_then(|m| m.get(output)) {
                Some(v) if crate::engine::contains_secret_mask(v) => InputValue::Secret,
                Some(v) => InputValue::Known(v.clone()),
                None => InputValue::Unknown,
            };
            values.insert((project.to_string(), output.to_string()), v);
        }
    }
    (values, why)
}
