//! Running many projects: the scheduler, its events and reporters, one step's life
//! (`step/`: what it receives, how it runs, what it leaves, its hooks), the journal, the
//! stack lock and fingerprints.

pub mod events;
pub mod fingerprint;
pub mod journal;
pub mod kubeconfig;
pub mod lock;
pub mod markdown;
pub mod policy;
pub mod report;
pub mod scheduler;
pub mod signals;
pub mod step;
