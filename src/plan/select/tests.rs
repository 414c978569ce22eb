//! Unit tests of the selector language: each operator's set on a small plan, the
//! shorthands, and every refusal with its message.

use std::path::Path;

use super::*;
use crate::error::{Error, Kind};

const HEAD: &str = "description: d\ninfra_type: T\n";

/// vpc ← eks; dns, registry beside them; web after the infrastructure, api after web.
fn plan() -> Plan {
    crate::plan::testing::plan_of(
        &format!(
            "{HEAD}watch: [lib/common]\ninfrastructure:\n  - path: net/vpc\n    tags: [network, aws]\n    watch: [shared/net]\n  - path: net/dns\n    needs: []\n    tags: [network]\n  - path: infra/eks\n    needs: [net/vpc]\n    tags: [aws]\n  - path: infra/registry\n    needs: []\nkubernetes:\n  - path: apps/web\n  - path: apps/api\n    tags: [app]\n"
        ),
        &[],
    )
    .unwrap()
}

/// All four infrastructure projects in order, then `app`.
fn infra_and(app: &str) -> Vec<&str> {
    vec!["net/vpc", "net/dns", "infra/eks", "infra/registry", app]
}

/// Changes that returns the same files for every range.
struct Files(Vec<&'static str>);

impl Changes for Files {
    fn changed(&self, _: &Range) -> Result<Vec<String>> {
        Ok(self.0.iter().map(|s| s.to_string()).collect())
    }
}

fn pick_with(plan: &Plan, filters: &[&str], files: &[&'static str]) -> Result<Selection> {
    let filters: Vec<String> = filters.iter().map(|s| s.to_string()).collect();
    let sel = Selector::new(&filters, &Shorthands::default(), false)?;
    let changes = Files(files.to_vec());
    let ctx = Context {
        order: &plan.order,
        root: Path::new("/nowhere"),
        watch: &["lib/common".to_string()],
        changes: &changes,
    };
    sel.evaluate(plan, &ctx)
}

/// The selected paths, in the plan's order.
fn paths(plan: &Plan, s: &Selection) -> Vec<String> {
    plan.order
        .iter()
        .filter(|&&i| s.keep[i])
        .map(|&i| plan.nodes[i].path.clone())
        .collect()
}

fn pick(filters: &[&str]) -> Vec<String> {
    let p = plan();
    let s = pick_with(&p, filters, &[]).unwrap_or_else(|e| panic!("{filters:?}: {}", e.message));
    paths(&p, &s)
}

fn refused(filters: &[&str]) -> Error {
    let p = plan();
    pick_with(&p, filters, &[]).expect_err("refused")
}

#[test]
fn no_filter_selects_everything() {
    assert_eq!(pick(&[]).len(), 6);
}

#[test]
fn a_project_is_a_path_or_a_pulumi_name_as_resolve_takes_it() {
    for f in ["infra/eks", "eks", "projects/infra/eks/", "./infra/eks"] {
        assert_eq!(pick(&[f]), ["infra/eks"], "{f}");
    }
}

#[test]
fn globs_match_paths_and_without_a_slash_names() {
    assert_eq!(pick(&["net/*"]), ["net/vpc", "net/dns"]);
    assert_eq!(pick(&["apps/**"]), ["apps/web", "apps/api"]);
    assert_eq!(pick(&["*/eks"]), ["infra/eks"]);
    assert_eq!(pick(&["e*"]), ["infra/eks"], "by Pulumi name");
    assert_eq!(pick(&["**"]).len(), 6);
}

#[test]
fn dots_after_take_what_it_needs_and_before_what_needs_it() {
    assert_eq!(pick(&["eks..."]), ["net/vpc", "infra/eks"]);
    assert_eq!(
        pick(&["...vpc"]),
        ["net/vpc", "infra/eks", "apps/web", "apps/api"]
    );
    assert_eq!(
        pick(&["...eks..."]),
        ["net/vpc", "infra/eks", "apps/web", "apps/api"]
    );
    assert_eq!(pick(&["web..."]), infra_and("apps/web"));
}

#[test]
fn a_caret_leaves_the_named_ones_out() {
    assert_eq!(pick(&["eks^..."]), ["net/vpc"]);
    assert_eq!(pick(&["...^vpc"]), ["infra/eks", "apps/web", "apps/api"]);
    assert_eq!(pick(&["...^web^..."]), infra_and("apps/api"));
    // A named one that another named one reaches stays: eks needs vpc.
    assert_eq!(pick(&["net/vpc^... ", "tag:aws^..."]), ["net/vpc"]);
    assert_eq!(pick(&["tag:aws^..."]), ["net/vpc"]);
}

#[test]
fn tags_select_the_entries_that_list_them() {
    assert_eq!(pick(&["tag:network"]), ["net/vpc", "net/dns"]);
    assert_eq!(pick(&["tag:aws..."]), ["net/vpc", "infra/eks"]);
}

#[test]
fn a_pipe_intersects_and_repeated_filters_unite() {
    assert_eq!(pick(&["tag:aws | net/*"]), ["net/vpc"]);
    assert_eq!(pick(&["tag:app", "eks"]), ["infra/eks", "apps/api"]);
}

#[test]
fn negation_complements_and_negative_filters_narrow_the_union() {
    assert_eq!(
        pick(&["!tag:aws"]),
        ["net/dns", "infra/registry", "apps/web", "apps/api"]
    );
    assert_eq!(pick(&["net/* | !tag:aws"]), ["net/dns"]);
    assert_eq!(
        pick(&["net/*", "apps/*", "!tag:aws"]),
        ["net/dns", "apps/web", "apps/api"]
    );
    // A filter with a positive term unites, whatever comes first.
    assert_eq!(pick(&["!tag:aws | net/*", "eks"]), ["net/dns", "infra/eks"]);
    assert_eq!(pick(&["!...vpc"]), ["net/dns", "infra/registry"]);
}

#[test]
fn from_keeps_what_is_ordered_at_or_after_it() {
    assert_eq!(
        pick(&["from:infra/eks"]),
        ["infra/eks", "infra/registry", "apps/web", "apps/api"]
    );
}

#[test]
fn shorthands_translate_into_filters() {
    let p = plan();
    let changes = Files(vec![]);
    let run = |short: Shorthands, destroy: bool, filters: &[&str]| {
        let filters: Vec<String> = filters.iter().map(|s| s.to_string()).collect();
        let sel = Selector::new(&filters, &short, destroy).unwrap();
        let reversed = p.reversed();
        let order = if destroy { &reversed.order } else { &p.order };
        let ctx = Context {
            order,
            root: Path::new("/nowhere"),
            watch: &[],
            changes: &changes,
        };
        let shown: Vec<String> = sel.filters.iter().map(|f| f.to_string()).collect();
        (paths(&p, &sel.evaluate(&p, &ctx).unwrap()), shown)
    };
    let eks = |with_deps| Shorthands {
        projects: vec!["eks".into()],
        with_deps,
        from: None,
    };
    assert_eq!(run(eks(false), false, &[]).1, ["eks"]);
    assert_eq!(
        run(eks(true), false, &[]),
        (
            vec!["net/vpc".into(), "infra/eks".into()],
            vec!["eks...".into()]
        )
    );
    let (destroyed, shown) = run(eks(true), true, &[]);
    assert_eq!(shown, ["...eks"]);
    assert_eq!(destroyed, ["infra/eks", "apps/web", "apps/api"]);
    // --from narrows every positive filter; alone it is a filter of its own.
    let from = |f: &str| Shorthands {
        from: Some(f.into()),
        ..Default::default()
    };
    let (picked, shown) = run(from("dns"), false, &["net/*", "!apps/api"]);
    assert_eq!(shown, ["net/* | from:dns", "!apps/api"]);
    assert_eq!(picked, ["net/dns"]);
    assert_eq!(
        run(from("registry"), false, &[]).0,
        ["infra/registry", "apps/web", "apps/api"]
    );
    // For destroy, --from counts in the destroy order: the apps go first.
    assert_eq!(run(from("web"), true, &[]).0, infra_and("apps/web"));
}

#[test]
fn git_ranges_select_projects_whose_folder_or_watched_paths_changed() {
    let p = plan();
    let with = |f: &str, files: &[&'static str]| paths(&p, &pick_with(&p, &[f], files).unwrap());
    assert_eq!(
        with("[main...HEAD]", &["projects/net/dns/index.ts"]),
        ["net/dns"]
    );
    assert_eq!(with("[main]", &["projects/net/dns"]), ["net/dns"]);
    assert!(with("[main]", &["projects/net/dnsx/a"]).is_empty());
    assert_eq!(with("[main...HEAD]", &["shared/net/a.py"]), ["net/vpc"]);
    assert_eq!(
        with("[main]", &["lib/common/x.sh"]).len(),
        6,
        "the profile's watch: every project"
    );
    assert_eq!(
        with("...[HEAD~1...HEAD]", &["projects/net/dns/index.ts"]),
        ["net/dns", "apps/web", "apps/api"]
    );
    assert_eq!(
        with("[main]... | tag:network", &["projects/infra/eks/a"]),
        ["net/vpc"]
    );
}

#[test]
fn a_git_range_that_touches_no_project_is_nothing_to_do_not_an_error() {
    let p = plan();
    let s = pick_with(&p, &["[main...HEAD]..."], &["README.md"]).unwrap();
    assert!(s.keep.iter().all(|k| !k));
    let why = s.empty_because.unwrap();
    assert!(
        why.contains("no project's folder or `watch:` paths changed in [main...HEAD]"),
        "{why}"
    );
    assert!(
        why.contains("--filter '[main...HEAD]...'") && why.contains("Nothing to do"),
        "{why}"
    );
}

/// `e` is of `kind` and its message says each of `parts`.
fn says(e: Error, kind: Kind, parts: &[&str]) {
    assert_eq!(e.kind, kind, "{}", e.message);
    for part in parts {
        assert!(e.message.contains(part), "no {part:?} in\n{}", e.message);
    }
}

/// Refused with a configuration error (exit 3) whose message says each of `parts`.
fn refused_saying(filters: &[&str], parts: &[&str]) {
    says(refused(filters), Kind::Config, parts);
}

#[test]
fn a_git_range_the_rest_of_the_selector_empties_says_so() {
    let p = plan();
    let s = pick_with(&p, &["[main] | tag:app"], &["projects/net/dns/a"]).unwrap();
    let why = s.empty_because.unwrap();
    assert!(
        why.contains("the rest of the selector leaves none of the projects that changed in [main]"),
        "{why}"
    );
}

#[test]
fn an_unknown_name_is_refused_with_did_you_mean() {
    refused_saying(
        &["infra/ekss"],
        &["--filter 'infra/ekss': ", "Did you mean `infra/eks`?"],
    );
}

#[test]
fn a_glob_that_matches_nothing_is_refused_with_did_you_mean() {
    refused_saying(
        &["nte/*"],
        &[
            "the glob `nte/*` matches no project path",
            "Did you mean `net/*`?",
            "Projects: net/vpc, net/dns",
        ],
    );
}

#[test]
fn an_unknown_tag_is_refused_with_the_known_tags() {
    refused_saying(
        &["tag:netwrk"],
        &[
            "no entry of the profile is tagged `netwrk`",
            "Did you mean `network`?",
            "Tags of the profile: app, aws, network.",
        ],
    );
    // Also when only negated.
    refused_saying(&["!tag:nope"], &["tagged `nope`"]);
}

#[test]
fn a_selector_that_selects_nothing_is_refused_and_says_why() {
    refused_saying(
        &["tag:aws | apps/*"],
        &[
            "--filter 'tag:aws | apps/*' selects no project: `tag:aws` selects 2 projects, with `| apps/*` none is left.",
        ],
    );
    refused_saying(
        &["net/*", "!tag:network"],
        &["`net/*` (2) select 2 projects together, and `!tag:network` (4) leave none of them"],
    );
    refused_saying(&["...^api"], &["`...^api` selects none"]);
}

/// Refused as a usage error (exit 2) whose message says each of `parts`.
fn bad_saying(text: &str, parts: &[&str]) {
    let e = Selector::new(&[text.to_string()], &Shorthands::default(), false).unwrap_err();
    says(e, Kind::Usage, parts);
}

#[test]
fn parse_errors_point_at_the_column() {
    bad_saying(
        "net/* | | x",
        &["found `|` (column 9)", "\n  net/* | | x\n          ^\n"],
    );
    bad_saying("...", &["found the end (column 4)"]);
    bad_saying("", &["found the end (column 1)"]);
    bad_saying("[main...HEAD", &["this `[` is not closed", "(column 1)"]);
    bad_saying("main]", &["this `]` closes no `[` (column 5)"]);
    bad_saying(
        "eks^",
        &["`^` leaves the named projects out of a `...`", "(column 4)"],
    );
    bad_saying("tags:aws", &["Did you mean `tag`?"]);
    bad_saying("./tag:", &["a tag is a name", "(column 7)"]);
    bad_saying("from:a*", &["`from:` takes one project"]);
    bad_saying("[main..HEAD]", &["three dots"]);
    bad_saying("[--output=x]", &["cannot start with `-`"]);
    bad_saying("[main...]", &["a revision on each side"]);
    bad_saying("a, b", &["a filter is not a list", "(column 2)"]);
    bad_saying("!!a", &["found `!` (column 2)"]);
    bad_saying(
        "a b",
        &["unexpected `b`: terms are joined with `|`", "(column 3)"],
    );
    bad_saying("...a...b", &["unexpected `b`"]);
}

#[test]
fn a_bad_revision_of_a_git_range_is_the_one_pointed_at() {
    bad_saying(
        "[main...-x]",
        &[
            "cannot start with `-` (column 9)",
            "\n  [main...-x]\n          ^\n",
        ],
    );
    bad_saying(
        "a | [main... my branch]",
        &[
            "has no spaces (column 14)",
            "\n  a | [main... my branch]\n               ^\n",
        ],
    );
    bad_saying("[main...]", &["a revision on each side", "(column 9)"]);
    bad_saying(
        "[ -x...main]",
        &[
            "cannot start with `-` (column 3)",
            "\n  [ -x...main]\n    ^\n",
        ],
    );
    bad_saying("[-x]", &["cannot start with `-` (column 2)"]);
}

#[test]
fn filters_print_back_as_they_parse() {
    for text in [
        "infra/eks",
        "net/* | !tag:aws",
        "...^vpc",
        "eks^...",
        "...eks...",
        "...^web^...",
        "[main...HEAD]...",
        "...^[HEAD^...HEAD]...",
        "[v1.0]",
        "from:infra/eks",
        "!...vpc | **",
    ] {
        let f = parse::filter(text).unwrap();
        let again = parse::filter(&f.to_string()).unwrap();
        assert_eq!(f.terms, again.terms, "{text} -> {f}");
    }
    assert_eq!(
        parse::filter("...^web^...").unwrap().to_string(),
        "...^web..."
    );
    assert_eq!(parse::filter(" ! a  |b ").unwrap().to_string(), "!a | b");
}
