//! Issue 3, the foundation: the workspace model, provider profiles, the execution graph,
//! and `show` / `validate` / `providers`, driven through the real binary against fixture
//! workspaces (and against the workspace this repository ships).
//!
//! Every bad input must exit 3 with a message that names the file, the entry or key,
//! the line where serde_yaml reports one, and what to do; usage errors exit 2; nothing
//! ever panics (exit 101).

use std::path::PathBuf;

use serde_json::Value;

use crate::support::*;

// ---------------------------------------------------------------------------------------
// helpers

/// A workspace with Pulumi projects `a`, `b`, `c` (named `a-proj`, ...) and the profile
/// `providers/t.yaml` = HEAD + `body`.
fn abc(body: &str) -> Ws {
    let ws = Ws::new();
    for p in ["a", "b", "c"] {
        ws.pulumi_project(p, &format!("{p}-proj"), "");
    }
    ws.profile("t", &format!("{HEAD}{body}"));
    ws
}

/// Pulumi projects at each of `paths`, named after their last component.
fn projects(ws: &Ws, paths: &[&str]) {
    for p in paths {
        let name = p.rsplit('/').next().unwrap();
        ws.pulumi_project(p, name, "");
    }
}

/// Asserts a configuration error (exit 3) whose stderr contains every one of `needles`.
fn assert_config_error(r: &Run, needles: &[&str]) {
    assert_eq!(r.code, 3, "expected exit 3 (invalid configuration)\n{r:?}");
    for n in needles {
        assert!(r.stderr.contains(n), "stderr should mention {n:?}\n{r:?}");
    }
    assert_no_panic(r);
}

/// `show` over [`abc`]`(body)`: asserts the profile is refused as a configuration error
/// naming `providers/t.yaml` and each of `says`; returns the run for what else to check.
#[track_caller]
fn profile_refused(body: &str, says: &[&str]) -> Run {
    let r = abc(body).run("show", &[]);
    assert_config_error(&r, &[&["providers/t.yaml"], says].concat());
    r
}

fn assert_no_panic(r: &Run) {
    assert_ne!(r.code, 101, "strata panicked\n{r:?}");
    assert!(!r.stderr.contains("panicked"), "strata panicked\n{r:?}");
    assert!(
        !r.stderr.contains("RUST_BACKTRACE"),
        "strata panicked\n{r:?}"
    );
}

/// The message tells the user what to do (an instruction, not only a diagnosis).
fn assert_says_what_to_do(r: &Run) {
    let lower = r.stderr.to_lowercase();
    let hints = [
        "fix", "check", "add ", "create", "pass ", "set ", "use ", "drop ", "change ", "remove",
        "rename", "start ", "pick ", "break ", "put ", "point ", "must ", "delete", "correct",
    ];
    assert!(
        hints.iter().any(|h| lower.contains(h)),
        "the message should say what to do about it\n{r:?}"
    );
}

/// `show --format json` of profile `t` (no stack) with the `extra` arguments, parsed.
#[track_caller]
fn graph(ws: &Ws, extra: &[&str]) -> Value {
    show_json(&ws.strata(&[&["-p", "t", "show", "--format", "json"], extra].concat()))
}

/// Parses the output of `show --format json`.
fn show_json(r: &Run) -> Value {
    assert_eq!(r.code, 0, "show failed\n{r:?}");
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("show json is not JSON: {e}\n{r:?}"))
}

fn order(j: &Value) -> Vec<String> {
    j["order"]
        .as_array()
        .expect("order is an array")
        .iter()
        .map(|v| v.as_str().expect("order holds strings").to_string())
        .collect()
}

fn project<'a>(j: &'a Value, path: &str) -> &'a Value {
    j["projects"]
        .as_array()
        .expect("projects is an array")
        .iter()
        .find(|p| p["path"] == path)
        .unwrap_or_else(|| panic!("no project {path} in {j:#}"))
}

fn has_project(j: &Value, path: &str) -> bool {
    j["projects"]
        .as_array()
        .expect("projects is an array")
        .iter()
        .any(|p| p["path"] == path)
}

fn needs(j: &Value, path: &str) -> Vec<String> {
    let mut v: Vec<String> = project(j, path)["needs"]
        .as_array()
        .unwrap_or_else(|| panic!("needs of {path} is not an array: {j:#}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

fn wave(j: &Value, path: &str) -> u64 {
    project(j, path)["wave"]
        .as_u64()
        .unwrap_or_else(|| panic!("wave of {path} is not a number: {j:#}"))
}

fn pos(j: &Value, path: &str) -> usize {
    order(j)
        .iter()
        .position(|p| p == path)
        .unwrap_or_else(|| panic!("{path} is not in the order {:?}", order(j)))
}

fn paths_of_stage(j: &Value, stage: &str) -> Vec<String> {
    j["projects"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["stage"] == stage)
        .map(|p| p["path"].as_str().unwrap().to_string())
        .collect()
}

fn sorted(v: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// A good stack config for profile `t` (infra_type `test`).
const GOOD_STACK: &str = "config:\n  kubernetes:infra_type: test\n";

// ---------------------------------------------------------------------------------------
// exit 3: bad input, each named precisely

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
        &["unknown field `need`", "line 6"],
    );
    // It lists what is allowed (so `needs` is one glance away) and says what to do.
    assert!(r.stderr.contains("needs"), "{r:?}");
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
    assert_config_error(&r, &["gcp", "alpha, t, zeta", "--provider"]);
    assert_says_what_to_do(&r);
}

#[test]
fn missing_project_dir_names_profile_entry_and_dir() {
    let r = profile_refused(
        "infrastructure:\n  - path: a\n  - path: nowhere/x\n",
        &["nowhere/x", "projects/nowhere/x"],
    );
    assert_says_what_to_do(&r);
}

#[test]
fn dir_without_pulumi_or_strata_yaml_is_refused() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: empty\n");
    ws.write("projects/empty/README.md", "nothing to run here\n");
    let r = ws.strata(&["-p", "t", "-s", "dev", "show"]);
    assert_config_error(
        &r,
        &["providers/t.yaml", "empty", "Pulumi.yaml", "Strata.yaml"],
    );
    assert_says_what_to_do(&r);
}

#[test]
fn duplicate_path_is_refused() {
    let r = profile_refused(
        "infrastructure:\n  - path: a\n  - path: b\nkubernetes:\n  - path: a\n",
        &["`a`", "twice"],
    );
    // It says where both are.
    assert!(
        r.stderr.contains("infrastructure") && r.stderr.contains("kubernetes"),
        "{r:?}"
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
    let r = profile_refused(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: [ghost]\n",
        &["`b`", "ghost"],
    );
    // What would be valid.
    assert!(
        r.stderr.contains("a, b"),
        "known paths should be listed\n{r:?}"
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
    assert_config_error(&r, &["config/pulumi/environment", "line 3", "KEY=VALUE"]);
    assert_says_what_to_do(&r);
}

#[test]
fn stack_config_without_config_map_is_refused() {
    let ws = abc("infrastructure:\n  - path: a\n");
    ws.write("config/pulumi/Pulumi.dev.yaml", "encryptionsalt: v1:abc\n");
    let r = ws.strata(&["-p", "t", "-s", "dev", "validate"]);
    assert_config_error(&r, &["config/pulumi/Pulumi.dev.yaml", "config:"]);
    assert_says_what_to_do(&r);
    // And the file is left as it was.
    assert_eq!(
        ws.read("config/pulumi/Pulumi.dev.yaml"),
        "encryptionsalt: v1:abc\n"
    );
}

#[test]
fn stack_config_with_invalid_yaml_names_file_and_line() {
    let ws = abc("infrastructure:\n  - path: a\n");
    ws.write("config/pulumi/Pulumi.dev.yaml", "config:\n  t:a: [1, 2\n");
    let r = ws.strata(&["-p", "t", "-s", "dev", "validate"]);
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
fn stack_flag_differing_from_env_file_names_both() {
    let ws = abc("infrastructure:\n  - path: a\n");
    ws.env_file("PULUMI_STACK=dev\n");
    // Only commands that write enforce the file's stack (`show` reads any stack).
    let r = ws.strata(&["-p", "t", "-s", "prod", "up"]);
    assert_config_error(
        &r,
        &["prod", "dev", "config/pulumi/environment", "PULUMI_STACK"],
    );
    assert_says_what_to_do(&r);
    // The same stack as the file is fine.
    let ok = ws.strata(&["-p", "t", "-s", "dev", "show"]);
    assert_eq!(ok.code, 0, "{ok:?}");
}

// ---------------------------------------------------------------------------------------
// exit 2: usage

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

// ---------------------------------------------------------------------------------------
// show: formats and the graph rules

#[test]
fn show_json_has_the_documented_shape() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\nkubernetes:\n  - path: c\n");
    let j = show_json(&ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "json"]));
    assert_eq!(j["provider"], "t");
    assert_eq!(j["stack"], "dev");
    assert_eq!(order(&j), ["a", "b", "c"]);
    let projects = j["projects"].as_array().unwrap();
    assert_eq!(projects.len(), 3);
    for p in projects {
        for field in ["path", "name", "stage", "needs", "wave"] {
            assert!(p.get(field).is_some(), "project lacks {field}: {p}");
        }
    }
    let b = project(&j, "b");
    assert_eq!(b["name"], "b-proj");
    assert_eq!(b["stage"], "infrastructure");
    assert_eq!(project(&j, "c")["stage"], "kubernetes");
    assert_eq!(needs(&j, "b"), ["a"]);
    assert_eq!(wave(&j, "c"), 3);
}

#[test]
fn show_tree_dot_and_mermaid_draw_the_graph() {
    let ws = abc(
        "cluster: {kubeconfig: kubeconfig, context: dev}\nsecrets:\n  - key: app:token\n    prompt: Token\ninfrastructure:\n  - path: a\n    description: Network\n    on_success:\n      - run: echo up\n  - path: b\n    needs: []\nkubernetes:\n  - path: c\n    inputs:\n      c-proj:x: a:out\n",
    );
    let tree = ws.strata(&["-p", "t", "-s", "dev", "show"]);
    assert_eq!(tree.code, 0, "{tree:?}");
    for n in [
        "wave 1",
        "wave 2",
        "wave 3",
        "a",
        "b",
        "c",
        "@secrets",
        "needs",
        "Network",
        "echo up",
        "app:token",
        "parallel",
    ] {
        assert!(tree.stdout.contains(n), "tree should show {n:?}\n{tree:?}");
    }
    // The explicit --format tree is the same.
    let t2 = ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "tree"]);
    assert_eq!(t2.stdout, tree.stdout);

    let dot = ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "dot"]);
    assert_eq!(dot.code, 0, "{dot:?}");
    assert!(dot.stdout.trim_start().starts_with("digraph"), "{dot:?}");
    // IDs are quoted (a project may be called `node` or `graph`).
    assert!(dot.stdout.contains("\"a\" -> "), "{dot:?}");
    assert!(dot.stdout.contains("-> \"c\""), "{dot:?}");
    assert!(dot.stdout.trim_end().ends_with('}'), "{dot:?}");

    let mm = ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "mermaid"]);
    assert_eq!(mm.code, 0, "{mm:?}");
    // A title, then the flowchart; IDs are indexes and the paths are the labels.
    assert!(mm.stdout.starts_with("---\ntitle: "), "{mm:?}");
    assert!(mm.stdout.contains("flowchart LR"), "{mm:?}");
    let id_of = |path: &str| {
        mm.stdout
            .lines()
            .find(|l| l.trim_end().ends_with(&format!("[\"{path}\"]")))
            .and_then(|l| l.trim().split('[').next())
            .unwrap_or_else(|| panic!("no node for {path}: {mm:?}"))
            .to_string()
    };
    let (a, c) = (id_of("a"), id_of("c"));
    assert!(mm.stdout.contains(&format!("{a} -->")), "{mm:?}");
    assert!(mm.stdout.contains(&format!("--> {c}")), "{mm:?}");
}

#[test]
fn show_execution_is_an_alias_of_show() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\n");
    let a = ws.strata(&["-p", "t", "-s", "dev", "show", "--format", "json"]);
    let b = ws.strata(&["-p", "t", "-s", "dev", "show-execution", "--format", "json"]);
    assert_eq!(a.code, 0, "{a:?}");
    assert_eq!(b.code, 0, "{b:?}");
    assert_eq!(a.stdout, b.stdout);
}

#[test]
fn plain_list_runs_in_written_order() {
    // Written c, a, b on purpose: the order is the list's, not alphabetical.
    let ws = abc("infrastructure:\n  - path: c\n  - path: a\n  - path: b\n");
    let j = graph(&ws, &[]);
    assert_eq!(order(&j), ["c", "a", "b"]);
    assert_eq!((wave(&j, "c"), wave(&j, "a"), wave(&j, "b")), (1, 2, 3));
    assert_eq!(needs(&j, "c"), Vec::<String>::new());
    assert_eq!(needs(&j, "a"), ["c"]);
    assert_eq!(needs(&j, "b"), ["a"]);
}

#[test]
fn empty_needs_runs_beside() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\n  - path: c\n    needs: []\n");
    let j = graph(&ws, &[]);
    assert_eq!(needs(&j, "c"), Vec::<String>::new());
    assert_eq!(wave(&j, "a"), 1);
    assert_eq!(wave(&j, "c"), 1, "needs: [] runs in the first wave");
    assert_eq!(wave(&j, "b"), 2);
}

#[test]
fn explicit_needs_replace_the_previous_entry() {
    let ws = abc(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: [a]\n",
    );
    let j = graph(&ws, &[]);
    assert_eq!(
        needs(&j, "c"),
        ["a"],
        "c needs exactly a, not the previous entry b"
    );
    assert_eq!(wave(&j, "c"), 2);
    assert_eq!(wave(&j, "b"), 1);
}

#[test]
fn inputs_imply_needs() {
    let ws = abc(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: []\n    inputs:\n      c-proj:vpc: a:vpc_id\n",
    );
    let j = graph(&ws, &[]);
    assert_eq!(needs(&j, "c"), ["a"]);
    assert!(pos(&j, "c") > pos(&j, "a"));
    assert_eq!(wave(&j, "c"), 2);
    // Inputs add to explicit needs, they do not replace them.
    let ws = abc(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: [b]\n    inputs:\n      c-proj:vpc: a:vpc_id\n",
    );
    let j = graph(&ws, &[]);
    assert_eq!(needs(&j, "c"), ["a", "b"]);
}

#[test]
fn every_kubernetes_entry_runs_after_every_infrastructure_entry() {
    let ws = Ws::new();
    projects(&ws, &["i/one", "i/two", "i/three", "k/x", "k/y"]);
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: i/one\n  - path: i/two\n    needs: []\n  - path: i/three\n    needs: [i/two]\nkubernetes:\n  - path: k/x\n  - path: k/y\n    needs: []\n"
        ),
    );
    let j = graph(&ws, &[]);
    assert!(
        !has_project(&j, "@secrets"),
        "no secrets declared: no secrets step\n{j:#}"
    );
    let infra = paths_of_stage(&j, "infrastructure");
    let k8s = paths_of_stage(&j, "kubernetes");
    assert_eq!(infra.len(), 3);
    assert_eq!(k8s.len(), 2);
    let last_infra_wave = infra.iter().map(|p| wave(&j, p)).max().unwrap();
    let last_infra_pos = infra.iter().map(|p| pos(&j, p)).max().unwrap();
    for k in &k8s {
        assert!(
            wave(&j, k) > last_infra_wave,
            "{k} must come after every infrastructure entry\n{j:#}"
        );
        assert!(
            pos(&j, k) > last_infra_pos,
            "{k} is ordered before an infrastructure entry\n{j:#}"
        );
    }
    // Even with `needs: []`, a kubernetes entry waits for the whole infrastructure stage.
    assert_eq!(wave(&j, "k/y"), wave(&j, "k/x"));
}

#[test]
fn secrets_step_sits_between_stages_only_when_secrets_are_declared() {
    let body =
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\nkubernetes:\n  - path: c\n";
    // With profile-level secrets.
    let ws = abc(&format!(
        "cluster: {{kubeconfig: kubeconfig, context: dev}}\nsecrets:\n  - key: app:token\n    prompt: Token\n{body}"
    ));
    let j = graph(&ws, &[]);
    let s = project(&j, "@secrets");
    assert_eq!(s["stage"], "secrets");
    assert_eq!(
        needs(&j, "@secrets"),
        ["a", "b"],
        "the step waits for the whole infrastructure stage"
    );
    assert_eq!(needs(&j, "c"), ["@secrets"]);
    assert!(pos(&j, "a") < pos(&j, "@secrets") && pos(&j, "b") < pos(&j, "@secrets"));
    assert!(pos(&j, "@secrets") < pos(&j, "c"));
    assert_eq!(wave(&j, "@secrets"), 2);
    assert_eq!(wave(&j, "c"), 3);

    // Only an entry's own secrets: still the step.
    let ws = abc(
        "cluster: {kubeconfig: kubeconfig, context: dev}\ninfrastructure:\n  - path: a\n  - path: b\n    needs: []\nkubernetes:\n  - path: c\n    secrets:\n      - key: c:pass\n        prompt: Pass\n",
    );
    let j = graph(&ws, &[]);
    assert!(has_project(&j, "@secrets"), "{j:#}");

    // No secrets: no step, the kubernetes stage needs the infrastructure directly.
    let ws = abc(body);
    let j = graph(&ws, &[]);
    assert!(!has_project(&j, "@secrets"), "{j:#}");
    assert!(!order(&j).iter().any(|p| p == "@secrets"));
    assert_eq!(needs(&j, "c"), ["a", "b"]);
    assert_eq!(wave(&j, "c"), 2);
}

#[test]
fn show_project_by_path_and_by_pulumi_name() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\n  - path: c\n");
    let by_path = graph(&ws, &["--project", "b"]);
    assert_eq!(order(&by_path), ["b"]);
    let by_name = graph(&ws, &["--project", "b-proj"]);
    assert_eq!(order(&by_name), ["b"]);
    // Repeatable.
    let two = graph(&ws, &["--project", "a", "--project", "c-proj"]);
    assert_eq!(order(&two), ["a", "c"]);
    // Unknown: exit 3, listing what exists.
    let r = ws.strata(&["-p", "t", "show", "--project", "nope"]);
    assert_config_error(&r, &["nope", "a, b, c"]);
}

#[test]
fn show_project_by_ambiguous_pulumi_name_asks_for_the_path() {
    let ws = Ws::new();
    ws.pulumi_project("x/one", "same", "");
    ws.pulumi_project("x/two", "same", "");
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: x/one\n  - path: x/two\n"),
    );
    let r = ws.strata(&["-p", "t", "show", "--project", "same"]);
    assert_config_error(&r, &["same", "x/one", "x/two"]);
    let ok = graph(&ws, &["--project", "x/two"]);
    assert_eq!(order(&ok), ["x/two"]);
}

#[test]
fn show_with_deps_adds_what_the_selection_needs() {
    let ws = abc(
        "infrastructure:\n  - path: a\n  - path: b\n    needs: []\n  - path: c\n    needs: [a]\n",
    );
    let j = graph(&ws, &["--project", "c", "--with-deps"]);
    assert_eq!(order(&j), ["a", "c"], "b is not needed by c");
    assert_eq!(needs(&j, "c"), ["a"]);
}

#[test]
fn show_from_skips_what_is_ordered_before() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: b\n  - path: c\n");
    let j = graph(&ws, &["--from", "b"]);
    assert_eq!(order(&j), ["b", "c"]);
    let by_name = graph(&ws, &["--from", "b-proj"]);
    assert_eq!(order(&by_name), ["b", "c"]);
    let r = ws.strata(&["-p", "t", "show", "--from", "zzz"]);
    assert_config_error(&r, &["zzz"]);
}

#[test]
fn show_needs_no_stack_config_and_prompts_for_nothing() {
    let ws = abc(
        "cluster: {kubeconfig: kubeconfig, context: dev}\nconfig:\n  - key: t:region\n    prompt: Which region do you want\nsecrets:\n  - key: app:token\n    prompt: Give the app token\ninfrastructure:\n  - path: a\nkubernetes:\n  - path: b\n",
    );
    let before = ws.files_under("");
    // No env file, no stack config, stdin closed; with and without a stack.
    for args in [
        &["-p", "t", "show"][..],
        &["-p", "t", "-s", "dev", "show"][..],
        &["-p", "t", "-s", "dev", "show", "--format", "json"][..],
    ] {
        let r = ws.strata(args);
        assert_eq!(r.code, 0, "{args:?}\n{r:?}");
        assert!(
            !r.all().contains("Which region"),
            "show must not prompt\n{r:?}"
        );
        assert!(
            !r.all().contains("Give the app token"),
            "show must not prompt\n{r:?}"
        );
    }
    assert!(!ws.exists("config/pulumi/Pulumi.dev.yaml"));
    assert!(!ws.exists("config/secrets"));
    assert_eq!(ws.files_under(""), before, "show must change nothing");
    assert!(ws.calls().is_empty(), "show must not call pulumi");
    let j = graph(&ws, &[]);
    assert!(j["stack"].is_null() || j["stack"].is_string(), "{j:#}");
}

/// Projects `i/net`, `k/ns`, `k/ingress` and each of `more`; the fragment
/// `providers/common/k.yaml` = `fragment`; the profile `t` with `i/net` as infrastructure
/// and as kubernetes the fragment followed by `entries`.
fn composed(more: &[&str], fragment: &str, entries: &str) -> Ws {
    let ws = Ws::new();
    projects(&ws, &[&["i/net", "k/ns", "k/ingress"], more].concat());
    ws.write("providers/common/k.yaml", fragment);
    let kubernetes = format!("kubernetes:\n  - include: common/k.yaml\n{entries}");
    ws.profile(
        "t",
        &format!("{HEAD}infrastructure:\n  - path: i/net\n{kubernetes}"),
    );
    ws
}

#[test]
fn composition_include_and_after() {
    let ws = composed(
        &["k/app", "k/creds", "k/dns"],
        "- path: k/ns\n- path: k/ingress\n  needs: [k/ns]\n- path: k/app\n",
        "  - path: k/creds\n    after: k/ns\n  - path: k/dns\n    after: k/ingress\n",
    );
    let j = graph(&ws, &[]);
    assert_eq!(
        order(&j),
        ["i/net", "k/ns", "k/creds", "k/ingress", "k/dns", "k/app"]
    );
    assert_eq!(
        needs(&j, "k/creds"),
        ["k/ns"],
        "after: X without needs needs X"
    );
    assert_eq!(
        needs(&j, "k/ingress"),
        ["k/creds", "k/ns"],
        "what explicitly needs X also needs the inserted entry"
    );
    assert_eq!(needs(&j, "k/dns"), ["k/ingress"]);
    assert_eq!(
        needs(&j, "k/app"),
        ["k/dns"],
        "a plain entry follows what is now before it"
    );
    // The fragment is not a provider.
    let p = ws.strata(&["providers"]);
    assert_eq!(p.code, 0, "{p:?}");
    assert!(!p.stdout.contains("common"), "{p:?}");
}

#[test]
fn composition_before() {
    let ws = composed(
        &["k/pre", "k/first"],
        "- path: k/ns\n- path: k/ingress\n  needs: [k/ns]\n",
        "  - path: k/pre\n    before: k/ingress\n  - path: k/first\n    before: k/ns\n",
    );
    let j = graph(&ws, &[]);
    assert_eq!(
        order(&j),
        ["i/net", "k/first", "k/ns", "k/pre", "k/ingress"]
    );
    assert_eq!(
        needs(&j, "k/pre"),
        ["k/ns"],
        "before: X without needs needs what X needs"
    );
    assert_eq!(
        needs(&j, "k/ingress"),
        ["k/ns", "k/pre"],
        "X needs the inserted entry"
    );
    assert_eq!(needs(&j, "k/ns"), ["k/first"]);
    assert_eq!(needs(&j, "k/first"), ["i/net"]);
}

#[test]
fn composition_anchor_that_does_not_exist_is_refused() {
    let ws = abc(
        "infrastructure:\n  - path: a\nkubernetes:\n  - path: b\n  - path: c\n    after: k/nowhere\n",
    );
    let r = ws.strata(&["-p", "t", "show"]);
    assert_config_error(&r, &["providers/t.yaml", "k/nowhere", "`c`"]);
}

#[test]
fn include_of_a_missing_fragment_is_refused() {
    let ws = abc("infrastructure:\n  - path: a\nkubernetes:\n  - include: common/nope.yaml\n");
    let r = ws.strata(&["-p", "t", "show"]);
    assert_config_error(&r, &["providers/t.yaml", "common/nope.yaml"]);
}

// ---------------------------------------------------------------------------------------
// providers

#[test]
fn providers_are_listed_sorted_with_descriptions() {
    let ws = Ws::new();
    ws.profile("zeta", "description: Zeta cloud\ninfra_type: Z\n");
    ws.profile("alpha", "description: Alpha cloud\ninfra_type: A\n");
    ws.profile("mid", "description: Middle cloud\ninfra_type: M\n");
    ws.write("providers/common/k.yaml", "- path: x\n");
    for cmd in ["providers", "list-providers"] {
        let r = ws.strata(&[cmd]);
        assert_eq!(r.code, 0, "{r:?}");
        let lines: Vec<&str> = r.stdout.lines().filter(|l| !l.trim().is_empty()).collect();
        let names: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| ["alpha", "mid", "zeta"].contains(n))
            .collect();
        assert_eq!(names, ["alpha", "mid", "zeta"], "sorted\n{r:?}");
        for (name, desc) in [
            ("alpha", "Alpha cloud"),
            ("mid", "Middle cloud"),
            ("zeta", "Zeta cloud"),
        ] {
            assert!(
                lines.iter().any(|l| l.contains(name) && l.contains(desc)),
                "{name} with its description\n{r:?}"
            );
        }
        assert!(
            !r.stdout.contains("common"),
            "fragments are not providers\n{r:?}"
        );
    }
}

#[test]
fn providers_as_json() {
    let ws = Ws::new();
    ws.profile("zeta", "description: Zeta cloud\ninfra_type: Z\n");
    ws.profile("alpha", "description: Alpha cloud\ninfra_type: A\n");
    let r = ws.strata(&["providers", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("{e}\n{r:?}"));
    let list = v.as_array().expect("a JSON array");
    let names: Vec<&str> = list.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "zeta"]);
    assert_eq!(list[0]["description"], "Alpha cloud");
    assert_eq!(list[1]["description"], "Zeta cloud");
    let r2 = ws.strata(&["list-providers", "--output", "json"]);
    assert_eq!(r2.stdout, r.stdout);
}

// ---------------------------------------------------------------------------------------
// validate

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

#[test]
fn validate_passes_on_a_good_workspace_and_says_what_it_checked() {
    let ws = validate_ws();
    ws.write(
        "config/pulumi/Pulumi.dev.yaml",
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
    let ws = validate_ws();
    ws.write(
        "config/pulumi/Pulumi.dev.yaml",
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

// ---------------------------------------------------------------------------------------
// the workspace this repository ships

#[test]
fn repo_aws_order_is_maras_with_parallel_branches() {
    let j = show_json(&repo(&[
        "show", "-p", "aws", "-s", "dev", "--format", "json",
    ]));
    assert_eq!(j["provider"], "aws");
    assert_eq!(j["stack"], "dev");
    let vpc = "infrastructure/aws/vpc";
    let eks = "infrastructure/aws/eks";
    let ecr = "infrastructure/aws/ecr";
    let kc = "infrastructure/kubeconfig";
    assert_eq!(wave(&j, vpc), 1);
    assert_eq!(wave(&j, ecr), 1, "ECR does not need the VPC");
    assert!(needs(&j, eks).contains(&vpc.to_string()));
    assert!(wave(&j, eks) > wave(&j, vpc));
    assert!(needs(&j, kc).contains(&eks.to_string()));
    assert!(wave(&j, kc) > wave(&j, eks));
    assert_eq!(
        sorted(
            &paths_of_stage(&j, "infrastructure")
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>()
        ),
        sorted(&[vpc, eks, ecr, kc])
    );
    // The secrets step after the whole infrastructure stage, the kubernetes stage after it.
    let s = wave(&j, "@secrets");
    for p in paths_of_stage(&j, "infrastructure") {
        assert!(wave(&j, &p) < s && pos(&j, &p) < pos(&j, "@secrets"), "{p}");
    }
    let k8s = paths_of_stage(&j, "kubernetes");
    let expected_k8s = [
        "utility/kic-image-build",
        "utility/kic-image-push",
        "kubernetes/nginx/ingress-controller-namespace",
        "kubernetes/nginx/ingress-controller",
        "kubernetes/logstore",
        "kubernetes/logagent",
        "kubernetes/certmgr",
        "kubernetes/prometheus",
        "kubernetes/observability",
        "kubernetes/applications/sirius",
    ];
    assert_eq!(
        sorted(&k8s.iter().map(String::as_str).collect::<Vec<_>>()),
        sorted(&expected_k8s)
    );
    for p in &k8s {
        assert!(wave(&j, p) > s && pos(&j, p) > pos(&j, "@secrets"), "{p}");
    }
    // MARA's sequence holds where it is a real dependency.
    assert!(pos(&j, "utility/kic-image-build") < pos(&j, "utility/kic-image-push"));
    assert!(pos(&j, "utility/kic-image-push") < pos(&j, "kubernetes/nginx/ingress-controller"));
    assert!(pos(&j, "kubernetes/logstore") < pos(&j, "kubernetes/logagent"));
    assert!(pos(&j, "kubernetes/prometheus") < pos(&j, "kubernetes/observability"));
    assert_eq!(
        order(&j).last().map(String::as_str),
        Some("kubernetes/applications/sirius")
    );
    // logstore, certmgr and prometheus do not need each other.
    let w = wave(&j, "kubernetes/logstore");
    assert_eq!(wave(&j, "kubernetes/certmgr"), w);
    assert_eq!(wave(&j, "kubernetes/prometheus"), w);

    // The tree shows the parallel branches.
    let tree = repo(&["show", "-p", "aws", "-s", "dev"]);
    assert_eq!(tree.code, 0, "{tree:?}");
    assert!(tree.stdout.contains("parallel"), "{tree:?}");
    let first_wave: String = tree.stdout.split("wave 2").next().unwrap().to_string();
    assert!(
        first_wave.contains(vpc) && first_wave.contains(ecr),
        "{tree:?}"
    );
}

#[test]
fn repo_every_shipped_profile_shows_in_every_format() {
    for p in ["aws", "do", "linode", "kubeconfig", "local"] {
        for f in ["tree", "dot", "mermaid", "json"] {
            let r = repo(&["show", "-p", p, "-s", "dev", "--format", f]);
            assert_eq!(r.code, 0, "show -p {p} --format {f}\n{r:?}");
            assert!(
                !r.stdout.trim().is_empty(),
                "show -p {p} --format {f}: empty"
            );
        }
        let j = show_json(&repo(&["show", "-p", p, "-s", "dev", "--format", "json"]));
        assert_eq!(j["provider"], p);
        assert!(!order(&j).is_empty(), "{p}");
    }
    let r = repo(&["providers"]);
    assert_eq!(r.code, 0, "{r:?}");
    for p in ["aws", "do", "kubeconfig", "linode", "local"] {
        assert!(
            r.stdout.lines().any(|l| l.starts_with(p)),
            "providers lists {p}\n{r:?}"
        );
    }
}

#[test]
fn repo_local_profile_validates() {
    // A copy of the repository's workspace, so no file of a user's run interferes.
    let copy = workspace_copy(&PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let r = strata_at(
        copy.path(),
        &["validate", "-p", "local", "-s", "strata-foundation-test"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("providers/local.yaml"), "{r:?}");
    assert!(
        !copy
            .path()
            .join("config/pulumi/Pulumi.strata-foundation-test.yaml")
            .exists(),
        "validate must not create the stack config"
    );
    assert!(
        !copy.path().join(".strata/strata-foundation-test").exists(),
        "validate must not create state"
    );
}

/// The README's first command (`strata up --provider local --stack dev`) leaves
/// `PULUMI_STACK=dev` in `config/pulumi/environment`, a stack config, a store and
/// `.strata/` in the clone; the tests of the shipped profiles run on a copy without
/// them, so the README's second command (`cargo test --workspace`) stays green.
#[test]
fn repo_tests_ignore_what_a_users_run_left_in_the_clone() {
    let clone = workspace_copy(&PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let left = [
        ("config/pulumi/environment", "PULUMI_STACK=dev\n"),
        (
            "config/pulumi/Pulumi.dev.yaml",
            "config:\n  aws:region: nowhere\n",
        ),
        ("config/secrets/dev.age", "not a store"),
        (".strata/dev/journal.jsonl", "{}\n"),
        ("projects/local/network/Pulumi.dev.yaml", "config: {}\n"),
    ];
    for (rel, text) in left {
        let p = clone.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let copy = workspace_copy(clone.path());
    for (rel, _) in left {
        assert!(!copy.path().join(rel).exists(), "{rel} was copied");
    }
    assert!(copy.path().join("providers/local.yaml").is_file());
    assert!(
        copy.path()
            .join("config/pulumi/environment.example")
            .is_file()
    );
    for (provider, code) in [("local", 0), ("aws", 3)] {
        let r = strata_at(
            copy.path(),
            &["validate", "-p", provider, "-s", "strata-foundation-test"],
        );
        assert_eq!(r.code, code, "{provider}: {r:?}");
    }
}

#[test]
fn repo_aws_validate_lists_missing_keys_without_prompting() {
    let r = repo(&["validate", "-p", "aws", "-s", "strata-foundation-test"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.all().contains("kic-helm:fqdn"),
        "the key without a default is missing\n{r:?}"
    );
    assert!(
        !r.all().contains("`aws:region`"),
        "aws:region has a default\n{r:?}"
    );
}

#[test]
fn repo_do_inserts_registry_credentials_and_dns_record() {
    let j = show_json(&repo(&[
        "show", "-p", "do", "-s", "dev", "--format", "json",
    ]));
    let o = order(&j);
    let ns = "kubernetes/nginx/ingress-controller-namespace";
    let creds = "kubernetes/digitalocean/container-registry-credentials";
    let ic = "kubernetes/nginx/ingress-controller";
    let dns = "kubernetes/digitalocean/dns-record";
    assert_eq!(
        pos(&j, creds),
        pos(&j, ns) + 1,
        "credentials right after the namespace: {o:?}"
    );
    assert_eq!(
        pos(&j, dns),
        pos(&j, ic) + 1,
        "dns-record right after the controller: {o:?}"
    );
    assert!(needs(&j, creds).contains(&ns.to_string()));
    assert!(
        needs(&j, ic).contains(&creds.to_string()),
        "the controller waits for the pull secret"
    );
    assert!(needs(&j, dns).contains(&ic.to_string()));
    for p in [
        "infrastructure/digitalocean/container-registry",
        "infrastructure/digitalocean/domk8s",
    ] {
        assert_eq!(project(&j, p)["stage"], "infrastructure");
        assert_eq!(wave(&j, p), 1, "registry and cluster come up together");
    }
}

#[test]
fn repo_linode_has_harbor_first_in_the_kubernetes_stage() {
    let j = show_json(&repo(&[
        "show", "-p", "linode", "-s", "dev", "--format", "json",
    ]));
    let first_k8s = order(&j)
        .into_iter()
        .find(|p| project(&j, p)["stage"] == "kubernetes")
        .unwrap();
    assert_eq!(first_k8s, "kubernetes/linode/harbor", "{:?}", order(&j));
    assert!(pos(&j, "@secrets") < pos(&j, "kubernetes/linode/harbor"));
    assert!(needs(&j, "utility/kic-image-build").contains(&"kubernetes/linode/harbor".to_string()));
    let hc = "kubernetes/linode/harbor-configuration";
    assert_eq!(
        pos(&j, hc),
        pos(&j, "utility/kic-image-build") + 1,
        "{:?}",
        order(&j)
    );
    let creds = "kubernetes/linode/container-registry-credentials";
    assert_eq!(
        pos(&j, creds),
        pos(&j, "kubernetes/nginx/ingress-controller-namespace") + 1,
        "{:?}",
        order(&j)
    );
}

#[test]
fn repo_project_selection_by_pulumi_name_with_deps() {
    let j = show_json(&repo(&[
        "show",
        "-p",
        "aws",
        "-s",
        "dev",
        "--format",
        "json",
        "--project",
        "aws-eks",
        "--with-deps",
    ]));
    assert_eq!(
        order(&j),
        ["infrastructure/aws/vpc", "infrastructure/aws/eks"]
    );
}

// ---------------------------------------------------------------------------------------
// no panic, whatever the input

#[test]
fn empty_profile_file_is_a_config_error() {
    let ws = abc("");
    ws.write("providers/t.yaml", "");
    let r = ws.strata(&["-p", "t", "show"]);
    assert_config_error(&r, &["providers/t.yaml"]);
    assert!(r.stderr.contains("description"), "what is missing\n{r:?}");
}

#[test]
fn profile_that_is_a_yaml_list_is_a_config_error() {
    let ws = abc("");
    ws.write("providers/t.yaml", "- path: a\n- path: b\n");
    let r = ws.strata(&["-p", "t", "show"]);
    assert_config_error(&r, &["providers/t.yaml"]);
    // The message is about the user's file, not about strata's internal Rust types.
    assert!(
        !r.stderr.contains("RawProfile") && !r.stderr.contains("struct "),
        "the message leaks an internal type name\n{r:?}"
    );
    assert!(
        r.stderr.to_lowercase().contains("map") || r.stderr.contains("description"),
        "{r:?}"
    );
}

#[test]
fn binary_garbage_in_env_file_is_a_config_error() {
    let ws = abc("infrastructure:\n  - path: a\n");
    let mut junk: Vec<u8> = (0u8..=255).rev().collect();
    junk.extend_from_slice(b"\n\x00\xff=\xfe\n");
    std::fs::write(ws.path("config/pulumi/environment"), &junk).unwrap();
    let r = ws.strata(&["-p", "t", "-s", "dev", "show"]);
    assert_no_panic(&r);
    assert!(
        r.code == 2 || r.code == 3,
        "unreadable env file content is invalid configuration (exit 3)\n{r:?}"
    );
    assert!(r.stderr.contains("config/pulumi/environment"), "{r:?}");
}

#[test]
fn path_with_dot_dot_escaping_projects_is_refused() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: ../outside\n");
    ws.pulumi_project("../outside", "outside", ""); // projects/../outside exists
    let r = ws.strata(&["-p", "t", "show"]);
    assert_no_panic(&r);
    assert!(
        r.code == 2 || r.code == 3,
        "a project path outside projects/ must be refused\n{r:?}"
    );
    assert!(
        r.stderr.contains("../outside") && r.stderr.contains("providers/t.yaml"),
        "{r:?}"
    );
}

/// `strata ARGS` on `ws` mishandled `what` when it panicked, exited other than 2 or 3,
/// or said nothing on stderr: then what it did.
fn mishandled(what: &str, ws: &Ws, args: &[&str]) -> Option<String> {
    let r = ws.strata(args);
    let panicked = r.code == 101 || r.stderr.contains("panicked");
    let said_nothing = r.stderr.trim().is_empty();
    (panicked || !(r.code == 2 || r.code == 3) || said_nothing)
        .then(|| format!("{what}: strata {args:?}\n{r:?}"))
}

const SHOW: &[&str] = &["-p", "t", "show"];
const VALIDATE: &[&str] = &["-p", "t", "validate"];
const VALIDATE_DEV: &[&str] = &["-p", "t", "-s", "dev", "validate"];

/// A workspace of one entry `a` (see [`abc`]).
fn sound() -> Ws {
    abc("infrastructure:\n  - path: a\n")
}

#[test]
fn odd_inputs_never_panic() {
    let mut failures = Vec::new();
    // A file that is not what it should be: (what, file, text, command).
    let files: &[(&str, &str, &str, &[&str])] = &[
        (
            "profile is a scalar",
            "providers/t.yaml",
            "just a string\n",
            SHOW,
        ),
        (
            "profile with tabs and NULs",
            "providers/t.yaml",
            "description: \u{0}\n\tinfra_type: x\n",
            SHOW,
        ),
        (
            "stack config is a list",
            "config/pulumi/Pulumi.dev.yaml",
            "- a\n- b\n",
            VALIDATE_DEV,
        ),
        (
            "stack config config: is a list",
            "config/pulumi/Pulumi.dev.yaml",
            "config:\n  - a\n",
            VALIDATE_DEV,
        ),
        (
            "env line with empty key",
            "config/pulumi/environment",
            "=value\n",
            SHOW,
        ),
        (
            "broken Pulumi.yaml",
            "projects/a/Pulumi.yaml",
            ": : :\n\t- ]",
            SHOW,
        ),
    ];
    for (what, file, text, args) in files {
        let ws = sound();
        ws.write(file, text);
        failures.extend(mishandled(what, &ws, args));
    }
    // A profile `t` (after HEAD) that no profile may be: (what, body, command).
    let profiles: &[(&str, &str, &[&str])] = &[
        ("infrastructure is a number", "infrastructure: 5\n", SHOW),
        (
            "needs is a string",
            "infrastructure:\n  - path: a\n  - path: b\n    needs: a\n",
            SHOW,
        ),
        (
            "entry without path",
            "infrastructure:\n  - description: x\n",
            SHOW,
        ),
        ("empty path", "infrastructure:\n  - path: ''\n", SHOW),
        (
            "self need",
            "infrastructure:\n  - path: a\n    needs: [a]\n",
            SHOW,
        ),
        (
            "hook with two kinds",
            "infrastructure:\n  - path: a\n    on_success:\n      - run: x\n        kubeconfig: {output: k}\n",
            SHOW,
        ),
        (
            "bad config type",
            "config:\n  - key: a:b\n    prompt: p\n    type: float\ninfrastructure:\n  - path: a\n",
            VALIDATE,
        ),
        (
            "bad config key",
            "config:\n  - key: nocolon\n    prompt: p\ninfrastructure:\n  - path: a\n",
            SHOW,
        ),
    ];
    for (what, body, args) in profiles {
        failures.extend(mishandled(what, &abc(body), args));
    }
    // An odd command line on a sound workspace.
    let lines: &[(&str, &[&str])] = &[
        ("bad stack name", &["-p", "t", "-s", "a b/../c", "show"]),
        (
            "root that does not exist",
            &["--root", "/nonexistent/strata-root", "-p", "t", "show"],
        ),
        ("provider with a slash", &["-p", "../t", "show"]),
        (
            "project path with dot dot",
            &["-p", "t", "show", "--project", "../../etc"],
        ),
        ("no provider and no stack", &["show"]),
    ];
    for (what, args) in lines {
        failures.extend(mishandled(what, &sound(), args));
    }
    let ws = abc("infrastructure:\n  - path: a\nkubernetes:\n  - include: common/x.yaml\n");
    ws.write("providers/common/x.yaml", "- include: common/x.yaml\n");
    failures.extend(mishandled("include of itself", &ws, SHOW));
    let ws = sound();
    std::fs::remove_file(ws.path("projects/a/Pulumi.yaml")).unwrap();
    ws.write("projects/a/Strata.yaml", "up: 1\nbogus: x\n");
    failures.extend(mishandled("broken Strata.yaml", &ws, SHOW));
    assert!(
        failures.is_empty(),
        "odd inputs mishandled:\n\n{}",
        failures.join("\n\n")
    );
}
