//! What each run leaves in the shared backend, read on another "machine" (a fresh
//! checkout with no journal of its own): `status` shows the runs' results, who ran them
//! and the lease's holder, `history` lists the runs, and `up --changed` takes what the
//! first machine deployed as deployed. Command projects only (no Pulumi needed); each
//! says in the shared log when it runs.

use std::path::Path;

use super::Server;
use super::lease::{STACK, checkout, finish, log, on_prefix, wait_for};
use crate::support::*;

/// `base` and `app` (which needs it) run at once; `slow` runs until the test writes
/// release-HOST.
fn machine(s: &Server, url: &str, host: &str, shared: &Path) -> Ws {
    let ws = checkout(s, url, host, 3000, shared);
    ws.profile(
        "t",
        &format!(
            "{HEAD}infrastructure:\n  - path: base\n    needs: []\n  - path: app\n    needs: [base]\n  - path: slow\n    needs: []\n"
        ),
    );
    let quick = |name: &str| {
        format!(
            "echo \"{name} $STRATA_TEST_HOSTNAME\" >> \"$LEASE_SHARED/log\"; printf '{{\"v\":1}}' > \"$STRATA_OUTPUTS_FILE\""
        )
    };
    ws.command_project("base", &quick("base"), "true");
    ws.command_project("app", &quick("app"), "true");
    let slow = r#"h=$STRATA_TEST_HOSTNAME; d=$LEASE_SHARED
echo "slow $h" >> "$d/log"; echo $$ > "$d/pid-$h"
i=0; while [ ! -e "$d/release-$h" ]; do i=$((i+1)); [ $i -gt 1200 ] && exit 1; sleep 0.05; done
printf '{}' > "$STRATA_OUTPUTS_FILE""#;
    ws.command_project("slow", slow, "true");
    ws
}

/// The newest run record of stack `prod` under `prefix`, read with the server's own
/// API (newest first in key order).
fn newest_record(s: &Server, prefix: &str) -> serde_json::Value {
    let bucket = s.var("BUCKET");
    let listed = s.list(bucket, &format!("{prefix}/.strata/runs/{STACK}/"));
    let key = listed
        .first()
        .unwrap_or_else(|| panic!("no run record under {prefix}"));
    let got = s.request("GET", &format!("/{bucket}/{key}"), &[], None);
    assert_eq!(got.code, 200, "{got:?}");
    assert!(!got.body.contains("\"v\""), "no output value: {}", got.body);
    serde_json::from_str(&got.body).unwrap_or_else(|e| panic!("{e}: {got:?}"))
}

fn json(ws: &Ws, args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--output", "json"]);
    let r = ws.strata(&a);
    assert_eq!(r.code, 0, "{args:?}: {r:?}");
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {r:?}"))
}

/// Machine A runs `up`; machine B, a fresh checkout, sees the holder while it runs,
/// then A's results and run (who, where, command, counts), and its `up --changed` runs
/// nothing; a file changed on B reruns that project (and what needs it) only.
#[test]
fn another_machine_sees_the_runs_and_the_holder_and_changed_trusts_them() {
    let Some((s, shared, url)) = on_prefix("real_s3::records", "records-two") else {
        return;
    };
    let a = machine(&s, &url, "host-a", shared.path());
    let b = machine(&s, &url, "host-b", shared.path());
    let up = ["up", "--provider", "t", "--stack", STACK];
    let run_a = a.spawn(&up);
    wait_for(&shared.path().join("pid-host-a"), "host-a's slow project");
    let during = b.strata(&["status", "-p", "t", "-s", STACK]);
    assert_eq!(during.code, 0, "{during:?}");
    assert!(
        during.stdout.contains("lease: held by") && during.stdout.contains("on host-a"),
        "{during:?}"
    );
    let held = json(&b, &["status", "-p", "t", "-s", STACK]);
    assert_eq!(held["lease"]["held"], true, "{held}");
    assert_eq!(held["lease"]["host"], "host-a", "{held}");
    std::fs::write(shared.path().join("release-host-a"), "").unwrap();
    let ra = finish(run_a, "host-a's up");
    assert_eq!(ra.code, 0, "{ra:?}");

    // B has no journal: what it shows comes from the backend.
    assert!(!b.path(&format!(".strata/{STACK}/journal.jsonl")).exists());
    let status = b.strata(&["status", "-p", "t", "-s", STACK]);
    assert_eq!(status.code, 0, "{status:?}");
    assert!(status.stdout.contains("lease: free"), "{status:?}");
    for p in ["base", "app", "slow"] {
        let row = status
            .stdout
            .lines()
            .find(|l| l.starts_with(p))
            .unwrap_or_else(|| panic!("no row of {p}: {status:?}"));
        assert!(
            row.contains("succeeded") && row.contains("tester@host-a"),
            "{row}"
        );
    }
    let st = json(&b, &["status", "-p", "t", "-s", STACK]);
    assert_eq!(st["lease"]["held"], false, "{st}");
    assert_eq!(st["projects"][0]["status"], "succeeded", "{st}");
    assert_eq!(st["projects"][0]["by"], "tester@host-a", "{st}");

    let history = b.strata(&["history", "-s", STACK]);
    assert_eq!(history.code, 0, "{history:?}");
    let line = history
        .stdout
        .lines()
        .find(|l| l.contains("tester@host-a"))
        .unwrap_or_else(|| panic!("no run of host-a: {history:?}"));
    assert!(
        line.contains("strata up") && line.contains("3 succeeded"),
        "{line}"
    );
    let h = json(&b, &["history", "-s", STACK]);
    let runs = h["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 1, "{h}");
    assert_eq!(runs[0]["host"], "host-a", "{h}");
    assert_eq!(runs[0]["user"], "tester", "{h}");
    assert_eq!(runs[0]["status"], "succeeded", "{h}");
    assert_eq!(runs[0]["counts"]["succeeded"], 3, "{h}");
    let text = h.to_string();
    assert!(
        !text.contains("\"v\":1") && !text.contains("{\\\"v\\\""),
        "no output value: {h}"
    );

    // B's --changed: everything is as A deployed it.
    std::fs::write(shared.path().join("release-host-b"), "").unwrap();
    let before = log(shared.path()).len();
    let changed = b.strata(&["up", "--provider", "t", "--stack", STACK, "--changed"]);
    assert_eq!(changed.code, 0, "{changed:?}");
    assert_eq!(
        log(shared.path())[before..],
        [] as [String; 0],
        "{changed:?}"
    );
    // Its record carries what it found deployed (A's successes, at A's times): the
    // newest records alone tell what is deployed, however old the last change.
    let newest = newest_record(&s, "records-two");
    assert_eq!(newest["host"], "host-b", "{newest}");
    let projects = newest["projects"].as_array().expect("projects");
    assert_eq!(projects.len(), 3, "{newest}");
    for p in projects {
        let path = p["project"].as_str().unwrap();
        let row = st["projects"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["path"] == path)
            .unwrap();
        assert_eq!(
            (&p["carried"], &p["status"], &p["ended_at"]),
            (&true.into(), &"succeeded".into(), &row["at"]),
            "{newest}"
        );
        assert!(
            p["fingerprint"].is_string() && p["outputs_hash"].is_string(),
            "{newest}"
        );
    }

    // One file changed on B: that project runs again, and what needs it at most.
    b.write("projects/base/notes.txt", "changed on host-b\n");
    let changed = b.strata(&["up", "--provider", "t", "--stack", STACK, "--changed"]);
    assert_eq!(changed.code, 0, "{changed:?}");
    let ran: Vec<String> = log(shared.path())[before..].to_vec();
    assert!(ran.contains(&"base host-b".to_string()), "{ran:?}");
    assert!(
        ran.iter().all(|l| l == "base host-b" || l == "app host-b"),
        "{ran:?}"
    );
    // And A, whose journal is older now, sees B's run.
    let h = json(&a, &["history", "-s", STACK]);
    assert_eq!(h["runs"][0]["host"], "host-b", "{h}");
    assert_eq!(h["runs"].as_array().map(Vec::len), Some(3), "{h}");
}

/// A run whose record cannot be written (the backend does not answer) still succeeds,
/// with one warning saying what the other machines will miss. A preview, which takes no
/// lease: no server needed.
#[test]
fn a_record_not_written_is_one_warning_never_a_failed_run() {
    let mut ws = Ws::new();
    ws.set_env(
        "PULUMI_BACKEND_URL",
        "s3://nowhere/team?endpoint=http://127.0.0.1:9&use_path_style=true&region=us-east-1",
    )
    .set_env("AWS_ACCESS_KEY_ID", "AK")
    .set_env("AWS_SECRET_ACCESS_KEY", "SK");
    ws.profile("t", &format!("{HEAD}infrastructure:\n  - path: a\n"));
    ws.command_project("a", "true", "true");
    let r = ws.strata(&["preview", "--provider", "t", "--stack", STACK]);
    assert_eq!(r.code, 0, "{r:?}");
    let warning = "this run's record was not written to the shared backend";
    assert_eq!(r.all().matches(warning).count(), 1, "{r:?}");
    assert!(r.all().contains("s3://nowhere/team"), "{r:?}");
}
