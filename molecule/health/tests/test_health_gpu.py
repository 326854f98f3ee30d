"""After converge: each fault node fails its GPU health check with the right id, the good nodes pass them, and the
run summary's consistency section names the node on another VBIOS as the odd one out."""

import json
import os

import pytest

EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")
HEALTH_IDS = ("gpu_partition_mode", "gpu_ecc_errors", "gpu_retired_pages", "gpu_kernel_log", "gpu_firmware_consistency",
              "power_managers")
# profile -> (check id that fails, text its observed value holds)
FAULTS = {
    "fault-ecc-uncorrectable": ("gpu_ecc_errors", "0000:38:00.0 ue umc=2"),
    "fault-fw-mismatch": ("gpu_firmware_consistency", "0000:bf:00.0"),
    "fault-mixed-partitions": ("gpu_partition_mode", "CPX/NPS1 on 0000:9f:00.0"),
}


@pytest.fixture(scope="module")
def name(host):
    return host.backend.get_hostname()


@pytest.fixture(scope="module")
def profile(host):
    return host.ansible.get_variables()["topotune_sim_profile"]


@pytest.fixture(scope="module")
def report(name):
    with open(os.path.join(EPHEMERAL, "platform-checks", "%s.json" % name), encoding="utf-8") as handle:
        data = json.load(handle)
    data["by_id"] = {r["id"]: r for r in data["results"]}
    return data


@pytest.fixture(scope="module")
def summary():
    with open(os.path.join(EPHEMERAL, "reports", "run", "site.json"), encoding="utf-8") as handle:
        return json.load(handle)


def test_fault_node_fails_its_check(report, profile):
    if profile not in FAULTS:
        pytest.skip("not a node-level fault")
    check_id, observed = FAULTS[profile]
    res = report["by_id"][check_id]
    assert res["status"] == "fail" and observed in res["observed"], res
    others = [i for i in HEALTH_IDS if i != check_id and report["by_id"][i]["status"] == "fail"]
    # the ECC node also logged the error: its kernel-log check fails with it, nothing else does
    assert others == (["gpu_kernel_log"] if profile == "fault-ecc-uncorrectable" else []), others


def test_good_nodes_pass_the_health_checks(report, profile):
    if profile in FAULTS:
        pytest.skip("fault node")
    statuses = {i: report["by_id"][i]["status"] for i in HEALTH_IDS}
    assert set(statuses.values()) == {"pass"}, statuses


def test_inventory_is_reported(report, profile):
    inv = report["inventory"]
    assert len(inv["gpus"]) == 8 and inv["kernel_release"] == "6.8.0-45-generic"
    vbios = {g["vbios"] for g in inv["gpus"]}
    assert vbios == ({"113-M3000108-103"} if profile == "fault-vbios-odd" else {"113-M3000100-102"})


def test_summary_names_the_odd_node(summary, host):
    hosts = host.ansible.get_variables()["groups"]["all"]
    odd = ["tt-h16g-vbios"]  # the node of profile fault-vbios-odd (molecule.yml)
    consistency = summary["consistency"]
    assert consistency["nodes"] == sorted(hosts)
    vbios = next(r for r in consistency["items"] if r["item"] == "vbios")
    assert vbios["status"] == "differs" and vbios["majority"] == "113-M3000100-102" and vbios["odd"] == odd
    # the firmware fault is inside one node: across nodes that node's MEC/SOS are "mixed" and odd too
    assert consistency["odd_nodes"]["tt-h16g-fw"] == ["firmware:mec", "firmware:sos"]
    assert "tt-h16g-vbios" in consistency["odd_nodes"] and "tt-h16g-good1" not in consistency["odd_nodes"]
    # compared within a hardware class: the node with one GPU in CPX is a class of its own
    mixed = [k for k, hosts in consistency["classes"].items() if hosts == ["tt-h16g-mixed"]]
    assert mixed and mixed[0].startswith("MI300X mixed: ")
