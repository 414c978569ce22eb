//! The shared backend a team's stacks live in, as strata reaches it beside Pulumi: the
//! object store of `PULUMI_BACKEND_URL`, opened with the credentials and endpoint Pulumi
//! itself uses (`bucket`). What strata keeps there (the lease) and what it reads there of
//! Pulumi's (checkpoints: `engine::pulumi`'s `source`) live with their owners.

pub mod bucket;

pub use bucket::{Backend, Listed, Object, Where};
