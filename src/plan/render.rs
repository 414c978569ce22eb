//! Drawing a plan: a tree for people, DOT and Mermaid for diagrams, JSON for tools.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde::Serialize;

use super::graph::{NodeKind, NodeStage, Plan};
use crate::util::plural;

/// What the header of a drawing says about the run.
pub struct Header<'a> {
    pub provider: &'a str,
    pub infra_type: &'a str,
    pub stack: Option<&'a str>,
    /// Secret keys written by the built-in step (names only).
    pub secret_keys: Vec<String>,
    pub secret_name: &'a str,
    /// Stack references found in the code: project path → the paths it reads.
    pub references: &'a BTreeMap<String, Vec<String>>,
    /// References the scanner cannot read: project path → `file:line` of each.
    pub unreadable: &'a BTreeMap<String, Vec<String>>,
    /// The profile's concurrency pools.
    pub pools: &'a [crate::workspace::profile::Pool],
    /// Each Pulumi project's backend, as shown (credentials masked), by path; and where
    /// it came from, by URL.
    pub backends: &'a BTreeMap<String, String>,
    pub backend_why: &'a BTreeMap<String, String>,
}

/// `aws 4 at once (adaptive) · harbor 1 at once (fixed)`.
fn pools_text(pools: &[crate::workspace::profile::Pool]) -> String {
    pools
        .iter()
        .map(|p| {
            format!(
                "{} {} at once ({})",
                p.name,
                p.limit,
                if p.adaptive { "adaptive" } else { "fixed" }
            )
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

/// The references of node `i` that are not also needs (drawn dashed), as node indices.
fn reference_only(plan: &Plan, h: &Header, i: usize) -> Vec<usize> {
    h.references
        .get(&plan.nodes[i].path)
        .into_iter()
        .flatten()
        .filter_map(|t| plan.index_of(t))
        .filter(|j| !plan.nodes[i].needs.contains(j))
        .collect()
}

/// The tree: waves in order, each step with its needs, inputs and hooks.
pub fn tree(plan: &Plan, h: &Header) -> String {
    let mut out = tree_heading(plan, h);
    let width = plan
        .nodes
        .iter()
        .map(|n| n.path.chars().count())
        .max()
        .unwrap_or(0)
        .max(20);
    let mut last_stage = None;
    for (w, wave) in plan.waves().iter().enumerate() {
        let stage = plan.nodes[wave[0]].stage;
        if last_stage != Some(stage) {
            let _ = writeln!(out, "\n{}", stage.as_str());
            last_stage = Some(stage);
        }
        let parallel = if wave.len() > 1 {
            format!("  ({} in parallel)", wave.len())
        } else {
            String::new()
        };
        let _ = writeln!(out, "  wave {}{parallel}", w + 1);
        for (k, &i) in wave.iter().enumerate() {
            let (branch, cont) = if k + 1 == wave.len() {
                ("└─", "   ")
            } else {
                ("├─", "│  ")
            };
            let _ = writeln!(
                out,
                "    {branch} {:<width$}  {}",
                plan.nodes[i].path,
                step_label(plan, h, i),
                width = width
            );
            step_details(&mut out, plan, h, i, &format!("    {cont}    "));
        }
    }
    out
}

/// The tree's first lines: the order, provider, stack and size, the pools, the backends.
fn tree_heading(plan: &Plan, h: &Header) -> String {
    let mut out = String::new();
    let steps = plan.nodes.len();
    let _ = writeln!(
        out,
        "{} · provider {}{} · stack {} · {} step{} in {} wave{}",
        if plan.reversed {
            "destroy order"
        } else {
            "execution order"
        },
        h.provider,
        if h.infra_type.is_empty() {
            String::new()
        } else {
            format!(" ({})", h.infra_type)
        },
        h.stack.unwrap_or("(none)"),
        steps,
        plural(steps),
        plan.wave_count(),
        plural(plan.wave_count()),
    );
    if !h.pools.is_empty() {
        let _ = writeln!(out, "pools: {}", pools_text(h.pools));
    }
    for (url, why) in h.backend_why {
        let _ = writeln!(out, "backend: {url} ({why})");
    }
    out
}

/// What step `i` is, after its path: `[name]`, `[command]` or `◆`, and its description.
fn step_label(plan: &Plan, h: &Header, i: usize) -> String {
    let node = &plan.nodes[i];
    let desc = match node.kind {
        NodeKind::Builtin => format!(
            "built-in: write {} secret{} into Secret `{}`",
            h.secret_keys.len(),
            plural(h.secret_keys.len()),
            h.secret_name
        ),
        _ => node
            .entry
            .as_ref()
            .and_then(|e| (*e.description).clone())
            .unwrap_or_default(),
    };
    let marker = match node.kind {
        NodeKind::Pulumi => format!("[{}]", node.name),
        NodeKind::Command => "[command]".to_string(),
        NodeKind::Builtin => "◆".to_string(),
    };
    format!("{marker} {desc}")
}

/// Step `i`'s lines under it, each after `pad`: needs, reads, keys, pool, tags, inputs
/// and hooks, those it has.
fn step_details(out: &mut String, plan: &Plan, h: &Header, i: usize, pad: &str) {
    let node = &plan.nodes[i];
    let needs = plan.needs_paths(i);
    if !needs.is_empty() {
        let _ = writeln!(out, "{pad}needs   {}", needs.join(", "));
    }
    // What it reads: the projects, then `? (file:line)` for each reference the
    // scanner cannot read.
    let reads: Vec<String> = h
        .references
        .get(&node.path)
        .into_iter()
        .flatten()
        .cloned()
        .chain(
            h.unreadable
                .get(&node.path)
                .into_iter()
                .flatten()
                .map(|at| format!("? ({at})")),
        )
        .collect();
    if !reads.is_empty() {
        let _ = writeln!(out, "{pad}reads   {}", reads.join(", "));
    }
    if node.kind == NodeKind::Builtin && !h.secret_keys.is_empty() {
        let _ = writeln!(out, "{pad}keys    {}", h.secret_keys.join(", "));
    }
    let Some(entry) = &node.entry else {
        return;
    };
    if let Some(pool) = &entry.pool {
        let _ = writeln!(out, "{pad}pool    {pool}");
    }
    if !entry.tags.is_empty() {
        let _ = writeln!(out, "{pad}tags    {}", entry.tags.join(", "));
    }
    for input in &entry.inputs {
        let _ = writeln!(
            out,
            "{pad}input   {} ← {}:{}",
            input.key, input.project, input.output
        );
    }
    for hook in &entry.on_success {
        let _ = writeln!(out, "{pad}hook    {}", hook.describe());
    }
}

/// A DOT ID: always a quoted string, so no project name (`node`, `edge`, `graph`,
/// `strict`, `x-y`) can be read as a keyword or collide with another.
fn dot_id(path: &str) -> String {
    format!("\"{}\"", path.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A Mermaid node ID: the step's index (`n0`, `n1`…), never a word of the syntax
/// (`end`, `class`, `style`); the path is the label.
fn mermaid_id(i: usize) -> String {
    format!("n{i}")
}

/// Steps by wave, in execution order.
fn waves(plan: &Plan) -> Vec<(usize, Vec<usize>)> {
    let mut by: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &i in &plan.order {
        by.entry(plan.nodes[i].wave).or_default().push(i);
    }
    by.into_iter().collect()
}

fn label(plan: &Plan, i: usize) -> String {
    let n = &plan.nodes[i];
    match n.kind {
        NodeKind::Builtin => "secrets → cluster (built-in)".to_string(),
        _ => match n.pool() {
            Some(pool) => format!("{} · pool {pool}", n.path),
            None => n.path.clone(),
        },
    }
}

/// Graphviz DOT: one cluster per stage, the steps of a wave on one rank, edges from
/// prerequisite to dependent. Every ID is quoted.
pub fn dot(plan: &Plan, h: &Header) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph strata {{");
    let _ = writeln!(
        out,
        "  label={};",
        dot_id(&format!(
            "{} ({}) · stack {}",
            h.provider,
            h.infra_type,
            h.stack.unwrap_or("(none)")
        ))
    );
    let _ = writeln!(out, "  rankdir=LR;\n  node [shape=box, style=rounded];");
    for stage in [
        NodeStage::Infrastructure,
        NodeStage::Secrets,
        NodeStage::Kubernetes,
    ] {
        let members: Vec<usize> = plan
            .order
            .iter()
            .copied()
            .filter(|&i| plan.nodes[i].stage == stage)
            .collect();
        if members.is_empty() {
            continue;
        }
        let _ = writeln!(out, "  subgraph cluster_{} {{", stage.as_str());
        let _ = writeln!(out, "    label={};", dot_id(stage.as_str()));
        for i in members {
            let shape = if plan.nodes[i].kind == NodeKind::Builtin {
                ", shape=diamond"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "    {} [label={}\\nwave {}\"{shape}];",
                dot_id(&plan.nodes[i].path),
                dot_id(&label(plan, i))
                    .strip_suffix('"')
                    .unwrap_or_default(),
                plan.nodes[i].wave
            );
        }
        let _ = writeln!(out, "  }}");
    }
    for (_, members) in waves(plan) {
        let ids: Vec<String> = members
            .iter()
            .map(|&i| dot_id(&plan.nodes[i].path))
            .collect();
        let _ = writeln!(out, "  {{ rank=same; {}; }}", ids.join("; "));
    }
    for &i in &plan.order {
        for &j in &plan.nodes[i].needs {
            let _ = writeln!(
                out,
                "  {} -> {};",
                dot_id(&plan.nodes[j].path),
                dot_id(&plan.nodes[i].path)
            );
        }
        for j in reference_only(plan, h, i) {
            let _ = writeln!(
                out,
                "  {} -> {} [style=dashed, label=\"reads\"];",
                dot_id(&plan.nodes[j].path),
                dot_id(&plan.nodes[i].path)
            );
        }
    }
    out.push_str("}\n");
    out
}

/// Mermaid flowchart with a title and one subgraph per wave; node IDs are indexes and
/// the paths are labels, so no project name can break the syntax.
pub fn mermaid(plan: &Plan, h: &Header) -> String {
    let mut out = format!(
        "---\ntitle: {} ({}) · stack {}\n---\nflowchart LR\n",
        h.provider.replace(['\n', ':'], " "),
        h.infra_type.replace(['\n', ':'], " "),
        h.stack.unwrap_or("(none)")
    );
    for (wave, members) in waves(plan) {
        let _ = writeln!(out, "  subgraph w{wave}[\"wave {wave}\"]");
        for i in members {
            let id = mermaid_id(i);
            let text = label(plan, i).replace('"', "#quot;");
            if plan.nodes[i].kind == NodeKind::Builtin {
                let _ = writeln!(out, "    {id}{{\"{text}\"}}");
            } else {
                let _ = writeln!(out, "    {id}[\"{text}\"]");
            }
        }
        let _ = writeln!(out, "  end");
    }
    for &i in &plan.order {
        for &j in &plan.nodes[i].needs {
            let _ = writeln!(out, "  {} --> {}", mermaid_id(j), mermaid_id(i));
        }
        for j in reference_only(plan, h, i) {
            let _ = writeln!(out, "  {} -. reads .-> {}", mermaid_id(j), mermaid_id(i));
        }
    }
    out
}

#[derive(Serialize)]
struct JsonPlan<'a> {
    provider: &'a str,
    infra_type: &'a str,
    stack: Option<&'a str>,
    operation: &'static str,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pools: &'a [crate::workspace::profile::Pool],
    projects: Vec<JsonProject<'a>>,
    order: Vec<&'a str>,
    waves: Vec<Vec<&'a str>>,
}

#[derive(Serialize)]
struct JsonProject<'a> {
    path: &'a str,
    name: &'a str,
    stage: NodeStage,
    kind: NodeKind,
    needs: Vec<&'a str>,
    wave: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pool: Option<&'a str>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    tags: &'a [String],
    #[serde(skip_serializing_if = "Vec::is_empty")]
    inputs: Vec<&'a crate::workspace::profile::Input>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    on_success: Vec<&'a crate::workspace::profile::Hook>,
    /// Projects whose stacks its code references (paths).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    references: Vec<&'a str>,
    /// Stack references its code makes that the scanner cannot read (`file:line` from
    /// the workspace root).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    unreadable_references: Vec<&'a str>,
    /// A Pulumi project's backend (credentials masked).
    #[serde(skip_serializing_if = "Option::is_none")]
    backend: Option<&'a str>,
}

/// The JSON object of DESIGN.md: provider, stack, projects (path, name, stage, needs,
/// wave), order.
pub fn json(plan: &Plan, h: &Header) -> String {
    let projects = plan
        .order
        .iter()
        .map(|&i| {
            let n = &plan.nodes[i];
            JsonProject {
                path: &n.path,
                name: &n.name,
                stage: n.stage,
                kind: n.kind,
                needs: plan.needs_paths(i),
                wave: n.wave,
                description: n.entry.as_ref().and_then(|e| e.description.as_deref()),
                pool: n.pool(),
                tags: n.entry.as_ref().map_or(&[], |e| e.tags.as_slice()),
                inputs: n.entry.iter().flat_map(|e| e.inputs.iter()).collect(),
                on_success: n.entry.iter().flat_map(|e| e.on_success.iter()).collect(),
                references: listed(h.references, &n.path),
                unreadable_references: listed(h.unreadable, &n.path),
                backend: h.backends.get(&n.path).map(String::as_str),
            }
        })
        .collect();
    let doc = JsonPlan {
        provider: h.provider,
        infra_type: h.infra_type,
        stack: h.stack,
        operation: if plan.reversed { "destroy" } else { "up" },
        pools: h.pools,
        projects,
        order: plan
            .order
            .iter()
            .map(|&i| plan.nodes[i].path.as_str())
            .collect(),
        waves: plan
            .waves()
            .into_iter()
            .map(|w| w.into_iter().map(|i| plan.nodes[i].path.as_str()).collect())
            .collect(),
    };
    let mut s = serde_json::to_string_pretty(&doc).unwrap_or_else(|_| "{}".into());
    s.push('\n');
    s
}

/// What `by_project` lists for project `path`; nothing when it lists nothing.
fn listed<'a>(by_project: &'a BTreeMap<String, Vec<String>>, path: &str) -> Vec<&'a str> {
    by_project
        .get(path)
        .into_iter()
        .flatten()
        .map(String::as_str)
        .collect()
}
