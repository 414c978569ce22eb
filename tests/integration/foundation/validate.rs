//! `strata validate`: says what it checked, lists every missing key at once, and changes
//! nothing.

use super::*;

fn validate_ws() -> Ws {
    let ws = Ws::new();
    ws.pulumi_project("a", "a-proj", "");
    ws.command_project("b", "echo up", "echo down");
    ws.profile(
        "t",
        &format!(
            "{HEAD}config:\n  - key: t:region\n    prompt: Region\n  - key: t:size\n    prompt: Size\n    default: 3\n    type: int\n  - key: t:zone\n    prompt: Zone\ninfrastructure:\n  - path: a\nkubernetes:\n  - path: b\n"
        ),
    );
    ws.env_file("PULUMI_STACK=dev\n");
    ws
}

/// [`validate_ws`] with `text` as the dev stack's config file.
fn validate_ws_with_stack_config(text: &str) -> Ws {
    let ws = validate_ws();
    ws.write("config/pulumi/Pulumi.dev.yaml", text);
    ws
}

#[test]
fn validate_passes_on_a_good_workspace_and_says_what_it_checked() {
    let ws = validate_ws_with_stack_config(
        "config:\n  kubernetes:infra_type: test\n  t:region: eu-west-1\n  t:zone: b\n",
    );
    let before = ws.files_under("");
    let r = ws.strata(&["-p", "t", "validate"]);
    assert_eq!(r.code, 0, "{r:?}");
    let out = r.stdout.to_lowercase();
    for n in [
        "config/pulumi/environment",
        "dev",
        "config/pulumi/pulumi.dev.yaml",
        "providers/t.yaml",
        "projects",
        "infra_type",
        "config",
    ] {
        assert!(out.contains(n), "validate should report {n:?}\n{r:?}");
    }
    assert_eq!(ws.files_under(""), before, "validate must change nothing");
    assert!(ws.calls().is_empty());
}

#[test]
fn validate_lists_every_missing_required_key_when_non_interactive() {
    let ws = validate_ws();
    let before = ws.files_under("");
    let r = ws.strata(&["-p", "t", "validate"]);
    let all = r.expect_code(3).all();
    assert_has(&all, &["t:region", "t:zone"]);
    assert!(
        !all.contains("t:size"),
        "t:size has a default: not missing\n{r:?}"
    );
    // What to do about it.
    assert!(
        all.contains("config set") || all.contains("Pulumi.dev.yaml"),
        "{r:?}"
    );
    assert_eq!(ws.files_under(""), before, "validate must change nothing");
    assert!(!ws.exists("config/pulumi/Pulumi.dev.yaml"));

    // With the keys partly set, only the one still missing is listed.
    ws.write(
        "config/pulumi/Pulumi.dev.yaml",
        "config:\n  kubernetes:infra_type: test\n  t:region: eu-west-1\n",
    );
    let r = ws.strata(&["-p", "t", "--non-interactive", "validate"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.all().contains("t:zone"), "{r:?}");
    assert!(!r.all().contains("`t:region`"), "{r:?}");
}

#[test]
fn validate_changes_nothing_even_when_things_are_wrong() {
    let ws = validate_ws_with_stack_config(
        "# keep this comment\nconfig:\n  kubernetes:infra_type: test\n  t:region: eu-west-1\n  t:secret:\n    secure: v1:AAAA\n",
    );
    let before = ws.files_under("");
    for args in [
        &["-p", "t", "validate"][..],
        &["-p", "t", "-s", "dev", "validate"][..],
        &["-p", "nope", "validate"][..],
    ] {
        let r = ws.strata(args);
        assert_ne!(r.code, 0, "{args:?}: {r:?}");
        assert_no_panic(&r);
        assert_eq!(
            ws.files_under(""),
            before,
            "validate {args:?} changed files"
        );
    }
}
