//! The timeline: an SVG Gantt chart with a band per wave, a row per project (its bar,
//! retries and what became of it), the time axis and the critical path's arrows.

use std::io::Write;

use maud::{Markup, PreEscaped, html};

use super::layout::{AXIS_H, BAR_H, Geometry, ROW_H, WAVE_H, WIDTH, f, tick_label};
use super::slots::{SLOT, write_around};
use super::style::{
    AWAITING, BLOCKED, CANCELLED, CRITICAL, DENIED, FAILED, SKIPPED, SUCCEEDED, colour,
};
use super::text::{changes_text, offset_text};
use crate::report::model::{Report, Step};
use crate::util::human_duration;

/// The key to the timeline's colours and marks.
pub(super) fn legend() -> Markup {
    html! {
        p.legend {
            span { span.sw style={"background:" (SUCCEEDED)} {} "succeeded" }
            span { span.sw style={"background:" (FAILED)} {} "failed" }
            span { span.sw.cancelled {} "cancelled" }
            span { span.sw style={"background:" (SKIPPED)} {} "skipped (◆)" }
            span { span.sw style={"background:" (BLOCKED)} {} "blocked" }
            span { span.sw style={"background:" (DENIED)} {} "denied" }
            span { span.sw style={"background:" (AWAITING)} {} "awaiting approval" }
            span { span.sw.critical {} "critical path" }
            span { span.sw.retry {} "a failed try, retried" }
        }
    }
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

/// The SVG, its rows written one at a time.
pub(super) fn timeline(r: &Report, out: &mut dyn Write) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_paths_are_shortened_from_the_left() {
        assert_eq!(short("kubernetes/nginx/ingress", 10), "…x/ingress");
        assert_eq!(short("a/b", 10), "a/b");
    }
}
