#!/usr/bin/env python3
"""strata against the real Pulumi, side by side in one run, on the local-pulumi profile
(six real Pulumi YAML projects with command resources, file backend, no cloud).

For `up` and for `preview`, it measures:
  strata            the whole environment through strata (first run: stacks created;
                    then the steady state, median of --runs)
  sequential        the same projects one after another with the real CLI, in
                    dependency order (what MARA's runner does), with the config files
                    strata generated, median of --runs
  critical path     the longest chain of the graph (`strata show`), each project weighed
                    with its own sequential `pulumi` time
and prints wall / critical path (goal <= 1.10), Pulumi processes per project (a wrapper
on PATH counts them; goal 1 in the steady state), and strata's own share of the CPU of
the run (its `cpu_ms` over the CPU of its whole process tree).

Usage: scripts/bench-real.py --strata target/release/strata --pulumi-dir DIR [--runs 5]
"""
import argparse, json, os, resource, shutil, statistics, subprocess, tempfile, time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, env, cwd, check=True):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if check and p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return wall, cpu, p


def finished(p):
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            e = json.loads(line)
            if e.get("event") == "run_finished":
                return e
    raise SystemExit(f"no run_finished event:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")


def calls(log):
    try:
        with open(log) as f:
            n = sum(1 for _ in f)
        os.remove(log)
        return n
    except FileNotFoundError:
        return 0


def critical_path(graph, durations):
    finish = {}
    def fin(p):
        if p not in finish:
            finish[p] = max((fin(d) for d in graph[p]), default=0.0) + durations.get(p, 0.0)
        return finish[p]
    return max(fin(p) for p in graph)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--pulumi-dir", required=True)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    strata = os.path.abspath(a.strata)
    real = os.path.abspath(a.pulumi_dir)
    root = tempfile.mkdtemp(prefix="strata-bench-real-")
    try:
        shutil.copytree(os.path.join(REPO, "projects", "local-pulumi"), os.path.join(root, "projects", "local-pulumi"))
        os.makedirs(os.path.join(root, "providers"))
        shutil.copy(os.path.join(REPO, "providers", "local-pulumi.yaml"), os.path.join(root, "providers"))
        os.makedirs(os.path.join(root, "config", "pulumi"))
        bindir = os.path.join(root, "bin")
        os.makedirs(bindir)
        log = os.path.join(root, "pulumi-calls.log")
        with open(os.path.join(bindir, "pulumi"), "w") as f:
            f.write(f"#!/bin/sh\necho \"$*\" >>'{log}'\nexec '{real}/pulumi' \"$@\"\n")
        os.chmod(os.path.join(bindir, "pulumi"), 0o755)
        for b in ("pulumi-language-yaml", "pulumi-resource-command"):
            os.symlink(os.path.join(real, b), os.path.join(bindir, b))
        home = os.path.join(root, "home")
        os.makedirs(home)
        env = {
            "PATH": f"{bindir}:/usr/bin:/bin", "HOME": home,
            "PULUMI_HOME": os.path.join(home, ".pulumi"),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_CONFIG_PASSPHRASE": "bench-passphrase",

            "STRATA_SECRET_LP_REGISTRY_PASSWORD": "bench-registry-password",
            "KUBECONFIG": os.path.join(home, "kubeconfig"),
        }
        # The store opened with an age identity (the README's recommendation for teams and
        # CI): a passphrase would add scrypt's ~0.6 s of CPU to every run.
        key = os.path.join(root, "key.txt")
        if shutil.which("age-keygen"):
            subprocess.run(["age-keygen", "-o", key], check=True, capture_output=True)
            env["STRATA_AGE_IDENTITY"] = key
        else:
            env["STRATA_PASSPHRASE"] = "bench-store-passphrase"
            print("age-keygen not found: the store is opened with a passphrase (scrypt)")
        base = [strata, "--root", root, "-p", "local-pulumi", "-s", "dev", "--output", "json"]

        _, _, show = run(base + ["show", "--format", "json"], env, root)
        plan = json.loads(show.stdout)
        nodes = {p["path"]: p for p in plan["projects"]}
        graph = {p: [d for d in n["needs"]] for p, n in nodes.items()}
        pulumi_projects = [p for p, n in nodes.items() if n["kind"] == "pulumi"]
        order = [p["path"] for p in sorted(plan["projects"], key=lambda p: p["wave"]) if p["kind"] == "pulumi"]
        n = len(pulumi_projects)
        print(f"local-pulumi: {n} Pulumi projects, {max(p['wave'] for p in plan['projects'])} waves; "
              f"pulumi {subprocess.run([real + '/pulumi', 'version'], capture_output=True, text=True).stdout.strip()}")

        wall, cpu, p = run(base + ["up"], env, root)
        fin = finished(p)
        print(f"first strata up (stacks created): wall {wall*1000:.0f} ms, "
              f"{calls(log)/n:.2f} Pulumi processes per project, strata CPU {fin['cpu_ms']} ms "
              f"of {cpu*1000:.0f} ms ({fin['cpu_ms']/(cpu*1000)*100:.1f}%)")

        def sequential(op):
            """Each project with its own `pulumi <op>`, one after another, in order."""
            times = {}
            t0 = time.perf_counter()
            for path in order:
                cfg = os.path.join(root, ".strata", "dev", "config", path.replace("/", "_2f") + ".yaml")
                args = [os.path.join(bindir, "pulumi"), op, "--stack", "dev", "--non-interactive",
                        "--cwd", os.path.join(root, "projects", path), "--config-file", cfg]
                if op == "up":
                    args += ["--yes", "--skip-preview"]
                penv = dict(env, PULUMI_BACKEND_URL=f"file://{root}/.strata/backend",
                            STRATA_ROOT=root, STRATA_STACK="dev")
                w, _, _ = run(args, penv, root)
                times[path] = w
            return time.perf_counter() - t0, times

        for op in ("up", "preview"):
            walls, cpus, shares, procs, pulumi_cpu = [], [], [], [], []
            for _ in range(a.runs):
                calls(log)
                wall, cpu, p = run(base + [op], env, root)
                fin = finished(p)
                walls.append(wall)
                cpus.append(cpu)
                shares.append(fin["cpu_ms"] / (cpu * 1000))
                k = calls(log)
                procs.append(k / n)
                pulumi_cpu.append((cpu - fin["cpu_ms"] / 1000) / max(k, 1))
            seq_walls, per_project = [], {p: [] for p in order}
            for _ in range(a.runs):
                w, times = sequential(op)
                seq_walls.append(w)
                for k, v in times.items():
                    per_project[k].append(v)
            calls(log)
            durations = {k: statistics.median(v) for k, v in per_project.items()}
            cp = critical_path(graph, durations)
            w, sw = statistics.median(walls), statistics.median(seq_walls)
            print(f"\nsteady {op} (median of {a.runs}):")
            print(f"  strata {op}: wall {w*1000:.0f} ms; sequential pulumi {op} (MARA's way): {sw*1000:.0f} ms; "
                  f"critical path {cp*1000:.0f} ms")
            cores = os.cpu_count() or 1
            floor = statistics.median(cpus) / cores
            print(f"  wall / critical path = {w/cp:.3f}   (goal <= 1.10)")
            print(f"  CPU of the whole run {statistics.median(cpus)*1000:.0f} ms on {cores} cores: "
                  f"no schedule beats {floor*1000:.0f} ms; wall / max(critical path, that) = {w/max(cp, floor):.3f}")
            print(f"  CPU per Pulumi process (CLI, language host, provider) = {statistics.median(pulumi_cpu)*1000:.0f} ms")
            print(f"  sequential / strata  = {sw/w:.2f}x")
            print(f"  Pulumi processes per project = {statistics.median(procs):.2f}   (goal 1)")
            print(f"  strata's own share of the run's CPU = {statistics.median(shares)*100:.1f}%")
            slowest = max(durations, key=durations.get)
            print(f"  slowest project: {slowest} {durations[slowest]*1000:.0f} ms")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
