//! The lines of each language that define something: Python's `import`, `from`,
//! `class`, `def` and assignments; TS/JS's `import`, `function`, `const`/`let`/`var`
//! and `require`; Go's `import`, `func`, `const`/`var` (blocks too) and `:=`.

use super::super::lex::{Lang, closing};
use super::super::strings::{call_of, literal};
use super::{Facts, Reader, ident, keyword, module_of};

/// After a name: the offset just past the `=` of an assignment (`= x`, `: T = x`
/// when `annotated`), not `==`, `=>`, `+=`.
fn assignment_eq(rest: &str, annotated: bool) -> Option<usize> {
    let r = rest.trim_start();
    let mut off = rest.len() - r.len();
    let r = match r.strip_prefix(':') {
        Some(t) if annotated && !t.starts_with('=') => {
            let eq = r.find('=')?;
            off += eq;
            &r[eq..]
        }
        _ => r,
    };
    let after = r.strip_prefix('=')?;
    (!after.starts_with(['=', '>'])).then_some(off + 1)
}

impl Reader<'_> {
    /// The byte of `s`, a slice of the masked text.
    fn at_of(&self, s: &str) -> usize {
        s.as_ptr() as usize - self.masked.as_ptr() as usize
    }

    pub(super) fn python(&mut self, at: usize, indent: usize, t: &str, out: &mut Facts) {
        self.class_attribute(indent, t, out);
        let def = keyword(t, "def").or_else(|| keyword(t, "async").and_then(|r| keyword(r, "def")));
        if let Some((name, rest)) = def.and_then(ident)
            && let Some(open) = rest.find('(')
        {
            let end = self.block_end(at, indent);
            self.function(name, self.at_of(rest) + open, end, out);
        } else if let Some((name, _)) = keyword(t, "class").and_then(ident) {
            self.class = (indent == 0).then(|| (name.to_string(), None));
        } else if keyword(t, "import").is_some() {
            self.python_import(at, out);
        } else if let Some(rest) = keyword(t, "from") {
            self.python_from(at, rest, out);
        } else if let Some((name, rest)) = ident(t)
            && let Some(eq) = assignment_eq(rest, true)
        {
            self.assign(name, self.at_of(rest) + eq, indent == 0, out);
        }
    }

    /// `NAME = "x"` at the first indentation of a top-level class's body: `Class.NAME`.
    fn class_attribute(&mut self, indent: usize, t: &str, out: &mut Facts) {
        if indent == 0 {
            if keyword(t, "class").is_none() {
                self.class = None;
            }
            return;
        }
        let Some((class, body)) = self.class.as_mut() else {
            return;
        };
        if *body.get_or_insert(indent) != indent {
            return;
        }
        let class = class.clone();
        if let Some((name, rest)) = ident(t)
            && let Some(eq) = assignment_eq(rest, true)
            && let Some(v) = literal(self.statement_at(self.at_of(rest) + eq))
        {
            out.constants.insert(format!("{class}.{name}"), v);
        }
    }

    /// `import a.b.c`, `import a.b as x, d`.
    fn python_import(&self, at: usize, out: &mut Facts) {
        let stmt = self.statement_at(at);
        let list = stmt.strip_prefix("import").unwrap_or("");
        for item in list.split(',') {
            let mut words = item.split_whitespace();
            let Some(path) = words.next() else { continue };
            let module = module_of(path);
            let alias = match (words.next(), words.next()) {
                (Some("as"), Some(a)) => a.to_string(),
                _ => path.to_string(),
            };
            out.modules.insert(alias, module);
        }
    }

    /// `from a.b import c, d as e` (parenthesised over lines too): each name imported,
    /// and a module when it is one (`from lib import names`).
    fn python_from(&self, at: usize, rest: &str, out: &mut Facts) {
        let Some((path, _)) = rest.split_once(char::is_whitespace) else {
            return;
        };
        let module = module_of(path.trim_start_matches('.'));
        let stmt = self.statement_at(at);
        let Some((_, list)) = stmt.split_once(" import ") else {
            return;
        };
        self.names(list, &module, out);
    }

    /// The names of `list` (`a, b as c`, in parentheses or braces or not) imported from
    /// `module`.
    fn names(&self, list: &str, module: &str, out: &mut Facts) {
        let list = list.trim().trim_start_matches(['(', '{']);
        let list = list.trim_end().trim_end_matches([')', '}']);
        for item in list.split(',') {
            let mut words = item.split_whitespace();
            let Some(name) = words.next() else { continue };
            let local = match (words.next(), words.next()) {
                (Some("as"), Some(a)) => a,
                _ => name,
            };
            out.imported
                .insert(local.to_string(), (module.to_string(), name.to_string()));
            out.modules.insert(local.to_string(), name.to_string());
        }
    }

    pub(super) fn js(&mut self, _at: usize, indent: usize, t: &str, out: &mut Facts) {
        let t = keyword(t, "export").unwrap_or(t);
        let t = keyword(t, "default").unwrap_or(t);
        let t = keyword(t, "async").unwrap_or(t);
        if keyword(t, "import").is_some() {
            self.js_import(self.at_of(t), out);
        } else if let Some(rest) = keyword(t, "function").or_else(|| t.strip_prefix("function*"))
            && let Some((name, after)) = ident(rest.trim_start())
            && let Some(open) = after.find('(')
        {
            let open = self.at_of(after) + open;
            self.braced_function(name, open, out);
        } else if let Some(rest) = ["const", "let", "var"].iter().find_map(|k| keyword(t, k))
            && let Some((name, rest)) = ident(rest)
            && let Some(eq) = assignment_eq(rest, true)
        {
            let at = self.at_of(rest) + eq;
            self.assign(name, at, indent == 0, out);
            let expr = self.statement_at(at);
            if let Some(path) = call_of(expr, &["require"], Lang::Js)
                .and_then(|a| a.first().and_then(|p| literal(p)))
            {
                out.modules.insert(name.to_string(), module_of(&path));
            }
        }
    }

    /// A function whose parameters open at byte `open` and whose body is in braces.
    fn braced_function(&self, name: &str, open: usize, out: &mut Facts) {
        let close = open + 1 + closing(&self.text[open + 1..], self.lang);
        let end = self.braced_end(close.min(self.text.len()));
        self.function(name, open, end, out);
    }

    /// `import * as x from "p"`, `import x, { a, b as c } from "p"`.
    fn js_import(&self, at: usize, out: &mut Facts) {
        let stmt = self.statement_at(at);
        let Some((what, path)) = stmt.rsplit_once(" from ") else {
            return;
        };
        let Some(path) = literal(path.trim().trim_end_matches(';')) else {
            return;
        };
        let module = module_of(&path);
        let what = what.trim_start_matches("import").trim();
        let what = what.strip_prefix("type ").unwrap_or(what);
        if let Some(alias) = what.strip_prefix('*').map(str::trim) {
            let alias = alias.strip_prefix("as").map(str::trim).unwrap_or(alias);
            out.modules.insert(alias.to_string(), module);
            return;
        }
        let (default, braced) = match what.find('{') {
            Some(i) => (what[..i].trim_end_matches([',', ' ']), &what[i..]),
            None => (what, ""),
        };
        if !default.is_empty() {
            out.modules
                .insert(default.trim().to_string(), module.clone());
        }
        if !braced.is_empty() {
            self.names(braced, &module, out);
        }
    }

    pub(super) fn go(&mut self, at: usize, indent: usize, t: &str, out: &mut Facts) {
        if keyword(t, "import").is_some() || t.starts_with("import(") {
            self.go_import(at, out);
        } else if let Some(rest) = t.strip_prefix("func") {
            self.go_func(rest, out);
        } else if let Some(rest) = keyword(t, "const").or_else(|| keyword(t, "var")) {
            self.go_const(rest, indent == 0, out);
        } else if let Some((name, rest)) = ident(t)
            && let Some(r) = rest.trim_start().strip_prefix(":=")
        {
            let at = self.at_of(r);
            self.assign(name, at, false, out);
        }
    }

    /// `func Name(...) ... {`, `func (r *T) Name(...) {`.
    fn go_func(&self, rest: &str, out: &mut Facts) {
        let mut rest = rest.trim_start();
        if rest.starts_with('(') {
            let skip = closing(&rest[1..], Lang::Go) + 2;
            rest = rest.get(skip..).unwrap_or("").trim_start();
        }
        if let Some((name, after)) = ident(rest)
            && let Some(open) = after.find('(')
        {
            let open = self.at_of(after) + open;
            self.braced_function(name, open, out);
        }
    }

    /// `import "p"`, `import x "p"`, `import ( ... )`.
    fn go_import(&self, at: usize, out: &mut Facts) {
        let stmt = self.statement_at(at);
        let body = stmt.trim_start_matches("import").trim();
        let body = body.trim_start_matches('(').trim_end_matches(')');
        for line in body.lines() {
            let line = line.trim();
            let (alias, path) = match line.find(['"', '`']) {
                Some(i) => (line[..i].trim(), &line[i..]),
                None => continue,
            };
            let Some(path) = literal(path) else { continue };
            let module = module_of(&path);
            let alias = if alias.is_empty() { &module } else { alias };
            out.modules.insert(alias.to_string(), module.clone());
        }
    }

    /// `const Name = "x"`, `const Name Type = "x"`, `const ( ... )` (and `var`).
    fn go_const(&self, rest: &str, top: bool, out: &mut Facts) {
        if rest.starts_with('(') {
            let block = self.statement_at(self.at_of(rest));
            let body = block.trim_start_matches('(').trim_end_matches(')');
            for line in body.lines() {
                let Some((name, value)) = go_spec(line.trim()) else {
                    continue;
                };
                if top && let Some(v) = literal(value) {
                    out.constants.insert(name.to_string(), v);
                }
            }
            return;
        }
        if let Some((name, r)) = ident(rest)
            && let Some(eq) = r.find('=')
            && r[..eq]
                .trim()
                .chars()
                .all(|c| c.is_alphanumeric() || c == '.' || c == '_')
        {
            let at = self.at_of(r) + eq + 1;
            self.assign(name, at, top, out);
        }
    }
}

/// `Name = "x"` or `Name Type = "x"` of a Go `const ( ... )` block: the name and the
/// value's text.
fn go_spec(line: &str) -> Option<(&str, &str)> {
    let (name, rest) = ident(line)?;
    let (ty, value) = rest.split_once('=')?;
    let ty_ok = ty
        .trim()
        .chars()
        .all(|c| c.is_alphanumeric() || c == '.' || c == '_');
    (ty_ok && !value.starts_with('=')).then(|| (name, value.trim()))
}
