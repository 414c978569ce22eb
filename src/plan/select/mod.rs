//! Selectors: the `--filter` language (and `--project`/`--with-deps`/`--from` as its
//! shorthands), parsed at the door and evaluated over a plan's forward graph.
//!
//! A selector is a list of filters (one per `--filter` value or shorthand); a filter is
//! terms joined by `|` that must all hold (Terragrunt's intersection); a term is an
//! optional `!`, then a target with `...` on either side for the graph (pnpm's and
//! Terragrunt's direction: `X...` is X and what it needs, `...X` X and what needs it),
//! `^` leaving the targets themselves out. The filters that have a positive term are a
//! union; those made only of negated terms then narrow it. The grammar is in `parse.rs`;
//! the sets in `eval.rs`.

mod eval;
mod git;
mod glob;
mod parse;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

use std::fmt;
use std::path::Path;

use crate::error::Result;

use super::Plan;

pub use git::Git;

/// What a term names before the graph operators apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A project path or Pulumi project name, exactly as `Plan::resolve` takes it.
    Project(String),
    /// A path glob (`*`, `?` within a segment, `**` for any number of segments); without
    /// a `/` it also matches project names.
    Glob(String),
    /// `tag:NAME`: the entries whose `tags:` list it.
    Tag(String),
    /// `[A...B]` or `[REF]`: the projects whose files changed.
    Changed(Range),
    /// `from:X` (what `--from X` means): X and everything ordered after it in the run.
    From(String),
}

/// A git range of a `[...]` target.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Range {
    /// `[A...B]`: what changed between the merge base of A and B, and B.
    Between(String, String),
    /// `[REF]`: what changed since REF, the uncommitted work tree included.
    Since(String),
}

/// One term of a filter: `!`, `...`, `^`, a target, `^`, `...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub negated: bool,
    /// `...X`: and everything that needs it, transitively.
    pub dependents: bool,
    pub target: Target,
    /// `X...`: and everything it needs, transitively.
    pub dependencies: bool,
    /// `^`: the targets themselves are left out (unless another target reaches them).
    pub strict: bool,
}

/// One `--filter` value, or a shorthand's translation: terms that must all hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    pub terms: Vec<Term>,
    /// How the user wrote it, for messages: `--filter 'infra/*'`, `--project vpc`.
    pub source: String,
}

impl Filter {
    /// A filter with a positive term adds to the union; one of negated terms only
    /// narrows what the others select.
    pub fn is_positive(&self) -> bool {
        self.terms.iter().any(|t| !t.negated)
    }
}

/// `--project`, `--with-deps` and `--from`, as the user gave them.
#[derive(Debug, Clone, Default)]
pub struct Shorthands {
    pub projects: Vec<String>,
    pub with_deps: bool,
    pub from: Option<String>,
}

/// Which projects a command takes: every `--filter` and shorthand, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    pub filters: Vec<Filter>,
}

impl Selector {
    /// Parses `--filter` values and adds the shorthands: `--project X` is the filter
    /// `X`, with `--with-deps` `X...` (for destroy `...X`: what depends on it goes
    /// first); `--from X` adds `| from:X` to every positive filter (or stands alone).
    /// A value that does not parse is a usage error pointing at its column.
    pub fn new(filters: &[String], short: &Shorthands, destroy: bool) -> Result<Selector> {
        let mut out = Vec::new();
        for text in filters {
            out.push(parse::filter(text)?);
        }
        for p in &short.projects {
            let mut source = format!("--project {p}");
            if short.with_deps {
                source.push_str(" --with-deps");
            }
            out.push(Filter {
                terms: vec![Term {
                    negated: false,
                    dependents: short.with_deps && destroy,
                    target: Target::Project(p.clone()),
                    dependencies: short.with_deps && !destroy,
                    strict: false,
                }],
                source,
            });
        }
        if let Some(from) = &short.from {
            let term = Term {
                negated: false,
                dependents: false,
                target: Target::From(from.clone()),
                dependencies: false,
                strict: false,
            };
            let mut narrowed = false;
            for f in out.iter_mut().filter(|f| f.is_positive()) {
                f.terms.push(term.clone());
                f.source.push_str(&format!(" --from {from}"));
                narrowed = true;
            }
            if !narrowed {
                out.push(Filter {
                    terms: vec![term],
                    source: format!("--from {from}"),
                });
            }
        }
        Ok(Selector { filters: out })
    }

    /// No filter: the whole plan.
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// The steps of `plan` (a forward plan) this selector picks. Refused (exit 3) when a
    /// name, glob, tag or `from:` matches nothing, or the whole selects nothing; a
    /// selection that is empty because no project changed in a git range is not an
    /// error: it comes back empty, with the reason.
    pub fn evaluate(&self, plan: &Plan, ctx: &Context) -> Result<Selection> {
        eval::evaluate(self, plan, ctx)
    }
}

/// What a selector is evaluated against besides the graph.
pub struct Context<'a> {
    /// The run's order (node indices; reversed for destroy): what `from:` counts in.
    pub order: &'a [usize],
    /// The workspace root: project folders and `watch:` paths are relative to it.
    pub root: &'a Path,
    /// The profile's `watch:` (read by every project).
    pub watch: &'a [String],
    /// Where the files changed in a git range come from.
    pub changes: &'a dyn Changes,
}

/// The files changed in a git range, as paths relative to the workspace root.
pub trait Changes {
    fn changed(&self, range: &Range) -> Result<Vec<String>>;
}

/// The steps a selector picked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Per node of the plan: selected or not.
    pub keep: Vec<bool>,
    /// Set when nothing is selected because no project changed in a git range: the
    /// sentence to print, and there is nothing to do.
    pub empty_because: Option<String>,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Project(p) | Target::Glob(p) => write!(f, "{p}"),
            Target::Tag(t) => write!(f, "tag:{t}"),
            Target::Changed(Range::Between(a, b)) => write!(f, "[{a}...{b}]"),
            Target::Changed(Range::Since(r)) => write!(f, "[{r}]"),
            Target::From(p) => write!(f, "from:{p}"),
        }
    }
}

impl fmt::Display for Term {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let caret = if self.strict { "^" } else { "" };
        if self.negated {
            write!(f, "!")?;
        }
        if self.dependents {
            write!(f, "...{caret}")?;
        }
        write!(f, "{}", self.target)?;
        if self.dependencies {
            let caret = if self.dependents { "" } else { caret };
            write!(f, "{caret}...")?;
        }
        Ok(())
    }
}

impl fmt::Display for Filter {
    /// The filter in the selector language (what `parse` reads back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let terms: Vec<String> = self.terms.iter().map(Term::to_string).collect();
        write!(f, "{}", terms.join(" | "))
    }
}
