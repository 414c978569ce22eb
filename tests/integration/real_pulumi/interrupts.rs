//! Interrupted real updates: Ctrl-C once and twice, `kill -9` then `--resume`, and a live
//! Pulumi lock that is left alone.

use super::*;

/// `up` of the slow project, started; returned once b's create runs.
fn slow_up_under_way(r: &Real) -> std::process::Child {
    slow_project(r);
    let child = r.ws.spawn(&["up", "--provider", "slow", "--stack", "dev"]);
    wait_for("b's create to start", || r.ws.exists("b-started"));
    child
}

/// The processes whose working folder is inside `root` (a test's workspace): Pulumi and
/// its plugins run in the project's folder.
fn processes_in(root: &Path) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let proc = entry.path();
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let in_root = std::fs::read_link(proc.join("cwd")).is_ok_and(|cwd| cwd.starts_with(root));
        if let (true, Ok(cmd)) = (in_root, std::fs::read_to_string(proc.join("cmdline"))) {
            found.push((pid, cmd.replace('\0', " ").trim().to_string()));
        }
    }
    found
}

/// A second Ctrl-C kills the update outright: Pulumi's plugins, each in a process group
/// of its own, are killed with it, not orphaned (they ran on, one pair per run).
#[test]
fn a_second_ctrl_c_leaves_no_plugin_running() {
    let Some(r) = Real::new("real_pulumi::second_ctrl_c") else {
        return;
    };
    let child = slow_up_under_way(&r);
    assert!(
        processes_in(&r.ws.root)
            .iter()
            .any(|(_, c)| c.contains("pulumi-resource-command")),
        "the provider runs: {:?}",
        processes_in(&r.ws.root)
    );
    for _ in 0..2 {
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    let out = child.wait_with_output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    wait_for("the plugins to be gone", || {
        processes_in(&r.ws.root).is_empty()
    });
}

/// `kill -9` of strata and of the Pulumi update it ran: the real file backend keeps the
/// update's lock file and a pending create in the checkpoint. `up --resume` clears the
/// lock (its process is gone from this host), and Pulumi finishes the update.
#[test]
fn kill_9_in_the_middle_of_a_real_update_then_resume_finishes_without_a_human() {
    let Some(r) = Real::new("real_pulumi::kill_9_resume") else {
        return;
    };
    let mut child = slow_up_under_way(&r);
    // Both at once, as a lost machine or the OOM killer would: strata, then every
    // process group it recorded for its children.
    let groups = r.ws.read(".strata/dev/lock.children");
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    let _ = child.wait();
    let last: Vec<(i32, String)> = groups
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .next_back()
        .expect("the children strata recorded");
    assert!(!last.is_empty(), "{groups}");
    for (pgid, _) in &last {
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
    }
    wait_for("the killed groups to be gone", || {
        last.iter().all(|(g, _)| unsafe { libc::kill(-g, 0) } != 0)
    });
    // Pulumi's plugins run in groups of their own: with strata and Pulumi killed, they
    // are orphans that nothing will stop, as after a lost machine's reboot they would
    // not exist. This test made them, so it ends them.
    for (pid, _) in processes_in(&r.ws.root) {
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    wait_for("the orphaned plugins to be gone", || {
        processes_in(&r.ws.root).is_empty()
    });
    assert!(!r.ws.exists("b-done"));
    assert_eq!(lock_files(&r).len(), 1, "Pulumi's lock is left behind");
    let checkpoint = r.ws.read(".strata/backend/.pulumi/stacks/rp-slow/dev.json");
    assert!(checkpoint.contains("pending_operations"), "{checkpoint}");

    let resumed = r.on("slow", &["up", "--resume"]);
    assert_eq!(resumed.code, 0, "{resumed:?}");
    assert!(resumed.all().contains("pulumi cancel"), "{resumed:?}");
    assert!(lock_files(&r).is_empty());
    assert!(r.ws.exists("b-done"), "the interrupted create ran again");
    let steady = r.on("slow", &["up"]);
    assert_eq!(steady.code, 0, "{steady:?}");
}

/// A lock whose process is alive is never cleared: the run fails and names the one
/// command that clears it.
#[test]
fn a_live_pulumi_lock_is_left_alone_and_the_command_to_clear_it_is_named() {
    let Some(r) = Real::new("real_pulumi::live_lock") else {
        return;
    };
    slow_project(&r);
    assert_eq!(r.on("slow", &["up"]).code, 0);
    let mut holder = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    write_slow_lock(&r, "0d1f2e3c-live.json", holder.id());
    let run = r.on("slow", &["up"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_ne!(run.code, 0, "{run:?}");
    assert!(
        run.all().contains("the stack is currently locked"),
        "{run:?}"
    );
    assert!(
        run.all().contains("pulumi cancel --yes --stack dev --cwd"),
        "{run:?}"
    );
    assert_eq!(lock_files(&r).len(), 1, "a live holder's lock is kept");
}

/// Ctrl-C during a real update: strata forwards one SIGINT to Pulumi's process group,
/// Pulumi cancels gracefully and saves its state, strata exits 130, and the stack is
/// left consistent: no lock, no pending operation. (The engine waits for the step in
/// flight, but a pulumi-go-provider provider, as pulumi-command is, aborts its command
/// when the engine cancels: that create fails and is not recorded, so the next `up`
/// creates it. The fake instead lets it complete.)
#[test]
fn ctrl_c_during_a_real_update_leaves_the_stack_consistent() {
    let Some(r) = Real::new("real_pulumi::ctrl_c") else {
        return;
    };
    let child = slow_up_under_way(&r);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(130), "{text}");
    assert!(
        text.contains("^C received; cancelling"),
        "Pulumi got one SIGINT: {text}"
    );
    assert!(
        !text.contains("^C received; terminating"),
        "and only one: {text}"
    );
    let calls = r.take_calls();
    assert_eq!(
        calls.iter().filter(|c| c.starts_with("up ")).count(),
        1,
        "{calls:#?}"
    );
    assert!(lock_files(&r).is_empty(), "no Pulumi lock left: {text}");
    let checkpoint = r.ws.read(".strata/backend/.pulumi/stacks/rp-slow/dev.json");
    let doc: Value = serde_json::from_str(&checkpoint).unwrap();
    let pending = &doc["checkpoint"]["latest"]["pending_operations"];
    assert!(
        pending.is_null() || pending.as_array().is_some_and(|a| a.is_empty()),
        "{pending}"
    );
    // a was saved; b, cancelled, is created by the next run, which then is steady.
    let again = r.on("slow", &["up", "--resume"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert!(r.ws.exists("b-done"), "{again:?}");
    let steady = r.on("slow", &["preview", "--expect-no-changes"]);
    assert_eq!(steady.code, 0, "{steady:?}");
}
