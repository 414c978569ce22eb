#!/usr/bin/env python3
"""strata's own cost per project and per command, side by side with `make -j4`.

A generated layered DAG of N command projects (each needs 1-3 projects of the layer
before it) whose `up` writes `{}` to its outputs file; the same DAG as two Makefiles:
`Makefile`, whose recipes make the folder and run the same `sh -c` command (three
processes a target), and `Makefile.lean`, whose recipes are one shell each writing the
same file (`echo {} > $@`, the folder made once): what strata starts per project, one
`sh`. Rows, each a ratio measured in one run:

  strata up -j4 / make -j4            (goal <= 1.0), for 400 and 1,000 projects
  strata up -j4 / lean make -j4       (goal <= 1.10: strata's own cost over a make that
                                       starts the same one process a project)
  processes started by up --changed after one leaf-side change and after one root-side
                                       change that leaves its outputs alone (goal: 1)
  status and up --changed after 20 runs / after 1 run (goal <= 1.1: history must not
                                       slow anything down)

Usage: scripts/bench-cost.py [--strata target/release/strata] [--runs 3] [--sizes 400,1000]
"""
import argparse, json, os, random, shutil, statistics, subprocess, tempfile, time

UP = 'echo {} > "$STRATA_OUTPUTS_FILE"'

def gen(root, n, seed=11):
    rnd = random.Random(seed)
    os.makedirs(os.path.join(root, "providers"))
    os.makedirs(os.path.join(root, "config/pulumi"))
    width = max(1, n // 20)
    layers, lines = [], ["description: cost benchmark", "infra_type: bench", "infrastructure:"]
    make = [".PHONY: all", ""]
    lean = [".PHONY: all", "", "out:", "\t@mkdir -p out", ""]
    names = []
    for i in range(n):
        layer = i // width
        path = f"infra/p{i:04d}"
        d = os.path.join(root, "projects", path)
        os.makedirs(d)
        with open(os.path.join(d, "Strata.yaml"), "w") as f:
            f.write(f"up: '{UP}'\ndestroy: 'true'\n")
        prev = [p for (p, l) in layers if l == layer - 1]
        needs = rnd.sample(prev, min(len(prev), rnd.randint(1, 3))) if prev else []
        layers.append((path, layer))
        lines += [f"  - path: {path}", f"    needs: [{', '.join(needs)}]"]
        target = f"out/p{i:04d}.json"
        deps = " ".join(f"out/{p.split('/')[1]}.json" for p in needs)
        make += [f"{target}: {deps}", f"\t@mkdir -p out && STRATA_OUTPUTS_FILE=$@ sh -c '{UP}'", ""]
        lean += [f"{target}: {deps} | out", "\t@echo {} > $@", ""]
        names.append(target)
    make.insert(1, "all: " + " ".join(names))
    lean.insert(1, "all: " + " ".join(names))
    with open(os.path.join(root, "providers", "bench.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(root, "config/pulumi/environment"), "w") as f:
        f.write("PULUMI_STACK=bench\n")
    with open(os.path.join(root, "Makefile"), "w") as f:
        f.write("\n".join(make) + "\n")
    with open(os.path.join(root, "Makefile.lean"), "w") as f:
        f.write("\n".join(lean) + "\n")

def timed(cmd, env, cwd):
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return time.perf_counter() - t0

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="400,1000")
    ap.add_argument("--history", type=int, default=20)
    ap.add_argument("--history-size", type=int, default=1000)
    a = ap.parse_args()
    strata = os.path.abspath(a.strata)
    base = tempfile.mkdtemp(prefix="strata-bench-cost-")
    try:
        for n in [int(x) for x in a.sizes.split(",")]:
            root = os.path.join(base, f"n{n}")
            gen(root, n)
            env = {"PATH": "/usr/bin:/bin", "HOME": root, "CI": "true"}
            up = [strata, "up", "-p", "bench", "-j", "4", "--output", "json"]
            timed(up, env, root)  # first run: stacks and folders created
            ratios, lean_ratios, s_walls, m_walls, l_walls = [], [], [], [], []
            for _ in range(a.runs):
                shutil.rmtree(os.path.join(root, "out"), ignore_errors=True)
                m = timed(["make", "-j4", "-s"], env, root)
                shutil.rmtree(os.path.join(root, "out"), ignore_errors=True)
                l = timed(["make", "-f", "Makefile.lean", "-j4", "-s"], env, root)
                s = timed(up, env, root)
                m_walls.append(m); l_walls.append(l); s_walls.append(s)
                ratios.append(s / m); lean_ratios.append(s / l)
            sm, mm, lm = (statistics.median(x) for x in (s_walls, m_walls, l_walls))
            print(f"{n} projects: strata up -j4 {sm*1000:.0f} ms, make -j4 {mm*1000:.0f} ms, "
                  f"ratio {statistics.median(ratios):.2f} (goal <= 1.0); "
                  f"lean make -j4 {lm*1000:.0f} ms, ratio {statistics.median(lean_ratios):.2f} "
                  f"(goal <= 1.10); per project: strata {sm*1000/n:.2f} ms, make {mm*1000/n:.2f}, "
                  f"lean make {lm*1000/n:.2f}")
        # --changed on the last (largest) workspace: processes started after one change
        # on the leaf side, and after one on the root side that leaves its outputs alone.
        def changed_run(path):
            with open(os.path.join(root, "projects", path, "Strata.yaml"), "a") as f:
                f.write("# edited\n")
            p = subprocess.run([strata, "up", "-p", "bench", "-j", "4", "--changed", "--output", "json"],
                               env=env, cwd=root, capture_output=True, text=True)
            fin = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
            fin = [e for e in fin if e.get("event") == "run_finished"][-1]
            return fin["processes"], fin["counts"]
        procs, counts = changed_run(f"infra/p{n-1:04d}")
        print(f"up --changed on {n} projects, one leaf changed: {procs} process(es), {counts['skipped']} skipped")
        procs, counts = changed_run("infra/p0000")
        print(f"up --changed on {n} projects, one root changed, same outputs: {procs} process(es) "
              f"(goal: 1, not hundreds), {counts['skipped']} skipped")
        # History: the last workspace, after 1 run and after `history` runs.
        root = os.path.join(base, "hist")
        gen(root, a.history_size)
        env = {"PATH": "/usr/bin:/bin", "HOME": root, "CI": "true"}
        up = [strata, "up", "-p", "bench", "-j", "4", "--output", "json"]
        def reads():
            st = statistics.median(timed([strata, "status", "-p", "bench"], env, root) for _ in range(5))
            ch = statistics.median(timed(up + ["--changed"], env, root) for _ in range(5))
            return st, ch
        timed(up, env, root)
        st1, ch1 = reads()
        for _ in range(a.history - 1 - 5):
            timed(up, env, root)
        st20, ch20 = reads()
        print(f"history, {a.history_size} projects: status {st1*1000:.1f} ms after 1 run, {st20*1000:.1f} ms after "
              f"{a.history}+: ratio {st20/st1:.2f}; up --changed {ch1*1000:.1f} / {ch20*1000:.1f} ms: "
              f"ratio {ch20/ch1:.2f} (goal <= 1.1)")
    finally:
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    main()
