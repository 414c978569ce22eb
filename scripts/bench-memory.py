#!/usr/bin/env python3
"""Peak memory of strata's runs as the estate grows, next to `make -j8` on the same DAG.

The generated layered DAG of N command projects of bench-cost.py (each needs 1-3 projects
of the layer before it; its `up` writes `{}` to its outputs file), run with `-j 8`. For
each size, the peak RSS (ru_maxrss of the strata process, measured by GNU time) of:

  first     the first `up` (stacks, folders and logs created)
  steady    a no-op `up`: every project runs again and changes nothing (the issue's
            figure: 32 / 56 / 103 MB at 1,000 / 2,000 / 4,000 before the fix)
  changed   `up --changed` with nothing changed: every project skipped
  make      `make -j8` on the same DAG, for scale

Medians of --runs runs; the goal is a first and a no-op `up` of 4,000 projects under
32 MiB each.

Usage: scripts/bench-memory.py [--strata target/release/strata] [--runs 3]
                               [--sizes 1000,2000,4000] [--goal-mib 32]
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from importlib import import_module
gen = import_module("bench-cost").gen

# A child Python starts reports at least Python's own peak RSS as its ru_maxrss (about
# 14 MiB): subprocess starts it with vfork, and Linux keeps the larger of the old and the
# new image's peak across exec. GNU time, a small process in between, measures the
# command alone; without it the figures have that floor.
TIME = shutil.which("time", path="/usr/bin:/bin")

def peak_kib(cmd, env, cwd):
    """Runs `cmd` and returns its peak RSS in KiB (ru_maxrss of the process, with its
    children's for make)."""
    with tempfile.NamedTemporaryFile(mode="r") as out:
        launcher = [TIME, "-f", "%M", "-o", out.name] if TIME else []
        p = subprocess.Popen(launcher + cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        err = p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({code}):\n{err[-2000:].decode(errors='replace')}")
        return int(out.read().split()[-1]) if TIME else ru.ru_maxrss

def mib(kib):
    return kib / 1024

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--sizes", default="1000,2000,4000")
    ap.add_argument("-j", "--jobs", type=int, default=8)
    ap.add_argument("--goal-mib", type=float, default=32.0)
    a = ap.parse_args()
    strata = os.path.abspath(a.strata)
    base = tempfile.mkdtemp(prefix="strata-bench-memory-")
    rows = []
    try:
        for n in [int(x) for x in a.sizes.split(",")]:
            firsts, steadies, changeds, makes = [], [], [], []
            for _ in range(a.runs):
                root = os.path.join(base, f"n{n}")
                shutil.rmtree(root, ignore_errors=True)
                gen(root, n)
                env = {"PATH": "/usr/bin:/bin", "HOME": root, "CI": "true"}
                up = [strata, "up", "-p", "bench", "-j", str(a.jobs)]
                firsts.append(peak_kib(up, env, root))
                steadies.append(peak_kib(up, env, root))
                changeds.append(peak_kib(up + ["--changed"], env, root))
                shutil.rmtree(os.path.join(root, "out"), ignore_errors=True)
                makes.append(peak_kib(["make", f"-j{a.jobs}", "-s"], env, root))
            row = (n, *(statistics.median(x) for x in (firsts, steadies, changeds, makes)))
            rows.append(row)
            print(f"  {n} projects done", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    how = "GNU time" if TIME else "wait4, floored by this script's own RSS: no /usr/bin/time"
    print(f"peak RSS, MiB (median of {a.runs}; -j {a.jobs}; {how})")
    print(f"{'projects':>8}  {'first up':>9}  {'no-op up':>9}  {'up --changed':>12}  {'make':>6}  {'KiB/project (no-op)':>20}")
    for n, f, s, c, m in rows:
        print(f"{n:>8}  {mib(f):>9.1f}  {mib(s):>9.1f}  {mib(c):>12.1f}  {mib(m):>6.1f}  {s / n:>20.1f}")
    big = max(rows, key=lambda r: r[0])
    for name, kib in (("first", big[1]), ("no-op", big[2])):
        verdict = "met" if mib(kib) < a.goal_mib else "NOT met"
        print(f"goal: a {name} up of {big[0]} projects under {a.goal_mib:g} MiB: {mib(kib):.1f} MiB, {verdict}")

if __name__ == "__main__":
    main()
