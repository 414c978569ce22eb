//! Why a project ended as it did, from a fixed list that the published schema
//! (`docs/schema/report.v2.json`) enumerates: a reader can switch on it without parsing
//! messages, and a new reason is a new schema version.

/// Every reason, in the order the schema lists them.
pub const REASONS: &[&str] = &[
    "succeeded",
    "retried and succeeded",
    "failed",
    "timed out",
    "skipped: upstream failed",
    "skipped: upstream did not run",
    "skipped: upstream outputs unchanged",
    "skipped: unchanged since its last up",
    "skipped: nothing to preview",
    "skipped",
    "blocked: upstream never deployed",
    "denied: policy rule",
    "awaiting: approval rule",
    "cancelled",
    "not recorded",
];

/// The reason of a project's end: its status, the message strata recorded with it, and
/// whether it was retried. The messages are the ones the scheduler and the step write
/// (tested below against the same texts).
pub fn of(status: &str, message: Option<&str>, retried: bool) -> &'static str {
    let m = message.unwrap_or("");
    match status {
        "succeeded" if retried => "retried and succeeded",
        "succeeded" => "succeeded",
        "failed" if m.contains("timed out after") => "timed out",
        "failed" => "failed",
        "skipped" if m.starts_with("not run: needs") && m.ends_with("which failed") => {
            "skipped: upstream failed"
        }
        "skipped" if m.starts_with("not run: needs") => "skipped: upstream did not run",
        "skipped" if m == "upstream outputs unchanged" => "skipped: upstream outputs unchanged",
        "skipped" if m.starts_with("unchanged since its last up") => {
            "skipped: unchanged since its last up"
        }
        "skipped" if m.ends_with("nothing to preview") => "skipped: nothing to preview",
        "skipped" => "skipped",
        "blocked" => "blocked: upstream never deployed",
        "denied" => "denied: policy rule",
        "awaiting" => "awaiting: approval rule",
        "cancelled" => "cancelled",
        _ => "not recorded",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_strata_writes_has_its_reason() {
        let cases = [
            ("succeeded", None, false, "succeeded"),
            (
                "succeeded",
                Some("1 updated"),
                true,
                "retried and succeeded",
            ),
            ("failed", Some("exit 1"), false, "failed"),
            ("failed", Some("timed out after 50ms"), true, "timed out"),
            (
                "skipped",
                Some("not run: needs alpha, which failed"),
                false,
                "skipped: upstream failed",
            ),
            (
                "skipped",
                Some("not run: needs alpha, which did not run"),
                false,
                "skipped: upstream did not run",
            ),
            (
                "skipped",
                Some("upstream outputs unchanged"),
                false,
                "skipped: upstream outputs unchanged",
            ),
            (
                "skipped",
                Some("unchanged since its last up (2026-11-26T00:00:00Z)"),
                false,
                "skipped: unchanged since its last up",
            ),
            (
                "skipped",
                Some("no `preview:` command in its Strata.yaml: nothing to preview"),
                false,
                "skipped: nothing to preview",
            ),
            (
                "blocked",
                Some("needs a"),
                false,
                "blocked: upstream never deployed",
            ),
            ("cancelled", None, false, "cancelled"),
            ("not recorded", None, false, "not recorded"),
        ];
        for (status, message, retried, want) in cases {
            assert_eq!(of(status, message, retried), want, "{status} {message:?}");
            assert!(REASONS.contains(&want));
        }
    }
}
