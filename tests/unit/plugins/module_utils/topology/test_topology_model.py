"""Model helpers: gfx decoding, bandwidth, cliques, physical grouping, to_dict keys."""

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.topology.model import (
    GPU_KEYS,
    Topology,
    assign_physical,
    gfx_name,
    parse_bandwidth,
    xgmi_cliques,
)


@pytest.mark.parametrize(
    ("version", "gfx"),
    [
        (90010, "gfx90a"),
        (90402, "gfx942"),
        (90500, "gfx950"),
        (90400, "gfx940"),
        (90401, "gfx941"),
        (90008, "gfx908"),
        (110000, "gfx1100"),
        (0, None),
        (None, None),
        ("junk", None),
    ],
)
def test_gfx_name(version, gfx):
    assert gfx_name(version) == gfx


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("50000-200000", {"min": 50000, "max": 200000}),
        ("0-0", None),
        ("N/A", None),
        (None, None),
        ("garbage", None),
    ],
)
def test_parse_bandwidth(text, value):
    assert parse_bandwidth(text) == value


MI250X_DIRECT = [(0, 1), (0, 2), (0, 6), (1, 3), (1, 5), (2, 3), (2, 4), (3, 7), (4, 5), (4, 6), (5, 7), (6, 7)]


@pytest.mark.parametrize(
    ("count", "edges", "cliques"),
    [
        (4, [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], [[0, 1, 2, 3]]),
        (4, [(0, 1), (2, 3)], [[0, 1], [2, 3]]),
        (3, [], []),
        (8, MI250X_DIRECT, sorted([list(e) for e in MI250X_DIRECT])),  # MI250X: no triangles
        (4, [(0, 1), (1, 2), (0, 2), (2, 3)], [[0, 1, 2], [2, 3]]),
    ],
)
def test_xgmi_cliques(count, edges, cliques):
    assert xgmi_cliques(count, edges) == cliques


def test_to_dict_has_contract_keys():
    topo = Topology("kfd")
    topo.add_gpu(bdf="0000:05:00.0", numa_node=0, numa_source="pci", hive_id="7")
    topo.add_gpu(bdf="0000:05:00.1", numa_node=0, numa_source="pci", hive_id="7")
    topo.add_gpu(bdf="0000:27:00.0", numa_node=1, numa_source="pci")
    topo.numa_cpus[0] = "0-7"
    assign_physical(topo)
    topo.set_link(1, 0, "xgmi", 1, weight=13)
    model = topo.to_dict()
    assert set(model) == {"schema", "source", "sources", "gpus", "links", "numa_nodes", "hives",
                          "xgmi_cliques", "physical_devices", "cpu_topology", "warnings", "discrepancies"}
    assert model["cpu_topology"] is None  # no sysroot read
    assert all(tuple(g) == GPU_KEYS for g in model["gpus"])
    assert model["links"] == [{"a": 0, "b": 1, "type": "xgmi", "hops": 1, "weight": 13, "xgmi_links": None,
                               "bandwidth_mbps": None, "p2p_access": None}]
    assert model["numa_nodes"] == [{"node": 0, "cpus": "0-7", "gpus": [0, 1]}, {"node": 1, "cpus": None, "gpus": [2]}]
    assert model["physical_devices"] == [{"physical_index": 0, "bdf": "0000:05:00.0", "gpus": [0, 1]},
                                         {"physical_index": 1, "bdf": "0000:27:00.0", "gpus": [2]}]
    assert model["gpus"][1]["partition"] == {"index": 1, "count": 2}
    assert model["gpus"][2]["partition"] is None
    assert model["hives"] == [{"hive_id": "7", "gpus": [0, 1]}]
    assert model["xgmi_cliques"] == [[0, 1]]
    assert "unequal partition counts" in model["warnings"][0]


def test_add_gpu_rejects_unknown_key():
    with pytest.raises(TypeError, match="unknown GPU keys"):
        Topology("kfd").add_gpu(colour="red")
