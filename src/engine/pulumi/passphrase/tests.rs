//! Against a checkpoint the real CLI wrote (`testdata/secrets.json`, see its README): its
//! secrets decrypt to what `pulumi stack output --json --show-secrets` printed; on any
//! doubt `None`, never a panic.

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

const SECRETS: &[u8] = include_bytes!("../testdata/secrets.json");
/// The passphrase the checkpoint was made with.
const PASSPHRASE: &str = "correct horse battery staple";

fn doc() -> Value {
    serde_json::from_slice(SECRETS).unwrap()
}

use crate::util::string_map as env_of;

fn right() -> Decrypter {
    decrypter(
        &doc(),
        &env_of(&[("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)]),
        Path::new("/"),
    )
    .expect("the passphrase it was made with opens it")
}

fn outputs() -> Map<String, Value> {
    doc()
        .pointer("/checkpoint/latest/resources/0/outputs")
        .and_then(Value::as_object)
        .cloned()
        .unwrap()
}

/// A secret of the checkpoint's form around `fields`.
fn secret_with(fields: Value) -> Value {
    let mut o = fields.as_object().cloned().unwrap();
    o.insert(SECRET_SIG_KEY.into(), SECRET_SIG.into());
    Value::Object(o)
}

#[test]
fn the_real_clis_secrets_decrypt_to_what_its_show_secrets_printed() {
    let key = right();
    let got: Map<String, Value> = outputs()
        .into_iter()
        .map(|(k, v)| (k, key.reveal(v).unwrap()))
        .collect();
    // `pulumi stack output --json --show-secrets` of that stack, v3.274.1.
    let printed = json!({
        "mixed": {"a": "visible", "b": "inner-hidden"},
        "nested": {"port": 6443, "user": "admin"},
        "number": 42,
        "plain": "not-a-secret",
        "token": "tok-3f9a-known"
    });
    assert_eq!(Value::Object(got), printed);
}

#[test]
fn a_passphrase_file_is_read_as_the_cli_reads_it() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("phrase"), format!("  {PASSPHRASE}\n")).unwrap();
    // Relative to the folder the CLI runs in, trimmed.
    let env = env_of(&[("PULUMI_CONFIG_PASSPHRASE_FILE", "phrase")]);
    let key = decrypter(&doc(), &env, d.path()).expect("the file's passphrase");
    assert_eq!(
        key.reveal(outputs()["token"].clone()),
        Some(json!("tok-3f9a-known"))
    );
    // The variable wins over the file, even empty (as `os.LookupEnv` reads it).
    let both = env_of(&[
        ("PULUMI_CONFIG_PASSPHRASE", ""),
        ("PULUMI_CONFIG_PASSPHRASE_FILE", "phrase"),
    ]);
    assert!(decrypter(&doc(), &both, d.path()).is_none());
    let missing = env_of(&[("PULUMI_CONFIG_PASSPHRASE_FILE", "nope")]);
    assert!(decrypter(&doc(), &missing, d.path()).is_none());
    let empty = env_of(&[("PULUMI_CONFIG_PASSPHRASE_FILE", "")]);
    assert!(decrypter(&doc(), &empty, d.path()).is_none());
}

#[test]
fn without_the_right_passphrase_or_provider_the_cli_is_asked() {
    let at = Path::new("/");
    let right_env = env_of(&[("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)]);
    let wrong = env_of(&[("PULUMI_CONFIG_PASSPHRASE", "not it")]);
    assert!(decrypter(&doc(), &wrong, at).is_none(), "wrong passphrase");
    assert!(decrypter(&doc(), &BTreeMap::new(), at).is_none(), "none");
    for other in [
        "awskms",
        "cloud",
        "service",
        "azurekeyvault",
        "gcpkms",
        "hashivault",
    ] {
        let mut d = doc();
        d["checkpoint"]["latest"]["secrets_providers"]["type"] = json!(other);
        assert!(decrypter(&d, &right_env, at).is_none(), "{other}");
    }
    let mut none = doc();
    let latest = none["checkpoint"]["latest"].as_object_mut().unwrap();
    latest.remove("secrets_providers");
    assert!(decrypter(&none, &right_env, at).is_none(), "no provider");
    let salt = doc()["checkpoint"]["latest"]["secrets_providers"]["state"]["salt"]
        .as_str()
        .unwrap()
        .to_string();
    for bad in [
        salt.replacen("v1:", "v2:", 1),
        salt.replacen(':', ":!", 1),
        "v1".into(),
        "v1:pCFqnvIebFI=".into(),
        String::new(),
    ] {
        let mut d = doc();
        d["checkpoint"]["latest"]["secrets_providers"]["state"]["salt"] = json!(bad);
        assert!(decrypter(&d, &right_env, at).is_none(), "{bad}");
    }
    let mut d = doc();
    d["checkpoint"]["latest"]["secrets_providers"]["state"] = json!("v1:x");
    assert!(
        decrypter(&d, &right_env, at).is_none(),
        "state not an object"
    );
}

#[test]
fn a_secret_that_does_not_decrypt_or_is_of_an_unknown_form_is_none() {
    let key = right();
    let token = outputs()["token"]["ciphertext"]
        .as_str()
        .unwrap()
        .to_string();
    let (head, tail) = token.rsplit_once(':').unwrap();
    let mut flipped = tail.as_bytes().to_vec();
    flipped[3] = if flipped[3] == b'A' { b'B' } else { b'A' };
    let tampered = format!("{head}:{}", String::from_utf8(flipped).unwrap());
    let nonce12 = B64.encode([0u8; 11]);
    for bad in [
        secret_with(json!({ "ciphertext": tampered })),
        secret_with(json!({ "ciphertext": token.replacen("v1", "v2", 1) })),
        secret_with(json!({ "ciphertext": format!("v1:{nonce12}:{}", B64.encode(b"x")) })),
        secret_with(json!({ "ciphertext": "v1:abc" })),
        secret_with(json!({ "ciphertext": format!("{token}:x") })),
        secret_with(json!({ "ciphertext": 7 })),
        secret_with(json!({})),
        secret_with(json!({ "ciphertext": token, "plaintext": "1" })),
        secret_with(json!({ "plaintext": "not json" })),
        json!({ SECRET_SIG_KEY: "c44067f5952c0a294b673a41bacd8c17", "path": "a.txt" }),
        json!({ "list": [1, { SECRET_SIG_KEY: 5 }] }),
    ] {
        assert_eq!(key.reveal(bad.clone()), None, "{bad}");
    }
    // The forms Pulumi also reads: `plaintext`, and secrets nested inside one (written
    // with its no-op encrypter, their `ciphertext` the JSON itself).
    let nested = secret_with(json!({
        "plaintext": json!({"a": secret_with(json!({"ciphertext": "[1,\"x\"]"}))}).to_string()
    }));
    assert_eq!(key.reveal(nested), Some(json!({"a": [1, "x"]})));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn garbage_never_panics(text in ".{0,80}", tail in "[A-Za-z0-9+/=:]{0,60}") {
        let key = right();
        for ct in [text.clone(), format!("v1:{tail}"), format!("v1:{text}:{tail}")] {
            prop_assert_eq!(key.reveal(secret_with(json!({ "ciphertext": ct }))), None);
        }
        let _ = key.reveal(secret_with(json!({ "plaintext": text.clone() })));
        let _ = key_of_state(&format!("v2:{tail}"), &text);
    }
}

/// The checkpoint's salt state (a stack config's `encryptionsalt:` has the same form).
fn salt_state() -> String {
    doc()
        .pointer("/checkpoint/latest/secrets_providers/state/salt")
        .and_then(Value::as_str)
        .unwrap()
        .to_string()
}

#[test]
fn a_config_value_is_encrypted_as_pulumi_config_set_secret_writes_it() {
    let state = salt_state();
    let env = env_of(&[("PULUMI_CONFIG_PASSPHRASE", PASSPHRASE)]);
    let enc = config_encrypter(&state, &env, Path::new("/")).expect("the right passphrase");
    let a = enc.encrypt("hunter2: \"quoted\"").unwrap();
    let b = enc.encrypt("hunter2: \"quoted\"").unwrap();
    assert_ne!(a, b, "a fresh nonce each time");
    let key = key_of_state(&state, PASSPHRASE).unwrap();
    for v in [&a, &b] {
        let parts: Vec<&str> = v.split(':').collect();
        assert_eq!((parts.len(), parts[0]), (3, "v1"), "{v}");
        assert_eq!(B64.decode(parts[1]).unwrap().len(), 12, "{v}");
        assert_eq!(
            decrypt_with(&cipher(&key).unwrap(), v).as_deref(),
            Some("hunter2: \"quoted\"")
        );
    }
    let wrong = env_of(&[("PULUMI_CONFIG_PASSPHRASE", "wrong")]);
    assert!(config_encrypter(&state, &wrong, Path::new("/")).is_none());
    assert!(config_encrypter(&state, &BTreeMap::new(), Path::new("/")).is_none());
}
