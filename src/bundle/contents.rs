//! What a bundle holds besides its manifest: every file, with the SHA-256 of its bytes.
//! The preview records them in the manifest; `up --plan` walks the folder again (never
//! through a symbolic link, never reading anything but a plain file) and refuses any
//! file edited, added or missing.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::{APPLIED, MANIFEST, Manifest};
use crate::error::{Error, Result};
use crate::util::display_path;

/// At most this many differences are listed (a bundle may have been replaced whole).
const SHOWN: usize = 20;

/// Reads `path` when it is a plain file: `Ok(None)` for a symbolic link, a folder, a
/// FIFO or a device (opened without following a link, so one swapped in is not read
/// either).
pub fn read_plain(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::os::unix::fs::OpenOptionsExt;
    if !std::fs::symlink_metadata(path)?.file_type().is_file() {
        return Ok(None);
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)?;
    if !f.metadata()?.file_type().is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// One entry of a bundle: the digest of a plain file, or what else it is.
type Found = std::result::Result<String, &'static str>;

/// Every entry under `dir` but the manifest and the applied mark, by path relative to
/// `dir`: folders are walked (never through a link), plain files hashed.
fn walk(dir: &Path) -> Result<BTreeMap<String, Found>> {
    let mut out = BTreeMap::new();
    let mut folders: Vec<(PathBuf, String)> = vec![(dir.to_path_buf(), String::new())];
    while let Some((folder, prefix)) = folders.pop() {
        let entries = std::fs::read_dir(&folder).map_err(|e| Error::io("read", &folder, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("read", &folder, e))?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let rel = format!("{prefix}{name}");
            if prefix.is_empty() && (name == MANIFEST || name == APPLIED) {
                continue;
            }
            let kind = entry.file_type().map_err(|e| Error::io("read", &path, e))?;
            let found = if entry.file_name().to_str().is_none() {
                Err("a name that is not UTF-8")
            } else if kind.is_symlink() {
                Err("a symbolic link")
            } else if kind.is_dir() {
                folders.push((path, format!("{rel}/")));
                continue;
            } else if !kind.is_file() {
                Err("not a plain file (a FIFO, a socket or a device)")
            } else {
                match read_plain(&path).map_err(|e| Error::io("read", &path, e))? {
                    Some(bytes) => Ok(crate::util::sha256_hex(&bytes)),
                    None => Err("not a plain file"),
                }
            };
            out.insert(rel, found);
        }
    }
    Ok(out)
}

/// `preview --save-plan`: the digest of every file the preview wrote into `dir`.
pub fn digests(dir: &Path) -> Result<BTreeMap<String, String>> {
    walk(dir)?
        .into_iter()
        .map(|(rel, found)| match found {
            Ok(digest) => Ok((rel, digest)),
            Err(what) => Err(Error::failed(format!(
                "the plan bundle {} holds {rel}, {what}: a bundle holds plain files only. Remove it and preview again.",
                display_path(dir)
            ))),
        })
        .collect()
}

/// How the files of the bundle at `dir` differ from `recorded`, one line per file;
/// empty when every file is what the preview wrote.
pub fn differences(dir: &Path, recorded: &BTreeMap<String, String>) -> Result<Vec<String>> {
    let found = walk(dir)?;
    let mut out = Vec::new();
    for (path, now) in &found {
        let rel = shown(path);
        match (now, recorded.get(path)) {
            (Err(what), _) => out.push(format!(
                "{rel}: {what}; a bundle holds plain files only"
            )),
            (Ok(_), None) => out.push(format!(
                "{rel}: in the bundle, but not in its manifest (added after the preview)"
            )),
            (Ok(now), Some(then)) if now != then => out.push(format!(
                "{rel}: its bytes are not what the preview wrote (SHA-256 {} in the manifest, {} now)",
                short(then),
                short(now)
            )),
            (Ok(_), Some(_)) => {}
        }
    }
    for rel in recorded.keys().filter(|r| !found.contains_key(*r)) {
        out.push(format!(
            "{}: in the manifest, but missing from the bundle",
            shown(rel)
        ));
    }
    Ok(out)
}

/// `up --plan`: refuses (exit 3, before anything runs) a bundle whose files are not
/// what the preview wrote, naming each.
pub fn verify(dir: &Path, m: &Manifest) -> Result<()> {
    let mut lines = differences(dir, &m.files)?;
    if lines.is_empty() {
        return Ok(());
    }
    if lines.len() > SHOWN {
        let more = lines.len() - SHOWN;
        lines.truncate(SHOWN);
        lines.push(format!("… and {more} more"));
    }
    Err(Error::config(format!(
        "the plan bundle {} is not what `strata preview --save-plan` wrote, so nothing was run:\n  {}\nA bundle applies exactly as the preview wrote it. Preview again (strata preview --save-plan DIR), review it, and apply that bundle.",
        display_path(dir),
        lines.join("\n  ")
    )))
}

/// Text from a bundle as a message shows it: control characters escaped, at most 120
/// characters (a bundle may hold anything).
pub fn shown(text: &str) -> String {
    let escaped: String = text.escape_debug().collect();
    match escaped.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &escaped[..i]),
        None => escaped,
    }
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bundle folder with a plan and a summary, and their digests.
    fn bundle() -> (tempfile::TempDir, BTreeMap<String, String>) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("plans")).unwrap();
        std::fs::write(d.path().join("plans/a.json"), "{}").unwrap();
        std::fs::write(d.path().join("summary.md"), "# s\n").unwrap();
        std::fs::write(d.path().join(MANIFEST), "{}").unwrap();
        std::fs::write(d.path().join(APPLIED), "{}").unwrap();
        let files = digests(d.path()).unwrap();
        (d, files)
    }

    #[test]
    fn every_file_but_the_manifest_and_the_mark_is_hashed() {
        let (_d, files) = bundle();
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["plans/a.json", "summary.md"]
        );
        assert_eq!(
            files["plans/a.json"],
            crate::util::sha256_hex(b"{}"),
            "the SHA-256 of the bytes"
        );
    }

    #[test]
    fn an_unchanged_bundle_has_no_difference() {
        let (d, files) = bundle();
        assert_eq!(differences(d.path(), &files).unwrap(), Vec::<String>::new());
    }

    #[test]
    fn each_file_edited_added_missing_or_linked_is_named() {
        let (d, files) = bundle();
        std::fs::write(d.path().join("plans/a.json"), "{ }").unwrap();
        std::fs::remove_file(d.path().join("summary.md")).unwrap();
        std::fs::write(d.path().join("plans/b.json"), "{}").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join("link")).unwrap();
        std::os::unix::fs::symlink("/etc", d.path().join("plans/dir")).unwrap();
        let got = differences(d.path(), &files).unwrap();
        let want = [
            "link: a symbolic link; a bundle holds plain files only",
            "plans/a.json: its bytes are not what the preview wrote (SHA-256 44136fa355b3 in the manifest, ",
            "plans/b.json: in the bundle, but not in its manifest",
            "plans/dir: a symbolic link",
            "summary.md: in the manifest, but missing from the bundle",
        ];
        super::super::tests::assert_lines_start(&got, &want);
        assert!(digests(d.path()).is_err(), "a preview never records a link");
    }

    #[test]
    fn a_fifo_is_named_and_never_read() {
        let (d, files) = bundle();
        let fifo = d.path().join("plans/pipe");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read_plain(&fifo).unwrap(), None);
        let got = differences(d.path(), &files).unwrap();
        assert_eq!(
            got,
            [
                "plans/pipe: not a plain file (a FIFO, a socket or a device); a bundle holds plain files only"
            ]
        );
    }

    #[test]
    fn text_from_a_bundle_is_shown_escaped_and_short() {
        assert_eq!(shown("plans/a.json"), "plans/a.json");
        assert_eq!(shown("a\u{1b}[2Jb\n"), "a\\u{1b}[2Jb\\n");
        let long = shown(&"x".repeat(500));
        assert_eq!(long.chars().count(), 121, "{long}");
    }
}
