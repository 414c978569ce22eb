//! What a step receives: its inputs, wired from upstream outputs (this run's, or read
//! from the upstream's deployed stack; a preview is blocked by an upstream never
//! deployed), its secrets, and a Pulumi project's own config file, whose `secure:`
//! values are kept while their secrets do not change (their hashes beside it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value};

use super::outputs::Outputs;
use super::{Ran, StepRunner};
use crate::engine::pulumi::{Calls, PulumiEngine};
use crate::engine::{Failure, Job, Operation, Progress};
use crate::run::events::Status;
use crate::util::{display_path, slug};
use crate::workspace::{Entry, ProjectKind, StackConfig};

/// The inputs wired from upstream outputs: plain ones, and secret ones by key.
#[derive(Default)]
struct Wired {
    plain: Vec<(String, Value)>,
    secret: BTreeMap<String, String>,
}

impl StepRunner<'_> {
    /// `pulumi stack output` of `job`'s stack, its processes counted in the run's.
    fn stack_outputs(
        &self,
        engine: &PulumiEngine,
        job: &Job,
        log: &mut dyn FnMut(Progress),
        show_secrets: bool,
    ) -> Result<Map<String, Value>, Failure> {
        let mut calls = Calls {
            job,
            control: self.control,
            report: log,
            procs: 0,
            created_stack: false,
        };
        let outputs = engine.stack_outputs(&mut calls, show_secrets);
        self.processes.fetch_add(calls.procs, Ordering::SeqCst);
        outputs
    }

    /// Outputs of `upstream`: from this run, or read from its deployed stack.
    pub(super) fn outputs_of(
        &self,
        upstream: &str,
        downstream: &str,
        wanted: &[&str],
        log: &mut dyn FnMut(Progress),
    ) -> Result<Outputs, (String, bool)> {
        // One reader of an upstream at a time: steps that start together (every step of
        // a preview) wait for the first read and take it from the cache below, instead
        // of each starting its own `stack output` process.
        let gate = self
            .reading
            .lock()
            .map(|mut m| m.entry(upstream.to_string()).or_default().clone())
            .unwrap_or_default();
        let _reading = gate.lock();
        if let Some(o) = self
            .outputs
            .lock()
            .ok()
            .and_then(|m| m.get(upstream).cloned())
        {
            return Ok(o);
        }
        let never = || self.never_deployed(upstream, downstream);
        let Some(kind) = self.ctx.projects.get(upstream).map(|p| &p.kind) else {
            return Err((
                format!("{upstream} is not a project of this profile"),
                false,
            ));
        };
        let outputs = match kind {
            ProjectKind::Command(_) => {
                let text =
                    std::fs::read_to_string(self.outputs_file(upstream)).map_err(|_| never())?;
                let values: Map<String, Value> =
                    serde_json::from_str(&text).map_err(|_| never())?;
                Outputs {
                    values,
                    secret: BTreeSet::new(),
                }
            }
            ProjectKind::Pulumi { .. } => self.pulumi_outputs(upstream, wanted, log, &never)?,
        };
        if let Ok(mut m) = self.outputs.lock() {
            m.insert(upstream.to_string(), outputs.clone());
        }
        Ok(outputs)
    }

    /// Why `downstream` cannot have `upstream`'s outputs: it was never deployed (a
    /// missing input, `true`).
    fn never_deployed(&self, upstream: &str, downstream: &str) -> (String, bool) {
        (
            format!(
                "{downstream} takes inputs from {upstream}, which has not been deployed on stack `{}`.\n  Run `strata up --project {upstream}` first (or `strata up --project {downstream} --with-deps`).",
                self.ctx.stack
            ),
            true,
        )
    }

    /// The outputs of Pulumi project `upstream`'s deployed stack: from its checkpoint
    /// where the backend has one, else `pulumi stack output`; revealed only when
    /// `wanted` names a secret one. `never`: the error when it was never deployed.
    fn pulumi_outputs(
        &self,
        upstream: &str,
        wanted: &[&str],
        log: &mut dyn FnMut(Progress),
        never: &dyn Fn() -> (String, bool),
    ) -> Result<Outputs, (String, bool)> {
        let Some(engine) = self.pulumi else {
            return Err(("the pulumi CLI is needed to read outputs".into(), false));
        };
        let job = self.job_for(upstream, Operation::Up).ok_or_else(never)?;
        // On a file or S3 backend the checkpoint holds them: no process.
        if crate::engine::pulumi::checkpoint_stack_missing(&job) == Some(true) {
            return Err(never());
        }
        let masked = match crate::engine::pulumi::PulumiEngine::stack_outputs_from_checkpoint(&job)
        {
            Some(m) => m,
            None => self.stack_outputs(engine, &job, log, false).map_err(|f| {
                if f.is_missing_stack() {
                    never()
                } else {
                    (f.message().to_string(), false)
                }
            })?,
        };
        if masked.is_empty() && !self.journal_says_deployed(upstream) {
            // A stack that exists but was never brought up (a preview, a failed
            // first up) has no outputs yet: as good as not deployed, unless this
            // workspace's journal saw it come up (a project without outputs).
            return Err(never());
        }
        let secret: BTreeSet<String> = masked
            .iter()
            .filter(|(_, v)| crate::engine::contains_secret_mask(v))
            .map(|(k, _)| k.clone())
            .collect();
        let values = if wanted.iter().any(|w| secret.contains(*w)) {
            // Decrypted by strata where it can (the passphrase provider).
            match crate::engine::pulumi::PulumiEngine::stack_outputs_from_checkpoint_revealed(&job)
            {
                Some(clear) => clear,
                None => self
                    .stack_outputs(engine, &job, log, true)
                    .map_err(|f| (f.message().to_string(), false))?,
            }
        } else {
            masked
        };
        self.ctx.learn_secrets(&values, &secret);
        Ok(Outputs { values, secret })
    }

    /// True when this journal saw `path` come up and not go down since.
    fn journal_says_deployed(&self, path: &str) -> bool {
        let last = self.deployed_by_journal.get_or_init(|| {
            crate::state::journal::last_success(&self.journal.read())
                .into_keys()
                .map(|p| (p, true))
                .collect()
        });
        last.get(path).copied().unwrap_or(false)
    }

    /// Preview: the upstreams of `path` that have never been deployed (the outputs of
    /// the others are read, and kept for the inputs), or why that could not be told.
    pub(super) fn undeployed_upstreams(
        &self,
        path: &str,
        log: &mut dyn FnMut(Progress),
    ) -> Result<Vec<String>, (Status, String)> {
        let mut undeployed = Vec::new();
        for up in self.ctx.upstreams.get(path).into_iter().flatten() {
            let needed = self.ctx.needed.get(up).cloned().unwrap_or_default();
            let wanted: Vec<&str> = needed.iter().map(String::as_str).collect();
            match self.outputs_of(up, path, &wanted, log) {
                Ok(_) => {}
                Err(_) if self.control.is_cancelled() => {
                    return Err((Status::Cancelled, "cancelled".into()));
                }
                Err((_, true)) => undeployed.push(up.clone()),
                Err((msg, false)) => return Err((Status::Failed, msg)),
            }
        }
        Ok(undeployed)
    }

    /// Preview: true when `path` may never have been deployed and a step of this run takes
    /// inputs from it, so its preview's known outputs may be projected.
    pub(super) fn feeds_a_projection(&self, path: &str) -> bool {
        let feeds = self.ctx.plan.nodes.iter().any(|n| {
            n.entry
                .as_ref()
                .is_some_and(|e| e.inputs.iter().any(|i| i.project == path))
        });
        let is_pulumi = matches!(
            self.ctx.projects.get(path).map(|p| &p.kind),
            Some(ProjectKind::Pulumi { .. })
        );
        if !(feeds && is_pulumi) {
            return false;
        }
        // No process: a plan saved for nothing costs only a file, while reading its
        // outputs here would race its dependents' own reads (two processes for one).
        let Some(job) = self.job_for(path, Operation::Up) else {
            return false;
        };
        match crate::engine::pulumi::checkpoint_stack_missing(&job) {
            Some(true) => true,
            Some(false) => {
                crate::engine::pulumi::PulumiEngine::stack_outputs_from_checkpoint(&job)
                    .is_none_or(|m| m.is_empty())
                    && !self.journal_says_deployed(path)
            }
            None => !self.journal_says_deployed(path),
        }
    }

    /// The update plan a preview saves in its scratch folder so that its known stack
    /// outputs can be read (the preview's JSON does not carry them).
    pub(super) fn projection_plan(&self, job: &Job) -> Option<crate::engine::PlanFile> {
        crate::files::private_dir(&job.scratch_dir).ok()?;
        let file = job.scratch_dir.join("projection-plan.json");
        let _ = std::fs::remove_file(&file);
        Some(crate::engine::PlanFile::Save(file))
    }

    /// Gives the job of `path` what it receives: its wired inputs and its secrets (a
    /// Pulumi project's through its own config file, a command project's through its
    /// environment). Returns the project's secrets, or how the step ends when something
    /// it needs is missing.
    pub(super) fn receive(
        &self,
        path: &str,
        entry: &Entry,
        is_pulumi: bool,
        job: &mut Job,
        sink: &mut dyn FnMut(Progress),
    ) -> Result<BTreeMap<String, String>, Box<Ran>> {
        let Wired {
            plain: plain_inputs,
            secret: secret_inputs,
        } = self.wire_inputs(path, entry, is_pulumi, sink)?;
        for (k, v) in &plain_inputs {
            job.inputs.insert(k.clone(), v.clone());
        }
        let mut secrets = self.secrets_of(entry);
        if is_pulumi {
            secrets.extend(secret_inputs.clone());
            // Always the project's own copy: the real CLI writes a salt into the file it
            // is given when that has none (truncate and write, comments dropped), so
            // projects started at once must never share one, and the user's file stays
            // as they wrote it.
            match self.project_config(path, entry, &plain_inputs, &secrets, job) {
                Ok((file, to_set)) => {
                    job.config_file = file;
                    job.secret_config = to_set;
                }
                Err(msg) => return Err(Box::new(Ran::new(Status::Failed, Some(msg), None))),
            }
        } else {
            // Secrets reach a command project only through its environment: never a file.
            for (k, v) in &secrets {
                job.env.insert(
                    format!("STRATA_SECRET_{}", crate::util::env_key(k)),
                    v.clone(),
                );
            }
            for (k, v) in &secret_inputs {
                job.env
                    .insert(crate::engine::command::input_var(k), v.clone());
            }
        }
        Ok(secrets)
    }

    /// Inputs: config values from upstream outputs.
    fn wire_inputs(
        &self,
        path: &str,
        entry: &Entry,
        is_pulumi: bool,
        sink: &mut dyn FnMut(Progress),
    ) -> Result<Wired, Box<Ran>> {
        let ctx = self.ctx;
        let op = ctx.op;
        let mut wired = Wired::default();
        // `pulumi destroy` does not run the program: it needs no wired inputs.
        let wire_inputs = !(is_pulumi && op == Operation::Destroy);
        for input in entry.inputs.iter().filter(|_| wire_inputs) {
            // Everything any dependent reads from that upstream, so one read serves all
            // (and a secret among them is read in plaintext, not as "[secret]").
            let needed = ctx.needed.get(&input.project).cloned().unwrap_or_default();
            let mut wanted: Vec<&str> = needed.iter().map(String::as_str).collect();
            wanted.push(input.output.as_str());
            let got = self.outputs_of(&input.project, path, &wanted, sink);
            let outputs = match got {
                Ok(o) => o,
                Err(_) if op == Operation::Destroy => continue,
                Err((msg, _)) if self.control.is_cancelled() => {
                    return Err(Box::new(Ran::new(Status::Cancelled, Some(msg), None)));
                }
                Err(_) if op == Operation::Preview => {
                    let projected = self.projected.lock().ok().and_then(|m| {
                        m.get(path)
                            .and_then(|p| p.values.get(&input.key))
                            .map(|(v, source, _)| (v.clone(), source.clone()))
                    });
                    match projected {
                        // A mock may stand for a secret output, and Pulumi refuses a
                        // plain value for a config key its program declares secret; a
                        // secret value is accepted for any key.
                        Some((v, super::projection::Source::Mock)) => {
                            let text = match v {
                                Value::String(s) => s,
                                other => other.to_string(),
                            };
                            wired.secret.insert(input.key.clone(), text);
                            continue;
                        }
                        Some((v, _)) => {
                            wired.plain.push((input.key.clone(), v));
                            continue;
                        }
                        None => return Err(Box::new(Ran::blocked(&input.project, &ctx.stack))),
                    }
                }
                Err((msg, true)) => return Err(Box::new(Ran::missing_input(msg))),
                Err((msg, false)) => {
                    return Err(Box::new(Ran::new(Status::Failed, Some(msg), None)));
                }
            };
            let Some(value) = outputs.values.get(&input.output) else {
                if op == Operation::Destroy {
                    continue;
                }
                let mut names: Vec<&str> = outputs.values.keys().map(String::as_str).collect();
                names.sort();
                // A profile naming an output that is not exported: a missing input (exit 3).
                return Err(Box::new(Ran::missing_input(format!(
                    "input `{}` of {}: {} has no output `{}` (its outputs: {}).\n  Fix `inputs:` in {}, or export that output from {}.",
                    input.key,
                    path,
                    input.project,
                    input.output,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    },
                    display_path(&entry.file),
                    input.project
                ))));
            };
            if outputs.secret.contains(&input.output) {
                let text = match value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                wired.secret.insert(input.key.clone(), text);
            } else {
                wired.plain.push((input.key.clone(), value.clone()));
            }
        }
        Ok(wired)
    }

    /// Secrets of this project: its own and the profile-level ones.
    fn secrets_of(&self, entry: &Entry) -> BTreeMap<String, String> {
        let ctx = self.ctx;
        let mut secrets: BTreeMap<String, String> = BTreeMap::new();
        for key in entry
            .secrets
            .iter()
            .map(|s| &s.key)
            .chain(ctx.profile_secret_keys.iter())
        {
            if let Some(v) = ctx.secrets.get(key) {
                secrets.insert(key.clone(), v.clone());
            }
        }
        secrets
    }

    /// The project's stack config for the run: its own `Pulumi.<stack>.yaml` with the
    /// profile's keys and the wired inputs laid over it (`StackConfig`'s `Layers`), in a
    /// copy under `.strata/` (the user's file is never written: Pulumi writes a salt into
    /// the file it is given when that has none), keeping `secure:` values of secrets
    /// that did not change (so they are not re-encrypted every run). A new or changed
    /// secret is encrypted here as Pulumi would when the copy names a passphrase salt
    /// that the child's passphrase (`job`'s environment, in its folder) opens. Returns
    /// the file and the secrets that still need `pulumi config set --secret`.
    fn project_config(
        &self,
        path: &str,
        entry: &Entry,
        plain: &[(String, Value)],
        secrets: &BTreeMap<String, String>,
        job: &Job,
    ) -> Result<(PathBuf, BTreeMap<String, String>), String> {
        let dir = self.ctx.state_dir.join("config");
        let file = dir.join(format!("{}.yaml", slug(path)));
        let plain: Vec<(String, serde_yaml::Value)> = plain
            .iter()
            .map(|(k, v)| {
                let y = serde_yaml::to_value(v).unwrap_or(serde_yaml::Value::Null);
                (k.clone(), y)
            })
            .collect();
        let own = self.own_config(path, entry)?;
        let layers = crate::workspace::stack_config::Layers {
            own: own.as_ref(),
            shared: &self.ctx.stack_config,
            entry: &entry.config,
            inputs: &plain,
        };
        let mut cfg = layers.build(&file)?;
        let previous = StackConfig::load_project(&file).ok().flatten();
        // The salt: the project's or the shared file's when either names a provider,
        // else the one Pulumi wrote into this copy on an earlier run (or that `stack
        // init` left); with none, Pulumi writes one into this copy, which no other
        // project shares.
        if !cfg.names_secrets_provider()
            && let Some(p) = previous.as_ref().filter(|p| p.names_secrets_provider())
        {
            cfg.take_secrets_provider(p);
        }
        // A checkout with no copy yet (another machine, a CI job) of a stack that exists:
        // the stack's own passphrase salt, from its checkpoint, as Pulumi takes it with
        // PULUMI_FALLBACK_TO_STATE_SECRETS_MANAGER, so every checkout encrypts with the
        // stack's key (a new salt would make another key: a plan saved on one machine
        // would not decrypt on another, and the state would be re-encrypted each time).
        if !cfg.names_secrets_provider()
            && let Some(salt) = crate::engine::pulumi::checkpoint_passphrase_salt(job)
        {
            cfg.set_top("encryptionsalt", serde_yaml::Value::from(salt));
        }
        let hashes = self.read_secret_hashes(path);
        let mut to_set = BTreeMap::new();
        for (k, v) in secrets {
            let kept = previous.as_ref().and_then(|p| p.get(k)).filter(|val| {
                val.get("secure").is_some() && hashes.get(k) == Some(&self.secret_hash(k, v, &cfg))
            });
            match kept {
                Some(val) => cfg.set(k, val.clone()),
                None => {
                    to_set.insert(k.clone(), v.clone());
                }
            }
        }
        encrypt_as_pulumi_would(&mut cfg, &mut to_set, (&job.env, job.dir.as_path()));
        cfg.save_to(&file).map_err(|e| e.message)?;
        Ok((file, to_set))
    }

    /// The project's own stack config of the run's stack, as Pulumi reads it.
    fn own_config(&self, path: &str, entry: &Entry) -> Result<Option<StackConfig>, String> {
        let Some(file) = self
            .ctx
            .projects
            .get(path)
            .and_then(|p| p.own_stack_config(self.ctx.stack_of(&entry.path)))
        else {
            return Ok(None);
        };
        StackConfig::load_project(&file).map_err(|e| e.message)
    }

    fn secret_hash(&self, key: &str, value: &str, cfg: &StackConfig) -> String {
        let salt = cfg.encryption_salt().and_then(|s| s.as_str()).unwrap_or("");
        // The stack config's salt is part of it: a new salt means re-encrypting.
        crate::secrets::hmac::secret_digest(&self.ctx.secret_key, key, &format!("{salt}\0{value}"))
    }

    fn hashes_file(&self, path: &str) -> PathBuf {
        self.ctx
            .state_dir
            .join("config")
            .join(format!("{}.secrets.json", slug(path)))
    }

    fn read_secret_hashes(&self, path: &str) -> BTreeMap<String, String> {
        std::fs::read_to_string(self.hashes_file(path))
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default()
    }

    pub(super) fn record_secret_hashes(&self, path: &str, secrets: &BTreeMap<String, String>) {
        let file = self
            .ctx
            .state_dir
            .join("config")
            .join(format!("{}.yaml", slug(path)));
        let Ok(Some(cfg)) = StackConfig::load_project(&file) else {
            return;
        };
        let hashes: BTreeMap<String, String> = secrets
            .iter()
            .filter(|(k, _)| cfg.get(k).is_some_and(|v| v.get("secure").is_some()))
            .map(|(k, v)| (k.clone(), self.secret_hash(k, v, &cfg)))
            .collect();
        if let Ok(text) = serde_json::to_string_pretty(&hashes) {
            let _ =
                crate::files::write_atomic(&self.hashes_file(path), text.as_bytes(), Some(0o600));
        }
    }
}

/// Writes each secret of `to_set` into `cfg` as `pulumi config set --secret` would
/// (`secure: v1:…`, encrypted with the key of the file's passphrase salt), taking it out
/// of `to_set`: no `pulumi config` process is started for it. Only when the file's
/// secrets provider is the passphrase one with a salt the child's passphrase opens, and
/// for namespaced keys (`project:key`, as strata writes them); otherwise nothing is done
/// and the CLI sets them (it chooses the provider, makes a salt, namespaces the key).
fn encrypt_as_pulumi_would(
    cfg: &mut StackConfig,
    to_set: &mut BTreeMap<String, String>,
    (env, dir): (&BTreeMap<String, String>, &std::path::Path),
) {
    if to_set.is_empty()
        || to_set.keys().any(|k| !k.contains(':'))
        || cfg.secrets_provider().as_deref() != Some("passphrase")
    {
        return;
    }
    let Some(state) = cfg.encryption_salt().and_then(|v| v.as_str()) else {
        return;
    };
    let Some(enc) = crate::engine::pulumi::config_encrypter(state, env, dir) else {
        return;
    };
    let sealed: Option<Vec<(String, String)>> = to_set
        .iter()
        .map(|(k, v)| Some((k.clone(), enc.encrypt(v)?)))
        .collect();
    for (k, ciphertext) in sealed.into_iter().flatten() {
        let mut secure = serde_yaml::Mapping::new();
        secure.insert("secure".into(), ciphertext.into());
        cfg.set(&k, serde_yaml::Value::Mapping(secure));
        to_set.remove(&k);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::string_map;

    /// A real passphrase salt (Pulumi v3.274.1) and the passphrase that opens it.
    const SALT: &str = "v1:pCFqnvIebFI=:v1:8BK0SLxdDfspaeQj:2xjScYM9NjwWfTQ6QwZgd2TSOy1sGA==";
    const PHRASE: &str = "correct horse battery staple";

    fn config(top: &[(&str, &str)]) -> StackConfig {
        let mut cfg = StackConfig::new(std::path::Path::new("/nowhere.yaml"));
        for (k, v) in top {
            cfg.set_top(k, serde_yaml::Value::from(*v));
        }
        cfg
    }

    fn to_set(keys: &[&str]) -> BTreeMap<String, String> {
        keys.iter()
            .map(|k| (k.to_string(), "s3cret".into()))
            .collect()
    }

    #[test]
    fn secrets_are_encrypted_here_only_under_a_passphrase_salt_the_child_can_open() {
        let env = string_map(&[("PULUMI_CONFIG_PASSPHRASE", PHRASE)]);
        let here = (&env, std::path::Path::new("/"));
        let mut cfg = config(&[("encryptionsalt", SALT)]);
        let mut set = to_set(&["app:token", "app:other"]);
        encrypt_as_pulumi_would(&mut cfg, &mut set, here);
        assert!(set.is_empty(), "{set:?}");
        for k in ["app:token", "app:other"] {
            let secure = cfg
                .get(k)
                .and_then(|v| v.get("secure"))
                .and_then(|v| v.as_str());
            assert!(
                secure.is_some_and(|s| s.starts_with("v1:") && !s.contains("s3cret")),
                "{k}: {secure:?}"
            );
        }
        // Left to the CLI: a key Pulumi namespaces itself, another provider, no salt,
        // no passphrase, a passphrase that does not open the salt.
        let cases: [(StackConfig, &[&str], BTreeMap<String, String>); 5] = [
            (config(&[("encryptionsalt", SALT)]), &["token"], env.clone()),
            (
                config(&[
                    ("secretsprovider", "awskms://alias/x"),
                    ("encryptedkey", "abc"),
                ]),
                &["app:t"],
                env.clone(),
            ),
            (config(&[]), &["app:t"], env.clone()),
            (
                config(&[("encryptionsalt", SALT)]),
                &["app:t"],
                BTreeMap::new(),
            ),
            (
                config(&[("encryptionsalt", SALT)]),
                &["app:t"],
                string_map(&[("PULUMI_CONFIG_PASSPHRASE", "wrong")]),
            ),
        ];
        for (mut cfg, keys, env) in cases {
            let mut set = to_set(keys);
            encrypt_as_pulumi_would(&mut cfg, &mut set, (&env, std::path::Path::new("/")));
            assert_eq!(set.len(), 1, "{keys:?}");
            assert!(cfg.get(keys[0]).is_none(), "{keys:?}");
        }
    }
}
