//! The file backend: `PULUMI_BACKEND_URL=file://DIR` (or the project's `backend.url`, or
//! the backend `pulumi login` chose), checkpoints and lock files under
//! `DIR/.pulumi/` in Pulumi's project-scoped layout (or its legacy one, where a stack
//! belongs to no project: `layout`).

use serde::Serialize;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};

use crate::error::{Fail, Result, code};
use crate::fields;

pub const VERSION: &str = "v3.230.0";
pub const ORG: &str = "organization";

/// A file backend rooted at the directory that holds `.pulumi/`; or, in the fake's
/// cloud mode (`PULUMI_BACKEND_URL=https://…` with `FAKE_PULUMI_CLOUD_DIR`), a stand-in
/// for Pulumi Cloud keeping each organization's stacks apart.
#[derive(Debug, Clone)]
pub struct Backend {
    pub root: PathBuf,
    pub url: String,
    /// Cloud mode: the organization of the stacks this backend addresses.
    pub org: Option<String>,
    /// Pulumi's legacy layout: `.pulumi/stacks/<stack>.json`, one stack per name for
    /// every project.
    pub legacy: bool,
}

/// The organization this invocation's `--stack` names (cloud mode).
static STACK_ORG: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The backend URL, as the CLI picks it (`pkg/workspace/creds.go`): `PULUMI_BACKEND_URL`,
/// else the project's `backend.url` (the project found from the working directory, which
/// `--cwd` set), else `current` of the credentials file `pulumi login` wrote
/// (`PULUMI_CREDENTIALS_PATH`, else `PULUMI_HOME`, else `~/.pulumi`). `None`: not logged in.
pub fn backend_url() -> Option<String> {
    let set = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    if let Some(u) = set("PULUMI_BACKEND_URL") {
        return Some(u);
    }
    let cwd = std::env::current_dir().ok()?;
    if let Ok(p) = crate::project::Project::find(&cwd)
        && let Some(u) = p.backend_url()
    {
        return Some(u);
    }
    let dir = set("PULUMI_CREDENTIALS_PATH")
        .or_else(|| set("PULUMI_HOME"))
        .or_else(|| set("HOME").map(|h| format!("{h}/.pulumi")))?;
    let text = std::fs::read_to_string(Path::new(&dir).join("credentials.json")).ok()?;
    let doc: Value = serde_json::from_str(&text).ok()?;
    doc.get("current")?
        .as_str()
        .filter(|c| !c.is_empty())
        .map(str::to_string)
}

/// Whether the backend is the fake's Pulumi Cloud stand-in.
pub fn cloud_mode() -> bool {
    backend_url().is_some_and(|u| u.starts_with("https://") || u.starts_with("http://"))
}

/// The organization an unqualified stack name lands in on Pulumi Cloud: the CLI's
/// default org (`FAKE_PULUMI_DEFAULT_ORG`), else the user.
pub fn default_org() -> String {
    std::env::var("FAKE_PULUMI_DEFAULT_ORG")
        .or_else(|_| std::env::var("FAKE_PULUMI_USER"))
        .unwrap_or_else(|_| "fake-user".into())
}

/// Records the organization of this invocation's stack (cloud mode).
pub fn set_stack_org(org: &str) {
    let _ = STACK_ORG.set(org.to_string());
}

/// One resource in a checkpoint (`apitype.ResourceV3`, the fields the fake uses).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Resource {
    pub urn: String,
    pub custom: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub id: String,
    #[serde(rename = "type")]
    pub ty: String,
    #[serde(skip_serializing_if = "is_empty_map")]
    pub inputs: Map<String, Value>,
    #[serde(skip_serializing_if = "is_empty_map")]
    pub outputs: Map<String, Value>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub parent: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub provider: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub created: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub modified: String,
}

fn is_empty_map(m: &Map<String, Value>) -> bool {
    m.is_empty()
}

impl Resource {
    /// The name part of the URN.
    pub fn name(&self) -> &str {
        self.urn.rsplit("::").next().unwrap_or("")
    }

    fn from_json(v: &Value) -> Option<Resource> {
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        Some(Resource {
            urn: v.get("urn")?.as_str()?.to_string(),
            custom: v.get("custom").and_then(Value::as_bool).unwrap_or(false),
            id: s("id"),
            ty: s("type"),
            inputs: fields::object(v, "inputs"),
            outputs: fields::object(v, "outputs"),
            parent: s("parent"),
            dependencies: fields::strings(v, "dependencies"),
            provider: s("provider"),
            created: s("created"),
            modified: s("modified"),
        })
    }
}

/// What the fake keeps of one stack's checkpoint.
#[derive(Debug, Clone, Default)]
pub struct StackState {
    /// The `latest.secrets_providers` salt state, when one was recorded.
    pub salt: Option<String>,
    /// Time of the last update, if there was one (`latest.manifest.time`).
    pub last_update: Option<String>,
    pub resources: Vec<Resource>,
}

impl StackState {
    /// The stack resource's outputs (secrets still in ciphertext form).
    pub fn outputs(&self) -> Map<String, Value> {
        self.resources
            .iter()
            .find(|r| r.ty == "pulumi:pulumi:Stack")
            .map(|r| r.outputs.clone())
            .unwrap_or_default()
    }
}

pub fn urn(stack: &str, project: &str, ty: &str, name: &str) -> String {
    format!("urn:pulumi:{stack}::{project}::{ty}::{name}")
}

/// `organization/<project>/<stack>`.
pub fn fq_name(project: &str, stack: &str) -> String {
    format!("{ORG}/{project}/{stack}")
}

impl Backend {
    /// From `PULUMI_BACKEND_URL`; only `file://` backends are supported.
    pub fn from_env() -> Result<Backend> {
        if cloud_mode() {
            let url = backend_url().unwrap_or_default();
            let Ok(dir) = std::env::var("FAKE_PULUMI_CLOUD_DIR") else {
                return Err(Fail::new(
                    code::AUTH,
                    "PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions (fake-pulumi: set FAKE_PULUMI_CLOUD_DIR for its Pulumi Cloud stand-in)",
                ));
            };
            let org = STACK_ORG.get().cloned().unwrap_or_else(default_org);
            return Ok(Backend {
                root: PathBuf::from(dir),
                url,
                org: Some(org),
                legacy: false,
            });
        }
        let url = match backend_url() {
            Some(u) => u,
            None => {
                return Err(Fail::new(
                    code::AUTH,
                    "PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI \
                     sessions (fake-pulumi: set PULUMI_BACKEND_URL=file://DIR; only file \
                     backends are supported)",
                ));
            }
        };
        let Some(rest) = url.strip_prefix("file://") else {
            return Err(Fail::error(format!(
                "fake-pulumi only supports file backends (PULUMI_BACKEND_URL=file://DIR), got '{url}'"
            )));
        };
        let path = rest.split('?').next().unwrap_or("");
        let home = || PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/".into()));
        let root = if path == "~" {
            home()
        } else if let Some(sub) = path.strip_prefix("~/") {
            home().join(sub)
        } else if path.is_empty() {
            return Err(Fail::error(format!("invalid file backend URL '{url}'")));
        } else {
            let p = PathBuf::from(path);
            if p.is_absolute() {
                p
            } else {
                std::env::current_dir().unwrap_or_default().join(p)
            }
        };
        crate::layout::Compression::from_env()?;
        Ok(Backend {
            legacy: crate::layout::legacy(&root)?,
            root,
            url,
            org: None,
        })
    }

    /// The same backend addressing another organization's stacks (cloud mode).
    pub fn for_org(&self, org: &str) -> Backend {
        Backend {
            org: self.org.as_ref().map(|_| org.to_string()),
            ..self.clone()
        }
    }

    fn dot(&self) -> PathBuf {
        self.root.join(".pulumi")
    }

    /// The stack's plain checkpoint path, `<stack>.json` (its compressed forms beside it).
    pub fn stack_path(&self, project: &str, stack: &str) -> PathBuf {
        let stacks = self.dot().join("stacks");
        let dir = match (&self.org, self.legacy) {
            (Some(org), _) => stacks.join(org).join(project),
            (None, true) => stacks,
            (None, false) => stacks.join(project),
        };
        dir.join(format!("{stack}.json"))
    }

    /// The stack's name in messages and checkpoints: `organization/<project>/<stack>`,
    /// or the bare stack name in the legacy layout.
    pub fn fq(&self, project: &str, stack: &str) -> String {
        if self.legacy {
            stack.to_string()
        } else {
            fq_name(project, stack)
        }
    }

    pub fn exists(&self, project: &str, stack: &str) -> bool {
        crate::layout::current(&self.stack_path(project, stack)).is_some()
    }

    /// The stack's state; `None` when the stack does not exist.
    pub fn load(&self, project: &str, stack: &str) -> Result<Option<StackState>> {
        let Some(path) = crate::layout::current(&self.stack_path(project, stack)) else {
            return Ok(None);
        };
        let text = crate::layout::read(&path)?;
        let doc: Value = serde_json::from_slice(&text).map_err(|e| {
            Fail::new(
                code::INTERNAL,
                format!("could not parse checkpoint {}: {e}", path.display()),
            )
        })?;
        let latest = &doc["checkpoint"]["latest"];
        Ok(Some(StackState {
            salt: latest["secrets_providers"]["state"]["salt"]
                .as_str()
                .map(String::from),
            last_update: latest["manifest"]["time"].as_str().map(String::from),
            resources: latest["resources"]
                .as_array()
                .map(|a| a.iter().filter_map(Resource::from_json).collect())
                .unwrap_or_default(),
        }))
    }

    /// Writes the checkpoint atomically (temp file + rename), in the form the
    /// environment asks for.
    pub fn save(&self, project: &str, stack: &str, st: &StackState) -> Result<()> {
        let path = self.stack_path(project, stack);
        let dir = path.parent().expect("stack dir");
        std::fs::create_dir_all(dir).map_err(|e| Fail::io("creating", dir, e))?;
        self.write_meta()?;
        let mut latest = Map::new();
        if let Some(t) = &st.last_update {
            latest.insert(
                "manifest".into(),
                json!({"time": t, "magic": "fake-pulumi", "version": VERSION}),
            );
        }
        if let Some(salt) = &st.salt {
            latest.insert(
                "secrets_providers".into(),
                json!({"type": "passphrase", "state": {"salt": salt}}),
            );
        }
        latest.insert(
            "resources".into(),
            serde_json::to_value(&st.resources).unwrap_or_default(),
        );
        let doc = json!({
            "version": 3,
            "checkpoint": {"stack": self.fq(project, stack), "latest": latest},
        });
        let text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        crate::layout::write(&path, text.as_bytes())
    }

    pub fn remove(&self, project: &str, stack: &str) -> Result<()> {
        let plain = self.stack_path(project, stack);
        let path = crate::layout::current(&plain).unwrap_or(plain);
        std::fs::remove_file(&path).map_err(|e| Fail::io("removing", &path, e))
    }

    fn write_meta(&self) -> Result<()> {
        let meta = self.dot().join("meta.yaml");
        if !self.legacy && !meta.exists() {
            // As gocloud's fileblob writes every blob: a temp file renamed into place, so
            // a `stack init` running beside this one reads all of it or nothing.
            let tmp = self
                .dot()
                .join(format!("meta.yaml.{}.tmp", std::process::id()));
            std::fs::write(&tmp, "version: 1\n").map_err(|e| Fail::io("writing", &tmp, e))?;
            std::fs::rename(&tmp, &meta).map_err(|e| Fail::io("writing", &meta, e))?;
        }
        Ok(())
    }

    /// Every stack as (project, stack), of one project or of all. In the legacy layout
    /// stacks have no project (`""`), and every one is listed.
    pub fn list(&self, project: Option<&str>) -> Vec<(String, String)> {
        let stacks = self.dot().join("stacks");
        if self.legacy {
            return crate::layout::legacy_stacks(&stacks)
                .into_iter()
                .map(|s| (String::new(), s))
                .collect();
        }
        let mut out = Vec::new();
        let Ok(projects) = std::fs::read_dir(&stacks) else {
            return out;
        };
        for p in projects.flatten() {
            let pname = p.file_name().to_string_lossy().to_string();
            if project.is_some_and(|want| want != pname) || !p.path().is_dir() {
                continue;
            }
            let Ok(files) = std::fs::read_dir(p.path()) else {
                continue;
            };
            for f in files.flatten() {
                let fname = f.file_name().to_string_lossy().to_string();
                let base = fname
                    .strip_suffix(".gz")
                    .or_else(|| fname.strip_suffix(".zst"))
                    .unwrap_or(&fname);
                if let Some(s) = base.strip_suffix(".json").filter(|s| !s.starts_with('.')) {
                    out.push((pname.clone(), s.to_string()));
                }
            }
        }
        out.sort();
        out.dedup();
        out
    }

    /// `.pulumi/locks/<fully qualified stack name>/`.
    fn lock_dir(&self, project: &str, stack: &str) -> PathBuf {
        self.dot().join("locks").join(self.fq(project, stack))
    }

    /// Takes the stack lock, refusing when another process holds one.
    pub fn lock(&self, project: &str, stack: &str) -> Result<Lock> {
        let dir = self.lock_dir(project, stack);
        std::fs::create_dir_all(&dir).map_err(|e| Fail::io("creating", &dir, e))?;
        let id = crate::crypto::random_bytes(16)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect::<String>();
        let path = dir.join(format!("{id}.json"));
        self.check_locks(&dir, &path)?;
        let content = json!({
            "pid": std::process::id(),
            "username": std::env::var("USER").unwrap_or_else(|_| "fake-user".into()),
            "hostname": hostname(),
            "timestamp": crate::now_rfc3339(),
        });
        std::fs::write(&path, content.to_string()).map_err(|e| Fail::io("writing", &path, e))?;
        // The real file backend (gocloud's fileblob) writes each blob's attributes beside
        // it, lock files included: readers must look at `*.json` only.
        let attrs = dir.join(format!("{id}.json.attrs"));
        let _ = std::fs::write(
            &attrs,
            r#"{"user.cache_control":"","user.content_disposition":"","user.content_encoding":"","user.content_language":"","user.content_type":"application/json","user.metadata":null}"#,
        );
        if let Err(e) = self.check_locks(&dir, &path) {
            let _ = std::fs::remove_file(&path);
            return Err(e);
        }
        Ok(Lock { path })
    }

    fn check_locks(&self, dir: &Path, mine: &Path) -> Result<()> {
        let mut others: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|rd| {
                rd.flatten()
                    .map(|e| e.path())
                    .filter(|p| p != mine && p.extension().is_some_and(|x| x == "json"))
                    .collect()
            })
            .unwrap_or_default();
        if others.is_empty() {
            return Ok(());
        }
        others.sort();
        let mut msg = format!(
            "the stack is currently locked by {} lock(s). Either wait for the other process(es) \
             to end or delete the lock file with `pulumi cancel`.",
            others.len()
        );
        for p in others {
            let c: Value = std::fs::read_to_string(&p)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
                .unwrap_or_default();
            let rel = p.strip_prefix(&self.root).unwrap_or(&p);
            msg.push_str(&format!(
                "\n  {}/{}: created by {}@{} (pid {}) at {}",
                self.url.trim_end_matches('/'),
                rel.display(),
                c["username"].as_str().unwrap_or("?"),
                c["hostname"].as_str().unwrap_or("?"),
                c["pid"],
                c["timestamp"].as_str().unwrap_or("?"),
            ));
        }
        Err(Fail::error(msg))
    }

    /// `pulumi cancel` on a file backend: deletes every lock of the stack.
    pub fn remove_locks(&self, project: &str, stack: &str) {
        if let Ok(rd) = std::fs::read_dir(self.lock_dir(project, stack)) {
            for e in rd.flatten() {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
}

/// A held stack lock. Released explicitly: a process that is killed leaves it behind,
/// as the real CLI does.
#[derive(Debug)]
pub struct Lock {
    path: PathBuf,
}

impl Lock {
    pub fn release(self) {
        let _ = std::fs::remove_file(&self.path);
        let mut attrs = self.path.clone().into_os_string();
        attrs.push(".attrs");
        let _ = std::fs::remove_file(attrs);
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}
