//! The execution graph: build it from a composed profile (petgraph), check it for
//! cycles, order it, group it into waves, restrict it to a selection (bridging what is
//! left out), and reverse it for destroy.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};
use std::sync::Arc;

use petgraph::algo::tarjan_scc;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;

use crate::error::{Error, Result};
use crate::util::display_path;
use crate::workspace::profile::Rule;
use crate::workspace::{Entry, Profile, Project, ProjectKind, Stage};

/// The path of the built-in step that writes secrets into the cluster between stages.
pub const SECRETS_STEP: &str = "@secrets";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeStage {
    Infrastructure,
    Secrets,
    Kubernetes,
}

impl NodeStage {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStage::Infrastructure => "infrastructure",
            NodeStage::Secrets => "secrets",
            NodeStage::Kubernetes => "kubernetes",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    Pulumi,
    Command,
    /// The built-in secrets step.
    Builtin,
}

/// One step of the plan: a project, or the built-in secrets step.
#[derive(Debug, Clone)]
pub struct Node {
    pub path: String,
    pub name: String,
    pub stage: NodeStage,
    pub kind: NodeKind,
    /// Direct prerequisites (indices into `Plan::nodes`).
    pub needs: Vec<usize>,
    /// 1-based: the set of steps that may run at once.
    pub wave: usize,
    /// Ordering priority among ready nodes (lower first).
    rank: usize,
    /// Shared by every copy of the plan (the selected plan, a run's, a preview's
    /// unordered one): a plan of thousands of projects is copied cheaply.
    pub entry: Option<Arc<Entry>>,
    pub project: Option<Arc<Project>>,
    /// The profile's `policy:` rules that hold this project (see `plan::rules`).
    pub rules: Vec<Arc<Rule>>,
}

impl Node {
    /// The step of a profile entry and its project, `rank`-th in the profile's order; its
    /// needs, wave and rules are filled in later.
    fn of_entry(e: &Arc<Entry>, p: &Arc<Project>, rank: usize) -> Node {
        Node {
            path: e.path.clone(),
            name: p.name(),
            stage: match e.stage {
                Stage::Infrastructure => NodeStage::Infrastructure,
                Stage::Kubernetes => NodeStage::Kubernetes,
            },
            kind: match p.kind {
                ProjectKind::Pulumi { .. } => NodeKind::Pulumi,
                ProjectKind::Command(_) => NodeKind::Command,
            },
            needs: Vec::new(),
            wave: 0,
            rank,
            entry: Some(Arc::clone(e)),
            project: Some(Arc::clone(p)),
            rules: Vec::new(),
        }
    }

    /// The built-in step that writes the stack's secrets into its cluster.
    fn secrets_step(rank: usize) -> Node {
        Node {
            path: SECRETS_STEP.to_string(),
            name: "secrets".to_string(),
            stage: NodeStage::Secrets,
            kind: NodeKind::Builtin,
            needs: Vec::new(),
            wave: 0,
            rank,
            entry: None,
            project: None,
            rules: Vec::new(),
        }
    }

    /// The concurrency pool its entry runs in (none for the built-in step).
    pub fn pool(&self) -> Option<&str> {
        self.entry.as_ref().and_then(|e| e.pool.as_deref())
    }
}

/// An ordered, acyclic plan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub nodes: Vec<Node>,
    /// Node indices in execution order.
    pub order: Vec<usize>,
    /// True when this is the destroy (reverse) plan.
    pub reversed: bool,
}

impl Plan {
    /// Builds the graph of `profile`; `projects` are its entries' projects, in order.
    /// Without the policy rules that hold each node: [`crate::plan::build`] adds them.
    pub fn build_graph(profile: &Profile, projects: Vec<Project>) -> Result<Plan> {
        let (mut nodes, stages) = Stages::lay_out(profile, projects);
        let mut needs = declared_needs(&nodes, stages.k8s_start);
        // `infer_needs: true`: the stacks a program references are needs too.
        if profile.infer_needs {
            add_referenced_needs(&nodes, &mut needs);
        }
        stages.add_barrier(&mut needs);
        for (node, set) in nodes.iter_mut().zip(needs) {
            node.needs = set.into_iter().collect();
        }
        let mut plan = Plan {
            nodes,
            order: Vec::new(),
            reversed: false,
        };
        plan.compute_order();
        if plan.order.len() < plan.nodes.len() {
            return Err(plan.cycle_error(profile));
        }
        Ok(plan)
    }

    fn graph(&self) -> DiGraph<usize, ()> {
        let mut g = DiGraph::new();
        let idx: Vec<NodeIndex> = (0..self.nodes.len()).map(|i| g.add_node(i)).collect();
        for (i, n) in self.nodes.iter().enumerate() {
            for &j in &n.needs {
                g.add_edge(idx[j], idx[i], ());
            }
        }
        g
    }

    /// The error for a graph that has a cycle: one cycle, printed.
    fn cycle_error(&self, profile: &Profile) -> Error {
        let g = self.graph();
        // Find one cycle and print it: a strongly connected component with a loop.
        let scc = tarjan_scc(&g)
            .into_iter()
            .find(|c| c.len() > 1 || g.contains_edge(c[0], c[0]))
            .unwrap_or_default();
        let members: BTreeSet<usize> = scc.iter().map(|n| g[*n]).collect();
        let cycle = self.cycle_within(&members);
        let mut text: Vec<&str> = cycle.iter().map(|&i| self.nodes[i].path.as_str()).collect();
        if let Some(first) = text.first().copied() {
            text.push(first);
        }
        let hint = if cycle
            .iter()
            .any(|&i| self.nodes[i].stage != NodeStage::Infrastructure)
            && cycle
                .iter()
                .any(|&i| self.nodes[i].stage == NodeStage::Infrastructure)
        {
            "\n  Every kubernetes entry runs after every infrastructure entry: an infrastructure entry cannot need (or take inputs from) a kubernetes one."
        } else {
            ""
        };
        Error::config(format!(
            "{}: the dependencies form a cycle: {}.\n  Break it by changing `needs:` or `inputs:` of one of these entries.{hint}",
            display_path(&profile.file),
            text.join(" → ")
        ))
    }

    /// A cycle through nodes of `members` (each listed once, in dependency order).
    fn cycle_within(&self, members: &BTreeSet<usize>) -> Vec<usize> {
        let Some(&start) = members.iter().next() else {
            return Vec::new();
        };
        // Walk "needs" edges inside the component until a node repeats.
        let mut path = vec![start];
        let mut current = start;
        loop {
            let Some(&next) = self.nodes[current]
                .needs
                .iter()
                .find(|j| members.contains(j))
            else {
                return path;
            };
            if let Some(pos) = path.iter().position(|&p| p == next) {
                let mut cycle = path[pos..].to_vec();
                cycle.reverse(); // needs point backwards: show it in run order
                // Start at the entry written first, so the message is stable.
                if let Some(min) = (0..cycle.len()).min_by_key(|&k| self.nodes[cycle[k]].rank) {
                    cycle.rotate_left(min);
                }
                return cycle;
            }
            path.push(next);
            current = next;
        }
    }

    /// Orders the nodes (Kahn's algorithm, ties broken by rank) and numbers the waves.
    /// Nodes on a cycle are left out of `order`.
    fn compute_order(&mut self) {
        let n = self.nodes.len();
        let mut remaining: Vec<usize> = self.nodes.iter().map(|x| x.needs.len()).collect();
        let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, node) in self.nodes.iter().enumerate() {
            for &j in &node.needs {
                dependents[j].push(i);
            }
        }
        let mut ready: BinaryHeap<Reverse<(usize, usize)>> = (0..n)
            .filter(|&i| remaining[i] == 0)
            .map(|i| Reverse((self.nodes[i].rank, i)))
            .collect();
        let mut order = Vec::with_capacity(n);
        while let Some(Reverse((_, i))) = ready.pop() {
            order.push(i);
            for &d in &dependents[i] {
                remaining[d] -= 1;
                if remaining[d] == 0 {
                    ready.push(Reverse((self.nodes[d].rank, d)));
                }
            }
        }
        for &i in &order {
            let wave = self.nodes[i]
                .needs
                .iter()
                .map(|&j| self.nodes[j].wave)
                .max()
                .unwrap_or(0)
                + 1;
            self.nodes[i].wave = wave;
        }
        self.order = order;
    }

    pub fn wave_count(&self) -> usize {
        self.nodes.iter().map(|n| n.wave).max().unwrap_or(0)
    }

    /// The nodes of each wave, in execution order.
    pub fn waves(&self) -> Vec<Vec<usize>> {
        let mut waves = vec![Vec::new(); self.wave_count()];
        for &i in &self.order {
            waves[self.nodes[i].wave - 1].push(i);
        }
        waves
    }

    /// Whether node `i` waits for its prerequisite `j` only because of the stage barrier
    /// (every kubernetes step after every infrastructure step, through the secrets
    /// step), not because its entry says it needs, takes inputs from or reads `j`. Under
    /// `--keep-going` such a wait is for `j` to end, not to succeed.
    pub fn waits_only_for_the_barrier(&self, i: usize, j: usize) -> bool {
        let (node, before) = (&self.nodes[i], &self.nodes[j]);
        match node.stage {
            NodeStage::Secrets => true,
            NodeStage::Kubernetes if before.stage != NodeStage::Kubernetes => {
                node.entry.as_ref().is_none_or(|e| {
                    let named = |p: &String| p.trim_matches('/') == before.path;
                    !(e.needs.iter().flatten().any(named)
                        || e.inputs.iter().any(|x| named(&x.project))
                        || e.reads.iter().flat_map(|r| r.projects()).any(|p| named(&p)))
                })
            }
            _ => false,
        }
    }

    pub fn index_of(&self, path: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.path == path)
    }

    /// The node of `path`.
    pub fn node(&self, path: &str) -> Option<&Node> {
        self.index_of(path).map(|i| &self.nodes[i])
    }

    /// The paths of the nodes of one kind (Pulumi or command projects).
    pub fn paths_of(&self, kind: NodeKind) -> std::collections::BTreeSet<&str> {
        self.nodes
            .iter()
            .filter(|n| n.kind == kind)
            .map(|n| n.path.as_str())
            .collect()
    }

    /// Finds a node by path, or by Pulumi project name when that is unambiguous.
    pub fn resolve(&self, wanted: &str) -> Result<usize> {
        let trimmed = wanted.trim_matches('/');
        let trimmed = trimmed.strip_prefix("projects/").unwrap_or(trimmed);
        if let Some(i) = self.index_of(trimmed) {
            return Ok(i);
        }
        let by_name: Vec<usize> = (0..self.nodes.len())
            .filter(|&i| self.nodes[i].name == trimmed)
            .collect();
        match by_name.as_slice() {
            [i] => Ok(*i),
            [] => Err(Error::config(format!(
                "`{wanted}` is not a project of this profile (neither a path nor a Pulumi project name).{}\n  Projects: {}.\n  See them all with `strata show`.",
                self.closest(trimmed),
                self.order
                    .iter()
                    .map(|&i| self.nodes[i].path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            many => Err(Error::config(format!(
                "`{wanted}` is the Pulumi name of several projects ({}); name one by its path.",
                many.iter()
                    .map(|&i| self.nodes[i].path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }

    /// "Did you mean …?" for a project that is not one: the closest path or name, or
    /// the path whose last segment is closest (`app` → `local/app`).
    fn closest(&self, wanted: &str) -> String {
        let last = |p: &'_ str| p.rsplit('/').next().unwrap_or(p).to_string();
        self.nodes
            .iter()
            .flat_map(|n| {
                [
                    (n.path.clone(), &n.path),
                    (n.name.clone(), &n.name),
                    (last(&n.path), &n.path),
                ]
            })
            .map(|(key, said)| (strsim::jaro_winkler(wanted, &key), said))
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, k)| format!(" Did you mean `{k}`?"))
            .unwrap_or_default()
    }

    /// The plan for destroy: every edge reversed, the last entries first.
    pub fn reversed(&self) -> Plan {
        let n = self.nodes.len();
        let mut nodes = self.nodes.clone();
        for node in nodes.iter_mut() {
            node.needs.clear();
        }
        for (i, node) in self.nodes.iter().enumerate() {
            for &j in &node.needs {
                nodes[j].needs.push(i);
            }
        }
        for (i, node) in nodes.iter_mut().enumerate() {
            node.needs.sort_unstable();
            node.rank = n - 1 - self.nodes[i].rank.min(n - 1);
            node.wave = 0;
        }
        let mut plan = Plan {
            nodes,
            order: Vec::new(),
            reversed: !self.reversed,
        };
        plan.compute_order();
        plan
    }

    /// The plan restricted to `keep`, with needs bridged through dropped nodes.
    pub fn subplan(&self, keep: &[bool]) -> Plan {
        let mut new_index = vec![usize::MAX; self.nodes.len()];
        let mut nodes = Vec::with_capacity(keep.iter().filter(|&&k| k).count());
        for (i, node) in self.nodes.iter().enumerate() {
            if keep[i] {
                new_index[i] = nodes.len();
                nodes.push(node.clone());
            }
        }
        for node in nodes.iter_mut() {
            let mut found = BTreeSet::new();
            let mut seen = BTreeSet::new();
            let mut stack: Vec<usize> = node.needs.clone();
            while let Some(j) = stack.pop() {
                if !seen.insert(j) {
                    continue;
                }
                if keep[j] {
                    found.insert(new_index[j]);
                } else {
                    stack.extend(self.nodes[j].needs.iter().copied());
                }
            }
            node.needs = found.into_iter().collect();
            node.wave = 0;
        }
        let mut plan = Plan {
            nodes,
            order: Vec::new(),
            reversed: self.reversed,
        };
        plan.compute_order();
        plan
    }

    /// Paths of the direct prerequisites of node `i`.
    pub fn needs_paths(&self, i: usize) -> Vec<&str> {
        self.nodes[i]
            .needs
            .iter()
            .map(|&j| self.nodes[j].path.as_str())
            .collect()
    }

    /// Indices of the nodes that directly need node `i`.
    pub fn dependents(&self, i: usize) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&k| self.nodes[k].needs.contains(&i))
            .collect()
    }

    /// The length of the longest chain of `weights` (critical path), for benchmarks.
    pub fn critical_path(&self, weight: impl Fn(usize) -> u64) -> u64 {
        let mut finish = vec![0u64; self.nodes.len()];
        for &i in &self.order {
            let start = self.nodes[i]
                .needs
                .iter()
                .map(|&j| finish[j])
                .max()
                .unwrap_or(0);
            finish[i] = start + weight(i);
        }
        finish.into_iter().max().unwrap_or(0)
    }
}

/// Where each stage's nodes are: infrastructure first, then the secrets step (when the
/// profile writes a cluster secret), then kubernetes.
struct Stages {
    infra_count: usize,
    secrets_idx: Option<usize>,
    k8s_start: usize,
}

impl Stages {
    /// The nodes of `profile`'s entries (and its secrets step) in stage order.
    fn lay_out(profile: &Profile, projects: Vec<Project>) -> (Vec<Node>, Stages) {
        let mut nodes: Vec<Node> = Vec::with_capacity(profile.entries.len() + 1);
        let projects: Vec<Arc<Project>> = projects.into_iter().map(Arc::new).collect();
        let push_stage = |nodes: &mut Vec<Node>, s: Stage| {
            for (e, p) in profile.entries.iter().zip(projects.iter()) {
                if e.stage == s {
                    let rank = nodes.len();
                    nodes.push(Node::of_entry(e, p, rank));
                }
            }
        };
        push_stage(&mut nodes, Stage::Infrastructure);
        let infra_count = nodes.len();
        let secrets_idx = profile.writes_cluster_secret().then(|| {
            let rank = nodes.len();
            nodes.push(Node::secrets_step(rank));
            rank
        });
        let k8s_start = nodes.len();
        push_stage(&mut nodes, Stage::Kubernetes);
        let stages = Stages {
            infra_count,
            secrets_idx,
            k8s_start,
        };
        (nodes, stages)
    }

    /// The stage barrier: infrastructure sinks -> secrets step -> kubernetes roots.
    fn add_barrier(&self, needs: &mut [BTreeSet<usize>]) {
        let mut needed_by_infra = vec![false; self.infra_count];
        for set in needs.iter().take(self.infra_count) {
            for &j in set {
                if j < self.infra_count {
                    needed_by_infra[j] = true;
                }
            }
        }
        let infra_sinks: Vec<usize> = (0..self.infra_count)
            .filter(|&i| !needed_by_infra[i])
            .collect();
        let barrier: Vec<usize> = match self.secrets_idx {
            Some(s) => {
                needs[s].extend(infra_sinks.iter().copied());
                vec![s]
            }
            None => infra_sinks,
        };
        for set in needs.iter_mut().skip(self.k8s_start) {
            if !set.iter().any(|&j| j >= self.k8s_start) {
                set.extend(barrier.iter().copied());
            }
        }
    }
}

/// In-stage needs: explicit, or the previous entry of the same list; plus what its
/// `reads:` and inputs name.
fn declared_needs(nodes: &[Node], k8s_start: usize) -> Vec<BTreeSet<usize>> {
    let by_path: std::collections::HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.path.as_str(), i))
        .collect();
    let index_of = |path: &str| by_path.get(path).copied();
    let mut needs: Vec<BTreeSet<usize>> = vec![BTreeSet::new(); nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let Some(entry) = &node.entry else { continue };
        match &entry.needs {
            Some(list) => needs[i].extend(list.iter().filter_map(|n| index_of(n))),
            None => {
                let first_of_list = i == 0 || i == k8s_start;
                if !first_of_list {
                    needs[i].insert(i - 1);
                }
            }
        }
        // `reads:` declares what its unresolved stack references read: needs too.
        for r in entry.reads.iter().flat_map(|r| r.projects()) {
            needs[i].extend(index_of(&r));
        }
        needs[i].extend(entry.inputs.iter().filter_map(|x| index_of(&x.project)));
    }
    needs
}

/// Adds, to each Pulumi node, the Pulumi projects its program's stack references name.
fn add_referenced_needs(nodes: &[Node], needs: &mut [BTreeSet<usize>]) {
    let by_name: std::collections::HashMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.kind == NodeKind::Pulumi)
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        let Some(p) = node
            .project
            .as_ref()
            .filter(|_| node.kind == NodeKind::Pulumi)
        else {
            continue;
        };
        for r in super::references::in_project(&p.dir, &node.name) {
            if let Some(super::references::Part::Literal(name)) = &r.project
                && let Some(&j) = by_name.get(name.as_str())
                && j != i
            {
                needs[i].insert(j);
            }
        }
    }
}

#[cfg(test)]
mod tests;
