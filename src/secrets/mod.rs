//! Secrets: redaction of secret values everywhere strata writes.

pub mod redact;
