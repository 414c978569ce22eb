//! Reading YAML that people (or a profile copied from the internet) wrote: the text must
//! be UTF-8 and nested at most [`MAX_DEPTH`] deep before the parser sees it (a deeply
//! nested document makes the parser quadratic), and parser messages lose every quoted
//! value before they are shown (an error must never print a file's content).

use std::path::Path;

use crate::error::{Error, Result};
use crate::util::display_path;

/// Deeper than any real profile or stack config.
pub const MAX_DEPTH: usize = 64;

/// The file's text: an invalid-UTF-8 or too deeply nested file is a configuration error
/// (exit 3) naming the file and the line.
pub fn read(file: &Path, what: &str) -> Result<String> {
    let bytes = std::fs::read(file).map_err(|e| Error::io("read", file, e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let line = 1 + e.as_bytes()[..e.utf8_error().valid_up_to()]
            .iter()
            .filter(|b| **b == b'\n')
            .count();
        Error::config(format!(
            "{}: line {line}: not valid UTF-8 text. {what} is YAML text: save it as UTF-8.",
            display_path(file)
        ))
    })?;
    check(file, &text)?;
    Ok(text)
}

/// Refuses text nested deeper than [`MAX_DEPTH`] (flow `[`/`{` or block levels).
pub fn check(file: &Path, text: &str) -> Result<()> {
    match too_deep(text, MAX_DEPTH) {
        None => Ok(()),
        Some(line) => Err(Error::config(format!(
            "{}: line {line}: nested more than {MAX_DEPTH} levels deep. No profile or stack config needs that; check the file (it may not be what you meant to use).",
            display_path(file)
        ))),
    }
}

/// The first line (1-based) where nesting exceeds `max`, scanning once: flow
/// collections outside quoted strings and comments, and block levels (indentation and
/// `- ` items on one line).
pub fn too_deep(text: &str, max: usize) -> Option<usize> {
    let mut flow = 0usize;
    let mut quote: Option<char> = None;
    let mut indents: Vec<usize> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if flow == 0 && quote.is_none() {
            let body = line.trim_start_matches(' ');
            if !body.is_empty() && !body.starts_with('#') {
                let indent = line.len() - body.len();
                while indents.last().is_some_and(|&i| i >= indent) {
                    indents.pop();
                }
                indents.push(indent);
                let mut rest = body;
                let mut dashes = 0;
                while let Some(r) = rest.strip_prefix("- ") {
                    dashes += 1;
                    rest = r.trim_start_matches(' ');
                }
                if indents.len() + dashes > max {
                    return Some(n + 1);
                }
            }
        }
        let mut prev = ' ';
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match (quote, c) {
                (Some('"'), '\\') => {
                    chars.next();
                }
                (Some('\''), '\'') if chars.peek() == Some(&'\'') => {
                    chars.next();
                }
                (Some(q), c) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '"' | '\'') => quote = Some(c),
                (None, '#') if prev == ' ' || prev == '\t' => break,
                (None, '[' | '{') => {
                    flow += 1;
                    if flow > max {
                        return Some(n + 1);
                    }
                }
                (None, ']' | '}') => flow = flow.saturating_sub(1),
                _ => {}
            }
            prev = c;
        }
    }
    None
}

/// A parser message without the values it quotes (`invalid type: string "…"`), so that
/// a file that is not what it should be (an env file, a key) is never echoed.
pub fn scrub(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        if c == '"' {
            let mut closed = false;
            while let Some(d) = chars.next() {
                if d == '\\' {
                    chars.next();
                } else if d == '"' {
                    closed = true;
                    break;
                }
            }
            out.push_str(if closed { "a value" } else { "…" });
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_is_bounded_for_flow_and_block_nesting() {
        assert_eq!(too_deep("a: [1, {b: [2]}]\n", 64), None);
        assert_eq!(too_deep(&"[".repeat(100_000), 64), Some(1));
        assert_eq!(
            too_deep(&format!("x:\n  {}", "- ".repeat(100)), 64),
            Some(2)
        );
        let mut block = String::new();
        for i in 0..100 {
            block.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        assert_eq!(too_deep(&block, 64), Some(65));
        // Brackets inside strings and comments do not count.
        let quoted = format!(
            "a: \"{}\"\nb: '{}' # {}\n",
            "[".repeat(100),
            "{".repeat(100),
            "[".repeat(100)
        );
        assert_eq!(too_deep(&quoted, 64), None);
    }

    #[test]
    fn a_deep_document_is_refused_in_well_under_a_second() {
        let text = "[".repeat(100_000) + &"]".repeat(100_000);
        let t = std::time::Instant::now();
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("p.yaml");
        std::fs::write(&f, &text).unwrap();
        let e = read(&f, "A profile").unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.message.contains("p.yaml") && e.message.contains("nested"),
            "{}",
            e.message
        );
        // Not a timing test: a sanity bound orders of magnitude above the linear scan.
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
    }

    #[test]
    fn invalid_utf8_names_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("Pulumi.dev.yaml");
        std::fs::write(&f, b"config:\n  a: \xff\xfe\n").unwrap();
        let e = read(&f, "The stack config").unwrap_err();
        assert_eq!(e.exit_code(), 3);
        assert!(
            e.message.contains("Pulumi.dev.yaml: line 2"),
            "{}",
            e.message
        );
    }

    #[test]
    fn scrub_removes_quoted_values() {
        assert_eq!(
            scrub(
                r#"invalid type: string "PULUMI_CONFIG_PASSPHRASE=hunter2", expected a sequence at line 1"#
            ),
            "invalid type: string a value, expected a sequence at line 1"
        );
        assert_eq!(scrub(r#"x "a \" b" y"#), "x a value y");
        assert_eq!(scrub("unknown field `need`"), "unknown field `need`");
    }

    proptest::proptest! {
        /// Any text: no panic, and a linear scan.
        #[test]
        fn depth_scan_never_panics(text in "\\PC{0,400}") {
            let _ = too_deep(&text, 64);
            let _ = scrub(&text);
        }
    }
}
