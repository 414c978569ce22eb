//! The report as one JSON document: the run's journal records as they were written (the
//! run record, and each project's record with its retries), plus what the report worked
//! out (`reason`, `timeline`: wave, start, end, critical; `totals`; `critical_path`).
//! Its shape is published as `docs/schema/report.v2.json` ([`SCHEMA`]).

use serde_json::{Value, json};

use super::model::{Graph, Report};

/// The `$id` of the schema this document follows, and its version: a field removed or
/// renamed, a status or reason added, is a new version; a field added is not.
pub const SCHEMA: &str = "https://strata.invalid/schema/report.v2.json";
pub const SCHEMA_VERSION: u32 = 2;

pub fn render(r: &Report) -> String {
    let projects: Vec<Value> = r
        .steps
        .iter()
        .map(|s| {
            let mut v = s.record.as_deref().map(as_written).unwrap_or_else(|| {
                json!({ "project": s.path, "status": s.status, "record": null })
            });
            if let Value::Object(m) = &mut v {
                m.insert(
                    "reason".into(),
                    Value::from(super::reason::of(
                        &s.status,
                        s.message.as_deref(),
                        !s.retries.is_empty(),
                    )),
                );
                m.insert(
                    "retries".into(),
                    Value::Array(s.retries.iter().map(|t| as_written(&t.record)).collect()),
                );
                m.insert(
                    "timeline".into(),
                    json!({
                        "wave": (s.wave > 0).then_some(s.wave),
                        "start_ms": s.start_ms,
                        "end_ms": s.end_ms(),
                        "critical": s.critical,
                        "needs": s.needs.iter().map(|&j| r.steps[j].path.as_str()).collect::<Vec<_>>(),
                        "log_tail": s.tail,
                    }),
                );
            }
            v
        })
        .collect();
    let doc = json!({
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "run": r.run_record.as_deref().map(as_written),
        "status": r.status,
        "graph": match &r.graph {
            Graph::Plan => json!({ "source": "plan" }),
            Graph::Timing(why) => json!({ "source": "timing", "reason": why }),
        },
        "totals": {
            "wall_ms": r.totals.wall_ms,
            "sum_ms": r.totals.sum_ms,
            "parallelism": r.totals.parallelism(),
            "critical_path_ms": r.totals.critical_ms,
            "counts": r.totals.counts,
        },
        "critical_path": r.critical.iter().map(|&i| r.steps[i].path.as_str()).collect::<Vec<_>>(),
        "pool_changes": r.pool_changes.iter().map(|c| {
            let mut v = as_written(&c.record);
            if let Value::Object(m) = &mut v {
                m.insert("at_ms".into(), Value::from(c.at_ms));
            }
            v
        }).collect::<Vec<_>>(),
        "projects": projects,
    });
    format!("{doc}\n")
}

/// A journal line as the JSON it was written as (the journal read kept only lines that
/// parse).
fn as_written(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample;

    #[test]
    fn one_document_with_the_records_and_the_timeline() {
        let text = render(&sample());
        assert_eq!(text.lines().count(), 1);
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["run"]["record"], "run");
        assert_eq!(v["run"]["run_id"], "r1");
        assert_eq!(v["projects"].as_array().unwrap().len(), 4);
        assert_eq!(v["projects"][2]["project"], "charlie");
        assert_eq!(v["projects"][2]["record"], "project");
        assert_eq!(v["projects"][2]["timeline"]["wave"], 2);
        assert_eq!(
            v["projects"][2]["timeline"]["needs"],
            json!(["alpha", "bravo"])
        );
        assert_eq!(v["critical_path"], json!(["bravo", "charlie"]));
        assert_eq!(v["totals"]["wall_ms"], 520);
        assert_eq!(v["graph"]["source"], "plan");
    }

    /// The schema published for readers lists exactly these reasons.
    #[test]
    fn the_published_schema_lists_every_reason() {
        let schema: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/schema/report.v2.json")).unwrap();
        let listed: Vec<&str> = schema["$defs"]["project"]["properties"]["reason"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(listed, super::super::reason::REASONS);
        assert_eq!(schema["properties"]["schema"]["const"], SCHEMA);
        assert_eq!(
            schema["properties"]["schema_version"]["const"],
            SCHEMA_VERSION
        );
        let events: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/schema/events.v2.json")).unwrap();
        let started = events["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["properties"]["event"]["const"] == "run_started")
            .unwrap();
        assert_eq!(
            started["properties"]["schema_version"]["const"],
            crate::run::events::SCHEMA_VERSION
        );
    }
}
