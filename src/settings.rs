//! Decisions about the environment, made once: interactive or not, and how to report.

use std::io::IsTerminal;

/// What the user asked of the output and of prompting (`--output`, `-q`, `-v`,
/// `--non-interactive`), before the surroundings are looked at.
#[derive(Debug, Clone, Copy, Default)]
pub struct Asked {
    /// `--output json`: JSON Lines events on stdout.
    pub json: bool,
    pub quiet: bool,
    pub verbose: bool,
    pub non_interactive: bool,
}

/// How a run reports progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Display {
    /// indicatif progress lines on a terminal.
    Progress,
    /// Plain lines prefixed with the project path.
    Plain,
    /// JSON Lines events on stdout.
    Json,
    /// `-q`: warnings, errors and the final line only.
    Quiet,
}

/// The one pure decision of how to report: JSON when asked; progress bars only on a
/// capable terminal outside CI (`TERM=dumb` — Emacs shells, some CI — cannot redraw
/// lines); plain lines otherwise.
pub fn display(json: bool, stderr_is_terminal: bool, is_ci: bool, dumb: bool) -> Display {
    if json {
        Display::Json
    } else if stderr_is_terminal && !is_ci && !dumb {
        Display::Progress
    } else {
        Display::Plain
    }
}

/// Whether to colour output (<https://no-color.org>, CLICOLOR_FORCE): never with
/// `NO_COLOR` set and not empty; always with `CLICOLOR_FORCE` set and not `0`; else on a
/// terminal that is not `TERM=dumb`.
pub fn colour(
    no_color: Option<&str>,
    clicolor_force: Option<&str>,
    is_terminal: bool,
    dumb: bool,
) -> bool {
    if no_color.is_some_and(|v| !v.is_empty()) {
        return false;
    }
    if clicolor_force.is_some_and(|v| !v.is_empty() && v != "0") {
        return true;
    }
    is_terminal && !dumb
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
    /// `-v`: every line the children print is shown (plain lines).
    pub verbose: bool,
}

impl Settings {
    pub fn resolve(g: Asked) -> Settings {
        let var = |k: &str| std::env::var(k).ok();
        let ci = is_ci(var("CI").as_deref());
        let dumb = var("TERM").as_deref() == Some("dumb");
        let (no_color, force) = (var("NO_COLOR"), var("CLICOLOR_FORCE"));
        console::set_colors_enabled(colour(
            no_color.as_deref(),
            force.as_deref(),
            std::io::stdout().is_terminal(),
            dumb,
        ));
        console::set_colors_enabled_stderr(colour(
            no_color.as_deref(),
            force.as_deref(),
            std::io::stderr().is_terminal(),
            dumb,
        ));
        let shown = display(
            g.json,
            std::io::stderr().is_terminal() && !g.verbose,
            ci,
            dumb,
        );
        Settings {
            interactive: interactive(g.non_interactive, std::io::stdin().is_terminal(), ci),
            display: match shown {
                Display::Json => Display::Json,
                _ if g.quiet => Display::Quiet,
                other => other,
            },
            json: g.json,
            verbose: g.verbose,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_decision() {
        let (json, human) = (true, false);
        assert_eq!(display(json, true, false, false), Display::Json);
        assert_eq!(display(json, false, true, false), Display::Json);
        assert_eq!(display(human, true, false, false), Display::Progress);
        assert_eq!(display(human, true, true, false), Display::Plain);
        assert_eq!(display(human, false, false, false), Display::Plain);
        assert_eq!(
            display(human, true, false, true),
            Display::Plain,
            "TERM=dumb"
        );
    }

    #[test]
    fn colour_decision() {
        assert!(colour(None, None, true, false));
        assert!(!colour(None, None, false, false));
        assert!(!colour(None, None, true, true), "TERM=dumb");
        assert!(!colour(Some("1"), Some("1"), true, false), "NO_COLOR wins");
        assert!(
            colour(Some(""), None, true, false),
            "an empty NO_COLOR is unset"
        );
        assert!(colour(None, Some("1"), false, false), "CLICOLOR_FORCE");
        assert!(!colour(None, Some("0"), false, false));
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
