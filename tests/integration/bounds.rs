//! Bad input, bounded (issue 25): configuration files that would take the parser
//! minutes and gigabytes, limits a child inherits, line endings that hide a line.

use crate::support::*;

/// A billion-laughs style document: three levels of a hundred aliases each, a million
/// scalars once expanded, in under 2 KB.
fn laughs(indent: &str) -> String {
    let row = |item: &str| vec![item; 100].join(", ");
    format!(
        "{indent}a: &a [{}]\n{indent}b: &b [{}]\n{indent}c: [{}]\n",
        row("x"),
        row("*a"),
        row("*b")
    )
}

/// A stack config and a Pulumi.yaml made of aliases are refused at once, by a
/// configuration error (exit 3) that names the file and says why.
#[test]
fn alias_bombs_in_config_files_are_refused_naming_the_file() {
    let ws = Ws::new();
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: a\n"));
    ws.command_project("a", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"", "true");
    ws.write(
        "config/pulumi/Pulumi.dev.yaml",
        &format!("config:\n{}", laughs("  t:")),
    );
    let r = ws.strata(&["validate", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("Pulumi.dev.yaml") && r.stderr.contains("alias"),
        "{r:?}"
    );

    let ws = Ws::new();
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: vpc\n"));
    ws.pulumi_project("vpc", "vpc", &format!("variables:\n{}", laughs("  ")));
    let r = ws.strata(&["validate", "-p", "t", "-s", "dev"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stderr.contains("vpc/Pulumi.yaml") && r.stderr.contains("alias"),
        "{r:?}"
    );
}
