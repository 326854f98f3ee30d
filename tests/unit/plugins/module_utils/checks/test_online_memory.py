"""Issue 24's read-only checks on every simulated node: ``online_memory`` (platform_checks.py: online memory blocks
against the generation's minimum of AMD's acceptance guide, or platform_checks_expected.min_online_memory_gib),
``pcie_replay`` (pcie_health.py: amdgpu's pcie_replay_count) and the RDMA NIC checks (rdma_health.py:
``rdma_nic_pcie_link``, ``rdma_port_state``, ``rdma_gid``; test_rdma_health.py has the rest). Each passes on every good
profile (the RDMA checks: every profile with NICs; ``unknown`` with the reason on the others) and fails on its own
fault profile only; its levels are the knowledge files'."""

import copy
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import expected_values as ev
from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.module_utils.checks import rdma_health as rh
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import cards, load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
PROFILES = sorted(name[:-4] for name in os.listdir(os.path.join(REPO, "sim", "profiles")) if name.endswith(".yml"))
KNOWLEDGE = dict(load_knowledge("gpu_generations"), pcie_health=load_knowledge("pcie_health"),
                 gpu_health=load_knowledge("gpu_health"))
GOOD = "mi300x-8gpu-spx"
# the check -> its own fault profile, its status there and what the observation says
OWN_FAULT = {
    "online_memory": ("fault-memory-offline", "fail", "1152 GiB online, 1152 GiB in offline blocks"),
    "pcie_replay": ("fault-pcie-replays", "fail", "0000:5c:00.0 12000 replay(s)"),
    "rdma_nic_pcie_link": ("fault-nic-x8", "fail",
                           "downgraded: mlx5_2 (0000:39:00.0) x8 16.0 GT/s, capable of x16 32.0 GT/s, ConnectX-7: x16 "
                           "32.0 GT/s"),
    "rdma_port_state": ("fault-rdma-port-down", "fail", "mlx5_5:1 (0000:b0:00.0) state 1: DOWN, phys_state 2: Polling"),
    "rdma_gid": ("fault-gid-missing", "fail",
                 "mlx5_6:1 (0000:c0:00.0): only link-local RoCE v2 GIDs (index 1): its netdev enp192s0np0 has no IP "
                 "address RCCL could route to"),
}
GIB = 1 << 30


def _by_id(results):
    return {r["id"]: r for r in results}


@pytest.mark.parametrize("profile", PROFILES)
def test_each_check_passes_everywhere_but_on_its_own_fault(profile, node_checks):
    facts, results = node_checks(profile)
    for check_id, (fault, status, text) in OWN_FAULT.items():
        result = results[check_id]
        if profile == fault:
            assert (result["status"], result["observed"]) == (status, text), result
            assert result["remediation"] and result["source"]
        elif check_id in rh.CHECK_IDS and not facts["rdma"]["nics"]:
            # the profiles without RDMA NICs (MI250X, MI210, the CPX captures): unknown, and why
            assert (result["status"], result["observed"]) == (
                "unknown", "no RDMA device (sys/class/infiniband missing)"), (check_id, result)
        else:
            assert result["status"] == "pass", (check_id, result)


def test_online_memory_names_the_minimum_and_its_source(node_checks):
    _facts, results = node_checks(GOOD)
    result = results["online_memory"]
    assert result["observed"] == "2304 GiB online"
    assert result["expected"] == ">= 1536 GiB online (fail below: MI300X's min_gib); >= 2048 GiB online (warn below: " \
                                 "MI300X's recommended_gib)"
    assert "docs/gpus/mi300x.md" in result["source"] and "(e42af24)" in result["source"]
    assert result["cvs"] == "test_check_online_memory"


def _memory(facts, online_gib, offline_gib=0, name=None):
    facts = copy.deepcopy(facts)
    facts["expected"]["online_memory_bytes"] = None if online_gib is None else int(online_gib * GIB)
    facts["expected"]["offline_memory_bytes"] = int(offline_gib * GIB)
    return facts


@pytest.mark.parametrize("gib,status", [(1535.9, "fail"), (1536, "warn"), (2047, "warn"), (2048, "pass")])
def test_mi300x_fails_below_the_page_and_warns_below_the_recommendation(gib, status, node_checks):
    facts, _results = node_checks(GOOD)
    result = _by_id(pc.run_checks(_memory(facts, gib), KNOWLEDGE))["online_memory"]
    assert result["status"] == status
    if status == "warn":
        assert result["remediation"].startswith("below 2048 GiB (MI300X's recommended_gib): check DIMM population")


def test_the_minimum_is_the_cards(node_checks):
    """Edited knowledge, other verdicts: the figures and levels are read from the view, not built in."""
    facts, _results = node_checks(GOOD)
    knowledge = copy.deepcopy(KNOWLEDGE)
    knowledge["host"]["online_memory"]["generations"]["MI300X"].update(min_gib=4096)
    assert _by_id(pc.run_checks(facts, knowledge))["online_memory"]["status"] == "fail"
    knowledge["host"]["online_memory"]["below_min"] = "warn"
    assert _by_id(pc.run_checks(facts, knowledge))["online_memory"]["status"] == "warn"
    assert _by_id(pc.run_checks(facts, KNOWLEDGE))["online_memory"]["status"] == "pass"


@pytest.mark.parametrize("profile,gib,status", [
    ("mi308x-cpx", 2047, "warn"),          # MI308X: only the recommended minimum (no product page)
    ("mi308x-cpx", 1024, "warn"),
    ("mi250x-8gcd", 1023, "fail"),         # MI250X: the MI250 page's 1T, no recommendation
    ("mi210-8gpu-2hive", 511, "fail"),
    ("mi210-8gpu-2hive", 512, "pass"),
])
def test_each_generation_has_its_own_minimum(profile, gib, status, node_checks):
    facts, _results = node_checks(profile)
    assert _by_id(pc.run_checks(_memory(facts, gib), KNOWLEDGE))["online_memory"]["status"] == status


def test_the_pinned_expectation_replaces_the_generations_minimum(node_checks):
    facts, _results = node_checks(GOOD)
    pinned = _by_id(pc.run_checks(facts, KNOWLEDGE, {"expected": {"min_online_memory_gib": 3072}}))
    assert "expected_online_memory" not in pinned  # one check owns the fact
    result = pinned["online_memory"]
    assert (result["status"], result["expected"]) == (
        "fail", ">= 3072 GiB online (fail below: platform_checks_expected.min_online_memory_gib)")
    assert result["source"].startswith("platform_checks_expected.min_online_memory_gib")
    offline, _results = node_checks("fault-memory-offline")
    low = _by_id(pc.run_checks(offline, KNOWLEDGE, {"expected": {"min_online_memory_gib": 1024}}))["online_memory"]
    assert low["status"] == "pass"  # below AMD's 1.5T, above the site's pin: the pin decides


def test_unknown_with_the_reason_never_pass(node_checks, tmp_path):
    facts, _results = node_checks(GOOD)
    blind = _by_id(pc.run_checks(_memory(facts, None), KNOWLEDGE))["online_memory"]
    assert blind["status"] == "unknown" and blind["observed"].startswith("no online memory blocks under "
                                                                         "sys/devices/system/memory")
    facts_without = dict(facts, expected=ev.gather(str(tmp_path)))
    assert _by_id(pc.run_checks(facts_without, KNOWLEDGE))["online_memory"]["status"] == "unknown"
    # no generation and no pin: nothing to judge by
    nogpu = copy.deepcopy(facts)
    nogpu["gpus"] = []
    result = _by_id(pc.run_checks(nogpu, KNOWLEDGE))["online_memory"]
    assert (result["status"], result["expected"]) == ("unknown", "a minimum: GPU generation unknown")
    assert "platform_checks_expected.min_online_memory_gib" in result["remediation"]
    # a generation whose card says unknown: its reason
    knowledge = copy.deepcopy(KNOWLEDGE)
    knowledge["host"]["online_memory"]["generations"]["MI300X"] = {"unknown": "no page names one"}
    result = _by_id(pc.run_checks(facts, knowledge))["online_memory"]
    assert (result["status"], result["expected"]) == ("unknown", "a minimum: no page names one")


def test_every_card_gives_a_sourced_minimum_or_says_why_not():
    for card in cards():
        entry = card["online_memory"]
        if "unknown" in entry:
            assert entry["unknown"].strip(), card["name"]
            continue
        assert entry.get("min_gib") or entry.get("recommended_gib"), card["name"]
        assert entry["sources"] and all(len(s["commit"]) == 40 and s["says"] and s["section"]
                                        for s in entry["sources"]), card["name"]
