//! The process groups that a child's own children went into. Pulumi starts each plugin
//! (the language host, every provider) in a process group of its own, so signalling the
//! group strata made for `pulumi` does not reach them; if `pulumi` is then killed
//! outright, they are orphaned and run on. A hard kill therefore looks them up through
//! `/proc` (while their parent still lives) and kills their groups too.

use std::collections::{BTreeMap, BTreeSet};

/// One process as `/proc/<pid>/stat` tells it: (parent pid, process group).
fn stat(pid: i32) -> Option<(i32, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 2, the command, is in parentheses and may hold anything: count after it.
    let mut rest = text[text.rfind(')')? + 1..].split_whitespace();
    let _state = rest.next()?;
    let ppid = rest.next()?.parse().ok()?;
    let pgrp = rest.next()?.parse().ok()?;
    Some((ppid, pgrp))
}

/// Every process of this machine (this PID namespace): pid → (parent, group).
fn processes() -> BTreeMap<i32, (i32, i32)> {
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, stat(pid)?)))
        .collect()
}

/// The groups, other than `pgid`, of the descendants of the processes of group `pgid`.
pub fn other_groups_below(pgid: i32) -> BTreeSet<i32> {
    groups_below(&processes(), pgid)
}

fn groups_below(procs: &BTreeMap<i32, (i32, i32)>, pgid: i32) -> BTreeSet<i32> {
    let mut children: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (&pid, &(ppid, _)) in procs {
        children.entry(ppid).or_default().push(pid);
    }
    let mut todo: Vec<i32> = procs
        .iter()
        .filter(|(_, (_, g))| *g == pgid)
        .map(|(&pid, _)| pid)
        .collect();
    let mut seen = BTreeSet::new();
    let mut groups = BTreeSet::new();
    while let Some(pid) = todo.pop() {
        if !seen.insert(pid) {
            continue;
        }
        if let Some((_, g)) = procs.get(&pid)
            && *g != pgid
            && *g > 1
        {
            groups.insert(*g);
        }
        todo.extend(children.get(&pid).into_iter().flatten().copied());
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_groups_of_a_groups_descendants_are_found() {
        // pulumi (100, group 100) → language host (101, own group), provider (102, own
        // group) → its child (103, in 102's group); a shell (100's sibling) elsewhere.
        let procs = BTreeMap::from([
            (1, (0, 1)),
            (50, (1, 50)),
            (100, (50, 100)),
            (101, (100, 101)),
            (102, (100, 102)),
            (103, (102, 102)),
            (104, (100, 100)),
            (200, (50, 200)),
        ]);
        assert_eq!(
            groups_below(&procs, 100).into_iter().collect::<Vec<_>>(),
            [101, 102]
        );
        assert!(groups_below(&procs, 200).is_empty());
        assert!(groups_below(&procs, 999).is_empty());
    }

    /// A real child that starts a grandchild in a group of its own (as Pulumi starts its
    /// plugins): found from the child's group.
    #[test]
    fn a_real_grandchild_in_its_own_group_is_found() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sh")
            .args(["-c", "setsid sleep 30 & echo $!; wait"])
            .stdout(std::process::Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        let mut line = String::new();
        use std::io::BufRead;
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let grandchild: i32 = line.trim().parse().unwrap();
        let pgid = child.id() as i32;
        // `$!` is known as soon as the shell forks, before `setsid` has run in the
        // fork: until it has, the grandchild is still in the child's group.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while stat(grandchild).is_some_and(|(_, g)| g != grandchild)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let found = other_groups_below(pgid);
        // SAFETY: kill(2) of processes this test started.
        unsafe {
            libc::kill(-grandchild, libc::SIGKILL);
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = child.wait();
        assert!(found.contains(&grandchild), "{found:?} lacks {grandchild}");
    }
}
