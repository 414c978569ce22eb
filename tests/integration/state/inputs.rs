//! Outputs wired through `inputs:`: into a Pulumi project's own copy of the stack config,
//! into a command project's environment and inputs file, and from a command project on.

use serde_json::{Value, json};

use super::{NETWORK, WEB, network_and_web, the_up, workspace};

/// The value of `--config-file` in an argv.
fn config_file_arg(call: &Value) -> Option<String> {
    let argv: Vec<String> = call["argv"]
        .as_array()?
        .iter()
        .filter_map(|a| a.as_str().map(String::from))
        .collect();
    for (i, a) in argv.iter().enumerate() {
        if a == "--config-file" {
            return argv.get(i + 1).cloned();
        }
        if let Some(v) = a.strip_prefix("--config-file=") {
            return Some(v.to_string());
        }
    }
    None
}

#[test]
fn outputs_flow_through_inputs_into_downstream_config() {
    let mut ws = network_and_web(&[], &[("vpc_id", "vpc_id"), ("subnets", "subnets")]);
    ws.fake_outputs(
        "network",
        json!({"vpc_id": "vpc-0abc123", "subnets": ["subnet-a", "subnet-b"]}),
    );
    // The fake refuses (exit 2) unless web's config holds exactly these values.
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        r#"{"web:vpc_id":"vpc-0abc123","web:subnets":["subnet-a","subnet-b"]}"#,
    );

    ws.strata_ok(&["up"]);

    let web = the_up(&ws, 0, "web");
    assert_eq!(web["exit_code"], 0);
    assert_eq!(web["config"]["web:vpc_id"], "vpc-0abc123", "{web:#}");
    assert_eq!(
        web["config"]["web:subnets"],
        json!(["subnet-a", "subnet-b"])
    );
    // The shared stack config reaches web too.
    assert_eq!(web["config"]["test:region"], "eu-north-1");
    assert_eq!(web["config"]["kubernetes:infra_type"], "test");

    // web ran with the per-project config file; network with the shared one.
    let file = config_file_arg(&web).expect("web's up has --config-file");
    let expected = ws.path(".strata/dev/config/apps_2fweb.yaml");
    assert_eq!(
        std::fs::canonicalize(&file).unwrap(),
        std::fs::canonicalize(&expected).unwrap()
    );
    let per_project: serde_yaml::Value =
        serde_yaml::from_str(&ws.read(".strata/dev/config/apps_2fweb.yaml")).unwrap();
    assert_eq!(
        per_project["config"]["web:vpc_id"].as_str(),
        Some("vpc-0abc123")
    );
    assert_eq!(
        per_project["config"]["test:region"].as_str(),
        Some("eu-north-1")
    );
    // network, with no inputs, runs with its own copy too: Pulumi never writes the shared
    // file (see `per_project_config_salts`).
    let network = the_up(&ws, 0, "network");
    let own = config_file_arg(&network).expect("network's up has --config-file");
    assert_eq!(
        std::fs::canonicalize(&own).unwrap(),
        std::fs::canonicalize(ws.path(".strata/dev/config/base_2fnetwork.yaml")).unwrap()
    );
    // The inputs never leak into the shared stack config.
    let shared_text = ws.read("config/pulumi/Pulumi.dev.yaml");
    assert!(!shared_text.contains("vpc-0abc123"), "{shared_text}");
    assert!(!shared_text.contains("web:vpc_id"), "{shared_text}");
}

/// The salt of each project's copy of the stack config. Pulumi writes one into the file
/// `--config-file` names when it has none; strata gives each project its own copy, so
/// on a fresh stack each copy gets its own salt (no two processes write one file) and
/// keeps it. Once the shared file has a salt (its `secure:` values are encrypted with
/// it), every copy carries that one.
#[test]
fn per_project_config_salts() {
    let ws = network_and_web(&[], &[("vpc_id", "vpc_id")]);
    let salt_of = |rel: &str| -> Option<String> {
        let doc: serde_yaml::Value = serde_yaml::from_str(&ws.read(rel)).unwrap();
        doc.get("encryptionsalt")
            .and_then(|v| v.as_str())
            .map(String::from)
    };
    const WEB_COPY: &str = ".strata/dev/config/apps_2fweb.yaml";
    const NET_COPY: &str = ".strata/dev/config/base_2fnetwork.yaml";
    ws.strata_ok(&["up"]);
    assert_eq!(salt_of("config/pulumi/Pulumi.dev.yaml"), None);
    let web = salt_of(WEB_COPY).expect("pulumi wrote a salt into web's copy");
    let net = salt_of(NET_COPY).expect("pulumi wrote a salt into network's copy");
    // And each stays the same on the next run.
    ws.strata_ok(&["up"]);
    assert_eq!(salt_of(WEB_COPY).as_deref(), Some(web.as_str()));
    assert_eq!(salt_of(NET_COPY).as_deref(), Some(net.as_str()));

    // A shared file with a salt of its own: every copy takes it.
    let shared = ws.read("config/pulumi/Pulumi.dev.yaml");
    ws.write(
        "config/pulumi/Pulumi.dev.yaml",
        &format!("encryptionsalt: {web}\n{shared}"),
    );
    ws.strata_ok(&["up"]);
    assert_eq!(salt_of(WEB_COPY).as_deref(), Some(web.as_str()));
    assert_eq!(salt_of(NET_COPY).as_deref(), Some(web.as_str()));
}

#[test]
fn command_project_gets_inputs_as_env_vars_and_json_file() {
    let mut ws = workspace(
        "infrastructure:\n  - path: base/network\n  - path: tools/report\n    inputs:\n      report:vpc: base/network:vpc_id\n      report:subnets: base/network:subnets\n",
    );
    ws.pulumi_project("base/network", "network", NETWORK);
    let up = format!(
        "printf '%s' \"$STRATA_INPUT_REPORT_VPC\" > {}; cp \"$STRATA_INPUTS_FILE\" {}",
        ws.path("env-vpc.txt").display(),
        ws.path("inputs-copy.json").display()
    );
    ws.command_project("tools/report", &up, "true");
    ws.fake_outputs(
        "network",
        json!({"vpc_id": "vpc-77", "subnets": ["s-1", "s-2"]}),
    );

    ws.strata_ok(&["up"]);
    assert_eq!(ws.read("env-vpc.txt"), "vpc-77");
    let inputs: Value = serde_json::from_str(&ws.read("inputs-copy.json")).unwrap();
    assert_eq!(inputs["report:vpc"], "vpc-77", "{inputs}");
    assert_eq!(inputs["report:subnets"], json!(["s-1", "s-2"]));
}

/// A project without inputs still gets a readable `{}` at $STRATA_INPUTS_FILE, and a
/// project that writes no outputs is recorded with none.
#[test]
fn command_project_without_inputs_reads_an_empty_object() {
    let ws = workspace("infrastructure:\n  - path: tools/a\n  - path: tools/b\n");
    let copy = |n: &str| {
        format!(
            "cp \"$STRATA_INPUTS_FILE\" {}",
            ws.path(&format!("inputs-{n}.json")).display()
        )
    };
    ws.command_project("tools/a", &copy("a"), "true");
    ws.command_project("tools/b", &copy("b"), "true");
    for _ in 0..2 {
        ws.strata_ok(&["up"]);
        for n in ["a", "b"] {
            let v: Value = serde_json::from_str(&ws.read(&format!("inputs-{n}.json"))).unwrap();
            assert_eq!(v, json!({}));
        }
        let v: Value =
            serde_json::from_str(&ws.read(".strata/dev/outputs/tools_2fa.json")).unwrap();
        assert_eq!(v, json!({}));
    }
}

#[test]
fn command_project_outputs_flow_into_a_pulumi_project_also_piecemeal() {
    let mut ws = workspace(
        "infrastructure:\n  - path: tools/image\n  - path: apps/web\n    inputs:\n      web:vpc_id: tools/image:tag\n",
    );
    ws.command_project(
        "tools/image",
        "printf '{\"tag\":\"img-1.2.3\"}' > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    ws.pulumi_project("apps/web", "web", WEB);
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_WEB",
        r#"{"web:vpc_id":"img-1.2.3"}"#,
    );
    ws.strata_ok(&["up"]);
    assert_eq!(the_up(&ws, 0, "web")["config"]["web:vpc_id"], "img-1.2.3");
    // The outputs the project wrote are kept, private.
    {
        use std::os::unix::fs::PermissionsExt;
        let kept = ws.path(".strata/dev/outputs/tools_2fimage.json");
        let v: Value =
            serde_json::from_str(&ws.read(".strata/dev/outputs/tools_2fimage.json")).unwrap();
        assert_eq!(v["tag"], "img-1.2.3");
        let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "outputs are private");
    }

    // Only web: the command project's outputs are remembered from its last up.
    let since = ws.calls().len();
    ws.strata_ok(&["up", "--project", "apps/web"]);
    assert_eq!(
        the_up(&ws, since, "web")["config"]["web:vpc_id"],
        "img-1.2.3"
    );
}

/// A command project's kept outputs are written again only when they changed: a no-op
/// `up` leaves the file as it was (its time too), a changed output replaces it.
#[test]
fn kept_outputs_are_rewritten_only_when_they_change() {
    let ws = workspace("infrastructure:\n  - path: tools/image\n");
    let tag = ws.path("tag.txt");
    std::fs::write(&tag, "v1").unwrap();
    ws.command_project(
        "tools/image",
        &format!(
            "printf '{{\"tag\":\"%s\"}}' \"$(cat {})\" > \"$STRATA_OUTPUTS_FILE\"",
            tag.display()
        ),
        "true",
    );
    ws.strata_ok(&["up"]);
    let kept = ws.path(".strata/dev/outputs/tools_2fimage.json");
    let long_ago = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
    let set_old = || {
        std::fs::File::options()
            .write(true)
            .open(&kept)
            .unwrap()
            .set_modified(long_ago)
            .unwrap()
    };
    let modified = || std::fs::metadata(&kept).unwrap().modified().unwrap();
    set_old();
    ws.strata_ok(&["up"]);
    assert_eq!(modified(), long_ago, "unchanged outputs were written again");
    std::fs::write(&tag, "v2").unwrap();
    ws.strata_ok(&["up"]);
    assert_ne!(modified(), long_ago);
    let v: Value =
        serde_json::from_str(&ws.read(".strata/dev/outputs/tools_2fimage.json")).unwrap();
    assert_eq!(v["tag"], "v2");
}
