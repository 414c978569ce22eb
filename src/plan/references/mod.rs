//! Stack references found in the code of each Pulumi project, and what they point at:
//! the model of a reference (this file: its parts, its name's pieces, the substitution
//! of config values), and the files that read and resolve them:
//!
//! - `lex`: strings, comments and brackets of Python, TypeScript/JavaScript and Go;
//! - `strings`: string literals (f-strings, templates) and a call's arguments;
//! - `expr`: what an expression of a name stands for (literals, `get_stack()`, config
//!   reads, variables of the file, module constants of the repository);
//! - `code`: the `StackReference` calls of a code file, and the calls of helpers;
//! - `facts`: what one file defines (assignments, imports, constants, functions);
//! - `helpers`: the repository's index of constants and helper functions;
//! - `repo`: the walk over the repository and its projects' files (tests and
//!   languages strata does not read left out);
//! - `yaml`: Pulumi YAML programs;
//! - `config`: the value of a config key for a stack;
//! - `resolve`: which project a reference names, for `strata init` and for a run.

mod code;
mod config;
mod declared;
mod expr;
mod facts;
mod helpers;
mod lex;
mod repo;
mod resolve;
mod strings;
mod yaml;

use std::path::{Path, PathBuf};

use serde::Serialize;

pub use config::{StackValues, config_value, stack_config_dir, stacks_of};
pub use declared::{Undeclared, read_targets, refusal, refused, undeclared};
pub use repo::{NotRead, Repo, in_project, not_read, source_files};
pub use resolve::{Context, Found, Resolution, of_plan, resolve, targets, unreadable};

/// One part of a stack name (`org/project/stack`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "value")]
pub enum Part {
    /// Written out: `organization`, `vpc`, `dev`.
    Literal(String),
    /// The current organization (`${pulumi.organization}`, `get_organization()`,
    /// `$STRATA_ORG`).
    Org,
    /// The current project.
    Project,
    /// The current stack (`${pulumi.stack}`, `get_stack()`, `$STRATA_STACK`).
    Stack,
    /// The value of a config key (`namespace:key`, as Pulumi reads it), known once a
    /// stack's config is (see [`Reference::with_config`]).
    Config(String),
    /// Text and one piece the scanner cannot tell (`network-{prefix}`): the text with a
    /// `*` for that piece (`network-*`). A project part like this resolves when exactly
    /// one project name fits it.
    Pattern(String),
    /// Something the scanner cannot tell (a variable, a parameter).
    Unknown,
}

/// A piece of a name as written: text, or a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Text(String),
    Value(Part),
    /// A parameter of a helper function, inside the helper's own name (replaced by the
    /// argument of each call).
    Param(String),
}

/// A stack reference in a program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// The name as the scanner read it: `${org}/kubeconfig/${stack}`,
    /// `${config:app:networkStack}`.
    pub name: String,
    /// `None` when the name has no organization part (`project/stack`, `stack`).
    pub org: Option<Part>,
    /// `None` for a bare stack name (a stack of the same project).
    pub project: Option<Part>,
    pub stack: Part,
    /// Where it is: the file (relative to the project folder) and its line (1-based).
    pub file: PathBuf,
    pub line: usize,
    /// The helper function it was made through (`lib/refs.py:3 stack_ref`: its file
    /// from the repository's root, the line of its definition, its name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// The pieces of the name, kept to substitute config values.
    #[serde(skip)]
    pub pieces: Vec<Piece>,
    /// The outputs the program reads of it, each with its line (1-based): those a YAML
    /// program reads as `${ref.outputs["name"]}` or `${ref.outputs.name}`. Empty where
    /// the scanner cannot tell (programs in code languages).
    #[serde(skip)]
    pub outputs: Vec<(String, usize)>,
}

impl Reference {
    /// Whether the scanner could not tell which project's stack this reads: then the
    /// program may read any stack (a name in a variable, arguments built elsewhere).
    pub fn unreadable(&self) -> bool {
        self.project == Some(Part::Unknown)
    }

    /// The config keys its name reads.
    pub fn config_keys(&self) -> Vec<&str> {
        self.pieces
            .iter()
            .filter_map(|p| match p {
                Piece::Value(Part::Config(k)) => Some(k.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The reference with each config value `lookup` knows (by `namespace:key`) put in
    /// its name, the name split into parts again: a value may be a whole
    /// `org/project/stack` or one part.
    pub fn with_config(&self, lookup: &dyn Fn(&str) -> Option<String>) -> Reference {
        if self.config_keys().is_empty() {
            return self.clone();
        }
        let pieces: Vec<Piece> = self
            .pieces
            .iter()
            .map(|p| match p {
                Piece::Value(Part::Config(k)) => lookup(k).map(Piece::Text).unwrap_or(p.clone()),
                _ => p.clone(),
            })
            .collect();
        let mut r = reference(&pieces, &self.file, self.line);
        r.via = self.via.clone();
        r.outputs = self.outputs.clone();
        r
    }
}

/// The pieces of `pieces`, split at `/` into parts.
fn split_parts(pieces: &[Piece]) -> Vec<Vec<Piece>> {
    let mut parts: Vec<Vec<Piece>> = vec![Vec::new()];
    for p in pieces {
        match p {
            Piece::Text(t) => {
                for (k, seg) in t.split('/').enumerate() {
                    if k > 0 {
                        parts.push(Vec::new());
                    }
                    if !seg.is_empty()
                        && let Some(last) = parts.last_mut()
                    {
                        last.push(Piece::Text(seg.to_string()));
                    }
                }
            }
            _ => {
                if let Some(last) = parts.last_mut() {
                    last.push(p.clone());
                }
            }
        }
    }
    parts
}

/// A part from its pieces: a lone placeholder is that placeholder, text alone is
/// literal, text and one placeholder a pattern, anything else unknown.
fn to_part(ps: &[Piece]) -> Part {
    let values = ps.iter().filter(|p| !matches!(p, Piece::Text(_))).count();
    match ps {
        [Piece::Value(v)] => v.clone(),
        _ if values == 0 => Part::Literal(text_of(ps, "")),
        _ if values == 1 => Part::Pattern(text_of(ps, "*")),
        _ => Part::Unknown,
    }
}

/// The text of `ps`, each placeholder written `hole`.
fn text_of(ps: &[Piece], hole: &str) -> String {
    ps.iter()
        .map(|p| match p {
            Piece::Text(t) => t.as_str(),
            _ => hole,
        })
        .collect()
}

/// The name as shown: text, and `${...}` for each placeholder.
fn shown(pieces: &[Piece]) -> String {
    pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.clone(),
            Piece::Value(Part::Org) => "${org}".into(),
            Piece::Value(Part::Project) => "${project}".into(),
            Piece::Value(Part::Stack) => "${stack}".into(),
            Piece::Value(Part::Config(k)) => format!("${{config:{k}}}"),
            Piece::Param(p) => format!("${{{p}}}"),
            Piece::Value(_) => "${?}".into(),
        })
        .collect()
}

/// The reference of a name made of `pieces`. A name made of one part that is unknown or
/// mixed (a variable, `f"{x}-net"`) may hold slashes, so it may name any project of any
/// organization: all its parts are unknown. So are the parts of a name of more than
/// three parts. A name that is one config value is that value in every part.
fn reference(pieces: &[Piece], file: &Path, line: usize) -> Reference {
    let parts: Vec<Part> = split_parts(pieces).iter().map(|p| to_part(p)).collect();
    let (org, project, stack) = match parts.as_slice() {
        [Part::Config(k)] => {
            let c = Part::Config(k.clone());
            (Some(c.clone()), Some(c.clone()), c)
        }
        [Part::Unknown | Part::Pattern(_)] => unknown_parts(),
        [stack] => (None, None, stack.clone()),
        [project, stack] => (None, Some(project.clone()), stack.clone()),
        [org, project, stack] => (Some(org.clone()), Some(project.clone()), stack.clone()),
        _ => unknown_parts(),
    };
    let unreadable = project == Some(Part::Unknown) && org == Some(Part::Unknown);
    Reference {
        name: if unreadable && parts.len() != 3 {
            "${?}".into()
        } else {
            shown(pieces)
        },
        org,
        project,
        stack,
        file: file.to_path_buf(),
        line,
        via: None,
        pieces: pieces.to_vec(),
        outputs: Vec::new(),
    }
}

/// Every part unknown.
fn unknown_parts() -> (Option<Part>, Option<Part>, Part) {
    (Some(Part::Unknown), Some(Part::Unknown), Part::Unknown)
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_forms;
#[cfg(test)]
mod tests_repo;
