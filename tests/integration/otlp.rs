//! A small OTLP/HTTP receiver for the trace tests: `POST /v1/traces` on 127.0.0.1, the
//! body decoded as an `ExportTraceServiceRequest` with the official protobuf definitions
//! (the `opentelemetry-proto` crate, generated from opentelemetry-proto's .proto files),
//! never matched as text. What is not a valid OTLP/HTTP protobuf request is kept as a
//! problem the tests assert there is none of.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use prost::Message;

/// One span as received, its ids in lowercase hex (the parent empty for a root).
#[derive(Debug, Clone)]
pub struct Span {
    pub trace_id: String,
    pub span_id: String,
    pub parent: String,
    pub name: String,
    /// The resource's `service.name`.
    pub service: String,
    pub attrs: BTreeMap<String, String>,
    pub events: Vec<(String, BTreeMap<String, String>)>,
    /// 0 unset, 1 ok, 2 error (`Status.StatusCode`).
    pub status: i32,
    pub status_message: String,
}

impl Span {
    /// `TRACEPARENT` naming this span (sampled).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }
}

#[derive(Default)]
struct Seen {
    requests: Vec<ExportTraceServiceRequest>,
    /// The headers of each request taken.
    headers: Vec<BTreeMap<String, String>>,
    problems: Vec<String>,
}

pub struct Receiver {
    pub port: u16,
    seen: Arc<Mutex<Seen>>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn text(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn attrs(kvs: &[KeyValue]) -> BTreeMap<String, String> {
    kvs.iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

/// One HTTP request: its method, path, headers (names in lowercase) and body.
struct Request {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// Reads one HTTP/1.1 request: `None` at the end of the connection.
fn request(r: &mut BufReader<TcpStream>) -> Option<Request> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let len: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Request {
        method,
        path,
        headers,
        body,
    })
}

fn serve(stream: TcpStream, seen: Arc<Mutex<Seen>>) {
    let Ok(mut w) = stream.try_clone() else {
        return;
    };
    let mut r = BufReader::new(stream);
    while let Some(Request {
        method,
        path,
        headers,
        body,
    }) = request(&mut r)
    {
        let mut problem = None;
        if method != "POST" || path != "/v1/traces" {
            problem = Some(format!("{method} {path}: not an OTLP/HTTP traces request"));
        } else if headers.get("content-type").map(String::as_str) != Some("application/x-protobuf")
        {
            problem = Some(format!("content-type {:?}", headers.get("content-type")));
        }
        let status = match (problem, ExportTraceServiceRequest::decode(body.as_slice())) {
            (None, Ok(req)) => {
                let mut seen = seen.lock().unwrap();
                seen.requests.push(req);
                seen.headers.push(headers);
                "200 OK"
            }
            (Some(p), _) => {
                seen.lock().unwrap().problems.push(p);
                "400 Bad Request"
            }
            (None, Err(e)) => {
                seen.lock()
                    .unwrap()
                    .problems
                    .push(format!("not an ExportTraceServiceRequest: {e}"));
                "400 Bad Request"
            }
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n"
        );
        if w.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

impl Receiver {
    /// Listens on a free port of 127.0.0.1 until the test process ends.
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(stream, s));
            }
        });
        Receiver { port, seen }
    }

    /// `OTEL_EXPORTER_OTLP_ENDPOINT` for this receiver.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> usize {
        self.seen.lock().unwrap().requests.len()
    }

    /// The headers of every request taken (names in lowercase).
    pub fn headers(&self) -> Vec<BTreeMap<String, String>> {
        self.seen.lock().unwrap().headers.clone()
    }

    pub fn problems(&self) -> Vec<String> {
        self.seen.lock().unwrap().problems.clone()
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<Span> {
        let seen = self.seen.lock().unwrap();
        let mut out = Vec::new();
        for req in &seen.requests {
            for rs in &req.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .map(|r| attrs(&r.attributes))
                    .and_then(|a| a.get("service.name").cloned())
                    .unwrap_or_default();
                for ss in &rs.scope_spans {
                    for s in &ss.spans {
                        out.push(Span {
                            trace_id: hex(&s.trace_id),
                            span_id: hex(&s.span_id),
                            parent: hex(&s.parent_span_id),
                            name: s.name.clone(),
                            service: service.clone(),
                            attrs: attrs(&s.attributes),
                            events: s
                                .events
                                .iter()
                                .map(|e| (e.name.clone(), attrs(&e.attributes)))
                                .collect(),
                            status: s.status.as_ref().map(|st| st.code).unwrap_or(0),
                            status_message: s
                                .status
                                .as_ref()
                                .map(|st| st.message.clone())
                                .unwrap_or_default(),
                        });
                    }
                }
            }
        }
        out
    }
}
