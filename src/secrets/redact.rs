//! Redaction: every secret value is replaced by `[secret]` in what strata prints or logs,
//! and so is every line of a multi-line secret (a PEM key or a kubeconfig is printed line
//! by line by the tools that read it), in the forms a program predictably prints them:
//! as is, JSON-escaped (`p\"w\\d`, and with `\uXXXX` for non-ASCII as Python's `json`
//! does) and shell single-quoted (`it'\''s`).
//!
//! The rule for short pieces (fewer than [`SHORT`] characters: a one-letter passphrase, a
//! `4711` line of a multi-line secret): they are masked only as a whole token, where
//! neither neighbour is a letter, digit or `_` (`PASS=x`, `pin: 4711`, a line of its
//! own), never inside a word, so `x` does not turn `exit` into `e[secret]it` nor `pp`
//! `app` into `a[secret]`. A short line of a multi-line secret without a letter or digit
//! (`}`, `---`) is structure, not secret, and is not masked. Longer pieces are masked
//! wherever they occur.

/// Replaces known secret values in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Masked wherever they occur.
    anywhere: Vec<String>,
    /// Masked only as a whole token.
    tokens: Vec<String>,
}

pub const MASK: &str = "[secret]";

/// Pieces shorter than this (in characters) are masked only as whole tokens.
pub const SHORT: usize = 6;

/// The forms a program predictably prints `s` in, `s` first.
fn forms(s: &str) -> Vec<String> {
    let mut out = vec![s.to_string()];
    // JSON string escaping, as serde, Go and JavaScript print it...
    if let Ok(json) = serde_json::to_string(s) {
        out.push(json[1..json.len() - 1].to_string());
    }
    // ...and as Python's `json.dumps` does by default (non-ASCII as \uXXXX).
    let mut ascii = String::new();
    for c in out[out.len() - 1].chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else {
            let mut buf = [0u16; 2];
            for u in c.encode_utf16(&mut buf) {
                ascii.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out.push(ascii);
    // Shell single quoting: `'` closes, is escaped, and reopens.
    out.push(s.replace('\'', "'\\''"));
    // Shell double quoting.
    let mut dq = String::new();
    for c in s.chars() {
        if matches!(c, '"' | '\\' | '$' | '`') {
            dq.push('\\');
        }
        dq.push(c);
    }
    out.push(dq);
    out.dedup();
    let mut seen = Vec::new();
    out.retain(|f| {
        let new = !seen.contains(f);
        seen.push(f.clone());
        new
    });
    out
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `text[start..end]` stands alone: no letter, digit or `_` right before or after.
fn stands_alone(text: &str, start: usize, end: usize) -> bool {
    !text[..start].chars().next_back().is_some_and(is_word)
        && !text[end..].chars().next().is_some_and(is_word)
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut r = Redactor::default();
        for v in values {
            r.add(&v);
        }
        r
    }

    fn push(&mut self, piece: &str) {
        if piece.is_empty() {
            return;
        }
        let list = if piece.chars().count() < SHORT {
            &mut self.tokens
        } else {
            &mut self.anywhere
        };
        if !list.iter().any(|p| p == piece) {
            list.push(piece.to_string());
        }
    }

    pub fn add(&mut self, value: &str) {
        if value.is_empty() {
            return;
        }
        for f in forms(value) {
            self.push(&f);
        }
        if value.contains('\n') || value.contains('\r') {
            for line in value.lines().map(str::trim) {
                let short = line.chars().count() < SHORT;
                if short && !line.chars().any(char::is_alphanumeric) {
                    continue;
                }
                for f in forms(line) {
                    self.push(&f);
                }
            }
        }
    }

    /// A secret value of any JSON type: a string as [`Self::add`]; anything else as its
    /// JSON text and, all the way down, each string leaf and each number or bool leaf as
    /// it is printed, so a field printed alone is masked too. `null` and the mask itself
    /// are no secret.
    pub fn add_value(&mut self, value: &serde_json::Value) {
        use serde_json::Value;
        match value {
            Value::Null => {}
            Value::String(s) if s == MASK => {}
            Value::String(s) => self.add(s),
            Value::Bool(_) | Value::Number(_) => self.add(&value.to_string()),
            Value::Array(items) => {
                self.add(&value.to_string());
                for v in items {
                    self.add_value(v);
                }
            }
            Value::Object(fields) => {
                self.add(&value.to_string());
                for v in fields.values() {
                    self.add_value(v);
                }
            }
        }
    }

    pub fn redact(&self, text: &str) -> String {
        // Every match of every piece in the original text (so a mask is never matched
        // again); overlapping matches are masked as one.
        let mut spans: Vec<(usize, usize)> = Vec::new();
        for p in &self.anywhere {
            spans.extend(
                text.match_indices(p.as_str())
                    .map(|(i, m)| (i, i + m.len())),
            );
        }
        for p in &self.tokens {
            spans.extend(
                text.match_indices(p.as_str())
                    .map(|(i, m)| (i, i + m.len()))
                    .filter(|&(s, e)| stands_alone(text, s, e)),
            );
        }
        if spans.is_empty() {
            return text.to_string();
        }
        spans.sort_unstable();
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        let mut i = 0;
        while i < spans.len() {
            let (start, mut end) = spans[i];
            i += 1;
            while i < spans.len() && spans[i].0 < end {
                end = end.max(spans[i].1);
                i += 1;
            }
            out.push_str(&text[at..start]);
            out.push_str(MASK);
            at = end;
        }
        out.push_str(&text[at..]);
        out
    }

    pub fn is_empty(&self) -> bool {
        self.anywhere.is_empty() && self.tokens.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secret output that is an object: each of its fields, printed alone, is masked,
    /// not only its whole JSON text (issue 43, item 5).
    #[test]
    fn every_leaf_of_a_secret_object_is_redacted() {
        let mut r = Redactor::default();
        let v = serde_json::json!({
            "user": "admin-ops",
            "password": "hunter2-long",
            "port": 54321,
            "nested": {"tokens": ["tok-abcdef"], "on": true, "mask": "[secret]"}
        });
        r.add_value(&v);
        let line = "user admin-ops pw hunter2-long port 54321 tok tok-abcdef on=true";
        let out = r.redact(line);
        for leaf in ["admin-ops", "hunter2-long", "54321", "tok-abcdef", "true"] {
            assert!(!out.contains(leaf), "{leaf} in clear: {out}");
        }
        // The whole JSON text too.
        assert!(!r.redact(&v.to_string()).contains("hunter2-long"));
        // The mask itself is not a secret.
        assert_eq!(r.redact("[secret]"), "[secret]");
    }

    #[test]
    fn every_line_of_a_multi_line_secret_is_redacted() {
        let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAMwAAAAtzc2gtZWQyNTUxOQAAACBx\n-----END OPENSSH PRIVATE KEY-----\n";
        let r = Redactor::new([pem.to_string()]);
        let out = r.redact("key line: b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n  AAAAMwAAAAtzc2gtZWQyNTUxOQAAACBx");
        assert!(!out.contains("b3Blbn") && !out.contains("AAAAMw"), "{out}");
        assert_eq!(r.redact("}"), "}");
    }

    #[test]
    fn json_escaped_and_shell_quoted_forms_are_redacted() {
        let r = Redactor::new(["header\np\"w\\d=hunter2\nfooter-line".to_string()]);
        let out = r.redact(r#"{"line":"p\"w\\d=hunter2"}"#);
        assert_eq!(out, r#"{"line":"[secret]"}"#);
        // The whole value, JSON-escaped on one line.
        let out = r.redact(r#"{"all":"header\np\"w\\d=hunter2\nfooter-line"}"#);
        assert!(!out.contains("hunter2") && !out.contains("footer"), "{out}");

        let r = Redactor::new(["o'brien-s3cret".to_string()]);
        assert_eq!(
            r.redact("echo 'o'\\''brien-s3cret'"),
            "echo '[secret]'",
            "shell single quotes"
        );
        let r = Redactor::new(["pa$$\"word`x".to_string()]);
        assert_eq!(r.redact("X=\"pa\\$\\$\\\"word\\`x\""), "X=\"[secret]\"");
        // Python's json.dumps escapes non-ASCII.
        let r = Redactor::new(["grüße-geheim".to_string()]);
        assert_eq!(r.redact(r#""gr\u00fc\u00dfe-geheim""#), "\"[secret]\"");
    }

    /// The short-piece rule, both ways: a short line or value is masked where it stands
    /// alone, and nowhere inside a word.
    #[test]
    fn short_pieces_are_masked_as_whole_tokens_only() {
        let r = Redactor::new(["-----BEGIN-----\n4711\n}\n".to_string()]);
        assert_eq!(r.redact("pin: 4711"), "pin: [secret]");
        assert_eq!(r.redact("4711"), "[secret]");
        assert_eq!(r.redact("port 47110, id a4711"), "port 47110, id a4711");
        assert_eq!(
            r.redact("{ }"),
            "{ }",
            "punctuation-only lines are structure"
        );

        let r = Redactor::new(["x".to_string(), "pp".to_string()]);
        assert_eq!(r.redact("exit 1"), "exit 1");
        assert_eq!(r.redact("infra/app ready"), "infra/app ready");
        assert_eq!(
            r.redact("STRATA_PASSPHRASE=x"),
            "STRATA_PASSPHRASE=[secret]"
        );
        assert_eq!(r.redact("pass: pp"), "pass: [secret]");
        assert_eq!(r.redact("x"), "[secret]");
    }

    #[test]
    fn a_mask_is_not_masked_again_and_overlaps_merge() {
        let r = Redactor::new(["secret".to_string(), "abcdefgh".to_string()]);
        assert_eq!(r.redact("abcdefgh secret"), "[secret] [secret]");
        let r = Redactor::new(["abcdefgh".to_string(), "efghijkl".to_string()]);
        assert_eq!(r.redact("<abcdefghijkl>"), "<[secret]>");
    }

    proptest::proptest! {
        /// No line (of at least SHORT characters) of any secret survives redaction,
        /// wherever it appears in the text.
        #[test]
        fn no_line_of_a_secret_survives(
            lines in proptest::collection::vec("[A-Za-z0-9+/=]{6,40}", 1..6),
            before in "[ a-z:]{0,10}",
            pick in 0usize..6,
        ) {
            let secret = lines.join("\n");
            let r = Redactor::new([secret.clone()]);
            let line = &lines[pick % lines.len()];
            let text = format!("{before}{line} and the whole: {secret}");
            let out = r.redact(&text);
            for l in &lines {
                proptest::prop_assert!(!out.contains(l.as_str()), "{l} survived in {out}");
            }
        }

        /// A short secret never changes text in which it does not stand alone, and is
        /// always masked where it does.
        #[test]
        fn short_secrets_mask_tokens_and_spare_words(
            secret in "[a-z0-9]{1,5}",
            word in "[a-z]{1,8}",
        ) {
            // A word equal to the secret is the secret standing alone (secret "l", word
            // "l" once failed here): the expectation below would be wrong, not strata.
            proptest::prop_assume!(word != secret);
            let r = Redactor::new([secret.clone()]);
            let inside = format!("{word}{secret}{word}");
            proptest::prop_assert_eq!(r.redact(&inside), inside.clone());
            let alone = format!("{word} {secret}, {word}={secret}");
            let out = r.redact(&alone);
            proptest::prop_assert_eq!(out, format!("{word} [secret], {word}=[secret]"));
        }
    }

    #[test]
    fn replaces_every_occurrence_longest_first() {
        let r = Redactor::new(["hunter2".to_string(), "hunter2-extra".to_string()]);
        assert_eq!(
            r.redact("a hunter2-extra b hunter2 c"),
            "a [secret] b [secret] c"
        );
        assert_eq!(r.redact("nothing here"), "nothing here");
    }
}
