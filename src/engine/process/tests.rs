//! Unit tests of child processes: streaming, capturing, cancelling, background processes.

use super::*;

/// Runs `script` with `sh -c` as project `p` under `c`: how it exited, and each line
/// it printed on stdout or stderr.
fn sh_lines(c: &Control, script: &str) -> (Exit, Vec<String>) {
    let mut lines = Vec::new();
    let exit = run_streaming(duct::cmd!("sh", "-c", script), c, "p", &mut |l| {
        lines.push(l)
    })
    .unwrap();
    (exit, lines)
}

/// A background process the child leaves holding its stdout neither keeps the
/// project running nor dies of SIGPIPE when it writes later.
#[test]
fn a_background_process_holding_the_pipe_is_not_waited_for_nor_killed() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("alive");
    let script = format!(
        "(sleep 0.4; echo late; echo alive > '{}') & echo early",
        marker.display()
    );
    let t0 = std::time::Instant::now();
    let (exit, lines) = sh_lines(&Control::new(), &script);
    assert!(
        t0.elapsed() < std::time::Duration::from_millis(350),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(exit.code, Some(0));
    assert_eq!(lines, vec!["early".to_string()]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !marker.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        marker.exists(),
        "the background process was killed by SIGPIPE"
    );
}

#[test]
fn the_shell_is_an_absolute_path_found_on_the_childrens_path() {
    let env: BTreeMap<String, String> =
        [("PATH".to_string(), "/nonexistent:/bin:/usr/bin".to_string())].into();
    let sh = shell(&env);
    assert!(sh.is_absolute(), "{}", sh.display());
    assert!(sh.ends_with("sh"));
    // Another PATH is looked up again.
    let empty: BTreeMap<String, String> = [("PATH".to_string(), "/nonexistent".to_string())].into();
    assert_eq!(shell(&empty), std::path::PathBuf::from("sh"));
    assert_eq!(shell(&env), sh);
}

#[test]
fn streams_lines_and_exit_code() {
    let c = Control::new();
    let (exit, mut lines) = sh_lines(&c, "echo one; echo two >&2; exit 3");
    assert_eq!(exit.code, Some(3));
    // Two pipes: stdout and stderr lines arrive in either order.
    lines.sort();
    assert_eq!(lines, ["one", "two"]);
    assert!(c.running().is_empty(), "unregistered after exit");
}

#[test]
fn a_long_stdout_line_is_not_split_by_stderr() {
    // A 64 KiB line on stdout while stderr writes many short lines.
    let (exit, lines) = sh_lines(
        &Control::new(),
        "(i=0; while [ $i -lt 200 ]; do echo err$i >&2; i=$((i+1)); done) & head -c 65536 /dev/zero | tr '\\0' x; echo; wait",
    );
    assert!(exit.success());
    let long: Vec<&String> = lines.iter().filter(|l| l.starts_with('x')).collect();
    assert_eq!(long.len(), 1, "one whole line");
    assert_eq!(long[0].len(), 65536);
    assert_eq!(lines.iter().filter(|l| l.starts_with("err")).count(), 200);
}

#[test]
fn child_has_own_process_group_and_no_stdin() {
    let (_, lines) = sh_lines(
        &Control::new(),
        "ps -o pgid= -p $$; ps -o pid= -p $$; cat; echo eof",
    );
    let lines: Vec<&str> = lines.iter().map(|l| l.trim()).collect();
    assert_eq!(lines[0], lines[1], "pgid == pid: {lines:?}");
    assert_eq!(lines.last(), Some(&"eof"));
}

#[test]
fn cancel_sends_sigint_once() {
    let c = std::sync::Arc::new(Control::new());
    let c2 = c.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let t = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let exit = run_streaming(
            duct::cmd!(
                "sh",
                "-c",
                "n=0; trap 'n=$((n+1)); echo got $n' INT; echo ready; i=0; while [ $i -lt 100 ] && [ $n -eq 0 ]; do sleep 0.05; i=$((i+1)); done; sleep 0.2; echo total $n"
            ),
            &c2,
            "p",
            &mut |l| {
                if l == "ready" {
                    let _ = ready_tx.send(());
                }
                lines.push(l)
            },
        )
        .unwrap();
        (exit, lines)
    });
    // The trap is installed once the child says so: no sleep to guess it.
    ready_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the child got ready");
    assert_eq!(c.cancel(), vec!["p".to_string()]);
    assert!(c.cancel().is_empty(), "second cancel is a no-op");
    let (exit, lines) = t.join().unwrap();
    assert_eq!(exit.code, Some(0));
    assert!(lines.contains(&"total 1".to_string()), "{lines:?}");
}

#[test]
fn finds_programs_on_path() {
    let env: BTreeMap<String, String> = [("PATH".to_string(), "/usr/bin:/bin".to_string())].into();
    assert!(find_program("sh", &env).is_some());
    assert!(find_program("definitely-not-a-program-xyz", &env).is_none());
}
