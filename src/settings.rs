//! Decisions about the environment, made once: interactive or not, and how to report.

use std::io::IsTerminal;

use crate::cli::{GlobalArgs, OutputFormat};

/// How a run reports progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// indicatif progress lines on a terminal.
    Progress,
    /// Plain lines prefixed with the project path.
    Plain,
    /// JSON Lines events on stdout.
    Json,
}

/// The one pure decision of how to report: JSON when asked; progress bars only on a
/// terminal outside CI; plain lines otherwise.
pub fn display(output: OutputFormat, stderr_is_terminal: bool, is_ci: bool) -> Display {
    match output {
        OutputFormat::Json => Display::Json,
        OutputFormat::Human if stderr_is_terminal && !is_ci => Display::Progress,
        OutputFormat::Human => Display::Plain,
    }
}

/// Whether strata may prompt: not with --non-interactive, not when stdin is not a
/// terminal, not in CI.
pub fn interactive(non_interactive_flag: bool, stdin_is_terminal: bool, is_ci: bool) -> bool {
    !non_interactive_flag && stdin_is_terminal && !is_ci
}

/// True when the `CI` variable is set to anything but an empty string, `0` or `false`.
pub fn is_ci(value: Option<&str>) -> bool {
    value.is_some_and(|v| !v.is_empty() && v != "0" && !v.eq_ignore_ascii_case("false"))
}

/// Everything a command needs to know about its surroundings.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub interactive: bool,
    pub display: Display,
    pub json: bool,
}

impl Settings {
    pub fn resolve(g: &GlobalArgs) -> Settings {
        let ci = is_ci(std::env::var("CI").ok().as_deref());
        Settings {
            interactive: interactive(g.non_interactive, std::io::stdin().is_terminal(), ci),
            display: display(g.output, std::io::stderr().is_terminal(), ci),
            json: g.output == OutputFormat::Json,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_decision() {
        use OutputFormat::{Human, Json as J};
        assert_eq!(display(J, true, false), Display::Json);
        assert_eq!(display(J, false, true), Display::Json);
        assert_eq!(display(Human, true, false), Display::Progress);
        assert_eq!(display(Human, true, true), Display::Plain);
        assert_eq!(display(Human, false, false), Display::Plain);
    }

    #[test]
    fn interactive_decision() {
        assert!(interactive(false, true, false));
        assert!(!interactive(true, true, false));
        assert!(!interactive(false, false, false));
        assert!(!interactive(false, true, true));
    }

    #[test]
    fn ci_values() {
        assert!(is_ci(Some("true")));
        assert!(is_ci(Some("1")));
        assert!(!is_ci(Some("")));
        assert!(!is_ci(Some("false")));
        assert!(!is_ci(None));
    }
}
