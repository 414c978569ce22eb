//! What strata remembers and who holds the stack (strata's own state, not Pulumi's): the
//! journal, the runs' records in a shared backend, fingerprints, the stack lock and lease,
//! and the orphans the journal knows of.

pub mod fingerprint;
pub mod journal;
pub mod lock;
pub mod orphans;
pub mod records;
