"""RDMA NIC checks (module_utils/checks/rdma_health.py): ``rdma_nic_pcie_link``, ``rdma_port_state`` and ``rdma_gid`` on
every simulated node and their fault profiles, edited facts, AMD's published ``rdma link`` output and a ConnectX-6
``show_gids`` capture laid out as the sysfs trees the checks read; the GID tables, ``proc/net/route`` and the rails."""

import copy
import json
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import pcie_health as ph
from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.module_utils.checks import rdma_health as rh
from ansible_collections.topotune.instinct.plugins.modules import platform_checks as module
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
KNOWLEDGE = load_knowledge("pcie_health")
PLATFORM = dict(load_knowledge("gpu_generations"), pcie_health=KNOWLEDGE, gpu_health=load_knowledge("gpu_health"))
GOOD = "mi300x-8gpu-spx"
# each check -> its own fault profile, its status there and what the observation says
OWN_FAULT = {
    "rdma_nic_pcie_link": ("fault-nic-x8", "fail",
                           "downgraded: mlx5_2 (0000:39:00.0) x8 16.0 GT/s, capable of x16 32.0 GT/s, ConnectX-7: x16 "
                           "32.0 GT/s"),
    "rdma_port_state": ("fault-rdma-port-down", "fail", "mlx5_5:1 (0000:b0:00.0) state 1: DOWN, phys_state 2: Polling"),
    "rdma_gid": ("fault-gid-missing", "fail",
                 "mlx5_6:1 (0000:c0:00.0): only link-local RoCE v2 GIDs (index 1): its netdev enp192s0np0 has no IP "
                 "address RCCL could route to"),
}
KNOWLEDGE_KEY = {"rdma_nic_pcie_link": "rdma_nic_pcie_link", "rdma_port_state": "rdma_port", "rdma_gid": "rdma_gid"}
CVS = {"rdma_nic_pcie_link": "test_check_be_nic_pcie_speed_width", "rdma_port_state": "test_interface_name_consistency",
       "rdma_gid": "test_gid_consistency"}
NICS = ["0000:0d:00.0", "0000:23:00.0", "0000:39:00.0", "0000:5d:00.0", "0000:a0:00.0", "0000:b0:00.0", "0000:c0:00.0",
        "0000:e0:00.0"]
NETDEVS = ["enp13s0np0", "enp35s0np0", "enp57s0np0", "enp93s0np0", "enp160s0np0", "enp176s0np0", "enp192s0np0",
           "enp224s0np0"]


def _by_id(results):
    return {r["id"]: r for r in results}


@pytest.fixture(scope="module")
def node(sim_tree):
    """``node(profile)``: ``(rdma facts, pcie affinity, rdma results)`` of the profile's tree, once per module."""
    cache = {}

    def get(name):
        if name not in cache:
            root = sim_tree(name)
            facts, affinity = rh.gather(root), ph.nic_affinity(ph.gather(root))
            cache[name] = (facts, affinity, _by_id(rh.run_checks(facts, KNOWLEDGE, {}, affinity)))
        return cache[name]
    return get


def _check(facts, check_id, knowledge=KNOWLEDGE, options=None, affinity=None):
    return _by_id(rh.run_checks(facts, knowledge, options or {}, affinity))[check_id]


# --------------------------------------------------------------------------------------------- knowledge
def test_knowledge_is_sourced_and_the_levels_are_data():
    for key in ("rdma_nic_pcie_link", "rdma_port", "rdma_gid"):
        assert KNOWLEDGE[key]["source"].strip(), key
    assert all(model["source"].strip() and model["vendor"].startswith("0x") for model in
               KNOWLEDGE["rdma_nic_pcie_link"]["models"])
    assert KNOWLEDGE["rdma_port"]["rate_source"].strip() and KNOWLEDGE["rdma_port"]["min_rate_gbps"] == 400
    assert set(KNOWLEDGE["rdma_port"]["counters"]) == set(rh.COUNTERS)


# ------------------------------------------------------------------------------------------ fault profiles
# (each check on every profile, pass or unknown without NICs: test_online_memory.py, issue 24's checks on every node)
@pytest.mark.parametrize("fault", sorted(fault for fault, _status, _text in OWN_FAULT.values()))
def test_an_rdma_fault_changes_its_own_check_and_nothing_else(fault, sim_tree):
    """Every platform check (configuration, PCIe, GPU health) gives on the fault profile what it gives on its base."""
    own = next(check_id for check_id, (name, _s, _t) in OWN_FAULT.items() if name == fault)

    def results(profile):
        # the kernel log check names the file it read: the same file under each root
        root = sim_tree(profile)
        return _by_id(json.loads(json.dumps(pc.run_checks(pc.gather(root), PLATFORM)).replace(root, "ROOT")))
    base, faulty = results(GOOD), results(fault)
    assert set(base) == set(faulty) and set(rh.CHECK_IDS) <= set(base)
    changed = sorted(check_id for check_id in base if base[check_id] != faulty[check_id])
    assert changed == [own]
    _fault, status, text = OWN_FAULT[own]
    assert (base[own]["status"], faulty[own]["status"], faulty[own]["observed"]) == ("pass", status, text)
    assert faulty[own]["remediation"] and KNOWLEDGE[KNOWLEDGE_KEY[own]]["source"] in faulty[own]["source"]
    assert faulty[own]["cvs"] == CVS[own]


def test_the_good_node_reads_like_the_kernels_files(node):
    facts, _affinity, results = node(GOOD)
    nic = facts["nics"][2]
    assert (nic["name"], nic["bdf"], nic["vf"], nic["vendor"], nic["device"], nic["fw_ver"]) == (
        "mlx5_2", "0000:39:00.0", False, "0x15b3", "0x1021", "28.39.1002")
    assert nic["link"] == {"current_speed_gts": 32.0, "max_speed_gts": 32.0, "current_width": 16, "max_width": 16}
    [port] = nic["ports"]
    assert (port["state"], port["phys_state"], port["rate"], port["rate_gbps"], port["counters"], port["netdevs"]) == (
        "4: ACTIVE", "5: LinkUp", "400 Gb/sec (4X NDR)", 400.0, {"link_downed": 0, "link_error_recovery": 0},
        ["enp57s0np0"])
    assert facts["netdevs"]["enp57s0np0"] == {"operstate": "up", "speed_mbps": 400000, "address": "b8:3f:d2:02:1c:2d",
                                              "dev_port": 0, "ipv4_subnets": ["10.2.0.0/24"]}
    assert facts["routes"] == {netdev: ["10.%d.0.0/24" % k] for k, netdev in enumerate(NETDEVS)}
    assert {r["cvs"] for r in results.values()} == set(CVS.values()) and list(results) == list(rh.CHECK_IDS)
    assert results["rdma_nic_pcie_link"]["observed"] == "8 NIC link(s) at their capability: x16 32.0 GT/s on 8"
    assert results["rdma_port_state"]["observed"] == (
        "8 port(s) ACTIVE/LinkUp: 400 Gb/sec (4X NDR) on 8; 8 rail port(s) at >= 400 Gb/s; link_downed, "
        "link_error_recovery within the limits")
    assert results["rdma_gid"]["observed"] == "RoCE v2 GID at index 3 on 8 Ethernet port(s)"
    assert KNOWLEDGE["rdma_port"]["rate_source"] in results["rdma_port_state"]["source"]
    assert KNOWLEDGE["rdma_nic_pcie_link"]["models"][0]["source"] in results["rdma_nic_pcie_link"]["source"]


# ------------------------------------------------------------------------------------------- PCIe link
def _link(facts, position, **link):
    facts = copy.deepcopy(facts)
    facts["nics"][position]["link"].update(link)
    return facts


@pytest.mark.parametrize("link,status,text", [
    # a card in a Gen4 slot: its own max is Gen5
    ({"current_speed_gts": 16.0}, "fail", "mlx5_1 (0000:23:00.0) x16 16.0 GT/s, capable of x16 32.0 GT/s"),
    # the card itself reports less than the model is built for (max x8 Gen4): the model's link decides
    ({"current_speed_gts": 16.0, "max_speed_gts": 16.0, "current_width": 8, "max_width": 8}, "fail",
     "mlx5_1 (0000:23:00.0) x8 16.0 GT/s, capable of x8 16.0 GT/s, ConnectX-7: x16 32.0 GT/s"),
    # max unreadable: the model's link still judges
    ({"max_speed_gts": None, "max_width": None}, "pass", "8 NIC link(s) at their capability"),
    ({"current_width": None}, "unknown", "current_link_speed/width or max_link_* not readable on mlx5_1 (0000:23:00.0); "
                                         "at their capability: 7"),
])
def test_nic_links_are_judged_against_capability_and_model(link, status, text, node):
    result = _check(_link(node(GOOD)[0], 1, **link), "rdma_nic_pcie_link")
    assert result["status"] == status and text in result["observed"], result


def test_an_unlisted_model_is_judged_against_its_own_capability(node):
    facts = _link(node(GOOD)[0], 0, current_width=4)
    facts["nics"][0]["device"] = "0x101d"  # not in rdma_nic_pcie_link.models
    result = _check(facts, "rdma_nic_pcie_link")
    assert result["status"] == "fail" and result["observed"] == (
        "downgraded: mlx5_0 (0000:0d:00.0) x4 32.0 GT/s, capable of x16 32.0 GT/s")
    facts["nics"][0]["link"].update(max_width=None)
    assert _check(facts, "rdma_nic_pcie_link")["status"] == "unknown"  # neither a capability nor a model


def test_vfs_and_software_devices_are_not_backend_nics(node):
    facts = copy.deepcopy(node(GOOD)[0])
    for nic in facts["nics"]:
        nic["vf"] = True
    for check_id in rh.CHECK_IDS:
        result = _check(facts, check_id)
        assert result["status"] == "unknown" and result["observed"] == (
            "no RDMA device is a PCI physical function: mlx5_0, mlx5_1, mlx5_2, mlx5_3 and 4 more SR-IOV virtual "
            "function(s): their physical functions are judged on the host")
    facts = {"rdma_dir": True, "nics": [dict(copy.deepcopy(node(GOOD)[0]["nics"][0]), name="rxe0", bdf=None)],
             "netdevs": {}, "routes": {}}
    assert "rxe0 not a PCI function (a software RDMA device" in _check(facts, "rdma_port_state")["observed"]
    empty = {"rdma_dir": True, "nics": [], "netdevs": {}, "routes": None}
    assert _check(empty, "rdma_gid")["observed"] == "no RDMA device (sys/class/infiniband empty)"
    assert rh.run_checks({}, KNOWLEDGE) == []


# ------------------------------------------------------------------------------------------ port state
def _with_port(facts, position, **change):
    facts = copy.deepcopy(facts)
    facts["nics"][position]["ports"][0].update(change)
    return facts


@pytest.mark.parametrize("phys", ["2: Polling", "3: Disabled", "4: PortConfigurationTraining", "6: LinkErrorRecovery"])
def test_a_port_without_its_link_fails(phys, node):
    facts, affinity, _results = node(GOOD)
    result = _check(_with_port(facts, 4, phys_state=phys), "rdma_port_state", affinity=affinity)
    assert result["status"] == "fail"
    assert result["observed"] == "mlx5_4:1 (0000:a0:00.0) state 4: ACTIVE, phys_state %s" % phys
    assert "cable or transceiver" in result["remediation"]


@pytest.mark.parametrize("rate,status", [("400 Gb/sec (4X NDR)", "pass"), ("800 Gb/sec (8X NDR)", "pass"),
                                         ("200 Gb/sec (4X HDR)", "fail"), ("2.5 Gb/sec (1X SDR)", "fail")])
def test_a_rail_below_the_rate_fails(rate, status, node):
    facts, affinity, _results = node(GOOD)
    changed = _with_port(facts, 7, rate=rate, rate_gbps=rh.parse_rate(rate))
    result = _check(changed, "rdma_port_state", affinity=affinity)
    assert result["status"] == status
    if status == "fail":
        assert result["observed"] == "rate mlx5_7:1 (0000:e0:00.0) %s below 400 Gb/s" % rate
        assert "ethtool -s <netdev> speed 400000 autoneg off" in result["remediation"]
    # a NIC no GPU pairs with (a frontend or storage NIC) is not a rail: its rate is reported, not judged
    others = copy.deepcopy(affinity)
    others["pairs"] = [p for p in others["pairs"] if p["nic"] != "mlx5_7"]
    result = _check(changed, "rdma_port_state", affinity=others)
    assert result["status"] == "pass" and "rate not judged on mlx5_7 (no GPU pairs with them: not a rail)" in \
        result["observed"]


def test_without_an_expected_rate_only_the_state_is_judged_and_said(node):
    facts, affinity, _results = node(GOOD)
    knowledge = copy.deepcopy(KNOWLEDGE)
    del knowledge["rdma_port"]["min_rate_gbps"]
    slow = _with_port(facts, 0, rate="100 Gb/sec (4X EDR)", rate_gbps=100.0)
    result = _check(slow, "rdma_port_state", knowledge, affinity=affinity)
    assert result["status"] == "pass" and "rate not judged: knowledge/pcie_health.yml rdma_port gives no " \
        "min_rate_gbps" in result["expected"]
    assert KNOWLEDGE["rdma_port"]["rate_source"] not in result["source"]


def test_without_a_rate_file_the_netdevs_speed_is_judged(node):
    facts, affinity, _results = node(GOOD)
    facts = _with_port(facts, 3, rate=None, rate_gbps=None)
    assert _check(facts, "rdma_port_state", affinity=affinity)["status"] == "pass"
    facts["netdevs"]["enp93s0np0"]["speed_mbps"] = 200000
    result = _check(facts, "rdma_port_state", affinity=affinity)
    assert (result["status"], result["observed"]) == (
        "fail", "rate mlx5_3:1 (0000:5d:00.0) 200 Gb/sec (enp93s0np0 speed) below 400 Gb/s")
    facts["netdevs"]["enp93s0np0"]["speed_mbps"] = None
    result = _check(facts, "rdma_port_state", affinity=affinity)
    assert result["status"] == "pass" and "no rate readable on mlx5_3:1" in result["observed"]


@pytest.mark.parametrize("counter,value,status", [
    ("link_downed", 0, "pass"), ("link_downed", 1, "warn"), ("link_downed", 5, "warn"), ("link_downed", 6, "fail"),
    ("link_error_recovery", 10, "pass"), ("link_error_recovery", 11, "warn"), ("link_error_recovery", 101, "fail"),
])
def test_flap_counters_against_the_knowledge_levels(counter, value, status, node):
    facts, affinity, _results = node(GOOD)
    changed = _with_port(facts, 6, counters=dict(facts["nics"][6]["ports"][0]["counters"], **{counter: value}))
    result = _check(changed, "rdma_port_state", affinity=affinity)
    assert result["status"] == status
    if status != "pass":
        assert result["observed"] == "mlx5_6:1 %s %d" % (counter, value) and "switch's log" in result["remediation"]
    # the levels are the knowledge file's
    knowledge = copy.deepcopy(KNOWLEDGE)
    knowledge["rdma_port"]["counters"][counter] = {"warn_above": 1000, "fail_above": 2000}
    assert _check(changed, "rdma_port_state", knowledge, affinity=affinity)["status"] == "pass"


def test_unreadable_counters_and_states_are_said_not_guessed(node):
    facts, affinity, _results = node(GOOD)
    no_pma = _with_port(facts, 1, counters={"link_downed": None, "link_error_recovery": None})
    result = _check(no_pma, "rdma_port_state", affinity=affinity)
    assert result["status"] == "pass" and "mlx5_1:1 link_downed, mlx5_1:1 link_error_recovery unreadable: flaps " \
        "not judged there" in result["observed"]
    result = _check(_with_port(facts, 1, phys_state=None), "rdma_port_state", affinity=affinity)
    assert (result["status"], result["observed"].split(";")[0]) == ("unknown", "not readable: mlx5_1:1 (phys_state)")
    # a down port elsewhere still fails, and the unreadable one is named
    both = _with_port(_with_port(facts, 1, phys_state=None), 2, state="1: DOWN")
    result = _check(both, "rdma_port_state", affinity=affinity)
    assert result["status"] == "fail" and "not readable: mlx5_1:1 (phys_state)" in result["observed"]
    portless = copy.deepcopy(facts)
    for nic in portless["nics"]:
        nic["ports"] = []
    assert _check(portless, "rdma_port_state")["status"] == "unknown"


# ------------------------------------------------------------------------------------------------ GIDs
@pytest.mark.parametrize("index,status,text", [
    (3, "pass", "RoCE v2 GID at index 3 on 8 Ethernet port(s)"),
    # CVS's check (not all zero) would pass index 2; RCCL would send RoCE v1 from it
    (2, "fail", "mlx5_0:1 (enp13s0np0): index 2 IB/RoCE v1 0000:0000:0000:0000:0000:ffff:0a00:0001; the RoCE v2 GID "
                "RCCL would pick is at index 3"),
    (1, "warn", "mlx5_0:1 (enp13s0np0): index 1 is link-local fe80:0000:0000:0000:ba3f:d2ff:fe00:1c2d; the RoCE v2 GID "
                "RCCL would pick is at index 3"),
    (5, "fail", "mlx5_0:1 (enp13s0np0): index 5 empty; the RoCE v2 GID RCCL would pick is at index 3"),
    (40, "fail", "mlx5_0:1: no GID entry 40 (the table has 16); the RoCE v2 GID RCCL would pick is at index 3"),
])
def test_a_configured_gid_index_must_hold_a_roce_v2_gid(index, status, text, node):
    result = _check(node(GOOD)[0], "rdma_gid", options={"rdma_gid_index": index})
    assert result["status"] == status and result["observed"].startswith(text), result
    assert "index %d (platform_checks_rdma_gid_index)" % index in result["expected"]
    if status != "pass":
        assert "platform_checks_rdma_gid_index" in result["remediation"]


def test_the_gid_missing_node_fails_at_any_index(node):
    facts = node("fault-gid-missing")[0]
    result = _check(facts, "rdma_gid", options={"rdma_gid_index": 3})
    assert result["status"] == "fail" and result["observed"] == (
        "mlx5_6:1 (enp192s0np0): index 3 empty; port 1: only link-local RoCE v2 GIDs (index 1): its netdev "
        "enp192s0np0 has no IP address RCCL could route to")
    assert "ip addr add" in result["remediation"]
    # its netdev has no connected route either
    assert facts["netdevs"]["enp192s0np0"]["ipv4_subnets"] == []


def test_ports_whose_indexes_differ_are_named(node):
    facts = copy.deepcopy(node(GOOD)[0])
    port = facts["nics"][5]["ports"][0]
    for gid in port["gids"]:
        if gid["index"] in (2, 3):
            gid.update(gid=None, type=None, ndev=None)
    port["gids"][4].update(gid="0000:0000:0000:0000:0000:ffff:0a05:0001", type="RoCE v2", ndev="enp176s0np0")
    result = _check(facts, "rdma_gid")
    assert result["status"] == "pass" and result["observed"].startswith(
        "RoCE v2 GID at index 3 on mlx5_0:1, mlx5_1:1, mlx5_2:1, mlx5_3:1 and 3 more; at index 4 on mlx5_5:1")


@pytest.mark.parametrize("layer,status,text", [
    ("InfiniBand", "pass", "not applicable: 8 InfiniBand port(s) not applicable (RCCL sets a GID index only on RoCE "
                           "ports)"),
    (None, "unknown", "not judged: mlx5_0:1 link layer unreadable"),
])
def test_gid_on_ports_that_are_not_ethernet(layer, status, text, node):
    facts = copy.deepcopy(node(GOOD)[0])
    for nic in facts["nics"]:
        nic["ports"][0]["link_layer"] = layer
    result = _check(facts, "rdma_gid", options={"rdma_gid_index": 3})
    assert result["status"] == status and result["observed"].startswith(text), result


SHOW_GIDS = os.path.join(REPO, "tests", "fixtures", "acceptance", "show_gids__connectx6-mlx5_0__ibm-spectrumscale-pr-4.txt")


def _gid_tree(root, rows, table_len=16, link_layer="Ethernet", state="4: ACTIVE"):
    """sys/class/infiniband/<dev>/ports/<n> as drivers/infiniband/core/sysfs.c shows it, from (dev, port, index,
    gid, version, netdev) rows: every table entry has gids/<i> (zeros when empty), filled ones types/ndevs."""
    for dev, port, index, gid, version, netdev in rows:
        pdir = root / "sys" / "class" / "infiniband" / dev / "ports" / str(port)
        for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
            (pdir / sub).mkdir(parents=True, exist_ok=True)
        (pdir / "state").write_text(state + "\n")
        (pdir / "link_layer").write_text(link_layer + "\n")
        for empty in range(table_len):
            if not (pdir / "gids" / str(empty)).exists():
                (pdir / "gids" / str(empty)).write_text("0000:0000:0000:0000:0000:0000:0000:0000\n")
        (pdir / "gids" / str(index)).write_text(gid + "\n")
        (pdir / "gid_attrs" / "types" / str(index)).write_text({"v1": "IB/RoCE v1", "v2": "RoCE v2"}[version] + "\n")
        if netdev:
            (pdir / "gid_attrs" / "ndevs" / str(index)).write_text(netdev + "\n")
    return str(root)


def _show_gids_rows():
    """The capture's table: DEV PORT INDEX GID [IPv4] VER DEV (the IPv4 column is empty for link-local GIDs)."""
    with open(SHOW_GIDS, encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    rows = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 6 and fields[2].isdigit():
            rows.append((fields[0], int(fields[1]), int(fields[2]), fields[3], fields[-2], fields[-1]))
    return rows


def test_the_connectx6_capture_has_its_ipv4_roce_v2_gid_at_index_5_not_3(tmp_path):
    """show_gids on a ConnectX-6 (tests/fixtures/acceptance/...source.md): index 3 is a link-local RoCE v2 GID, the
    IPv4 one is 5, so AMD's node-wide NCCL_IB_GID_INDEX=3 would send from a link-local address there."""
    rows = _show_gids_rows()
    assert len(rows) == 6
    [port] = rh.read_rdma_ports(_gid_tree(tmp_path, rows), "mlx5_0")
    assert port["port"] == 1 and port["active"] and port["link_layer"] == "Ethernet" and len(port["gids"]) == 16
    assert port["gids"][3]["type"] == "RoCE v2" and port["gids"][3]["gid"].startswith("fe80:")
    assert rh.roce_v2_gid_index(port) == (5, None)


def _port(entries, link_layer="Ethernet"):
    return {"port": 1, "state": "4: ACTIVE", "active": True, "link_layer": link_layer,
            "gids": [dict(zip(("index", "gid", "type", "ndev"), e)) for e in entries]}


LINK_LOCAL = "fe80:0000:0000:0000:ba3f:d2ff:fe00:1c2d"
IPV4 = "0000:0000:0000:0000:0000:ffff:0a00:0001"
IPV6 = "fd00:0000:0000:0001:0000:0000:0000:0001"
ZERO = "0000:0000:0000:0000:0000:0000:0000:0000"


@pytest.mark.parametrize("entries,link_layer,want,why", [
    # the IPv4 RoCE v2 entry, as RCCL >= 2.21 picks it with NCCL_IB_ADDR_FAMILY=AF_INET
    ([(0, LINK_LOCAL, "IB/RoCE v1", "eth0"), (1, LINK_LOCAL, "RoCE v2", "eth0"), (2, IPV4, "IB/RoCE v1", "eth0"),
      (3, IPV4, "RoCE v2", "eth0")], "Ethernet", 3, None),
    # IPv4 before a global IPv6 address, whatever the table order
    ([(1, LINK_LOCAL, "RoCE v2", "eth0"), (3, IPV6, "RoCE v2", "eth0"), (5, IPV4, "RoCE v2", "eth0")], "Ethernet", 5,
     None),
    ([(1, LINK_LOCAL, "RoCE v2", "eth0"), (3, IPV6, "RoCE v2", "eth0")], "Ethernet", 3, None),
    ([(0, LINK_LOCAL, "IB/RoCE v1", "eth0"), (1, LINK_LOCAL, "RoCE v2", "eth0")], "Ethernet", None,
     "only link-local RoCE v2 GIDs (index 1)"),
    ([(2, IPV4, "IB/RoCE v1", "eth0"), (3, IPV4, "RoCE v2", None), (4, ZERO, None, None)], "Ethernet", None,
     "no RoCE v2 GID with a netdev"),
    ([(0, "fe80:0000:0000:0000:b83f:d203:0000:1c2d", "IB/RoCE v1", None)], "InfiniBand", None, "is InfiniBand"),
    ([], "Ethernet", None, "no GID table"),
    ([(3, IPV4, "RoCE v2", "eth0")], None, None, "link layer unreadable"),
])
def test_roce_v2_gid_choice(entries, link_layer, want, why):
    index, reason = rh.roce_v2_gid_index(_port(entries, link_layer))
    assert index == want and (why is None) == (reason is None)
    if why:
        assert why in reason


def test_the_simulated_ports_read_like_the_kernels(sim_tree):
    [port] = rh.read_rdma_ports(sim_tree(GOOD), "mlx5_3")
    assert (port["port"], port["state"], port["active"], port["link_layer"]) == (1, "4: ACTIVE", True, "Ethernet")
    filled = [g for g in port["gids"] if g["type"]]
    assert [(g["index"], g["type"]) for g in filled] == [
        (0, "IB/RoCE v1"), (1, "RoCE v2"), (2, "IB/RoCE v1"), (3, "RoCE v2")]
    assert {g["ndev"] for g in filled} == {"enp93s0np0"} and port["gids"][3]["gid"] == "0000:0000:0000:0000:0000:ffff:0a03:0001"
    assert all(g["gid"] == ZERO and g["ndev"] is None for g in port["gids"][4:])
    assert rh.read_rdma_ports(sim_tree(GOOD), "mlx5_99") == []


def _pci_function(root, dev, bdf, vendor="0x15b3", device="0x101b"):
    """``sys/class/infiniband/<dev>/device`` -> a PCI function directory ``sys/devices/pci0000:00/<bdf>``."""
    pci = root / "sys" / "devices" / "pci0000:00" / bdf
    pci.mkdir(parents=True, exist_ok=True)
    (pci / "vendor").write_text(vendor + "\n")
    (pci / "device").write_text(device + "\n")
    ibdir = root / "sys" / "class" / "infiniband" / dev
    ibdir.mkdir(parents=True, exist_ok=True)
    (ibdir / "device").symlink_to(os.path.relpath(pci, ibdir))
    return pci


def test_the_connectx6_capture_passes_at_index_5_and_warns_at_cvss_3(tmp_path):
    """The capture's index 3 is a link-local RoCE v2 GID: CVS's default index (3, not all zero) would pass it, RCCL
    with NCCL_IB_GID_INDEX=3 would send from fe80::...; the check warns and names 5."""
    root = _gid_tree(tmp_path, _show_gids_rows())
    _pci_function(tmp_path, "mlx5_0", "0000:17:00.0")
    facts = rh.gather(root)
    assert [(n["name"], n["bdf"], n["ports"][0]["netdevs"]) for n in facts["nics"]] == [
        ("mlx5_0", "0000:17:00.0", ["ens1f0"])]
    result = _check(facts, "rdma_gid")
    assert (result["status"], result["observed"]) == ("pass", "RoCE v2 GID at index 5 on 1 Ethernet port(s)")
    result = _check(facts, "rdma_gid", options={"rdma_gid_index": 3})
    assert (result["status"], result["observed"]) == (
        "warn", "mlx5_0:1 (ens1f0): index 3 is link-local fe80:0000:0000:0000:1186:a6b1:3f0b:c441; the RoCE v2 GID "
                "RCCL would pick is at index 5")
    # no PCI link attributes in the capture: the PCIe check says so
    assert _check(facts, "rdma_nic_pcie_link")["status"] == "unknown"


# --------------------------------------------------------------------------------- AMD's rdma link output
RDMA_LINK = os.path.join(REPO, "tests", "fixtures", "acceptance", "rdma_link__broadcom-thor2-8nic__rocm-system-acceptance.txt")
# iproute2 rdma/link.c prints the netlink port state and physical state by number: link_state_to_str (the kernel's
# ib_port_state order) and phys_state_to_str; sysfs prints the same numbers with drivers/infiniband/core/sysfs.c's names
RDMA_TOOL_STATE = ("NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER")
RDMA_TOOL_PHYS = ("NOP", "SLEEP", "POLLING", "DISABLED", "ARMED", "LINK_UP", "LINK_ERROR_RECOVER", "PHY_TEST")
SYSFS_STATE = ("NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER")
SYSFS_PHYS = ("<unknown>", "Sleep", "Polling", "Disabled", "PortConfigurationTraining", "LinkUp", "LinkErrorRecovery",
              "Phy Test")


def _rdma_link_rows():
    """``link bnxt_re0/1 state ACTIVE physical_state LINK_UP netdev ens26np0`` -> (dev, port, state, phys, netdev)."""
    rows = []
    with open(RDMA_LINK, encoding="utf-8") as handle:
        for line in handle.read().splitlines():
            words = line.split()
            if words[:1] == ["link"]:
                dev, _sep, port = words[1].partition("/")
                fields = dict(zip(words[2::2], words[3::2]))
                rows.append((dev, int(port), fields["state"], fields["physical_state"], fields["netdev"]))
    return rows


def _rdma_link_tree(root, rows):
    """The sysfs the tool read: each device a PCI function (Broadcom 14e4) with its netdev, one port whose state and
    phys_state are the numbers the tool printed, in the kernel's "%d: %s" form. No rate file: the capture shows none."""
    for k, (dev, port, state, phys, netdev) in enumerate(rows):
        pci = _pci_function(root, dev, "0000:%02x:00.0" % (0x10 + k), vendor="0x14e4", device="0x1760")
        (pci / "net" / netdev).mkdir(parents=True)
        pdir = root / "sys" / "class" / "infiniband" / dev / "ports" / str(port)
        pdir.mkdir(parents=True)
        number, phys_number = RDMA_TOOL_STATE.index(state), RDMA_TOOL_PHYS.index(phys)
        (pdir / "state").write_text("%d: %s\n" % (number, SYSFS_STATE[number]))
        (pdir / "phys_state").write_text("%d: %s\n" % (phys_number, SYSFS_PHYS[phys_number]))
        (pdir / "link_layer").write_text("Ethernet\n")
    return str(root)


def test_amds_published_rdma_link_output_reads_as_eight_active_ports(tmp_path):
    rows = _rdma_link_rows()
    assert len(rows) == 8 and {(r[2], r[3]) for r in rows} == {("ACTIVE", "LINK_UP")}
    facts = rh.gather(_rdma_link_tree(tmp_path, rows))
    # each port's netdev as the tool printed it (the function's net/<if>: no GID names one here)
    assert {n["name"]: n["ports"][0]["netdevs"] for n in facts["nics"]} == {r[0]: [r[4]] for r in rows}
    assert {n["name"]: n["ports"][0]["netdevs"] for n in facts["nics"]}["bnxt_re3"] == ["ens24np0"]
    result = _check(facts, "rdma_port_state")
    assert result["status"] == "pass"
    assert result["observed"] == (
        "8 port(s) ACTIVE/LinkUp: rate unknown on 8; no rate readable on bnxt_re0:1, bnxt_re1:1, bnxt_re2:1, bnxt_re3:1 "
        "and 4 more; bnxt_re0:1 link_downed, bnxt_re0:1 link_error_recovery, bnxt_re1:1 link_downed and 13 more "
        "unreadable: flaps not judged there")
    down = [(dev, port, "DOWN", "POLLING", netdev) if dev == "bnxt_re3" else (dev, port, state, phys, netdev)
            for dev, port, state, phys, netdev in rows]
    result = _check(rh.gather(_rdma_link_tree(tmp_path / "down", down)), "rdma_port_state")
    assert result["status"] == "fail" and result["observed"].startswith(
        "bnxt_re3:1 (0000:13:00.0) state 1: DOWN, phys_state 2: Polling")


# ------------------------------------------------------------------------------------------ routes, trees
ROUTE_HEADER = "%-127s" % "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"


@pytest.mark.parametrize("line,want", [
    ("eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0", {"eth0": ["192.168.1.0/24"]}),
    ("ens1\t0000000A\t00000000\t0001\t0\t0\t0\t0000FFFF\t0\t0\t0", {"ens1": ["10.0.0.0/16"]}),
    # the default route and a route through a gateway (RTF_GATEWAY) are not connected subnets
    ("eth0\t00000000\t0101A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0", {}),
    ("eth0\t0002A8C0\t0101A8C0\t0003\t0\t0\t100\t00FFFFFF\t0\t0\t0", {}),
    # a mask that is no prefix, hex that is not hex, a cut line: skipped
    ("eth0\t0001A8C0\t00000000\t0001\t0\t0\t100\t00FF00FF\t0\t0\t0", {}),
    ("eth0\tZZZZZZZZ\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0", {}),
    ("eth0\t0001A8C0\t00000000", {}),
])
def test_parse_routes(line, want):
    assert rh.parse_routes(ROUTE_HEADER + "\n" + line + "\n") == want
    assert rh.parse_routes("") == {} and rh.parse_routes(None) == {}


def test_a_malformed_tree_gives_reasons_not_tracebacks(tmp_path):
    pci = _pci_function(tmp_path, "mlx5_0", "0000:41:00.0", device="0x1021")
    (pci / "current_link_speed").write_text("Unknown\n")
    (pci / "current_link_width").write_text("garbage\n")
    pdir = tmp_path / "sys" / "class" / "infiniband" / "mlx5_0" / "ports" / "1"
    for sub in ("counters", "gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (pdir / sub).mkdir(parents=True)
    (pdir / "state").write_text("\n")
    (pdir / "rate").write_text("fast\n")
    (pdir / "counters" / "link_downed").write_text("N/A (no PMA)\n")
    (pdir / "gids" / "0").write_text("not-a-gid\n")
    (pdir / "gid_attrs" / "types" / "0").write_text("RoCE v2\n")
    (pdir / "gid_attrs" / "ndevs" / "0").write_text("../../etc\n")
    (tmp_path / "proc" / "net").mkdir(parents=True)
    (tmp_path / "proc" / "net" / "route").write_text("garbage\n\x00\xff\n")
    facts = rh.gather(str(tmp_path))
    port = facts["nics"][0]["ports"][0]
    assert (port["state"], port["rate_gbps"], port["counters"]["link_downed"], port["netdevs"]) == ("", None, None, [])
    assert facts["netdevs"] == {} and facts["routes"] == {}
    results = _by_id(rh.run_checks(facts, KNOWLEDGE, {"rdma_gid_index": 0}))
    assert {k: r["status"] for k, r in results.items()} == {
        "rdma_nic_pcie_link": "unknown", "rdma_port_state": "unknown", "rdma_gid": "unknown"}
    assert results["rdma_port_state"]["observed"].startswith("not readable: mlx5_0:1 (state)")
    assert results["rdma_gid"]["observed"] == "not judged: mlx5_0:1 link layer unreadable"
    assert rh.rails(facts, {"pairs": [{"gpu": "0000:40:00.0", "nic": "mlx5_0", "nic_bdf": "0000:41:00.0",
                                       "level": "switch"}]})[0]["ipv4_subnet"] is None


# ------------------------------------------------------------------------------------------------- rails
def test_the_rails_follow_the_gpus_in_bdf_order(node):
    facts, affinity, _results = node(GOOD)
    rails = rh.rails(facts, affinity)
    assert [r["rail"] for r in rails] == list(range(8))
    assert [r["gpu"] for r in rails] == sorted(r["gpu"] for r in rails)
    assert [(r["nic"], r["nic_bdf"], r["netdev"], r["ipv4_subnet"]) for r in rails] == [
        ("mlx5_%d" % k, NICS[k], NETDEVS[k], "10.%d.0.0/24" % k) for k in range(8)]
    assert rails[0] == {"rail": 0, "gpu": "0000:0c:00.0", "nic": "mlx5_0", "nic_bdf": "0000:0d:00.0",
                        "level": "switch", "port": 1, "link_layer": "Ethernet", "state": "ACTIVE",
                        "phys_state": "LinkUp", "rate": "400 Gb/sec (4X NDR)", "rate_gbps": 400.0,
                        "netdev": "enp13s0np0", "fw_ver": "28.39.1002", "ipv4_subnet": "10.0.0.0/24"}


def test_the_rails_of_the_fault_nodes(node):
    rails = rh.rails(*node("fault-gid-missing")[:2])
    assert rails[6]["ipv4_subnet"] is None and rails[6]["netdev"] == "enp192s0np0" and rails[5]["ipv4_subnet"]
    down = rh.rails(*node("fault-rdma-port-down")[:2])[5]
    assert (down["state"], down["phys_state"], down["rate_gbps"]) == ("DOWN", "Polling", 10.0)
    far = rh.rails(*node("fault-nic-far-numa")[:2])[0]
    assert (far["nic"], far["nic_bdf"], far["level"]) == ("mlx5_0", "0000:a1:00.0", "far")
    # a GPU without a NIC: its rail names the GPU, every NIC field null
    facts, affinity, _results = node(GOOD)
    lonely = copy.deepcopy(affinity)
    lonely["pairs"][3].update(nic=None, nic_bdf=None, level="far")
    rail = rh.rails(facts, lonely)[3]
    assert rail["gpu"] == "0000:5c:00.0" and all(rail[key] is None for key in (
        "nic", "nic_bdf", "port", "netdev", "rate", "rate_gbps", "fw_ver", "ipv4_subnet", "state"))
    assert rh.rails(facts, None) == [] and rh.rails(None, affinity)[0]["nic"] == "mlx5_0"


def test_the_module_returns_the_rails_in_its_inventory_and_takes_the_gid_index(sim_tree, run_module):
    root = sim_tree(GOOD)
    rc, result = run_module(module, sysroot=root, knowledge=PLATFORM, rdma_gid_index=5)
    assert rc == 0, result
    assert result["inventory"]["rails"] == rh.rails(rh.gather(root), ph.nic_affinity(ph.gather(root)))
    assert len(result["inventory"]["rails"]) == 8 and result["inventory"]["rails"][2]["nic"] == "mlx5_2"
    gid = next(r for r in result["results"] if r["id"] == "rdma_gid")
    assert gid["status"] == "fail" and "index 5 empty" in gid["observed"]
    rc, result = run_module(module, sysroot=root, knowledge=PLATFORM, rdma_gid_index=-1)
    assert rc == 1 and "platform_checks_rdma_gid_index must be a GID index >= 0" in result["msg"]


@pytest.mark.parametrize("value,ok", [(None, True), (0, True), (3, True), (-1, False), (True, False), ("3", False)])
def test_the_gid_index_option_is_checked(value, ok):
    problems = pc.role_option_problems({"rdma_gid_index": value})
    assert (problems == []) == ok, problems
