//! Running a graph of projects: the scheduler and its events, one step's life (`step/`:
//! what it receives, how it runs, what it leaves, its hooks), its `timeout:` and `retry:`
//! policy, signals, pools and `exec`.
//! What a run remembers is in [`crate::state`], what may go out is decided in
//! [`crate::gates`]; the events are rendered by [`crate::display`].

pub mod done;
pub mod events;
pub mod exec;
pub mod policy;
pub mod pools;
pub mod scheduler;
pub mod signals;
pub mod step;
