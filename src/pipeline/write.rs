//! Write: the answers of `ask` go to disk, under the stack lock — the stack name into
//! the env file, new keys into the stack config, new secrets into the age store. Both
//! files are read again under the lock and only the new keys are added, so a run that
//! finished in between loses nothing.

use std::collections::BTreeMap;

use crate::engine::Operation;
use crate::error::Result;
use crate::secrets;
use crate::workspace::StackConfig;

use super::ask::Answers;
use super::env;
use super::resolve::Resolved;

pub fn write(r: &mut Resolved, a: &mut Answers) -> Result<()> {
    let stack = r.stack().to_string();
    // The first `up` of a workspace whose env file names no stack remembers it there, so
    // later commands need no --stack (MARA's start script does the same).
    if r.req.op == Operation::Up
        && let Some(name) = super::ask::stack_to_remember(&r.ws, &stack)
    {
        r.ws.env_file.set_var("PULUMI_STACK", &name)?;
        r.ws.env.insert("PULUMI_STACK".into(), name);
    }
    // The stack runs this profile from now on: later commands need no `-p`, and
    // another profile is refused on it (whatever its infra_type).
    if r.req.op == Operation::Up && !r.req.orphans {
        r.ws.remember_profile(&stack, &r.profile.name)?;
    }
    if !a.new_config.is_empty() {
        let path = r.ws.stack_config_path(&stack);
        let mut cfg = StackConfig::load(&path)?.unwrap_or_else(|| StackConfig::new(&path));
        let mut changed = false;
        for (k, v) in &a.new_config {
            if !cfg.has(k) {
                cfg.set(k, v.clone());
                changed = true;
            }
        }
        if changed {
            cfg.save()?;
        }
        a.stack_config = cfg;
    }
    // A store written before it held a digest key gets one now (under the lock), so
    // nothing under `.strata/` lets a reader test guesses of its secrets.
    let needs_digest_key = a
        .secrets
        .read
        .as_ref()
        .is_some_and(|read| read.digest_key.is_none() && !read.values.is_empty());
    if a.secrets.added.is_empty()
        && !needs_digest_key
        && let Some(read) = &a.secrets.read
    {
        // What was read, so `status` and `validate` need not open the store.
        secrets::record_read(&r.ws, &stack, read);
    }
    if (!a.secrets.added.is_empty() || needs_digest_key)
        && let Some(key) = &a.secrets.key
    {
        let mut stored = secrets::load_store(&r.ws, &stack, key)?;
        let mut changed = stored.digest_key.is_none();
        for (k, v) in &a.secrets.added {
            match stored.values.get(k) {
                // Set by a run that finished in between: the store wins.
                Some(theirs) => {
                    if let Some(mine) = a.secrets.values.get_mut(k) {
                        a.secrets
                            .redact
                            .push(std::mem::replace(mine, theirs.clone()));
                    }
                }
                None => {
                    stored.values.insert(k.clone(), v.clone());
                    changed = true;
                }
            }
        }
        if changed {
            secrets::save_store(&r.ws, &stack, key, &mut stored)?;
        }
        // The digests of this run are under the key the store holds now.
        if let Some(read) = &mut a.secrets.read {
            read.digest_key = stored.digest_key.clone();
        } else {
            a.secrets.read = Some(secrets::Read {
                store_hash: None,
                values: BTreeMap::new(),
                digest_key: stored.digest_key.clone(),
            });
        }
    }
    // strata's own file backend, where no Pulumi setting names one: private to the user.
    if r.backends.workspace.source == crate::workspace::backend::Source::Strata {
        let dir = env::default_backend_dir(&r.ws.root);
        crate::files::private_dir(&dir)?;
    }
    Ok(())
}
