//! The workspace files `strata init` writes around an adopted repository: the profile
//! (entries where the projects are, needs inferred, secrets to prompt for), the example
//! environment file, the seeded stack configs and the `.gitignore` lines. A file that
//! exists is kept as it is (the profile is refused: `--update` edits it).

use std::path::PathBuf;

use super::Adoption;
use crate::error::{Error, Result};
use crate::util::display_path;
use crate::workspace::{Stage, stack_config::INFRA_TYPE_KEY};

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
    for u in a.inferred.unknowns.iter().filter(|u| u.project == rel) {
        out.push_str(&format!(
            "    # strata init: {} reads `{}`: {}. Add the project it reads to needs.\n",
            u.at, u.name, u.why
        ));
    }
    let stage = a.inferred.stages.get(rel).copied();
    let needs: Vec<String> = a
        .inferred
        .needs_of(rel)
        .iter()
        .filter(|n| a.inferred.stages.get(*n).copied() == stage)
        .map(|n| scalar(&a.entry_path(n)))
        .collect();
    out.push_str(&format!("    needs: [{}]\n", needs.join(", ")));
    let own: Vec<&super::config::Secret> = a
        .configs
        .secrets
        .iter()
        .filter(|s| s.projects == [rel])
        .collect();
    if !own.is_empty() {
        out.push_str("    secrets:\n");
        for s in own {
            out.push_str(&secret_text(s, "      "));
        }
    }
    out
}

fn secret_text(s: &super::config::Secret, indent: &str) -> String {
    format!(
        "{indent}- key: {}\n{indent}  prompt: {}\n",
        scalar(&s.key),
        scalar(&format!("{} (secure in {})", s.key, s.seen_in))
    )
}

/// The whole profile.
pub fn profile_text(a: &Adoption) -> String {
    let mut out = format!(
        "# Written by `strata init` from the Pulumi projects of this repository, where they are.\n\
         # Edit it freely: `strata init --update` adds new projects and drops vanished ones,\n\
         # and keeps your edits and comments. needs: were read from the stack references in\n\
         # the code; a `# strata init:` line marks one it could not resolve.\n\
         description: {}\n\
         infra_type: {}\n",
        scalar(&format!("the Pulumi projects of {}", repo_name(a))),
        scalar(&a.infra_type()),
    );
    if a.projects_dir != crate::workspace::profile::DEFAULT_PROJECTS_DIR {
        out.push_str(&format!(
            "projects: {}   # entry paths are folders under this one (from the workspace root)\n",
            scalar(&a.projects_dir)
        ));
    }
    let shared: Vec<&super::config::Secret> = a
        .configs
        .secrets
        .iter()
        .filter(|s| s.projects.len() > 1)
        .collect();
    if !shared.is_empty() {
        out.push_str("secrets:   # secure: in the stack configs of several projects\n");
        for s in shared {
            out.push_str(&secret_text(s, "  "));
        }
    }
    if needs_cluster(a) {
        out.push_str(
            "# strata init: the built-in @secrets step writes the stack's secrets into its cluster;\n\
             # these lines say which one. Check them.\n\
             cluster:\n  kubeconfig: ${env.KUBECONFIG}\n",
        );
    }
    for stage in [Stage::Infrastructure, Stage::Kubernetes] {
        let rels = a.stage(stage);
        if rels.is_empty() {
            continue;
        }
        out.push_str(&format!("{}:\n", stage.key()));
        for rel in rels {
            out.push_str(&entry_text(a, &rel, None));
        }
    }
    out
}

/// Whether the profile will have a Kubernetes entry and a secret the `@secrets` step
/// writes into the cluster (the profile must then name the cluster).
fn needs_cluster(a: &Adoption) -> bool {
    let k8s: Vec<String> = a.stage(Stage::Kubernetes);
    !k8s.is_empty()
        && a.configs
            .secrets
            .iter()
            .any(|s| s.projects.len() > 1 || k8s.contains(&s.projects[0]))
}

fn repo_name(a: &Adoption) -> String {
    a.root
        .canonicalize()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "this repository".into())
}

/// `config/pulumi/environment.example`.
pub fn environment_example(a: &Adoption) -> String {
    format!(
        "# Copy to config/pulumi/environment (git-ignored) and fill in. Every project runs\n\
         # with these variables over the process environment.\n\
         PULUMI_STACK={}\n\
         # Where Pulumi keeps state; unset, file://<workspace>/.strata/backend:\n\
         # PULUMI_BACKEND_URL=s3://my-bucket\n\
         # The passphrase of the stacks' secrets (or set it in your shell):\n\
         # PULUMI_CONFIG_PASSPHRASE=\n",
        a.default_stack()
    )
}

/// `config/pulumi/Pulumi.<stack>.yaml`: the keys the projects agree on, and the
/// profile's infra_type.
pub fn stack_config_text(a: &Adoption, stack: &str) -> String {
    let mut config = serde_yaml::Mapping::new();
    config.insert(INFRA_TYPE_KEY.into(), a.infra_type().into());
    for (k, v) in a.configs.seeds.get(stack).into_iter().flatten() {
        config.insert(k.clone().into(), v.clone());
    }
    let mut doc = serde_yaml::Mapping::new();
    doc.insert("config".into(), serde_yaml::Value::Mapping(config));
    format!(
        "# Seeded by `strata init` from the projects' Pulumi.{stack}.yaml: the keys whose value is\n\
         # the same wherever it is set. Every project runs with this file.\n{}",
        serde_yaml::to_string(&doc).unwrap_or_default()
    )
}

/// Writes the workspace files (`dry_run`: only says what it would write). The profile
/// must not exist yet.
pub fn write_all(a: &Adoption, dry_run: bool) -> Result<Vec<Written>> {
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
        environment_example(a),
    ));
    let mut stacks: Vec<String> = a.configs.stacks.keys().cloned().collect();
    if stacks.is_empty() {
        stacks.push(a.default_stack());
    }
    for s in stacks {
        files.push((
            a.root.join(format!("config/pulumi/Pulumi.{s}.yaml")),
            stack_config_text(a, &s),
        ));
    }
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
