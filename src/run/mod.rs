//! Running many projects: the scheduler and its events, one step's life (`step/`: what
//! it receives, how it runs, what it leaves, its hooks), the journal, the stack lock and
//! fingerprints, the orphans the journal knows of. What may go out is decided in
//! [`crate::gates`]; the events are rendered by [`crate::display`].

pub mod events;
pub mod exec;
pub mod fingerprint;
pub mod journal;
pub mod lock;
pub mod orphans;
pub mod pools;
pub mod records;
pub mod scheduler;
pub mod signals;
pub mod step;
