#!/usr/bin/env python3
# Run with the project venv: .venv/bin/python bench/cost_model.py [--nodes 64,1000,10000] [--full-s 1.35] ...
"""Cost of watching a fleet for drift, from measured inputs: push from one controller, AWX job slices, node-local.

Every input is a command-line option whose default is a figure measured with bench/cluster_bench.py on this
repository's 2-core machine (docs/performance.md gives date and conditions), or an assumption named as one.
The model (docs/performance.md, "Cost model to 10,000 nodes"):

  push     one controller runs the play over all N nodes. Measured: controller-bound, linear in N at
           forks >= 32 (8 -> 64 nodes), so a run costs N x (seconds per node at the measured core count).
           A controller with more cores is assumed to scale linearly up to --cores (an optimistic bound:
           Ansible's strategy loop is one process).
  awx      job slicing: S execution nodes each run N/S nodes like the push controller, in parallel, plus a
           fixed per-job overhead (execution-environment start, project and inventory sync; an assumption),
           plus the report step over the union (one job, linear in N).
  local    a systemd timer on each node runs the stdlib check and writes textfile metrics: no controller
           time. Fleet CPU = N x check CPU / interval; Prometheus ingests N x series / scrape interval samples
           per second; disk = samples/s x retention x bytes per sample (1-2 bytes, Prometheus storage docs);
           detection latency at worst = interval + randomized delay + the check + scrape interval (an
           alert adds one rule evaluation interval).
"""

import argparse
import math

DAY = 86400.0


def _ints(text):
    return [int(x) for x in text.split(",") if x]


def _floats(text):
    return [float(x) for x in text.split(",") if x]


def push(n, per_node_s, measured_cores, cores):
    """Wall seconds of one push run over n nodes with a controller of ``cores`` cores."""
    return n * per_node_s * measured_cores / cores


def awx(n, per_node_s, slices, job_overhead_s, report_per_node_s):
    """Wall seconds of a sliced job: the slowest slice, its fixed overhead, then the report step over the union."""
    return math.ceil(n / slices) * per_node_s + job_overhead_s + n * report_per_node_s


def local(n, check_cpu_s, interval_s, delay_s, scrape_s, eval_s, series, bytes_per_sample, retention_days):
    """Node-local check + Prometheus: fleet CPU, ingestion, disk, worst-case detection latency."""
    return {
        "fleet_cpu_cores": n * check_cpu_s / interval_s,
        "node_cpu_s_per_day": check_cpu_s * DAY / interval_s,
        "samples_per_s": n * series / scrape_s,
        "disk_gb": n * series / scrape_s * retention_days * DAY * bytes_per_sample / 1e9,
        # change -> metric in Prometheus: the next check (interval + delay, plus its run), then the next scrape
        "latency_s": interval_s + delay_s + check_cpu_s + scrape_s,
        "alert_latency_s": interval_s + delay_s + check_cpu_s + scrape_s + eval_s,
    }


def hms(seconds):
    if seconds < 90:
        return "%.0f s" % seconds
    if seconds < 5400:
        return "%.1f min" % (seconds / 60)
    return "%.1f h" % (seconds / 3600)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog="\n".join(__doc__.splitlines()[2:]),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", default="64,1000,10000", help="fleet sizes (default %(default)s)")
    # measured: 64 nodes, 2 cores, forks 32 (docs/performance.md, 2026-11-30/12-01): ping 8.6 s, fast 9.7 s
    p.add_argument("--ping-s", type=float, default=8.6 / 64, help="ping floor, controller s per node (%(default).3f)")
    p.add_argument("--fast-s", type=float, default=9.7 / 64, help="fast drift, controller s per node (%(default).3f)")
    p.add_argument("--full-s", type=float, default=128.0 / 64,
                   help="full drift, controller s per node (default: before issue 17, %(default).2f)")
    p.add_argument("--measured-cores", type=int, default=2, help="cores of the measuring controller")
    p.add_argument("--cores", default="2,16", help="controller (and execution node) core counts to show")
    p.add_argument("--slices", default="4,16,64", help="AWX job slices = execution nodes in parallel")
    p.add_argument("--job-overhead-s", type=float, default=60.0,
                   help="ASSUMPTION: per sliced job, execution environment start and project/inventory sync")
    p.add_argument("--report-per-node-s", type=float, default=0.005,
                   help="report step over the union, s per node (report_files write of a drift document)")
    # node-local: the timer defaults of the node-local check (role drift_exporter, issue 17)
    p.add_argument("--check-cpu-s", type=float, default=0.068,
                   help="CPU s of one node-local check on the 64-partition profile (bench/drift_exporter_bench.py "
                        "median, docs/performance.md section 8: %(default)s)")
    p.add_argument("--interval-s", type=float, default=120.0, help="timer OnUnitActiveSec= (%(default)s)")
    p.add_argument("--delay-s", type=float, default=60.0, help="timer RandomizedDelaySec= (%(default)s)")
    p.add_argument("--scrape-s", type=float, default=60.0, help="Prometheus scrape interval (%(default)s)")
    p.add_argument("--eval-s", type=float, default=60.0, help="Prometheus rule evaluation interval (%(default)s)")
    p.add_argument("--series", type=float, default=66.0,
                   help="topotune series per node written by the node-local check (docs/fleet-metrics.md: %(default)s)")
    p.add_argument("--bytes-per-sample", type=float, default=2.0, help="Prometheus storage docs: 1-2 (%(default)s)")
    p.add_argument("--retention-days", type=float, default=15.0, help="Prometheus default retention (%(default)s)")
    args = p.parse_args(argv)

    nodes, cores, slices = _ints(args.nodes), _ints(args.cores), _ints(args.slices)
    print("Inputs: ping %.3f s, fast %.3f s, full %.3f s of controller time per node on %d cores; AWX job overhead "
          "%.0f s (assumption); node-local check %.3f CPU s every %.0f s (+ up to %.0f s delay), %g series per node, "
          "scrape %.0f s" % (args.ping_s, args.fast_s, args.full_s, args.measured_cores, args.job_overhead_s,
                             args.check_cpu_s, args.interval_s, args.delay_s, args.series, args.scrape_s))
    print()
    print("Push from one controller (wall time of one run)")
    print()
    print("| nodes | cores | ping | fast drift | full drift |")
    print("|---|---|---|---|---|")
    for n in nodes:
        for c in cores:
            walls = [hms(push(n, s, args.measured_cores, c)) for s in (args.ping_s, args.fast_s, args.full_s)]
            print("| %d | %d | %s | %s | %s |" % (n, c, *walls))
    print()
    print("AWX/AAP job slicing (each execution node as the measured controller; wall time of one sliced job)")
    print()
    print("| nodes | slices | fast drift | full drift | controller CPU, all slices (core-hours, full) |")
    print("|---|---|---|---|---|")
    for n in nodes:
        for s in slices:
            if s > n:
                continue
            fast = awx(n, args.fast_s, s, args.job_overhead_s, args.report_per_node_s)
            full = awx(n, args.full_s, s, args.job_overhead_s, args.report_per_node_s)
            core_hours = n * args.full_s * args.measured_cores / 3600
            print("| %d | %d | %s | %s | %.2f |" % (n, s, hms(fast), hms(full), core_hours))
    print()
    print("Node-local timer + Prometheus (controller time: 0)")
    print()
    print("| nodes | fleet CPU (cores busy) | CPU per node per day | samples/s ingested | disk for retention | "
          "change to metric, worst | change to alert, worst |")
    print("|---|---|---|---|---|---|---|")
    for n in nodes:
        r = local(n, args.check_cpu_s, args.interval_s, args.delay_s, args.scrape_s, args.eval_s, args.series,
                  args.bytes_per_sample, args.retention_days)
        print("| %d | %.2f | %s | %.0f | %.1f GB (%g d) | %s | %s |" % (
            n, r["fleet_cpu_cores"], hms(r["node_cpu_s_per_day"]), r["samples_per_s"], r["disk_gb"],
            args.retention_days, hms(r["latency_s"]), hms(r["alert_latency_s"])))


if __name__ == "__main__":
    main()
