//! Pulumi YAML interpolation: `${pulumi.stack}`, `${config}`, `${res.prop}`,
//! `${ref.outputs["key"]}`, `fn::secret`. What it cannot evaluate stays as written.

use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, BTreeSet};

use crate::secret;

/// What an expression can see.
pub struct Ctx<'a> {
    pub project: &'a str,
    pub stack: &'a str,
    pub org: &'a str,
    /// Fully qualified config key → value (secrets marked).
    pub config: &'a BTreeMap<String, Value>,
    /// Variables and resources evaluated so far, by name.
    pub nodes: &'a BTreeMap<String, Value>,
}

#[derive(Debug, PartialEq)]
enum Part {
    Lit(String),
    Expr(String),
}

#[derive(Debug, PartialEq)]
enum Access {
    Key(String),
    Index(usize),
}

/// Splits a string into literal text and `${...}` expressions (`$${` escapes).
fn parts(s: &str) -> Vec<Part> {
    let mut out = Vec::new();
    let mut lit = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('$') {
        lit.push_str(&rest[..i]);
        let after = &rest[i..];
        if let Some(r) = after.strip_prefix("$${") {
            lit.push_str("${");
            rest = r;
        } else if let Some(body) = after.strip_prefix("${") {
            match body.find('}') {
                Some(end) => {
                    if !lit.is_empty() {
                        out.push(Part::Lit(std::mem::take(&mut lit)));
                    }
                    out.push(Part::Expr(body[..end].trim().to_string()));
                    rest = &body[end + 1..];
                }
                None => {
                    lit.push_str(after);
                    rest = "";
                }
            }
        } else {
            lit.push('$');
            rest = &after[1..];
        }
    }
    lit.push_str(rest);
    if !lit.is_empty() {
        out.push(Part::Lit(lit));
    }
    out
}

/// `root.a["b"][0]` → ("root", [a, b, 0]).
fn parse_expr(e: &str) -> Option<(String, Vec<Access>)> {
    let end = e.find(['.', '[']).unwrap_or(e.len());
    let root = e[..end].to_string();
    if root.is_empty() {
        return None;
    }
    let mut acc = Vec::new();
    let mut rest = &e[end..];
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            if end == 0 {
                return None;
            }
            acc.push(Access::Key(r[..end].to_string()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let close = r.find(']')?;
            let inside = r[..close].trim();
            let quoted = inside
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .or_else(|| inside.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')));
            match quoted {
                Some(k) => acc.push(Access::Key(k.to_string())),
                None => acc.push(Access::Index(inside.parse().ok()?)),
            }
            rest = &r[close + 1..];
        } else {
            return None;
        }
    }
    Some((root, acc))
}

fn access(v: &Value, a: &Access) -> Option<Value> {
    if let Some(inner) = secret::inner(v) {
        return access(inner, a).map(secret::wrap);
    }
    match (v, a) {
        (Value::Object(o), Access::Key(k)) => o.get(k).cloned(),
        (Value::Array(arr), Access::Index(i)) => arr.get(*i).cloned(),
        _ => None,
    }
}

impl Ctx<'_> {
    fn root(&self, name: &str) -> Option<Value> {
        if name == "pulumi" {
            return Some(json!({
                "stack": self.stack,
                "project": self.project,
                "organization": self.org,
            }));
        }
        if let Some(v) = self.nodes.get(name) {
            return Some(v.clone());
        }
        let key = crate::project::qualify(self.project, name);
        self.config.get(&key).cloned()
    }

    fn resolve(&self, expr: &str) -> Option<Value> {
        let (root, path) = parse_expr(expr)?;
        let mut v = self.root(&root)?;
        for a in &path {
            v = access(&v, a)?;
        }
        Some(v)
    }

    fn eval_str(&self, s: &str) -> Value {
        let ps = parts(s);
        if let [Part::Expr(e)] = ps.as_slice() {
            return self
                .resolve(e)
                .unwrap_or_else(|| Value::String(format!("${{{e}}}")));
        }
        let mut out = String::new();
        let mut is_secret = false;
        for p in ps {
            match p {
                Part::Lit(l) => out.push_str(&l),
                Part::Expr(e) => match self.resolve(&e) {
                    Some(v) => {
                        is_secret |= secret::contains_secret(&v);
                        match secret::reveal(&v) {
                            Value::String(s) => out.push_str(&s),
                            other => out.push_str(&other.to_string()),
                        }
                    }
                    None => out.push_str(&format!("${{{e}}}")),
                },
            }
        }
        if is_secret {
            secret::wrap(Value::String(out))
        } else {
            Value::String(out)
        }
    }

    /// Evaluates every string in a tree; `fn::secret` marks its argument secret,
    /// other `fn::` invocations stay as written.
    pub fn eval(&self, v: &Value) -> Value {
        match v {
            Value::String(s) => self.eval_str(s),
            Value::Array(a) => Value::Array(a.iter().map(|e| self.eval(e)).collect()),
            Value::Object(o) if o.len() == 1 && o.contains_key("fn::secret") => {
                secret::wrap(self.eval(&o["fn::secret"]))
            }
            Value::Object(o) if o.keys().any(|k| k.starts_with("fn::")) => v.clone(),
            Value::Object(o) => {
                let m: Map<String, Value> =
                    o.iter().map(|(k, e)| (k.clone(), self.eval(e))).collect();
                Value::Object(m)
            }
            other => other.clone(),
        }
    }
}

/// The root names a tree refers to (`${a.b}` → `a`).
pub fn references(v: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    collect(v, &mut out);
    out
}

fn collect(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::String(s) => {
            for p in parts(s) {
                if let Part::Expr(e) = p
                    && let Some((root, _)) = parse_expr(&e)
                {
                    out.insert(root);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|e| collect(e, out)),
        Value::Object(o) => o.values().for_each(|e| collect(e, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx_eval(v: Value) -> Value {
        let mut config = BTreeMap::new();
        config.insert("eks:vpc_id".to_string(), json!("vpc-1"));
        config.insert("aws:region".to_string(), json!("us-west-2"));
        config.insert("eks:pw".to_string(), secret::wrap(json!("hunter2")));
        let mut nodes = BTreeMap::new();
        nodes.insert(
            "bucket".to_string(),
            json!({"id": "bucket-id", "arn": "arn:1", "tags": {"a": "b"}, "list": [1, 2]}),
        );
        nodes.insert(
            "ref".to_string(),
            json!({"outputs": {"kubeconfig": "kc", "token": secret::wrap(json!("t"))}}),
        );
        let ctx = Ctx {
            project: "eks",
            stack: "dev",
            org: "organization",
            config: &config,
            nodes: &nodes,
        };
        ctx.eval(&v)
    }

    #[test]
    fn builtins_and_config() {
        assert_eq!(
            ctx_eval(json!(
                "${pulumi.organization}/${pulumi.project}/${pulumi.stack}"
            )),
            json!("organization/eks/dev")
        );
        assert_eq!(ctx_eval(json!("${vpc_id}")), json!("vpc-1"));
        assert_eq!(ctx_eval(json!("${eks:vpc_id}")), json!("vpc-1"));
        assert_eq!(ctx_eval(json!("r=${aws:region}")), json!("r=us-west-2"));
    }

    #[test]
    fn resources_and_stack_references() {
        assert_eq!(ctx_eval(json!("${bucket.id}")), json!("bucket-id"));
        assert_eq!(ctx_eval(json!("${bucket.tags[\"a\"]}")), json!("b"));
        assert_eq!(ctx_eval(json!("${bucket.list[1]}")), json!(2));
        assert_eq!(ctx_eval(json!("${bucket.tags}")), json!({"a": "b"}));
        assert_eq!(
            ctx_eval(json!("${ref.outputs[\"kubeconfig\"]}")),
            json!("kc")
        );
        assert_eq!(ctx_eval(json!("${ref.outputs.kubeconfig}")), json!("kc"));
    }

    #[test]
    fn secrets_stay_secret() {
        assert!(secret::is_secret(&ctx_eval(json!("${pw}"))));
        let mixed = ctx_eval(json!("user:${pw}"));
        assert_eq!(secret::inner(&mixed), Some(&json!("user:hunter2")));
        assert!(secret::is_secret(&ctx_eval(json!("${ref.outputs.token}"))));
        assert!(secret::is_secret(&ctx_eval(json!({"fn::secret": "x"}))));
    }

    #[test]
    fn unknown_things_stay_literal() {
        assert_eq!(ctx_eval(json!("${nope.x}")), json!("${nope.x}"));
        assert_eq!(
            ctx_eval(json!("a ${bucket.missing} b")),
            json!("a ${bucket.missing} b")
        );
        assert_eq!(ctx_eval(json!("$${literal}")), json!("${literal}"));
        let f = json!({"fn::join": ["-", ["a", "b"]]});
        assert_eq!(ctx_eval(f.clone()), f);
        assert_eq!(
            ctx_eval(json!("no interpolation")),
            json!("no interpolation")
        );
    }

    #[test]
    fn finds_references() {
        let r = references(&json!({"a": "${x.id}-${pulumi.stack}", "b": ["${y}"]}));
        assert_eq!(r.into_iter().collect::<Vec<_>>(), vec!["pulumi", "x", "y"]);
    }
}
