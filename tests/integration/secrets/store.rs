//! The age store (`config/secrets/<stack>.age`): filled from the environment, armoured
//! and private, and a wrong passphrase, identity or a damaged file fails cleanly.

use std::collections::BTreeMap;

use super::fake_kube::{FakeKube, encode_base64};
use super::*;

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
