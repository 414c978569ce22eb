//! What strata reads straight from a self-managed backend (`source`: a `file://` folder
//! or an `s3://` bucket), without starting a Pulumi process: a stack's checkpoint — which
//! of the forms Pulumi writes is current (`<stack>.json`, `.json.gz` with
//! `PULUMI_SELF_MANAGED_STATE_GZIP`, `.json.zst` with `PULUMI_SELF_MANAGED_STATE_ZSTD`),
//! whether there is one, and the stack outputs it holds (secrets masked, or decrypted by
//! `passphrase`). Only where stacks live in project folders (`layout`); in any other
//! layout, and on any doubt, the answer is "ask the CLI".

use std::io::Read;

use serde_json::{Map, Value};

use super::PulumiEngine;
use super::source::Source;
use crate::engine::Job;

impl PulumiEngine {
    /// The stack's outputs as `stack output --json` prints them (secrets as `"[secret]"`),
    /// read from the checkpoint in a `file://` or `s3://` backend without starting a
    /// process; `None` (ask the CLI) for any other backend or layout, a missing, unreadable or
    /// unknown checkpoint, or an output holding anything but plain values and secrets.
    pub fn stack_outputs_from_checkpoint(job: &Job) -> Option<Map<String, Value>> {
        masked_outputs(checkpoint_outputs(job)?.1)
    }

    /// The stack's outputs as `stack output --json --show-secrets` prints them, read from
    /// the checkpoint like `stack_outputs_from_checkpoint`, its secrets decrypted when the stack
    /// uses the passphrase secrets provider and the job's passphrase opens it; `None`
    /// (ask the CLI) on any doubt.
    pub fn stack_outputs_from_checkpoint_revealed(job: &Job) -> Option<Map<String, Value>> {
        let (doc, outputs) = checkpoint_outputs(job)?;
        if !outputs.values().any(crate::engine::contains_secret_mask) {
            return masked_outputs(outputs);
        }
        let key = super::passphrase::decrypter(&doc, &job.env, &job.dir)?;
        outputs
            .into_iter()
            .map(|(k, v)| key.reveal(v).map(|v| (k, v)))
            .collect()
    }

    /// Starts deriving, in a thread of its own, the key of the job's stack's secrets (the
    /// passphrase provider's 1,000,000 rounds), when its current checkpoint holds an output
    /// the job needs (a dependent's input, a hook's) as a secret:
    /// `stack_outputs_from_checkpoint_revealed` after the update then finds it derived (or
    /// waits for it) instead of deriving it on the critical path. The salt survives
    /// updates, so the key is the one it will need. The thread says whether a needed
    /// output was secret, and so the key was sought (`None`: no thread could be started,
    /// and the key is derived when read).
    pub fn derive_secret_key_early(job: &Job) -> Option<std::thread::JoinHandle<bool>> {
        // The checkpoint too is read in that thread: on a bucket it is a round trip.
        let job = job.clone();
        let thread = std::thread::Builder::new().name("derive-secret-key".into());
        let derive = move || {
            let Some((doc, outputs)) = checkpoint_outputs(&job) else {
                return false;
            };
            let secret_needed = job.needed_outputs.iter().any(|k| {
                outputs
                    .get(k)
                    .is_some_and(crate::engine::contains_secret_mask)
            });
            if secret_needed {
                // A wrong passphrase is found out by the same rounds, and remembered.
                let _ = super::passphrase::decrypter(&doc, &job.env, &job.dir);
            }
            secret_needed
        };
        thread.spawn(derive).ok()
    }
}

/// The checkpoint of the job's stack and its stack resource's outputs as stored (none
/// without a stack resource); `None` when there is no checkpoint strata can read.
fn checkpoint_outputs(job: &Job) -> Option<(Value, Map<String, Value>)> {
    let doc = checkpoint_doc(job)??;
    let outputs = stack_outputs_of(&doc)?;
    Some((doc, outputs))
}

/// On a `file://` or `s3://` backend, the passphrase salt state the stack's checkpoint
/// records (`secrets_providers.state.salt`, what a stack config's `encryptionsalt:`
/// holds), when the stack uses the passphrase secrets provider; `None` otherwise.
pub fn checkpoint_passphrase_salt(job: &Job) -> Option<String> {
    let doc = checkpoint_doc(job)??;
    let provider = doc.pointer("/checkpoint/latest/secrets_providers")?;
    if provider["type"].as_str()? != "passphrase" {
        return None;
    }
    Some(provider.pointer("/state/salt")?.as_str()?.to_string())
}

/// The job's stack checkpoint, read and parsed: `Some(None)` when it has none; `None` when
/// strata cannot tell, or the checkpoint is of a version it does not read.
fn checkpoint_doc(job: &Job) -> Option<Option<Value>> {
    let Some((source, rel)) = checkpoint(job)? else {
        return Some(None);
    };
    let bytes = source.read(&rel).ok()??;
    let doc: Value = serde_json::from_slice(&decompressed(bytes)?).ok()?;
    // Versions 3 and 4 share the shape read here; older or newer ones: the CLI.
    matches!(doc["version"].as_u64(), Some(3 | 4)).then_some(Some(doc))
}

/// The stack resource's outputs as stored (none without a stack resource); `None` when the
/// checkpoint lists no resources.
fn stack_outputs_of(doc: &Value) -> Option<Map<String, Value>> {
    let resources = doc.pointer("/checkpoint/latest/resources")?.as_array()?;
    Some(
        resources
            .iter()
            .find(|r| r["type"] == "pulumi:pulumi:Stack")
            .and_then(|stack| stack["outputs"].as_object().cloned())
            .unwrap_or_default(),
    )
}

/// Stored outputs as `stack output --json` prints them (secrets as `"[secret]"`); `None`
/// for an output holding anything but plain values and secrets.
fn masked_outputs(outputs: Map<String, Value>) -> Option<Map<String, Value>> {
    outputs
        .into_iter()
        .map(|(k, v)| masked(v).map(|v| (k, v)))
        .collect()
}

/// On a `file://` or `s3://` backend whose stacks live in project folders, whether the
/// stack has no checkpoint in any form; `None` (ask the CLI) for any other backend or
/// layout, or when the backend cannot be read.
pub fn checkpoint_stack_missing(job: &Job) -> Option<bool> {
    Some(checkpoint(job)?.is_none())
}

/// On a `file://` or `s3://` backend whose stacks live in project folders, when the
/// stack's state was last written (`latest.manifest.time` of its checkpoint: every
/// update, refresh, destroy, import or `pulumi state` edit writes a new one); empty when
/// the stack is missing or holds no deployment yet. `None` when strata cannot tell.
pub fn checkpoint_written_at(job: &Job) -> Option<String> {
    let Some(doc) = checkpoint_doc(job)? else {
        return Some(String::new());
    };
    // A stack `stack init` just made (a preview of a new stack makes one), or one
    // destroyed: no deployment, whenever its empty checkpoint was written.
    let resources = doc
        .pointer("/checkpoint/latest/resources")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    if resources == 0 {
        return Some(String::new());
    }
    Some(
        doc.pointer("/checkpoint/latest/manifest/time")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
    )
}

/// On a `file://` or `s3://` backend whose stacks live in project folders, from one read
/// of the stack's checkpoint: how many resources it holds (0 when there is no checkpoint,
/// or the stack was destroyed) and its outputs as `stack output --json` prints them (`None`
/// when it has none strata can read); `None` when strata cannot tell (ask the CLI, or say
/// so).
pub fn checkpoint_resources_and_outputs(job: &Job) -> Option<(usize, Option<Map<String, Value>>)> {
    let Some(doc) = checkpoint_doc(job)? else {
        return Some((0, None));
    };
    let resources = doc
        .pointer("/checkpoint/latest/resources")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    Some((resources, stack_outputs_of(&doc).and_then(masked_outputs)))
}

/// The checkpoint the CLI would read (`stackPath` in `pkg/backend/diy/state.go`): of
/// `<stack>.json`, `.json.gz` and `.json.zst` in the project's folder, the most recently
/// written; on a tie the later of the three. `Some(None)`: none exists. `None`: strata
/// cannot tell (a backend it does not read, a layout not project-scoped, a read error).
pub(super) fn checkpoint(job: &Job) -> Option<Option<(Source, String)>> {
    let source = Source::of_job(job)?;
    if !super::layout::project_scoped(&source, &job.env) {
        return None;
    }
    let dir = format!(".pulumi/stacks/{}", job.name);
    let form = newest_form(&source, &dir, &format!("{}.json", job.stack))?;
    Some(form.map(|name| (source, format!("{dir}/{name}"))))
}

/// Of `plain` and its `.gz`/`.zst` forms in the folder `dir`, the name of the most
/// recently written (a tie goes to the later form); `Some(None)` when none exists,
/// `None` when the folder cannot be read.
pub(super) fn newest_form(source: &Source, dir: &str, plain: &str) -> Option<Option<String>> {
    let files = source.files(dir).ok()?;
    let mut best: Option<&super::source::Entry> = None;
    for ext in ["", ".gz", ".zst"] {
        let name = format!("{plain}{ext}");
        let Some(f) = files.iter().find(|f| f.name == name) else {
            continue;
        };
        if best.is_none_or(|b| f.modified >= b.modified) {
            best = Some(f);
        }
    }
    Some(best.map(|f| f.name.clone()))
}

/// A checkpoint's JSON bytes, its compression told by its first bytes as the CLI tells
/// it (`encoding.DetectCompression`): gzip, zstd (every frame), or none. `None` when it
/// does not decompress.
pub(super) fn decompressed(bytes: Vec<u8>) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    if bytes.starts_with(&[0x1f, 0x8b, 0x08]) {
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .ok()?;
    } else if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let mut input = &bytes[..];
        while !input.is_empty() {
            ruzstd::decoding::StreamingDecoder::new(&mut input)
                .ok()?
                .read_to_end(&mut out)
                .ok()?;
        }
    } else {
        return Some(bytes);
    }
    Some(out)
}

/// A checkpoint value as `stack output --json` shows it: a secret as `"[secret]"`;
/// `None` for an asset, archive or resource reference (the CLI renders those).
pub(super) fn masked(v: Value) -> Option<Value> {
    Some(match v {
        Value::Object(o) => match o.get(crate::engine::SECRET_SIG_KEY).and_then(Value::as_str) {
            Some(crate::engine::SECRET_SIG) => Value::String("[secret]".into()),
            Some(_) => return None,
            None => Value::Object(
                o.into_iter()
                    .map(|(k, v)| masked(v).map(|v| (k, v)))
                    .collect::<Option<Map<String, Value>>>()?,
            ),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(masked).collect::<Option<Vec<_>>>()?),
        other => other,
    })
}
