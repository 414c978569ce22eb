//! The object-store tier: a real S3-compatible server (SeaweedFS, built by
//! `scripts/install-s3.sh` and started on loopback by `scripts/s3-test-server.sh`), with
//! requests signed with SigV4 by curl. Conditional writes are proven against it here
//! (strata's lease in the backend depends on them); `pulumi` runs Pulumi's own CLI
//! against it as its backend.
//!
//! The binary is found in `STRATA_S3_BIN_DIR`, else in the folder the install script
//! points `~/.cache/strata/s3/current` at. Missing under `CI=true`: the test fails with
//! the install hint; elsewhere it is skipped, saying so.
//!
//! One server is shared by the tests that run at the same time (each uses a bucket or key
//! prefix of its own and looks only at what it owns); the last one to finish stops it (a
//! Drop guard, also on a panic), and a watchdog stops it if the test binary dies first.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, Weak};

use crate::real_kube::service::{self, Kind, Service};

/// The stack's lease in the object store, two checkouts playing two machines.
mod lease;
/// Pulumi's CLI with its state in the object store.
pub(crate) mod pulumi;
/// What runs leave in the backend, read by another machine: status, history, --changed.
mod records;
/// Two checkouts of the real-Pulumi profile on one bucket: one run at a time, what the
/// other sees, the backend gone.
pub(crate) mod two_machines;

const S3_SERVER: Kind = Kind {
    what: "the S3-compatible server",
    script: "s3-test-server.sh",
    env_file: "s3.env",
    name: "s3",
    bin_var: "STRATA_S3_BIN_DIR",
    binaries: &["weed"],
    hint: "build it with `scripts/install-s3.sh` (Go 1.26.6+ and the Go module proxy), or set STRATA_S3_BIN_DIR to a folder holding SeaweedFS's weed",
};

/// The folder holding `weed`, or `None` (skipped) outside CI.
fn real_bin_dir(test: &str) -> Option<PathBuf> {
    service::real_bin_dir(&S3_SERVER, test)
}

/// A running server (scripts/s3-test-server.sh); stopped when dropped.
pub(crate) struct Server(Service);

/// What the server answered: the status, the response headers (names in lower case),
/// the body.
#[derive(Debug)]
pub(crate) struct Answer {
    pub code: u16,
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Answer {
    pub fn etag(&self) -> &str {
        self.headers
            .get("etag")
            .map(String::as_str)
            .unwrap_or_else(|| panic!("no ETag in {self:?}"))
    }
}

impl Server {
    fn start(bin: &Path) -> Server {
        Server(Service::start(&S3_SERVER, bin))
    }

    pub(crate) fn var(&self, key: &str) -> &str {
        self.0.var(key)
    }

    /// The backend URL of `bucket` on this server, as the README shows it.
    pub(crate) fn backend_url(&self, bucket: &str) -> String {
        self.var("PULUMI_BACKEND_URL").replacen(
            &format!("s3://{}?", self.var("BUCKET")),
            &format!("s3://{bucket}?"),
            1,
        )
    }

    /// The curl command of one signed request (`path` is `/bucket/key...`).
    pub(crate) fn curl(&self, method: &str, path: &str, headers: &[(&str, &str)]) -> Command {
        let mut c = Command::new("curl");
        c.args(["-sS", "--max-time", "30", "-X", method])
            .arg("--aws-sigv4")
            .arg(format!("aws:amz:{}:s3", self.var("AWS_REGION")))
            .arg("--user")
            .arg(format!(
                "{}:{}",
                self.var("AWS_ACCESS_KEY_ID"),
                self.var("AWS_SECRET_ACCESS_KEY")
            ))
            .args(["-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]);
        for (k, v) in headers {
            c.args(["-H", &format!("{k}: {v}")]);
        }
        c.arg(format!("{}{path}", self.var("ENDPOINT")));
        c
    }

    /// One signed request, its body from `body`; the answer.
    pub(crate) fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&str>,
    ) -> Answer {
        let mut c = self.curl(method, path, headers);
        c.args(["-D", "-", "-w", "\n%{http_code}"]);
        if let Some(b) = body {
            c.args(["--data-binary", b]);
        }
        let out = c.stdin(Stdio::null()).output().expect("curl");
        assert!(
            out.status.success(),
            "curl {method} {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        parse_answer(&String::from_utf8_lossy(&out.stdout))
    }

    /// Creates a bucket of the test's own (200, or 409 when it exists already).
    pub(crate) fn bucket(&self, name: &str) {
        let a = self.request("PUT", &format!("/{name}"), &[], None);
        assert!(
            a.code == 200 || a.code == 409,
            "create bucket {name}: {a:?}"
        );
    }

    /// The keys under `prefix` in `bucket` (ListObjectsV2).
    pub(crate) fn list(&self, bucket: &str, prefix: &str) -> Vec<String> {
        // SigV4 signs the query as encoded: every byte but unreserved ones escaped.
        let prefix: String = prefix
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        let a = self.request(
            "GET",
            &format!("/{bucket}?list-type=2&prefix={prefix}"),
            &[],
            None,
        );
        assert_eq!(a.code, 200, "list {bucket}/{prefix}: {a:?}");
        let doc = roxmltree::Document::parse(&a.body)
            .unwrap_or_else(|e| panic!("list {bucket}: {e}: {}", a.body));
        doc.descendants()
            .filter(|n| n.has_tag_name("Key"))
            .filter_map(|n| n.text().map(str::to_string))
            .collect()
    }
}

/// `-D -` headers, then the body, then the status on the last line. The headers of an
/// interim `100 Continue` come first and are skipped.
fn parse_answer(text: &str) -> Answer {
    let (rest, code) = text.rsplit_once('\n').unwrap_or(("", text));
    let mut rest = rest;
    let mut headers = BTreeMap::new();
    while let Some((head, body)) = rest.split_once("\r\n\r\n") {
        if !head.starts_with("HTTP/") {
            break;
        }
        headers = head
            .lines()
            .skip(1)
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
            .collect();
        rest = body;
        if !head.contains(" 100 ") {
            break;
        }
    }
    Answer {
        code: code.trim().parse().unwrap_or(0),
        headers,
        body: rest.to_string(),
    }
}

/// The server, shared by the tests running now; `None` when skipped.
pub(crate) fn server(test: &str) -> Option<Arc<Server>> {
    static SHARED: Mutex<Weak<Server>> = Mutex::new(Weak::new());
    let bin = real_bin_dir(test)?;
    Some(service::shared(&SHARED, || Server::start(&bin)))
}

/// `run` ended with `code`, its stderr saying each of `parts` (`what`: whose run, for
/// the failure's words).
pub(crate) fn assert_ended(run: &crate::support::Run, code: i32, parts: &[&str], what: &str) {
    assert_eq!(run.code, code, "{what}: {run:?}");
    for part in parts {
        assert!(run.stderr.contains(part), "{what}: no {part:?} in {run:?}");
    }
}

/// The server's process, stopped (SIGSTOP: it takes connections and never answers)
/// until dropped, a failed assertion's unwinding too. Only a server of the test's own
/// (`Server::start`), never the shared one.
pub(crate) struct Paused(i32);

impl Paused {
    pub(crate) fn new(s: &Server) -> Paused {
        let pid: i32 = s.var("WEED_PID").parse().expect("WEED_PID");
        // SAFETY: a signal to the server this test started.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        Paused(pid)
    }
}

impl Drop for Paused {
    fn drop(&mut self) {
        // SAFETY: a signal to the server this test started.
        unsafe { libc::kill(self.0, libc::SIGCONT) };
    }
}

// ---------------------------------------------------------------------------------------

/// `If-None-Match: *` creates an absent key and is refused (412) on an existing one,
/// which keeps its content.
#[test]
fn if_none_match_creates_an_absent_key_and_is_refused_on_an_existing_one() {
    let Some(s) = server("real_s3::if_none_match") else {
        return;
    };
    let key = format!("/{}/if-none-match/lease.json", s.var("BUCKET"));
    let star = [("If-None-Match", "*")];
    let first = s.request("PUT", &key, &star, Some("first"));
    assert_eq!(first.code, 200, "{first:?}");
    let second = s.request("PUT", &key, &star, Some("second"));
    assert_eq!(second.code, 412, "{second:?}");
    assert!(second.body.contains("PreconditionFailed"), "{second:?}");
    let got = s.request("GET", &key, &[], None);
    assert_eq!((got.code, got.body.as_str()), (200, "first"), "{got:?}");
}

/// `If-Match: <etag>` replaces the object when the ETag is the current one, and is
/// refused (412) with a stale one, which changes nothing.
#[test]
fn if_match_replaces_with_the_current_etag_and_is_refused_with_a_stale_one() {
    let Some(s) = server("real_s3::if_match") else {
        return;
    };
    let key = format!("/{}/if-match/lease.json", s.var("BUCKET"));
    let v1 = s.request("PUT", &key, &[("If-None-Match", "*")], Some("v1"));
    assert_eq!(v1.code, 200, "{v1:?}");
    let e1 = v1.etag().to_string();
    let v2 = s.request("PUT", &key, &[("If-Match", &e1)], Some("v2"));
    assert_eq!(v2.code, 200, "{v2:?}");
    let e2 = v2.etag().to_string();
    assert_ne!(e1, e2);
    let stale = s.request("PUT", &key, &[("If-Match", &e1)], Some("v3"));
    assert_eq!(stale.code, 412, "{stale:?}");
    let got = s.request("GET", &key, &[], None);
    assert_eq!((got.code, got.body.as_str()), (200, "v2"), "{got:?}");
    assert_eq!(got.etag(), e2);
    // The current ETag works again after the refusal.
    let v3 = s.request("PUT", &key, &[("If-Match", &e2)], Some("v3"));
    assert_eq!(v3.code, 200, "{v3:?}");
}

/// Two curl processes race `If-None-Match: *` on one key, round after round: exactly one
/// wins each round (200), the other is refused (412, or 409 for a write the server saw
/// in flight), and the object holds the winner's body.
#[test]
fn two_processes_racing_if_none_match_never_both_win() {
    let Some(s) = server("real_s3::race") else {
        return;
    };
    const ROUNDS: usize = 40;
    let mut wins = [0usize; 2];
    for round in 0..ROUNDS {
        let key = format!("/{}/race/round-{round}", s.var("BUCKET"));
        let racers: Vec<_> = ["racer-0", "racer-1"]
            .iter()
            .map(|body| {
                let mut c = s.curl("PUT", &key, &[("If-None-Match", "*")]);
                c.args([
                    "-o",
                    "/dev/null",
                    "-w",
                    "%{http_code}",
                    "--data-binary",
                    body,
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn curl")
            })
            .collect();
        let codes: Vec<u16> = racers
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().expect("curl");
                String::from_utf8_lossy(&out.stdout)
                    .trim()
                    .parse()
                    .unwrap_or(0)
            })
            .collect();
        let winners: Vec<usize> = (0..2).filter(|i| codes[*i] == 200).collect();
        assert_eq!(winners.len(), 1, "round {round}: {codes:?}");
        let loser = 1 - winners[0];
        assert!(
            codes[loser] == 412 || codes[loser] == 409,
            "round {round}: {codes:?}"
        );
        let got = s.request("GET", &key, &[], None);
        assert_eq!(got.body, format!("racer-{}", winners[0]), "round {round}");
        wins[winners[0]] += 1;
    }
    eprintln!("real_s3::race: {ROUNDS} rounds, wins {wins:?}");
}
