//! `config/pulumi/environment`: KEY=VALUE lines (dotenv syntax) overlaid on the process
//! environment for every child; the process environment itself is never mutated.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::util::display_path;

/// The environment file as read from disk.
#[derive(Debug, Clone, Default)]
pub struct EnvFile {
    pub path: PathBuf,
    pub exists: bool,
    /// The file's own variables (not the process environment).
    pub vars: BTreeMap<String, String>,
}

impl EnvFile {
    /// Reads the file; a missing file is an empty one.
    pub fn load(path: &Path) -> Result<EnvFile> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(EnvFile {
                    path: path.to_path_buf(),
                    exists: false,
                    vars: BTreeMap::new(),
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(Error::config(format!(
                    "{} is not a text file (it is not valid UTF-8).\n  It must hold KEY=VALUE lines (dotenv syntax); fix it or start again from config/pulumi/environment.example.",
                    display_path(path)
                )));
            }
            Err(e) => return Err(Error::io("read", path, e)),
        };
        // A CR not followed by LF (classic Mac line endings): the parser would read the
        // lines around it as one, and the first variable's value would swallow the rest.
        if let Some(at) = text
            .as_bytes()
            .windows(2)
            .position(|w| w[0] == b'\r' && w[1] != b'\n')
            .or_else(|| text.ends_with('\r').then(|| text.len() - 1))
        {
            let line = 1 + text[..at].matches('\n').count();
            return Err(Error::config(format!(
                "{}: line {line}: a line ends with CR alone (old Mac line endings), so the lines around it would be read as one.\n  Save the file with LF (or CRLF) line endings.",
                display_path(path)
            )));
        }
        let vars = parse(&text).map_err(|(line, what)| {
            Error::config(format!(
                "{}: line {line}: {what}\n  Each line must be KEY=VALUE (dotenv syntax), a comment starting with #, or empty.",
                display_path(path)
            ))
        })?;
        Ok(EnvFile {
            path: path.to_path_buf(),
            exists: true,
            vars,
        })
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars.get(key).map(String::as_str)
    }

    /// Sets `key=value` in the file, keeping every other line as it is, and ending every
    /// line with a newline. Written atomically.
    pub fn set_var(&mut self, key: &str, value: &str) -> Result<()> {
        let old = if self.exists {
            std::fs::read_to_string(&self.path).map_err(|e| Error::io("read", &self.path, e))?
        } else {
            String::new()
        };
        let new_line = format!("{key}={}", quote_if_needed(value));
        let mut replaced = false;
        let mut out = String::new();
        for line in old.lines() {
            let trimmed = line.trim_start();
            let trimmed = trimmed.strip_prefix("export ").unwrap_or(trimmed);
            let is_key = trimmed
                .split_once('=')
                .is_some_and(|(k, _)| k.trim() == key);
            if is_key && !replaced {
                out.push_str(&new_line);
                replaced = true;
            } else if is_key {
                continue;
            } else {
                out.push_str(line);
            }
            out.push('\n');
        }
        if !replaced {
            out.push_str(&new_line);
            out.push('\n');
        }
        crate::files::write_atomic(&self.path, out.as_bytes(), None)?;
        self.exists = true;
        self.vars.insert(key.to_string(), value.to_string());
        Ok(())
    }
}

fn quote_if_needed(value: &str) -> String {
    if value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./:@+,".contains(c))
    {
        value.to_string()
    } else {
        format!("'{}'", value.replace('\'', "'\\''"))
    }
}

/// Parses dotenv text with dotenvy; on error returns (1-based line, description).
/// Interpolation (`${VAR}`) is resolved by dotenvy against earlier lines and the
/// process environment, as dotenv does.
fn parse(text: &str) -> std::result::Result<BTreeMap<String, String>, (usize, String)> {
    let mut vars = BTreeMap::new();
    for item in dotenvy::from_read_iter(text.as_bytes()) {
        match item {
            Ok((k, v)) => {
                vars.insert(k, v);
            }
            // Never quote the line: it may hold a passphrase.
            Err(dotenvy::Error::LineParse(line, _)) => {
                let n = line_number_of(text, &line);
                let what = match line.split_once('=') {
                    None => "this line has no `=`, so it is not KEY=VALUE".to_string(),
                    Some((k, _)) => {
                        let k = k.trim().strip_prefix("export ").unwrap_or(k.trim()).trim();
                        if !k.is_empty()
                            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                            && !k.starts_with(|c: char| c.is_ascii_digit())
                        {
                            format!(
                                "the value of {k} is not valid dotenv syntax (check its quotes and escapes)"
                            )
                        } else {
                            "the name before `=` is not a variable name (letters, digits and `_`)"
                                .to_string()
                        }
                    }
                };
                return Err((n, what));
            }
            Err(_) => return Err((0, "this file is not valid dotenv syntax".to_string())),
        }
    }
    Ok(vars)
}

fn line_number_of(text: &str, bad: &str) -> usize {
    let bad_first = bad.lines().next().unwrap_or(bad).trim();
    text.lines()
        .position(|l| l.trim() == bad_first)
        .map(|i| i + 1)
        .unwrap_or(0)
}

/// The environment every child runs with: the process environment overlaid by the
/// file (the file wins), plus `PULUMI_SKIP_UPDATE_CHECK=true`.
pub fn child_environment(
    process: impl IntoIterator<Item = (String, String)>,
    file: &EnvFile,
) -> BTreeMap<String, String> {
    let mut env: BTreeMap<String, String> = process.into_iter().collect();
    for (k, v) in &file.vars {
        env.insert(k.clone(), v.clone());
    }
    env.insert("PULUMI_SKIP_UPDATE_CHECK".into(), "true".into());
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, text: &str) -> PathBuf {
        let p = dir.join("environment");
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn parses_dotenv_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = write(
            d.path(),
            "# comment\nPULUMI_STACK=dev\n\nexport A=\"x y\"\nB='single'\n",
        );
        let f = EnvFile::load(&p).unwrap();
        assert_eq!(f.get("PULUMI_STACK"), Some("dev"));
        assert_eq!(f.get("A"), Some("x y"));
        assert_eq!(f.get("B"), Some("single"));
    }

    #[test]
    fn cr_only_line_endings_are_refused_naming_the_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        for (text, line) in [
            ("PULUMI_STACK=dev\rTOKEN=t0k\r", 1),
            ("A=1\nB=2\rC=3\n", 2),
            ("A=1\nB=2\r", 2),
        ] {
            let p = write(d.path(), text);
            let e = EnvFile::load(&p).unwrap_err().to_string();
            assert!(
                e.contains("environment")
                    && e.contains(&format!("line {line}:"))
                    && e.contains("CR"),
                "{e}"
            );
            assert!(!e.contains("t0k"), "{e}");
        }
        // CRLF is fine.
        let p = write(d.path(), "PULUMI_STACK=dev\r\nA=1\r\n");
        let f = EnvFile::load(&p).unwrap();
        assert_eq!(
            (f.get("PULUMI_STACK"), f.get("A")),
            (Some("dev"), Some("1"))
        );
    }

    #[test]
    fn missing_file_is_empty() {
        let d = tempfile::tempdir().unwrap();
        let f = EnvFile::load(&d.path().join("nope")).unwrap();
        assert!(!f.exists);
        assert!(f.vars.is_empty());
    }

    #[test]
    fn errors_never_quote_the_file() {
        let d = tempfile::tempdir().unwrap();
        for text in [
            "A=1\nhunter2-is-the-passphrase\n",
            "A=1\nPULUMI_CONFIG_PASSPHRASE=\"hunter2-is-the-passphrase\n",
            "A=1\nhunter2-is-the-passphrase word=x\n",
        ] {
            let p = write(d.path(), text);
            let e = EnvFile::load(&p).unwrap_err();
            assert_eq!(e.exit_code(), 3);
            assert!(!e.message.contains("hunter2"), "{}", e.message);
            e.assert_says("environment");
        }
    }

    proptest::proptest! {
        /// Any text: an answer (vars or an error), never a panic, never the text itself.
        #[test]
        fn parser_never_panics(text in "\\PC{0,300}") {
            let _ = parse(&text);
        }
    }

    #[test]
    fn bad_line_names_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "A=1\nthis is not a pair\n");
        let e = EnvFile::load(&p).unwrap_err();
        assert_eq!(e.exit_code(), 3);
        e.assert_says("line 2");
        e.assert_says("KEY=VALUE");
    }

    #[test]
    fn file_wins_over_process_and_skip_update_check_is_set() {
        let f = EnvFile {
            vars: [("A".to_string(), "file".to_string())].into(),
            ..Default::default()
        };
        let env = child_environment(
            [("A".into(), "proc".into()), ("B".into(), "proc".into())],
            &f,
        );
        assert_eq!(env["A"], "file");
        assert_eq!(env["B"], "proc");
        assert_eq!(env["PULUMI_SKIP_UPDATE_CHECK"], "true");
    }

    #[test]
    fn set_var_keeps_other_lines_and_ends_with_newline() {
        let d = tempfile::tempdir().unwrap();
        let p = write(d.path(), "# keep me\nA=1\nPULUMI_STACK=old");
        let mut f = EnvFile::load(&p).unwrap();
        f.set_var("PULUMI_STACK", "dev").unwrap();
        f.set_var("NEW", "two words").unwrap();
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(text, "# keep me\nA=1\nPULUMI_STACK=dev\nNEW='two words'\n");
        let again = EnvFile::load(&p).unwrap();
        assert_eq!(again.get("NEW"), Some("two words"));
    }
}
