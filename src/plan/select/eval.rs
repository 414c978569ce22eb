//! The sets a selector names, over a plan's forward graph: each target's steps, the
//! graph operators as transitive closures, `!` as the complement, `|` as intersection;
//! then the union of the positive filters, narrowed by the negative ones.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::plan::Plan;

use super::{Context, Filter, Range, Selection, Selector, Target, Term, glob};

pub fn evaluate(sel: &Selector, plan: &Plan, ctx: &Context) -> Result<Selection> {
    let n = plan.nodes.len();
    if sel.filters.is_empty() {
        return Ok(Selection {
            keep: vec![true; n],
            empty_because: None,
        });
    }
    let mut changed: BTreeMap<&Range, Vec<bool>> = BTreeMap::new();
    for t in sel.filters.iter().flat_map(|f| &f.terms) {
        if let Target::Changed(r) = &t.target
            && !changed.contains_key(r)
        {
            let files = ctx.changes.changed(r)?;
            changed.insert(r, touched(plan, ctx, &files));
        }
    }
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, node) in plan.nodes.iter().enumerate() {
        for &j in &node.needs {
            dependents[j].push(i);
        }
    }
    let needs: Vec<Vec<usize>> = plan.nodes.iter().map(|x| x.needs.clone()).collect();
    // Per filter, the set of each term.
    let mut terms: Vec<Vec<Vec<bool>>> = Vec::new();
    for f in &sel.filters {
        let mut sets = Vec::new();
        for t in &f.terms {
            let base = match &t.target {
                Target::Changed(r) => changed[r].clone(),
                other => target(plan, ctx, f, other)?,
            };
            let mut set = reach(&needs, &dependents, &base, t);
            if t.negated {
                set.iter_mut().for_each(|b| *b = !*b);
            }
            sets.push(set);
        }
        terms.push(sets);
    }
    let whole: Vec<Vec<bool>> = terms.iter().map(|sets| all_of(n, sets)).collect();
    let positive: Vec<usize> = (0..sel.filters.len())
        .filter(|&k| sel.filters[k].is_positive())
        .collect();
    let mut keep = if positive.is_empty() {
        vec![true; n]
    } else {
        (0..n)
            .map(|i| positive.iter().any(|&k| whole[k][i]))
            .collect()
    };
    for (k, f) in sel.filters.iter().enumerate() {
        if !f.is_positive() {
            keep.iter_mut().zip(&whole[k]).for_each(|(a, b)| *a &= *b);
        }
    }
    if keep.iter().any(|&b| b) {
        return Ok(Selection {
            keep,
            empty_because: None,
        });
    }
    let sources: Vec<&str> = sel.filters.iter().map(|f| f.source.as_str()).collect();
    if !changed.is_empty() {
        let ranges: Vec<String> = changed
            .keys()
            .map(|r| Target::Changed((*r).clone()).to_string())
            .collect();
        let why = if changed.values().any(|set| set.contains(&true)) {
            "the rest of the selector leaves none of the projects that changed in"
        } else {
            "no project's folder or `watch:` paths changed in"
        };
        return Ok(Selection {
            keep,
            empty_because: Some(format!(
                "{} selects no project: {why} {}. Nothing to do.",
                sources.join(" "),
                ranges.join(", ")
            )),
        });
    }
    Err(Error::config(format!(
        "{} {} no project: {}.\n  A selector that selects nothing is refused; see what each part selects with `strata show --filter PART`.",
        sources.join(" "),
        if sources.len() == 1 {
            "selects"
        } else {
            "select"
        },
        explain(sel, &terms, &whole)
    )))
}

/// Why the whole is empty: the running intersection of a lone filter, or the union of
/// the positive filters and the negative ones that leave nothing of it.
fn explain(sel: &Selector, terms: &[Vec<Vec<bool>>], whole: &[Vec<bool>]) -> String {
    let count = |s: &[bool]| s.iter().filter(|&&b| b).count();
    let projects = |k: usize| match k {
        0 => "none".to_string(),
        1 => "1 project".to_string(),
        k => format!("{k} projects"),
    };
    if let [f] = sel.filters.as_slice() {
        let sets = &terms[0];
        let mut running = sets[0].clone();
        let mut parts = vec![format!(
            "`{}` selects {}",
            f.terms[0],
            projects(count(&running))
        )];
        for (t, set) in f.terms.iter().zip(sets).skip(1) {
            running.iter_mut().zip(set).for_each(|(a, b)| *a &= *b);
            parts.push(format!(
                "with `| {t}` {} left",
                match count(&running) {
                    0 => "none is".to_string(),
                    1 => "1 is".to_string(),
                    k => format!("{k} are"),
                }
            ));
        }
        return parts.join(", ");
    }
    let (pos, neg): (Vec<usize>, Vec<usize>) =
        (0..sel.filters.len()).partition(|&k| sel.filters[k].is_positive());
    let named = |ks: &[usize]| -> String {
        ks.iter()
            .map(|&k| format!("`{}` ({})", sel.filters[k], count(&whole[k])))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if neg.is_empty() {
        return format!("each selects none: {}", named(&pos));
    }
    if pos.is_empty() {
        return format!("together they leave none: {}", named(&neg));
    }
    let union = (0..whole[0].len())
        .filter(|&i| pos.iter().any(|&k| whole[k][i]))
        .count();
    format!(
        "{} select {} together, and {} leave none of them",
        named(&pos),
        projects(union),
        named(&neg)
    )
}

/// The intersection of `sets` (all `n` steps when there are none).
fn all_of(n: usize, sets: &[Vec<bool>]) -> Vec<bool> {
    (0..n).map(|i| sets.iter().all(|s| s[i])).collect()
}

/// A term's set before `!`: its targets (unless `^`), and what `...` reaches from them.
fn reach(needs: &[Vec<usize>], dependents: &[Vec<usize>], base: &[bool], t: &Term) -> Vec<bool> {
    let mut out = if t.strict {
        vec![false; base.len()]
    } else {
        base.to_vec()
    };
    for (wanted, edges) in [(t.dependencies, needs), (t.dependents, dependents)] {
        if wanted {
            let reached = beyond(edges, base);
            out.iter_mut().zip(reached).for_each(|(a, b)| *a |= b);
        }
    }
    out
}

/// The steps one or more `edges` away from a step of `from`.
fn beyond(edges: &[Vec<usize>], from: &[bool]) -> Vec<bool> {
    let mut seen = vec![false; from.len()];
    let mut stack: Vec<usize> = (0..from.len()).filter(|&i| from[i]).collect();
    while let Some(i) = stack.pop() {
        for &j in &edges[i] {
            if !seen[j] {
                seen[j] = true;
                stack.push(j);
            }
        }
    }
    seen
}

/// The steps a target names; refused when it names none.
fn target(plan: &Plan, ctx: &Context, f: &Filter, t: &Target) -> Result<Vec<bool>> {
    let n = plan.nodes.len();
    let wrap = |e: Error| Error::new(e.kind, format!("{}: {}", f.source, e.message));
    let one = |i: usize| (0..n).map(|k| k == i).collect::<Vec<bool>>();
    let paths = || {
        plan.order
            .iter()
            .map(|&i| plan.nodes[i].path.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match t {
        Target::Project(p) => plan.resolve(p).map(one).map_err(wrap),
        Target::From(p) => {
            let start = plan.resolve(p).map_err(wrap)?;
            let pos = ctx.order.iter().position(|&i| i == start).unwrap_or(0);
            let mut set = vec![false; n];
            for &i in &ctx.order[pos..] {
                set[i] = true;
            }
            Ok(set)
        }
        Target::Glob(g) => {
            let by_name = !g.contains('/');
            let set: Vec<bool> = plan
                .nodes
                .iter()
                .map(|x| glob::matches(g, &x.path) || (by_name && glob::matches(g, &x.name)))
                .collect();
            if set.iter().any(|&b| b) {
                return Ok(set);
            }
            let mut known: Vec<String> = Vec::new();
            for x in &plan.nodes {
                known.push(x.path.clone());
                known.push(x.name.clone());
                let mut dir = x.path.as_str();
                while let Some((up, _)) = dir.rsplit_once('/') {
                    known.push(format!("{up}/*"));
                    known.push(format!("{up}/**"));
                    dir = up;
                }
            }
            Err(Error::config(format!(
                "{}: the glob `{g}` matches no project path{}.{}\n  Projects: {}.",
                f.source,
                if by_name { " or name" } else { "" },
                crate::util::did_you_mean(g, known.iter().map(String::as_str)),
                paths()
            )))
        }
        Target::Tag(tag) => {
            let tags_of = |i: usize| plan.nodes[i].entry.iter().flat_map(|e| &e.tags);
            let set: Vec<bool> = (0..n).map(|i| tags_of(i).any(|x| x == tag)).collect();
            if set.iter().any(|&b| b) {
                return Ok(set);
            }
            let mut known: Vec<&str> = (0..n).flat_map(tags_of).map(String::as_str).collect();
            known.sort_unstable();
            known.dedup();
            let listed = if known.is_empty() {
                "No entry of the profile has tags: add `tags: [NAME]` to the entries to select them by tag.".to_string()
            } else {
                format!("Tags of the profile: {}.", known.join(", "))
            };
            Err(Error::config(format!(
                "{}: no entry of the profile is tagged `{tag}`.{}\n  {listed}",
                f.source,
                crate::util::did_you_mean(tag, known.iter().copied())
            )))
        }
        Target::Changed(_) => Ok(vec![false; n]),
    }
}

/// The projects whose folder or `watch:` paths (the profile's and the entry's) hold a
/// file of `files` (paths from the workspace root).
fn touched(plan: &Plan, ctx: &Context, files: &[String]) -> Vec<bool> {
    let under = |file: &str, dir: &str| {
        let dir = dir.trim_end_matches('/');
        file == dir || (file.starts_with(dir) && file[dir.len()..].starts_with('/'))
    };
    plan.nodes
        .iter()
        .map(|node| {
            let (Some(project), Some(entry)) = (&node.project, &node.entry) else {
                return false;
            };
            let dir = project
                .dir
                .strip_prefix(ctx.root)
                .map(|d| d.to_string_lossy().into_owned())
                .unwrap_or_else(|_| format!("projects/{}", node.path));
            let mut read = vec![dir.as_str()];
            read.extend(ctx.watch.iter().chain(&entry.watch).map(String::as_str));
            files.iter().any(|f| read.iter().any(|d| under(f, d)))
        })
        .collect()
}
