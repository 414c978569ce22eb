//! Property tests: on random DAGs, a random selector's set is the one computed by brute
//! force from the graph's transitive closure (Floyd–Warshall); and the parser, fed any
//! string, parses or refuses it, never panics, and prints back what it parsed.

use std::path::Path;

use proptest::prelude::*;

use super::*;

const HEAD: &str = "description: d\ninfra_type: T\n";
const TAGS: [&str; 3] = ["t0", "t1", "t2"];
/// The globs the tests draw from, each with the paths it matches written out by hand
/// (paths are `g<k>/p<i>`, names `p<i>`).
const GLOBS: [&str; 6] = ["g0/*", "g1/**", "*/p1", "**", "p*", "g?/p0"];

fn glob_by_hand(glob: &str, path: &str) -> bool {
    let (group, name) = path.split_once('/').unwrap();
    match glob {
        "g0/*" => group == "g0",
        "g1/**" => group == "g1",
        "*/p1" => name == "p1",
        "**" | "p*" => true,
        "g?/p0" => group.len() == 2 && name == "p0",
        _ => unreachable!(),
    }
}

/// A random DAG: each node's group, its needs (earlier nodes only) and its tags.
#[derive(Debug, Clone)]
struct Dag {
    nodes: Vec<(usize, Vec<usize>, Vec<usize>)>,
}

fn dag() -> impl Strategy<Value = Dag> {
    (1usize..8).prop_flat_map(|n| {
        let node = |i: usize| {
            (
                0usize..3,
                proptest::sample::subsequence((0..i).collect::<Vec<_>>(), 0..=i),
                proptest::sample::subsequence(vec![0usize, 1, 2], 0..=2),
            )
        };
        (0..n)
            .map(node)
            .collect::<Vec<_>>()
            .prop_map(|nodes| Dag { nodes })
    })
}

fn yaml(d: &Dag) -> String {
    let mut y = format!("{HEAD}infrastructure:\n");
    for (i, (group, needs, tags)) in d.nodes.iter().enumerate() {
        let path = |k: usize| format!("g{}/p{k}", d.nodes[k].0);
        let needs: Vec<String> = needs.iter().map(|&k| path(k)).collect();
        let tags: Vec<&str> = tags.iter().map(|&t| TAGS[t]).collect();
        y.push_str(&format!(
            "  - path: g{group}/p{i}\n    needs: [{}]\n    tags: [{}]\n",
            needs.join(", "),
            tags.join(", ")
        ));
    }
    y
}

/// A target as the generator picks it: an index into the nodes, globs or tags.
#[derive(Debug, Clone)]
enum Pick {
    Path(usize),
    Name(usize),
    Glob(usize),
    Tag(usize),
    From(usize),
}

/// A term as drawn: `!`, `...` before, `...` after, `^`, and its target.
type Drawn = (bool, bool, bool, bool, Pick);

fn term() -> impl Strategy<Value = Drawn> {
    let pick = prop_oneof![
        (0usize..8).prop_map(Pick::Path),
        (0usize..8).prop_map(Pick::Name),
        (0usize..GLOBS.len()).prop_map(Pick::Glob),
        (0usize..3).prop_map(Pick::Tag),
        (0usize..8).prop_map(Pick::From),
    ];
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        pick,
    )
}

fn filters() -> impl Strategy<Value = Vec<Vec<Drawn>>> {
    prop::collection::vec(prop::collection::vec(term(), 1..4), 1..4)
}

/// The selector's text: one `--filter` value per filter.
fn texts(plan: &Plan, fs: &[Vec<Drawn>]) -> Vec<String> {
    let n = plan.nodes.len();
    fs.iter()
        .map(|f| {
            let terms: Vec<Term> = f
                .iter()
                .map(|(negated, dependents, dependencies, strict, pick)| Term {
                    negated: *negated,
                    dependents: *dependents,
                    dependencies: *dependencies,
                    strict: *strict && (*dependents || *dependencies),
                    target: match pick {
                        Pick::Path(i) => Target::Project(plan.nodes[i % n].path.clone()),
                        Pick::Name(i) => Target::Project(plan.nodes[i % n].name.clone()),
                        Pick::Glob(g) => Target::Glob(GLOBS[*g].to_string()),
                        Pick::Tag(t) => Target::Tag(TAGS[*t].to_string()),
                        Pick::From(i) => Target::From(plan.nodes[i % n].path.clone()),
                    },
                })
                .collect();
            Filter {
                terms,
                source: String::new(),
            }
            .to_string()
        })
        .collect()
}

/// The expected selection, computed from scratch: `None` when it must be refused (a
/// target that matches nothing, or nothing selected at all).
fn brute_force(plan: &Plan, filters: &[Filter]) -> Option<Vec<bool>> {
    let n = plan.nodes.len();
    // reach[i][j]: j is reached from i through one or more `needs` edges.
    let mut reach = vec![vec![false; n]; n];
    for (i, node) in plan.nodes.iter().enumerate() {
        for &j in &node.needs {
            reach[i][j] = true;
        }
    }
    for k in 0..n {
        for i in 0..n {
            for j in 0..n {
                if reach[i][k] && reach[k][j] {
                    reach[i][j] = true;
                }
            }
        }
    }
    let index = |p: &str| {
        (0..n)
            .find(|&i| plan.nodes[i].path == p || plan.nodes[i].name == p)
            .unwrap()
    };
    let mut whole = Vec::new();
    for f in filters {
        let mut set = vec![true; n];
        for t in &f.terms {
            let base: Vec<bool> = match &t.target {
                Target::Project(p) => (0..n).map(|i| i == index(p)).collect(),
                Target::Glob(g) => (0..n)
                    .map(|i| glob_by_hand(g, &plan.nodes[i].path))
                    .collect(),
                Target::Tag(tag) => (0..n)
                    .map(|i| plan.nodes[i].entry.as_ref().unwrap().tags.contains(tag))
                    .collect(),
                Target::From(p) => {
                    let at = plan.order.iter().position(|&i| i == index(p)).unwrap();
                    (0..n).map(|i| plan.order[at..].contains(&i)).collect()
                }
                Target::Changed(_) => unreachable!(),
            };
            if !base.contains(&true) {
                return None;
            }
            let mut s: Vec<bool> = (0..n).map(|i| base[i] && !t.strict).collect();
            for j in 0..n {
                for i in (0..n).filter(|&i| base[i]) {
                    s[j] |= (t.dependencies && reach[i][j]) || (t.dependents && reach[j][i]);
                }
            }
            for j in 0..n {
                set[j] &= s[j] != t.negated;
            }
        }
        whole.push((f.terms.iter().any(|t| !t.negated), set));
    }
    let any_positive = whole.iter().any(|(p, _)| *p);
    let keep: Vec<bool> = (0..n)
        .map(|i| {
            let united = !any_positive || whole.iter().any(|(p, s)| *p && s[i]);
            united && whole.iter().all(|(p, s)| *p || s[i])
        })
        .collect();
    keep.contains(&true).then_some(keep)
}

struct NoGit;

impl Changes for NoGit {
    fn changed(&self, _: &Range) -> Result<Vec<String>> {
        Ok(vec!["projects/g0/p0/x".into()])
    }
}

fn evaluate(plan: &Plan, texts: &[String]) -> Result<Selection> {
    let sel = Selector::new(texts, &Shorthands::default(), false)?;
    sel.evaluate(
        plan,
        &Context {
            order: &plan.order,
            root: Path::new("/nowhere"),
            watch: &[],
            changes: &NoGit,
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn a_selector_selects_what_brute_force_finds(d in dag(), fs in filters()) {
        let plan = crate::plan::testing::plan_of(&yaml(&d), &[]).unwrap();
        let texts = texts(&plan, &fs);
        let parsed: Vec<Filter> = texts.iter().map(|t| parse::filter(t).unwrap()).collect();
        let got = evaluate(&plan, &texts);
        match brute_force(&plan, &parsed) {
            Some(expected) => {
                let got = got.map_err(|e| e.message);
                prop_assert_eq!(got.map(|s| s.keep), Ok(expected), "{:?}", texts);
            }
            None => {
                let e = got.expect_err("refused");
                prop_assert_eq!(e.kind, crate::error::Kind::Config, "{:?}: {}", texts, e.message);
            }
        }
    }

    #[test]
    fn any_text_parses_or_is_refused_and_prints_back(text in "\\PC{0,40}") {
        parse_or_refuse(&text)?;
    }

    #[test]
    fn near_misses_parse_or_are_refused(text in "[a-z/*?.!^| \\[\\]:~,-]{0,30}") {
        parse_or_refuse(&text)?;
        // Evaluating whatever parses refuses or selects, and never panics.
        let plan = crate::plan::testing::plan_of(&format!("{HEAD}infrastructure:\n  - path: g0/p0\n    tags: [t0]\n  - path: g1/p1\n"), &[]).unwrap();
        let _ = evaluate(&plan, &[text]);
    }
}

fn parse_or_refuse(text: &str) -> std::result::Result<(), TestCaseError> {
    match parse::filter(text) {
        Ok(f) => {
            let again = parse::filter(&f.to_string());
            prop_assert!(again.is_ok(), "{} printed as {}", text, f);
            prop_assert_eq!(again.unwrap().terms, f.terms);
        }
        Err(e) => {
            prop_assert_eq!(e.kind, crate::error::Kind::Usage);
            prop_assert!(e.message.contains("(column "), "{}", e.message);
        }
    }
    Ok(())
}
