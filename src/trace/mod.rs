//! A run's OpenTelemetry trace: its events as spans, sent over OTLP when asked.
//!
//! One span for the run and one per project, exported over OTLP/HTTP when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `…_TRACES_ENDPOINT`) is set.
//!
//! The [`Trace`] observes the same events as the display (`pipeline::execute` hands it
//! each one); a step's children find its `TRACEPARENT` in the run's
//! [`ChildEnv`](crate::run::events::ChildEnv). Unset, nothing is built: no thread, no
//! socket, no variable.

mod config;
mod export;
mod spans;

use std::collections::BTreeMap;

use crate::error::Result;
use crate::run::events::{ChildEnv, RunEvent};

pub use config::Config;

/// One run's trace, or nothing.
#[derive(Default)]
pub struct Trace(Option<Box<Live>>);

struct Live {
    config: Config,
    spans: spans::Spans,
    sink: export::Sink,
}

impl Trace {
    /// The trace the environment (strata's own, a snapshot) asks for; a line for each
    /// variable that asks for what strata does not do goes to `notices`. The spans'
    /// `TRACEPARENT` go to `child_env`.
    pub fn from_env(
        env: &BTreeMap<String, String>,
        child_env: &ChildEnv,
        notices: &mut Vec<String>,
    ) -> Trace {
        let decision = config::from_env(env);
        notices.extend(decision.notices);
        let Some(config) = decision.config else {
            return Trace::default();
        };
        match export::start(&config, env) {
            Ok(sink) => Trace(Some(Box::new(Live {
                spans: spans::Spans::new(
                    sink.tracer(),
                    config.parent.as_deref(),
                    child_env.clone(),
                ),
                config,
                sink,
            }))),
            Err(line) => {
                notices.push(line);
                Trace::default()
            }
        }
    }

    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// The traces URL, for a child that exports its own spans (Pulumi's `--otel-traces`).
    pub fn endpoint(&self) -> Option<&str> {
        self.0.as_ref().map(|l| l.config.endpoint.as_str())
    }

    /// The traces URL Pulumi's own spans may go to (its `--otel-traces`), and the note to
    /// show once. None when the URL carries credentials: the CLI takes it only on its
    /// command line, which any local user can read (`ps`).
    pub fn for_pulumi(&self) -> (Option<&str>, Option<String>) {
        let Some(url) = self.endpoint() else {
            return (None, None);
        };
        let shown = crate::secrets::url::masked(url);
        if crate::secrets::url::has_credentials(url) {
            return (
                None,
                Some(format!(
                    "note: the traces endpoint {shown} carries credentials, so Pulumi's own spans are not sent: the CLI takes the endpoint only on its command line, which any local user can read (ps). strata's own spans are sent; to have Pulumi's too, put the credentials in OTEL_EXPORTER_OTLP_HEADERS and use a URL without them"
                )),
            );
        }
        let note = self.has_headers().then(|| format!(
            "note: Pulumi's own spans go to {shown} without OTEL_EXPORTER_OTLP_HEADERS: the CLI takes headers only inside its --otel-traces URL, which strata does not put on a command line (strata's own spans carry them)"
        ));
        (Some(url), note)
    }

    /// `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` is set: they often carry a credential.
    pub fn has_headers(&self) -> bool {
        self.0.as_ref().is_some_and(|l| l.config.headers)
    }

    pub fn event(&self, e: &RunEvent) {
        if let Some(l) = &self.0 {
            l.spans.event(e);
        }
    }

    /// Ends what is still open and sends the rest, waiting a bounded time (see
    /// [`Config::flush_wait`]); a collector that is down or slow is one warning on
    /// stderr, never an error. Only a signal during the wait is (`Err`, 128+n).
    pub fn finish(self) -> Result<()> {
        let Some(live) = self.0 else {
            return Ok(());
        };
        let Live {
            config,
            spans,
            sink,
        } = *live;
        spans.close();
        drop(spans);
        let shown = crate::secrets::url::masked(&config.endpoint);
        let flushed = sink.flush(&shown, &config.flush_wait())?;
        if let export::Flushed::NotSent(line) = flushed {
            eprintln!("{}", crate::secrets::url::mask_in(&line, &config.endpoint));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unset_is_nothing_at_all() {
        let child_env = ChildEnv::default();
        let mut notices = Vec::new();
        let t = Trace::from_env(&BTreeMap::new(), &child_env, &mut notices);
        assert!(!t.is_on());
        assert!(notices.is_empty());
        t.event(&RunEvent::ProjectStarted {
            project: "a".into(),
            operation: crate::engine::Operation::Up,
            log: None,
            pool: None,
        });
        assert!(child_env.of("a").is_empty());
        assert!(t.finish().is_ok());
    }

    #[test]
    fn grpc_asked_is_one_warning_and_no_trace() {
        let env = crate::util::string_map(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]);
        let mut notices = Vec::new();
        let t = Trace::from_env(&env, &ChildEnv::default(), &mut notices);
        assert!(!t.is_on());
        assert_eq!(notices.len(), 1, "{notices:?}");
    }
}
