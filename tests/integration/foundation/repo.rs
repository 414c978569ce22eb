//! The workspace this repository ships: its profiles' order, formats and validation,
//! run on a copy that ignores what a user's run left in the clone.

use std::path::PathBuf;

use super::*;

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
    let ns = "kubernetes/nginx/ingress-controller-namespace";
    let creds = "kubernetes/digitalocean/container-registry-credentials";
    let ic = "kubernetes/nginx/ingress-controller";
    let dns = "kubernetes/digitalocean/dns-record";
    assert_right_after(&j, ns, creds);
    assert_right_after(&j, ic, dns);
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
    assert_right_after(&j, "utility/kic-image-build", hc);
    let creds = "kubernetes/linode/container-registry-credentials";
    assert_right_after(&j, "kubernetes/nginx/ingress-controller-namespace", creds);
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
