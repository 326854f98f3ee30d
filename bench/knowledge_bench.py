#!/usr/bin/env python3
# Run with the project venv after `. scripts/setup`: .venv/bin/python bench/knowledge_bench.py [--hosts 64] [--repeat 3]
"""Controller cost of the roles' knowledge lookups: time to template them for N hosts with ansible-playbook.

No node is needed: N inventory hosts with ``ansible_connection: local``, each holding the topology model of a
simulated node (``--profile``, default mi300x-8gpu-spx) as ``topotune_discovery``, and one play whose tasks are
``ansible.builtin.debug`` (an action: templated in the worker Ansible forks per task and host, as the roles'
tasks are, nothing run on a node) of the expressions the roles and playbooks template over knowledge/:

    platform_checks, drift_exporter  gpu_generations | combine(pcie_health, gpu_health)  (their module's knowledge)
    kernel_tuning                    kernel_params(lookup gpu_generations)               (kernel_tuning_cmdline)
    container_runtime                lookup container_flags .forbidden, the container_flags filter
    rocm_env                         the rocm_env_resolve filter (env_vars, env_profiles, gpu_generations)
    benchmark.yml                    gpu_generations, rccl_expectations, the cluster_advice filter (advice)
    node_topology                    a model without identity (the inventory's): identified over gpu_generations

The same play with each expression replaced by one of the same host variable without knowledge is the baseline;
the difference is what the knowledge costs. Reported: median wall time and controller CPU time (user + system of
ansible-playbook and its workers, getrusage of the children) of --repeat runs of each, interleaved, and the
difference per host.

    .venv/bin/python bench/knowledge_bench.py --hosts 64 --repeat 3 --out out/bench/knowledge.json
"""

import argparse
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "sim"))
sys.path.insert(0, os.path.join(REPO, "plugins"))

K = "lookup('topotune.instinct.knowledge', '%s')"
TOPOLOGY = "topotune_discovery.topology"
# (task, expression over knowledge): each is templated once per host, in its own task (worker process)
EXPRESSIONS = [
    ("platform_checks knowledge", "(%s | combine({'pcie_health': %s, 'gpu_health': %s})).generations | length"
     % (K % "gpu_generations", K % "pcie_health", K % "gpu_health")),
    ("drift_exporter knowledge", "(%s | combine({'pcie_health': %s, 'gpu_health': %s})) | to_json | length"
     % (K % "gpu_generations", K % "pcie_health", K % "gpu_health")),
    ("kernel_tuning cmdline", "%s | topotune.instinct.kernel_params(%s) | length" % (TOPOLOGY, K % "gpu_generations")),
    ("container_runtime forbidden", "(%s).forbidden | length" % (K % "container_flags")),
    ("container_runtime plan", "(%s | topotune.instinct.container_flags(groups=[], device_facts={}, "
                               "options={'profile': 'xgmi-training'})).groups | length" % TOPOLOGY),
    ("rocm_env resolution", "('xgmi-training' | topotune.instinct.rocm_env_resolve(topology=%s, "
                            "rocm_version='6.4.2')).rendered | length" % TOPOLOGY),
    ("benchmark expectations", "[%s, %s] | length" % (K % "gpu_generations", K % "rccl_expectations")),
    ("benchmark advice", "({} | topotune.instinct.cluster_advice(topology=%s, comm_share=0.5)).outcome" % TOPOLOGY),
    ("node_topology identity", "({} | topotune.instinct.node_topology({}, {'topology': bare_topology})).identity"
                               ".generation"),
]
BASELINE = "%s.gpus | length" % TOPOLOGY


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


def model(profile):
    """The topology model discovery gives on a simulated node of ``profile``, with its identity."""
    import sysroot as simsys  # sim/sysroot.py
    from module_utils.topology.discover import load_capture
    from module_utils.topology.identity import identify_model
    from plugin_utils.core.knowledge import generations

    with tempfile.TemporaryDirectory() as tmp:
        simsys.build(profile, tmp, force=True)
        topology = load_capture(sysroot=tmp)
    return dict(topology, identity=identify_model(topology, generations()))


def write_project(directory, hosts, topology):
    bare = {k: v for k, v in topology.items() if k != "identity"}
    inventory = {"all": {"hosts": {"h%03d" % i: None for i in range(hosts)},
                         "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                  "topotune_discovery": {"topology": topology}, "bare_topology": bare}}}
    with open(os.path.join(directory, "hosts.json"), "w", encoding="utf-8") as handle:
        json.dump(inventory, handle)
    for name, exprs in (("knowledge", [e for _n, e in EXPRESSIONS]), ("baseline", [BASELINE] * len(EXPRESSIONS))):
        tasks = [{"name": "%s %d" % (name, i), "ansible.builtin.debug": {"msg": "{{ %s }}" % expr}}
                 for i, expr in enumerate(exprs)]
        play = [{"name": name, "hosts": "all", "gather_facts": False, "tasks": tasks}]
        with open(os.path.join(directory, name + ".yml"), "w", encoding="utf-8") as handle:
            json.dump(play, handle)


def run(directory, name, forks):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(directory, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_DISPLAY_OK_HOSTS="false",
               ANSIBLE_COLLECTIONS_PATH=os.pathsep.join([os.path.join(REPO, ".cache", "collections"),
                                                         os.path.join(REPO, ".vendor", "collections")]))
    with open(env["ANSIBLE_CONFIG"], "w", encoding="utf-8") as handle:
        handle.write("[defaults]\nforks = %d\ngathering = explicit\nretry_files_enabled = false\n" % forks)
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", os.path.join(directory, "hosts.json"),
           os.path.join(directory, name + ".yml")]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=directory, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
        raise SystemExit("ansible-playbook %s failed (%d)" % (name, proc.returncode))
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--forks", type=int, default=32, help="ansible forks (the repository's ansible.cfg: 32)")
    parser.add_argument("--profile", default="mi300x-8gpu-spx")
    parser.add_argument("--label", default="", help="a name for this run in the output (e.g. before, after)")
    parser.add_argument("--out", help="also write the figures as JSON here")
    args = parser.parse_args()
    topology = model(args.profile)
    figures = {"knowledge": [], "baseline": []}
    with tempfile.TemporaryDirectory(prefix="topotune-knowledge-bench-") as directory:
        write_project(directory, args.hosts, topology)
        for repeat in range(args.repeat):
            for name in ("baseline", "knowledge"):
                wall, cpu = run(directory, name, args.forks)
                figures[name].append({"wall": wall, "cpu": cpu})
                log("%s run %d: %.2f s wall, %.2f s CPU" % (name, repeat + 1, wall, cpu))
    median = {name: {k: statistics.median(r[k] for r in runs) for k in ("wall", "cpu")} for name, runs in figures.items()}
    delta = {k: median["knowledge"][k] - median["baseline"][k] for k in ("wall", "cpu")}
    result = {
        "label": args.label, "date": datetime.date.today().isoformat(), "machine": "%s, %d CPUs, Python %s" % (
            platform.machine(), os.cpu_count() or 0, platform.python_version()),
        "hosts": args.hosts, "tasks": len(EXPRESSIONS), "forks": args.forks, "profile": args.profile,
        "runs": figures, "median": median, "knowledge_cost": delta,
        "per_host_ms": {k: 1000.0 * v / args.hosts for k, v in delta.items()},
    }
    print("%d hosts x %d knowledge tasks (%s): knowledge %.2f s wall / %.2f s CPU, baseline %.2f s / %.2f s; "
          "knowledge cost %.2f s wall, %.2f s CPU (%.1f ms CPU per host)"
          % (args.hosts, len(EXPRESSIONS), args.label or "this tree", median["knowledge"]["wall"],
             median["knowledge"]["cpu"], median["baseline"]["wall"], median["baseline"]["cpu"], delta["wall"],
             delta["cpu"], result["per_host_ms"]["cpu"]))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
