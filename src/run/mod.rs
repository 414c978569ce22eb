//! Running many projects: the scheduler and its events, the journal, the stack lock,
//! hooks and fingerprints. The events are rendered by [`crate::display`].

pub mod events;
pub mod executor;
pub mod fingerprint;
pub mod hooks;
pub mod journal;
pub mod lock;
pub mod policy;
pub mod scheduler;
pub mod signals;
