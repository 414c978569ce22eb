//! The lexical layer every code scanner shares: the language of a file, where its
//! strings and comments are (`mask` blanks them, so a `StackReference(` in a comment, a
//! docstring or any string literal is no call), and the bracket-aware splitting of
//! arguments and statements.

use std::path::Path;

/// The language of a source file, for its comments, strings and call signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Lang {
    Python,
    Js,
    Go,
}

impl Lang {
    /// The language of a code file the scanner reads, by its extension.
    pub(super) fn of(path: &Path) -> Option<Lang> {
        match path.extension().and_then(|e| e.to_str())? {
            "py" => Some(Lang::Python),
            "ts" | "js" | "mjs" => Some(Lang::Js),
            "go" => Some(Lang::Go),
            _ => None,
        }
    }
}

/// The byte length of the string literal at the start of `s` (`"`, `'`, `` ` ``, and
/// Python's triple quotes), or `None` when it does not close.
pub(super) fn skip_string(s: &str) -> Option<usize> {
    let quote = s.chars().next()?;
    if !matches!(quote, '"' | '\'' | '`') {
        return None;
    }
    let triple: String = std::iter::repeat_n(quote, 3).collect();
    if quote != '`' && s.starts_with(&triple) {
        return closing_triple(&s[3..], &triple).map(|i| i + 3);
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

/// The offset after the `triple` quote that closes a triple-quoted string whose body
/// is `s` (a backslash escapes the next character).
fn closing_triple(s: &str, triple: &str) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i..].starts_with(triple.as_bytes()) {
            return Some(i + 3);
        }
        i += 1;
    }
    None
}

/// The length of a comment starting at `s[0]`, if one does.
pub(super) fn comment(s: &str, lang: Lang) -> Option<usize> {
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

/// `text` with every string literal and every comment blanked (each byte
/// a space, line breaks kept), so offsets and lines are those of `text`. A string that
/// does not close is blanked to the end of its line (a template or a triple-quoted one,
/// to the end of the file).
pub(super) fn mask(text: &str, lang: Lang) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let mut i = 0;
    while i < bytes.len() {
        // Only ASCII bytes start a string or a comment: `i` is a character boundary.
        let starts = match bytes[i] {
            b'#' => lang == Lang::Python,
            b'/' => lang != Lang::Python && matches!(bytes.get(i + 1), Some(b'/' | b'*')),
            b'"' | b'\'' => true,
            b'`' => lang != Lang::Python,
            _ => false,
        };
        if !starts {
            i += 1;
            continue;
        }
        let rest = &text[i..];
        let len = match comment(rest, lang) {
            Some(n) => n,
            None => skip_string(rest).unwrap_or_else(|| unclosed(rest, char::from(bytes[i]))),
        };
        for b in &mut out[i..i + len] {
            if *b != b'\n' {
                *b = b' ';
            }
        }
        i += len.max(1);
    }
    String::from_utf8(out).unwrap_or_default()
}

/// How far a string that does not close reaches: to the end of its line, or of the
/// file for a template literal or a triple-quoted string.
fn unclosed(rest: &str, quote: char) -> usize {
    let triple: String = std::iter::repeat_n(quote, 3).collect();
    if quote == '`' || rest.starts_with(&triple) {
        rest.len()
    } else {
        rest.find('\n').unwrap_or(rest.len())
    }
}

/// The top-level comma-separated items of `s` (comments removed, each trimmed, empty
/// ones left out) up to the bracket that closes the one before `s`, and the byte
/// offset after that bracket. With `to_end`, the items run to the end of `s` instead.
/// `None` when a string does not close or the brackets do not balance.
pub(super) fn items(s: &str, lang: Lang, to_end: bool) -> Option<(Vec<String>, usize)> {
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

/// The byte length of the statement at the start of `s`: up to a line break (or `;`)
/// outside brackets and strings, brackets that open and close on later lines included.
/// A bracket that closes one opened before `s` ends it too.
pub(super) fn statement(s: &str, lang: Lang) -> usize {
    walk(s, lang, true)
}

/// The byte offset of the bracket that closes the one just before `s` (strings and
/// comments skipped), or `s.len()` when none does.
pub(super) fn closing(s: &str, lang: Lang) -> usize {
    walk(s, lang, false)
}

/// Where a walk over `s` outside strings and comments stops: at a bracket that closes
/// one opened before `s`, and with `statement` at the end of a line (or `;`, a comment,
/// a string that does not close) outside brackets.
fn walk(s: &str, lang: Lang, statement: bool) -> usize {
    let mut depth = 0usize;
    let mut i = 0;
    while i < s.len() {
        let rest = &s[i..];
        let Some(c) = rest.chars().next() else { break };
        if matches!(c, '"' | '\'' | '`') {
            match skip_string(rest) {
                Some(n) => i += n,
                None if statement => return i + rest.find('\n').unwrap_or(rest.len()),
                None => i += 1,
            }
            continue;
        }
        if let Some(n) = comment(rest, lang) {
            if statement && depth == 0 {
                return i;
            }
            i += n.max(1);
            continue;
        }
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' if depth == 0 => return i,
            ')' | ']' | '}' => depth -= 1,
            '\n' | ';' if statement && depth == 0 => return i,
            _ => {}
        }
        i += c.len_utf8();
    }
    s.len()
}

/// Whether `c` may be part of an identifier.
pub(super) fn ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// The 1-based line of byte offset `at` of `text`.
pub(super) fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}
