//! A step's log: the text a person reads, one file per project and run, and the engine's
//! JSON events beside it; and how many of them a project keeps.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// How many logs of one operation a project keeps: making one more removes the oldest
/// (with its events file). The journal keeps every run's record; the text of the last
/// runs is what a person reads back.
pub const KEPT_PER_OPERATION: usize = 20;

/// The log of a step that will run: `<logs>/<project>/<op>-<stamp>.log`, created (with
/// its folder) and open; `None` when it cannot be. A log of the same name (a second step
/// of the same millisecond) is left alone: the new one gets the next number. Created
/// without looking first: each look is a system call on the scheduler's thread, for
/// every step.
pub(crate) fn create(dir: &Path, op: &str, stamp: &str) -> Option<(PathBuf, File)> {
    let mut n = 1;
    let mut made_dir = false;
    loop {
        let path = if n == 1 {
            dir.join(format!("{op}-{stamp}.log"))
        } else {
            dir.join(format!("{op}-{stamp}-{n}.log"))
        };
        match crate::files::create_private_append(&path) {
            Ok(file) => return Some((path, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !made_dir => {
                crate::files::private_dir(dir).ok()?;
                made_dir = true;
            }
            Err(_) => return None,
        }
    }
}

/// Removes the logs of `op` beside `log` (one just written) beyond the newest `keep`,
/// with their events files; files that are not a log of `op` are left alone. A file
/// that cannot be removed stays (a warning would say nothing a person can act on).
pub(crate) fn prune(log: &Path, op: &str, keep: usize) {
    let Some(dir) = log.parent() else { return };
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    // Every step looks, and most find no more than `keep`: names are only looked at
    // until then; their order is worked out when some must go.
    let names: Vec<std::ffi::OsString> = entries
        .filter_map(|e| Some(e.ok()?.file_name()))
        .filter(|name| name.to_str().is_some_and(|n| order_key(n, op).is_some()))
        .collect();
    if names.len() <= keep {
        return;
    }
    let mut logs: Vec<((String, u32), PathBuf)> = names
        .into_iter()
        .filter_map(|name| {
            let (stamp, n) = order_key(name.to_str()?, op)?;
            Some(((stamp.to_string(), n), dir.join(name)))
        })
        .collect();
    logs.sort_unstable();
    for (_, old) in &logs[..logs.len() - keep] {
        let _ = std::fs::remove_file(events_path(old));
        let _ = std::fs::remove_file(old);
    }
}

/// Where a log named `name` stands among the logs of `op`, oldest first: its time (its
/// `Z` included), then the number a second log of the same millisecond got; `None` for
/// any other file.
fn order_key<'a>(name: &'a str, op: &str) -> Option<(&'a str, u32)> {
    let rest = name
        .strip_prefix(op)?
        .strip_prefix('-')?
        .strip_suffix(".log")?;
    if !rest.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    match rest.rsplit_once("Z-") {
        Some((stamp, n)) => Some((&rest[..stamp.len() + 1], n.parse().ok()?)),
        None if rest.ends_with('Z') => Some((rest, 1)),
        None => None,
    }
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

    #[test]
    fn logs_order_by_time_then_by_the_number_of_the_same_millisecond() {
        let key = |n| order_key(n, "up");
        assert_eq!(
            key("up-2026-12-03T10-00-00.120Z.log"),
            Some(("2026-12-03T10-00-00.120Z", 1))
        );
        assert_eq!(
            key("up-2026-12-03T10-00-00.120Z-12.log"),
            Some(("2026-12-03T10-00-00.120Z", 12))
        );
        assert!(
            key("up-2026-12-03T10-00-00.120Z-2.log") < key("up-2026-12-03T10-00-00.120Z-12.log")
        );
        assert!(key("up-2026-12-03T10-00-00.120Z-12.log") < key("up-2026-12-03T10-00-00.121Z.log"));
        // Not a log of `up`: another operation, an events file, a file of the user's.
        assert_eq!(key("destroy-2026-12-03T10-00-00.120Z.log"), None);
        assert_eq!(key("up-2026-12-03T10-00-00.120Z.log.events.jsonl"), None);
        assert_eq!(key("up-notes.log"), None);
        assert_eq!(key("up-2026-12-03T10-00-00.120Z-x.log"), None);
    }

    #[test]
    fn only_the_newest_logs_of_the_operation_are_kept() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("infra/vpc");
        for s in 0..5 {
            let (path, _) = create(&dir, "up", &format!("2026-12-03T10-00-0{s}.000Z")).unwrap();
            std::fs::write(events_path(&path), "{}\n").unwrap();
        }
        // A second log of the last millisecond, another operation's, and the user's own file.
        let (same_ms, _) = create(&dir, "up", "2026-12-03T10-00-04.000Z").unwrap();
        let (other_op, _) = create(&dir, "destroy", "2026-12-03T09-00-00.000Z").unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        prune(&same_ms, "up", 3);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "destroy-2026-12-03T09-00-00.000Z.log",
                "notes.txt",
                "up-2026-12-03T10-00-03.000Z.log",
                "up-2026-12-03T10-00-03.000Z.log.events.jsonl",
                "up-2026-12-03T10-00-04.000Z-2.log",
                "up-2026-12-03T10-00-04.000Z.log",
                "up-2026-12-03T10-00-04.000Z.log.events.jsonl",
            ]
        );
        assert!(other_op.exists());
        // Fewer than kept: nothing goes.
        prune(&same_ms, "up", 10);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 7);
    }
}
