//! Unit tests of adoption: what is found and skipped, the common folder, and the
//! in-place edits of `--update`.

use super::*;

use crate::workspace::profile::tests_support::files as repo;

fn rels(a: &Adoption) -> Vec<&str> {
    a.found.iter().map(|f| f.rel.as_str()).collect()
}

#[test]
fn finds_projects_at_any_depth_and_skips_caches_virtualenvs_and_build_output() {
    let d = repo(&[
        ("a/b/c/d/Pulumi.yml", "name: deep\nruntime: go\n"),
        ("x/Strata.yaml", "up: a\ndestroy: b\n"),
        (
            "x/node_modules/m/Pulumi.yaml",
            "name: no1\nruntime: nodejs\n",
        ),
        ("x/.venv/Pulumi.yaml", "name: no2\nruntime: python\n"),
        ("x/env/pyvenv.cfg", "home = /usr\n"),
        ("x/env/Pulumi.yaml", "name: no3\nruntime: python\n"),
        ("x/target/Pulumi.yaml", "name: no4\nruntime: yaml\n"),
        ("x/bin/Pulumi.yaml", "name: no5\nruntime: yaml\n"),
        ("x/dist/Pulumi.yaml", "name: no6\nruntime: yaml\n"),
        (".git/Pulumi.yaml", "name: no7\nruntime: yaml\n"),
        ("bad/Pulumi.yaml", "runtime: yaml\n"),
    ]);
    let a = Adoption::survey(d.path(), "main");
    assert_eq!(rels(&a), ["a/b/c/d", "x"]);
    assert_eq!(a.projects_dir, ".");
    assert!(
        a.problems
            .iter()
            .any(|p| p.contains("bad/Pulumi.yaml") && p.contains("no `name:`")),
        "{:?}",
        a.problems
    );
}

#[test]
fn the_projects_folder_is_the_longest_one_that_holds_them_all() {
    let d = repo(&[
        (
            "pulumi/python/infra/vpc/Pulumi.yaml",
            "name: vpc\nruntime: python\n",
        ),
        (
            "pulumi/python/kubernetes/app/Pulumi.yaml",
            "name: app\nruntime: python\n",
        ),
    ]);
    let a = Adoption::survey(d.path(), "main");
    assert_eq!(a.projects_dir, "pulumi/python");
    assert_eq!(a.entry_path("pulumi/python/infra/vpc"), "infra/vpc");
}

#[test]
fn a_reader_of_a_kubernetes_project_runs_in_the_kubernetes_stage() {
    let d = repo(&[
        (
            "k/Pulumi.yaml",
            "name: k\nruntime: yaml\nresources:\n  ns:\n    type: kubernetes:core/v1:Namespace\n",
        ),
        ("r/Pulumi.yaml", "name: r\nruntime: python\n"),
        (
            "r/__main__.py",
            "import pulumi\nx = pulumi.StackReference(\"organization/k/dev\")\n",
        ),
    ]);
    let a = Adoption::survey(d.path(), "main");
    assert_eq!(a.stage(Stage::Kubernetes), ["k", "r"]);
    assert_eq!(a.inferred.needs_of("r"), ["k"]);
}

#[test]
fn the_kubernetes_provider_is_seen_in_every_runtime() {
    let d = repo(&[
        ("py/Pulumi.yaml", "name: py\nruntime: python\n"),
        ("py/__main__.py", "import pulumi_kubernetes as k8s\n"),
        ("ts/Pulumi.yaml", "name: ts\nruntime: nodejs\n"),
        (
            "ts/index.ts",
            "import * as k8s from \"@pulumi/kubernetes\";\n",
        ),
        ("go/Pulumi.yaml", "name: go\nruntime: go\n"),
        (
            "go/main.go",
            "import corev1 \"github.com/pulumi/pulumi-kubernetes/sdk/v4/go/kubernetes/core/v1\"\n",
        ),
        (
            "yaml/Pulumi.yaml",
            "name: y\nruntime: yaml\nresources:\n  ns:\n    type: \"kubernetes:core/v1:Namespace\"\n",
        ),
        ("plain/Pulumi.yaml", "name: plain\nruntime: python\n"),
        ("plain/__main__.py", "import pulumi_aws\n"),
    ]);
    let a = Adoption::survey(d.path(), "main");
    assert_eq!(a.stage(Stage::Kubernetes), ["go", "py", "ts", "yaml"]);
    assert_eq!(a.stage(Stage::Infrastructure), ["plain"]);
}

/// The default stack is the one most projects have a config for, never one that looks
/// like production; a project whose own stack names hold the default one with a prefix
/// is mapped with `stack:`.
#[test]
fn the_default_stack_is_never_production_and_odd_stack_names_are_mapped() {
    let d = repo(&[
        ("a/Pulumi.yaml", "name: a\nruntime: yaml\n"),
        ("a/Pulumi.Production.yaml", "config: {}\n"),
        ("a/Pulumi.QA.yaml", "config: {}\n"),
        ("b/Pulumi.yaml", "name: b\nruntime: yaml\n"),
        ("b/Pulumi.Production.yaml", "config: {}\n"),
        ("b/Pulumi.QA.yaml", "config: {}\n"),
        ("c/Pulumi.yaml", "name: c\nruntime: yaml\n"),
        ("c/Pulumi.Production.yaml", "config: {}\n"),
        ("apps/Pulumi.yaml", "name: apps\nruntime: yaml\n"),
        ("apps/Pulumi.applications.QA.yaml", "config: {}\n"),
        ("apps/Pulumi.applications.Production.yaml", "config: {}\n"),
    ]);
    let a = Adoption::survey(d.path(), "main");
    assert_eq!(
        a.default_stack(),
        "QA",
        "Production is most common, and refused"
    );
    assert_eq!(
        a.stack_template("apps").as_deref(),
        Some("applications.${stack}")
    );
    assert_eq!(a.stack_template("a"), None);
    assert!(
        write::profile_text(&a).contains("  - path: apps\n    stack: \"applications.${stack}\"")
    );
    for prod in ["prod", "Production", "eu-prod", "prd", "live", "app.prod"] {
        assert!(crate::adopt::looks_like_production(prod), "{prod}");
    }
    for not in ["dev", "QA", "staging", "product-x-dev"] {
        assert!(!crate::adopt::looks_like_production(not), "{not}");
    }
    let only_prod = repo(&[
        ("a/Pulumi.yaml", "name: a\nruntime: yaml\n"),
        ("a/Pulumi.prod.yaml", "config: {}\n"),
    ]);
    assert_eq!(
        Adoption::survey(only_prod.path(), "main").default_stack(),
        "dev"
    );
}

#[test]
fn scalars_are_quoted_only_when_plain_yaml_would_misread_them() {
    assert_eq!(write::scalar("infra/aws/vpc"), "infra/aws/vpc");
    assert_eq!(write::scalar("."), ".");
    for odd in ["true", "1", "null", "a: b", "x #y", "-x", ""] {
        assert!(write::scalar(odd).starts_with('"'), "{odd}");
    }
}

const PROFILE: &str = "# my own header
description: mine
infra_type: main
projects: .
infrastructure:
  - path: net   # the network
    needs: []
  - path: gone
    # why gone exists
    needs: [net]
  - path: app
    description: edited by hand
    needs: [net, gone]   # keep this comment
    tags: [web]

# a comment before kubernetes
kubernetes:
  - path: k8s
    needs:
      - gone
      - app
";

#[test]
fn update_adds_new_projects_drops_vanished_ones_and_keeps_the_rest_of_the_text() {
    let d = repo(&[
        ("net/Pulumi.yaml", "name: net\nruntime: yaml\n"),
        ("app/Pulumi.yaml", "name: app\nruntime: yaml\n"),
        ("k8s/Pulumi.yaml", "name: k8s\nruntime: yaml\n"),
        ("new/Pulumi.yaml", "name: new\nruntime: python\n"),
        (
            "new/__main__.py",
            "import pulumi\npulumi.StackReference(\"organization/net/dev\")\n",
        ),
        ("providers/main.yaml", PROFILE),
    ]);
    let mut a = Adoption::survey(d.path(), "main");
    let file = d.path().join("providers/main.yaml");
    let u = update::update(&mut a, &file, PROFILE).unwrap();
    assert_eq!(u.added, ["new"]);
    assert_eq!(u.dropped, ["gone"]);
    let t = &u.text;
    for kept in [
        "# my own header\n",
        "  - path: net   # the network\n",
        "    description: edited by hand\n",
        "    needs: [net]   # keep this comment\n",
        "    tags: [web]\n",
        "# a comment before kubernetes\nkubernetes:\n",
        "    needs:\n      - app\n",
    ] {
        assert!(t.contains(kept), "lost {kept:?}:\n{t}");
    }
    assert!(!t.contains("gone"), "{t}");
    let new_at = t.find("  - path: new").expect(t);
    assert!(new_at < t.find("kubernetes:").unwrap(), "{t}");
    assert!(
        t[new_at..].starts_with("  - path: new\n    needs: [net]\n"),
        "{t}"
    );
    // The result is a profile strata loads, and a second update changes nothing.
    std::fs::write(&file, t).unwrap();
    crate::workspace::profile::load(&d.path().join("providers"), "main").unwrap();
    let again = update::update(&mut Adoption::survey(d.path(), "main"), &file, t).unwrap();
    assert_eq!(&again.text, t);
    assert!(again.added.is_empty() && again.dropped.is_empty());
}

/// A vanished project whose entry is in an `include:`d fragment is left for the user
/// (the fragment may serve other profiles); the profile's text is not touched for it.
#[test]
fn update_leaves_a_vanished_entry_of_a_fragment_to_the_user() {
    let profile = "description: d\ninfra_type: t\nprojects: .\ninfrastructure:\n  - include: common.yaml\n  - path: net\n    needs: []\n";
    let d = repo(&[
        ("net/Pulumi.yaml", "name: net\nruntime: yaml\n"),
        ("providers/common.yaml", "- path: old\n  needs: []\n"),
        ("providers/main.yaml", profile),
    ]);
    let mut a = Adoption::survey(d.path(), "main");
    let u = update::update(&mut a, &d.path().join("providers/main.yaml"), profile).unwrap();
    assert_eq!(u.in_fragments, ["old"]);
    assert!(u.dropped.is_empty() && u.added.is_empty());
    assert_eq!(u.text, profile);
}

/// A project whose stack name comes from its config: resolved through each stack
/// config it has; one whose stacks disagree is left for the user, saying so.
#[test]
fn config_named_references_resolve_through_each_stack_config() {
    let main = "import pulumi\nc = pulumi.Config()\nnet = pulumi.StackReference(c.require(\"netStack\"))\n";
    let d = repo(&[
        ("net/Pulumi.yaml", "name: network\nruntime: yaml\n"),
        ("net2/Pulumi.yaml", "name: network-two\nruntime: yaml\n"),
        ("app/Pulumi.yaml", "name: app\nruntime: python\n"),
        ("app/__main__.py", main),
        (
            "app/Pulumi.dev.yaml",
            "config:\n  netStack: acme/network/dev\n",
        ),
        (
            "app/Pulumi.prod.yaml",
            "config:\n  app:netStack: acme/network/prod\n",
        ),
        ("app/Pulumi.qa.yaml", "config:\n  other: 1\n"),
        ("split/Pulumi.yaml", "name: split\nruntime: python\n"),
        ("split/__main__.py", &main.replace("netStack", "s")),
        ("split/Pulumi.dev.yaml", "config:\n  s: acme/network/dev\n"),
        (
            "split/Pulumi.prod.yaml",
            "config:\n  s: acme/network-two/prod\n",
        ),
    ]);
    let a = Adoption::survey(d.path(), "main");
    assert_eq!(a.inferred.needs_of("app"), ["net"]);
    assert!(a.inferred.needs_of("split").is_empty());
    let u = &a.inferred.unknowns;
    assert_eq!(u.len(), 1, "{u:#?}");
    assert_eq!(u[0].at, "split/__main__.py:3");
    assert!(
        u[0].why
            .contains("another project in each stack (dev: net, prod: net2)"),
        "{}",
        u[0].why
    );
}

/// Helpers of the repository resolve, a name only one project fits is inferred (and
/// says so), the rest is left with why, and a C# project is named as not read.
#[test]
fn helpers_inferred_names_and_languages_not_read() {
    let d = repo(&[
        (
            "lib/refs.py",
            "import pulumi\nORG = \"acme\"\n\ndef ref(project):\n    return pulumi.StackReference(f\"{ORG}/{project}/{pulumi.get_stack()}\")\n",
        ),
        ("net/Pulumi.yaml", "name: network-east\nruntime: yaml\n"),
        ("db/Pulumi.yaml", "name: db\nruntime: yaml\n"),
        ("app/Pulumi.yaml", "name: app\nruntime: python\n"),
        (
            "app/__main__.py",
            "import pulumi\nfrom lib import refs\ndb = refs.ref(\"db\")\nn = pulumi.StackReference(f\"acme/network-{region}/dev\")\nx = pulumi.StackReference(name)\n",
        ),
        ("cs/Pulumi.yaml", "name: cs\nruntime: dotnet\n"),
        ("cs/Program.cs", "class P {}\n"),
    ]);
    let a = Adoption::survey(d.path(), "main");
    let edges = &a.inferred.edges;
    assert_eq!(edges.len(), 2, "{edges:#?}");
    assert_eq!(
        (edges[0].to.as_str(), edges[0].at.as_str()),
        ("db", "app/__main__.py:3")
    );
    assert_eq!(edges[0].via.as_deref(), Some("lib/refs.py:4 ref"));
    assert_eq!(edges[0].inferred, None);
    assert_eq!(edges[1].to, "net");
    assert!(
        edges[1]
            .inferred
            .as_deref()
            .is_some_and(|w| w.contains("network-*"))
    );
    let u = &a.inferred.unknowns;
    assert_eq!(u.len(), 1, "{u:#?}");
    assert_eq!(u[0].at, "app/__main__.py:5");
    assert_eq!(
        a.inferred.not_read,
        vec![("cs".to_string(), "runtime dotnet: C#".to_string())]
    );
}
