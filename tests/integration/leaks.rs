//! Credentials inside the URLs of a run's environment (issue 32): a backend's
//! `user:password@`, a collector's `user:token@` or `?api_key=` never reach the terminal,
//! the logs, the journal, its index, the report, nor a command line. Nor does a field of
//! a secret output that is an object (issue 43).

use crate::otlp::Receiver;
use crate::run::{DIAMOND, DIAMOND_PATHS, run, workspace};
use crate::support::*;

/// Every file strata left under `.strata/` that holds `needle`.
fn files_holding(ws: &Ws, needle: &str) -> Vec<String> {
    ws.files_under(".strata")
        .into_iter()
        .filter(|(_, bytes)| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        .map(|(p, _)| p.display().to_string())
        .collect()
}

const BACKEND_PW: &str = "Pw-VALUE-4417";

/// A backend URL with a password: the CLI's error quotes the URL, strata's summary,
/// logs, journal and report mask the password; preflight's own message too.
#[test]
fn a_backend_urls_password_is_masked_everywhere() {
    let mut ws = workspace(DIAMOND, DIAMOND_PATHS);
    let url = format!("postgres://strata:{BACKEND_PW}@db.invalid:5432/state");
    ws.set_env("PULUMI_BACKEND_URL", &url);
    let r = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_ne!(r.code, 0, "the fake takes file backends only: {r:?}");
    assert!(!r.all().contains(BACKEND_PW), "{r:?}");
    assert!(
        r.all().contains("postgres://strata:[secret]@db.invalid"),
        "the URL is still shown, masked: {r:?}"
    );
    let report = ws.strata(&["report", "-s", "dev"]);
    assert!(!report.all().contains(BACKEND_PW), "{report:?}");
    assert_eq!(files_holding(&ws, BACKEND_PW), Vec::<String>::new());
    assert!(
        !files_holding(&ws, "[secret]").is_empty(),
        "the logs show the masked URL"
    );

    ws.env.retain(|(k, _)| k != "PULUMI_CONFIG_PASSPHRASE");
    let r = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("passphrase"), "{r:?}");
    assert!(!r.all().contains(BACKEND_PW), "{r:?}");
    assert!(r.all().contains("postgres://strata:[secret]@"), "{r:?}");
}

/// A traces endpoint with credentials is not handed to Pulumi (a command line is
/// readable by any local user): one note says so; strata's own spans still go, and
/// nothing strata writes holds the token.
#[test]
fn a_traces_endpoint_with_credentials_stays_off_command_lines() {
    let otlp = Receiver::start();
    let mut ws = workspace(DIAMOND, DIAMOND_PATHS);
    let token = "T0ken-VALUE-8812";
    let endpoint = otlp
        .endpoint()
        .replace("http://", &format!("http://collector:{token}@"));
    ws.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint);
    let r = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 0, "{r:?}");
    let notes: Vec<&str> = r
        .stderr
        .lines()
        .chain(r.stdout.lines())
        .filter(|l| l.contains("carries credentials"))
        .collect();
    assert_eq!(notes.len(), 1, "{r:?}");
    assert!(!r.all().contains(token), "{r:?}");
    for c in ws.calls() {
        assert!(!c.to_string().contains(token), "on a command line: {c}");
        assert!(!c.to_string().contains("--otel-traces"), "{c}");
    }
    assert_eq!(files_holding(&ws, token), Vec::<String>::new());
    assert!(!otlp.spans().is_empty(), "strata's own spans are sent");
}

/// A collector that is down: the warning names the endpoint with its token masked.
#[test]
fn the_trace_warning_masks_the_endpoints_token() {
    let mut ws = workspace(DIAMOND, DIAMOND_PATHS);
    let key = "k3y-VALUE-5530";
    ws.set_env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        &format!("http://127.0.0.1:9/otlp?api_key={key}"),
    );
    let r = ws.run_ok("up", &[]);
    r.expect_stderr(&["api_key=[secret]"]);
    assert!(!r.all().contains(key), "{r:?}");
    assert_eq!(files_holding(&ws, key), Vec::<String>::new());
}

/// A secret output that is an object: a field of it printed alone by a dependent is
/// masked on the terminal and in the project log (issue 43, item 5).
#[test]
fn each_field_of_a_secret_object_output_is_masked() {
    let mut ws = workspace(
        "  - path: alpha\n  - path: show\n    inputs:\n      show:db: alpha:db\n",
        &["alpha"],
    );
    ws.set_env(
        &format!(
            "FAKE_PULUMI_SECRET_OUTPUTS_{}",
            crate::run::hook_key("alpha")
        ),
        r#"{"db":{"user":"admin-ops-7","password":"hunter2-long"}}"#,
    );
    ws.command_project(
        "show",
        "printf 'pw=%s\\n' \"$(printf '%s' \"$STRATA_INPUT_SHOW_DB\" | sed 's/.*\"password\": *\"\\([^\"]*\\)\".*/\\1/')\"",
        "true",
    );
    let r = run(&ws, "up", &["--verbose"]);
    assert_eq!(r.code, 0, "{r:?}");
    let logs = ws.texts_under(".strata/dev/logs");
    assert!(logs.contains("pw="), "the project ran: {logs}");
    for (what, text) in [("terminal", r.all()), ("log", logs)] {
        assert!(!text.contains("hunter2-long"), "in the {what}: {text}");
        assert!(text.contains("pw=[secret]"), "{what}: {text}");
    }
}
