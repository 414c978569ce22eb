//! Integration tests: the built `strata` binary against fixture workspaces, with the
//! fake `pulumi` (tests/fake-pulumi) first on PATH. One test binary, one file per area.

mod orphans;
mod otlp;
mod support;

mod adopted;
mod architecture;
mod backend_trust;
mod book;
mod book_flags;
mod bounds;
mod bundle;
mod bundle_trust;
mod contracts;
mod crash;
mod exec;
mod export;
mod firsthour;
mod foundation;
mod gates;
mod gates_approvals;
mod gates_closed;
mod handoff;
mod init;
mod leaks;
mod leftovers;
mod panic_trust;
mod pipeline;
mod policy;
mod pools;
mod preview;
mod real_act;
mod real_kube;
mod real_pulumi;
mod real_s3;
mod references;
mod report;
mod run;
mod secrets;
mod select;
mod state;
mod trace;
mod trust;
