//! kubectl's lock on a kubeconfig file (`<file>.lock`), so parallel hooks and kubectl
//! never lose each other's entries.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::error::KubeconfigError;

/// kubectl's lock on a kubeconfig: `<file>.lock`, created exclusively, removed when
/// dropped.
pub(super) struct FileLock(PathBuf);

impl FileLock {
    pub(super) fn take(
        target: &Path,
        wait: std::time::Duration,
    ) -> Result<FileLock, KubeconfigError> {
        let mut os = target.as_os_str().to_owned();
        os.push(".lock");
        let path = PathBuf::from(os);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).map_err(|source| KubeconfigError::Write {
                path: target.to_path_buf(),
                source,
            })?;
        }
        let t0 = std::time::Instant::now();
        loop {
            match fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
            {
                Ok(_) => return Ok(FileLock(path)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && t0.elapsed() < wait => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(KubeconfigError::Locked {
                        path: target.to_path_buf(),
                        waited: wait.as_secs(),
                    });
                }
                Err(source) => {
                    return Err(KubeconfigError::Write {
                        path: target.to_path_buf(),
                        source,
                    });
                }
            }
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}
