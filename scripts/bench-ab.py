#!/usr/bin/env python3
"""Two or more strata builds against each other, and against the lean make, on a no-op
`up -j4` of bench-cost.py's generated workspace: interleaved (the order reversed every
other round), each build on its own workspace, medians, and each build's ratio to the
first build paired by round (the median of that round's ratios).

Where each workspace lies moves a run more than most changes do: two copies of one build
on one disk differed by 25% (the block groups ext4 gave their folders). So by default
every build and the make get their own fresh ext4 of the same size and layout
(`mkfs.ext4` defaults, with a journal, loop-mounted with `discard`), made and removed
here; that needs root. `--no-loop` puts the copies in a temporary folder instead, and
says that their place on the disk may bias the result. Pass the first build twice to see
the floor of the noise (its pairing with itself).

Usage: sudo scripts/bench-ab.py BUILD BUILD [BUILD...] [--projects 400] [--runs 15]
"""
import argparse, importlib.util, os, shutil, statistics, subprocess, sys, tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("bench_cost", os.path.join(HERE, "bench-cost.py"))
bench_cost = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_cost)


def loop_disk(base, name):
    """A fresh 1 GiB ext4 mounted at base/name; returns the mount point."""
    image, mount = os.path.join(base, name + ".img"), os.path.join(base, name)
    with open(image, "wb") as f:
        f.truncate(1 << 30)
    subprocess.run(["mkfs.ext4", "-q", "-F", image], check=True)
    os.makedirs(mount)
    subprocess.run(["mount", "-o", "loop,discard", image, mount], check=True)
    return mount


def timed(cmd, root):
    return bench_cost.timed(cmd, {"PATH": "/usr/bin:/bin", "HOME": root, "CI": "true"}, root)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("builds", nargs="+")
    ap.add_argument("--projects", type=int, default=400)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--no-loop", action="store_true")
    a = ap.parse_args()
    if len(a.builds) < 2:
        raise SystemExit("bench-ab.py: give two builds or more (the first is the baseline)")
    builds = [os.path.abspath(b) for b in a.builds]
    for b in builds:
        if not os.access(b, os.X_OK):
            raise SystemExit(f"bench-ab.py: {b} is not an executable strata build")
    loop = not a.no_loop
    if loop and (os.geteuid() != 0 or not shutil.which("mkfs.ext4")):
        raise SystemExit("bench-ab.py: a fresh ext4 disk per build needs root and mkfs.ext4 "
                         "(run it with sudo), or pass --no-loop (copies side by side, "
                         "which their place on the disk may bias)")
    base = tempfile.mkdtemp(prefix="strata-bench-ab-")
    mounts = []
    try:
        source = os.path.join(base, "source")
        bench_cost.gen(source, a.projects)
        roots = []
        for i in range(len(builds) + 1):  # one more for the make
            where = base
            if loop:
                where = loop_disk(base, f"disk{i}")
                mounts.append(where)
            root = os.path.join(where, f"w{i}")
            shutil.copytree(source, root)
            roots.append(root)
        make_root = roots.pop()
        up = ["up", "-p", "bench", "-j", "4", "--output", "json"]
        for b, root in zip(builds, roots):
            timed([b] + up, root)  # the first run makes the stacks and folders
        walls = [[] for _ in builds]
        lean = []
        for r in range(a.runs):
            shutil.rmtree(os.path.join(make_root, "out"), ignore_errors=True)
            lean.append(timed(["make", "-f", "Makefile.lean", "-j4", "-s"], make_root))
            order = list(range(len(builds)))
            for i in (order if r % 2 == 0 else order[::-1]):
                walls[i].append(timed([builds[i]] + up, roots[i]))
        lm = statistics.median(lean)
        where = "each on its own fresh ext4" if loop else "copies side by side (may be biased)"
        print(f"{a.projects} projects, -j4, {a.runs} rounds, {where}; lean make {lm*1000:.0f} ms")
        for b, w in zip(builds, walls):
            paired = statistics.median(x / y for x, y in zip(w, walls[0]))
            m = statistics.median(w)
            print(f"  {b}: {m*1000:.0f} ms, ratio to the lean make {m/lm:.2f}, "
                  f"paired to the first build {paired:.3f}")
    finally:
        for m in mounts:
            subprocess.run(["umount", m])
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
