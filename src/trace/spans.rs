//! The spans of one run, built from its events: a root span for the run, one child per
//! project step (started on `project_started`, ended on `project_finished`), span events
//! for retries and hooks, and on the run's span for each change of a pool's limit. Only
//! names, statuses, counts and the profile's own patterns become attributes: never a
//! project's output lines, outputs or config.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use opentelemetry::propagation::TextMapPropagator;
use opentelemetry::trace::{Span as _, SpanContext, SpanKind, Status, TraceContextExt, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, Span};

use crate::engine::Operation;
use crate::run::events::{ChildEnv, Counts, RunEvent, Status as RunStatus};

/// The W3C trace context of a span, as the `TRACEPARENT` variable carries it.
pub fn traceparent(sc: &SpanContext) -> String {
    format!(
        "00-{}-{}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags()
    )
}

/// The context a `TRACEPARENT` value names (empty when it is not a valid one).
fn parent_context(traceparent: Option<&str>) -> Context {
    let Some(value) = traceparent else {
        return Context::new();
    };
    let carrier: HashMap<String, String> = [("traceparent".to_string(), value.to_string())].into();
    TraceContextPropagator::new().extract(&carrier)
}

/// A project step's span and its tries so far.
struct Step {
    span: Span,
    tries: u32,
}

#[derive(Default)]
struct State {
    /// The run's span, once `run_started` came.
    root: Option<Context>,
    /// The steps that started and have not finished.
    steps: BTreeMap<String, Step>,
}

/// Turns a run's events into spans. Shared by the scheduler's threads.
pub struct Spans {
    tracer: SdkTracer,
    parent: Context,
    child_env: ChildEnv,
    state: Mutex<State>,
}

/// A status's span status: an error for a failure and for a step Ctrl-C cancelled, Ok
/// for a success, unset for what did not run.
fn span_status(status: RunStatus, message: Option<&str>) -> Status {
    match status {
        RunStatus::Succeeded => Status::Ok,
        RunStatus::Failed | RunStatus::Cancelled | RunStatus::Denied => {
            // The first line (what the summary shows), redacted by the step already.
            let first = message.and_then(|m| m.lines().next()).unwrap_or("");
            let text: String = first.chars().take(300).collect();
            Status::error(if text.is_empty() {
                status.as_str().to_string()
            } else {
                text
            })
        }
        RunStatus::Skipped | RunStatus::Blocked | RunStatus::Awaiting => Status::Unset,
    }
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn millis(ms: u64) -> i64 {
    i64::try_from(ms).unwrap_or(i64::MAX)
}

impl Spans {
    /// `parent`: strata's own `TRACEPARENT`, if it was started inside a trace.
    pub fn new(tracer: SdkTracer, parent: Option<&str>, child_env: ChildEnv) -> Spans {
        Spans {
            tracer,
            parent: parent_context(parent),
            child_env,
            state: Mutex::new(State::default()),
        }
    }

    pub fn event(&self, e: &RunEvent) {
        match e {
            RunEvent::RunStarted {
                run_id,
                operation,
                provider,
                stack,
                projects,
                parallel,
                ..
            } => {
                let name = format!("strata {}", operation.as_str());
                self.run_started(
                    name,
                    vec![
                        KeyValue::new("strata.run_id", run_id.clone()),
                        KeyValue::new("strata.operation", operation.as_str()),
                        KeyValue::new("strata.provider", provider.clone()),
                        KeyValue::new("strata.stack", stack.clone()),
                        KeyValue::new("strata.projects", count(projects.len())),
                        KeyValue::new("strata.parallel", count(*parallel)),
                    ],
                )
            }
            RunEvent::ProjectStarted {
                project,
                operation,
                pool,
                ..
            } => self.started(project, *operation, pool.as_deref()),
            RunEvent::PoolLimit {
                pool,
                limit,
                previous,
                reason,
                project,
            } => {
                let mut a = vec![
                    KeyValue::new("strata.pool", pool.clone()),
                    KeyValue::new("strata.limit", count(*limit)),
                    KeyValue::new("strata.previous", count(*previous)),
                    KeyValue::new("strata.reason", reason.clone()),
                ];
                if let Some(p) = project {
                    a.push(KeyValue::new("strata.project", p.clone()));
                }
                self.on_run("pool_limit", a);
            }
            RunEvent::ProjectRetry {
                project,
                attempt,
                attempts,
                delay_ms,
                reason,
                ..
            } => self.on_step(project, "project_retry", Some(*attempt), || {
                vec![
                    KeyValue::new("strata.attempt", i64::from(*attempt)),
                    KeyValue::new("strata.attempts", i64::from(*attempts)),
                    KeyValue::new("strata.delay_ms", millis(*delay_ms)),
                    KeyValue::new("strata.reason", reason.clone()),
                ]
            }),
            RunEvent::HookFinished {
                project,
                hook,
                status,
                duration_ms,
                ..
            } => self.on_step(project, "hook_finished", None, || {
                vec![
                    KeyValue::new("strata.hook", hook.clone()),
                    KeyValue::new("strata.status", status.as_str()),
                    KeyValue::new("strata.duration_ms", millis(*duration_ms)),
                ]
            }),
            RunEvent::ProjectFinished {
                project,
                operation,
                status,
                message,
                exit_code,
                ..
            } => self.finished(project, *operation, *status, message.as_deref(), *exit_code),
            RunEvent::RunFinished {
                status,
                counts,
                processes,
                ..
            } => self.run_finished(*status, counts, *processes),
            RunEvent::ProjectOutput { .. }
            | RunEvent::ProjectProgress { .. }
            | RunEvent::Notice { .. } => {}
        }
    }

    /// The run's root span, `name`, under the parent context.
    fn run_started(&self, name: String, attributes: Vec<KeyValue>) {
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, &self.parent);
        if let Ok(mut s) = self.state.lock() {
            s.root = Some(self.parent.with_span(span));
        }
    }

    /// An event on the run's root span.
    fn on_run(&self, name: &'static str, attributes: Vec<KeyValue>) {
        if let Ok(s) = self.state.lock()
            && let Some(root) = &s.root
        {
            root.span().add_event(name, attributes);
        }
    }

    /// An event on a running step's span; `tries`: the try about to start (a retry).
    fn on_step(
        &self,
        project: &str,
        name: &'static str,
        tries: Option<u32>,
        attributes: impl FnOnce() -> Vec<KeyValue>,
    ) {
        if let Ok(mut s) = self.state.lock()
            && let Some(step) = s.steps.get_mut(project)
        {
            if let Some(t) = tries {
                step.tries = t;
            }
            step.span.add_event(name, attributes());
        }
    }

    fn step_attributes(project: &str, op: Operation, pool: Option<&str>) -> Vec<KeyValue> {
        let mut a = vec![
            KeyValue::new("strata.project", project.to_string()),
            KeyValue::new("strata.operation", op.as_str()),
        ];
        if let Some(p) = pool {
            a.push(KeyValue::new("strata.pool", p.to_string()));
        }
        a
    }

    fn start_step(&self, s: &State, project: &str, op: Operation, pool: Option<&str>) -> Span {
        let root = s.root.clone().unwrap_or_else(|| self.parent.clone());
        self.tracer
            .span_builder(project.to_string())
            .with_kind(SpanKind::Internal)
            .with_attributes(Self::step_attributes(project, op, pool))
            .start_with_context(&self.tracer, &root)
    }

    /// A step starts: its span, and its `TRACEPARENT` for every child it will start
    /// (this runs on the scheduler's thread, before the step's own thread).
    fn started(&self, project: &str, op: Operation, pool: Option<&str>) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        let span = self.start_step(&s, project, op, pool);
        self.child_env
            .set(project, "TRACEPARENT", traceparent(span.span_context()));
        s.steps.insert(project.to_string(), Step { span, tries: 1 });
    }

    fn finished(
        &self,
        project: &str,
        op: Operation,
        status: RunStatus,
        message: Option<&str>,
        exit_code: Option<i32>,
    ) {
        self.child_env.clear(project);
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        // A step that never started (skipped, cancelled, unchanged) still has its span,
        // so the trace holds every project of the run.
        let (mut span, tries) = match s.steps.remove(project) {
            Some(step) => (step.span, step.tries),
            None => (self.start_step(&s, project, op, None), 0),
        };
        span.set_attribute(KeyValue::new("strata.status", status.as_str()));
        span.set_attribute(KeyValue::new("strata.attempt", i64::from(tries)));
        if let Some(code) = exit_code {
            span.set_attribute(KeyValue::new("strata.exit_code", i64::from(code)));
        }
        span.set_status(span_status(status, message));
        span.end();
    }

    fn run_finished(&self, status: RunStatus, counts: &Counts, processes: u32) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        for (_, mut step) in std::mem::take(&mut s.steps) {
            step.span.end();
        }
        let Some(root) = s.root.take() else {
            return;
        };
        let span = root.span();
        span.set_attributes([
            KeyValue::new("strata.status", status.as_str()),
            KeyValue::new("strata.succeeded", count(counts.succeeded)),
            KeyValue::new("strata.failed", count(counts.failed)),
            KeyValue::new("strata.skipped", count(counts.skipped)),
            KeyValue::new("strata.cancelled", count(counts.cancelled)),
            KeyValue::new("strata.blocked", count(counts.blocked)),
            KeyValue::new("strata.processes", i64::from(processes)),
        ]);
        span.set_status(span_status(status, None));
        span.end();
    }

    /// Ends whatever is still open (a run that ended without `run_finished`).
    pub fn close(&self) {
        let Ok(mut s) = self.state.lock() else {
            return;
        };
        for (_, mut step) in std::mem::take(&mut s.steps) {
            step.span.end();
        }
        if let Some(root) = s.root.take() {
            root.span().end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{SpanId, TracerProvider as _};
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
    use std::sync::Arc;

    #[derive(Debug, Clone, Default)]
    struct Collect(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Collect {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            self.0.lock().unwrap().extend(batch);
            Ok(())
        }
    }

    fn spans(parent: Option<&str>) -> (Spans, Collect, ChildEnv, SdkTracerProvider) {
        let out = Collect::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(out.clone())
            .build();
        let env = ChildEnv::default();
        let s = Spans::new(provider.tracer("strata"), parent, env.clone());
        (s, out, env, provider)
    }

    fn attr(d: &SpanData, key: &str) -> Option<opentelemetry::Value> {
        d.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.clone())
    }

    fn run_started() -> RunEvent {
        RunEvent::RunStarted {
            schema_version: crate::run::events::SCHEMA_VERSION,
            run_id: "r1".into(),
            operation: Operation::Up,
            provider: "local".into(),
            stack: "dev".into(),
            projects: vec!["a".into(), "b".into(), "c".into()],
            parallel: 4,
        }
    }

    fn finished(project: &str, status: RunStatus, message: Option<&str>) -> RunEvent {
        RunEvent::ProjectFinished {
            project: project.into(),
            operation: Operation::Up,
            status,
            duration_ms: 5,
            message: message.map(String::from),
            log: None,
            exit_code: (status == RunStatus::Failed).then_some(2),
            upstream: None,
            changes: None,
            denied: None,
            awaiting: None,
        }
    }

    fn started(project: &str) -> RunEvent {
        RunEvent::ProjectStarted {
            project: project.into(),
            operation: Operation::Up,
            log: None,
            pool: None,
        }
    }

    #[test]
    fn a_run_is_one_root_with_a_child_per_project_and_children_get_their_traceparent() {
        let (s, out, env, _p) = spans(None);
        s.event(&run_started());
        s.event(&started("a"));
        let tp_a = env.of("a")["TRACEPARENT"].clone();
        s.event(&RunEvent::ProjectOutput {
            project: "a".into(),
            line: "password=hunter2".into(),
        });
        s.event(&RunEvent::ProjectRetry {
            project: "a".into(),
            operation: Operation::Up,
            attempt: 2,
            attempts: 3,
            delay_ms: 10,
            reason: "Rate exceeded".into(),
        });
        s.event(&RunEvent::HookFinished {
            project: "a".into(),
            hook: "kubeconfig".into(),
            status: RunStatus::Succeeded,
            duration_ms: 3,
            message: None,
        });
        s.event(&finished("a", RunStatus::Succeeded, Some("up · 2 tries")));
        assert!(env.of("a").is_empty(), "cleared when the step ends");
        s.event(&started("b"));
        s.event(&finished(
            "b",
            RunStatus::Failed,
            Some("exit 2: boom\nmore"),
        ));
        s.event(&finished("c", RunStatus::Skipped, Some("not run: needs b")));
        s.event(&RunEvent::RunFinished {
            run_id: "r1".into(),
            operation: Operation::Up,
            status: RunStatus::Failed,
            duration_ms: 9,
            counts: Counts {
                succeeded: 1,
                failed: 1,
                skipped: 1,
                ..Counts::default()
            },
            cpu_ms: 1,
            processes: 2,
        });

        let got = out.0.lock().unwrap().clone();
        assert_eq!(got.len(), 4, "{got:#?}");
        let root = got.iter().find(|d| d.name == "strata up").unwrap();
        assert_eq!(root.parent_span_id, SpanId::INVALID);
        assert_eq!(attr(root, "strata.stack"), Some("dev".into()));
        assert_eq!(attr(root, "strata.status"), Some("failed".into()));
        assert!(matches!(root.status, Status::Error { .. }));
        let trace = root.span_context.trace_id();
        let child = |name: &str| got.iter().find(|d| d.name == name).unwrap();
        for name in ["a", "b", "c"] {
            let d = child(name);
            assert_eq!(d.span_context.trace_id(), trace);
            assert_eq!(d.parent_span_id, root.span_context.span_id());
            assert_eq!(attr(d, "strata.project"), Some(name.to_string().into()));
            assert_eq!(attr(d, "strata.operation"), Some("up".into()));
            assert_eq!(attr(d, "strata.pool"), None);
        }
        let a = child("a");
        assert_eq!(tp_a, traceparent(&a.span_context));
        assert_eq!(attr(a, "strata.attempt"), Some(2i64.into()));
        assert_eq!(a.status, Status::Ok);
        let names: Vec<&str> = a.events.events.iter().map(|e| e.name.as_ref()).collect();
        assert_eq!(names, ["project_retry", "hook_finished"]);
        let retry = &a.events.events[0];
        assert!(
            retry
                .attributes
                .contains(&KeyValue::new("strata.reason", "Rate exceeded"))
        );
        let b = child("b");
        assert_eq!(b.status, Status::error("exit 2: boom"));
        assert_eq!(attr(b, "strata.status"), Some("failed".into()));
        assert_eq!(attr(b, "strata.exit_code"), Some(2i64.into()));
        assert_eq!(attr(b, "strata.attempt"), Some(1i64.into()));
        let c = child("c");
        assert_eq!(attr(c, "strata.attempt"), Some(0i64.into()));
        assert_eq!(c.status, Status::Unset);
        // No output line anywhere.
        let text = format!("{got:?}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn a_step_names_its_pool_and_a_pool_limit_change_is_an_event_of_the_run() {
        let (s, out, _env, _p) = spans(None);
        s.event(&run_started());
        s.event(&RunEvent::ProjectStarted {
            project: "a".into(),
            operation: Operation::Up,
            log: None,
            pool: Some("aws-us-east-1".into()),
        });
        let change = |limit, previous, reason: &str, project: Option<&str>| RunEvent::PoolLimit {
            pool: "aws-us-east-1".into(),
            limit,
            previous,
            reason: reason.into(),
            project: project.map(String::from),
        };
        s.event(&change(2, 4, "a: Rate exceeded", Some("a")));
        s.event(&change(3, 2, "2 successes", None));
        s.event(&finished("a", RunStatus::Succeeded, None));
        s.event(&started("b"));
        s.close();
        let got = out.0.lock().unwrap().clone();
        let by = |name: &str| got.iter().find(|d| d.name == name).unwrap();
        assert_eq!(attr(by("a"), "strata.pool"), Some("aws-us-east-1".into()));
        assert_eq!(attr(by("b"), "strata.pool"), None);
        let root = by("strata up");
        let changes: Vec<&opentelemetry::trace::Event> = root
            .events
            .events
            .iter()
            .filter(|e| e.name == "pool_limit")
            .collect();
        assert_eq!(changes.len(), 2, "{root:#?}");
        for (kv, i) in [
            (KeyValue::new("strata.pool", "aws-us-east-1"), 0),
            (KeyValue::new("strata.limit", 2i64), 0),
            (KeyValue::new("strata.previous", 4i64), 0),
            (KeyValue::new("strata.reason", "a: Rate exceeded"), 0),
            (KeyValue::new("strata.project", "a"), 0),
            (KeyValue::new("strata.limit", 3i64), 1),
        ] {
            assert!(
                changes[i].attributes.contains(&kv),
                "{kv:?} in {:?}",
                changes[i]
            );
        }
        assert!(
            !changes[1]
                .attributes
                .iter()
                .any(|kv| kv.key.as_str() == "strata.project")
        );
        assert!(by("a").events.events.is_empty(), "on the run's span only");
    }

    #[test]
    fn a_traceparent_of_strata_itself_parents_the_run() {
        let parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let (s, out, _env, _p) = spans(Some(parent));
        s.event(&run_started());
        s.close();
        let got = out.0.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].span_context.trace_id().to_string(),
            "0af7651916cd43dd8448eb211c80319c"
        );
        assert_eq!(got[0].parent_span_id.to_string(), "b7ad6b7169203331");
    }

    #[test]
    fn a_malformed_traceparent_of_strata_is_ignored() {
        let (s, out, _env, _p) = spans(Some("not-a-traceparent"));
        s.event(&run_started());
        s.event(&started("a"));
        s.close();
        let got = out.0.lock().unwrap().clone();
        assert_eq!(got.len(), 2);
        let root = got.iter().find(|d| d.name == "strata up").unwrap();
        assert_eq!(root.parent_span_id, SpanId::INVALID);
    }
}
