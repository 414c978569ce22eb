//! The report as a Mermaid `gantt` chart, for a README or a pull request: one section per
//! wave, one task per project at its real start and end (epoch milliseconds), the status
//! as Mermaid's tags (`done` succeeded, `crit` failed, `active` cancelled, a milestone
//! for a project that did not run), the critical path marked with ★.

use std::fmt::Write;

use super::model::{Graph, Report};
use crate::util::human_duration;

/// Text Mermaid reads as a plain task name or title, and Markdown as plain text: letters,
/// digits, spaces and `/ . _ - @ + ( ) ★ ·`; anything else becomes `_`.
fn safe(text: &str) -> String {
    let out: String = text
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || " /._-@+()★·".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    out.trim().to_string()
}

pub fn render(r: &Report) -> String {
    let mut out = String::from("gantt\n");
    let _ = writeln!(
        out,
        "    title {}",
        safe(&format!("{} · run {} · {}", r.title(), r.run_id, r.status))
    );
    out.push_str("    dateFormat x\n");
    let step = r.totals.wall_ms;
    let axis = if step >= 3_600_000 {
        "%H:%M"
    } else if step >= 60_000 {
        "%H:%M:%S"
    } else {
        "%M:%S.%L"
    };
    let _ = writeln!(out, "    axisFormat {axis}");
    out.push_str("    todayMarker off\n");
    out.push_str("    %% done: succeeded · crit: failed · active: cancelled · milestone: did not run · ★: critical path\n");
    for (wave, members) in r.groups() {
        let section = match (&r.graph, wave) {
            (Graph::Plan, w) if w > 0 => format!("wave {w}"),
            _ => "in start order".to_string(),
        };
        let _ = writeln!(out, "    section {section}");
        for i in members {
            let s = &r.steps[i];
            let start = r.origin_ms.saturating_add(s.start_ms);
            let end = r.origin_ms.saturating_add(s.end_ms());
            let mut name = s.path.clone();
            if s.recorded() && s.duration_ms > 0 {
                name.push_str(&format!(" ({})", human_duration(s.duration_ms)));
            }
            match s.kind() {
                "succeeded" => {}
                _ => name.push_str(&format!(" {}", s.status)),
            }
            if s.critical {
                name = format!("★ {name}");
            }
            let tag = match s.kind() {
                _ if !s.recorded() || s.duration_ms == 0 => "milestone",
                "succeeded" => "done",
                "failed" => "crit",
                "cancelled" => "active",
                _ => "done",
            };
            let _ = writeln!(out, "    {} :{tag}, p{i}, {start}, {end}", safe(&name));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample;

    #[test]
    fn one_task_per_project_by_wave_with_status_tags() {
        let r = sample();
        let text = render(&r);
        assert!(text.starts_with("gantt\n"), "{text}");
        assert!(text.contains("    dateFormat x\n"));
        let tasks: Vec<&str> = text.lines().filter(|l| l.contains(" :")).collect();
        assert_eq!(tasks.len(), 4, "{text}");
        assert!(
            tasks[0].starts_with("    alpha (100ms) :done, p0, "),
            "{text}"
        );
        assert!(
            tasks[1].starts_with("    ★ bravo (300ms) :done, p1, "),
            "{text}"
        );
        assert!(
            tasks[3].starts_with("    delta skipped :milestone, p3, "),
            "{text}"
        );
        assert_eq!(text.matches("section wave").count(), 3);
    }

    #[test]
    fn names_cannot_break_the_chart_or_the_markdown() {
        assert_eq!(safe("a:b;c#d`e%%f\ng"), "a_b_c_d_e__f_g");
        assert_eq!(safe("infra/aws-vpc_1.x"), "infra/aws-vpc_1.x");
    }
}
