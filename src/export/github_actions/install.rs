//! What a GitHub Actions runner installs besides the Pulumi CLI: strata itself, from the
//! pinned source the user names (`--strata-from`: this repository's own source, a crate
//! version, a git revision, or a release tarball checked against its sha256), and each
//! Pulumi project's dependencies by its runtime (`npm ci`, `pip install -r`,
//! `go mod download`, ...), with the setup action of each runtime, in the job that runs
//! the project.

use std::collections::BTreeSet;
use std::path::Path;

use super::{Step, map, run_step, shell_word};
use crate::error::{Error, Result};
use crate::plan::NodeKind;
use crate::plan::graph::Node;
use crate::workspace::ProjectKind;

/// The forms `--strata-from` takes, for messages.
pub const FORMS: &str = "`path` (this repository is strata's source: `cargo install --path .`), `crate:VERSION` (e.g. crate:0.4.1), `git:URL@REV` (a commit hash or a tag, e.g. git:https://github.com/acme/strata@v0.4.1), or `url:URL#sha256=HEX` (a release tarball holding the `strata` binary, checked against its 64-hex-digit sha256)";

/// Where the build job gets strata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StrataSource {
    /// This repository is strata's own source: `cargo install --path .`.
    Path,
    /// A version of the `strata` crate.
    Crate { version: String },
    /// A revision of a git repository: a commit hash or a tag.
    Git { url: String, rev: String },
    /// A release tarball, checked against its sha256.
    Url { url: String, sha256: String },
}

impl StrataSource {
    /// Parses a `--strata-from` value; a usage error names what is wrong and the forms.
    pub fn parse(value: &str) -> Result<StrataSource> {
        let bad = |why: String| {
            Error::usage(format!(
                "--strata-from {value}: {why}\n  Give one of: {FORMS}."
            ))
        };
        let value = value.trim();
        if value == "path" {
            return Ok(StrataSource::Path);
        }
        if let Some(version) = value.strip_prefix("crate:") {
            if !is_version(version) {
                return Err(bad(format!(
                    "`{version}` is not a version (MAJOR.MINOR.PATCH, e.g. 0.4.1 or 1.0.0-rc.1)"
                )));
            }
            return Ok(StrataSource::Crate {
                version: version.to_string(),
            });
        }
        if let Some(rest) = value.strip_prefix("git:") {
            let Some((url, rev)) = rest.rsplit_once('@') else {
                return Err(bad(
                    "a git source is URL@REV (a commit hash or a tag)".into()
                ));
            };
            check_url(url, &["https://", "http://", "ssh://", "git://", "git@"]).map_err(&bad)?;
            if !is_hex_rev(rev) && !is_tag(rev) {
                return Err(bad(format!(
                    "`{rev}` is neither a commit hash (7 to 40 hex digits) nor a tag name"
                )));
            }
            return Ok(StrataSource::Git {
                url: url.to_string(),
                rev: rev.to_string(),
            });
        }
        if let Some(rest) = value.strip_prefix("url:") {
            let Some((url, sha)) = rest.rsplit_once("#sha256=") else {
                return Err(bad(
                    "a release URL must carry its checksum: url:URL#sha256=HEX (64 hex digits), so the runner installs exactly that file".into(),
                ));
            };
            check_url(url, &["https://"]).map_err(&bad)?;
            if sha.len() != 64 || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad(format!("`{sha}` is not a sha256 (64 hex digits)")));
            }
            return Ok(StrataSource::Url {
                url: url.to_string(),
                sha256: sha.to_ascii_lowercase(),
            });
        }
        Err(bad("unknown form".into()))
    }

    /// The value as given on the command line (for the header's regeneration command).
    pub fn spec(&self) -> String {
        match self {
            StrataSource::Path => "path".into(),
            StrataSource::Crate { version } => format!("crate:{version}"),
            StrataSource::Git { url, rev } => format!("git:{url}@{rev}"),
            StrataSource::Url { url, sha256 } => format!("url:{url}#sha256={sha256}"),
        }
    }

    /// What is installed and from where, for the header.
    pub fn describe(&self) -> String {
        match self {
            StrataSource::Path => "built from this repository's source (`cargo install --locked --path .`: the repository is strata's own)".into(),
            StrataSource::Crate { version } => format!("the crate strata {version}, built with `cargo install --locked strata --version {version}`"),
            StrataSource::Git { url, rev } => format!("built from {url} at {rev} (`cargo install --locked --git`)"),
            StrataSource::Url { url, sha256 } => format!("the release tarball {url}, checked against sha256 {sha256} before its `strata` binary is unpacked"),
        }
    }

    /// Whether the build job needs the repository checked out (only to build it).
    pub(super) fn needs_checkout(&self) -> bool {
        *self == StrataSource::Path
    }

    /// The build job's step that leaves the binary in `$RUNNER_TEMP/strata/bin/strata`.
    pub(super) fn install_step(&self) -> Step {
        const ROOT: &str = "--root \"$RUNNER_TEMP/strata\"";
        match self {
            StrataSource::Path => run_step(
                "Build strata",
                format!("cargo install --locked --path . {ROOT}"),
            ),
            StrataSource::Crate { version } => run_step(
                &format!("Build strata {version} (crate)"),
                format!(
                    "cargo install --locked strata --version {} {ROOT}",
                    shell_word(version)
                ),
            ),
            StrataSource::Git { url, rev } => {
                let pin = if is_hex_rev(rev) { "--rev" } else { "--tag" };
                run_step(
                    &format!("Build strata from {url} at {rev}"),
                    format!(
                        "cargo install --locked --git {} {pin} {} strata {ROOT}",
                        shell_word(url),
                        shell_word(rev)
                    ),
                )
            }
            StrataSource::Url { url, sha256 } => run_step(
                "Download strata's release and check its sha256",
                format!(
                    "set -euo pipefail\n\
                     archive=\"$RUNNER_TEMP/strata-release\"\n\
                     curl --fail --location --silent --show-error --proto '=https' --output \"$archive\" {}\n\
                     echo \"{sha256}  $archive\" | sha256sum --check --strict -\n\
                     mkdir -p \"$RUNNER_TEMP/strata-unpacked\" \"$RUNNER_TEMP/strata/bin\"\n\
                     tar -xf \"$archive\" -C \"$RUNNER_TEMP/strata-unpacked\"\n\
                     found=$(find \"$RUNNER_TEMP/strata-unpacked\" -type f -name strata | head -n 1)\n\
                     if [ -z \"$found\" ]; then\n  \
                       echo \"the release tarball holds no file named strata\" >&2\n  \
                       exit 1\n\
                     fi\n\
                     install -m 0755 \"$found\" \"$RUNNER_TEMP/strata/bin/strata\"\n",
                    shell_word(url)
                ),
            ),
        }
    }
}

/// The source when `--strata-from` is not given: `path` when `root` holds strata's own
/// Cargo.toml; otherwise an error (exit 3) that names the option and its forms.
pub fn default_source(root: &Path) -> Result<StrataSource> {
    if is_strata_source(root) {
        return Ok(StrataSource::Path);
    }
    Err(Error::config(format!(
        "the GitHub Actions workflow must install strata on each runner, and {} is not strata's source (no Cargo.toml with `name = \"strata\"` at its root), so it cannot be built there.\n  Pass --strata-from with a pinned source: {FORMS}.",
        crate::util::display_path(root)
    )))
}

/// Whether `root/Cargo.toml` is the manifest of the package `strata`.
fn is_strata_source(root: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(root.join("Cargo.toml")) else {
        return false;
    };
    let mut in_package = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "name"
        {
            return value.trim().trim_matches('"') == "strata";
        }
    }
    false
}

/// MAJOR.MINOR.PATCH with an optional `-pre` and `+build` of letters, digits, `.`, `-`.
fn is_version(v: &str) -> bool {
    let (core, rest) = match v.find(['-', '+']) {
        Some(i) => (&v[..i], &v[i + 1..]),
        None => (v, ""),
    };
    let parts: Vec<&str> = core.split('.').collect();
    parts.len() == 3
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        && (v.len() == core.len()
            || (!rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))))
}

/// 7 to 40 hex digits.
fn is_hex_rev(rev: &str) -> bool {
    (7..=40).contains(&rev.len()) && rev.chars().all(|c| c.is_ascii_hexdigit())
}

/// A git tag name (a conservative subset of what git allows).
fn is_tag(rev: &str) -> bool {
    !rev.is_empty()
        && rev.len() <= 100
        && !rev.starts_with(['-', '.', '/'])
        && !rev.ends_with(['.', '/'])
        && !rev.contains("..")
        && !rev.ends_with(".lock")
        && rev
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-/+".contains(c))
}

/// A URL that starts with one of `schemes` and holds no space, quote or `$`, `{`, `}`
/// (nothing a shell or a workflow expression would read).
fn check_url(url: &str, schemes: &[&str]) -> std::result::Result<(), String> {
    let Some(scheme) = schemes.iter().find(|s| url.starts_with(**s)) else {
        return Err(format!("`{url}` must start with {}", schemes.join(" or ")));
    };
    if url.len() == scheme.len() {
        return Err(format!("`{url}` names no host"));
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || "-._~:/?&=%+@,#!".contains(c);
    if let Some(c) = url.chars().find(|&c| !allowed(c)) {
        return Err(format!("`{url}` holds `{c}`, which a URL here may not"));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Each project's dependencies

/// The language runtimes whose setup action a job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Runtime {
    Node,
    Python,
    Go,
    Dotnet,
}

/// What one Pulumi project needs installed: the runtime to set up and the command that
/// installs its dependencies (in its folder), if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Deps {
    runtime: Runtime,
    /// The install command, run in the project's folder.
    command: Option<String>,
    /// The folder relative to the repository root (the checkout).
    folder: String,
    /// go: the go.mod that names the Go version (setup-go's `go-version-file`).
    go_mod: Option<String>,
}

/// The dependencies of the project of `node`, whose folder is `projects_dir/<path>`
/// in the repository. `None` for a command project or a runtime with nothing to
/// install (yaml).
pub(super) fn deps_of(node: &Node, projects_dir: &str) -> Option<Deps> {
    if node.kind != NodeKind::Pulumi {
        return None;
    }
    let project = node.project.as_ref()?;
    let ProjectKind::Pulumi {
        runtime,
        runtime_options,
        ..
    } = &project.kind
    else {
        return None;
    };
    let dir = &project.dir;
    let has = |f: &str| dir.join(f).is_file();
    let folder = match projects_dir {
        "." | "" => node.path.clone(),
        d => format!("{}/{}", d.trim_end_matches('/'), node.path),
    };
    let (rt, command) = match runtime.as_str() {
        "nodejs" => {
            let manager = runtime_options.get("packagemanager").map(String::as_str);
            // yarn and pnpm through corepack, which Node.js no longer ships from 25 on.
            let command = if has("pnpm-lock.yaml") || manager == Some("pnpm") {
                Some("command -v corepack >/dev/null || npm install --global corepack\ncorepack enable\npnpm install --frozen-lockfile".to_string())
            } else if has("yarn.lock") || manager == Some("yarn") {
                Some("command -v corepack >/dev/null || npm install --global corepack\ncorepack enable\nyarn install --frozen-lockfile".to_string())
            } else if has("package-lock.json") {
                Some("npm ci".to_string())
            } else if has("package.json") {
                Some("npm install".to_string())
            } else {
                None
            };
            (Runtime::Node, command)
        }
        "python" => {
            let toolchain = runtime_options.contains_key("virtualenv")
                || runtime_options.contains_key("toolchain");
            let command = if toolchain {
                // Pulumi makes the virtualenv (pip, poetry or uv) the program runs in.
                Some("pulumi install".to_string())
            } else if has("requirements.txt") {
                Some("python -m pip install -r requirements.txt".to_string())
            } else {
                None
            };
            (Runtime::Python, command)
        }
        "go" => (
            Runtime::Go,
            has("go.mod").then(|| "go mod download".to_string()),
        ),
        "dotnet" => (Runtime::Dotnet, Some("dotnet restore".to_string())),
        _ => return None,
    };
    Some(Deps {
        runtime: rt,
        command,
        go_mod: (rt == Runtime::Go && has("go.mod")).then(|| format!("{folder}/go.mod")),
        folder,
    })
}

/// The steps that set up the runtimes of `deps` (each once) and install each project's
/// dependencies in its folder. They come after the Pulumi CLI (`pulumi install` needs
/// it) and before `strata up`.
pub(super) fn dependency_steps(deps: &[Deps]) -> Vec<Step> {
    let runtimes: BTreeSet<Runtime> = deps.iter().map(|d| d.runtime).collect();
    let mut steps: Vec<Step> = runtimes
        .into_iter()
        .map(|rt| setup_step(rt, deps))
        .collect();
    for d in deps {
        if let Some(command) = &d.command {
            steps.push(Step {
                name: Some(format!("Install the dependencies of {}", d.folder)),
                working_directory: Some(d.folder.clone()),
                run: Some(command.clone()),
                ..Default::default()
            });
        }
    }
    steps
}

/// The setup action of `rt`, pinned like the export's other actions (a major version).
fn setup_step(rt: Runtime, deps: &[Deps]) -> Step {
    let (name, uses, with) = match rt {
        Runtime::Node => (
            "Node.js",
            "actions/setup-node@v4",
            map(&[("node-version", "lts/*")]),
        ),
        Runtime::Python => (
            "Python",
            "actions/setup-python@v5",
            map(&[("python-version", "3.x")]),
        ),
        Runtime::Go => {
            let file = deps.iter().find_map(|d| d.go_mod.as_deref());
            (
                "Go",
                "actions/setup-go@v5",
                match file {
                    Some(f) => map(&[("go-version-file", f)]),
                    None => map(&[("go-version", "stable")]),
                },
            )
        }
        Runtime::Dotnet => (
            ".NET",
            "actions/setup-dotnet@v4",
            map(&[("dotnet-version", "8.0.x")]),
        ),
    };
    Step {
        name: Some(format!("Set up {name}")),
        uses: Some(uses.into()),
        with: Some(with),
        ..Default::default()
    }
}

/// The header's sentence on dependencies: what each runtime gets.
pub(super) fn dependency_note() -> String {
    "- Each job installs the dependencies of its Pulumi projects in their folders before `strata up`, by runtime (Pulumi.yaml `runtime:`): nodejs sets up Node.js LTS and runs `npm ci` with a package-lock.json, `yarn install --frozen-lockfile` with a yarn.lock, `pnpm install --frozen-lockfile` with a pnpm-lock.yaml (through corepack), else `npm install`; python sets up Python 3 and runs `pulumi install` when the runtime options name a virtualenv or toolchain, else `python -m pip install -r requirements.txt`; go sets up the Go of go.mod and runs `go mod download`; dotnet sets up .NET 8 and runs `dotnet restore`; yaml needs nothing. Commit the lock files: without one the versions installed are whatever is newest.".to_string()
}
