//! Stack references found in the code of each Pulumi project: Pulumi YAML
//! (`pulumi:pulumi:StackReference` resources), Python (`StackReference(...)`),
//! TypeScript/JavaScript (`new StackReference(...)`) and Go (`NewStackReference(ctx, ...)`),
//! with the name built from literals, `${pulumi.organization}`/`${pulumi.stack}`,
//! `get_stack()`/`getStack()`/`ctx.Stack()`, f-strings, template literals, `+` and
//! `fmt.Sprintf`. A lexical scanner, not a parser: it reads the first argument of each
//! call (strings, template parts, the calls and variables around them) and is never
//! wrong about what it cannot read (an unknown part stays unknown).

use std::path::{Path, PathBuf};

use serde::Serialize;

/// One part of a stack name (`org/project/stack`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "kind", content = "value")]
pub enum Part {
    /// Written out: `organization`, `vpc`, `dev`.
    Literal(String),
    /// The current organization (`${pulumi.organization}`, `get_organization()`,
    /// `$STRATA_ORG`).
    Org,
    /// The current project.
    Project,
    /// The current stack (`${pulumi.stack}`, `get_stack()`, `$STRATA_STACK`).
    Stack,
    /// Something the scanner cannot tell (a variable, a config value).
    Unknown,
}

/// A stack reference in a program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reference {
    /// The name as the scanner read it: `${org}/kubeconfig/${stack}`.
    pub name: String,
    /// `None` when the name has no organization part (`project/stack`, `stack`).
    pub org: Option<Part>,
    /// `None` for a bare stack name (a stack of the same project).
    pub project: Option<Part>,
    pub stack: Part,
    /// Where it is: the file (relative to the project folder) and its line (1-based).
    pub file: PathBuf,
    pub line: usize,
}

/// A piece of a name: text, or a placeholder.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Text(String),
    Value(Part),
}

/// The pieces of a name, split at `/` into parts.
fn reference(pieces: &[Piece], file: &Path, line: usize) -> Option<Reference> {
    let mut parts: Vec<Vec<Piece>> = vec![Vec::new()];
    for p in pieces {
        match p {
            Piece::Text(t) => {
                for (k, seg) in t.split('/').enumerate() {
                    if k > 0 {
                        parts.push(Vec::new());
                    }
                    if !seg.is_empty() {
                        parts.last_mut()?.push(Piece::Text(seg.to_string()));
                    }
                }
            }
            Piece::Value(_) => parts.last_mut()?.push(p.clone()),
        }
    }
    // A lone placeholder is that placeholder, text alone is literal, a mix is unknown.
    let to_part = |ps: &[Piece]| -> Part {
        match ps {
            [Piece::Value(v)] => v.clone(),
            all if all.iter().all(|p| matches!(p, Piece::Text(_))) => Part::Literal(
                all.iter()
                    .map(|p| match p {
                        Piece::Text(t) => t.as_str(),
                        Piece::Value(_) => "",
                    })
                    .collect(),
            ),
            _ => Part::Unknown,
        }
    };
    let parts: Vec<Part> = parts.iter().map(|p| to_part(p)).collect();
    let name = pieces
        .iter()
        .map(|p| match p {
            Piece::Text(t) => t.clone(),
            Piece::Value(Part::Org) => "${org}".into(),
            Piece::Value(Part::Project) => "${project}".into(),
            Piece::Value(Part::Stack) => "${stack}".into(),
            Piece::Value(_) => "${?}".into(),
        })
        .collect::<String>();
    let (org, project, stack) = match parts.len() {
        1 => (None, None, parts[0].clone()),
        2 => (None, Some(parts[0].clone()), parts[1].clone()),
        3 => (
            Some(parts[0].clone()),
            Some(parts[1].clone()),
            parts[2].clone(),
        ),
        _ => return None,
    };
    Some(Reference {
        name,
        org,
        project,
        stack,
        file: file.to_path_buf(),
        line,
    })
}

/// What an expression (a call, a variable) inside a name stands for.
fn classify(expr: &str) -> Part {
    let e: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let e = e.trim_start_matches("pulumi.");
    let lower = e.to_ascii_lowercase();
    let env = |name: &str| {
        lower.contains(&format!("\"{}\"", name.to_ascii_lowercase()))
            || lower.contains(&format!("'{}'", name.to_ascii_lowercase()))
            || lower.ends_with(&format!(".{}", name.to_ascii_lowercase()))
    };
    if matches!(
        lower.as_str(),
        "get_organization()" | "getorganization()" | "ctx.organization()" | "organization" | "org"
    ) || env("STRATA_ORG")
    {
        Part::Org
    } else if matches!(
        lower.as_str(),
        "get_stack()" | "getstack()" | "ctx.stack()" | "stack"
    ) || env("STRATA_STACK")
        || env("PULUMI_STACK")
    {
        Part::Stack
    } else if matches!(
        lower.as_str(),
        "get_project()" | "getproject()" | "ctx.project()" | "project"
    ) {
        Part::Project
    } else {
        Part::Unknown
    }
}

/// `${...}` interpolations of a Pulumi YAML string.
fn yaml_pieces(s: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        if i > 0 {
            out.push(Piece::Text(rest[..i].to_string()));
        }
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.push(Piece::Text(rest[i..].to_string()));
            return out;
        };
        out.push(Piece::Value(match &after[..end] {
            "pulumi.organization" => Part::Org,
            "pulumi.stack" => Part::Stack,
            "pulumi.project" => Part::Project,
            _ => Part::Unknown,
        }));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest.to_string()));
    }
    out
}

/// Stack references of a Pulumi YAML program (`text` of `file`).
pub fn in_yaml(text: &str, file: &Path) -> Vec<Reference> {
    use crate::workspace::yaml;
    // Any YAML file of the project is read: one nested too deep or made of aliases is
    // not parsed (loading the project refuses its Pulumi.yaml with the reason).
    if yaml::too_deep(text, yaml::MAX_DEPTH).is_some()
        || yaml::expands_past(text, yaml::expansion_limit(text.len()))
    {
        return Vec::new();
    }
    let Ok(doc) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Vec::new();
    };
    let Some(resources) = doc.get("resources").and_then(|r| r.as_mapping()) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (key, res) in resources {
        if res.get("type").and_then(|t| t.as_str()) != Some("pulumi:pulumi:StackReference") {
            continue;
        }
        let name = res
            .get("properties")
            .and_then(|p| p.get("name"))
            .and_then(|n| n.as_str())
            // Without `properties.name`, the resource's own name is the stack name.
            .or_else(|| key.as_str());
        let Some(name) = name else { continue };
        let key = key.as_str().unwrap_or("");
        let line = text
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{key}:")))
            .map(|i| i + 1)
            .unwrap_or(1);
        if let Some(r) = reference(&yaml_pieces(name), file, line) {
            out.push(r);
        }
    }
    out
}

/// A string literal starting at `s[0]` (after any prefix letters): its pieces (f-string
/// `{...}` and template `${...}` parts classified) and its length in bytes.
fn string_literal(s: &str, templated: bool) -> Option<(Vec<Piece>, usize)> {
    let quote = s.chars().next()?;
    if !matches!(quote, '"' | '\'' | '`') {
        return None;
    }
    let template = templated || quote == '`';
    let mut pieces = Vec::new();
    let mut text = String::new();
    let mut chars = s.char_indices().skip(1).peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, n)) = chars.next() {
                    text.push(n);
                }
            }
            c if c == quote => {
                if !text.is_empty() {
                    pieces.push(Piece::Text(text));
                }
                return Some((pieces, i + 1));
            }
            '$' if template && quote == '`' && chars.peek().map(|(_, c)| *c) == Some('{') => {
                chars.next();
                let expr = take_braced(&mut chars)?;
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Value(classify(&expr)));
            }
            '{' if template && quote != '`' => {
                if chars.peek().map(|(_, c)| *c) == Some('{') {
                    chars.next();
                    text.push('{');
                    continue;
                }
                let expr = take_braced(&mut chars)?;
                if !text.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut text)));
                }
                pieces.push(Piece::Value(classify(&expr)));
            }
            '\n' if quote != '`' => return None,
            c => text.push(c),
        }
    }
    None
}

/// The expression up to the `}` that closes an interpolation.
fn take_braced(chars: &mut impl Iterator<Item = (usize, char)>) -> Option<String> {
    let mut depth = 0;
    let mut expr = String::new();
    for (_, c) in chars {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(expr),
            '}' => depth -= 1,
            _ => {}
        }
        expr.push(c);
    }
    None
}

/// The pieces of an argument expression: string literals (with f/template parts),
/// `+` concatenation, calls and variables; `fmt.Sprintf("%s/x/%s", a, b)` too.
fn argument(s: &str) -> Option<Vec<Piece>> {
    let s = s.trim_start();
    if let Some(rest) = s.strip_prefix("fmt.Sprintf(") {
        let (fmt, len) = string_literal(rest.trim_start(), false)?;
        let fmt: String = fmt
            .iter()
            .map(|p| match p {
                Piece::Text(t) => t.as_str(),
                _ => "",
            })
            .collect();
        let after = &rest.trim_start()[len..];
        let args = split_args(after);
        let mut out = Vec::new();
        let mut args = args.into_iter();
        let mut text = String::new();
        let mut it = fmt.chars().peekable();
        while let Some(c) = it.next() {
            if c == '%' {
                match it.next() {
                    Some('%') => text.push('%'),
                    Some(_) => {
                        if !text.is_empty() {
                            out.push(Piece::Text(std::mem::take(&mut text)));
                        }
                        out.push(Piece::Value(
                            args.next().map(|a| classify(&a)).unwrap_or(Part::Unknown),
                        ));
                    }
                    None => {}
                }
            } else {
                text.push(c);
            }
        }
        if !text.is_empty() {
            out.push(Piece::Text(text));
        }
        return Some(out);
    }
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start();
        let prefix_len = rest
            .chars()
            .take_while(|c| matches!(c, 'f' | 'F' | 'r' | 'R' | 'b' | 'B'))
            .count();
        let templated = rest[..prefix_len].to_ascii_lowercase().contains('f');
        if let Some((pieces, len)) = string_literal(&rest[prefix_len..], templated) {
            out.extend(pieces);
            rest = &rest[prefix_len + len..];
        } else {
            // A call or a variable, up to `+`, `,` or the closing parenthesis.
            let mut depth = 0;
            let mut end = rest.len();
            for (i, c) in rest.char_indices() {
                match c {
                    '(' | '[' => depth += 1,
                    ')' | ']' if depth == 0 => {
                        end = i;
                        break;
                    }
                    ')' | ']' => depth -= 1,
                    '+' | ',' | '\n' if depth == 0 => {
                        end = i;
                        break;
                    }
                    _ => {}
                }
            }
            let expr = rest[..end].trim();
            if expr.is_empty() {
                return (!out.is_empty()).then_some(out);
            }
            // `name="..."` keyword argument.
            if let Some(v) = expr
                .strip_prefix("name=")
                .or_else(|| expr.strip_prefix("name ="))
            {
                return argument(v);
            }
            out.push(Piece::Value(classify(expr)));
            rest = &rest[end..];
        }
        rest = rest.trim_start();
        match rest.strip_prefix('+') {
            Some(r) => rest = r,
            None => return Some(out),
        }
    }
}

/// The top-level comma-separated arguments after a format string, up to `)`.
fn split_args(s: &str) -> Vec<String> {
    let mut args = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                cur.push(c);
            }
            ')' | ']' | '}' if depth == 0 => break,
            ')' | ']' | '}' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => {
                if !cur.trim().is_empty() {
                    args.push(cur.trim().to_string());
                }
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if !cur.trim().is_empty() {
        args.push(cur.trim().to_string());
    }
    args
}

/// Stack references of a Python, TypeScript/JavaScript or Go file.
pub fn in_code(text: &str, file: &Path) -> Vec<Reference> {
    let go = file.extension().and_then(|e| e.to_str()) == Some("go");
    let needle = if go {
        "NewStackReference("
    } else {
        "StackReference("
    };
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(needle) {
        let at = from + i;
        from = at + needle.len();
        // Not `getStackReference(`, `MyStackReference(`: the call itself.
        let before = text[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let line = text[..at].matches('\n').count() + 1;
        // Skip comments: the line up to the match starts with `#` or `//`.
        let line_start = text[..at].rfind('\n').map(|i| i + 1).unwrap_or(0);
        let lead = text[line_start..at].trim_start();
        if lead.starts_with('#') || lead.starts_with("//") || lead.starts_with('*') {
            continue;
        }
        let mut args = &text[from..];
        if go {
            // `NewStackReference(ctx, name, args)`: the second argument.
            let Some(comma) = args.find(',') else {
                continue;
            };
            args = &args[comma + 1..];
        }
        if let Some(pieces) = argument(args)
            && let Some(r) = reference(&pieces, file, line)
        {
            out.push(r);
        }
    }
    out
}

/// A reference of a project of the plan, and what it points at.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Found {
    #[serde(flatten)]
    pub reference: Reference,
    /// The profile path of the referenced project, when its Pulumi name is one of the
    /// plan's projects.
    pub target: Option<String>,
}

/// The stack references of every Pulumi project of `plan`, by project path, each
/// resolved through the `name:` of the projects' `Pulumi.yaml`. References to the
/// project itself (a bare stack name, `${pulumi.project}`) are left out.
pub fn of_plan(plan: &super::Plan) -> std::collections::BTreeMap<String, Vec<Found>> {
    let by_name: std::collections::BTreeMap<&str, &str> = plan
        .nodes
        .iter()
        .filter(|n| n.kind == super::NodeKind::Pulumi)
        .map(|n| (n.name.as_str(), n.path.as_str()))
        .collect();
    let mut out = std::collections::BTreeMap::new();
    for n in &plan.nodes {
        let Some(p) = n
            .project
            .as_ref()
            .filter(|_| n.kind == super::NodeKind::Pulumi)
        else {
            continue;
        };
        let found: Vec<Found> = in_project(&p.dir)
            .into_iter()
            .filter(|r| !matches!(r.project, None | Some(Part::Project)))
            .filter(|r| r.project != Some(Part::Literal(n.name.clone())))
            .map(|r| {
                let target = match &r.project {
                    Some(Part::Literal(name)) => by_name.get(name.as_str()).map(|p| p.to_string()),
                    _ => None,
                };
                Found {
                    reference: r,
                    target,
                }
            })
            .collect();
        if !found.is_empty() {
            out.insert(n.path.clone(), found);
        }
    }
    out
}

/// The referenced profile paths of each project, sorted and deduplicated.
pub fn targets(
    found: &std::collections::BTreeMap<String, Vec<Found>>,
) -> std::collections::BTreeMap<String, Vec<String>> {
    found
        .iter()
        .map(|(path, refs)| {
            let mut t: Vec<String> = refs.iter().filter_map(|f| f.target.clone()).collect();
            t.sort();
            t.dedup();
            (path.clone(), t)
        })
        .filter(|(_, t)| !t.is_empty())
        .collect()
}

/// Folders never read, beyond those the fingerprint skips: build output and vendored code.
const MORE_SKIP_DIRS: &[&str] = &["dist", "build", "vendor"];

/// At most this many bytes of one source file are read.
const MAX_FILE: u64 = 2 * 1024 * 1024;

/// Every stack reference in the Pulumi project in `dir` (its `Pulumi.yaml` program and
/// its `.py`, `.ts`, `.js`, `.mjs`, `.go` files), in file order.
pub fn in_project(dir: &Path) -> Vec<Reference> {
    let mut files = Vec::new();
    collect(dir, dir, 0, &mut files);
    files.sort();
    let mut out = Vec::new();
    for rel in files {
        let path = dir.join(&rel);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let ext = rel.extension().and_then(|e| e.to_str()).unwrap_or("");
        match ext {
            "yaml" | "yml" => out.extend(in_yaml(&text, &rel)),
            _ => out.extend(in_code(&text, &rel)),
        }
    }
    out
}

fn collect(root: &Path, dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 8 {
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
            let skipped = crate::run::fingerprint::SKIP_DIRS.contains(&name.as_str())
                || MORE_SKIP_DIRS.contains(&name.as_str());
            if !skipped && !name.starts_with('.') {
                collect(root, &p, depth + 1, out);
            }
            continue;
        }
        if !ft.is_file() || e.metadata().map(|m| m.len() > MAX_FILE).unwrap_or(true) {
            continue;
        }
        let program =
            (name == "Pulumi.yaml" || name == "Pulumi.yml" || name == "Main.yaml") && depth == 0;
        let code = [".py", ".ts", ".js", ".mjs", ".go"]
            .iter()
            .any(|x| name.ends_with(x))
            && !name.ends_with(".d.ts");
        if program || code {
            out.push(p.strip_prefix(root).unwrap_or(&p).to_path_buf());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(s: &str) -> Part {
        Part::Literal(s.into())
    }

    #[test]
    fn pulumi_yaml() {
        let text = "name: app\nruntime: yaml\nresources:\n  cluster:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${pulumi.organization}/kubeconfig/${pulumi.stack}\n  other:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: acme/vpc/prod\n  bucket:\n    type: aws:s3:Bucket\n";
        let refs = in_yaml(text, Path::new("Pulumi.yaml"));
        assert_eq!(refs.len(), 2, "{refs:#?}");
        assert_eq!(refs[0].org, Some(Part::Org));
        assert_eq!(refs[0].project, Some(lit("kubeconfig")));
        assert_eq!(refs[0].stack, Part::Stack);
        assert_eq!(refs[0].line, 4);
        assert_eq!(refs[0].name, "${org}/kubeconfig/${stack}");
        assert_eq!(refs[1].org, Some(lit("acme")));
        assert_eq!(refs[1].stack, lit("prod"));
    }

    #[test]
    fn python() {
        let text = r#"import pulumi
from pulumi import StackReference
org = pulumi.get_organization()
# StackReference("commented/out/dev")
vpc = StackReference(f"{pulumi.get_organization()}/vpc/{pulumi.get_stack()}")
eks = pulumi.StackReference("organization/eks/" + pulumi.get_stack())
kw = StackReference(name=f"{org}/ecr/{get_stack()}")
env = StackReference(f"{os.environ['STRATA_ORG']}/logs/{os.getenv('STRATA_STACK')}")
"#;
        let refs = in_code(text, Path::new("__main__.py"));
        assert_eq!(refs.len(), 4, "{refs:#?}");
        assert_eq!(refs[0].project, Some(lit("vpc")));
        assert_eq!(
            (refs[0].org.clone(), refs[0].stack.clone()),
            (Some(Part::Org), Part::Stack)
        );
        assert_eq!(refs[0].line, 5);
        assert_eq!(refs[1].org, Some(lit("organization")));
        assert_eq!(refs[1].project, Some(lit("eks")));
        assert_eq!(refs[1].stack, Part::Stack);
        assert_eq!(refs[2].project, Some(lit("ecr")));
        assert_eq!(refs[2].org, Some(Part::Org), "a variable named org");
        assert_eq!(refs[3].org, Some(Part::Org));
        assert_eq!(refs[3].stack, Part::Stack);
    }

    #[test]
    fn typescript_and_javascript() {
        let text = "import * as pulumi from \"@pulumi/pulumi\";\nconst org = pulumi.getOrganization();\nconst vpc = new pulumi.StackReference(`${org}/vpc/${pulumi.getStack()}`);\nconst k = new StackReference(\"acme/kubeconfig/\" + pulumi.getStack(), {});\nconst e = new pulumi.StackReference(`${process.env.STRATA_ORG}/ecr/${process.env.STRATA_STACK}`);\n// new StackReference(\"x/y/z\")\n";
        let refs = in_code(text, Path::new("index.ts"));
        assert_eq!(refs.len(), 3, "{refs:#?}");
        assert_eq!(refs[0].project, Some(lit("vpc")));
        assert_eq!(refs[0].org, Some(Part::Org));
        assert_eq!(refs[0].stack, Part::Stack);
        assert_eq!(refs[1].org, Some(lit("acme")));
        assert_eq!(refs[1].project, Some(lit("kubeconfig")));
        assert_eq!(refs[2].org, Some(Part::Org));
        assert_eq!(refs[2].project, Some(lit("ecr")));
    }

    #[test]
    fn go() {
        let text = "package main\n\nfunc main() {\n\tpulumi.Run(func(ctx *pulumi.Context) error {\n\t\tvpc, err := pulumi.NewStackReference(ctx, fmt.Sprintf(\"%s/vpc/%s\", ctx.Organization(), ctx.Stack()), nil)\n\t\teks, err := pulumi.NewStackReference(ctx, \"organization/eks/\"+ctx.Stack(), nil)\n\t\treturn nil\n\t})\n}\n";
        let refs = in_code(text, Path::new("main.go"));
        assert_eq!(refs.len(), 2, "{refs:#?}");
        assert_eq!(refs[0].org, Some(Part::Org));
        assert_eq!(refs[0].project, Some(lit("vpc")));
        assert_eq!(refs[0].stack, Part::Stack);
        assert_eq!(refs[0].line, 5);
        assert_eq!(refs[1].org, Some(lit("organization")));
        assert_eq!(refs[1].project, Some(lit("eks")));
    }

    #[test]
    fn unknown_parts_stay_unknown_and_short_names_have_fewer_parts() {
        let refs = in_code(
            "a = StackReference(config.require(\"ref\"))\nb = StackReference(\"vpc/dev\")\nc = StackReference(\"dev\")\nd = StackReference(f\"{x}-net/{get_stack()}\")\n",
            Path::new("x.py"),
        );
        assert_eq!(refs.len(), 4, "{refs:#?}");
        assert_eq!(refs[0].stack, Part::Unknown);
        assert_eq!(refs[0].project, None);
        assert_eq!(refs[1].project, Some(lit("vpc")));
        assert_eq!(refs[1].org, None);
        assert_eq!(refs[2].project, None);
        assert_eq!(refs[2].stack, lit("dev"));
        assert_eq!(refs[3].project, Some(Part::Unknown), "mixed text and value");
    }

    #[test]
    fn garbage_never_panics() {
        for t in [
            "StackReference(",
            "StackReference(f\"{",
            "StackReference(`${",
            "new StackReference(\"a/b/c/d/e\")",
            "NewStackReference(ctx",
            "NewStackReference(ctx, fmt.Sprintf(\"%s%",
            "StackReference(\"\u{1F600}/é/\\",
            "StackReference(((((",
        ] {
            let _ = in_code(t, Path::new("x.py"));
            let _ = in_code(t, Path::new("x.go"));
        }
        let _ = in_yaml("resources: [1, 2]", Path::new("Pulumi.yaml"));
        let _ = in_yaml(
            "resources:\n  r:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${",
            Path::new("Pulumi.yaml"),
        );
    }
}
