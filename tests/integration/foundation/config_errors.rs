//! Exit 3: every bad input (profile, include, graph, env file, stack config) named
//! precisely: the file, the entry or key, the line, and what to do.

use super::*;

/// `validate` on stack dev of a one-project profile whose dev stack config is `text`:
/// the workspace and the run.
fn validate_with_stack_config(text: &str) -> (Ws, Run) {
    let ws = abc("infrastructure:\n  - path: a\n");
    ws.write("config/pulumi/Pulumi.dev.yaml", text);
    let r = ws.strata(&["-p", "t", "-s", "dev", "validate"]);
    (ws, r)
}

#[test]
fn invalid_yaml_in_profile_names_file_and_line() {
    // line 5 opens a flow sequence that never closes.
    let r = profile_refused(
        "infrastructure:\n  - path: a\n    needs: [b\n  - path: b\n",
        &["line "],
    );
    assert!(
        r.stderr.contains("line 5") || r.stderr.contains("line 6"),
        "the line serde_yaml reports should be in the message\n{r:?}"
    );
    assert_says_what_to_do(&r);
}

#[test]
fn unknown_field_names_file_field_and_line() {
    // HEAD is two lines: `infrastructure:` is line 3, `- path: a` 4, `need:` 5.
    let r = profile_refused(
        "infrastructure:\n  - path: a\n  - path: b\n    need: [a]\n",
        // It lists what is allowed (so `needs` is one glance away) and says what to do.
        &["unknown field `need`", "line 6", "needs"],
    );
    assert_says_what_to_do(&r);
}

#[test]
fn unknown_field_at_top_level_is_refused_too() {
    profile_refused(
        "infrastucture:\n  - path: a\n",
        &["infrastucture", "line 3"],
    );
}

#[test]
fn unknown_provider_lists_the_available_ones() {
    let ws = abc("infrastructure:\n  - path: a\n");
    ws.profile("zeta", "description: last\ninfra_type: z\n");
    ws.profile("alpha", "description: first\ninfra_type: al\n");
    let r = ws.strata(&["-p", "gcp", "-s", "dev", "show"]);
    assert_config_error_says_what_to_do(&r, &["gcp", "alpha, t, zeta", "--provider"]);
}

#[test]
fn missing_project_dir_names_profile_entry_and_dir() {
    let r = profile_refused(
        "infrastructure:\n  - path: a\n  - path: nowhere/x\n",
        &["nowhere/x", "projects/nowhere/x"],
    );
    assert_says_what_to_do(&r);
}

/// A mistyped entry path gets the project folder it most likely meant (issue 46).
#[test]
fn mistyped_project_dir_gets_a_did_you_mean() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: infra/netwrk\n");
    ws.pulumi_project("infra/network", "network", "");
    let r = ws.strata(&["-p", "t", "-s", "dev", "show"]);
    assert_config_error_says_what_to_do(&r, &["infra/netwrk", "Did you mean `infra/network`?"]);
}

#[test]
fn dir_without_pulumi_or_strata_yaml_is_refused() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: empty\n");
    ws.write("projects/empty/README.md", "nothing to run here\n");
    let r = ws.strata(&["-p", "t", "-s", "dev", "show"]);
    assert_config_error_says_what_to_do(
        &r,
        &["providers/t.yaml", "empty", "Pulumi.yaml", "Strata.yaml"],
    );
}

#[test]
fn duplicate_path_is_refused() {
    profile_refused(
        "infrastructure:\n  - path: a\n  - path: b\nkubernetes:\n  - path: a\n",
        // It says where both are.
        &["`a`", "twice", "infrastructure", "kubernetes"],
    );
}

#[test]
fn duplicate_path_through_an_include_names_the_fragment() {
    let ws =
        abc("infrastructure:\n  - path: a\nkubernetes:\n  - include: common/k.yaml\n  - path: b\n");
    ws.write("providers/common/k.yaml", "- path: b\n- path: c\n");
    let r = ws.strata(&["-p", "t", "-s", "dev", "show"]);
    assert_config_error(
        &r,
        &[
            "`b`",
            "twice",
            "providers/common/k.yaml",
            "providers/t.yaml",
        ],
    );
}

#[test]
fn needs_naming_an_unknown_path_is_refused() {
    profile_refused(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: [ghost]\n",
        // What would be valid: the known paths.
        &["`b`", "ghost", "a, b"],
    );
}

#[test]
fn cycle_is_printed() {
    // a needs c, b follows a, c follows b: a → b → c → a.
    let r = profile_refused(
        "infrastructure:\n  - path: a\n    needs: [c]\n  - path: b\n  - path: c\n",
        &["cycle", "a → b → c → a"],
    );
    assert_says_what_to_do(&r);
}

#[test]
fn cycle_through_inputs_is_printed() {
    profile_refused(
        "infrastructure:\n  - path: a\n    needs: []\n    inputs:\n      a-proj:x: b:out\n  - path: b\n",
        &["cycle", "a → b → a"],
    );
}

#[test]
fn input_source_that_is_not_path_colon_output_is_refused() {
    let r = profile_refused(
        "infrastructure:\n  - path: a\n  - path: b\n    inputs:\n      b-proj:vpc: a\n",
        &["b-proj:vpc", "entry 2"],
    );
    assert!(
        r.stderr.contains(":<output>") || r.stderr.contains("path:output"),
        "{r:?}"
    );
    assert!(
        r.stderr.contains("for example") || r.stderr.contains("e.g."),
        "an example of the right form helps\n{r:?}"
    );
}

#[test]
fn input_from_an_unknown_project_is_refused() {
    profile_refused(
        "infrastructure:\n  - path: a\n  - path: b\n    inputs:\n      b-proj:vpc: ghost:vpc_id\n",
        &["b-proj:vpc", "ghost"],
    );
}

#[test]
fn env_file_line_that_is_not_key_value_names_file_and_line() {
    let ws = abc("infrastructure:\n  - path: a\n");
    ws.env_file("# settings\nPULUMI_STACK=dev\nthis line is wrong\nOTHER=1\n");
    let r = ws.strata(&["-p", "t", "show"]);
    assert_config_error_says_what_to_do(&r, &["config/pulumi/environment", "line 3", "KEY=VALUE"]);
}

#[test]
fn stack_config_without_config_map_is_refused() {
    let (ws, r) = validate_with_stack_config("encryptionsalt: v1:abc\n");
    assert_config_error_says_what_to_do(&r, &["config/pulumi/Pulumi.dev.yaml", "config:"]);
    // And the file is left as it was.
    assert_eq!(
        ws.read("config/pulumi/Pulumi.dev.yaml"),
        "encryptionsalt: v1:abc\n"
    );
}

#[test]
fn stack_config_with_invalid_yaml_names_file_and_line() {
    let (_, r) = validate_with_stack_config("config:\n  t:a: [1, 2\n");
    assert_config_error(&r, &["config/pulumi/Pulumi.dev.yaml", "line "]);
}

#[test]
fn infra_type_differing_from_provider_is_refused_by_validate_and_up() {
    let ws = abc("infrastructure:\n  - path: a\n");
    ws.profile(
        "other",
        "description: another cloud\ninfra_type: OTHER\ninfrastructure:\n  - path: a\n",
    );
    ws.write(
        "config/pulumi/Pulumi.dev.yaml",
        "config:\n  kubernetes:infra_type: OTHER\n",
    );
    let before = ws.files_under("config");

    let v = ws.strata(&["-p", "t", "-s", "dev", "validate"]);
    assert_config_error(&v, &[]);
    let all = v.all();
    for n in ["dev", "OTHER", "test", "new stack", "--stack"] {
        assert!(all.contains(n), "validate should mention {n:?}\n{v:?}");
    }

    let u = ws.strata(&["-p", "t", "-s", "dev", "up"]);
    assert_config_error(&u, &["dev", "OTHER", "test", "new stack", "--stack"]);
    assert!(
        ws.calls().is_empty(),
        "up must not call pulumi: {:?}",
        ws.calls()
    );
    assert_eq!(
        ws.files_under("config"),
        before,
        "the stack config must be untouched"
    );
}

#[test]
fn stack_flag_differing_from_env_file_wins_for_the_run() {
    let ws = abc("infrastructure:\n  - path: a\n");
    ws.env_file("PULUMI_STACK=dev\n");
    // As in the Pulumi CLI, -s wins for that run; the file gives the default and keeps it.
    let r = ws.strata(&["-p", "t", "-s", "prod", "up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("stack prod"), "{r:?}");
    assert!(ws.path(".strata/prod/journal.jsonl").exists());
    assert!(!ws.path(".strata/dev").exists(), "nothing ran on dev");
    assert_eq!(ws.read("config/pulumi/environment"), "PULUMI_STACK=dev\n");
    let ok = ws.strata(&["-p", "t", "show"]);
    assert!(ok.stdout.contains("stack dev"), "{ok:?}");
}

/// With several profiles, a stack that has run none here and whose stack config records
/// no infra_type cannot pick one, for a read-only command too: the refusal names the
/// stack and says to pass `-p NAME` (issue 46; the book's workspace chapter says so).
#[test]
fn an_unknown_stack_with_several_profiles_says_to_pass_p() {
    let ws = abc("infrastructure:\n  - path: a\n");
    ws.profile("other", &format!("{HEAD}infrastructure:\n  - path: b\n"));
    for cmd in ["status", "show"] {
        let r = ws.strata(&[cmd, "--stack", "prod"]);
        assert_config_error_says_what_to_do(
            &r,
            &[
                "no provider chosen",
                "stack `prod`",
                "Pass -p NAME",
                "other, t",
            ],
        );
    }
}
