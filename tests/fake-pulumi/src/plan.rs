//! Update plans: `preview --save-plan FILE` writes one, `up --plan FILE` constrains an
//! update to it. The file's shape and the checks follow Pulumi v3.274.1
//! (`pkg/resource/deploy/plan.go`, `step_generator.go`, `step.go`; see
//! docs/research/pulumi-update-plans.md). Neither flag needs `PULUMI_EXPERIMENTAL`.

use base64::Engine as _;
use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::{BTreeMap, VecDeque};

use crate::crypto::{self, Crypter};
use crate::error::{Fail, Result};
use crate::fields;
use crate::secret;
use crate::state::{Resource, VERSION};

/// Pulumi's unknown-value sentinel: a plan value that accepts anything.
pub const UNKNOWN: &str = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/// `{adds, deletes, updates}` of one property map against another.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Diff {
    #[serde(skip_serializing_if = "Map::is_empty")]
    adds: Map<String, Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    deletes: Vec<String>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    updates: Map<String, Value>,
}

impl Diff {
    /// `olds.Diff(news)`: a null value counts as no value, as in Pulumi.
    fn between(olds: &Map<String, Value>, news: &Map<String, Value>) -> Diff {
        let mut d = Diff::default();
        for (k, v) in news.iter().filter(|(_, v)| !v.is_null()) {
            match olds.get(k).filter(|o| !o.is_null()) {
                None => {
                    d.adds.insert(k.clone(), v.clone());
                }
                Some(o) if o != v => {
                    d.updates.insert(k.clone(), v.clone());
                }
                Some(_) => {}
            }
        }
        for (k, _) in olds.iter().filter(|(_, v)| !v.is_null()) {
            if news.get(k).is_none_or(Value::is_null) {
                d.deletes.push(k.clone());
            }
        }
        d
    }

    fn from_json(v: Option<&Value>) -> Diff {
        let v = v.unwrap_or(&Value::Null);
        Diff {
            adds: fields::object(v, "adds"),
            updates: fields::object(v, "updates"),
            deletes: fields::strings(v, "deletes"),
        }
    }

    fn map_values(&self, f: &dyn Fn(&Value) -> Value) -> Diff {
        let m = |m: &Map<String, Value>| m.iter().map(|(k, v)| (k.clone(), f(v))).collect();
        Diff {
            adds: m(&self.adds),
            deletes: self.deletes.clone(),
            updates: m(&self.updates),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Writing (`preview --save-plan`)

#[derive(Serialize)]
struct GoalOut {
    #[serde(rename = "type")]
    ty: String,
    name: String,
    custom: bool,
    #[serde(rename = "inputDiff")]
    input_diff: Diff,
    #[serde(rename = "outputDiff")]
    output_diff: Diff,
    #[serde(skip_serializing_if = "String::is_empty")]
    parent: String,
    protect: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    dependencies: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    provider: String,
    #[serde(rename = "customTimeouts")]
    custom_timeouts: Value,
}

#[derive(Serialize)]
struct ResourcePlanOut {
    #[serde(skip_serializing_if = "Option::is_none")]
    goal: Option<GoalOut>,
    steps: Vec<String>,
    state: Option<Map<String, Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seed: Option<String>,
}

#[derive(Serialize)]
struct ManifestOut {
    time: String,
    magic: String,
    version: String,
}

#[derive(Serialize)]
struct PlanOut {
    manifest: ManifestOut,
    #[serde(skip_serializing_if = "Map::is_empty")]
    config: Map<String, Value>,
    #[serde(rename = "resourcePlans", skip_serializing_if = "BTreeMap::is_empty")]
    resource_plans: BTreeMap<String, ResourcePlanOut>,
}

/// What a preview planned, step by step (values in memory, secrets in plaintext).
#[derive(Default)]
pub struct Recorder {
    plans: BTreeMap<String, ResourcePlanOut>,
}

fn seed() -> Option<String> {
    Some(base64::engine::general_purpose::STANDARD.encode(crypto::random_bytes(32)))
}

impl Recorder {
    /// A custom resource's step: its inputs against the old ones (none for a create).
    pub fn resource(&mut self, res: &Resource, old_inputs: Option<&Map<String, Value>>, op: &str) {
        let empty = Map::new();
        let goal = GoalOut {
            ty: res.ty.clone(),
            name: res.name().to_string(),
            custom: res.custom,
            input_diff: Diff::between(old_inputs.unwrap_or(&empty), &res.inputs),
            output_diff: Diff::default(),
            parent: res.parent.clone(),
            protect: false,
            dependencies: res.dependencies.clone(),
            provider: res.provider.clone(),
            custom_timeouts: json!({}),
        };
        self.planned(res, goal, op);
    }

    /// The stack resource: its outputs against the old ones.
    pub fn stack(&mut self, res: &Resource, old_outputs: Option<&Map<String, Value>>, op: &str) {
        let empty = Map::new();
        let goal = GoalOut {
            ty: res.ty.clone(),
            name: res.name().to_string(),
            custom: false,
            input_diff: Diff::default(),
            output_diff: Diff::between(old_outputs.unwrap_or(&empty), &res.outputs),
            parent: String::new(),
            protect: false,
            dependencies: Vec::new(),
            provider: String::new(),
            custom_timeouts: json!({}),
        };
        self.planned(res, goal, op);
    }

    /// A step with a goal: the resource's state as it is after it.
    fn planned(&mut self, res: &Resource, goal: GoalOut, op: &str) {
        self.plans.insert(
            res.urn.clone(),
            ResourcePlanOut {
                goal: Some(goal),
                steps: vec![op.to_string()],
                state: Some(res.outputs.clone()),
                seed: seed(),
            },
        );
    }

    /// A planned delete: no goal, no state.
    pub fn delete(&mut self, urn: &str) {
        self.plans.insert(
            urn.to_string(),
            ResourcePlanOut {
                goal: None,
                steps: vec!["delete".into()],
                state: None,
                seed: None,
            },
        );
    }

    /// Writes the plan as `pulumi preview --save-plan` does (4-space indent, a final
    /// newline). `config` is the stack config file's `config:` as written (secure values
    /// stay `{"secure": …}`); secrets are encrypted with the stack's crypter, or in
    /// plaintext form with `--show-secrets`.
    pub fn write(
        self,
        path: &str,
        config: Map<String, Value>,
        crypter: &Crypter,
        show_secrets: bool,
    ) -> Result<()> {
        let enc = |v: &Value| {
            if show_secrets {
                secret::plaintext_tree(v)
            } else {
                secret::encrypt_tree(v, crypter)
            }
        };
        let enc_map = |m: &Map<String, Value>| match enc(&Value::Object(m.clone())) {
            Value::Object(o) => o,
            _ => Map::new(),
        };
        let resource_plans = self
            .plans
            .into_iter()
            .map(|(urn, mut p)| {
                if let Some(g) = p.goal.as_mut() {
                    g.input_diff = g.input_diff.map_values(&enc);
                    g.output_diff = g.output_diff.map_values(&enc);
                }
                p.state = p.state.as_ref().map(enc_map);
                (urn, p)
            })
            .collect();
        use sha2::Digest as _;
        let doc = PlanOut {
            manifest: ManifestOut {
                time: crate::now_rfc3339(),
                magic: sha2::Sha256::digest(VERSION.as_bytes())
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect(),
                version: VERSION.to_string(),
            },
            config,
            resource_plans,
        };
        let mut buf = Vec::new();
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
        doc.serialize(&mut ser)
            .map_err(|e| Fail::error(e.to_string()))?;
        buf.push(b'\n');
        std::fs::write(path, buf).map_err(|e| Fail::error(format!("open {path}: {}", go_err(&e))))
    }
}

/// An I/O error as Go's `os` package words it.
fn go_err(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".into(),
        std::io::ErrorKind::PermissionDenied => "permission denied".into(),
        std::io::ErrorKind::IsADirectory => "is a directory".into(),
        _ => e.to_string(),
    }
}

// ---------------------------------------------------------------------------------------
// Reading and checking (`up --plan`)

#[derive(Debug, Clone)]
struct Goal {
    input: Diff,
    output: Diff,
}

#[derive(Debug, Clone)]
struct Entry {
    /// None: the plan expects the resource deleted.
    goal: Option<Goal>,
    /// The planned steps not yet taken.
    ops: VecDeque<String>,
}

/// A plan read from a file, secrets decrypted.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    entries: BTreeMap<String, Entry>,
}

/// Reads `up --plan FILE` (before the engine starts, as the real CLI does).
pub fn read(path: &str, crypter: &Crypter) -> Result<Plan> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Fail::error(format!("open {path}: {}", go_err(&e))))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| Fail::error(e.to_string()))?;
    let plans = doc
        .get("resourcePlans")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let plans = secret::decrypt_tree(&plans, crypter).map_err(Fail::error)?;
    let mut entries = BTreeMap::new();
    for (urn, p) in plans.as_object().into_iter().flatten() {
        let goal = p.get("goal").filter(|g| !g.is_null()).map(|g| Goal {
            input: Diff::from_json(g.get("inputDiff")),
            output: Diff::from_json(g.get("outputDiff")),
        });
        let ops = fields::strings(p, "steps").into();
        entries.insert(urn.clone(), Entry { goal, ops });
    }
    Ok(Plan { entries })
}

impl Plan {
    /// A fresh copy for one engine pass (the steps are consumed as they are checked).
    pub fn checker(&self) -> Plan {
        self.clone()
    }

    /// A resource's new inputs against its goal (`checkGoal`; `checkMissingPlan` for a
    /// resource the plan does not name).
    pub fn check_goal(
        &self,
        urn: &str,
        old_inputs: Option<&Map<String, Value>>,
        new_inputs: &Map<String, Value>,
    ) -> std::result::Result<(), String> {
        let empty = Map::new();
        let verdict = match self.entries.get(urn) {
            None => match old_inputs {
                None => Ok(()),
                Some(old) => check_diff(old, new_inputs, &Diff::default()),
            },
            Some(Entry { goal: None, .. }) => Err("resource unexpectedly not deleted".into()),
            Some(Entry { goal: Some(g), .. }) => {
                check_diff(old_inputs.unwrap_or(&empty), new_inputs, &g.input)
            }
        };
        verdict.map_err(|e| format!("resource {urn} violates plan: {e}"))
    }

    /// A step against the resource's next planned step (`ConstrainedTo`).
    pub fn check_step(&mut self, urn: &str, op: &str) -> std::result::Result<(), String> {
        match self.entries.get_mut(urn) {
            Some(e) => {
                let Some(constraint) = e.ops.pop_front() else {
                    return Err(format!(
                        "{op} is not allowed by the plan: no more steps were expected for this resource"
                    ));
                };
                if constrained_to(op, &constraint) {
                    Ok(())
                } else {
                    Err(format!(
                        "{op} is not allowed by the plan: this resource is constrained to {constraint}"
                    ))
                }
            }
            None if constrained_to(op, "same") => Ok(()),
            None => Err(format!(
                "{op} is not allowed by the plan: no steps were expected for this resource"
            )),
        }
    }

    /// Registered outputs (the stack's) against the goal's output diff. The real CLI
    /// fails the update without printing this reason.
    pub fn check_outputs(
        &self,
        urn: &str,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
    ) -> std::result::Result<(), String> {
        match self.entries.get(urn) {
            None => Err(format!("no plan for resource {urn}")),
            Some(Entry { goal: None, .. }) => Err("resource plan goal must be set".into()),
            Some(Entry { goal: Some(g), .. }) => {
                check_diff(old, new, &g.output).map_err(|e| format!("resource violates plan: {e}"))
            }
        }
    }
}

/// `ConstrainedTo` (`pkg/resource/deploy/step.go`): a planned create or update also
/// allows a same, a replace allows same and update too; anything else only itself.
fn constrained_to(op: &str, constraint: &str) -> bool {
    match constraint {
        "create" => matches!(op, "same" | "create"),
        "update" => matches!(op, "same" | "update"),
        "replace" | "create-replacement" | "delete-replaced" => {
            matches!(op, "same" | "update") || op == constraint
        }
        other => op == other,
    }
}

fn is_unknown(v: &Value) -> bool {
    v.as_str() == Some(UNKNOWN)
}

/// `DeepEqualsIncludeUnknowns`: an unknown equals anything; a secret only a secret.
fn deep_eq(a: &Value, b: &Value) -> bool {
    if is_unknown(a) || is_unknown(b) {
        return true;
    }
    match (secret::inner(a), secret::inner(b)) {
        (Some(x), Some(y)) => return deep_eq(x, y),
        (Some(_), None) | (None, Some(_)) => return false,
        (None, None) => {}
    }
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| deep_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            let keys = |m: &Map<String, Value>| -> Vec<String> {
                m.iter()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, _)| k.clone())
                    .collect()
            };
            keys(x) == keys(y) && x.iter().all(|(k, v)| v.is_null() || deep_eq(v, &y[k]))
        }
        _ => a == b,
    }
}

/// A property value as Go's `PropertyValue.String()` prints it: `{echo hi}`,
/// `{map[PW:{[secret]}]}`.
fn prop_string(v: &Value) -> String {
    if is_unknown(v) {
        return "output<string>{}".into();
    }
    format!("{{{}}}", go_value(v))
}

fn go_value(v: &Value) -> String {
    if secret::is_secret(v) {
        return "[secret]".into();
    }
    match v {
        Value::Null => "<nil>".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(prop_string).collect::<Vec<_>>().join(" ")
        ),
        Value::Object(o) => format!(
            "map[{}]",
            o.iter()
                .map(|(k, v)| format!("{k}:{}", prop_string(v)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
        other => other.to_string(),
    }
}

/// `PlanDiff.MakeError`: `<planned op><actual op><key>[<value>]`.
fn make_error(d: &Diff, key: &str, actual_op: &str, actual: Option<&Value>) -> String {
    let (expected_op, expected) = if let Some(v) = d.adds.get(key) {
        ("+", Some(v))
    } else if let Some(v) = d.updates.get(key) {
        ("~", Some(v))
    } else if d.deletes.iter().any(|k| k == key) {
        ("-", None)
    } else {
        ("=", None)
    };
    let shown = match (expected, actual) {
        (Some(e), Some(a)) => format!("[{}!={}]", prop_string(e), prop_string(a)),
        (None, Some(a)) => format!("[{}]", prop_string(a)),
        (Some(e), None) => format!("[{}]", prop_string(e)),
        (None, None) => String::new(),
    };
    format!("{expected_op}{actual_op}{key}{shown}")
}

/// `checkDiff` (`pkg/resource/deploy/plan.go`): the change from `olds` to `news` must
/// stay within `plan`. The error lists every offending key, sorted.
fn check_diff(
    olds: &Map<String, Value>,
    news: &Map<String, Value>,
    plan: &Diff,
) -> std::result::Result<(), String> {
    let diff = Diff::between(olds, news);
    let mut changes: Vec<String> = Vec::new();
    for (k, actual) in &diff.adds {
        match plan.adds.get(k) {
            Some(e) if deep_eq(e, actual) => {}
            _ => changes.push(make_error(plan, k, "+", Some(actual))),
        }
    }
    for k in &diff.deletes {
        if plan.deletes.contains(k) {
            continue;
        }
        match plan.updates.get(k) {
            Some(e) if is_unknown(e) => {}
            _ => changes.push(make_error(plan, k, "-", None)),
        }
    }
    for (k, actual) in &diff.updates {
        let ok = match (plan.updates.get(k), plan.adds.get(k)) {
            (Some(e), _) | (None, Some(e)) => deep_eq(e, actual),
            (None, None) => false,
        };
        if !ok {
            changes.push(make_error(plan, k, "~", Some(actual)));
        }
    }
    for (k, expected) in &plan.adds {
        if diff.adds.contains_key(k) || diff.updates.contains_key(k) {
            continue;
        }
        match news.get(k).filter(|v| !v.is_null()) {
            Some(actual) if !deep_eq(expected, actual) => {
                changes.push(make_error(plan, k, "=", Some(actual)))
            }
            Some(_) => {}
            None if !is_unknown(expected) => changes.push(make_error(plan, k, "-", None)),
            None => {}
        }
    }
    for (k, expected) in &plan.updates {
        if diff.updates.contains_key(k) {
            continue;
        }
        if let Some(actual) = diff.adds.get(k) {
            changes.push(make_error(plan, k, "+", Some(actual)));
        } else if let Some(actual) = news.get(k).filter(|v| !v.is_null()) {
            if !deep_eq(expected, actual) {
                changes.push(make_error(plan, k, "=", Some(actual)));
            }
        } else if !is_unknown(expected) {
            changes.push(make_error(plan, k, "-", None));
        }
    }
    for k in &plan.deletes {
        if diff.deletes.contains(k) {
            continue;
        }
        if let Some(actual) = diff.adds.get(k) {
            changes.push(make_error(plan, k, "+", Some(actual)));
        } else if let Some(actual) = diff.updates.get(k) {
            changes.push(make_error(plan, k, "~", Some(actual)));
        } else if let Some(actual) = news.get(k).filter(|v| !v.is_null()) {
            changes.push(make_error(plan, k, "=", Some(actual)));
        }
    }
    if changes.is_empty() {
        return Ok(());
    }
    changes.sort();
    Err(format!("properties changed: {}", changes.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn diff_and_messages_as_pulumi_words_them() {
        let old = m(json!({"create": "echo hello"}));
        let same = Diff::default();
        assert_eq!(check_diff(&old, &old, &same), Ok(()));
        assert_eq!(
            check_diff(&old, &m(json!({"create": "echo changed hello"})), &same),
            Err("properties changed: =~create[{echo changed hello}]".into())
        );
        let env = m(json!({"environment": {"PW": secret::wrap(json!("other"))}}));
        let planned = m(json!({"environment": {"PW": secret::wrap(json!("topsecret"))}}));
        assert_eq!(
            check_diff(&planned, &env, &same),
            Err("properties changed: =~environment[{map[PW:{[secret]}]}]".into())
        );
        // A planned add accepts the same value already there (a plan applied twice).
        let add = Diff::between(&Map::new(), &old);
        assert_eq!(check_diff(&Map::new(), &old, &add), Ok(()));
        assert_eq!(check_diff(&old, &old, &add), Ok(()));
        assert_eq!(
            check_diff(&Map::new(), &m(json!({"create": "x"})), &add),
            Err("properties changed: ++create[{echo hello}!={x}]".into())
        );
        // An unknown in the plan accepts any value.
        let unknown = m(json!({"stdout": UNKNOWN}));
        let add = Diff::between(&Map::new(), &unknown);
        assert_eq!(
            check_diff(&Map::new(), &m(json!({"stdout": "hi"})), &add),
            Ok(())
        );
    }

    #[test]
    fn steps_are_constrained_and_consumed() {
        let mut p = Plan::default();
        p.entries.insert(
            "u".into(),
            Entry {
                goal: Some(Goal {
                    input: Diff::default(),
                    output: Diff::default(),
                }),
                ops: VecDeque::from(vec!["create".to_string()]),
            },
        );
        let mut c = p.checker();
        assert_eq!(c.check_step("u", "same"), Ok(()));
        assert!(
            c.check_step("u", "same")
                .unwrap_err()
                .contains("no more steps were expected")
        );
        let mut c = p.checker();
        assert_eq!(
            c.check_step("u", "delete"),
            Err("delete is not allowed by the plan: this resource is constrained to create".into())
        );
        assert_eq!(c.check_step("other", "same"), Ok(()));
        assert_eq!(
            c.check_step("other", "create"),
            Err(
                "create is not allowed by the plan: no steps were expected for this resource"
                    .into()
            )
        );
    }
}
