//! `strata secrets set|list|rm|import`: the age-encrypted store of a stack. Values are
//! read from a no-echo prompt, stdin, a file or Pulumi's own config (`import`), and
//! never printed.

mod import;

use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};

use crate::cli::SecretsCommand;
use crate::error::{Error, Result};
use crate::secrets::{self, store};
use crate::settings::Settings;
use crate::state::lock::StackLock;
use crate::util::{display_path, plural};
use crate::workspace::{Target, Workspace};

pub fn run(target: &Target, settings: &Settings, cmd: &SecretsCommand) -> Result<i32> {
    let ws = super::open_workspace(target)?;
    // `secrets list` only reads: any --stack; `set` and `rm` write that stack's store.
    let stack = match cmd {
        SecretsCommand::List => ws.stack_to_read(target.stack.as_deref())?,
        _ => ws.resolve_stack(target.stack.as_deref())?,
    };
    let Some(stack) = stack else {
        return Err(crate::workspace::no_stack_error(&ws));
    };
    let path = secrets::store_path(&ws, &stack);
    match cmd {
        SecretsCommand::List => list(target, settings, &ws, &stack, &path),
        SecretsCommand::Set { key: name } => {
            check_key(name)?;
            // Ask first, lock after: a Ctrl-C at a prompt must not leave the lock behind.
            let value = read_value(name, settings)?;
            let key = secrets::key(&ws, &stack, settings.interactive)?;
            change_store(&ws, &stack, &key, "strata secrets set", |stored| {
                stored.values.insert(name.clone(), value);
                Ok(())
            })?;
            eprintln!("stored `{name}` in {}", display_path(&path));
            Ok(0)
        }
        SecretsCommand::Import(args) => {
            let values = import::values(target, &ws, &stack, args)?;
            let key = secrets::key(&ws, &stack, settings.interactive)?;
            let names: Vec<String> = values.keys().cloned().collect();
            change_store(&ws, &stack, &key, "strata secrets import", |stored| {
                stored.values.extend(values);
                Ok(())
            })?;
            eprintln!(
                "stored {} secret{} in {}: {}",
                names.len(),
                plural(names.len()),
                display_path(&path),
                names.join(", ")
            );
            Ok(0)
        }
        SecretsCommand::Rm { key: name } => {
            let key = secrets::key(&ws, &stack, settings.interactive)?;
            change_store(
                &ws,
                &stack,
                &key,
                "strata secrets rm",
                |stored| match stored.values.remove(name) {
                    Some(_) => Ok(()),
                    None => Err(Error::config(format!(
                        "there is no secret `{name}` in {}; `strata secrets list` shows the stored keys.",
                        display_path(&path)
                    ))),
                },
            )?;
            eprintln!("removed `{name}` from {}", display_path(&path));
            Ok(0)
        }
    }
}

/// `secrets list`: the stored keys (never their values), each with the project that
/// declares it, and the declared keys that are missing.
fn list(
    target: &Target,
    settings: &Settings,
    ws: &Workspace,
    stack: &str,
    path: &std::path::Path,
) -> Result<i32> {
    // Which project declares each key, when the profile can be told.
    let owners: BTreeMap<String, String> = super::load(target, true)
        .ok()
        .map(|l| {
            l.profile
                .all_secrets()
                .into_iter()
                .map(|(s, o)| (s.key.clone(), o.unwrap_or("(every project)").to_string()))
                .collect()
        })
        .unwrap_or_default();
    let keys: Vec<String> = if store::exists(path) {
        let key = secrets::key(ws, stack, settings.interactive)?;
        secrets::load_store(ws, stack, &key)?
            .values
            .into_keys()
            .collect()
    } else {
        Vec::new()
    };
    if settings.json {
        let v: Vec<serde_json::Value> = keys
            .iter()
            .map(|k| serde_json::json!({"key": k, "declared_by": owners.get(k)}))
            .collect();
        super::print(&format!("{}\n", serde_json::Value::Array(v)))?;
        return Ok(0);
    }
    super::print(&list_text(stack, path, &keys, &owners))?;
    Ok(0)
}

/// `secrets list` for people: a line per stored key, then one per missing declared key.
fn list_text(
    stack: &str,
    path: &std::path::Path,
    keys: &[String],
    owners: &BTreeMap<String, String>,
) -> String {
    let mut out = format!("secrets of stack {stack} ({})\n", display_path(path));
    if keys.is_empty() {
        out.push_str("  (none stored)\n");
    }
    let w = keys.iter().map(|k| k.len()).max().unwrap_or(0);
    for k in keys {
        out.push_str(&format!(
            "  {k:<w$}  {}\n",
            owners
                .get(k)
                .map(|o| format!("declared by {o}"))
                .unwrap_or_else(|| "not declared by the profile".into())
        ));
    }
    for (k, o) in owners {
        if !keys.contains(k) {
            out.push_str(&format!(
                "  {k:<w$}  missing (declared by {o}): strata secrets set {k}\n"
            ));
        }
    }
    out
}

/// Changes the stack's store under the stack's lock (taken at once, in `command`'s
/// name): loaded, changed by `change`, saved; left as it was when `change` fails.
fn change_store(
    ws: &Workspace,
    stack: &str,
    key: &store::Key,
    command: &str,
    change: impl FnOnce(&mut secrets::Stored) -> Result<()>,
) -> Result<()> {
    let _lock = StackLock::acquire(
        &ws.state_dir(stack),
        stack,
        command,
        std::time::Duration::ZERO,
        // It does not wait for anyone: nothing to interrupt.
        &|| None,
        &mut |w| eprintln!("warning: {w}"),
    )?;
    let mut stored = secrets::load_store(ws, stack, key)?;
    change(&mut stored)?;
    secrets::save_store(ws, stack, key, &mut stored)
}

fn check_key(key: &str) -> Result<()> {
    if crate::workspace::profile::is_valid_key(key) {
        Ok(())
    } else {
        Err(Error::usage(format!(
            "`{key}` is not a secret key: use `namespace:name` (the namespace is the Kubernetes namespace it is written to)."
        )))
    }
}

/// The value: piped stdin, else a no-echo prompt with confirmation.
fn read_value(name: &str, settings: &Settings) -> Result<String> {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        let mut buf = String::new();
        stdin
            .lock()
            .read_to_string(&mut buf)
            .map_err(|e| Error::failed(format!("cannot read the value from stdin: {e}")))?;
        let value = buf.strip_suffix('\n').unwrap_or(&buf);
        let value = value.strip_suffix('\r').unwrap_or(value).to_string();
        if value.is_empty() {
            return Err(Error::config(format!(
                "no value on stdin for `{name}`: pipe it in (printf %s VALUE | strata secrets set {name}) or run on a terminal to be asked."
            )));
        }
        return Ok(value);
    }
    if !settings.interactive {
        return Err(Error::usage(format!(
            "cannot ask for `{name}` (non-interactive): pipe the value on stdin."
        )));
    }
    secrets::prompt_secret(&crate::workspace::profile::SecretItem {
        key: name.to_string(),
        prompt: "Value".into(),
        default: None,
    })
}
