//! The workspace files `strata init` writes around an adopted repository: the profile
//! (entries where the projects are, needs inferred, the references it could not
//! resolve marked), the example environment file and the `.gitignore` lines. Nothing of
//! the projects' own (their stack configs, their secrets) is copied. A file that exists
//! is kept as it is (the profile is refused: `--update` edits it).

use std::path::PathBuf;

use super::Adoption;
use crate::error::{Error, Result};
use crate::util::display_path;

/// The lines `.gitignore` gains: strata's local state and the environment file.
pub const GITIGNORE: &[&str] = &[".strata/", "config/pulumi/environment"];

/// What happened to one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    pub path: PathBuf,
    pub what: String,
}

/// A YAML scalar for a path or key: plain when safe, else double-quoted.
pub fn scalar(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:() ".contains(c))
        && !s.starts_with(['-', ':', ' ', '('])
        && !s.ends_with([':', ' '])
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.starts_with("..")
        && serde_yaml::from_str::<serde_yaml::Value>(s).ok() == Some(s.into());
    if plain {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_default()
    }
}

/// The profile's entry for the project at `rel` (from the root), two spaces in; `note`
/// is a comment line put above it (`--update` marks what it added).
pub fn entry_text(a: &Adoption, rel: &str, note: Option<&str>) -> String {
    let mut out = String::new();
    if let Some(n) = note {
        out.push_str(&format!("  # {n}\n"));
    }
    out.push_str(&format!("  - path: {}\n", scalar(&a.entry_path(rel))));
    if let Some(t) = a.stack_template(rel) {
        out.push_str(&format!(
            "    stack: {}   # strata init: its stack configs name the stack so\n",
            scalar(&t)
        ));
    }
    let needs: Vec<String> = a
        .inferred
        .needs_of(rel)
        .iter()
        .map(|n| scalar(&a.entry_path(n)))
        .collect();
    let mut inferred: Vec<&str> = Vec::new();
    for e in a.inferred.edges.iter().filter(|e| e.from == rel) {
        if let Some(why) = e
            .inferred
            .as_ref()
            .filter(|_| !inferred.contains(&e.to.as_str()))
        {
            inferred.push(&e.to);
            out.push_str(&format!(
                "    # strata init: {} inferred from {}: {why}\n",
                a.entry_path(&e.to),
                e.at
            ));
        }
    }
    out.push_str(&format!("    needs: [{}]\n", needs.join(", ")));
    out.push_str(&unresolved_text(a, rel));
    out
}

/// The comment over an entry whose code has stack references strata could not
/// resolve: each by file and line, and the `reads:` that strata waits for before it
/// runs the project (it refuses to run it beside what it might read until then).
fn unresolved_text(a: &Adoption, rel: &str) -> String {
    let unknowns: Vec<&super::infer::Unknown> = a
        .inferred
        .unknowns
        .iter()
        .filter(|u| u.project == rel)
        .collect();
    if unknowns.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    for u in &unknowns {
        out.push_str(&format!(
            "    # strata init: {} reads `{}`: {}.\n",
            u.at, u.name, u.why
        ));
    }
    out.push_str(
        "    # strata runs this project only once you say what those references read:\n    # reads: [PATH, ...]   (their projects' paths; `reads: []` when they read none of these)\n",
    );
    out
}

/// The whole profile: one list, each project after what its code reads; no stage, no
/// secret and no stack config of strata's, since the repository has none of them.
pub fn profile_text(a: &Adoption) -> String {
    let mut out = format!(
        "# Written by `strata init` from the Pulumi projects of this repository, where they are.\n\
         # Each project runs as Pulumi runs it: its own backend, its own Pulumi.<stack>.yaml\n\
         # and secrets provider; this profile orders them. needs: were read from the stack\n\
         # references in the code; a `# strata init:` line marks one it could not resolve.\n\
         # Edit it freely: `strata init --update` adds new projects and drops vanished ones,\n\
         # and keeps your edits and comments.\n\
         description: {}\n",
        scalar(&format!("the Pulumi projects of {}", repo_name(a))),
    );
    if a.projects_dir != crate::workspace::profile::DEFAULT_PROJECTS_DIR {
        out.push_str(&format!(
            "projects: {}   # entry paths are folders under this one (from the workspace root)\n",
            scalar(&a.projects_dir)
        ));
    }
    out.push_str("infrastructure:\n");
    for rel in a.ordered() {
        out.push_str(&entry_text(a, &rel, None));
    }
    out
}

fn repo_name(a: &Adoption) -> String {
    a.root
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "this repository".into())
}

/// `config/pulumi/environment.example`: the stack init chose and the backend the
/// projects run against (`backends`, as Pulumi chooses it).
pub fn environment_example(a: &Adoption, backends: &crate::workspace::backend::Backends) -> String {
    use crate::workspace::backend::Source;
    let paths: Vec<&str> = a.found.iter().map(|f| f.rel.as_str()).collect();
    let backend = match backends.distinct(paths.iter().copied()).as_slice() {
        [(one, _)] if one.source == Source::Strata => "# Backend: none is named (no PULUMI_BACKEND_URL, backend.url or `pulumi login`), so\n# strata keeps the stacks in its own file backend, .strata/backend. To share them:\n# PULUMI_BACKEND_URL=s3://my-bucket\n".to_string(),
        [(one, _)] => format!(
            "# Backend: {} ({}). Pulumi's own choice; set PULUMI_BACKEND_URL only to override it.\n",
            crate::secrets::url::masked(&one.url),
            one.why()
        ),
        many => format!(
            "# Backends: each project's own ({}). Setting PULUMI_BACKEND_URL here would override them all.\n",
            many.iter()
                .map(|(b, _)| crate::secrets::url::masked(&b.url))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    format!(
        "# Copy to config/pulumi/environment (git-ignored) and fill in. Every project runs\n\
         # with these variables over the process environment.\n\
         # The stack `strata up` runs unless -s names another (the stack most projects have a\n\
         # Pulumi.<stack>.yaml for; never one that looks like production).\n\
         PULUMI_STACK={}\n\
         {backend}\
         # The passphrase of stacks whose secrets provider is Pulumi's passphrase (or set it\n\
         # in your shell); stacks under a KMS, Vault or Pulumi Cloud need none:\n\
         # PULUMI_CONFIG_PASSPHRASE=\n",
        a.default_stack()
    )
}

/// Writes the workspace files (`dry_run`: only says what it would write). The profile
/// must not exist yet.
pub fn write_all(
    a: &Adoption,
    backends: &crate::workspace::backend::Backends,
    dry_run: bool,
) -> Result<Vec<Written>> {
    let profile = a
        .root
        .join("providers")
        .join(format!("{}.yaml", a.provider));
    if profile.exists() {
        return Err(Error::config(format!(
            "{} exists: this repository was adopted already.\n  Run `strata init --update` to add new projects and drop vanished ones (your edits and comments are kept), or pick another profile name with --provider NAME.",
            display_path(&profile)
        )));
    }
    let mut files = vec![(profile, profile_text(a))];
    files.push((
        a.root.join("config/pulumi/environment.example"),
        environment_example(a, backends),
    ));
    for (path, _) in &files {
        no_link(&a.root, path)?;
    }
    no_link(&a.root, &a.root.join(".gitignore"))?;
    let mut out = Vec::new();
    for (path, text) in files {
        let what = if path.exists() {
            "kept (it exists)".to_string()
        } else {
            if !dry_run {
                write_new(&path, &text)?;
            }
            "written".to_string()
        };
        out.push(Written { path, what });
    }
    out.push(gitignore(a, dry_run)?);
    Ok(out)
}

/// Refuses `path` when it, or a folder between `root` and it, is a symbolic link: init
/// writes only inside the repository, and a link (even a dangling one) could send what
/// it writes anywhere.
pub fn no_link(root: &std::path::Path, path: &std::path::Path) -> Result<()> {
    let mut at = root.to_path_buf();
    for part in path.strip_prefix(root).unwrap_or(path).components() {
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(Error::config(format!(
                    "{} is a symbolic link: strata init never writes through a link, which could put its file outside the repository. Nothing was written.\n  Replace the link with a file (or folder) of its own, then run init again.",
                    display_path(&at)
                )));
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

fn write_new(path: &std::path::Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("create the folder", dir, e))?;
    }
    std::fs::write(path, text).map_err(|e| Error::io("write", path, e))
}

/// Appends to `.gitignore` the lines of [`GITIGNORE`] it lacks.
fn gitignore(a: &Adoption, dry_run: bool) -> Result<Written> {
    let path = a.root.join(".gitignore");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let missing: Vec<&str> = GITIGNORE
        .iter()
        .copied()
        .filter(|l| !text.lines().any(|have| have.trim() == *l))
        .collect();
    if missing.is_empty() {
        return Ok(Written {
            path,
            what: "kept (it ignores strata's files)".into(),
        });
    }
    if !dry_run {
        let mut new = text.clone();
        if !new.is_empty() && !new.ends_with('\n') {
            new.push('\n');
        }
        new.push_str("# strata: local state and the environment file\n");
        for l in &missing {
            new.push_str(l);
            new.push('\n');
        }
        std::fs::write(&path, new).map_err(|e| Error::io("write", &path, e))?;
    }
    Ok(Written {
        path,
        what: format!("gains {}", missing.join(", ")),
    })
}
