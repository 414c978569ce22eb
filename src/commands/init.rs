//! `strata init`: adopt the repository at the root (`-C`, else the current folder) in
//! one command. Surveys it (`adopt`), prints what it found, writes the
//! workspace files (or, `--update`, edits the profile in place), then draws the order
//! (`show`) and checks the result (`validate`). `--dry-run` writes nothing.

use std::path::PathBuf;

use crate::adopt::{Adoption, update, write};
use crate::error::{Error, Result};
use crate::settings::Settings;
use crate::util::{display_path, plural};
use crate::workspace::Target;

/// What the user asked of `init`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub dry_run: bool,
    pub update: bool,
}

/// The profile `init` writes when `--provider` names none.
pub const DEFAULT_PROVIDER: &str = "main";

pub fn run(target: &Target, settings: &Settings, opts: &Options) -> Result<i32> {
    if settings.json {
        return Err(Error::usage(
            "strata init prints for people only: drop --output json. What it wrote reads as JSON with `strata show --format json` and `strata validate --output json`.",
        ));
    }
    let root = root(target)?;
    let provider = target.provider.as_deref().unwrap_or(DEFAULT_PROVIDER);
    let mut a = Adoption::survey(&root, provider);
    if a.found.is_empty() {
        return Err(Error::config(format!(
            "no Pulumi project under {}: no folder holds a Pulumi.yaml, Pulumi.yml or Strata.yaml (node_modules, virtualenvs, .git and build output are not searched).\n  Run `strata init` at the root of the repository that holds the projects, or name it with -C DIR.",
            display_path(&root)
        )));
    }
    let env: std::collections::BTreeMap<String, String> = std::env::vars().collect();
    let backends = a.backends(&env);
    let (changes, profile) = if opts.update {
        update_profile(&mut a, opts.dry_run)?
    } else {
        let files = write::write_all(&a, &backends, opts.dry_run)?;
        (written(&files), write::profile_text(&a))
    };
    super::print(&summary(&a, &backends))?;
    super::print(&changes)?;
    if opts.dry_run {
        super::print(&format!(
            "\n--dry-run: nothing was written. The profile would read:\n\n{profile}"
        ))?;
        return Ok(0);
    }
    check(&a, target, settings)
}

/// The repository's root: `-C DIR`, else the current folder.
fn root(target: &Target) -> Result<PathBuf> {
    let cwd = std::env::current_dir()
        .map_err(|e| Error::failed(format!("cannot read the current folder: {e}")))?;
    let root = match &target.root {
        Some(r) if r.is_absolute() => r.clone(),
        Some(r) => cwd.join(r),
        None => cwd,
    };
    if !root.is_dir() {
        return Err(Error::config(format!(
            "{} is not a folder.\n  Point -C (or STRATA_ROOT) at the repository's root.",
            display_path(&root)
        )));
    }
    Ok(root)
}

/// `--update`: the profile edited in place (written unless `dry_run`); what changed and
/// the new text.
fn update_profile(a: &mut Adoption, dry_run: bool) -> Result<(String, String)> {
    let file = a
        .root
        .join("providers")
        .join(format!("{}.yaml", a.provider));
    let text = std::fs::read_to_string(&file).map_err(|_| {
        Error::config(format!(
            "{} does not exist: there is nothing to update.\n  Run `strata init` (without --update) to write it, or name the profile with --provider NAME.",
            display_path(&file)
        ))
    })?;
    let u = update::update(a, &file, &text)?;
    crate::adopt::write::no_link(&a.root, &file)?;
    if !dry_run && u.text != text {
        std::fs::write(&file, &u.text).map_err(|e| Error::io("write", &file, e))?;
    }
    let mut out = format!("\n{}:\n", display_path(&file));
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    out.push_str(&format!("  added    {}\n", list(&u.added)));
    out.push_str(&format!("  dropped  {}\n", list(&u.dropped)));
    if !u.outside.is_empty() {
        out.push_str(&format!(
            "  not added (outside the profile's projects: folder `{}`): {}\n",
            a.projects_dir,
            u.outside.join(", ")
        ));
    }
    if !u.in_fragments.is_empty() {
        out.push_str(&format!(
            "  gone, but their entries are in include: fragments (drop them there): {}\n",
            u.in_fragments.join(", ")
        ));
    }
    Ok((out, u.text))
}

fn written(files: &[write::Written]) -> String {
    let mut out = String::from("\nfiles:\n");
    for w in files {
        out.push_str(&format!("  {:<40} {}\n", display_path(&w.path), w.what));
    }
    out
}

/// What was found: the projects, the needs read from their code, the references left
/// for the user, their stacks and backends, and what their stack configs keep secret.
fn summary(a: &Adoption, backends: &crate::workspace::backend::Backends) -> String {
    let mut out = format!(
        "strata init: {} project{} under {} (the profile's projects: folder is `{}`)\n\n",
        a.found.len(),
        plural(a.found.len()),
        display_path(&a.root),
        a.projects_dir
    );
    for rel in a.ordered() {
        let f = a.found.iter().find(|f| f.rel == rel);
        let kind = match f.map(|f| &f.kind) {
            Some(crate::adopt::discover::Kind::Pulumi { name, runtime }) => {
                format!("{name} ({runtime})")
            }
            _ => "command project".to_string(),
        };
        out.push_str(&format!("  {rel:<40} {kind}\n"));
    }
    out.push_str(&needs(a));
    out.push_str(&unknowns(a));
    for (rel, what) in &a.inferred.not_read {
        out.push_str(&format!(
            "\nnot read: {rel} ({what}): strata does not read the stack references of that language; add what it reads to its needs: by hand\n"
        ));
    }
    out.push_str(&stacks_and_backends(a, backends));
    out.push_str(&secrets(a));
    for p in &a.problems {
        out.push_str(&format!("\nproblem: {p}\n"));
    }
    out
}

/// The stack the workspace runs by default, projects that name it otherwise, and the
/// backends Pulumi would run them against.
fn stacks_and_backends(a: &Adoption, backends: &crate::workspace::backend::Backends) -> String {
    let stack = a.default_stack();
    let mut out = format!(
        "\nstack: `{stack}` by default (PULUMI_STACK in config/pulumi/environment; -s names another for a run)\n"
    );
    let prod: Vec<&String> = a
        .configs
        .stacks
        .keys()
        .filter(|s| crate::adopt::looks_like_production(s))
        .collect();
    if !prod.is_empty() {
        out.push_str(&format!(
            "  not the default, as they look like production: {}\n",
            prod.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    for f in &a.found {
        if let Some(t) = a.stack_template(&f.rel) {
            out.push_str(&format!(
                "  {} names the stack `{}` (written as `stack: {t}`)\n",
                f.rel,
                t.replace("${stack}", &stack)
            ));
        }
    }
    let paths: Vec<&str> = a.found.iter().map(|f| f.rel.as_str()).collect();
    for (b, on) in backends.distinct(paths.iter().copied()) {
        out.push_str(&format!(
            "backend: {} ({}){}\n",
            crate::secrets::url::masked(&b.url),
            b.why(),
            if on.len() == paths.len() {
                String::new()
            } else {
                format!(": {}", crate::util::list_some(&on, 4))
            }
        ));
    }
    out
}

/// What the stack configs keep secret: left in Pulumi config, each decrypted by its
/// stack's own secrets provider.
fn secrets(a: &Adoption) -> String {
    let c = &a.configs;
    if c.secure.is_empty() {
        return "\nsecrets: no secure: value in the projects' stack configs\n".into();
    }
    let mut providers: std::collections::BTreeMap<String, usize> = Default::default();
    for s in &c.secure {
        let p = s
            .provider
            .clone()
            .unwrap_or_else(|| "the backend's default".into());
        *providers
            .entry(crate::secrets::url::masked(&p))
            .or_default() += 1;
    }
    format!(
        "\nsecrets: {} secure: value{} in {} stack config{} stay in Pulumi config, each decrypted by its stack's own secrets provider ({}). Nothing was copied; `strata secrets import` takes those you want in strata's store.\n",
        c.secure_count(),
        plural(c.secure_count()),
        c.secure.len(),
        plural(c.secure.len()),
        providers
            .iter()
            .map(|(p, n)| format!("{p}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The needs read from the code: each once, where it was read first (and how many more
/// places say it), the helper it came through, and why an inferred one was.
fn needs(a: &Adoption) -> String {
    let mut out = String::from("\nneeds read from stack references in the code:\n");
    let mut seen: Vec<(&str, &str, Vec<&crate::adopt::infer::Edge>)> = Vec::new();
    for e in &a.inferred.edges {
        match seen.iter_mut().find(|(f, t, _)| *f == e.from && *t == e.to) {
            Some((_, _, v)) => v.push(e),
            None => seen.push((&e.from, &e.to, vec![e])),
        }
    }
    if seen.is_empty() {
        out.push_str("  none\n");
    }
    for (from, to, edges) in seen {
        let first = edges[0];
        let more = match edges.len() {
            1 => String::new(),
            n => format!(", +{} more", n - 1),
        };
        let via = first
            .via
            .as_ref()
            .map(|v| format!("; through {v}"))
            .unwrap_or_default();
        let inferred = edges
            .iter()
            .find_map(|e| e.inferred.as_ref())
            .map(|why| format!("; inferred: {why}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {from} -> {to}   ({}{more}{via}{inferred})\n",
            first.at
        ));
    }
    out
}

fn unknowns(a: &Adoption) -> String {
    let u = &a.inferred.unknowns;
    if u.is_empty() {
        return "\nevery stack reference was resolved\n".into();
    }
    let mut out = format!(
        "\nleft for you: {} stack reference{} strata could not resolve (add what each reads to the project's needs:):\n",
        u.len(),
        plural(u.len())
    );
    for x in u {
        out.push_str(&format!("  {}   `{}`: {}\n", x.at, x.name, x.why));
    }
    out
}

/// Draws the order and validates the workspace just written; says what to run next.
/// The profile is written, so `init` exits 0 whatever `validate` finds (it says it).
fn check(a: &Adoption, target: &Target, settings: &Settings) -> Result<i32> {
    let stack = target.stack.clone().unwrap_or_else(|| a.default_stack());
    let t = Target {
        root: Some(a.root.clone()),
        stack: Some(stack.clone()),
        provider: Some(a.provider.clone()),
    };
    super::print("\nthe order (strata show):\n")?;
    let show = crate::cli::ShowArgs {
        format: Some(crate::cli::ShowFormat::Tree),
        select: Default::default(),
    };
    super::show::run(&t, &show, &Default::default(), false)?;
    super::print("\nstrata validate:\n")?;
    let valid = super::validate::run(&t, settings, false).is_ok();
    super::print(&next_steps(a, &stack, valid))?;
    Ok(0)
}

/// The commands to run next, from a fresh checkout of the adopted repository.
fn next_steps(a: &Adoption, stack: &str, valid: bool) -> String {
    let p = if a.provider == DEFAULT_PROVIDER {
        String::new()
    } else {
        format!(" -p {}", a.provider)
    };
    let fix = if valid {
        String::new()
    } else {
        "  # fix what validate reports above first (a `reads:` to declare, a passphrase to set)\n"
            .to_string()
    };
    format!(
        "\nnext:\n{fix}  cp config/pulumi/environment.example config/pulumi/environment   # PULUMI_STACK={stack}, and the backend it names\n  strata validate{p}\n  strata exec{p} -- pulumi install    # each project's dependencies, in order\n  strata preview{p}                    # what an up would change, every project at once\n  strata up{p}\n"
    )
}
