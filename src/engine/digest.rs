//! What a preview found: Pulumi's change summary and the resources it would change, from
//! `pulumi preview --json` (one PreviewDigest document at the end, `display/json.go`) or,
//! when `PULUMI_ENABLE_STREAMING_JSON_PREVIEW` is set, from the streamed engine events.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

/// The operations that change something, in the order people read them.
pub const CHANGING: [&str; 4] = ["create", "update", "delete", "replace"];

/// The changes of one project's preview.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Changes {
    /// Pulumi's `changeSummary`: operation → count (`create`, `update`, `same`, …).
    pub counts: BTreeMap<String, u64>,
    /// The resources that would change: (operation, URN), in Pulumi's order.
    pub steps: Vec<(String, String)>,
}

impl Changes {
    pub fn count(&self, op: &str) -> u64 {
        self.counts.get(op).copied().unwrap_or(0)
    }

    /// True when the preview would create, update, delete, replace or import anything
    /// (an import takes a resource under the stack's management: a change too).
    pub fn any(&self) -> bool {
        CHANGING
            .iter()
            .chain(&["import", "import-replacement"])
            .any(|op| self.count(op) > 0)
    }

    /// `+2 ~1 -0 ±0`.
    pub fn short(&self) -> String {
        format!(
            "+{} ~{} -{} ±{}",
            self.count("create"),
            self.count("update"),
            self.count("delete"),
            self.count("replace")
        )
    }

    /// Adds a streamed `resourcePreEvent` step (the streaming preview).
    pub fn add_step(&mut self, op: &str, urn: &str) {
        if is_change(op) {
            self.steps.push((op.to_string(), urn.to_string()));
        }
    }
}

/// Steps worth listing: what would change. `create-replacement`/`delete-replaced` are the
/// halves of a `replace`, listed once as the replace.
fn is_change(op: &str) -> bool {
    matches!(
        op,
        "create" | "update" | "delete" | "replace" | "import" | "import-replacement"
    )
}

/// The resource's type and name from its URN (`urn:pulumi:stack::project::type::name`).
pub fn short_urn(urn: &str) -> String {
    let mut parts = urn.split("::");
    let _ = parts.next();
    let _ = parts.next();
    match (parts.next(), parts.next()) {
        (Some(ty), Some(name)) => {
            let ty = ty.rsplit('$').next().unwrap_or(ty);
            format!("{ty} {name}")
        }
        _ => urn.to_string(),
    }
}

/// A parsed PreviewDigest: the changes, and the diagnostics that were errors.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Digest {
    pub changes: Changes,
    pub errors: Vec<String>,
}

/// Parses the PreviewDigest document (`{"config":…, "steps":[…], "diagnostics":[…],
/// "duration":…, "changeSummary":{…}}`): the last such object that starts a line of
/// `text` (Pulumi prints it indented, so only the document itself starts a line),
/// whatever else was printed around it (a wrapper script's lines, an old
/// plugin's warning on stdout). `None` when `text` holds no such object.
pub fn parse(text: &str) -> Option<Digest> {
    let starts = std::iter::once(0).chain(text.match_indices("\n").map(|(i, _)| i + 1));
    let doc = starts
        .filter(|&i| text[i..].starts_with('{'))
        .filter_map(|i| {
            serde_json::Deserializer::from_str(&text[i..])
                .into_iter::<Value>()
                .next()?
                .ok()
        })
        .filter(|v| {
            v.as_object()
                .is_some_and(|o| o.contains_key("steps") || o.contains_key("changeSummary"))
        })
        .last()?;
    let obj = doc.as_object()?;
    let mut changes = Changes::default();
    if let Some(Value::Object(c)) = obj.get("changeSummary") {
        for (op, n) in c {
            if let Some(n) = n.as_u64() {
                changes.counts.insert(op.clone(), n);
            }
        }
    }
    for step in obj
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let op = step.get("op").and_then(Value::as_str).unwrap_or("");
        let urn = step.get("urn").and_then(Value::as_str).unwrap_or("");
        if urn.contains("::pulumi:pulumi:Stack::") {
            continue;
        }
        changes.add_step(op, urn);
    }
    let errors = obj
        .get("diagnostics")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|d| d.get("severity").and_then(Value::as_str) == Some("error"))
        .filter_map(|d| d.get("message").and_then(Value::as_str))
        .map(|m| {
            let m = m.trim();
            m.strip_prefix("error: ").unwrap_or(m).to_string()
        })
        .filter(|m| !m.is_empty())
        .collect();
    Some(Digest { changes, errors })
}

/// The value Pulumi writes for what is not known until the resource is deployed.
pub const UNKNOWN: &str = "04da6b54-80e4-46f7-96ec-b56ff0331ba9";

/// The stack outputs a preview already knows, from the update plan it saved
/// (`preview --save-plan`): the `state` of the `pulumi:pulumi:Stack` resource plan.
/// The PreviewDigest of `preview --json` does not carry them (v3.274.1: the stack's
/// `newState` has no outputs), the plan does. Outputs that hold an unknown (the
/// sentinel, anywhere inside) or a secret (ciphertext of the stack's secrets provider)
/// are left out: nothing can pass them on. `None` when `text` is not a plan.
pub fn planned_outputs(text: &str) -> Option<serde_json::Map<String, Value>> {
    let doc: Value = serde_json::from_str(text).ok()?;
    let plans = doc.get("resourcePlans")?.as_object()?;
    Some(
        stack_state(plans)
            .into_iter()
            .flatten()
            .filter(|(_, v)| known(v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    )
}

/// Every output the stack will have after the update a saved plan records, unknown
/// and secret ones included (their values as the plan has them): what the stack's
/// readers will find. `None` when `text` is not a plan or plans no stack resource.
pub fn planned_output_values(text: &str) -> Option<serde_json::Map<String, Value>> {
    let doc: Value = serde_json::from_str(text).ok()?;
    stack_state(doc.get("resourcePlans")?.as_object()?).cloned()
}

/// The planned state of the plans' `pulumi:pulumi:Stack` resource: its outputs.
fn stack_state(plans: &serde_json::Map<String, Value>) -> Option<&serde_json::Map<String, Value>> {
    plans
        .iter()
        .find(|(urn, _)| urn.contains("::pulumi:pulumi:Stack::"))
        .and_then(|(_, p)| p.get("state"))
        .and_then(Value::as_object)
}

/// The JSON type of a value as a reader sees it (`string`, `number`, `bool`, `list`,
/// `map`, `null`); `None` for a value not known until the update (unknown or secret
/// wrapped: its type is not told).
pub fn value_type(v: &Value) -> Option<&'static str> {
    Some(match v {
        Value::String(s) if s == UNKNOWN => return None,
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Array(_) => "list",
        Value::Object(o) if o.contains_key(crate::engine::SECRET_SIG_KEY) => return None,
        Value::Object(_) => "map",
        Value::Null => "null",
    })
}

/// Neither unknown nor secret, all the way down.
fn known(v: &Value) -> bool {
    match v {
        Value::String(s) => s != UNKNOWN,
        Value::Array(a) => a.iter().all(known),
        Value::Object(o) => !o.contains_key(crate::engine::SECRET_SIG_KEY) && o.values().all(known),
        _ => true,
    }
}

/// The changes a Pulumi update plan file (`preview --save-plan`) records: each resource's
/// planned steps (`resourcePlans.<urn>.steps`: every step's op is appended there, Pulumi
/// v3.274.1 `pkg/resource/deploy/step_generator.go:520`, so a replacement lists its
/// `create-replacement`, `replace` and `delete-replaced` in the order they run) as one
/// operation — `replace` when its steps replace it, else its create, update or delete;
/// `same`, reads and imports are no change of those kinds. `None` when the text is not a
/// plan.
pub fn plan_changes(text: &str) -> Option<Changes> {
    let doc: Value = serde_json::from_str(text).ok()?;
    let plans = match doc.get("resourcePlans") {
        None | Some(Value::Null) => return doc.get("manifest").map(|_| Changes::default()),
        Some(p) => p.as_object()?,
    };
    let mut c = Changes::default();
    for (urn, plan) in plans {
        if urn.contains("::pulumi:pulumi:Stack::") {
            continue;
        }
        let steps: Vec<&str> = plan
            .get("steps")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let replaced = steps
            .iter()
            .any(|s| matches!(*s, "replace" | "create-replacement" | "delete-replaced"));
        let op = if replaced {
            Some("replace")
        } else {
            steps
                .iter()
                .copied()
                .find(|s| matches!(*s, "create" | "update" | "delete"))
        };
        if let Some(op) = op {
            *c.counts.entry(op.to_string()).or_default() += 1;
            c.add_step(op, urn);
        }
    }
    Some(c)
}

/// The same counts as a JSON object, for `project_finished.changes`.
pub fn counts_json(c: &Changes) -> Value {
    Value::Object(
        c.counts
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(*v)))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIGEST: &str = r#"{
    "config": {
        "aws:region": "us-west-2"
    },
    "steps": [
        {
            "op": "same",
            "urn": "urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev",
            "provider": ""
        },
        {
            "op": "create",
            "urn": "urn:pulumi:dev::vpc::aws:ec2/vpc:Vpc::main",
            "provider": "urn:pulumi:dev::vpc::pulumi:providers:aws::default_6_0_0::04da6b54"
        },
        {
            "op": "replace",
            "urn": "urn:pulumi:dev::vpc::eks:index:Cluster$aws:eks/cluster:Cluster::eks",
            "provider": ""
        },
        {
            "op": "create-replacement",
            "urn": "urn:pulumi:dev::vpc::eks:index:Cluster$aws:eks/cluster:Cluster::eks"
        }
    ],
    "diagnostics": [
        {
            "message": "warning: something old\n",
            "severity": "warning"
        }
    ],
    "duration": 1234567,
    "changeSummary": {
        "create": 1,
        "replace": 1,
        "same": 1
    }
}
"#;

    #[test]
    fn parses_the_documented_digest() {
        let d = parse(DIGEST).unwrap();
        assert_eq!(d.changes.count("create"), 1);
        assert_eq!(d.changes.count("replace"), 1);
        assert_eq!(d.changes.count("same"), 1);
        assert_eq!(d.changes.count("delete"), 0);
        assert!(d.changes.any());
        assert_eq!(d.changes.short(), "+1 ~0 -0 ±1");
        assert_eq!(
            d.changes.steps,
            vec![
                (
                    "create".to_string(),
                    "urn:pulumi:dev::vpc::aws:ec2/vpc:Vpc::main".to_string()
                ),
                (
                    "replace".to_string(),
                    "urn:pulumi:dev::vpc::eks:index:Cluster$aws:eks/cluster:Cluster::eks"
                        .to_string()
                ),
            ]
        );
        assert!(d.errors.is_empty());
        assert_eq!(
            short_urn(&d.changes.steps[1].1),
            "aws:eks/cluster:Cluster eks"
        );
    }

    /// A wrapper around the CLI that says lines before and after the document, one of
    /// them JSON: the digest is still read (issue 43, item 7).
    #[test]
    fn the_digest_is_found_among_other_lines() {
        let text =
            format!("wrapper: credentials loaded\n{{\"level\":\"info\"}}\n{DIGEST}wrapper: done\n");
        let d = parse(&text).expect("the digest among other lines");
        assert_eq!(d.changes.count("create"), 1);
        assert_eq!(d.changes.count("replace"), 1);
        assert!(parse("wrapper: credentials loaded\nerror: no creds\n").is_none());
        assert!(parse("{\"level\":\"info\"}\n").is_none());
    }

    #[test]
    fn errors_come_from_error_diagnostics() {
        let text = r#"{"steps": [], "diagnostics": [{"message": "error: boom\n", "severity": "error"}], "changeSummary": {}}"#;
        let d = parse(text).unwrap();
        assert_eq!(d.errors, vec!["boom".to_string()]);
        assert!(!d.changes.any());
    }

    /// An import takes a resource under management: the stack changes (issue 25).
    #[test]
    fn an_import_is_a_change() {
        for op in ["import", "import-replacement"] {
            let d = parse(&format!(
                r#"{{"steps": [{{"op": "{op}", "urn": "urn:pulumi:dev::vpc::aws:ec2/vpc:Vpc::main"}}], "changeSummary": {{"{op}": 1, "same": 2}}}}"#
            ))
            .unwrap();
            assert!(d.changes.any(), "{op}");
        }
    }

    #[test]
    fn planned_outputs_keep_only_known_plain_values() {
        let plan = r#"{"manifest": {}, "config": {}, "resourcePlans": {
            "urn:pulumi:dev::p::command:local:Command::c": {"state": {"stdout": "04da6b54-80e4-46f7-96ec-b56ff0331ba9"}},
            "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev": {"steps": ["create"], "state": {
                "lit": "registry.local/dev", "cfg": "hello", "n": 3,
                "out": "04da6b54-80e4-46f7-96ec-b56ff0331ba9",
                "nested": {"a": ["x", "04da6b54-80e4-46f7-96ec-b56ff0331ba9"]},
                "sec": {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "v1:abc"}}}}}"#;
        let o = planned_outputs(plan).unwrap();
        let names: Vec<&str> = o.keys().map(String::as_str).collect();
        assert_eq!(names, ["cfg", "lit", "n"]);
        assert_eq!(o["lit"], "registry.local/dev");
        assert_eq!(planned_outputs("not json"), None);
        assert_eq!(
            planned_outputs(r#"{"resourcePlans": {}}"#),
            Some(serde_json::Map::new())
        );
        // Every output the stack will have, with the types a reader would see.
        let all = planned_output_values(plan).unwrap();
        let names: Vec<&str> = all.keys().map(String::as_str).collect();
        assert_eq!(names, ["cfg", "lit", "n", "nested", "out", "sec"]);
        let types: Vec<Option<&str>> = names.iter().map(|n| value_type(&all[*n])).collect();
        assert_eq!(
            types,
            [
                Some("string"),
                Some("string"),
                Some("number"),
                Some("map"),
                None,
                None
            ]
        );
        assert_eq!(planned_output_values(r#"{"resourcePlans": {}}"#), None);
    }

    #[test]
    fn no_changes_is_not_a_change() {
        let d = parse(r#"{"steps": [], "changeSummary": {"same": 4}}"#).unwrap();
        assert!(!d.changes.any());
        assert_eq!(d.changes.short(), "+0 ~0 -0 ±0");
    }

    #[test]
    fn text_before_the_document_is_skipped_and_garbage_is_none() {
        let d = parse(&format!("a plugin said hello\n{DIGEST}")).unwrap();
        assert_eq!(d.changes.count("create"), 1);
        assert_eq!(parse("not json"), None);
        assert_eq!(parse("{\"a\": 1}"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn a_plan_file_tells_each_resource_s_change() {
        let text = r#"{"manifest":{"time":"t"},"resourcePlans":{
            "urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev":{"steps":["create"]},
            "urn:pulumi:dev::p::fake:index:Thing::a":{"steps":["same"]},
            "urn:pulumi:dev::p::fake:index:Thing::b":{"steps":["update"]},
            "urn:pulumi:dev::p::fake:index:Thing::c":{"steps":["create-replacement","replace","delete-replaced"]},
            "urn:pulumi:dev::p::fake:index:Thing::d":{"steps":["delete"]}}}"#;
        let c = plan_changes(text).unwrap();
        assert_eq!(c.short(), "+0 ~1 -1 ±1");
        assert_eq!(c.steps.len(), 3);
        assert_eq!(
            plan_changes(r#"{"manifest":{}}"#).unwrap().short(),
            "+0 ~0 -0 ±0"
        );
        assert_eq!(plan_changes("not json"), None);
        assert_eq!(plan_changes("{}"), None);
    }
}
