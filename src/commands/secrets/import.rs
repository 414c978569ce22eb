//! `strata secrets import`: many values at once into the stack's store, from a file
//! (`namespace:name=VALUE` lines, values optionally quoted, or a JSON object of them) or from the
//! secure values of a Pulumi project's own stack config (`pulumi config --json
//! --show-secrets`, run as strata runs that project). Values are never printed; keys are
//! checked as `secrets set` checks them, and `--key` picks some.

use std::collections::BTreeMap;
use std::path::Path;

use crate::cli::SecretsImportArgs;
use crate::error::{Error, Result};
use crate::util::display_path;
use crate::workspace::{ProjectKind, Target, Workspace};

/// The values `args` names, by key.
pub(super) fn values(
    target: &Target,
    ws: &Workspace,
    stack: &str,
    args: &SecretsImportArgs,
) -> Result<BTreeMap<String, String>> {
    let all = match (&args.from_file, &args.from_pulumi) {
        (Some(file), _) => from_file(file)?,
        (None, Some(project)) => from_pulumi(target, ws, stack, project)?,
        (None, None) => return Err(Error::usage("name a source: --from-file or --from-pulumi")),
    };
    let picked = pick(all, &args.keys)?;
    for k in picked.keys() {
        super::check_key(k)?;
    }
    if picked.is_empty() {
        return Err(Error::config(
            "the source holds no secret to import: nothing was stored.",
        ));
    }
    Ok(picked)
}

/// `keys` of `all` (every one when `keys` is empty); a key the source lacks is an error
/// that names it.
fn pick(all: BTreeMap<String, String>, keys: &[String]) -> Result<BTreeMap<String, String>> {
    if keys.is_empty() {
        return Ok(all);
    }
    let missing: Vec<&str> = keys
        .iter()
        .filter(|k| !all.contains_key(*k))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        return Err(Error::config(format!(
            "the source has no secret {}: nothing was stored. Its keys: {}.",
            missing.join(", "),
            all.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(all.into_iter().filter(|(k, _)| keys.contains(k)).collect())
}

/// A JSON object of strings, or `namespace:name=VALUE` lines.
fn from_file(path: &Path) -> Result<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io("read", path, e))?;
    if text.trim_start().starts_with('{') {
        let doc: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&text).map_err(|e| {
                Error::config(format!(
                    "{}: not a JSON object of `namespace:name` to string values (line {}).",
                    display_path(path),
                    e.line()
                ))
            })?;
        return doc
            .into_iter()
            .map(|(k, v)| match v {
                serde_json::Value::String(s) => Ok((k, s)),
                _ => Err(Error::config(format!(
                    "{}: `{k}` is not a string: a secret is text.",
                    display_path(path)
                ))),
            })
            .collect();
    }
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(Error::config(format!(
                "{}:{}: not a `namespace:name=VALUE` line: each line names a secret and gives its value.",
                display_path(path),
                n + 1
            )));
        };
        out.insert(k.trim().to_string(), unquote(v.trim()).to_string());
    }
    Ok(out)
}

/// `v` without one pair of surrounding quotes (`'…'` or `"…"`), as dotenv files write a
/// value with spaces.
fn unquote(v: &str) -> &str {
    for q in ['\'', '"'] {
        if let Some(inner) = v.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner;
        }
    }
    v
}

/// The secure values of `project`'s own stack config, as `pulumi config --json
/// --show-secrets` reads them with the project's backend and its name of the stack.
fn from_pulumi(
    target: &Target,
    ws: &Workspace,
    stack: &str,
    project: &str,
) -> Result<BTreeMap<String, String>> {
    let loaded = crate::commands::load(target, false)?;
    let node = &loaded.plan.nodes[loaded.plan.resolve(project)?];
    let Some(p) = node
        .project
        .as_ref()
        .filter(|p| matches!(p.kind, ProjectKind::Pulumi { .. }))
    else {
        return Err(Error::config(format!(
            "{project} is no Pulumi project: --from-pulumi reads the secure values of a Pulumi project's own stack config."
        )));
    };
    let name = loaded
        .profile
        .entry(&node.path)
        .map_or_else(|| stack.to_string(), |e| e.stack_name(stack));
    let env = crate::pipeline::env::with_backend(
        crate::pipeline::env::pulumi_env(ws),
        loaded.backends.of(&node.path),
    );
    let bin = crate::pipeline::preflight::find_pulumi(ws, &env, &loaded.plan)?;
    let dir = p.dir.display().to_string();
    let args = [
        "config",
        "--json",
        "--show-secrets",
        "--stack",
        &name,
        "--cwd",
        &dir,
        "--non-interactive",
    ];
    let out = crate::engine::process::run_captured(
        duct::cmd(&bin, args).dir(&p.dir).full_env(&env),
        &crate::engine::Control::new(),
        &node.path,
        None,
    )
    .map_err(|e| Error::failed(format!("could not run {}: {e}", bin.display())))?;
    if !out.exit.success() {
        // Pulumi's error names what went wrong (no stack, a wrong passphrase); it holds
        // no value.
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(Error::failed(format!(
            "`pulumi config` of {} failed: {}",
            node.path,
            err.lines()
                .find(|l| l.starts_with("error:"))
                .unwrap_or(err.trim())
        )));
    }
    secure_values(&out.stdout).ok_or_else(|| {
        Error::failed(format!(
            "`pulumi config --json` of {} did not print a JSON object",
            node.path
        ))
    })
}

/// The entries Pulumi marks `"secret": true` in `pulumi config --json --show-secrets`:
/// their `value` (an object value as its JSON text).
fn secure_values(stdout: &[u8]) -> Option<BTreeMap<String, String>> {
    let doc: serde_json::Map<String, serde_json::Value> = serde_json::from_slice(stdout).ok()?;
    Some(
        doc.into_iter()
            .filter(|(_, v)| v["secret"] == true)
            .filter_map(|(k, v)| {
                let value = match (v.get("objectValue"), v.get("value")) {
                    (Some(o), _) if !o.is_null() => o.to_string(),
                    (_, Some(serde_json::Value::String(s))) => s.clone(),
                    (_, Some(other)) if !other.is_null() => other.to_string(),
                    _ => return None,
                };
                Some((k, value))
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secure_values_are_the_secret_entries_of_pulumi_config() {
        let out = br#"{"db:password": {"value": "s3", "secret": true},
            "db:size": {"value": "small", "secret": false},
            "db:creds": {"value": "{\"u\":\"a\"}", "objectValue": {"u": "a"}, "secret": true}}"#;
        let v = secure_values(out).unwrap();
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v["db:password"], "s3");
        assert_eq!(v["db:creds"], r#"{"u":"a"}"#);
    }

    #[test]
    fn files_are_dotenv_lines_or_a_json_object_and_keys_are_picked() {
        let d = tempfile::tempdir().unwrap();
        let env = d.path().join("s.env");
        std::fs::write(&env, "# team secrets\ndb:password='pa ss'\napp:token=t0k\n").unwrap();
        let all = from_file(&env).unwrap();
        assert_eq!(all["db:password"], "pa ss");
        assert_eq!(all.len(), 2);
        let bad = d.path().join("bad.env");
        std::fs::write(&bad, "db:password=x\njust words\n").unwrap();
        let e = from_file(&bad).unwrap_err();
        assert!(e.message.contains("bad.env:2:"), "{e:?}");
        let json = d.path().join("s.json");
        std::fs::write(&json, r#"{"db:password": "x", "app:n": 3}"#).unwrap();
        let e = from_file(&json).unwrap_err();
        assert!(e.message.contains("`app:n` is not a string"), "{e:?}");
        let picked = pick(all.clone(), &["app:token".into()]).unwrap();
        assert_eq!(picked.keys().collect::<Vec<_>>(), ["app:token"]);
        let e = pick(all, &["nope:x".into()]).unwrap_err();
        assert!(
            e.message.contains("no secret nope:x") && !e.message.contains("t0k"),
            "{e:?}"
        );
    }
}
