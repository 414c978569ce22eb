//! Server-side apply as kube-apiserver models it: each field manager owns the leaf
//! fields it applied, a field another manager owns with another value is a 409 conflict
//! (unless forced), and a field a manager no longer applies goes when nobody else owns it.

use super::*;

impl FakeApi {
    pub(super) fn apply(
        &mut self,
        request: &Request,
        key: String,
        kind: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Response {
        if request.content_type.as_deref() != Some(APPLY_PATCH) {
            return status(
                415,
                "UnsupportedMediaType",
                "the fake only supports apply patches",
                None,
            );
        }
        if request
            .query
            .get("fieldManager")
            .is_none_or(|m| m.is_empty())
        {
            return invalid("PATCH request must have fieldManager");
        }
        let Ok(Value::Object(mut applied)) = serde_json::from_str::<Value>(&request.body) else {
            return invalid("the apply patch is not a JSON object");
        };
        if applied.get("apiVersion") != Some(&json!("v1"))
            || applied.get("kind") != Some(&json!(kind))
        {
            return invalid(&format!(
                "the apply patch must have apiVersion v1 and kind {kind}"
            ));
        }
        let meta = applied.entry("metadata").or_insert_with(|| json!({}));
        if meta.get("name") != Some(&json!(name)) {
            return invalid("metadata.name does not match the URL");
        }
        if let Some(ns) = namespace {
            match meta.get("namespace") {
                None => meta["namespace"] = json!(ns),
                Some(v) if v == &json!(ns) => {}
                Some(_) => return invalid("metadata.namespace does not match the URL"),
            }
        }
        if kind == "Secret" {
            if let Some(data) = applied.get("data").and_then(Value::as_object) {
                for (data_key, value) in data {
                    if value.as_str().and_then(decode_base64).is_none() {
                        return invalid(&format!("data[{data_key}]: not valid base64"));
                    }
                }
            }
            applied.entry("type").or_insert_with(|| json!("Opaque"));
        }
        let manager = request.query["fieldManager"].clone();
        let force = request.query.get("force").is_some_and(|f| f == "true");
        let applied = Value::Object(applied);
        let wanted = leaves(&applied);
        let existing = self.objects.get(&key).cloned();
        let current = existing.as_ref().map(leaves).unwrap_or_default();
        let mut owners = self.owners.get(&key).cloned().unwrap_or_default();

        // Fields another manager owns with another value.
        let mut conflicts: Vec<(String, Vec<String>)> = Vec::new();
        for (other, (_, fields)) in owners.iter().filter(|(m, _)| **m != manager) {
            for (path, value) in &wanted {
                if fields.contains(path) && current.get(path) != Some(value) {
                    conflicts.push((other.clone(), path.clone()));
                }
            }
        }
        if !conflicts.is_empty() && !force {
            return conflict(&conflicts);
        }
        for (other, path) in &conflicts {
            if let Some((_, fields)) = owners.get_mut(other) {
                fields.remove(path);
            }
        }
        // What this manager applied before and no longer does, and nobody else owns.
        let before = owners
            .get(&manager)
            .map(|(_, fields)| fields.clone())
            .unwrap_or_default();
        let mut object = existing.clone().unwrap_or_else(|| json!({}));
        for path in before.iter().filter(|p| !wanted.contains_key(*p)) {
            if !owners
                .iter()
                .any(|(m, (_, fields))| *m != manager && fields.contains(path))
            {
                remove_path(&mut object, path);
            }
        }
        for (path, value) in &wanted {
            set_path(&mut object, path, value.clone());
        }
        for (field, value) in ["apiVersion", "kind"]
            .iter()
            .zip([&applied["apiVersion"], &applied["kind"]])
        {
            object[*field] = value.clone();
        }
        object["metadata"]["name"] = applied["metadata"]["name"].clone();
        if let Some(ns) = namespace {
            object["metadata"]["namespace"] = json!(ns);
        }
        owners.insert(
            manager,
            ("Apply".to_string(), wanted.keys().cloned().collect()),
        );
        owners.retain(|_, (_, fields)| !fields.is_empty());

        // A no-op apply changes nothing, not even the resourceVersion.
        if let Some(existing) = &existing
            && leaves(existing) == leaves(&object)
            && self.owners.get(&key) == Some(&owners)
        {
            return ok(existing.clone());
        }
        self.owners.insert(key.clone(), owners);
        let created = existing.is_none();
        let stored = self.with_server_fields(object, existing.as_ref(), &key);
        self.objects.insert(key, stored.clone());
        Response {
            status: if created { 201 } else { 200 },
            body: stored,
        }
    }
}

/// The leaf fields of an object a manager can own, by path; not apiVersion, kind,
/// metadata.name, metadata.namespace, nor what the server sets.
pub(super) fn leaves(object: &Value) -> BTreeMap<Vec<String>, Value> {
    fn walk(value: &Value, path: &mut Vec<String>, out: &mut BTreeMap<Vec<String>, Value>) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (k, v) in map {
                    path.push(k.clone());
                    walk(v, path, out);
                    path.pop();
                }
            }
            _ => {
                out.insert(path.clone(), value.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(object, &mut Vec::new(), &mut out);
    out.retain(|path, _| {
        let first = path[0].as_str();
        let meta = |field: &str| first == "metadata" && path.get(1).is_some_and(|f| f == field);
        !matches!(first, "apiVersion" | "kind" | "status")
            && ![
                "name",
                "namespace",
                "uid",
                "resourceVersion",
                "creationTimestamp",
                "managedFields",
            ]
            .iter()
            .any(|f| meta(f))
    });
    out
}

fn set_path(object: &mut Value, path: &[String], value: Value) {
    let mut at = object;
    for part in &path[..path.len() - 1] {
        if !at[part.as_str()].is_object() {
            at[part.as_str()] = json!({});
        }
        at = &mut at[part.as_str()];
    }
    at[path[path.len() - 1].as_str()] = value;
}

fn remove_path(object: &mut Value, path: &[String]) {
    let mut at = object;
    for part in &path[..path.len() - 1] {
        match at.get_mut(part.as_str()) {
            Some(next) => at = next,
            None => return,
        }
    }
    if let Some(map) = at.as_object_mut() {
        map.remove(&path[path.len() - 1]);
    }
}

/// `fieldsV1` as the real server writes it: `{"f:data": {"f:key": {}}, ...}`.
pub(super) fn fields_v1(fields: &BTreeSet<Vec<String>>) -> Value {
    let mut out = json!({});
    for path in fields {
        let prefixed: Vec<String> = path.iter().map(|p| format!("f:{p}")).collect();
        set_path(&mut out, &prefixed, json!({}));
    }
    out
}

/// 409 as the real server words it: `Apply failed with 1 conflict: conflict with
/// "ops-console" using v1: .data.adminpass`, or for more, one line per field
/// (`Apply failed with 2 conflicts: conflicts with "ops-console" using v1:\n- .data.a\n-
/// .data.b`), and one cause per field in `details.causes`.
fn conflict(conflicts: &[(String, Vec<String>)]) -> Response {
    let field = |path: &Vec<String>| format!(".{}", path.join("."));
    let message = match conflicts {
        [(manager, path)] => format!(
            "Apply failed with 1 conflict: conflict with \"{manager}\" using v1: {}",
            field(path)
        ),
        _ => {
            let mut by_manager: BTreeMap<&str, Vec<String>> = BTreeMap::new();
            for (manager, path) in conflicts {
                by_manager.entry(manager).or_default().push(field(path));
            }
            let groups: Vec<String> = by_manager
                .iter()
                .map(|(manager, fields)| match fields.as_slice() {
                    [one] => format!("conflict with \"{manager}\" using v1: {one}"),
                    _ => format!(
                        "conflicts with \"{manager}\" using v1:\n- {}",
                        fields.join("\n- ")
                    ),
                })
                .collect();
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                groups.join("\n")
            )
        }
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(manager, path)| {
            json!({
                "reason": "FieldManagerConflict",
                "message": format!("conflict with \"{manager}\" using v1"),
                "field": field(path),
            })
        })
        .collect();
    status(409, "Conflict", &message, Some(json!({"causes": causes})))
}
