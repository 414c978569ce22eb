//! First run and secrets (issue 6, DESIGN.md §1 "Secrets"): the prompts on a real
//! pseudo-terminal, non-interactive first runs, the age store (`config/secrets/<stack>.age`),
//! `strata secrets set|list|rm`, the `@secrets` step against a fake Kubernetes API server,
//! secrets as Pulumi secure config, and redaction everywhere strata writes.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};

use crate::support::*;

#[path = "../support/fake_kube.rs"]
pub(crate) mod fake_kube;

use fake_kube::{FakeKube, encode_base64};

// ---------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------

/// A fresh X25519 identity in `age-keygen` format at `home/<name>`; returns its path.
fn identity_file(ws: &Ws, name: &str) -> PathBuf {
    use age::secrecy::ExposeSecret;
    let identity = age::x25519::Identity::generate();
    let path = ws.path(&format!("home/{name}"));
    std::fs::write(
        &path,
        format!(
            "# created: 2024-01-01T00:00:00Z\n# public key: {}\n{}\n",
            identity.to_public(),
            identity.to_string().expose_secret()
        ),
    )
    .unwrap();
    path
}

/// Encrypts the workspace's store to a fresh identity (`STRATA_AGE_IDENTITY`).
fn use_identity(ws: &mut Ws, name: &str) -> PathBuf {
    let path = identity_file(ws, name);
    ws.set_env("STRATA_AGE_IDENTITY", path.to_str().unwrap());
    path
}

const STORE: &str = "config/secrets/dev.age";
const BEGIN: &str = "-----BEGIN AGE ENCRYPTED FILE-----";
const END: &str = "-----END AGE ENCRYPTED FILE-----";

/// A workspace on stack `dev` (its environment file's) whose profile `lab` asks the
/// secrets `asks` (key, prompt) and runs `infrastructure` (YAML list items).
pub(crate) fn lab_asking(asks: &[(&str, &str)], infrastructure: &str) -> Ws {
    let mut yaml = format!("{HEAD}secrets:\n");
    for (key, prompt) in asks {
        yaml.push_str(&format!("  - key: {key}\n    prompt: {prompt}\n"));
    }
    yaml.push_str(&format!("infrastructure:\n{infrastructure}"));
    let ws = Ws::new();
    ws.profile("lab", &yaml);
    ws.env_file("PULUMI_STACK=dev\n");
    ws
}

fn contains_bytes(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// An infrastructure command project whose `up` outputs the fake cluster's kubeconfig
/// (for the profile's kubeconfig hook) and notes that it ran in `$HOME/infra-ran`.
pub(crate) fn cluster_project(ws: &Ws, kube: &FakeKube) {
    let outputs = json!({ "kubeconfig": kube.kubeconfig() });
    ws.write(
        "projects/infra/cluster/outputs.json",
        &serde_json::to_string(&outputs).unwrap(),
    );
    ws.command_project(
        "infra/cluster",
        "echo infra up; echo ran >> \"$HOME/infra-ran\"; cat outputs.json > \"$STRATA_OUTPUTS_FILE\"",
        "echo infra down",
    );
}

fn infra_ran(ws: &Ws) -> bool {
    ws.exists("home/infra-ran")
}

/// The profile of most tests: a profile-level secret, a kubeconfig-producing
/// infrastructure project, and a kubernetes command project with its own secrets.
pub(crate) fn kube_profile(secret_name: Option<&str>, app_secrets: &[(&str, &str)]) -> String {
    let mut y = String::from(HEAD);
    if let Some(name) = secret_name {
        y.push_str(&format!("secret_name: {name}\n"));
    }
    y.push_str(
        "secrets:\n  - key: monitoring:adminpass\n    prompt: Prometheus admin password\n\
         infrastructure:\n  - path: infra/cluster\n    on_success:\n      - kubeconfig: { output: kubeconfig }\n\
         kubernetes:\n  - path: k8s/app\n",
    );
    if !app_secrets.is_empty() {
        y.push_str("    secrets:\n");
        for (k, p) in app_secrets {
            y.push_str(&format!("      - key: {k}\n        prompt: {p}\n"));
        }
    }
    y
}

pub(crate) const ADMIN: &str = "adm1n-Pa55-VALUE-71c4";
pub(crate) const DB: &str = "db-Pa55-VALUE-3e9a";
pub(crate) const API: &str = "api-KEY-VALUE-58b0";

/// A workspace with the kube profile (`lab`), the cluster project and an app project
/// that echoes its secret, the store keyed by an identity, secrets given by env.
pub(crate) fn kube_ws(kube: &FakeKube, secret_name: Option<&str>) -> Ws {
    let mut ws = Ws::new();
    ws.profile(
        "lab",
        &kube_profile(
            secret_name,
            &[
                ("apps:db-password", "Database password"),
                ("apps:api-key", "API key"),
            ],
        ),
    );
    cluster_project(&ws, kube);
    ws.command_project(
        "k8s/app",
        "echo \"app sees db=$STRATA_SECRET_APPS_DB_PASSWORD\"",
        "echo app down",
    );
    ws.env_file("PULUMI_STACK=dev\n");
    use_identity(&mut ws, "id.txt");
    ws.set_env("STRATA_PROVIDER", "lab");
    ws.set_env("STRATA_SECRET_MONITORING_ADMINPASS", ADMIN);
    ws.set_env("STRATA_SECRET_APPS_DB_PASSWORD", DB);
    ws.set_env("STRATA_SECRET_APPS_API_KEY", API);
    ws
}

fn event_of<'a>(events: &'a [Value], event: &str, project: &str) -> Option<&'a Value> {
    events
        .iter()
        .find(|e| e["event"] == json!(event) && e["project"] == json!(project))
}

/// Removes ANSI escape sequences (CSI and two-byte escapes) from terminal output.
fn strip_ansi(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            match chars.next() {
                Some('[') => {
                    for c in chars.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&c) {
                            break;
                        }
                    }
                }
                Some(']') => {
                    // OSC: up to BEL or ST.
                    while let Some(c) = chars.next() {
                        if c == '\u{7}' {
                            break;
                        }
                        if c == '\u{1b}' {
                            chars.next();
                            break;
                        }
                    }
                }
                _ => {}
            }
        } else {
            out.push(c);
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// A pseudo-terminal driver (libc: posix_openpt), for the prompts.
// ---------------------------------------------------------------------------------------

mod pty {
    use std::fs::File;
    use std::io::{Read, Write};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::sync::{Arc, Mutex};
    use std::thread::JoinHandle;
    use std::time::{Duration, Instant};

    pub const TIMEOUT: Duration = Duration::from_secs(90);

    /// A child process on the slave side of a fresh pty; we hold the master.
    pub struct Pty {
        master: File,
        child: Child,
        out: Arc<Mutex<Vec<u8>>>,
        reader: Option<JoinHandle<()>>,
        /// Position in the ANSI-stripped output up to which prompts were consumed.
        cursor: usize,
    }

    fn check(rc: i32, what: &str) {
        assert!(rc >= 0, "{what}: {}", std::io::Error::last_os_error());
    }

    impl Pty {
        pub fn spawn(mut cmd: Command) -> Pty {
            let (master, slave) = unsafe {
                let m = libc::open(
                    c"/dev/ptmx".as_ptr(),
                    libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
                );
                check(m, "open /dev/ptmx");
                check(libc::grantpt(m), "grantpt");
                check(libc::unlockpt(m), "unlockpt");
                let mut name = [0 as libc::c_char; 256];
                assert_eq!(
                    libc::ptsname_r(m, name.as_mut_ptr(), name.len()),
                    0,
                    "ptsname_r"
                );
                let s = libc::open(
                    name.as_ptr(),
                    libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC,
                );
                check(s, "open the pty slave");
                let size = libc::winsize {
                    ws_row: 50,
                    ws_col: 250,
                    ws_xpixel: 0,
                    ws_ypixel: 0,
                };
                check(libc::ioctl(m, libc::TIOCSWINSZ, &size), "TIOCSWINSZ");
                (File::from_raw_fd(m), OwnedFd::from_raw_fd(s))
            };
            cmd.stdin(Stdio::from(slave.try_clone().unwrap()))
                .stdout(Stdio::from(slave.try_clone().unwrap()))
                .stderr(Stdio::from(slave));
            unsafe {
                cmd.pre_exec(|| {
                    // A new session whose controlling terminal is the pty (/dev/tty).
                    if libc::setsid() < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let child = cmd.spawn().expect("spawn strata on a pty");
            // The Command holds copies of the slave: close them, so that reading the
            // master ends (EIO) when the child's side is closed.
            drop(cmd);
            let out = Arc::new(Mutex::new(Vec::new()));
            let mut reader_file = master.try_clone().unwrap();
            let sink = out.clone();
            let reader = std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                loop {
                    match reader_file.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                    }
                }
            });
            Pty {
                master,
                child,
                out,
                reader: Some(reader),
                cursor: 0,
            }
        }

        /// Everything the child wrote to the terminal so far.
        pub fn raw(&self) -> String {
            String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
        }

        pub fn text(&self) -> String {
            super::strip_ansi(&self.raw())
        }

        /// Waits until `needle` appears after the cursor; returns the text from the
        /// cursor to the end of the match, and moves the cursor past it.
        pub fn expect(&mut self, needle: &str) -> String {
            let start = Instant::now();
            loop {
                let text = self.text();
                if let Some(at) = text.get(self.cursor..).and_then(|t| t.find(needle)) {
                    let end = self.cursor + at + needle.len();
                    let seen = text[self.cursor..end].to_string();
                    self.cursor = end;
                    return seen;
                }
                if start.elapsed() > TIMEOUT {
                    panic!("timed out waiting for {needle:?} on the terminal; it shows:\n{text}");
                }
                if let Ok(Some(status)) = self.child.try_wait() {
                    std::thread::sleep(Duration::from_millis(200));
                    let text = self.text();
                    if !text[self.cursor.min(text.len())..].contains(needle) {
                        panic!(
                            "strata exited ({status}) before showing {needle:?}; the terminal shows:\n{text}"
                        );
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }

        fn lflag(&self) -> libc::tcflag_t {
            // On Linux, termios ioctls on the master act on the slave's settings.
            let mut t: libc::termios = unsafe { std::mem::zeroed() };
            check(
                unsafe { libc::tcgetattr(self.master.as_raw_fd(), &mut t) },
                "tcgetattr",
            );
            t.c_lflag
        }

        fn wait_mode(&self, what: &str, ok: impl Fn(libc::tcflag_t) -> bool) {
            let start = Instant::now();
            while !ok(self.lflag()) {
                if start.elapsed() > TIMEOUT {
                    panic!(
                        "timed out waiting for the terminal to be {what}; it shows:\n{}",
                        self.text()
                    );
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }

        /// Types a line at a dialoguer text prompt: once the child reads keys in raw
        /// mode (no kernel echo), the text and Enter.
        pub fn type_line(&mut self, text: &str) {
            self.wait_mode("in raw mode (reading keys)", |l| l & libc::ICANON == 0);
            std::thread::sleep(Duration::from_millis(30));
            self.wait_mode("in raw mode (reading keys)", |l| l & libc::ICANON == 0);
            self.master
                .write_all(format!("{text}\r").as_bytes())
                .unwrap();
            self.master.flush().unwrap();
        }

        /// Types at a no-echo prompt: once the terminal reads a line with echo off.
        pub fn type_secret(&mut self, text: &str) {
            self.wait_mode("reading a line without echo", |l| {
                l & libc::ECHO == 0 && l & libc::ICANON != 0
            });
            self.master
                .write_all(format!("{text}\r").as_bytes())
                .unwrap();
            self.master.flush().unwrap();
        }

        /// Waits for the child to exit; returns its exit code and everything it showed.
        pub fn wait(mut self) -> (i32, String) {
            let start = Instant::now();
            let status = loop {
                if let Some(status) = self.child.try_wait().unwrap() {
                    break status;
                }
                if start.elapsed() > TIMEOUT {
                    let _ = self.child.kill();
                    panic!("strata did not exit; the terminal shows:\n{}", self.text());
                }
                std::thread::sleep(Duration::from_millis(20));
            };
            // The reader ends when the last holder of the slave closes it.
            if let Some(reader) = self.reader.take() {
                let until = Instant::now() + Duration::from_secs(10);
                while !reader.is_finished() && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(20));
                }
                if reader.is_finished() {
                    let _ = reader.join();
                }
            }
            (status.code().unwrap_or(-1), self.raw())
        }
    }

    impl Drop for Pty {
        fn drop(&mut self) {
            if let Ok(None) = self.child.try_wait() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// First run
// ---------------------------------------------------------------------------------------

/// A terminal first run: no PULUMI_STACK anywhere. strata asks the stack name, the
/// profile's config keys (default shown and taken on Enter, re-asked until the value
/// parses as its type), the store's passphrase (with confirmation: a new store) and the
/// secret (no echo, confirmation); then the run goes on and succeeds.
#[test]
fn terminal_first_run_prompts_and_writes_env_file_stack_config_and_store() {
    let kube = FakeKube::start();
    let ws = Ws::new();
    ws.profile(
        "lab",
        &format!(
            "{HEAD}cluster: {{kubeconfig: ~/.kube/config, context: fake}}\nconfig:\n  \
             - key: lab:region\n    prompt: Lab region\n    default: us-west-2\n  \
             - key: lab:nodes\n    prompt: Number of nodes\n    default: 3\n    type: int\n  \
             - key: lab:cluster_name\n    prompt: Cluster name\n\
             secrets:\n  - key: lab:token\n    prompt: Lab API token\n\
             infrastructure:\n  - path: infra/cluster\n\
             kubernetes:\n  - path: k8s/app\n"
        ),
    );
    ws.command_project("infra/cluster", "echo infra up", "echo infra down");
    ws.command_project(
        "k8s/app",
        "echo \"token is $STRATA_SECRET_LAB_TOKEN\"",
        "echo app down",
    );
    kube.write_kubeconfig(&ws.path("home/.kube/config"))
        .unwrap();
    // An env file with other lines and no newline at the end (MARA appended without one).
    let before_env = "# lab settings\nFOO=bar\nexport LAB_MODE=\"fast mode\"";
    ws.env_file(before_env);

    const SECRET: &str = "Pty-T0ken-VALUE-c0ffee";
    const PASSPHRASE: &str = "pty-Pass-phrase-VALUE-d00d";

    let mut term = pty::Pty::spawn(ws.command(&["up", "--provider", "lab"]));

    let seen = term.expect("Stack name");
    assert!(!seen.contains("error"), "{seen}");
    term.type_line("prod");

    term.expect("Lab region (lab:region)");
    let shown = term.expect("us-west-2");
    assert!(
        !shown.contains('\n'),
        "the default is shown on the prompt line: {shown:?}"
    );
    term.type_line(""); // Enter takes the default

    term.expect("Number of nodes (lab:nodes)");
    term.expect("3");
    term.type_line("three");
    term.expect("not a whole number");
    term.type_line("5");

    term.expect("Cluster name (lab:cluster_name)");
    term.type_line("alpha");

    term.expect("Passphrase");
    term.type_secret(PASSPHRASE);
    term.expect("Repeat");
    term.type_secret(PASSPHRASE);

    term.expect("Lab API token (lab:token)");
    term.type_secret(SECRET);
    term.expect("Repeat");
    term.type_secret(SECRET);

    let (code, raw) = term.wait();
    let text = strip_ansi(&raw);
    assert_eq!(code, 0, "the run after the prompts failed:\n{text}");

    // The typed secret and passphrase never appear on the terminal.
    assert!(!raw.contains(SECRET), "the secret was echoed:\n{text}");
    assert!(
        !raw.contains(PASSPHRASE),
        "the passphrase was echoed:\n{text}"
    );

    // The env file: every old line intact, PULUMI_STACK added, ends with a newline.
    let env = ws.read("config/pulumi/environment");
    assert!(env.ends_with('\n'), "{env:?}");
    let lines: Vec<&str> = env.lines().collect();
    assert_eq!(
        &lines[..3],
        &["# lab settings", "FOO=bar", "export LAB_MODE=\"fast mode\""],
        "{env:?}"
    );
    assert!(
        lines.iter().any(|l| l.trim() == "PULUMI_STACK=prod"),
        "{env:?}"
    );
    assert_eq!(lines.len(), 4, "{env:?}");

    // The stack config: the answers, typed, plus kubernetes:infra_type.
    let cfg: serde_yaml::Value =
        serde_yaml::from_str(&ws.read("config/pulumi/Pulumi.prod.yaml")).unwrap();
    let c = &cfg["config"];
    assert_eq!(c["lab:region"].as_str(), Some("us-west-2"), "{cfg:?}");
    assert!(
        c["lab:nodes"].as_i64() == Some(5) || c["lab:nodes"].as_str() == Some("5"),
        "{cfg:?}"
    );
    assert_eq!(c["lab:cluster_name"].as_str(), Some("alpha"), "{cfg:?}");
    assert_eq!(c["kubernetes:infra_type"].as_str(), Some("test"), "{cfg:?}");

    // The store holds the typed secret, under the typed passphrase.
    let bytes = std::fs::read(ws.path("config/secrets/prod.age")).unwrap();
    let identity = age::scrypt::Identity::new(PASSPHRASE.to_string().into());
    let plain = age::decrypt(&identity, &bytes).expect("decrypt the store with the passphrase");
    let mut values: BTreeMap<String, String> = serde_json::from_slice(&plain).unwrap();
    // Beside it, the random key of the digests strata keeps under `.strata/`.
    let digest_key = values.remove("strata.digest-key").unwrap_or_default();
    assert_eq!(digest_key.len(), 64, "{digest_key:?}");
    assert_eq!(
        values,
        BTreeMap::from([("lab:token".to_string(), SECRET.to_string())])
    );

    // And the secret reached the cluster, while the project's echo was redacted.
    assert_eq!(
        kube.secret_data("lab", "strata-secrets").unwrap()["token"],
        SECRET
    );
    let logs: String = ws
        .files_under(".strata/prod/logs")
        .iter()
        .map(|(_, b)| String::from_utf8_lossy(b).into_owned())
        .collect();
    assert!(logs.contains("token is [secret]"), "{logs}");
    assert!(!logs.contains(SECRET), "{logs}");
}

/// A non-interactive first run asks nothing: every config key without a value is listed
/// at once, with how to set it, exit 3.
#[test]
fn non_interactive_first_run_lists_every_missing_config_key() {
    let ws = Ws::new();
    ws.profile(
        "lab",
        &format!(
            "{HEAD}config:\n  \
             - key: lab:region\n    prompt: Lab region\n    default: us-west-2\n  \
             - key: lab:account\n    prompt: Account id\n  \
             - key: lab:nodes\n    prompt: Number of nodes\n    type: int\n  \
             - key: net:cidr\n    prompt: Network range\n\
             infrastructure:\n  - path: infra/cluster\n"
        ),
    );
    ws.command_project("infra/cluster", "echo ran >> \"$HOME/infra-ran\"", "true");
    let r = ws.strata(&["up", "--stack", "dev", "--provider", "lab"]);
    assert_eq!(r.code, 3, "{r:?}");
    let err = r.stderr.clone();
    for key in ["lab:account", "lab:nodes", "net:cidr"] {
        assert!(err.contains(key), "missing key {key} not named: {r:?}");
        assert!(
            err.contains(&format!("pulumi config set {key}")),
            "no way to set {key}: {r:?}"
        );
    }
    r.expect_stderr(&["--config-file", "Pulumi.dev.yaml"]);
    assert!(
        !err.contains("lab:region"),
        "a key with a default is not missing: {r:?}"
    );
    assert!(
        !infra_ran(&ws),
        "nothing runs before the config is complete"
    );

    // Without a stack name, nothing is asked either: exit 3, and no env file is written.
    let r = ws.strata(&["up", "--provider", "lab"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("--stack"), "{r:?}");
    assert!(r.stderr.contains("PULUMI_STACK"), "{r:?}");
    assert!(!ws.exists("config/pulumi/environment"));
}

// ---------------------------------------------------------------------------------------
// The store
// ---------------------------------------------------------------------------------------

/// `STRATA_SECRET_<KEY>` (key upper-cased, `:` and `-` as `_`) fills the store.
#[test]
fn secrets_from_environment_end_up_in_the_store() {
    let kube = FakeKube::start();
    let ws = kube_ws(&kube, None);
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(ws.exists(STORE));

    let r = ws.strata(&["secrets", "list"]);
    assert_eq!(r.code, 0, "{r:?}");
    for key in ["monitoring:adminpass", "apps:db-password", "apps:api-key"] {
        assert!(r.stdout.contains(key), "{key} not listed: {r:?}");
    }

    // Stored: a run without the variables needs nothing more, and uses the same values.
    let mut ws = ws;
    ws.env.retain(|(k, _)| !k.starts_with("STRATA_SECRET_"));
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        kube.secret_data("apps", "strata-secrets").unwrap()["api-key"],
        API
    );
    assert_eq!(
        kube.secret_data("monitoring", "strata-secrets").unwrap()["adminpass"],
        ADMIN
    );
}

/// A missing secret in a non-interactive run: exit 3 naming each one and how to set it,
/// before anything runs; nothing is written to the store.
#[test]
fn missing_secrets_non_interactively_are_listed_with_how_to_set_them() {
    let kube = FakeKube::start();
    let mut ws = kube_ws(&kube, None);
    ws.env.retain(|(k, _)| {
        k != "STRATA_SECRET_APPS_DB_PASSWORD" && k != "STRATA_SECRET_APPS_API_KEY"
    });
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 3, "{r:?}");
    for (key, var) in [
        ("apps:db-password", "STRATA_SECRET_APPS_DB_PASSWORD"),
        ("apps:api-key", "STRATA_SECRET_APPS_API_KEY"),
    ] {
        assert!(r.stderr.contains(key), "{key} not named: {r:?}");
        assert!(
            r.stderr.contains(&format!("strata secrets set {key}")),
            "{r:?}"
        );
        assert!(r.stderr.contains(var), "{var} not named: {r:?}");
    }
    assert!(
        !r.stderr.contains("monitoring:adminpass"),
        "a secret given by env is not missing: {r:?}"
    );
    assert!(
        !infra_ran(&ws),
        "nothing runs before the secrets are complete"
    );
    assert!(kube.requests().is_empty(), "{:?}", kube.requests());
    assert!(
        !ws.exists(STORE),
        "nothing is stored when the run cannot go on"
    );
    assert!(!r.all().contains(ADMIN), "{r:?}");
}

/// The store file: ASCII-armoured age, mode 0600, no key and no value in clear, no
/// temp file left beside it.
#[test]
fn store_file_is_armoured_private_and_holds_no_plaintext() {
    use std::os::unix::fs::PermissionsExt;
    let kube = FakeKube::start();
    let ws = kube_ws(&kube, None);
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = strata_stdin(&ws, &["secrets", "set", "extra:note"], "note-VALUE-9911\n");
    assert_eq!(r.code, 0, "{r:?}");

    let bytes = std::fs::read(ws.path(STORE)).unwrap();
    assert!(bytes.is_ascii(), "the store is not ASCII");
    let text = String::from_utf8(bytes.clone()).unwrap();
    assert!(text.starts_with(BEGIN), "{text}");
    assert!(text.trim_end().ends_with(END), "{text}");
    for needle in [
        ADMIN,
        DB,
        API,
        "note-VALUE-9911",
        "monitoring:adminpass",
        "apps:db-password",
        "adminpass",
    ] {
        assert!(!text.contains(needle), "{needle} in the store file");
        assert!(!contains_bytes(
            &bytes,
            encode_base64(needle.as_bytes()).as_bytes()
        ));
    }
    let mode = std::fs::metadata(ws.path(STORE))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "store mode {mode:o}");
    let names: Vec<String> = std::fs::read_dir(ws.path("config/secrets"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["dev.age"], "only the store in config/secrets");

    // It is a real age file for the identity: decrypting gives the JSON of the values.
    let id_text = std::fs::read_to_string(ws.path("home/id.txt")).unwrap();
    let line = id_text
        .lines()
        .find(|l| l.starts_with("AGE-SECRET-KEY-"))
        .unwrap();
    let identity: age::x25519::Identity = line.parse().unwrap();
    let plain = age::decrypt(&identity, &bytes).unwrap();
    let values: BTreeMap<String, String> = serde_json::from_slice(&plain).unwrap();
    assert_eq!(values["apps:db-password"], DB);
    assert_eq!(values["extra:note"], "note-VALUE-9911");
}

/// Asserts a clean failure: exit 3, a message containing `what`, the store unchanged,
/// no secret value shown.
fn fails_cleanly(ws: &Ws, r: &Run, before: &[u8], what: &str) {
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains(what), "expected {what:?}: {r:?}");
    assert!(
        r.stderr.contains("dev.age"),
        "the message names the store: {r:?}"
    );
    assert_eq!(
        std::fs::read(ws.path(STORE)).unwrap(),
        before,
        "the store file was changed"
    );
    for v in [ADMIN, DB, API, "new-VALUE-4242"] {
        assert!(!r.all().contains(v), "{r:?}");
    }
    assert!(
        !r.stderr.contains("panicked"),
        "a clean error, not a panic: {r:?}"
    );
}

#[test]
fn wrong_passphrase_fails_cleanly_and_leaves_the_store() {
    let mut ws = lab_asking(&[("lab:token", "Token")], "  - path: infra/cluster\n");
    ws.command_project("infra/cluster", "echo ran >> \"$HOME/infra-ran\"", "true");
    ws.set_env("STRATA_PASSPHRASE", "the-right-passphrase");
    let r = strata_stdin(&ws, &["secrets", "set", "lab:token"], ADMIN);
    assert_eq!(r.code, 0, "{r:?}");
    let before = std::fs::read(ws.path(STORE)).unwrap();

    ws.set_env("STRATA_PASSPHRASE", "a-wrong-passphrase");
    let r = ws.strata(&["secrets", "list"]);
    fails_cleanly(&ws, &r, &before, "wrong passphrase");
    let r = strata_stdin(&ws, &["secrets", "set", "lab:other"], "new-VALUE-4242");
    fails_cleanly(&ws, &r, &before, "wrong passphrase");
    let r = ws.strata(&["up", "--provider", "lab"]);
    fails_cleanly(&ws, &r, &before, "wrong passphrase");
    assert!(!infra_ran(&ws));
}

#[test]
fn tampered_or_truncated_store_fails_cleanly_and_is_left_as_is() {
    let kube = FakeKube::start();
    let ws = kube_ws(&kube, None);
    let r = strata_stdin(&ws, &["secrets", "set", "monitoring:adminpass"], ADMIN);
    assert_eq!(r.code, 0, "{r:?}");
    let good = std::fs::read_to_string(ws.path(STORE)).unwrap();

    // One base64 character of the payload (the last full armour line) changed.
    let mut lines: Vec<String> = good.lines().map(str::to_string).collect();
    let end = lines.iter().position(|l| l == END).unwrap();
    let target = end - 2;
    assert!(target >= 1 && lines[target].len() > 20, "{good}");
    let mut chars: Vec<char> = lines[target].chars().collect();
    chars[10] = if chars[10] == 'A' { 'B' } else { 'A' };
    lines[target] = chars.into_iter().collect();
    let tampered = lines.join("\n") + "\n";
    std::fs::write(ws.path(STORE), &tampered).unwrap();
    let before = tampered.into_bytes();

    let r = ws.strata(&["secrets", "list"]);
    fails_cleanly(&ws, &r, &before, "damaged");
    let r = strata_stdin(&ws, &["secrets", "set", "apps:other"], "new-VALUE-4242");
    fails_cleanly(&ws, &r, &before, "damaged");
    let r = ws.strata(&["up"]);
    fails_cleanly(&ws, &r, &before, "damaged");
    assert!(!infra_ran(&ws));
    assert!(kube.requests().is_empty());

    // Truncated: half of the file.
    let half = good.as_bytes()[..good.len() / 2].to_vec();
    std::fs::write(ws.path(STORE), &half).unwrap();
    let r = ws.strata(&["secrets", "list"]);
    fails_cleanly(&ws, &r, &half, "truncated");
    let r = ws.strata(&["up"]);
    fails_cleanly(&ws, &r, &half, "truncated");
    assert!(!infra_ran(&ws));
}

#[test]
fn wrong_identity_fails_cleanly_and_leaves_the_store() {
    let kube = FakeKube::start();
    let mut ws = kube_ws(&kube, None);
    let r = strata_stdin(&ws, &["secrets", "set", "monitoring:adminpass"], ADMIN);
    assert_eq!(r.code, 0, "{r:?}");
    let before = std::fs::read(ws.path(STORE)).unwrap();

    use_identity(&mut ws, "other-id.txt");
    let r = ws.strata(&["secrets", "list"]);
    fails_cleanly(&ws, &r, &before, "not encrypted to the identity");
    assert!(r.stderr.contains("other-id.txt"), "{r:?}");
    let r = strata_stdin(&ws, &["secrets", "set", "apps:other"], "new-VALUE-4242");
    fails_cleanly(&ws, &r, &before, "not encrypted to the identity");
    let r = ws.strata(&["up"]);
    fails_cleanly(&ws, &r, &before, "not encrypted to the identity");
    assert!(!infra_ran(&ws));
}

// ---------------------------------------------------------------------------------------
// strata secrets
// ---------------------------------------------------------------------------------------

#[test]
fn secrets_list_shows_keys_and_declaring_project_never_values() {
    let kube = FakeKube::start();
    let ws = kube_ws(&kube, None);
    for (k, v) in [
        ("monitoring:adminpass", ADMIN),
        ("apps:db-password", DB),
        ("other:undeclared", "undeclared-VALUE-77"),
    ] {
        let r = strata_stdin(&ws, &["secrets", "set", k], &format!("{v}\n"));
        assert_eq!(r.code, 0, "{r:?}");
        assert!(!r.all().contains(v), "{r:?}");
    }

    let r = ws.strata(&["secrets", "list"]);
    assert_eq!(r.code, 0, "{r:?}");
    let line = |key: &str| -> String {
        r.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(key))
            .unwrap_or_else(|| panic!("no line for {key}: {r:?}"))
            .to_string()
    };
    assert!(line("apps:db-password").contains("k8s/app"), "{r:?}");
    assert!(
        line("monitoring:adminpass").contains("every project"),
        "{r:?}"
    );
    assert!(line("other:undeclared").contains("not declared"), "{r:?}");
    // Declared but not stored: shown as missing, with how to set it.
    assert!(line("apps:api-key").contains("missing"), "{r:?}");
    for v in [ADMIN, DB, "undeclared-VALUE-77"] {
        assert!(!r.all().contains(v), "a value was listed: {r:?}");
        assert!(!r.all().contains(&encode_base64(v.as_bytes())), "{r:?}");
    }

    let r = ws.strata(&["--output", "json", "secrets", "list"]);
    assert_eq!(r.code, 0, "{r:?}");
    let list: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let keys: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap())
        .collect();
    assert!(keys.contains(&"apps:db-password"), "{r:?}");
    let db = list
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == json!("apps:db-password"))
        .unwrap();
    assert_eq!(db["declared_by"], json!("k8s/app"), "{r:?}");
    for v in [ADMIN, DB, "undeclared-VALUE-77"] {
        assert!(!r.all().contains(v), "{r:?}");
    }
}

#[test]
fn secrets_set_from_piped_stdin_then_rm() {
    let kube = FakeKube::start();
    let mut ws = kube_ws(&kube, None);
    // The app checks the value it gets without printing it.
    ws.command_project(
        "k8s/app",
        &format!(
            "if [ \"$STRATA_SECRET_APPS_DB_PASSWORD\" = '{DB}' ]; then echo VALUE-MATCHES; else echo VALUE-DIFFERS; fi"
        ),
        "true",
    );
    ws.env
        .retain(|(k, _)| k != "STRATA_SECRET_APPS_DB_PASSWORD");

    // One trailing newline (from echo) is not part of the value.
    let r = strata_stdin(
        &ws,
        &["secrets", "set", "apps:db-password"],
        &format!("{DB}\n"),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.all().contains(DB), "{r:?}");
    let r = ws.strata(&["secrets", "list"]);
    assert!(r.stdout.contains("apps:db-password"), "{r:?}");
    assert!(
        !r.stdout
            .lines()
            .any(|l| l.contains("apps:db-password") && l.contains("missing")),
        "{r:?}"
    );

    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("VALUE-MATCHES"),
        "the stored value differs: {r:?}"
    );
    assert_eq!(
        kube.secret_data("apps", "strata-secrets").unwrap()["db-password"],
        DB
    );

    let r = ws.strata(&["secrets", "rm", "apps:db-password"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = ws.strata(&["--output", "json", "secrets", "list"]);
    let list: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert!(
        !list
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["key"] == json!("apps:db-password")),
        "{r:?}"
    );
    // Removing it again names the key and fails.
    let r = ws.strata(&["secrets", "rm", "apps:db-password"]);
    assert_ne!(r.code, 0, "{r:?}");
    r.expect_stderr(&["apps:db-password"]);
    // Now missing again for a non-interactive up.
    let r = ws.strata(&["up"]);
    r.expect_code(3)
        .expect_stderr(&["STRATA_SECRET_APPS_DB_PASSWORD"]);
}

// ---------------------------------------------------------------------------------------
// The @secrets step: into Kubernetes
// ---------------------------------------------------------------------------------------

#[test]
fn secrets_step_applies_namespaces_and_secret_server_side() {
    let kube = FakeKube::start();
    let ws = kube_ws(&kube, None);
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    // The kubeconfig hook of the infrastructure stage wrote the kubeconfig it used.
    let kc = ws.read("home/.kube/config");
    assert!(kc.contains(&kube.url()), "{kc}");

    assert_eq!(kube.namespaces(), ["apps", "monitoring"]);
    assert_eq!(
        kube.secret_data("monitoring", "strata-secrets").unwrap(),
        BTreeMap::from([("adminpass".to_string(), ADMIN.to_string())])
    );
    assert_eq!(
        kube.secret_data("apps", "strata-secrets").unwrap(),
        BTreeMap::from([
            ("api-key".to_string(), API.to_string()),
            ("db-password".to_string(), DB.to_string()),
        ])
    );
    let reqs = kube.requests();
    let patches: Vec<_> = reqs.iter().filter(|r| r.method == "PATCH").collect();
    assert!(!patches.is_empty(), "{reqs:?}");
    for p in &patches {
        assert_eq!(
            p.content_type.as_deref(),
            Some(fake_kube::APPLY_PATCH),
            "{p:?}"
        );
        assert_eq!(
            p.query.get("fieldManager").map(String::as_str),
            Some("strata"),
            "{p:?}"
        );
    }
    for path in [
        "/api/v1/namespaces/monitoring/secrets/strata-secrets",
        "/api/v1/namespaces/apps/secrets/strata-secrets",
    ] {
        assert!(
            patches.iter().any(|p| p.path == path),
            "no server-side apply of {path}: {reqs:?}"
        );
    }
    // The namespaces did not exist: each is created (a POST naming field manager
    // `strata`) when the apply of its Secret answers 404 for it, then applied again.
    let created: Vec<String> = reqs
        .iter()
        .filter(|r| r.method == "POST" && r.path == "/api/v1/namespaces")
        .map(|r| r.json()["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(created, ["apps", "monitoring"], "{reqs:?}");
    let secret = kube.secret("apps", "strata-secrets").unwrap();
    assert_eq!(
        secret["metadata"]["managedFields"][0]["manager"],
        json!("strata")
    );

    // A second up changes nothing in the cluster.
    let objects = kube.objects();
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(kube.objects(), objects, "the second up changed the cluster");
    let line = r
        .stdout
        .lines()
        .find(|l| l.starts_with("[@secrets] succeeded"))
        .unwrap_or_else(|| panic!("{r:?}"));
    assert!(line.contains("unchanged"), "{line}");

    // A secret dropped from the profile is dropped from its Secret.
    ws.profile(
        "lab",
        &kube_profile(None, &[("apps:db-password", "Database password")]),
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        kube.secret_data("apps", "strata-secrets").unwrap(),
        BTreeMap::from([("db-password".to_string(), DB.to_string())])
    );
    // A namespace without secrets any more loses the Secret (the namespace stays).
    ws.profile("lab", &kube_profile(None, &[]));
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        kube.secret("apps", "strata-secrets").is_none(),
        "{:?}",
        kube.objects()
    );
    assert!(kube.namespaces().contains(&"apps".to_string()));
    assert_eq!(
        kube.secret_data("monitoring", "strata-secrets").unwrap()["adminpass"],
        ADMIN
    );
    for r in kube.requests() {
        assert!(!r.body.contains(ADMIN) && !r.path.contains(ADMIN));
    }
}

#[test]
fn secrets_step_uses_the_profiles_secret_name() {
    let kube = FakeKube::start();
    let ws = kube_ws(&kube, Some("lab-credentials"));
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        kube.secret_data("monitoring", "lab-credentials").unwrap()["adminpass"],
        ADMIN
    );
    assert_eq!(
        kube.secret_data("apps", "lab-credentials").unwrap()["db-password"],
        DB
    );
    assert!(kube.secret("monitoring", "strata-secrets").is_none());
    assert!(kube.secret("apps", "strata-secrets").is_none());
}

#[test]
fn show_and_the_run_summary_list_the_secrets_step_like_a_project() {
    let kube = FakeKube::start();
    let ws = kube_ws(&kube, None);

    let r = ws.strata(&["show"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("@secrets"), "{r:?}");
    let r = ws.strata(&["show", "--format", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let plan: Value = serde_json::from_str(&r.stdout).unwrap();
    let order = strings(&plan["order"]);
    assert_eq!(order, ["infra/cluster", "@secrets", "k8s/app"], "{r:?}");
    assert!(
        plan["projects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["path"] == json!("@secrets")),
        "{r:?}"
    );

    // Human summary: a row for @secrets like the projects' rows.
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let header = r
        .stdout
        .lines()
        .position(|l| l.contains("project") && l.contains("status"))
        .unwrap_or_else(|| panic!("no summary table: {r:?}"));
    let rows: Vec<&str> = r.stdout.lines().skip(header + 1).collect();
    for name in ["infra/cluster", "@secrets", "k8s/app"] {
        assert!(
            rows.iter()
                .any(|l| l.trim_start().starts_with(name) && l.contains("succeeded")),
            "no summary row for {name}: {r:?}"
        );
    }

    // JSON events: started and finished like a project, counted in the run.
    let r = ws.strata(&["--output", "json", "up"]);
    assert_eq!(r.code, 0, "{r:?}");
    let events = r.events();
    assert!(
        event_of(&events, "project_started", "@secrets").is_some(),
        "{r:?}"
    );
    let fin = event_of(&events, "project_finished", "@secrets").unwrap_or_else(|| panic!("{r:?}"));
    assert_eq!(fin["status"], json!("succeeded"));
    let run = events
        .iter()
        .find(|e| e["event"] == json!("run_finished"))
        .unwrap();
    assert_eq!(run["counts"]["succeeded"], json!(3), "{run}");
}

// ---------------------------------------------------------------------------------------
// Into Pulumi, and never leaked
// ---------------------------------------------------------------------------------------

/// The profile of the Pulumi and leak tests: the kube profile plus a Pulumi project that
/// declares `apps:db-password` and a command project that fails after echoing a secret.
fn pulumi_ws(kube: &FakeKube, with_failure: bool) -> Ws {
    let ws = kube_ws(kube, None);
    let mut y = kube_profile(None, &[("apps:api-key", "API key")]);
    y.push_str(
        "  - path: k8s/db\n    secrets:\n      - key: apps:db-password\n        prompt: Database password\n",
    );
    if with_failure {
        y.push_str("  - path: k8s/broken\n    needs: []\n");
        ws.command_project(
            "k8s/broken",
            "echo \"broken with $STRATA_SECRET_MONITORING_ADMINPASS\"; echo \"to stderr $STRATA_SECRET_MONITORING_ADMINPASS\" >&2; exit 1",
            "true",
        );
    }
    ws.profile("lab", &y);
    ws.command_project(
        "k8s/app",
        "echo \"api=$STRATA_SECRET_APPS_API_KEY\"; echo \"admin=$STRATA_SECRET_MONITORING_ADMINPASS\" >&2",
        "true",
    );
    ws.pulumi_project(
        "k8s/db",
        "db-app",
        "resources:\n  conn:\n    type: test:index:Connection\n    properties:\n      password: ${apps:db-password}\n      admin: ${monitoring:adminpass}\n\
         outputs:\n  password: ${apps:db-password}\n  endpoint: db.local\n",
    );
    ws
}

#[test]
fn pulumi_project_gets_its_secret_as_secure_config() {
    let kube = FakeKube::start();
    let mut ws = pulumi_ws(&kube, false);
    ws.set_env(
        "FAKE_PULUMI_EXPECT_CONFIG_DB_APP",
        &json!({ "apps:db-password": DB, "monitoring:adminpass": ADMIN }).to_string(),
    );
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");

    let calls = ws.calls();
    let db_calls: Vec<&Value> = calls
        .iter()
        .filter(|c| c["project"] == json!("db-app"))
        .collect();
    // The value went through `config set --secret` on stdin, never on the command line.
    let sets: Vec<&&Value> = db_calls
        .iter()
        .filter(|c| c["command"] == json!("config set") && c["event"] == json!("start"))
        .collect();
    let set_keys: Vec<String> = sets
        .iter()
        .filter_map(|c| {
            let argv: Vec<&str> = c["argv"]
                .as_array()?
                .iter()
                .filter_map(|a| a.as_str())
                .collect();
            assert!(argv.contains(&"--secret"), "{c}");
            for v in [DB, ADMIN] {
                assert!(!argv.iter().any(|a| a.contains(v)), "a secret on argv: {c}");
            }
            argv.iter().find(|a| a.contains(':')).map(|a| a.to_string())
        })
        .collect();
    assert!(
        set_keys.iter().any(|k| k == "apps:db-password"),
        "no `config set --secret apps:db-password`: {db_calls:#?}"
    );
    for c in &sets {
        assert_eq!(c["stdin"], json!("pipe"), "the value is piped: {c}");
    }
    // The update ran with both values as secure config.
    let up = db_calls
        .iter()
        .find(|c| c["command"] == json!("up") && c["event"] == json!("start"))
        .unwrap_or_else(|| panic!("no up of db-app: {calls:#?}"));
    assert_eq!(up["config"]["apps:db-password"], json!("[secure]"), "{up}");
    assert_eq!(
        up["config"]["monitoring:adminpass"],
        json!("[secure]"),
        "{up}"
    );
    let up_args = up["argv"].to_string();
    assert!(up_args.contains("--config-file"), "{up}");
    assert!(up_args.contains(".strata/dev/config/k8s_2fdb.yaml"), "{up}");

    // The per-project config file holds them as `secure:` values.
    let cfg: serde_yaml::Value =
        serde_yaml::from_str(&ws.read(".strata/dev/config/k8s_2fdb.yaml")).unwrap();
    for key in ["apps:db-password", "monitoring:adminpass"] {
        assert!(
            cfg["config"][key]["secure"].is_string(),
            "{key} is not secure config: {cfg:?}"
        );
    }
    assert!(cfg["encryptionsalt"].is_string(), "{cfg:?}");
    // The shared stack config got none of it.
    let shared = ws.read("config/pulumi/Pulumi.dev.yaml");
    assert!(!shared.contains("apps:db-password"), "{shared}");

    // `pulumi config` of that project shows it as a secret.
    let out = Command::new(fake_pulumi())
        .args([
            "config",
            "--cwd",
            ws.path("projects/k8s/db").to_str().unwrap(),
            "--stack",
            "dev",
            "--config-file",
            ws.path(".strata/dev/config/k8s_2fdb.yaml")
                .to_str()
                .unwrap(),
        ])
        .env("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)
        .env(
            "PULUMI_BACKEND_URL",
            format!("file://{}", ws.path(".strata/backend").display()),
        )
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{shown}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shown.contains("apps:db-password"), "{shown}");
    assert!(shown.contains("[secret]"), "{shown}");
    assert!(!shown.contains(DB), "{shown}");

    // A second up still hands the project the right values.
    let r = ws.strata(&["up"]);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn a_full_up_with_secrets_leaks_no_value_anywhere() {
    let kube = FakeKube::start();
    let ws = pulumi_ws(&kube, true);
    let values = [ADMIN, DB, API];

    let human = ws.strata(&["up", "--keep-going"]);
    assert_eq!(human.code, 1, "k8s/broken fails: {human:?}");
    let json_run = ws.strata(&["--output", "json", "up", "--keep-going"]);
    assert_eq!(json_run.code, 1, "{json_run:?}");
    let status = ws.strata(&["status"]);
    let outputs = ws.strata(&["outputs"]);
    let list = ws.strata(&["secrets", "list"]);

    // The projects did run and echoed their secrets: strata printed `[secret]` instead.
    assert!(human.all().contains("api=[secret]"), "{human:?}");
    assert!(human.all().contains("admin=[secret]"), "{human:?}");
    assert!(human.all().contains("broken with [secret]"), "{human:?}");
    let lines: Vec<String> = json_run
        .events()
        .iter()
        .filter(|e| e["event"] == json!("project_output"))
        .filter_map(|e| e["line"].as_str().map(str::to_string))
        .collect();
    assert!(
        lines.iter().any(|l| l.contains("api=[secret]")),
        "{json_run:?}"
    );
    assert!(kube.secret_data("apps", "strata-secrets").is_some());
    assert!(
        ws.calls()
            .iter()
            .any(|c| c["project"] == json!("db-app") && c["command"] == json!("up")),
        "the Pulumi project ran"
    );

    // Nothing strata printed holds a value.
    for (name, r) in [
        ("up", &human),
        ("up --output json", &json_run),
        ("status", &status),
        ("outputs", &outputs),
        ("secrets list", &list),
    ] {
        for v in values {
            assert!(
                !r.all().contains(v),
                "`strata {name}` shows a secret value: {r:?}"
            );
            assert!(
                !r.all().contains(&encode_base64(v.as_bytes())),
                "`strata {name}`: {r:?}"
            );
        }
    }

    // Every file of the workspace but the encrypted store: .strata/ (journal, logs,
    // per-project config, state, the Pulumi backend), config/, the fake's call log.
    let mut scanned = 0;
    let mut logs_with_mask = 0;
    for (path, bytes) in ws.files_under("") {
        let rel = path
            .strip_prefix(&ws.root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel.starts_with("bin/") || rel == STORE {
            continue;
        }
        scanned += 1;
        for v in values {
            assert!(
                !contains_bytes(&bytes, v.as_bytes()),
                "{rel} holds a secret value:\n{}",
                String::from_utf8_lossy(&bytes)
            );
            assert!(
                !contains_bytes(&bytes, encode_base64(v.as_bytes()).as_bytes()),
                "{rel} holds a secret value in base64"
            );
        }
        if rel.starts_with(".strata/dev/logs/") && contains_bytes(&bytes, b"[secret]") {
            logs_with_mask += 1;
        }
    }
    assert!(ws.exists(".strata/dev/journal.jsonl"));
    assert!(scanned > 10, "only {scanned} files scanned");
    assert!(
        logs_with_mask >= 2,
        "the logs of the echoing projects should show [secret]"
    );
}

#[test]
fn missing_config_and_missing_secrets_are_listed_in_one_error() {
    let mut ws = Ws::new();
    ws.set_env("STRATA_PASSPHRASE", "pass-for-the-store");
    ws.profile(
        "lab",
        "description: lab\ninfra_type: lab\nconfig:\n  - key: lab:account\n    prompt: Account id\nsecrets:\n  - key: apps:token\n    prompt: API token\ninfrastructure:\n  - path: infra/a\n",
    );
    ws.command_project("infra/a", "true", "true");
    let r = ws.strata(&["up", "--stack", "dev", "--provider", "lab"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stderr.contains("lab:account"), "{r:?}");
    assert!(r.stderr.contains("apps:token"), "both in one run: {r:?}");
    assert!(r.stderr.contains("STRATA_SECRET_APPS_TOKEN"), "{r:?}");
}

/// EKS/GKE/AKS kubeconfigs authenticate through an exec plugin. The plugin runs with the
/// environment a project gets, so a credential kept only in the env file reaches it;
/// when it fails, the error names the plugin and shows its stderr.
#[test]
fn exec_credential_plugins_get_the_env_file_and_are_named_when_they_fail() {
    let kube = FakeKube::start();
    kube.api().require_token("tok-from-plugin");
    let mut ws = kube_ws(&kube, None);
    let plugin = ws.path("bin/fake-cloud-auth");
    std::fs::write(
        &plugin,
        "#!/bin/sh\nif [ -z \"$CLOUD_CRED_FOR_TEST\" ]; then echo \"fake-cloud-auth: no credentials (CLOUD_CRED_FOR_TEST is not set)\" >&2; exit 3; fi\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"tok-from-plugin\"}}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let outputs = json!({ "kubeconfig": kube.exec_kubeconfig(&plugin) });
    ws.write(
        "projects/infra/cluster/outputs.json",
        &serde_json::to_string(&outputs).unwrap(),
    );
    // Without the credential: the plugin fails and is named, with its stderr.
    let r = ws.strata(&["up", "--stack", "dev"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.all().contains("fake-cloud-auth"), "{r:?}");
    assert!(r.all().contains("CLOUD_CRED_FOR_TEST is not set"), "{r:?}");
    // The credential only in the env file (not strata's own environment).
    ws.env_file("PULUMI_STACK=dev\nCLOUD_CRED_FOR_TEST=yes\n");
    ws.set_env("CLOUD_CRED_FOR_TEST", "");
    let r = ws.strata(&["up", "--stack", "dev"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        kube.secret_data("monitoring", "strata-secrets")
            .unwrap_or_default()
            .get("adminpass")
            .map(String::as_str),
        Some(ADMIN)
    );
}

/// `status` and `validate` never decrypt the store (a passphrase store costs its scrypt
/// work factor): they read the digest strata writes whenever a run opens the store, so a
/// wrong passphrase does not bother them. A store changed since (a `git pull`) is
/// reported, not decrypted.
#[test]
fn status_and_validate_read_the_digest_not_the_store() {
    let mut ws = lab_asking(
        &[("lab:token", "Token")],
        "  - path: infra/cluster\n  - path: infra/plain\n    needs: []\n",
    );
    ws.command_project("infra/cluster", "echo ran", "true");
    ws.command_project("infra/plain", "echo ran", "true");
    ws.set_env("STRATA_PASSPHRASE", "the-right-passphrase");
    ws.set_env("STRATA_SECRET_LAB_TOKEN", ADMIN);
    // (Not the @secrets step: there is no cluster here.)
    let r = ws.strata(&[
        "up",
        "--provider",
        "lab",
        "--project",
        "infra/cluster",
        "--project",
        "infra/plain",
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    let digest = ws.read(".strata/dev/secrets.digest.json");
    assert!(!digest.contains(ADMIN), "{digest}");

    ws.env.retain(|(k, _)| !k.starts_with("STRATA_SECRET_"));
    ws.set_env("STRATA_PASSPHRASE", "a-wrong-passphrase");
    let status = |ws: &Ws| -> std::collections::BTreeMap<String, Value> {
        let r = ws.strata(&["status", "--provider", "lab", "--output", "json"]);
        let doc = r.expect_code(0).json();
        items(&doc["projects"])
            .iter()
            .map(|p| {
                (
                    p["path"].as_str().unwrap().to_string(),
                    p["inputs_changed"].clone(),
                )
            })
            .collect()
    };
    let s = status(&ws);
    assert_eq!(s["infra/cluster"], Value::Bool(false), "{s:?}");
    assert_eq!(s["infra/plain"], Value::Bool(false), "{s:?}");
    let r = ws.strata(&["validate", "--provider", "lab"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.all().contains("all available"), "{r:?}");

    // Someone else's store (a git pull): not decrypted, and said so.
    let mut other = std::fs::read(ws.path(STORE)).unwrap();
    other.extend_from_slice(b"\n");
    std::fs::write(ws.path(STORE), other).unwrap();
    let s = status(&ws);
    assert_eq!(
        s["infra/cluster"],
        Value::Null,
        "unknown, not guessed: {s:?}"
    );
    let r = ws.strata(&["validate", "--provider", "lab"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.all().contains("changed since strata last opened it"),
        "{r:?}"
    );
}
