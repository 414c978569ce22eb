//! The report as one self-contained HTML page: inline CSS and an inline SVG Gantt chart,
//! no script, nothing loaded from anywhere. Built with `maud`, which escapes every value
//! it writes (project paths, messages and log lines are data, never markup).

use std::io::Write;

use maud::{DOCTYPE, Markup, PreEscaped, html};

use super::model::{Graph, Report, Step};
use crate::util::human_duration;

const SUCCEEDED: &str = "#2da44e";
const FAILED: &str = "#cf222e";
const CANCELLED: &str = "#e16f24";
const SKIPPED: &str = "#8c959f";
const BLOCKED: &str = "#8250df";
const UNKNOWN: &str = "#afb8c1";
/// The outline of the critical path.
const CRITICAL: &str = "#0a3069";

/// Width of the SVG's coordinate system (it scales to the page).
const WIDTH: f64 = 1120.0;
const AXIS_H: f64 = 30.0;
const WAVE_H: f64 = 22.0;
const ROW_H: f64 = 24.0;
const BAR_H: f64 = 14.0;

const CSS: &str = r#"
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f6f8fa; color: #1f2328;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Liberation Sans", sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 0 0 10px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
code, pre, .mono { font-family: "DejaVu Sans Mono", "Liberation Mono", ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
.sub { color: #59636e; margin: 0; }
.badge { display: inline-block; padding: 1px 10px; border-radius: 999px; color: #fff; font-size: 13px; font-weight: 600; vertical-align: 3px; margin-left: 8px; }
.badge.succeeded { background: #2da44e; } .badge.failed { background: #cf222e; }
.badge.cancelled { background: #e16f24; } .badge.incomplete { background: #6e7781; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { background: #fff; border: 1px solid #d1d9e0; border-radius: 8px; padding: 8px 14px; min-width: 150px; }
.card .v { font-size: 21px; font-weight: 600; }
.card .k { color: #59636e; font-size: 12px; }
section { background: #fff; border: 1px solid #d1d9e0; border-radius: 8px; padding: 14px 16px; margin: 14px 0; }
.legend { color: #59636e; font-size: 13px; margin: 0 0 8px; }
.legend span { margin-right: 14px; white-space: nowrap; }
.sw { display: inline-block; width: 14px; height: 10px; border-radius: 2px; margin-right: 5px; vertical-align: 0; }
.sw.cancelled { background: repeating-linear-gradient(45deg, #e16f24 0 3px, #f2b48a 3px 5px); }
.sw.critical { background: #fff; border: 2px solid #0a3069; }
.sw.retry { width: 3px; background: #1f2328; }
.note { background: #fff8c5; border: 1px solid #d4a72c66; border-radius: 6px; padding: 6px 10px; }
svg.timeline { display: block; width: 100%; height: auto; }
svg.timeline text { font-size: 12px; fill: #1f2328; font-family: system-ui, "DejaVu Sans", "Liberation Sans", sans-serif; }
svg.timeline text.label { font-family: "DejaVu Sans Mono", "Liberation Mono", ui-monospace, monospace; font-size: 11.5px; }
svg.timeline text.crit { font-weight: 700; }
svg.timeline text.dim, svg.timeline text.tick { fill: #59636e; font-size: 11px; }
svg.timeline text.wave { font-weight: 600; fill: #59636e; font-size: 11.5px; }
svg.timeline text.inside { fill: #fff; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eaeef2; vertical-align: top; }
th { color: #59636e; font-weight: 600; }
td.wide { width: 45%; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.st { font-weight: 600; white-space: nowrap; }
.st.succeeded { color: #1a7f37; } .st.failed { color: #cf222e; } .st.cancelled { color: #bc4c00; }
.st.skipped { color: #59636e; } .st.blocked { color: #8250df; } .st.unknown { color: #59636e; }
pre.tail { background: #0d1117; color: #e6edf3; padding: 10px 12px; border-radius: 6px; margin: 6px 0 0; line-height: 1.4; white-space: pre-wrap; overflow-wrap: anywhere; }
p.msg { white-space: pre-wrap; margin: 4px 0; }
footer { color: #59636e; font-size: 12px; margin-top: 18px; }
"#;

fn colour(kind: &str) -> &'static str {
    match kind {
        "succeeded" => SUCCEEDED,
        "failed" => FAILED,
        "cancelled" => CANCELLED,
        "skipped" => SKIPPED,
        "blocked" => BLOCKED,
        _ => UNKNOWN,
    }
}

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
                        (legend())
                        @if let Graph::Timing(why) = &r.graph {
                            p.note {
                                "Waves are not shown: the profile of this run could not be read ("
                                (why) "). Projects are in start order, and the critical path is the longest chain of projects that ran one after the other."
                            }
                        }
                        (PreEscaped(SLOT))
                        (critical_text(r))
                    }
                    (failures(r))
                    (pools(r))
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
        &mut [&mut |out| timeline(r, out), &mut |out| table(r, out)],
    )
}

/// Where a part written on its own goes in a template: markup that escaped text
/// (every value maud writes) can never contain.
const SLOT: &str = "<strata-slot>";

/// A part of the page written to `out` by itself (see [`write_around`]).
type Part<'a> = &'a mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>;

/// Writes `template` to `out`, each of its [`SLOT`]s, in order, filled by the next of
/// `parts`.
fn write_around(out: &mut dyn Write, template: Markup, parts: &mut [Part]) -> std::io::Result<()> {
    let text = template.into_string();
    let mut pieces = text.split(SLOT);
    if let Some(first) = pieces.next() {
        out.write_all(first.as_bytes())?;
    }
    for (piece, part) in pieces.zip(parts.iter_mut()) {
        part(out)?;
        out.write_all(piece.as_bytes())?;
    }
    Ok(())
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

fn legend() -> Markup {
    html! {
        p.legend {
            span { span.sw style={"background:" (SUCCEEDED)} {} "succeeded" }
            span { span.sw style={"background:" (FAILED)} {} "failed" }
            span { span.sw.cancelled {} "cancelled" }
            span { span.sw style={"background:" (SKIPPED)} {} "skipped (◆)" }
            span { span.sw style={"background:" (BLOCKED)} {} "blocked" }
            span { span.sw.critical {} "critical path" }
            span { span.sw.retry {} "a failed try, retried" }
        }
    }
}

/// Where things go in the SVG.
struct Geometry {
    x0: f64,
    x1: f64,
    span_ms: u64,
    step_ms: u64,
    height: f64,
    max_label: usize,
}

impl Geometry {
    fn new(r: &Report) -> Geometry {
        let longest = r
            .steps
            .iter()
            .map(|s| s.path.chars().count())
            .max()
            .unwrap_or(8);
        let max_label = longest.clamp(8, 48);
        let label_w = (max_label as f64 * 7.0 + 28.0).clamp(150.0, 380.0);
        let step_ms = tick_step(r.totals.wall_ms.max(1));
        let span_ms = r
            .totals
            .wall_ms
            .max(1)
            .div_ceil(step_ms)
            .saturating_mul(step_ms);
        let groups = r.groups();
        let height = AXIS_H
            + groups
                .iter()
                .map(|(_, m)| WAVE_H + m.len() as f64 * ROW_H)
                .sum::<f64>()
            + 10.0;
        Geometry {
            x0: label_w + 8.0,
            x1: WIDTH - 150.0,
            span_ms,
            step_ms,
            height: height.max(AXIS_H + 40.0),
            max_label,
        }
    }

    fn x(&self, ms: u64) -> f64 {
        self.x0 + (self.x1 - self.x0) * ms as f64 / self.span_ms as f64
    }
}

/// A tick every `step` ms, with at most about ten ticks on `span`.
fn tick_step(span: u64) -> u64 {
    const STEPS: [u64; 22] = [
        1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000,
        120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000,
    ];
    STEPS
        .iter()
        .copied()
        .find(|s| span / s <= 10)
        .unwrap_or_else(|| span.div_ceil(10 * 3_600_000) * 3_600_000)
}

fn tick_label(ms: u64, step: u64) -> String {
    if ms == 0 {
        "0".into()
    } else if step < 10 {
        format!("{:.3}s", ms as f64 / 1000.0)
    } else if step < 100 {
        format!("{:.2}s", ms as f64 / 1000.0)
    } else if step < 1000 {
        format!("{:.1}s", ms as f64 / 1000.0)
    } else if ms < 60_000 {
        format!("{}s", ms / 1000)
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else {
        format!("{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

fn f(v: f64) -> String {
    format!("{v:.1}")
}

/// The path, shortened from the left to `max` characters.
fn short(path: &str, max: usize) -> String {
    let n = path.chars().count();
    if n <= max {
        path.to_string()
    } else {
        let tail: String = path.chars().skip(n - (max - 1)).collect();
        format!("…{tail}")
    }
}

/// What is written after a bar: its time and whatever is not plain success.
fn bar_text(s: &Step) -> String {
    let mut parts = Vec::new();
    if s.recorded() && (s.duration_ms > 0 || matches!(s.kind(), "succeeded" | "failed")) {
        parts.push(human_duration(s.duration_ms));
    }
    match s.kind() {
        "succeeded" => {}
        "cancelled" => parts.push("⊘ cancelled".into()),
        "failed" => parts.push("✗ failed".into()),
        _ => parts.push(s.status.clone()),
    }
    if !s.retries.is_empty() {
        let n = s.retries.len();
        parts.push(format!("↻ {n} retr{}", if n == 1 { "y" } else { "ies" }));
    }
    if !s.changes.is_empty() {
        parts.push(changes_text(&s.changes));
    }
    parts.join(" · ")
}

fn tooltip(s: &Step) -> String {
    let mut t = format!("{}: {}", s.path, s.status);
    if s.recorded() {
        t.push_str(&format!(
            ", {} from {} to {}",
            human_duration(s.duration_ms),
            offset_text(s.start_ms),
            offset_text(s.end_ms())
        ));
    }
    if s.critical {
        t.push_str(" (critical path)");
    }
    if let Some(m) = &s.message {
        t.push_str(&format!("\n{}", m.lines().next().unwrap_or("")));
    }
    t
}

fn timeline(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
    let g = Geometry::new(r);
    let groups = r.groups();
    // The top of each step's row.
    let mut row_y = vec![0.0; r.steps.len()];
    let mut y = AXIS_H;
    let mut bands = Vec::new();
    for (k, (wave, members)) in groups.iter().enumerate() {
        let h = WAVE_H + members.len() as f64 * ROW_H;
        bands.push((k, *wave, members.len(), y, h));
        for (n, &i) in members.iter().enumerate() {
            row_y[i] = y + WAVE_H + n as f64 * ROW_H;
        }
        y += h;
    }
    let ticks: Vec<u64> = (0..=g.span_ms / g.step_ms).map(|k| k * g.step_ms).collect();
    let mid = |i: usize| row_y[i] + 6.0 + BAR_H / 2.0;
    let svg = html! {
        svg xmlns="http://www.w3.org/2000/svg" class="timeline" role="img"
            viewBox={"0 0 " (WIDTH) " " (f(g.height))} width=(WIDTH) height=(f(g.height)) {
            title { "Timeline of " (r.title()) ", run " (r.run_id) }
            defs {
                pattern id="hatch" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)" {
                    rect width="6" height="6" fill=(CANCELLED) {}
                    rect width="2.5" height="6" fill="#ffffff" fill-opacity="0.5" {}
                }
                marker id="arrow" viewBox="0 0 6 6" refX="5" refY="3" markerWidth="7" markerHeight="7" orient="auto" {
                    path d="M0,0 L6,3 L0,6 z" fill=(CRITICAL) {}
                }
            }
            @for (k, wave, count, top, h) in &bands {
                rect x="0" y=(f(*top)) width=(WIDTH) height=(f(*h))
                    fill=(if k % 2 == 0 { "#ffffff" } else { "#f6f8fa" }) {}
                text.wave x="10" y=(f(top + 15.0)) {
                    @if *wave > 0 { "wave " (wave) } @else { "in start order" }
                    " · " (count) " project" @if *count != 1 { "s" }
                }
            }
            @for t in &ticks {
                line x1=(f(g.x(*t))) y1=(f(AXIS_H - 6.0)) x2=(f(g.x(*t))) y2=(f(g.height - 6.0))
                    stroke="#d1d9e0" stroke-width="1" {}
                text.tick x=(f(g.x(*t))) y="16" text-anchor="middle" { (tick_label(*t, g.step_ms)) }
            }
            @if r.steps.is_empty() {
                text.dim x=(f(g.x0)) y=(f(AXIS_H + 28.0)) { "no project ran in this run" }
            }
            // The critical path, end of one project to the start of the next.
            @for pair in r.critical.windows(2) {
                line x1=(f(g.x(r.steps[pair[0]].end_ms()))) y1=(f(mid(pair[0])))
                    x2=(f(g.x(r.steps[pair[1]].start_ms).max(g.x(r.steps[pair[0]].end_ms()) + 2.0))) y2=(f(mid(pair[1]) - BAR_H / 2.0 - 1.0))
                    stroke=(CRITICAL) stroke-width="1.5" stroke-dasharray="4 3" marker-end="url(#arrow)" {}
            }
            (PreEscaped(SLOT))
        }
    };
    write_around(
        out,
        svg,
        &mut [&mut |out| {
            for (i, s) in r.steps.iter().enumerate() {
                out.write_all(row(&g, s, row_y[i]).into_string().as_bytes())?;
            }
            Ok(())
        }],
    )
}

fn row(g: &Geometry, s: &Step, top: f64) -> Markup {
    let bar_y = top + 6.0;
    let base = top + 17.0;
    let x_start = g.x(s.start_ms);
    let x_end = g.x(s.end_ms());
    // A step without a bar has a diamond, 6 wide on each side.
    let x_after = if s.recorded() && s.duration_ms > 0 {
        x_end
    } else {
        x_start + 7.0
    };
    let kind = s.kind();
    let text = bar_text(s);
    let text_w = text.chars().count() as f64 * 6.4;
    // After the bar when it fits, else before it, else inside it.
    let (tx, anchor, inside) = if x_after + 6.0 + text_w <= WIDTH - 4.0 {
        (x_after + 6.0, "start", false)
    } else if x_start - 6.0 - text_w >= g.x0 {
        (x_start - 6.0, "end", false)
    } else {
        (x_end - 6.0, "end", true)
    };
    let fill = if kind == "cancelled" {
        "url(#hatch)"
    } else {
        colour(kind)
    };
    let cy = bar_y + BAR_H / 2.0;
    html! {
        g {
            title { (tooltip(s)) }
            text.label.crit[s.critical] x="12" y=(f(base)) {
                (short(&s.path, g.max_label))
            }
            @if !s.recorded() {
                polygon points=(diamond(x_start, cy)) fill="#ffffff" stroke="#6e7781" stroke-width="1.5" {}
            } @else if s.duration_ms == 0 {
                polygon points=(diamond(x_start, cy)) fill=(colour(kind))
                    stroke=(if s.critical { CRITICAL } else { "none" }) stroke-width="2" {}
            } @else {
                rect x=(f(x_start)) y=(f(bar_y)) width=(f((x_end - x_start).max(2.0))) height=(f(BAR_H)) rx="2"
                    fill=(fill) stroke=(if s.critical { CRITICAL } else { "none" }) stroke-width="2.5" {}
            }
            @for retry in &s.retries {
                line x1=(f(g.x(retry.at_ms))) y1=(f(bar_y - 3.0)) x2=(f(g.x(retry.at_ms))) y2=(f(bar_y + BAR_H + 3.0))
                    stroke="#1f2328" stroke-width="2.5" {
                    title {
                        "try " (retry.attempt.saturating_sub(1)) " failed at " (offset_text(retry.at_ms))
                        ": " (retry.reason) "; tried again after " (human_duration(retry.delay_ms))
                    }
                }
            }
            text.dim.inside[inside] x=(f(tx)) y=(f(base)) text-anchor=(anchor) { (text) }
        }
    }
}

fn diamond(x: f64, cy: f64) -> String {
    let r = 6.0;
    format!(
        "{},{} {},{} {},{} {},{}",
        f(x),
        f(cy - r),
        f(x + r),
        f(cy),
        f(x),
        f(cy + r),
        f(x - r),
        f(cy)
    )
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

fn failures(r: &Report) -> Markup {
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

/// The changes of the pools' limits (a throttled project halved one; successes grew it).
fn pools(r: &Report) -> Markup {
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

fn table(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
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

/// `+2 ~1 -1 +-1` for a preview's change counts (other kinds by name).
pub fn changes_text(changes: &[(String, u64)]) -> String {
    changes
        .iter()
        .map(|(k, n)| match k.as_str() {
            "create" => format!("+{n}"),
            "update" => format!("~{n}"),
            "delete" => format!("-{n}"),
            "replace" => format!("+-{n}"),
            other => format!("{other} {n}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A duration from the start of the run: `+0.35s`, `+1m05s`.
pub fn offset_text(ms: u64) -> String {
    if ms < 60_000 {
        format!("+{:.2}s", ms as f64 / 1000.0)
    } else {
        format!("+{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_counts_read_as_signs() {
        let counts = [("create".into(), 2), ("update".into(), 1)];
        assert_eq!(changes_text(&counts), "+2 ~1");
        assert_eq!(changes_text(&[("replace".into(), 1)]), "+-1");
    }
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

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(tick_step(520), 50);
        assert_eq!(tick_step(1500), 200);
        assert_eq!(tick_step(1), 1);
        assert_eq!(tick_step(95_000), 10_000);
        assert_eq!(tick_step(4 * 3_600_000), 1_800_000);
        assert!(tick_step(50 * 3_600_000) * 10 >= 50 * 3_600_000);
        assert_eq!(tick_label(500, 100), "0.5s");
        assert_eq!(tick_label(90_000, 30_000), "1m30s");
        assert_eq!(tick_label(120_000, 60_000), "2m");
    }

    #[test]
    fn long_paths_are_shortened_from_the_left() {
        assert_eq!(short("kubernetes/nginx/ingress", 10), "…x/ingress");
        assert_eq!(short("a/b", 10), "a/b");
    }

    #[test]
    fn offsets_read_well() {
        assert_eq!(offset_text(0), "+0.00s");
        assert_eq!(offset_text(1234), "+1.23s");
        assert_eq!(offset_text(65_000), "+1m05s");
    }
}
