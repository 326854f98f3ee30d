"""rail_consistency: the cluster-wide rail comparison (plugin_utils/fleet/consistency.py) on per-node inventories,
and on the simulated nodes' rails."""

import copy
import json

from ansible_collections.topotune.instinct.plugins.filter.rdma_withheld import rdma_withheld as withheld_filter
from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.module_utils.checks.gpu_health import inventory as health_inventory
from ansible_collections.topotune.instinct.plugins.modules import gpu_topology
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet.consistency import compare, lines, rail_value, rdma_withheld


def _rails(count=8, fw="28.39.1002", rate="400 Gb/sec (4X NDR)"):
    return [{"rail": i, "gpu": "0000:%02x:00.0" % (0x10 * (i + 1)), "nic": "mlx5_%d" % i,
             "netdev": "enp%ds0np0" % (0x11 * (i + 1)), "rate": rate, "fw_ver": fw, "ipv4_subnet": "10.%d.0.0/24" % i}
            for i in range(count)]


def _inv(rails=None, product="MI300X"):
    return {"gpus": [{"bdf": "0000:10:00.0", "vbios": "113-M3000100-102", "firmware": {},
                      "compute_partition": "SPX", "memory_partition": "NPS1"}],
            "rocm_version": "6.4.1", "kernel_release": "6.8.0", "bios_version": "1.0",
            "identity": {"generation": product, "product": product, "kind": "physical"},
            "rails": _rails() if rails is None else rails}


def _swapped():
    """Rails 0 and 1 swapped: the NIC below GPU 0's switch is mlx5_1 on rail 1's subnet, and the other way round."""
    rails = _rails()
    rails[0], rails[1] = dict(rails[1], rail=0, gpu=rails[0]["gpu"]), dict(rails[0], rail=1, gpu=rails[1]["gpu"])
    return rails


def test_the_node_with_two_rails_swapped_is_named():
    report = compare({"n1": _inv(), "n2": _inv(), "n3": _inv(_swapped()), "n4": _inv()})
    verdicts = report["rail_consistency"]
    assert verdicts["n3"]["status"] == "fail"
    assert "rail 0 (GPU 0's NIC): mlx5_1 enp34s0np0" in verdicts["n3"]["observed"]
    assert "3 other node(s): mlx5_0 enp17s0np0 400 Gb/sec (4X NDR) fw 28.39.1002 10.0.0.0/24" in verdicts["n3"]["observed"]
    assert "rail 1" in verdicts["n3"]["observed"] and "rail 2" not in verdicts["n3"]["observed"]
    assert {h: v["status"] for h, v in verdicts.items()} == {"n1": "pass", "n2": "pass", "n3": "fail", "n4": "pass"}
    assert report["odd_nodes"] == {"n3": ["rail:0", "rail:1"]}
    # the terminal lines of the run summary name it too
    assert any(line.startswith("MI300X SPX/NPS1 rail 0 (GPU 0's NIC): mlx5_0") and "odd: n3 (mlx5_1" in line
               for line in lines(report))


def test_each_field_of_a_rail_is_compared():
    for field, value in (("rate", "200 Gb/sec (4X HDR)"), ("fw_ver", "28.36.1010"), ("ipv4_subnet", "10.9.0.0/24"),
                         ("netdev", "eth5")):
        odd = _rails()
        odd[5][field] = value
        report = compare({"a": _inv(), "b": _inv(), "c": _inv(odd)})
        assert report["rail_consistency"]["c"]["status"] == "fail", field
        assert value in report["rail_consistency"]["c"]["observed"] and "rail 5" in report["rail_consistency"]["c"]["observed"]


def test_an_unreadable_field_is_unknown_there_never_odd():
    partial = _rails()
    partial[2]["fw_ver"] = None
    report = compare({"a": _inv(), "b": _inv(), "c": _inv(partial)})
    assert rail_value(partial[2]) is None
    assert report["rail_consistency"]["c"]["status"] == "unknown"
    assert "rail 2 (GPU 2's NIC) unreadable here" in report["rail_consistency"]["c"]["observed"]
    assert "c" not in report["odd_nodes"]


def test_a_gpu_without_a_nic_differs_from_one_with():
    missing = _rails()
    missing[7] = {"rail": 7, "gpu": missing[7]["gpu"], "nic": None}
    report = compare({"a": _inv(), "b": _inv(), "c": _inv(missing)})
    assert report["rail_consistency"]["c"]["status"] == "fail" and "no NIC" in report["rail_consistency"]["c"]["observed"]


def test_nothing_to_compare_is_unknown_with_the_reason():
    alone = compare({"a": _inv(), "x": _inv(product="MI308X")})
    assert alone["rail_consistency"]["a"]["status"] == "unknown"
    assert "the only node of class MI300X SPX/NPS1" in alone["rail_consistency"]["a"]["observed"]
    bare = compare({"a": _inv(rails=[]), "b": _inv(rails=[])})
    assert {v["status"] for v in bare["rail_consistency"].values()} == {"unknown"}
    assert "no RDMA rails read" in bare["rail_consistency"]["a"]["observed"]
    # two nodes that disagree: no majority, neither is named
    other = _rails()
    other[0]["ipv4_subnet"] = "10.8.0.0/24"
    split = compare({"a": _inv(), "b": _inv(other)})
    assert {v["status"] for v in split["rail_consistency"].values()} == {"unknown"}
    assert "no value on more than half" in split["rail_consistency"]["a"]["observed"]


def test_rails_are_compared_within_a_hardware_class():
    mi308 = _rails(fw="28.40.1000")
    report = compare({"a": _inv(), "b": _inv(), "m1": _inv(mi308, "MI308X"), "m2": _inv(copy.deepcopy(mi308), "MI308X")})
    assert {v["status"] for v in report["rail_consistency"].values()} == {"pass"}


def test_nccl_ib_hca_is_withheld_only_where_the_rail_check_fails():
    swapped = rdma_withheld({"n1": _inv(), "n2": _inv(), "n3": _inv(_swapped()), "n4": _inv()})
    assert list(swapped) == ["n3"]
    assert swapped["n3"].startswith("its rails differ from the other nodes of its hardware class in this run "
                                    "(rail_consistency: rail 0 (GPU 0's NIC): mlx5_1 ")
    assert "rail 1 (GPU 1's NIC): mlx5_0 " in swapped["n3"] and swapped["n3"].endswith("would cross rails")
    # what proves no disagreement withholds nothing: a class of one, no majority, an unreadable rail, no rails
    other = _rails()
    other[0]["ipv4_subnet"] = "10.8.0.0/24"
    partial = _rails()
    partial[2]["fw_ver"] = None
    for inventories in ({"a": _inv(_swapped())}, {"a": _inv(), "b": _inv(other)},
                        {"a": _inv(), "b": _inv(), "c": _inv(partial)}, {"a": _inv(rails=[]), "b": _inv(_swapped())}):
        assert rdma_withheld(inventories) == {}, inventories


# ---------------------------------------------------------------------- on the simulated nodes (sim/profiles)
def test_the_discovery_carries_the_rails_the_checks_compare_and_the_launch_filter_withholds_on_them(sim_tree, run_module):
    """The gpu_topology module returns the node's rail inventory (partition modes and rails, as platform_checks'
    inventory has them), and the rdma_withheld filter over three discoveries withholds NCCL_IB_HCA on the node with
    rails 0 and 1 swapped only, with the verdict the cluster-wide rail_consistency check gives."""
    knowledge = dict(load_knowledge("gpu_generations"), pcie_health=load_knowledge("pcie_health"))
    hostvars, inventories = {}, {}
    for host, profile in (("good1", "mi300x-8gpu-spx"), ("good2", "mi300x-8gpu-spx"), ("swapped", "fault-rail-swapped")):
        root = sim_tree(profile)
        code, result = run_module(gpu_topology, sysroot=root, source="kfd")
        assert code == 0, result
        facts = pc.gather(root)
        assert result["rail_inventory"]["rails"] == pc.inventory_rails(facts)
        assert result["rail_inventory"]["gpus"] == [
            {key: g[key] for key in ("bdf", "compute_partition", "memory_partition")}
            for g in health_inventory(facts["health"], facts)["gpus"]]
        identity = pc.node_identity(facts, knowledge)
        inventories[host] = dict(result["rail_inventory"], identity=identity)
        # the gpu_topology action adds the identity to the model
        hostvars[host] = {"topotune_discovery": dict(result, topology=dict(result["topology"], identity=identity))}
    hostvars["undiscovered"] = {}
    withheld = withheld_filter(["good1", "good2", "swapped", "undiscovered"], hostvars)
    verdict = compare(inventories)["rail_consistency"]["swapped"]
    assert list(withheld) == ["swapped"] and verdict["status"] == "fail"
    assert "(rail_consistency: %s)" % verdict["observed"] in withheld["swapped"]
    assert withheld_filter(["good1", "good2"], hostvars) == {}


def test_the_swapped_rails_profile_passes_every_node_check_and_only_the_cluster_names_it(sim_tree):
    """fault-rail-swapped: every node-local check gives what its base gives (each GPU still has a NIC below its
    switch, every port is up with its GID); its rails 0 and 1 carry each other's NIC and subnet, and the comparison
    with two good nodes names it, on those two rails only."""
    knowledge = dict(load_knowledge("gpu_generations"), pcie_health=load_knowledge("pcie_health"),
                     gpu_health=load_knowledge("gpu_health"))
    nodes = {}
    for host, profile in (("good1", "mi300x-8gpu-spx"), ("good2", "mi300x-8gpu-spx"), ("swapped", "fault-rail-swapped")):
        root = sim_tree(profile)
        facts = pc.gather(root)
        results = json.loads(json.dumps(pc.run_checks(facts, knowledge)).replace(root, "ROOT"))
        identity = pc.node_identity(facts, knowledge)
        nodes[host] = (results, dict(health_inventory(facts.get("health"), facts), identity=identity,
                                     rails=pc.inventory_rails(facts)))
    # the same verdicts; the affinity check's observation lists the NICs in GPU order, so it shows the swap
    base = {r["id"]: r for r in nodes["good1"][0]}
    faulty = {r["id"]: r for r in nodes["swapped"][0]}
    assert [i for i in base if base[i] != faulty[i]] == ["rdma_gpu_nic_affinity"]
    assert faulty["rdma_gpu_nic_affinity"]["status"] == "pass" and "mlx5_1,mlx5_0,mlx5_2" in \
        faulty["rdma_gpu_nic_affinity"]["observed"]
    good, swapped = nodes["good1"][1]["rails"], nodes["swapped"][1]["rails"]
    assert [(r["nic"], r["ipv4_subnet"]) for r in swapped[:3]] == [
        ("mlx5_1", "10.1.0.0/24"), ("mlx5_0", "10.0.0.0/24"), ("mlx5_2", "10.2.0.0/24")]
    assert [r["rail"] for r in swapped if r != good[r["rail"]]] == [0, 1]
    report = compare({host: inventory for host, (_results, inventory) in nodes.items()})
    verdicts = report["rail_consistency"]
    assert {h: v["status"] for h, v in verdicts.items()} == {"good1": "pass", "good2": "pass", "swapped": "fail"}
    assert verdicts["swapped"]["observed"].startswith(
        "rail 0 (GPU 0's NIC): mlx5_1 enp13s0np0 400 Gb/sec (4X NDR) fw 28.39.1002 10.1.0.0/24, 2 other node(s): "
        "mlx5_0 enp13s0np0 400 Gb/sec (4X NDR) fw 28.39.1002 10.0.0.0/24")
    assert report["odd_nodes"] == {"swapped": ["rail:0", "rail:1"]}
