//! `strata --help`, the man page and the book agree on every flag (issue 36): each long
//! flag of each command is in that command's section of docs/book/src/commands.md, and
//! each flag of the man page is in the chapter. (The man page and `--help` are both
//! generated from clap's definitions, so they agree by construction.)

use std::collections::BTreeMap;
use std::path::Path;

fn strata(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("run strata");
    assert!(out.status.success(), "strata {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The subcommands a help text lists (`help` left out).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

/// The long flags of a help text, by section (`Options`, `Run options`, `Global
/// options`, ...); `--help` and `--version` left out.
fn flags_by_section(help: &str) -> BTreeMap<String, Vec<String>> {
    let flag = regex::Regex::new(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)").unwrap();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut section = String::new();
    for line in help.lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line.trim_end_matches(':').to_string();
        } else if let Some(c) = flag.captures(line)
            && !["--help", "--version"].contains(&&c[1])
        {
            out.entry(section.clone())
                .or_default()
                .push(c[1].to_string());
        }
    }
    out
}

/// Every command path (`["up"]`, `["secrets", "set"]`, ...) with its help text.
fn commands() -> Vec<(Vec<String>, String)> {
    let mut todo: Vec<Vec<String>> = subcommands(&strata(&["--help"]))
        .into_iter()
        .map(|c| vec![c])
        .collect();
    let mut out = Vec::new();
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let help = strata(&args);
        for sub in subcommands(&help) {
            todo.push([path.clone(), vec![sub]].concat());
        }
        out.push((path, help));
    }
    out
}

/// The chapter's `### ` sections: title → text.
fn chapter_sections(chapter: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut title = String::new();
    for line in chapter.lines() {
        if let Some(t) = line.strip_prefix("### ") {
            title = t.trim().to_string();
        }
        out.entry(title.clone())
            .or_insert_with(String::new)
            .push_str(&format!("{line}\n"));
    }
    out
}

fn commands_chapter() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/book/src/commands.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether `text` names `flag` as a whole flag (not as the start of a longer one).
fn names(text: &str, flag: &str) -> bool {
    text.match_indices(flag).any(|(at, _)| {
        let next = text[at + flag.len()..].chars().next();
        !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

#[test]
fn book_names_every_flag_of_every_command() {
    let sections = chapter_sections(&commands_chapter());
    let global_section = "Options of every command";
    let mut missing = Vec::new();
    let commands = commands();
    assert!(commands.len() > 15, "{commands:?}");
    for (path, help) in &commands {
        let title = format!("`strata {}`", path.join(" "));
        for (section, flags) in flags_by_section(help) {
            let (where_, text) = if section == "Global options" {
                (global_section.to_string(), sections.get(global_section))
            } else {
                (title.clone(), sections.get(&title))
            };
            let text = text.map_or("", String::as_str);
            for flag in flags.iter().filter(|f| !names(text, f)) {
                missing.push(format!("{title}: {flag} (not in section \"### {where_}\")"));
            }
        }
    }
    missing.dedup();
    assert!(
        missing.is_empty(),
        "flags of `strata --help` missing from docs/book/src/commands.md:\n{}",
        missing.join("\n")
    );
}

#[test]
fn book_names_every_flag_of_the_man_page() {
    let man = strata(&["man"]);
    // roff escapes every hyphen: `\-\-non\-interactive`.
    let flag = regex::Regex::new(r"\\-\\-[a-z0-9]+(?:\\-[a-z0-9]+)*").unwrap();
    let chapter = commands_chapter();
    let flags: Vec<String> = flag
        .find_iter(&man)
        .map(|m| m.as_str().replace("\\-", "-"))
        .collect();
    assert!(flags.iter().any(|f| f == "--provider"), "{man}");
    let missing: Vec<&String> = flags
        .iter()
        .filter(|f| !["--help", "--version"].contains(&f.as_str()) && !names(&chapter, f))
        .collect();
    assert!(
        missing.is_empty(),
        "flags of `strata man` missing from docs/book/src/commands.md: {missing:?}"
    );
}
