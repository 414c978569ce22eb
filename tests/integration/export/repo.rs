//! The profiles this repository ships export to every format.

use super::argo::argo_graph;
use super::github_actions::{assert_gha_follows, gha_command};
use super::*;

#[test]
fn repo_aws_profile_exports_to_every_format() {
    let plan = shown(&repo(&[
        "-p", "aws", "-s", "dev", "show", "--format", "json",
    ]));
    assert!(plan.needs.contains_key("@secrets"), "aws has secrets");

    let r = repo(&[
        "-p",
        "aws",
        "-s",
        "dev",
        "export",
        "--format",
        "github-actions",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_header(&r.stdout, "github-actions", "aws");
    let doc = yaml(&r.stdout);
    assert_gha_follows(&doc, &plan);
    assert_eq!(
        gha_command(&doc, "kubernetes/applications/sirius"),
        "strata up --provider aws --stack \"$PULUMI_STACK\" --project kubernetes/applications/sirius --non-interactive"
    );

    let r = repo(&["-p", "aws", "-s", "dev", "export", "--format", "argo"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_header(&r.stdout, "argo", "aws");
    let (order, graph) = argo_graph(&yaml(&r.stdout));
    assert_eq!(order, plan.order_without_secrets());
    assert_eq!(graph, plan.bridged());

    // The operator runs Pulumi programs only; aws builds the ingress controller image
    // with command projects: they are left out and named, the rest is exported.
    let commands: Vec<&String> = plan
        .kind
        .iter()
        .filter(|(_, k)| k.as_str() == "command")
        .map(|(p, _)| p)
        .collect();
    assert!(!commands.is_empty());
    let r = repo(&["-p", "aws", "-s", "dev", "export", "--format", "pko"]);
    assert_eq!(r.code, 0, "{r:?}");
    for c in commands {
        assert!(r.stderr.contains(c.as_str()), "stderr lacks {c}\n{r:?}");
    }
}

#[test]
fn repo_profiles_all_export_to_github_actions_and_argo() {
    for provider in ["aws", "do", "linode", "kubeconfig", "local"] {
        let plan = shown(&repo(&[
            "-p", provider, "-s", "dev", "show", "--format", "json",
        ]));
        for format in ["github-actions", "argo"] {
            let r = repo(&["-p", provider, "-s", "dev", "export", "--format", format]);
            assert_eq!(r.code, 0, "{provider} {format}\n{r:?}");
            let doc = yaml(&r.stdout);
            if format == "argo" {
                let (_, graph) = argo_graph(&doc);
                assert_eq!(graph, plan.bridged(), "{provider} {format}");
            } else {
                assert_gha_follows(&doc, &plan);
            }
        }
    }
}
