//! What a run starts from, before anything runs: the key of its secret digests, each
//! step's fingerprint, the outputs deployed now, and `--changed`'s decision.

use std::collections::BTreeMap;

use crate::error::Result;
use crate::run::signals::Caught;
use crate::secrets::Gathered;
use crate::state::fingerprint;
use crate::state::journal::{Journal, Record};
use crate::state::records::{self, RunRecord};
use crate::util::now_ms;
use crate::workspace::StackConfig;

use super::super::resolve::Resolved;
use super::changed::{self, Changed};

/// The run's inputs, for its steps' context.
pub(super) struct Inputs {
    /// The key of secret digests (see `secrets::hmac::secret_digest`).
    pub secret_key: Vec<u8>,
    pub fingerprint_salt: Vec<u8>,
    /// Each step's input fingerprint.
    pub fingerprints: BTreeMap<String, String>,
    /// Each project's outputs hash at its last success, before this run.
    pub last_outputs: BTreeMap<String, String>,
    pub changed: Changed,
    /// Why the shared backend's runs could not be read (`--changed`).
    pub warnings: Vec<String>,
}

/// Hashing every project's files (and, for `--changed`, reading their sources) can
/// take a while: on a thread of its own, so a signal (`caught`) is answered at once.
/// `locked`: the run holds the stack lock, and may write the fingerprint cache.
pub(super) fn prepare(
    r: &Resolved,
    stack_config: &StackConfig,
    secrets: &Gathered,
    caught: &Caught,
    locked: bool,
) -> Result<Inputs> {
    let state_dir = r.ws.state_dir(r.stack());
    let (fingerprint_salt, salt_warning) = super::shared::salt(r, &state_dir, locked);
    let secret_key = secret_key(secrets);
    let (plan, full, profile) = (r.plan.clone(), r.full.clone(), r.profile.clone());
    let (cfg, changed_only) = (stack_config.clone(), r.req.changed);
    let secret_hashes = crate::secrets::hmac::hash_secrets(&secret_key, &secrets.values);
    let (root, env_vars) = (r.ws.root.clone(), r.ws.env_file.vars.clone());
    let (stack, shared) = (r.stack().to_string(), r.ws.stack_config_path(r.stack()));
    // `--changed` on a shared backend: what other machines ran counts too (newest wins).
    let (runs, mut warnings) = if changed_only {
        super::shared::recent(r)
    } else {
        Default::default()
    };
    warnings.extend(salt_warning);
    let (fingerprints, last_outputs, changed) =
        caught.until_signal("while fingerprinting the projects", move || {
            let cache_file = state_dir.join("fingerprint.cache");
            let extra = fingerprint::Extra {
                root: &root,
                env: &env_vars,
                // Written only by a run that holds the stack lock.
                cache: Some((&cache_file, locked)),
            };
            let fingerprints = fingerprint::of_plan(&plan, &profile, &cfg, &secret_hashes, &extra);
            // What is deployed now as this journal knows it: each project's last
            // success and the outputs it left (only the hashes, unless `--changed`
            // needs the whole records).
            let journal = Journal::new(&state_dir);
            let last_outputs = last_outputs(&journal, &runs);
            let changed = if changed_only {
                changed::decide(
                    &plan,
                    &full,
                    &profile,
                    (&journal, &runs),
                    &last_outputs,
                    &fingerprints,
                    &crate::plan::references::Context {
                        root: &root,
                        stack: Some(&stack),
                        shared: Some(&shared),
                    },
                )
            } else {
                Changed::default()
            };
            (fingerprints, last_outputs, changed)
        })?;
    Ok(Inputs {
        secret_key,
        fingerprint_salt,
        fingerprints,
        last_outputs,
        changed,
        warnings,
    })
}

/// The outputs hash each project's last success left, as this journal and the shared
/// backend's `runs` know it (newest wins).
fn last_outputs(journal: &Journal, runs: &[RunRecord]) -> BTreeMap<String, String> {
    if runs.is_empty() {
        return journal.last_outputs();
    }
    let hash = |r: Record| match r {
        Record::Project { outputs_hash, .. } => outputs_hash,
        _ => None,
    };
    records::last_success(journal.last_settled_as(&hash), runs, &hash)
        .into_iter()
        .filter_map(|(p, h)| Some((p, h?)))
        .collect()
}

/// Secret values are digested under the store's own key (see `secrets::hmac::secret_digest`).
/// Without one (no store could be written), a key of this run only: its digests match
/// no other run's, so `--changed` reruns what takes a secret, and nothing is guessable.
fn secret_key(secrets: &Gathered) -> Vec<u8> {
    match secrets.digest_key() {
        Some(k) => k.as_bytes().to_vec(),
        None => crate::util::random_bytes(32).unwrap_or_else(|_| run_unique_key()),
    }
}

/// A key no other run has, when the kernel's random source cannot be read.
fn run_unique_key() -> Vec<u8> {
    format!(
        "{}-{}-{:?}",
        std::process::id(),
        now_ms(),
        std::time::Instant::now()
    )
    .into_bytes()
}
