//! The `@secrets` step: the stack's secrets applied server-side into Kubernetes, shown
//! and summarised like a project, through a kubeconfig's exec credential plugin too.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::fake_kube::{self, FakeKube};
use super::*;

#[test]
fn secrets_step_applies_namespaces_and_secret_server_side() {
    let (kube, ws) = kube_lab();
    ws.strata_ok(&["up"]);
    // The kubeconfig hook of the infrastructure stage wrote the kubeconfig it used.
    let kc = ws.read("home/.kube/config");
    assert!(kc.contains(&kube.url()), "{kc}");

    assert_eq!(kube.namespaces(), ["apps", "monitoring"]);
    assert_eq!(
        kube.secret_data("monitoring", "strata-secrets").unwrap(),
        BTreeMap::from([("adminpass".to_string(), ADMIN.to_string())])
    );
    assert_eq!(
        kube.secret_data("apps", "strata-secrets").unwrap(),
        BTreeMap::from([
            ("api-key".to_string(), API.to_string()),
            ("db-password".to_string(), DB.to_string()),
        ])
    );
    let reqs = kube.requests();
    let patches: Vec<_> = reqs.iter().filter(|r| r.method == "PATCH").collect();
    assert!(!patches.is_empty(), "{reqs:?}");
    for p in &patches {
        assert_eq!(
            p.content_type.as_deref(),
            Some(fake_kube::APPLY_PATCH),
            "{p:?}"
        );
        assert_eq!(
            p.query.get("fieldManager").map(String::as_str),
            Some("strata"),
            "{p:?}"
        );
    }
    for path in [
        "/api/v1/namespaces/monitoring/secrets/strata-secrets",
        "/api/v1/namespaces/apps/secrets/strata-secrets",
    ] {
        assert!(
            patches.iter().any(|p| p.path == path),
            "no server-side apply of {path}: {reqs:?}"
        );
    }
    // The namespaces did not exist: each is created (a POST naming field manager
    // `strata`) when the apply of its Secret answers 404 for it, then applied again.
    let created: Vec<String> = reqs
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/api/v1/namespaces")
        .map(|r| r.json()["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(created, ["apps", "monitoring"], "{reqs:?}");
    let secret = kube.secret("apps", "strata-secrets").unwrap();
    assert_eq!(
        secret["metadata"]["managedFields"][0]["manager"],
        json!("strata")
    );

    // A second up changes nothing in the cluster.
    let objects = kube.objects();
    let r = ws.strata_ok(&["up"]);
    assert_eq!(kube.objects(), objects, "the second up changed the cluster");
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("[@secrets] succeeded"))
        .unwrap_or_else(|| panic!("{r:?}"));
    assert!(line.contains("unchanged"), "{line}");

    // A secret dropped from the profile is dropped from its Secret.
    ws.profile("lab", &db_profile());
    ws.strata_ok(&["up"]);
    assert_eq!(
        kube.secret_data("apps", "strata-secrets").unwrap(),
        BTreeMap::from([("db-password".to_string(), DB.to_string())])
    );
    // A namespace without secrets any more loses the Secret (the namespace stays).
    ws.profile("lab", &kube_profile(None, &[]));
    ws.strata_ok(&["up"]);
    assert!(
        kube.secret("apps", "strata-secrets").is_none(),
        "{:?}",
        kube.objects()
    );
    assert!(kube.namespaces().contains(&"apps".to_string()));
    assert_eq!(stored(&kube, "monitoring", "adminpass"), ADMIN);
    for r in kube.requests() {
        assert!(!r.body.contains(ADMIN) && !r.path.contains(ADMIN));
    }
}

#[test]
fn secrets_step_uses_the_profiles_secret_name() {
    let kube = FakeKube::start();
    let ws = kube_ws(&kube, Some("lab-credentials"));
    ws.strata_ok(&["up"]);
    assert_eq!(
        secret_value(&kube, "monitoring", "lab-credentials", "adminpass"),
        ADMIN
    );
    assert_eq!(
        secret_value(&kube, "apps", "lab-credentials", "db-password"),
        DB
    );
    assert!(kube.secret("monitoring", "strata-secrets").is_none());
    assert!(kube.secret("apps", "strata-secrets").is_none());
}

#[test]
fn show_and_the_run_summary_list_the_secrets_step_like_a_project() {
    let (_kube, ws) = kube_lab();

    let r = ws.strata_ok(&["show"]);
    assert!(r.stdout.contains("@secrets"), "{r:?}");
    let r = ws.strata_ok(&["show", "--format", "json"]);
    let plan: Value = serde_json::from_str(&r.stdout).unwrap();
    let order = strings(&plan["order"]);
    assert_eq!(order, ["infra/cluster", "@secrets", "k8s/app"], "{r:?}");
    assert!(
        plan["projects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["path"] == json!("@secrets")),
        "{r:?}"
    );

    // Human summary: a row for @secrets like the projects' rows.
    let r = ws.strata_ok(&["up"]);
    let header = r
        .stdout
        .lines()
        .position(|l| l.contains("project") && l.contains("status"))
        .unwrap_or_else(|| panic!("no summary table: {r:?}"));
    let rows: Vec<&str> = r.stdout.lines().skip(header + 1).collect();
    for name in ["infra/cluster", "@secrets", "k8s/app"] {
        assert!(
            rows.iter()
                .any(|l| l.trim_start().starts_with(name) && l.contains("succeeded")),
            "no summary row for {name}: {r:?}"
        );
    }

    // JSON events: started and finished like a project, counted in the run.
    let r = ws.strata_ok(&["--output", "json", "up"]);
    let events = r.events();
    assert!(
        event_of(&events, "project_started", "@secrets").is_some(),
        "{r:?}"
    );
    let fin = event_of(&events, "project_finished", "@secrets").unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(fin["status"], json!("succeeded"));
    let run = events
        .iter()
        .find(|e| e["event"] == json!("run_finished"))
        .unwrap();
    assert_eq!(run["counts"]["succeeded"], json!(3), "{run}");
}

/// EKS/GKE/AKS kubeconfigs authenticate through an exec plugin. The plugin runs with the
/// environment a project gets, so a credential kept only in the env file reaches it;
/// when it fails, the error names the plugin and shows its stderr.
#[test]
fn exec_credential_plugins_get_the_env_file_and_are_named_when_they_fail() {
    let kube = FakeKube::start();
    kube.api().require_token("tok-from-plugin");
    let mut ws = kube_ws(&kube, None);
    let plugin = ws.path("bin/fake-cloud-auth");
    std::fs::write(
        &plugin,
        "#!/bin/sh\nif [ -z \"$CLOUD_CRED_FOR_TEST\" ]; then echo \"fake-cloud-auth: no credentials (CLOUD_CRED_FOR_TEST is not set)\" >&2; exit 3; fi\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-from-plugin\"}}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let outputs = json!({ "kubeconfig": kube.exec_kubeconfig(&plugin) });
    ws.write(
        "projects/infra/cluster/outputs.json",
        &serde_json::to_string(&outputs).unwrap(),
    );
    // Without the credential: the plugin fails and is named, with its stderr.
    let r = ws.strata(&["up", "--stack", "dev"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.all().contains("fake-cloud-auth"), "{r:?}");
    assert!(r.all().contains("CLOUD_CRED_FOR_TEST is not set"), "{r:?}");
    // The credential only in the env file (not strata's own environment).
    ws.env_file("PULUMI_STACK=dev\nCLOUD_CRED_FOR_TEST=yes\n");
    ws.set_env("CLOUD_CRED_FOR_TEST", "");
    ws.strata_ok(&["up", "--stack", "dev"]);
    assert_eq!(
        kube.secret_data("monitoring", "strata-secrets")
            .unwrap_or_default()
            .get("adminpass")
            .map(String::as_str),
        Some(ADMIN)
    );
}
