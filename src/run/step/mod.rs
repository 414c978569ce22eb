//! One step of a run: a project through its engine (inputs wired from upstream outputs,
//! a per-project config file when needed, a log file, hooks, a journal record), or the
//! built-in step that writes secrets into the cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use serde_json::{Map, Value};

use super::events::{RunEvent, Status};
use super::journal::{Journal, Record};
use super::scheduler::{Executor, StepResult};
use crate::engine::command::CommandEngine;
use crate::engine::pulumi::PulumiEngine;
use crate::engine::{Control, Engine, Failure, Job, Operation, Progress};
use crate::plan::{NodeKind, Plan};
use crate::secrets::redact::Redactor;
use crate::util::{display_path, now_ms, rfc3339, slug};
use crate::workspace::profile::Hook;
use crate::workspace::{ProjectKind, StackConfig};

mod cluster_secrets;
pub mod hooks;
mod inputs;

/// What every step of one run shares.
pub struct Ctx {
    pub root: PathBuf,
    pub stack: String,
    pub provider: String,
    pub op: Operation,
    /// The plan being run (selected; reversed for destroy).
    pub plan: Plan,
    /// The base environment of every child.
    pub env: BTreeMap<String, String>,
    pub stack_config: StackConfig,
    pub state_dir: PathBuf,
    pub run_id: String,
    /// Grows during the run: secret outputs are added as soon as they are read.
    pub redactor: std::sync::RwLock<Redactor>,
    /// Secret values by key (from the encrypted store).
    pub secrets: BTreeMap<String, String>,
    /// Profile-level secret keys (reach every project).
    pub profile_secret_keys: Vec<String>,
    /// Outputs of each project that dependents or hooks read.
    pub needed: BTreeMap<String, Vec<String>>,
    pub fingerprints: BTreeMap<String, String>,
    pub fingerprint_salt: Vec<u8>,
    /// The key of secret digests (the store's: see `fingerprint::secret_digest`).
    pub secret_key: Vec<u8>,
    /// Name of the Kubernetes Secret the secrets step writes.
    pub secret_name: String,
    /// `-v`: the children's raw lines (CLI calls, stderr) are shown too.
    pub verbose: bool,
    /// Project dirs and kinds of every project of the profile (for upstream lookups).
    pub projects: BTreeMap<String, (PathBuf, String, ProjectKind)>,
    /// The projects each project needs directly, from the whole profile (not only the
    /// selection): a preview is blocked when one was never deployed.
    pub upstreams: BTreeMap<String, Vec<String>>,
    /// `preview --refresh`.
    pub refresh: bool,
    /// Each project's outputs hash at its last success, before this run.
    pub last_outputs: BTreeMap<String, String>,
    /// `--changed`: steps that run only if an upstream that runs leaves other outputs
    /// than they last ran with (upstream → that outputs hash).
    pub conditional: BTreeMap<String, BTreeMap<String, String>>,
    /// `up --force-conflicts`: the secrets step takes over fields another manager set.
    pub force_conflicts: bool,
}

impl Ctx {
    /// `text` with every known secret value replaced by `[secret]`.
    pub fn redact(&self, text: &str) -> String {
        match self.redactor.read() {
            Ok(r) => r.redact(text),
            Err(_) => crate::secrets::redact::MASK.to_string(),
        }
    }

    /// Learns the plaintext of secret outputs, before anything can print them.
    fn learn_secrets(&self, values: &Map<String, Value>, secret: &BTreeSet<String>) {
        if let Ok(mut r) = self.redactor.write() {
            for k in secret {
                match values.get(k) {
                    Some(Value::String(s)) if s != crate::secrets::redact::MASK => r.add(s),
                    Some(Value::String(_)) => {}
                    Some(Value::Null) | None => {}
                    Some(other) => r.add(&other.to_string()),
                }
            }
        }
    }
}

/// How a project step ended.
struct Ran {
    status: Status,
    message: Option<String>,
    exit_code: Option<i32>,
    /// Failed for a missing input: an upstream never deployed, or an output it lacks.
    missing_input: bool,
    /// `blocked`: the upstream that was never deployed.
    upstream: Option<String>,
    changes: Option<crate::engine::digest::Changes>,
    /// A successful `up`: the keyed hash of its outputs.
    outputs_hash: Option<String>,
}

impl Ran {
    fn new(status: Status, message: Option<String>, exit_code: Option<i32>) -> Ran {
        Ran {
            status,
            message,
            exit_code,
            missing_input: false,
            upstream: None,
            changes: None,
            outputs_hash: None,
        }
    }

    fn missing_input(message: String) -> Ran {
        Ran {
            missing_input: true,
            ..Ran::new(Status::Failed, Some(message), None)
        }
    }

    fn blocked(upstream: &str, stack: &str) -> Ran {
        Ran {
            upstream: Some(upstream.to_string()),
            ..Ran::new(
                Status::Blocked,
                Some(format!(
                    "needs {upstream}, which has never been deployed on stack `{stack}`"
                )),
                None,
            )
        }
    }
}

/// The kinds of step a plan holds, each run its own way.
enum Step {
    /// A project through its engine.
    Project,
    /// The built-in step that writes secrets into the cluster.
    ClusterSecrets,
}

impl Step {
    fn of(kind: NodeKind) -> Step {
        match kind {
            NodeKind::Pulumi | NodeKind::Command => Step::Project,
            NodeKind::Builtin => Step::ClusterSecrets,
        }
    }
}

/// Outputs of a project, and which of them are secret.
#[derive(Debug, Clone, Default)]
struct Outputs {
    values: Map<String, Value>,
    secret: BTreeSet<String>,
}

pub struct StepRunner<'a> {
    ctx: &'a Ctx,
    control: &'a Control,
    pulumi: Option<&'a PulumiEngine>,
    command: &'a CommandEngine,
    journal: &'a Journal,
    logs: Mutex<BTreeMap<usize, PathBuf>>,
    outputs: Mutex<BTreeMap<String, Outputs>>,
    processes: AtomicU32,
    /// The last lines shown for each step (rendered, redacted), for the summary.
    tails: Mutex<BTreeMap<usize, Vec<String>>>,
    /// Per project: whether the journal's last up/destroy of it is a successful up.
    deployed_by_journal: std::sync::OnceLock<BTreeMap<String, bool>>,
    /// The outputs hash of each project that came up in this run.
    new_outputs: Mutex<BTreeMap<String, String>>,
    /// `--changed`: steps skipped at run time because their upstreams' outputs did not
    /// change.
    unchanged: Mutex<BTreeSet<usize>>,
    /// Each step's log, opened by `prepare`, taken by `execute`.
    log_files: Mutex<BTreeMap<usize, std::fs::File>>,
}

impl<'a> StepRunner<'a> {
    pub fn new(
        ctx: &'a Ctx,
        control: &'a Control,
        pulumi: Option<&'a PulumiEngine>,
        command: &'a CommandEngine,
        journal: &'a Journal,
    ) -> StepRunner<'a> {
        StepRunner {
            ctx,
            control,
            pulumi,
            command,
            journal,
            logs: Mutex::new(BTreeMap::new()),
            outputs: Mutex::new(BTreeMap::new()),
            processes: AtomicU32::new(0),
            tails: Mutex::new(BTreeMap::new()),
            deployed_by_journal: std::sync::OnceLock::new(),
            new_outputs: Mutex::new(BTreeMap::new()),
            unchanged: Mutex::new(BTreeSet::new()),
            log_files: Mutex::new(BTreeMap::new()),
        }
    }

    /// Processes started by all steps (engines, hooks, output reads).
    pub fn processes(&self) -> u32 {
        self.processes.load(Ordering::SeqCst)
    }

    /// The last lines a step showed (rendered engine events, not raw JSON).
    pub fn tail(&self, node: usize) -> Vec<String> {
        self.tails
            .lock()
            .ok()
            .and_then(|t| t.get(&node).cloned())
            .unwrap_or_default()
    }

    /// Shows a line of step `node` (a rendered engine event, a command's or a hook's
    /// output): redacted, kept for the summary's tail, and emitted.
    fn show(&self, node: usize, line: &str, emit: &(dyn Fn(RunEvent) + Sync)) {
        let line = self.ctx.redact(line);
        if let Ok(mut t) = self.tails.lock() {
            let v = t.entry(node).or_default();
            v.push(line.clone());
            if v.len() > 15 {
                v.remove(0);
            }
        }
        emit(RunEvent::ProjectOutput {
            project: self.ctx.plan.nodes[node].path.clone(),
            line,
        });
    }

    pub fn log_path(&self, node: usize) -> Option<PathBuf> {
        self.logs.lock().ok()?.get(&node).cloned()
    }

    fn job_for(&self, path: &str, op: Operation) -> Option<Job> {
        let (dir, name, _) = self.ctx.projects.get(path)?;
        Some(Job {
            path: path.to_string(),
            name: name.clone(),
            dir: dir.clone(),
            op,
            stack: self.ctx.stack.clone(),
            env: self.ctx.env.clone(),
            config_file: self.ctx.stack_config.path.clone(),
            inputs: BTreeMap::new(),
            needed_outputs: self.ctx.needed.get(path).cloned().unwrap_or_default(),
            scratch_dir: self.ctx.state_dir.join("work").join(slug(path)),
            secret_config: BTreeMap::new(),
            refresh: self.ctx.refresh && op == Operation::Preview,
        })
    }

    fn outputs_file(&self, path: &str) -> PathBuf {
        self.ctx
            .state_dir
            .join("outputs")
            .join(format!("{}.json", slug(path)))
    }

    /// The outputs hash of `path` now: from this run, else from its last success.
    fn current_outputs(&self, path: &str) -> Option<String> {
        self.new_outputs
            .lock()
            .ok()
            .and_then(|m| m.get(path).cloned())
            .or_else(|| self.ctx.last_outputs.get(path).cloned())
    }

    /// `--changed`: a conditional step whose upstreams all left the outputs it last ran
    /// with (decided once they are done).
    fn upstream_outputs_unchanged(&self, path: &str) -> bool {
        self.ctx.conditional.get(path).is_some_and(|expected| {
            expected
                .iter()
                .all(|(u, h)| self.current_outputs(u).as_ref() == Some(h))
        })
    }

    /// The keyed hash of a project's outputs (never the values: secret ones included).
    /// A secret output strata only saw masked (`[secret]`: read by a StackReference, not
    /// through `inputs:`) has a value it cannot hash, so the hash is this run's own: a
    /// dependent that reads it is never skipped as unchanged after the project ran.
    fn outputs_hash(&self, outputs: &Map<String, Value>) -> String {
        // A secret of the store that an output repeats in clear (a command project that
        // echoes it) is hashed under the store's own key first: the salt beside the
        // journal must not let a reader of `.strata/` test guesses of it.
        let mut secrets: Vec<&String> = self
            .ctx
            .secrets
            .values()
            .filter(|v| !v.is_empty())
            .collect();
        secrets.sort_by_key(|v| std::cmp::Reverse(v.len()));
        let masked: Map<String, Value> = outputs
            .iter()
            .map(|(k, v)| (k.clone(), self.mask_secrets(v, &secrets)))
            .collect();
        let sorted: BTreeMap<&String, &Value> = masked.iter().collect();
        let mut text = serde_json::to_string(&sorted).unwrap_or_default();
        if outputs.values().any(crate::engine::contains_secret_mask) {
            text.push_str("\0masked secret output, run ");
            text.push_str(&self.ctx.run_id);
        }
        super::fingerprint::keyed_hash(&self.ctx.fingerprint_salt, "outputs", &text)
    }

    /// `v` with every occurrence of each of `secrets` (longest first) replaced by its
    /// digest under the store's key.
    fn mask_secrets(&self, v: &Value, secrets: &[&String]) -> Value {
        match v {
            Value::String(s) => {
                let mut out = s.clone();
                for secret in secrets {
                    if out.contains(secret.as_str()) {
                        let d = super::fingerprint::secret_digest(
                            &self.ctx.secret_key,
                            "output",
                            secret,
                        );
                        out = out.replace(secret.as_str(), &format!("[secret:{d}]"));
                    }
                }
                Value::String(out)
            }
            Value::Array(a) => {
                Value::Array(a.iter().map(|x| self.mask_secrets(x, secrets)).collect())
            }
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (k.clone(), self.mask_secrets(x, secrets)))
                    .collect(),
            ),
            other => {
                let text = other.to_string();
                match secrets.iter().find(|s| text == ***s) {
                    Some(secret) => Value::String(format!(
                        "[secret:{}]",
                        super::fingerprint::secret_digest(&self.ctx.secret_key, "output", secret)
                    )),
                    None => other.clone(),
                }
            }
        }
    }

    fn run_project(
        &self,
        i: usize,
        emit: &(dyn Fn(RunEvent) + Sync),
        log: &mut dyn FnMut(&str),
    ) -> Ran {
        let ctx = self.ctx;
        let node = &ctx.plan.nodes[i];
        let (Some(entry), Some(project)) = (&node.entry, &node.project) else {
            return Ran::new(Status::Failed, Some("not a project".into()), None);
        };
        let op = ctx.op;
        let Some(mut job) = self.job_for(&node.path, op) else {
            return Ran::new(Status::Failed, Some("unknown project".into()), None);
        };
        let mut sink = |p: Progress| match p {
            Progress::Raw(l) => {
                if ctx.verbose && !l.trim_start().starts_with('{') {
                    self.show(i, &l, emit);
                }
                log(&l)
            }
            Progress::Line(l) => self.show(i, &l, emit),
            Progress::Resources {
                done,
                started,
                current,
            } => emit(RunEvent::ProjectProgress {
                project: node.path.clone(),
                done,
                started,
                current,
            }),
        };

        if op == Operation::Preview {
            if let ProjectKind::Command(spec) = &project.kind
                && spec.preview.is_none()
            {
                return Ran::new(
                    Status::Skipped,
                    Some("no `preview:` command in its Strata.yaml: nothing to preview".into()),
                    None,
                );
            }
            match self.undeployed_upstream(&node.path, &mut sink) {
                Ok(None) => {}
                Ok(Some(up)) => return Ran::blocked(&up, &ctx.stack),
                Err((status, msg)) => return Ran::new(status, Some(msg), None),
            }
        }

        let is_pulumi = matches!(project.kind, ProjectKind::Pulumi { .. });
        let secrets = match self.receive(&node.path, entry, is_pulumi, &mut job, &mut sink) {
            Ok(secrets) => secrets,
            Err(ran) => return *ran,
        };

        let engine: &dyn Engine = match (&project.kind, self.pulumi) {
            (ProjectKind::Command(_), _) => self.command,
            (ProjectKind::Pulumi { .. }, Some(p)) => p,
            (ProjectKind::Pulumi { .. }, None) => {
                return Ran::new(
                    Status::Failed,
                    Some("the pulumi CLI was not found".into()),
                    None,
                );
            }
        };
        let policy = super::policy::Policy {
            timeout: entry.timeout,
            retry: entry.retry.as_ref(),
            grace: super::signals::grace(&ctx.env),
        };
        let attempts_allowed = entry.retry.as_ref().map(|r| r.attempts).unwrap_or(1);
        let mut on_retry = |n: &super::policy::RetryNote| {
            let delay_ms = n.delay.as_millis() as u64;
            self.show(
                i,
                &format!(
                    "try {} failed with output matching `{}`: trying again in {} (try {} of {attempts_allowed})",
                    n.attempt - 1,
                    n.pattern,
                    humantime::format_duration(n.delay),
                    n.attempt
                ),
                emit,
            );
            emit(RunEvent::ProjectRetry {
                project: node.path.clone(),
                operation: op,
                attempt: n.attempt,
                attempts: attempts_allowed,
                delay_ms,
                reason: n.pattern.clone(),
            });
            let _ = self.journal.append(&Record::Retry {
                run_id: ctx.run_id.clone(),
                project: node.path.clone(),
                operation: op.as_str().into(),
                attempt: n.attempt,
                delay_ms,
                reason: n.pattern.clone(),
                at: rfc3339(now_ms()),
            });
        };
        let (result, tries) = super::policy::run(
            engine,
            &job,
            self.control,
            &policy,
            &mut sink,
            &mut on_retry,
        );
        let after = |m: String| {
            if tries > 1 {
                format!("{m} (after {tries} attempts)")
            } else {
                m
            }
        };
        let outcome = match result {
            Ok(o) => o,
            Err(Failure::Failed {
                message,
                exit_code,
                processes,
            }) => {
                self.processes.fetch_add(processes, Ordering::SeqCst);
                return Ran::new(Status::Failed, Some(after(message)), exit_code);
            }
            Err(Failure::Cancelled { message, processes }) => {
                self.processes.fetch_add(processes, Ordering::SeqCst);
                return Ran::new(Status::Cancelled, Some(message), None);
            }
        };
        self.processes
            .fetch_add(outcome.processes, Ordering::SeqCst);
        if is_pulumi && !secrets.is_empty() {
            self.record_secret_hashes(&node.path, &secrets);
        }
        if op == Operation::Up {
            ctx.learn_secrets(&outcome.outputs, &outcome.secret_outputs);
            let outputs = Outputs {
                values: outcome.outputs.clone(),
                secret: outcome.secret_outputs.clone(),
            };
            if !is_pulumi && let Err(msg) = self.keep_outputs(&node.path, &outcome.outputs) {
                return Ran::new(Status::Failed, Some(msg), None);
            }
            if let Ok(mut m) = self.outputs.lock() {
                m.insert(node.path.clone(), outputs);
            }
            // Hooks, before any dependent starts.
            let hook_env = hooks::hook_env(&job.env, &outcome.outputs, ctx.stack_config.config());
            for hook in &entry.on_success {
                let start = now_ms();
                let res = self.run_hook(
                    hook,
                    &node.path,
                    &project.dir,
                    &hook_env,
                    &outcome.outputs,
                    &mut |l| {
                        log(&l);
                        self.show(i, &l, emit);
                    },
                );
                let status = if res.is_ok() {
                    Status::Succeeded
                } else {
                    Status::Failed
                };
                emit(RunEvent::HookFinished {
                    project: node.path.clone(),
                    hook: hook.describe(),
                    status,
                    duration_ms: now_ms().saturating_sub(start),
                    message: res.as_ref().err().map(|m| ctx.redact(m)),
                });
                if let Err(msg) = res {
                    log(&format!("hook failed: {msg}"));
                    return Ran::new(Status::Failed, Some(msg), None);
                }
            }
        }
        if op == Operation::Destroy && !is_pulumi {
            let _ = std::fs::remove_file(self.outputs_file(&node.path));
        }
        let outputs_hash = (op == Operation::Up).then(|| {
            let h = self.outputs_hash(&outcome.outputs);
            if let Ok(mut m) = self.new_outputs.lock() {
                m.insert(node.path.clone(), h.clone());
            }
            h
        });
        Ran {
            changes: outcome.changes,
            outputs_hash,
            ..Ran::new(Status::Succeeded, Some(after(outcome.summary)), None)
        }
    }

    /// Keeps a command project's outputs where its dependents and later runs read them,
    /// written in place (the same file every run: no new file, no fsync). The journal
    /// record that follows is synced; a file torn by a crash before it reads as "not
    /// deployed", and that project has no success record either, so it runs again.
    fn keep_outputs(&self, path: &str, outputs: &Map<String, Value>) -> Result<(), String> {
        let file = self.outputs_file(path);
        let dir = file.parent().unwrap_or(&file);
        if !dir.is_dir() {
            crate::util::private_dir(dir).map_err(|e| e.message)?;
        }
        let text =
            serde_json::to_string_pretty(&Value::Object(outputs.clone())).unwrap_or_default();
        crate::util::write_private(&file, text.as_bytes()).map_err(|e| e.message)
    }

    fn run_hook(
        &self,
        hook: &Hook,
        path: &str,
        dir: &Path,
        env: &BTreeMap<String, String>,
        outputs: &Map<String, Value>,
        on_line: &mut dyn FnMut(String),
    ) -> Result<(), String> {
        self.processes
            .fetch_add(u32::from(matches!(hook, Hook::Run(_))), Ordering::SeqCst);
        match hook {
            Hook::Run(cmd) => hooks::run_command(cmd, dir, env, self.control, path, on_line),
            Hook::Kubeconfig(k) => {
                let value = match outputs.get(&k.output) {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Null) | None => {
                        return Err(format!(
                            "the kubeconfig hook of {path} needs output `{}`, which the project did not export",
                            k.output
                        ));
                    }
                    Some(other) => other.to_string(),
                };
                let target = super::kubeconfig::default_target(env);
                // Default `<stack>-<project folder>`: one stack never overwrites another's
                // entries, nor the user's own.
                let name = k.context.clone().unwrap_or_else(|| {
                    format!(
                        "{}-{}",
                        self.ctx.stack,
                        path.rsplit('/').next().unwrap_or(path)
                    )
                });
                let report = super::kubeconfig::merge_kubeconfig(&target, &value, &name)
                    .map_err(|e| format!("the kubeconfig hook of {path} failed: {e}"))?;
                on_line(format!(
                    "merged kubeconfig into {} (current context {})",
                    target.display(),
                    report.context
                ));
                Ok(())
            }
        }
    }
}

impl Executor for StepRunner<'_> {
    fn prepare(&self, i: usize) -> Option<String> {
        let node = &self.ctx.plan.nodes[i];
        // Decided here, when what it needs is done: no log for a step that will not run.
        if self.upstream_outputs_unchanged(&node.path) {
            if let Ok(mut u) = self.unchanged.lock() {
                u.insert(i);
            }
            return None;
        }
        let stamp = rfc3339(now_ms()).replace(':', "-");
        let dir = self
            .ctx
            .state_dir
            .join("logs")
            .join(node.path.trim_start_matches('@'));
        let mut path = dir.join(format!("{}-{stamp}.log", self.ctx.op.as_str()));
        let mut n = 1;
        while path.exists() {
            n += 1;
            path = dir.join(format!("{}-{stamp}-{n}.log", self.ctx.op.as_str()));
        }
        if !dir.is_dir() {
            crate::util::private_dir(&dir).ok()?;
        }
        let file = crate::util::open_private_append(&path).ok()?;
        if let Ok(mut l) = self.logs.lock() {
            l.insert(i, path.clone());
        }
        if let Ok(mut f) = self.log_files.lock() {
            f.insert(i, file);
        }
        Some(display_path(&path))
    }

    fn execute(&self, i: usize, emit: &(dyn Fn(RunEvent) + Sync)) -> StepResult {
        let ctx = self.ctx;
        let node = &ctx.plan.nodes[i];
        if self.unchanged.lock().is_ok_and(|u| u.contains(&i)) {
            // Like a step `--changed` dropped before the run: no process, no record.
            return StepResult {
                unchanged: true,
                ..StepResult::not_run(Status::Skipped, "upstream outputs unchanged")
            };
        }
        let started = now_ms();
        let log_path = self.log_path(i);
        // The file `prepare` created, still open.
        let mut file = self.log_files.lock().ok().and_then(|mut f| f.remove(&i));
        let mut log = |line: &str| {
            if let Some(f) = file.as_mut() {
                let _ = writeln!(f, "{}", ctx.redact(line));
            }
        };
        log(&format!(
            "# strata {} of {} · stack {} · provider {} · run {} · {}",
            ctx.op.as_str(),
            node.path,
            ctx.stack,
            ctx.provider,
            ctx.run_id,
            rfc3339(started)
        ));
        let Ran {
            status,
            message,
            exit_code,
            missing_input,
            upstream,
            changes,
            outputs_hash,
        } = match Step::of(node.kind) {
            Step::Project => self.run_project(i, emit, &mut log),
            Step::ClusterSecrets => cluster_secrets::run(ctx, &mut log),
        };
        let ended = now_ms();
        let message = message.filter(|m| !m.is_empty()).map(|m| ctx.redact(&m));
        log(&format!(
            "# {} in {}ms{}",
            status.as_str(),
            ended - started,
            message
                .as_ref()
                .map(|m| format!(": {m}"))
                .unwrap_or_default()
        ));
        let record = Record::Project {
            run_id: ctx.run_id.clone(),
            project: node.path.clone(),
            operation: ctx.op.as_str().into(),
            status: status.as_str().into(),
            started_at: rfc3339(started),
            ended_at: rfc3339(ended),
            duration_ms: ended - started,
            exit_code,
            fingerprint: ctx.fingerprints.get(&node.path).cloned(),
            message: message.clone(),
            log: log_path
                .as_ref()
                .and_then(|p| p.strip_prefix(&ctx.root).ok())
                .map(|p| p.display().to_string()),
            changes: changes.as_ref().map(crate::engine::digest::counts_json),
            upstream_outputs: outputs_hash.is_some().then(|| {
                ctx.upstreams
                    .get(&node.path)
                    .into_iter()
                    .flatten()
                    .filter_map(|u| self.current_outputs(u).map(|h| (u.clone(), h)))
                    .collect()
            }),
            outputs_hash,
        };
        if let Err(e) = self.journal.append(&record) {
            emit(RunEvent::Notice {
                message: format!("warning: {e}"),
            });
        }
        StepResult {
            status,
            duration_ms: ended - started,
            message,
            log: log_path.map(|p| display_path(&p)),
            exit_code,
            missing_input,
            upstream,
            changes,
            unchanged: false,
        }
    }
}
