//! The built-in `kubeconfig` on_success hook: merges a kubeconfig into the user's kubeconfig file.
//!
//! Both files are handled as generic YAML, so keys strata does not know are kept. The
//! incoming context, its cluster and its user are renamed to the hook's name (generated
//! kubeconfigs reuse names: pulumi-eks calls every cluster `kubernetes` and every user
//! `aws`), entries of that name are replaced and all others kept, `current-context` is
//! set to it (unless the hook says `current: false`); a destroy of the project removes
//! them again. The file is chosen as kubectl does, written under kubectl's lock
//! (`<file>.lock`), atomically, with mode 0600. Kubeconfigs hold credentials: errors
//! never quote their contents.

pub mod error;
mod incoming;
mod lock;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde_yaml::{Mapping, Value};

use error::{KubeconfigError, yaml_error};
use incoming::{named_entries, parse_new, rename_to};
use lock::FileLock;

const SECTIONS: [&str; 3] = ["clusters", "users", "contexts"];

/// What [`merge_kubeconfig`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeReport {
    /// The file written.
    pub path: PathBuf,
    /// Whether the file did not exist (or was empty) before.
    pub created: bool,
    /// The context merged (made `current-context`, unless the hook says `current: false`).
    pub context: String,
    /// Names of entries added, by section (`clusters`, `users`, `contexts`).
    pub added: BTreeMap<String, Vec<String>>,
    /// Names of entries that replaced an entry of the same name, by section.
    pub replaced: BTreeMap<String, Vec<String>>,
}

/// The kubeconfig file to write to, as kubectl chooses it: with `KUBECONFIG` set (a
/// `:`-separated list), the first file of the list that exists, else the last one;
/// otherwise `$HOME/.kube/config`.
pub fn default_target(env: &BTreeMap<String, String>) -> PathBuf {
    let list: Vec<&str> = env
        .get("KUBECONFIG")
        .map(|l| {
            l.split(':')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .collect()
        })
        .unwrap_or_default();
    if let Some(existing) = list.iter().find(|p| Path::new(p).exists()) {
        return PathBuf::from(existing);
    }
    if let Some(last) = list.last() {
        return PathBuf::from(last);
    }
    let home = env
        .get("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(PathBuf::from))
        .unwrap_or_default();
    home.join(".kube").join("config")
}

/// Merges `new_kubeconfig` (YAML, JSON or base64 of either) into `target`.
///
/// The new kubeconfig's current context (or its only context), with the cluster and
/// the user it names, is renamed to `name` and becomes the target's
/// `current-context`. Entries called `name` are replaced, all others kept. `target`
/// and its directory are created if missing. The read-merge-write holds kubectl's
/// lock, `<target>.lock`, so parallel hooks (and kubectl) never lose an entry.
pub fn merge_kubeconfig(
    target: &Path,
    new_kubeconfig: &str,
    name: &str,
) -> Result<MergeReport, KubeconfigError> {
    merge(target, new_kubeconfig, name, true)
}

/// [`merge_kubeconfig`], but `current-context` is left as it was (a hook with
/// `current: false`: a demo must not repoint the user's kubectl).
pub fn merge_kubeconfig_keeping_current(
    target: &Path,
    new_kubeconfig: &str,
    name: &str,
) -> Result<MergeReport, KubeconfigError> {
    merge(target, new_kubeconfig, name, false)
}

/// Removes the cluster, user and context called `name` from `target` (what a hook
/// merged), under kubectl's lock; `current-context` is unset when it named them. True
/// when anything was removed; a missing file removes nothing.
pub fn forget_kubeconfig(target: &Path, name: &str) -> Result<bool, KubeconfigError> {
    let target = fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
    if !target.exists() {
        return Ok(false);
    }
    let _lock = FileLock::take(&target, std::time::Duration::from_secs(60))?;
    let (mut config, created) = read_target(&target)?;
    if created {
        return Ok(false);
    }
    let mut removed = false;
    for section in SECTIONS {
        if let Some(Value::Sequence(entries)) = config.get_mut(section) {
            let before = entries.len();
            entries.retain(|e| e.get("name").and_then(Value::as_str) != Some(name));
            removed |= entries.len() != before;
        }
    }
    if config.get("current-context").and_then(Value::as_str) == Some(name) {
        config.remove("current-context");
        removed = true;
    }
    if removed {
        let text =
            serde_yaml::to_string(&Value::Mapping(config)).map_err(|e| KubeconfigError::Write {
                path: target.clone(),
                source: io::Error::other(e.to_string()),
            })?;
        write_atomically(&target, text.as_bytes())?;
    }
    Ok(removed)
}

fn merge(
    target: &Path,
    new_kubeconfig: &str,
    name: &str,
    make_current: bool,
) -> Result<MergeReport, KubeconfigError> {
    let new = parse_new(new_kubeconfig)?;
    let (new, context) = rename_to(new, name)?;

    // Write through a symlinked kubeconfig rather than replacing the link.
    let target = fs::canonicalize(target).unwrap_or_else(|_| target.to_path_buf());
    let _lock = FileLock::take(&target, std::time::Duration::from_secs(60))?;
    let (mut merged, created) = read_target(&target)?;
    let bad_target = |problem: String| KubeconfigError::BadTarget {
        path: target.clone(),
        problem,
    };

    let mut added = BTreeMap::new();
    let mut replaced = BTreeMap::new();
    for section in SECTIONS {
        let entries =
            named_entries(&new, section).map_err(|problem| KubeconfigError::BadNew { problem })?;
        let existing = match merged.get_mut(section) {
            Some(Value::Sequence(existing)) => existing,
            Some(Value::Null) | None => {
                merged.insert(section.into(), Value::Sequence(Vec::new()));
                match merged.get_mut(section) {
                    Some(Value::Sequence(existing)) => existing,
                    _ => return Err(bad_target(format!("`{section}` cannot be created"))),
                }
            }
            Some(_) => return Err(bad_target(format!("`{section}` is not a list"))),
        };
        for (name, entry) in entries {
            let position = existing
                .iter()
                .position(|e| e.get("name").and_then(Value::as_str) == Some(name.as_str()));
            match position {
                Some(i) => {
                    existing[i] = entry;
                    replaced
                        .entry(section.to_string())
                        .or_insert_with(Vec::new)
                        .push(name);
                }
                None => {
                    existing.push(entry);
                    added
                        .entry(section.to_string())
                        .or_insert_with(Vec::new)
                        .push(name);
                }
            }
        }
    }
    if make_current {
        merged.insert("current-context".into(), Value::String(context.clone()));
    }

    let text =
        serde_yaml::to_string(&Value::Mapping(merged)).map_err(|e| KubeconfigError::Write {
            path: target.clone(),
            source: io::Error::other(e.to_string()),
        })?;
    write_atomically(&target, text.as_bytes())?;
    Ok(MergeReport {
        path: target,
        created,
        context,
        added,
        replaced,
    })
}

/// Reads the target kubeconfig; a missing or empty file is a new one.
fn read_target(path: &Path) -> Result<(Mapping, bool), KubeconfigError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(KubeconfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    if text.trim().is_empty() {
        return Ok((skeleton(), true));
    }
    match serde_yaml::from_str::<Value>(&text) {
        Ok(Value::Mapping(mapping)) => Ok((mapping, false)),
        Ok(Value::Null) => Ok((skeleton(), true)),
        Ok(_) => Err(KubeconfigError::BadTarget {
            path: path.to_path_buf(),
            problem: "it is not a YAML mapping".into(),
        }),
        Err(e) => Err(KubeconfigError::InvalidTarget {
            path: path.to_path_buf(),
            detail: yaml_error(&e),
        }),
    }
}

fn skeleton() -> Mapping {
    let mut config = Mapping::new();
    config.insert("apiVersion".into(), "v1".into());
    config.insert("kind".into(), "Config".into());
    config.insert("preferences".into(), Value::Mapping(Mapping::new()));
    config
}

/// Atomic write (temp file, 0600, rename): see `files::write_file_atomic`.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), KubeconfigError> {
    crate::files::write_file_atomic(path, bytes, Some(0o600)).map_err(|source| {
        KubeconfigError::Write {
            path: path.to_path_buf(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine;

    const NEW: &str = "\
apiVersion: v1
kind: Config
clusters:
- name: eks-dev
  cluster:
    server: https://eks.example
    certificate-authority-data: Q0EtREFUQQ==
users:
- name: eks-dev-user
  user:
    token: NEW-TOKEN-abc
contexts:
- name: eks-dev
  context:
    cluster: eks-dev
    user: eks-dev-user
current-context: eks-dev
";

    const EXISTING: &str = "\
apiVersion: v1
kind: Config
preferences:
  colors: true
clusters:
- name: kind
  cluster:
    server: https://127.0.0.1:6443
- name: eks-dev
  cluster:
    server: https://OLD.example
users:
- name: kind-user
  user:
    token: kind-token
- name: eks-dev-user
  user:
    token: OLD-TOKEN
contexts:
- name: kind
  context:
    cluster: kind
    user: kind-user
    namespace: work
current-context: kind
x-custom-extension: keep-me
";

    /// A kubeconfig's path in a fresh folder (kept while the folder lives), the file
    /// holding `text` when given, else not there yet.
    fn config_holding(text: Option<&str>) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("config");
        if let Some(text) = text {
            fs::write(&target, text).unwrap();
        }
        (dir, target)
    }

    fn read(path: &Path) -> Value {
        serde_yaml::from_str(&fs::read_to_string(path).unwrap()).unwrap()
    }

    fn names(config: &Value, section: &str) -> Vec<String> {
        config[section]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// A hook with `current: false` adds its entries and leaves the user's current
    /// context; forgetting them (the project destroyed) removes exactly them, and unsets
    /// `current-context` only when it named them.
    #[test]
    fn a_merge_that_keeps_current_and_its_removal_leave_the_users_own_entries() {
        let (dir, target) = config_holding(Some(EXISTING));
        let r = merge_kubeconfig_keeping_current(&target, NEW, "dev-cluster").unwrap();
        assert_eq!(r.context, "dev-cluster");
        let config = read(&target);
        assert_eq!(config["current-context"], Value::from("kind"));
        assert!(names(&config, "contexts").contains(&"dev-cluster".to_string()));
        assert!(forget_kubeconfig(&target, "dev-cluster").unwrap());
        let config = read(&target);
        assert_eq!(config["current-context"], Value::from("kind"));
        for section in SECTIONS {
            assert!(
                !names(&config, section).contains(&"dev-cluster".to_string()),
                "{section}"
            );
        }
        assert_eq!(config["x-custom-extension"], Value::from("keep-me"));
        assert!(
            !forget_kubeconfig(&target, "dev-cluster").unwrap(),
            "nothing left"
        );
        // Made current, then forgotten: no current context names a removed one.
        merge_kubeconfig(&target, NEW, "dev-cluster").unwrap();
        assert!(forget_kubeconfig(&target, "dev-cluster").unwrap());
        assert!(read(&target).get("current-context").is_none());
        assert!(!forget_kubeconfig(&dir.path().join("none"), "x").unwrap());
    }

    fn named<'a>(config: &'a Value, section: &str, name: &str) -> &'a Value {
        config[section]
            .as_sequence()
            .unwrap()
            .iter()
            .find(|e| e["name"].as_str() == Some(name))
            .unwrap()
    }

    #[test]
    fn creates_a_missing_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("home/.kube/config");
        let report = merge_kubeconfig(&target, NEW, "eks-dev").unwrap();
        assert!(report.created);
        assert_eq!(report.context, "eks-dev");
        assert_eq!(report.path, target);
        let config = read(&target);
        assert_eq!(config["apiVersion"], Value::from("v1"));
        assert_eq!(config["kind"], Value::from("Config"));
        assert_eq!(config["preferences"], Value::Mapping(Mapping::new()));
        assert_eq!(config["current-context"], Value::from("eks-dev"));
        assert_eq!(names(&config, "clusters"), ["eks-dev"]);
        assert_eq!(names(&config, "users"), ["eks-dev"]);
        assert_eq!(names(&config, "contexts"), ["eks-dev"]);
    }

    #[test]
    fn keeps_existing_entries_and_replaces_same_names() {
        let (_dir, target) = config_holding(Some(EXISTING));
        let report = merge_kubeconfig(&target, NEW, "eks-dev").unwrap();
        assert!(!report.created);
        assert_eq!(report.replaced["clusters"], ["eks-dev"]);
        assert_eq!(report.added["users"], ["eks-dev"]);
        assert_eq!(report.added["contexts"], ["eks-dev"]);
        assert!(!report.added.contains_key("clusters"));

        let config = read(&target);
        assert_eq!(names(&config, "clusters"), ["kind", "eks-dev"]);
        // The incoming user is renamed to the hook's name; the user's own entry stays.
        assert_eq!(
            names(&config, "users"),
            ["kind-user", "eks-dev-user", "eks-dev"]
        );
        assert_eq!(names(&config, "contexts"), ["kind", "eks-dev"]);
        assert_eq!(
            named(&config, "clusters", "eks-dev")["cluster"]["server"],
            Value::from("https://eks.example")
        );
        assert_eq!(
            named(&config, "users", "eks-dev")["user"]["token"],
            Value::from("NEW-TOKEN-abc")
        );
        assert_eq!(
            named(&config, "contexts", "kind")["context"]["namespace"],
            Value::from("work")
        );
        assert_eq!(config["current-context"], Value::from("eks-dev"));
        assert_eq!(config["x-custom-extension"], Value::from("keep-me"));
        assert_eq!(config["preferences"]["colors"], Value::from(true));
    }

    #[test]
    fn merging_twice_is_stable() {
        let (_dir, target) = config_holding(Some(EXISTING));
        merge_kubeconfig(&target, NEW, "eks-dev").unwrap();
        let once = fs::read_to_string(&target).unwrap();
        let report = merge_kubeconfig(&target, NEW, "eks-dev").unwrap();
        assert!(report.added.is_empty());
        assert_eq!(fs::read_to_string(&target).unwrap(), once);
    }

    #[test]
    fn base64_input() {
        let (_dir, target) = config_holding(None);
        let encoded = base64::engine::general_purpose::STANDARD.encode(NEW);
        // Wrapped like `base64` prints it.
        let wrapped: Vec<String> = encoded
            .as_bytes()
            .chunks(76)
            .map(|c| String::from_utf8(c.to_vec()).unwrap())
            .collect();
        let report = merge_kubeconfig(&target, &(wrapped.join("\n") + "\n"), "eks-dev").unwrap();
        assert_eq!(report.context, "eks-dev");
        assert_eq!(names(&read(&target), "users"), ["eks-dev"]);
    }

    #[test]
    fn json_and_json_string_input() {
        let value: Value = serde_yaml::from_str(NEW).unwrap();
        let json = serde_json::to_string(&value).unwrap();
        let quoted = serde_json::to_string(NEW).unwrap();
        for input in [json, quoted] {
            let (_dir, target) = config_holding(None);
            let report = merge_kubeconfig(&target, &input, "eks-dev").unwrap();
            assert_eq!(report.context, "eks-dev", "{input}");
        }
    }

    #[test]
    fn the_name_renames_context_cluster_and_user() {
        let (_dir, target) = config_holding(Some(EXISTING));
        let report = merge_kubeconfig(&target, NEW, "dev").unwrap();
        assert_eq!(report.context, "dev");
        let config = read(&target);
        assert_eq!(names(&config, "contexts"), ["kind", "dev"]);
        assert_eq!(names(&config, "clusters"), ["kind", "eks-dev", "dev"]);
        assert_eq!(
            names(&config, "users"),
            ["kind-user", "eks-dev-user", "dev"]
        );
        let ctx = &named(&config, "contexts", "dev")["context"];
        assert_eq!(
            (ctx["cluster"].as_str(), ctx["user"].as_str()),
            (Some("dev"), Some("dev"))
        );
        assert_eq!(config["current-context"], Value::from("dev"));
    }

    /// pulumi-eks names every cluster `kubernetes` and every user `aws`: dev and prod
    /// must not overwrite each other, nor the user's own `kubernetes`/`aws` entries.
    #[test]
    fn generated_kubeconfigs_with_reused_names_keep_every_stack() {
        let eks = |server: &str| {
            format!(
                "clusters:\n- name: kubernetes\n  cluster: {{server: {server}}}\nusers:\n- name: aws\n  user: {{token: t}}\ncontexts:\n- name: aws\n  context: {{cluster: kubernetes, user: aws}}\ncurrent-context: aws\n"
            )
        };
        let (_dir, target) = config_holding(Some(&eks("https://mine")));
        merge_kubeconfig(&target, &eks("https://dev"), "dev-eks").unwrap();
        merge_kubeconfig(&target, &eks("https://prod"), "prod-eks").unwrap();
        let config = read(&target);
        assert_eq!(
            names(&config, "clusters"),
            ["kubernetes", "dev-eks", "prod-eks"]
        );
        assert_eq!(names(&config, "users"), ["aws", "dev-eks", "prod-eks"]);
        assert_eq!(
            named(&config, "clusters", "kubernetes")["cluster"]["server"],
            Value::from("https://mine")
        );
        assert_eq!(
            named(&config, "clusters", "dev-eks")["cluster"]["server"],
            Value::from("https://dev")
        );
        assert_eq!(config["current-context"], Value::from("prod-eks"));
    }

    /// Hooks that run in parallel all keep their entries (kubectl's lock file).
    #[test]
    fn parallel_merges_keep_every_entry() {
        let (dir, target) = config_holding(None);
        std::thread::scope(|s| {
            for i in 0..16 {
                let target = &target;
                s.spawn(move || merge_kubeconfig(target, NEW, &format!("ctx-{i}")).unwrap());
            }
        });
        let config = read(&target);
        assert_eq!(names(&config, "contexts").len(), 16, "{config:?}");
        assert!(
            !dir.path().join("config.lock").exists(),
            "the lock is released"
        );
    }

    #[test]
    fn single_context_without_current_is_chosen() {
        let (_dir, target) = config_holding(None);
        let text = NEW.replace("current-context: eks-dev\n", "");
        assert_eq!(
            merge_kubeconfig(&target, &text, "eks-dev").unwrap().context,
            "eks-dev"
        );
    }

    #[cfg(unix)]
    #[test]
    fn mode_is_0600_and_no_temp_files_remain() {
        use std::os::unix::fs::PermissionsExt;
        let (dir, target) = config_holding(Some(EXISTING));
        fs::set_permissions(&target, fs::Permissions::from_mode(0o644)).unwrap();
        merge_kubeconfig(&target, NEW, "eks-dev").unwrap();
        let mode = fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let entries: Vec<_> = fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(entries.len(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn writes_through_a_symlink() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real-config");
        fs::write(&real, EXISTING).unwrap();
        let link = dir.path().join("config");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        merge_kubeconfig(&link, NEW, "eks-dev").unwrap();
        assert!(
            fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(names(&read(&real), "contexts"), ["kind", "eks-dev"]);
    }

    #[test]
    fn invalid_new_kubeconfig_is_an_error() {
        let (_dir, target) = config_holding(None);
        let err = merge_kubeconfig(&target, "clusters: [\n  - {name: a\n", "eks-dev").unwrap_err();
        assert!(matches!(err, KubeconfigError::InvalidNew { .. }), "{err:?}");
        let message = err.to_string();
        assert!(message.contains("kubeconfig to merge"), "{message}");
        assert!(message.contains("line"), "{message}");

        let err = merge_kubeconfig(&target, "just some words", "eks-dev").unwrap_err();
        assert!(matches!(err, KubeconfigError::InvalidNew { .. }), "{err:?}");

        let err = merge_kubeconfig(&target, "- a\n- b\n", "eks-dev").unwrap_err();
        assert!(matches!(err, KubeconfigError::BadNew { .. }), "{err:?}");

        let no_name = NEW.replace("- name: eks-dev-user\n", "- nom: x\n");
        let err = merge_kubeconfig(&target, &no_name, "eks-dev").unwrap_err();
        assert!(
            err.to_string().contains("entry 1 of `users` has no name"),
            "{err}"
        );

        let err = merge_kubeconfig(
            &target,
            "clusters: []\nusers: []\ncontexts: []\n",
            "eks-dev",
        )
        .unwrap_err();
        assert!(err.to_string().contains("no contexts"), "{err}");

        let two = NEW.replace("current-context: eks-dev\n", "")
            + "- name: second\n  context: {cluster: eks-dev, user: eks-dev-user}\n";
        let two = two.replace("contexts:\n", "contexts:\n- name: other\n  context: {}\n");
        let err = merge_kubeconfig(&target, &two, "eks-dev").unwrap_err();
        assert!(err.to_string().contains("no current-context"), "{err}");
        assert!(!target.exists(), "nothing is written on error");
    }

    #[test]
    fn empty_new_kubeconfig_is_an_error() {
        let (_dir, target) = config_holding(None);
        for empty in ["", "   \n", "{}", "~", "\"\""] {
            let err = merge_kubeconfig(&target, empty, "eks-dev").unwrap_err();
            assert!(matches!(err, KubeconfigError::Empty), "{empty:?}: {err:?}");
            assert!(err.to_string().contains("empty"));
        }
        assert!(!target.exists());
    }

    #[test]
    fn invalid_target_is_an_error_and_left_alone() {
        let (_dir, target) = config_holding(Some("clusters: [oops\n"));
        let err = merge_kubeconfig(&target, NEW, "eks-dev").unwrap_err();
        assert!(
            matches!(err, KubeconfigError::InvalidTarget { .. }),
            "{err:?}"
        );
        assert!(
            err.to_string().contains(&target.display().to_string()),
            "{err}"
        );
        assert_eq!(fs::read_to_string(&target).unwrap(), "clusters: [oops\n");

        fs::write(&target, "clusters: 3\n").unwrap();
        let err = merge_kubeconfig(&target, NEW, "eks-dev").unwrap_err();
        assert!(
            err.to_string().contains("`clusters` is not a list"),
            "{err}"
        );
    }

    #[test]
    fn errors_never_quote_credentials() {
        let (_dir, target) = config_holding(None);
        let broken = NEW.replace("token: NEW-TOKEN-abc", "token: NEW-TOKEN-abc: [");
        let err = merge_kubeconfig(&target, &broken, "eks-dev").unwrap_err();
        let shown = format!("{err} {err:?}");
        assert!(!shown.contains("NEW-TOKEN"), "{shown}");
    }

    #[test]
    fn default_target_prefers_kubeconfig() {
        let env = crate::util::string_map;
        // kubectl's rule: the first file of the list that exists, else the last.
        assert_eq!(
            default_target(&env(&[
                ("KUBECONFIG", "/nonexistent/one:/nonexistent/two"),
                ("HOME", "/home/u")
            ])),
            PathBuf::from("/nonexistent/two")
        );
        let dir = tempfile::tempdir().unwrap();
        let second = dir.path().join("second");
        fs::write(&second, "").unwrap();
        let list = format!("/nonexistent/one:{}:/nonexistent/three", second.display());
        assert_eq!(default_target(&env(&[("KUBECONFIG", &list)])), second);
        assert_eq!(
            default_target(&env(&[("KUBECONFIG", ":/b/two")])),
            PathBuf::from("/b/two")
        );
        assert_eq!(
            default_target(&env(&[("KUBECONFIG", ""), ("HOME", "/home/u")])),
            PathBuf::from("/home/u/.kube/config")
        );
        assert_eq!(
            default_target(&env(&[("HOME", "/home/u")])),
            PathBuf::from("/home/u/.kube/config")
        );
    }
}
