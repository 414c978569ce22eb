//! `strata export` itself, whatever the format: `--out`, a stable output that needs no
//! Pulumi and no stack config, the stack it needs, and its usage errors.

use super::*;

#[test]
fn export_writes_a_file_with_out() {
    let ws = workspace(MIXED);
    let stdout = ws.run_ok("export", &["--format", "argo"]);
    let r = ws.run_ok("export", &["--format", "argo", "-o", "ci/strata.yaml"]);
    assert!(r.stdout.is_empty(), "nothing on stdout with -o\n{r:?}");
    assert_eq!(ws.read("ci/strata.yaml"), stdout.stdout);
    let workflow = ".github/workflows/strata.yaml";
    ws.run_ok("export", &["--format", "github-actions", "--out", workflow]);
    yaml(&ws.read(".github/workflows/strata.yaml"));
}

#[test]
fn export_is_deterministic_and_needs_no_pulumi_or_stack_config() {
    let ws = with_projects(Ws::without_pulumi(), MIXED);
    for format in ["github-actions", "argo"] {
        let a = ws.strata(&["-p", "t", "-s", "dev", "export", "--format", format]);
        let b = ws.strata(&["-p", "t", "-s", "dev", "export", "--format", format]);
        assert_eq!(a.code, 0, "{a:?}");
        assert_eq!(a.stdout, b.stdout, "{format} output is stable");
    }
    assert!(
        !ws.exists("config/pulumi/Pulumi.dev.yaml"),
        "export writes no stack config"
    );
    assert!(!ws.exists(".strata/dev"), "export touches no local state");
}

#[test]
fn export_without_a_stack_is_refused() {
    let ws = workspace(MIXED);
    let r = ws.strata(&["-p", "t", "export", "--format", "argo"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("--stack"), "{r:?}");
    assert!(r.stdout.is_empty());
}

#[test]
fn export_stack_comes_from_the_env_file() {
    let ws = workspace(MIXED);
    ws.env_file("PULUMI_STACK=dev\n");
    let r = ws.strata(&["-p", "t", "export", "--format", "argo"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_header(&r.stdout, "argo", "t");
}

#[test]
fn unknown_format_is_a_usage_error() {
    let ws = workspace(MIXED);
    let r = ws.strata(&["-p", "t", "-s", "dev", "export", "--format", "jenkins"]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = ws.strata(&["-p", "t", "-s", "dev", "export"]);
    assert_eq!(r.code, 2, "--format is required\n{r:?}");
}

#[test]
fn review_apply_is_a_github_actions_mode_only() {
    let ws = workspace(MIXED);
    for format in ["pko", "argo", "github-actions"] {
        let r = ws.run("export", &["--format", format, "--review-apply"]);
        if format == "github-actions" {
            assert_eq!(r.code, 0, "{r:?}");
            assert_header(&r.stdout, "github-actions --review-apply", "t");
            continue;
        }
        assert_eq!(r.code, 2, "{format}: {r:?}");
        assert!(
            r.stderr
                .contains("--review-apply is a mode of --format github-actions"),
            "{r:?}"
        );
        assert!(r.stdout.is_empty(), "{r:?}");
    }
}
