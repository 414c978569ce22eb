#!/usr/bin/env python3
"""Planning speed: `strata show --format json` on generated profiles of N projects with
random `needs` (a DAG): 15% infrastructure, 85% kubernetes, each entry needing 0-3 random
entries among the 100 before it in its stage (0 needs for 10% of them). Prints the median wall time and peak memory per size, and the
time per project, to show planning is negligible next to Pulumi and grows linearly.

Usage: scripts/bench-plan.py [STRATA_BINARY] [--sizes 200,2000] [--runs 7]
"""
import argparse, os, random, shutil, statistics, subprocess, sys, tempfile, time

def generate(root, n, seed=42):
    rnd = random.Random(seed)
    os.makedirs(os.path.join(root, "providers"), exist_ok=True)
    lines = ["description: generated benchmark profile", "infra_type: bench", "infrastructure:"]
    half = max(1, n * 15 // 100)
    k8s = ["kubernetes:"]
    for i in range(n):
        path = f"gen/p{i:05d}"
        d = os.path.join(root, "projects", path)
        os.makedirs(d, exist_ok=True)
        if i % 2:
            with open(os.path.join(d, "Pulumi.yaml"), "w") as f:
                f.write(f"name: gen-p{i:05d}\nruntime: yaml\n")
        else:
            with open(os.path.join(d, "Strata.yaml"), "w") as f:
                f.write("up: 'true'\ndestroy: 'true'\n")
        start = 0 if i < half else half
        pool = list(range(max(start, i - 100), i))
        count = rnd.choices([0, 1, 2, 3], weights=[10, 40, 30, 20])[0]
        needs = rnd.sample(pool, min(len(pool), count))
        entry = [f"  - path: {path}", f"    needs: [{', '.join(f'gen/p{j:05d}' for j in needs)}]"]
        (lines if i < half else k8s).extend(entry)
    with open(os.path.join(root, "providers", "gen.yaml"), "w") as f:
        f.write("\n".join(lines + k8s) + "\n")

def measure(binary, root, runs):
    times, rss = [], []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = subprocess.run(["/usr/bin/time", "-f", "%M", binary, "--root", root,
                              "show", "-p", "gen", "-s", "bench", "--format", "json"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        times.append(time.perf_counter() - t0)
        if out.returncode != 0:
            sys.exit(f"strata failed: {out.stderr}")
        rss.append(int(out.stderr.strip().splitlines()[-1]))
    return statistics.median(times), max(rss)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary", nargs="?", default="target/release/strata")
    ap.add_argument("--sizes", default="200,2000")
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    print(f"{'projects':>8}  {'median ms':>10}  {'µs/project':>10}  {'peak RSS MiB':>12}")
    for n in [int(s) for s in a.sizes.split(",")]:
        root = tempfile.mkdtemp(prefix=f"strata-bench-plan-{n}-")
        try:
            generate(root, n)
            med, rss = measure(binary, root, a.runs)
            print(f"{n:>8}  {med*1000:>10.1f}  {med*1e6/n:>10.1f}  {rss/1024:>12.1f}")
        finally:
            shutil.rmtree(root, ignore_errors=True)

if __name__ == "__main__":
    main()
