//! What strata writes for other tools, checked with those tools when they are installed
//! (issue 13): graphviz renders `show --format dot`, the real Mermaid parser reads
//! `show --format mermaid`, kubectl reads a merged kubeconfig. A test whose tool is
//! absent says so and passes.

use std::path::Path;
use std::process::Command;

use crate::support::*;

/// Projects named after DOT and Mermaid keywords, and two whose paths differ only in a
/// separator.
fn keyword_workspace() -> Ws {
    let ws = Ws::new();
    let paths = [
        "node", "edge", "graph", "strict", "end", "class", "style", "x-y", "x/y", "subgraph",
    ];
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: node\n  - path: edge\n  - path: graph\n    needs: []\n  - path: strict\n    needs: [node, graph]\nkubernetes:\n  - path: end\n  - path: class\n  - path: style\n    needs: []\n  - path: x-y\n  - path: x/y\n  - path: subgraph\n"
        ),
    );
    for p in paths {
        ws.command_project(p, "true", "true");
    }
    ws
}

fn tool(name: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("skipped: `{name}` is not installed");
    }
    found
}

#[test]
fn dot_renders_with_graphviz_whatever_the_project_names() {
    let ws = keyword_workspace();
    let r = ws.strata(&["show", "-p", "t", "-s", "dev", "--format", "dot"]);
    assert_eq!(r.code, 0, "{r:?}");
    for p in [
        "\"node\"",
        "\"edge\"",
        "\"graph\"",
        "\"strict\"",
        "\"x-y\"",
        "\"x/y\"",
    ] {
        assert!(r.stdout.contains(p), "{p} quoted: {}", r.stdout);
    }
    assert!(r.stdout.contains("rank=same"), "{}", r.stdout);
    if !tool("dot") {
        return;
    }
    let f = ws.path("plan.dot");
    std::fs::write(&f, &r.stdout).unwrap();
    let out = Command::new("dot")
        .args(["-Tsvg"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "dot: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = String::from_utf8_lossy(&out.stdout);
    // Ten distinct nodes: no keyword was taken for syntax, x/y and x-y stayed apart.
    assert_eq!(svg.matches("class=\"node\"").count(), 10, "{svg}");
}

#[test]
fn mermaid_parses_with_the_real_mermaid_whatever_the_project_names() {
    let ws = keyword_workspace();
    let r = ws.strata(&["show", "-p", "t", "-s", "dev", "--format", "mermaid"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("---\ntitle: "), "{}", r.stdout);
    assert_eq!(
        r.stdout.matches("subgraph w").count(),
        6,
        "one subgraph per wave: {}",
        r.stdout
    );
    let validator =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/validate_mermaid.py");
    if !validator.is_file() {
        eprintln!("skipped: {} is absent", validator.display());
        return;
    }
    if !tool("chromium") || !tool("python3") {
        return;
    }
    let f = ws.path("plan.mmd");
    std::fs::write(&f, &r.stdout).unwrap();
    let out = Command::new("python3")
        .arg(&validator)
        .arg(&f)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("ok"),
        "mermaid: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every shipped profile's GitHub Actions workflow passes actionlint (with shellcheck
/// checking each `run:` script when it is installed).
#[test]
fn every_shipped_workflow_passes_actionlint() {
    let actionlint = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/tools/actionlint");
    let dir = tempfile::tempdir().unwrap();
    for p in ["aws", "do", "linode", "kubeconfig", "local"] {
        let f = dir.path().join(format!("{p}.yml"));
        let r = repo(&[
            "export",
            "-p",
            p,
            "-s",
            "dev",
            "--format",
            "github-actions",
            "-o",
            f.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{p}: {r:?}");
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(text.contains("build-strata"), "{p}: built once");
        assert_eq!(
            text.matches("cargo install").count(),
            2,
            "{p}: one build (step and header): {text}"
        );
        if !actionlint.is_file() {
            eprintln!("skipped: {} is absent", actionlint.display());
            continue;
        }
        let out = Command::new(&actionlint)
            .arg("-no-color")
            .arg(&f)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{p}: actionlint: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Runs `tests/support/<script>` with python3 on `args`; `None` (and says why) when the
/// validator cannot run here (no python3, no jsonschema/PyYAML, no shared tools).
fn python_check(script: &str, args: &[&Path]) -> Option<(bool, String)> {
    if !tool("python3") {
        return None;
    }
    for a in args {
        if !a.exists() {
            eprintln!("skipped: {} is absent", a.display());
            return None;
        }
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/support")
        .join(script);
    let out = Command::new("python3")
        .arg(path)
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.code() == Some(77) {
        eprintln!("skipped: {text}");
        return None;
    }
    Some((out.status.success(), text))
}

fn shared_tool(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/tools")
        .join(name)
}

/// Every shipped profile with Pulumi projects exports to PKO Stacks that pass the real
/// CRD (schema and the 42-character name rule); command projects are left out, listed
/// in the header and on stderr, and bridged; the export exits 0.
#[test]
fn every_shipped_pko_export_passes_the_stack_crd() {
    let dir = tempfile::tempdir().unwrap();
    for p in ["aws", "do", "linode", "kubeconfig"] {
        let f = dir.path().join(format!("{p}.yml"));
        let r = repo(&[
            "export",
            "-p",
            p,
            "-s",
            "dev",
            "--format",
            "pko",
            "-o",
            f.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{p}: {r:?}");
        let text = std::fs::read_to_string(&f).unwrap();
        if p != "kubeconfig" {
            assert!(
                text.contains("Left out: the command projects"),
                "{p}: {text}"
            );
            assert!(r.stderr.contains("utility/kic-image-build"), "{p}: {r:?}");
        }
        for line in text.lines().filter(|l| l.starts_with("  name: ")) {
            assert!(line.len() - "  name: ".len() <= 42, "{p}: {line}");
        }
        if let Some((ok, out)) = python_check(
            "validate_pko.py",
            &[&shared_tool("pulumi.com_stacks.yaml"), &f],
        ) {
            assert!(ok, "{p}: {out}");
        }
    }
}

/// Every shipped profile's Argo Workflow passes the Argo schema, strictly (no key the
/// schema does not list).
#[test]
fn every_shipped_argo_export_passes_the_workflow_schema() {
    let dir = tempfile::tempdir().unwrap();
    for p in ["aws", "do", "linode", "kubeconfig", "local"] {
        let f = dir.path().join(format!("{p}.yml"));
        let r = repo(&[
            "export",
            "-p",
            p,
            "-s",
            "dev",
            "--format",
            "argo",
            "-o",
            f.to_str().unwrap(),
        ]);
        assert_eq!(r.code, 0, "{p}: {r:?}");
        if let Some((ok, out)) =
            python_check("validate_argo.py", &[&shared_tool("argo-schema.json"), &f])
        {
            assert!(ok, "{p}: {out}");
        }
    }
}
