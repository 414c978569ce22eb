//! `strata exec` with the real CLI: the environment each command gets (the backend
//! strata ran the project's `up` on, `STRATA_STACK`) is enough for `pulumi` to find the
//! project's deployed stack, and `exec` itself changes no stack.

use super::*;

#[test]
fn exec_gives_each_project_the_backend_and_stack_its_up_used() {
    let Some((r, _)) = Real::deployed("real_pulumi::exec_backend_and_stack") else {
        return;
    };
    let calls_before = r.ws.read_opt("pulumi-calls.log").lines().count();
    let run = r.strata(&[
        "exec",
        "-p",
        "local-pulumi",
        "-s",
        "dev",
        "--",
        "sh",
        "-c",
        "pulumi stack output --stack \"$STRATA_STACK\" --json > exec-outputs.json",
    ]);
    assert_eq!(run.code, 0, "{run:?}");
    for p in ALL {
        let text = r.ws.read(&format!("projects/{p}/exec-outputs.json"));
        let outputs: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{p}: not JSON ({e}): {text}"));
        assert!(outputs.is_object(), "{p}: {text}");
    }
    // Only the commands' own calls: one `stack output` per project, nothing of strata's.
    let calls = r.ws.read_opt("pulumi-calls.log");
    let new: Vec<&str> = calls.lines().skip(calls_before).collect();
    assert_eq!(new.len(), ALL.len(), "{new:?}");
    assert!(new.iter().all(|c| c.starts_with("stack output")), "{new:?}");
}
