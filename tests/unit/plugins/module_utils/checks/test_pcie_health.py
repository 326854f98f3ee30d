"""PCIe and RDMA health checks (module_utils/checks/pcie_health.py) on simulated nodes, their fault profiles and cited data."""

import copy
import os
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import pcie_health as ph
from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.module_utils.checks import rdma_health as rh
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import LaunchRenderError, render
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot  # noqa: E402 - sim/ is not a package

PROFILES = [name for name, _unused in sysroot.list_profiles()]
KNOWLEDGE = load_knowledge("pcie_health")
GENERATIONS = load_knowledge("gpu_generations")

GOOD = "mi300x-8gpu-spx"
# fault profile -> (check id, status, text the observation must name)
FAULTS = {
    "fault-acs-enabled": ("pci_acs", "fail", "0000:37:00.0 ACSCtl SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+"),
    "fault-nic-far-numa": ("rdma_gpu_nic_affinity", "warn", "GPU 0000:0c:00.0 (NUMA 0) has no NIC of its own"),
    "fault-aer-fatal": ("pcie_aer", "fail", "0000:af:00.0 fatal 1 (SDES)"),
    "fault-pcie-replays": ("pcie_replay", "fail", "0000:5c:00.0 12000 replay(s)"),
}
KNOWLEDGE_KEY = {"pci_acs": "acs", "rdma_gpu_nic_affinity": "rdma_affinity", "pcie_aer": "aer", "pcie_replay": "replay"}

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
    for key in ("acs", "rdma_affinity", "aspm", "ten_bit_tags", "ari", "large_bar", "aer", "replay"):
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
    assert results[check_id]["remediation"] and results[check_id]["source"] == KNOWLEDGE[KNOWLEDGE_KEY[check_id]]["source"]
    others = {i: r["status"] for i, r in results.items() if i != check_id}
    assert set(others.values()) == {"pass"}, others


# ------------------------------------------------------------------------------- every simulated profile
# What each profile's tree gives every PCIe check: pass unless named here. Profiles without pcie_tree (flat
# sys/bus/pci/devices, no NICs) are unknown on the checks that need the hierarchy or config space.
FLAT = {i: "unknown" for i in ph.CHECK_IDS if i != "pcie_replay"}
NOT_PASS = {
    "mi210-8gpu-2hive": FLAT,
    "fault-truncated-kfd": FLAT,
    # HPE Slingshot NICs (sys/class/cxi), no RDMA device: nothing NCCL_IB_HCA could pair
    "mi250x-8gcd": {"rdma_gpu_nic_affinity": "unknown"},
    # a VM: numa_node -1 on every device
    "fault-numa-minus1": {"rdma_gpu_nic_affinity": "unknown"},
}
NOT_PASS.update({name: {check_id: status} for name, (check_id, status, _text) in FAULTS.items()})


@pytest.mark.parametrize("profile", PROFILES)
def test_every_profile_gets_its_verdicts(profile, sim_tree):
    """Good profiles pass every PCIe check, each fault profile fails only its own, and a profile that cannot be
    judged is named in NOT_PASS: as the platform checks report them, with the node's generation (its levels)."""
    results = pc.run_checks(pc.gather(sim_tree(profile)), dict(GENERATIONS, pcie_health=KNOWLEDGE))
    got = {r["id"]: r["status"] for r in results if r["id"] in ph.CHECK_IDS}
    want = dict({i: "pass" for i in ph.CHECK_IDS}, **NOT_PASS.get(profile, {}))
    assert got == want, {r["id"]: r["observed"] for r in results if r["id"] in ph.CHECK_IDS}


def test_the_profile_table_is_complete():
    """Every profile with a pcie_tree is judged on it: the MI250X and CPX trees included (issue 24)."""
    with_tree = {name for name in PROFILES if sysroot.load_profile(name).get("pcie_tree")}
    assert {"mi250x-8gcd", "mi300x-8gpu-cpx", "mi300x-8gpu-cpx64", "mi308x-cpx", GOOD} <= with_tree
    assert set(PROFILES) - with_tree == {"mi210-8gpu-2hive", "fault-truncated-kfd"}
    assert {name for name, table in NOT_PASS.items() if table is FLAT} == set(PROFILES) - with_tree


def test_slingshot_nics_are_named_and_not_paired(facts_of):
    """mi250x-8gcd: the EX235a's Cassini NICs are no RDMA device; the result names them and says how RCCL reaches
    them instead of claiming the node runs single-node jobs only."""
    facts = facts_of("mi250x-8gcd")
    assert facts["nics"] == [] and facts["fabric_nics"] == {"cxi": ["cxi0", "cxi1", "cxi2", "cxi3"]}
    res = _by_id(ph.run_checks(facts, KNOWLEDGE))["rdma_gpu_nic_affinity"]
    assert res["observed"] == ("no RDMA device (sys/class/infiniband missing); HPE Slingshot NIC(s) cxi0, cxi1, cxi2, cxi3 "
                               "(sys/class/cxi)")
    assert "aws-ofi-rccl" in res["remediation"] and "single-node" not in res["remediation"]
    assert KNOWLEDGE["rdma_affinity"]["fabric_source"] in res["source"]
    plain = _by_id(ph.run_checks(dict(facts, fabric_nics={}), KNOWLEDGE))["rdma_gpu_nic_affinity"]
    assert plain["observed"] == "no RDMA device (sys/class/infiniband missing)" and "single-node" in plain["remediation"]


def test_mi250x_gcds_sit_directly_below_root_ports(facts_of):
    facts = facts_of("mi250x-8gcd")
    paths = {g["bdf"]: g["path"] for g in facts["gpus"]}
    assert paths["0000:c1:00.0"] == ["0000:c0:07.1"] and paths["0000:c6:00.0"] == ["0000:c4:07.1"]
    assert sorted(facts["bridges"]) == sorted(p[0] for p in paths.values())  # only the GCDs' root ports are judged
    results = _by_id(ph.run_checks(facts, KNOWLEDGE))
    assert results["pci_acs"]["observed"] == "ACS off on 8 bridge(s) (0 without the capability)"
    assert results["pcie_aspm"]["observed"] == "ASPM disabled on 16 link end(s)"
    # no resizable BAR capability modelled: the captured visible VRAM (all of it) decides
    assert results["gpu_large_bar"]["observed"] == "no resizable BAR capability; whole VRAM visible (63GB) on 8 GPU(s)"
    # an ACS bit on a GCD's root port fails, as on the switch ports of an MI300X node
    facts = copy.deepcopy(facts)
    facts["bridges"]["0000:c4:07.1"] = _acs(facts["bridges"]["0000:c4:07.1"], 0x0004)
    assert _by_id(ph.run_checks(facts, KNOWLEDGE))["pci_acs"]["observed"] == "0000:c4:07.1 ACSCtl ReqRedir+ (0x0004)"


@pytest.mark.parametrize("profile, gpus, functions", [("mi300x-8gpu-cpx", 8, 63), ("mi308x-cpx", 8, 32)])
def test_cpx_checks_judge_each_physical_gpu_once(profile, gpus, functions, facts_of):
    """CPX partitions are functions of their GPU's slot here: they share its bridges and NIC, and each check judges
    the GPU (its lowest function) once; AER counters are the GPU's."""
    facts = facts_of(profile)
    assert len(facts["gpus"]) == functions and len(ph._physical(facts["gpus"])) == gpus
    by_slot = {}
    for gpu in facts["gpus"]:
        by_slot.setdefault(gpu["bdf"].rsplit(".", 1)[0], set()).add(tuple(gpu["path"]))
    assert all(len(paths) == 1 for paths in by_slot.values()) and len(by_slot) == gpus
    assert [g["aer"]["fatal"] is not None for g in facts["gpus"]].count(True) == gpus
    results = _by_id(ph.run_checks(facts, KNOWLEDGE))
    assert results["pcie_aer"]["observed"] == "%d device(s) within the limits" % (gpus + 8)
    assert results["pcie_10bit_tags"]["observed"] == "enabled on %d GPU(s)" % gpus
    assert results["gpu_large_bar"]["observed"] == "BAR at 256GB on %d GPU(s)" % gpus
    aff = ph.nic_affinity(facts)
    assert [p["level"] for p in aff["pairs"]] == ["switch"] * gpus
    assert aff["nccl_ib_hca"] == "=" + ",".join("mlx5_%d" % k for k in range(8))
    # a partition function's own config bytes do not count: only the GPU's
    facts = copy.deepcopy(facts)
    partition = next(g for g in facts["gpus"] if g["bdf"].endswith(".1"))
    partition["config"] = _devctl2(partition["config"], 0)
    assert _by_id(ph.run_checks(facts, KNOWLEDGE))["pcie_10bit_tags"]["status"] == "pass"
    physical = next(g for g in facts["gpus"] if g["bdf"] == partition["bdf"][:-1] + "0")
    physical["config"] = _devctl2(physical["config"], 0)
    assert _by_id(ph.run_checks(facts, KNOWLEDGE, {"name": "MI300X"}))["pcie_10bit_tags"]["status"] == "fail"


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
    assert aff["nccl_ib_hca"] == "=" + ",".join("mlx5_%d" % k for k in range(8)) and aff["reason"] is None


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
    facts = facts_of("mi210-8gpu-2hive")  # a profile without pcie_tree: flat sys/bus/pci/devices dirs, no NICs
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


# ------------------------------------------------------------------------------------ pcie_replay
def _replays(facts, counts):
    """``facts`` with amdgpu's pcie_replay_count of the physical GPUs set in order (None: the file is absent)."""
    facts = copy.deepcopy(facts)
    for gpu, count in zip(ph._physical(facts["gpus"]), counts):
        gpu["replay_count"] = count
    return facts


def test_the_replay_counter_is_read_from_the_gpus_device_directory(facts_of):
    assert [g["replay_count"] for g in facts_of(GOOD)["gpus"]] == [0] * 8
    assert [g["replay_count"] for g in facts_of("fault-pcie-replays")["gpus"]] == [0, 0, 0, 12000, 0, 0, 0, 0]
    assert all("replay_count" not in n for n in facts_of(GOOD)["nics"])  # amdgpu's file: GPUs only


@pytest.mark.parametrize("count,status", [(0, "pass"), (100, "pass"), (101, "warn"), (10000, "warn"), (10001, "fail")])
def test_replay_levels_are_the_knowledge_files(count, status, facts_of):
    result = _by_id(ph.run_checks(_replays(facts_of(GOOD), [0, count]), KNOWLEDGE))["pcie_replay"]
    assert result["status"] == status
    assert result["expected"] == "pcie_replay_count <= 100 per GPU (warn above 100, fail above 10000)"
    if status != "pass":
        assert result["observed"] == "0000:22:00.0 %d replay(s)" % count and "marginal link" in result["remediation"]


def test_replay_levels_follow_edited_knowledge(facts_of):
    """The levels come from knowledge/pcie_health.yml replay: other values there, other verdicts."""
    knowledge = copy.deepcopy(KNOWLEDGE)
    knowledge["replay"].update(warn_above=5, fail_above=50, fail_level="warn")
    facts = _replays(facts_of(GOOD), [6])
    assert _by_id(ph.run_checks(facts, knowledge))["pcie_replay"]["status"] == "warn"
    assert _by_id(ph.run_checks(facts, KNOWLEDGE))["pcie_replay"]["status"] == "pass"
    over = _replays(facts_of(GOOD), [51])
    assert _by_id(ph.run_checks(over, knowledge))["pcie_replay"]["status"] == "warn"  # fail_level is data too
    assert _by_id(ph.run_checks(over, dict(knowledge, replay=dict(knowledge["replay"], fail_level="fail")))
                  )["pcie_replay"]["status"] == "fail"


def test_replay_without_the_file_is_unknown_with_the_reason(facts_of):
    result = _by_id(ph.run_checks(_replays(facts_of(GOOD), [None] * 8), KNOWLEDGE))["pcie_replay"]
    assert result["status"] == "unknown"
    assert result["observed"].startswith("no pcie_replay_count on any GPU (amdgpu not loaded, an SR-IOV VF")
    some = _by_id(ph.run_checks(_replays(facts_of(GOOD), [None, 0]), KNOWLEDGE))["pcie_replay"]
    assert (some["status"], some["observed"]) == ("unknown", "no pcie_replay_count on 0000:0c:00.0")
    # a GPU over the levels still fails when another's file is missing, and both are named
    both = _by_id(ph.run_checks(_replays(facts_of(GOOD), [None, 20000]), KNOWLEDGE))["pcie_replay"]
    assert (both["status"], both["observed"]) == ("fail", "0000:22:00.0 20000 replay(s); no pcie_replay_count on "
                                                          "0000:0c:00.0")


# ------------------------------------------------------------------------------- pcie_aer firmware-first
def test_gather_sees_the_hest_table(tmp_path):
    assert ph.gather(str(tmp_path))["hest"] is False
    hest = tmp_path / ph.HEST_TABLE
    hest.parent.mkdir(parents=True)
    hest.write_bytes(b"HEST")
    assert ph.gather(str(tmp_path))["hest"] is True


def test_aer_says_when_firmware_first_can_hide_errors(facts_of):
    facts = dict(facts_of(GOOD), hest=True)
    result = _by_id(ph.run_checks(facts, KNOWLEDGE))["pcie_aer"]
    note = " ".join(KNOWLEDGE["aer"]["firmware_first_note"].split())
    assert result["status"] == "pass" and result["id"] == "pcie_aer"
    assert result["observed"] == "16 device(s) within the limits; %s: read the BMC's PCIe error log too" % note
    assert KNOWLEDGE["aer"]["firmware_first_source"] in result["source"]
    plain = _by_id(ph.run_checks(facts_of(GOOD), KNOWLEDGE))["pcie_aer"]
    assert plain["observed"] == "16 device(s) within the limits" and "HEST" not in plain["source"]
    # no counters at all: the unknown says it too
    bare = copy.deepcopy(facts)
    for dev in bare["gpus"] + bare["nics"]:
        dev["aer"] = {kind: None for kind in ph.AER_KINDS}
    result = _by_id(ph.run_checks(bare, KNOWLEDGE))["pcie_aer"]
    assert result["status"] == "unknown" and result["observed"].endswith(note)
    # an error the counters did see is still judged
    facts["gpus"][0]["aer"]["fatal"] = ph.parse_aer("SDES 1\nTOTAL_ERR_FATAL 1\n")
    assert _by_id(ph.run_checks(facts, KNOWLEDGE))["pcie_aer"]["status"] == "fail"


def test_platform_checks_include_the_pcie_block(sim_tree):
    facts = pc.gather(sim_tree("fault-acs-enabled"))
    knowledge = dict(GENERATIONS, pcie_health=KNOWLEDGE)
    results = _by_id(pc.run_checks(facts, knowledge, {"gpu_count": 8}))
    assert results["pci_acs"]["status"] == "fail" and results["gpu_pcie_speed_width"]["status"] == "pass"


def _launch(sim_model, profile, options):
    files = render(sim_model(profile), dict({"sizes": [4]}, **options))["files"]
    return {f["path"].rsplit("/", 1)[1]: f["content"] for f in files}


def _env(text):
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


def test_launch_env_gets_each_groups_nics_and_gid_unless_the_user_set_one(sim_tree, sim_model):
    options = rh.launch_rdma_options(sim_tree(GOOD))
    assert options["rdma_nics"]["0000:0c:00"] == "mlx5_0"
    assert options["rdma_ports"]["mlx5_0"] == [{"port": 1, "active": True, "gid_index": 3, "gid_reason": None}]
    files = _launch(sim_model, GOOD, options)
    group0, group1 = _env(files["size4-group0.env"]), _env(files["size4-group1.env"])
    assert group0["NCCL_IB_HCA"] == "=mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1"
    assert group1["NCCL_IB_HCA"] == "=mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
    assert group0["NCCL_IB_GID_INDEX"] == group1["NCCL_IB_GID_INDEX"] == "3"
    assert "RDMA: NCCL_IB_GID_INDEX in each group's env file = 3, the RoCE v2 GID of its NICs' ports" in files["README"]
    user = _launch(sim_model, GOOD, dict(options, extra_env={"NCCL_IB_HCA": "mlx5_7"}))
    env = user["size4-group0.env"]
    assert env.count("NCCL_IB_HCA=") == 1 and "NCCL_IB_HCA=mlx5_7\n" in env and "NCCL_IB_GID_INDEX" not in env
    assert "NCCL_IB_HCA not set: NCCL_IB_HCA set by launch_templates_extra_env" in user["README"]
    assert "NCCL_IB_GID_INDEX not set node-wide: NCCL_IB_HCA is not set (NCCL_IB_HCA set by" in user["README"]
    gid = _launch(sim_model, GOOD, dict(options, extra_env={"NCCL_IB_GID_INDEX": "5"}))["size4-group0.env"]
    assert gid.count("NCCL_IB_GID_INDEX=") == 1 and "NCCL_IB_GID_INDEX=5\n" in gid and "NCCL_IB_HCA==mlx5_0:1," in gid


def _rccl_selects(value, devices):
    """What RCCL's NCCL_IB_HCA filter keeps of ``devices`` (name, port): ncclIbInit and matchIfList/matchIf
    (ROCm/rccl src/transport/net_ib.cc, src/misc/utils.cc): ^ excludes, then = compares whole names, otherwise
    each entry is a prefix; :port limits an entry to a port."""
    exclude = value.startswith("^")
    value = value[1:] if exclude else value
    exact = value.startswith("=")
    value = value[1:] if exact else value
    entries = [(e.partition(":")[0], int(e.partition(":")[2]) if e.partition(":")[2] else None)
               for e in value.split(",") if e]

    def match(name, port):
        return any((name == ref if exact else name.startswith(ref)) and (want is None or want == port)
                   for ref, want in entries)
    return [(name, port) for name, port in devices if match(name, port) != exclude]


def test_each_group_selects_exactly_its_nics_where_names_share_prefixes(sim_tree, sim_model):
    """mlx5_1 as a prefix also selects mlx5_10..mlx5_19: on a node with 20 RDMA devices (two per NIC port and
    storage NICs) only the exact names keep a group on its own NICs."""
    options = rh.launch_rdma_options(sim_tree(GOOD))
    devices = [("mlx5_%d" % k, 1) for k in range(20)]
    files = _launch(sim_model, GOOD, options)
    for group, nics in ((0, range(4)), (1, range(4, 8))):
        value = _env(files["size4-group%d.env" % group])["NCCL_IB_HCA"]
        assert _rccl_selects(value, devices) == [("mlx5_%d" % k, 1) for k in nics]
    # the same list without =: group 0 would also take mlx5_10..mlx5_19, the other group's rails and the rest
    loose = _rccl_selects(_env(files["size4-group0.env"])["NCCL_IB_HCA"].lstrip("="), devices)
    assert [name for name, _port in loose] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"] + [
        "mlx5_%d" % k for k in range(10, 20)]
    # the nic_affinity suggestion (platform check observation) is exact as well
    assert _rccl_selects(ph.nic_affinity(ph.gather(sim_tree(GOOD)))["nccl_ib_hca"], devices) == devices[:8]


def test_groups_whose_ports_disagree_on_the_gid_index_get_none(sim_tree, sim_model):
    options = copy.deepcopy(rh.launch_rdma_options(sim_tree(GOOD)))
    options["rdma_ports"]["mlx5_5"][0]["gid_index"] = 5  # another address before the IPv4 one on that netdev
    files = _launch(sim_model, GOOD, options)
    assert _env(files["size4-group0.env"])["NCCL_IB_GID_INDEX"] == "3"
    assert "NCCL_IB_GID_INDEX" not in _env(files["size4-group1.env"])
    assert ("NCCL_IB_GID_INDEX not set node-wide: the RoCE v2 GID is at different indices on these ports (mlx5_0:1 3, "
            in files["README"])
    assert "the groups whose ports agree have it in their env files (3)" in files["README"]


def test_a_nic_without_an_active_port_gets_no_suggestion(sim_tree, sim_model):
    options = copy.deepcopy(rh.launch_rdma_options(sim_tree(GOOD)))
    options["rdma_ports"]["mlx5_2"][0]["active"] = False
    files = _launch(sim_model, GOOD, options)
    assert "NCCL_IB_HCA" not in _env(files["size4-group0.env"]) and "NCCL_IB_GID_INDEX" not in _env(
        files["size4-group0.env"])
    assert _env(files["size4-group1.env"])["NCCL_IB_HCA"] == "=mlx5_4:1,mlx5_5:1,mlx5_6:1,mlx5_7:1"
    assert "NCCL_IB_HCA not set: mlx5_2 has no ACTIVE port (sys/class/infiniband/mlx5_2/ports/*/state)" in files[
        "README"]


def test_launch_readme_says_why_no_nic_is_set(facts_of, sim_model):
    aff = ph.nic_affinity(facts_of("fault-nic-far-numa"))
    files = _launch(sim_model, GOOD, {"rdma_reason": aff["reason"]})
    assert "NCCL_IB_HCA" not in files["size4-group0.env"] and "NCCL_IB_GID_INDEX" not in files["size4-group0.env"]
    assert ("RDMA: NCCL_IB_HCA not set: GPU(s) 0000:0c:00.0 have no NIC below their own PCIe switch or root port"
            in files["README"])


def test_a_withheld_node_gets_no_nic_whatever_its_pairing_and_the_readme_says_why(sim_tree, sim_model):
    options = rh.launch_rdma_options(sim_tree(GOOD))
    reason = "its rails differ from the other nodes of its hardware class in this run (rail_consistency: rail 0 ...)"
    files = _launch(sim_model, GOOD, dict(options, rdma_withheld=reason))
    for name in ("size4-group0.env", "size4-group1.env"):
        assert "NCCL_IB_HCA" not in files[name] and "NCCL_IB_GID_INDEX" not in files[name]
    assert "RDMA: NCCL_IB_HCA not set: withheld: %s\n" % reason in files["README"]
    # the user's own value still wins, and a reason that is not text is refused naming the option
    user = _launch(sim_model, GOOD, dict(options, rdma_withheld=reason, extra_env={"NCCL_IB_HCA": "mlx5_7"}))
    assert "NCCL_IB_HCA=mlx5_7\n" in user["size4-group0.env"]
    with pytest.raises(LaunchRenderError, match="rdma_withheld"):
        _launch(sim_model, GOOD, dict(options, rdma_withheld=["rail 0"]))


# --------------------------------------------------------------- acs_bridges: pci_acs's selection, and the ACS fix's
def test_acs_bridges_are_every_bridge_above_the_gpus_and_nics_once(facts_of):
    facts = facts_of(GOOD)
    good = ph.acs_bridges(facts)
    assert good["unknown"] is None and good["enabled"] == []
    on_paths = sorted({b for d in facts["gpus"] + facts["nics"] for b in d["path"]})
    assert [b["bdf"] for b in good["bridges"]] == on_paths and len(on_paths) == 32
    assert all(b["control"] == 0 and b["flags"] == [] for b in good["bridges"])
    # a NIC's own switch port is one of them (0000:0b:01.0 above NIC 0000:0d:00.0, no GPU below it)
    nic = next(n for n in facts["nics"] if n["bdf"] == "0000:0d:00.0")
    assert nic["path"][-1] == "0000:0b:01.0" and not any("0000:0b:01.0" in g["path"] for g in facts["gpus"])
    assert "0000:0b:01.0" in on_paths
    # a partitioned GPU's other functions add no bridge
    split = copy.deepcopy(facts)
    split["gpus"].append(dict(split["gpus"][0], bdf=split["gpus"][0]["bdf"][:-1] + "1", path=["0000:ff:00.0"]))
    assert ph.acs_bridges(split)["bridges"] == good["bridges"]


def test_acs_bridges_enabled_are_exactly_what_pci_acs_names(facts_of):
    facts = copy.deepcopy(facts_of("fault-acs-enabled"))
    facts["bridges"]["0000:09:01.1"] = _acs(facts["bridges"]["0000:09:01.1"], 0x0080)  # a root port, IORB only
    found = ph.acs_bridges(facts)
    assert [(b["bdf"], b["control"], b["flags"]) for b in found["enabled"]] == [
        ("0000:09:01.1", 0x0080, ["IORB"]), ("0000:37:00.0", 0x001D, ["SrcValid", "ReqRedir", "CmpltRedir", "UpstreamFwd"])]
    res = _by_id(ph.run_checks(facts, KNOWLEDGE))["pci_acs"]
    assert [part.split()[0] for part in res["observed"].split("; ")] == [b["bdf"] for b in found["enabled"]]
    assert "kernel_tuning_acs_disable: true" in res["remediation"]
    # against another expected value: the bridges not at it
    assert [b["bdf"] for b in ph.acs_bridges(facts, want=0x001D)["enabled"]] == [
        b["bdf"] for b in found["bridges"] if b["bdf"] != "0000:37:00.0"]


def test_acs_bridges_say_why_they_cannot_be_told(facts_of):
    assert ph.acs_bridges({"gpus": [], "nics": [], "bridges": {}})["unknown"] == ("no_devices", "no GPU or RDMA NIC")
    flat = ph.acs_bridges(facts_of("mi210-8gpu-2hive"))  # the one profile without a PCIe tree
    assert flat["unknown"][0] == "flat" and flat["bridges"] == []
    short = ph.acs_bridges(_truncated(facts_of(GOOD), 256))
    assert short["unknown"][0] == "unreadable" and "extended space" in short["unknown"][1] and short["bridges"] == []


def test_the_fix_pci_acs_names_is_a_variable_of_role_kernel_tuning():
    from ansible_collections.topotune.instinct.plugins.module_utils.core.options import role_variables
    from ansible_collections.topotune.instinct.plugins.module_utils.state.kernel_runtime import OPTIONS

    fix = KNOWLEDGE["acs"]["fix"]
    assert fix["role_variable"] in role_variables(OPTIONS, "kernel_tuning").values() and fix["source"].strip()
