#!/usr/bin/env python3
"""What the encrypted secrets store costs the commands around it.

A generated workspace of command projects (no pulumi needed) whose profile declares one
secret, with a passphrase store (scrypt, strata's work factor), measured side by side
with the same workspace without secrets:

  status / validate: wall time and peak memory (goal: under 100 ms and 32 MiB with a
                     passphrase store: they read the store's digest, never the store)
  time to the first child of `up`: from strata's start to the first project's first
                     line (a run whose projects take a secret must open the store)

Usage: scripts/bench-store.py [--strata target/release/strata] [--runs 5]
"""
import argparse, os, shutil, statistics, subprocess, tempfile, time

def gen(root, secret):
    os.makedirs(os.path.join(root, "providers"))
    os.makedirs(os.path.join(root, "config/pulumi"))
    lines = ["description: store benchmark", "infra_type: bench"]
    if secret:
        lines += ["secrets:", "  - key: bench:token", "    prompt: Token"]
    lines.append("infrastructure:")
    for i in range(20):
        path = f"infra/p{i:02d}"
        d = os.path.join(root, "projects", path)
        os.makedirs(d)
        with open(os.path.join(d, "Strata.yaml"), "w") as f:
            # The first project records when it started (ns since the epoch).
            up = 'date +%s%N > "$HOME/first-child"' if i == 0 else "true"
            f.write(f"up: '{up}'\ndestroy: 'true'\n")
        lines += [f"  - path: {path}", "    needs: []"]
    with open(os.path.join(root, "providers", "bench.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(root, "config/pulumi/environment"), "w") as f:
        f.write("PULUMI_STACK=bench\n")

def measure(cmd, env, cwd):
    """(wall seconds, peak RSS MiB) of one run of cmd."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {p.stdout.read().decode()[-2000:]}")
    return wall, usage.ru_maxrss / 1024

def first_child_ms(strata, env, root):
    marker = os.path.join(root, "first-child")
    if os.path.exists(marker):
        os.remove(marker)
    t0 = time.time_ns()
    measure([strata, "up", "-p", "bench", "--project", "infra/p00"], env, root)
    with open(marker) as f:
        return (int(f.read().strip()) - t0) / 1e6

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    strata = os.path.abspath(a.strata)
    base = tempfile.mkdtemp(prefix="strata-bench-store-")
    try:
        rows = {}
        for secret in (False, True):
            root = os.path.join(base, "secret" if secret else "plain")
            gen(root, secret)
            env = {"PATH": "/usr/bin:/bin", "HOME": root, "CI": "true"}
            if secret:
                env["STRATA_PASSPHRASE"] = "bench passphrase"
                env["STRATA_SECRET_BENCH_TOKEN"] = "bench-token-value"
            first = [first_child_ms(strata, env, root) for _ in range(a.runs)]
            env.pop("STRATA_SECRET_BENCH_TOKEN", None)
            r = {"first child of up (ms)": statistics.median(first)}
            for cmd in ("status", "validate"):
                runs = [measure([strata, cmd, "-p", "bench"], env, root) for _ in range(a.runs)]
                r[f"{cmd} wall (ms)"] = statistics.median(w for w, _ in runs) * 1000
                r[f"{cmd} peak memory (MiB)"] = statistics.median(m for _, m in runs)
            rows[secret] = r
        print(f"medians of {a.runs} runs; 20 command projects; passphrase store at scrypt work factor 18")
        print(f"{'':32} {'no secrets':>12} {'passphrase store':>18} {'ratio':>7}")
        for k in rows[False]:
            x, y = rows[False][k], rows[True][k]
            print(f"{k:32} {x:12.1f} {y:18.1f} {y / x if x else 0:7.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    main()
