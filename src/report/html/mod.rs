//! The report as one self-contained HTML page: inline CSS and an inline SVG Gantt chart,
//! no script, nothing loaded from anywhere. Built with `maud`, which escapes every value
//! it writes (project paths, messages and log lines are data, never markup).
//!
//! Here is the page's frame, its header, cards and critical path; `style` is its look,
//! `timeline` (placed by `layout`) draws the run, `tables` and `failures` list the
//! projects, the pools' changes and the failures' logs, `slots` writes the long parts a
//! row at a time, and `text` says how times and counts read.

mod failures;
mod layout;
mod slots;
mod style;
mod tables;
mod text;
mod timeline;

use std::io::Write;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::model::{Graph, Report};
use crate::util::human_duration;
use slots::{SLOT, write_around};
use style::CSS;
pub use text::{changes_text, offset_text};

/// The page.
pub fn render(r: &Report) -> String {
    let mut page = Vec::new();
    // Writing to a Vec cannot fail, and maud writes UTF-8 only.
    let _ = write(r, &mut page);
    String::from_utf8(page).unwrap_or_default()
}

/// Writes the page to `out` as it is drawn: the timeline's rows and the table's one at
/// a time, so the page of a run of thousands of projects is never held whole.
pub fn write(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let page = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (r.title()) " · " (r.status) }
                style { (PreEscaped(CSS)) }
            }
            body {
                main {
                    (header(r))
                    (cards(r))
                    section {
                        h2 { "Timeline" }
                        p.sub {
                            "One row per project, one bar from its start to its end. "
                            @if r.graph == Graph::Plan {
                                "A wave holds the projects that could run at once: each needs only projects of earlier waves."
                            }
                        }
                        (timeline::legend())
                        @if let Graph::Timing(why) = &r.graph {
                            p.note {
                                "Waves are not shown: the profile of this run could not be read ("
                                (why) "). Projects are in start order, and the critical path is the longest chain of projects that ran one after the other."
                            }
                        }
                        (PreEscaped(SLOT))
                        (critical_text(r))
                    }
                    (failures::failures(r))
                    (tables::pools(r))
                    (PreEscaped(SLOT))
                    footer {
                        "Drawn by strata report from " code { (r.journal) }
                        ". Times are from the start of the run; bars show how long each project ran, retries included."
                    }
                }
            }
        }
    };
    write_around(
        out,
        page,
        &mut [&mut |out| timeline::timeline(r, out), &mut |out| {
            tables::table(r, out)
        }],
    )
}

fn header(r: &Report) -> Markup {
    html! {
        h1 {
            "strata " (r.operation) " · stack " (r.stack)
            span class={"badge " (r.status)} { (r.status) }
        }
        p.sub {
            "provider " b { (r.provider) } " · run " code { (r.run_id) }
            " · started " (r.started_at)
            @if !r.command.is_empty() { " · " code { (r.command) } }
        }
    }
}

fn cards(r: &Report) -> Markup {
    let t = &r.totals;
    let counts = t
        .counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(" · ");
    html! {
        div.cards {
            div.card { div.v { (human_duration(t.wall_ms)) } div.k { "wall time" } }
            div.card { div.v { (human_duration(t.sum_ms)) } div.k { "sum of project times" } }
            div.card {
                div.v {
                    @match t.parallelism() {
                        Some(p) => { "×" (format!("{p:.2}")) }
                        None => { "–" }
                    }
                }
                div.k { "parallelism (sum ÷ wall)" }
            }
            div.card { div.v { (human_duration(t.critical_ms)) } div.k { "critical path (" (r.critical.len()) " project" @if r.critical.len() != 1 { "s" } ")" } }
            div.card { div.v { (r.steps.len()) } div.k { (counts) } }
        }
    }
}

fn critical_text(r: &Report) -> Markup {
    html! {
        @if !r.critical.is_empty() {
            p {
                b { "Critical path: " }
                @for (k, &i) in r.critical.iter().enumerate() {
                    @if k > 0 { " → " }
                    code { (r.steps[i].path) } " (" (human_duration(r.steps[i].duration_ms)) ")"
                }
                " = " (human_duration(r.totals.critical_ms)) " of the " (human_duration(r.totals.wall_ms)) " wall time. "
                span.sub {
                    @if r.graph == Graph::Plan {
                        "The longest chain of projects through their needs: only making these faster makes the run faster."
                    } @else {
                        "The longest chain of projects that ran one after the other."
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample;

    #[test]
    fn the_page_is_self_contained_and_escapes_what_it_shows() {
        let mut r = sample();
        r.steps[3].path = "x<script>alert(1)</script>&\"".into();
        r.steps[2].message = Some("boom <b>".into());
        let page = render(&r);
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(!page.contains("<script"), "no script at all");
        assert!(page.contains("x&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;"));
        assert!(page.contains("boom &lt;b&gt;"));
        for attr in [" src=", " href="] {
            assert!(!page.contains(attr), "{attr} in the page");
        }
        for p in ["alpha", "bravo", "charlie"] {
            assert!(page.contains(p));
        }
        assert!(page.contains("wave 2"));
        assert!(page.contains("Critical path"));
    }
}
