//! Stack references found in the code of each Pulumi project: Pulumi YAML
//! (`pulumi:pulumi:StackReference` resources), Python (`StackReference(...)`),
//! TypeScript/JavaScript (`new StackReference(...)`) and Go (`NewStackReference(ctx, ...)`),
//! with the name built from literals, `${pulumi.organization}`/`${pulumi.stack}`,
//! `get_stack()`/`getStack()`/`ctx.Stack()`, f-strings, template literals, `+` and
//! `fmt.Sprintf`. A lexical scanner, not a parser: it reads the argument that holds
//! the stack name (Python's `stack_name=`/`name=`, TS/JS `{ name: ... }`, Go's
//! `&StackReferenceArgs{Name: ...}`, else the name argument) and is never wrong about
//! what it cannot read: an unknown part stays unknown, and a call whose name it cannot
//! read (a variable, a conditional, arguments built elsewhere) is a reference with
//! every part unknown, at its file and line, never left out.

use std::path::{Path, PathBuf};

use serde::Serialize;

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
    /// Something the scanner cannot tell (a variable, a config value).
    Unknown,
}

/// A stack reference in a program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// The name as the scanner read it: `${org}/kubeconfig/${stack}`.
    pub name: String,
    /// `None` when the name has no organization part (`project/stack`, `stack`).
    pub org: Option<Part>,
    /// `None` for a bare stack name (a stack of the same project).
    pub project: Option<Part>,
    pub stack: Part,
    /// Where it is: the file (relative to the project folder) and its line (1-based).
    pub file: PathBuf,
    pub line: usize,
}

impl Reference {
    /// Whether the scanner could not tell which project's stack this reads: then the
    /// program may read any stack (a name in a variable, arguments built elsewhere).
    pub fn unreadable(&self) -> bool {
        self.project == Some(Part::Unknown)
    }
}

/// A piece of a name: text, or a placeholder.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Value(Part),
}

/// The pieces of a name, split at `/` into parts. A name made of one unknown part (a
/// variable, `f"{x}-net"`) may hold slashes, so it may name any project of any
/// organization: all its parts are unknown. So are the parts of a name of more than
/// three parts.
fn reference(pieces: &[Piece], file: &Path, line: usize) -> Reference {
    let unreadable = || Reference {
        name: "${?}".into(),
        org: Some(Part::Unknown),
        project: Some(Part::Unknown),
        stack: Part::Unknown,
        file: file.to_path_buf(),
        line,
    };
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
            Piece::Value(_) => {
                if let Some(last) = parts.last_mut() {
                    last.push(p.clone());
                }
            }
        }
    }
    // A lone placeholder is that placeholder, text alone is literal, a mix is unknown.
    let to_part = |ps: &[Piece]| -> Part {
        match ps {
            [Piece::Value(v)] => v.clone(),
            all if all.iter().all(|p| matches!(p, Piece::Text(_))) => Part::Literal(
                all.iter()
                    .map(|p| match p {
                        Piece::Text(t) => t.as_str(),
                        Piece::Value(_) => "",
                    })
                    .collect(),
            ),
            _ => Part::Unknown,
        }
    };
    let parts: Vec<Part> = parts.iter().map(|p| to_part(p)).collect();
    let name = pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.clone(),
            Piece::Value(Part::Org) => "${org}".into(),
            Piece::Value(Part::Project) => "${project}".into(),
            Piece::Value(Part::Stack) => "${stack}".into(),
            Piece::Value(_) => "${?}".into(),
        })
        .collect::<String>();
    let (org, project, stack) = match parts.len() {
        1 if parts[0] == Part::Unknown => return unreadable(),
        1 => (None, None, parts[0].clone()),
        2 => (None, Some(parts[0].clone()), parts[1].clone()),
        3 => (
            Some(parts[0].clone()),
            Some(parts[1].clone()),
            parts[2].clone(),
        ),
        _ => return unreadable(),
    };
    Reference {
        name,
        org,
        project,
        stack,
        file: file.to_path_buf(),
        line,
    }
}

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

/// `${...}` interpolations of a Pulumi YAML string.
fn yaml_pieces(s: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        if i > 0 {
            out.push(Piece::Text(rest[..i].to_string()));
        }
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.push(Piece::Text(rest[i..].to_string()));
            return out;
        };
        out.push(Piece::Value(match &after[..end] {
            "pulumi.organization" => Part::Org,
            "pulumi.stack" => Part::Stack,
            "pulumi.project" => Part::Project,
            _ => Part::Unknown,
        }));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest.to_string()));
    }
    out
}

/// Stack references of a Pulumi YAML program (`text` of `file`).
pub fn in_yaml(text: &str, file: &Path) -> Vec<Reference> {
    use crate::workspace::yaml;
    // Any YAML file of the project is read: one nested too deep or made of aliases is
    // not parsed (loading the project refuses its Pulumi.yaml with the reason).
    if yaml::too_deep(text, yaml::MAX_DEPTH).is_some()
        || yaml::expands_past(text, yaml::expansion_limit(text.len()))
    {
        return Vec::new();
    }
    let Ok(doc) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Vec::new();
    };
    let Some(resources) = doc.get("resources").and_then(|r| r.as_mapping()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, res) in resources {
        if res.get("type").and_then(|t| t.as_str()) != Some("pulumi:pulumi:StackReference") {
            continue;
        }
        // Without `properties.name`, the resource's own name is the stack name; a name
        // that is not a string (`fn::invoke`, a list) is unknown.
        let pieces = match res.get("properties").and_then(|p| p.get("name")) {
            Some(n) => n
                .as_str()
                .map(yaml_pieces)
                .unwrap_or_else(|| vec![Piece::Value(Part::Unknown)]),
            None => key
                .as_str()
                .map(yaml_pieces)
                .unwrap_or_else(|| vec![Piece::Value(Part::Unknown)]),
        };
        let key = key.as_str().unwrap_or("");
        let line = text
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{key}:")))
            .map(|i| i + 1)
            .unwrap_or(1);
        out.push(reference(&pieces, file, line));
    }
    out
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
pub fn in_code(text: &str, file: &Path) -> Vec<Reference> {
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

/// A reference of a project of the plan, and what it points at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    #[serde(flatten)]
    pub reference: Reference,
    /// The profile path of the referenced project, when its Pulumi name is one of the
    /// plan's projects.
    pub target: Option<String>,
}

/// The stack references of every Pulumi project of `plan`, by project path, each
/// resolved through the `name:` of the projects' `Pulumi.yaml`. References to the
/// project itself (a bare stack name, `${pulumi.project}`) are left out.
pub fn of_plan(plan: &super::Plan) -> std::collections::BTreeMap<String, Vec<Found>> {
    let by_name: std::collections::BTreeMap<&str, &str> = plan
        .nodes
        .iter()
        .filter(|n| n.kind == super::NodeKind::Pulumi)
        .map(|n| (n.name.as_str(), n.path.as_str()))
        .collect();
    let mut out = std::collections::BTreeMap::new();
    for n in &plan.nodes {
        let Some(p) = n
            .project
            .as_ref()
            .filter(|_| n.kind == super::NodeKind::Pulumi)
        else {
            continue;
        };
        let found: Vec<Found> = in_project(&p.dir)
            .into_iter()
            .filter(|r| !matches!(r.project, None | Some(Part::Project)))
            .filter(|r| r.project != Some(Part::Literal(n.name.clone())))
            .map(|r| {
                let target = match &r.project {
                    Some(Part::Literal(name)) => by_name.get(name.as_str()).map(|p| p.to_string()),
                    _ => None,
                };
                Found {
                    reference: r,
                    target,
                }
            })
            .collect();
        if !found.is_empty() {
            out.insert(n.path.clone(), found);
        }
    }
    out
}

/// The referenced profile paths of each project, sorted and deduplicated.
pub fn targets(
    found: &std::collections::BTreeMap<String, Vec<Found>>,
) -> std::collections::BTreeMap<String, Vec<String>> {
    found
        .iter()
        .map(|(path, refs)| {
            let mut t: Vec<String> = refs.iter().filter_map(|f| f.target.clone()).collect();
            t.sort();
            t.dedup();
            (path.clone(), t)
        })
        .filter(|(_, t)| !t.is_empty())
        .collect()
}

/// Where each project has a reference the scanner cannot read: `file:line`, the file
/// relative to the project folder.
pub fn unreadable(
    found: &std::collections::BTreeMap<String, Vec<Found>>,
) -> std::collections::BTreeMap<String, Vec<String>> {
    found
        .iter()
        .map(|(path, refs)| {
            let at: Vec<String> = refs
                .iter()
                .filter(|f| f.reference.unreadable())
                .map(|f| format!("{}:{}", f.reference.file.display(), f.reference.line))
                .collect();
            (path.clone(), at)
        })
        .filter(|(_, at)| !at.is_empty())
        .collect()
}

/// Folders never read, beyond those the fingerprint skips: build output and vendored code.
const MORE_SKIP_DIRS: &[&str] = &["dist", "build", "vendor"];

/// At most this many bytes of one source file are read.
const MAX_FILE: u64 = 2 * 1024 * 1024;

/// Every stack reference in the Pulumi project in `dir` (its `Pulumi.yaml` program and
/// its `.py`, `.ts`, `.js`, `.mjs`, `.go` files), in file order.
pub fn in_project(dir: &Path) -> Vec<Reference> {
    let mut files = Vec::new();
    collect(dir, dir, 0, &mut files);
    files.sort();
    let mut out = Vec::new();
    for rel in files {
        let path = dir.join(&rel);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or("");
        match ext {
            "yaml" | "yml" => out.extend(in_yaml(&text, &rel)),
            _ => out.extend(in_code(&text, &rel)),
        }
    }
    out
}

fn collect(root: &Path, dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 8 {
        return;
    }
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().to_string();
        let Ok(ft) = e.file_type() else { continue };
        if ft.is_dir() {
            let skipped = crate::run::fingerprint::SKIP_DIRS.contains(&name.as_str())
                || MORE_SKIP_DIRS.contains(&name.as_str());
            if !skipped && !name.starts_with('.') {
                collect(root, &p, depth + 1, out);
            }
            continue;
        }
        if !ft.is_file() || e.metadata().map(|m| m.len() > MAX_FILE).unwrap_or(true) {
            continue;
        }
        let program =
            (name == "Pulumi.yaml" || name == "Pulumi.yml" || name == "Main.yaml") && depth == 0;
        let code = [".py", ".ts", ".js", ".mjs", ".go"]
            .iter()
            .any(|x| name.ends_with(x))
            && !name.ends_with(".d.ts");
        if program || code {
            out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Part {
        Part::Literal(s.into())
    }

    #[test]
    fn pulumi_yaml() {
        let text = "name: app\nruntime: yaml\nresources:\n  cluster:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${pulumi.organization}/kubeconfig/${pulumi.stack}\n  other:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: acme/vpc/prod\n  bucket:\n    type: aws:s3:Bucket\n";
        let refs = in_yaml(text, Path::new("Pulumi.yaml"));
        assert_eq!(refs.len(), 2, "{refs:#?}");
        assert_eq!(refs[0].org, Some(Part::Org));
        assert_eq!(refs[0].project, Some(lit("kubeconfig")));
        assert_eq!(refs[0].stack, Part::Stack);
        assert_eq!(refs[0].line, 4);
        assert_eq!(refs[0].name, "${org}/kubeconfig/${stack}");
        assert_eq!(refs[1].org, Some(lit("acme")));
        assert_eq!(refs[1].stack, lit("prod"));
    }

    #[test]
    fn pulumi_yaml_name_that_is_no_string_is_unknown() {
        let text = "name: app\nruntime: yaml\nresources:\n  net:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name:\n        fn::invoke:\n          function: x\n  dev:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${stackName}\n";
        let refs = in_yaml(text, Path::new("Pulumi.yaml"));
        assert_eq!(refs.len(), 2, "{refs:#?}");
        assert!(refs[0].unreadable(), "not the resource's name: {refs:#?}");
        assert_eq!(refs[0].line, 4);
        assert!(refs[1].unreadable(), "{refs:#?}");
    }

    #[test]
    fn python() {
        let text = r#"import pulumi
from pulumi import StackReference
org = pulumi.get_organization()
# StackReference("commented/out/dev")
vpc = StackReference(f"{pulumi.get_organization()}/vpc/{pulumi.get_stack()}")
eks = pulumi.StackReference("organization/eks/" + pulumi.get_stack())
kw = StackReference(name=f"{org}/ecr/{get_stack()}")
env = StackReference(f"{os.environ['STRATA_ORG']}/logs/{os.getenv('STRATA_STACK')}")
"#;
        let refs = in_code(text, Path::new("__main__.py"));
        assert_eq!(refs.len(), 4, "{refs:#?}");
        assert_eq!(refs[0].project, Some(lit("vpc")));
        assert_eq!(
            (refs[0].org.clone(), refs[0].stack.clone()),
            (Some(Part::Org), Part::Stack)
        );
        assert_eq!(refs[0].line, 5);
        assert_eq!(refs[1].org, Some(lit("organization")));
        assert_eq!(refs[1].project, Some(lit("eks")));
        assert_eq!(refs[1].stack, Part::Stack);
        assert_eq!(refs[2].project, Some(lit("ecr")));
        assert_eq!(refs[2].org, Some(Part::Org), "a variable named org");
        assert_eq!(refs[3].org, Some(Part::Org));
        assert_eq!(refs[3].stack, Part::Stack);
    }

    #[test]
    fn typescript_and_javascript() {
        let text = "import * as pulumi from \"@pulumi/pulumi\";\nconst org = pulumi.getOrganization();\nconst vpc = new pulumi.StackReference(`${org}/vpc/${pulumi.getStack()}`);\nconst k = new StackReference(\"acme/kubeconfig/\" + pulumi.getStack(), {});\nconst e = new pulumi.StackReference(`${process.env.STRATA_ORG}/ecr/${process.env.STRATA_STACK}`);\n// new StackReference(\"x/y/z\")\n";
        let refs = in_code(text, Path::new("index.ts"));
        assert_eq!(refs.len(), 3, "{refs:#?}");
        assert_eq!(refs[0].project, Some(lit("vpc")));
        assert_eq!(refs[0].org, Some(Part::Org));
        assert_eq!(refs[0].stack, Part::Stack);
        assert_eq!(refs[1].org, Some(lit("acme")));
        assert_eq!(refs[1].project, Some(lit("kubeconfig")));
        assert_eq!(refs[2].org, Some(Part::Org));
        assert_eq!(refs[2].project, Some(lit("ecr")));
    }

    #[test]
    fn go() {
        let text = "package main\n\nfunc main() {\n\tpulumi.Run(func(ctx *pulumi.Context) error {\n\t\tvpc, err := pulumi.NewStackReference(ctx, fmt.Sprintf(\"%s/vpc/%s\", ctx.Organization(), ctx.Stack()), nil)\n\t\teks, err := pulumi.NewStackReference(ctx, \"organization/eks/\"+ctx.Stack(), nil)\n\t\treturn nil\n\t})\n}\n";
        let refs = in_code(text, Path::new("main.go"));
        assert_eq!(refs.len(), 2, "{refs:#?}");
        assert_eq!(refs[0].org, Some(Part::Org));
        assert_eq!(refs[0].project, Some(lit("vpc")));
        assert_eq!(refs[0].stack, Part::Stack);
        assert_eq!(refs[0].line, 5);
        assert_eq!(refs[1].org, Some(lit("organization")));
        assert_eq!(refs[1].project, Some(lit("eks")));
    }

    #[test]
    fn unknown_parts_stay_unknown_and_short_names_have_fewer_parts() {
        let refs = in_code(
            "a = StackReference(config.require(\"ref\"))\nb = StackReference(\"vpc/dev\")\nc = StackReference(\"dev\")\nd = StackReference(f\"{x}-net/{get_stack()}\")\n",
            Path::new("x.py"),
        );
        assert_eq!(refs.len(), 4, "{refs:#?}");
        assert_eq!(refs[0].stack, Part::Unknown);
        assert_eq!(
            refs[0].project,
            Some(Part::Unknown),
            "a name the scanner cannot read may name any project"
        );
        assert_eq!(refs[1].project, Some(lit("vpc")));
        assert_eq!(refs[1].org, None);
        assert_eq!(refs[2].project, None);
        assert_eq!(refs[2].stack, lit("dev"));
        assert_eq!(refs[3].project, Some(Part::Unknown), "mixed text and value");
    }

    /// The references of `text` as (org, project, stack, line), for short asserts.
    fn parts(text: &str, file: &str) -> Vec<(Option<Part>, Option<Part>, Part, usize)> {
        in_code(text, Path::new(file))
            .into_iter()
            .map(|r| (r.org, r.project, r.stack, r.line))
            .collect()
    }

    fn known(
        org: Part,
        project: &str,
        stack: Part,
        line: usize,
    ) -> (Option<Part>, Option<Part>, Part, usize) {
        (Some(org), Some(lit(project)), stack, line)
    }

    /// What the scanner cannot read: every part unknown, never absent.
    fn unknown(line: usize) -> (Option<Part>, Option<Part>, Part, usize) {
        (
            Some(Part::Unknown),
            Some(Part::Unknown),
            Part::Unknown,
            line,
        )
    }

    #[test]
    fn python_keyword_and_second_argument_forms() {
        let text = r#"import pulumi
net = StackReference("net", stack_name=f"{pulumi.get_organization()}/net/{pulumi.get_stack()}")
dns = pulumi.StackReference(name="acme/dns/prod")
logs = StackReference(name="res", stack_name="acme/logs/" + get_stack())
pos = StackReference("res", "acme/pos/dev")
var = StackReference("net", stack_name=net_stack)
bare = StackReference(ref_name)
method = StackReference("acme/a/dev".upper())
opts = StackReference("acme/opt/dev", opts=pulumi.ResourceOptions(protect=True))
multi = StackReference(
    "net",
    stack_name="acme/multi/dev",  # a comma, a paren: ), in a comment
)
kw = StackReference("net", **args)
"#;
        assert_eq!(
            parts(text, "__main__.py"),
            vec![
                known(Part::Org, "net", Part::Stack, 2),
                known(lit("acme"), "dns", lit("prod"), 3),
                known(lit("acme"), "logs", Part::Stack, 4),
                known(lit("acme"), "pos", lit("dev"), 5),
                unknown(6),
                unknown(7),
                unknown(8),
                known(lit("acme"), "opt", lit("dev"), 9),
                known(lit("acme"), "multi", lit("dev"), 10),
                unknown(14),
            ]
        );
    }

    #[test]
    fn typescript_args_forms() {
        let text = r#"import * as pulumi from "@pulumi/pulumi";
const a = new pulumi.StackReference("x", { name: `${pulumi.getOrganization()}/net/${pulumi.getStack()}` });
const b = new StackReference("x", {name});
const c = new StackReference("acme/c/dev", {});
const d = new StackReference("x", { name: stackName });
const e = new StackReference("x", args);
const f = new StackReference(refName);
const g = new StackReference("x", { ...base });
const h = new StackReference("acme/h/dev", undefined, { protect: true });
const i = new StackReference("x", {
    name: "acme/i/" + pulumi.getStack(),
});
"#;
        assert_eq!(
            parts(text, "index.ts"),
            vec![
                known(Part::Org, "net", Part::Stack, 2),
                unknown(3),
                known(lit("acme"), "c", lit("dev"), 4),
                unknown(5),
                unknown(6),
                unknown(7),
                unknown(8),
                known(lit("acme"), "h", lit("dev"), 9),
                known(lit("acme"), "i", Part::Stack, 10),
            ]
        );
    }

    #[test]
    fn go_args_forms() {
        let text = "package main\n\
a, err := pulumi.NewStackReference(ctx, \"net\", &pulumi.StackReferenceArgs{Name: pulumi.String(fmt.Sprintf(\"%s/net/%s\", ctx.Organization(), ctx.Stack()))})\n\
b, err := pulumi.NewStackReference(ctx, \"dns\", &pulumi.StackReferenceArgs{\n\
\tName: pulumi.String(\"acme/dns/prod\"),\n\
})\n\
c, err := pulumi.NewStackReference(ctx, \"x\", &pulumi.StackReferenceArgs{Name: pulumi.String(stackName)})\n\
d, err := pulumi.NewStackReference(ctx, stackName, nil)\n\
e, err := pulumi.NewStackReference(ctx, \"x\", args)\n\
f, err := pulumi.NewStackReference(ctx, \"acme/f/dev\", &pulumi.StackReferenceArgs{})\n\
g, err := pulumi.NewStackReference(ctx, \"x\", &pulumi.StackReferenceArgs{Name: nameInput})\n\
h, err := NewStackReference(ctx, \"x\", &StackReferenceArgs{Name: pulumi.String(\"acme/h/\" + ctx.Stack())})\n";
        assert_eq!(
            parts(text, "main.go"),
            vec![
                known(Part::Org, "net", Part::Stack, 2),
                known(lit("acme"), "dns", lit("prod"), 3),
                unknown(6),
                unknown(7),
                unknown(8),
                known(lit("acme"), "f", lit("dev"), 9),
                unknown(10),
                known(lit("acme"), "h", Part::Stack, 11),
            ]
        );
    }

    #[test]
    fn a_call_it_cannot_parse_is_unknown_not_dropped() {
        for (t, file) in [
            ("x = StackReference(", "x.py"),
            ("x = StackReference(\"acme/a/dev\"", "x.py"),
            ("const x = new StackReference(`${", "x.ts"),
            ("x, _ := pulumi.NewStackReference(ctx", "x.go"),
        ] {
            assert_eq!(parts(t, file), vec![unknown(1)], "{t}");
        }
    }

    proptest::proptest! {
        /// Whatever follows the call, the scanner does not panic and the call is a
        /// reference (read or unknown), never dropped.
        #[test]
        fn every_call_is_one_reference(
            tail in "[ -~\n\té€\u{1F600}]{0,40}",
            file in proptest::sample::select(vec!["x.py", "x.ts", "x.go"]),
        ) {
            let call = if file == "x.go" { "NewStackReference(" } else { "StackReference(" };
            let refs = in_code(&format!("{call}{tail}"), Path::new(file));
            proptest::prop_assert!(!refs.is_empty(), "{refs:?}");
        }
    }

    #[test]
    fn garbage_never_panics() {
        for t in [
            "StackReference(",
            "StackReference(f\"{",
            "StackReference(`${",
            "new StackReference(\"a/b/c/d/e\")",
            "NewStackReference(ctx",
            "NewStackReference(ctx, fmt.Sprintf(\"%s%",
            "StackReference(\"\u{1F600}/é/\\",
            "StackReference(((((",
            "StackReference(\"\"\"a",
            "StackReference('''a''' + \"",
            "new StackReference(\"a\", {",
            "new StackReference(\"a\", { name: `${`",
            "NewStackReference(ctx, \"x\", &pulumi.StackReferenceArgs{Name: ",
            "NewStackReference(ctx, \"x\", &pulumi.StackReferenceArgs{Name: pulumi.String(}",
            "StackReference(a)]})",
            "StackReference(é + ü, stack_name=\u{1F600})",
        ] {
            let _ = in_code(t, Path::new("x.py"));
            let _ = in_code(t, Path::new("x.go"));
        }
        let _ = in_yaml("resources: [1, 2]", Path::new("Pulumi.yaml"));
        let _ = in_yaml(
            "resources:\n  r:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${",
            Path::new("Pulumi.yaml"),
        );
    }
}
