"""Every simulated node sees its own hardware tree, and gpu_topology reads it as its profile says."""

import json
import os
import subprocess

import pytest

PROJECT = os.environ.get("MOLECULE_PROJECT_DIRECTORY", os.path.abspath(os.path.join(os.path.dirname(__file__), "../../..")))


def _expect(profile):
    out = subprocess.run(
        [os.path.join(PROJECT, ".venv", "bin", "python"), os.path.join(PROJECT, "sim", "sysroot.py"), "expect", profile],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out)


@pytest.fixture(scope="module")
def profile(host):
    return host.ansible.get_variables()["topotune_sim_profile"]


@pytest.fixture(scope="module")
def topology(host):
    result = host.ansible("topotune.instinct.gpu_topology", "sysroot=/sim", check=False)
    assert not result.get("failed"), result.get("msg")
    return result["topology"]


def test_node_has_systemd_and_no_network(host):
    assert host.check_output("ps -o comm= -p 1") == "systemd"
    assert host.check_output("ip -o link show | awk -F': ' '{print $2}'").split() == ["lo"]


def test_node_sees_its_own_profile(host, profile):
    kfd = host.file("/sim/sys/class/kfd/kfd/topology/nodes")
    assert kfd.is_directory
    expect = _expect(profile)
    nodes = host.check_output("ls /sim/sys/class/kfd/kfd/topology/nodes").split()
    assert len(nodes) == expect["kfd_cpu_nodes"] + expect["kfd_gpu_nodes"]


def test_topology_matches_profile(topology, profile):
    expect = _expect(profile)
    assert len(topology["gpus"]) == expect["gpu_count"]
    if "gpu_numa" in expect:
        assert [g["numa_node"] for g in topology["gpus"]] == expect["gpu_numa"]
    if "hives" in expect:
        assert len(topology["hives"]) == expect["hives"]
