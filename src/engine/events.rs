//! Pulumi's streamed engine events (`up/destroy/refresh --json`, the objects of
//! `sdk/go/common/apitype/events.go`): progress, diagnostics and the stack's outputs.

use serde_json::{Map, Value};

/// What the events of one run have told so far.
#[derive(Debug, Default, Clone)]
pub struct EventState {
    /// Resources finished (resOutputsEvent), not counting the stack itself.
    pub done: usize,
    /// Resources started (resourcePreEvent), not counting the stack itself.
    pub started: usize,
    pub current: Option<String>,
    /// Error diagnostics, in order.
    pub errors: Vec<String>,
    /// The outputs of the `pulumi:pulumi:Stack` resource.
    pub stack_outputs: Option<Map<String, Value>>,
    /// `resourceChanges` of the summary event.
    pub changes: Option<Map<String, Value>>,
    /// Number of lines that were engine events.
    pub events: usize,
    /// (operation, URN) of every resource step that is not `same`, in order.
    pub steps: Vec<(String, String)>,
    /// The events of a preview (or a summary event says `isPreview`): its summary says
    /// what would happen ("would delete 1"), not what happened.
    pub preview: bool,
    /// The line being rendered is a debug diagnostic.
    pub debug_line: bool,
}

const STACK_TYPE: &str = "pulumi:pulumi:Stack";

fn short_name(urn: &str) -> &str {
    urn.rsplit("::").next().unwrap_or(urn)
}

/// A line for people that an output line gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// A line to show.
    Line(String),
    /// A Pulumi debug diagnostic (`debug: Registering config …`): `pulumi up` shows
    /// these only with `-v` or `--debug`, strata only with `-v`.
    Debug(String),
}

impl EventState {
    /// Feeds one line of output. Returns a line for people, if the line says something
    /// worth showing; `None` for events that only update counters and for debug
    /// diagnostics (see [`Self::read`]). A line that is not a JSON event is returned as
    /// it is.
    pub fn feed(&mut self, line: &str) -> Option<String> {
        match self.read(line)? {
            Shown::Line(l) => Some(l),
            Shown::Debug(_) => None,
        }
    }

    /// [`Self::feed`], with the debug diagnostics told apart rather than dropped.
    pub fn read(&mut self, line: &str) -> Option<Shown> {
        self.render(line).map(|l| {
            if self.debug_line {
                Shown::Debug(l)
            } else {
                Shown::Line(l)
            }
        })
    }

    fn render(&mut self, line: &str) -> Option<String> {
        self.debug_line = false;
        let trimmed = line.trim();
        if !trimmed.starts_with('{') {
            return (!trimmed.is_empty()).then(|| line.to_string());
        }
        let Ok(Value::Object(ev)) = serde_json::from_str::<Value>(trimmed) else {
            return Some(line.to_string());
        };
        self.events += 1;
        if let Some(pre) = ev.get("resourcePreEvent") {
            let md = &pre["metadata"];
            let ty = md["type"].as_str().unwrap_or("");
            if ty == STACK_TYPE {
                return None;
            }
            let op = md["op"].as_str().unwrap_or("");
            let urn = md["urn"].as_str().unwrap_or("");
            let name = short_name(urn);
            if op != "same" && op != "read" {
                self.current = Some(format!("{op} {name}"));
                self.steps.push((op.to_string(), urn.to_string()));
            }
            self.started += 1;
            return (op != "same").then(|| format!("{} {ty} {name}", op_symbol(op)));
        }
        if let Some(out) = ev.get("resOutputsEvent") {
            let md = &out["metadata"];
            let ty = md["type"].as_str().unwrap_or("");
            if ty == STACK_TYPE {
                if let Some(Value::Object(o)) = md.get("new").and_then(|n| n.get("outputs")) {
                    self.stack_outputs = Some(o.clone());
                } else if md["op"].as_str() == Some("delete") {
                    self.stack_outputs = Some(Map::new());
                }
                return None;
            }
            self.done += 1;
            let op = md["op"].as_str().unwrap_or("");
            let name = short_name(md["urn"].as_str().unwrap_or(""));
            return (op != "same").then(|| format!("{} {ty} {name}: done", op_symbol(op)));
        }
        if let Some(fail) = ev.get("resOpFailedEvent") {
            let md = &fail["metadata"];
            let name = short_name(md["urn"].as_str().unwrap_or(""));
            return Some(format!(
                "✗ {} {name}: failed",
                md["type"].as_str().unwrap_or("")
            ));
        }
        if let Some(d) = ev.get("diagnosticEvent") {
            let severity = d["severity"].as_str().unwrap_or("info");
            let msg = d["message"].as_str().unwrap_or("").trim_end().to_string();
            if msg.is_empty() {
                return None;
            }
            let prefix = d["prefix"].as_str().unwrap_or("");
            let text = if prefix.is_empty() {
                msg.clone()
            } else {
                format!("{}{msg}", prefix)
            };
            if severity == "error" {
                self.errors.push(strip_ansi(&msg));
            }
            self.debug_line = severity == "debug";
            return Some(strip_ansi(&text));
        }
        if let Some(s) = ev.get("stdoutEvent") {
            let msg = s["message"].as_str().unwrap_or("").trim_end();
            return (!msg.is_empty()).then(|| strip_ansi(msg));
        }
        if let Some(s) = ev.get("summaryEvent") {
            if let Some(Value::Object(c)) = s.get("resourceChanges") {
                self.changes = Some(c.clone());
            }
            if s.get("isPreview") == Some(&Value::Bool(true)) {
                self.preview = true;
            }
            return Some(format!("summary: {}", self.change_summary()));
        }
        if ev.contains_key("cancelEvent") {
            // Sent when a run is cancelled and also when it completes: not a signal.
            return None;
        }
        if let Some(e) = ev.get("errorEvent") {
            let msg = e["error"].as_str().unwrap_or("").to_string();
            self.errors.push(msg.clone());
            return Some(format!("error: {msg}"));
        }
        None
    }

    /// "2 created, 1 updated, 5 unchanged" from the summary event; of a preview, "would
    /// create 2, would update 1, 5 unchanged".
    pub fn change_summary(&self) -> String {
        let Some(c) = &self.changes else {
            return String::new();
        };
        if self.preview {
            let mut parts: Vec<String> = c
                .iter()
                .filter_map(|(op, n)| n.as_u64().filter(|n| *n > 0).map(|n| (op, n)))
                .map(|(op, n)| match op.as_str() {
                    "same" => format!("{n} unchanged"),
                    op => format!("would {op} {n}"),
                })
                .collect();
            // What would change first, what stays last.
            parts.sort_by_key(|p| (!p.starts_with("would"), p.clone()));
            return parts.join(", ");
        }
        fn word(op: &str) -> &str {
            match op {
                "create" => "created",
                "update" => "updated",
                "delete" => "deleted",
                "replace" => "replaced",
                "same" => "unchanged",
                "refresh" => "refreshed",
                "read" => "read",
                other => other,
            }
        }
        let mut parts: Vec<String> = c
            .iter()
            .filter_map(|(op, n)| n.as_u64().filter(|n| *n > 0).map(|n| (op, n)))
            .map(|(op, n)| format!("{n} {}", word(op)))
            .collect();
        parts.sort();
        parts.join(", ")
    }

    pub fn progress(&self) -> super::Progress {
        super::Progress::Resources {
            done: self.done,
            started: self.started,
            current: self.current.clone(),
        }
    }
}

pub fn op_symbol(op: &str) -> &'static str {
    match op {
        "create" | "create-replacement" => "+",
        "update" => "~",
        "delete" | "delete-replaced" | "discard" => "-",
        "replace" => "+-",
        "refresh" => "↻",
        "read" => ">",
        _ => "·",
    }
}

/// Removes ANSI colour sequences (Pulumi colours diagnostics unless told not to).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else if c == '<' && s.contains("<{%") {
            // Pulumi's own colour tags, e.g. <{%reset%}>
            let rest: String = chars.clone().take(2).collect();
            if rest.starts_with("{%") {
                for c in chars.by_ref() {
                    if c == '>' {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> String {
        s.to_string()
    }

    #[test]
    fn follows_a_stream() {
        let mut st = EventState::default();
        let lines = [
            ev(r#"{"sequence":0,"timestamp":1,"preludeEvent":{"config":{}}}"#),
            ev(
                r#"{"sequence":1,"timestamp":1,"resourcePreEvent":{"metadata":{"op":"create","urn":"urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev","type":"pulumi:pulumi:Stack"}}}"#,
            ),
            ev(
                r#"{"sequence":2,"timestamp":1,"resourcePreEvent":{"metadata":{"op":"create","urn":"urn:pulumi:dev::vpc::aws:ec2/vpc:Vpc::main","type":"aws:ec2/vpc:Vpc"}}}"#,
            ),
            ev(
                r#"{"sequence":3,"timestamp":1,"resOutputsEvent":{"metadata":{"op":"create","urn":"urn:pulumi:dev::vpc::aws:ec2/vpc:Vpc::main","type":"aws:ec2/vpc:Vpc"}}}"#,
            ),
            ev(
                r#"{"sequence":4,"timestamp":1,"diagnosticEvent":{"prefix":"warning: ","message":"careful\n","color":"never","severity":"warning"}}"#,
            ),
            ev(
                r#"{"sequence":5,"timestamp":1,"resOutputsEvent":{"metadata":{"op":"create","urn":"urn:pulumi:dev::vpc::pulumi:pulumi:Stack::vpc-dev","type":"pulumi:pulumi:Stack","new":{"outputs":{"vpc_id":"vpc-1","token":{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"[secret]"}}}}}}"#,
            ),
            ev(
                r#"{"sequence":6,"timestamp":1,"summaryEvent":{"maybeCorrupt":false,"durationSeconds":1,"resourceChanges":{"create":2},"PolicyPacks":{}}}"#,
            ),
        ];
        let shown: Vec<String> = lines.iter().filter_map(|l| st.feed(l)).collect();
        assert_eq!(st.started, 1);
        assert_eq!(st.done, 1);
        assert_eq!(st.stack_outputs.as_ref().unwrap()["vpc_id"], "vpc-1");
        assert_eq!(st.change_summary(), "2 created");
        assert!(shown.iter().any(|l| l == "warning: careful"), "{shown:?}");
        assert!(
            shown
                .iter()
                .any(|l| l.starts_with("+ aws:ec2/vpc:Vpc main"))
        );
        let outputs = st.stack_outputs.clone().unwrap();
        assert!(crate::engine::contains_secret_mask(&outputs["token"]));
        assert!(!crate::engine::contains_secret_mask(&outputs["vpc_id"]));
        // `pulumi stack output --json` still says "[secret]".
        assert!(crate::engine::contains_secret_mask(&Value::from(
            "[secret]"
        )));
        assert!(!crate::engine::contains_secret_mask(
            &serde_json::json!({"ciphertext": "x"})
        ));
    }

    #[test]
    fn errors_and_plain_lines() {
        let mut st = EventState::default();
        assert_eq!(st.feed("plain text").as_deref(), Some("plain text"));
        st.feed(r#"{"diagnosticEvent":{"message":"\u001b[31mboom\u001b[0m","color":"always","severity":"error","prefix":"error: "}}"#);
        assert_eq!(st.errors, ["boom"]);
        assert_eq!(st.feed(r#"{"cancelEvent":{}}"#), None);
        assert_eq!(st.feed("{not json").as_deref(), Some("{not json"));
    }

    #[test]
    fn debug_diagnostics_are_told_apart_and_not_fed() {
        let debug = r#"{"sequence":2,"diagnosticEvent":{"prefix":"debug: ","message":"Registering config aws:region\n","color":"never","severity":"debug"}}"#;
        let info = r#"{"sequence":3,"diagnosticEvent":{"message":"hello\n","color":"never","severity":"info"}}"#;
        let mut st = EventState::default();
        assert_eq!(
            st.read(debug),
            Some(Shown::Debug("debug: Registering config aws:region".into()))
        );
        assert_eq!(st.read(info), Some(Shown::Line("hello".into())));
        assert_eq!(st.feed(debug), None);
        assert_eq!(st.feed(info).as_deref(), Some("hello"));
    }
}
