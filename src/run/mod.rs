//! Running many projects: the scheduler, its events and reporters, the journal, the
//! stack lock, hooks and fingerprints.

pub mod events;
pub mod executor;
pub mod fingerprint;
pub mod hooks;
pub mod journal;
pub mod lock;
pub mod markdown;
pub mod policy;
pub mod report;
pub mod scheduler;
pub mod signals;
