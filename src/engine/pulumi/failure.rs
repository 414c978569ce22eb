//! What a failed Pulumi process is told as: its exit code in words, the line that says
//! what went wrong, a cancellation, and the command that clears a stuck lock.

use super::{Seen, stack_arg};
use crate::engine::process::{Control, Exit};
use crate::engine::{Failure, Job};

/// Pulumi's documented exit codes (CLI 3.226+), for messages.
pub(super) fn describe_exit(code: i32) -> &'static str {
    match code {
        1 => "Pulumi reported an error",
        2 => "configuration error: a config value is missing or invalid",
        3 => {
            "authentication failed: run `pulumi login`, or set PULUMI_ACCESS_TOKEN or the cloud credentials (for example in config/pulumi/environment)"
        }
        4 => "a resource operation failed",
        6 => "the stack was not found",
        8 => "the operation was cancelled",
        // CLIs before 3.226 exit 255 on every error; 3.226+ keep it for internal ones.
        255 => {
            "an error (CLIs older than 3.226 exit 255 on every error; the error line says what went wrong)"
        }
        _ => "Pulumi failed",
    }
}

pub(super) fn failure(
    job: &Job,
    what: &str,
    exit: &Exit,
    seen: &Seen,
    control: &Control,
    procs: u32,
) -> Failure {
    let Seen { state, tail, .. } = seen;
    let cancelled = control.is_cancelled() || exit.code == Some(8);
    if cancelled {
        return Failure::Cancelled {
            message: format!(
                "pulumi {what} of {} was cancelled{}",
                job.path,
                if control.is_killed() {
                    format!(
                        "; it was killed, so the stack may be locked: run `pulumi cancel --stack {} --cwd {}` if the next run says an update is in progress",
                        job.stack,
                        job.dir.display()
                    )
                } else {
                    String::new()
                }
            ),
            processes: procs,
        };
    }
    let detail = match state.errors.first() {
        Some(e) => headline(e),
        None => error_line(tail.iter().map(String::as_str)),
    };
    let code_text = exit_text(exit);
    let locked = tail
        .iter()
        .chain(state.errors.iter())
        .any(|l| l.contains("the stack is currently locked"));
    Failure::Failed {
        message: format!(
            "pulumi {what} of {} failed ({code_text}){}{}",
            job.path,
            if detail.is_empty() {
                String::new()
            } else {
                format!(": {detail}")
            },
            if locked {
                format!(
                    "\n  Another Pulumi process holds the stack's lock (the lines above name it). If it is gone, clear the lock with: {}",
                    cancel_command(job)
                )
            } else {
                String::new()
            }
        ),
        exit_code: exit.code,
        processes: procs,
    }
}

/// "exit 4: a resource operation failed", or the signal that ended the process.
pub(super) fn exit_text(exit: &Exit) -> String {
    match (exit.code, exit.signal) {
        (Some(c), _) => format!("exit {c}: {}", describe_exit(c)),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "unknown exit".to_string(),
    }
}

/// A failed call in words: `what` it was for, how it exited and the line of its stderr
/// that says why (`could not set secret config `k` of app (exit 255: …): error: …`).
pub(super) fn call_failed(what: &str, exit: &Exit, stderr: &str) -> String {
    format!(
        "{what} ({}): {}",
        exit_text(exit),
        error_line(stderr.lines())
    )
}

/// The line that says what went wrong: the last `error:` line (Pulumi puts details such
/// as a lock file's path after it), else the last non-empty line. An `error:` with no
/// words after it takes the first line after it that has some.
pub(super) fn error_line<'a>(lines: impl DoubleEndedIterator<Item = &'a str> + Clone) -> String {
    let all: Vec<&str> = lines.collect();
    match all
        .iter()
        .rposition(|l| l.trim_start().starts_with("error:"))
    {
        Some(i) => headline(&all[i..].join("\n")),
        None => all
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map_or(String::new(), |l| l.trim().to_string()),
    }
}

/// The first line of a (possibly multi-line) message that has words in it; a bare
/// `error:` line is joined to the first such line after it. A Go multierror
/// (`… N errors occurred:` then `* item` lines, as Pulumi's Kubernetes provider reports a
/// server-side apply conflict) is told by its items instead of their count.
pub(super) fn headline(message: &str) -> String {
    let has_words = |l: &str| l.chars().any(char::is_alphanumeric);
    let mut lines = message.lines().map(str::trim).filter(|l| has_words(l));
    let Some(first) = lines.next() else {
        return String::new();
    };
    let first = match first.strip_prefix("error:").map(str::trim) {
        Some("") => match lines.next() {
            Some(words) => format!("error: {words}"),
            None => return "error:".to_string(),
        },
        _ => first.to_string(),
    };
    match multierror_lead(&first) {
        Some(lead) => {
            let items = multierror_items(lines);
            if items.is_empty() {
                first
            } else {
                format!("{lead}{items}")
            }
        }
        None => first,
    }
}

/// `error: Preview failed: ` of `error: Preview failed: 1 error occurred:`.
fn multierror_lead(line: &str) -> Option<&str> {
    let rest = line
        .strip_suffix(" errors occurred:")
        .or_else(|| line.strip_suffix(" error occurred:"))?;
    let count_at = rest
        .rfind(|c: char| !c.is_ascii_digit())
        .map_or(0, |i| i + 1);
    (count_at < rest.len()).then(|| &rest[..count_at])
}

/// A multierror's items, each on one line (an item's own continuation lines joined to
/// it), separated by `; `.
fn multierror_items<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    let mut items: Vec<String> = Vec::new();
    for line in lines {
        match line.strip_prefix("* ") {
            Some(item) => items.push(item.trim().to_string()),
            None => match items.last_mut() {
                Some(last) => {
                    last.push(' ');
                    last.push_str(line);
                }
                None => items.push(line.to_string()),
            },
        }
    }
    items.join("; ")
}

/// The one command that clears a stack's Pulumi lock, with the backend strata uses (a
/// password in its URL is one of the run's secrets: redaction masks it where it shows).
pub(super) fn cancel_command(job: &Job) -> String {
    let backend = job
        .env
        .get("PULUMI_BACKEND_URL")
        .map(|u| format!("PULUMI_BACKEND_URL={u} "))
        .unwrap_or_default();
    format!(
        "{backend}pulumi cancel --yes --stack {} --cwd {}",
        stack_arg(job),
        job.dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pulumi prints some errors as `error:` alone, the words on the lines after it.
    #[test]
    fn a_multi_line_error_is_told_by_its_first_line_with_words() {
        let tail = [
            "Updating (dev):",
            "error: ",
            "",
            "  Program failed with an unhandled exception:",
            "  Traceback (most recent call last):",
        ];
        assert_eq!(
            error_line(tail.into_iter()),
            "error: Program failed with an unhandled exception:"
        );
        assert_eq!(
            headline("error:\n    Error: the kubeconfig is invalid\n    at line 3"),
            "error: Error: the kubeconfig is invalid"
        );
        assert_eq!(
            headline("  \n---\nboom: it failed\nmore"),
            "boom: it failed"
        );
        assert_eq!(headline("error: one line"), "error: one line");
        assert_eq!(
            headline("error: 2 errors occurred:"),
            "error: 2 errors occurred:"
        );
        assert_eq!(headline("error:"), "error:");
        assert_eq!(headline(""), "");
    }

    /// Pulumi's Kubernetes provider reports a server-side apply conflict as a Go
    /// multierror: the first line only counts the errors, the items say what they are.
    /// (The real message, from `preview --refresh` after a `kubectl patch` by another
    /// field manager.)
    #[test]
    fn a_multierror_is_told_by_its_items() {
        let message = "error: Preview failed: 1 error occurred:\n\t* the Kubernetes API server reported that \"lk-logs/logstore-settings\" failed to fully initialize or become live: Server-Side Apply field conflict detected. See https://www.pulumi.com/registry/packages/kubernetes/how-to-guides/managing-resources-with-server-side-apply/#handle-field-conflicts-on-existing-resources for troubleshooting help.\nThe resource managed by field manager \"pulumi-kubernetes-494a29a2\" had an apply conflict: Apply failed with 1 conflict: conflict with \"oob\" using v1: .data.shards\n\n\n";
        let told = headline(message);
        assert!(told.starts_with("error: Preview failed: the Kubernetes API server reported that \"lk-logs/logstore-settings\" failed"), "{told}");
        assert!(
            told.ends_with(
                "Apply failed with 1 conflict: conflict with \"oob\" using v1: .data.shards"
            ),
            "{told}"
        );
        assert!(
            !told.contains('\n') && !told.contains("1 error occurred"),
            "{told}"
        );
        let two = "error: update failed: 2 errors occurred:\n\t* first: a\n\t* second: b\n";
        assert_eq!(headline(two), "error: update failed: first: a; second: b");
    }
}
