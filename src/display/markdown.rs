//! The preview's Markdown summary for pull requests (`--summary-file`,
//! `$GITHUB_STEP_SUMMARY`): one row per project with the four change counts, then the
//! changed resources of each project folded in `<details>`. No links.

use crate::engine::digest::{self, Changes};
use crate::run::events::Status;
use crate::util::plural;

/// One project of the summary.
pub struct Line<'a> {
    pub project: &'a str,
    pub status: Status,
    /// The note shown beside the status (why it was blocked, skipped or failed).
    pub note: &'a str,
    pub changes: Option<&'a Changes>,
    /// What a command project's `preview:` printed (its last lines).
    pub text: &'a [String],
}

/// At most this many resources are listed per project.
const MAX_LISTED: usize = 50;

/// Text safe inside a table cell or a list item: no pipe, no newline, no HTML.
fn cell(s: &str) -> String {
    let one_line = s.lines().next().unwrap_or("").trim();
    let mut out = String::with_capacity(one_line.len());
    for c in one_line.chars() {
        match c {
            '|' => out.push_str("\\|"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '`' => out.push('\''),
            _ => out.push(c),
        }
    }
    out
}

fn status_word(s: Status) -> &'static str {
    match s {
        Status::Succeeded => "✅ previewed",
        Status::Failed => "❌ failed",
        Status::Skipped => "➖ skipped",
        Status::Cancelled => "⊘ cancelled",
        Status::Blocked => "⏸ blocked",
        Status::Denied => "⛔ denied",
        Status::Awaiting => "⏳ awaiting",
    }
}

/// The whole summary.
pub fn preview_summary(stack: &str, provider: &str, lines: &[Line]) -> String {
    let mut out = format!(
        "### strata preview · stack `{}` · provider `{}`\n\n",
        cell(stack),
        cell(provider)
    );
    out.push_str("| project | status | + create | ~ update | - delete | ± replace | note |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---|\n");
    let mut total = [0u64; 4];
    let mut changed = 0usize;
    for l in lines {
        let counts = match l.changes {
            Some(c) => {
                for (t, op) in total.iter_mut().zip(digest::CHANGING) {
                    *t += c.count(op);
                }
                if c.any() {
                    changed += 1;
                }
                digest::CHANGING
                    .iter()
                    .map(|op| c.count(op).to_string())
                    .collect::<Vec<_>>()
            }
            None => vec![String::new(); 4],
        };
        out.push_str(&format!(
            "| `{}` | {} | {} | {} |\n",
            cell(l.project),
            status_word(l.status),
            counts.join(" | "),
            cell(l.note)
        ));
    }
    out.push_str(&format!(
        "| **total** | | **{}** | **{}** | **{}** | **{}** | {changed} of {} project{} would change |\n",
        total[0],
        total[1],
        total[2],
        total[3],
        lines.len(),
        plural(lines.len())
    ));
    for l in lines {
        let listed: Vec<String> = match l.changes {
            Some(c) if !c.steps.is_empty() => c
                .steps
                .iter()
                .take(MAX_LISTED)
                .map(|(op, urn)| format!("- `{op}` {}", cell(&digest::short_urn(urn))))
                .chain(
                    (c.steps.len() > MAX_LISTED)
                        .then(|| format!("- … and {} more", c.steps.len() - MAX_LISTED)),
                )
                .collect(),
            None if !l.text.is_empty() && l.status == Status::Succeeded => {
                l.text.iter().map(|t| format!("    {}", cell(t))).collect()
            }
            _ => continue,
        };
        let title = match l.changes {
            Some(c) => c.short(),
            None => "what its preview command printed".into(),
        };
        out.push_str(&format!(
            "\n<details><summary><code>{}</code>: {}</summary>\n\n{}\n\n</details>\n",
            cell(l.project),
            cell(&title),
            listed.join("\n")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_counts_totals_and_details() {
        let mut c = Changes::default();
        c.counts.insert("create".into(), 2);
        c.counts.insert("same".into(), 3);
        c.steps.push((
            "create".into(),
            "urn:pulumi:dev::vpc::aws:ec2/vpc:Vpc::main".into(),
        ));
        c.steps.push((
            "create".into(),
            "urn:pulumi:dev::vpc::aws:ec2/subnet:Subnet::a|b".into(),
        ));
        let none = Changes::default();
        let text = vec!["would build image x".to_string()];
        let md = preview_summary(
            "dev",
            "aws",
            &[
                Line {
                    project: "infra/vpc",
                    status: Status::Succeeded,
                    note: "2 to create",
                    changes: Some(&c),
                    text: &[],
                },
                Line {
                    project: "infra/eks",
                    status: Status::Succeeded,
                    note: "no changes",
                    changes: Some(&none),
                    text: &[],
                },
                Line {
                    project: "kubernetes/app",
                    status: Status::Blocked,
                    note: "blocked: needs infra/x, which has never been deployed",
                    changes: None,
                    text: &[],
                },
                Line {
                    project: "utility/build",
                    status: Status::Succeeded,
                    note: "would build image x",
                    changes: None,
                    text: &text,
                },
            ],
        );
        assert!(md.contains("| `infra/vpc` | ✅ previewed | 2 | 0 | 0 | 0 | 2 to create |"));
        assert!(md.contains("| `kubernetes/app` | ⏸ blocked |  |  |  |  | blocked: needs"));
        assert!(md.contains(
            "| **total** | | **2** | **0** | **0** | **0** | 1 of 4 projects would change |"
        ));
        assert!(md.contains("<details><summary><code>infra/vpc</code>: +2 ~0 -0 ±0</summary>"));
        assert!(md.contains("- `create` aws:ec2/vpc:Vpc main"));
        // A pipe in a name cannot break the table.
        assert!(md.contains("Subnet a\\|b"));
        assert!(md.contains("    would build image x"));
        assert!(!md.contains("http"));
        // No details for a project without changes.
        assert!(!md.contains("<code>infra/eks</code>"));
    }

    #[test]
    fn long_lists_are_cut() {
        let mut c = Changes::default();
        c.counts.insert("create".into(), 60);
        for i in 0..60 {
            c.steps
                .push(("create".into(), format!("urn:pulumi:dev::p::t::r{i}")));
        }
        let md = preview_summary(
            "dev",
            "local",
            &[Line {
                project: "p",
                status: Status::Succeeded,
                note: "",
                changes: Some(&c),
                text: &[],
            }],
        );
        assert!(md.contains("- … and 10 more"));
        assert_eq!(md.matches("- `create`").count(), 50);
    }
}
