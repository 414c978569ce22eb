//! Command-line parsing: flags in any position, `--flag value` and `--flag=value`.

use std::collections::HashMap;

/// Flags that take a value (long name without dashes), with their short aliases.
const VALUE_FLAGS: &[(&str, Option<char>)] = &[
    ("cwd", Some('C')),
    ("stack", Some('s')),
    ("config-file", None),
    ("color", None),
    ("message", Some('m')),
    ("target", Some('t')),
    ("parallel", Some('p')),
    ("verbose", Some('v')),
    ("config", Some('c')),
    ("secrets-provider", None),
    ("exec-kind", None),
    ("exec-agent", None),
    ("tracing", None),
    ("profiling", None),
    ("policy-pack", None),
    ("policy-pack-config", None),
    ("replace", None),
    ("target-replace", None),
    ("exclude", None),
    ("client", None),
    ("plan", None),
    ("save-plan", None),
    ("event-log", None),
    ("import-file", None),
    ("output", Some('o')),
    ("organization", None),
    ("copy-config-from", None),
    ("type", None),
    ("attach-debugger", None),
    ("memprofilerate", None),
];

/// Boolean flags that have a short form.
const SHORT_BOOLS: &[(char, &str)] = &[
    ('y', "yes"),
    ('f', "skip-preview"),
    ('j', "json"),
    ('d', "debug"),
    ('e', "emoji"),
    ('a', "all"),
    ('u', "show-urns"),
    ('r', "refresh"),
];

/// The parsed command line.
#[derive(Debug, Default, Clone)]
pub struct Args {
    /// The words that are not flags: the command, its subcommand, and arguments.
    pub positional: Vec<String>,
    /// Every flag seen, by long name; repeated flags keep all values in order.
    pub flags: HashMap<String, Vec<String>>,
}

impl Args {
    pub fn parse(argv: &[String]) -> Args {
        let mut args = Args::default();
        let mut i = 0;
        let mut only_positional = false;
        while i < argv.len() {
            let a = &argv[i];
            i += 1;
            if only_positional || a == "-" || !a.starts_with('-') {
                args.positional.push(a.clone());
                continue;
            }
            if a == "--" {
                only_positional = true;
                continue;
            }
            let (name, inline) = if let Some(long) = a.strip_prefix("--") {
                match long.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (long.to_string(), None),
                }
            } else {
                let body = &a[1..];
                let c = body.chars().next().unwrap_or('?');
                let rest = &body[c.len_utf8()..];
                let inline = if rest.is_empty() {
                    None
                } else {
                    Some(rest.strip_prefix('=').unwrap_or(rest).to_string())
                };
                let long = VALUE_FLAGS
                    .iter()
                    .find(|(_, s)| *s == Some(c))
                    .map(|(l, _)| *l)
                    .or_else(|| SHORT_BOOLS.iter().find(|(s, _)| *s == c).map(|(_, l)| *l))
                    .unwrap_or("");
                if long.is_empty() {
                    (format!("-{c}"), inline)
                } else {
                    (long.to_string(), inline)
                }
            };
            let takes_value = VALUE_FLAGS.iter().any(|(l, _)| *l == name)
                // `-v N` is the global log level, but `whoami -v` is a boolean.
                && (name != "verbose" || argv.get(i).is_some_and(|n| n.parse::<u32>().is_ok()));
            let value = match inline {
                Some(v) => v,
                None if takes_value && i < argv.len() => {
                    i += 1;
                    argv[i - 1].clone()
                }
                None => "true".to_string(),
            };
            args.flags.entry(name).or_default().push(value);
        }
        args
    }

    /// The last value of a flag.
    pub fn value(&self, name: &str) -> Option<&str> {
        self.flags
            .get(name)
            .and_then(|v| v.last())
            .map(String::as_str)
    }

    /// A boolean flag: present (or `=true`) and not `=false`.
    pub fn bool(&self, name: &str) -> bool {
        match self.value(name) {
            Some(v) => !matches!(v, "false" | "0" | "f" | "F" | "FALSE" | "False"),
            None => false,
        }
    }

    /// The command path (`up`, `stack init`, `config`, ...) and the arguments after it.
    pub fn command(&self) -> (String, Vec<String>) {
        let p = &self.positional;
        let Some(first) = p.first() else {
            return (String::new(), Vec::new());
        };
        let first = match first.as_str() {
            "update" => "up",
            "down" | "dn" => "destroy",
            other => other,
        };
        let group = matches!(first, "stack" | "config");
        match (group, p.get(1)) {
            (true, Some(sub)) if first == "stack" || is_config_sub(sub) => {
                (format!("{first} {sub}"), p[2..].to_vec())
            }
            _ => (first.to_string(), p[1..].to_vec()),
        }
    }
}

fn is_config_sub(s: &str) -> bool {
    matches!(
        s,
        "set" | "get" | "rm" | "refresh" | "cp" | "set-all" | "rm-all" | "env"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Args {
        let v: Vec<String> = s.split_whitespace().map(String::from).collect();
        Args::parse(&v)
    }

    #[test]
    fn flags_in_any_position_and_both_forms() {
        let a = parse("--cwd /p up --stack=dev -y --skip-preview --json --color never x");
        assert_eq!(a.value("cwd"), Some("/p"));
        assert_eq!(a.value("stack"), Some("dev"));
        assert!(a.bool("yes") && a.bool("skip-preview") && a.bool("json"));
        assert_eq!(a.value("color"), Some("never"));
        assert_eq!(a.command(), ("up".to_string(), vec!["x".to_string()]));
    }

    #[test]
    fn short_value_flags_and_groups() {
        let a = parse("stack -C /p -s dev init");
        assert_eq!(a.value("cwd"), Some("/p"));
        assert_eq!(a.command().0, "stack init");
        let a = parse("config set --secret k");
        assert_eq!(a.command(), ("config set".into(), vec!["k".into()]));
        let a = parse("config --json");
        assert_eq!(a.command().0, "config");
        let a = parse("update --yes=false");
        assert_eq!(a.command().0, "up");
        assert!(!a.bool("yes"));
    }

    #[test]
    fn unknown_flags_are_kept_as_booleans() {
        let a = parse("up --diff --suppress-progress dev");
        assert!(a.bool("diff"));
        assert_eq!(a.positional, vec!["up", "dev"]);
    }
}
