#!/usr/bin/env python3
# Run with the project venv after `. scripts/setup`: .venv/bin/python bench/cluster_bench.py ...
"""Measure what topotune costs on simulated nodes: ping floor, fast/full drift, site.yml, naive baseline.

For each N in --nodes, starts N simulated nodes (profiles cycled from a mixed list) under the prefix
tt-bench with a private inventory, brings them up once with playbooks/site.yml, then times in one run,
interleaved and repeated, the no-change runs:

    ping   ansible -m ping (the floor of touching each host once)
    fast   playbooks/drift.yml (fast mode: one manifest check per node)
    full   playbooks/drift.yml -e topotune_drift_mode=full (roles in check mode)
    site   playbooks/site.yml
    naive  bench/naive/naive.yml (--naive: the obvious way: per-CPU loop, one task per setting, rocm-smi)

and reports the median wall time with tasks and module invocations per host (bench/task_counter.py).
Variants (--variants) repeat chosen runs with another configuration: nopipe (pipelining off), factcache
(jsonfile fact cache between playbooks), alt (edited copies of the playbooks in --alt-playbooks), mitogen
(Mitogen's mitogen_linear strategy over the plain docker connection; needs --mitogen-path).
--scale starts one node per profile of cpu16, cpu256, mi300x-8gpu-spx, mi300x-8gpu-cpx64 (synthetic) and runs each profile
alone (--limit) to compare costs: tasks must not grow with CPUs or partitions.

    .venv/bin/python bench/cluster_bench.py --nodes 1,8,32 --repeat 3 --out out/bench/cluster.json
    .venv/bin/python bench/cluster_bench.py --nodes 8 --runs site --naive --repeat 3
    .venv/bin/python bench/cluster_bench.py --scale --runs fast,full --repeat 3
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench")
# container name prefix: TOPOTUNE_BENCH_PREFIX lets two worktrees benchmark side by side without sharing nodes
PREFIX = os.environ.get("TOPOTUNE_BENCH_PREFIX", "tt-bench")
MIX = ["mi250x-8gcd", "mi300x-8gpu-spx", "mi210-8gpu-2hive", "mi308x-cpx"]
SCALE = ["cpu16", "cpu256", "mi300x-8gpu-spx", "mi300x-8gpu-cpx64"]
SCALE_PAIRS = [("cpu256", "cpu16"), ("mi300x-8gpu-cpx64", "mi300x-8gpu-spx")]
# a real capture printed by the fake rocm-smi the naive baseline calls (8 GPUs, MI308X)
SHOWTOPO = os.path.join(REPO, "tests", "fixtures", "smi", "rocm-smi_showtopo__mi308x-8gpu__ms-swift-docs.txt")
RECAP = re.compile(r"^(\S+)\s*:\s*ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def run(cmd, env=None, check=True):
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=REPO)
    if check and proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit("failed (%d): %s" % (proc.returncode, " ".join(cmd)))
    return proc


def foreign_load():
    """Other Ansible work on this 2-core machine (molecule scenarios, CI): it would distort every figure."""
    proc = subprocess.run(["pgrep", "-f", "molecule"], capture_output=True, text=True)
    return [pid for pid in proc.stdout.split() if int(pid) != os.getpid()]


def wait_quiet(limit_s):
    """Wait (up to limit_s) until no foreign load runs; return the seconds waited."""
    start = time.monotonic()
    while limit_s > 0 and foreign_load() and time.monotonic() - start < limit_s:
        time.sleep(5)
    waited = round(time.monotonic() - start, 1)
    if waited >= 5:
        log("waited %.0f s for other Ansible work (molecule) to finish%s" % (
            waited, "; still running, measuring anyway (sample marked contended)" if foreign_load() else ""))
    return waited


class Cluster:
    """N simulated nodes under our own prefix and inventory; group_vars as inventory/sim has them."""

    def __init__(self, profiles, workdir):
        self.profiles = profiles
        self.workdir = workdir
        self.inventory = os.path.join(workdir, "inventory", "hosts.yml")
        self.report_dir = os.path.join(workdir, "out")
        self.hosts = {}

    def up(self):
        os.makedirs(os.path.join(os.path.dirname(self.inventory), "group_vars"), exist_ok=True)
        with open(os.path.join(REPO, "inventory", "sim", "group_vars", "all.yml"), encoding="utf-8") as src:
            group_vars = src.read().replace('"{{ playbook_dir }}/../out"', json.dumps(self.report_dir))
        with open(os.path.join(os.path.dirname(self.inventory), "group_vars", "all.yml"), "w", encoding="utf-8") as dst:
            dst.write(group_vars)
        start = time.monotonic()
        run([sys.executable, "sim/cluster.py", "up", "--prefix", PREFIX, "--inventory", self.inventory,
             "--profiles", ",".join(self.profiles)])
        with open(self.inventory, encoding="utf-8") as handle:
            text = handle.read()
        data = json.loads(text.split("\n", 1)[1])
        # the same nodes over the plain docker connection, for Mitogen (it does not drive community.docker.docker);
        # a group_vars value, not -e, so that tasks delegated to localhost keep their local connection
        mito = os.path.join(self.workdir, "inventory-docker")
        os.makedirs(os.path.join(mito, "group_vars"), exist_ok=True)
        with open(os.path.join(mito, "hosts.yml"), "w", encoding="utf-8") as handle:
            handle.write(text)
        with open(os.path.join(mito, "group_vars", "all.yml"), "w", encoding="utf-8") as handle:
            handle.write(group_vars.replace("ansible_connection: community.docker.docker", "ansible_connection: docker"))
        self.inventory_docker = os.path.join(mito, "hosts.yml")
        self.hosts = {h: v["topotune_sim_profile"] for h, v in data["all"]["children"]["gpu_nodes"]["hosts"].items()}
        log("%d node(s) up in %.0f s" % (len(self.hosts), time.monotonic() - start))

    def down(self):
        run([sys.executable, "sim/cluster.py", "down", "--prefix", PREFIX], check=False)

    def install_fake_rocm_smi(self):
        """The naive baseline asks rocm-smi for the topology: give each node one that prints a real capture."""
        script = os.path.join(self.workdir, "rocm-smi")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write("#!/bin/sh\n# fake rocm-smi for bench/naive: prints a real --showtopo capture\n"
                         "cat /usr/local/share/rocm-smi-showtopo.txt\n")
        os.chmod(script, 0o755)
        for host in self.hosts:
            run(["docker", "cp", SHOWTOPO, host + ":/usr/local/share/rocm-smi-showtopo.txt"])
            run(["docker", "cp", script, host + ":/usr/local/bin/rocm-smi"])


class Runner:
    def __init__(self, cluster, args):
        self.cluster = cluster
        self.args = args
        self.cbdir = os.path.join(cluster.workdir, "callbacks")
        os.makedirs(self.cbdir, exist_ok=True)
        link = os.path.join(self.cbdir, "task_counter.py")
        if not os.path.exists(link):
            os.symlink(os.path.join(BENCH, "task_counter.py"), link)
        self.capture = os.path.join(cluster.workdir, "drift-capture.json")

    def env(self, variant):
        env = dict(os.environ)
        env["ANSIBLE_CALLBACK_PLUGINS"] = self.cbdir
        # as the repo's ansible.cfg has them (preload: topotune's plugins and knowledge loaded before workers fork)
        env["ANSIBLE_CALLBACKS_ENABLED"] = "ansible.builtin.profile_tasks,topotune.instinct.preload,task_counter"
        env["TOPOTUNE_TASK_COUNTER_OUT"] = os.path.join(self.cluster.workdir, "counter.json")
        env["ANSIBLE_FORCE_COLOR"] = "0"
        if variant == "nopipe":
            env["ANSIBLE_PIPELINING"] = "False"
        if variant == "factcache":
            # facts kept between playbooks in a jsonfile cache (topotune itself sets none: the topology is a
            # registered result, kernel_tuning reads its bootloader tool without setup)
            env["ANSIBLE_CACHE_PLUGIN"] = "ansible.builtin.jsonfile"
            env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] = os.path.join(self.cluster.workdir, "facts")
        if variant == "mitogen":
            env["ANSIBLE_STRATEGY_PLUGINS"] = os.path.join(self.args.mitogen_path, "ansible_mitogen", "plugins", "strategy")
            env["ANSIBLE_STRATEGY"] = "mitogen_linear"
        return env

    def command(self, kind, variant, limit):
        inv = ["-i", self.cluster.inventory_docker if variant == "mitogen" else self.cluster.inventory]
        extra = []
        lim = ["--limit", ",".join(limit)] if limit else []
        if kind == "ping":
            return ["ansible", "all", *inv, "-m", "ansible.builtin.ping", "-o", *extra, *lim]
        book = {"fast": "playbooks/drift.yml", "full": "playbooks/drift.yml", "site": "playbooks/site.yml",
                "bringup": "playbooks/site.yml", "naive": "bench/naive/naive.yml"}[kind]
        if variant == "alt":  # a candidate change, measured before it is shipped: DIR holds a copy of playbooks/
            book = os.path.join(self.args.alt_playbooks, os.path.basename(book))
        # one report directory per (run, variant), as when the same run repeats on a fleet: fast and full drift
        # would otherwise rewrite each other's drift/<host>.json (its `mode` differs) on every interleaved run
        out = os.path.join(self.cluster.workdir, "out-%s-%s" % (kind, variant))
        cmd = ["ansible-playbook", *inv, book, *extra, *lim, "-e", "topotune_report_dir=" + out]
        if kind == "full":
            cmd += ["-e", "topotune_drift_mode=full"]
        return cmd

    def once(self, kind, variant="default", limit=None):
        waited = wait_quiet(self.args.quiet_wait)
        busy_before = bool(foreign_load())
        env = self.env(variant)
        if kind == "full":
            env["ANSIBLE_CALLBACKS_ENABLED"] += ",topotune.instinct.drift_capture"
        counter = env["TOPOTUNE_TASK_COUNTER_OUT"]
        if os.path.exists(counter):
            os.remove(counter)
        start = time.monotonic()
        proc = run(self.command(kind, variant, limit), env=env, check=False)
        wall = time.monotonic() - start
        hosts = limit or list(self.cluster.hosts)
        row = {"kind": kind, "variant": variant, "wall_s": round(wall, 2), "rc": proc.returncode,
               "waited_for_quiet_s": waited, "contended": busy_before or bool(foreign_load())}
        if kind == "ping":
            ok = proc.stdout.count("SUCCESS")
            row.update(ok_hosts=ok, tasks_per_host=1.0, modules_per_host=1.0, changed=0)
        else:
            recap = RECAP.findall(proc.stdout)
            row["changed"] = sum(int(r[2]) for r in recap if r[0] in hosts)
            row["failed"] = sum(int(r[3]) + int(r[4]) for r in recap)
            if os.path.exists(counter):
                with open(counter, encoding="utf-8") as handle:
                    per_host = {h: v for h, v in json.load(handle)["hosts"].items() if h in hosts}
                row["per_host"] = per_host
                for key, name in (("tasks", "tasks_per_host"), ("modules", "modules_per_host"),
                                  ("modules_remote", "remote_modules_per_host"), ("skipped", "skipped_per_host")):
                    vals = [v[key] for v in per_host.values()]
                    row[name] = round(statistics.mean(vals), 1) if vals else None
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr)[-1500:]
            row["error_tail"] = tail
            log("%s/%s rc=%d: %s" % (kind, variant, proc.returncode, tail[-400:]))
        log("%-6s %-8s %6.1f s  tasks/host %s  modules/host %s  changed %s" % (
            kind, variant, wall, row.get("tasks_per_host"), row.get("modules_per_host"), row.get("changed")))
        return row


def summarize(samples):
    """Median wall time and counts over the repeats of one (kind, variant)."""
    walls = [s["wall_s"] for s in samples]
    first = samples[-1]
    return {
        "kind": first["kind"], "variant": first["variant"], "repeats": len(samples),
        "median_s": round(statistics.median(walls), 2), "min_s": min(walls), "max_s": max(walls),
        "tasks_per_host": first.get("tasks_per_host"), "modules_per_host": first.get("modules_per_host"),
        "remote_modules_per_host": first.get("remote_modules_per_host"),
        "changed": max(s.get("changed", 0) for s in samples), "rc": max(s["rc"] for s in samples),
        "contended": sum(1 for s in samples if s.get("contended")),
    }


def repeats_of(args, kind, variant):
    """--repeat, or a lower count for costly runs: --repeat-of naive=1,full:mitogen=2 (kind or kind:variant)."""
    table = dict(item.split("=") for item in args.repeat_of.split(",") if item)
    return int(table.get("%s:%s" % (kind, variant), table.get(kind, args.repeat)))


def measure(runner, plan, args, limit=None):
    """plan: list of (kind, variant); repeats are interleaved so slow drifts of the machine hit all alike."""
    samples = {key: [] for key in plan}
    for rep in range(args.repeat):
        log("repeat %d/%d" % (rep + 1, args.repeat))
        for kind, variant in plan:
            if rep < repeats_of(args, kind, variant):
                samples[(kind, variant)].append(runner.once(kind, variant, limit))
    return [dict(summarize(samples[key]), samples=samples[key]) for key in plan if samples[key]]


def plan_of(args):
    kinds = [k for k in args.runs.split(",") if k]
    if args.naive and "naive" not in kinds:
        kinds.append("naive")
    plan = [(k, "default") for k in kinds]
    for variant in [v for v in args.variants.split(",") if v]:
        plan += [(k, variant) for k in kinds if k in args.variant_runs.split(",")]
    return plan


def bench_nodes(args, n, workdir):
    profiles = [MIX[i % len(MIX)] for i in range(n)]
    cluster = Cluster(profiles, workdir)
    cluster.up()
    try:
        runner = Runner(cluster, args)
        if args.naive:
            cluster.install_fake_rocm_smi()
        bring = runner.once("bringup")
        results = measure(runner, plan_of(args), args)
        return {"nodes": n, "profiles": profiles, "bringup_s": bring["wall_s"], "bringup": bring, "results": results}
    finally:
        if not args.keep:
            cluster.down()


def bench_scale(args, workdir):
    per = args.scale_nodes
    chosen = [p for p in args.scale_profiles.split(",") if p]
    profiles = [p for p in chosen for _ in range(per)]
    cluster = Cluster(profiles, workdir)
    cluster.up()
    try:
        runner = Runner(cluster, args)
        bring = runner.once("bringup")
        out = {"nodes_per_profile": per, "bringup_s": bring["wall_s"], "profiles": {}}
        for profile in chosen:
            hosts = [h for h, p in cluster.hosts.items() if p == profile]
            log("profile %s (%s)" % (profile, ", ".join(hosts)))
            out["profiles"][profile] = measure(runner, plan_of(args), args, limit=hosts)
        out["ratios"] = []
        for big, small in SCALE_PAIRS:
            if big not in out["profiles"] or small not in out["profiles"]:
                continue
            for a, b in zip(out["profiles"][big], out["profiles"][small]):
                out["ratios"].append({"pair": "%s/%s" % (big, small), "kind": a["kind"], "variant": a["variant"],
                                      "time_ratio": round(a["median_s"] / b["median_s"], 2),
                                      "tasks": [a["tasks_per_host"], b["tasks_per_host"]],
                                      "modules": [a["modules_per_host"], b["modules_per_host"]]})
        return out
    finally:
        if not args.keep:
            cluster.down()


def table(report):
    lines = []
    for block in report.get("node_runs", []):
        n = block["nodes"]
        ping = next((r["median_s"] for r in block["results"] if r["kind"] == "ping" and r["variant"] == "default"), None)
        lines.append("N=%d (%s); first bring-up %.1f s" % (n, ",".join(sorted(set(block["profiles"]))), block["bringup_s"]))
        lines.append("  %-6s %-8s %4s %9s %7s %7s %8s %8s %7s" % (
            "run", "variant", "rep", "median s", "min", "max", "tasks/h", "mods/h", "x ping"))
        for r in block["results"]:
            lines.append("  %-6s %-8s %4d %9.2f %7.2f %7.2f %8s %8s %7s" % (
                r["kind"], r["variant"], r["repeats"], r["median_s"], r["min_s"], r["max_s"], r["tasks_per_host"],
                r["modules_per_host"], "%.1f" % (r["median_s"] / ping) if ping else "-"))
        by = {(r["kind"], r["variant"]): r["median_s"] for r in block["results"]}
        for base in ("site", "fast"):
            if ("naive", "default") in by and (base, "default") in by:
                lines.append("  naive / %s = %.1f" % (base, by[("naive", "default")] / by[(base, "default")]))
    scale = report.get("scale")
    if scale:
        lines.append("scale (%d node(s) per profile, each alone with --limit)" % scale["nodes_per_profile"])
        for profile, results in scale["profiles"].items():
            for r in results:
                lines.append("  %-16s %-6s %-8s median %6.2f s  tasks/h %s  mods/h %s" % (
                    profile, r["kind"], r["variant"], r["median_s"], r["tasks_per_host"], r["modules_per_host"]))
        for r in scale["ratios"]:
            lines.append("  %-32s %-6s %-8s time ratio %.2f  tasks %s  modules %s" % (
                r["pair"], r["kind"], r["variant"], r["time_ratio"], r["tasks"], r["modules"]))
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.splitlines()[2:]))
    parser.add_argument("--nodes", default="1,8,32", help="comma-separated node counts (default %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each measurement; medians (default %(default)s)")
    parser.add_argument("--repeat-of", default="", help="fewer repeats for costly runs: naive=1,site:mitogen=2")
    parser.add_argument("--runs", default="ping,fast,full,site", help="which runs (default %(default)s)")
    parser.add_argument("--naive", action="store_true", help="also run the naive baseline bench/naive/naive.yml")
    parser.add_argument("--variants", default="", help="comma-separated: nopipe, factcache, mitogen, alt")
    parser.add_argument("--alt-playbooks", default="", help="with --variants alt: a directory holding edited copies "
                        "of the playbooks, measured against playbooks/")
    parser.add_argument("--variant-runs", default="ping,fast,full,site", help="runs repeated under each variant")
    parser.add_argument("--mitogen-path", default=os.environ.get("TOPOTUNE_MITOGEN_PATH", ""),
                        help="directory holding ansible_mitogen (pip install --target DIR mitogen==0.3.54)")
    parser.add_argument("--quiet-wait", type=int, default=900, help="seconds to wait before each run while other "
                        "Ansible work (molecule) runs on the machine (default %(default)s; 0: do not wait)")
    parser.add_argument("--scale", action="store_true", help="profile pairs instead of --nodes")
    parser.add_argument("--scale-profiles", default=",".join(SCALE), help="profiles with --scale (default %(default)s)")
    parser.add_argument("--scale-nodes", type=int, default=1, help="nodes per profile with --scale")
    parser.add_argument("--out", default=os.path.join(REPO, "out", "bench", "cluster.json"), help="JSON results")
    parser.add_argument("--keep", action="store_true", help="leave the nodes running (remove: sim/cluster.py down "
                        "--prefix %s)" % PREFIX)
    args = parser.parse_args(argv)
    if "mitogen" in args.variants and not os.path.isdir(os.path.join(args.mitogen_path, "ansible_mitogen")):
        parser.error("--variants mitogen needs --mitogen-path DIR with ansible_mitogen in it")
    if not shutil.which("ansible-playbook"):
        parser.error("ansible-playbook not on PATH: run `. scripts/setup` first")
    ansible_version = run(["ansible", "--version"]).stdout.splitlines()[0]
    report = {"date": datetime.date.today().isoformat(), "machine": {
        "cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(terse=True),
        "ansible": ansible_version}, "args": vars(args)}
    workdir = tempfile.mkdtemp(prefix="tt-bench-")
    try:
        if args.scale:
            report["scale"] = bench_scale(args, workdir)
        else:
            report["node_runs"] = [bench_nodes(args, int(n), workdir) for n in args.nodes.split(",") if n]
    finally:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1)
        log("results in %s" % args.out)
    print(table(report))


if __name__ == "__main__":
    main()
