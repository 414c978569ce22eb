//! Two checkouts of the repository's `local-pulumi` profile, each with its own HOME,
//! `.strata/` and hostname (`STRATA_TEST_HOSTNAME`), on one S3 backend with the real
//! Pulumi CLI: one run at a time (checked in Pulumi's own update history), what the
//! other machine's `status` and `up --changed` see, and a backend that does not answer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::lease::finish_within;
use super::pulumi::on_s3;
use super::{Paused, Server, assert_ended, server};
use crate::leftovers::{KillLeftovers, leftover_language_hosts};
use crate::real_pulumi::{ALL, Real, status_of};

const STACK: &str = "dev";
/// A real `up` of the six projects on a loaded machine.
const BOUND: Duration = Duration::from_secs(300);

/// One checkout of the real-Pulumi profile on "machine" `host`, its state in `bucket`.
fn machine(test: &str, s: &Server, bucket: &str, host: &str) -> Option<Real> {
    let mut r = Real::with_local_pulumi(test)?;
    on_s3(&mut r, s, bucket);
    r.ws.set_env("USER", "tester")
        .set_env("STRATA_TEST_HOSTNAME", host)
        .set_env("STRATA_TEST_LEASE_TTL_MS", "3000");
    Some(r)
}

/// Machines host-a and host-b on `bucket` of the shared server; `None` when skipped.
struct Two {
    s: Arc<Server>,
    a: Real,
    b: Real,
    /// Kill what a failed assertion left running in either checkout.
    _guards: [KillLeftovers; 2],
}

impl Two {
    fn new(test: &str, bucket: &str) -> Option<Two> {
        let s = server(test)?;
        let a = machine(test, &s, bucket, "host-a")?;
        let b = machine(test, &s, bucket, "host-b")?;
        let _guards = [
            KillLeftovers(a.ws.root.clone()),
            KillLeftovers(b.ws.root.clone()),
        ];
        Some(Two { s, a, b, _guards })
    }
}

fn up_args(extra: &[&'static str]) -> Vec<&'static str> {
    let mut a = vec![
        "up",
        "--provider",
        "local-pulumi",
        "--stack",
        STACK,
        "--output",
        "json",
    ];
    a.extend(extra);
    a
}

/// The stack's lease object in `bucket` (`Null` when there is none).
fn lease(s: &Server, bucket: &str) -> Value {
    let a = s.request(
        "GET",
        &format!("/{bucket}/.strata/locks/{STACK}.json"),
        &[],
        None,
    );
    match a.code {
        200 => serde_json::from_str(&a.body).unwrap_or_else(|e| panic!("{e}: {a:?}")),
        _ => Value::Null,
    }
}

/// Pulumi's own update history of `project`'s stack in `bucket`: (start, end) of each
/// update in seconds, in order of start.
pub(crate) fn updates(s: &Server, bucket: &str, project: &str) -> Vec<(i64, i64)> {
    let prefix = format!(".pulumi/history/{project}/{STACK}/");
    let mut out: Vec<(i64, i64)> = s
        .list(bucket, &prefix)
        .iter()
        .filter(|k| k.ends_with(".history.json"))
        .map(|k| {
            let got = s.request("GET", &format!("/{bucket}/{k}"), &[], None);
            let v: Value = serde_json::from_str(&got.body).unwrap_or_else(|e| panic!("{e}: {k}"));
            let t = |f: &str| {
                v[f].as_i64()
                    .unwrap_or_else(|| panic!("no {f} in {k}: {v}"))
            };
            (t("startTime"), t("endTime"))
        })
        .collect();
    out.sort();
    out
}

/// Seconds since the epoch of an RFC 3339 time, as `date` reads it.
fn epoch(rfc3339: &str) -> i64 {
    let out = std::process::Command::new("date")
        .args(["-u", "-d", rfc3339, "+%s"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("date cannot read {rfc3339:?}"))
}

/// The newest run of `host` in `history --output json`, as seen by `r`.
fn run_of(r: &Real, host: &str) -> Value {
    let h = r.strata(&["history", "-s", STACK, "--output", "json"]);
    assert_eq!(h.code, 0, "{h:?}");
    let v: Value = serde_json::from_str(&h.stdout).unwrap_or_else(|e| panic!("{e}: {h:?}"));
    v["runs"]
        .as_array()
        .and_then(|runs| runs.iter().find(|r| r["host"] == host))
        .cloned()
        .unwrap_or_else(|| panic!("no run of {host}: {v}"))
}

/// Both machines run `up` at once: exactly one runs; the other refuses naming it, or
/// (with `--lock-timeout`) waits and runs after it. Pulumi's own history says that no
/// two updates of a stack overlapped and that every update of the second machine started
/// once the first machine's run had ended.
#[test]
fn two_machines_real_pulumi_one_update_at_a_time() {
    let bucket = "two-machines";
    let Some(Two {
        s,
        a,
        b,
        _guards: _g,
    }) = Two::new("real_s3::two_machines_one_at_a_time", bucket)
    else {
        return;
    };
    let run_a = a.ws.spawn(&up_args(&[]));
    let t0 = Instant::now();
    while lease(&s, bucket)["holders"][0]["host"] != "host-a" {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "host-a took no lease"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let refused = b.strata(&up_args(&[]));
    assert_ended(&refused, 3, &["by tester on host-a"], "host-b");
    assert!(b.take_calls().is_empty(), "refused, B ran no Pulumi");
    let run_b = b.ws.spawn(&up_args(&["--lock-timeout", "10m"]));
    let ra = finish_within(run_a, "host-a's up", BOUND);
    let rb = finish_within(run_b, "host-b's up", BOUND);
    assert_eq!((ra.code, rb.code), (0, 0), "{ra:?}\n{rb:?}");
    for p in ALL {
        assert_eq!(status_of(&ra, p), "succeeded", "{ra:?}");
        assert_eq!(status_of(&rb, p), "succeeded", "{rb:?}");
    }
    assert!(!rb.all().contains("took over"), "{rb:?}");

    let a_ended = epoch(run_of(&b, "host-a")["ended_at"].as_str().unwrap());
    for p in ALL {
        let name = p.replace("local-pulumi/", "lp-");
        let u = updates(&s, bucket, &name);
        // One update by each machine.
        assert_eq!(u.len(), 2, "{name}: {u:?}");
        assert!(u[0].1 <= u[1].0, "{name}: updates overlap: {u:?}");
        assert!(
            u[1].0 >= a_ended,
            "{name}: host-b's update started at {} before host-a's run ended at {a_ended}",
            u[1].0
        );
    }
    for r in [&a, &b] {
        let left = leftover_language_hosts(&r.ws.root);
        assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
    }
}

/// `strata status --output json` of the profile's stack on machine `m`, which succeeds.
fn status_json(m: &Real) -> Value {
    let st = m.strata(&[
        "status",
        "-p",
        "local-pulumi",
        "-s",
        STACK,
        "--output",
        "json",
    ]);
    assert_eq!(st.code, 0, "{st:?}");
    serde_json::from_str(&st.stdout).unwrap_or_else(|e| panic!("{e}: {st:?}"))
}

impl Two {
    /// Both machines, after machine A brought the profile up. The team shares what is
    /// committed: B's clone gets the secret store A's run wrote the registry password to
    /// (and with it the key of the secrets' digests), and the stack config.
    fn deployed_by_a(test: &str, bucket: &str) -> Option<Two> {
        let two = Two::new(test, bucket)?;
        let ra = two.a.strata(&up_args(&[]));
        assert_eq!(ra.code, 0, "{ra:?}");
        for shared in [
            format!("config/secrets/{STACK}.age"),
            format!("config/pulumi/Pulumi.{STACK}.yaml"),
        ] {
            two.b.ws.write(&shared, "");
            std::fs::copy(two.a.ws.path(&shared), two.b.ws.path(&shared)).expect(&shared);
        }
        Some(two)
    }
}

/// Machine A deploys with the real CLI; machine B, a fresh clone with no journal (and
/// the team's secret store), sees A's results in `status` and its `up --changed` starts
/// no Pulumi process at all.
#[test]
fn another_machine_sees_a_real_deploy_and_changed_runs_no_pulumi() {
    let bucket = "two-machines-changed";
    // (`s` bound: dropped here, the last holder of the shared server would stop it.)
    // Held whole: its server handle, dropped, would stop the shared server.
    let Some(two) = Two::deployed_by_a("real_s3::two_machines_changed", bucket) else {
        return;
    };
    let (a, b) = (&two.a, &two.b);

    let st = status_json(b);
    assert_eq!(st["lease"]["held"], false, "{st}");
    let rows = st["projects"].as_array().expect("projects");
    assert_eq!(rows.len(), ALL.len(), "{st}");
    for row in rows {
        assert_eq!(
            (&row["status"], &row["by"]),
            (&"succeeded".into(), &"tester@host-a".into()),
            "{st}"
        );
    }

    let changed = b.strata(&up_args(&["--changed"]));
    assert_eq!(changed.code, 0, "{changed:?}");
    let calls = b.take_calls();
    assert!(calls.is_empty(), "B ran Pulumi:\n{}", calls.join("\n"));
    let left = leftover_language_hosts(&a.ws.root);
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
}

/// `up` of the real-Pulumi profile, timed: it must end within `bound`, failing with an
/// error naming the backend (exit 1), having started no Pulumi process.
fn unreachable_up(r: &Real, bound: Duration, why: &str) -> crate::support::Run {
    let t0 = Instant::now();
    let run = finish_within(
        r.ws.spawn(&up_args(&[])),
        why,
        bound + Duration::from_secs(30),
    );
    let took = t0.elapsed();
    assert!(took < bound, "{why}: {took:?}: {run:?}");
    let said = [
        "s3://strata?endpoint=http://127.0.0.1:",
        "Nothing was started",
    ];
    assert_ended(&run, 1, &said, why);
    let calls = r.take_calls();
    assert!(calls.is_empty(), "{why}: ran Pulumi:\n{}", calls.join("\n"));
    eprintln!("{why}: failed after {took:?}:\n{}", run.stderr);
    run
}

/// The backend does not answer during a whole `up` (its server stopped with SIGSTOP:
/// connections hang), then is gone (its server ended: connections refused). Each time
/// the run fails within a bounded time (one call's bound when it hangs), exit 1, with an
/// error naming the backend, and starts no Pulumi process; once the server answers again, no lease of that run is
/// left in the bucket. A server of its own, which this test stops.
#[test]
fn an_unreachable_backend_fails_the_real_up_in_bounded_time_and_leaves_no_lease() {
    let test = "real_s3::two_machines_unreachable";
    let Some(bin) = super::real_bin_dir(test) else {
        return;
    };
    let s = Server::start(&bin);
    let Some(a) = machine(test, &s, s.var("BUCKET"), "host-a") else {
        return;
    };
    let _guard = KillLeftovers(a.ws.root.clone());
    let bound = Duration::from_secs(60);
    {
        let _paused = Paused::new(&s);
        // One call's bound (10 s, retries included), not one per opening of the bucket:
        // the lease does not wait again on the bucket the preflight found silent.
        unreachable_up(&a, Duration::from_secs(20), "a stopped server");
    }
    // Answering again: give any request it had queued a moment to land.
    std::thread::sleep(Duration::from_secs(2));
    let left = lease(&s, s.var("BUCKET"));
    assert!(
        left.is_null() || left["holders"] == serde_json::json!([]),
        "the failed run left its lease: {left}"
    );
    drop(s);
    unreachable_up(&a, bound, "a server gone");
    let left = leftover_language_hosts(&a.ws.root);
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
}

/// A project machine B brings up again (its outputs the same) changes nothing for
/// machine A's `up --changed`: both hash outputs with the stack's one salt in the bucket,
/// so A does not take B's run of `network` for a change of its outputs and run what
/// needs it again (with a salt per checkout it did).
#[test]
fn a_rerun_on_another_machine_with_the_same_outputs_is_no_change() {
    let bucket = "two-machines-salt";
    // Held whole: its server handle, dropped, would stop the shared server.
    let Some(two) = Two::deployed_by_a("real_s3::two_machines_salt", bucket) else {
        return;
    };
    let (a, b) = (&two.a, &two.b);
    let rb = b.strata(&up_args(&["--project", "local-pulumi/network"]));
    assert_eq!(rb.code, 0, "{rb:?}");
    assert_eq!(status_of(&rb, "local-pulumi/network"), "succeeded");
    a.take_calls();
    let changed = a.strata(&up_args(&["--changed"]));
    assert_eq!(changed.code, 0, "{changed:?}");
    let calls = a.take_calls();
    assert!(
        calls.is_empty(),
        "A ran again what needs network:\n{}",
        calls.join("\n")
    );
}

/// An orphan seen from another machine: A deploys the profile; B, a fresh clone whose
/// profile no longer has the app, learns from A's run records in the bucket that the app
/// is deployed, lists it with its real stack's resources, and destroys it; A then sees
/// the app destroyed, by B.
#[test]
fn another_machine_lists_and_destroys_what_its_profile_lost() {
    let bucket = "two-machines-orphans";
    // Held whole: its server handle, dropped, would stop the shared server.
    let Some(two) = Two::deployed_by_a("real_s3::two_machines_orphans", bucket) else {
        return;
    };
    let (a, b) = (&two.a, &two.b);
    let profile = b.ws.read("providers/local-pulumi.yaml");
    let at = profile
        .find("  - path: local-pulumi/app")
        .expect("the app's entry");
    b.ws.write("providers/local-pulumi.yaml", &profile[..at]);

    let st = status_json(b);
    let orphans = st["orphans"].as_array().expect("orphans");
    assert_eq!(orphans.len(), 1, "{st}");
    assert_eq!(orphans[0]["path"], "local-pulumi/app", "{st}");
    assert!(
        orphans[0]["resources"].as_u64().unwrap_or(0) > 0,
        "its real stack: {st}"
    );

    b.take_calls();
    let destroyed = b.strata(&[
        "destroy",
        "-p",
        "local-pulumi",
        "-s",
        STACK,
        "--orphans",
        "--yes",
    ]);
    assert_eq!(destroyed.code, 0, "{destroyed:?}");
    let (destroy, calls) = b.take_the_one_destroy();
    assert!(destroy.contains("projects/local-pulumi/app"), "{calls:?}");

    let st = status_json(a);
    let app = st["projects"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["path"] == "local-pulumi/app"))
        .unwrap_or_else(|| panic!("{st}"));
    assert_eq!(
        (&app["operation"], &app["by"]),
        (&"destroy".into(), &"tester@host-b".into()),
        "{st}"
    );
}

/// An approval travels with the bucket: A's `up` holds the ingress's real plan; B, a
/// fresh clone that never held it, shows that plan and approves it; A's next `up`, which
/// has no approval of its own, applies exactly that plan with the real `up --plan`, and
/// the gate is gone from the bucket for both.
#[test]
fn an_approval_given_on_one_machine_lets_another_apply_that_plan() {
    use crate::real_pulumi::gates::{
        INGRESS, REVIEW_INGRESS, calls_in, flag_in, ingress_file, ingress_v2, set_policy,
    };
    let bucket = "two-machines-approval";
    // Held whole: its server handle, dropped, would stop the shared server.
    let Some(two) = Two::deployed_by_a("real_s3::two_machines_approval", bucket) else {
        return;
    };
    let (s, a, b) = (&two.s, &two.a, &two.b);
    for m in [a, b] {
        set_policy(m, REVIEW_INGRESS);
        ingress_v2(m);
    }
    let held = a.strata(&up_args(&[]));
    assert_eq!(held.code, 6, "{held:?}");
    assert_eq!(status_of(&held, INGRESS), "awaiting");
    let gate = format!(".strata/approvals/{STACK}/local-pulumi_2fingress/");
    let kept = s.list(bucket, &gate);
    for name in ["held.json", "plan.json"] {
        assert!(kept.iter().any(|k| k.ends_with(name)), "{name}: {kept:?}");
    }

    let approve = [
        "approve",
        INGRESS,
        "-p",
        "local-pulumi",
        "-s",
        STACK,
        "--yes",
    ];
    let approved = b.strata(&approve);
    assert_eq!(approved.code, 0, "{approved:?}");
    let said = approved.all();
    assert!(
        said.contains("update command:local:Command ingress")
            && said.contains("approved by tester@host-b"),
        "B shows the plan A held and approves it: {approved:?}"
    );
    let a_gate =
        a.ws.path(&format!(".strata/{STACK}/approvals/local-pulumi_2fingress"));
    assert!(
        !a_gate.join("approval.json").exists(),
        "A has no approval of its own"
    );

    a.take_calls();
    let applied = a.strata(&up_args(&[]));
    assert_eq!(applied.code, 0, "{applied:?}");
    assert_eq!(status_of(&applied, INGRESS), "succeeded");
    let calls = calls_in(&a.take_calls(), INGRESS);
    assert_eq!(
        calls.len(),
        2,
        "a fresh preview, then the update: {calls:?}"
    );
    assert!(
        flag_in(&calls[1], "--plan").ends_with("approvals/local-pulumi_2fingress/plan.json"),
        "the approved plan: {calls:?}"
    );
    assert!(
        ingress_file(a).starts_with("ingress v2 at "),
        "{}",
        ingress_file(a)
    );
    assert!(
        s.list(bucket, &gate).is_empty(),
        "spent: {:?}",
        s.list(bucket, &gate)
    );
    let again = b.strata(&approve);
    assert_eq!(again.code, 3, "nothing awaits on B either: {again:?}");
}

/// A CI job is a fresh checkout: machine B, with no config copy of its own, brings up
/// the ingress alone, whose input is the cluster's secret admin token. B's copy takes the
/// stack's own passphrase salt from its checkpoint in the bucket, so the secret is
/// encrypted in-process with the stack's key: one Pulumi process, no `pulumi config`,
/// and the stack keeps its salt (a plan saved on one machine decrypts on another).
#[test]
fn a_fresh_checkout_brings_up_a_project_with_a_secret_input_in_one_process() {
    let bucket = "two-machines-fresh-secret";
    // Held whole: its server handle, dropped, would stop the shared server.
    let Some(two) = Two::deployed_by_a("real_s3::two_machines_fresh_secret", bucket) else {
        return;
    };
    let b = &two.b;
    let ingress = "local-pulumi/ingress";
    b.take_calls();
    let run = b.strata(&up_args(&["--project", ingress]));
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(status_of(&run, ingress), "succeeded");
    let calls = b.take_calls();
    let mine: Vec<&String> = calls
        .iter()
        .filter(|c| c.contains(&format!("projects/{ingress} ")))
        .collect();
    assert_eq!(mine.len(), 1, "{calls:#?}");
    assert!(mine[0].starts_with("up "), "{calls:#?}");
    let copy = b.ws.read(".strata/dev/config/local-pulumi_2fingress.yaml");
    let got = two.s.request(
        "GET",
        &format!("/{bucket}/.pulumi/stacks/lp-ingress/{STACK}.json"),
        &[],
        None,
    );
    let checkpoint: Value =
        serde_json::from_str(&got.body).unwrap_or_else(|e| panic!("{e}: {got:?}"));
    let salt = checkpoint["checkpoint"]["latest"]["secrets_providers"]["state"]["salt"]
        .as_str()
        .unwrap_or_else(|| panic!("{checkpoint}"));
    assert!(copy.contains(salt), "the stack's salt: {copy}");
}
