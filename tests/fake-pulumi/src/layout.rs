//! What Pulumi's DIY backend (`pkg/backend/diy`) decides from the backend's folder and
//! the environment before any command runs: its layout (project mode, or the legacy
//! layout where a stack belongs to no project) and how checkpoints are compressed;
//! and how a checkpoint file is found, read and written in each form.

use std::path::{Path, PathBuf};

use crate::error::{Fail, Result};

/// `env.Bool` with an alternative name: the first name wins when it is set at all;
/// true is "1" or "true" (any case).
pub fn env_bool(name: &str, alternative: &str) -> bool {
    let v = std::env::var(name).or_else(|_| std::env::var(alternative));
    v.is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

/// How checkpoints are written (`resolveCompression`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

impl Compression {
    pub fn from_env() -> Result<Compression> {
        let gzip = env_bool("PULUMI_DIY_BACKEND_GZIP", "PULUMI_SELF_MANAGED_STATE_GZIP");
        let zstd = env_bool("PULUMI_DIY_BACKEND_ZSTD", "PULUMI_SELF_MANAGED_STATE_ZSTD");
        match (gzip, zstd) {
            (true, true) => Err(Fail::error(
                "DIY_BACKEND_GZIP and DIY_BACKEND_ZSTD cannot both be enabled",
            )),
            (_, true) => Ok(Compression::Zstd),
            (true, _) => Ok(Compression::Gzip),
            _ => Ok(Compression::None),
        }
    }

    fn ext(self) -> &'static str {
        match self {
            Compression::None => "",
            Compression::Gzip => ".gz",
            Compression::Zstd => ".zst",
        }
    }

    fn of(path: &Path) -> Compression {
        match path.extension().and_then(|e| e.to_str()) {
            Some("gz") => Compression::Gzip,
            Some("zst") => Compression::Zstd,
            _ => Compression::None,
        }
    }
}

/// `<stack>.json`, `<stack>.json.gz`, `<stack>.json.zst` beside `plain`.
fn forms(plain: &Path) -> [PathBuf; 3] {
    let with = |ext: &str| {
        let mut p = plain.as_os_str().to_owned();
        p.push(ext);
        PathBuf::from(p)
    };
    [plain.to_path_buf(), with(".gz"), with(".zst")]
}

/// The checkpoint Pulumi reads (`stackPath`): of the forms that exist, the most recently
/// modified; on a tie the later of `.json`, `.json.gz`, `.json.zst`.
pub fn current(plain: &Path) -> Option<PathBuf> {
    let mut best: Option<(PathBuf, std::time::SystemTime)> = None;
    for p in forms(plain) {
        let Ok(m) = std::fs::metadata(&p).and_then(|m| m.modified()) else {
            continue;
        };
        if best.as_ref().is_none_or(|(_, t)| m >= *t) {
            best = Some((p, m));
        }
    }
    best.map(|(p, _)| p)
}

/// A checkpoint's JSON text, whatever its form (told by its first bytes, as
/// `encoding.DetectCompression` does).
pub fn read(path: &Path) -> Result<Vec<u8>> {
    use std::io::Read;
    let bytes = std::fs::read(path).map_err(|e| Fail::io("reading", path, e))?;
    let bad = |e: std::io::Error| Fail::io("decompressing", path, e);
    let mut out = Vec::new();
    if bytes.starts_with(&[0x1f, 0x8b, 0x08]) {
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(bad)?;
    } else if bytes.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let mut input = &bytes[..];
        while !input.is_empty() {
            let mut d = ruzstd::decoding::StreamingDecoder::new(&mut input)
                .map_err(|e| bad(std::io::Error::other(e.to_string())))?;
            d.read_to_end(&mut out).map_err(bad)?;
        }
    } else {
        out = bytes;
    }
    Ok(out)
}

/// Writes a checkpoint as `saveCheckpoint` does: in the form the environment asks for,
/// then removes the form it replaced when that differs.
pub fn write(plain: &Path, text: &[u8]) -> Result<()> {
    use std::io::Write;
    let c = Compression::from_env()?;
    let old = current(plain);
    let mut target = plain.as_os_str().to_owned();
    target.push(c.ext());
    let target = PathBuf::from(target);
    let bytes = match c {
        Compression::None => text.to_vec(),
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            e.write_all(text)
                .and_then(|()| e.finish())
                .map_err(|e| Fail::io("compressing", &target, e))?
        }
        Compression::Zstd => {
            ruzstd::encoding::compress_to_vec(text, ruzstd::encoding::CompressionLevel::Fastest)
        }
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".checkpoint.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(|e| Fail::io("writing", &tmp, e))?;
    std::fs::rename(&tmp, &target).map_err(|e| Fail::io("writing", &target, e))?;
    if let Some(old) = old.filter(|o| Compression::of(o) != c) {
        let _ = std::fs::remove_file(old);
    }
    Ok(())
}

/// The stack names of legacy stack files (`.pulumi/stacks/<stack>.json[.gz|.zst]`, or
/// `.yaml`), as `legacyReferenceStore.ListReferences` finds them.
pub fn legacy_stacks(stacks_dir: &Path) -> Vec<String> {
    let Ok(rd) = std::fs::read_dir(stacks_dir) else {
        return Vec::new();
    };
    let mut out: Vec<String> = rd
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let base = name
                .strip_suffix(".gz")
                .or_else(|| name.strip_suffix(".zst"))
                .unwrap_or(&name);
            let stack = base
                .strip_suffix(".json")
                .or_else(|| base.strip_suffix(".yaml"))?;
            let valid = !stack.is_empty()
                && stack
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            valid.then(|| stack.to_string())
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

const DEPRECATED: &str = "
================================================================================
Legacy DIY state is deprecated, please upgrade your state to project mode using:
'pulumi state upgrade'

It is due to be removed in a future release before the end of this year (2026).
If you have any feedback or concerns, please let us know by commenting on the
issue at https://github.com/pulumi/pulumi/issues/19566.
Set PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR=1 to disable this error.
================================================================================";

/// Whether the backend at `root` uses the legacy layout (`ensurePulumiMeta`): its
/// `meta.yaml` says version 0, or there is none and the folder already holds legacy
/// stack files (or `PULUMI_DIY_BACKEND_LEGACY_LAYOUT` asks it for a new one). The legacy
/// layout is refused unless `PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR` is set.
pub fn legacy(root: &Path) -> Result<bool> {
    let dot = root.join(".pulumi");
    let meta = dot.join("meta.yaml");
    let legacy = match std::fs::read_to_string(&meta) {
        Ok(text) => {
            let doc: serde_yaml::Value = serde_yaml::from_str(&text).map_err(|e| {
                Fail::error(format!(
                    "corrupt store: unmarshal \".pulumi/meta.yaml\": {e}"
                ))
            })?;
            match doc.get("version").and_then(serde_yaml::Value::as_i64) {
                Some(0) => true,
                Some(1) => false,
                Some(v) => {
                    return Err(Fail::error(format!(
                        "state store unsupported: 'meta.yaml' version ({v}) is not supported by this version of the Pulumi CLI"
                    )));
                }
                None => {
                    return Err(Fail::error(
                        "corrupt store: missing version in \".pulumi/meta.yaml\"",
                    ));
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            !legacy_stacks(&dot.join("stacks")).is_empty()
                || env_bool(
                    "PULUMI_DIY_BACKEND_LEGACY_LAYOUT",
                    "PULUMI_SELF_MANAGED_STATE_LEGACY_LAYOUT",
                )
        }
        Err(e) => return Err(Fail::io("reading", &meta, e)),
    };
    if legacy && !env_bool("PULUMI_DIY_BACKEND_IGNORE_DEPRECATION_ERROR", "") {
        return Err(Fail::error(DEPRECATED));
    }
    Ok(legacy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_reads_back_by_its_first_bytes() {
        use std::io::Write;
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        let text = br#"{"version":3}"#;
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text).unwrap();
        let zst = ruzstd::encoding::compress_to_vec(
            &text[..],
            ruzstd::encoding::CompressionLevel::Fastest,
        );
        for (name, bytes) in [
            ("a.json", text.to_vec()),
            ("b.json.gz", gz.finish().unwrap()),
            ("c.json.zst", zst),
        ] {
            std::fs::write(d.join(name), bytes).unwrap();
            assert_eq!(read(&d.join(name)).unwrap(), text, "{name}");
        }
    }

    #[test]
    fn the_newest_form_is_the_checkpoint() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        let plain = d.join("dev.json");
        assert_eq!(current(&plain), None);
        std::fs::write(d.join("dev.json.zst"), "z").unwrap();
        std::fs::write(&plain, "p").unwrap();
        let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(&plain)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(current(&plain), Some(d.join("dev.json.zst")));
    }

    #[test]
    fn the_layout_is_told_as_pulumi_tells_it() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        assert_eq!(legacy(d), Ok(false), "a new backend");
        std::fs::create_dir_all(d.join(".pulumi/stacks/proj")).unwrap();
        std::fs::write(d.join(".pulumi/stacks/proj/dev.json"), "{}").unwrap();
        assert_eq!(legacy(d), Ok(false), "project folders only");
        std::fs::write(d.join(".pulumi/stacks/dev.json.bak"), "{}").unwrap();
        assert_eq!(legacy(d), Ok(false), "a backup is no stack");
        std::fs::write(d.join(".pulumi/stacks/dev.json.zst"), "{}").unwrap();
        assert_eq!(legacy_stacks(&d.join(".pulumi/stacks")), ["dev"]);
        let refused = legacy(d).unwrap_err();
        assert!(refused.msg.contains("pulumi state upgrade"), "{refused}");
        std::fs::write(d.join(".pulumi/meta.yaml"), "version: 1\n").unwrap();
        assert_eq!(legacy(d), Ok(false), "meta.yaml decides");
        std::fs::write(d.join(".pulumi/meta.yaml"), "version: 0\n").unwrap();
        assert!(legacy(d).is_err());
        std::fs::write(d.join(".pulumi/meta.yaml"), "version: 2\n").unwrap();
        assert!(legacy(d).unwrap_err().msg.contains("version (2)"));
    }
}
