//! The digests strata keeps of the secrets (issue 25): `status` and `validate` read them
//! instead of the store, and nothing under `.strata/` lets a reader test guesses of a
//! secret offline.

use std::collections::BTreeSet;
use std::time::Instant;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::*;

/// `up --provider lab` of only `projects` (not the @secrets step: there is no cluster
/// here), asserted to succeed.
#[track_caller]
fn up_only(ws: &Ws, projects: &[&str]) -> Run {
    let mut args = vec!["up", "--provider", "lab"];
    for p in projects {
        args.extend(["--project", *p]);
    }
    ws.strata_ok(&args)
}

/// `status` and `validate` never decrypt the store (a passphrase store costs its scrypt
/// work factor): they read the digest strata writes whenever a run opens the store, so a
/// wrong passphrase does not bother them. A store changed since (a `git pull`) is
/// reported, not decrypted.
#[test]
fn status_and_validate_read_the_digest_not_the_store() {
    let mut ws = lab_given(
        &[("lab:token", ADMIN)],
        "  - path: infra/cluster\n  - path: infra/plain\n    needs: []\n",
    );
    ws.command_project("infra/cluster", "echo ran", "true");
    ws.command_project("infra/plain", "echo ran", "true");
    up_only(&ws, &["infra/cluster", "infra/plain"]);
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
    let r = ws.strata_ok(&["validate", "--provider", "lab"]);
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
    let r = ws.strata_ok(&["validate", "--provider", "lab"]);
    assert!(
        r.all().contains("changed since strata last opened it"),
        "{r:?}"
    );
}

const PIN: &str = "428571";

fn unhex(s: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

/// A stack with a six-digit secret handed to a Pulumi project (secure config, its
/// per-project hashes) and to a command project, after one `up`.
fn deployed_with_pin() -> Ws {
    let ws = lab_given(
        &[("lab:pin", PIN)],
        "  - path: infra/db\n  - path: infra/plain\n    needs: []\n",
    );
    ws.pulumi_project(
        "infra/db",
        "db-app",
        "resources:\n  conn:\n    type: test:index:Connection\n    properties:\n      password: ${lab:pin}\noutputs:\n  endpoint: db.local\n",
    );
    ws.command_project("infra/plain", "echo ran", "true");
    up_only(&ws, &["infra/db", "infra/plain"]);
    ws
}

/// Everything an attacker with a copy of `.strata/` (a backup, a CI cache) reads: every
/// hex digest in any file, and every salt strata has written there.
fn what_strata_dir_gives(ws: &Ws) -> (BTreeSet<String>, Vec<Vec<u8>>, Vec<String>) {
    let hex = regex::Regex::new(r"[0-9a-f]{64}").unwrap();
    let enc = regex::Regex::new(r"encryptionsalt:\s*(\S+)").unwrap();
    let mut digests = BTreeSet::new();
    let mut salts = Vec::new();
    let mut enc_salts = Vec::new();
    for (path, bytes) in ws.files_under(".strata") {
        if path.file_name().is_some_and(|n| n == "fingerprint.salt") {
            salts.push(bytes.clone());
        }
        let text = String::from_utf8_lossy(&bytes);
        for m in hex.find_iter(&text) {
            digests.insert(m.as_str().to_string());
        }
        for c in enc.captures_iter(&text) {
            enc_salts.push(c[1].trim_matches('"').to_string());
        }
    }
    (digests, salts, enc_salts)
}

/// The secret is not in the clear anywhere under `.strata/`, and no digest there can be
/// matched by guessing: every six-digit candidate is hashed the ways the old code did
/// (SHA-256 over the salt beside it, the key and the value; with the stack config's
/// encryption salt; bare) and compared with every digest found.
#[test]
fn a_six_digit_secret_cannot_be_guessed_from_the_state_folder() {
    let ws = deployed_with_pin();
    for (path, bytes) in ws.files_under(".strata") {
        assert!(
            !String::from_utf8_lossy(&bytes).contains(PIN),
            "{} holds the secret",
            path.display()
        );
    }
    let (digests, salts, enc_salts) = what_strata_dir_gives(&ws);
    assert!(
        !digests.is_empty(),
        "no digest found at all: nothing was tested"
    );
    // The files that hold digests of the secret were written (so they were tried).
    assert!(ws.exists(".strata/dev/secrets.digest.json"));
    assert!(ws.exists(".strata/dev/config/infra_2fdb.secrets.json"));
    assert!(!enc_salts.is_empty(), "no per-project secure config");
    let digests: std::collections::HashSet<[u8; 32]> = digests.iter().map(|d| unhex(d)).collect();
    // The attacker's prefixes: none (a bare SHA-256), salt, salt+key (the store's digest
    // and the fingerprints), salt+key+the stack config's encryption salt (the per-project
    // hashes of secure config).
    let mut prefixes: Vec<Sha256> = vec![Sha256::new()];
    for salt in &salts {
        prefixes.push(Sha256::new_with_prefix(salt));
        let keyed = Sha256::new_with_prefix(salt).chain_update(b"lab:pin\0");
        prefixes.push(keyed.clone());
        for e in &enc_salts {
            prefixes.push(keyed.clone().chain_update(e.as_bytes()).chain_update([0]));
        }
    }
    let started = Instant::now();
    let mut found = Vec::new();
    let mut guess = *b"000000";
    for n in 0..1_000_000u32 {
        let mut m = n;
        for d in guess.iter_mut().rev() {
            *d = b'0' + (m % 10) as u8;
            m /= 10;
        }
        for p in &prefixes {
            let d: [u8; 32] = p.clone().chain_update(guess).finalize().into();
            if digests.contains(&d) {
                found.push(String::from_utf8_lossy(&guess).into_owned());
            }
        }
    }
    let took = started.elapsed();
    eprintln!(
        "10^6 guesses x {} prefixes against {} digests took {took:?}",
        prefixes.len(),
        digests.len()
    );
    assert!(
        found.is_empty(),
        "the secret was recovered from .strata/ alone in {took:?}: {found:?}"
    );
}

/// A store written before it held a digest key gets one on the next `up` (under the
/// lock); the key is never listed as a secret, and `status` compares digests under it
/// without opening the store.
#[test]
fn an_old_store_gets_its_digest_key_on_the_next_up() {
    let mut ws = lab_asking(&[("lab:pin", "PIN")], "  - path: infra/plain\n");
    ws.command_project("infra/plain", "echo ran", "true");
    let pass = "the-right-passphrase";
    ws.set_env("STRATA_PASSPHRASE", pass);
    let old = serde_json::json!({ "lab:pin": PIN }).to_string();
    let mut recipient = age::scrypt::Recipient::new(pass.to_string().into());
    recipient.set_work_factor(10);
    let bytes = age::encrypt_and_armor(&recipient, old.as_bytes()).unwrap();
    ws.write("config/secrets/dev.age", &bytes);
    ws.strata_ok(&["up", "--provider", "lab", "--project", "infra/plain"]);

    let identity = age::scrypt::Identity::new(pass.to_string().into());
    let plain = age::decrypt(&identity, ws.read("config/secrets/dev.age").as_bytes()).unwrap();
    let values: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&plain).unwrap();
    assert_eq!(values.get("lab:pin").map(String::as_str), Some(PIN));
    assert_eq!(
        values.get("strata.digest-key").map(String::len),
        Some(64),
        "{:?}",
        values.keys()
    );
    let digest = ws.read(".strata/dev/secrets.digest.json");
    assert!(digest.contains("\"version\": 2"), "{digest}");

    let list = ws.strata_ok(&["secrets", "list"]);
    assert!(list.stdout.contains("lab:pin"), "{list:?}");
    assert!(!list.all().contains("digest-key"), "{list:?}");

    // `status` cannot open the store (a wrong passphrase) and still tells: unchanged.
    ws.set_env("STRATA_PASSPHRASE", "a-wrong-passphrase");
    let r = ws.strata_ok(&["status", "--provider", "lab", "--output", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        doc["projects"][0]["inputs_changed"],
        serde_json::Value::Bool(false),
        "{doc}"
    );
}

/// Issue 25: a preview's write stage recorded `secrets.digest.json` without the stack
/// lock, beside an `up` that holds it. A preview writes only under the lock, taken
/// without waiting; while another run holds it, it writes nothing.
#[test]
fn a_preview_beside_a_running_up_writes_no_digest() {
    let mut ws = deployed_with_pin();
    ws.set_env("FAKE_PULUMI_DELAY_MS_DB_APP", "15000");
    let calls = ws.path("calls.jsonl");
    // The fake's `up` of db-app starting: that run is past its own write stage.
    let ups = || {
        std::fs::read_to_string(&calls)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"start\"") && l.contains("\"up\"") && l.contains("db-app"))
            .count()
    };
    let before = ups();
    let mut up = ws.spawn(&["up", "--provider", "lab", "--project", "infra/db"]);
    let t0 = std::time::Instant::now();
    while ups() == before {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(60),
            "the up never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::remove_file(ws.path(".strata/dev/secrets.digest.json")).unwrap();
    ws.set_env("FAKE_PULUMI_DELAY_MS_DB_APP", "0");
    let r = ws.strata_ok(&["preview", "--provider", "lab", "--project", "infra/db"]);
    assert!(
        up.try_wait().unwrap().is_none(),
        "the up still held the lock during the preview"
    );
    assert!(
        !ws.exists(".strata/dev/secrets.digest.json"),
        "the preview wrote the digest while the up held the lock: {r:?}"
    );
    assert!(up.wait().unwrap().success());
}

/// A command project that repeats a secret in its outputs: the outputs hash the journal
/// keeps must not be testable with the salt beside it (the right guess does not match).
#[test]
fn an_output_that_repeats_a_secret_is_not_guessable_from_the_journal() {
    let ws = lab_given(&[("lab:pin", PIN)], "  - path: infra/echo\n");
    ws.command_project(
        "infra/echo",
        "printf '{\"pin\": \"%s\"}' \"$STRATA_SECRET_LAB_PIN\" > \"$STRATA_OUTPUTS_FILE\"",
        "true",
    );
    ws.strata_ok(&["up", "--provider", "lab"]);
    let salt = std::fs::read(ws.path(".strata/dev/fingerprint.salt")).unwrap();
    let recorded: Vec<String> = ws
        .read(".strata/dev/journal.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["outputs_hash"].as_str().map(String::from))
        .collect();
    assert_eq!(recorded.len(), 1, "the run recorded its outputs hash");
    // The attacker's guess, made the way the hash was made before.
    let mut h = Sha256::new();
    h.update(&salt);
    h.update(b"outputs");
    h.update([0]);
    h.update(format!("{{\"pin\":\"{PIN}\"}}").as_bytes());
    let guess: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    assert_ne!(
        recorded[0], guess,
        "the PIN is testable from .strata/ alone"
    );
}

/// Issue 43, 6: a Pulumi secret output strata reveals (a dependent takes it through
/// `inputs:`) is not testable from the outputs hash beside its salt (the journal and
/// `fingerprint.salt` here; the run record and `.strata/salts/` in a bucket): the right
/// guess, hashed the way the salt allows, does not match.
#[test]
fn a_revealed_secret_output_is_not_guessable_from_the_outputs_hash() {
    let ws = Ws::new();
    ws.profile(
        "t",
        "description: t\ninfra_type: test\ninfrastructure:\n  - path: db\n    needs: []\n  - path: app\n    needs: [db]\n    inputs:\n      app:password: db:password\n",
    );
    ws.pulumi_project(
        "db",
        "db",
        "outputs:\n  password:\n    fn::secret: autumn2026\n",
    );
    ws.pulumi_project("app", "app", "config:\n  password:\n    type: string\n");
    let r = ws.strata(&["up", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 0, "{r:?}");
    let salt = std::fs::read(ws.path(".strata/dev/fingerprint.salt")).unwrap();
    let recorded: Vec<String> = ws
        .read(".strata/dev/journal.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["project"] == "db")
        .filter_map(|v| v["outputs_hash"].as_str().map(String::from))
        .collect();
    assert_eq!(recorded.len(), 1, "db's up recorded its outputs hash");
    let guess = |text: &str| -> String {
        let mut h = Sha256::new();
        h.update(&salt);
        h.update(b"outputs");
        h.update([0]);
        h.update(text.as_bytes());
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    };
    assert_ne!(
        recorded[0],
        guess(r#"{"password":"autumn2026"}"#),
        "the password is testable from .strata/ alone"
    );
}
