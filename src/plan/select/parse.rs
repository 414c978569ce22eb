//! The selector language's parser. The grammar, as implemented:
//!
//! ```text
//! filter  = term { "|" term } ;
//! term    = [ "!" ] [ "..." [ "^" ] ] target [ [ "^" ] "..." ] ;
//! target  = "[" rev [ "..." rev ] "]"        git range: what changed
//!         | "tag:" name                      entries tagged NAME
//!         | "from:" word                     that project and what is ordered after it
//!         | word ;                           path or Pulumi name; a glob with * ? **
//! word    = { any character but space | ! ^ [ ] , and not "..." } ;
//! ```
//!
//! Spaces may stand between tokens. A value that does not parse is a usage error that
//! shows the value and points at the column.

use crate::error::{Error, Result};

use super::{Filter, Range, Target, Term};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Bang,
    Pipe,
    Dots,
    Caret,
    /// The text between `[` and `]`.
    Bracket(String),
    Word(String),
}

/// A token and its 1-based column (in characters).
type Spanned = (Tok, usize);

/// Parses one `--filter` value.
pub fn filter(text: &str) -> Result<Filter> {
    let toks = lex(text)?;
    let mut p = Parser {
        text,
        toks: &toks,
        at: 0,
    };
    let mut terms = vec![p.term()?];
    while p.eat(&Tok::Pipe) {
        terms.push(p.term()?);
    }
    if let Some((tok, col)) = p.peek() {
        let what = match tok {
            Tok::Word(w) => format!("`{w}`"),
            _ => format!("`{}`", show(tok)),
        };
        return Err(p.error(
            *col,
            &format!(
                "unexpected {what}: terms are joined with `|` (`infra/* | tag:aws`); give another --filter for a union"
            ),
        ));
    }
    Ok(Filter {
        terms,
        source: format!("--filter '{text}'"),
    })
}

fn show(tok: &Tok) -> String {
    match tok {
        Tok::Bang => "!".into(),
        Tok::Pipe => "|".into(),
        Tok::Dots => "...".into(),
        Tok::Caret => "^".into(),
        Tok::Bracket(b) => format!("[{b}]"),
        Tok::Word(w) => w.clone(),
    }
}

fn lex(text: &str) -> Result<Vec<Spanned>> {
    let chars: Vec<char> = text.chars().collect();
    let dots_at = |i: usize| chars.get(i..i + 3) == Some(&['.', '.', '.'][..]);
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let col = i + 1;
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let single = match c {
            '!' => Some(Tok::Bang),
            '|' => Some(Tok::Pipe),
            '^' => Some(Tok::Caret),
            _ => None,
        };
        if let Some(t) = single {
            out.push((t, col));
            i += 1;
        } else if dots_at(i) {
            out.push((Tok::Dots, col));
            i += 3;
        } else if c == '[' {
            let Some(len) = chars[i + 1..].iter().position(|&c| c == ']') else {
                return Err(error(
                    text,
                    col,
                    "this `[` is not closed: a git range is `[main...HEAD]` or `[REF]`",
                ));
            };
            out.push((
                Tok::Bracket(chars[i + 1..i + 1 + len].iter().collect()),
                col,
            ));
            i += len + 2;
        } else if c == ']' || c == ',' {
            let why = if c == ']' {
                "this `]` closes no `[`"
            } else {
                "a filter is not a list: give each selector its own --filter (their union), or join terms with `|` (all must hold)"
            };
            return Err(error(text, col, why));
        } else {
            let start = i;
            while i < chars.len()
                && !chars[i].is_whitespace()
                && !"!|^[],".contains(chars[i])
                && !dots_at(i)
            {
                i += 1;
            }
            out.push((Tok::Word(chars[start..i].iter().collect()), col));
        }
    }
    Ok(out)
}

struct Parser<'a> {
    text: &'a str,
    toks: &'a [Spanned],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Spanned> {
        self.toks.get(self.at)
    }

    fn eat(&mut self, tok: &Tok) -> bool {
        if self.peek().is_some_and(|(t, _)| t == tok) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    /// The column of the next token, or one past the end.
    fn col(&self) -> usize {
        self.peek()
            .map(|(_, c)| *c)
            .unwrap_or(self.text.chars().count() + 1)
    }

    fn error(&self, col: usize, why: &str) -> Error {
        error(self.text, col, why)
    }

    fn term(&mut self) -> Result<Term> {
        let negated = self.eat(&Tok::Bang);
        let dependents = self.eat(&Tok::Dots);
        let mut strict = dependents && self.eat(&Tok::Caret);
        let target = self.target()?;
        let caret_col = self.col();
        let caret = self.eat(&Tok::Caret);
        let dependencies = self.eat(&Tok::Dots);
        if caret && !dependencies {
            return Err(self.error(
                caret_col,
                "`^` leaves the named projects out of a `...`: write `X^...` (what X needs) or `...^X` (what needs X)",
            ));
        }
        strict |= caret;
        Ok(Term {
            negated,
            dependents,
            target,
            dependencies,
            strict,
        })
    }

    fn target(&mut self) -> Result<Target> {
        let col = self.col();
        let expected = "expected a project path or name, a glob, `tag:NAME`, `from:PROJECT` or a git range `[main...HEAD]`";
        match self.peek().map(|(t, _)| t.clone()) {
            Some(Tok::Bracket(b)) => {
                self.at += 1;
                Ok(Target::Changed(range(self.text, col, &b)?))
            }
            Some(Tok::Word(w)) => {
                self.at += 1;
                word(self.text, col, &w)
            }
            Some(other) => Err(self.error(col, &format!("{expected}, found `{}`", show(&other)))),
            None => Err(self.error(col, &format!("{expected}, found the end"))),
        }
    }
}

/// A word: `tag:NAME`, `from:X`, a glob, or a project.
fn word(text: &str, col: usize, w: &str) -> Result<Target> {
    let (w, col) = match w.strip_prefix("./") {
        Some(rest) => (rest, col + 2),
        None => (w, col),
    };
    if let Some((kind, rest)) = w.split_once(':') {
        let at = col + kind.chars().count() + 1;
        return match kind {
            "tag" if is_name(rest) => Ok(Target::Tag(rest.to_string())),
            "tag" => Err(error(
                text,
                at,
                "a tag is a name (letters, digits, - _ .), as in `tag:network`",
            )),
            "from" if !rest.is_empty() && !is_glob(rest) => Ok(Target::From(rest.to_string())),
            "from" => Err(error(
                text,
                at,
                "`from:` takes one project (a path or Pulumi name), as in `from:infra/eks`",
            )),
            _ => Err(error(
                text,
                col,
                &format!(
                    "`{kind}:` is no kind of selector{}; the kinds are `tag:NAME` and `from:PROJECT`, and a project path, name or glob is written as it is",
                    crate::util::did_you_mean(kind, ["tag", "from"])
                ),
            )),
        };
    }
    if w.is_empty() {
        return Err(error(text, col, "`./` names no project"));
    }
    if is_glob(w) {
        let g = w.trim_end_matches('/');
        let g = g.strip_prefix("projects/").unwrap_or(g);
        return Ok(Target::Glob(
            if g.is_empty() { "**" } else { g }.to_string(),
        ));
    }
    Ok(Target::Project(w.to_string()))
}

fn is_glob(w: &str) -> bool {
    w.contains(['*', '?'])
}

/// A tag name, as profiles allow it.
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The inside of `[...]` (its `[` at column `col`): `A...B` or `REF`. A bad revision is
/// pointed at, whichever side it is on.
fn range(text: &str, col: usize, inside: &str) -> Result<Range> {
    // Each revision as written, and the column of its first character.
    let rev = |written: &str, at: usize| -> Result<String> {
        let r = written.trim();
        let why = if r.is_empty() {
            "a git range names a revision on each side of `...`: `[main...HEAD]`, or one: `[main]`"
        } else if r.contains("..") {
            "a git range is `[A...B]` (three dots: from the merge base of A and B to B) or `[REF]` (since REF, uncommitted work included)"
        } else if r.starts_with('-') {
            "a git revision cannot start with `-`"
        } else if r.contains(char::is_whitespace) {
            "a git revision has no spaces"
        } else {
            return Ok(r.to_string());
        };
        let leading = written.chars().take_while(|c| c.is_whitespace()).count();
        Err(error(text, at + leading, why))
    };
    match inside.split_once("...") {
        Some((a, b)) => Ok(Range::Between(
            rev(a, col + 1)?,
            rev(b, col + 1 + a.chars().count() + 3)?,
        )),
        None => Ok(Range::Since(rev(inside, col + 1)?)),
    }
}

/// A usage error for `text` at 1-based column `col`, with the value and a caret.
fn error(text: &str, col: usize, why: &str) -> Error {
    let shown: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    Error::usage(format!(
        "--filter '{shown}': {why} (column {col}).\n  {shown}\n  {}^\n  Selectors: a path or Pulumi name, a glob (`infra/*`), `X...` (and what X needs), `...X` (and what needs X), `tag:NAME`, `[main...HEAD]`, `!X`; see docs/book/src/selecting.md.",
        " ".repeat(col.saturating_sub(1))
    ))
}
