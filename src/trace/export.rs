//! Sending the spans: OTLP/HTTP protobuf through hyper (TLS by rustls with the system's
//! roots), batched on the SDK's one thread, and the bounded wait at the end of a run.
//! Built only for a traced run: an untraced one starts no thread and opens nothing.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::HttpClient;
use opentelemetry_http::hyper::HyperClient;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, SdkTracer, SdkTracerProvider, SpanData, SpanExporter,
};

use super::config::{Config, FlushWait};
use crate::error::{Error, Result};

/// Spans held for sending when `OTEL_BSP_MAX_QUEUE_SIZE` does not say: one per project
/// of a large estate, so a run of thousands of projects loses none between two sends.
const QUEUE: usize = 65_536;

/// What became of the sends: the first failure, kept for the one warning at the end, and
/// whether one is under way (a collector that never answers).
#[derive(Debug, Default)]
struct Sends {
    failure: Mutex<Option<String>>,
    busy: AtomicBool,
    /// Batches the collector took.
    sent: AtomicUsize,
}

/// The OTLP exporter driven on a Tokio runtime of its own (hyper needs one; the SDK's
/// batch thread has none), with its failures kept.
#[derive(Debug)]
struct Exporter {
    inner: opentelemetry_otlp::SpanExporter,
    runtime: tokio::runtime::Runtime,
    sends: Arc<Sends>,
}

impl SpanExporter for Exporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        self.sends.busy.store(true, Ordering::SeqCst);
        let result = self.runtime.block_on(self.inner.export(batch));
        self.sends.busy.store(false, Ordering::SeqCst);
        if result.is_ok() {
            self.sends.sent.fetch_add(1, Ordering::SeqCst);
        }
        if let Err(e) = &result
            && let Ok(mut f) = self.sends.failure.lock()
            && f.is_none()
        {
            *f = Some(e.to_string());
        }
        result
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// Where the spans go, and what became of them.
pub struct Sink {
    provider: SdkTracerProvider,
    sends: Arc<Sends>,
}

/// How the end of a run's wait for the collector went.
#[derive(Debug, PartialEq, Eq)]
pub enum Flushed {
    Sent,
    /// Not sent (the line to show).
    NotSent(String),
}

fn exporter<C: HttpClient + 'static>(
    client: C,
    config: &Config,
) -> std::result::Result<opentelemetry_otlp::SpanExporter, String> {
    opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_endpoint(config.endpoint.clone())
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(config.timeout)
        .build()
        .map_err(|e| e.to_string())
}

/// Starts the sink: `Err` is the line to show when it cannot be (tracing is then off).
pub fn start(
    config: &Config,
    env: &std::collections::BTreeMap<String, String>,
) -> std::result::Result<Sink, String> {
    let cannot = |why: String| {
        format!(
            "warning: this run's trace is not sent to {}: {why}",
            config.endpoint
        )
    };
    let inner = if config.endpoint.starts_with("https://") {
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_native_roots()
            .map_err(|e| {
                cannot(format!(
                    "the system's root certificates could not be read ({e}); install them (ca-certificates) or use an http:// collector"
                ))
            })?
            .https_or_http()
            .enable_http1()
            .build();
        exporter(HyperClient::new(https, config.timeout, None), config)
    } else {
        exporter(
            HyperClient::with_default_connector(config.timeout, None),
            config,
        )
    }
    .map_err(cannot)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| cannot(format!("no runtime for the exporter ({e})")))?;
    let sends = Arc::new(Sends::default());
    let exporter = Exporter {
        inner,
        runtime,
        sends: sends.clone(),
    };
    let mut batch = BatchConfigBuilder::default();
    if !env.contains_key("OTEL_BSP_MAX_QUEUE_SIZE") {
        batch = batch.with_max_queue_size(QUEUE);
    }
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(batch.build())
        .build();
    let provider = SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_resource(
            Resource::builder()
                .with_service_name(config.service_name.clone())
                .build(),
        )
        .build();
    Ok(Sink { provider, sends })
}

impl Sink {
    pub fn tracer(&self) -> SdkTracer {
        self.provider.tracer("strata")
    }

    /// Sends what is left, waiting at most `wait`, and stops the sink. A signal ends the
    /// wait at once (`Err`, exit 128+n); a collector that is down or slow only makes the
    /// line to show.
    pub fn flush(self, endpoint: &str, wait: &FlushWait) -> Result<Flushed> {
        let (limit, wait) = (&wait.limit, wait.time);
        let caught = crate::run::signals::Caught::register().ok();
        let (tx, rx) = std::sync::mpsc::channel();
        let provider = self.provider.clone();
        std::thread::Builder::new()
            .name("trace flush".into())
            .spawn(move || {
                let _ = tx.send(provider.shutdown_with_timeout(wait));
            })
            .map_err(|e| Error::failed(format!("cannot start a thread: {e}")))?;
        let started = Instant::now();
        let result = loop {
            if let Some(sig) = caught.as_ref().and_then(|c| c.signal()) {
                return Err(Error::signal(
                    sig,
                    format!(
                        "{} while sending the run's trace to {endpoint}: the run had finished; its trace may be incomplete.",
                        crate::error::stopped_by(sig)
                    ),
                ));
            }
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(r) => break r,
                // The shutdown's own bound, and some slack for its thread.
                Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    if started.elapsed() > wait.saturating_add(Duration::from_secs(1)) =>
                {
                    break Err(opentelemetry_sdk::error::OTelSdkError::Timeout(wait));
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    break Err(opentelemetry_sdk::error::OTelSdkError::InternalFailure(
                        "the flush stopped".into(),
                    ));
                }
            }
        };
        let failure = self.sends.failure.lock().ok().and_then(|f| f.clone());
        let timed_out = self.sends.busy.load(Ordering::SeqCst);
        // (The SDK's shutdown does not say whether its last send went: the exporter does.)
        let some_sent = self.sends.sent.load(Ordering::SeqCst) > 0;
        Ok(match (result, failure) {
            (_, Some(why)) if some_sent => Flushed::NotSent(format!(
                "warning: part of this run's trace could not be sent to {endpoint} ({why}); the run itself is not affected"
            )),
            (_, Some(why)) => Flushed::NotSent(format!(
                "warning: this run's trace could not be sent to {endpoint} ({why}): is the collector up and taking OTLP/HTTP there? The run itself is not affected"
            )),
            (Err(_), None) if timed_out => Flushed::NotSent(format!(
                "warning: this run's trace was not sent to {endpoint}: the collector did not answer within {} ({limit}); the run itself is not affected",
                crate::util::human_duration(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))
            )),
            (Err(e), None) => Flushed::NotSent(format!(
                "warning: this run's trace may not have been sent to {endpoint} ({e}); the run itself is not affected"
            )),
            (Ok(()), None) => Flushed::Sent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::trace::{Span as _, Tracer as _};

    fn config(endpoint: String) -> Config {
        Config {
            endpoint,
            service_name: "strata".into(),
            timeout: Duration::from_secs(10),
            timeout_from: None,
            headers: false,
            parent: None,
        }
    }

    #[test]
    fn a_closed_port_is_one_warning_within_the_wait() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let endpoint = format!("http://127.0.0.1:{port}/v1/traces");
        let sink = start(&config(endpoint.clone()), &Default::default()).unwrap();
        sink.tracer().start("a").end();
        let t0 = Instant::now();
        let got = sink
            .flush(&endpoint, &config(endpoint.clone()).flush_wait())
            .unwrap();
        assert!(t0.elapsed() < Duration::from_secs(7), "{:?}", t0.elapsed());
        let Flushed::NotSent(line) = got else {
            panic!("sent to a closed port?")
        };
        assert!(
            line.starts_with("warning: ") && line.contains(&endpoint),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        assert!(
            line.contains("this run's trace could not be sent"),
            "{line}"
        );
    }

    #[test]
    fn a_collector_that_never_answers_is_given_up_on_after_the_wait() {
        // Accepts the connection and never answers.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let endpoint = format!("http://{}/v1/traces", l.local_addr().unwrap());
        let sink = start(&config(endpoint.clone()), &Default::default()).unwrap();
        sink.tracer().start("a").end();
        let t0 = Instant::now();
        let wait = FlushWait {
            time: Duration::from_millis(600),
            limit: "OTEL_EXPORTER_OTLP_TIMEOUT=600".into(),
        };
        let got = sink.flush(&endpoint, &wait).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());
        assert!(
            matches!(&got, Flushed::NotSent(l) if l.contains("did not answer within 600ms (OTEL_EXPORTER_OTLP_TIMEOUT=600)")),
            "{got:?}"
        );
        drop(l);
    }
}
