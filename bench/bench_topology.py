#!/usr/bin/env python3
"""Time the topology engine on the real KFD captures (median of repeats); stdlib only.

    python3 bench/bench_topology.py [--repeats N]

Prints one line per case: KFD parse of the largest capture (MI300X CPX, 65 nodes, ~4000 link files),
of an 8-GPU tree (MI210), and the full discover() on a sysroot holding the CPX tree. Goal: CPX well
under 50 ms.
"""

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
sys.path.insert(0, os.path.join(REPO, "plugins"))

from module_utils.topology.discover import discover  # noqa: E402 - path set above
from module_utils.topology.kfd import KFD_NODES, read_kfd  # noqa: E402 - path set above

KFD = os.path.join(REPO, "tests", "fixtures", "kfd")


def median_ms(func, repeats):
    func()  # warm the page cache and imports
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        samples.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(samples), min(samples), max(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args()
    cpx = os.path.join(KFD, "mi300x-8gpu-cpx")
    mi210 = os.path.join(KFD, "mi210-8gpu-2hive")
    with tempfile.TemporaryDirectory() as root:
        shutil.copytree(os.path.join(cpx, "topology", "nodes"), os.path.join(root, KFD_NODES))
        cases = [
            ("kfd mi300x-8gpu-cpx (65 nodes, 63 GPUs)", lambda: read_kfd(path=cpx).to_dict()),
            ("kfd mi210-8gpu-2hive (10 nodes, 8 GPUs)", lambda: read_kfd(path=mi210).to_dict()),
            ("discover(source=auto) sysroot with the CPX tree", lambda: discover(sysroot=root)),
        ]
        print("python %s on %s, %d cores; median of %d runs" % (
            platform.python_version(), platform.platform(terse=True), os.cpu_count() or 0, args.repeats))
        for name, func in cases:
            med, low, high = median_ms(func, args.repeats)
            print("%-50s median %7.2f ms  (min %.2f, max %.2f)" % (name, med, low, high))


if __name__ == "__main__":
    main()
