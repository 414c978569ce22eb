//! Writes the stack's secrets into the cluster as Kubernetes Secrets (server-side apply).
//!
//! A secret key `monitoring:adminpass` becomes the data key `adminpass` of the
//! Secret `<secret_name>` in the namespace `monitoring`. The Secret is applied with
//! field manager `strata`, so a re-run changes nothing and a key dropped from the map
//! is dropped from the Secret. A field of it that another manager set to another value
//! is a conflict, reported with that manager's name; only `force` (`strata up
//! --force-conflicts`) takes it over. A namespace that does not exist is created (the
//! apply answers 404 for it), so a user allowed Secrets in existing namespaces needs no
//! permission on Namespaces. Reports and errors name namespaces and keys, never values.
//!
//! The room: [`client`] builds a client from a kubeconfig, [`apply`] writes and removes
//! the Secrets, [`error`] says why it failed (never quoting a value), `names` checks the
//! names Kubernetes accepts.

pub mod apply;
pub mod client;
pub mod error;
mod names;

/// The field manager of every apply.
pub const FIELD_MANAGER: &str = "strata";
/// The label that marks Secrets written by strata.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "strata";

/// What happened to one namespace's Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Updated,
    Unchanged,
}

/// A Secret that was applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedSecret {
    pub namespace: String,
    /// The data keys in the Secret (names only).
    pub keys: Vec<String>,
    pub outcome: Outcome,
}

/// What happened in a namespace that no longer has secrets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// The Secret was deleted.
    Deleted,
    /// There was no such Secret.
    Absent,
    /// A Secret of that name exists but lacks the strata label: left alone.
    KeptNotManaged,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemovedSecret {
    pub namespace: String,
    pub removal: Removal,
}

/// The result of [`apply::apply_secrets`]: names only, never values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyReport {
    pub secret_name: String,
    /// One entry per namespace that has secrets, sorted by namespace.
    pub applied: Vec<AppliedSecret>,
    /// One entry per namespace of `managed_namespaces` that has none now.
    pub removed: Vec<RemovedSecret>,
}

impl ApplyReport {
    /// Whether anything changed in the cluster.
    pub fn changed(&self) -> bool {
        self.applied.iter().any(|a| a.outcome != Outcome::Unchanged)
            || self.removed.iter().any(|r| r.removal == Removal::Deleted)
    }

    /// The namespaces that hold a strata Secret after this run; record them
    /// to pass as `managed_namespaces` next time.
    pub fn namespaces(&self) -> Vec<String> {
        self.applied.iter().map(|a| a.namespace.clone()).collect()
    }
}

#[cfg(test)]
#[path = "../../../tests/support/fake_kube.rs"]
mod fake_kube;

/// What the tests of the secrets writer share: the Secret's name and the secrets written.
#[cfg(test)]
mod fixtures {
    use std::collections::BTreeMap;

    pub(super) const NAME: &str = "strata-secrets";

    pub(super) use crate::util::string_map as map;

    pub(super) fn secrets() -> BTreeMap<String, String> {
        map(&[
            ("monitoring:adminpass", "s3cret-admin"),
            ("monitoring:token", "t0ken-value"),
            ("apps:db-password", "db-pa55"),
        ])
    }
}
