//! Secrets: the age-encrypted store, gathering values (store, `STRATA_SECRET_*`,
//! prompts), writing them into Kubernetes, and redaction everywhere strata writes.

pub mod kubernetes;
pub mod redact;
pub mod store;

use std::collections::BTreeMap;
use std::path::PathBuf;

use age::secrecy::SecretString;
use dialoguer::{Password, theme::ColorfulTheme};

use crate::engine::Operation;
use crate::error::{Error, Result};
use crate::plan::{NodeKind, Plan};
use crate::settings::Settings;
use crate::util::{display_path, env_key};
use crate::workspace::profile::SecretItem;
use crate::workspace::{Profile, Workspace};

/// `config/secrets/<stack>.age`.
pub fn store_path(ws: &Workspace, stack: &str) -> PathBuf {
    ws.root.join("config/secrets").join(format!("{stack}.age"))
}

/// The variable that can carry a secret in a non-interactive run.
pub fn env_var(key: &str) -> String {
    format!("STRATA_SECRET_{}", env_key(key))
}

/// The key of the store: `STRATA_AGE_IDENTITY` (a file), else `STRATA_PASSPHRASE`, else
/// a prompt on a terminal (with confirmation when the store is new).
pub fn key(ws: &Workspace, stack: &str, interactive: bool) -> Result<store::Key> {
    if let Some(id) = ws.env.get("STRATA_AGE_IDENTITY").filter(|s| !s.is_empty()) {
        let p = PathBuf::from(id);
        let p = if p.is_absolute() { p } else { ws.root.join(p) };
        return Ok(store::Key::Identity(p));
    }
    if let Some(p) = ws.env.get("STRATA_PASSPHRASE").filter(|s| !s.is_empty()) {
        return Ok(store::Key::Passphrase(SecretString::from(p.clone())));
    }
    let path = store_path(ws, stack);
    if !interactive {
        return Err(Error::config(format!(
            "the secrets of stack `{stack}` ({}) need a key and this run cannot prompt: set STRATA_PASSPHRASE, or STRATA_AGE_IDENTITY to an age identity file (age-keygen), in the environment or {}.",
            display_path(&path),
            display_path(&ws.env_file.path)
        )));
    }
    let theme = ColorfulTheme::default();
    let mut prompt = Password::with_theme(&theme).with_prompt(format!(
        "Passphrase of the secret store {}",
        display_path(&path)
    ));
    if !store::exists(&path) {
        prompt = prompt.with_confirmation("Repeat the passphrase", "the two entries differ");
    }
    let pass = prompt.interact().map_err(crate::setup::prompt_error)?;
    Ok(store::Key::Passphrase(SecretString::from(pass)))
}

/// The stored secrets when they can be read without asking: `Ok(None)` when the store
/// exists but no key is set in the environment; an empty map when there is no store.
pub fn load_unprompted(ws: &Workspace, stack: &str) -> Result<Option<BTreeMap<String, String>>> {
    let path = store_path(ws, stack);
    if !store::exists(&path) {
        return Ok(Some(BTreeMap::new()));
    }
    match key(ws, stack, false) {
        Ok(k) => store::load(&path, &k).map(Some).map_err(store_error),
        Err(_) => Ok(None),
    }
}

pub fn store_error(e: store::StoreError) -> Error {
    Error::config(e.to_string())
}

/// The secrets this plan needs: those of the selected projects and the profile-level
/// ones (and all of them for the secrets step). Missing ones come from
/// `STRATA_SECRET_<KEY>` or a prompt, and are saved in the store. Destroy and refresh
/// never prompt: they read what the store has, for redaction.
/// The secrets of a run, and every value that must never be shown.
#[derive(Default)]
pub struct Gathered {
    /// The secrets the plan needs, by key.
    pub values: BTreeMap<String, String>,
    /// Every value of the store (selected or not) and the passphrases in use.
    pub redact: Vec<String>,
}

/// Variables that carry strata's own secrets: never handed to a child.
pub fn is_strata_secret_var(name: &str) -> bool {
    name == "STRATA_PASSPHRASE" || name.starts_with("STRATA_SECRET_")
}

/// Values from the environment that must be redacted wherever they show up.
pub fn env_secrets(env: &BTreeMap<String, String>) -> Vec<String> {
    env.iter()
        .filter(|(k, _)| is_strata_secret_var(k) || k.as_str() == "PULUMI_CONFIG_PASSPHRASE")
        .map(|(_, v)| v.clone())
        .collect()
}

pub fn gather(
    ws: &Workspace,
    stack: &str,
    profile: &Profile,
    plan: &Plan,
    op: Operation,
    settings: &Settings,
) -> Result<Gathered> {
    let mut out = Gathered {
        redact: env_secrets(&ws.env),
        ..Gathered::default()
    };
    let (values, all) = gather_values(ws, stack, profile, plan, op, settings)?;
    out.redact.extend(all);
    out.values = values;
    Ok(out)
}

/// The needed values and every stored value.
fn gather_values(
    ws: &Workspace,
    stack: &str,
    profile: &Profile,
    plan: &Plan,
    op: Operation,
    settings: &Settings,
) -> Result<(BTreeMap<String, String>, Vec<String>)> {
    let has_step = plan.nodes.iter().any(|n| n.kind == NodeKind::Builtin);
    let mut declared: Vec<&SecretItem> = Vec::new();
    if !plan.nodes.is_empty() {
        declared.extend(profile.secrets.iter());
    }
    for (item, owner) in profile.all_secrets() {
        if let Some(owner) = owner
            && (has_step || plan.index_of(owner).is_some())
        {
            declared.push(item);
        }
    }
    let path = store_path(ws, stack);
    let asking = matches!(op, Operation::Up | Operation::Preview);
    if declared.is_empty() || !asking {
        // Nothing to ask: still learn the stored values (when the key is at hand without
        // a prompt) so they can be redacted.
        let all = load_unprompted(ws, stack)?.unwrap_or_default();
        let values = if declared.is_empty() {
            BTreeMap::new()
        } else {
            all.clone()
        };
        return Ok((values, all.into_values().collect()));
    }
    let k = key(ws, stack, settings.interactive)?;
    let mut values = store::load(&path, &k).map_err(store_error)?;
    let mut added = false;
    let mut missing = Vec::new();
    for item in &declared {
        if values.contains_key(&item.key) {
            continue;
        }
        if let Some(v) = ws.env.get(&env_var(&item.key)) {
            values.insert(item.key.clone(), v.clone());
            added = true;
        } else if settings.interactive {
            let v = prompt_secret(item)?;
            values.insert(item.key.clone(), v);
            added = true;
        } else {
            missing.push(*item);
        }
    }
    if !missing.is_empty() {
        let lines: Vec<String> = missing
            .iter()
            .map(|i| {
                format!(
                    "  - {} ({}): strata secrets set {} --stack {stack}, or set {}",
                    i.key,
                    i.prompt,
                    i.key,
                    env_var(&i.key)
                )
            })
            .collect();
        return Err(Error::config(format!(
            "{} secret{} of stack `{stack}` {} missing and this run cannot prompt:\n{}",
            missing.len(),
            if missing.len() == 1 { "" } else { "s" },
            if missing.len() == 1 { "is" } else { "are" },
            lines.join("\n")
        )));
    }
    if added {
        store::save(&path, &k, &values).map_err(store_error)?;
    }
    let wanted: std::collections::BTreeSet<&str> =
        declared.iter().map(|i| i.key.as_str()).collect();
    let all: Vec<String> = values.values().cloned().collect();
    values.retain(|k, _| wanted.contains(k.as_str()));
    Ok((values, all))
}

/// Asks for one secret: no echo, with confirmation; Enter takes a declared default.
pub fn prompt_secret(item: &SecretItem) -> Result<String> {
    let theme = ColorfulTheme::default();
    let mut p = Password::with_theme(&theme)
        .with_prompt(format!(
            "{} ({}){}",
            item.prompt,
            item.key,
            if item.default.is_some() {
                " [Enter for the default]"
            } else {
                ""
            }
        ))
        .with_confirmation("Repeat it", "the two entries differ");
    if item.default.is_some() {
        p = p.allow_empty_password(true);
    }
    let v = p.interact().map_err(crate::setup::prompt_error)?;
    Ok(match (&item.default, v.is_empty()) {
        (Some(d), true) => d.clone(),
        _ => v,
    })
}
