//! The walk over a repository (`Repo::scan`: every code file read once, the index of
//! its constants and helpers built) and the references of each of its projects
//! (`Repo::in_project`). What is never read: dependency caches, virtual environments,
//! build output, hidden folders, a project's tests (`test_*.py`, `*_test.go`,
//! `*.spec.ts`, `tests/`...), and the languages strata does not read (C#, F#, VB, Java:
//! `not_read` names them so callers can say so).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::Reference;
use super::code::Source;
use super::expr::Scope;
use super::facts::Facts;
use super::helpers::{CALLER, Helper, Index};
use super::lex::{Lang, mask};
use super::yaml::in_yaml;

/// Folders never read, beyond those the fingerprint skips: build output, vendored code
/// and the other folders `strata init` never enters.
const MORE_SKIP_DIRS: &[&str] = &["dist", "build", "vendor", "bin", "node_modules"];

/// The folders of a project that hold its tests.
const TEST_DIRS: &[&str] = &["tests", "test", "__tests__"];

/// At most this many bytes of one source file are read.
const MAX_FILE: u64 = 2 * 1024 * 1024;

/// How deep below a project's folder its files are read; below a repository's root.
const PROJECT_DEPTH: usize = 8;
const REPO_DEPTH: usize = 16;

/// The extensions of code strata does not read, and the language each is.
const NOT_READ: &[(&str, &str)] = &[
    ("cs", "C#"),
    ("fs", "F#"),
    ("fsx", "F#"),
    ("vb", "VB"),
    ("java", "Java"),
];

/// Whether a file named `name` is a test (`test_x.py`, `x_test.py`, `conftest.py`,
/// `x_test.go`, `x.test.ts`, `x.spec.js`).
pub fn is_test_file(name: &str) -> bool {
    let py = name.ends_with(".py")
        && (name.starts_with("test_") || name.ends_with("_test.py") || name == "conftest.py");
    let js = [".ts", ".js", ".mjs"].iter().any(|x| {
        name.strip_suffix(x)
            .is_some_and(|s| s.ends_with(".test") || s.ends_with(".spec"))
    });
    py || js || name.ends_with("_test.go")
}

/// Whether a folder named `name` (at `path`) is never entered; `tests` too: its tests.
fn skipped_dir(name: &str, path: &Path, tests: bool) -> bool {
    name.starts_with('.')
        || crate::workspace::project::SKIP_DIRS.contains(&name)
        || MORE_SKIP_DIRS.contains(&name)
        || (tests && TEST_DIRS.contains(&name))
        || path.join("pyvenv.cfg").is_file()
}

/// Whether the scanner reads a file named `name` at `depth` below a project's folder.
fn read_file(name: &str, depth: usize) -> bool {
    let program = matches!(name, "Pulumi.yaml" | "Pulumi.yml" | "Main.yaml") && depth == 0;
    let code = [".py", ".ts", ".js", ".mjs", ".go"]
        .iter()
        .any(|x| name.ends_with(x))
        && !name.ends_with(".d.ts")
        && !is_test_file(name);
    program || code
}

/// What a walk keeps: how deep it goes, whether it enters test folders, which files.
struct Walk<'a> {
    max_depth: usize,
    tests: bool,
    keep: &'a dyn Fn(&str, usize) -> bool,
}

impl Walk<'_> {
    /// The files below `dir` it keeps, relative to `root`.
    fn collect(&self, root: &Path, dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        if depth > self.max_depth {
            return;
        }
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().to_string();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if !skipped_dir(&name, &p, self.tests) {
                    self.collect(root, &p, depth + 1, out);
                }
            } else if ft.is_file()
                && (self.keep)(&name, depth)
                && e.metadata().is_ok_and(|m| m.len() <= MAX_FILE)
            {
                out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
            }
        }
    }
}

/// The files of the Pulumi project in `dir` the scanner reads (its `Pulumi.yaml`
/// program and its code, not its tests), relative to `dir`, sorted.
pub fn source_files(dir: &Path) -> Vec<PathBuf> {
    project_files(dir, &read_file)
}

/// The files below a project's folder `dir` that `keep` keeps (their name and depth),
/// its tests left out, relative to `dir`, sorted.
fn project_files(dir: &Path, keep: &dyn Fn(&str, usize) -> bool) -> Vec<PathBuf> {
    let walk = Walk {
        max_depth: PROJECT_DEPTH,
        tests: true,
        keep,
    };
    let mut files = Vec::new();
    walk.collect(dir, dir, 0, &mut files);
    files.sort();
    files
}

/// The code of a project strata does not read: its runtime (`dotnet`, `java`) and its
/// files in those languages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRead {
    pub runtime: Option<String>,
    /// Relative to the project's folder, sorted.
    pub files: Vec<PathBuf>,
}

impl std::fmt::Display for NotRead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut langs: Vec<&str> = self
            .files
            .iter()
            .filter_map(|p| p.extension()?.to_str())
            .filter_map(|x| NOT_READ.iter().find(|(e, _)| *e == x).map(|(_, l)| *l))
            .collect();
        langs.dedup();
        match (&self.runtime, langs.is_empty()) {
            (Some(r), true) => write!(f, "runtime {r}"),
            (Some(r), false) => write!(f, "runtime {r}: {}", langs.join(", ")),
            (None, _) => write!(f, "{} code ({} files)", langs.join(", "), self.files.len()),
        }
    }
}

/// What of the project in `dir` strata does not read, if anything: a `dotnet` or
/// `java` runtime in its Pulumi.yaml, `.cs`/`.fs`/`.fsx`/`.vb`/`.java` files.
pub fn not_read(dir: &Path) -> Option<NotRead> {
    let runtime = ["Pulumi.yaml", "Pulumi.yml"]
        .iter()
        .find_map(|f| std::fs::read_to_string(dir.join(f)).ok())
        .and_then(|t| super::config::parse_yaml(&t))
        .and_then(|d| {
            let r = d.get("runtime")?;
            r.as_str()
                .or_else(|| r.get("name")?.as_str())
                .map(str::to_string)
        })
        .filter(|r| matches!(r.as_str(), "dotnet" | "java"));
    let keep = |name: &str, _: usize| {
        let ext = Path::new(name).extension().and_then(|e| e.to_str());
        ext.is_some_and(|x| NOT_READ.iter().any(|(e, _)| *e == x))
    };
    let files = project_files(dir, &keep);
    (runtime.is_some() || !files.is_empty()).then_some(NotRead { runtime, files })
}

/// A file of the repository, read.
struct Entry {
    text: String,
    /// The same with strings and comments blanked; `None` for a YAML program.
    masked: Option<String>,
    facts: Facts,
}

/// The code files of a repository, read once, and the index of their constants and
/// helper functions.
pub struct Repo {
    root: PathBuf,
    /// By path from the root.
    files: BTreeMap<PathBuf, Entry>,
    index: Index,
}

impl Repo {
    /// Reads every code file (and Pulumi YAML program) under `root`, and indexes the
    /// module constants and the helper functions among them.
    pub fn scan(root: &Path) -> Repo {
        let keep = |name: &str, _: usize| read_file(name, 0);
        let walk = Walk {
            max_depth: REPO_DEPTH,
            tests: false,
            keep: &keep,
        };
        let mut paths = Vec::new();
        walk.collect(root, root, 0, &mut paths);
        let mut repo = Repo {
            root: root.to_path_buf(),
            files: BTreeMap::new(),
            index: Index::default(),
        };
        for rel in paths {
            if let Some(e) = Entry::read(&root.join(&rel), &rel) {
                repo.files.insert(rel, e);
            }
        }
        for (rel, e) in &repo.files {
            if let Some(lang) = Lang::of(rel) {
                repo.index.add_constants(rel, lang, &e.facts);
            }
        }
        for h in repo.helpers() {
            repo.index.add_helper(h);
        }
        for w in repo.wrappers() {
            repo.index.add_helper(w);
        }
        repo
    }

    /// The code files that define functions, each with its source as a helper reads
    /// it.
    fn with_functions(&self) -> impl Iterator<Item = (&PathBuf, &Entry, Source<'_>)> {
        self.files.iter().filter_map(|(rel, e)| {
            let (lang, masked) = (Lang::of(rel)?, e.masked.as_deref()?);
            let src = e.source(rel, lang, masked, CALLER, &self.index);
            (!e.facts.functions.is_empty()).then_some((rel, e, src))
        })
    }

    /// The helper functions of the repository's files.
    fn helpers(&self) -> Vec<Helper> {
        let mut out = Vec::new();
        for (rel, e, src) in self.with_functions() {
            let calls = src.calls();
            for f in &e.facts.functions {
                let inside = calls.iter().filter(|c| f.body.contains(c));
                let scope = Scope {
                    params: &f.params,
                    ..src.scope
                };
                let body = Source { scope, ..src };
                let templates: Vec<_> = inside
                    .map(|at| body.name_at(*at))
                    .filter(|t| t.iter().any(|p| matches!(p, super::Piece::Param(_))))
                    .collect();
                if !templates.is_empty() {
                    out.push(helper(rel, src.scope.lang, f, templates, None));
                }
            }
        }
        out
    }

    /// The functions that call a helper with their own parameters: their calls are
    /// references whose name the scanner does not follow.
    fn wrappers(&self) -> Vec<Helper> {
        let mut out: Vec<Helper> = Vec::new();
        for (rel, e, src) in self.with_functions() {
            for (open, callee) in src.callees(&self.index) {
                let Some(inner) = self.index.helper(src.scope.place(), callee) else {
                    continue;
                };
                let functions = e.facts.functions.iter().rev();
                let Some(f) = functions.clone().find(|f| f.body.contains(&open)) else {
                    continue;
                };
                let known = |h: &Helper| h.file == *rel && h.name == f.name;
                if self.index.bodies_in(rel).contains(&f.body) || out.iter().any(known) {
                    continue;
                }
                if uses_params(&e.text[open..f.body.end], &f.params, src.scope.lang) {
                    let unknown = vec![super::strings::unknown()];
                    let calls = Some(inner.name.clone());
                    out.push(helper(rel, src.scope.lang, f, unknown, calls));
                }
            }
        }
        out
    }

    /// Every stack reference of the Pulumi project named `project` in `dir`, in file
    /// order: its `StackReference` calls and YAML resources, and its calls of the
    /// repository's helpers. A project outside the root is read on its own.
    pub fn in_project(&self, dir: &Path, project: &str) -> Vec<Reference> {
        let Ok(rel) = dir.strip_prefix(&self.root) else {
            return Repo::scan(dir).in_project(dir, project);
        };
        let mut out = Vec::new();
        let under = self
            .files
            .range(rel.to_path_buf()..)
            .take_while(|(p, _)| p.starts_with(rel));
        for (path, e) in under {
            let inner = path.strip_prefix(rel).unwrap_or(path);
            if in_tests(inner) || inner.components().count() > PROJECT_DEPTH + 1 {
                continue;
            }
            let name = inner.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if read_file(name, inner.components().count() - 1) {
                out.extend(self.file_references(path, inner, e, project));
            }
        }
        out
    }

    /// The references of one file (`path` from the root, `inner` from the project).
    fn file_references(
        &self,
        path: &Path,
        inner: &Path,
        e: &Entry,
        project: &str,
    ) -> Vec<Reference> {
        let (Some(lang), Some(masked)) = (Lang::of(path), &e.masked) else {
            return in_yaml(&e.text, inner, project);
        };
        let src = e.source(path, lang, masked, project, &self.index);
        let mut refs = src.references(inner, self.index.bodies_in(path));
        refs.extend(src.helper_calls(&self.index, inner));
        refs.sort_by_key(|r| r.line);
        refs
    }
}

/// The helper `f` of file `rel` (from the root).
fn helper(
    rel: &Path,
    lang: Lang,
    f: &super::facts::Function,
    templates: Vec<Vec<super::Piece>>,
    calls: Option<String>,
) -> Helper {
    Helper {
        name: f.name.clone(),
        module: super::helpers::module_name(rel, lang),
        dir: rel.parent().unwrap_or(Path::new("")).to_path_buf(),
        file: rel.to_path_buf(),
        line: f.line,
        params: f.params.clone(),
        templates,
        body: f.body.clone(),
        calls,
    }
}

/// Whether the arguments of the call whose `(` starts `call` name one of `params`.
fn uses_params(call: &str, params: &[String], lang: Lang) -> bool {
    let Some((args, _)) = super::lex::items(call.get(1..).unwrap_or(""), lang, false) else {
        return false;
    };
    args.iter().any(|a| {
        a.split(|c: char| !super::lex::ident_char(c))
            .any(|w| params.iter().any(|p| p == w))
    })
}

/// Whether a file (from its project's folder) is in a folder of tests.
fn in_tests(inner: &Path) -> bool {
    let mut dirs = inner.components().rev().skip(1);
    dirs.any(|c| TEST_DIRS.iter().any(|t| c.as_os_str() == *t))
}

impl Entry {
    /// The file at `path` (`rel` from the root), unless it is no UTF-8.
    fn read(path: &Path, rel: &Path) -> Option<Entry> {
        std::fs::read_to_string(path)
            .ok()
            .map(|text| Entry::of(text, rel))
    }

    /// The file `rel` (from the root) holding `text`.
    fn of(text: String, rel: &Path) -> Entry {
        match Lang::of(rel) {
            Some(lang) => {
                let masked = mask(&text, lang);
                let facts = Facts::of(&text, &masked, lang);
                Entry {
                    text,
                    masked: Some(masked),
                    facts,
                }
            }
            None => Entry {
                text,
                masked: None,
                facts: Facts::default(),
            },
        }
    }

    /// The file as a source read for `project`.
    fn source<'a>(
        &'a self,
        rel: &'a Path,
        lang: Lang,
        masked: &'a str,
        project: &'a str,
        index: &'a Index,
    ) -> Source<'a> {
        Source {
            text: &self.text,
            masked,
            scope: Scope {
                lang,
                project,
                file: rel,
                facts: Some(&self.facts),
                index: Some(index),
                params: &[],
                depth: 0,
                nest: 0,
            },
        }
    }
}

/// Every stack reference of the Pulumi project named `project` in `dir`, with the
/// helpers and constants of its own files only (see [`Repo::in_project`]).
pub fn in_project(dir: &Path, project: &str) -> Vec<Reference> {
    Repo::scan(dir).in_project(dir, project)
}

/// The references of one file holding `text`, read alone (no other file's helpers nor
/// constants).
#[cfg(test)]
pub(super) fn in_text(text: &str, file: &Path, project: &str) -> Vec<Reference> {
    let repo = Repo {
        root: PathBuf::new(),
        files: BTreeMap::new(),
        index: Index::default(),
    };
    let e = Entry::of(text.to_string(), file);
    repo.file_references(file, file, &e, project)
}
