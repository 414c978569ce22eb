//! What strata writes for other tools, checked with those tools when they are installed
//! (issue 13): graphviz renders `show --format dot`, the real Mermaid parser reads
//! `show --format mermaid`, kubectl reads a merged kubeconfig. A test whose tool is
//! absent fails under `CI=true` (with the install hint); elsewhere it says what it
//! skipped and passes. `scripts/install-tools.sh` installs them all.

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

#[test]
fn dot_renders_with_graphviz_whatever_the_project_names() {
    let ws = keyword_workspace();
    let r = ws.run_ok("show", &["--format", "dot"]);
    let quoted = [
        "\"node\"",
        "\"edge\"",
        "\"graph\"",
        "\"strict\"",
        "\"x-y\"",
        "\"x/y\"",
    ];
    r.expect_stdout(&quoted);
    assert!(r.stdout.contains("rank=same"), "{}", r.stdout);
    let Some(svg) = dot_svg(&ws, &r.stdout) else {
        return;
    };
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
    check_mermaid(&ws, &r.stdout);
}

/// Exports the shipped profile `p` in `format` to `<dir>/<p>.yml`; asserts exit 0.
fn export_shipped(dir: &Path, p: &str, format: &str) -> (std::path::PathBuf, Run) {
    export_shipped_with(dir, p, &["--format", format])
}

/// Exports the shipped profile `p` with `args` to `<dir>/<p>.yml`; asserts exit 0.
fn export_shipped_with(dir: &Path, p: &str, args: &[&str]) -> (std::path::PathBuf, Run) {
    let f = dir.join(format!("{p}.yml"));
    let mut all = vec!["export", "-p", p, "-s", "dev"];
    all.extend(args);
    all.extend(["-o", f.to_str().unwrap()]);
    let r = repo(&all);
    assert_eq!(r.code, 0, "{p} {args:?}: {r:?}");
    (f, r)
}

/// The shipped profiles: every `providers/*.yaml`.
fn shipped_profiles() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("providers");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".yaml").map(String::from)
        })
        .collect();
    names.sort();
    assert!(names.len() >= 5, "{names:?}");
    names
}

/// Asserts that actionlint (with shellcheck on each `run:` script, when it is on PATH)
/// finds nothing in the workflow file `f`.
pub(crate) fn actionlint_passes(actionlint: &Path, f: &Path, what: &str) {
    let out = Command::new(actionlint)
        .arg("-no-color")
        .arg(f)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{what}: actionlint: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// actionlint, and shellcheck which it runs, or `None` (skipped) outside CI.
pub(crate) fn require_actionlint() -> Option<std::path::PathBuf> {
    let actionlint = require_shared_tool("actionlint");
    // actionlint runs shellcheck on each `run:` script when it is on PATH.
    if actionlint.is_some() {
        require_tool(
            "shellcheck",
            &format!("apt-get install shellcheck, which actionlint runs; {INSTALL_TOOLS}"),
        );
    }
    actionlint
}

/// Every shipped profile's GitHub Actions workflow passes actionlint (with shellcheck
/// checking each `run:` script when it is installed).
#[test]
fn every_shipped_workflow_passes_actionlint() {
    let actionlint = require_actionlint();
    let dir = tempfile::tempdir().unwrap();
    for p in ["aws", "do", "linode", "kubeconfig", "local"] {
        let (f, _) = export_shipped(dir.path(), p, "github-actions");
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(text.contains("build-strata"), "{p}: built once");
        assert_eq!(
            text.matches("cargo install").count(),
            2,
            "{p}: one build (step and header): {text}"
        );
        if let Some(actionlint) = &actionlint {
            actionlint_passes(actionlint, &f, p);
        }
    }
}

/// Every shipped profile's review/apply workflow (`--review-apply`, issue 24) passes
/// actionlint with shellcheck: a pull-request job that saves the bundle, a push job that
/// applies exactly that bundle and nothing else.
#[test]
fn every_shipped_review_apply_workflow_passes_actionlint() {
    let actionlint = require_actionlint();
    let dir = tempfile::tempdir().unwrap();
    for p in shipped_profiles() {
        let (f, _) = export_shipped_with(
            dir.path(),
            &p,
            &["--format", "github-actions", "--review-apply"],
        );
        let text = std::fs::read_to_string(&f).unwrap();
        let doc: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        let on = doc["on"].as_mapping().unwrap();
        assert_eq!(on.len(), 2, "{p}: pull_request and push: {text}");
        let runs: Vec<&str> = ["preview", "apply"]
            .iter()
            .flat_map(|job| doc["jobs"][job]["steps"].as_sequence().unwrap())
            .filter_map(|s| s["run"].as_str())
            .filter(|r| r.starts_with("strata "))
            .collect();
        // `do` is a shell keyword: quoted.
        let word = if p == "do" {
            "'do'".to_string()
        } else {
            p.clone()
        };
        assert_eq!(
            runs,
            [
                format!(
                    "strata preview --provider {word} --stack dev --save-plan strata-plan --summary-file strata-preview.md --non-interactive"
                ),
                format!(
                    "strata up --provider {word} --stack dev --plan strata-plan --non-interactive"
                ),
            ],
            "{p}"
        );
        if let Some(actionlint) = &actionlint {
            actionlint_passes(actionlint, &f, &format!("{p} --review-apply"));
        }
    }
}

/// Validates each `(schema file under docs/schema, file name, text)` against its published
/// schema with the real `jsonschema` module (a `.jsonl` file line by line), the text
/// written into the workspace first; skipped (outside CI) like [`python_check`].
pub(crate) fn assert_follows_schemas(ws: &crate::support::Ws, files: &[(&str, &str, &str)]) {
    let schemas = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema");
    for (schema, name, text) in files {
        let data = ws.path(name);
        std::fs::write(&data, text).unwrap();
        let schema = schemas.join(schema);
        let Some((ok, said)) = python_check("validate_schema.py", &[&schema, &data]) else {
            return;
        };
        assert!(ok, "{name} against {}: {said}", schema.display());
    }
}

/// The JSON events of `run` and the JSON `report` follow their v2 schemas.
pub(crate) fn assert_run_follows_schemas(ws: &Ws, run: &Run, report: &Run) {
    assert_follows_schemas(
        ws,
        &[
            ("events.v2.json", "events.jsonl", &run.stdout),
            ("report.v2.json", "report.json", &report.stdout),
        ],
    );
}

/// Runs `tests/support/<script>` with python3 on `args`; `None` (and says why) when the
/// validator cannot run here (no python3, no jsonschema/PyYAML, no shared tools), which
/// fails under `CI=true`.
pub(crate) fn python_check(script: &str, args: &[&Path]) -> Option<(bool, String)> {
    if !require_python3() {
        return None;
    }
    for a in args {
        if !require_file(a, SHARED_TOOLS) {
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
        missing(
            "python3 with the modules jsonschema and yaml",
            &format!("is missing: {}", text.trim().trim_start_matches("skip: ")),
            &format!(
                "apt-get install python3-jsonschema python3-yaml, or pip install jsonschema PyYAML; {INSTALL_TOOLS}"
            ),
        );
        return None;
    }
    Some((out.status.success(), text))
}

/// Every shipped profile with Pulumi projects exports to PKO Stacks that pass the real
/// CRD (schema and the 42-character name rule); command projects are left out, listed
/// in the header and on stderr, and bridged; the export exits 0.
#[test]
fn every_shipped_pko_export_passes_the_stack_crd() {
    let dir = tempfile::tempdir().unwrap();
    for p in ["aws", "do", "linode", "kubeconfig"] {
        let (f, r) = export_shipped(dir.path(), p, "pko");
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
        let (f, _) = export_shipped(dir.path(), p, "argo");
        if let Some((ok, out)) =
            python_check("validate_argo.py", &[&shared_tool("argo-schema.json"), &f])
        {
            assert!(ok, "{p}: {out}");
        }
    }
}

/// Runs `strata ARGS` in `ws` with `stdin` piped in.
fn strata_with_stdin(ws: &Ws, args: &[&str], stdin: &str) -> (i32, String) {
    let r = run_with_stdin(ws.command(args), stdin);
    (r.code, format!("{}{}", r.stdout, r.stderr))
}

/// A team's store: every write encrypts to the writer and to every recipient of
/// `config/secrets/<stack>.recipients`, so a teammate (another age identity, or an SSH
/// key) can read it with the `age` CLI, and a store the `age` CLI wrote is read by strata.
#[test]
fn age_team_stores_interoperate_with_the_age_cli() {
    let age = format!("apt-get install age; {INSTALL_TOOLS}");
    if !require_tool("age", &age)
        || !require_tool("age-keygen", &age)
        || !require_tool(
            "ssh-keygen",
            &format!("apt-get install openssh-client; {INSTALL_TOOLS}"),
        )
    {
        return;
    }
    let mut ws = Ws::new();
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: a\n"));
    ws.command_project("a", "true", "true");
    let keygen = |name: &str| -> String {
        let f = ws.path(name);
        let out = Command::new("age-keygen")
            .arg("-o")
            .arg(&f)
            .output()
            .unwrap();
        assert!(out.status.success());
        let text = std::fs::read_to_string(&f).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("# public key: "))
            .unwrap()
            .to_string()
    };
    let _mine = keygen("me.txt");
    let theirs = keygen("teammate.txt");
    let ssh_key = ws.path("id_ed25519");
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&ssh_key)
        .status()
        .unwrap();
    assert!(st.success());
    let ssh_pub = std::fs::read_to_string(ws.path("id_ed25519.pub")).unwrap();
    ws.write(
        "config/secrets/dev.recipients",
        &format!("# the team\n{theirs}\n{}", ssh_pub.trim()),
    );
    ws.set_env("STRATA_AGE_IDENTITY", ws.path("me.txt").to_str().unwrap());
    let (code, out) = strata_with_stdin(
        &ws,
        &["secrets", "set", "t:token", "-s", "dev", "-p", "t"],
        "team-value-1\n",
    );
    assert_eq!(code, 0, "{out}");
    let store = ws.path("config/secrets/dev.age");
    // The teammate's age identity and the SSH key both open it with the age CLI.
    for id in [ws.path("teammate.txt"), ssh_key.clone()] {
        let opened = stdout_of(Command::new("age").args(["-d", "-i"]).arg(&id).arg(&store));
        assert!(opened.contains("team-value-1"));
    }
    // Written again with the SSH key: the file's recipients are all kept.
    ws.set_env("STRATA_AGE_IDENTITY", ssh_key.to_str().unwrap());
    let (code, out) = strata_with_stdin(
        &ws,
        &["secrets", "set", "t:other", "-s", "dev", "-p", "t"],
        "team-value-2\n",
    );
    assert_eq!(code, 0, "{out}");
    let out = Command::new("age")
        .arg("-d")
        .arg("-i")
        .arg(ws.path("teammate.txt"))
        .arg(&store)
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("team-value-2"),
        "the teammate was kept"
    );
    // A store the age CLI wrote (to the recipients file) is read by strata.
    let plain = ws.path("plain.json");
    std::fs::write(&plain, r#"{"t:token":"from-age-cli"}"#).unwrap();
    let st = Command::new("age")
        .args(["-a", "-R"])
        .arg(ws.path("config/secrets/dev.recipients"))
        .arg("-o")
        .arg(&store)
        .arg(&plain)
        .status()
        .unwrap();
    assert!(st.success());
    ws.set_env(
        "STRATA_AGE_IDENTITY",
        ws.path("teammate.txt").to_str().unwrap(),
    );
    let r = ws.strata(&["secrets", "list", "-s", "dev", "-p", "t"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("t:token"), "{r:?}");
}

/// The kubeconfig hook's result is a kubeconfig kubectl reads: two stacks' generated
/// kubeconfigs (pulumi-eks names: cluster `kubernetes`, user `aws`) and the user's own
/// entries all survive, and the current context is the last hook's.
#[test]
fn merged_kubeconfigs_read_back_with_kubectl() {
    let eks = |server: &str| {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: kubernetes\n  cluster: {{server: {server}}}\nusers:\n- name: aws\n  user: {{token: t}}\ncontexts:\n- name: aws\n  context: {{cluster: kubernetes, user: aws}}\ncurrent-context: aws\n"
        )
    };
    let ws = Ws::new();
    ws.write("home/.kube/config", &eks("https://mine.example"));
    for stack in ["dev", "prod"] {
        ws.profile(
            "t",
            &format!("{HEAD}infrastructure:\n  - path: eks\n    on_success:\n      - kubeconfig: {{ output: kubeconfig }}\n"),
        );
        let outputs = serde_json::json!({ "kubeconfig": eks(&format!("https://{stack}.example")) });
        ws.write("projects/eks/outputs.json", &outputs.to_string());
        ws.command_project("eks", "cat outputs.json > \"$STRATA_OUTPUTS_FILE\"", "true");
        let r = ws.strata(&["up", "-p", "t", "-s", stack]);
        assert_eq!(r.code, 0, "{r:?}");
        std::fs::remove_file(ws.path("config/pulumi/environment")).ok();
    }
    let text = ws.read("home/.kube/config");
    assert!(
        text.contains("dev-eks") && text.contains("prod-eks"),
        "{text}"
    );
    if !require_tool(
        "kubectl",
        "scripts/install-tools.sh builds it (k8s.io/kubectl, from the Go module proxy): put the folder it prints first on PATH",
    ) {
        return;
    }
    let mut view = Command::new("kubectl");
    view.args(["config", "view", "-o", "json", "--kubeconfig"])
        .arg(ws.path("home/.kube/config"));
    let v: serde_json::Value = serde_json::from_str(&stdout_of(&mut view)).unwrap();
    let names = |k: &str| -> Vec<String> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names("clusters"), ["dev-eks", "kubernetes", "prod-eks"]);
    assert_eq!(names("users"), ["aws", "dev-eks", "prod-eks"]);
    assert_eq!(v["current-context"], "prod-eks");
}

/// `inputs:` reach each PKO Stack: a deployed upstream's output as literal
/// `spec.config`, a secret output through `spec.secretsRef`, an upstream not deployed
/// through `spec.configRef`; the export passes the CRD.
#[test]
fn pko_export_wires_inputs_into_stack_config() {
    let ws = Ws::with_profile(
        "infrastructure:\n  - path: vpc\n  - path: eks\n    inputs:\n      vpcId: vpc:value\n      token: vpc:token\n  - path: later\n    needs: []\n  - path: app\n    inputs:\n      where: later:value\n",
    );
    let body = "resources:\n  first:\n    type: fake:index:Thing\n    properties:\n      x: vpc-42\noutputs:\n  value: ${first.x}\n  token:\n    fn::secret: hunter22\n";
    ws.pulumi_project("vpc", "proj-vpc", body);
    ws.pulumi_project("eks", "proj-eks", "outputs:\n  ok: yes\n");
    ws.pulumi_project("later", "proj-later", body);
    ws.pulumi_project("app", "proj-app", "outputs:\n  ok: yes\n");
    ws.run_ok("up", &["--project", "vpc"]);
    ws.run_ok("export", &["--format", "pko", "-o", "stacks.yaml"]);
    let text = ws.read("stacks.yaml");
    assert!(
        !text.contains("hunter22"),
        "a secret never lands in an export: {text}"
    );
    let docs: Vec<serde_yaml::Value> = serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    let spec = |path: &str| {
        docs.iter()
            .find(|d| d["metadata"]["annotations"]["strata/path"].as_str() == Some(path))
            .unwrap_or_else(|| panic!("no Stack for {path}: {text}"))["spec"]
            .clone()
    };
    let eks = spec("eks");
    assert_eq!(eks["config"]["vpcId"].as_str(), Some("vpc-42"), "{text}");
    assert_eq!(
        eks["secretsRef"]["token"]["type"].as_str(),
        Some("Secret"),
        "{text}"
    );
    let app = spec("app");
    assert_eq!(
        app["configRef"]["where"]["name"].as_str(),
        Some("strata-dev-inputs"),
        "{text}"
    );
    // An output may be structured: PKO parses the ConfigMap value as JSON (issue 25).
    assert_eq!(
        app["configRef"]["where"]["json"].as_bool(),
        Some(true),
        "{text}"
    );
    assert!(
        text.contains("Create the ConfigMap `strata-dev-inputs`"),
        "{text}"
    );
    if let Some((ok, out)) = python_check(
        "validate_pko.py",
        &[
            &shared_tool("pulumi.com_stacks.yaml"),
            &ws.path("stacks.yaml"),
        ],
    ) {
        assert!(ok, "{out}");
    }
}
