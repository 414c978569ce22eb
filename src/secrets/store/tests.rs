//! Unit tests of the secret store: round trips, keys and recipients, and errors that
//! never show a secret.

use super::*;
use age::secrecy::ExposeSecret;

/// Tests use a tiny scrypt work factor so they run fast.
const FAST: Option<u8> = Some(2);

fn values() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            "prometheus:adminpass".to_string(),
            "hunter2-PLAINTEXT".to_string(),
        ),
        (
            "lab:token".to_string(),
            "tok-\u{e9}-\"quoted\"\nline".to_string(),
        ),
    ])
}

fn passphrase(p: &str) -> Key {
    Key::Passphrase(SecretString::from(p.to_string()))
}

fn identity_file(dir: &Path, name: &str) -> PathBuf {
    let identity = age::x25519::Identity::generate();
    let path = dir.join(name);
    let text = format!(
        "# created: 2024-01-01T00:00:00Z\n# public key: {}\n{}\n",
        identity.to_public(),
        identity.to_string().expose_secret()
    );
    fs::write(&path, text).unwrap();
    path
}

/// The key of a new identity file `name` written in `dir`.
fn identity(dir: &Path, name: &str) -> Key {
    Key::Identity(identity_file(dir, name))
}

/// A passphrase, and an identity file written in `dir`.
fn each_kind_of_key(dir: &Path) -> [Key; 2] {
    [passphrase("pw"), identity(dir, "key.txt")]
}

fn saved(dir: &Path, key: &Key) -> PathBuf {
    let path = dir.join("config/secrets/dev.age");
    save_with_work_factor(&path, key, &values(), FAST).unwrap();
    path
}

/// The store saved in `dir` under the passphrase `pw`: the key and the file.
fn saved_under_pw(dir: &Path) -> (Key, PathBuf) {
    let key = passphrase("pw");
    let path = saved(dir, &key);
    (key, path)
}

/// The store saved in `dir` under each kind of key in turn: the key and the file, saved
/// as its turn comes (both keys write the same file).
fn saved_under_each_kind_of_key(dir: &Path) -> impl Iterator<Item = (Key, PathBuf)> + '_ {
    each_kind_of_key(dir).into_iter().map(|key| {
        let path = saved(dir, &key);
        (key, path)
    })
}

/// Asserts that `load` fails, that the error names the file and holds no
/// secret, and that the file is unchanged; returns the error.
fn load_fails(path: &Path, key: &Key) -> StoreError {
    let before = fs::read(path).unwrap();
    let err = load(path, key).unwrap_err();
    assert_eq!(fs::read(path).unwrap(), before, "file was modified");
    let shown = format!("{err} {err:?}");
    assert!(shown.contains(&path.display().to_string()), "{shown}");
    for value in values().values() {
        assert!(!shown.contains(value.as_str()), "{shown}");
    }
    err
}

#[test]
fn round_trip_with_identity() {
    let dir = tempfile::tempdir().unwrap();
    let key = identity(dir.path(), "key.txt");
    let path = saved(dir.path(), &key);
    assert!(exists(&path));
    assert_eq!(load(&path, &key).unwrap(), values());
}

#[test]
fn round_trip_with_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    let key = passphrase("correct horse");
    let path = saved(dir.path(), &key);
    assert_eq!(load(&path, &key).unwrap(), values());
}

#[test]
fn passphrase_stores_use_the_age_cli_work_factor() {
    use std::io::Read;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.age");
    save(&path, &passphrase("correct horse"), &BTreeMap::new()).unwrap();
    let open = |max: u8| {
        let text = std::fs::read(&path).unwrap();
        let reader = age::armor::ArmoredReader::new(&text[..]);
        let d = age::Decryptor::new(reader).unwrap();
        let mut id = age::scrypt::Identity::new(SecretString::from("correct horse"));
        id.set_max_work_factor(max);
        d.decrypt(std::iter::once(&id as &dyn age::Identity))
            .map(|mut r| {
                let mut s = String::new();
                r.read_to_string(&mut s).unwrap();
                s
            })
            .is_ok()
    };
    assert!(open(PASSPHRASE_WORK_FACTOR), "opens with the chosen factor");
    assert!(!open(PASSPHRASE_WORK_FACTOR - 1), "and needs exactly it");
}

#[test]
fn default_work_factor_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let key = passphrase("correct horse");
    let path = dir.path().join("s.age");
    let one = BTreeMap::from([("a:b".to_string(), "c".to_string())]);
    save(&path, &key, &one).unwrap();
    assert_eq!(load(&path, &key).unwrap(), one);
}

#[test]
fn missing_file_is_empty_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.age");
    assert!(!exists(&path));
    assert!(load(&path, &passphrase("x")).unwrap().is_empty());
}

#[test]
fn empty_map_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let key = passphrase("p");
    let path = dir.path().join("s.age");
    save_with_work_factor(&path, &key, &BTreeMap::new(), FAST).unwrap();
    assert!(load(&path, &key).unwrap().is_empty());
}

#[test]
fn file_is_armoured_and_holds_no_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    for (_, path) in saved_under_each_kind_of_key(dir.path()) {
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.starts_with(BEGIN_MARKER), "{text}");
        assert!(text.trim_end().ends_with(END_MARKER), "{text}");
        for (k, v) in values() {
            assert!(!text.contains(&k), "key {k} in file");
            assert!(!text.contains(&v), "value in file");
        }
        assert!(!text.contains("hunter2"));
    }
}

#[test]
fn wrong_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    let path = saved(dir.path(), &passphrase("right"));
    let err = load_fails(&path, &passphrase("wrong"));
    assert!(matches!(err, StoreError::WrongPassphrase { .. }), "{err:?}");
    assert!(err.to_string().contains("wrong passphrase"));
}

#[test]
fn wrong_identity() {
    let dir = tempfile::tempdir().unwrap();
    let path = saved(dir.path(), &identity(dir.path(), "a.txt"));
    let other = identity_file(dir.path(), "b.txt");
    let err = load_fails(&path, &Key::Identity(other.clone()));
    match &err {
        StoreError::WrongIdentity { identity, .. } => assert_eq!(identity, &other),
        _ => panic!("{err:?}"),
    }
    assert!(err.to_string().contains("b.txt"));
}

#[test]
fn passphrase_file_opened_with_identity() {
    let dir = tempfile::tempdir().unwrap();
    let path = saved(dir.path(), &passphrase("pw"));
    let key = identity(dir.path(), "key.txt");
    let err = load_fails(&path, &key);
    assert!(matches!(err, StoreError::NeedsPassphrase { .. }), "{err:?}");
}

#[test]
fn identity_file_opened_with_passphrase() {
    let dir = tempfile::tempdir().unwrap();
    let path = saved(dir.path(), &identity(dir.path(), "k.txt"));
    let err = load_fails(&path, &passphrase("pw"));
    assert!(matches!(err, StoreError::NeedsIdentity { .. }), "{err:?}");
}

#[test]
fn truncated_file() {
    let dir = tempfile::tempdir().unwrap();
    let (key, path) = saved_under_pw(dir.path());
    let full = fs::read(&path).unwrap();
    // Cut at several places: inside the armour, right before the end
    // marker, and to nothing at all.
    for cut in [full.len() / 2, full.len() - END_MARKER.len() - 2, 40, 0] {
        fs::write(&path, &full[..cut]).unwrap();
        let err = load_fails(&path, &key);
        assert!(
            matches!(err, StoreError::Truncated { .. }),
            "cut {cut}: {err:?}"
        );
    }
    // Lines removed from the middle of the armour, end marker intact.
    let text = String::from_utf8(full).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.len() > 4, "{text}");
    let mut shorter = vec![lines[0], lines[1]];
    shorter.extend(&lines[lines.len() - 1..]);
    fs::write(&path, shorter.join("\n") + "\n").unwrap();
    let err = load_fails(&path, &key);
    assert!(
        matches!(
            err,
            StoreError::Truncated { .. } | StoreError::Corrupt { .. }
        ),
        "{err:?}"
    );
}

/// Replaces the base64 character at `index` by another valid one.
fn flip(bytes: &mut [u8], index: usize) {
    bytes[index] = if bytes[index] == b'A' { b'B' } else { b'A' };
}

#[test]
fn tampered_file() {
    let dir = tempfile::tempdir().unwrap();
    for (key, path) in saved_under_each_kind_of_key(dir.path()) {
        let original = fs::read(&path).unwrap();
        let text = String::from_utf8(original.clone()).unwrap();
        let body_start = BEGIN_MARKER.len() + 1;
        let body_end = text.find(END_MARKER).unwrap();
        let body = &text[body_start..body_end];
        let last_full_line = body.lines().count() - 2;
        // The payload (last full lines of the armour) and the header MAC
        // region (middle of the first lines).
        let payload_index = body_start + last_full_line * 65 + 10;
        let header_index = body_start + 65 * 3 + 5;
        for index in [payload_index, header_index] {
            let mut bytes = original.clone();
            flip(&mut bytes, index);
            fs::write(&path, &bytes).unwrap();
            let err = load_fails(&path, &key);
            assert!(
                matches!(err, StoreError::Corrupt { .. }),
                "{index}: {err:?}"
            );
            assert!(err.to_string().contains("damaged"), "{err}");
        }
    }
}

#[test]
fn garbage_file_is_corrupt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.age");
    fs::write(&path, "hello: world\n").unwrap();
    let err = load_fails(&path, &passphrase("pw"));
    assert!(matches!(err, StoreError::Corrupt { .. }), "{err:?}");
}

#[cfg(unix)]
#[test]
fn file_mode_is_0600_even_over_a_public_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config/secrets/dev.age");
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, "old").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    save_with_work_factor(&path, &passphrase("pw"), &values(), FAST).unwrap();
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

#[test]
fn save_is_atomic_and_leaves_no_temp_files() {
    let dir = tempfile::tempdir().unwrap();
    let (key, path) = saved_under_pw(dir.path());
    let mut more = values();
    more.insert("extra:key".into(), "v".into());
    save_with_work_factor(&path, &key, &more, FAST).unwrap();
    assert_eq!(load(&path, &key).unwrap(), more);
    let names: Vec<_> = fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("dev.age")]);
}

#[test]
fn failed_save_leaves_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = saved_under_pw(dir.path());
    let before = fs::read(&path).unwrap();
    let missing = Key::Identity(dir.path().join("no-such-identity.txt"));
    let err = save_with_work_factor(&path, &missing, &values(), FAST).unwrap_err();
    assert!(matches!(err, StoreError::IdentityRead { .. }), "{err:?}");
    assert!(err.to_string().contains("no-such-identity.txt"));
    assert_eq!(fs::read(&path).unwrap(), before);
}

#[test]
fn identity_file_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.age");
    let bad = dir.path().join("bad.txt");
    fs::write(&bad, "# comment\n\nnot-a-key\n").unwrap();
    let err = save_with_work_factor(&path, &Key::Identity(bad), &values(), FAST).unwrap_err();
    assert!(
        matches!(err, StoreError::IdentityInvalid { line: 3, .. }),
        "{err:?}"
    );
    assert!(!err.to_string().contains("not-a-key"));

    let empty = dir.path().join("empty.txt");
    fs::write(&empty, "# only comments\n").unwrap();
    let err = save_with_work_factor(&path, &Key::Identity(empty), &values(), FAST).unwrap_err();
    assert!(matches!(err, StoreError::IdentityMissing { .. }), "{err:?}");
    assert!(!path.exists());
}

#[test]
fn debug_output_hides_passphrase() {
    let key = passphrase("sup3r-s3cret");
    assert!(!format!("{key:?}").contains("sup3r-s3cret"));
}
