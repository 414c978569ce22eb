//! The S3 bucket (and path prefix) of the Pulumi backend URL, opened as Pulumi opens it:
//! objects read, listed (a folder's, with when each was last modified), created
//! (`If-None-Match: *`), replaced on their ETag (`If-Match`) or outright, and deleted.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, PutMode, PutOptions, RetryConfig,
    UpdateVersion,
};

use crate::error::{Error, Result};

/// What kind of backend a run's `PULUMI_BACKEND_URL` names.
pub enum Where {
    /// An S3 bucket: strata reads and writes it too (shared by the run's uses of it).
    S3(Arc<Backend>),
    /// Another shared backend (gs://, azblob://, postgres://…): no lease is kept there
    /// yet; the scheme.
    Unsupported(String),
    /// A file backend, or the Pulumi Cloud service (which locks each stack's update
    /// itself): no lease.
    None,
}

/// The object store of a backend, with the runtime its calls run on.
pub struct Backend {
    /// The backend URL with its credentials masked: what messages name.
    pub name: String,
    store: Arc<dyn ObjectStore>,
    /// "" or "some/prefix/": the URL's path, where Pulumi keeps its `.pulumi/`.
    prefix: String,
    rt: tokio::runtime::Runtime,
}

/// An object as read: its bytes and ETag.
#[derive(Debug, Clone)]
pub struct Object {
    pub body: Vec<u8>,
    pub etag: String,
}

/// An object directly in a listed folder: its name there and when it was last written.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub modified: std::time::SystemTime,
}

/// How long one call may take, retries included: a backend that does not answer fails
/// the call within about this long.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// The parameters of an s3:// URL that Pulumi (gocloud.dev's s3blob on the AWS SDK v2)
/// takes and that do not change where objects are or who signs for them.
const IGNORED: [&str; 7] = [
    "awssdk",
    "request_checksum_calculation",
    "response_checksum_validation",
    "rate_limiter_capacity",
    "sse_type",
    "kmskeyid",
    "accelerate",
];

impl Where {
    /// The lease's backend of `env` (the environment Pulumi gets).
    pub fn of(env: &BTreeMap<String, String>) -> Result<Where> {
        let url = env
            .get("PULUMI_BACKEND_URL")
            .map(String::as_str)
            .unwrap_or("");
        let scheme = url.split("://").next().unwrap_or("");
        match scheme {
            "s3" => Ok(Where::S3(Arc::new(Backend::open_s3(url, env)?))),
            "" | "file" | "http" | "https" => Ok(Where::None),
            other => Ok(Where::Unsupported(other.to_string())),
        }
    }
}

/// The parts of `s3://bucket/prefix?query`.
struct S3Url {
    bucket: String,
    prefix: String,
    params: Vec<(String, String)>,
}

fn parse_s3_url(url: &str) -> Option<S3Url> {
    let rest = url.strip_prefix("s3://")?;
    let (location, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (bucket, path) = location.split_once('/').unwrap_or((location, ""));
    let path = path.trim_matches('/');
    Some(S3Url {
        bucket: bucket.to_string(),
        prefix: if path.is_empty() {
            String::new()
        } else {
            format!("{path}/")
        },
        params: form_urlencoded::parse(query.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
    })
}

fn truthy(v: &str) -> bool {
    matches!(v.to_ascii_lowercase().as_str(), "true" | "1" | "yes")
}

/// Whether the environment holds credentials strata can sign with without asking a
/// metadata service: keys, or a web identity or container credentials.
fn has_credentials(env: &BTreeMap<String, String>) -> bool {
    let set = |k: &str| env.get(k).is_some_and(|v| !v.is_empty());
    (set("AWS_ACCESS_KEY_ID") && set("AWS_SECRET_ACCESS_KEY"))
        || set("AWS_WEB_IDENTITY_TOKEN_FILE")
        || set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
        || set("AWS_CONTAINER_CREDENTIALS_FULL_URI")
}

impl Backend {
    fn open_s3(url: &str, env: &BTreeMap<String, String>) -> Result<Backend> {
        let name = crate::secrets::url::masked(url);
        let fail = |why: String| Error::config(format!("the Pulumi backend {name}: {why}"));
        let parsed = parse_s3_url(url)
            .filter(|u| !u.bucket.is_empty())
            .ok_or_else(|| fail("no bucket in the URL (s3://BUCKET[/PREFIX][?…])".into()))?;
        if !has_credentials(env) {
            return Err(fail("strata keeps the stack's lease in this bucket and signs with the environment's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (with AWS_SESSION_TOKEN), a web identity (AWS_WEB_IDENTITY_TOKEN_FILE) or container credentials; none is set. Nothing was started.\n  A profile of ~/.aws is not read: export its keys, e.g. `eval \"$(aws configure export-credentials --format env)\"`.".into()));
        }
        let mut b = AmazonS3Builder::new();
        for (k, v) in env.iter().filter(|(k, _)| k.starts_with("AWS_")) {
            if let Ok(key) = k.to_ascii_lowercase().parse::<AmazonS3ConfigKey>() {
                b = b.with_config(key, v);
            }
        }
        let mut endpoint = None;
        let mut path_style = false;
        let mut https = true;
        let mut http = false;
        for (k, v) in &parsed.params {
            match k.as_str() {
                "endpoint" => endpoint = Some(v.clone()),
                "region" => b = b.with_region(v),
                "use_path_style" | "s3ForcePathStyle" => path_style = truthy(v),
                "disable_https" => https = !truthy(v),
                k if IGNORED.contains(&k) => {}
                other => {
                    return Err(fail(format!(
                        "strata keeps the stack's lease in this bucket and cannot honour its parameter `{other}` (it reads endpoint, region, use_path_style or s3ForcePathStyle, and disable_https). Nothing was started.\n  Drop `{other}` from PULUMI_BACKEND_URL, or set what it stands for in the AWS_* environment."
                    )));
                }
            }
        }
        if !env.contains_key("AWS_REGION") && !env.contains_key("AWS_DEFAULT_REGION") {
            b = b.with_region("us-east-1");
        }
        b = b.with_bucket_name(&parsed.bucket);
        if let Some(e) = endpoint {
            let e = if e.contains("://") {
                e
            } else {
                format!("{}://{e}", if https { "https" } else { "http" })
            };
            http = e.starts_with("http://");
            b = if path_style {
                b.with_endpoint(e)
            } else {
                // Virtual-hosted: the bucket is part of the host.
                b.with_endpoint(e.replacen("://", &format!("://{}.", parsed.bucket), 1))
                    .with_virtual_hosted_style_request(true)
            };
        } else {
            b = b.with_virtual_hosted_style_request(!path_style);
        }
        install_tls_provider();
        let store = b
            // (The client options carry `allow_http` too: set here, once.)
            .with_client_options(
                ClientOptions::new()
                    .with_allow_http(http)
                    .with_timeout(CALL_TIMEOUT / 2)
                    .with_connect_timeout(Duration::from_secs(3)),
            )
            .with_retry(RetryConfig {
                // A server's "internal error, please try again" (500, 503) is tried
                // again for a few seconds; then the call fails.
                backoff: BackoffConfig {
                    init_backoff: Duration::from_millis(200),
                    max_backoff: Duration::from_secs(2),
                    base: 2.0,
                },
                max_retries: 4,
                retry_timeout: CALL_TIMEOUT,
            })
            .build()
            .map_err(|e| fail(format!("cannot open it: {e}")))?;
        Backend::new(name, Arc::new(store), parsed.prefix)
    }

    /// A backend over `store` (an in-memory one in tests), its keys under `prefix`.
    pub fn new(name: String, store: Arc<dyn ObjectStore>, prefix: String) -> Result<Backend> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| Error::failed(format!("cannot start the runtime of S3 calls: {e}")))?;
        Ok(Backend {
            name,
            store,
            prefix,
            rt,
        })
    }

    /// The key of `rel` (a path under the backend's root, beside Pulumi's `.pulumi/`).
    pub fn key(&self, rel: &str) -> String {
        format!("{}{rel}", self.prefix)
    }

    fn failed(&self, what: &str, key: &str, e: object_store::Error) -> Error {
        Error::failed(format!(
            "could not {what} {key} in the Pulumi backend {}: {e}",
            self.name
        ))
    }

    /// The object at `key`, or `None` when there is none.
    pub fn get(&self, key: &str) -> Result<Option<Object>> {
        let path = Path::from(key);
        self.rt.block_on(async {
            let got = match self.store.get(&path).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(self.failed("read", key, e)),
            };
            let etag = got.meta.e_tag.clone().unwrap_or_default();
            let body = got.bytes().await.map_err(|e| self.failed("read", key, e))?;
            Ok(Some(Object {
                body: body.to_vec(),
                etag,
            }))
        })
    }

    /// The objects directly in the folder `dir` (a key without its trailing `/`), as
    /// ListObjectsV2 with the `/` delimiter gives them; none when there is no such folder.
    pub fn list(&self, dir: &str) -> Result<Vec<Listed>> {
        let path = Path::from(dir);
        let listed = self
            .rt
            .block_on(self.store.list_with_delimiter(Some(&path)))
            .map_err(|e| self.failed("list", dir, e))?;
        Ok(listed
            .objects
            .into_iter()
            .filter_map(|o| {
                Some(Listed {
                    name: o.location.filename()?.to_string(),
                    modified: o.last_modified.into(),
                })
            })
            .collect())
    }

    /// The objects at `keys`, read a few at a time, in the order of `keys`: each one's
    /// bytes, or `None` when it is gone (or could not be read: `warn` is told why).
    pub fn get_all(&self, keys: &[String], warn: &mut dyn FnMut(Error)) -> Vec<Option<Vec<u8>>> {
        use futures::StreamExt;
        let reads = futures::stream::iter(keys.iter().map(|key| async move {
            let got = self.store.get(&Path::from(key.as_str())).await;
            match got {
                Ok(g) => g.bytes().await.map(|b| Some(b.to_vec())),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
            .map_err(|e| self.failed("read", key, e))
        }))
        .buffered(8)
        .collect::<Vec<_>>();
        self.rt
            .block_on(reads)
            .into_iter()
            .map(|r| {
                r.unwrap_or_else(|e| {
                    warn(e);
                    None
                })
            })
            .collect()
    }

    /// The first `limit` keys under `prefix` (a folder: `…/`), in key order, as S3
    /// lists them (one request for up to 1,000).
    pub fn list_keys(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        use futures::StreamExt;
        let path = Path::from(prefix);
        let listed = self
            .rt
            .block_on(self.store.list(Some(&path)).take(limit).collect::<Vec<_>>());
        let mut keys = listed
            .into_iter()
            .map(|m| m.map(|m| m.location.to_string()))
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| self.failed("list", prefix, e))?;
        keys.sort();
        Ok(keys)
    }

    /// Creates `key` if there is none (`If-None-Match: *`): its ETag, or `None` when
    /// an object is there.
    pub fn create(&self, key: &str, body: &[u8]) -> Result<Option<String>> {
        self.put(key, body, PutMode::Create)
    }

    /// Replaces `key` if its ETag is still `etag` (`If-Match`): the new ETag, or `None`
    /// when it changed (or is gone).
    pub fn update(&self, key: &str, body: &[u8], etag: &str) -> Result<Option<String>> {
        let version = UpdateVersion {
            e_tag: Some(etag.to_string()),
            version: None,
        };
        self.put(key, body, PutMode::Update(version))
    }

    /// Writes `key` whatever is there (a plain PUT): for objects one writer owns at a
    /// time, such as a project's held plan.
    pub fn replace(&self, key: &str, body: &[u8]) -> Result<()> {
        self.put(key, body, PutMode::Overwrite).map(|_| ())
    }

    /// Deletes `key`; one that is not there is no error.
    pub fn delete(&self, key: &str) -> Result<()> {
        match self.rt.block_on(self.store.delete(&Path::from(key))) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.failed("delete", key, e)),
        }
    }

    fn put(&self, key: &str, body: &[u8], mode: PutMode) -> Result<Option<String>> {
        let path = Path::from(key);
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        let payload = body.to_vec().into();
        match self.rt.block_on(self.store.put_opts(&path, payload, opts)) {
            Ok(r) => Ok(Some(r.e_tag.unwrap_or_default())),
            Err(
                object_store::Error::AlreadyExists { .. }
                | object_store::Error::Precondition { .. },
            ) => Ok(None),
            Err(e) => Err(self.failed("write", key, e)),
        }
    }
}

/// reqwest's TLS (rustls) takes the process's crypto provider: ring, once.
fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_urls_give_bucket_prefix_and_parameters() {
        let u = parse_s3_url(
            "s3://b/team/state/?endpoint=http%3A%2F%2F127.0.0.1%3A9000&use_path_style=true",
        )
        .unwrap();
        assert_eq!((u.bucket.as_str(), u.prefix.as_str()), ("b", "team/state/"));
        assert_eq!(
            u.params,
            [
                ("endpoint".to_string(), "http://127.0.0.1:9000".to_string()),
                ("use_path_style".to_string(), "true".to_string())
            ]
        );
        let bare = parse_s3_url("s3://b").unwrap();
        assert_eq!((bare.bucket.as_str(), bare.prefix.as_str()), ("b", ""));
    }

    use crate::util::string_map as env;

    #[test]
    fn backends_are_told_apart_and_s3_needs_credentials_and_known_parameters() {
        for url in ["file:///x", "https://api.pulumi.com", ""] {
            let w = Where::of(&env(&[("PULUMI_BACKEND_URL", url)])).unwrap();
            assert!(matches!(w, Where::None), "{url}");
        }
        let w = Where::of(&env(&[("PULUMI_BACKEND_URL", "gs://b")])).unwrap();
        assert!(matches!(w, Where::Unsupported(ref s) if s == "gs"));
        let keys = [("AWS_ACCESS_KEY_ID", "AK"), ("AWS_SECRET_ACCESS_KEY", "SK")];
        let Err(e) = Where::of(&env(&[("PULUMI_BACKEND_URL", "s3://b")])) else {
            panic!("no credentials accepted")
        };
        e.assert_says("AWS_ACCESS_KEY_ID");
        let mut with = env(&keys);
        with.insert("PULUMI_BACKEND_URL".into(), "s3://b?profile=x".into());
        let Err(e) = Where::of(&with) else {
            panic!("profile= accepted")
        };
        e.assert_says("`profile`");
        with.insert(
            "PULUMI_BACKEND_URL".into(),
            "s3://b/p?endpoint=http://127.0.0.1:1&s3ForcePathStyle=true&region=eu-west-1&awssdk=v2"
                .into(),
        );
        let Ok(Where::S3(b)) = Where::of(&with) else {
            panic!("not an S3 backend")
        };
        assert_eq!(
            b.key(".strata/locks/prod.json"),
            "p/.strata/locks/prod.json"
        );
    }
}
