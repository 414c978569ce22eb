//! The `StackReference` calls of a code file: Python's `StackReference(...)`,
//! TypeScript/JavaScript's `new StackReference(...)`, Go's `NewStackReference(ctx, ...)`,
//! each read from the argument that holds the stack name (Python's `stack_name=`/`name=`,
//! TS/JS `{ name: ... }`, Go's `&StackReferenceArgs{Name: ...}`, else the name
//! argument); and the calls of the repository's helper functions, each a reference made
//! through that helper. Calls are found in the masked text (never in a comment or a
//! string); a call whose name the scanner cannot read is a reference with every part
//! unknown, at its file and line, never left out.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use super::expr::Scope;
use super::helpers::{Helper, Index, substitute};
use super::lex::{Lang, items, line_of};
use super::strings::unknown;
use super::{Piece, Reference, reference};

/// A code file being read: its text, the same masked, and the scope of its names.
pub(super) struct Source<'a> {
    pub text: &'a str,
    pub masked: &'a str,
    pub scope: Scope<'a>,
}

/// What a `StackReference` call is called in `lang`.
fn needle(lang: Lang) -> &'static str {
    if lang == Lang::Go {
        "NewStackReference("
    } else {
        "StackReference("
    }
}

impl Source<'_> {
    /// The byte offsets just after the `(` of each `StackReference` call.
    pub(super) fn calls(&self) -> Vec<usize> {
        let needle = needle(self.scope.lang);
        let mut out = Vec::new();
        let mut from = 0;
        while let Some(i) = self.masked[from..].find(needle) {
            let at = from + i;
            from = at + needle.len();
            // Not `getStackReference(`, `MyStackReference(`: the call itself.
            let before = self.masked[..at].chars().next_back();
            if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                out.push(from);
            }
        }
        out
    }

    /// The pieces of the stack name of the call whose arguments start at `args`.
    pub(super) fn name_at(&self, args: usize) -> Vec<Piece> {
        match items(&self.text[args..], self.scope.lang, false) {
            Some((args, _)) => stack_name(&args, &self.scope),
            None => unknown(),
        }
    }

    /// The `StackReference` calls of the file, but those in `skip` (the bodies of
    /// helpers), as references of `file`.
    pub(super) fn references(&self, file: &Path, skip: &[Range<usize>]) -> Vec<Reference> {
        self.calls()
            .into_iter()
            .filter(|at| !skip.iter().any(|r| r.contains(at)))
            .map(|at| reference(&self.name_at(at), file, line_of(self.text, at)))
            .collect()
    }
}

/// `key=value` (Python keyword argument) or `key: value` (object field, quoted or not):
/// the value when `item` sets `key`.
fn field<'a>(item: &'a str, key: &str, sep: char) -> Option<&'a str> {
    let rest = [key.to_string(), format!("\"{key}\""), format!("'{key}'")]
        .iter()
        .find_map(|k| item.strip_prefix(k.as_str()))?;
    let rest = rest.trim_start().strip_prefix(sep)?;
    // `name == x` is a comparison, not a keyword.
    (!rest.starts_with('=')).then_some(rest.trim())
}

/// Whether `item` is a keyword argument (`k=v`) or a splat (`*a`, `**kw`).
fn is_keyword(item: &str) -> bool {
    if item.starts_with('*') {
        return true;
    }
    let key_len = item
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(item.len());
    key_len > 0 && field(item, &item[..key_len], '=').is_some()
}

/// The stack name of a `StackReference` call with these arguments: Python's
/// `stack_name` (keyword or second argument) or else its `name`/first argument; JS/TS
/// `args.name` (`{ name: ... }`) or else the first argument; Go's
/// `&StackReferenceArgs{Name: ...}` or else the second argument (after `ctx`).
fn stack_name(args: &[String], scope: &Scope) -> Vec<Piece> {
    let name = match scope.lang {
        Lang::Python => python_name(args),
        Lang::Js => js_name(args),
        Lang::Go => go_name(args),
    };
    name.map(|e| scope.name_of(&e)).unwrap_or_else(unknown)
}

/// The argument of a Python `StackReference(...)` that holds the stack name.
fn python_name(args: &[String]) -> Option<String> {
    let kw = |k: &str| args.iter().find_map(|a| field(a, k, '='));
    let positional: Vec<&String> = args.iter().filter(|a| !is_keyword(a)).collect();
    if let Some(e) = kw("stack_name") {
        return Some(e.to_string());
    }
    if let Some(e) = positional.get(1).filter(|e| e.as_str() != "None") {
        return Some(e.to_string());
    }
    if args.iter().any(|a| a.starts_with('*')) {
        // `**kwargs` may hold `stack_name`.
        return None;
    }
    kw("name")
        .or(positional.first().map(|s| s.as_str()))
        .map(str::to_string)
}

/// The argument of a TS/JS `new StackReference(...)` that holds the stack name.
fn js_name(args: &[String]) -> Option<String> {
    let first = args.first()?;
    match args.get(1).map(String::as_str) {
        None | Some("undefined") => Some(first.clone()),
        Some(obj) if obj.starts_with('{') && obj.ends_with('}') => {
            let (fields, _) = items(&obj[1..obj.len() - 1], Lang::Js, true)?;
            let mut value = None;
            for f in &fields {
                if f.starts_with("...") || f == "name" {
                    // A spread, or `{ name }`: a variable.
                    return None;
                }
                if let Some(v) = field(f, "name", ':') {
                    value = Some(v);
                }
            }
            Some(value.unwrap_or(first).to_string())
        }
        // `args` built elsewhere.
        Some(_) => None,
    }
}

/// The argument of a Go `NewStackReference(ctx, ...)` that holds the stack name.
fn go_name(args: &[String]) -> Option<String> {
    let name = args.get(1)?;
    let Some(a) = args.get(2).map(String::as_str).filter(|a| *a != "nil") else {
        return Some(name.clone());
    };
    let body = ["&pulumi.StackReferenceArgs", "&StackReferenceArgs"]
        .iter()
        .find_map(|p| a.strip_prefix(p))
        .map(str::trim_start)
        .and_then(|b| b.strip_prefix('{'))
        .and_then(|b| b.strip_suffix('}'))?;
    let (fields, _) = items(body, Lang::Go, true)?;
    let value = fields.iter().find_map(|f| field(f, "Name", ':'));
    Some(value.unwrap_or(name).to_string())
}

/// The last segment of a dotted name.
fn last(callee: &str) -> &str {
    callee.rsplit('.').next().unwrap_or(callee)
}

/// Whether the word before byte `at` of `masked` makes `name(` a definition.
fn defines(masked: &str, at: usize) -> bool {
    let before = masked[..at].trim_end();
    ["def", "function", "func"].iter().any(|k| {
        before.ends_with(k)
            && !before[..before.len() - k.len()]
                .ends_with(|c: char| super::lex::ident_char(c) || c == '.')
    })
}

impl Source<'_> {
    /// Every call `name(` or `a.b.name(` of a name some helper has, but definitions:
    /// the byte of its `(` and the callee.
    pub(super) fn callees<'s>(
        &'s self,
        index: &'s Index,
    ) -> impl Iterator<Item = (usize, &'s str)> + 's {
        let bytes = self.masked.as_bytes();
        (0..bytes.len())
            .filter(|&i| bytes[i] == b'(')
            .filter_map(move |open| {
                let head = &self.masked[..open];
                let start = head
                    .char_indices()
                    .rev()
                    .find(|(_, c)| !(super::lex::ident_char(*c) || *c == '.'))
                    .map(|(i, c)| i + c.len_utf8())
                    .unwrap_or(0);
                let callee = &head[start..];
                let wanted = !callee.is_empty() && index.has_helper(last(callee));
                (wanted && !defines(self.masked, start)).then_some((open, callee))
            })
    }

    /// The arguments of a call of `h` whose `(` is at byte `open`, by parameter.
    fn arguments<'h>(&self, open: usize, h: &'h Helper) -> HashMap<&'h str, Vec<Piece>> {
        let Some((args, _)) = items(&self.text[open + 1..], self.scope.lang, false) else {
            return HashMap::new();
        };
        let mut out = HashMap::new();
        let mut positional = h.params.iter();
        for a in &args {
            let keyword = h.params.iter().find_map(|p| {
                let v = field(a, p, '=').filter(|_| self.scope.lang == Lang::Python)?;
                Some((p.as_str(), v))
            });
            let (param, value) = match keyword {
                Some(kv) => kv,
                None if a.starts_with('*') => break,
                None if self.scope.lang == Lang::Python && is_keyword(a) => continue,
                None => match positional.next() {
                    Some(p) => (p.as_str(), a.as_str()),
                    None => break,
                },
            };
            out.insert(param, self.argument(open, value));
        }
        out
    }

    /// The pieces of an argument of a call at byte `open`: a parameter of the function
    /// the call is in is unknown (a helper calling a helper is not followed), whatever
    /// it is called.
    fn argument(&self, open: usize, value: &str) -> Vec<Piece> {
        let facts = self.scope.facts;
        let enclosing =
            facts.and_then(|f| f.functions.iter().rev().find(|f| f.body.contains(&open)));
        let scope = Scope {
            params: enclosing.map(|f| f.params.as_slice()).unwrap_or_default(),
            ..self.scope
        };
        let pieces = scope.expression(value).unwrap_or_else(unknown);
        pieces
            .into_iter()
            .map(|p| match p {
                Piece::Param(_) => Piece::Value(super::Part::Unknown),
                other => other,
            })
            .collect()
    }

    /// The calls of helpers of `index` in the file (but those inside the bodies of the
    /// file's own helpers), each a reference of `file` made through that helper, one for each
    /// `StackReference` of the helper.
    pub(super) fn helper_calls(&self, index: &Index, file: &Path) -> Vec<Reference> {
        let skip = index.bodies_in(self.scope.file);
        let mut out = Vec::new();
        for (open, callee) in self.callees(index) {
            if skip.iter().any(|r| r.contains(&open)) {
                continue;
            }
            let Some(h) = index.helper(self.scope.place(), callee) else {
                continue;
            };
            let args = self.arguments(open, h);
            let line = line_of(self.text, open);
            for t in &h.templates {
                let pieces = substitute(t, &args, self.scope.project);
                let mut r = reference(&pieces, file, line);
                r.via = Some(h.via());
                out.push(r);
            }
        }
        out
    }
}
