//! The tail of a failed step's log as the terminal showed it: read from the end of the
//! file, only inside the workspace, with terminal escapes and control characters removed.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

/// How many lines of a failed project's log the report shows.
pub(super) const TAIL_LINES: usize = 20;

/// How much of the end of a log is read for its tail.
const TAIL_BYTES: u64 = 256 * 1024;

/// The last `n` lines of the log at `rel` (as the journal records it, under `root`) as
/// the terminal showed them (Pulumi's JSON events rendered), with terminal escapes and
/// control characters taken out. Logs are redacted when they
/// are written. The error says why there is no tail.
pub(super) fn tail_of(
    root: &Path,
    rel: &str,
    n: usize,
) -> std::result::Result<Vec<String>, String> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!("its log path `{rel}` is not inside the workspace"));
    }
    let path = root.join(p);
    let read = || -> std::io::Result<Vec<u8>> {
        let mut f = std::fs::File::open(&path)?;
        let len = f.metadata()?.len();
        let from = len.saturating_sub(TAIL_BYTES);
        f.seek(SeekFrom::Start(from))?;
        let mut buf = Vec::new();
        f.take(TAIL_BYTES).read_to_end(&mut buf)?;
        if from > 0 {
            // Drop the partial first line.
            let cut = buf.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1);
            buf.drain(..cut);
        }
        Ok(buf)
    };
    let bytes = read().map_err(|e| format!("its log {rel} could not be read: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    // Pulumi's JSON events as the terminal showed them; other lines as they are.
    let mut events = crate::engine::events::EventState::default();
    let lines: Vec<String> = text.lines().filter_map(|l| events.feed(l)).collect();
    Ok(lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| printable(l))
        .collect())
}

/// A log line without terminal escape sequences or other control characters, at most
/// 400 characters.
fn printable(line: &str) -> String {
    static ANSI: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = ANSI.get_or_init(|| {
        regex::Regex::new(r"\x1b(\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)?|[@-_])")
            .expect("a valid regex")
    });
    let clean = re.replace_all(line, "");
    let mut out: String = clean
        .chars()
        .filter(|c| *c == '\t' || !c.is_control())
        .take(400)
        .collect();
    if clean.chars().count() > 400 {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_of_a_failure_is_read_from_its_log_inside_the_workspace() {
        let d = tempfile::tempdir().unwrap();
        let log = ".strata/dev/logs/a/up.log";
        std::fs::create_dir_all(d.path().join(".strata/dev/logs/a")).unwrap();
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(d.path().join(log), text + "\x1b[31mred\x1b[0m \x07bell\n").unwrap();
        let tail = tail_of(d.path(), log, 20).unwrap();
        assert_eq!(tail.len(), 20);
        assert_eq!(tail[0], "line 12");
        assert_eq!(tail[19], "red bell");
        assert!(
            tail_of(d.path(), "../etc/passwd", 5)
                .unwrap_err()
                .contains("not inside")
        );
        assert!(tail_of(d.path(), "/etc/passwd", 5).is_err());
        assert!(
            tail_of(d.path(), "missing.log", 5)
                .unwrap_err()
                .contains("could not be read")
        );
    }
}
