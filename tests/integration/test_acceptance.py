"""playbooks/acceptance.yml on four simulated MI300X nodes: each node's verdicts against AMD's criteria, the class
median, the JUnit XML, the failing node failed at the end, and the report's section.

No GPU tool can run here. What runs instead, named as what it is:
- rccl-tests: the STAND-IN SIMULATOR ``sim/bench_standin.py`` installed on each node as ``all_reduce_perf`` (its
  output is rccl-tests' real format with figures from a model of the node's links); node 4 is injected slow (x0.9),
  so its in-place busbw at 8 GiB falls under AMD's 304 GB/s;
- TransferBench: a real capture (TransferBench a2a on 8 x MI350X, tests/fixtures/acceptance) saved on nodes 1-3 and
  given as ``topotune_acceptance_outputs``; node 3's copy has its average lowered to 46 GB/s (still above AMD's
  32.9 GB/s, 5.6 % under the median of the four): a warn. On node 4 the STAND-IN SIMULATOR runs as ``TransferBench``
  (a2a only, MI300X's published average, slowed x0.9 there: under AMD's 32.9 GB/s);
- RVS, and TransferBench's p2p and config tests (the stand-in prints a2a only; example.cfg is not installed): unknown
  with the reason.
"""

import json
import os
import sys
import xml.etree.ElementTree as ET

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_nodes import REPO, play  # noqa: E402
from sim_nodes import cluster as _cluster  # noqa: E402
from sim_nodes import put as _put  # noqa: E402

PREFIX = "tt-acc"
PROFILE = "mi300x-8gpu-2cpu"
NODES = ["%s-%02d-%s" % (PREFIX, i, PROFILE) for i in range(1, 5)]
A2A = os.path.join(REPO, "tests", "fixtures", "acceptance", "transferbench_a2a__mi350x-8gpu__mhilgema-ihc.txt")
STANDIN = """#!/bin/sh
# STAND-IN SIMULATOR of rccl-tests all_reduce_perf (topotune sim/bench_standin.py): not rccl-tests, no GPU runs
exec python3 /opt/topotune-standin/bench_standin.py --hosts "$(hostname -s)" --faults /etc/topotune-standin.json "$@"
"""
TRANSFERBENCH = """#!/bin/sh
# STAND-IN SIMULATOR of TransferBench (topotune sim/bench_standin.py): not TransferBench, no GPU runs
exec python3 /opt/topotune-standin/bench_standin.py transferbench "$@" --hosts "$(hostname -s)" \\
  --faults /etc/topotune-standin.json
"""


def _play(inventory, out, *args):
    return play(inventory, "topotune_report_dir=%s" % out, *args)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("acceptance")
    inventory, out = str(work / "hosts.yml"), str(work / "out")
    _cluster("up", "--prefix", PREFIX, "--profiles", ",".join([PROFILE] * len(NODES)), "--inventory", inventory)
    try:
        with open(os.path.join(REPO, "sim", "bench_standin.py")) as handle:
            standin = handle.read()
        with open(A2A) as handle:
            a2a = handle.read()
        for index, node in enumerate(NODES):
            _put(node, "/opt/topotune-standin/bench_standin.py", standin)
            _put(node, "/usr/local/bin/all_reduce_perf", STANDIN, "0755")
            slow = {node: {"slow": 0.9}} if index == 3 else {}
            if index == 3:
                _put(node, "/usr/local/bin/TransferBench", TRANSFERBENCH, "0755")
            _put(node, "/etc/topotune-standin.json", json.dumps(slow))
            if index < 3:
                _put(node, "/var/tmp/a2a.txt", a2a.replace("51.417 GB/s", "46.000 GB/s") if index == 2 else a2a)
        outputs = {node: {"transferbench.a2a": "/var/tmp/a2a.txt"} for node in NODES[:3]}
        (work / "group_vars").mkdir()
        with open(os.path.join(REPO, "inventory", "sim", "group_vars", "all.yml")) as handle:
            (work / "group_vars" / "all.yml").write_text(handle.read())
        host_vars = work / "host_vars"
        host_vars.mkdir()
        for node, value in outputs.items():
            (host_vars / ("%s.yml" % node)).write_text(json.dumps({"topotune_acceptance_outputs": value}))
        proc = _play(inventory, out)
        checked = _play(inventory, str(work / "check"), "--check")
        yield {"proc": proc, "out": out, "check": checked, "check_out": str(work / "check")}
    finally:
        _cluster("down", "--prefix", PREFIX)


def _report(run, node):
    with open(os.path.join(run["out"], "acceptance", "%s.json" % node)) as handle:
        return json.load(handle)


def _verdict(report, vid):
    return next(v for v in report["verdicts"] if v["id"] == vid)


def test_each_node_is_judged_against_the_mi300x_criteria(run):
    for node in NODES:
        report = _report(run, node)
        assert report["schema_version"] == 1 and report["generation"] == "MI300X", run["proc"].stdout[-3000:]
        rccl = _verdict(report, "rccl-tests.all_reduce_perf")
        ran = next(r for r in report["runs"] if r["id"] == "rccl-tests.all_reduce_perf")
        assert ran["cmd"] == ["/usr/local/bin/all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "8"]
        if node == NODES[3]:
            assert rccl["status"] == "fail" and rccl["margin_pct"] < -5, rccl
        else:
            assert rccl["status"] == "pass" and rccl["value"] > 304, rccl
        gst = _verdict(report, "rvs.gst_met")
        assert gst["status"] == "unknown" and gst["observed"].startswith("rvs not installed (looked for rvs on PATH")


def test_the_class_median_warns_the_node_under_its_peers(run):
    a2a = {node: _verdict(_report(run, node), "transferbench.a2a_avg") for node in NODES}
    median = (46.0 + 51.417) / 2  # of 51.417, 51.417, 46.0 and node 4's run
    assert a2a[NODES[0]]["status"] == "pass" and a2a[NODES[0]]["class_median"] == pytest.approx(median, abs=0.001)
    assert a2a[NODES[2]]["status"] == "warn" and a2a[NODES[2]]["margin_vs_median_pct"] == pytest.approx(-5.56, abs=0.01)
    assert "below the median of MI300X (4 nodes: 48.709 GB/s)" in a2a[NODES[2]]["observed"]
    # node 4: the TransferBench stand-in ran (MI300X's published 35.776 GB/s x 0.9): under AMD's 32.9 GB/s
    ran = {r["id"]: r for r in _report(run, NODES[3])["runs"]}
    assert ran["transferbench.a2a"]["cmd"] == ["/usr/local/bin/TransferBench", "a2a"]
    assert a2a[NODES[3]]["status"] == "fail" and 31.8 < a2a[NODES[3]]["value"] < 32.6, a2a[NODES[3]]
    assert ran["transferbench.p2p"]["status"] == "error"  # the stand-in prints a2a only: refused, with why
    config = _verdict(_report(run, NODES[3]), "transferbench.example_cfg_test1")
    assert config["status"] == "unknown" and "example.cfg is not there" in config["observed"]


def test_the_failing_node_fails_the_play_and_junit_names_it(run):
    proc = run["proc"]
    assert proc.returncode == 2, proc.stdout[-3000:]
    recap = proc.stdout[proc.stdout.rindex("PLAY RECAP"):]
    assert "%s : ok=" % NODES[3] in recap.replace("  ", " ") or NODES[3] in recap
    failed = next(line for line in proc.stdout.splitlines() if "acceptance: " in line and ".json)" in line)
    assert "rccl-tests.all_reduce_perf" in failed and "transferbench.a2a_avg" in failed, failed
    for node in NODES[:3]:
        assert [line for line in recap.splitlines() if line.startswith(node)][0].split("failed=")[1].startswith("0")
    root = ET.parse(os.path.join(run["out"], "acceptance", "junit.xml")).getroot()
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert sorted(suites) == NODES
    assert suites[NODES[3]].find("testcase[@name='rccl-tests.all_reduce_perf']/failure") is not None
    assert suites[NODES[0]].get("failures") == "0"
    # the run summary names the failed node with its blocking verdicts, for the scheduler to drain
    with open(os.path.join(run["out"], "run", "acceptance.json")) as handle:
        summary = json.load(handle)
    assert summary["failed_hosts"] == [NODES[3]] and sorted(summary["completed_hosts"]) == NODES[:3]
    assert "rccl-tests.all_reduce_perf" in json.dumps(summary["failures"])


def test_check_mode_runs_no_tool_but_reads_the_saved_outputs(run):
    with open(os.path.join(run["check_out"], "acceptance", "%s.json" % NODES[0])) as handle:
        report = json.load(handle)
    assert _verdict(report, "transferbench.a2a_avg")["status"] == "pass"
    rccl = next(r for r in report["runs"] if r["id"] == "rccl-tests.all_reduce_perf")
    assert rccl["status"] == "skipped" and rccl["reason"].startswith("check mode: `/usr/local/bin/all_reduce_perf")
    assert run["check"].returncode == 0, run["check"].stdout[-3000:]
