//! A fake Kubernetes API server for tests: namespaces and secrets, in memory.
//!
//! It speaks just enough HTTP/1.1 (plain, no TLS) on 127.0.0.1 for what
//! strata does with `kube`: server-side apply (`PATCH` with
//! `application/apply-patch+yaml`) of Secrets, `POST` of Namespaces, `GET` and
//! `DELETE` of both, and lists of both. Server-side apply is modelled as the real
//! API server does it (checked against kube-apiserver 1.34 by
//! tests/integration/real_kube.rs): each field manager owns the leaf fields it
//! applied (listed in `metadata.managedFields`); a field another manager owns with
//! another value is a 409 conflict naming it, unless `force=true` moves it over;
//! a field the manager applied before and no longer applies is removed when nobody
//! else owns it; a no-op apply keeps the `resourceVersion`. An apply into a
//! namespace that does not exist is a 404 about the namespace; a `GET` there is a
//! 404 about the Secret. [`FakeApi::edit`] changes fields as another manager's
//! update (a `kubectl edit`) would.
//!
//! ```ignore
//! let kube = FakeKube::start();
//! kube.write_kubeconfig(&dir.join("kubeconfig"))?;
//! // run strata with KUBECONFIG=<dir>/kubeconfig ...
//! assert_eq!(kube.secret_data("monitoring", "strata-secrets").unwrap()["adminpass"], "pw");
//! ```
//!
//! [`FakeApi`] is the server without the socket; unit tests drive it through
//! a `tower_test` mock.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;

use serde_json::{Value, json};

pub const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// One request as the server saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    /// The path without the query, e.g. `/api/v1/namespaces/monitoring`.
    pub path: String,
    /// Decoded query parameters.
    pub query: BTreeMap<String, String>,
    pub content_type: Option<String>,
    pub body: String,
}

impl Request {
    pub fn new(method: &str, path_and_query: &str, content_type: Option<&str>, body: &str) -> Self {
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, parse_query(query)),
            None => (path_and_query, BTreeMap::new()),
        };
        Request {
            method: method.to_string(),
            path: path.to_string(),
            query,
            content_type: content_type.map(str::to_string),
            body: body.to_string(),
        }
    }

    /// `METHOD /path`, handy for asserting a sequence of requests.
    pub fn line(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

/// An HTTP response: status code and JSON body.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub body: Value,
}

/// A failure injected with [`FakeApi::fail_when`].
#[derive(Clone, Debug)]
struct Failure {
    method: String,
    path_contains: String,
    status: u16,
}

/// Field manager → (operation, the leaf field paths it owns).
type Owners = BTreeMap<String, (String, BTreeSet<Vec<String>>)>;

/// The in-memory API server.
#[derive(Debug, Default)]
pub struct FakeApi {
    /// `namespaces/<ns>` and `namespaces/<ns>/secrets/<name>` → stored object.
    objects: BTreeMap<String, Value>,
    /// Who owns which leaf fields of each object, by the same keys: manager →
    /// (operation, field paths).
    owners: BTreeMap<String, Owners>,
    requests: Vec<Request>,
    failures: Vec<Failure>,
    next_version: u64,
    /// When set, every request must carry `Authorization: Bearer <token>` (401 else),
    /// as a real API server authenticates.
    token: Option<String>,
}

impl FakeApi {
    pub fn new() -> Self {
        FakeApi {
            next_version: 1,
            ..Default::default()
        }
    }

    /// Every object, keyed `namespaces/<ns>` or `namespaces/<ns>/secrets/<name>`.
    pub fn objects(&self) -> BTreeMap<String, Value> {
        self.objects.clone()
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.clone()
    }

    /// Makes every later request whose method is `method` and whose path
    /// contains `path_contains` fail with `status`.
    pub fn fail_when(&mut self, method: &str, path_contains: &str, status: u16) {
        self.failures.push(Failure {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            status,
        });
    }

    /// Requires `Authorization: Bearer <token>` on every later request.
    pub fn require_token(&mut self, token: &str) {
        self.token = Some(token.to_string());
    }

    /// Stores an object as if someone else had created it.
    pub fn insert(&mut self, object: Value) {
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let key = match object["kind"].as_str() {
            Some("Namespace") => format!("namespaces/{name}"),
            _ => {
                let ns = object["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or("default");
                format!("namespaces/{ns}/secrets/{name}")
            }
        };
        let stored = self.with_server_fields(object, None, &key);
        self.objects.insert(key, stored);
    }

    /// Sets the Secret's `data[data_key]` (base64-encoded here) as an update by
    /// `manager` would (e.g. `kubectl edit`): that manager then owns the field.
    pub fn edit(
        &mut self,
        namespace: &str,
        name: &str,
        data_key: &str,
        value: &str,
        manager: &str,
    ) {
        let key = format!("namespaces/{namespace}/secrets/{name}");
        let mut object = self.objects.get(&key).cloned().expect("the Secret to edit");
        object["data"][data_key] = json!(encode_base64(value.as_bytes()));
        let path = vec!["data".to_string(), data_key.to_string()];
        let owners = self.owners.entry(key.clone()).or_default();
        for (_, fields) in owners.values_mut() {
            fields.remove(&path);
        }
        owners
            .entry(manager.to_string())
            .or_insert_with(|| ("Update".to_string(), BTreeSet::new()))
            .1
            .insert(path);
        owners.retain(|_, (_, fields)| !fields.is_empty());
        let stored = self.with_server_fields(object, None, &key);
        self.objects.insert(key, stored);
    }

    pub fn handle(&mut self, request: Request) -> Response {
        self.requests.push(request.clone());
        if let Some(failure) = self.failures.iter().find(|f| {
            f.method.eq_ignore_ascii_case(&request.method)
                && request.path.contains(&f.path_contains)
        }) {
            if failure.status == 403 {
                return forbidden(&request);
            }
            return status(failure.status, "InternalError", "injected failure", None);
        }

        let parts: Vec<&str> = request.path.trim_matches('/').split('/').collect();
        match parts.as_slice() {
            ["api", "v1", "namespaces"] if request.method == "GET" => {
                self.list("NamespaceList", |key| !key.contains("/secrets/"))
            }
            ["api", "v1", "namespaces"] if request.method == "POST" => {
                self.create_namespace(&request)
            }
            ["api", "v1", "namespaces", ns] => {
                let key = format!("namespaces/{ns}");
                self.object(&request, key, "Namespace", "namespaces", ns, None)
            }
            ["api", "v1", "namespaces", ns, "secrets"] if request.method == "GET" => {
                let prefix = format!("namespaces/{ns}/secrets/");
                self.list("SecretList", |key| key.starts_with(&prefix))
            }
            ["api", "v1", "namespaces", ns, "secrets", name] => {
                // Only a write is refused for the namespace; a read just finds nothing.
                if request.method != "GET"
                    && !self.objects.contains_key(&format!("namespaces/{ns}"))
                {
                    return not_found("namespaces", ns);
                }
                let key = format!("namespaces/{ns}/secrets/{name}");
                self.object(&request, key, "Secret", "secrets", name, Some(ns))
            }
            _ => status(
                404,
                "NotFound",
                "the server could not find the requested resource",
                None,
            ),
        }
    }

    fn list(&self, kind: &str, keep: impl Fn(&str) -> bool) -> Response {
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(key, _)| keep(key))
            .map(|(_, object)| object.clone())
            .collect();
        Response {
            status: 200,
            body: json!({
                "kind": kind,
                "apiVersion": "v1",
                "metadata": {"resourceVersion": self.next_version.to_string()},
                "items": items,
            }),
        }
    }

    fn object(
        &mut self,
        request: &Request,
        key: String,
        kind: &str,
        plural: &str,
        name: &str,
        namespace: Option<&str>,
    ) -> Response {
        match request.method.as_str() {
            "GET" => match self.objects.get(&key) {
                Some(object) => ok(object.clone()),
                None => not_found(plural, name),
            },
            "DELETE" => {
                self.owners.remove(&key);
                match self.objects.remove(&key) {
                    Some(object) => ok(object),
                    None => not_found(plural, name),
                }
            }
            "PATCH" if kind == "Secret" => self.apply(request, key, kind, name, namespace),
            "PATCH" => status(
                405,
                "MethodNotAllowed",
                "the fake applies Secrets only",
                None,
            ),
            _ => status(405, "MethodNotAllowed", "method not allowed", None),
        }
    }

    fn apply(
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

    /// `POST /api/v1/namespaces`: 201, or 409 when it exists.
    fn create_namespace(&mut self, request: &Request) -> Response {
        let Ok(mut object) = serde_json::from_str::<Value>(&request.body) else {
            return invalid("the body is not a JSON object");
        };
        let Some(name) = object["metadata"]["name"].as_str().map(str::to_string) else {
            return invalid("metadata.name: Required value");
        };
        let key = format!("namespaces/{name}");
        if self.objects.contains_key(&key) {
            return status(
                409,
                "AlreadyExists",
                &format!("namespaces \"{name}\" already exists"),
                Some(json!({"name": name, "kind": "namespaces"})),
            );
        }
        // What the real server adds to every namespace.
        object["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
        if let Some(manager) = request.query.get("fieldManager") {
            let fields = leaves(&object).into_keys().collect();
            self.owners
                .entry(key.clone())
                .or_default()
                .insert(manager.clone(), ("Update".to_string(), fields));
        }
        // The creator owns the label, not the finalizer the server adds.
        object["spec"] = json!({"finalizers": ["kubernetes"]});
        let stored = self.with_server_fields(object, None, &key);
        self.objects.insert(key, stored.clone());
        Response {
            status: 201,
            body: stored,
        }
    }

    /// The applied object plus what the server owns: uid, creation time and a
    /// fresh resourceVersion (uid and creation time kept from `existing`).
    fn with_server_fields(
        &mut self,
        mut object: Value,
        existing: Option<&Value>,
        key: &str,
    ) -> Value {
        let version = self.next_version;
        self.next_version += 1;
        let meta = &mut object["metadata"];
        let keep = |field: &str, fallback: Value| {
            existing
                .and_then(|e| e["metadata"].get(field).cloned())
                .unwrap_or(fallback)
        };
        meta["uid"] = keep(
            "uid",
            json!(format!("00000000-0000-0000-0000-{version:012}")),
        );
        meta["creationTimestamp"] = keep("creationTimestamp", json!("2024-01-01T00:00:00Z"));
        meta["resourceVersion"] = json!(version.to_string());
        if object["kind"] == json!("Namespace") {
            object["status"] = json!({"phase": "Active"});
        }
        let managed: Vec<Value> = self
            .owners
            .get(key)
            .into_iter()
            .flatten()
            .map(|(manager, (operation, fields))| {
                json!({
                    "manager": manager,
                    "operation": operation,
                    "apiVersion": "v1",
                    "time": "2024-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": fields_v1(fields),
                })
            })
            .collect();
        if managed.is_empty() {
            if let Some(meta) = object["metadata"].as_object_mut() {
                meta.remove("managedFields");
            }
        } else {
            object["metadata"]["managedFields"] = json!(managed);
        }
        object
    }
}

/// The leaf fields of an object a manager can own, by path; not apiVersion, kind,
/// metadata.name, metadata.namespace, nor what the server sets.
fn leaves(object: &Value) -> BTreeMap<Vec<String>, Value> {
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
fn fields_v1(fields: &BTreeSet<Vec<String>>) -> Value {
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

/// Standard base64 with padding.
pub fn encode_base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            out.push(if i <= chunk.len() {
                A[((n >> (18 - 6 * i)) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    out
}

/// 403 as RBAC words it, for the user `fake`.
fn forbidden(request: &Request) -> Response {
    let verb = match request.method.as_str() {
        "GET" => "get",
        "POST" => "create",
        "PUT" => "update",
        "DELETE" => "delete",
        _ => "patch",
    };
    let parts: Vec<&str> = request.path.trim_matches('/').split('/').collect();
    let (resource, name, namespace) = match parts.as_slice() {
        ["api", "v1", "namespaces", ns, resource, name] => (*resource, *name, Some(*ns)),
        ["api", "v1", "namespaces", ns, resource] => (*resource, "", Some(*ns)),
        ["api", "v1", "namespaces", name] => ("namespaces", *name, None),
        _ => ("namespaces", "", None),
    };
    let place = match namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    let subject = if name.is_empty() {
        format!("{resource} is forbidden")
    } else {
        format!("{resource} \"{name}\" is forbidden")
    };
    status(
        403,
        "Forbidden",
        &format!(
            "{subject}: User \"fake\" cannot {verb} resource \"{resource}\" in API group \"\" {place}"
        ),
        Some(json!({"name": name, "kind": resource})),
    )
}

fn ok(body: Value) -> Response {
    Response { status: 200, body }
}

fn not_found(plural: &str, name: &str) -> Response {
    status(
        404,
        "NotFound",
        &format!("{plural} \"{name}\" not found"),
        Some(json!({"name": name, "kind": plural})),
    )
}

fn invalid(message: &str) -> Response {
    status(400, "BadRequest", message, None)
}

fn status(code: u16, reason: &str, message: &str, details: Option<Value>) -> Response {
    let mut body = json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    });
    if let Some(details) = details {
        body["details"] = details;
    }
    Response { status: code, body }
}

/// The fake served over HTTP/1.1 on 127.0.0.1. Stops accepting when dropped.
pub struct FakeKube {
    pub addr: SocketAddr,
    api: Arc<Mutex<FakeApi>>,
    stop: Arc<AtomicBool>,
}

impl FakeKube {
    /// Binds a free port on 127.0.0.1 and serves in background threads.
    pub fn start() -> FakeKube {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let api = Arc::new(Mutex::new(FakeApi::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (thread_api, thread_stop) = (api.clone(), stop.clone());
        thread::spawn(move || {
            for stream in listener.incoming() {
                if thread_stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let api = thread_api.clone();
                thread::spawn(move || {
                    let _ = serve_connection(stream, &api);
                });
            }
        });
        FakeKube { addr, api, stop }
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The in-memory server, to inspect or to prepare (e.g. `fail_when`).
    pub fn api(&self) -> MutexGuard<'_, FakeApi> {
        lock(&self.api)
    }

    /// Every stored object, keyed `namespaces/<ns>` or
    /// `namespaces/<ns>/secrets/<name>`.
    pub fn objects(&self) -> BTreeMap<String, Value> {
        self.api().objects()
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.api().requests()
    }

    /// The names of the stored namespaces.
    pub fn namespaces(&self) -> Vec<String> {
        self.objects()
            .keys()
            .filter(|key| !key.contains("/secrets/"))
            .filter_map(|key| key.strip_prefix("namespaces/").map(str::to_string))
            .collect()
    }

    /// The stored Secret object, if any.
    pub fn secret(&self, namespace: &str, name: &str) -> Option<Value> {
        self.objects()
            .remove(&format!("namespaces/{namespace}/secrets/{name}"))
    }

    /// The Secret's `data`, base64-decoded.
    pub fn secret_data(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, String>> {
        let secret = self.secret(namespace, name)?;
        let data = secret
            .get("data")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        Some(
            data.iter()
                .map(|(k, v)| {
                    let bytes = v.as_str().and_then(decode_base64).unwrap_or_default();
                    (k.clone(), String::from_utf8_lossy(&bytes).into_owned())
                })
                .collect(),
        )
    }

    /// A kubeconfig whose only context (`fake`) points at this server.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: fake\n  cluster:\n    server: {url}\n\
             users:\n\
             - name: fake\n  user:\n    token: fake-token\n\
             contexts:\n\
             - name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\n\
             current-context: fake\n\
             preferences: {{}}\n",
            url = self.url()
        )
    }

    /// A kubeconfig whose user authenticates through an exec credential plugin, as
    /// EKS, GKE and AKS kubeconfigs do: `plugin` must print an `ExecCredential`.
    pub fn exec_kubeconfig(&self, plugin: &Path) -> String {
        format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: fake\n  cluster:\n    server: {url}\n\
             users:\n\
             - name: fake\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      command: {plugin}\n      args: [token, --cluster, fake]\n      interactiveMode: IfAvailable\n\
             contexts:\n\
             - name: fake\n  context:\n    cluster: fake\n    user: fake\n\
             current-context: fake\n",
            url = self.url(),
            plugin = plugin.display()
        )
    }

    pub fn write_kubeconfig(&self, path: &Path) -> io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(path, self.kubeconfig())
    }
}

impl Drop for FakeKube {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

fn lock(api: &Mutex<FakeApi>) -> MutexGuard<'_, FakeApi> {
    api.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Serves requests on one keep-alive connection until the client closes it.
fn serve_connection(stream: TcpStream, api: &Mutex<FakeApi>) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    loop {
        let Some(request_line) = read_line(&mut reader)? else {
            return Ok(());
        };
        if request_line.is_empty() {
            continue;
        }
        let mut words = request_line.split(' ');
        let method = words.next().unwrap_or_default().to_string();
        let target = words.next().unwrap_or_default().to_string();

        let mut headers = BTreeMap::new();
        loop {
            let Some(line) = read_line(&mut reader)? else {
                return Ok(());
            };
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
            }
        }

        let body = if headers
            .get("transfer-encoding")
            .is_some_and(|v| v.contains("chunked"))
        {
            read_chunked(&mut reader)?
        } else {
            let length = headers
                .get("content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            reader.read_exact(&mut body)?;
            body
        };

        let request = Request::new(
            &method,
            &target,
            headers.get("content-type").map(String::as_str),
            &String::from_utf8_lossy(&body),
        );
        let response = {
            let mut api = lock(api);
            let wanted = api.token.clone().map(|t| format!("Bearer {t}"));
            if wanted.is_some() && headers.get("authorization") != wanted.as_ref() {
                status(401, "Unauthorized", "Unauthorized", None)
            } else {
                api.handle(request)
            }
        };
        let body = response.body.to_string();
        write!(
            writer,
            "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{}",
            response.status,
            reason_phrase(response.status),
            body.len(),
            body
        )?;
        writer.flush()?;
        if headers
            .get("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"))
        {
            return Ok(());
        }
    }
}

/// One line without its line ending; `None` at the end of the stream.
fn read_line(reader: &mut impl BufRead) -> io::Result<Option<String>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    line.truncate(line.trim_end().len());
    Ok(Some(line))
}

fn read_chunked(reader: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size_line = String::new();
        reader.read_line(&mut size_line)?;
        let size_text = size_line.trim().split(';').next().unwrap_or_default();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
        if size == 0 {
            // Trailers, then the final empty line.
            while read_line(reader)?.is_some_and(|line| !line.is_empty()) {}
            return Ok(body);
        }
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        chunk.truncate(size);
        body.extend(chunk);
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        405 => "Method Not Allowed",
        415 => "Unsupported Media Type",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 with padding, as Kubernetes uses for Secret data.
pub fn decode_base64(text: &str) -> Option<Vec<u8>> {
    fn value(c: u8) -> Option<u32> {
        match c {
            b'A'..=b'Z' => Some(u32::from(c - b'A')),
            b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
            b'+' => Some(62),
            b'/' => Some(63),
            _ => None,
        }
    }
    let bytes = text.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let mut out = Vec::with_capacity(bytes.len() / 4 * 3);
    for chunk in bytes.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if pad > 2 {
            return None;
        }
        let mut n = 0u32;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | value(c)?;
        }
        n <<= 6 * pad as u32;
        let decoded = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&decoded[..3 - pad]);
    }
    Some(out)
}
