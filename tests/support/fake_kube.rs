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

#[path = "fake_kube/apply.rs"]
mod apply;
#[path = "fake_kube/http.rs"]
mod http;

use apply::{fields_v1, leaves};
pub use http::FakeKube;
use http::parse_query;

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
