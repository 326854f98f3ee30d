"""topotune-healthcheck as Slurm's own HealthCheckProgram: the drill matrix {administrator drain, other tool's drain,
topotune drain, no drain} x {checks pass, a draining check fails, a check hangs} on a real Slurm 22.05 (Debian
bookworm's slurmctld and slurmd in simulated nodes), the program installed by role drift_exporter and run by slurmd
every HealthCheckInterval, never called by the test.

Four one-node clusters (tests/integration/slurm_node.py), one per initial state, run their three conditions side by
side. A failing check is an uncorrectable ECC count written into GPU 0's ``ras/umc_err_count`` of the node's simulated
tree (check ``gpu_ecc_errors``, a draining check in knowledge/scheduler.yml); a hanging check is ``/sim/proc/cmdline``
replaced by a FIFO nobody writes (the checks' first read blocks, as a read of a hung driver's file would), against the
program's timeout of 4 s. After each change the test waits for two complete health check runs logged by the program
(the second one started after the change), then reads the node's state and reason from slurmctld.
"""

import json
import os
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sim_nodes import REPO, play  # noqa: E402
from slurm_node import PREFIX, SlurmNode  # noqa: E402

PROFILE = "mi300x-8gpu-2cpu"
LOG = "/var/log/topotune/healthcheck.log"
RAS = "/sim/sys/bus/pci/devices/0000:0c:00.0/ras/umc_err_count"
CMDLINE = "/sim/proc/cmdline"
HEALTHCHECK = ["HealthCheckProgram=/usr/local/sbin/topotune-healthcheck", "HealthCheckInterval=2",
               "HealthCheckNodeState=ANY"]
NODE_LINE = "Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 Gres=gpu:mi300x:8"
GRES = "AutoDetect=off\nName=gpu Type=mi300x File=/dev/dri/renderD[128-135]\n"
ADMIN = "admin: DIMM B3 replaced, burn-in pending"
OTHER = "nhc: check_hw_ib: No IB port is ACTIVE"
OURS = "topotune: gpu_ecc_errors"
STARTS = {"admin": ADMIN, "other": OTHER, "topotune": OURS, "none": None}
CONDITIONS = ("pass", "fail", "hang")
# (drained afterwards, reason afterwards) per cell; None: whatever topotune writes for the failing check
EXPECTED = {
    ("admin", "pass"): (True, ADMIN), ("admin", "fail"): (True, ADMIN), ("admin", "hang"): (True, ADMIN),
    ("other", "pass"): (True, OTHER), ("other", "fail"): (True, OTHER), ("other", "hang"): (True, OTHER),
    ("topotune", "pass"): (False, ""), ("topotune", "fail"): (True, OURS), ("topotune", "hang"): (True, OURS),
    ("none", "pass"): (False, ""), ("none", "fail"): (True, OURS), ("none", "hang"): (False, ""),
}


def _runs(node):
    """The program's completed runs so far (lines that are not a skipped overlapping run)."""
    text = node.sh("cat %s 2>/dev/null || true" % LOG).stdout
    return [line for line in text.splitlines() if "another topotune-healthcheck is running" not in line]


def _wait_runs(node, count, timeout=40):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runs = _runs(node)
        if len(runs) >= count:
            return runs
        time.sleep(0.5)
    raise AssertionError("%s: %d health check runs expected within %d s, got %d:\n%s\n%s" % (
        node.name, count, timeout, len(_runs(node)), "\n".join(_runs(node)[-5:]), node.logs(20)))


def _set_start(node, start):
    reason = STARTS[start]
    if reason is None:
        if node.node_info().get("State", "").find("DRAIN") >= 0:
            node.scontrol("update", "NodeName=%s" % node.name, "State=RESUME")
    else:
        node.scontrol("update", "NodeName=%s" % node.name, "State=DRAIN", "Reason=%s" % reason)


def _set_condition(node, condition):
    if condition == "fail":
        node.sh("printf 'ue: 2\\nce: 0\\n' > %s" % RAS)
    elif condition == "hang":
        node.sh("mv %s %s.orig && mkfifo -m 0444 %s" % (CMDLINE, CMDLINE, CMDLINE))


def _clear_condition(node, condition):
    if condition == "fail":
        node.sh("printf 'ue: 0\\nce: 0\\n' > %s" % RAS)
    elif condition == "hang":
        node.sh("rm -f %s && mv %s.orig %s" % (CMDLINE, CMDLINE, CMDLINE))


def _drill(node, start, cells):
    for condition in CONDITIONS:
        _set_start(node, start)
        _set_condition(node, condition)
        try:
            _wait_runs(node, len(_runs(node)) + 2)
            info = node.node_info()
            show = node.scontrol("show", "node", node.name)
            reason = next((line.strip()[len("Reason="):] for line in show.splitlines()
                           if line.strip().startswith("Reason=")), "")
            reason = reason.rsplit(" [", 1)[0] if reason.endswith("]") else reason
            cells[(start, condition)] = {"state": info.get("State", ""), "drained": "DRAIN" in info.get("State", ""),
                                         "reason": reason, "log": _runs(node)[-1]}
        finally:
            _clear_condition(node, condition)


@pytest.fixture(scope="module")
def drill(tmp_path_factory):
    work = tmp_path_factory.mktemp("healthcheck")
    nodes = {start: SlurmNode(PROFILE, name="%s-%d-hc-%s" % (PREFIX, os.getpid(), start)) for start in STARTS}
    try:
        for node in nodes.values():
            node.start()
            node.make_devices(8)
        inventory = {"all": {"children": {"gpu_nodes": {"hosts": {n.name: {} for n in nodes.values()}}}}}
        (work / "hosts.yml").write_text(json.dumps(inventory))
        (work / "group_vars").mkdir()
        with open(os.path.join(REPO, "inventory", "sim", "group_vars", "all.yml")) as handle:
            (work / "group_vars" / "all.yml").write_text(handle.read())
        installed = play(str(work / "hosts.yml"), json.dumps({
            "drift_exporter_slurm_healthcheck": True, "drift_exporter_timer_enabled": False,
            "drift_exporter_healthcheck_timeout_seconds": 4, "topotune_report_dir": str(work / "out")}),
            playbooks=("playbooks/drift_exporter.yml",))
        assert installed.returncode == 0, (installed.stdout + installed.stderr)[-3000:]
        for node in nodes.values():
            node.configure(GRES, NODE_LINE, extra=HEALTHCHECK)
        cells, errors = {}, []

        def run(start):
            try:
                _drill(nodes[start], start, cells)
            except Exception as err:  # noqa: BLE001 - reported by the main thread
                errors.append("%s: %s" % (start, err))

        threads = [threading.Thread(target=run, args=(start,)) for start in STARTS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors, "\n".join(errors)
        yield {"cells": cells, "nodes": nodes}
    finally:
        for node in nodes.values():
            node.stop()


def test_the_drill_matrix_has_no_wrong_resume_and_no_missed_drain(drill):
    cells = drill["cells"]
    assert set(cells) == set(EXPECTED)
    wrong_resumes = [c for c, (drained, _r) in EXPECTED.items() if drained and not cells[c]["drained"]]
    missed_drains = [c for c, (drained, _r) in EXPECTED.items() if not drained and cells[c]["drained"]]
    wrong_reasons = [c for c, (_d, reason) in EXPECTED.items() if cells[c]["reason"] != reason]
    table = "\n".join("%-9s %-5s %-12s %-45s %s" % (
        s, c, cells[(s, c)]["state"], cells[(s, c)]["reason"], cells[(s, c)]["log"][-110:]) for s, c in EXPECTED)
    assert (wrong_resumes, missed_drains, wrong_reasons) == ([], [], []), table


def test_a_hung_check_is_said_and_changes_nothing(drill):
    for start in STARTS:
        assert "did not finish within 4 s" in drill["cells"][(start, "hang")]["log"], drill["cells"][(start, "hang")]


def test_the_program_is_slurms_not_the_tests(drill):
    # slurmd ran it: every run's node name came from SLURMD_NODENAME, which only slurmd sets
    for node in drill["nodes"].values():
        assert all("%s (SLURMD_NODENAME)" % node.name in line for line in _runs(node)), _runs(node)[-3:]
    out = subprocess.run(["docker", "exec", node.name, "grep", "-c", "topotune-healthcheck", "/etc/slurm/slurm.conf"],
                         capture_output=True, text=True, check=False).stdout.strip()
    assert out == "1"
