//! Stack references in Python (`StackReference(...)`), TypeScript/JavaScript
//! (`new StackReference(...)`) and Go (`NewStackReference(ctx, ...)`), with the name built
//! from literals, `get_stack()`/`getStack()`/`ctx.Stack()`, f-strings, template literals,
//! `+` and `fmt.Sprintf`. A lexical scanner, not a parser: it reads the argument that holds
//! the stack name (Python's `stack_name=`/`name=`, TS/JS `{ name: ... }`, Go's
//! `&StackReferenceArgs{Name: ...}`, else the name argument) and is never wrong about
//! what it cannot read: an unknown part stays unknown, and a call whose name it cannot
//! read (a variable, a conditional, arguments built elsewhere) is a reference with
//! every part unknown, at its file and line, never left out.

use std::path::Path;

use super::{Part, Piece, Reference, reference};

/// What an expression (a call, a variable) inside a name stands for.
fn classify(expr: &str) -> Part {
    let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let e = e.trim_start_matches("pulumi.");
    let lower = e.to_ascii_lowercase();
    let env = |name: &str| {
        lower.contains(&format!("\"{}\"", name.to_ascii_lowercase()))
            || lower.contains(&format!("'{}'", name.to_ascii_lowercase()))
            || lower.ends_with(&format!(".{}", name.to_ascii_lowercase()))
    };
    if matches!(
        lower.as_str(),
        "get_organization()" | "getorganization()" | "ctx.organization()" | "organization" | "org"
    ) || env("STRATA_ORG")
    {
        Part::Org
    } else if matches!(
        lower.as_str(),
        "get_stack()" | "getstack()" | "ctx.stack()" | "stack"
    ) || env("STRATA_STACK")
        || env("PULUMI_STACK")
    {
        Part::Stack
    } else if matches!(
        lower.as_str(),
        "get_project()" | "getproject()" | "ctx.project()" | "project"
    ) {
        Part::Project
    } else {
        Part::Unknown
    }
}

/// A string literal starting at `s[0]` (after any prefix letters): its pieces (f-string
/// `{...}` and template `${...}` parts classified) and its length in bytes.
fn string_literal(s: &str, templated: bool) -> Option<(Vec<Piece>, usize)> {
    let quote = s.chars().next()?;
    if !matches!(quote, '"' | '\'' | '`') {
        return None;
    }
    let template = templated || quote == '`';
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = s.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, n)) = chars.next() {
                    text.push(n);
                }
            }
            c if c == quote => {
                if !text.is_empty() {
                    pieces.push(Piece::Text(text));
                }
                return Some((pieces, i + 1));
            }
            '$' if template && quote == '`' && chars.peek().map(|(_, c)| *c) == Some('{') => {
                chars.next();
                let expr = take_braced(&mut chars)?;
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Value(classify(&expr)));
            }
            '{' if template && quote != '`' => {
                if chars.peek().map(|(_, c)| *c) == Some('{') {
                    chars.next();
                    text.push('{');
                    continue;
                }
                let expr = take_braced(&mut chars)?;
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Value(classify(&expr)));
            }
            '\n' if quote != '`' => return None,
            c => text.push(c),
        }
    }
    None
}

/// The expression up to the `}` that closes an interpolation.
fn take_braced(chars: &mut impl Iterator<Item = (usize, char)>) -> Option<String> {
    let mut depth = 0;
    let mut expr = String::new();
    for (_, c) in chars {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(expr),
            '}' => depth -= 1,
            _ => {}
        }
        expr.push(c);
    }
    None
}

/// The language of a source file, for its comments and its `StackReference` signature.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Lang {
    Python,
    Js,
    Go,
}

/// The byte length of the string literal at the start of `s` (`"`, `'`, `` ` ``, and
/// Python's triple quotes), or `None` when it does not close.
fn skip_string(s: &str) -> Option<usize> {
    let quote = s.chars().next()?;
    if !matches!(quote, '"' | '\'' | '`') {
        return None;
    }
    let triple: String = std::iter::repeat_n(quote, 3).collect();
    if quote != '`' && s.starts_with(&triple) {
        return s[3..].find(&triple).map(|i| i + 6);
    }
    let mut chars = s.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            c if c == quote => return Some(i + 1),
            '\n' if quote != '`' => return None,
            _ => {}
        }
    }
    None
}

/// The length of a comment starting at `s[0]`, if one does.
fn comment(s: &str, lang: Lang) -> Option<usize> {
    let line = || s.find('\n').unwrap_or(s.len());
    if (lang == Lang::Python && s.starts_with('#')) || (lang != Lang::Python && s.starts_with("//"))
    {
        Some(line())
    } else if lang != Lang::Python && s.starts_with("/*") {
        Some(s.find("*/").map(|i| i + 2).unwrap_or(s.len()))
    } else {
        None
    }
}

/// The top-level comma-separated items of `s` (comments removed, each trimmed, empty
/// ones left out) up to the bracket that closes the one before `s`, and the byte
/// offset after that bracket. With `to_end`, the items run to the end of `s` instead.
/// `None` when a string does not close or the brackets do not balance.
fn items(s: &str, lang: Lang, to_end: bool) -> Option<(Vec<String>, usize)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0usize;
    let mut i = 0;
    let push = |cur: &mut String, out: &mut Vec<String>| {
        let t = cur.trim();
        if !t.is_empty() {
            out.push(t.to_string());
        }
        cur.clear();
    };
    while i < s.len() {
        let rest = &s[i..];
        let c = rest.chars().next()?;
        if matches!(c, '"' | '\'' | '`') {
            let n = skip_string(rest)?;
            cur.push_str(&rest[..n]);
            i += n;
            continue;
        }
        if let Some(n) = comment(rest, lang) {
            cur.push(' ');
            i += n;
            continue;
        }
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => {
                if to_end {
                    return None;
                }
                push(&mut cur, &mut out);
                return Some((out, i + 1));
            }
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                push(&mut cur, &mut out);
                i += 1;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        i += c.len_utf8();
    }
    if to_end && depth == 0 {
        push(&mut cur, &mut out);
        return Some((out, s.len()));
    }
    None
}

/// The arguments of `callee(...)` when `e` is exactly that call.
fn call_of(e: &str, callees: &[&str], lang: Lang) -> Option<Vec<String>> {
    let rest = callees.iter().find_map(|c| e.strip_prefix(c))?;
    let rest = rest.trim_start().strip_prefix('(')?;
    let (args, end) = items(rest, lang, false)?;
    rest[end..].trim().is_empty().then_some(args)
}

/// What the scanner makes of an expression it cannot evaluate.
fn unknown() -> Vec<Piece> {
    vec![Piece::Value(Part::Unknown)]
}

/// The pieces of a whole stack name: like [`expression`], except that a name held in a
/// variable is unknown, whatever the variable is called.
fn name_of(e: &str, lang: Lang) -> Vec<Piece> {
    let e = e.trim();
    if e.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return unknown();
    }
    // Go: `pulumi.String(...)` around the name.
    if let Some(args) = call_of(e, &["pulumi.String"], lang) {
        return match args.as_slice() {
            [one] => name_of(one, lang),
            _ => unknown(),
        };
    }
    expression(e, lang).unwrap_or_else(unknown)
}

/// The pieces of an expression: string literals (with f/template parts), `+`
/// concatenation (and Python's adjacent literals), the calls and variables of
/// [`classify`], `fmt.Sprintf`/`pulumi.Sprintf`. `None` when any of it is something
/// else (a method call on a literal, a conditional): the scanner reads all or nothing.
fn expression(e: &str, lang: Lang) -> Option<Vec<Piece>> {
    let e = e.trim();
    if let Some(args) = call_of(e, &["fmt.Sprintf", "pulumi.Sprintf"], lang) {
        return sprintf(&args, lang);
    }
    let mut out = Vec::new();
    let mut rest = e;
    loop {
        rest = rest.trim_start();
        let prefix_len = rest
            .chars()
            .take_while(|c| matches!(c, 'f' | 'F' | 'r' | 'R' | 'b' | 'B'))
            .count();
        let templated = rest[..prefix_len].to_ascii_lowercase().contains('f');
        if let Some((pieces, len)) = string_literal(&rest[prefix_len..], templated) {
            out.extend(pieces);
            rest = &rest[prefix_len + len..];
        } else {
            // A call or a variable, up to a top-level `+`.
            let mut depth = 0usize;
            let mut end = rest.len();
            let mut i = 0;
            while i < rest.len() {
                let c = rest[i..].chars().next()?;
                if matches!(c, '"' | '\'' | '`') {
                    i += skip_string(&rest[i..])?;
                    continue;
                }
                match c {
                    '(' | '[' | '{' => depth += 1,
                    ')' | ']' | '}' => depth = depth.checked_sub(1)?,
                    '+' if depth == 0 => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
                i += c.len_utf8();
            }
            let term = rest[..end].trim();
            // Only a name, a call or an index: `a.b(c)[d]`, not `a if b else c`.
            let head = term.split(['(', '[']).next().unwrap_or("");
            if head.is_empty()
                || !head
                    .chars()
                    .all(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '$')
            {
                return None;
            }
            out.push(Piece::Value(classify(term)));
            rest = &rest[end..];
        }
        rest = rest.trim_start();
        if rest.is_empty() {
            return Some(out);
        }
        match rest.strip_prefix('+') {
            Some(r) => rest = r,
            // Python's implicit concatenation of adjacent literals.
            None if lang == Lang::Python
                && string_literal(
                    rest.trim_start_matches(['f', 'F', 'r', 'R', 'b', 'B']),
                    false,
                )
                .is_some() => {}
            None => return None,
        }
    }
}

/// `Sprintf("%s/x/%s", a, b)`: the format's text with each verb replaced by its argument.
fn sprintf(args: &[String], lang: Lang) -> Option<Vec<Piece>> {
    let (first, rest) = args.split_first()?;
    let (fmt, len) = string_literal(first, false)?;
    if len != first.len() {
        return None;
    }
    let fmt: String = fmt
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.as_str(),
            _ => "",
        })
        .collect();
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
                    Some(a) => out.extend(expression(a, lang).unwrap_or_else(unknown)),
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
fn stack_name(args: &[String], lang: Lang) -> Vec<Piece> {
    match lang {
        Lang::Python => {
            let kw = |k: &str| args.iter().find_map(|a| field(a, k, '='));
            let positional: Vec<&String> = args.iter().filter(|a| !is_keyword(a)).collect();
            if let Some(e) = kw("stack_name") {
                return name_of(e, lang);
            }
            if let Some(e) = positional.get(1).filter(|e| e.as_str() != "None") {
                return name_of(e, lang);
            }
            if args.iter().any(|a| a.starts_with('*')) {
                // `**kwargs` may hold `stack_name`.
                return unknown();
            }
            match kw("name").or(positional.first().map(|s| s.as_str())) {
                Some(e) => name_of(e, lang),
                None => unknown(),
            }
        }
        Lang::Js => {
            let Some(first) = args.first() else {
                return unknown();
            };
            match args.get(1).map(String::as_str) {
                None | Some("undefined") => name_of(first, lang),
                Some(obj) if obj.starts_with('{') && obj.ends_with('}') => {
                    let Some((fields, _)) = items(&obj[1..obj.len() - 1], lang, true) else {
                        return unknown();
                    };
                    let mut value = None;
                    for f in &fields {
                        if f.starts_with("...") || f == "name" {
                            // A spread, or `{ name }`: a variable.
                            return unknown();
                        }
                        if let Some(v) = field(f, "name", ':') {
                            value = Some(v);
                        }
                    }
                    name_of(value.unwrap_or(first), lang)
                }
                // `args` built elsewhere.
                Some(_) => unknown(),
            }
        }
        Lang::Go => {
            let Some(name) = args.get(1) else {
                return unknown();
            };
            match args.get(2).map(String::as_str) {
                None | Some("nil") => name_of(name, lang),
                Some(a) => {
                    let Some(body) = ["&pulumi.StackReferenceArgs", "&StackReferenceArgs"]
                        .iter()
                        .find_map(|p| a.strip_prefix(p))
                        .map(str::trim_start)
                        .and_then(|b| b.strip_prefix('{'))
                        .and_then(|b| b.strip_suffix('}'))
                    else {
                        return unknown();
                    };
                    let Some((fields, _)) = items(body, lang, true) else {
                        return unknown();
                    };
                    match fields.iter().find_map(|f| field(f, "Name", ':')) {
                        Some(v) => name_of(v, lang),
                        None => name_of(name, lang),
                    }
                }
            }
        }
    }
}

/// Stack references of a Python, TypeScript/JavaScript or Go file. A call whose stack
/// name the scanner cannot read is a reference with unknown parts, never left out.
pub(super) fn in_code(text: &str, file: &Path) -> Vec<Reference> {
    let lang = match file.extension().and_then(|e| e.to_str()) {
        Some("go") => Lang::Go,
        Some("py") => Lang::Python,
        _ => Lang::Js,
    };
    let needle = if lang == Lang::Go {
        "NewStackReference("
    } else {
        "StackReference("
    };
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(needle) {
        let at = from + i;
        from = at + needle.len();
        // Not `getStackReference(`, `MyStackReference(`: the call itself.
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let line = text[..at].matches('\n').count() + 1;
        // Skip comments: the line up to the match starts with `#` or `//`.
        let line_start = text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let lead = text[line_start..at].trim_start();
        if lead.starts_with('#') || lead.starts_with("//") || lead.starts_with('*') {
            continue;
        }
        let pieces = match items(&text[from..], lang, false) {
            Some((args, _)) => stack_name(&args, lang),
            None => unknown(),
        };
        out.push(reference(&pieces, file, line));
    }
    out
}
