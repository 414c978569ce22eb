#!/usr/bin/env python3
"""strata against the real Pulumi, side by side in one run, on the shipped profiles made
of real Pulumi YAML projects, no cloud, on a file backend and/or (--backend s3) an S3
bucket of a SeaweedFS server started here (scripts/s3-test-server.sh, its binary from
scripts/install-s3.sh or STRATA_S3_BIN_DIR):
  local-pulumi   six projects with command resources
  local-kube     a throwaway control plane (etcd, kube-apiserver, kube-controller-manager)
                 brought up by its cluster project, and four projects deploying into it
                 through Pulumi's Kubernetes provider (needs --kube-dir)

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

Usage: scripts/bench-real.py --strata target/release/strata --pulumi-dir DIR
         [--kube-dir DIR] [--profile local-pulumi --profile local-kube]
         [--backend file --backend s3] [--runs 5]
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


# What each profile needs beyond the projects: plugins, files, environment.
PROFILES = {
    "local-pulumi": {
        "plugins": ("pulumi-language-yaml", "pulumi-resource-command"),
        "files": (),
        "env": {"STRATA_SECRET_LP_REGISTRY_PASSWORD": "bench-registry-password"},
    },
    "local-kube": {
        "plugins": ("pulumi-language-yaml", "pulumi-resource-command", "pulumi-resource-kubernetes"),
        "files": ("scripts/kube-test-cluster.sh",),
        "env": {"STRATA_SECRET_LK_APP_API_KEY": "bench-api-key"},
    },
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--strata", default="target/release/strata")
    ap.add_argument("--pulumi-dir", required=True)
    ap.add_argument("--kube-dir", help="the control plane's binaries (scripts/install-kube.sh), for local-kube")
    ap.add_argument("--profile", action="append", choices=sorted(PROFILES),
                    help="repeatable; default: every profile")
    ap.add_argument("--backend", action="append", choices=("file", "s3"),
                    help="repeatable; default: file")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    server = tempfile.mkdtemp(prefix="strata-bench-s3-") if "s3" in (a.backend or ()) else None
    try:
        s3 = start_s3(server) if server else None
        for profile in a.profile or sorted(PROFILES, reverse=True):
            if profile == "local-kube" and not a.kube_dir:
                raise SystemExit("local-kube needs --kube-dir (scripts/install-kube.sh prints it)")
            for backend in a.backend or ["file"]:
                print(f"\n=== {profile} on {backend} ===")
                bench(profile, a, backend_env(backend, s3, profile))
    finally:
        if server:
            subprocess.run(["bash", os.path.join(REPO, "scripts", "s3-test-server.sh"), "stop", server])
            shutil.rmtree(server, ignore_errors=True)


def start_s3(server):
    """The S3 server's s3.env (its endpoint, bucket and credentials)."""
    subprocess.run(["bash", os.path.join(REPO, "scripts", "s3-test-server.sh"), "start", server,
                    "--watch", str(os.getpid())], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(server, "s3.env")) as f:
        return dict(l.rstrip("\n").split("=", 1) for l in f if "=" in l)


def backend_env(backend, s3, profile):
    """What Pulumi (and strata) get to use `backend`: nothing for the file backend (strata's
    default, .strata/backend), the bucket under a prefix of the profile's own for S3."""
    if backend == "file":
        return {}
    v = {k: x.strip("'") for k, x in s3.items()}
    url = v["PULUMI_BACKEND_URL"].replace(f"s3://{v['BUCKET']}?", f"s3://{v['BUCKET']}/{profile}?", 1)
    return {"PULUMI_BACKEND_URL": url, "AWS_ACCESS_KEY_ID": v["AWS_ACCESS_KEY_ID"],
            "AWS_SECRET_ACCESS_KEY": v["AWS_SECRET_ACCESS_KEY"], "AWS_REGION": v["AWS_REGION"]}


def bench(profile, a, backend):
    spec = PROFILES[profile]
    strata = os.path.abspath(a.strata)
    real = os.path.abspath(a.pulumi_dir)
    root = tempfile.mkdtemp(prefix="strata-bench-real-")
    base = None
    env = None
    try:
        shutil.copytree(os.path.join(REPO, "projects", profile), os.path.join(root, "projects", profile))
        os.makedirs(os.path.join(root, "providers"))
        shutil.copy(os.path.join(REPO, "providers", profile + ".yaml"), os.path.join(root, "providers"))
        for f in spec["files"]:
            os.makedirs(os.path.dirname(os.path.join(root, f)), exist_ok=True)
            shutil.copy(os.path.join(REPO, f), os.path.join(root, f))
        os.makedirs(os.path.join(root, "config", "pulumi"))
        bindir = os.path.join(root, "bin")
        os.makedirs(bindir)
        log = os.path.join(root, "pulumi-calls.log")
        with open(os.path.join(bindir, "pulumi"), "w") as f:
            f.write(f"#!/bin/sh\necho \"$*\" >>'{log}'\nexec '{real}/pulumi' \"$@\"\n")
        os.chmod(os.path.join(bindir, "pulumi"), 0o755)
        for b in spec["plugins"]:
            os.symlink(os.path.join(real, b), os.path.join(bindir, b))
        home = os.path.join(root, "home")
        os.makedirs(home)
        env = {
            "PATH": f"{bindir}:/usr/bin:/bin", "HOME": home,
            "PULUMI_HOME": os.path.join(home, ".pulumi"),
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            "PULUMI_CONFIG_PASSPHRASE": "bench-passphrase",
            "KUBECONFIG": os.path.join(home, "kubeconfig"),
            **spec["env"],
            **backend,
        }
        if a.kube_dir:
            env["STRATA_KUBE_BIN_DIR"] = os.path.abspath(a.kube_dir)
        # The store opened with an age identity (the README's recommendation for teams and
        # CI): a passphrase would add scrypt's ~0.6 s of CPU to every run.
        key = os.path.join(root, "key.txt")
        if shutil.which("age-keygen"):
            subprocess.run(["age-keygen", "-o", key], check=True, capture_output=True)
            env["STRATA_AGE_IDENTITY"] = key
        else:
            env["STRATA_PASSPHRASE"] = "bench-store-passphrase"
            print("age-keygen not found: the store is opened with a passphrase (scrypt)")
        base = [strata, "--root", root, "-p", profile, "-s", "dev", "--output", "json"]

        _, _, show = run(base + ["show", "--format", "json"], env, root)
        plan = json.loads(show.stdout)
        nodes = {p["path"]: p for p in plan["projects"]}
        graph = {p: [d for d in n["needs"]] for p, n in nodes.items()}
        pulumi_projects = [p for p, n in nodes.items() if n["kind"] == "pulumi"]
        order = [p["path"] for p in sorted(plan["projects"], key=lambda p: p["wave"]) if p["kind"] == "pulumi"]
        n = len(pulumi_projects)
        print(f"{profile}: {n} Pulumi projects, {max(p['wave'] for p in plan['projects'])} waves; "
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
                url = backend.get("PULUMI_BACKEND_URL", f"file://{root}/.strata/backend")
                penv = dict(env, PULUMI_BACKEND_URL=url, STRATA_ROOT=root, STRATA_STACK="dev")
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
        # What the profile brought up outside the workspace (local-kube's control plane)
        # goes with its stacks.
        if base is not None and (backend or os.path.isdir(os.path.join(root, ".strata", "backend"))):
            subprocess.run(base + ["destroy", "--yes"], env=env, cwd=root, capture_output=True)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
