//! The layout of `src/` as rules a change cannot quietly break: no file over 700 lines,
//! no function outside tests over 100, clap's types only at the door (`cli.rs`, `commands/`, `lib.rs`, `main.rs`), and no
//! two modules that import each other, directly or around a circle.
//!
//! The module graph is read from the source text: every `use crate::…`, `use super::…`,
//! `crate::…`/`super::…` path in code, and the paths a `mod.rs` writes through the
//! children it declares. A module is a file (`mod.rs` stands for its folder); an edge
//! goes to the deepest module a path names. A folder's `mod.rs` owns its children, so
//! its paths into them (dispatch, re-exports) are not counted; everything else is, the
//! children's own imports of their parent and siblings among them. Inline
//! `mod tests { … }` blocks belong to their file, so their `super::` is the file itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 700;

/// A function is at most a page; a longer one is several steps that want names.
const MAX_FN_LINES: usize = 100;

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Every `.rs` file under `src/`, keyed by its module path (`run::step`, `cli`, …;
/// `lib.rs` and `main.rs` are `crate` and `main`).
fn modules() -> BTreeMap<String, PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(&p, out);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    let mut files = Vec::new();
    walk(&src(), &mut files);
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(src()).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|l| l == "mod") {
                parts.pop();
            }
            let name = match parts.join("::").as_str() {
                "lib" => "crate".to_string(),
                other => other.to_string(),
            };
            (name, p)
        })
        .collect()
}

/// The text without comments (line comments and doc comments), so prose that names a
/// path draws no edge.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal (a URL) cuts the line short: harmless here.
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Byte ranges of inline `mod NAME { … }` blocks.
fn inline_modules(code: &str) -> Vec<(usize, usize)> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("mod ") {
        let at = from + i;
        from = at + 4;
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let rest = &code[at + 4..];
        let name_len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let after = rest[name_len..].trim_start();
        if name_len == 0 || !after.starts_with('{') {
            continue;
        }
        let open = at + 4 + name_len + (rest[name_len..].len() - after.len());
        let mut depth = 0usize;
        for (j, b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        out.push((open, j));
                        break;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Expands a `use` tree (`a::{b, c::{d, e as f}}`) into its paths.
fn expand(prefix: &str, tree: &str) -> Vec<String> {
    let mut items = Vec::new();
    let (mut depth, mut cur) = (0usize, String::new());
    for ch in tree.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if ch == ',' && depth == 0 {
            items.push(std::mem::take(&mut cur));
        } else {
            cur.push(ch);
        }
    }
    items.push(cur);
    let join = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            format!("{a}::{b}")
        }
    };
    let mut out = Vec::new();
    for item in items {
        let item: String = item.split_whitespace().collect::<Vec<_>>().join(" ");
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        if let (Some(open), true) = (item.find('{'), item.ends_with('}')) {
            let head = item[..open].trim_end_matches("::").replace(' ', "");
            out.extend(expand(
                &join(prefix, &head),
                &item[open + 1..item.len() - 1],
            ));
        } else {
            let path = item.split(" as ").next().unwrap().replace(' ', "");
            out.push(join(prefix, &path));
        }
    }
    out
}

/// The module a path names: its longest prefix that is a module.
fn resolve(path: &[&str], known: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut best = None;
    for i in 1..=path.len() {
        let m = path[..i].join("::");
        if known.contains_key(&m) {
            best = Some(m);
        } else {
            break;
        }
    }
    best
}

/// Each path in `code` that starts with `key` where a path can start (not inside
/// another path or a name), with its position.
fn paths_at(code: &str, key: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find(key) {
        let at = from + i;
        from = at + key.len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let tail: String = code[at..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect();
        out.push((at, tail));
    }
    out
}

/// The modules each module imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let known = modules();
    let mut edges = BTreeMap::new();
    for (name, file) in &known {
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        let inline = inline_modules(&code);
        let own: Vec<&str> = if name == "crate" {
            vec![]
        } else {
            name.split("::").collect()
        };
        // The children this file declares with `mod NAME;`.
        let children: Vec<String> = code
            .lines()
            .filter_map(|l| {
                let l = l.trim();
                let l = l.strip_prefix("pub ").unwrap_or(l);
                let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
                l.strip_prefix("mod ")?
                    .strip_suffix(';')
                    .map(str::to_string)
            })
            .collect();
        let mut paths: Vec<(usize, String)> = Vec::new();
        let mut from = 0;
        while let Some(i) = code[from..].find("use ") {
            let at = from + i;
            from = at + 4;
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let Some(end) = code[at..].find(';') else {
                break;
            };
            for p in expand("", &code[at + 4..at + end]) {
                paths.push((at, p));
            }
        }
        for key in ["crate::", "super::", "self::"] {
            paths.extend(paths_at(&code, key));
        }
        for child in &children {
            let in_child = paths_at(&code, &format!("{child}::"));
            paths.extend(
                in_child
                    .into_iter()
                    .map(|(at, p)| (at, format!("self::{p}"))),
            );
        }
        let mut deps = BTreeSet::new();
        for (at, path) in paths {
            let segs: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
            // How deep in inline modules the path is written.
            let nesting = inline.iter().filter(|(a, b)| *a < at && at < *b).count();
            let full: Vec<&str> = match segs.first() {
                Some(&"crate") => segs[1..].to_vec(),
                Some(&"self") if nesting == 0 => [own.as_slice(), &segs[1..]].concat(),
                Some(&"super") => {
                    let ups = segs.iter().take_while(|s| **s == "super").count();
                    // Inside inline modules the first `super`s stay in this file.
                    if ups <= nesting {
                        continue;
                    }
                    let ups = ups - nesting;
                    if ups > own.len() {
                        continue;
                    }
                    [&own[..own.len() - ups], &segs[ups + nesting..]].concat()
                }
                Some(first) if children.iter().any(|c| c == first) && nesting == 0 => {
                    [own.as_slice(), &segs[..]].concat()
                }
                _ => continue,
            };
            // A folder's `mod.rs` owns its children: reaching into them is not an
            // import between peers (their own imports, up or across, still count).
            let own_child = |m: &str| name == "crate" || m.starts_with(&format!("{name}::"));
            if let Some(m) = resolve(&full, &known)
                && m != *name
                && !own_child(&m)
            {
                deps.insert(m);
            }
        }
        edges.insert(name.clone(), deps);
    }
    edges
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on.remove(w);
                comp.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

#[test]
fn no_two_modules_import_each_other_even_around_a_circle() {
    let edges = graph();
    assert!(
        edges.len() > 40 && edges["commands"].contains("pipeline"),
        "the parser sees the module graph: {edges:?}"
    );
    let found = circles(&edges);
    let shown: Vec<String> = found
        .iter()
        .map(|c| {
            let inside: Vec<String> = c
                .iter()
                .map(|m| {
                    let to: Vec<&str> = edges[m]
                        .iter()
                        .filter(|t| c.contains(t))
                        .map(String::as_str)
                        .collect();
                    format!("  {m} → {}", to.join(", "))
                })
                .collect();
            inside.join("\n")
        })
        .collect();
    assert!(
        found.is_empty(),
        "import circles in src/:\n{}",
        shown.join("\n\n")
    );
}

/// The rooms (`src/run/`, `src/engine/`, … and the single files) as layers: what one
/// room imports from another never comes back to it, through any of their files.
#[test]
fn no_two_rooms_import_each_other_even_around_a_circle() {
    let rooms = room_graph();
    let found = circles(&rooms);
    assert!(found.is_empty(), "rooms in a circle: {found:?} ({rooms:?})");
}

/// The rooms and the imports between them, from the files.
fn room_graph() -> BTreeMap<String, BTreeSet<String>> {
    let room = |m: &str| m.split("::").next().unwrap().to_string();
    let mut rooms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, deps) in graph() {
        let from = room(&m);
        let to = rooms.entry(from.clone()).or_default();
        to.extend(
            deps.iter()
                .map(|d| room(d))
                .filter(|r| *r != from && r != "crate"),
        );
    }
    rooms
}

fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str) -> bool {
    let mut seen = BTreeSet::new();
    let mut stack = vec![from.to_string()];
    while let Some(x) = stack.pop() {
        for y in graph.get(&x).into_iter().flatten() {
            if y == to {
                return true;
            }
            if seen.insert(y.clone()) {
                stack.push(y.clone());
            }
        }
    }
    false
}

/// docs/design.md §5 draws the rooms as a Mermaid flowchart: every room is in it, every
/// arrow drawn is an import, and every import between rooms is an arrow or follows from
/// arrows. The drawing parses with the real Mermaid where it is installed.
#[test]
fn the_design_drawing_is_the_layout() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/design.md"))
        .unwrap();
    let section = &doc[doc.find("## 5. Architecture").expect("§5 Architecture")..];
    let start = section.find("```mermaid\n").expect("a mermaid block") + "```mermaid\n".len();
    let block = &section[start..start + section[start..].find("```").unwrap()];
    let mut drawn: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in block.lines().skip(1) {
        let Some((a, b)) = line.split_once("-->") else {
            continue;
        };
        drawn
            .entry(a.trim().to_string())
            .or_default()
            .insert(b.trim().to_string());
        drawn.entry(b.trim().to_string()).or_default();
    }
    let real = room_graph();
    let rooms: Vec<&String> = real
        .keys()
        .filter(|r| *r != "crate" && *r != "main")
        .collect();
    let missing: Vec<&&String> = rooms.iter().filter(|r| !drawn.contains_key(**r)).collect();
    assert!(missing.is_empty(), "rooms not drawn: {missing:?}");
    for (a, to) in &drawn {
        for b in to {
            assert!(
                real.get(a).is_some_and(|t| t.contains(b)),
                "the drawing has {a} --> {b}, which the code does not import"
            );
        }
    }
    for (a, to) in &real {
        for b in to {
            assert!(
                a == "crate" || a == "main" || reaches(&drawn, a, b),
                "{a} imports {b}: draw it (or an arrow path to it) in docs/design.md §5"
            );
        }
    }
    crate::support::check_mermaid(&crate::support::Ws::new(), block);
}

#[test]
fn the_command_line_stays_at_the_door() {
    let edges = graph();
    let door = |m: &str| m == "cli" || m == "crate" || m == "main" || m.starts_with("commands");
    let outside: Vec<&String> = edges
        .iter()
        .filter(|(m, deps)| !door(m) && deps.contains("cli"))
        .map(|(m, _)| m)
        .collect();
    assert!(outside.is_empty(), "modules importing cli: {outside:?}");
}

#[test]
fn no_file_under_src_is_over_700_lines() {
    let long: Vec<String> = modules()
        .values()
        .filter_map(|p| {
            let n = std::fs::read_to_string(p).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", p.display()))
        })
        .collect();
    assert!(long.is_empty(), "files over {MAX_LINES} lines: {long:?}");
}

#[test]
fn no_function_outside_tests_is_over_100_lines() {
    let known = modules();
    let test_only = test_only_files(&known);
    let mut long = Vec::new();
    for p in known.values().filter(|p| !test_only.contains(*p)) {
        let text = std::fs::read_to_string(p).unwrap();
        for (line, name, n) in function_lengths(&text) {
            if n > MAX_FN_LINES {
                long.push(format!("{}:{line} {name} ({n} lines)", p.display()));
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (give their steps names): {long:?}"
    );
}

/// Files only tests compile: declared by `#[cfg(test)] mod NAME;`.
fn test_only_files(known: &BTreeMap<String, PathBuf>) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for file in known.values() {
        let text = std::fs::read_to_string(file).unwrap();
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        let stem = file.file_stem().unwrap().to_string_lossy();
        let dir = match stem.as_ref() {
            "mod" | "lib" | "main" => file.parent().unwrap().to_path_buf(),
            _ => file.with_extension(""),
        };
        for pair in lines.windows(2) {
            let name = pair[1]
                .trim_start_matches("pub ")
                .strip_prefix("mod ")
                .and_then(|r| r.strip_suffix(';'));
            if let (true, Some(name)) = (pair[0] == "#[cfg(test)]", name) {
                out.insert(dir.join(format!("{name}.rs")));
                out.insert(dir.join(name).join("mod.rs"));
            }
        }
    }
    out
}

/// `text` with comments, string and char literals emptied (line breaks kept), so that
/// only the code's own braces count.
fn without_literals(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep_newlines = |from: &[char], out: &mut String| {
        out.extend(from.iter().filter(|ch| **ch == '\n'));
    };
    while i < c.len() {
        let rest = &c[i..];
        let end = if rest.starts_with(&['/', '/']) {
            rest.iter().position(|ch| *ch == '\n').unwrap_or(rest.len())
        } else if rest[0] == 'r' && rest.get(1).is_some_and(|ch| *ch == '"' || *ch == '#') {
            let hashes = rest[1..].iter().take_while(|ch| **ch == '#').count();
            if rest.get(1 + hashes) != Some(&'"') {
                1
            } else {
                let close: Vec<char> = std::iter::once('"')
                    .chain(std::iter::repeat_n('#', hashes))
                    .collect();
                (2 + hashes..rest.len())
                    .find(|&k| rest[k..].starts_with(&close))
                    .map_or(rest.len(), |k| k + close.len())
            }
        } else if rest[0] == '"' {
            let mut k = 1;
            while k < rest.len() && rest[k] != '"' {
                k += if rest[k] == '\\' { 2 } else { 1 };
            }
            k + 1
        } else if rest[0] == '\'' && rest.get(1) == Some(&'\\') {
            1 + rest[1..].iter().position(|ch| *ch == '\'').unwrap_or(0) + 1
        } else if rest[0] == '\'' && rest.get(2) == Some(&'\'') {
            3
        } else {
            out.push(rest[0]);
            i += 1;
            continue;
        };
        let end = end.min(rest.len());
        keep_newlines(&rest[..end], &mut out);
        i += end;
    }
    out
}

/// (line, name, lines) of every function with a body outside the file's inline
/// `#[cfg(test)] mod … { … }` blocks.
fn function_lengths(text: &str) -> Vec<(usize, String, usize)> {
    let code = without_literals(text);
    let tests: Vec<(usize, usize)> = inline_modules(&code)
        .into_iter()
        .filter(|(open, _)| {
            let before = &code[..*open];
            let decl = before.rfind("mod ").unwrap_or(0);
            before[..decl].trim_end().ends_with("#[cfg(test)]")
        })
        .collect();
    let bytes = code.as_bytes();
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(k) = code[from..].find("fn ") {
        let at = from + k;
        from = at + 3;
        let word_start =
            at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        if !word_start || tests.iter().any(|(a, b)| (*a..*b).contains(&at)) {
            continue;
        }
        let rest = &code[at + 3..];
        let name: String = rest
            .chars()
            .take_while(|ch| ch.is_alphanumeric() || *ch == '_')
            .collect();
        let Some(open) = rest
            .find(['{', ';'])
            .filter(|o| rest.as_bytes()[*o] == b'{')
        else {
            continue;
        };
        let open = at + 3 + open;
        let mut depth = 0usize;
        let Some(close) = (open..bytes.len()).find(|&j| {
            match bytes[j] {
                b'{' => depth += 1,
                b'}' => depth -= 1,
                _ => {}
            }
            depth == 0
        }) else {
            continue;
        };
        out.push((line_of(at), name, line_of(close) - line_of(at) + 1));
    }
    out
}

#[test]
fn the_parser_reads_use_trees_and_inline_modules() {
    assert_eq!(
        expand("", "crate::{a::b, c::{d, e as f}}"),
        ["crate::a::b", "crate::c::d", "crate::c::e"]
    );
    let code = "use x;\nmod tests {\n    use super::*;\n}\n";
    let spans = inline_modules(code);
    assert_eq!(spans.len(), 1);
    assert!(spans[0].0 < code.find("super").unwrap());
    let planted: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec!["a"]),
    ]
    .into_iter()
    .map(|(m, to)| (m.to_string(), to.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(circles(&planted), [["a", "b", "c"]]);
    let f = "fn a() {\n    let s = \"{\";\n    let c = '}';\n    // }\n    let r = r#\"}\"#;\n}\nfn b(x: &'static str) -> u8 { 1 }\nfn c();\n#[cfg(test)]\nmod tests {\n    fn t() {}\n}\n";
    assert_eq!(
        function_lengths(f),
        [(1, "a".to_string(), 6), (7, "b".to_string(), 1)]
    );
}

/// Where this machine's linker can (build.rs probes it), the binary packs its relative
/// relocations: the loader reads 11 KiB of them at every start, not a 900 KiB table (a
/// megabyte of every run's resident memory). CI's Debian has binutils 2.40 and glibc
/// 2.36, so there it must.
#[test]
fn the_binary_packs_its_relative_relocations_where_the_linker_can() {
    let probed = option_env!("STRATA_PACKED_RELOCS").is_some();
    let on_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    if cfg!(all(target_os = "linux", target_env = "gnu")) && on_ci {
        assert!(
            probed,
            "build.rs found no linker that takes -z pack-relative-relocs: install binutils 2.38+ (apt-get install binutils) and glibc 2.36+"
        );
    }
    if !probed {
        eprintln!("skipped: the linker here cannot pack relative relocations");
        return;
    }
    let binary = std::fs::read(env!("CARGO_BIN_EXE_strata")).unwrap();
    assert!(
        binary
            .windows(b".relr.dyn".len())
            .any(|w| w == b".relr.dyn"),
        "the strata binary has no .relr.dyn section"
    );
}
