//! `strata export`: the plan handed to engines that run beyond one machine — a GitHub
//! Actions workflow, Pulumi Kubernetes Operator `Stack` resources, or an Argo Workflows
//! DAG. Every format is built as serde values and printed with serde_yaml, in the
//! plan's execution order, under a comment that says how it was generated.
//!
//! The built-in secrets step (`@secrets`) is never exported as a step of its own: it
//! writes into the cluster with the kubeconfig of the machine that ran the
//! infrastructure stage, which a fresh runner or pod does not have. Its dependents are
//! bridged to its prerequisites instead (the stage barrier holds), and each format's
//! header says how to get the secrets into the cluster.

pub mod argo;
pub mod github_actions;
pub mod pko;

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::plan::{NodeKind, Plan};

/// The engine to export for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// A GitHub Actions workflow: one job per project, `needs:` from the graph
    GithubActions,
    /// A GitHub Actions workflow that previews a pull request into a plan bundle and
    /// applies exactly that bundle after the merge (`--review-apply`)
    GithubActionsReviewApply,
    /// Pulumi Kubernetes Operator `Stack` resources with `spec.prerequisites`
    Pko,
    /// An Argo Workflows `Workflow` with one DAG task per project
    Argo,
}

impl Format {
    /// The name on the command line (`--format`).
    pub fn as_str(self) -> &'static str {
        match self {
            Format::GithubActions | Format::GithubActionsReviewApply => "github-actions",
            Format::Pko => "pko",
            Format::Argo => "argo",
        }
    }
}

/// What the export says about the run.
#[derive(Debug, Clone, Copy)]
pub struct ExportContext<'a> {
    /// The profile name (`providers/<provider>.yaml`).
    pub provider: &'a str,
    pub stack: &'a str,
    pub infra_type: &'a str,
    /// The profile's `credentials:` (environment variables the provider reads).
    pub credentials: &'a [String],
    /// What is known now of the upstream outputs that `inputs:` read (PKO wires them
    /// into each Stack's config).
    pub inputs: Option<&'a InputValues>,
    /// The profile's concurrency pools.
    pub pools: &'a [crate::workspace::profile::Pool],
    /// The folder entry paths are relative to (the profile's `projects:`).
    pub projects_dir: &'a str,
    /// Where a GitHub Actions runner gets strata (`--strata-from`).
    pub strata_from: &'a github_actions::StrataSource,
}

impl ExportContext<'_> {
    /// "profile `NAME` (infra_type TYPE)", or "profile `NAME`" for a profile without an
    /// `infra_type:` (as `strata init` writes it): for the header notes.
    pub fn profile_named(&self) -> String {
        match self.infra_type {
            "" => format!("profile `{}`", self.provider),
            t => format!("profile `{}` (infra_type {t})", self.provider),
        }
    }
}

/// The pools that steps of `plan` run in, in the profile's order.
pub(crate) fn used_pools<'a>(
    plan: &Plan,
    pools: &'a [crate::workspace::profile::Pool],
) -> Vec<&'a crate::workspace::profile::Pool> {
    pools
        .iter()
        .filter(|p| plan.nodes.iter().any(|n| n.pool() == Some(p.name.as_str())))
        .collect()
}

/// How many steps of each pool run at once, for an export's notes: `db 1 at once, ...`.
pub(crate) fn at_once(pools: &[&crate::workspace::profile::Pool]) -> String {
    pools
        .iter()
        .map(|p| format!("{} {} at once", p.name, p.limit))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The labels of every Kubernetes object an export writes: made by strata, for which
/// provider and stack.
pub(crate) fn labels(ctx: &ExportContext) -> BTreeMap<&'static str, String> {
    let mut labels = BTreeMap::new();
    labels.insert("app.kubernetes.io/managed-by", "strata".to_string());
    labels.insert("strata/provider", dns_label(ctx.provider, 63));
    labels.insert("strata/stack", dns_label(ctx.stack, 63));
    labels
}

/// What export knows of one upstream output an `inputs:` entry reads.
#[derive(Debug, Clone, PartialEq)]
pub enum InputValue {
    /// Its value now (the upstream is deployed).
    Known(serde_json::Value),
    /// A secret output: never written into an export.
    Secret,
    /// Not deployed, or not readable here.
    Unknown,
}

/// (upstream project, output) → what is known of it.
pub type InputValues = std::collections::BTreeMap<(String, String), InputValue>;

/// The plan as YAML text for `format`.
pub fn render(plan: &Plan, format: Format, ctx: &ExportContext) -> Result<String> {
    match format {
        Format::GithubActions => github_actions::render(plan, ctx),
        Format::GithubActionsReviewApply => github_actions::review_apply::render(plan, ctx),
        Format::Pko => pko::render(plan, ctx),
        Format::Argo => argo::render(plan, ctx),
    }
}

// ---------------------------------------------------------------------------------------
// Shared by the formats

/// The plan without the built-in secrets step; whatever needed it needs its
/// prerequisites instead. Indices of the result refer to its own `nodes`.
pub(crate) fn without_builtin(plan: &Plan) -> Plan {
    let keep: Vec<bool> = plan
        .nodes
        .iter()
        .map(|n| n.kind != NodeKind::Builtin)
        .collect();
    plan.subplan(&keep)
}

/// Whether the plan has the built-in secrets step.
pub(crate) fn has_builtin(plan: &Plan) -> bool {
    plan.nodes.iter().any(|n| n.kind == NodeKind::Builtin)
}

/// The direct prerequisites of node `i`, in execution order.
pub(crate) fn needs_in_order(plan: &Plan, i: usize) -> Vec<usize> {
    let mut needs = plan.nodes[i].needs.clone();
    let pos = positions(plan);
    needs.sort_by_key(|&j| pos[j]);
    needs
}

/// The position of every node in `plan.order`.
pub(crate) fn positions(plan: &Plan) -> Vec<usize> {
    let mut pos = vec![usize::MAX; plan.nodes.len()];
    for (k, &i) in plan.order.iter().enumerate() {
        pos[i] = k;
    }
    pos
}

/// The comment block every generated file starts with: how it was made, that it is
/// regenerated rather than edited, then `notes` (each a paragraph, wrapped).
pub(crate) fn header(format: Format, ctx: &ExportContext, notes: &[String]) -> String {
    let mut lines = vec![
        format!(
            "Generated by `strata export --format {}{}{} -p {} -s {}`.",
            format.as_str(),
            if format == Format::GithubActionsReviewApply {
                " --review-apply"
            } else {
                ""
            },
            match ctx.strata_from {
                github_actions::StrataSource::Path => String::new(),
                _ if format == Format::Pko || format == Format::Argo => String::new(),
                source => format!(" --strata-from {}", source.spec()),
            },
            ctx.provider,
            ctx.stack
        ),
        format!(
            "Do not edit it: change providers/{}.yaml (or the projects) and regenerate it.",
            ctx.provider
        ),
    ];
    for note in notes {
        lines.push(String::new());
        lines.extend(wrap(note, 86));
    }
    let mut out = String::new();
    for l in lines {
        if l.is_empty() {
            out.push_str("#\n");
        } else {
            out.push_str("# ");
            out.push_str(&l);
            out.push('\n');
        }
    }
    out
}

/// Wraps `text` at `width` columns; a line starting with "- " continues indented.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut out = Vec::new();
    for para in text.split('\n') {
        let indent = if para.starts_with("- ") { "  " } else { "" };
        let mut line = String::new();
        for word in para.split(' ') {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
                out.push(std::mem::take(&mut line));
                line.push_str(indent);
            }
            if !line.is_empty() && !line.ends_with(' ') {
                line.push(' ');
            }
            line.push_str(word);
        }
        out.push(line);
    }
    out
}

/// YAML text of one or more documents (serde_yaml separates them with `---`).
pub(crate) fn to_yaml<T: Serialize>(docs: &[T]) -> Result<String> {
    let mut buf = Vec::new();
    {
        let mut ser = serde_yaml::Serializer::new(&mut buf);
        for d in docs {
            d.serialize(&mut ser)
                .map_err(|e| Error::failed(format!("cannot write the export as YAML: {e}")))?;
        }
    }
    String::from_utf8(buf)
        .map_err(|e| Error::failed(format!("cannot write the export as YAML: {e}")))
}

/// A DNS-1123 label made from `text`: lowercase letters, digits and `-`, starting and
/// ending with a letter or digit, at most `max` (≤ 63) characters. Too long a name is
/// cut and ends in a hash of the whole text, so different texts stay apart.
pub(crate) fn dns_label(text: &str, max: usize) -> String {
    let max = max.clamp(10, 63);
    let mut s = String::new();
    for c in text.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            s.push(c);
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    let s = s.trim_matches('-').to_string();
    let s = if s.is_empty() { "x".to_string() } else { s };
    if s.len() <= max {
        return s;
    }
    let hash = short_hash(text);
    let keep = max - hash.len() - 1;
    let head = s[..keep].trim_end_matches('-');
    format!("{head}-{hash}")
}

/// Eight hex digits of the SHA-256 of `text`.
fn short_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    crate::util::hex(&digest[..4])
}

/// Makes `wanted` unique among `taken` by adding `-2`, `-3`, ...; `fit` cuts a base so
/// that base plus suffix stays a valid name.
pub(crate) fn unique(
    wanted: String,
    taken: &mut BTreeSet<String>,
    fit: impl Fn(&str, usize) -> String,
) -> String {
    if taken.insert(wanted.clone()) {
        return wanted;
    }
    for n in 2.. {
        let suffix = format!("-{n}");
        let candidate = format!("{}{suffix}", fit(&wanted, suffix.len()));
        if taken.insert(candidate.clone()) {
            return candidate;
        }
    }
    unreachable!("a unique name is always found")
}

/// Names for the steps of `plan` (indexed like `plan.nodes`), made by `make` from each
/// path and kept unique in execution order.
pub(crate) fn names_in_order(
    plan: &Plan,
    make: impl Fn(&str) -> String,
    fit: impl Fn(&str, usize) -> String,
) -> Vec<String> {
    let mut names = vec![String::new(); plan.nodes.len()];
    let mut taken = BTreeSet::new();
    for &i in &plan.order {
        names[i] = unique(make(&plan.nodes[i].path), &mut taken, &fit);
    }
    names
}

/// Cuts a DNS label so that `extra` more characters fit within 63.
pub(crate) fn fit_dns(base: &str, extra: usize) -> String {
    let room = 63usize.saturating_sub(extra);
    if base.len() <= room {
        base.to_string()
    } else {
        base[..room].trim_end_matches('-').to_string()
    }
}

/// The paths of the steps whose outputs feed a command project (or anything) through
/// `inputs:` and that are command projects: their outputs live in the local state
/// (`.strata/<stack>/outputs/`), not in the Pulumi backend, so a distributed run must
/// carry them from one machine to the next.
pub(crate) fn command_output_sources(plan: &Plan) -> BTreeSet<String> {
    let commands = plan.paths_of(NodeKind::Command);
    plan.nodes
        .iter()
        .flat_map(|n| n.entry.iter().flat_map(|e| e.inputs.iter()))
        .filter(|i| commands.contains(i.project.as_str()))
        .map(|i| i.project.clone())
        .collect()
}

/// The paths whose `inputs:` come from another project (the wiring strata does and a
/// plain `pulumi up` does not).
pub(crate) fn paths_with_inputs(plan: &Plan) -> Vec<String> {
    plan.order
        .iter()
        .map(|&i| &plan.nodes[i])
        .filter(|n| n.entry.as_ref().is_some_and(|e| !e.inputs.is_empty()))
        .map(|n| n.path.clone())
        .collect()
}

#[cfg(test)]
pub(crate) mod testutil {
    //! Shared fixtures of the export tests (the plan builder is `plan::testing`).

    use crate::plan::Plan;

    pub const HEAD: &str = "description: d\ninfra_type: T\n";

    pub const CTX: super::ExportContext<'static> = super::ExportContext {
        provider: "p",
        stack: "dev",
        infra_type: "T",
        credentials: &[],
        inputs: None,
        pools: &[],
        projects_dir: "projects",
        strata_from: &crate::export::github_actions::StrataSource::Path,
    };

    pub use crate::plan::testing::plan_of;

    /// The plan of the profile `body` (after [`HEAD`]), which must build; the paths in
    /// `commands` are command projects.
    pub fn planned(body: &str, commands: &[&str]) -> Plan {
        plan_of(&format!("{HEAD}{body}"), commands).unwrap()
    }

    /// A profile with secrets (so an `@secrets` step), two infrastructure chains and a
    /// kubernetes stage with a fan-in.
    pub fn sample() -> String {
        format!(
            "{HEAD}cluster: {{kubeconfig: kubeconfig, context: dev}}\nsecrets:\n  - key: ns:pw\n    prompt: pw\ninfrastructure:\n  - path: infra/vpc\n  - path: infra/eks\n    inputs:\n      'eks:vpc': infra/vpc:id\n  - path: infra/ecr\n    needs: []\nkubernetes:\n  - path: k8s/ns\n  - path: k8s/logs\n    needs: []\n  - path: k8s/app\n    needs: [k8s/ns, k8s/logs]\n"
        )
    }

    /// The transitive prerequisites of every node, by path, skipping the built-in step:
    /// what an export must preserve.
    pub fn closure(plan: &Plan) -> std::collections::BTreeMap<String, Vec<String>> {
        let mut out = std::collections::BTreeMap::new();
        for (i, n) in plan.nodes.iter().enumerate() {
            if n.kind == crate::plan::NodeKind::Builtin {
                continue;
            }
            let mut seen = std::collections::BTreeSet::new();
            let mut stack = plan.nodes[i].needs.clone();
            while let Some(j) = stack.pop() {
                if seen.insert(j) {
                    stack.extend(plan.nodes[j].needs.iter().copied());
                }
            }
            let mut v: Vec<String> = seen
                .into_iter()
                .filter(|&j| plan.nodes[j].kind != crate::plan::NodeKind::Builtin)
                .map(|j| plan.nodes[j].path.clone())
                .collect();
            v.sort();
            out.insert(n.path.clone(), v);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::*;
    use super::*;

    #[test]
    fn dns_labels_are_valid_and_bounded() {
        assert_eq!(
            dns_label("infrastructure/aws/VPC", 63),
            "infrastructure-aws-vpc"
        );
        assert_eq!(dns_label("--a__b--", 63), "a-b");
        assert_eq!(dns_label("@@@", 63), "x");
        let long = "kubernetes/".repeat(10);
        let l = dns_label(&long, 63);
        assert!(l.len() <= 63, "{l}");
        assert!(!l.ends_with('-') && !l.starts_with('-'));
        assert_ne!(
            l,
            dns_label(&format!("{long}x"), 63),
            "the hash keeps them apart"
        );
    }

    #[test]
    fn unique_adds_a_suffix() {
        let mut taken = BTreeSet::new();
        assert_eq!(unique("a".into(), &mut taken, fit_dns), "a");
        assert_eq!(unique("a".into(), &mut taken, fit_dns), "a-2");
        assert_eq!(unique("a".into(), &mut taken, fit_dns), "a-3");
        let long = "b".repeat(63);
        assert_eq!(unique(long.clone(), &mut taken, fit_dns), long);
        let second = unique(long.clone(), &mut taken, fit_dns);
        assert_eq!(second.len(), 63);
        assert!(second.ends_with("-2"));
    }

    #[test]
    fn without_builtin_bridges_the_secrets_step() {
        let plan = plan_of(&sample(), &[]).unwrap();
        assert!(has_builtin(&plan));
        let bridged = without_builtin(&plan);
        assert!(!has_builtin(&bridged));
        let ns = bridged.index_of("k8s/ns").unwrap();
        // k8s/ns needed @secrets, which needed the infrastructure sinks.
        let mut needs = bridged.needs_paths(ns);
        needs.sort();
        assert_eq!(needs, ["infra/ecr", "infra/eks"]);
        assert_eq!(closure(&plan), closure(&bridged));
    }

    #[test]
    fn header_says_how_it_was_made() {
        let h = header(Format::Pko, &CTX, &["a note".into()]);
        assert!(h.starts_with("# Generated by `strata export --format pko -p p -s dev`."));
        assert!(h.contains("regenerate"));
        assert!(h.lines().all(|l| l.starts_with('#')), "{h}");
    }

    #[test]
    fn wrap_keeps_lines_short() {
        let text = "word ".repeat(60);
        for l in wrap(text.trim(), 40) {
            assert!(l.len() <= 40, "{l}");
        }
        let bullets = wrap(&format!("- {}", "x ".repeat(40).trim()), 20);
        assert!(bullets[1].starts_with("  "), "{bullets:?}");
    }

    #[test]
    fn command_outputs_that_feed_inputs_are_found() {
        let plan = planned(
            "infrastructure:\n  - path: build\n  - path: push\n    inputs:\n      'k:img': build:image\n  - path: other\n",
            &["build", "push", "other"],
        );
        assert_eq!(
            command_output_sources(&plan)
                .into_iter()
                .collect::<Vec<_>>(),
            ["build"]
        );
        assert_eq!(paths_with_inputs(&plan), ["push"]);
    }
}
