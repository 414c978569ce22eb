//! The manual (issue 36): the README and the mdBook under docs/book/ link only to files
//! that exist and to headings that exist (checked offline, slugged as mdBook and GitHub
//! do), every chapter is in SUMMARY.md, and under `CI=true` mdBook builds the book.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::support::*;

/// How to get mdBook, as `scripts/install-tools.sh` does.
const MDBOOK_HINT: &str = "cargo install mdbook --locked --version 0.5.4 --no-default-features; or run scripts/install-tools.sh";

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn book_src() -> PathBuf {
    repo_root().join("docs/book/src")
}

/// The Markdown files the checker reads: the README and every chapter of the book.
fn manual_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(book_src())
        .expect("docs/book/src")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files.insert(0, repo_root().join("README.md"));
    files
}

/// `path`'s text with each `{{#include FILE}}` line replaced by FILE's text, as mdBook
/// builds the chapter.
fn read_md(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let dir = path.parent().unwrap();
    text.lines()
        .map(|line| match include_target(line) {
            Some(file) => read_md(&dir.join(file)),
            None => format!("{line}\n"),
        })
        .collect()
}

fn include_target(line: &str) -> Option<&str> {
    let inner = line
        .trim()
        .strip_prefix("{{#include ")?
        .strip_suffix("}}")?;
    Some(inner.trim())
}

/// `text` with fenced code blocks and code spans blanked out (newlines kept, so line
/// numbers stay): what is left is where links and headings can be.
fn outside_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            out.push('\n');
            continue;
        }
        out.push_str(if fence { "" } else { line });
        out.push('\n');
    }
    blank_code_spans(&out)
}

/// Removes each code span (a run of N backticks up to the next run of exactly N).
fn blank_code_spans(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let run_at = |i: usize| chars[i..].iter().take_while(|&&c| c == '`').count();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let n = run_at(i);
        let close = (i + n..chars.len())
            .find(|&j| chars[j] == '`' && chars[j - 1] != '`' && run_at(j) == n);
        let end = close.map_or(i + n, |j| j + n);
        let blanked = chars[i..end]
            .iter()
            .map(|&c| if c == '\n' { '\n' } else { ' ' });
        out.extend(blanked);
        i = end;
    }
    out
}

/// Every inline link and image of `text`: (line, target).
fn links(text: &str) -> Vec<(usize, String)> {
    let code_free = outside_code(text);
    let re = regex::Regex::new(r#"\]\(\s*([^)\s]+)(?:\s+"[^"]*")?\s*\)"#).unwrap();
    re.captures_iter(&code_free)
        .map(|c| {
            let at = c.get(0).unwrap().start();
            let line = code_free[..at].matches('\n').count() + 1;
            (line, c[1].to_string())
        })
        .collect()
}

/// The anchors of `text`'s headings, as mdBook (and GitHub) make them: the heading's
/// text lower-cased, whitespace as `-`, only letters, digits, `_` and `-` kept; a
/// repeated one gets `-1`, `-2`, ...
fn anchors(text: &str) -> Vec<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        let Some(title) = heading_text(line).filter(|_| !fence) else {
            continue;
        };
        let slug = slug(&title);
        let n = seen.entry(slug.clone()).or_insert(0);
        out.push(if *n == 0 {
            slug.clone()
        } else {
            format!("{slug}-{n}")
        });
        *n += 1;
    }
    out
}

/// The text of an ATX heading line, without its markup (`code`, emphasis, link targets).
fn heading_text(line: &str) -> Option<String> {
    let hashes = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
        return None;
    }
    let title = line[hashes..].trim().trim_end_matches('#').trim();
    let link = regex::Regex::new(r"\[([^\]]*)\]\([^)]*\)").unwrap();
    Some(link.replace_all(title, "$1").replace(['`', '*'], ""))
}

fn slug(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c.to_lowercase().next().unwrap())
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// What is wrong with `target`, linked from `file`; None when it resolves.
fn broken(file: &Path, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let to = if path.is_empty() {
        file.to_path_buf()
    } else {
        file.parent().unwrap().join(path)
    };
    if !to.exists() {
        return Some(format!("no file {}", to.display()));
    }
    if anchor.is_empty() {
        return None;
    }
    if to.extension().is_none_or(|x| x != "md") {
        return Some(format!(
            "an anchor into {}, which is not Markdown",
            to.display()
        ));
    }
    let have = anchors(&read_md(&to));
    (!have.iter().any(|a| a == anchor)).then(|| {
        format!(
            "no heading `#{anchor}` in {} (it has: {})",
            to.display(),
            have.join(", ")
        )
    })
}

/// Every broken link of `files`, one line each: `file:line: (target): why`.
fn broken_links(files: &[PathBuf]) -> Vec<String> {
    let mut errors = Vec::new();
    for file in files {
        for (line, target) in links(&read_md(file)) {
            if let Some(why) = broken(file, &target) {
                errors.push(format!("{}:{line}: ({target}): {why}", file.display()));
            }
        }
    }
    errors
}

#[test]
fn book_and_readme_links_resolve() {
    let files = manual_files();
    assert!(files.len() > 15, "the book's chapters: {files:?}");
    let errors = broken_links(&files);
    assert!(
        errors.is_empty(),
        "broken links in the manual:\n{}",
        errors.join("\n")
    );
}

/// The checker is not vacuous: a missing file, a missing heading in another file and in
/// the same file are each found; good links are not.
#[test]
fn book_link_check_finds_broken_links() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.md");
    std::fs::write(
        dir.path().join("b.md"),
        "# B\n\n## The `local-kube` profile: yes\n```sh\n# not a heading\n```\n",
    )
    .unwrap();
    std::fs::write(
        &a,
        "# A: one\n\nGood: [b](b.md#the-local-kube-profile-yes), [self](#a-one), `[x](code.md)`.\n\
         Bad: [gone](gone.md), [b](b.md#not-a-heading),\n[self](#nothing-here).\n",
    )
    .unwrap();
    let errors = broken_links(&[a]);
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(errors[0].contains(":4: (gone.md): no file"), "{errors:#?}");
    assert!(
        errors[1].contains("(b.md#not-a-heading): no heading"),
        "{errors:#?}"
    );
    assert!(errors[2].contains(":5: (#nothing-here)"), "{errors:#?}");
}

/// Every chapter file is reachable: SUMMARY.md lists it.
#[test]
fn book_summary_lists_every_chapter() {
    let summary = read_md(&book_src().join("SUMMARY.md"));
    let listed: Vec<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    let unlisted: Vec<String> = manual_files()
        .iter()
        .filter(|p| p.parent() == Some(book_src().as_path()))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|name| name != "SUMMARY.md" && !listed.contains(name))
        .collect();
    assert!(
        unlisted.is_empty(),
        "chapters not in SUMMARY.md: {unlisted:?}"
    );
}

/// mdBook builds the book without an error or a warning (under `CI=true` a missing
/// mdbook fails; elsewhere the test says it skipped).
#[test]
fn book_builds_with_mdbook() {
    if !require_tool("mdbook", MDBOOK_HINT) {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let run = std::process::Command::new("mdbook")
        .arg("build")
        .arg(repo_root().join("docs/book"))
        .arg("--dest-dir")
        .arg(out.path())
        .output()
        .expect("run mdbook");
    let log =
        String::from_utf8_lossy(&run.stderr).into_owned() + &String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "mdbook build failed:\n{log}");
    assert!(
        !log.contains("ERROR") && !log.contains("WARN"),
        "mdbook build complained:\n{log}"
    );
    for page in ["index.html", "commands.html", "design.html", "report.png"] {
        assert!(out.path().join(page).is_file(), "{page} not built:\n{log}");
    }
}
