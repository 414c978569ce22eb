//! Preflight: a missing pulumi or a file backend without a passphrase stops the run
//! before any project starts, saying how to fix it.

use super::{CHAIN, CHAIN_PATHS, fill, run, starts, workspace};
use crate::support::*;

#[test]
fn a_missing_pulumi_is_a_clear_error_before_anything_starts() {
    let ws = Ws::without_pulumi();
    fill(&ws, CHAIN, CHAIN_PATHS);
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 3, "{r:?}");
    let out = r.all();
    assert!(out.contains("pulumi"), "{r:?}");
    assert!(
        out.contains("STRATA_PULUMI"),
        "the message says how to point at pulumi: {r:?}"
    );
    assert!(
        ws.files_under(".strata/dev/logs").is_empty(),
        "no project may start (no project logs): {:?}",
        ws.files_under(".strata/dev/logs")
    );
    assert!(!out.contains("up started"), "{r:?}");
}

#[test]
fn a_file_backend_without_passphrase_stops_before_anything_runs() {
    let mut ws = workspace(CHAIN, CHAIN_PATHS);
    ws.env.retain(|(k, _)| k != "PULUMI_CONFIG_PASSPHRASE");
    let r = run(&ws, "up", &[]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.all().contains("PULUMI_CONFIG_PASSPHRASE"),
        "the message says how to set the passphrase: {r:?}"
    );
    assert!(starts(&ws.calls()).is_empty(), "{:#?}", ws.calls());
    assert!(ws.files_under(".strata/dev/logs").is_empty());
}
