//! No panic, whatever the input: odd files, profiles and command lines end in exit 2 or 3
//! with a message.

use super::*;

/// `show` of profile `t` whose whole file is `text` (no header): refused as a
/// configuration error naming the file; returns the run for what else to check.
#[track_caller]
fn profile_file_refused(text: &str) -> Run {
    let ws = abc("");
    ws.write("providers/t.yaml", text);
    let r = ws.strata(&["-p", "t", "show"]);
    assert_config_error(&r, &["providers/t.yaml"]);
    r
}

#[test]
fn empty_profile_file_is_a_config_error() {
    let r = profile_file_refused("");
    assert!(r.stderr.contains("description"), "what is missing\n{r:?}");
}

#[test]
fn profile_that_is_a_yaml_list_is_a_config_error() {
    let r = profile_file_refused("- path: a\n- path: b\n");
    // The message is about the user's file, not about strata's internal Rust types.
    assert!(
        !r.stderr.contains("RawProfile") && !r.stderr.contains("struct "),
        "the message leaks an internal type name\n{r:?}"
    );
    assert!(
        r.stderr.to_lowercase().contains("map") || r.stderr.contains("description"),
        "{r:?}"
    );
}

#[test]
fn binary_garbage_in_env_file_is_a_config_error() {
    let ws = abc("infrastructure:\n  - path: a\n");
    let mut junk: Vec<u8> = (0u8..=255).rev().collect();
    junk.extend_from_slice(b"\n\x00\xff=\xfe\n");
    std::fs::write(ws.path("config/pulumi/environment"), &junk).unwrap();
    let r = ws.strata(&["-p", "t", "-s", "dev", "show"]);
    assert_no_panic(&r);
    assert!(
        r.code == 2 || r.code == 3,
        "unreadable env file content is invalid configuration (exit 3)\n{r:?}"
    );
    assert!(r.stderr.contains("config/pulumi/environment"), "{r:?}");
}

#[test]
fn path_with_dot_dot_escaping_projects_is_refused() {
    let ws = abc("infrastructure:\n  - path: a\n  - path: ../outside\n");
    ws.pulumi_project("../outside", "outside", ""); // projects/../outside exists
    let r = ws.strata(&["-p", "t", "show"]);
    assert_no_panic(&r);
    assert!(
        r.code == 2 || r.code == 3,
        "a project path outside projects/ must be refused\n{r:?}"
    );
    assert!(
        r.stderr.contains("../outside") && r.stderr.contains("providers/t.yaml"),
        "{r:?}"
    );
}

/// `strata ARGS` on `ws` mishandled `what` when it panicked, exited other than 2 or 3,
/// or said nothing on stderr: then what it did.
fn mishandled(what: &str, ws: &Ws, args: &[&str]) -> Option<String> {
    let r = ws.strata(args);
    let panicked = r.code == 101 || r.stderr.contains("panicked");
    let said_nothing = r.stderr.trim().is_empty();
    (panicked || !(r.code == 2 || r.code == 3) || said_nothing)
        .then(|| format!("{what}: strata {args:?}\n{r:?}"))
}

const SHOW: &[&str] = &["-p", "t", "show"];
const VALIDATE: &[&str] = &["-p", "t", "validate"];
const VALIDATE_DEV: &[&str] = &["-p", "t", "-s", "dev", "validate"];

/// A workspace of one entry `a` (see [`abc`]).
fn sound() -> Ws {
    abc("infrastructure:\n  - path: a\n")
}

#[test]
fn odd_inputs_never_panic() {
    let mut failures = Vec::new();
    // A file that is not what it should be: (what, file, text, command).
    let files: &[(&str, &str, &str, &[&str])] = &[
        (
            "profile is a scalar",
            "providers/t.yaml",
            "just a string\n",
            SHOW,
        ),
        (
            "profile with tabs and NULs",
            "providers/t.yaml",
            "description: \u{0}\n\tinfra_type: x\n",
            SHOW,
        ),
        (
            "stack config is a list",
            "config/pulumi/Pulumi.dev.yaml",
            "- a\n- b\n",
            VALIDATE_DEV,
        ),
        (
            "stack config config: is a list",
            "config/pulumi/Pulumi.dev.yaml",
            "config:\n  - a\n",
            VALIDATE_DEV,
        ),
        (
            "env line with empty key",
            "config/pulumi/environment",
            "=value\n",
            SHOW,
        ),
        (
            "broken Pulumi.yaml",
            "projects/a/Pulumi.yaml",
            ": : :\n\t- ]",
            SHOW,
        ),
    ];
    for (what, file, text, args) in files {
        let ws = sound();
        ws.write(file, text);
        failures.extend(mishandled(what, &ws, args));
    }
    // A profile `t` (after HEAD) that no profile may be: (what, body, command).
    let profiles: &[(&str, &str, &[&str])] = &[
        ("infrastructure is a number", "infrastructure: 5\n", SHOW),
        (
            "needs is a string",
            "infrastructure:\n  - path: a\n  - path: b\n    needs: a\n",
            SHOW,
        ),
        (
            "entry without path",
            "infrastructure:\n  - description: x\n",
            SHOW,
        ),
        ("empty path", "infrastructure:\n  - path: ''\n", SHOW),
        (
            "self need",
            "infrastructure:\n  - path: a\n    needs: [a]\n",
            SHOW,
        ),
        (
            "hook with two kinds",
            "infrastructure:\n  - path: a\n    on_success:\n      - run: x\n        kubeconfig: {output: k}\n",
            SHOW,
        ),
        (
            "bad config type",
            "config:\n  - key: a:b\n    prompt: p\n    type: float\ninfrastructure:\n  - path: a\n",
            VALIDATE,
        ),
        (
            "bad config key",
            "config:\n  - key: nocolon\n    prompt: p\ninfrastructure:\n  - path: a\n",
            SHOW,
        ),
    ];
    for (what, body, args) in profiles {
        failures.extend(mishandled(what, &abc(body), args));
    }
    // An odd command line on a sound workspace.
    let lines: &[(&str, &[&str])] = &[
        ("bad stack name", &["-p", "t", "-s", "a b/../c", "show"]),
        (
            "root that does not exist",
            &["--root", "/nonexistent/strata-root", "-p", "t", "show"],
        ),
        ("provider with a slash", &["-p", "../t", "show"]),
        (
            "project path with dot dot",
            &["-p", "t", "show", "--project", "../../etc"],
        ),
    ];
    for (what, args) in lines {
        failures.extend(mishandled(what, &sound(), args));
    }
    // One profile is the one to use; of two, neither is guessed.
    let two = sound();
    two.write("providers/u.yaml", &two.read("providers/t.yaml"));
    failures.extend(mishandled("two providers and no stack", &two, &["show"]));
    let ws = abc("infrastructure:\n  - path: a\nkubernetes:\n  - include: common/x.yaml\n");
    ws.write("providers/common/x.yaml", "- include: common/x.yaml\n");
    failures.extend(mishandled("include of itself", &ws, SHOW));
    let ws = sound();
    std::fs::remove_file(ws.path("projects/a/Pulumi.yaml")).unwrap();
    ws.write("projects/a/Strata.yaml", "up: 1\nbogus: x\n");
    failures.extend(mishandled("broken Strata.yaml", &ws, SHOW));
    assert!(
        failures.is_empty(),
        "odd inputs mishandled:\n\n{}",
        failures.join("\n\n")
    );
}
