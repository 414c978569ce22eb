//! How an engine pass shows itself: streamed JSON events, a preview digest, or
//! Pulumi-like human text.

use serde::Serialize;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::time::Instant;

use crate::output;
use crate::secret;
use crate::state::Resource;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Human,
    /// `--json` on up/destroy/refresh (and preview with PULUMI_ENABLE_STREAMING_JSON_PREVIEW).
    Stream,
    /// `preview --json`: one document at the end.
    Digest,
}

struct Diag {
    urn: String,
    severity: String,
    message: String,
}

pub struct Display {
    pub mode: Mode,
    preview: bool,
    suppress_outputs: bool,
    stack_urn: String,
    start: Instant,
    counts: BTreeMap<String, u64>,
    diags: Vec<Diag>,
    steps: Vec<Value>,
    config: BTreeMap<String, String>,
}

#[derive(Serialize)]
struct Digest<'a> {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    config: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    steps: &'a Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    diagnostics: Vec<Value>,
    duration: u128,
    #[serde(rename = "changeSummary")]
    change_summary: &'a BTreeMap<String, u64>,
}

impl Display {
    pub fn new(mode: Mode, preview: bool, stack_urn: &str, suppress_outputs: bool) -> Display {
        output::set_json(mode != Mode::Human);
        output::set_digest(mode == Mode::Digest);
        output::reset_sequence();
        Display {
            mode,
            preview,
            suppress_outputs,
            stack_urn: stack_urn.to_string(),
            start: Instant::now(),
            counts: BTreeMap::new(),
            diags: Vec::new(),
            steps: Vec::new(),
            config: BTreeMap::new(),
        }
    }

    pub fn banner(&self, text: &str, stack: &str) {
        output::text(&format!("{text} ({stack}):\n"));
    }

    /// The stack's config, secure values blinded.
    pub fn prelude(&mut self, config: BTreeMap<String, String>) {
        if self.mode == Mode::Stream {
            output::event("preludeEvent", json!({ "config": config }));
        }
        self.config = config;
    }

    fn state_meta(&self, r: &Resource) -> Value {
        let hide = self.suppress_outputs && r.urn == self.stack_urn;
        let masked = |m: &Map<String, Value>| {
            if hide {
                json!({})
            } else {
                secret::blind(&Value::Object(m.clone()))
            }
        };
        let mut o = Map::new();
        o.insert("type".into(), json!(r.ty));
        o.insert("urn".into(), json!(r.urn));
        if r.custom {
            o.insert("custom".into(), json!(true));
        }
        o.insert("id".into(), json!(r.id));
        o.insert("parent".into(), json!(r.parent));
        o.insert("inputs".into(), masked(&r.inputs));
        o.insert("outputs".into(), masked(&r.outputs));
        o.insert("provider".into(), json!(r.provider));
        Value::Object(o)
    }

    fn metadata(&self, op: &str, old: Option<&Resource>, new: Option<&Resource>) -> Value {
        let r = new.or(old).expect("a step has a resource");
        let mut m = Map::new();
        m.insert("op".into(), json!(op));
        m.insert("urn".into(), json!(r.urn));
        m.insert("type".into(), json!(r.ty));
        m.insert(
            "old".into(),
            old.map(|o| self.state_meta(o)).unwrap_or(Value::Null),
        );
        m.insert(
            "new".into(),
            new.map(|n| self.state_meta(n)).unwrap_or(Value::Null),
        );
        if op == "update"
            && let (Some(o), Some(n)) = (old, new)
        {
            let mut keys: Vec<&String> = o.inputs.keys().chain(n.inputs.keys()).collect();
            keys.sort();
            keys.dedup();
            let diffs: Vec<&String> = keys
                .into_iter()
                .filter(|k| o.inputs.get(*k) != n.inputs.get(*k))
                .collect();
            m.insert("diffs".into(), json!(diffs));
        }
        m.insert("detailedDiff".into(), Value::Null);
        m.insert("provider".into(), json!(r.provider));
        Value::Object(m)
    }

    fn human_line(&self, op: &str, r: &Resource, done: bool) {
        let (sym, ing, ed, plan) = match op {
            "create" => ("+", "creating", "created", "create"),
            "update" => ("~", "updating", "updated", "update"),
            "delete" => ("-", "deleting", "deleted", "delete"),
            "read" => (">", "reading", "read", "read"),
            "refresh" => (" ", "refreshing", "refreshed", "refresh"),
            _ => return,
        };
        let word = if self.preview {
            if done {
                return;
            }
            plan
        } else if done {
            ed
        } else {
            ing
        };
        let secs = self.start.elapsed().as_secs_f64();
        output::text(&format!(
            " {sym}  {} {} {word} ({secs:.0}s) \n",
            r.ty,
            r.name()
        ));
    }

    /// A step begins.
    pub fn pre(&mut self, op: &str, old: Option<&Resource>, new: Option<&Resource>) {
        if self.preview {
            *self.counts.entry(op_count_key(op)).or_default() += 1;
        }
        match self.mode {
            Mode::Stream => self.step_event("resourcePreEvent", op, old, new),
            Mode::Digest => {
                let r = new.or(old).expect("a step has a resource");
                let mut s = Map::new();
                s.insert("op".into(), json!(op));
                s.insert("urn".into(), json!(r.urn));
                if let Some(o) = old {
                    s.insert("oldState".into(), self.resource_v3(o));
                }
                if let Some(n) = new {
                    s.insert("newState".into(), self.resource_v3(n));
                }
                if let Some(d) = self.metadata(op, old, new).get("diffs") {
                    s.insert("diffReasons".into(), d.clone());
                }
                s.insert("detailedDiff".into(), Value::Null);
                self.steps.push(Value::Object(s));
            }
            Mode::Human => self.human_line(op, new.or(old).expect("resource"), false),
        }
    }

    /// A step's begin or end event of a `--json` run (`planning` in a preview).
    fn step_event(&self, event: &str, op: &str, old: Option<&Resource>, new: Option<&Resource>) {
        let mut body = json!({ "metadata": self.metadata(op, old, new) });
        if self.preview {
            body["planning"] = json!(true);
        }
        output::event(event, body);
    }

    fn resource_v3(&self, r: &Resource) -> Value {
        let mut v = serde_json::to_value(r).unwrap_or_default();
        let hide = self.suppress_outputs && r.urn == self.stack_urn;
        for k in ["inputs", "outputs"] {
            if let Some(x) = v.get_mut(k) {
                *x = if hide { json!({}) } else { secret::blind(x) };
            }
        }
        v
    }

    /// A step completed.
    pub fn done(&mut self, op: &str, old: Option<&Resource>, new: Option<&Resource>) {
        if !self.preview {
            *self.counts.entry(op_count_key(op)).or_default() += 1;
        }
        match self.mode {
            Mode::Stream => self.step_event("resOutputsEvent", op, old, new),
            Mode::Digest => {}
            Mode::Human => self.human_line(op, new.or(old).expect("resource"), true),
        }
    }

    /// A step failed.
    pub fn failed(&mut self, op: &str, old: Option<&Resource>, new: Option<&Resource>) {
        match self.mode {
            Mode::Stream => output::event(
                "resOpFailedEvent",
                json!({ "metadata": self.metadata(op, old, new), "status": 0, "steps": 0 }),
            ),
            Mode::Digest => {}
            Mode::Human => {
                let r = new.or(old).expect("resource");
                let verb = match op {
                    "create" => "creating",
                    "update" => "updating",
                    "delete" => "deleting",
                    "read" => "reading",
                    _ => "refreshing",
                };
                output::text(&format!("    {} {} **{verb} failed** \n", r.ty, r.name()));
            }
        }
    }

    /// A diagnostic; `severity` is `error`, `warning` or `info`.
    pub fn diag(&mut self, urn: &str, severity: &str, message: &str) {
        let message = if message.ends_with('\n') {
            message.to_string()
        } else {
            format!("{message}\n")
        };
        if self.mode == Mode::Stream {
            let mut d = Map::new();
            if !urn.is_empty() {
                d.insert("urn".into(), json!(urn));
            }
            if severity != "info" {
                d.insert("prefix".into(), json!(format!("{severity}: ")));
            }
            d.insert("message".into(), json!(message));
            d.insert("color".into(), json!("never"));
            d.insert("severity".into(), json!(severity));
            output::event("diagnosticEvent", Value::Object(d));
        }
        self.diags.push(Diag {
            urn: urn.to_string(),
            severity: severity.to_string(),
            message,
        });
    }

    /// The end of the pass: summary (and the closing cancelEvent every engine run emits),
    /// the digest, or the human tail.
    pub fn finish(&mut self, outputs: Option<&Map<String, Value>>, destroy_done_on: Option<&str>) {
        let elapsed = self.start.elapsed();
        match self.mode {
            Mode::Stream => {
                output::event(
                    "summaryEvent",
                    json!({
                        "maybeCorrupt": false,
                        "durationSeconds": elapsed.as_secs(),
                        "resourceChanges": self.counts,
                        "PolicyPacks": {},
                        "isPreview": self.preview,
                    }),
                );
                output::event("cancelEvent", json!({}));
            }
            Mode::Digest => {
                let mut diagnostics: Vec<Value> = self
                    .diags
                    .iter()
                    .map(|d| {
                        let prefix = if d.severity == "info" {
                            String::new()
                        } else {
                            format!("{}: ", d.severity)
                        };
                        let mut o = Map::new();
                        if !d.urn.is_empty() {
                            o.insert("urn".into(), json!(d.urn));
                        }
                        o.insert("message".into(), json!(format!("{prefix}{}", d.message)));
                        o.insert("severity".into(), json!(d.severity));
                        Value::Object(o)
                    })
                    .collect();
                for m in output::take_kept() {
                    diagnostics.push(json!({"message": m, "severity": "info"}));
                }
                let digest = Digest {
                    config: &self.config,
                    steps: &self.steps,
                    diagnostics,
                    duration: elapsed.as_nanos(),
                    change_summary: &self.counts,
                };
                let mut buf = Vec::new();
                let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
                let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
                if digest.serialize(&mut ser).is_ok() {
                    output::set_digest(false);
                    output::print(&format!("{}\n", String::from_utf8_lossy(&buf)));
                }
            }
            Mode::Human => self.human_tail(outputs, destroy_done_on, elapsed.as_secs()),
        }
    }

    fn human_tail(&self, outputs: Option<&Map<String, Value>>, destroyed: Option<&str>, secs: u64) {
        let mut s = String::new();
        if !self.diags.is_empty() {
            s.push_str("\nDiagnostics:\n");
            for d in &self.diags {
                let name = d.urn.rsplit("::").next().unwrap_or("");
                let ty = d.urn.split("::").nth(2).unwrap_or("");
                if d.urn.is_empty() {
                    s.push_str("  pulumi:\n");
                } else {
                    s.push_str(&format!("  {ty} ({name}):\n"));
                }
                let prefix = if d.severity == "info" {
                    String::new()
                } else {
                    format!("{}: ", d.severity)
                };
                s.push_str(&format!("    {prefix}{}\n", d.message.trim_end()));
            }
        }
        if let Some(outs) = outputs.filter(|o| !o.is_empty() && !self.suppress_outputs) {
            s.push_str("\nOutputs:\n");
            let width = outs.keys().map(String::len).max().unwrap_or(0);
            for (k, v) in outs {
                let shown = match secret::mask(v) {
                    Value::String(t) if t == secret::MASK => t,
                    other => other.to_string(),
                };
                s.push_str(&format!("    {k:<width$}: {shown}\n"));
            }
        }
        s.push_str("\nResources:\n");
        for (op, n) in &self.counts {
            let line = match (op.as_str(), self.preview) {
                ("create", false) => format!("+ {n} created"),
                ("create", true) => format!("+ {n} to create"),
                ("update", false) => format!("~ {n} updated"),
                ("update", true) => format!("~ {n} to update"),
                ("delete", false) => format!("- {n} deleted"),
                ("delete", true) => format!("- {n} to delete"),
                ("read", _) => format!("> {n} read"),
                ("same", _) => format!("{n} unchanged"),
                (other, _) => format!("{n} {other}"),
            };
            s.push_str(&format!("    {line}\n"));
        }
        s.push_str(&format!("\nDuration: {secs}s\n\n"));
        if let Some(stack) = destroyed {
            s.push_str(&format!(
                "The resources in the stack have been deleted, but the history and configuration \
                 associated with the stack are still maintained. \nIf you want to remove the \
                 stack completely, run `pulumi stack rm {stack}`.\n"
            ));
        }
        output::text(&s);
    }
}

/// Refresh steps that find no drift count as `same`.
fn op_count_key(op: &str) -> String {
    match op {
        "refresh" => "same".into(),
        other => other.into(),
    }
}
