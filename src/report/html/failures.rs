//! The failures: each failed project with its exit code, message, log file and the tail
//! of its log.

use maud::{Markup, html};

use crate::report::model::{Report, Step};

pub(super) fn failures(r: &Report) -> Markup {
    let failed: Vec<&Step> = r.steps.iter().filter(|s| s.kind() == "failed").collect();
    html! {
        @if !failed.is_empty() {
            section {
                h2 { "Failures (" (failed.len()) ")" }
                @for s in &failed {
                    h3 {
                        span.st.failed { "✗ " } code { (s.path) }
                        @if let Some(code) = s.exit_code { span.sub { " · exit code " (code) } }
                    }
                    @if let Some(m) = &s.message { p.msg { (m) } }
                    @if let Some(log) = &s.log { p.sub { "log: " code { (log) } } }
                    @if !s.tail.is_empty() {
                        pre.tail { (s.tail.join("\n")) }
                    } @else if let Some(why) = &s.tail_note {
                        p.sub { "No log tail: " (why) "." }
                    }
                }
            }
        }
    }
}
