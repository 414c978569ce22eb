//! Stack references of a Pulumi YAML program: `pulumi:pulumi:StackReference` resources,
//! their name with `${pulumi.organization}`/`${pulumi.stack}` interpolations and
//! `${key}` config values (a name that is no resource nor variable of the program).

use std::path::Path;

use super::{Part, Piece, Reference, reference};

/// The names a program's `${...}` may use that are not config: its resources and
/// variables.
struct Names<'a> {
    project: &'a str,
    own: Vec<&'a str>,
}

impl Names<'_> {
    /// What `${inner}` stands for.
    fn part(&self, inner: &str) -> Part {
        match inner {
            "pulumi.organization" => Part::Org,
            "pulumi.stack" => Part::Stack,
            "pulumi.project" => Part::Project,
            name if self.own.contains(&name) || name.contains(['.', '[', ' ']) => Part::Unknown,
            key if key.contains(':') => Part::Config(key.to_string()),
            key if !key.is_empty() => Part::Config(format!("{}:{key}", self.project)),
            _ => Part::Unknown,
        }
    }
}

/// `${...}` interpolations of a Pulumi YAML string.
fn yaml_pieces(s: &str, names: &Names) -> Vec<Piece> {
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
        out.push(Piece::Value(names.part(after[..end].trim())));
        rest = &after[end + 1..];
    }
    if !rest.is_empty() {
        out.push(Piece::Text(rest.to_string()));
    }
    out
}

/// The keys of the mapping `key` of `doc`.
fn keys<'d>(doc: &'d serde_yaml::Value, key: &str) -> impl Iterator<Item = &'d str> {
    doc.get(key)
        .and_then(|m| m.as_mapping())
        .into_iter()
        .flat_map(|m| m.keys().filter_map(|k| k.as_str()))
}

/// Stack references of a Pulumi YAML program (`text` of `file`) of project `project`.
pub(super) fn in_yaml(text: &str, file: &Path, project: &str) -> Vec<Reference> {
    // One nested too deep or made of aliases is not parsed (loading the project refuses
    // its Pulumi.yaml with the reason).
    let Some(doc) = super::config::parse_yaml(text) else {
        return Vec::new();
    };
    let Some(resources) = doc.get("resources").and_then(|r| r.as_mapping()) else {
        return Vec::new();
    };
    let names = Names {
        project,
        own: keys(&doc, "resources")
            .chain(keys(&doc, "variables"))
            .collect(),
    };
    let mut out = Vec::new();
    for (key, res) in resources {
        if res.get("type").and_then(|t| t.as_str()) != Some("pulumi:pulumi:StackReference") {
            continue;
        }
        // Without `properties.name`, the resource's own name is the stack name; a name
        // that is not a string (`fn::invoke`, a list) is unknown.
        let pieces = match res.get("properties").and_then(|p| p.get("name")) {
            Some(n) => n
                .as_str()
                .map(|s| yaml_pieces(s, &names))
                .unwrap_or_else(|| vec![Piece::Value(Part::Unknown)]),
            None => key
                .as_str()
                .map(|s| yaml_pieces(s, &names))
                .unwrap_or_else(|| vec![Piece::Value(Part::Unknown)]),
        };
        let key = key.as_str().unwrap_or("");
        let line = text
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{key}:")))
            .map(|i| i + 1)
            .unwrap_or(1);
        let mut r = reference(&pieces, file, line);
        r.outputs = outputs_read(text, key);
        out.push(r);
    }
    out
}

/// The outputs of the StackReference resource `key` that a YAML program's text reads
/// (`${key.outputs["name"]}`, `${key.outputs['name']}`, `${key.outputs.name}`), each
/// with the line it is read on, in the order they are read.
fn outputs_read(text: &str, key: &str) -> Vec<(String, usize)> {
    let pattern = format!(
        r#"\$\{{\s*{}\.outputs(?:\[\s*["']([^"'\]]+)["']\s*\]|\.([A-Za-z_][A-Za-z0-9_-]*))"#,
        regex::escape(key)
    );
    let Ok(re) = regex::Regex::new(&pattern) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for c in re.captures_iter(line) {
            if let Some(name) = c.get(1).or_else(|| c.get(2)) {
                out.push((name.as_str().to_string(), i + 1));
            }
        }
    }
    out
}
