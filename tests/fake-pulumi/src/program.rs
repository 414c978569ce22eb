//! The "program": a Pulumi YAML project's `config:`, `variables:`, `resources:` and
//! `outputs:`, put in dependency order.

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Fail, Result, code};
use crate::eval;
use crate::project::Project;
use crate::secret;
use crate::state::{Backend, ORG, fq_name};

pub const STACK_TYPE: &str = "pulumi:pulumi:Stack";
pub const STACK_REF_TYPE: &str = "pulumi:pulumi:StackReference";

#[derive(Debug, Clone)]
pub enum Kind {
    Variable(Value),
    /// `depends_on` holds `options.dependsOn`: an ordering edge only.
    Resource {
        ty: String,
        props: Value,
        depends_on: Value,
    },
}

#[derive(Debug, Clone)]
pub struct Node {
    pub name: String,
    pub kind: Kind,
}

#[derive(Debug, Clone, Default)]
pub struct Program {
    /// Variables and resources, in dependency order.
    pub nodes: Vec<Node>,
    pub outputs: Vec<(String, Value)>,
}

/// A config key the project declares.
#[derive(Debug, Clone)]
pub struct Declared {
    /// As written in `Pulumi.yaml` (`vpc_id`, `aws:region`).
    pub key: String,
    pub qualified: String,
    pub default: Option<Value>,
}

fn to_json(v: &serde_yaml::Value) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn section(project: &Project, name: &str) -> Vec<(String, Value)> {
    match project.doc.get(name) {
        Some(serde_yaml::Value::Mapping(m)) => m
            .iter()
            .filter_map(|(k, v)| Some((k.as_str()?.to_string(), to_json(v))))
            .collect(),
        _ => Vec::new(),
    }
}

/// `config:` (project config) and `configuration:` (Pulumi YAML's older section).
pub fn declared_config(project: &Project) -> Vec<Declared> {
    let mut out = Vec::new();
    for sec in ["config", "configuration"] {
        for (key, decl) in section(project, sec) {
            let default = match &decl {
                Value::Object(o) => o.get("default").or_else(|| o.get("value")).cloned(),
                Value::Null => None,
                scalar => Some(scalar.clone()),
            };
            out.push(Declared {
                qualified: project.qualify(&key),
                key,
                default,
            });
        }
    }
    out
}

/// The program's config: the stack's values over the project's defaults. A declared key
/// with neither is a configuration error (exit 2).
pub fn effective_config(
    project: &Project,
    stack: &str,
    stack_values: &BTreeMap<String, Value>,
) -> Result<BTreeMap<String, Value>> {
    let mut out = stack_values.clone();
    for d in declared_config(project) {
        if out.contains_key(&d.qualified) {
            continue;
        }
        match d.default {
            Some(v) => {
                out.insert(d.qualified, v);
            }
            None => {
                return Err(Fail::new(
                    code::CONFIG,
                    format!("Stack '{stack}' is missing configuration value '{}'", d.key),
                ));
            }
        }
    }
    Ok(out)
}

impl Program {
    pub fn load(project: &Project) -> Result<Program> {
        let mut nodes = Vec::new();
        for (name, v) in section(project, "variables") {
            nodes.push(Node {
                name,
                kind: Kind::Variable(v),
            });
        }
        for (name, decl) in section(project, "resources") {
            let ty = decl
                .get("type")
                .and_then(Value::as_str)
                .ok_or_else(|| {
                    Fail::error(format!("resource '{name}' is missing a 'type' attribute"))
                })?
                .to_string();
            let props = decl
                .get("properties")
                .cloned()
                .unwrap_or(Value::Object(Map::new()));
            let depends_on = decl
                .get("options")
                .and_then(|o| o.get("dependsOn"))
                .cloned()
                .unwrap_or(Value::Null);
            nodes.push(Node {
                name,
                kind: Kind::Resource {
                    ty,
                    props,
                    depends_on,
                },
            });
        }
        let outputs = section(project, "outputs");
        Ok(Program {
            nodes: order(nodes)?,
            outputs,
        })
    }

    /// Names of the resources, in order.
    pub fn resource_count(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| matches!(n.kind, Kind::Resource { .. }))
            .count()
    }
}

/// Kahn's algorithm, always taking the earliest declared node that is ready.
fn order(nodes: Vec<Node>) -> Result<Vec<Node>> {
    let names: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
    let deps: Vec<BTreeSet<String>> = nodes
        .iter()
        .map(|n| {
            let refs = match &n.kind {
                Kind::Variable(v) => eval::references(v),
                Kind::Resource {
                    props, depends_on, ..
                } => {
                    let mut r = eval::references(props);
                    r.extend(eval::references(depends_on));
                    r
                }
            };
            refs.into_iter()
                .filter(|r| names.contains(r) && *r != n.name)
                .collect()
        })
        .collect();
    let mut done: BTreeSet<String> = BTreeSet::new();
    let mut out = Vec::new();
    let mut left: Vec<usize> = (0..nodes.len()).collect();
    while !left.is_empty() {
        let Some(pos) = left.iter().position(|&i| deps[i].is_subset(&done)) else {
            let stuck: Vec<&str> = left.iter().map(|&i| nodes[i].name.as_str()).collect();
            return Err(Fail::error(format!(
                "circular dependency between {}",
                stuck.join(", ")
            )));
        };
        let i = left.remove(pos);
        done.insert(nodes[i].name.clone());
        out.push(i);
    }
    let mut slots: Vec<Option<Node>> = nodes.into_iter().map(Some).collect();
    Ok(out.into_iter().filter_map(|i| slots[i].take()).collect())
}

/// Reads another stack's outputs for a `pulumi:pulumi:StackReference`, from the same
/// backend. Secret outputs come back marked secret.
pub fn read_stack_reference(
    backend: &Backend,
    name: &str,
    current_project: &str,
) -> std::result::Result<Map<String, Value>, String> {
    let parts: Vec<&str> = name.split('/').collect();
    let (org, project, stack) = match parts.as_slice() {
        [s] => (ORG, current_project, *s),
        [o, s] => (*o, current_project, *s),
        [o, p, s] => (*o, *p, *s),
        _ => return Err(format!("could not parse stack reference '{name}'")),
    };
    let backend = if backend.org.is_some() {
        // Pulumi Cloud: the named organization (unqualified: the default one).
        let org = if parts.len() == 1 {
            crate::state::default_org()
        } else {
            org.to_string()
        };
        backend.for_org(&org)
    } else if org != ORG {
        return Err("organization name must be 'organization'".into());
    } else {
        backend.clone()
    };
    let st = backend
        .load(project, stack)
        .map_err(|f| f.msg)?
        .ok_or_else(|| format!("unknown stack \"{}\"", fq_name(project, stack)))?;
    let outs = Value::Object(st.outputs());
    if !secret::contains_secret(&outs) {
        return Ok(outs.as_object().cloned().unwrap_or_default());
    }
    let c = crate::commands::state_crypter(&st).map_err(|f| f.msg)?;
    let plain =
        secret::decrypt_tree(&outs, &c).map_err(|_| crate::crypto::incorrect_passphrase().msg)?;
    Ok(plain.as_object().cloned().unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &str, props: Value) -> Node {
        Node {
            name: name.into(),
            kind: Kind::Resource {
                ty: "t".into(),
                props,
                depends_on: Value::Null,
            },
        }
    }

    #[test]
    fn orders_by_reference_then_declaration() {
        let nodes = vec![
            node("b", serde_json::json!({"x": "${a.id}"})),
            node("a", serde_json::json!({})),
            node("c", serde_json::json!({})),
        ];
        let names: Vec<String> = order(nodes).unwrap().into_iter().map(|n| n.name).collect();
        assert_eq!(names, ["a", "b", "c"]);
    }

    #[test]
    fn cycles_are_errors() {
        let nodes = vec![
            node("a", serde_json::json!({"x": "${b.id}"})),
            node("b", serde_json::json!({"x": "${a.id}"})),
        ];
        assert!(order(nodes).is_err());
    }
}
