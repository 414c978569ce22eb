#!/usr/bin/env python3
"""Run speed: a generated workspace of about 40 Pulumi projects with a known graph and
fake per-project durations, run with the fake pulumi (tests/fake-pulumi) on PATH.

Prints, for `strata up` on existing stacks (the steady state):
  wall / critical path   (goal <= 1.10: scheduling adds little to the longest chain)
  wall / sum of durations (what a sequential runner like MARA pays, for comparison)
  strata's own CPU time per project, and CLI processes per project
for `preview` of the deployed workspace: wall / slowest single preview (goal <= 1.2) and
the same preview one project at a time; and for the first run (stacks created) and for
`up --changed`: no change (goal: 0
processes) and one leaf project changed (goal: 1 project re-run).

Usage: scripts/bench-run.py [--strata target/release/strata] [--pulumi target/release/pulumi]
                            [--runs 3] [-j 16]
"""
import argparse, json, os, random, shutil, statistics, subprocess, tempfile, time

def gen(root, seed=7):
    rnd = random.Random(seed)
    infra, k8s = [], []
    durations = {}
    def add(lst, i, needs):
        path = f"{'infra' if lst is infra else 'k8s'}/p{i:02d}"
        name = f"bench-p{i:02d}"
        d = os.path.join(root, "projects", path)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "Pulumi.yaml"), "w") as f:
            f.write(f"name: {name}\nruntime: yaml\nresources:\n"
                    f"  a:\n    type: test:index:Thing\n    properties:\n      n: {i}\n"
                    f"  b:\n    type: test:index:Thing\n    properties:\n      n: {i}\n"
                    f"outputs:\n  id: ${{a.id}}\n")
        durations[path] = rnd.randint(200, 800)
        lst.append((path, name, needs))
        return path
    # Infrastructure: two chains of three and two independent projects.
    n = 0
    for chain in range(2):
        prev = None
        for _ in range(3):
            prev = add(infra, n, [prev] if prev else [])
            n += 1
    for _ in range(2):
        add(infra, n, []); n += 1
    # Kubernetes: 32 projects, each needing 0-2 earlier kubernetes projects.
    first_k8s = n
    for _ in range(32):
        pool = [p for p, _, _ in k8s]
        needs = rnd.sample(pool, min(len(pool), rnd.choice([0, 1, 1, 2])))
        add(k8s, n, needs); n += 1
    lines = ["description: generated run benchmark", "infra_type: bench", "infrastructure:"]
    for path, _, needs in infra:
        lines += [f"  - path: {path}", f"    needs: [{', '.join(needs)}]"]
    lines.append("kubernetes:")
    for path, _, needs in k8s:
        lines += [f"  - path: {path}", f"    needs: [{', '.join(needs)}]"]
    os.makedirs(os.path.join(root, "providers"), exist_ok=True)
    with open(os.path.join(root, "providers", "bench.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    projects = infra + k8s
    return projects, durations

def critical_path(projects, durations):
    # Kubernetes roots wait for every infrastructure project (the stage barrier).
    finish = {}
    infra = [p for p, _, _ in projects if p.startswith("infra/")]
    for path, _, needs in projects:
        deps = list(needs)
        if path.startswith("k8s/") and not needs:
            deps = infra
        start = max((finish[d] for d in deps), default=0)
        finish[path] = start + durations[path]
    return max(finish.values())

def run(cmd, env, cwd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    fin = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    fin = [e for e in fin if e.get("event") == "run_finished"][-1]
    return wall, fin

def count_calls(log):
    try:
        with open(log) as f:
            return sum(1 for l in f if '"event":"start"' in l.replace(" ", ""))
    except FileNotFoundError:
        return 0

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--pulumi", default="target/release/pulumi")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("-j", type=int, default=16)
    a = ap.parse_args()
    strata, fake = os.path.abspath(a.strata), os.path.abspath(a.pulumi)
    root = tempfile.mkdtemp(prefix="strata-bench-run-")
    try:
        projects, durations = gen(root)
        bindir = os.path.join(root, "bin"); os.makedirs(bindir)
        os.symlink(fake, os.path.join(bindir, "pulumi"))
        log = os.path.join(root, "calls.jsonl")
        env = {"PATH": f"{bindir}:/usr/bin:/bin", "HOME": root,
               "PULUMI_CONFIG_PASSPHRASE": "bench", "FAKE_PULUMI_LOG": log}
        for path, name, _ in projects:
            env["FAKE_PULUMI_DELAY_MS_" + name.upper().replace("-", "_")] = str(durations[path])
        n = len(projects)
        cp, total = critical_path(projects, durations), sum(durations.values())
        base = [strata, "--root", root, "-p", "bench", "-s", "bench", "--output", "json"]
        print(f"workspace: {n} projects, critical path {cp} ms, sum of durations {total} ms, -j {a.j}")

        wall, fin = run(base + ["up", "-j", str(a.j)], env, root)
        print(f"first up (stacks created): wall {wall*1000:.0f} ms, "
              f"{count_calls(log)/n:.2f} CLI processes per project")

        walls, cpus, procs = [], [], []
        for _ in range(a.runs):
            before = count_calls(log)
            wall, fin = run(base + ["up", "-j", str(a.j)], env, root)
            walls.append(wall * 1000); cpus.append(fin["cpu_ms"])
            procs.append((count_calls(log) - before) / n)
        w = statistics.median(walls)
        print(f"steady-state up (median of {a.runs}): wall {w:.0f} ms")
        print(f"  wall / critical path   = {w/cp:.3f}   (goal <= 1.10)")
        print(f"  wall / sum of durations = {w/total:.3f}   (a sequential runner: 1.0)")
        print(f"  strata CPU per project  = {statistics.median(cpus)/n:.2f} ms")
        print(f"  CLI processes per project = {statistics.median(procs):.2f}   (MARA: 4-5)")

        # Preview of the deployed workspace: every project at once (-j n), against the
        # slowest single preview and against one project at a time (-j 1).
        slowest = max(durations.values())
        pwalls = []
        for _ in range(a.runs):
            before = count_calls(log)
            wall, fin = run(base + ["preview", "-j", str(n)], env, root)
            pwalls.append(wall * 1000)
        pprocs = (count_calls(log) - before) / n
        pw = statistics.median(pwalls)
        wall1, _ = run(base + ["preview", "-j", "1"], env, root)
        print(f"preview of the deployed stack (median of {a.runs}, -j {n}): wall {pw:.0f} ms, "
              f"slowest single preview {slowest} ms")
        print(f"  preview wall / slowest single preview = {pw/slowest:.3f}   (goal <= 1.2)")
        print(f"  sequential preview (-j 1): wall {wall1*1000:.0f} ms = {wall1*1000/pw:.1f}x the parallel one"
              f"; in dependency order it could not beat the critical path, {cp} ms")
        print(f"  CLI processes per project = {pprocs:.2f} (the preview, and reading upstream outputs)")

        before = count_calls(log)
        wall, fin = run(base + ["up", "--changed", "-j", str(a.j)], env, root)
        print(f"up --changed, nothing changed: wall {wall*1000:.0f} ms, "
              f"{count_calls(log)-before} pulumi processes, {fin['counts']['skipped']} skipped (goal: 0 processes)")

        leaf = projects[-1][0]
        with open(os.path.join(root, "projects", leaf, "Pulumi.yaml"), "a") as f:
            f.write("# changed\n")
        before = count_calls(log)
        wall, fin = run(base + ["up", "--changed", "-j", str(a.j)], env, root)
        print(f"up --changed, leaf {leaf} changed: wall {wall*1000:.0f} ms, "
              f"{fin['counts']['succeeded']} project(s) re-run, {count_calls(log)-before} pulumi processes (goal: 1)")
    finally:
        shutil.rmtree(root, ignore_errors=True)

if __name__ == "__main__":
    main()
