"""Scale-out advice (plugin_utils/bench/advice.py, knowledge/advice.yml) and the cluster_advice filter."""

import copy
import os

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.filter.cluster_advice import cluster_advice
from ansible_collections.topotune.instinct.plugins.plugin_utils.bench.advice import (
    AdviceError,
    advise,
    article_comm_ratio,
    comm_share_from_step,
    comm_time_ms,
    cross_numa_share,
    fabric_for,
    xgmi_summary,
)
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
ARTICLE = "source article (authors' own figures, ROCm 5.7, MI250)"


@pytest.fixture(scope="module")
def config():
    return load_knowledge("advice")


def _topology(numa):
    """MI250 (OAM, device 0x740c): 8 GCDs with the given NUMA node per GCD; xGMI 1 hop inside each group of 4,
    2 hops across (every pair on xGMI, as on the real MI250 node: tests/fixtures/mi250-topology-facts.md)."""
    gpus = [{"index": i, "numa_node": node, "device_id": "0x740c", "gfx": "gfx90a"} for i, node in enumerate(numa)]
    links = [{"a": a, "b": b, "type": "xgmi", "hops": 1 if a // 4 == b // 4 else 2}
             for a in range(len(numa)) for b in range(a + 1, len(numa))]
    return {"gpus": gpus, "links": links, "numa_nodes": []}


def _mi210_two_hives():
    """8 MI210 PCIe cards (0x740f) as in tests/fixtures/kfd/mi210-8gpu-2hive: xGMI-bridged hives 0-3 and 4-7 on
    NUMA 0 and 1, PCIe (through the host) between the hives."""
    gpus = [{"index": i, "numa_node": i // 4, "device_id": "0x740f", "gfx": "gfx90a"} for i in range(8)]
    links = [{"a": a, "b": b, "type": "xgmi" if a // 4 == b // 4 else "pcie", "hops": 1 if a // 4 == b // 4 else 2}
             for a in range(8) for b in range(a + 1, 8)]
    return {"gpus": gpus, "links": links, "numa_nodes": []}


def _mi300x(numa=(0, 0, 0, 0, 1, 1, 1, 1), device_id="0x74a1"):
    """8 MI300X (0x74a1) on two sockets: a direct xGMI link between every pair (full mesh)."""
    gpus = [{"index": i, "numa_node": node, "device_id": device_id, "gfx": "gfx942", "physical_index": i}
            for i, node in enumerate(numa)]
    links = [{"a": a, "b": b, "type": "xgmi", "hops": 1} for a in range(8) for b in range(a + 1, 8)]
    return {"gpus": gpus, "links": links, "numa_nodes": []}


@pytest.fixture(scope="module")
def generations():
    return load_knowledge("gpu_generations")["generations"]


def test_knowledge_is_the_articles_figures(config):
    assert config["thresholds"]["comm_share"]["value"] == 0.30
    assert config["thresholds"]["cross_numa_share"]["value"] == 0.40
    rows = {row["id"]: row for row in config["options"]}
    assert (rows["add_gpus"]["cost_usd"], rows["add_gpus"]["deploy_time"], rows["add_gpus"]["throughput_gain"],
            rows["add_gpus"]["latency_cut"]) == (24000, "2 weeks", 0.22, 0.0)
    assert (rows["ib_switch_200g"]["cost_usd"], rows["ib_switch_200g"]["deploy_time"],
            rows["ib_switch_200g"]["throughput_gain"], rows["ib_switch_200g"]["latency_cut"]) == (18000, "3 days", 0.15, 0.40)
    assert (rows["rebuild_3x4"]["cost_usd"], rows["rebuild_3x4"]["deploy_time"], rows["rebuild_3x4"]["throughput_gain"],
            rows["rebuild_3x4"]["latency_cut"]) == (5000, "1 week", 0.18, 0.35)
    assert all(row["source"] == ARTICLE for row in config["options"])
    assert all(ARTICLE in item["source"] for item in config["thresholds"].values())


# Each branch of the decision flow fires on its input and not otherwise: (inputs, outcome, path nodes, recommended).
BOTH = ["rebuild_3x4", "ib_switch_200g"]
BRANCHES = [
    ({"comm_share": 0.20}, "add_compute", ["comm_check"], ["add_gpus"]),
    ({"comm_share": 0.30}, "add_compute", ["comm_check"], ["add_gpus"]),   # "> 30%": exactly 30% is not above
    ({"comm_share": 0.31, "cross_numa": 0.50}, "interconnect", ["comm_check", "xgmi_check", "numa_check"], BOTH),
    ({"comm_share": 0.31, "cross_numa": 0.40}, "tune_environment", ["comm_check", "xgmi_check", "numa_check"], []),
    ({"comm_share": 0.31, "cross_numa": 0.10}, "tune_environment", ["comm_check", "xgmi_check", "numa_check"], []),
    ({"comm_share": 0.90, "cross_numa": 0.41}, "interconnect", ["comm_check", "xgmi_check", "numa_check"], BOTH),
    ({"comm_share": 0.50}, "undetermined", ["comm_check", "xgmi_check", "numa_check"], BOTH),
    ({}, "undetermined", ["comm_check"], ["add_gpus"] + BOTH),
    ({"model_size_b": 7}, "add_compute", ["comm_check"], ["add_gpus"]),                 # article model: 9.7%
    ({"model_size_b": 70, "cross_numa": 0.57}, "interconnect", ["comm_check", "xgmi_check", "numa_check"], BOTH),
    # 13B fp16 gradients at 318.98 GB/s over 8 ranks: 142.6 ms; of a 300 ms step 47.5%, of 1 s 14.3%
    ({"model_size_b": 13, "step_time_ms": 300, "busbw_gbs": 318.98, "ranks": 8, "cross_numa": 0.0},
     "tune_environment", ["comm_check", "xgmi_check", "numa_check"], []),
    ({"model_size_b": 13, "step_time_ms": 1000, "busbw_gbs": 318.98, "ranks": 8, "cross_numa": 0.9},
     "add_compute", ["comm_check"], ["add_gpus"]),
    # PCIe cards: 16 of 28 pairs cross the host between NUMA nodes -> rebuild (re-cabling bridges) is an option
    ({"comm_share": 0.35, "topology": _mi210_two_hives()}, "interconnect", ["comm_check", "xgmi_check", "numa_check"],
     BOTH),
    ({"comm_share": 0.35, "topology": _mi210_two_hives(), "gpus": [0, 1, 2, 3]}, "tune_environment",
     ["comm_check", "xgmi_check", "numa_check"], []),
    # OAM MI250: every GCD pair is on xGMI, so a NUMA split is not cross-NUMA collective traffic (was: rebuild)
    ({"comm_share": 0.35, "topology": _topology([0, 0, 0, 0, 1, 1, 1, 1])}, "tune_environment",
     ["comm_check", "xgmi_check", "numa_check"], []),
    # MI300X full mesh on two sockets: never cross-NUMA PCIe, never a rebuild
    ({"comm_share": 0.35, "topology": _mi300x()}, "tune_environment", ["comm_check", "xgmi_check", "numa_check"], []),
    # a measured cross-NUMA share on MI300X still leads to the interconnect outcome, without the rebuild
    ({"comm_share": 0.35, "cross_numa": 0.6, "generation": "MI300X"}, "interconnect",
     ["comm_check", "xgmi_check", "numa_check"], ["ib_switch_200g"]),
    ({"comm_share": 0.50, "generation": "MI355X"}, "undetermined", ["comm_check", "xgmi_check", "numa_check"],
     ["ib_switch_200g"]),
]


@pytest.mark.parametrize("inputs,outcome,nodes,recommended", BRANCHES)
def test_decision_flow_branches(config, generations, inputs, outcome, nodes, recommended):
    inputs = dict(inputs)
    cross = inputs.pop("cross_numa", None)
    advice = advise(config, cross_numa=cross, generations=generations, **inputs)
    assert advice["outcome"] == outcome
    assert [step["node"] for step in advice["path"]] == nodes
    assert sorted(row["id"] for row in advice["options"] if row["recommended"]) == sorted(recommended)
    assert [row["rank"] for row in advice["options"]] == [1, 2, 3]
    assert advice["options"][:len(recommended)] == [r for r in advice["options"] if r["recommended"]]
    assert "rebuild" not in advice["recommendation"] or "rebuild_3x4" in recommended


FABRICS = [
    # (generation given, topology, fabric id, intra-node traffic, recable, rebuild applicable)
    ("MI300X", None, "oam_full_mesh", "xgmi_full_mesh", False, False),
    ("MI325X", None, "oam_full_mesh", "xgmi_full_mesh", False, False),
    ("MI350X", None, "oam_full_mesh", "xgmi_full_mesh", False, False),
    ("MI308X", None, "oam_full_mesh", "xgmi_full_mesh", False, False),
    ("MI250", None, "oam_xgmi", "xgmi", False, False),
    ("MI210", None, "pcie_xgmi_bridge", "xgmi_hive_then_pcie", True, True),
    (None, _mi300x(), "oam_full_mesh", "xgmi_full_mesh", False, False),              # by device id 0x74a1
    (None, _mi210_two_hives(), "pcie_xgmi_bridge", "xgmi_hive_then_pcie", True, True),
    (None, _mi300x(device_id="0x1234"), "topology", "xgmi_full_mesh", None, False),  # unknown part: the links
    (None, _topology([0] * 8), "oam_xgmi", "xgmi", False, False),
    (None, None, None, None, None, True),                                            # nothing known: may apply
]


@pytest.mark.parametrize("generation,topology,fabric_id,intra,recable,rebuild", FABRICS)
def test_where_collective_traffic_flows(config, generations, generation, topology, fabric_id, intra, recable, rebuild):
    fabric = fabric_for(config, generation, topology, generations)
    assert (fabric or {}).get("id") == fabric_id
    assert (fabric or {}).get("intra_node") == intra and (fabric or {}).get("recable") == recable
    assert not fabric or fabric["source"]
    advice = advise(config, comm_share=0.5, cross_numa=0.9, generation=generation, topology=topology,
                    generations=generations)
    row = next(r for r in advice["options"] if r["id"] == "rebuild_3x4")
    assert row["applicable"] is rebuild and row["recommended"] is rebuild
    assert ("not_applicable" in row) is (not rebuild)
    if not rebuild:
        assert advice["recommendation"].startswith("Communication-bound with heavy cross-NUMA host traffic on a "
                                                   "fixed GPU fabric")
        assert advice["options"][-1]["id"] == "rebuild_3x4"
    if intra in ("xgmi_full_mesh", "xgmi") and topology:
        assert cross_numa_share(topology, None, fabric) == 0.0


SUBSETS = [
    # (generation, topology, gpus, collective_gpus, warned)
    ("MI300X", _mi300x(), [0, 1], None, "the allocation (gpus): a collective on 2 of the 8 GPUs"),
    ("MI300X", _mi300x(), [0, 1, 2, 3], None, "on 4 of the 8 GPUs of a full-mesh MI300X node uses only 3 of each "
                                              "GPU's 7 xGMI links: AMD advises running collectives on 1 or 8 GPUs"),
    ("MI300X", None, None, 4, "the benchmark run: a collective on 4 of the 8 GPUs"),
    ("MI355X", None, None, 2, "a collective on 2 of the 8 GPUs of a full-mesh MI355X node"),
    ("MI300X", _mi300x(), list(range(8)), 8, None),
    ("MI300X", _mi300x(), [5], 1, None),
    ("MI210", _mi210_two_hives(), [0, 1, 2, 3], 4, None),     # a hive of 4 PCIe cards is the natural unit
    ("MI250", None, None, 2, None),
]


@pytest.mark.parametrize("generation,topology,gpus,collective,warned", SUBSETS)
def test_subsets_of_a_full_mesh_are_warned_not_recommended(config, generation, topology, gpus, collective, warned):
    advice = advise(config, comm_share=0.5, cross_numa=0.1, generation=generation, topology=topology, gpus=gpus,
                    collective_gpus=collective)
    subset = [w for w in advice["warnings"] if "full-mesh" in w]
    if warned is None:
        assert subset == []
    else:
        assert len(subset) == 1 and warned in subset[0]
        assert "https://rocm.docs.amd.com/projects/rccl/en/latest/how-to/rccl-usage-tips.html" in subset[0]
        assert "GPUs" not in advice["recommendation"]
    assert advice["outcome"] == "tune_environment"


def test_undetermined_names_the_missing_figure(config):
    advice = advise(config, comm_share=0.5)
    assert advice["path"][-1]["reason"] == "cross_numa_share unknown"
    assert "cross_numa_share unknown (threshold 40%)" in advice["recommendation"]
    assert {r["id"] for r in advice["options"] if r["recommended"]} == {"rebuild_3x4", "ib_switch_200g"}
    advice = advise(config)
    assert advice["inputs"]["comm_share_from"] is None
    assert {r["id"] for r in advice["options"] if r["recommended"]} == {"add_gpus", "rebuild_3x4", "ib_switch_200g"}


def test_article_model_and_formula():
    # the article's formula does not reproduce its own "observed" 12/22/35/48%; the code keeps the formula
    assert [round(article_comm_ratio(s), 4) for s in (7, 13, 30, 70, 200)] == [0.0973, 0.15, 0.2693, 0.4874, 0.5]
    assert round(comm_time_ms(13, 318.98, ranks=8), 2) == 142.64
    assert round(comm_time_ms(13, 318.98), 2) == 163.02          # ranks unknown: 2(n-1)/n taken as 2
    assert comm_share_from_step(70, 10, 1.0) == 1.0              # capped
    with pytest.raises(AdviceError, match="step_time_ms=0 must be greater than 0"):
        comm_share_from_step(13, 0, 100)


def test_inputs_and_notes(config):
    advice = advise(config, model_size_b=30)
    assert "article's MI250 comm_ratio model" in advice["inputs"]["comm_share_from"]
    assert advice["warnings"] and "give step_time_ms" in advice["warnings"][0]
    advice = advise(config, model_size_b=30, comm_share=0.1)
    assert advice["inputs"]["comm_share_from"] == "measured (given)"
    assert "model parallelism" in advice["notes"][0]
    assert advise(config, model_size_b=13, comm_share=0.1)["notes"] == []


def test_topology_helpers(config):
    topo = _topology([0, 0, 0, 0, 1, 1, 1, 1])
    assert cross_numa_share(topo) == 0.0                    # every pair on xGMI: no host path crosses NUMA
    pcie = _mi210_two_hives()
    assert round(cross_numa_share(pcie), 4) == round(16 / 28, 4)
    assert cross_numa_share(pcie, [0, 1, 2, 3]) == 0.0
    assert cross_numa_share(pcie, [0, 4]) == 1.0
    no_links = dict(pcie, links=[])
    assert round(cross_numa_share(no_links), 4) == round(16 / 28, 4)   # links unknown: NUMA split only
    assert cross_numa_share(no_links, None, {"intra_node": "xgmi_full_mesh"}) == 0.0
    assert cross_numa_share(_topology([None] * 8)) is None
    summary = xgmi_summary(topo)
    assert summary == {"pairs": {"xgmi/1": 12, "xgmi/2": 16}, "max_xgmi_hops": 2, "multi_hop_pairs": 16, "pcie_pairs": 0}
    advice = advise(config, comm_share=0.4, topology=topo)
    assert advice["path"][1]["xgmi"]["max_xgmi_hops"] == 2
    assert advice["path"][1]["fabric"]["id"] == "topology" and advice["inputs"]["cross_numa_share"] == 0.0
    assert "every GPU pair is joined by xGMI" in advice["path"][1]["reason"]
    with pytest.raises(AdviceError, match=r"GPUs \[9\] are not in the topology"):
        cross_numa_share(topo, [0, 9])


BAD = [
    ({"comm_share": 35}, "comm_share=35 is outside 0..1"),
    ({"comm_share": "lots"}, "comm_share='lots' is not a number"),
    ({"model_size_b": -1}, "model_size_b=-1 must be greater than 0"),
    ({"cross_numa": 1.5}, "cross_numa_share=1.5 is outside 0..1"),
    ({"collective_gpus": "four"}, "collective_gpus='four' is not a whole number"),
]


@pytest.mark.parametrize("inputs,message", BAD)
def test_bad_inputs(config, inputs, message):
    with pytest.raises(AdviceError) as info:
        advise(config, **inputs)
    assert message in str(info.value)


def test_bad_config(config):
    with pytest.raises(AdviceError, match="no `flow` mapping"):
        advise({}, comm_share=0.1)
    looped = copy.deepcopy(config)
    looped["flow"]["nodes"]["xgmi_check"]["next"] = "xgmi_check"
    with pytest.raises(AdviceError, match="'xgmi_check' is a loop"):
        advise(looped, comm_share=0.5, cross_numa=0.5)
    custom = copy.deepcopy(config)
    custom["thresholds"]["comm_share"]["value"] = 0.10
    assert advise(custom, comm_share=0.2, cross_numa=0.0)["outcome"] == "tune_environment"


def test_filter_on_a_registered_result(config):
    registered = {"changed": False, "skipped": False, "result": {"peak_busbw": 318.98, "n_ranks": 8, "rows": []}}
    advice = cluster_advice(registered, model_size_b=13, step_time_ms=300, cross_numa_share=0.5)
    assert advice["outcome"] == "interconnect"
    assert advice["inputs"]["busbw_gbs"] == 318.98 and advice["inputs"]["ranks"] == 8
    skipped = {"skipped": True, "result": None}
    assert cluster_advice(skipped, model_size_b=7)["outcome"] == "add_compute"
    assert cluster_advice(None, comm_share=0.2, config=config)["outcome"] == "add_compute"
    with pytest.raises(AnsibleFilterError, match="cluster_advice: comm_share=2 is outside 0..1"):
        cluster_advice(None, comm_share=2)


def test_filter_reads_the_generation_and_the_run_shape():
    # the benchmark ran on 4 of the 8 GPUs of one MI300X host; its comparison names the generation
    registered = {"result": {"peak_busbw": 150.0, "n_ranks": 4, "hosts": ["gpu-a01"], "rows": []},
                  "comparison": {"generation": "MI300X", "status": "unknown"}}
    advice = cluster_advice(registered, comm_share=0.5, cross_numa_share=0.5)
    assert advice["inputs"]["fabric"]["id"] == "oam_full_mesh" and advice["outcome"] == "interconnect"
    assert [r["id"] for r in advice["options"] if r["recommended"]] == ["ib_switch_200g"]
    assert any("the benchmark run: a collective on 4 of the 8 GPUs" in w for w in advice["warnings"])
    assert any("host traffic" in n for n in advice["notes"])
    # two hosts: the ranks per host are not known from the run, no subset warning
    registered["result"]["hosts"] = ["gpu-a01", "gpu-a02"]
    assert not any("full-mesh" in w for w in cluster_advice(registered, comm_share=0.5)["warnings"])
    # the topology's identity (a model without one is identified through the collection's gpu_generations)
    advice = cluster_advice(None, comm_share=0.5, topology=_mi300x(), gpus=[0, 1])
    assert advice["inputs"]["fabric"]["found_by"] == "topology identity" and advice["inputs"]["cross_numa_share"] == 0.0
    assert advice["outcome"] == "tune_environment" and any("on 2 of the 8 GPUs" in w for w in advice["warnings"])
