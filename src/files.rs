//! Files strata writes: atomically replaced, private (0600/0700), or appended to;
//! each failure an error for people that names the file.

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Writes `contents` to `path` atomically: a temp file in the same directory (created
/// with `mode` before any byte is written), synced, renamed over `path`, and the folder
/// synced. Readers see the old file or the new one, never a mix; on error the old file
/// is left as it was and no temp file stays behind.
pub fn write_file_atomic(path: &Path, contents: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    write_file_atomic_with(path, mode, &mut |w| w.write_all(contents))
}

/// [`write_file_atomic`] of what `fill` writes, streamed to the temp file (buffered): a
/// large file is never held whole in memory.
pub fn write_file_atomic_with(
    path: &Path,
    mode: Option<u32>,
    fill: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir)?;
    let tmp = tempfile::Builder::new()
        .prefix(".strata-tmp-")
        .tempfile_in(&dir)?;
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(mode))?;
    }
    let mut out = std::io::BufWriter::new(tmp);
    fill(&mut out)?;
    let tmp = out.into_inner().map_err(|e| e.into_error())?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map_err(|e| e.error)?;
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Writes `contents` to `path` in place (created with mode 0600, truncated): for files
/// strata derives again on every run, which need neither a rename nor an fsync.
pub fn write_private(path: &Path, contents: &[u8]) -> Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .and_then(|mut f| f.write_all(contents))
        .map_err(|e| Error::io("write", path, e))
}

/// [`write_file_atomic`], with the error for people.
pub fn write_atomic(path: &Path, contents: &[u8], mode: Option<u32>) -> Result<()> {
    write_file_atomic(path, contents, mode).map_err(|e| Error::io("write", path, e))
}

/// [`write_file_atomic_with`], with the error for people.
pub fn write_atomic_with(
    path: &Path,
    mode: Option<u32>,
    fill: &mut dyn FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    write_file_atomic_with(path, mode, fill).map_err(|e| Error::io("write", path, e))
}

/// Creates `dir` and its missing parents with mode 0700, and makes `dir` itself 0700
/// (state under `.strata/` holds child output: only its owner may read it).
pub fn private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| Error::io("create", dir, e))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| Error::io("set the mode of", dir, e))
}

/// Opens `path` for appending (and reading), creating it with mode 0600.
pub fn open_private_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Creates `path` (mode 0600) for appending and reading; an error if it exists.
pub fn create_private_append(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_sets_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/f.txt");
        write_atomic(&p, b"one", Some(0o600)).unwrap();
        write_atomic(&p, b"two", Some(0o600)).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "two");
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(p.parent().unwrap()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temp file left behind");
    }

    #[test]
    fn private_dirs_and_files() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("a/b");
        private_dir(&dir).unwrap();
        for p in [d.path().join("a"), dir.clone()] {
            assert_eq!(
                std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
                0o700
            );
        }
        let f = dir.join("log");
        open_private_append(&f).unwrap();
        assert_eq!(
            std::fs::metadata(&f).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
}
