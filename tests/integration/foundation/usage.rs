//! Exit 2: usage errors (an unknown flag, a bad value, no subcommand, `destroy` without
//! `--yes` when nothing can ask), and nothing is touched.

use super::*;

#[test]
fn unknown_flag_is_a_usage_error() {
    let ws = abc("infrastructure:\n  - path: a\n");
    let r = ws.strata(&["-p", "t", "show", "--bogus"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--bogus"), "{r:?}");
    let r = ws.strata(&["--frobnicate", "show"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--frobnicate"), "{r:?}");
}

#[test]
fn bad_flag_value_is_a_usage_error() {
    let ws = abc("infrastructure:\n  - path: a\n");
    let r = ws.strata(&["-p", "t", "show", "--format", "png"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("png") && r.stderr.contains("tree"),
        "{r:?}"
    );
}

#[test]
fn missing_subcommand_is_a_usage_error() {
    let ws = abc("infrastructure:\n  - path: a\n");
    let r = ws.strata(&[]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.all().contains("Usage"), "{r:?}");
    let r = ws.strata(&["-p", "t"]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = ws.strata(&["frobnicate"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("frobnicate"), "{r:?}");
}

#[test]
fn destroy_without_yes_when_non_interactive_touches_nothing() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\n");
    ws.write("config/pulumi/Pulumi.dev.yaml", GOOD_STACK);
    let before = ws.files_under("config");
    let r = ws.strata(&["-p", "t", "-s", "dev", "destroy"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("--yes"),
        "the message should name --yes\n{r:?}"
    );
    assert!(
        ws.calls().is_empty(),
        "no pulumi call expected: {:?}",
        ws.calls()
    );
    let journal = ws.path(".strata/dev/journal.jsonl");
    if journal.exists() {
        let text = std::fs::read_to_string(&journal).unwrap();
        assert!(text.trim().is_empty(), "journal has records: {text}");
    }
    assert_eq!(ws.files_under("config"), before);
    // `down` is the same command.
    let r = ws.strata(&["-p", "t", "-s", "dev", "down"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(ws.calls().is_empty());
}
