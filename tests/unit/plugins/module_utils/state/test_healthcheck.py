"""topotune-healthcheck (plugins/module_utils/state/healthcheck.py): Slurm's node text read, the drain/resume rule on
every cell of the drill matrix, and the whole program on a simulated node's tree against a stand-in of ``scontrol``
(a script of this test that keeps a node's state and reason in a file, named so below). The real Slurm drill is
tests/integration/test_slurm_healthcheck.py."""

import json
import os
import stat
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.state import healthcheck
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import (
    CHECK_TABLES,
    checks_knowledge,
    load_knowledge,
)
from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.drift_exporter import plan

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as sim  # noqa: E402 - sim/ is not a package

SLURM = os.path.join(REPO, "tests", "fixtures", "slurm")
# the role's script template, as rendered (roles/drift_exporter/templates/topotune-healthcheck.j2)
_SCRIPT = "#!%s -I\nimport sys\nsys.path.insert(0, %r)\nfrom topotune_node.state.healthcheck import main\nsys.exit(main(sys.argv[1:]))\n"
_ROLE_OPTIONS = {"sysroot": "/", "textfile_dir": "/var/lib/prometheus/node-exporter", "manifest": "/etc/topotune/m.json",
                 "interval_seconds": 120, "randomized_delay_seconds": 0, "boot_delay_seconds": 0, "timer_enabled": False,
                 "gpu_count": 0, "slurm_healthcheck": True, "healthcheck_timeout_seconds": 3, "healthcheck_drain": []}
_ROLE_PATHS = {"knowledge": "/k.json", "config": "/c.json", "script": "/s", "service": "/sv", "timer": "/t",
               "timer_link": "/tl", "healthcheck_script": "/usr/local/sbin/topotune-healthcheck",
               "healthcheck_config": "/etc/topotune/healthcheck.json", "healthcheck_log": "/var/log/hc.log"}
DRAIN = [c["check"] for c in load_knowledge("scheduler")["healthcheck"]["drain"]]
ADMIN = "admin: DIMM B3 replaced, burn-in pending"
OTHER = "nhc: check_hw_ib: No IB port is ACTIVE"
OURS = "topotune: gpu_ecc_errors"


def _node(state="IDLE", reason=""):
    text = "NodeName=n1 Arch=x86_64 CoresPerSocket=2\n   State=%s ThreadsPerCore=1 TmpDisk=0 Weight=1\n" % state
    if reason:
        text += "   Reason=%s [root@2026-12-07T10:05:00]\n" % reason
    return healthcheck.parse_node(text)


def _results(**statuses):
    base = {check: "pass" for check in DRAIN}
    base.update(statuses)
    base.setdefault("numa_balancing", "fail")  # never drains: not a draining check
    return [{"id": k, "status": v, "observed": "%s observed" % k} for k, v in base.items()]


@pytest.mark.parametrize("path", sorted(p for p in os.listdir(SLURM) if p.startswith("scontrol-show-node")))
def test_real_scontrol_output_is_read(path):
    with open(os.path.join(SLURM, path), encoding="utf-8") as handle:
        text = handle.read()
    node = healthcheck.parse_node(text)
    # the facts of each capture, read by hand from its name: <state>[__<reason kind>]
    expected_drained = "drain" in path
    assert node["drained"] is expected_drained and node["name"].startswith("tt-slurm")
    if "__admin" in path:
        assert node["reason"] == ADMIN
    elif "__topotune" in path:
        assert node["reason"] == OURS
    else:
        assert node["reason"] == ""


def test_states_and_reasons_are_read_as_slurm_prints_them():
    assert _node("IDLE+DRAIN", ADMIN) == {"name": "n1", "state": "IDLE", "flags": ["DRAIN"], "drained": True,
                                          "reason": ADMIN}
    assert _node("DRAINED")["drained"] and _node("MIXED+DRAIN")["drained"] and not _node("DOWN+NOT_RESPONDING")["drained"]
    assert _node("IDLE", "(null)")["reason"] == ""
    with pytest.raises(healthcheck.HealthcheckError, match="no State="):
        healthcheck.parse_node("slurm_load_node error: Invalid node name specified")


# the drill matrix, decided: (start state, condition) -> action. A hung check never reaches decide (nothing changes).
MATRIX = {
    ("admin", "pass"): "none", ("admin", "fail"): "none",
    ("other", "pass"): "none", ("other", "fail"): "none",
    ("topotune", "pass"): "resume", ("topotune", "fail"): "none",
    ("none", "pass"): "none", ("none", "fail"): "drain",
}
STARTS = {"admin": ("IDLE+DRAIN", ADMIN), "other": ("IDLE+DRAIN", OTHER), "topotune": ("IDLE+DRAIN", OURS),
          "none": ("IDLE", "")}


@pytest.mark.parametrize("cell", sorted(MATRIX))
def test_the_rule_on_every_cell_of_the_drill(cell):
    start, condition = cell
    results = _results(gpu_ecc_errors="fail") if condition == "fail" else _results()
    decision = healthcheck.decide(results, _node(*STARTS[start]), DRAIN)
    assert decision["action"] == MATRIX[cell], decision
    if decision["action"] == "drain":
        assert decision["reason"] == OURS and "gpu_ecc_errors observed" in decision["why"]


def test_topotune_drain_is_reworded_when_other_checks_fail_and_kept_while_its_checks_are_not_back():
    node = _node("IDLE+DRAIN", OURS)
    more = healthcheck.decide(_results(gpu_ecc_errors="fail", xgmi_links="fail"), node, DRAIN)
    assert more["action"] == "drain" and more["reason"] == "topotune: gpu_ecc_errors, xgmi_links"
    # the check that drained it cannot be read now: unknown is no pass, the node stays drained
    kept = healthcheck.decide(_results(gpu_ecc_errors="unknown"), node, DRAIN)
    assert kept["action"] == "none" and "gpu_ecc_errors is unknown" in kept["why"]
    # a rolling reboot's drain is topotune's too, but names no check: left to the reboot play
    reboot = healthcheck.decide(_results(), _node("IDLE+DRAIN", "topotune: kernel parameters pending reboot"), DRAIN)
    assert reboot["action"] == "none" and "for something else" in reboot["why"]
    # warn never drains; a non-draining check's fail never drains
    assert healthcheck.decide(_results(gpu_ecc_errors="warn"), _node(), DRAIN)["action"] == "none"


def test_the_configuration_is_checked():
    with pytest.raises(healthcheck.HealthcheckError, match="1 to 55 seconds"):
        healthcheck.build_config("/c.json", DRAIN, 60, "/l")
    with pytest.raises(healthcheck.HealthcheckError, match="non-empty list"):
        healthcheck.build_config("/c.json", ["GPU ECC"], 10, "/l")


def test_every_draining_check_is_one_the_platform_checks_report(tmp_path):
    from ansible_collections.topotune.instinct.plugins.module_utils.checks.platform_checks import gather, run_checks

    root = tmp_path / "sim"
    sim.build("mi300x-8gpu-2cpu", str(root))
    ids = {r["id"] for r in run_checks(gather(str(root)), checks_knowledge(), {})}
    assert set(DRAIN) <= ids, sorted(set(DRAIN) - ids)


# --- the whole program, against a stand-in of scontrol --------------------------------------------------------------

# STAND-IN of scontrol, not Slurm: keeps one node's state and reason in $TT_NODE (JSON), prints `show node` as Slurm
# 22.05 does, applies `update State=DRAIN|RESUME`, and records every call in $TT_CALLS.
SCONTROL = r'''#!%s
import json, os, sys
path, calls = os.environ["TT_NODE"], os.environ["TT_CALLS"]
node = json.load(open(path))
open(calls, "a").write(" ".join(sys.argv[1:]) + "\n")
if sys.argv[1:3] == ["show", "node"]:
    print("NodeName=%%s Arch=x86_64 CoresPerSocket=2" %% sys.argv[3])
    print("   State=%%s ThreadsPerCore=1 TmpDisk=0 Weight=1" %% node["state"])
    if node["reason"]:
        print("   Reason=%%s [root@2026-12-07T10:05:00]" %% node["reason"])
elif sys.argv[1] == "update":
    args = dict(a.split("=", 1) for a in sys.argv[2:])
    if args["State"] == "DRAIN":
        node = {"state": "IDLE+DRAIN", "reason": args["Reason"]}
    else:
        node = {"state": "IDLE", "reason": ""}
    json.dump(node, open(path, "w"))
'''


@pytest.fixture
def program(tmp_path):
    root = tmp_path / "sim"
    sim.build("mi300x-8gpu-2cpu", str(root))
    (tmp_path / "knowledge.json").write_text(json.dumps(checks_knowledge()))
    drift = {"manifest": str(tmp_path / "none.json"), "sysroot": str(root), "knowledge": str(tmp_path / "knowledge.json"),
             "textfile": str(tmp_path / "topotune.prom"), "grub_dropin": str(tmp_path / "none.cfg"),
             "reboot_required_file": str(tmp_path / "none"), "interval_seconds": 0, "platform_checks": {"skip": []}}
    (tmp_path / "drift.json").write_text(json.dumps(drift))
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(SCONTROL % sys.executable)
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IXUSR)
    config = healthcheck.build_config(str(tmp_path / "drift.json"), DRAIN, 3, str(tmp_path / "healthcheck.log"),
                                      scontrol=str(scontrol))
    (tmp_path / "healthcheck.json").write_text(json.dumps(config))
    # installed as role drift_exporter installs it: the shipped module_utils as package topotune_node
    lib = tmp_path / "lib"
    knowledge = {name: load_knowledge(name) for name in ("gpu_generations", "scheduler") + CHECK_TABLES}
    files = plan(_ROLE_OPTIONS, knowledge,
                 {"script": "", "service": "", "timer": "", "healthcheck_script": _SCRIPT % (sys.executable, str(lib))},
                 dict(_ROLE_PATHS, package=str(lib / "topotune_node")))["files"]
    for f in files:
        if f.get("state") != "absent" and (f["path"].startswith(str(lib)) or f["path"] == _ROLE_PATHS["healthcheck_script"]):
            path = tmp_path / "topotune-healthcheck" if f["path"] == _ROLE_PATHS["healthcheck_script"] else f["path"]
            os.makedirs(os.path.dirname(str(path)), exist_ok=True)
            with open(str(path), "w", encoding="utf-8") as handle:
                handle.write(f["content"])
    script = tmp_path / "topotune-healthcheck"
    script.chmod(0o755)

    def run(state, reason=""):
        (tmp_path / "node.json").write_text(json.dumps({"state": state, "reason": reason}))
        (tmp_path / "calls").write_text("")
        proc = subprocess.run([str(script), "--config", str(tmp_path / "healthcheck.json")], capture_output=True,
                              text=True, timeout=30, check=False,
                              env=dict(os.environ, TT_NODE=str(tmp_path / "node.json"), TT_CALLS=str(tmp_path / "calls"),
                                       SLURMD_NODENAME="n1"))
        return {"rc": proc.returncode, "out": proc.stdout + proc.stderr,
                "node": json.loads((tmp_path / "node.json").read_text()),
                "calls": (tmp_path / "calls").read_text().splitlines()}
    return {"run": run, "root": root}


def test_a_failing_ecc_count_drains_and_its_repair_resumes(program):
    (program["root"] / "sys/bus/pci/devices/0000:0c:00.0/ras/umc_err_count").write_text("ue: 2\nce: 0\n")
    drained = program["run"]("IDLE")
    assert drained["rc"] == 0 and drained["node"] == {"state": "IDLE+DRAIN", "reason": OURS}, drained["out"]
    assert drained["calls"] == ["show node n1", "update NodeName=n1 State=DRAIN Reason=%s" % OURS]
    assert "n1 (SLURMD_NODENAME) drain 'topotune: gpu_ecc_errors'" in drained["out"]
    # an administrator's drain is never touched, whatever fails
    admin = program["run"]("IDLE+DRAIN", ADMIN)
    assert admin["node"]["reason"] == ADMIN and admin["calls"] == ["show node n1"]
    (program["root"] / "sys/bus/pci/devices/0000:0c:00.0/ras/umc_err_count").write_text("ue: 0\nce: 0\n")
    resumed = program["run"]("IDLE+DRAIN", OURS)
    assert resumed["node"] == {"state": "IDLE", "reason": ""} and resumed["calls"][-1] == "update NodeName=n1 State=RESUME"


def test_a_hung_read_is_killed_and_changes_nothing(program):
    cmdline = program["root"] / "proc" / "cmdline"
    cmdline.unlink()
    os.mkfifo(str(cmdline))
    hung = program["run"]("IDLE+DRAIN", OURS)
    assert hung["rc"] == 0 and hung["node"] == {"state": "IDLE+DRAIN", "reason": OURS}
    assert hung["calls"] == [] and "did not finish within 3 s (a hung read?): nothing changed" in hung["out"]


def test_a_slurm_that_cannot_be_asked_changes_nothing(program, tmp_path):
    config = json.loads((tmp_path / "healthcheck.json").read_text())
    config["scontrol"] = str(tmp_path / "absent-scontrol")
    (tmp_path / "healthcheck.json").write_text(json.dumps(config))
    out = program["run"]("IDLE")
    assert out["rc"] == 0 and "scontrol show node" in out["out"] and "nothing changed" in out["out"]
