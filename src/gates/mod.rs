//! What may go out: a project's `timeout:` and `retry:` policy, the verdict of a
//! `policy:` or `approve:` rule ([`denial::Denial`]), and the plans `approve:` holds.

pub mod approvals;
pub mod denial;
pub mod policy;
