//! Which Pulumi backend each project runs against, chosen as the Pulumi CLI chooses it
//! (`pkg/workspace/creds.go`, `GetCurrentCloudURLWithSource`): `PULUMI_BACKEND_URL`
//! (the process environment, or the environment file over it), else the project's
//! `backend.url` in its `Pulumi.yaml`, else the backend `pulumi login` chose (`current`
//! in `credentials.json` under `PULUMI_CREDENTIALS_PATH`, else `PULUMI_HOME`, else
//! `~/.pulumi`), else Pulumi Cloud when `PULUMI_ACCESS_TOKEN` is set (where the CLI
//! would log in). Only a workspace with none of these runs against strata's own file
//! backend, `<root>/.strata/backend`, and the run says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a backend URL came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `PULUMI_BACKEND_URL` of the process environment or the environment file.
    Env,
    /// The project's `backend.url` (its `Pulumi.yaml`).
    Project(PathBuf),
    /// `pulumi login`: the `current` backend of this credentials file.
    Login(PathBuf),
    /// `PULUMI_ACCESS_TOKEN` with nothing else: the CLI logs in to Pulumi Cloud.
    AccessToken,
    /// None of Pulumi's: strata's own file backend under the workspace.
    Strata,
}

/// A backend URL and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub url: String,
    pub source: Source,
}

impl Chosen {
    /// Where the URL came from, in words for a run's header and `show`.
    pub fn why(&self) -> String {
        match &self.source {
            Source::Env => "PULUMI_BACKEND_URL".to_string(),
            Source::Project(file) => format!("backend.url of {}", crate::util::display_path(file)),
            Source::Login(file) => format!(
                "`pulumi login` ({})",
                crate::util::display_path(file)
            ),
            Source::AccessToken => "PULUMI_ACCESS_TOKEN, as the CLI logs in".to_string(),
            Source::Strata => {
                "strata's own file backend: no PULUMI_BACKEND_URL, project backend.url or `pulumi login`".to_string()
            }
        }
    }
}

/// strata's own file backend of the workspace at `root`.
pub fn strata_dir(root: &Path) -> PathBuf {
    root.join(".strata").join("backend")
}

/// Pulumi Cloud's URL as the CLI picks it when none is stored: `PULUMI_API`, else the
/// service's own.
fn cloud_url(env: &BTreeMap<String, String>) -> String {
    env.get("PULUMI_API")
        .filter(|u| !u.is_empty())
        .cloned()
        .unwrap_or_else(|| "https://api.pulumi.com".to_string())
}

/// The credentials file the CLI reads: `PULUMI_CREDENTIALS_PATH` (a folder), else
/// `PULUMI_HOME`, else `~/.pulumi`.
pub fn credentials_file(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let non_empty = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let dir = non_empty("PULUMI_CREDENTIALS_PATH")
        .or_else(|| non_empty("PULUMI_HOME"))
        .or_else(|| non_empty("HOME").map(|h| h.join(".pulumi")))?;
    Some(dir.join("credentials.json"))
}

/// The backend `pulumi login` chose: `current` of the credentials file, when set.
pub fn logged_in(env: &BTreeMap<String, String>) -> Option<Chosen> {
    let file = credentials_file(env)?;
    let text = std::fs::read_to_string(&file).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&text).ok()?;
    let url = doc.get("current")?.as_str()?.trim().to_string();
    (!url.is_empty()).then_some(Chosen {
        url,
        source: Source::Login(file),
    })
}

/// `file://./state`, `file://state` → `file://<base>/state` (query kept); every other URL
/// (absolute paths, `file://~`, other schemes) unchanged. Pulumi resolves a relative
/// folder against the folder it runs in: a project's for its `backend.url`; strata takes
/// the workspace root for the environment file's, so that every project shares it.
pub fn absolute_file_url(url: &str, base: &Path) -> String {
    let Some(rest) = url.strip_prefix("file://") else {
        return url.to_string();
    };
    let (path, query) = match rest.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (rest, None),
    };
    if path.is_empty() || path.starts_with('/') || path.starts_with('~') {
        return url.to_string();
    }
    let trimmed = path.strip_prefix("./").unwrap_or(path);
    let abs = if trimmed == "." || trimmed.is_empty() {
        base.to_path_buf()
    } else {
        base.join(trimmed)
    };
    match query {
        Some(q) => format!("file://{}?{q}", abs.display()),
        None => format!("file://{}", abs.display()),
    }
}

/// The backends of a workspace: the one of its environment (no project's own), and
/// each project's.
#[derive(Debug, Clone)]
pub struct Backends {
    /// What a project without `backend.url` runs against.
    pub workspace: Chosen,
    /// Projects whose `backend.url` chose another (when `PULUMI_BACKEND_URL` is unset),
    /// by profile path.
    pub own: BTreeMap<String, Chosen>,
}

impl Backends {
    /// The workspace's backend in `env` (the process environment overlaid by the
    /// environment file), and those of `projects` (profile path, folder, `backend.url`).
    pub fn choose<'a>(
        env: &BTreeMap<String, String>,
        root: &Path,
        projects: impl IntoIterator<Item = (&'a str, &'a Path, Option<&'a str>)>,
    ) -> Backends {
        let workspace = workspace_backend(env, root);
        let mut own = BTreeMap::new();
        if workspace.source != Source::Env {
            for (path, dir, url) in projects {
                if let Some(url) = url.filter(|u| !u.trim().is_empty()) {
                    let file = dir.join("Pulumi.yaml");
                    own.insert(
                        path.to_string(),
                        Chosen {
                            url: absolute_file_url(url.trim(), dir),
                            source: Source::Project(file),
                        },
                    );
                }
            }
        }
        Backends { workspace, own }
    }

    /// The backend project `path` runs against.
    pub fn of(&self, path: &str) -> &Chosen {
        self.own.get(path).unwrap_or(&self.workspace)
    }

    /// The backend a team's lease and run records live in: the environment's, else the
    /// one every project with its own `backend.url` names when the workspace's is
    /// strata's (a repository whose projects all point at one bucket), else the
    /// workspace's.
    pub fn shared(&self) -> &Chosen {
        if self.workspace.source == Source::Strata {
            let mut urls = self.own.values();
            if let Some(first) = urls.next()
                && urls.all(|c| c.url == first.url)
            {
                return first;
            }
        }
        &self.workspace
    }

    /// The distinct backends of `paths`, each with the paths on it, in first-seen order.
    pub fn distinct<'a>(
        &'a self,
        paths: impl IntoIterator<Item = &'a str>,
    ) -> Vec<(&'a Chosen, Vec<&'a str>)> {
        let mut out: Vec<(&Chosen, Vec<&str>)> = Vec::new();
        for p in paths {
            let c = self.of(p);
            match out.iter_mut().find(|(have, _)| have.url == c.url) {
                Some((_, v)) => v.push(p),
                None => out.push((c, vec![p])),
            }
        }
        out
    }
}

/// Pulumi's precedence without a project: the environment's URL (a relative folder
/// taken from the workspace root), `pulumi login`, an access token, else strata's own.
fn workspace_backend(env: &BTreeMap<String, String>, root: &Path) -> Chosen {
    if let Some(url) = env.get("PULUMI_BACKEND_URL").filter(|u| !u.is_empty()) {
        return Chosen {
            url: absolute_file_url(url, root),
            source: Source::Env,
        };
    }
    if let Some(login) = logged_in(env) {
        return login;
    }
    if env
        .get("PULUMI_ACCESS_TOKEN")
        .is_some_and(|t| !t.is_empty())
    {
        return Chosen {
            url: cloud_url(env),
            source: Source::AccessToken,
        };
    }
    Chosen {
        url: format!("file://{}", strata_dir(root).display()),
        source: Source::Strata,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        crate::util::string_map(pairs)
    }

    #[test]
    fn relative_file_backends_become_absolute() {
        let root = Path::new("/w");
        for (url, want) in [
            ("file://./state", "file:///w/state"),
            ("file://state", "file:///w/state"),
            (
                "file://./state?no_checksum=true",
                "file:///w/state?no_checksum=true",
            ),
            ("file://.", "file:///w"),
            ("file:///abs/state", "file:///abs/state"),
            ("file://~", "file://~"),
            ("file://~/x", "file://~/x"),
            ("s3://bucket", "s3://bucket"),
            ("https://api.pulumi.com", "https://api.pulumi.com"),
        ] {
            assert_eq!(absolute_file_url(url, root), want, "{url}");
        }
    }

    /// The CLI's order: the environment, the project's backend.url, `pulumi login`, an
    /// access token; strata's own folder only when none of them is there.
    #[test]
    fn backends_are_chosen_in_pulumis_order() {
        let d = tempfile::tempdir().unwrap();
        let home = d.path().join("home");
        std::fs::create_dir_all(home.join(".pulumi")).unwrap();
        let root = d.path().join("ws");
        let proj = root.join("net");
        let projects = [("net", proj.as_path(), Some("file://./state"))];
        let strata = Backends::choose(&env(&[]), &root, []);
        assert_eq!(strata.workspace.source, Source::Strata);
        assert_eq!(
            strata.workspace.url,
            format!("file://{}", root.join(".strata/backend").display())
        );
        let home_s = home.to_string_lossy().into_owned();
        let no_login = env(&[("HOME", &home_s)]);
        let own = Backends::choose(&no_login, &root, projects);
        assert_eq!(
            own.of("net").url,
            format!("file://{}", proj.join("state").display())
        );
        assert!(matches!(own.of("net").source, Source::Project(_)));
        assert_eq!(own.of("other").source, Source::Strata);
        assert_eq!(
            own.shared().url,
            own.of("net").url,
            "the one all projects name"
        );
        std::fs::write(
            home.join(".pulumi/credentials.json"),
            r#"{"current": "s3://team-state", "accessTokens": {}}"#,
        )
        .unwrap();
        let login = Backends::choose(&no_login, &root, projects);
        assert_eq!(login.of("other").url, "s3://team-state");
        assert!(matches!(login.of("other").source, Source::Login(_)));
        assert_eq!(
            login.of("net").url,
            own.of("net").url,
            "backend.url wins over login"
        );
        assert_eq!(login.shared().url, "s3://team-state");
        let set = env(&[("HOME", &home_s), ("PULUMI_BACKEND_URL", "file://./st")]);
        let from_env = Backends::choose(&set, &root, projects);
        assert_eq!(
            from_env.of("net").url,
            format!("file://{}", root.join("st").display()),
            "PULUMI_BACKEND_URL wins over backend.url"
        );
        let token = env(&[("PULUMI_ACCESS_TOKEN", "pul-x"), ("HOME", "/nonexistent")]);
        let cloud = Backends::choose(&token, &root, []);
        assert_eq!(cloud.workspace.url, "https://api.pulumi.com");
        assert_eq!(cloud.workspace.source, Source::AccessToken);
    }

    #[test]
    fn the_credentials_folder_follows_pulumis_variables() {
        let f = |pairs: &[(&str, &str)]| credentials_file(&env(pairs));
        assert_eq!(
            f(&[("HOME", "/h")]),
            Some(PathBuf::from("/h/.pulumi/credentials.json"))
        );
        assert_eq!(
            f(&[("HOME", "/h"), ("PULUMI_HOME", "/p")]),
            Some(PathBuf::from("/p/credentials.json"))
        );
        assert_eq!(
            f(&[("PULUMI_HOME", "/p"), ("PULUMI_CREDENTIALS_PATH", "/c")]),
            Some(PathBuf::from("/c/credentials.json"))
        );
        assert_eq!(f(&[]), None);
    }
}
