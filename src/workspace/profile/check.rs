//! The checks of a composed profile as a whole: each path once, `needs:` and `inputs:`
//! naming entries of the profile, config and secret keys well-formed and unique.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{Entry, Profile, is_valid_key};
use crate::error::{Error, Result};
use crate::util::display_path;

/// Checks that paths are unique, references known, keys well-formed.
pub(super) fn check(profile: &Profile) -> Result<()> {
    let mut seen: BTreeMap<&str, &Entry> = BTreeMap::new();
    for e in &profile.entries {
        if let Some(first) = seen.insert(e.path.as_str(), e) {
            return Err(Error::config(format!(
                "{}: `{}` is listed twice (in the {} list of {} and the {} list of {}). Each project may appear once.",
                display_path(&profile.file),
                e.path,
                first.stage.key(),
                display_path(&first.file),
                e.stage.key(),
                display_path(&e.file)
            )));
        }
    }
    for e in &profile.entries {
        let reads = e.reads.as_ref().map(|r| r.projects()).unwrap_or_default();
        let named = e
            .needs
            .iter()
            .flatten()
            .map(|n| ("needs", n))
            .chain(reads.iter().map(|n| ("reads", n)));
        for (key, n) in named {
            if !seen.contains_key(n.as_str()) {
                return Err(Error::config(format!(
                    "{}: entry `{}` {key} `{n}`, which is not an entry of profile `{}`.\n  {}",
                    display_path(&e.file),
                    e.path,
                    profile.name,
                    match crate::util::did_you_mean(n, seen.keys().copied()).trim() {
                        "" => format!(
                            "Fix the path: the profile's entries are {}.",
                            crate::util::list_some(&seen.keys().copied().collect::<Vec<_>>(), 8)
                        ),
                        hint => format!("{hint} Fix the path."),
                    }
                )));
            }
            if n == &e.path && key == "reads" {
                return Err(Error::config(format!(
                    "{}: entry `{}` reads itself: `reads:` names the projects whose stacks its code reads.",
                    display_path(&e.file),
                    e.path
                )));
            }
        }
        for i in &e.inputs {
            if !seen.contains_key(i.project.as_str()) {
                return Err(Error::config(format!(
                    "{}: entry `{}` takes input `{}` from `{}`, which is not an entry of profile `{}`.",
                    display_path(&e.file),
                    e.path,
                    i.key,
                    i.project,
                    profile.name
                )));
            }
            if i.project == e.path {
                return Err(Error::config(format!(
                    "{}: entry `{}` takes input `{}` from itself.",
                    display_path(&e.file),
                    e.path,
                    i.key
                )));
            }
        }
    }
    check_pools_and_tags(profile)?;
    check_cluster(profile)?;
    let mut keys = BTreeSet::new();
    for item in &profile.config {
        check_key(&profile.file, "config", &item.key)?;
        if !keys.insert(item.key.as_str()) {
            return Err(Error::config(format!(
                "{}: config key `{}` is declared twice.",
                display_path(&profile.file),
                item.key
            )));
        }
    }
    let mut secret_keys = BTreeSet::new();
    for (s, owner) in profile.all_secrets() {
        check_key(&profile.file, "secrets", &s.key)?;
        if !secret_keys.insert(s.key.as_str()) {
            return Err(Error::config(format!(
                "{}: secret `{}` is declared twice{}.",
                display_path(&profile.file),
                s.key,
                owner
                    .map(|o| format!(" (again by `{o}`)"))
                    .unwrap_or_default()
            )));
        }
    }
    Ok(())
}

/// A profile whose `@secrets` step writes into a cluster must say which cluster is the
/// stack's: `cluster:`, or exactly one kubeconfig hook. Never the kubeconfig's current
/// context, which changes under strata's feet.
fn check_cluster(profile: &Profile) -> Result<()> {
    if !profile.writes_cluster_secret() || profile.cluster_source().is_some() {
        return Ok(());
    }
    let hooks = profile.kubeconfig_hooks();
    let why = if hooks.is_empty() {
        "no entry has a `kubeconfig:` hook".to_string()
    } else {
        format!(
            "several entries have a `kubeconfig:` hook ({})",
            hooks.join(", ")
        )
    };
    Err(Error::config(format!(
        "{}: the built-in `@secrets` step writes the stack's secrets into its cluster, but {why}, so strata cannot know which cluster is the stack's.\n  Name it at the top of the profile:\n    cluster:\n      kubeconfig: ${{config.kubeconfig:kubeconfig}}   # a path, ${{config.KEY}} or ${{env.NAME}}\n      context: ${{config.kubeconfig:context}}\n  (strata never writes into the kubeconfig's current context by accident).",
        display_path(&profile.file)
    )))
}

fn check_key(file: &Path, list: &str, key: &str) -> Result<()> {
    if is_valid_key(key) {
        Ok(())
    } else {
        Err(Error::config(format!(
            "{}: `{list}` key `{key}` must look like `namespace:name` (letters, digits, - _ .).",
            display_path(file)
        )))
    }
}

/// Every entry's pool is one of `pools:`; tags are names.
fn check_pools_and_tags(profile: &Profile) -> Result<()> {
    let names: Vec<&str> = profile.pools.iter().map(|p| p.name.as_str()).collect();
    for e in &profile.entries {
        if let Some(pool) = &e.pool
            && !names.contains(&pool.as_str())
        {
            let declared = if names.is_empty() {
                "The profile declares no pools; add `pools: {NAME: LIMIT}` at its top.".to_string()
            } else {
                format!("Pools of the profile: {}.", names.join(", "))
            };
            return Err(Error::config(format!(
                "{}: entry `{}` runs in pool `{pool}`, which `pools:` of {} does not declare.{}\n  {declared}",
                display_path(&e.file),
                e.path,
                display_path(&profile.file),
                crate::util::did_you_mean(pool, names.iter().copied()),
            )));
        }
        for t in &e.tags {
            if !super::is_valid_name(t) {
                return Err(Error::config(format!(
                    "{}: entry `{}`: tag `{t}` must be a name (letters, digits, - _ .), for example `network`.",
                    display_path(&e.file),
                    e.path
                )));
            }
        }
    }
    Ok(())
}
