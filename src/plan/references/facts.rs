//! What one code file defines, read line by line from its masked text (strings and
//! comments blanked, see `lex::mask`), the expressions taken from its text: the names it
//! assigns (`x = ...`, `const x = ...`, `x := ...`), its module-level string constants
//! (`NAME = "x"`, `export const NAME = "x"`, Go's `const`, Python class attributes as
//! `Class.NAME`), its imports (which module a name stands for) and its functions (name,
//! parameters, the bytes of their body).

use std::collections::HashMap;
use std::ops::Range;

use std::path::Path;

use super::lex::{Lang, closing, items, statement};
use super::strings::literal;

/// Where an expression is read: its file (from the repository's root), its language and
/// what the file defines.
#[derive(Clone, Copy)]
pub(super) struct Place<'a> {
    pub lang: Lang,
    pub file: &'a Path,
    pub facts: Option<&'a Facts>,
}

/// A function a file defines.
#[derive(Debug, Clone)]
pub(super) struct Function {
    pub name: String,
    pub params: Vec<String>,
    /// The line of its definition (1-based).
    pub line: usize,
    /// Its parameters and body, as bytes of the file.
    pub body: Range<usize>,
}

/// What one file defines.
#[derive(Debug, Default)]
pub(super) struct Facts {
    /// Every name the file assigns, with each expression assigned to it.
    pub assigned: HashMap<String, Vec<String>>,
    /// Module-level string constants (`NAME`, `Class.NAME`) and their values.
    pub constants: HashMap<String, String>,
    /// Names the file uses for modules (an import's alias, or its last segment) → the
    /// module's name (the last segment of its path, without extension).
    pub modules: HashMap<String, String>,
    /// Names imported from a module (`from m import X as Y`, `import { X as Y }`):
    /// the name here → (module, its name there).
    pub imported: HashMap<String, (String, String)>,
    pub functions: Vec<Function>,
}

impl Facts {
    /// The module-level constant `name` of this file.
    pub(super) fn constant(&self, name: &str) -> Option<&str> {
        self.constants.get(name).map(String::as_str)
    }

    /// What a file defines: `text` as written, `masked` the same with strings and
    /// comments blanked.
    pub(super) fn of(text: &str, masked: &str, lang: Lang) -> Facts {
        let mut out = Facts::default();
        let mut reader = Reader {
            text,
            masked,
            lang,
            class: None,
            line: 0,
        };
        let mut start = 0;
        let mut depth = 0i64;
        for line in masked.split_inclusive('\n') {
            reader.line += 1;
            // A line inside brackets opened before it continues a statement.
            if depth <= 0 {
                reader.line(start, line.trim_end_matches(['\n', '\r']), &mut out);
            }
            depth = (depth + brackets(line, lang)).max(0);
            start += line.len();
        }
        out
    }
}

/// The state of the line-by-line read.
struct Reader<'t> {
    text: &'t str,
    masked: &'t str,
    lang: Lang,
    /// The Python class whose body the lines are in, and the indentation of its body.
    class: Option<(String, Option<usize>)>,
    /// The line being read (1-based): a function's line is its definition's.
    line: usize,
}

/// How many more brackets `line` (masked) opens than it closes: all of them in Python,
/// parentheses and square brackets elsewhere (braces hold function bodies).
fn brackets(line: &str, lang: Lang) -> i64 {
    line.bytes()
        .map(|b| match b {
            b'(' | b'[' => 1,
            b')' | b']' => -1,
            b'{' if lang == Lang::Python => 1,
            b'}' if lang == Lang::Python => -1,
            _ => 0,
        })
        .sum()
}

/// The identifier at the start of `s`, and what follows it.
fn ident(s: &str) -> Option<(&str, &str)> {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .unwrap_or(s.len());
    let first = s.chars().next()?;
    (end > 0 && !first.is_ascii_digit()).then(|| (&s[..end], &s[end..]))
}

/// `s` after the keyword `kw` and the spaces that follow it.
fn keyword<'s>(s: &'s str, kw: &str) -> Option<&'s str> {
    let rest = s.strip_prefix(kw)?;
    rest.starts_with([' ', '\t']).then(|| rest.trim_start())
}

/// The module a path of an import names: its last segment, without extension.
fn module_of(path: &str) -> String {
    let last = path
        .trim_end_matches('/')
        .rsplit(['/', '.'])
        .find(|s| !s.is_empty() && !matches!(*s, "js" | "ts" | "mjs" | "py" | "go" | "index"));
    last.unwrap_or(path).to_string()
}

impl Reader<'_> {
    /// Reads the line at byte `start` (`line`: its masked text).
    fn line(&mut self, start: usize, line: &str, out: &mut Facts) {
        let trimmed = line.trim_start();
        if trimmed.is_empty() {
            return;
        }
        let indent = line.len() - trimmed.len();
        let at = start + indent;
        match self.lang {
            Lang::Python => self.python(at, indent, trimmed, out),
            Lang::Js => self.js(at, indent, trimmed, out),
            Lang::Go => self.go(at, indent, trimmed, out),
        }
    }

    /// The original text of the statement that starts at byte `at`.
    fn statement_at(&self, at: usize) -> &str {
        let rest = &self.text[at..];
        rest[..statement(rest, self.lang)].trim()
    }

    /// Records `name = <expression at byte at>`; a module constant too when it is at
    /// the top level (`top`) and a plain string.
    fn assign(&self, name: &str, at: usize, top: bool, out: &mut Facts) {
        let expr = self.statement_at(at).to_string();
        if top && let Some(v) = literal(&expr) {
            out.constants.insert(name.to_string(), v);
        }
        self.function_value(name, at, out);
        out.assigned.entry(name.to_string()).or_default().push(expr);
    }

    /// A function assigned to a name: `(a, b) => ...`, `(a): T => {...}`,
    /// `function (a) {...}`; `at` is the byte after the `=`.
    fn function_value(&self, name: &str, at: usize, out: &mut Facts) {
        let rest = &self.masked[at..];
        let e = rest.trim_start();
        let e = e.strip_prefix("async").map(str::trim_start).unwrap_or(e);
        let (e, is_fn) = match e.strip_prefix("function") {
            Some(r) => (r.trim_start(), true),
            None => (e, false),
        };
        if !e.starts_with('(') {
            return;
        }
        let open = self.masked.len() - e.len();
        let close = open + 1 + closing(&self.text[open + 1..], self.lang);
        let end = if is_fn {
            self.braced_end(close.min(self.text.len()))
        } else {
            match self.arrow_body(close) {
                Some(end) => end,
                None => return,
            }
        };
        self.function(name, open, end, out);
    }

    /// The end of the body of an arrow function whose parameters close at byte
    /// `close`: `=> {...}` or `=> expression` (on the next line too).
    fn arrow_body(&self, close: usize) -> Option<usize> {
        let after = self.masked.get(close + 1..)?;
        let arrow = after.find("=>")?;
        let between = after[..arrow].trim();
        if !(between.is_empty() || between.starts_with(':')) || between.contains([';', '=']) {
            return None;
        }
        let body = &after[arrow + 2..];
        let start = self.masked.len() - body.trim_start().len();
        Some(if body.trim_start().starts_with('{') {
            self.braced_end(start)
        } else {
            start + statement(&self.text[start..], self.lang)
        })
    }

    /// A function whose parameter list opens at byte `open` (its `(`), its body from
    /// there to `end`.
    fn function(&self, name: &str, open: usize, end: usize, out: &mut Facts) {
        let Some((params, _)) = items(&self.text[open + 1..], self.lang, false) else {
            return;
        };
        out.functions.push(Function {
            name: name.to_string(),
            params: params.iter().filter_map(|p| param(p, self.lang)).collect(),
            line: self.line,
            body: open..end.max(open),
        });
    }

    /// The end of a brace-delimited body: after the `{` that follows byte `from`.
    fn braced_end(&self, from: usize) -> usize {
        match self.masked[from..].find('{') {
            Some(i) => {
                let body = from + i + 1;
                body + closing(&self.text[body..], self.lang)
            }
            None => self.text.len(),
        }
    }

    /// The end of a Python block whose header line starts at `at` with `indent`: the
    /// start of the next line indented no deeper.
    fn block_end(&self, at: usize, indent: usize) -> usize {
        let mut pos = at + self.masked[at..].find('\n').map(|i| i + 1).unwrap_or(0);
        if pos == at {
            return self.text.len();
        }
        for line in self.masked[pos..].split_inclusive('\n') {
            let t = line.trim_start();
            if !t.trim().is_empty() && line.len() - t.len() <= indent {
                return pos;
            }
            pos += line.len();
        }
        self.text.len()
    }
}

/// The name of a parameter (`name: str = "x"`, `*args`, `project?: string`,
/// `ctx *pulumi.Context`), `None` for `self`, `cls` and destructuring.
fn param(p: &str, lang: Lang) -> Option<String> {
    let p = p.trim_start_matches(['*', '.', '&']).trim_start();
    let (name, _) = ident(p)?;
    let skip = lang == Lang::Python && matches!(name, "self" | "cls");
    (!skip).then(|| name.to_string())
}

mod lines;
