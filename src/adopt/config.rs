//! What the projects' own stack configs (`Pulumi.<stack>.yaml`) give the workspace:
//! `secure:` keys become secrets to prompt for (key and prompt; the value is never
//! read), and plain keys that agree wherever they are set seed the shared stack config.

use std::collections::BTreeMap;

use super::discover::{Found, Kind};

/// A `secure:` key and the projects (folders from the root) whose stack configs hold it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Secret {
    pub key: String,
    pub projects: Vec<String>,
    /// Where it was seen first (`infra/eks/Pulumi.dev.yaml`).
    pub seen_in: String,
}

/// The stack configs of the projects, read.
#[derive(Debug, Default)]
pub struct Configs {
    /// Every stack some project has a stack config for, with how many projects have one.
    pub stacks: BTreeMap<String, usize>,
    /// Per stack name: the plain keys whose value is the same in every project that sets
    /// them.
    pub seeds: BTreeMap<String, BTreeMap<String, serde_yaml::Value>>,
    /// Plain keys set to different values in different projects: (stack, key, files).
    pub conflicts: Vec<(String, String, Vec<String>)>,
    pub secrets: Vec<Secret>,
    /// Stack configs that could not be read: the file and why.
    pub problems: Vec<String>,
}

/// Reads `Pulumi.<stack>.yaml` of every Pulumi project of `found`.
pub fn read(found: &[Found]) -> Configs {
    let mut out = Configs::default();
    let mut values: BTreeMap<(String, String), Vec<(serde_yaml::Value, String)>> = BTreeMap::new();
    for f in found {
        let Kind::Pulumi { name, .. } = &f.kind else {
            continue;
        };
        for (stack, file, text) in stack_files(f) {
            *out.stacks.entry(stack.clone()).or_default() += 1;
            let doc: serde_yaml::Value = match serde_yaml::from_str(&text) {
                Ok(d) => d,
                Err(_) => {
                    out.problems.push(format!("{file}: is not YAML; left out"));
                    continue;
                }
            };
            let Some(config) = doc.get("config").and_then(|c| c.as_mapping()) else {
                continue;
            };
            for (k, v) in config {
                let Some(k) = k.as_str() else { continue };
                let key = qualified(name, k);
                if v.get("secure").is_some() {
                    add_secret(&mut out.secrets, &key, &f.rel, &file);
                } else {
                    values
                        .entry((stack.clone(), key))
                        .or_default()
                        .push((v.clone(), file.clone()));
                }
            }
        }
    }
    for ((stack, key), seen) in values {
        if seen.iter().all(|(v, _)| *v == seen[0].0) {
            out.seeds
                .entry(stack)
                .or_default()
                .insert(key, seen[0].0.clone());
        } else {
            let files = seen.into_iter().map(|(_, f)| f).collect();
            out.conflicts.push((stack, key, files));
        }
    }
    out
}

/// A key as Pulumi reads it: `namespace:key`, the project's name when it has none.
fn qualified(project: &str, key: &str) -> String {
    if key.contains(':') {
        key.to_string()
    } else {
        format!("{project}:{key}")
    }
}

fn add_secret(secrets: &mut Vec<Secret>, key: &str, rel: &str, file: &str) {
    match secrets.iter_mut().find(|s| s.key == key) {
        Some(s) if !s.projects.iter().any(|p| p == rel) => s.projects.push(rel.to_string()),
        Some(_) => {}
        None => secrets.push(Secret {
            key: key.to_string(),
            projects: vec![rel.to_string()],
            seen_in: file.to_string(),
        }),
    }
}

/// The stack configs of `f`: (stack, file as shown, text), sorted by stack.
fn stack_files(f: &Found) -> Vec<(String, String, String)> {
    let Ok(rd) = std::fs::read_dir(&f.config_dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, String, String)> = rd
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let stack = name
                .strip_prefix("Pulumi.")?
                .strip_suffix(".yaml")
                .or_else(|| name.strip_prefix("Pulumi.")?.strip_suffix(".yml"))?
                .to_string();
            if !crate::workspace::valid_stack_name(&stack) {
                return None;
            }
            let text = std::fs::read_to_string(e.path()).ok()?;
            let shown = if f.config_dir == f.dir {
                format!("{}/{name}", f.rel)
            } else {
                crate::util::display_path(&e.path().canonicalize().unwrap_or(e.path()))
            };
            Some((stack, shown, text))
        })
        .collect();
    out.sort();
    out
}
