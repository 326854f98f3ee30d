#!/usr/bin/env python3
# Run with the project venv: .venv/bin/python bench/isolation_bench.py [--placements 200] [--sizes 16,64]
"""Bad-node isolation (plugins/plugin_utils/acceptance/isolation.py) on simulated clusters: runs used against the bound.

For each cluster size (16 and 64 hosts), number of bad hosts (1, 2, 3) and strategy (pairwise, bisect, auto), the
bad hosts are placed at random (seeded; ``--placements`` placements) with a fault each drawn from slow NIC (busbw x0.5),
failing NIC (the run aborts at 2 GiB) and corrupted data (#wrong from 1 GiB), and the reference hint is a random host
(bad as often as chance makes it). The failing full-cluster run is the trigger; then every run the stepper asks for
is printed by the STAND-IN SIMULATOR of rccl-tests (sim/bench_standin.py: no GPU runs; the real tool's output format,
figures from its model of the nodes' links), parsed by ``parse_perf`` and judged by ``judge_run`` against 304 GB/s
in-place busbw at 8 GiB (the sweep is -b 1G -e 8G -f 2, 8 GPUs per host). ``--rule`` skips the printing and
parsing and judges each run by the model's rule alone (a run fails exactly when it holds a bad host): same verdicts,
much faster.

Reported per case: placements where every bad host was found, placements where a good host was excluded (must be 0),
undetermined hosts, decisive runs (mean, max) against the strategy's bound for k bad hosts, placements within it,
host-runs (the sum of the hosts of every run: the cluster time isolation costs) and controller milliseconds per
isolation (stand-in printing and parsing included). Markdown to stdout and ``--out`` (default
out/bench/isolation.md), the raw figures next to it as JSON.

    .venv/bin/python bench/isolation_bench.py --placements 200 --seed 25
"""

import argparse
import datetime
import json
import os
import platform
import random
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "sim"))
sys.path.insert(0, os.path.join(REPO, "plugins"))
import bench_standin  # noqa: E402 - sim/ is not a package
from module_utils.bench.rccl import RcclParseError, parse_perf  # noqa: E402
from plugin_utils.acceptance.isolation import Isolation, crossover, judge_run, run_bound  # noqa: E402

GIB = 1 << 30
CRITERION = {"busbw_gbs": 304, "column": "in_place", "message_bytes": 8 * GIB}
KINDS = ({"slow": 0.5}, {"fail": "nic", "at": 2 * GIB}, {"wrong": True, "at": GIB})
STRATEGIES = ("pairwise", "bisect", "auto")


def _judge_standin(hosts, faults):
    text, _code = bench_standin.render(hosts, gpus_per_host=8, min_bytes=GIB, max_bytes=8 * GIB, faults=faults)
    try:
        parsed = parse_perf(text, source="stand-in")
    except RcclParseError:
        return judge_run(None, CRITERION, error=text, hosts=hosts)
    return judge_run(parsed, CRITERION, hosts=hosts)


def _judge_rule(hosts, faults):
    return ("fail", "holds a bad host") if any(h in faults for h in hosts) else ("pass", "all good")


def isolate(hosts, faults, strategy, reference, judge):
    trigger = judge(hosts, faults)
    iso = Isolation(hosts, strategy=strategy, reference=reference, trigger=trigger[1])
    host_runs = 0
    while True:
        run = iso.next_run()
        if run is None:
            return iso.result(), host_runs
        host_runs += len(run)
        iso.record(run, *judge(run, faults))


def bench_case(n, k, strategy, placements, seed, judge):
    rng = random.Random("%d|%d|%d" % (seed, n, k))     # the same placements for every strategy
    hosts = ["node%02d" % i for i in range(n)]
    figures = {"hosts": n, "bad": k, "strategy": strategy, "placements": placements, "found_all": 0,
               "wrongly_excluded": 0, "undetermined": 0, "within_bound": 0, "runs": [], "host_runs": [], "ms": [],
               "bound": run_bound(strategy, n, k), "switched": 0}
    for _placement in range(placements):
        bad = rng.sample(hosts, k)
        faults = {host: dict(rng.choice(KINDS)) for host in bad}
        reference = rng.choice(hosts)
        start = time.perf_counter()
        result, host_runs = isolate(hosts, faults, strategy, reference, judge)
        figures["ms"].append((time.perf_counter() - start) * 1000)
        figures["found_all"] += set(bad) <= set(result["bad"])
        figures["wrongly_excluded"] += bool(set(result["bad"]) - set(bad))
        figures["undetermined"] += len(result["undetermined"])
        figures["within_bound"] += result["runs_decisive"] <= figures["bound"]
        figures["switched"] += bool((result.get("auto") or {}).get("switched_at"))
        figures["runs"].append(result["runs_decisive"])
        figures["host_runs"].append(host_runs)
    return figures


def table(cases):
    lines = ["| hosts | bad | strategy | placements | all bad found | good excluded | undetermined | runs mean | "
             "runs max | bound | within bound | host-runs mean | ms / isolation |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        lines.append("| %d | %d | %s | %d | %d | %d | %d | %.2f | %d | %d | %d | %.1f | %.1f |" % (
            c["hosts"], c["bad"], c["strategy"], c["placements"], c["found_all"], c["wrongly_excluded"],
            c["undetermined"], statistics.mean(c["runs"]), max(c["runs"]), c["bound"], c["within_bound"],
            statistics.mean(c["host_runs"]), statistics.median(c["ms"])))
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16,64", help="cluster sizes (default 16,64)")
    parser.add_argument("--bad", default="1,2,3", help="numbers of bad hosts (default 1,2,3)")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--placements", type=int, default=200, help="random placements per case (default 200)")
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--rule", action="store_true", help="judge by the model's rule, without the stand-in's text")
    parser.add_argument("--out", default=os.path.join(REPO, "out", "bench", "isolation.md"))
    args = parser.parse_args()
    judge = _judge_rule if args.rule else _judge_standin
    started = time.time()
    cases = []
    for n in (int(x) for x in args.sizes.split(",")):
        for k in (int(x) for x in args.bad.split(",")):
            for strategy in args.strategies.split(","):
                case = bench_case(n, k, strategy, args.placements, args.seed, judge)
                cases.append(case)
                print(table([case]).splitlines()[-1], file=sys.stderr, flush=True)
    head = ("isolation_bench: %s, seed %d, %d placements per case, runs %s; python %s on %s; %s; %.0f s; k* = %s" % (
        datetime.date.today().isoformat(), args.seed, args.placements,
        "judged by the model's rule" if args.rule else "printed by the stand-in simulator, parsed and judged",
        platform.python_version(), platform.machine(), platform.platform(terse=True), time.time() - started,
        ", ".join("%d for %d hosts" % (crossover(n), n) for n in sorted({c["hosts"] for c in cases}))))
    text = head + "\n\n" + table(cases) + "\n"
    print(text)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        handle.write(text)
    with open(os.path.splitext(args.out)[0] + ".json", "w", encoding="utf-8") as handle:
        json.dump({"head": head, "cases": cases}, handle, indent=1)
    bad_cases = [c for c in cases if c["wrongly_excluded"] or c["found_all"] != c["placements"]
                 or c["within_bound"] != c["placements"]]
    return 1 if bad_cases else 0


if __name__ == "__main__":
    sys.exit(main())
