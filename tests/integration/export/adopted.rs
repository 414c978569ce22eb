//! `--format github-actions` in an adopted repository (issue 44): a platform repository
//! of Python, TypeScript, Go, C# and YAML projects with no Cargo.toml of strata's. The
//! export refuses until it is told where the runners get strata (`--strata-from`), then
//! installs strata from exactly that pinned source and each project's dependencies by its
//! runtime, in the project's folder, before `strata up`; actionlint (with shellcheck)
//! passes every form.

use serde_yaml::Value as Yaml;

use super::*;
use crate::handoff::{actionlint_passes, require_actionlint};

/// tests/fixtures/init/estate adopted with `strata init`, its one unresolved reference
/// declared, and the lock files a real repository commits.
fn adopted_estate() -> Ws {
    let ws = crate::init::repo_copy(&crate::init::fixture("estate"));
    let r = ws.strata(&["init"]);
    assert_eq!(r.code, 0, "{r:?}");
    crate::init::declare_reports_reads(&ws);
    ws.write("platform/dns/package.json", "{}\n");
    ws.write("platform/dns/package-lock.json", "{}\n");
    ws.write("platform/edge/package.json", "{}\n");
    ws.write("platform/edge/yarn.lock", "\n");
    ws.write("platform/network/requirements.txt", "pulumi>=3\n");
    ws.write("services/web/go.mod", "module acme/web\n\ngo 1.22\n");
    ws
}

/// The steps of the job that runs `path`: (uses or run, working-directory).
fn steps_of(doc: &Yaml, path: &str) -> Vec<(String, String)> {
    let jobs = doc["jobs"].as_mapping().expect("jobs");
    let job = jobs
        .values()
        .find(|j| j["name"].as_str() == Some(path))
        .unwrap_or_else(|| panic!("no job for {path}"));
    job["steps"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|s| {
            let what = s["uses"].as_str().or(s["run"].as_str()).unwrap_or_default();
            let wd = s["working-directory"].as_str().unwrap_or_default();
            (what.to_string(), wd.to_string())
        })
        .collect()
}

#[test]
fn an_adopted_repository_s_workflow_installs_strata_from_a_pinned_source_and_each_project_s_dependencies()
 {
    let ws = adopted_estate();
    // No strata source here, none given: refused, naming the option and its forms.
    let r = ws.strata(&["export", "-s", "dev", "--format", "github-actions"]);
    assert_eq!(r.code, 3, "{r:?}");
    for said in [
        "--strata-from",
        "crate:VERSION",
        "git:URL@REV",
        "url:URL#sha256=HEX",
    ] {
        assert!(r.stderr.contains(said), "no {said:?}: {r:?}");
    }
    assert!(r.stdout.is_empty(), "{r:?}");
    // `export -s dev --format FORMAT --strata-from SOURCE`, then `more`.
    let export_from = |format: &str, source: &str, more: &[&str]| {
        let mut args = vec![
            "export",
            "-s",
            "dev",
            "--format",
            format,
            "--strata-from",
            source,
        ];
        args.extend(more);
        ws.strata(&args)
    };
    // A source that is not pinned is refused before anything is read.
    let r = export_from("github-actions", "crate:latest", &[]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = export_from("argo", "crate:1.0.0", &[]);
    assert_eq!(r.code, 2, "{r:?}");

    let actionlint = require_actionlint();
    let sha = "0f".repeat(32);
    let sources = [
        (
            "crate:0.9.1".to_string(),
            "cargo install --locked strata --version 0.9.1 --root \"$RUNNER_TEMP/strata\"",
        ),
        (
            "git:https://github.com/acme/strata@v0.9.1".to_string(),
            "cargo install --locked --git https://github.com/acme/strata --tag v0.9.1 strata --root \"$RUNNER_TEMP/strata\"",
        ),
        (
            format!("url:https://example.com/strata-0.9.1-x86_64-linux.tar.gz#sha256={sha}"),
            "sha256sum --check --strict -",
        ),
    ];
    for (review_apply, (source, build)) in [false, true]
        .into_iter()
        .flat_map(|ra| sources.iter().map(move |s| (ra, s)))
    {
        let f = ws.path("wf.yml");
        let mut more = Vec::new();
        if review_apply {
            more.push("--review-apply");
        }
        more.extend(["-o", f.to_str().unwrap()]);
        let r = export_from("github-actions", source, &more);
        assert_eq!(r.code, 0, "{source}: {r:?}");
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(
            text.lines()
                .next()
                .unwrap()
                .contains(&format!("--strata-from {source} ")),
            "{text}"
        );
        assert!(!text.contains("--path ."), "{source}: {text}");
        assert!(
            !text.contains("infra_type"),
            "a profile without infra_type is named without one: {text}"
        );
        let doc = yaml(&text);
        let build_steps = doc["jobs"]["build-strata"]["steps"].as_sequence().unwrap();
        assert!(
            build_steps
                .iter()
                .any(|s| s["run"].as_str().is_some_and(|r| r.contains(build))),
            "{source}: {text}"
        );
        if let Some(actionlint) = &actionlint {
            actionlint_passes(actionlint, &f, source);
        }
        if review_apply {
            continue;
        }
        // Each project's job: its runtime, then its dependencies in its folder, then up.
        for (path, setup, install) in [
            ("platform/dns", "actions/setup-node@v4", Some("npm ci")),
            (
                "platform/edge",
                "actions/setup-node@v4",
                Some(
                    "command -v corepack >/dev/null || npm install --global corepack\ncorepack enable\nyarn install --frozen-lockfile",
                ),
            ),
            (
                "platform/network",
                "actions/setup-python@v5",
                Some("python -m pip install -r requirements.txt"),
            ),
            (
                "services/web",
                "actions/setup-go@v5",
                Some("go mod download"),
            ),
            (
                "services/billing",
                "actions/setup-dotnet@v4",
                Some("dotnet restore"),
            ),
            // No requirements.txt: Python set up, nothing to install.
            ("platform/cluster", "actions/setup-python@v5", None),
        ] {
            let steps = steps_of(&doc, path);
            let at = |what: &str| steps.iter().position(|(w, _)| w == what);
            let up = steps
                .iter()
                .position(|(w, _)| w.starts_with("strata up"))
                .unwrap();
            assert!(at(setup).is_some_and(|i| i < up), "{path}: {steps:?}");
            if let Some(install) = install {
                let i = at(install).unwrap_or_else(|| panic!("{path}: {steps:?}"));
                assert_eq!(steps[i].1, path, "{path}");
                assert!(i < up, "{path}: {steps:?}");
            }
        }
        // A YAML project installs nothing.
        let secrets = steps_of(&doc, "platform/secrets");
        assert!(
            !secrets
                .iter()
                .any(|(w, wd)| w.starts_with("actions/setup-") || !wd.is_empty()),
            "{secrets:?}"
        );
    }
}
