//! The age store (`config/secrets/<stack>.age`): filled from the environment, armoured
//! and private, and a wrong passphrase, identity or a damaged file fails cleanly.

use std::collections::BTreeMap;

use super::fake_kube::encode_base64;
use super::*;

/// `STRATA_SECRET_<KEY>` (key upper-cased, `:` and `-` as `_`) fills the store.
#[test]
fn secrets_from_environment_end_up_in_the_store() {
    let (kube, ws) = kube_lab();
    ws.strata_ok(&["up"]);
    assert!(ws.exists(STORE));

    let r = ws.strata_ok(&["secrets", "list"]);
    for key in ["monitoring:adminpass", "apps:db-password", "apps:api-key"] {
        assert!(r.stdout.contains(key), "{key} not listed: {r:?}");
    }

    // Stored: a run without the variables needs nothing more, and uses the same values.
    let mut ws = ws;
    ws.env.retain(|(k, _)| !k.starts_with("STRATA_SECRET_"));
    ws.strata_ok(&["up"]);
    assert_eq!(stored(&kube, "apps", "api-key"), API);
    assert_eq!(stored(&kube, "monitoring", "adminpass"), ADMIN);
}

/// The store file: ASCII-armoured age, mode 0600, no key and no value in clear, no
/// temp file left beside it.
#[test]
fn store_file_is_armoured_private_and_holds_no_plaintext() {
    use std::os::unix::fs::PermissionsExt;
    let (_kube, ws) = kube_lab();
    ws.strata_ok(&["up"]);
    set_secret(&ws, "extra:note", "note-VALUE-9911\n");

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

/// Runs each command that opens the store (`secrets list`, `secrets set`, and `up`,
/// given as its arguments) and asserts each fails cleanly ([`fails_cleanly`]) saying
/// `what`, and that nothing ran; returns the three runs.
#[track_caller]
fn every_opener_fails_cleanly(ws: &Ws, up: &[&str], what: &str) -> [Run; 3] {
    let before = std::fs::read(ws.path(STORE)).unwrap();
    let runs = [
        ws.strata(&["secrets", "list"]),
        strata_stdin(ws, &["secrets", "set", "apps:other"], "new-VALUE-4242"),
        ws.strata(up),
    ];
    for r in &runs {
        fails_cleanly(ws, r, &before, what);
    }
    assert!(!infra_ran(ws));
    runs
}

#[test]
fn wrong_passphrase_fails_cleanly_and_leaves_the_store() {
    let mut ws = lab_asking(&[("lab:token", "Token")], "  - path: infra/cluster\n");
    ws.command_project("infra/cluster", "echo ran >> \"$HOME/infra-ran\"", "true");
    ws.set_env("STRATA_PASSPHRASE", "the-right-passphrase");
    set_secret(&ws, "lab:token", ADMIN);

    ws.set_env("STRATA_PASSPHRASE", "a-wrong-passphrase");
    every_opener_fails_cleanly(&ws, &["up", "--provider", "lab"], "wrong passphrase");
}

#[test]
fn tampered_or_truncated_store_fails_cleanly_and_is_left_as_is() {
    let (kube, ws) = kube_lab();
    set_secret(&ws, "monitoring:adminpass", ADMIN);
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
    every_opener_fails_cleanly(&ws, &["up"], "damaged");
    assert!(kube.requests().is_empty());

    // Truncated: half of the file.
    let half = good.as_bytes()[..good.len() / 2].to_vec();
    std::fs::write(ws.path(STORE), &half).unwrap();
    every_opener_fails_cleanly(&ws, &["up"], "truncated");
}

#[test]
fn wrong_identity_fails_cleanly_and_leaves_the_store() {
    let (_kube, mut ws) = kube_lab();
    set_secret(&ws, "monitoring:adminpass", ADMIN);

    use_identity(&mut ws, "other-id.txt");
    let [list, ..] = every_opener_fails_cleanly(&ws, &["up"], "not encrypted to the identity");
    list.expect_stderr(&["other-id.txt"]);
}
