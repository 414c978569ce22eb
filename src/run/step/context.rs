//! What every step of one run shares ([`Ctx`]): the run's plan, operation, environment and
//! stack config, the secrets and the redactor that grows with secret outputs, the
//! fingerprints and output hashes `--changed` compares, and the profile-wide facts a step
//! looks up (projects, upstreams, needs, mocks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde_json::{Map, Value};

use super::bundle;
use crate::engine::Operation;
use crate::plan::Plan;
use crate::run::events::ChildEnv;
use crate::secrets::redact::Redactor;
use crate::workspace::{Project, StackConfig};

/// What every step of one run shares.
pub struct Ctx {
    pub root: PathBuf,
    pub stack: String,
    pub provider: String,
    pub op: Operation,
    /// The plan being run (selected; reversed for destroy).
    pub plan: std::sync::Arc<Plan>,
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
    /// The key of secret digests (the store's: see `secrets::hmac::secret_digest`).
    pub secret_key: Vec<u8>,
    /// Name of the Kubernetes Secret the secrets step writes.
    pub secret_name: String,
    /// Where the secrets step learns which cluster is the stack's (`None`: it cannot).
    pub cluster: Option<crate::workspace::profile::ClusterSource>,
    /// `-v`: the children's raw lines (CLI calls, stderr) are shown too.
    pub verbose: bool,
    /// Every project of the profile (for upstream lookups), shared with the plan.
    pub projects: BTreeMap<String, std::sync::Arc<Project>>,
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
    /// `preview --save-plan` / `up --plan`: the plan bundle written or applied.
    pub bundle: Option<bundle::PlanBundle>,
    /// Pulumi projects whose code reads other stacks through StackReferences: the
    /// projects they read, or `None` when a reference names a stack the scanner cannot
    /// read (it may read any). A preview cannot project what they read.
    pub reads_backend: BTreeMap<String, Option<BTreeSet<String>>>,
    /// The needs each entry declares: its `needs:`, or the previous entry when it has
    /// none. (The kubernetes stage's wait for every infrastructure entry is not one.)
    pub declared_needs: BTreeMap<String, BTreeSet<String>>,
    /// `mock_outputs:` allowed for this operation, by the project they stand in for.
    pub mocks: BTreeMap<String, Map<String, Value>>,
    /// What observers of the events add to a running project's children (`TRACEPARENT`).
    pub child_env: ChildEnv,
    /// The Pulumi backend of each project (its `PULUMI_BACKEND_URL`).
    pub backends: crate::workspace::backend::Backends,
    /// Projects whose own name of the stack is not the run's (`stack:`), by path.
    pub stack_names: BTreeMap<String, String>,
    /// Who reads each project's outputs (by the project read): `inputs:` and the outputs
    /// YAML programs read through StackReferences (`contracts`). Filled for a preview
    /// and for projects `policy:` rules hold.
    pub readers: BTreeMap<String, Vec<crate::gates::contracts::Read>>,
    /// The stack's bucket, when its backend is one: what every machine on the stack sees
    /// (held and approved plans).
    pub shared: Option<std::sync::Arc<crate::backend::Backend>>,
}

impl Ctx {
    /// The name project `path` gives the run's stack (`stack:` of its entry).
    pub fn stack_of(&self, path: &str) -> &str {
        self.stack_names.get(path).unwrap_or(&self.stack)
    }

    /// The approval gate of project `path` (kept in the stack's bucket on a shared
    /// backend).
    pub fn gate(&self, path: &str) -> crate::gates::approvals::Gate {
        crate::gates::approvals::Gate::of(&self.state_dir, path).shared_in(
            self.shared.clone(),
            &self.stack,
            path,
        )
    }

    /// `text` with every known secret value replaced by `[secret]`.
    pub fn redact(&self, text: &str) -> String {
        match self.redactor.read() {
            Ok(r) => r.redact(text),
            Err(_) => crate::secrets::redact::MASK.to_string(),
        }
    }

    /// Learns the plaintext of secret outputs, before anything can print them.
    pub(super) fn learn_secrets(&self, values: &Map<String, Value>, secret: &BTreeSet<String>) {
        if let Ok(mut r) = self.redactor.write() {
            for v in secret.iter().filter_map(|k| values.get(k)) {
                r.add_value(v);
            }
        }
    }
}
