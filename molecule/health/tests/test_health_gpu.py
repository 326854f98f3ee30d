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
    # a deferred (poisoned) error counts as uncorrectable; the driver's current RAS wording in the kernel log
    "fault-ecc-deferred": ("gpu_ecc_errors", "0000:38:00.0 de umc=2"),
    # 130 retired pages over the 128 AMD's amdgpu applies with bad_page_threshold=-1 (16 MiB reserved VRAM)
    "fault-retired-pages": ("gpu_retired_pages", "0000:bf:00.0 130 page(s) of 128"),
    "fault-fw-mismatch": ("gpu_firmware_consistency", "0000:bf:00.0"),
    "fault-mixed-partitions": ("gpu_partition_mode", "CPX/NPS1 on 0000:9f:00.0"),
}
# the fault nodes whose driver also logged the error: their kernel-log check fails with the fault's check
LOGGED = {"fault-ecc-uncorrectable", "fault-ecc-deferred", "fault-retired-pages"}


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


def test_each_node_fails_exactly_its_fault(report, profile):
    """A fault node fails its check (and the kernel log where the driver logged it), nothing else; every other node
    (the good ones, the node on another VBIOS: consistent inside itself) passes every GPU health check."""
    failing = sorted(i for i in HEALTH_IDS if report["by_id"][i]["status"] == "fail")
    if profile in FAULTS:
        check_id, observed = FAULTS[profile]
        res = report["by_id"][check_id]
        assert res["status"] == "fail" and observed in res["observed"], res
        assert res["remediation"], res
        assert failing == sorted({check_id} | ({"gpu_kernel_log"} if profile in LOGGED else set())), failing
    else:
        statuses = {i: report["by_id"][i]["status"] for i in HEALTH_IDS}
        assert set(statuses.values()) == {"pass"}, statuses


def test_retired_pages_name_the_drivers_threshold_and_the_service_guide(report, profile):
    res = report["by_id"]["gpu_retired_pages"]
    if profile == "fault-retired-pages":
        assert res["expected"].endswith("stated by the driver in the kernel log")
        assert "Service Action Guide" in res["remediation"] and "refuses" not in res["remediation"]
    else:
        # AMD's DKMS amdgpu of the simulated nodes (sys/module/amdgpu/version), bad_page_threshold -1
        assert "AMD's amdgpu 6.12.12, bad_page_threshold=-1: 16 MiB reserved VRAM = 128 pages" in res["expected"], res


def test_identity_decides_generation_and_count(report, profile):
    # the HF part (0x74a9) is an MI300X: 8 GPUs counted, not "0 GPU device(s) ... 8 missing"
    identity = report["identity"]
    assert identity["generation"] == "MI300X" and report["by_id"]["pci_accelerators"]["status"] == "pass"
    assert report["by_id"]["pci_accelerators"]["observed"] == "8 GPU device(s)"
    if profile == "mi300x-hf-8gpu-spx":
        assert (identity["product"], identity["kind"], identity["device_id"]) == ("MI300X HF", "hf", "0x74a9")
    else:
        assert (identity["product"], identity["kind"]) == ("MI300X", "physical")


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
    vbios = next(r for r in consistency["items"] if r["item"] == "vbios" and r["class"] == "MI300X SPX/NPS1")
    assert vbios["status"] == "differs" and vbios["majority"] == "113-M3000100-102" and vbios["odd"] == odd
    # the firmware fault is inside one node: across nodes that node's MEC/SOS are "mixed" and odd too
    assert consistency["odd_nodes"]["tt-h16g-fw"] == ["firmware:mec", "firmware:sos"]
    assert "tt-h16g-vbios" in consistency["odd_nodes"] and "tt-h16g-good1" not in consistency["odd_nodes"]
    # compared within a hardware class: the node with one GPU in CPX is a class of its own
    mixed = [k for k, hosts in consistency["classes"].items() if hosts == ["tt-h16g-mixed"]]
    assert mixed and mixed[0].startswith("MI300X mixed: ")
    # the HF node is compared with HF nodes only (a class of one here), never called odd against MI300X firmware
    assert consistency["classes"]["MI300X HF SPX/NPS1"] == ["tt-h16g-hf"] and "tt-h16g-hf" not in consistency["odd_nodes"]
