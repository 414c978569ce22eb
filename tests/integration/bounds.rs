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
    let ws = Ws::with_command("a", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"");
    ws.write(
        "config/pulumi/Pulumi.dev.yaml",
        &format!("config:\n{}", laughs("  t:")),
    );
    let r = ws.run("validate", &[]);
    r.expect_code(3)
        .expect_stderr(&["Pulumi.dev.yaml", "alias"]);

    let ws = Ws::with_profile("infrastructure:\n  - path: vpc\n");
    ws.pulumi_project("vpc", "vpc", &format!("variables:\n{}", laughs("  ")));
    let r = ws.run("validate", &[]);
    r.expect_code(3)
        .expect_stderr(&["vpc/Pulumi.yaml", "alias"]);
}

/// strata raises its own open-files soft limit when a run at its `-j` may need more
/// (see `util::open_files_short`), and a child still gets the limits strata started
/// with: a program that sizes itself by `ulimit -n` sees what its user set. Below that,
/// strata leaves its own limit alone (children then start with `posix_spawn`, not a
/// fork). The command reads strata's own limit from `/proc/$PPID/limits`.
#[test]
fn children_get_the_open_files_limits_strata_started_with() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct passed in.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
    let hard = lim.rlim_max;
    let shown = if hard == libc::RLIM_INFINITY {
        "unlimited".to_string()
    } else {
        hard.to_string()
    };
    // (soft limit, -j, strata's own soft limit during the run)
    for (soft, j, strata_soft) in [
        (256, "4", shown.clone()),
        (1024, "4", "1024".to_string()),
        (1024, "64", shown.clone()),
    ] {
        if hard <= soft {
            eprintln!(
                "skipped soft {soft}: the open-files hard limit ({hard}) leaves nothing to raise"
            );
            continue;
        }
        let (child, own) = limits_seen(soft, hard, j);
        assert_eq!(child, format!("{soft} {shown}"), "soft {soft}, -j {j}");
        assert_eq!(
            own, strata_soft,
            "strata's own soft limit at soft {soft}, -j {j}"
        );
    }
}

/// Runs `up -j j` of one command project with the open-files limits `soft`/`hard`: what
/// the command saw (`ulimit -Sn` and `-Hn`), and strata's own soft limit as it ran.
fn limits_seen(soft: libc::rlim_t, hard: libc::rlim_t, j: &str) -> (String, String) {
    use std::os::unix::process::CommandExt;
    let ws = Ws::with_command(
        "a",
        "echo \"$(ulimit -Sn) $(ulimit -Hn)\" > \"$STRATA_ROOT/limits\"; awk '/Max open files/ {print $4}' /proc/$PPID/limits > \"$STRATA_ROOT/own\"; printf '{}' > \"$STRATA_OUTPUTS_FILE\"",
    );
    let mut cmd = ws.command(&["up", "-p", "t", "-s", "dev", "-j", j]);
    // SAFETY: setrlimit is async-signal-safe and touches only the struct passed in.
    unsafe {
        cmd.pre_exec(move || {
            let l = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &l) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run strata");
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    (
        ws.read("limits").trim().to_string(),
        ws.read("own").trim().to_string(),
    )
}

/// An env file with CR-only line endings is refused, naming the file, before any of it
/// is used; a PULUMI_STACK that is not a valid stack name is never quoted (it may hold a
/// token that a broken line pulled into it).
#[test]
fn cr_only_env_files_are_refused_and_bad_stack_names_never_quoted() {
    let ws = Ws::with_command("a", "printf '{}' > \"$STRATA_OUTPUTS_FILE\"");
    ws.env_file("PULUMI_STACK=dev\rTOKEN=tok-7f3a9c\rOTHER=1\r");
    for args in [
        &["up", "-p", "t"][..],
        &["up", "-p", "t", "-s", "dev"],
        &["validate", "-p", "t"],
    ] {
        let r = ws.strata(args);
        r.expect_code(3)
            .expect_stderr(&["config/pulumi/environment", "CR"]);
        assert!(!r.all().contains("tok-7f3a9c"), "{args:?}: {r:?}");
    }

    // A value that is not a stack name, from the file: named, never quoted.
    ws.env_file("PULUMI_STACK=\"dev TOKEN=tok-7f3a9c\"\n");
    for args in [&["up", "-p", "t"][..], &["up", "-p", "t", "-s", "dev"]] {
        let r = ws.strata(args);
        r.expect_code(3)
            .expect_stderr(&["PULUMI_STACK", "not a valid stack name"]);
        assert!(!r.all().contains("tok-7f3a9c"), "{args:?}: {r:?}");
    }
}
