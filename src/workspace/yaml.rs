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

/// Refuses text nested deeper than [`MAX_DEPTH`] (flow `[`/`{` or block levels), and
/// text whose aliases expand it past [`expansion_limit`].
pub fn check(file: &Path, text: &str) -> Result<()> {
    if let Some(line) = too_deep(text, MAX_DEPTH) {
        return Err(Error::config(format!(
            "{}: line {line}: nested more than {MAX_DEPTH} levels deep. No profile or stack config needs that; check the file (it may not be what you meant to use).",
            display_path(file)
        )));
    }
    // An alias is written `*name`: a text without a `*` has none, weighs less than twice
    // its length, and so stays under the limit without a second parse.
    if text.contains('*') && expands_past(text, expansion_limit(text.len())) {
        return Err(Error::config(format!(
            "{}: its YAML aliases (`*name`) expand it to more than {} times its size. No profile or stack config needs that; write the values out, or check the file (it may not be what you meant to use).",
            display_path(file),
            EXPANSION_FACTOR
        )));
    }
    Ok(())
}

/// Aliases may make a document at most this many times heavier than its text (plus
/// [`EXPANSION_FLOOR`]): a YAML-alias bomb ("billion laughs") is refused after reading
/// that much, in well under a second, instead of being expanded in memory.
pub const EXPANSION_FACTOR: usize = 4;
/// What any small file may expand to, whatever its size.
pub const EXPANSION_FLOOR: usize = 512 << 10;

/// The most a document of `len` bytes may weigh once its aliases are expanded (each node
/// weighs 1, and a scalar its length more). A document without aliases weighs less than
/// twice its length.
pub fn expansion_limit(len: usize) -> u64 {
    (EXPANSION_FLOOR + EXPANSION_FACTOR.saturating_mul(len)) as u64
}

/// Whether `text`, with its aliases expanded, weighs more than `limit`. The document is
/// walked as the parser replays it (an alias replays its anchor's events), and the walk
/// stops as soon as the budget is spent, so this costs at most `limit`, never the
/// expansion. A text that does not parse is not refused here: its parser says why.
pub fn expands_past(text: &str, limit: u64) -> bool {
    use serde::de::DeserializeSeed;
    let budget = Budget {
        left: std::cell::Cell::new(limit),
        spent: std::cell::Cell::new(false),
    };
    let _ = Walk(&budget).deserialize(serde_yaml::Deserializer::from_str(text));
    budget.spent.get()
}

struct Budget {
    left: std::cell::Cell<u64>,
    spent: std::cell::Cell<bool>,
}

impl Budget {
    fn charge<E: serde::de::Error>(&self, weight: usize) -> std::result::Result<(), E> {
        let w = weight as u64 + 1;
        if self.left.get() < w {
            self.spent.set(true);
            return Err(E::custom("expansion budget spent"));
        }
        self.left.set(self.left.get() - w);
        Ok(())
    }
}

/// The visits of scalars that weigh only their node: each charges 0. (A macro: these are
/// the trait's own methods, one per type.)
macro_rules! charge_nothing_but_the_node {
    ($($visit:ident: $t:ty),* $(,)?) => {
        $(
            fn $visit<E: serde::de::Error>(self, _: $t) -> std::result::Result<(), E> {
                self.0.charge(0)
            }
        )*
    };
}

/// Visits every node of a document, charging the budget.
#[derive(Clone, Copy)]
struct Walk<'a>(&'a Budget);

impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    charge_nothing_but_the_node! {
        visit_bool: bool,
        visit_i64: i64,
        visit_i128: i128,
        visit_u64: u64,
        visit_u128: u128,
        visit_f64: f64,
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<(), E> {
        self.0.charge(v.len())
    }
    fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> std::result::Result<(), E> {
        self.0.charge(v.len())
    }
    fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        self.0.charge(0)
    }
    fn visit_none<E: serde::de::Error>(self) -> std::result::Result<(), E> {
        self.0.charge(0)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        use serde::de::DeserializeSeed;
        self.deserialize(d)
    }
    fn visit_newtype_struct<D: serde::Deserializer<'de>>(
        self,
        d: D,
    ) -> std::result::Result<(), D::Error> {
        use serde::de::DeserializeSeed;
        self.deserialize(d)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<(), A::Error> {
        self.0.charge(0)?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<(), A::Error> {
        self.0.charge(0)?;
        while map.next_key_seed(self)?.is_some() {
            map.next_value_seed(self)?;
        }
        Ok(())
    }
    /// A tagged value (`!Tag value`).
    fn visit_enum<A: serde::de::EnumAccess<'de>>(
        self,
        data: A,
    ) -> std::result::Result<(), A::Error> {
        use serde::de::VariantAccess;
        let ((), variant) = data.variant_seed(self)?;
        variant.newtype_variant_seed(self)
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

    /// Three levels of a hundred aliases: a million scalars from 2 KB.
    fn laughs() -> String {
        let row = |item: &str| vec![item; 100].join(", ");
        format!(
            "a: &a [{}]\nb: &b [{}]\nc: [{}]\n",
            row("x"),
            row("*a"),
            row("*b")
        )
    }

    #[test]
    fn alias_bombs_are_refused_and_ordinary_aliases_pass() {
        let f = Path::new("providers/aws.yaml");
        let e = check(f, &laughs()).unwrap_err().to_string();
        assert!(
            e.contains("providers/aws.yaml") && e.contains("aliases"),
            "{e}"
        );
        // A long string repeated by aliases weighs its length each time.
        let long = format!(
            "s: &s \"{}\"\nl: [{}]\n",
            "y".repeat(100_000),
            vec!["*s"; 200].join(", ")
        );
        assert!(check(f, &long).is_err());
        // Defaults shared by anchors, as people write them, are fine.
        let mut ok = String::from(
            "defaults: &d {region: eu-west-1, size: m5.large, tags: {team: platform}}\n",
        );
        for i in 0..200 {
            ok.push_str(&format!("e{i}: *d\n"));
        }
        assert!(check(f, &ok).is_ok());
        // A large file without aliases is never refused, nor one that does not parse.
        let big: String = (0..20_000).map(|i| format!("k{i}: \"v{i}\"\n")).collect();
        assert!(!expands_past(&big, expansion_limit(big.len())));
        assert!(!expands_past("a: [1, 2\n", 10));
        // Tagged values are walked too.
        assert!(expands_past(
            &laughs().replace("c: [", "c: !T ["),
            1_000_000
        ));
    }

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
        e.assert_says("Pulumi.dev.yaml: line 2");
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

        /// `check` walks only texts with a `*`: one without (anchors, tags, nesting,
        /// quotes and all) weighs at most twice its length and a node, far under the
        /// limit (whose floor alone is 512 KiB), so the walk would never refuse it.
        #[test]
        fn a_text_without_an_alias_weighs_at_most_twice_its_length(
            text in "([a-z0-9]{1,6}|: |- |&[a-z]{1,3} |!T |[\\[\\]{},'\"]|\n {0,4}){0,120}"
        ) {
            let twice = 2 * text.len() as u64 + 1;
            proptest::prop_assert!(!expands_past(&text, twice), "{text:?}");
            proptest::prop_assert!(twice <= expansion_limit(text.len()));
        }
    }
}
