"""`bin/topotune checks --sysroot`: the platform and health checks the role makes, on a tree or a snapshot, by the
same code (module_utils/checks/platform_checks.py), with the module's check options as flags (declared once, OPTIONS)."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.modules import platform_checks as module
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import checks_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CLI = os.path.join(REPO, "bin", "topotune")


def _knowledge():
    return checks_knowledge()  # what the module's action passes (the loader's CHECK_TABLES)


def _cli(*argv):
    return subprocess.run([sys.executable, CLI, "checks"] + list(argv), capture_output=True, text=True, check=False)


# fault profile -> the check its fault trips, its status and text of its observation: one per kind of reader (GPU
# RAS sysfs, an RDMA NIC's PCI link, KFD io_links, the kernel log under the tree)
FAULTS = {
    "fault-ecc-uncorrectable": ("gpu_ecc_errors", "fail", "0000:38:00.0"),
    "fault-nic-x8": ("rdma_nic_pcie_link", "fail", "mlx5_2"),
    "fault-xgmi-link-down": ("xgmi_links", "fail", "GPU"),
    "fault-driver-error": ("gpu_kernel_log", "warn", "psp gfx command LOAD_TA(0x1) failed"),
}


@pytest.mark.parametrize("profile", sorted(FAULTS))
def test_same_results_as_the_module(sim_tree, run_module, profile):
    root = sim_tree(profile)
    run = _cli("--sysroot", root)
    assert run.returncode == 1, run.stderr  # a check fails (the fault's, or the untuned node's kernel parameters)
    out = json.loads(run.stdout)
    knowledge = _knowledge()
    # the same code on the same tree (unit files read under the tree, as the CLI does)
    assert out["checks"] == pc.run_checks(pc.gather(root, unit_root=root), knowledge)
    assert out["identity"]["generation"] == "MI300X" and out["summary"]["fail"] >= 1
    check_id, status, text = FAULTS[profile]
    tripped = next(r for r in out["checks"] if r["id"] == check_id)
    assert tripped["status"] == status and text in tripped["observed"], tripped
    # and what the role's module returns on it (its unit files are the test machine's: power_managers left out)
    rc, result = run_module(module, sysroot=root, knowledge=knowledge)
    assert rc == 0
    assert [r for r in result["results"] if r["id"] != "power_managers"] == \
        [r for r in out["checks"] if r["id"] != "power_managers"]


def test_options_are_the_modules_and_text_output(sim_tree, tmp_path):
    root = sim_tree("mi300x-8gpu-spx")
    failing = [r["id"] for r in json.loads(_cli("--sysroot", root).stdout)["checks"] if r["status"] == "fail"]
    assert failing  # the simulated node before bring-up: kernel parameters, NUMA balancing
    skips = [arg for check_id in failing for arg in ("--skip", check_id)]
    expected = tmp_path / "expected.yml"
    expected.write_text("bios_version: '1.*'\nkernel_release: [6.8.0-45-generic]\n")
    run = _cli("--sysroot", root, "--format", "text", "--expected", str(expected), "--gpu-count", "8", *skips)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert any(line.split()[:2] == ["pass", "expected_kernel_release"] for line in lines)
    assert any(line.split()[:2] == ["pass", "pci_accelerators"] for line in lines)
    assert lines[-1].endswith("0 fail, %d unknown" % sum(1 for line in lines[:-1] if line.startswith("unknown")))
    # the check options of the module are the CLI's flags
    helps = subprocess.run([sys.executable, CLI, "checks", "--help"], capture_output=True, text=True, check=True).stdout
    for name in pc.CHECK_OPTIONS:
        assert "--" + name.replace("_", "-") in helps


def test_bad_input_is_one_line(tmp_path):
    run = _cli("--sysroot", str(tmp_path / "absent"))
    assert run.returncode == 2 and run.stderr.strip().count("\n") == 0 and "is not a directory" in run.stderr
    bad = tmp_path / "expected.json"
    bad.write_text('{"rocm": "6.4"}')
    run = _cli("--sysroot", str(tmp_path), "--expected", str(bad))
    assert run.returncode == 2 and "unknown key(s) rocm: use rocm_version" in run.stderr
    assert "Traceback" not in run.stderr
