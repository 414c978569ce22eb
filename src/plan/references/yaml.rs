//! Stack references of a Pulumi YAML program: `pulumi:pulumi:StackReference` resources,
//! their name with `${pulumi.organization}`/`${pulumi.stack}` interpolations.

use std::path::Path;

use super::{Part, Piece, Reference, reference};

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
pub(super) fn in_yaml(text: &str, file: &Path) -> Vec<Reference> {
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
        // Without `properties.name`, the resource's own name is the stack name; a name
        // that is not a string (`fn::invoke`, a list) is unknown.
        let pieces = match res.get("properties").and_then(|p| p.get("name")) {
            Some(n) => n
                .as_str()
                .map(yaml_pieces)
                .unwrap_or_else(|| vec![Piece::Value(Part::Unknown)]),
            None => key
                .as_str()
                .map(yaml_pieces)
                .unwrap_or_else(|| vec![Piece::Value(Part::Unknown)]),
        };
        let key = key.as_str().unwrap_or("");
        let line = text
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{key}:")))
            .map(|i| i + 1)
            .unwrap_or(1);
        out.push(reference(&pieces, file, line));
    }
    out
}
