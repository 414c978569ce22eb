//! Whether a run is traced, and where to: OpenTelemetry's standard variables, read from
//! strata's own environment (not the env file, which is the children's).

use std::collections::BTreeMap;
use std::time::Duration;

/// The export timeout when `OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT` is unset (the spec's).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest the end of a run waits for the collector.
const MAX_FLUSH_WAIT: Duration = Duration::from_secs(5);

/// A traced run's settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The OTLP/HTTP traces URL (`…/v1/traces`).
    pub endpoint: String,
    pub service_name: String,
    /// One export's time budget (retries included).
    pub timeout: Duration,
    /// The variable that set `timeout`, as written (`OTEL_EXPORTER_OTLP_TIMEOUT=2500`);
    /// `None`: the default.
    pub timeout_from: Option<String>,
    /// `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` is set (the exporter reads it itself).
    pub headers: bool,
    /// strata's own `TRACEPARENT`: the run's span is its child.
    pub parent: Option<String>,
}

/// How long the end of a run waits for the collector, and which limit that is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushWait {
    pub time: Duration,
    /// The limit, for a warning: "strata waits at most 5.0s …", or the variable.
    pub limit: String,
}

impl Config {
    /// How long the end of a run waits for the last spans to be sent: the export timeout,
    /// at most [`MAX_FLUSH_WAIT`].
    pub fn flush_wait(&self) -> FlushWait {
        let time = self.timeout.min(MAX_FLUSH_WAIT);
        let shown =
            crate::util::human_duration(u64::try_from(time.as_millis()).unwrap_or(u64::MAX));
        let limit = match &self.timeout_from {
            _ if self.timeout > MAX_FLUSH_WAIT => format!(
                "strata waits at most {shown} for it at the end of a run, whatever the export timeout"
            ),
            Some(var) => var.clone(),
            None => "the default export timeout".into(),
        };
        FlushWait { time, limit }
    }
}

/// What the environment says: the settings when a run is traced, and the lines to show
/// when a variable asks for what strata does not do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub config: Option<Config>,
    pub notices: Vec<String>,
}

fn get<'a>(env: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    env.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// The signal's own variable, else the general one: `(name, value)`.
fn either<'a>(
    env: &'a BTreeMap<String, String>,
    traces: &'static str,
    general: &'static str,
) -> Option<(&'static str, &'a str)> {
    get(env, traces)
        .map(|v| (traces, v))
        .or_else(|| get(env, general).map(|v| (general, v)))
}

fn off(notice: String) -> Decision {
    Decision {
        config: None,
        notices: vec![notice],
    }
}

/// `OTEL_SERVICE_NAME`, else the `service.name` of `OTEL_RESOURCE_ATTRIBUTES`, else
/// `strata`.
fn service_name(env: &BTreeMap<String, String>) -> String {
    let from_attributes = || {
        get(env, "OTEL_RESOURCE_ATTRIBUTES")?
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| k.trim() == "service.name")
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    get(env, "OTEL_SERVICE_NAME")
        .map(String::from)
        .or_else(from_attributes)
        .unwrap_or_else(|| "strata".into())
}

/// Reads the standard variables: traced only when `OTEL_EXPORTER_OTLP_ENDPOINT` or
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set and neither `OTEL_SDK_DISABLED=true` nor
/// `OTEL_TRACES_EXPORTER=none` says otherwise.
pub fn from_env(env: &BTreeMap<String, String>) -> Decision {
    if get(env, "OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
        return Decision::default();
    }
    let endpoint = match (
        get(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        get(env, "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ) {
        // The signal's own URL is taken as it is; the general one is a base.
        (Some(url), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url.to_string()),
        (None, Some(base)) => (
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("{}/v1/traces", base.trim_end_matches('/')),
        ),
        (None, None) => return Decision::default(),
    };
    if let Some(exporters) = get(env, "OTEL_TRACES_EXPORTER") {
        let names: Vec<&str> = exporters.split(',').map(str::trim).collect();
        if names.contains(&"none") {
            return Decision::default();
        }
        if !names.contains(&"otlp") {
            return off(format!(
                "warning: OTEL_TRACES_EXPORTER={exporters}: strata exports traces over OTLP only, so this run's trace is not sent; unset it or set it to otlp"
            ));
        }
    }
    let mut notices = Vec::new();
    match either(
        env,
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_PROTOCOL",
    ) {
        None | Some((_, "http/protobuf")) => {}
        Some((var, "http/json")) => notices.push(format!(
            "note: {var}=http/json: strata sends OTLP/HTTP as protobuf, which every OTLP/HTTP receiver takes on the same URL"
        )),
        Some((var, "grpc")) => {
            return off(format!(
                "warning: {var}=grpc: strata sends traces over OTLP/HTTP (http/protobuf) only, so this run's trace is not sent; set {var}=http/protobuf and point {} at the collector's OTLP/HTTP port (4318)",
                endpoint.0
            ));
        }
        Some((var, other)) => {
            return off(format!(
                "warning: {var}={other} is not an OTLP protocol strata knows (http/protobuf), so this run's trace is not sent"
            ));
        }
    }
    let (var, url) = endpoint;
    let host = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .map(|rest| rest.split(['/', '?', '#']).next().unwrap_or(""));
    if host.is_none_or(str::is_empty) {
        return off(format!(
            "warning: {var}={url} is not an http:// or https:// URL with a host, so this run's trace is not sent; set it to the collector's OTLP/HTTP address, such as http://localhost:4318"
        ));
    }
    let set = either(
        env,
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    )
    .and_then(|(var, ms)| {
        Some((
            Duration::from_millis(ms.parse().ok()?),
            format!("{var}={ms}"),
        ))
    });
    let (timeout, timeout_from) = match set {
        Some((t, var)) => (t, Some(var)),
        None => (DEFAULT_TIMEOUT, None),
    };
    Decision {
        config: Some(Config {
            endpoint: url,
            service_name: service_name(env),
            timeout,
            timeout_from,
            headers: either(
                env,
                "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
                "OTEL_EXPORTER_OTLP_HEADERS",
            )
            .is_some(),
            parent: get(env, "TRACEPARENT").map(String::from),
        }),
        notices,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::util::string_map as env;

    fn endpoint(pairs: &[(&str, &str)]) -> Option<String> {
        from_env(&env(pairs)).config.map(|c| c.endpoint)
    }

    #[test]
    fn nothing_is_traced_without_an_endpoint_or_when_disabled() {
        assert_eq!(from_env(&env(&[])), Decision::default());
        assert_eq!(
            from_env(&env(&[
                ("OTEL_SERVICE_NAME", "x"),
                ("TRACEPARENT", "00-a-b-01")
            ])),
            Decision::default()
        );
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318");
        assert_eq!(
            from_env(&env(&[on, ("OTEL_SDK_DISABLED", "TRUE")])),
            Decision::default()
        );
        assert_eq!(
            from_env(&env(&[on, ("OTEL_TRACES_EXPORTER", "none")])),
            Decision::default()
        );
        assert!(
            from_env(&env(&[on, ("OTEL_SDK_DISABLED", "false")]))
                .config
                .is_some()
        );
    }

    #[test]
    fn the_general_endpoint_is_a_base_the_traces_one_is_taken_as_it_is() {
        assert_eq!(
            endpoint(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318")]).as_deref(),
            Some("http://localhost:4318/v1/traces")
        );
        assert_eq!(
            endpoint(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "https://c.example/otlp/")]).as_deref(),
            Some("https://c.example/otlp/v1/traces")
        );
        assert_eq!(
            endpoint(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://ignored:4318"),
                ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4318/custom"),
            ])
            .as_deref(),
            Some("http://c:4318/custom")
        );
    }

    #[test]
    fn grpc_and_unknown_settings_turn_tracing_off_with_one_line_each() {
        for (var, value) in [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift"),
            ("OTEL_TRACES_EXPORTER", "zipkin"),
        ] {
            let d = from_env(&env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4317"),
                (var, value),
            ]));
            assert_eq!(d.config, None, "{var}={value}");
            assert_eq!(d.notices.len(), 1, "{var}={value}: {:?}", d.notices);
            let line = &d.notices[0];
            assert!(!line.contains('\n'), "{line}");
            assert!(
                line.starts_with("warning: ") && line.contains(var),
                "{line}"
            );
        }
        let d = from_env(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ]));
        assert!(d.notices[0].contains("http/protobuf"), "{:?}", d.notices);
    }

    #[test]
    fn http_json_is_sent_as_protobuf_with_a_note() {
        let d = from_env(&env(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ]));
        assert!(d.config.is_some());
        assert_eq!(d.notices.len(), 1);
        assert!(d.notices[0].starts_with("note: "), "{:?}", d.notices);
    }

    #[test]
    fn an_endpoint_that_is_not_an_http_url_is_refused_with_the_fix() {
        for url in [
            "localhost:4318",
            "grpc://localhost:4317",
            "http://",
            "https:///v1",
        ] {
            let d = from_env(&env(&[("OTEL_EXPORTER_OTLP_ENDPOINT", url)]));
            assert_eq!(d.config, None, "{url}");
            assert!(d.notices[0].contains("http://localhost:4318"), "{d:?}");
        }
    }

    #[test]
    fn service_name_timeout_headers_and_parent() {
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318");
        let c = from_env(&env(&[on])).config.unwrap();
        assert_eq!(c.service_name, "strata");
        assert_eq!(c.timeout, Duration::from_secs(10));
        assert_eq!(c.flush_wait().time, Duration::from_secs(5));
        assert!(!c.headers);
        assert_eq!(c.parent, None);
        let c = from_env(&env(&[
            on,
            ("OTEL_SERVICE_NAME", "platform-ci"),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "800"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20x"),
            (
                "TRACEPARENT",
                "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            ),
        ]))
        .config
        .unwrap();
        assert_eq!(c.service_name, "platform-ci");
        let named = |pairs: &[(&str, &str)]| {
            let mut all = vec![on];
            all.extend_from_slice(pairs);
            from_env(&env(&all)).config.unwrap().service_name
        };
        assert_eq!(
            named(&[(
                "OTEL_RESOURCE_ATTRIBUTES",
                "team=infra, service.name = deployer"
            )]),
            "deployer"
        );
        assert_eq!(
            named(&[
                ("OTEL_RESOURCE_ATTRIBUTES", "service.name=deployer"),
                ("OTEL_SERVICE_NAME", "ci")
            ]),
            "ci"
        );
        assert_eq!(
            named(&[("OTEL_RESOURCE_ATTRIBUTES", "team=infra")]),
            "strata"
        );
        assert_eq!(c.timeout, Duration::from_millis(800));
        assert_eq!(c.flush_wait().time, Duration::from_millis(800));
        assert!(c.headers);
        assert!(c.parent.is_some());
    }

    /// The end of a run's wait is named by what bounds it: strata's cap when the export
    /// timeout is longer (the default 10 s too), else the variable that set it.
    #[test]
    fn the_wait_at_the_end_names_the_limit_that_bounds_it() {
        let on = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318");
        let wait = |pairs: &[(&str, &str)]| {
            let mut all = vec![on];
            all.extend_from_slice(pairs);
            from_env(&env(&all)).config.unwrap().flush_wait()
        };
        for capped in [wait(&[]), wait(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "60000")])] {
            assert_eq!(capped.time, Duration::from_secs(5));
            assert_eq!(
                capped.limit,
                "strata waits at most 5.0s for it at the end of a run, whatever the export timeout"
            );
        }
        let w = wait(&[
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "60000"),
            ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "800"),
        ]);
        assert_eq!(w.time, Duration::from_millis(800));
        assert_eq!(w.limit, "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT=800");
    }
}
