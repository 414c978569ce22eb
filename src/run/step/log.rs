//! A step's log: the text a person reads, one file per project and run, and the engine's
//! JSON events beside it.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The log of a step that will run: `<logs>/<project>/<op>-<stamp>.log`, created (with
/// its folder) and open; `None` when it cannot be.
pub(super) fn create(dir: &Path, op: &str, stamp: &str) -> Option<(PathBuf, File)> {
    let mut path = dir.join(format!("{op}-{stamp}.log"));
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = dir.join(format!("{op}-{stamp}-{n}.log"));
    }
    if !dir.is_dir() {
        crate::files::private_dir(dir).ok()?;
    }
    let file = crate::files::open_private_append(&path).ok()?;
    Some((path, file))
}

/// Where the engine's JSON events of the step logged at `log` go: `<log>.events.jsonl`.
pub fn events_path(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_owned();
    name.push(".events.jsonl");
    PathBuf::from(name)
}

/// A running step's log: the file [`create`] opened, and its events file, opened at the
/// first event (one per line, as Pulumi streams them), so the log itself reads as text.
pub(super) struct StepLog {
    path: Option<PathBuf>,
    file: Option<File>,
    events: Option<File>,
}

impl StepLog {
    pub(super) fn new(path: Option<PathBuf>, file: Option<File>) -> StepLog {
        StepLog {
            path,
            file,
            events: None,
        }
    }

    /// Appends `line` (already redacted) to the log, or to the events file when it is
    /// one of the engine's JSON events. One write a line: a line is never split by a
    /// crash or a reader.
    pub(super) fn write(&mut self, mut line: String) {
        let to = if line.starts_with("{\"sequence\"") {
            if self.events.is_none() {
                self.events = self
                    .path
                    .as_ref()
                    .and_then(|p| crate::files::open_private_append(&events_path(p)).ok());
            }
            self.events.as_mut()
        } else {
            self.file.as_mut()
        };
        if let Some(f) = to {
            line.push('\n');
            let _ = f.write_all(line.as_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_goes_to_the_log_and_events_beside_it() {
        let d = tempfile::tempdir().unwrap();
        let (path, file) = create(&d.path().join("a"), "up", "2026-12-03T10-00-00Z").unwrap();
        assert!(path.ends_with("a/up-2026-12-03T10-00-00Z.log"));
        let (again, _) = create(&d.path().join("a"), "up", "2026-12-03T10-00-00Z").unwrap();
        assert!(again.ends_with("a/up-2026-12-03T10-00-00Z-2.log"));
        let mut log = StepLog::new(Some(path.clone()), Some(file));
        log.write("# strata up of a".into());
        log.write("{\"sequence\":1}".into());
        log.write("done".into());
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "# strata up of a\ndone\n"
        );
        assert_eq!(
            std::fs::read_to_string(events_path(&path)).unwrap(),
            "{\"sequence\":1}\n"
        );
    }
}
