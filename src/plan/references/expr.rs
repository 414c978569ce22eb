//! What an expression inside a stack name stands for: string literals (f-strings and
//! templates with their interpolations), `+` and Python's adjacent literals,
//! `fmt.Sprintf`, `get_stack()` and the like, config reads (`config::read`), the
//! variables the same file assigns (one level), the module constants of the repository
//! and, inside a helper function, its parameters. What it cannot tell is
//! [`Part::Unknown`], never a guess.

use std::path::Path;

use super::facts::{Facts, Place};
use super::helpers::Index;
use super::lex::Lang;
use super::strings::{call_of, is_name, literal, string_literal, unknown};
use super::{Part, Piece};

/// Where an expression is read: its file's language and facts, the repository's
/// constants, the project whose config namespace is the default, and the parameters of
/// the helper function it is in, if any.
#[derive(Clone, Copy)]
pub(super) struct Scope<'a> {
    pub lang: Lang,
    /// The project's Pulumi name: the namespace of a config key read without one.
    pub project: &'a str,
    /// The file, from the repository's root.
    pub file: &'a Path,
    pub facts: Option<&'a Facts>,
    pub index: Option<&'a Index>,
    /// The parameters of the helper function being read (empty elsewhere).
    pub params: &'a [String],
    /// How many variables deep the reading is: a variable's value is read once, not the
    /// variables it names in turn.
    pub depth: u8,
    /// How deeply nested the expression being read is (interpolations, wrapped
    /// names): past [`MAX_NEST`] it is unknown.
    pub nest: u8,
}

/// How deeply nested an expression is read.
const MAX_NEST: u8 = 16;

/// What a built-in call or a conventional variable name stands for: the current
/// organization, stack or project (`get_stack()`, `ctx.Stack()`, `$STRATA_STACK`,
/// a variable named `org`).
fn builtin(expr: &str, names_too: bool) -> Option<Part> {
    let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let lower = e.trim_start_matches("pulumi.").to_ascii_lowercase();
    let env = |name: &str| {
        let name = name.to_ascii_lowercase();
        lower.contains(&format!("\"{name}\""))
            || lower.contains(&format!("'{name}'"))
            || lower.ends_with(&format!(".{name}"))
    };
    let is = |calls: &[&str], names: &[&str]| {
        calls.contains(&lower.as_str()) || (names_too && names.contains(&lower.as_str()))
    };
    if is(
        &[
            "get_organization()",
            "getorganization()",
            "ctx.organization()",
        ],
        &["organization", "org"],
    ) || env("STRATA_ORG")
    {
        Some(Part::Org)
    } else if is(&["get_stack()", "getstack()", "ctx.stack()"], &["stack"])
        || env("STRATA_STACK")
        || env("PULUMI_STACK")
    {
        Some(Part::Stack)
    } else if is(
        &["get_project()", "getproject()", "ctx.project()"],
        &["project"],
    ) {
        Some(Part::Project)
    } else {
        None
    }
}

impl Scope<'_> {
    /// Where the scope reads: its file, language and facts.
    pub(super) fn place(&self) -> Place<'_> {
        Place {
            lang: self.lang,
            file: self.file,
            facts: self.facts,
        }
    }

    /// This scope, one variable deeper.
    fn deeper(&self) -> Scope<'_> {
        Scope {
            depth: self.depth + 1,
            ..*self
        }
    }

    /// This scope, one nesting deeper; `None` past [`MAX_NEST`].
    fn nested(&self) -> Option<Scope<'_>> {
        (self.nest < MAX_NEST).then(|| Scope {
            nest: self.nest + 1,
            ..*self
        })
    }

    /// The pieces of an interpolation (`{x}` of an f-string, `${x}` of a template).
    fn interpolation(&self, expr: &str) -> Vec<Piece> {
        // `{x!r}`, `{x:>4}`: a conversion or a format of a plain name.
        let e = expr.trim();
        let head = e.split(['!', ':']).next().unwrap_or(e).trim();
        let e = if self.lang == Lang::Python && is_name(head) {
            head
        } else {
            e
        };
        self.nested()
            .and_then(|s| s.expression(e))
            .unwrap_or_else(unknown)
    }

    /// The pieces of a whole stack name: like [`Scope::expression`], except that a name
    /// held in a variable the scanner does not know is unknown, whatever it is called.
    pub(super) fn name_of(&self, e: &str) -> Vec<Piece> {
        let e = e.trim();
        // Go: `pulumi.String(...)` around the name.
        if let Some(args) = call_of(e, &["pulumi.String"], self.lang) {
            return match (args.as_slice(), self.nested()) {
                ([one], Some(inner)) => inner.name_of(one),
                _ => unknown(),
            };
        }
        if is_name(e) {
            return self.term(e, false);
        }
        self.expression(e).unwrap_or_else(unknown)
    }

    /// The pieces of an expression: string literals (with f/template parts), `+`
    /// concatenation (and Python's adjacent literals), the terms of [`Scope::term`],
    /// `fmt.Sprintf`/`pulumi.Sprintf`. `None` when any of it is something else (a method
    /// call on a literal, a conditional): the scanner reads all or nothing.
    pub(super) fn expression(&self, e: &str) -> Option<Vec<Piece>> {
        let e = e.trim();
        if let Some(args) = call_of(e, &["fmt.Sprintf", "pulumi.Sprintf"], self.lang) {
            return self.nested()?.sprintf(&args);
        }
        let mut out = Vec::new();
        let mut rest = e;
        loop {
            rest = rest.trim_start();
            let prefix_len = rest
                .chars()
                .take_while(|c| matches!(c, 'f' | 'F' | 'r' | 'R' | 'b' | 'B' | 'u' | 'U'))
                .count();
            let templated = rest[..prefix_len].to_ascii_lowercase().contains('f');
            if let Some((pieces, len)) =
                string_literal(&rest[prefix_len..], templated, &|x| self.interpolation(x))
            {
                out.extend(pieces);
                rest = &rest[prefix_len + len..];
            } else {
                let end = term_end(rest)?;
                let term = rest[..end].trim();
                if !is_term(term) {
                    return None;
                }
                out.extend(self.term(term, true));
                rest = &rest[end..];
            }
            rest = rest.trim_start();
            if rest.is_empty() {
                return Some(out);
            }
            rest = self.next_operand(rest)?;
        }
    }

    /// What follows an operand: `+` and the next one, or (Python) an adjacent literal.
    fn next_operand<'s>(&self, rest: &'s str) -> Option<&'s str> {
        if let Some(r) = rest.strip_prefix('+') {
            return Some(r);
        }
        let adjacent = self.lang == Lang::Python
            && string_literal(
                rest.trim_start_matches(['f', 'F', 'r', 'R', 'b', 'B']),
                false,
                &|_| unknown(),
            )
            .is_some();
        adjacent.then_some(rest)
    }

    /// A call or a name: a parameter of the helper being read, a config read, the
    /// current organization/stack/project, a variable the file assigns, a module
    /// constant; else unknown. `names_too`: a variable named `org`, `stack` or
    /// `project` the file does not assign stands for that (inside a longer name).
    pub(super) fn term(&self, term: &str, names_too: bool) -> Vec<Piece> {
        if self.params.iter().any(|p| p == term) {
            return vec![Piece::Param(term.to_string())];
        }
        if let Some(read) = super::config::read(self.place(), self.project, term) {
            return vec![Piece::Value(read)];
        }
        if let Some(p) = builtin(term, false) {
            return vec![Piece::Value(p)];
        }
        if is_name(term) {
            if let Some(pieces) = self.variable(term) {
                return pieces;
            }
            if let Some(v) = self.constant(term) {
                return vec![Piece::Text(v)];
            }
        }
        match builtin(term, names_too) {
            Some(p) => vec![Piece::Value(p)],
            None => unknown(),
        }
    }

    /// The value of a variable the file assigns once (or always the same way), read one
    /// level deep.
    fn variable(&self, name: &str) -> Option<Vec<Piece>> {
        if self.depth > 0 {
            return None;
        }
        let exprs = self.facts?.assigned.get(name)?;
        let first = exprs.first()?;
        if exprs.iter().any(|e| e != first) {
            return Some(unknown());
        }
        Some(self.deeper().name_of(first))
    }

    /// The value of a module constant (`NAME`, `module.NAME`, `Class.NAME`).
    fn constant(&self, name: &str) -> Option<String> {
        let (qualifier, last) = match name.rsplit_once('.') {
            Some((q, n)) => (Some(q), n),
            None => (None, name),
        };
        if let (None, Some(v)) = (qualifier, self.facts.and_then(|f| f.constant(last))) {
            return Some(v.to_string());
        }
        self.index?.constant(self.place(), qualifier, last)
    }

    /// `Sprintf("%s/x/%s", a, b)`: the format's text with each verb replaced by its
    /// argument.
    fn sprintf(&self, args: &[String]) -> Option<Vec<Piece>> {
        let (first, rest) = args.split_first()?;
        let fmt = literal(first)?;
        let mut args = rest.iter();
        let mut out = Vec::new();
        let mut text = String::new();
        let mut it = fmt.chars();
        while let Some(c) = it.next() {
            if c != '%' {
                text.push(c);
                continue;
            }
            match it.next() {
                Some('%') => text.push('%'),
                Some(_) => {
                    if !text.is_empty() {
                        out.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    match args.next() {
                        Some(a) => out.extend(self.expression(a).unwrap_or_else(unknown)),
                        None => out.push(Piece::Value(Part::Unknown)),
                    }
                }
                None => {}
            }
        }
        if !text.is_empty() {
            out.push(Piece::Text(text));
        }
        Some(out)
    }
}

/// The end of a call or a name at the start of `s`: a top-level `+` or the end. `None`
/// when a string does not close or the brackets do not balance.
fn term_end(s: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        let c = s[i..].chars().next()?;
        if matches!(c, '"' | '\'' | '`') {
            i += super::lex::skip_string(&s[i..])?;
            continue;
        }
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.checked_sub(1)?,
            '+' if depth == 0 => return Some(i),
            _ => {}
        }
        i += c.len_utf8();
    }
    Some(s.len())
}

/// Whether `term` is only a name, a call or an index (`a.b(c)[d]`), not `a if b else
/// c` nor `a ?? b`.
fn is_term(term: &str) -> bool {
    let term = term.strip_prefix("new ").unwrap_or(term).trim_start();
    let head = term.split(['(', '[']).next().unwrap_or("");
    let tail_ok = match term.rfind([')', ']']) {
        Some(i) => term[i + 1..].trim().is_empty(),
        None => true,
    };
    is_name(head) && tail_ok
}
