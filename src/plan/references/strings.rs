//! The literals of a name: string literals (quotes, f-strings, templates, with the
//! interpolations they hold), a call's arguments when an expression is exactly that
//! call, and what a name looks like. Below `expr`, which reads what the interpolations
//! and names stand for.

use super::lex::{Lang, items};
use super::{Part, Piece};

/// What the scanner makes of an expression it cannot evaluate.
pub(super) fn unknown() -> Vec<Piece> {
    vec![Piece::Value(Part::Unknown)]
}

/// The arguments of `callee(...)` when `e` is exactly that call.
pub(super) fn call_of(e: &str, callees: &[&str], lang: Lang) -> Option<Vec<String>> {
    let rest = callees.iter().find_map(|c| e.strip_prefix(c))?;
    let rest = rest.trim_start().strip_prefix('(')?;
    let (args, end) = items(rest, lang, false)?;
    rest[end..].trim().is_empty().then_some(args)
}

/// The text of `e` when it is one plain string literal (no interpolation).
pub(super) fn literal(e: &str) -> Option<String> {
    let e = e.trim();
    let e = e.strip_prefix(['r', 'u', 'R', 'U']).unwrap_or(e);
    let (pieces, len) = string_literal(e, false, &|_| unknown())?;
    if len != e.len() {
        return None;
    }
    match pieces.as_slice() {
        [] => Some(String::new()),
        [Piece::Text(t)] => Some(t.clone()),
        _ => None,
    }
}

/// A string literal starting at `s[0]` (after any prefix letters): its pieces (each
/// f-string `{...}` and template `${...}` part what `hole` makes of its expression) and
/// its length in bytes.
pub(super) fn string_literal(
    s: &str,
    templated: bool,
    hole: &dyn Fn(&str) -> Vec<Piece>,
) -> Option<(Vec<Piece>, usize)> {
    let quote = s.chars().next()?;
    if !matches!(quote, '"' | '\'' | '`') {
        return None;
    }
    let template = templated || quote == '`';
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = s.char_indices().skip(1).peekable();
    let hole = |text: &mut String, pieces: &mut Vec<Piece>, expr: &str| {
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(text)));
        }
        pieces.extend(hole(expr));
    };
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
                hole(&mut text, &mut pieces, &expr);
            }
            '{' if template && quote != '`' => {
                if chars.peek().map(|(_, c)| *c) == Some('{') {
                    chars.next();
                    text.push('{');
                    continue;
                }
                let expr = take_braced(&mut chars)?;
                hole(&mut text, &mut pieces, &expr);
            }
            '}' if template && quote != '`' && chars.peek().map(|(_, c)| *c) == Some('}') => {
                chars.next();
                text.push('}');
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

/// Whether `e` is a name: `a`, `a.b.C`.
pub(super) fn is_name(e: &str) -> bool {
    !e.is_empty()
        && !e.starts_with('.')
        && !e.ends_with('.')
        && e.chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '.' || c == '$')
}
