"""PCIe and RDMA health checks (module_utils/pcie_health.py) on simulated nodes, their fault profiles and cited data."""

import copy
import os

import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.module_utils import pcie_health as ph
from ansible_collections.topotune.instinct.plugins.module_utils import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.module_utils.launch_render import render

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(REPO, "knowledge", "pcie_health.yml"), encoding="utf-8") as _fh:
    KNOWLEDGE = yaml.safe_load(_fh)
with open(os.path.join(REPO, "knowledge", "gpu_generations.yml"), encoding="utf-8") as _fh:
    GENERATIONS = yaml.safe_load(_fh)

GOOD = "mi300x-8gpu-spx"
# fault profile -> (check id, status, text the observation must name)
FAULTS = {
    "fault-acs-enabled": ("pci_acs", "fail", "0000:37:00.0 ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+"),
    "fault-nic-far-numa": ("rdma_gpu_nic_affinity", "warn", "GPU 0000:0c:00.0 (NUMA 0) has no NIC of its own"),
    "fault-aer-fatal": ("pcie_aer", "fail", "0000:af:00.0 fatal 1 (SDES)"),
}

# Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats, the aer_dev_correctable sample output
KERNEL_DOC_SAMPLE = """Receiver Error 2
Bad TLP 0
Bad DLLP 0
RELAY_NUM Rollover 0
Replay Timer Timeout 0
Advisory Non-Fatal 0
Corrected Internal Error 0
Header Log Overflow 0
TOTAL_ERR_COR 2
"""


def _by_id(results):
    return {r["id"]: r for r in results}


@pytest.fixture(scope="module")
def facts_of(sim_tree):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = ph.gather(sim_tree(name))
        return cache[name]
    return get


def test_knowledge_is_sourced():
    for key in ("acs", "rdma_affinity", "aspm", "ten_bit_tags", "ari", "large_bar", "aer"):
        assert KNOWLEDGE[key]["source"].strip(), key
    assert KNOWLEDGE["aer"]["fatal_max"] == 0 and KNOWLEDGE["aer"]["nonfatal_max"] == 0


def test_good_profile_passes_every_check(facts_of):
    results = ph.run_checks(facts_of(GOOD), KNOWLEDGE)
    assert [r["id"] for r in results] == list(ph.CHECK_IDS)
    assert {r["id"]: r["status"] for r in results} == {i: "pass" for i in ph.CHECK_IDS}
    assert _by_id(results)["pci_acs"]["cvs"] == "test_check_pci_acs"
    assert _by_id(results)["pci_acs"]["observed"] == "ACS off on 32 bridge(s) (0 without the capability)"


@pytest.mark.parametrize("profile", sorted(FAULTS))
def test_each_fault_fails_its_check_only(profile, facts_of):
    check_id, status, text = FAULTS[profile]
    results = _by_id(ph.run_checks(facts_of(profile), KNOWLEDGE))
    assert results[check_id]["status"] == status
    assert text in results[check_id]["observed"]
    assert results[check_id]["remediation"] and results[check_id]["source"] == KNOWLEDGE[
        {"pci_acs": "acs", "rdma_gpu_nic_affinity": "rdma_affinity", "pcie_aer": "aer"}[check_id]]["source"]
    others = {i: r["status"] for i, r in results.items() if i != check_id}
    assert set(others.values()) == {"pass"}, others


def test_gather_resolves_the_pci_path(facts_of):
    facts = facts_of(GOOD)
    gpu = next(g for g in facts["gpus"] if g["bdf"] == "0000:0c:00.0")
    assert gpu["path"] == ["0000:09:01.1", "0000:0a:00.0", "0000:0b:00.0"] and gpu["numa_node"] == 0
    nic = next(n for n in facts["nics"] if n["name"] == "mlx5_0")
    assert nic["bdf"] == "0000:0d:00.0" and nic["path"] == ["0000:09:01.1", "0000:0a:00.0", "0000:0b:01.0"]
    assert len(gpu["config"]) == 4096 and gpu["aer"]["fatal"]["total"] == 0


def test_affinity_pairs_each_gpu_with_the_nic_on_its_switch(facts_of):
    aff = ph.nic_affinity(facts_of(GOOD))
    assert [(p["gpu"], p["nic"], p["level"]) for p in aff["pairs"]][:2] == [
        ("0000:0c:00.0", "mlx5_0", "switch"), ("0000:22:00.0", "mlx5_1", "switch")]
    assert aff["nccl_ib_hca"] == ",".join("mlx5_%d" % k for k in range(8)) and aff["reason"] is None


def test_far_nic_gives_no_suggestion_and_says_why(facts_of):
    aff = ph.nic_affinity(facts_of("fault-nic-far-numa"))
    assert aff["nccl_ib_hca"] is None
    assert aff["reason"] == "GPU(s) 0000:0c:00.0 have no NIC below their own PCIe switch or root port"
    far = next(p for p in aff["pairs"] if p["gpu"] == "0000:0c:00.0")
    assert far == {"gpu": "0000:0c:00.0", "nic": "mlx5_0", "nic_bdf": "0000:a1:00.0", "level": "far"}


def test_nic_on_a_numa_node_without_gpus_is_named(facts_of):
    facts = copy.deepcopy(facts_of(GOOD))
    facts["gpus"] = [g for g in facts["gpus"] if g["numa_node"] == 0]  # GPUs on NUMA 0 only
    res = _by_id(ph.run_checks(facts, KNOWLEDGE))["rdma_gpu_nic_affinity"]
    assert res["status"] == "warn" and "NIC mlx5_4 (0000:a0:00.0) sits on NUMA node 1, which has no GPU" in res["observed"]


def _truncated(facts, size):
    out = copy.deepcopy(facts)
    for dev in out["gpus"] + out["nics"]:
        dev["config"] = dev["config"][:size]
    out["bridges"] = {b: data[:size] for b, data in out["bridges"].items()}
    return out


def test_unprivileged_reads_are_unknown_with_the_reason(facts_of):
    results = _by_id(ph.run_checks(_truncated(facts_of(GOOD), 64), KNOWLEDGE))
    for check_id in ("pci_acs", "pcie_aspm", "pcie_10bit_tags", "pcie_ari_forwarding"):
        assert results[check_id]["status"] == "unknown", check_id
        assert "64 bytes" in results[check_id]["observed"] and "root" in results[check_id]["observed"], check_id
    # AER counters and NIC affinity need no config space; large BAR is judged by amdgpu's visible VRAM
    assert results["pcie_aer"]["status"] == "pass" and results["rdma_gpu_nic_affinity"]["status"] == "pass"
    assert results["gpu_large_bar"]["status"] == "pass"
    assert "mem_info_vis_vram_total = mem_info_vram_total" in results["gpu_large_bar"]["observed"]


@pytest.mark.parametrize("vis,status,text", [
    (206158430208, "pass", "whole VRAM visible (192GB"),
    (256 << 20, "warn", "0000:22:00.0 visible VRAM 256MB of 192GB"),   # a 256 MB BAR: today unknown without root
    (None, "unknown", "no mem_info_vis_vram_total"),
])
def test_large_bar_without_root_from_the_visible_vram(facts_of, vis, status, text):
    facts = _truncated(facts_of(GOOD), 64)
    for gpu in facts["gpus"]:
        if gpu["bdf"] == "0000:22:00.0":
            gpu["vis_vram_bytes"] = vis
    res = _by_id(ph.run_checks(facts, KNOWLEDGE))["gpu_large_bar"]
    assert res["status"] == status and text in res["observed"], res
    if status == "warn":
        assert "Above 4G Decoding" in res["remediation"]


def test_large_bar_uses_config_space_when_readable(facts_of):
    """Root read: the resizable BAR decides even when the visible VRAM would say otherwise."""
    facts = copy.deepcopy(facts_of(GOOD))
    for gpu in facts["gpus"]:
        gpu["vis_vram_bytes"] = 256 << 20
    res = _by_id(ph.run_checks(facts, KNOWLEDGE))["gpu_large_bar"]
    assert res["status"] == "pass" and res["observed"].startswith("BAR at 256GB")


def _acs(data, value):
    buf = bytearray(data)
    pos = ph.ConfigSpace(data).ext_capabilities()[0x000D]
    buf[pos + 6:pos + 8] = value.to_bytes(2, "little")
    return bytes(buf)


@pytest.mark.parametrize("control,flags", [
    (0x0080, "IORB+"),          # ACS Enhanced: I/O Request Blocking, invisible to lspci's ACSCtl line
    (0x0300, "DSP_MT_RB+ DSP_MT_RR+"),
    (0x1000, "UnclaimedRR+"),
    (0x2000, "bit13+"),         # reserved: still not "ACS off"
    (0x0001, "SrcValid+"),
])
def test_any_set_acs_control_bit_fails(facts_of, control, flags):
    facts = copy.deepcopy(facts_of(GOOD))
    facts["bridges"]["0000:37:00.0"] = _acs(facts["bridges"]["0000:37:00.0"], control)
    res = _by_id(ph.run_checks(facts, KNOWLEDGE))["pci_acs"]
    assert res["status"] == "fail" and res["observed"] == "0000:37:00.0 ACSCtl %s (0x%04x)" % (flags, control), res


@pytest.mark.parametrize("profile,status", [("fault-acs-enabled", "pass"), (GOOD, "warn")])
def test_virtualization_host_expects_acs_on(facts_of, profile, status):
    """AMD's virtualization BIOS table sets ACS Enabled: on such a host ACS on passes and ACS off warns."""
    res = _by_id(ph.run_checks(facts_of(profile), KNOWLEDGE, options={"virtualization_host": True}))["pci_acs"]
    assert res["status"] == status, res
    assert "Virtualization" in res["source"] and "virtualization host" in res["expected"]
    if status == "warn":
        assert "ACS = Enabled" in res["remediation"]


@pytest.mark.parametrize("generation,level", [("MI300X", "fail"), ("MI355X", "fail"), ("MI210", "warn"), (None, "warn")])
def test_amd_required_bios_settings_fail_on_mi3xx(facts_of, generation, level):
    """The acceptance docs' "Required BIOS Settings" (MI3xx): ten-bit tag support and ARI Enumeration/Support
    Enabled; on MI200 (ten-bit tag Auto) the findings stay warnings."""
    facts = copy.deepcopy(facts_of(GOOD))
    _set_gpu(facts, "0000:0c:00.0", lambda b: _devctl2(b, 0))                          # 10-bit tag requester off
    facts["bridges"]["0000:21:00.0"] = _devctl2(facts["bridges"]["0000:21:00.0"], 1 << 12)  # ARI forwarding off
    gen = {"name": generation} if generation else None
    results = _by_id(ph.run_checks(facts, KNOWLEDGE, gen))
    assert results["pcie_10bit_tags"]["status"] == level and results["pcie_ari_forwarding"]["status"] == level
    if level == "fail":
        assert "Required BIOS Settings" in results["pcie_10bit_tags"]["source"]
        assert "PCIE ARI Enumeration" in results["pcie_ari_forwarding"]["remediation"]


def test_standard_space_only_still_decodes_the_pcie_capability(facts_of):
    results = _by_id(ph.run_checks(_truncated(facts_of(GOOD), 256), KNOWLEDGE))
    assert results["pcie_aspm"]["status"] == "pass" and results["pcie_10bit_tags"]["status"] == "pass"
    assert results["pci_acs"]["status"] == "unknown" and "extended space" in results["pci_acs"]["observed"]


def test_flat_tree_without_hierarchy_is_unknown(facts_of):
    facts = facts_of("mi250x-8gcd")  # a profile without pcie_tree: flat sys/bus/pci/devices dirs, no NICs
    results = _by_id(ph.run_checks(facts, KNOWLEDGE))
    assert results["pci_acs"]["status"] == "unknown" and "not a link into sys/devices" in results["pci_acs"]["observed"]
    assert results["rdma_gpu_nic_affinity"]["status"] == "unknown"
    assert results["pcie_aer"]["status"] == "unknown"
    assert ph.nic_affinity(facts)["nccl_ib_hca"] is None


@pytest.mark.parametrize("edit,status,text", [
    (lambda f: f["bridges"].__setitem__("0000:0b:00.0", _aspm(f["bridges"]["0000:0b:00.0"], 2)), "warn",
     "0000:0b:00.0 L1"),
    (lambda f: _set_gpu(f, "0000:0c:00.0", lambda b: _devctl2(b, 0)), "warn", "10-bit tag requester off on 0000:0c:00.0"),
])
def test_feature_checks_catch_a_change(edit, status, text, facts_of):
    facts = copy.deepcopy(facts_of(GOOD))
    edit(facts)
    results = ph.run_checks(facts, KNOWLEDGE)
    bad = [r for r in results if r["status"] != "pass"]
    assert len(bad) == 1 and bad[0]["status"] == status and text in bad[0]["observed"]


def _set_gpu(facts, bdf, change):
    gpu = next(g for g in facts["gpus"] if g["bdf"] == bdf)
    gpu["config"] = change(gpu["config"])


def _aspm(data, value):
    buf = bytearray(data)
    buf[0x70] = (buf[0x70] & ~0x3) | value  # PCIe capability at 0x60 + LnkCtl 0x10
    return bytes(buf)


def _devctl2(data, value):
    buf = bytearray(data)
    buf[0x88:0x8A] = value.to_bytes(2, "little")  # PCIe capability at 0x60 + DevCtl2 0x28
    return bytes(buf)


def test_small_bar_and_ari_forwarding_off(facts_of):
    facts = copy.deepcopy(facts_of(GOOD))
    gpu = next(g for g in facts["gpus"] if g["bdf"] == "0000:22:00.0")
    buf = bytearray(gpu["config"])
    rebar = ph.ConfigSpace(gpu["config"]).ext_capabilities()[0x0015]
    buf[rebar + 9] = 8  # current size 256 MB
    gpu["config"] = bytes(buf)
    facts["bridges"]["0000:21:00.0"] = _devctl2(facts["bridges"]["0000:21:00.0"], 1 << 12)  # ARI forwarding off
    results = _by_id(ph.run_checks(facts, KNOWLEDGE))
    assert results["gpu_large_bar"]["status"] == "warn"
    assert results["gpu_large_bar"]["observed"] == "0000:22:00.0 BAR 0 256MB of 256GB"
    assert results["pcie_ari_forwarding"]["status"] == "warn"
    assert results["pcie_ari_forwarding"]["observed"] == "ARI forwarding off on 0000:21:00.0 above 0000:22:00.0"


@pytest.mark.parametrize("text,want", [
    (KERNEL_DOC_SAMPLE, {"Receiver Error": 2, "Bad TLP": 0, "RELAY_NUM Rollover": 0, "total": 2}),
    ("Undefined 0\nDLP 0\nSDES 3\nTOTAL_ERR_FATAL 3\n", {"Undefined": 0, "DLP": 0, "SDES": 3, "total": 3}),
    ("garbage\n", None),
    ("", None),
    (None, None),
    ("RxErr 5\n", {"RxErr": 5, "total": 5}),  # no TOTAL line: summed
])
def test_parse_aer(text, want):
    got = ph.parse_aer(text)
    if want is None:
        assert got is None
    else:
        assert {k: got[k] for k in want} == want


@pytest.mark.parametrize("correctable,status", [(100, "pass"), (101, "warn")])
def test_correctable_threshold_is_data(correctable, status, facts_of):
    facts = copy.deepcopy(facts_of(GOOD))
    facts["nics"][0]["aer"]["correctable"] = ph.parse_aer("RxErr %d\nTOTAL_ERR_COR %d\n" % (correctable, correctable))
    assert _by_id(ph.run_checks(facts, KNOWLEDGE))["pcie_aer"]["status"] == status


def test_platform_checks_include_the_pcie_block(sim_tree):
    facts = pc.gather(sim_tree("fault-acs-enabled"))
    knowledge = dict(GENERATIONS, pcie_health=KNOWLEDGE)
    results = _by_id(pc.run_checks(facts, knowledge, {"gpu_count": 8}))
    assert results["pci_acs"]["status"] == "fail" and results["gpu_pcie_speed_width"]["status"] == "pass"


def test_launch_env_gets_each_groups_nics_unless_the_user_set_one(facts_of, sim_model):
    aff = ph.nic_affinity(facts_of(GOOD))
    nics = {p["gpu"].rsplit(".", 1)[0]: p["nic"] for p in aff["pairs"]}
    files = {f["path"]: f["content"] for f in render(sim_model(GOOD), {"sizes": [4], "rdma_nics": nics})["files"]}
    assert "NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2,mlx5_3\n" in files["/etc/topotune/launch/size4-group0.env"]
    assert "NCCL_IB_HCA=mlx5_4,mlx5_5,mlx5_6,mlx5_7\n" in files["/etc/topotune/launch/size4-group1.env"]
    user = {f["path"]: f["content"] for f in render(sim_model(GOOD), {
        "sizes": [4], "rdma_nics": nics, "extra_env": {"NCCL_IB_HCA": "mlx5_7"}})["files"]}
    env = user["/etc/topotune/launch/size4-group0.env"]
    assert env.count("NCCL_IB_HCA=") == 1 and "NCCL_IB_HCA=mlx5_7\n" in env
    assert "NCCL_IB_HCA not set: NCCL_IB_HCA set by launch_templates_extra_env" in user["/etc/topotune/launch/README"]


def test_launch_readme_says_why_no_nic_is_set(facts_of, sim_model):
    aff = ph.nic_affinity(facts_of("fault-nic-far-numa"))
    files = {f["path"]: f["content"] for f in render(sim_model(GOOD), {"sizes": [4], "rdma_reason": aff["reason"]})[
        "files"]}
    assert "NCCL_IB_HCA" not in files["/etc/topotune/launch/size4-group0.env"]
    assert ("RDMA: NCCL_IB_HCA not set: GPU(s) 0000:0c:00.0 have no NIC below their own PCIe switch or root port"
            in files["/etc/topotune/launch/README"])
