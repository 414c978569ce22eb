#!/usr/bin/env python3
"""A large estate against a fake cloud that throttles: adaptive pools vs fixed limits.

Generates 1,000 command projects (--projects) in 4 pools, a layered DAG (10 layers; each
project needs one project of the layer before it). Each pool's projects call one API of
a fake cloud (scripts/bench-estate-cloud.sh): a call holds for --hold seconds, and an
API that has started its rate's worth of calls within the last second answers AWS's
"Throttling: Rate exceeded" instead, and the project fails that try. The APIs' rates
are --rates calls per second.

It runs `strata up -j 64` on a fresh copy of the estate:

  fixed ×m   every pool fixed (`adaptive: false`) at m × (rate × hold), rounded, at
             least 1: the sweep a person would do by hand to find the best fixed limits
  adaptive   every pool declared at --declared (far above what the API takes) and
             left to adapt

Both retry a throttled project (throttle: attempts 50, delay --delay). For each run it
reports the wall time, the failed projects (there must be none), the throttled tries
and the pool changes; then the best fixed setting and the adaptive one again --runs
times each, interleaved, and the ratio of their medians (the goal: within 1.2×).

With --trace, the adaptive runs export their trace to an OTLP/HTTP receiver
(bench-estate-otlp.py, which decodes the payloads with the official protobuf
definitions) and the run checks it is complete: one root span, one span per project.

Usage: scripts/bench-estate.py [--strata target/release/strata] [--projects 1000]
         [--rates 8,12,16,24] [--hold 0.5] [--declared 32] [--delay 0.5s]
         [--multipliers 0.5,0.75,1,1.25,1.5,2] [--runs 3] [--trace]
"""
import argparse, json, os, random, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
CLOUD = os.path.join(HERE, "bench-estate-cloud.sh")


def gen(root, n, rates, hold, limits, adaptive, delay):
    """Writes the estate into `root`: profile `estate`, n command projects."""
    pools = [f"api-{chr(ord('a') + k)}" for k in range(len(rates))]
    os.makedirs(os.path.join(root, "providers"))
    os.makedirs(os.path.join(root, "cloud"))
    rng = random.Random(27)
    layers = 10
    per = max(1, n // layers)
    lines = [
        "description: bench estate",
        "infra_type: bench",
        "pools:",
    ]
    for p, limit in zip(pools, limits):
        lines.append(f"  {p}: {{limit: {limit}, adaptive: {'true' if adaptive else 'false'}}}")
    lines += [f"throttle: {{attempts: 50, delay: {delay}}}", "infrastructure:"]
    for i in range(n):
        layer = i // per
        path = f"p{i:04d}"
        pool = pools[i % len(pools)]
        if layer == 0:
            needs = "[]"
        else:
            lo = (layer - 1) * per
            needs = f"[p{rng.randrange(lo, lo + per):04d}]"
        lines.append(f"  - path: {path}\n    needs: {needs}\n    pool: {pool}")
        d = os.path.join(root, "projects", path)
        os.makedirs(d)
        rate = rates[i % len(rates)]
        with open(os.path.join(d, "Strata.yaml"), "w") as f:
            f.write(
                f"up: sh {CLOUD} {os.path.join(root, 'cloud')} {pool} {rate} {hold}\n"
                "destroy: 'true'\n"
            )
    with open(os.path.join(root, "providers", "estate.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    os.makedirs(os.path.join(root, "config", "pulumi"), exist_ok=True)
    with open(os.path.join(root, "config", "pulumi", "environment"), "w") as f:
        f.write("PULUMI_STACK=bench\n")


def run(strata, root, env):
    """One `up`: wall seconds and what its events say."""
    t0 = time.monotonic()
    p = subprocess.run(
        [strata, "up", "-p", "estate", "-s", "bench", "-j", "64", "--output", "json"],
        cwd=root, env=env, capture_output=True, text=True,
    )
    wall = time.monotonic() - t0
    ev = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    fin = [e for e in ev if e["event"] == "project_finished"]
    return {
        "code": p.returncode,
        "wall": wall,
        "failed": sum(1 for e in fin if e["status"] != "succeeded"),
        "finished": len(fin),
        "throttled": sum(1 for e in ev if e["event"] == "project_retry"),
        "changes": [e for e in ev if e["event"] == "pool_limit"],
        "stderr": p.stderr[-2000:],
    }


def one(a, base, limits, adaptive, env, label):
    root = tempfile.mkdtemp(prefix="estate-", dir=base)
    gen(root, a.projects, a.rates, a.hold, limits, adaptive, a.delay)
    r = run(a.strata, root, env)
    shutil.rmtree(root, ignore_errors=True)
    last = {}
    for c in r["changes"]:
        last[c["pool"]] = c["limit"]
    print(
        f"  {label:<14} wall {r['wall']:6.1f} s · exit {r['code']} · failed {r['failed']}"
        f"/{r['finished']} · throttled tries {r['throttled']:4} · pool changes "
        f"{len(r['changes']):3}{' · last limits ' + str(last) if last else ''}",
        flush=True,
    )
    if r["code"] != 0 or r["failed"]:
        print(r["stderr"], file=sys.stderr)
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--projects", type=int, default=1000)
    ap.add_argument("--rates", default="8,12,16,24")
    ap.add_argument("--hold", type=float, default=0.5)
    ap.add_argument("--declared", type=int, default=32)
    ap.add_argument("--delay", default="0.5s")
    ap.add_argument("--multipliers", default="0.5,0.75,1,1.25,1.5,2")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--trace", action="store_true")
    a = ap.parse_args()
    a.strata = os.path.abspath(a.strata)
    a.rates = [int(x) for x in a.rates.split(",")]
    base = tempfile.mkdtemp(prefix="strata-bench-estate-")
    env = {"PATH": "/usr/bin:/bin", "HOME": base, "CI": "true"}
    fixed = lambda m: [max(1, round(m * r * a.hold)) for r in a.rates]
    print(f"{a.projects} projects in {len(a.rates)} pools; API rates {a.rates}/s, "
          f"calls hold {a.hold}s; throttled tries wait {a.delay}, doubling")
    print("sweep (one run each):")
    sweep = {}
    for m in [float(x) for x in a.multipliers.split(",")]:
        r = one(a, base, fixed(m), False, env, f"fixed ×{m:g} {fixed(m)}")
        if r["code"] == 0 and not r["failed"]:
            sweep[m] = r["wall"]
    if not sweep:
        raise SystemExit("no fixed setting finished without failures")
    best = min(sweep, key=sweep.get)
    print(f"best fixed: ×{best:g} {fixed(best)}")
    trace_env = dict(env)
    receiver = None
    if a.trace:
        spans_file = os.path.join(base, "spans.json")
        # The official protobuf definitions, from PyPI, beside the benchmark's files.
        proto = os.path.join(base, "otelproto")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--root-user-action=ignore", "--target", proto,
                        "opentelemetry-proto"], check=True)
        receiver = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "bench-estate-otlp.py"), spans_file],
            stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=proto),
        )
        port = receiver.stdout.readline().strip()
        trace_env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
    walls = {"fixed": [], "adaptive": []}
    print(f"best fixed and adaptive (declared {a.declared}), {a.runs} runs each, interleaved:")
    for k in range(a.runs):
        walls["fixed"].append(one(a, base, fixed(best), False, env, f"fixed ×{best:g}")["wall"])
        r = one(a, base, [a.declared] * len(a.rates), True, trace_env, "adaptive")
        if r["code"] != 0 or r["failed"]:
            raise SystemExit("the adaptive run had failures")
        walls["adaptive"].append(r["wall"])
    fm, am = statistics.median(walls["fixed"]), statistics.median(walls["adaptive"])
    print(f"median wall: best fixed {fm:.1f} s · adaptive {am:.1f} s · ratio {am / fm:.2f} "
          f"(goal ≤ 1.2)")
    if receiver:
        receiver.terminate()
        receiver.wait()
        traces = json.load(open(spans_file))
        for t in traces:
            print(f"trace {t['trace_id'][:8]}…: {t['roots']} root span(s), "
                  f"{t['children']} project spans, {t['orphans']} orphans")
        complete = [t for t in traces if t["roots"] == 1 and t["children"] == a.projects
                    and t["orphans"] == 0]
        print(f"complete traces: {len(complete)} of {len(traces)} (expected {a.runs})")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
