//! Secrets: the age-encrypted store, writing secrets into Kubernetes, and redaction of
//! secret values everywhere strata writes.

pub mod kubernetes;
pub mod redact;
pub mod store;
