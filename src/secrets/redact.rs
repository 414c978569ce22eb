//! Redaction: every secret value is replaced by `[secret]` in what strata prints or logs,
//! and so is every line of a multi-line secret (a PEM key or a kubeconfig is printed line
//! by line by the tools that read it).

/// Replaces known secret values in text.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret containing another is replaced whole.
    values: Vec<String>,
}

pub const MASK: &str = "[secret]";

/// Lines of a multi-line secret shorter than this (trimmed) are not redacted on their
/// own: `}`, `---` or `-----END` carry nothing secret, and masking them would mask
/// unrelated output everywhere.
pub const MIN_LINE: usize = 6;

/// The strings to redact for one secret: the value, and each of its lines (trimmed) of
/// at least [`MIN_LINE`] characters.
fn pieces(value: &str) -> Vec<String> {
    let mut out = vec![value.to_string()];
    if value.contains('\n') || value.contains('\r') {
        out.extend(
            value
                .lines()
                .map(str::trim)
                .filter(|l| l.chars().count() >= MIN_LINE)
                .map(str::to_string),
        );
    }
    out
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut r = Redactor::default();
        for v in values {
            r.add(&v);
        }
        r
    }

    pub fn add(&mut self, value: &str) {
        if value.is_empty() {
            return;
        }
        for p in pieces(value) {
            if !self.values.contains(&p) {
                self.values.push(p);
            }
        }
        self.values.sort_by_key(|v| std::cmp::Reverse(v.len()));
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for v in &self.values {
            if out.contains(v.as_str()) {
                out = out.replace(v.as_str(), MASK);
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_a_multi_line_secret_is_redacted() {
        let pem = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\nAAAAMwAAAAtzc2gtZWQyNTUxOQAAACBx\n-----END OPENSSH PRIVATE KEY-----\n";
        let r = Redactor::new([pem.to_string()]);
        let out = r.redact("key line: b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n  AAAAMwAAAAtzc2gtZWQyNTUxOQAAACBx");
        assert!(!out.contains("b3Blbn") && !out.contains("AAAAMw"), "{out}");
        assert_eq!(r.redact("}"), "}");
    }

    proptest::proptest! {
        /// No line (of at least MIN_LINE characters) of any secret survives redaction,
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
