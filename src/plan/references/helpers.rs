//! The repository's index: its module constants (`ORG = "acme"` in `lib/names.py`,
//! `Projects.EKS`, Go's `const Network = "network"`) and its helper functions, each a
//! function whose body makes a `StackReference` whose name uses its parameters
//! (`def stack_ref(project, env): return StackReference(f"{ORG}/{project}/{env}")`).
//! A call of a helper in a project's code is a reference there, its parameters
//! replaced by the call's arguments. One level only: a helper that calls a helper is
//! not one.

use std::collections::HashMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use super::facts::{Facts, Place};
use super::lex::Lang;
use super::{Part, Piece};

/// The namespace of a config key a helper reads without one: the calling project's,
/// put in at each call.
pub(super) const CALLER: &str = "\u{1}caller";

/// A module constant.
#[derive(Debug, Clone)]
struct Const {
    /// The module it is in (see [`module_name`]) and that module's folder.
    module: String,
    dir: PathBuf,
    /// The class it is an attribute of (`Projects` of `Projects.EKS`).
    class: Option<String>,
    value: String,
}

/// A helper function.
#[derive(Debug, Clone)]
pub(super) struct Helper {
    pub name: String,
    /// Its module (see [`module_name`]) and that module's folder.
    pub module: String,
    pub dir: PathBuf,
    /// Its file, from the repository's root, and the line of its definition.
    pub file: PathBuf,
    pub line: usize,
    pub params: Vec<String>,
    /// The names of the `StackReference` calls in its body, with its parameters.
    pub templates: Vec<Vec<Piece>>,
    /// Its bytes in its file: the calls there are its own, not references.
    pub body: Range<usize>,
    /// For a function that only calls a helper with its parameters: that helper's
    /// name. Its calls are references the scanner does not follow (one level only).
    pub calls: Option<String>,
}

impl Helper {
    /// How a reference made through it says so: `lib/refs.py:3 stack_ref`.
    pub(super) fn via(&self) -> String {
        let at = format!("{}:{} {}", self.file.display(), self.line, self.name);
        match &self.calls {
            Some(inner) => format!("{at}, which calls helper {inner} (not followed)"),
            None => at,
        }
    }
}

/// The name a module's code uses for it: a Python or JS file's stem (its folder's name
/// for `__init__.py` and `index.ts`), a Go file's folder (its package).
pub(super) fn module_name(file: &Path, lang: Lang) -> String {
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let folder = || {
        file.parent()
            .and_then(|p| p.file_name())
            .and_then(|s| s.to_str())
            .unwrap_or("")
            .to_string()
    };
    match (lang, stem) {
        (Lang::Go, _) | (Lang::Python, "__init__") | (Lang::Js, "index") => folder(),
        _ => stem.to_string(),
    }
}

/// The last segment of a dotted name.
fn last(q: &str) -> &str {
    q.rsplit('.').next().unwrap_or(q)
}

/// The one value `values` agree on.
fn agreed<'v>(mut values: impl Iterator<Item = &'v str>) -> Option<String> {
    let first = values.next()?;
    values.all(|v| v == first).then(|| first.to_string())
}

/// The repository's constants and helpers, by their name.
#[derive(Debug, Default)]
pub(super) struct Index {
    constants: HashMap<String, Vec<Const>>,
    helpers: HashMap<String, Vec<Helper>>,
    /// The bodies of the helpers of each file.
    bodies: HashMap<PathBuf, Vec<Range<usize>>>,
}

impl Index {
    /// Adds the module constants of `file` (from the root).
    pub(super) fn add_constants(&mut self, file: &Path, lang: Lang, facts: &Facts) {
        let module = module_name(file, lang);
        let dir = file.parent().unwrap_or(Path::new("")).to_path_buf();
        for (key, value) in &facts.constants {
            let (class, name) = match key.split_once('.') {
                Some((c, n)) => (Some(c.to_string()), n),
                None => (None, key.as_str()),
            };
            self.constants
                .entry(name.to_string())
                .or_default()
                .push(Const {
                    module: module.clone(),
                    dir: dir.clone(),
                    class,
                    value: value.clone(),
                });
        }
    }

    pub(super) fn add_helper(&mut self, helper: Helper) {
        self.bodies
            .entry(helper.file.clone())
            .or_default()
            .push(helper.body.clone());
        self.helpers
            .entry(helper.name.clone())
            .or_default()
            .push(helper);
    }

    /// Whether some helper is called `name`: the cheap test before [`Index::helper`].
    pub(super) fn has_helper(&self, name: &str) -> bool {
        self.helpers.contains_key(name)
    }

    /// The bodies of the helpers `file` (from the root) defines.
    pub(super) fn bodies_in(&self, file: &Path) -> &[Range<usize>] {
        self.bodies.get(file).map(Vec::as_slice).unwrap_or_default()
    }

    /// The value of constant `name` (`qualifier.name` when qualified) as the code in
    /// `scope` sees it: a module's constant through its import or its name, a class
    /// attribute, a constant imported by name, one of the same Go package. `None` when
    /// none is, or those that are disagree.
    pub(super) fn constant(
        &self,
        scope: Place,
        qualifier: Option<&str>,
        name: &str,
    ) -> Option<String> {
        let facts = scope.facts;
        match qualifier {
            Some(q) => {
                let module = facts
                    .and_then(|f| f.modules.get(q))
                    .map(String::as_str)
                    .unwrap_or(last(q));
                let by_module =
                    self.constant_where(name, |c| c.class.is_none() && c.module == module);
                by_module
                    .or_else(|| self.constant_where(name, |c| c.class.as_deref() == Some(last(q))))
            }
            None => {
                if let Some((module, orig)) = facts.and_then(|f| f.imported.get(name)) {
                    return self.constant_where(orig, |c| c.class.is_none() && &c.module == module);
                }
                let dir = scope.file.parent().unwrap_or(Path::new(""));
                (scope.lang == Lang::Go)
                    .then(|| self.constant_where(name, |c| c.class.is_none() && c.dir == dir))
                    .flatten()
            }
        }
    }

    fn constant_where(&self, name: &str, keep: impl Fn(&Const) -> bool) -> Option<String> {
        let found = self.constants.get(name)?;
        agreed(found.iter().filter(|c| keep(c)).map(|c| c.value.as_str()))
    }

    /// The helper a call of `callee` (`stack_ref`, `refs.stack_ref`, `lib.Ref`) in
    /// `scope` calls: one of the same file, one imported by name, one of the module the
    /// qualifier names, one of the same Go package. `None` when none or several are.
    pub(super) fn helper(&self, scope: Place, callee: &str) -> Option<&Helper> {
        let facts = scope.facts;
        let (qualifier, name) = match callee.rsplit_once('.') {
            Some((q, n)) => (Some(q), n),
            None => (None, callee),
        };
        let imported = facts.and_then(|f| f.imported.get(name));
        let name = imported.map(|(_, orig)| orig.as_str()).unwrap_or(name);
        let found = self.helpers.get(name)?;
        let dir = scope.file.parent().unwrap_or(Path::new(""));
        let fits = |h: &&Helper| match qualifier {
            Some(q) => {
                let module = facts.and_then(|f| f.modules.get(q)).map(String::as_str);
                h.module == module.unwrap_or(last(q))
            }
            None => {
                h.file == scope.file
                    || imported.is_some_and(|(m, _)| *m == h.module)
                    || (scope.lang == Lang::Go && h.dir == dir)
            }
        };
        let mut fitting = found.iter().filter(fits);
        let one = fitting.next()?;
        fitting.next().is_none().then_some(one)
    }
}

/// The pieces of a helper's name for one call: each parameter replaced by its
/// argument's pieces (unknown when the call gives none), a config key read without a
/// namespace put in the calling project's.
pub(super) fn substitute(
    template: &[Piece],
    args: &HashMap<&str, Vec<Piece>>,
    project: &str,
) -> Vec<Piece> {
    let caller = format!("{CALLER}:");
    template
        .iter()
        .flat_map(|p| match p {
            Piece::Param(name) => args
                .get(name.as_str())
                .cloned()
                .unwrap_or_else(super::strings::unknown),
            Piece::Value(Part::Config(k)) if k.starts_with(&caller) => {
                vec![Piece::Value(Part::Config(format!(
                    "{project}:{}",
                    &k[caller.len()..]
                )))]
            }
            other => vec![other.clone()],
        })
        .collect()
}
