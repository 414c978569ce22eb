//! The page's tables: the projects, a row each, and the changes of the pools' limits.

use std::io::Write;

use maud::{Markup, PreEscaped, html};

use super::slots::{SLOT, write_around};
use super::text::{changes_text, offset_text};
use crate::report::model::{Report, Step};
use crate::util::human_duration;

/// The changes of the pools' limits (a throttled project halved one; successes grew it).
pub(super) fn pools(r: &Report) -> Markup {
    html! {
        @if !r.pool_changes.is_empty() {
            section {
                h2 { "Pool limits (" (r.pool_changes.len()) " changes)" }
                p.sub { "A pool's limit halves when one of its projects is throttled, and grows back by one after as many successes as the limit." }
                table {
                    thead { tr { th { "at" } th { "pool" } th { "limit" } th { "why" } } }
                    tbody {
                        @for c in &r.pool_changes {
                            tr {
                                td.num { (offset_text(c.at_ms)) }
                                td { code { (c.pool) } }
                                td.num { (c.previous) " → " (c.limit) }
                                td.wide { (c.reason) }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn table(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let has_changes = r.steps.iter().any(|s| !s.changes.is_empty());
    let table = html! {
        section {
            h2 { "Projects" }
            table {
                thead {
                    tr {
                        th { "wave" } th { "project" } th { "status" } th { "start" } th { "took" }
                        th { "retries" }
                        @if has_changes { th { "changes" } }
                        th { "note" }
                    }
                }
                tbody { (PreEscaped(SLOT)) }
            }
            p.sub { "★ on the critical path. Each project's log is under " code { ".strata/" (r.stack) "/logs/" } " (hover a project for its file)." }
        }
    };
    write_around(
        out,
        table,
        &mut [&mut |out| {
            for s in &r.steps {
                out.write_all(table_row(s, has_changes).into_string().as_bytes())?;
            }
            Ok(())
        }],
    )
}

fn table_row(s: &Step, has_changes: bool) -> Markup {
    html! {
        tr {
            td.num { @if s.wave > 0 { (s.wave) } @else { "–" } }
            td title=(s.log.as_deref().map(|l| format!("log: {l}")).unwrap_or_default()) {
                code { (s.path) } @if s.critical { " ★" }
            }
            td { span class={"st " (s.kind())} { (s.status) } }
            td.num { @if s.recorded() { (offset_text(s.start_ms)) } @else { "–" } }
            td.num { @if s.recorded() { (human_duration(s.duration_ms)) } @else { "–" } }
            td.num { @if s.retries.is_empty() { "–" } @else { (s.retries.len()) } }
            @if has_changes { td.mono { (changes_text(&s.changes)) } }
            td.wide { (s.message.as_deref().and_then(|m| m.lines().next()).unwrap_or("")) }
        }
    }
}
