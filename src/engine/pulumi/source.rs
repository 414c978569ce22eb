//! Where strata reads a self-managed backend without a Pulumi process: its folder
//! (`file://`) or its S3 bucket (`s3://`, through `crate::backend`'s client, opened once
//! per run and backend). Both answer the same two questions under the backend's root (the
//! place holding `.pulumi/`): a file's bytes, and the files directly in a folder with when
//! each was last written. "Not there" is an answer; anything else that goes wrong is an
//! `Err`, on which callers ask the CLI, and a bucket that failed once is not asked again
//! in the run (each call is bounded; a backend that does not answer costs one bound).
//! The stack's lease and the run's records use the same opened bucket ([`shared_where`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use crate::backend::{Backend, Where};
use crate::engine::Job;

/// A backend strata can read.
pub(super) enum Source {
    /// A `file://` backend's folder.
    Folder(PathBuf),
    /// An `s3://` backend's bucket (and prefix), shared by the run's reads.
    Bucket(Arc<Bucket>),
}

/// A bucket as the run's reads share it.
pub(super) struct Bucket {
    backend: Arc<Backend>,
    /// A call failed (not "not found"), with this error: the rest of the run asks the CLI.
    failed: OnceLock<String>,
    /// `meta.yaml` said project mode once: it is not read again (it never goes back).
    project_mode: AtomicBool,
}

/// A file directly in a folder.
pub(super) struct Entry {
    pub(super) name: String,
    pub(super) modified: SystemTime,
}

impl Source {
    /// The job's backend, when strata can read it: a `file://` folder (a relative one
    /// taken from the project's folder), or an `s3://` bucket it can open.
    pub(super) fn of_job(job: &Job) -> Option<Source> {
        match file_backend_dir(job) {
            Some(dir) => Some(Source::Folder(dir)),
            None => shared_bucket(&job.env).map(Source::Bucket),
        }
    }

    /// The backend of the environment Pulumi gets (its `file://` URL absolute).
    pub(super) fn of_env(env: &BTreeMap<String, String>) -> Option<Source> {
        match backend_root(env.get("PULUMI_BACKEND_URL")?, env) {
            Some(root) => Some(Source::Folder(root)),
            None => shared_bucket(env).map(Source::Bucket),
        }
    }

    /// `rel`'s bytes; `None` when there is no such file.
    pub(super) fn read(&self, rel: &str) -> Result<Option<Vec<u8>>, String> {
        match self {
            Source::Folder(root) => match std::fs::read(root.join(rel)) {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e.to_string()),
            },
            Source::Bucket(b) => b.call(|be| be.get(&be.key(rel))).map(|o| o.map(|o| o.body)),
        }
    }

    /// The files directly in the folder `rel` (none when there is no such folder).
    pub(super) fn files(&self, rel: &str) -> Result<Vec<Entry>, String> {
        match self {
            Source::Folder(root) => folder_files(&root.join(rel)),
            Source::Bucket(b) => b.call(|be| {
                Ok(be
                    .list(be.key(rel).trim_end_matches('/'))?
                    .into_iter()
                    .map(|l| Entry {
                        name: l.name,
                        modified: l.modified,
                    })
                    .collect())
            }),
        }
    }

    /// `rel` as messages name it: a path, or the backend URL and key.
    pub(super) fn name(&self, rel: &str) -> String {
        match self {
            Source::Folder(root) => root.join(rel).display().to_string(),
            Source::Bucket(b) => format!("{} ({})", b.backend.name, b.backend.key(rel)),
        }
    }

    /// Whether the backend said project mode before (a bucket remembers it).
    pub(super) fn known_project_mode(&self) -> bool {
        matches!(self, Source::Bucket(b) if b.project_mode.load(Ordering::Relaxed))
    }

    pub(super) fn remember_project_mode(&self) {
        if let Source::Bucket(b) = self {
            b.project_mode.store(true, Ordering::Relaxed);
        }
    }

    pub(super) fn is_bucket(&self) -> bool {
        matches!(self, Source::Bucket(_))
    }
}

impl Bucket {
    /// One call, unless one failed before; a failure is remembered.
    fn call<T>(&self, f: impl FnOnce(&Backend) -> crate::error::Result<T>) -> Result<T, String> {
        if self.failed.get().is_some() {
            return Err(format!("{} failed before in this run", self.backend.name));
        }
        f(&self.backend).map_err(|e| {
            let _ = self.failed.set(e.message.clone());
            e.message
        })
    }
}

fn folder_files(dir: &Path) -> Result<Vec<Entry>, String> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("{}: {e}", dir.display())),
    };
    let mut out = Vec::new();
    for e in rd {
        let e = e.map_err(|e| format!("{}: {e}", dir.display()))?;
        let meta = match std::fs::metadata(e.path()) {
            Ok(m) => m,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(format!("{}: {err}", e.path().display())),
        };
        if meta.is_file() {
            out.push(Entry {
                name: e.file_name().to_string_lossy().into_owned(),
                modified: meta.modified().map_err(|err| err.to_string())?,
            });
        }
    }
    Ok(out)
}

/// The run's buckets, by backend URL and AWS environment (`None`: it does not open).
type Buckets = HashMap<String, Option<Arc<Bucket>>>;

static BUCKETS: OnceLock<Mutex<Buckets>> = OnceLock::new();

/// What tells one opened bucket from another: the URL and the AWS_* variables.
fn bucket_key(env: &BTreeMap<String, String>) -> String {
    env.iter()
        .filter(|(k, _)| *k == "PULUMI_BACKEND_URL" || k.starts_with("AWS_"))
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

/// The `s3://` backend of `env`, opened on first use in this process.
fn shared_bucket(env: &BTreeMap<String, String>) -> Option<Arc<Bucket>> {
    if !env.get("PULUMI_BACKEND_URL")?.starts_with("s3://") {
        return None;
    }
    let mut buckets = BUCKETS.get_or_init(Mutex::default).lock().ok()?;
    buckets
        .entry(bucket_key(env))
        .or_insert_with(|| match Where::of(env) {
            Ok(Where::S3(backend)) => Some(Arc::new(Bucket::new(backend))),
            _ => None,
        })
        .clone()
}

/// What [`Where::of`] says of `env`, an S3 bucket being the one this run's reads share
/// (opened once per run); with the error of a call to it that failed earlier in the run
/// (a backend that did not answer then is not waited for again).
pub fn shared_where(
    env: &BTreeMap<String, String>,
) -> crate::error::Result<(Where, Option<String>)> {
    match shared_bucket(env) {
        Some(b) => Ok((Where::S3(b.backend.clone()), b.failed.get().cloned())),
        None => Ok((Where::of(env)?, None)),
    }
}

/// One call `f` to the `s3://` backend of `env`, shared with the run's reads: `None` when
/// the backend is not a bucket; an error when this call fails or one failed before in the
/// run (a failure is remembered: a backend that did not answer is not waited for twice).
pub fn shared_call<T>(
    env: &BTreeMap<String, String>,
    f: impl FnOnce(&Backend) -> crate::error::Result<T>,
) -> Option<Result<T, String>> {
    Some(shared_bucket(env)?.call(f))
}

impl Bucket {
    fn new(backend: Arc<Backend>) -> Bucket {
        Bucket {
            backend,
            failed: OnceLock::new(),
            project_mode: AtomicBool::new(false),
        }
    }
}

/// Makes `backend` the bucket of `env` (tests: an in-memory store).
#[cfg(test)]
pub(super) fn share(env: &BTreeMap<String, String>, backend: Backend) {
    let mut buckets = BUCKETS.get_or_init(Mutex::default).lock().unwrap();
    buckets.insert(
        bucket_key(env),
        Some(Arc::new(Bucket::new(Arc::new(backend)))),
    );
}

/// The folder of the job's `file://` backend (`~` resolved, a relative path taken from
/// the project's folder).
pub(super) fn file_backend_dir(job: &Job) -> Option<PathBuf> {
    let url = job.env.get("PULUMI_BACKEND_URL")?;
    let dir = backend_path(url, &job.env)?;
    Some(job.dir.join(dir))
}

/// The folder of a `file://` backend URL when it is absolute (`~` resolved with HOME).
pub(super) fn backend_root(url: &str, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    backend_path(url, env).filter(|p| p.is_absolute())
}

fn backend_path(url: &str, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let dir = url.strip_prefix("file://")?;
    let dir = dir.split('?').next().unwrap_or(dir);
    let dir = match dir.strip_prefix('~') {
        Some(rest) => format!("{}{rest}", env.get("HOME")?),
        None => dir.to_string(),
    };
    (!dir.is_empty()).then(|| PathBuf::from(dir))
}
