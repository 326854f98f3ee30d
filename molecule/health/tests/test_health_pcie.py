"""After converge: the PCIe/RDMA health checks in each node's JSON report. The good node passes all of them; each
fault node fails (or warns, where the knowledge says warn) exactly the check of its fault, with the right id."""

import json
import os

import pytest

EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")
PCIE_IDS = ("pci_acs", "rdma_gpu_nic_affinity", "pcie_aspm", "pcie_10bit_tags", "pcie_ari_forwarding",
            "gpu_large_bar", "pcie_aer")
# profile -> the check its fault trips, the status, and text its observation holds
FAULTS = {
    "fault-acs-enabled": ("pci_acs", "fail", "0000:37:00.0 ACSCtl SrcValid+"),
    "fault-nic-far-numa": ("rdma_gpu_nic_affinity", "warn", "GPU 0000:0c:00.0 (NUMA 0) has no NIC of its own"),
    "fault-aer-fatal": ("pcie_aer", "fail", "0000:af:00.0 fatal 1"),
}


@pytest.fixture(scope="module")
def profile(host):
    return host.ansible.get_variables()["topotune_sim_profile"]


@pytest.fixture(scope="module")
def report(host):
    path = os.path.join(EPHEMERAL, "platform-checks", "%s.json" % host.backend.get_hostname())
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    return {r["id"]: r for r in data["results"]}


def test_pcie_checks_match_the_profile(profile, report):
    """The good node passes every PCIe/RDMA check; each PCIe fault node trips exactly its check. The GPU-health
    nodes share the good node's PCIe tree: they pass too."""
    assert set(PCIE_IDS) <= set(report)
    want = FAULTS.get(profile)
    for check_id in PCIE_IDS:
        result = report[check_id]
        if want and check_id == want[0]:
            assert result["status"] == want[1] and want[2] in result["observed"], result
            assert result["remediation"] and result["source"]
        else:
            assert result["status"] == "pass", result
    assert report["pci_acs"]["cvs"] == "test_check_pci_acs"
