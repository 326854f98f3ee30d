"""The source article's comparison on two simulated MI300X nodes (playbooks/benchmark.yml,
``topotune_benchmark_compare``): a baseline recorded before tuning, the same run after ``site.yml`` compared with it,
and the run under each binding plan, one rank per GPU launched by Debian's real Open MPI ``mpirun`` (the mpirun
template of knowledge/acceptance.yml) and bound by the real topotune-bind wrapper and numactl.

No GPU exists here. rccl-tests is the STAND-IN SIMULATOR ``sim/bench_standin.py`` installed on each node as
``all_reduce_perf``: each of the 8 ranks mpirun starts records the CPUs the kernel lets it run on, rank 0 prints the run
in rccl-tests' format with figures from its model: x0.8 bandwidth when a rank's CPUs are half off its GPU's NUMA node
(the article's 187 -> 112 ms, illustrative), x1.5 per-message latency under a CPU governor other than ``performance``.
Node 1 (``mi300x-8gpu-2cpu-2numa``) has GPUs 0-3 with CPU 0 on NUMA node 0, GPUs 4-7 with CPU 1 on node 1; node 2
(``mi300x-8gpu-2cpu``) one NUMA node with both CPUs.
"""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_nodes import REPO, play  # noqa: E402
from sim_nodes import cluster as _cluster  # noqa: E402
from sim_nodes import put as _put  # noqa: E402

PREFIX = "tt-cmp"
PROFILES = ["mi300x-8gpu-2cpu-2numa", "mi300x-8gpu-2cpu"]
NODES = ["%s-%02d-%s" % (PREFIX, i, p) for i, p in enumerate(PROFILES, 1)]
TWO_NUMA, ONE_NUMA = NODES
STANDIN = """#!/bin/sh
# STAND-IN SIMULATOR of rccl-tests all_reduce_perf (topotune sim/bench_standin.py): not rccl-tests, no GPU runs
exec python3 /opt/topotune-standin/bench_standin.py "$@"
"""
# Open MPI refuses to run as root without these (the simulated nodes are reached as root)
SETTINGS = {"topotune_rccl_tests_path": "/usr/local/bin/all_reduce_perf",
            "topotune_rccl_args": ["-b", "8", "-e", "8G", "-f", "2", "-g", "8"],
            "topotune_rccl_env": {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}}
BENCHMARK = ("playbooks/topology.yml", "playbooks/benchmark.yml")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    work = tmp_path_factory.mktemp("compare")
    inventory, out = str(work / "hosts.yml"), str(work / "out")
    _cluster("up", "--prefix", PREFIX, "--profiles", ",".join(PROFILES), "--inventory", inventory)
    try:
        with open(os.path.join(REPO, "sim", "bench_standin.py")) as handle:
            standin = handle.read()
        for node in NODES:
            _put(node, "/opt/topotune-standin/bench_standin.py", standin)
            _put(node, "/usr/local/bin/all_reduce_perf", STANDIN, "0755")
        (work / "group_vars").mkdir()
        with open(os.path.join(REPO, "inventory", "sim", "group_vars", "all.yml")) as handle:
            (work / "group_vars" / "all.yml").write_text(handle.read() + "\n" + "".join(
                "%s: %s\n" % (k, json.dumps(v)) for k, v in SETTINGS.items()))
        report = "topotune_report_dir=%s" % out
        done = {}
        done["before"] = play(inventory, report, "-e", "topotune_benchmark_compare=baseline", playbooks=BENCHMARK)
        done["baseline_before"] = _read(out, "benchmark/baseline")
        done["site"] = play(inventory, report, playbooks=("playbooks/site.yml",))
        done["after"] = play(inventory, report, "-e", "topotune_benchmark_compare=baseline", playbooks=BENCHMARK)
        done["after_docs"] = _read(out, "benchmark")
        done["binding"] = play(inventory, report, "-e", "topotune_benchmark_compare=binding",
                               playbooks=BENCHMARK + ("playbooks/report.yml",))
        done["binding_docs"] = _read(out, "benchmark")
        done["baseline_after"] = _read(out, "benchmark/baseline")
        with open(os.path.join(out, "report.html"), encoding="utf-8") as handle:
            done["html"] = handle.read()
        yield done
    finally:
        _cluster("down", "--prefix", PREFIX)


def _read(out, section):
    docs = {}
    for node in NODES:
        path = os.path.join(out, section, "%s.json" % node)
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                docs[node] = json.load(handle)
    return docs


def _ok(proc):
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]


def test_the_first_run_is_recorded_as_each_nodes_baseline(runs):
    _ok(runs["before"])
    base = runs["baseline_before"]
    assert set(base) == set(NODES)
    for node in NODES:
        assert base[node]["schema_version"] == 1 and base[node]["host"] == node
        assert base[node]["figures"]["size"] == 8 << 30
        assert base[node]["cmd"] == ["/usr/local/bin/all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8"]
    # one process driving 8 GPUs on CPUs 0 and 1: on the two-node-NUMA node half its CPUs are off each GPU's node
    assert base[TWO_NUMA]["figures"]["busbw"] == pytest.approx(base[ONE_NUMA]["figures"]["busbw"] * 0.8, rel=0.01)


def test_tuning_shows_against_the_baseline_as_faster_small_messages(runs):
    _ok(runs["site"])
    _ok(runs["after"])
    for node in NODES:
        baseline = runs["after_docs"][node]["baseline"]
        # the governor was schedutil before site.yml and performance after: latency, not bandwidth, moved
        assert baseline["status"] == "improved", baseline
        assert abs(baseline["delta"]["busbw_pct"]) < 1 and baseline["delta"]["small_time_pct"] < -25, baseline
        assert "small-message time" in baseline["reason"] and baseline["stored"] is True
        assert "record" not in baseline


def test_each_binding_plan_runs_under_open_mpi_and_numa_wins_across_numa_nodes(runs):
    _ok(runs["binding"])
    two = runs["binding_docs"][TWO_NUMA]["binding"]
    assert [run["plan"] for run in two["runs"]] == ["none", "numa", "l3"]
    for run in two["runs"]:
        assert run["cmd"][0] == "mpirun" and run["cmd"][-10:-8] == [
            "/usr/local/bin/topotune-bind", "/usr/local/bin/all_reduce_perf"], run["cmd"]
        assert run["cmd"][-8:] == ["-b", "8", "-e", "8G", "-f", "2", "-g", "1"] and run["rc"] == 0, run
    comparison = two["comparison"]
    assert (comparison["reference"], comparison["best"], comparison["deployed"]) == ("none", "numa", "numa")
    assert comparison["deltas"]["numa"]["verdict"] == "better"
    assert comparison["deltas"]["numa"]["busbw_pct"] == pytest.approx(25.0, abs=0.5)
    assert comparison["deltas"]["l3"]["busbw_pct"] == pytest.approx(25.0, abs=0.5)
    # the deployed plan's run is the one judged against AMD's MI300X criterion (8 ranks, in-place busbw at 8 GiB)
    doc = runs["binding_docs"][TWO_NUMA]
    assert doc["result"]["n_ranks"] == 8 and doc["comparison"]["status"] == "ok"
    assert doc["cmd"] == two["runs"][1]["cmd"]
    one = runs["binding_docs"][ONE_NUMA]["binding"]["comparison"]
    assert {d["verdict"] for d in one["deltas"].values()} == {"same"}, one


def test_the_report_shows_the_plans_and_the_baseline(runs):
    html = runs["html"]
    assert "Binding plans" in html and "numa: busbw at 8 GiB +2" in html
    assert "Against the stored baseline" not in html.split(TWO_NUMA)[0]  # the last run compared plans only
    # the baseline stored after tuning is the one the next run compares with
    after = runs["baseline_after"]
    assert after[ONE_NUMA]["recorded_at"] > runs["baseline_before"][ONE_NUMA]["recorded_at"]
