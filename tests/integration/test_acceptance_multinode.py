"""playbooks/acceptance.yml's second play on four simulated MI300X nodes: the multi-node all_reduce from one launcher,
judged against AMD's cluster criterion (304 GB/s in-place at 8 GiB), the bad-node isolation when it fails,
collective/acceptance.json, and the excluded node failed at the end.

No GPU, no MPI and no network between the simulated nodes (``--network none``), so no real mpirun can span them.
What runs instead, named as what it is: the STAND-IN SIMULATOR ``sim/bench_standin.py`` (not rccl-tests; it prints
all_reduce_perf's real output format for the host list it is given, with figures from a model of the nodes' links),
installed on the launcher (node 1) only as ``/usr/local/bin/all_reduce_perf`` and called through the ``command``
template (``all_reduce_perf --hosts {hosts} -g {ppn} ...``); its fault file makes node 3 slow (x0.9), so every run
with node 3 falls under 304 GB/s (~278 GB/s) and every run without it passes (~309 GB/s).
"""

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_nodes import REPO, play  # noqa: E402
from sim_nodes import cluster as _cluster  # noqa: E402
from sim_nodes import put as _put  # noqa: E402

PREFIX = "tt-mn"
PROFILE = "mi300x-8gpu-2cpu"
NODES = ["%s-%02d-%s" % (PREFIX, i, PROFILE) for i in range(1, 5)]
BAD = NODES[2]
STANDIN = """#!/bin/sh
# STAND-IN SIMULATOR of rccl-tests all_reduce_perf (topotune sim/bench_standin.py): not rccl-tests, no GPU runs
S=/opt/topotune-standin/bench_standin.py
case " $* " in
  *" --hosts "*|*" --hostfile "*) exec python3 "$S" --faults /etc/topotune-standin.json "$@" ;;
esac
exec python3 "$S" --hosts "$(hostname -s)" --faults /etc/topotune-standin.json "$@"
"""
COMMAND = ["all_reduce_perf", "--hosts", "{hosts}", "-g", "{ppn}", "-b", "8", "-e", "8G", "-f", "2"]


def _play(inventory, out, *args):
    extra = {"topotune_report_dir": out, "topotune_acceptance_collective": True,
             "topotune_collective_template": "command", "topotune_collective_command": COMMAND}
    return play(inventory, json.dumps(extra), *args)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    work = tmp_path_factory.mktemp("multinode")
    inventory, out = str(work / "hosts.yml"), str(work / "out")
    _cluster("up", "--prefix", PREFIX, "--profiles", ",".join([PROFILE] * len(NODES)), "--inventory", inventory)
    try:
        with open(os.path.join(REPO, "sim", "bench_standin.py")) as handle:
            standin = handle.read()
        launcher = NODES[0]
        _put(launcher, "/opt/topotune-standin/bench_standin.py", standin)
        _put(launcher, "/usr/local/bin/all_reduce_perf", STANDIN, "0755")
        _put(launcher, "/etc/topotune-standin.json", json.dumps({BAD: {"slow": 0.9}}))
        (work / "group_vars").mkdir()
        with open(os.path.join(REPO, "inventory", "sim", "group_vars", "all.yml")) as handle:
            (work / "group_vars" / "all.yml").write_text(handle.read())
        proc = _play(inventory, out)
        checked = _play(inventory, str(work / "check"), "--check")
        yield {"proc": proc, "out": out, "check": checked, "check_out": str(work / "check")}
    finally:
        _cluster("down", "--prefix", PREFIX)


def _collective(out):
    with open(os.path.join(out, "collective", "acceptance.json")) as handle:
        return json.load(handle)


def test_the_full_run_fails_and_isolation_excludes_node_3_with_its_evidence(run):
    record = _collective(run["out"])
    assert record["schema_version"] == 1 and record["status"] == "fail", run["proc"].stdout[-3000:]
    assert record["launcher"] == NODES[0] and record["template"] == "command" and record["hosts"] == NODES
    assert record["criterion"]["busbw_gbs"] == 304 and record["criterion"]["generation"] == "MI300X"
    full = record["full_run"]
    assert full["argv"] == ["all_reduce_perf", "--hosts", ",".join(NODES), "-g", "8", "-b", "8", "-e", "8G", "-f", "2"]
    assert full["verdict"] == "fail" and "< 304 GB/s (4 hosts, 32 ranks)" in full["evidence"]
    assert record["bad"] == [BAD] and sorted(record["good"]) == sorted(set(NODES) - {BAD})
    assert record["undetermined"] == []
    [excluded] = record["excluded"]
    assert excluded["host"] == BAD and "< 304 GB/s" in excluded["evidence"]
    assert excluded["why"].startswith("run %d [" % excluded["run"]) and "passed in run" in excluded["why"]
    iso = record["isolation"]
    assert iso["complete"] and iso["within_bound"] and iso["runs_used"] <= iso["bound"]
    for item in iso["runs"]:
        assert item["argv"][:2] == ["all_reduce_perf", "--hosts"]
        assert (item["verdict"] == "fail") == (BAD in item["hosts"]), item
    # at least one two-node run holds node 3 with a good partner, and fails
    assert any(len(i["hosts"]) == 2 and BAD in i["hosts"] and i["verdict"] == "fail" for i in iso["runs"])


def test_the_play_shows_the_evidence_and_fails_node_3_only(run):
    proc = run["proc"]
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "excluded %s: in-place busbw" % BAD in proc.stdout
    assert "acceptance: excluded by the multi-node collective" in proc.stdout
    recap = proc.stdout[proc.stdout.rindex("PLAY RECAP"):]
    for node in NODES:
        failed = [line for line in recap.splitlines() if line.startswith(node)][0].split("failed=")[1]
        assert failed.startswith("1" if node == BAD else "0"), recap
    # the run summary names it with the evidence, for the scheduler to drain
    with open(os.path.join(run["out"], "run", "acceptance.json")) as handle:
        summary = json.load(handle)
    assert summary["failed_hosts"] == [BAD]
    assert "excluded by the multi-node collective" in json.dumps(summary["failures"])


def test_check_mode_runs_no_collective(run):
    assert run["check"].returncode == 0, run["check"].stdout[-3000:]
    record = _collective(run["check_out"])
    assert record["status"] == "skipped" and record["check_mode"] and record["excluded"] == []
    assert record["full_run"]["evidence"].startswith("check mode: nothing run (would run: all_reduce_perf --hosts")
