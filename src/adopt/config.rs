//! What the projects' own stack configs (`Pulumi.<stack>.yaml`) tell `strata init`: the
//! stacks each project has, and their `secure:` keys and secrets providers, reported and
//! left where they are. A project's stack config stays Pulumi's: strata runs each
//! project with its own file (laying only what the profile owns over it), and a
//! `secure:` value is decrypted by that stack's own secrets provider, so nothing of it is
//! copied into the workspace.

use std::collections::BTreeMap;

use super::discover::{Found, Kind};
use crate::workspace::StackConfig;

/// The `secure:` keys of one stack config, and the secrets provider it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secure {
    /// The file as shown (`infra/eks/Pulumi.dev.yaml`).
    pub file: String,
    pub keys: Vec<String>,
    /// `passphrase`, a KMS/Vault URL, `service`; `None`: the backend's default.
    pub provider: Option<String>,
}

/// The stack configs of the projects, read.
#[derive(Debug, Default)]
pub struct Configs {
    /// Every stack some project has a stack config for, with how many projects have one.
    pub stacks: BTreeMap<String, usize>,
    /// The stacks of each project (folder from the root), sorted.
    pub by_project: BTreeMap<String, Vec<String>>,
    /// The stack configs holding `secure:` values.
    pub secure: Vec<Secure>,
    /// Stack configs that could not be read: the file and why.
    pub problems: Vec<String>,
}

impl Configs {
    /// How many `secure:` keys the stack configs hold in all.
    pub fn secure_count(&self) -> usize {
        self.secure.iter().map(|s| s.keys.len()).sum()
    }
}

/// Reads `Pulumi.<stack>.yaml` of every Pulumi project of `found`.
pub fn read(found: &[Found]) -> Configs {
    let mut out = Configs::default();
    for f in found {
        if !matches!(f.kind, Kind::Pulumi { .. }) {
            continue;
        }
        for (stack, path, shown) in stack_files(f) {
            *out.stacks.entry(stack.clone()).or_default() += 1;
            out.by_project.entry(f.rel.clone()).or_default().push(stack);
            match StackConfig::load_project(&path) {
                Ok(Some(cfg)) => {
                    let keys = cfg.secure_keys();
                    if !keys.is_empty() {
                        out.secure.push(Secure {
                            file: shown,
                            keys,
                            provider: cfg.secrets_provider(),
                        });
                    }
                }
                Ok(None) => {}
                Err(_) => out.problems.push(format!(
                    "{shown}: Pulumi cannot read it as a stack config; left out"
                )),
            }
        }
    }
    out
}

/// The stack configs of `f`: (stack, file, file as shown), sorted by stack.
fn stack_files(f: &Found) -> Vec<(String, std::path::PathBuf, String)> {
    let Ok(rd) = std::fs::read_dir(&f.config_dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, std::path::PathBuf, String)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let rest = name.strip_prefix("Pulumi.")?;
            let stack = rest
                .strip_suffix(".yaml")
                .or_else(|| rest.strip_suffix(".yml"))?
                .to_string();
            if !crate::workspace::valid_stack_name(&stack) || !e.path().is_file() {
                return None;
            }
            let shown = if f.config_dir == f.dir {
                format!("{}/{name}", f.rel)
            } else {
                crate::util::display_path(&e.path().canonicalize().unwrap_or(e.path()))
            };
            Some((stack, e.path(), shown))
        })
        .collect();
    out.sort();
    out
}
