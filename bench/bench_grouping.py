#!/usr/bin/env python3
"""Grouping time for 8, 16 and 64 GPUs (goal: under 100 ms each). Prints the median of N runs per case.

    .venv/bin/python bench/bench_grouping.py [--runs 15]

Cases: MI250X 8 GCDs (documented link counts), 16 GPUs with random link counts (the exact search's worst
case: no ties to prune), 16 all-to-all partitions (MI300X DPX-like), 64 CPX partitions (8 x MI300X-like).
"""

import argparse
import os
import random
import statistics
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "plugins"))
from module_utils.launch.grouping import group_gpus  # noqa: E402 - needs the path set up above

MI250X_LINKS = {(0, 1): 4, (2, 3): 4, (4, 5): 4, (6, 7): 4, (0, 6): 2, (2, 4): 2,
                (0, 2): 1, (1, 3): 1, (1, 5): 1, (3, 7): 1, (4, 6): 1, (5, 7): 1}


def model(n, numa, physical, link):
    gpus = [{"index": i, "numa_node": numa(i), "physical_index": physical(i), "hive_id": "h"} for i in range(n)]
    return {"gpus": gpus, "links": [dict(link(a, b), a=a, b=b) for a in range(n) for b in range(a + 1, n)]}


def cases():
    rng = random.Random(7)
    yield "8 MI250X GCDs", model(8, lambda i: (3, 3, 1, 1, 0, 0, 2, 2)[i], lambda i: i // 2, lambda a, b: {
        "type": "xgmi", "hops": 1 if (a, b) in MI250X_LINKS else 2, "weight": 15,
        "xgmi_links": MI250X_LINKS.get((a, b), 0)})
    yield "16 random links", model(16, lambda i: i // 4, lambda i: i, lambda a, b: {
        "type": "xgmi", "hops": rng.choice([1, 2]), "weight": 15, "xgmi_links": rng.randint(0, 4)})
    yield "16 DPX partitions", model(16, lambda i: i // 8, lambda i: i // 2, lambda a, b: {
        "type": "xgmi", "hops": 1, "weight": 13 if a // 2 == b // 2 else 41,
        "bandwidth_mbps": {"min": 0, "max": 819200} if a // 2 == b // 2 else None})
    yield "64 CPX partitions", model(64, lambda i: i // 32, lambda i: i // 8, lambda a, b: {
        "type": "xgmi", "hops": 1, "weight": 13 if a // 8 == b // 8 else 41,
        "bandwidth_mbps": {"min": 0, "max": 819200} if a // 8 == b // 8 else None})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    print("python %s; median of %d runs" % (sys.version.split()[0], args.runs))
    print("%-20s %5s %10s %10s  %s" % ("case", "size", "median ms", "max ms", "method"))
    for name, topo in cases():
        n = len(topo["gpus"])
        for size in (2, 4, 8, 16):
            if size >= n or n % size:
                continue
            times = []
            for _ in range(args.runs):
                start = time.perf_counter()
                result = group_gpus(topo, size)
                times.append((time.perf_counter() - start) * 1000)
            print("%-20s %5d %10.2f %10.2f  %s" % (name, size, statistics.median(times), max(times), result["method"]))


if __name__ == "__main__":
    main()
