#!/usr/bin/env python3
# Run with the project venv after `. scripts/setup`: .venv/bin/python bench/drift_exporter_bench.py [--runs 20]
"""Cost and latency of the node-local drift check (role topotune.instinct.drift_exporter) on one simulated node.

One node of ``--profile`` (default ``mi300x-8gpu-cpx64``, 64 GPU partitions) from the Prometheus node image
(sim/image/build-prometheus-image.sh): playbooks/site.yml records the manifest, playbooks/drift_exporter.yml installs
the checker, then:

1. CPU time of the checker: ``--runs`` runs of /usr/local/sbin/topotune-drift-check, each measured from outside
   (``getrusage(RUSAGE_CHILDREN)`` of a parent that only runs it: user + system of the checker and its children,
   interpreter start included) and as the checker reports itself (``topotune_drift_check_cpu_seconds``); plus the
   wall time of the service started by systemd (``systemctl start``, with its nice/idle IO and sandbox set-up).
2. Series per node: the sample lines of the textfile.
3. Detection latency, the parts that can be measured: the timer's real intervals (the timer re-installed with
   ``--timer-interval``/``--timer-delay`` seconds for a minute, intervals read from the journal; they must lie in
   [interval, interval + delay + 1 s of AccuracySec]), and change -> Prometheus query answer with a 15 s scrape
   interval (the check started right after the change). The bound for the shipped settings is then computed:
   OnUnitActiveSec + RandomizedDelaySec + check wall time + scrape interval.
"""

import argparse
import importlib.util
import json
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.parse

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGE = os.environ.get("TOPOTUNE_PROMETHEUS_NODE_IMAGE", "local/topotune-node-prometheus:bookworm")
TEXTFILE = "/var/lib/prometheus/node-exporter/topotune.prom"
SHIPPED = {"interval": 120, "delay": 60}  # roles/drift_exporter/defaults/main.yml
MEASURE = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL); "
           "r = resource.getrusage(resource.RUSAGE_CHILDREN); print(r.ru_utime, r.ru_stime)")
FETCH = "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())"
PROMETHEUS_YML = """\
global:
  scrape_interval: %ds
scrape_configs:
  - job_name: node
    static_configs:
      - targets: ['127.0.0.1:9100']
    relabel_configs:
      - target_label: instance
        replacement: %s
"""


def docker_exec(node, *argv, stdin=None, check=True):
    proc = subprocess.run(["docker", "exec", "-i", node, *argv], input=stdin, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        raise SystemExit("%s failed: %s%s" % (" ".join(argv), proc.stdout, proc.stderr))
    return proc.stdout


def playbook(inventory, name, *extra):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"))
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", inventory, *extra,
                           os.path.join(ROOT, "playbooks", name)], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise SystemExit("%s failed:\n%s" % (name, proc.stdout[-3000:] + proc.stderr[-2000:]))


def metric(text, name):
    match = re.search(r"^%s (\S+)$" % name, text, re.MULTILINE)
    return float(match.group(1)) if match else None


def query(node, promql):
    url = "http://127.0.0.1:9090/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    return json.loads(docker_exec(node, "python3", "-c", FETCH, url))["data"]["result"]


def summary(values, unit=1000.0, suffix="ms"):
    values = sorted(values)
    return "min %.1f %s, median %.1f %s, max %.1f %s (n=%d)" % (
        values[0] * unit, suffix, statistics.median(values) * unit, suffix, values[-1] * unit, suffix, len(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="mi300x-8gpu-cpx64")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--timer-interval", type=int, default=10, help="timer interval for the interval measurement")
    parser.add_argument("--timer-delay", type=int, default=5, help="randomized delay for the interval measurement")
    parser.add_argument("--timer-seconds", type=int, default=75, help="how long to watch the timer")
    parser.add_argument("--scrape", type=int, default=15, help="scrape interval for the latency measurement")
    args = parser.parse_args()

    subprocess.run([os.path.join(ROOT, "sim", "image", "build-prometheus-image.sh")], check=True)
    spec = importlib.util.spec_from_file_location("topotune_sim_cluster", os.path.join(ROOT, "sim", "cluster.py"))
    cluster = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cluster)
    node = "tt-bench-drift-%d" % os.getpid()
    inventory = os.path.join(ROOT, ".cache", "bench-drift-exporter-%d.yml" % os.getpid())
    with open(inventory, "w", encoding="utf-8") as handle:
        json.dump({"all": {"hosts": {node: {}}, "vars": {
            "ansible_connection": "community.docker.docker", "ansible_python_interpreter": "/usr/bin/python3",
            "topotune_sysroot": "/sim", "topotune_report_dir": os.path.join(ROOT, ".cache", "bench-drift-out")}}}, handle)
    cluster.start_node(node, args.profile, image=IMAGE)
    try:
        playbook(inventory, "site.yml")
        playbook(inventory, "drift_exporter.yml", "-e", "drift_exporter_timer_enabled=false")
        print("profile %s, %s" % (args.profile, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
        print("load average before the runs: %s" % open("/proc/loadavg", encoding="utf-8").read().split()[:3])

        outside, inside, service = [], [], []
        for _unused in range(args.runs):
            user, system = docker_exec(node, "python3", "-c", MEASURE, "/usr/local/sbin/topotune-drift-check").split()
            outside.append(float(user) + float(system))
            inside.append(metric(docker_exec(node, "cat", TEXTFILE), "topotune_drift_check_cpu_seconds"))
            began = time.monotonic()
            docker_exec(node, "systemctl", "start", "topotune-drift-check.service")
            service.append(time.monotonic() - began)
        text = docker_exec(node, "cat", TEXTFILE)
        samples = [line for line in text.splitlines() if line and not line.startswith("#")]
        checked = metric(text, "topotune_drift_checked_items")
        check_wall = metric(text, "topotune_drift_check_duration_seconds")
        print("checker CPU time (user+sys, measured outside): %s" % summary(outside))
        print("checker CPU time (topotune_drift_check_cpu_seconds): %s" % summary(inside))
        print("service wall time (systemctl start, sandbox included): %s; the stages of the last check: %.1f ms"
              % (summary(service), check_wall * 1000))
        print("settings compared per check: %d; series per node: %d (%d families)"
              % (checked, len(samples), sum(1 for line in text.splitlines() if line.startswith("# TYPE"))))

        # the timer's real intervals with short settings (the shipped ones would take an hour to sample)
        playbook(inventory, "drift_exporter.yml", "-e", "drift_exporter_interval_seconds=%d" % args.timer_interval,
                 "-e", "drift_exporter_randomized_delay_seconds=%d" % args.timer_delay)
        since = docker_exec(node, "date", "+%Y-%m-%d %H:%M:%S").strip()
        time.sleep(args.timer_seconds)
        journal = docker_exec(node, "journalctl", "-u", "topotune-drift-check.service", "--since", since, "-o",
                              "short-unix", "--no-pager")
        starts = [float(line.split()[0]) for line in journal.splitlines() if "Starting topotune-drift-check" in line]
        gaps = [b - a for a, b in zip(starts, starts[1:])]
        if gaps:
            print("timer OnUnitActiveSec=%d RandomizedDelaySec=%d: %d intervals, %s (expected %d..%d s + check time)"
                  % (args.timer_interval, args.timer_delay, len(gaps), summary(gaps, 1.0, "s"), args.timer_interval,
                     args.timer_interval + args.timer_delay + 1))

        # change -> Prometheus, with the check started right after the change
        docker_exec(node, "sh", "-c", "cat > /etc/prometheus/prometheus.yml", stdin=PROMETHEUS_YML % (args.scrape, node))
        playbook(inventory, "drift_exporter.yml", "-e", "drift_exporter_timer_enabled=false")
        docker_exec(node, "systemctl", "stop", "topotune-drift-check.timer")
        docker_exec(node, "systemctl", "start", "prometheus-node-exporter.service", "prometheus.service")
        deadline = time.monotonic() + 120
        ready = "http://127.0.0.1:9090/-/ready"
        while subprocess.run(["docker", "exec", node, "python3", "-c", FETCH, ready], capture_output=True,
                             check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise SystemExit("Prometheus did not become ready in the node")
            time.sleep(1)
        while not query(node, "topotune_drift_check_success == 1") and time.monotonic() < deadline:
            time.sleep(1)
        latencies = []
        for value in ("1", "0") * 2:
            docker_exec(node, "sh", "-c", "echo %s > /sim/proc/sys/kernel/numa_balancing" % value)
            changed = time.monotonic()
            docker_exec(node, "systemctl", "start", "topotune-drift-check.service")
            want = "> 0" if value == "1" else "== 0"
            while not query(node, "sum(topotune_drift_items) %s" % want):
                time.sleep(0.2)
            latencies.append(time.monotonic() - changed)
        print("change -> Prometheus answer, check started at the change, scrape every %d s: %s"
              % (args.scrape, summary(latencies, 1.0, "s")))
        bound = SHIPPED["interval"] + SHIPPED["delay"] + max(service) + 60
        print("detection latency bound with the shipped timer (OnUnitActiveSec=%d, RandomizedDelaySec=%d, AccuracySec=1s)"
              " and a 60 s scrape: %d + %d + 1 + %.1f + 60 = %.0f s"
              % (SHIPPED["interval"], SHIPPED["delay"], SHIPPED["interval"], SHIPPED["delay"], max(service), bound + 1))
    finally:
        subprocess.run(["docker", "rm", "-f", node], capture_output=True, check=False)
        os.unlink(inventory)


if __name__ == "__main__":
    main()
