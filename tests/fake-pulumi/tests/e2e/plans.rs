//! Update plans (`preview --save-plan`, `up --plan`), as the real CLI v3.274.1 does them:
//! docs/research/pulumi-update-plans.md. No test sets PULUMI_EXPERIMENTAL (`cmd` clears
//! the environment): neither flag needs it.

use serde_json::{Value, json};
use std::process::Output;

use crate::support::*;

fn plan_file(ws: &Ws) -> Value {
    serde_json::from_str(&std::fs::read_to_string(ws.path("plan.json")).unwrap()).unwrap()
}

fn save_plan(ws: &Ws, project: &str) -> Output {
    let plan = ws.path("plan.json").display().to_string();
    let out = ws.ok(project, &["preview", "--save-plan", &plan]);
    assert!(
        text(&out.stderr).contains(&format!(
            "Update plan written to '{plan}'\nRun `pulumi up --plan='{plan}'` to constrain the \
             update to the operations planned by this preview"
        )),
        "{}",
        text(&out.stderr)
    );
    out
}

fn up_plan(ws: &Ws, project: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let plan = ws.path("plan.json").display().to_string();
    let mut a = vec!["up", "--yes", "--plan", &plan];
    a.extend(extra);
    ws.run(project, &a, env)
}

fn violations(evs: &[Value]) -> Vec<String> {
    evs.iter()
        .filter_map(|e| e.get("diagnosticEvent"))
        .filter(|d| d["severity"] == "error")
        .map(|d| d["message"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn save_plan_then_apply_it_twice() {
    let ws = Ws::new("plan");
    ws.ok("vpc", &["stack", "init"]);
    // A never-deployed stack: every step is a create.
    save_plan(&ws, "vpc");
    let plan = plan_file(&ws);
    let keys: Vec<&String> = plan.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["config", "manifest", "resourcePlans"]);
    assert_eq!(plan["manifest"]["version"], "v3.230.0");
    assert!(plan["manifest"]["magic"].as_str().unwrap().len() == 64);
    // The config file's values, as written (the stack's salt is not config).
    assert_eq!(plan["config"]["aws:region"], "us-west-2");
    assert!(
        plan["config"].get("vpc:cidr").is_none(),
        "no project defaults"
    );
    let rp = &plan["resourcePlans"];
    let net = &rp["urn:pulumi:dev::vpc::fake:index:Vpc::net"];
    assert_eq!(net["steps"], json!(["create"]));
    assert_eq!(net["goal"]["type"], "fake:index:Vpc");
    assert_eq!(net["goal"]["name"], "net");
    assert_eq!(net["goal"]["custom"], true);
    assert_eq!(
        net["goal"]["inputDiff"]["adds"],
        json!({"cidr": "10.0.0.0/16", "name": "vpc-dev"})
    );
    assert_eq!(
        net["goal"]["parent"],
        "urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev"
    );
    assert!(net["seed"].is_string());
    let stack = &rp["urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev"];
    assert_eq!(stack["goal"]["custom"], false);
    assert_eq!(stack["state"]["vpc_id"], "net-id");
    // Secrets are the stack's ciphertext, with Pulumi's signature.
    let token = &stack["state"]["token"];
    assert_eq!(
        token["4dabf18193072939515e22adb298388d"],
        "1b47061264138c4ac30d75fd1eb44270"
    );
    assert!(token["ciphertext"].as_str().unwrap().starts_with("v1:"));
    let raw = std::fs::read_to_string(ws.path("plan.json")).unwrap();
    assert!(!raw.contains("tok-dev"));
    assert!(raw.starts_with("{\n    \"manifest\": {\n") && raw.ends_with("}\n"));

    // strata's argv: --skip-preview --json.
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let evs = events(&out);
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"create": 3}));
    // Pulumi itself accepts the same plan again: a planned create allows a same.
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    let evs = events(&out);
    let summary = &evs[evs.len() - 2]["summaryEvent"];
    assert_eq!(summary["resourceChanges"], json!({"same": 3}));

    // `preview --json --save-plan`: the usual document, no note on stderr.
    let plan_path = ws.path("plan2.json").display().to_string();
    let out = ws.ok("vpc", &["preview", "--json", "--save-plan", &plan_path]);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["changeSummary"], json!({"same": 3}));
    assert_eq!(text(&out.stderr), "");
    let plan2: Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    assert_eq!(
        plan2["resourcePlans"]["urn:pulumi:dev::vpc::fake:index:Vpc::net"]["steps"],
        json!(["same"])
    );
    // --show-secrets writes them in plaintext form.
    ws.ok(
        "vpc",
        &["preview", "--show-secrets", "--save-plan", &plan_path],
    );
    let plan3: Value = serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    assert_eq!(
        plan3["resourcePlans"]["urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev"]["state"]["token"]
            ["plaintext"],
        "\"tok-dev\""
    );
    // A failed preview writes no plan.
    let failing = ws.path("failed.json").display().to_string();
    let out = ws.run(
        "vpc",
        &["preview", "--save-plan", &failing],
        &[("FAKE_PULUMI_FAIL_VPC", "preview")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(!ws.path("failed.json").exists());
}

#[test]
fn up_plan_refuses_a_code_or_config_change_and_applies_nothing() {
    let ws = Ws::new("plan-refuse");
    ws.ok("vpc", &["stack", "init"]);
    ws.ok("vpc", UP);
    save_plan(&ws, "vpc");
    let before = ws.state("vpc");

    // The program changed after the preview.
    let yaml = ws.path("vpc/Pulumi.yaml");
    std::fs::write(
        &yaml,
        VPC.replace("name: vpc-${pulumi.stack}", "name: vpcx-${pulumi.stack}"),
    )
    .unwrap();
    let want = "resource urn:pulumi:dev::vpc::fake:index:Vpc::net violates plan: \
                properties changed: =~name[{vpcx-dev}]";
    // Without --skip-preview the constrained preview fails: nothing on stderr, exit 1.
    let out = up_plan(&ws, "vpc", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains(&format!("error: {want}")));
    assert!(text(&out.stdout).starts_with("Previewing update (dev):"));
    assert!(!text(&out.stdout).contains("Updating (dev):"));
    assert_eq!(text(&out.stderr), "");
    // With strata's --skip-preview --json: an error diagnostic on the resource, no
    // resOpFailedEvent, no "update failed".
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&out);
    assert_eq!(violations(&evs), [format!("{want}\n")]);
    let diag = evs.iter().find_map(|e| e.get("diagnosticEvent")).unwrap();
    assert_eq!(diag["urn"], "urn:pulumi:dev::vpc::fake:index:Vpc::net");
    assert!(!evs.iter().any(|e| e.get("resOpFailedEvent").is_some()));
    assert!(evs.last().unwrap().get("cancelEvent").is_some());
    assert_eq!(text(&out.stderr), "");
    // `up --json --plan` without --skip-preview: only the preview's document.
    let out = up_plan(&ws, "vpc", &["--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let diags = doc["diagnostics"].as_array().unwrap();
    assert!(
        diags
            .iter()
            .any(|d| d["severity"] == "error" && d["message"] == format!("error: {want}\n"))
    );
    // Nothing was applied (the stack resource's timestamp and ciphertext may change).
    let custom = |st: &Value| -> Vec<Value> {
        st["checkpoint"]["latest"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["custom"] == true)
            .cloned()
            .collect()
    };
    assert_eq!(custom(&ws.state("vpc")), custom(&before));
    let outs = ws.outputs("vpc", &["--show-secrets"]);
    assert_eq!(
        outs,
        json!({"vpc_id": "net-id", "region": "us-west-2", "token": "tok-dev"})
    );
    std::fs::write(&yaml, VPC).unwrap();

    // A stack config change that reaches a resource's inputs.
    let cfg = ws.path("stack.yaml");
    let orig = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, orig.replace("us-west-2", "eu-west-1")).unwrap();
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        violations(&events(&out)),
        [
            "resource urn:pulumi:dev::vpc::fake:index:Subnet::subnet violates plan: \
          properties changed: =~region[{eu-west-1}]\n"
        ]
    );
    // A config key no resource reads is not checked: the plan's config is informational.
    std::fs::write(
        &cfg,
        orig.replace("config:\n", "config:\n  vpc:unused: x\n"),
    )
    .unwrap();
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out.stdout));
    std::fs::write(&cfg, &orig).unwrap();

    // A resource gone from the program while the plan says same.
    std::fs::write(
        &yaml,
        VPC.replace(
            "  subnet:\n    type: fake:index:Subnet\n    properties:\n      vpcId: ${net.id}\n      region: ${aws:region}\n",
            "",
        )
        .replace("  region: ${subnet.region}\n", "  region: us-west-2\n"),
    )
    .unwrap();
    let out = up_plan(&ws, "vpc", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stdout).contains(
            "error: delete is not allowed by the plan: this resource is constrained to same"
        ),
        "{}",
        text(&out.stdout)
    );
    assert!(resources_in_state(&ws, "vpc").contains(&"subnet".to_string()));

    // With --skip-preview, the steps before a violating one are applied (as for real:
    // the update runs unchecked until a resource leaves the plan).
    std::fs::write(
        &yaml,
        VPC.replace("vpc-${pulumi.stack}", "vpc2-${pulumi.stack}"),
    )
    .unwrap();
    save_plan(&ws, "vpc");
    std::fs::write(&cfg, orig.replace("us-west-2", "eu-west-1")).unwrap();
    let out = up_plan(&ws, "vpc", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(violations(&events(&out))[0].contains("::subnet violates plan"));
    let net = custom(&ws.state("vpc"))
        .into_iter()
        .find(|r| r["id"] == "net-id")
        .unwrap();
    assert_eq!(net["inputs"]["name"], "vpc2-dev");
    // Without it, nothing is.
    std::fs::write(
        &yaml,
        VPC.replace("vpc-${pulumi.stack}", "vpc3-${pulumi.stack}"),
    )
    .unwrap();
    std::fs::write(&cfg, &orig).unwrap();
    save_plan(&ws, "vpc");
    std::fs::write(&cfg, orig.replace("us-west-2", "eu-west-1")).unwrap();
    let out = up_plan(&ws, "vpc", &[], &[]);
    assert_eq!(out.status.code(), Some(1));
    let net = custom(&ws.state("vpc"))
        .into_iter()
        .find(|r| r["id"] == "net-id")
        .unwrap();
    assert_eq!(net["inputs"]["name"], "vpc2-dev");
    std::fs::write(&cfg, &orig).unwrap();

    // A missing plan file: before the engine starts.
    let missing = ws.path("nope.json").display().to_string();
    let out = ws.run("vpc", &["up", "--yes", "--plan", &missing], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("error: open {missing}: no such file or directory\n")
    );
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn up_plan_and_upstream_outputs() {
    let ws = Ws::new("plan-upstream");
    ws.ok("vpc", &["stack", "init"]);
    ws.ok("vpc", UP);
    ws.ok("eks", &["stack", "init"]);
    ws.ok("eks", UP);
    save_plan(&ws, "eks");
    // StackReferences are not in plans.
    let plan = plan_file(&ws);
    assert!(
        plan["resourcePlans"]
            .get("urn:pulumi:dev::eks::pulumi:pulumi:StackReference::vpc")
            .is_none()
    );

    // An upstream output that only reaches a stack output: the real CLI fails the update
    // (exit 1) without any error message, and keeps the old outputs.
    let run = |env: &[(&str, &str)]| ws.run("vpc", UP, env);
    assert!(
        run(&[("FAKE_PULUMI_SECRET_OUTPUTS_VPC", r#"{"token":"t2"}"#)])
            .status
            .success()
    );
    let out = up_plan(&ws, "eks", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    let evs = events(&out);
    assert!(violations(&evs).is_empty(), "{evs:?}");
    assert_eq!(text(&out.stderr), "");
    let outs = ws.outputs("eks", &["--show-secrets"]);
    assert_eq!(outs["upstream_token"], "tok-dev");

    // An upstream output that reaches a resource's inputs: a violation naming it.
    assert!(
        run(&[("FAKE_PULUMI_OUTPUTS_VPC", r#"{"vpc_id":"vpc-2"}"#)])
            .status
            .success()
    );
    let out = up_plan(&ws, "eks", &["--skip-preview", "--json"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        violations(&events(&out)),
        [
            "resource urn:pulumi:dev::eks::fake:eks:Cluster::cluster violates plan: \
          properties changed: =~vpcId[{vpc-2}]\n"
        ]
    );
    let cluster = ws.state("eks")["checkpoint"]["latest"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["urn"] == "urn:pulumi:dev::eks::fake:eks:Cluster::cluster")
        .cloned()
        .unwrap();
    assert_eq!(cluster["inputs"]["vpcId"], "net-id");
}
