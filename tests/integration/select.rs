//! Selectors (issue 27): `--filter` on every command that takes projects, through the
//! real binary: `show` draws only what is selected, the runs run only that (destroy in
//! reverse), `status` lists it, `export` exports it with needs bridged; a selector that
//! selects nothing is refused with did-you-mean; git ranges read a real repository.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::support::*;

/// vpc ← eks; dns and registry beside them; web after the infrastructure, api after web.
const PROFILE: &str = "infrastructure:
  - path: net/vpc
    tags: [network]
  - path: net/dns
    needs: []
    tags: [network]
  - path: infra/eks
    needs: [net/vpc]
  - path: infra/registry
    needs: []
kubernetes:
  - path: apps/web
    tags: [app]
    watch: [lib/web]
  - path: apps/api
    tags: [app]
";

const PATHS: [&str; 6] = [
    "net/vpc",
    "net/dns",
    "infra/eks",
    "infra/registry",
    "apps/web",
    "apps/api",
];

/// Profile `t`; every path a command project whose four operations succeed.
fn workspace() -> Ws {
    let ws = Ws::new();
    ws.profile("t", &format!("{HEAD}{PROFILE}"));
    for p in PATHS {
        ws.write(
            &format!("projects/{p}/Strata.yaml"),
            "up: 'true'\ndestroy: 'true'\npreview: 'true'\nrefresh: 'true'\n",
        );
    }
    ws.write("lib/web/common.sh", "# shared by the web project\n");
    ws
}

fn ok(r: &Run) -> &Run {
    assert_eq!(r.code, 0, "{r:?}");
    r
}

/// `show --format json` with `args`: the order.
fn shown(ws: &Ws, args: &[&str]) -> Vec<String> {
    let r = ws.strata(&[&["-p", "t", "show", "--format", "json"][..], args].concat());
    let j: Value = serde_json::from_str(&ok(&r).stdout).unwrap();
    j["order"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

/// The projects a `--output json` run started, in that order.
fn ran(r: &Run) -> Vec<String> {
    r.events()
        .iter()
        .filter(|e| e["event"] == "project_started")
        .map(|e| e["project"].as_str().unwrap().to_string())
        .collect()
}

fn run(ws: &Ws, args: &[&str]) -> Vec<String> {
    let r = ws.strata(&[&["-p", "t", "-s", "dev", "--output", "json"][..], args].concat());
    ran(ok(&r))
}

fn set(v: &[&str]) -> BTreeSet<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn refused(r: &Run, code: i32, parts: &[&str]) {
    assert_eq!(r.code, code, "{r:?}");
    for p in parts {
        assert!(r.stderr.contains(p), "no {p:?} in stderr\n{r:?}");
    }
    assert!(!r.stderr.contains("panicked"), "{r:?}");
}

#[test]
fn show_filter_draws_only_what_it_selects() {
    let ws = workspace();
    assert_eq!(
        shown(&ws, &["--filter", "eks..."]),
        ["net/vpc", "infra/eks"]
    );
    assert_eq!(
        shown(&ws, &["--filter", "...vpc"]),
        ["net/vpc", "infra/eks", "apps/web", "apps/api"]
    );
    assert_eq!(
        shown(&ws, &["--filter", "tag:network", "--filter", "apps/*"]),
        ["net/vpc", "net/dns", "apps/web", "apps/api"]
    );
    assert_eq!(
        shown(
            &ws,
            &["--filter", "net/* | !tag:app", "--filter", "!net/dns"]
        ),
        ["net/vpc"]
    );
    // What is left out is bridged: web needs vpc through eks.
    let r = ws.strata(&[
        "-p", "t", "show", "--format", "json", "--filter", "net/vpc", "--filter", "web",
    ]);
    let j: Value = serde_json::from_str(&ok(&r).stdout).unwrap();
    let web = item(&j["projects"], "path", "apps/web");
    assert_eq!(web["needs"], serde_json::json!(["net/vpc"]), "{j:#}");
    // Every drawing draws the subset only.
    for format in ["tree", "dot", "mermaid"] {
        let r = ws.strata(&["-p", "t", "show", "--format", format, "--filter", "eks..."]);
        let text = &ok(&r).stdout;
        assert!(
            text.contains("infra/eks") && text.contains("net/vpc"),
            "{format}\n{text}"
        );
        for left_out in ["net/dns", "infra/registry", "apps/web", "apps/api"] {
            assert!(
                !text.contains(left_out),
                "{format} draws {left_out}\n{text}"
            );
        }
    }
    // The shorthands are the same filters.
    assert_eq!(
        shown(&ws, &["--project", "eks", "--with-deps"]),
        shown(&ws, &["--filter", "eks..."])
    );
    assert_eq!(
        shown(&ws, &["--from", "infra/eks"]),
        ["infra/eks", "infra/registry", "apps/web", "apps/api"]
    );
}

#[test]
fn up_preview_and_refresh_run_only_what_the_filter_selects() {
    let ws = workspace();
    let up = run(
        &ws,
        &["up", "--filter", "api...", "--filter", "!infra/registry"],
    );
    assert_eq!(
        up.into_iter().collect::<BTreeSet<_>>(),
        set(&["net/vpc", "net/dns", "infra/eks", "apps/web", "apps/api"])
    );
    let preview = run(&ws, &["preview", "--filter", "tag:app"]);
    assert_eq!(
        preview.into_iter().collect::<BTreeSet<_>>(),
        set(&["apps/web", "apps/api"])
    );
    let refresh = run(&ws, &["refresh", "--filter", "net/*"]);
    assert_eq!(
        refresh.into_iter().collect::<BTreeSet<_>>(),
        set(&["net/vpc", "net/dns"])
    );
}

#[test]
fn destroy_filter_reads_the_forward_graph_and_runs_in_reverse() {
    let ws = workspace();
    run(&ws, &["up"]);
    // `...eks`: eks and what needs it, the last first.
    assert_eq!(
        run(&ws, &["destroy", "--yes", "--filter", "...infra/eks"]),
        ["apps/api", "apps/web", "infra/eks"]
    );
    // The shorthand of the docs: --with-deps takes the dependents along for destroy.
    run(&ws, &["up"]);
    assert_eq!(
        run(
            &ws,
            &["destroy", "--yes", "--project", "infra/eks", "--with-deps"]
        ),
        ["apps/api", "apps/web", "infra/eks"]
    );
}

#[test]
fn status_lists_only_the_selected_projects() {
    let ws = workspace();
    run(&ws, &["up", "--filter", "net/vpc"]);
    let r = ws.run_json("status", &["--filter", "net/*"]);
    let j: Value = serde_json::from_str(&ok(&r).stdout).unwrap();
    let rows: Vec<(&str, &str)> = j["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["path"].as_str().unwrap(), p["status"].as_str().unwrap()))
        .collect();
    assert_eq!(rows, [("net/vpc", "succeeded"), ("net/dns", "never run")]);
    let r = ws.run("status", &["--filter", "tag:app"]);
    assert!(
        ok(&r).stdout.contains("apps/web") && !r.stdout.contains("net/vpc"),
        "{r:?}"
    );
}

#[test]
fn export_exports_the_selected_subgraph_with_needs_bridged() {
    let ws = workspace();
    let r = ws.run(
        "export",
        &["--format", "argo", "--filter", "net/vpc", "--filter", "web"],
    );
    let doc: serde_yaml::Value = serde_yaml::from_str(&ok(&r).stdout).unwrap();
    let tasks = doc["spec"]["templates"]
        .as_sequence()
        .unwrap()
        .iter()
        .find_map(|t| t["dag"]["tasks"].as_sequence())
        .unwrap();
    let project = |t: &serde_yaml::Value| {
        t["arguments"]["parameters"]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "project")
            .unwrap()["value"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let projects: Vec<String> = tasks.iter().map(project).collect();
    assert_eq!(projects, ["net/vpc", "apps/web"]);
    let web = &tasks[1];
    let deps = web["dependencies"].as_sequence().unwrap();
    assert_eq!(deps.len(), 1, "web depends on the vpc's task only: {web:?}");
    assert_eq!(deps[0], tasks[0]["name"]);
    // The review-and-apply workflow is the whole profile's: a selection is refused.
    refused(
        &ws.run(
            "export",
            &[
                "--format",
                "github-actions",
                "--review-apply",
                "--filter",
                "web",
            ],
        ),
        2,
        &["--review-apply", "takes no --filter"],
    );
}

#[test]
fn a_selector_that_selects_nothing_is_refused_with_did_you_mean() {
    let ws = workspace();
    refused(
        &ws.strata(&["-p", "t", "show", "--filter", "infra/ekss"]),
        3,
        &["--filter 'infra/ekss'", "Did you mean `infra/eks`?"],
    );
    refused(
        &ws.strata(&["-p", "t", "show", "--filter", "inra/*"]),
        3,
        &[
            "the glob `inra/*` matches no project path",
            "Did you mean `infra/*`?",
        ],
    );
    refused(
        &ws.strata(&["-p", "t", "show", "--filter", "tag:app | net/*"]),
        3,
        &["selects no project", "with `| net/*` none is left"],
    );
    // A run is refused before anything runs or is written.
    let r = ws.strata(&["-p", "t", "-s", "dev", "up", "--filter", "tag:netwrk"]);
    refused(
        &r,
        3,
        &[
            "tagged `netwrk`",
            "Did you mean `network`?",
            "Tags of the profile: app, network.",
        ],
    );
    assert!(!ws.exists(".strata"), "nothing written");
    // One that does not parse is a usage error pointing at the column.
    refused(
        &ws.strata(&["-p", "t", "status", "--filter", "net/* |"]),
        2,
        &["--filter 'net/* |'", "(column 8)", "  net/* |\n         ^"],
    );
}

/// git in the workspace, as a person would run it.
pub(crate) fn git(root: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(root)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The workspace as a repository: everything committed on `main`, then a branch
/// `feature` whose one commit changes the vpc project and the web project's watched
/// library.
fn repository() -> Ws {
    let ws = workspace();
    git(&ws.root, &["init", "-q", "-b", "main"]);
    git(&ws.root, &["add", "-A"]);
    git(&ws.root, &["commit", "-q", "-m", "estate"]);
    git(&ws.root, &["checkout", "-q", "-b", "feature"]);
    ws.write(
        "projects/net/vpc/Strata.yaml",
        "up: 'true'\ndestroy: 'true'\n",
    );
    git(&ws.root, &["commit", "-q", "-am", "vpc"]);
    ws
}

#[test]
fn git_ranges_select_what_changed_and_compose_with_the_graph() {
    let ws = repository();
    assert_eq!(shown(&ws, &["--filter", "[main...HEAD]"]), ["net/vpc"]);
    assert_eq!(
        shown(&ws, &["--filter", "[main...HEAD]..."]),
        ["net/vpc"],
        "the vpc needs nothing"
    );
    assert_eq!(
        shown(&ws, &["--filter", "...[main...HEAD]"]),
        ["net/vpc", "infra/eks", "apps/web", "apps/api"]
    );
    assert_eq!(
        shown(&ws, &["--filter", "...^[main...HEAD] | tag:app"]),
        ["apps/web", "apps/api"]
    );
    // A watched path counts as the project's own.
    ws.write("lib/web/common.sh", "# changed\n");
    git(&ws.root, &["commit", "-q", "-am", "lib"]);
    assert_eq!(
        shown(&ws, &["--filter", "[main...HEAD]"]),
        ["net/vpc", "apps/web"]
    );
    // [REF]: since REF, the uncommitted work tree included (changed and untracked files).
    assert!(shown(&ws, &["--filter", "[HEAD]"]).is_empty());
    ws.write("projects/net/dns/new.sh", "echo new\n");
    ws.write(
        "projects/apps/api/Strata.yaml",
        "up: 'true'\ndestroy: 'true'\n",
    );
    assert_eq!(shown(&ws, &["--filter", "[HEAD]"]), ["net/dns", "apps/api"]);
    assert_eq!(
        shown(&ws, &["--filter", "[HEAD~1]"]),
        ["net/dns", "apps/web", "apps/api"]
    );
    assert_eq!(
        shown(&ws, &["--filter", "[main...HEAD]"]),
        ["net/vpc", "apps/web"],
        "a range between commits ignores the work tree"
    );
}

#[test]
fn a_git_range_that_changed_no_project_is_nothing_to_do() {
    let ws = repository();
    git(&ws.root, &["checkout", "-q", "main"]);
    let r = ws.strata(&[
        "-p",
        "t",
        "-s",
        "dev",
        "up",
        "--filter",
        "[feature...main]...",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("selects no project") && r.stderr.contains("Nothing to do"),
        "{r:?}"
    );
    assert!(
        ws.read_opt(".strata/dev/journal.jsonl").is_empty(),
        "nothing ran\n{r:?}"
    );
}

#[test]
fn git_ranges_are_refused_outside_a_repository_and_for_an_unknown_ref() {
    let ws = workspace();
    refused(
        &ws.strata(&["-p", "t", "show", "--filter", "[main...HEAD]"]),
        3,
        &[
            "`[main...HEAD]` compares git revisions",
            "is not in a git repository",
        ],
    );
    let ws = repository();
    refused(
        &ws.strata(&["-p", "t", "show", "--filter", "[mian...HEAD]..."]),
        3,
        &[
            "`[mian...HEAD]`: git knows no commit `mian`",
            "Did you mean `main`?",
            "git fetch origin mian",
        ],
    );
    refused(
        &ws.strata(&["-p", "t", "show", "--filter", "[--upload-pack=x]"]),
        2,
        &["cannot start with `-`"],
    );
}
