//! Unit tests of profile loading: parsing, composition and the checks.

use super::*;

use super::tests_support::files as ws;

fn paths(p: &Profile) -> Vec<&str> {
    p.entries.iter().map(|e| e.path.as_str()).collect()
}

const HEAD: &str = "description: d\ninfra_type: T\n";

/// Loads the only profile, `p.yaml`: the head, then `body`.
fn load_body(body: &str) -> Result<Profile> {
    let d = ws(&[("p.yaml", &format!("{HEAD}{body}"))]);
    load(d.path(), "p")
}

/// The configuration error (exit 3) the profile `body` is refused with.
fn refused(body: &str) -> crate::error::Error {
    let e = load_body(body).unwrap_err();
    assert_eq!(e.exit_code(), 3, "{body}");
    e
}

/// Refuses the profile `body` (see `refused`) with a message that says each of `parts`.
fn refused_saying(body: &str, parts: &[&str]) -> crate::error::Error {
    let e = refused(body);
    for part in parts {
        e.assert_says(part);
    }
    e
}

#[test]
fn watch_paths_stay_inside_the_workspace() {
    assert_eq!(
        check_watch(&["projects/local/lib.sh".into(), "lib/".into()]).unwrap(),
        ["projects/local/lib.sh", "lib"]
    );
    for bad in ["../secrets", "/etc/passwd", "projects/../../x", ""] {
        let e = check_watch(&[bad.to_string()]).unwrap_err();
        assert!(e.contains("inside the workspace"), "{bad}: {e}");
    }
}

#[test]
fn projects_folder_defaults_to_projects_and_may_be_the_root_or_another_folder() {
    let d = ws(&[
        (
            "plain.yaml",
            &format!("{HEAD}infrastructure:\n  - path: a\n"),
        ),
        (
            "root.yaml",
            &format!("{HEAD}projects: .\ninfrastructure:\n  - path: infra/vpc\n"),
        ),
        (
            "sub.yaml",
            &format!("{HEAD}projects: ./pulumi/python/\ninfrastructure:\n  - path: infra/vpc\n"),
        ),
    ]);
    assert_eq!(load(d.path(), "plain").unwrap().projects_dir, "projects");
    assert_eq!(load(d.path(), "root").unwrap().projects_dir, ".");
    assert_eq!(load(d.path(), "sub").unwrap().projects_dir, "pulumi/python");
    for bad in ["..", "../elsewhere", "/etc", "a/../../b"] {
        refused_saying(
            &format!("projects: '{bad}'\ninfrastructure:\n  - path: a\n"),
            &["`projects:`", "inside the workspace"],
        );
    }
}

#[test]
fn parses_core_syntax() {
    let p = load_body(
        "config:\n  - key: aws:region\n    prompt: Region\n    default: us-west-2\n  - key: eks:min\n    prompt: Min\n    default: 3\n    type: int\nsecrets:\n  - key: prom:pass\n    prompt: Pass\ninfrastructure:\n  - path: a\n    inputs: { 'x:y': 'b:out' }\n    on_success:\n      - kubeconfig: { output: kc }\n      - run: echo hi\n  - path: b\n    needs: []\nkubernetes:\n  - path: k\n",
    )
    .unwrap();
    assert_eq!(paths(&p), ["a", "b", "k"]);
    assert_eq!(p.config[1].value_type, ValueType::Int);
    assert_eq!(p.entries[0].inputs[0].project, "b");
    assert_eq!(p.entries[0].on_success.len(), 2);
    assert_eq!(p.entries[1].needs, Some(vec![]));
    assert_eq!(p.entries[2].stage, Stage::Kubernetes);
    assert_eq!(p.secret_name, "strata-secrets");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]
    /// Any text as a profile: a profile or a configuration error, never a panic.
    #[test]
    fn any_profile_text_loads_or_is_refused(body in "\\PC{0,300}", nest in 0usize..200) {
        let text = format!("{body}\ninfrastructure: {}{}\n", "[".repeat(nest), "]".repeat(nest));
        if let Err(e) = load_body(&text) {
            proptest::prop_assert_eq!(e.exit_code(), 3);
        }
    }
}

#[test]
fn parses_credentials_timeout_and_retry() {
    let p = load_body(
        "credentials: [AWS_ACCESS_KEY_ID]\ninfer_needs: true\ninfrastructure:\n  - path: a\n    timeout: 45m\n    retry: { attempts: 3, delay: 30s, on: [\"TooManyRequests\", \"reset$\"] }\n  - path: b\n",
    )
    .unwrap();
    assert_eq!(p.credentials, ["AWS_ACCESS_KEY_ID"]);
    assert!(p.infer_needs);
    let a = &p.entries[0];
    assert_eq!(a.timeout, Some(std::time::Duration::from_secs(45 * 60)));
    let r = a.retry.as_ref().unwrap();
    assert_eq!((r.attempts, r.delay.as_secs()), (3, 30));
    assert_eq!(r.on.len(), 2);
    assert_eq!(
        (p.entries[1].timeout, (*p.entries[1].retry).clone()),
        (None, None)
    );
}

#[test]
fn bad_timeout_and_retry_are_config_errors() {
    for (yaml, needle) in [
        ("timeout: soon", "`timeout: soon` is not a duration"),
        ("timeout: 0s", "longer than zero"),
        ("retry: { attempts: 0, on: [x] }", "at least 1"),
        ("retry: { attempts: 2 }", "lists no pattern"),
        ("retry: { attempts: 2, on: [\"(\"] }", "not a valid regex"),
        (
            "retry: { attempts: 2, delay: later, on: [x] }",
            "retry.delay: `later` is not a duration",
        ),
    ] {
        refused_saying(
            &format!("infrastructure:\n  - path: a\n    {yaml}\n"),
            &[needle, "p.yaml"],
        );
    }
}

#[test]
fn unknown_field_is_an_error_with_line() {
    refused_saying(
        "infrastructure:\n  - path: a\n    need: [b]\n",
        &["unknown field `need`", "line 5", "p.yaml"],
    );
}

#[test]
fn unknown_provider_lists_available() {
    let d = ws(&[("aws.yaml", HEAD), ("do.yaml", HEAD)]);
    let e = load(d.path(), "gcp").unwrap_err();
    e.assert_says("aws, do");
}

#[test]
fn include_and_insertions_compose() {
    let d = ws(&[
        (
            "common/k.yaml",
            "- path: ns\n- path: ingress\n  needs: [ns]\n- path: app\n",
        ),
        (
            "do.yaml",
            &format!(
                "{HEAD}kubernetes:\n  - include: common/k.yaml\n  - path: creds\n    after: ns\n  - path: first\n    before: ns\n  - path: dns\n    after: ingress\n"
            ),
        ),
    ]);
    let p = load(d.path(), "do").unwrap();
    assert_eq!(paths(&p), ["first", "ns", "creds", "ingress", "dns", "app"]);
    let ingress = p.entry("ingress").unwrap();
    assert_eq!(
        ingress.needs.as_deref(),
        Some(&["ns".to_string(), "creds".to_string()][..])
    );
    // app had no needs: it follows dns by position now.
    assert!(p.entry("app").unwrap().needs.is_none());
    assert!(p.entry("creds").unwrap().needs.is_none());
}

#[test]
fn insertion_anchor_must_exist() {
    refused_saying(
        "kubernetes:\n  - path: a\n  - path: x\n    after: nope\n",
        &["after `nope`"],
    );
}

#[test]
fn include_cycle_is_reported() {
    let d = ws(&[
        ("common/a.yaml", "- include: common/a.yaml\n"),
        (
            "p.yaml",
            &format!("{HEAD}kubernetes:\n  - include: common/a.yaml\n"),
        ),
    ]);
    let e = load(d.path(), "p").unwrap_err();
    e.assert_says("includes itself");
}

#[test]
fn duplicate_path_is_an_error() {
    refused_saying(
        "infrastructure:\n  - path: a\nkubernetes:\n  - path: a\n",
        &["listed twice"],
    );
}

#[test]
fn needs_unknown_path_is_an_error() {
    refused_saying(
        "infrastructure:\n  - path: a\n    needs: [ghost]\n",
        &["needs `ghost`"],
    );
}

#[test]
fn bad_input_source_is_an_error() {
    refused_saying(
        "infrastructure:\n  - path: a\n  - path: b\n    inputs:\n      'x:y': a-without-output\n",
        &["<project path>:<output>"],
    );
}

#[test]
fn hooks_reject_unknown_kinds() {
    refused_saying(
        "infrastructure:\n  - path: a\n    on_success:\n      - shell: x\n",
        &["shell"],
    );
}

#[test]
fn list_is_sorted_and_skips_fragments() {
    let d = ws(&[("z.yaml", HEAD), ("a.yaml", HEAD), ("common/k.yaml", "[]")]);
    let names: Vec<String> = list(d.path()).unwrap().into_iter().map(|x| x.0).collect();
    assert_eq!(names, ["a", "z"]);
}

#[test]
fn mock_outputs_default_to_preview_and_other_commands_are_refused() {
    let p = load_body(
        "infrastructure:\n  - path: a\n    mock_outputs: { vpc_id: vpc-mock, port: 80 }\n  - path: b\n",
    )
    .unwrap();
    assert_eq!(
        p.entries[0].mock_outputs.get("vpc_id"),
        Some(&serde_json::json!("vpc-mock"))
    );
    assert_eq!(
        p.entries[0].mock_outputs.get("port"),
        Some(&serde_json::json!(80))
    );
    // Left out: `[preview]`.
    assert_eq!(*p.entries[0].mock_outputs_allowed_commands, None);
    assert!(p.entries[0].mocks_serve("preview") && !p.entries[0].mocks_serve("up"));
    assert!(p.entries[1].mock_outputs.is_empty());
    for (list, needle) in [
        ("[up]", "lists `up`: mocks are used only by `preview`"),
        (
            "[preview, plan]",
            "lists `plan`, which is not a strata command",
        ),
    ] {
        refused_saying(
            &format!(
                "infrastructure:\n  - path: a\n    mock_outputs: {{ x: y }}\n    mock_outputs_allowed_commands: {list}\n"
            ),
            &[needle, "p.yaml", "mock_outputs_allowed_commands"],
        );
    }
}

#[test]
fn pools_defaults_and_entry_pools_resolve_in_that_order() {
    let p = load_body(
        "pools: {aws-us-east-1: 4, harbor: 1, cluster-api: 2}\npool: {infrastructure: aws-us-east-1, kubernetes: cluster-api}\nthrottle: {patterns: ['SlowDown'], attempts: 3, delay: 2s}\ninfrastructure:\n  - path: vpc\n    tags: [network, aws]\n  - path: registry\n    pool: harbor\nkubernetes:\n  - path: app\n",
    )
    .unwrap();
    let pools: Vec<(&str, usize)> = p.pools.iter().map(|x| (x.name.as_str(), x.limit)).collect();
    assert_eq!(
        pools,
        [("aws-us-east-1", 4), ("harbor", 1), ("cluster-api", 2)]
    );
    let of: Vec<Option<&str>> = p.entries.iter().map(|e| e.pool.as_deref()).collect();
    assert_eq!(
        of,
        [Some("aws-us-east-1"), Some("harbor"), Some("cluster-api")]
    );
    assert_eq!(*p.entries[0].tags, ["network", "aws"]);
    assert_eq!(p.throttle.attempts, 3);
    assert_eq!(p.throttle.delay, std::time::Duration::from_secs(2));
    assert!(p.throttle.patterns.iter().any(|x| x == "SlowDown"));
    assert!(p.throttle.patterns.iter().any(|x| x == "Throttling"));
    // One name for every entry, and none at all.
    let p = load_body(
        "pools: {api: 2}\npool: api\ninfrastructure:\n  - path: a\nkubernetes:\n  - path: k\n",
    )
    .unwrap();
    assert!(p.entries.iter().all(|e| e.pool.as_deref() == Some("api")));
    let p = load_body("infrastructure:\n  - path: a\n").unwrap();
    assert!(p.pools.is_empty() && p.entries[0].pool.is_none());
}

#[test]
fn an_unknown_pool_a_bad_limit_or_a_bad_pattern_is_refused_with_the_fix() {
    for (body, says) in [
        (
            "pools: {harbor: 1}\ninfrastructure:\n  - path: a\n    pool: harbour\n",
            &["entry `a` runs in pool `harbour`", "Did you mean `harbor`?"][..],
        ),
        (
            "infrastructure:\n  - path: a\n    pool: harbor\n",
            &["declares no pools"],
        ),
        (
            "pools: {harbor: 0}\ninfrastructure:\n  - path: a\n",
            &["`pools: harbor:` `0` must be a whole number of at least 1"],
        ),
        (
            "pools: {harbor: many}\ninfrastructure:\n  - path: a\n",
            &["at least 1"],
        ),
        (
            "throttle: {patterns: ['(']}\ninfrastructure:\n  - path: a\n",
            &["`throttle: patterns:` `(` is not a valid regex"],
        ),
        (
            "throttle: {delay: soon}\ninfrastructure:\n  - path: a\n",
            &["throttle.delay: `soon` is not a duration"],
        ),
        (
            "infrastructure:\n  - path: a\n    tags: ['has space']\n",
            &["tag `has space` must be a name"],
        ),
    ] {
        refused_saying(body, says);
    }
    let e = refused("pool: {infra: x}\ninfrastructure:\n  - path: a\n");
    assert!(!e.message.is_empty());
}

#[test]
fn the_default_throttle_patterns_match_what_clouds_print() {
    let t = Throttle::default();
    let res: Vec<regex::Regex> = t
        .patterns
        .iter()
        .map(|p| regex::Regex::new(p).unwrap())
        .collect();
    let hit = |line: &str| res.iter().any(|r| r.is_match(line));
    for line in [
        "error: operation error EC2: RunInstances, https response error StatusCode: 400, api error Throttling: Rate exceeded",
        "ThrottlingException: Rate exceeded",
        "Error from server (TooManyRequests): the server has received too many requests",
        "POST https://api.digitalocean.com/v2/droplets: 429 Too Many Requests",
        "unexpected status code: 429",
        "HTTP 429",
    ] {
        assert!(hit(line), "{line}");
    }
    for line in [
        "created 429 resources",
        "port 4290 in use",
        "error: the VPC does not exist",
    ] {
        assert!(!hit(line), "{line}");
    }
}

/// `@secrets` writes into the stack's cluster: the profile names it (`cluster:`) or has
/// exactly one kubeconfig hook; none or several is refused, saying how to name it.
#[test]
fn a_profile_writing_secrets_must_say_which_cluster_is_the_stacks() {
    let body = |head: &str, hooks: &[&str]| {
        let mut y = format!("{head}secrets:\n  - key: ns:pw\n    prompt: pw\ninfrastructure:\n");
        for (i, p) in ["a", "b"].iter().enumerate() {
            y.push_str(&format!("  - path: {p}\n    needs: []\n"));
            if hooks.contains(p) {
                y.push_str(&format!(
                    "    on_success:\n      - kubeconfig: {{ output: kc{i} }}\n"
                ));
            }
        }
        y + "kubernetes:\n  - path: k\n"
    };
    let load_it = |yaml: String| load_body(&yaml);
    let one = load_it(body("", &["a"])).unwrap();
    assert_eq!(
        one.cluster_source(),
        Some(ClusterSource::Hook {
            project: "a".into()
        })
    );
    let named = load_it(body(
        "cluster:\n  kubeconfig: ${config.k:file}\n  context: dev\n",
        &["a", "b"],
    ))
    .unwrap();
    assert!(matches!(
        named.cluster_source(),
        Some(ClusterSource::Profile(_))
    ));
    for (hooks, why) in [
        (&[][..], "no entry has a `kubeconfig:` hook"),
        (
            &["a", "b"][..],
            "several entries have a `kubeconfig:` hook (a, b)",
        ),
    ] {
        let e = load_it(body("", hooks)).unwrap_err().message;
        assert!(e.contains(why) && e.contains("cluster:"), "{e}");
    }
    let e = load_it(body("cluster: {context: dev}\n", &[]))
        .unwrap_err()
        .message;
    assert!(e.contains("kubeconfig"), "{e}");
}

#[test]
fn a_delay_over_an_hour_or_a_throttle_without_a_pause_is_refused_naming_file_key_and_line() {
    for (body, at, key, says) in [
        (
            "infrastructure:\n  - path: a\n    retry: {attempts: 2, delay: 300000000000y, on: [x]}\n",
            "line 5",
            "infrastructure[0].retry.delay",
            "`300000000000y` is longer than 1h",
        ),
        (
            "kubernetes:\n  - path: a\n  - path: b\n    retry:\n      attempts: 2\n      delay: 61m\n      on: [x]\n",
            "line 8",
            "kubernetes[1].retry.delay",
            "`61m` is longer than 1h",
        ),
        (
            "throttle: {delay: 2h}\ninfrastructure:\n  - path: a\n",
            "line 3",
            "throttle.delay",
            "`2h` is longer than 1h",
        ),
        (
            "throttle:\n  attempts: 5\n  delay: 0s\ninfrastructure:\n  - path: a\n",
            "line 5",
            "throttle.delay",
            "a throttled project must pause before its next try",
        ),
    ] {
        let e = refused_saying(body, &["p.yaml: ", at, key, says]);
        assert!(!e.message.contains("not valid YAML"), "{}", e.message);
    }
    // Up to an hour, and a retry without a pause, are fine.
    let p = load_body(
        "throttle: {delay: 1h}\ninfrastructure:\n  - path: a\n    retry: {attempts: 2, delay: 0s, on: [x]}\n  - path: b\n    retry: {attempts: 2, delay: 60m, on: [x]}\n",
    )
    .unwrap();
    assert_eq!(p.throttle.delay, MAX_DELAY);
    assert_eq!(p.entries[1].retry.as_ref().unwrap().delay, MAX_DELAY);
}

#[test]
fn a_pool_s_unknown_key_is_named_and_a_limit_above_the_most_is_refused() {
    let refused_saying = |pools: &str, parts: &[&str]| {
        refused_saying(&format!("{pools}\ninfrastructure:\n  - path: a\n"), parts)
    };
    let e = refused_saying(
        "pools: {harbor: {limit: 1, adaptve: false}}",
        &[
            "`pools: harbor:`",
            "unknown key `adaptve`",
            "`limit`",
            "`adaptive`",
        ],
    );
    assert!(!e.message.contains("whole number"), "{e}");
    refused_saying(
        "pools: {harbor: {limit: 1, adaptive: sometimes}}",
        &["`adaptive:` is true or false"],
    );
    for body in ["pools: {aws: 20000}", "pools: {aws: {limit: 10001}}"] {
        refused_saying(
            body,
            &["more than 10000", "leave its projects out of any pool"],
        );
    }
    let p = load_body("pools: {aws: 10000}\ninfrastructure:\n  - path: a\n").unwrap();
    assert_eq!(p.pools[0].limit, 10_000);
}

#[test]
fn a_bad_entry_is_refused_naming_its_file_number_and_path() {
    let cases = [
        (
            "  - include: common/a.yaml\n    path: x\n",
            "p.yaml: infrastructure entry 1: an `include:` entry takes no other field; put the fields on the entries of common/a.yaml.",
        ),
        (
            "  - include: common/a.yaml\n    watch: [lib]\n",
            "p.yaml: infrastructure entry 1: an `include:` entry takes no other field; put the fields on the entries of common/a.yaml.",
        ),
        (
            "  - include: common/a.yaml\n    mock_outputs: {id: x}\n",
            "p.yaml: infrastructure entry 1: an `include:` entry takes no other field; put the fields on the entries of common/a.yaml.",
        ),
        (
            "  - include: common/a.yaml\n    mock_outputs_allowed_commands: [preview]\n",
            "p.yaml: infrastructure entry 1: an `include:` entry takes no other field; put the fields on the entries of common/a.yaml.",
        ),
        (
            "  - include: common/a.yaml\n    secrets: [{key: 'a:b', prompt: p}]\n",
            "p.yaml: infrastructure entry 1: an `include:` entry takes no other field; put the fields on the entries of common/a.yaml.",
        ),
        (
            "  - path: a\n  - include: common/none.yaml\n",
            "p.yaml: infrastructure entry 2: `include: common/none.yaml` names no file (",
        ),
        (
            "  - description: d\n",
            "p.yaml: infrastructure entry 1: the entry has no `path:` (the project folder under projects/, or under the profile's `projects:` folder), and is not an `include:`.",
        ),
        (
            "  - path: /\n",
            "p.yaml: infrastructure entry 1: `path:` is empty.",
        ),
        (
            "  - path: a/../b\n",
            "p.yaml: infrastructure entry 1: `path: a/../b` must name a folder inside projects/ (or the profile's `projects:` folder) without `.` or `..` parts.",
        ),
        (
            "  - path: a\n  - path: /x/\n    after: a\n    before: a\n",
            "p.yaml: infrastructure entry 2 (x): give `after:` or `before:`, not both.",
        ),
        (
            "  - path: x\n    inputs: {'k:v': nocolon}\n",
            "p.yaml: infrastructure entry 1 (x): input `k:v: nocolon` is not `<project path>:<output>` (for example `infrastructure/aws/vpc:vpc_id`).",
        ),
        (
            "  - path: x\n    timeout: soon\n",
            "p.yaml: infrastructure entry 1 (x): `timeout: soon` is not a duration (",
        ),
        (
            "  - path: x\n    retry: {attempts: 0}\n",
            "p.yaml: infrastructure entry 1 (x): `retry:` ",
        ),
        (
            "  - path: x\n    watch: ['../x']\n",
            "p.yaml: infrastructure entry 1 (x): `watch:` ",
        ),
        (
            "  - path: x\n    mock_outputs_allowed_commands: [nope]\n",
            "p.yaml: infrastructure entry 1 (x): `mock_outputs_allowed_commands:` ",
        ),
        (
            "  - path: x\n    mock_outputs:\n      o:\n        [1, 2]: x\n",
            "p.yaml: infrastructure entry 1 (x): `mock_outputs: o` is not a plain value (",
        ),
        // An entry of an included fragment is named by the fragment's file.
        (
            "  - include: common/b.yaml\n",
            "b.yaml: infrastructure entry 1 (y): give `after:` or `before:`, not both.",
        ),
    ];
    for (list, want) in cases {
        let d = ws(&[
            ("common/a.yaml", "- path: a\n"),
            ("common/b.yaml", "- path: y\n  after: a\n  before: a\n"),
            ("p.yaml", &format!("{HEAD}infrastructure:\n{list}")),
        ]);
        let e = load(d.path(), "p").unwrap_err();
        assert_eq!(e.exit_code(), 3, "{list}");
        assert!(
            e.message.contains(want),
            "{list}\nwant: {want}\ngot:  {}",
            e.message
        );
    }
}
