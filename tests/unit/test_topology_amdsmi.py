"""amd-smi parsers: topology text tables, both JSON schemas, static --numa and list JSON."""

import collections
import json
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.topology_amdsmi import (
    parse_amdsmi,
    parse_list_json,
    parse_numa_json,
)
from ansible_collections.topotune.instinct.plugins.module_utils.topology_model import TopologyError

SMI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "smi")
MI300X_TEXT = "amd-smi_topology__mi300x-8gpu__amdsmi-changelog-rocm6.1.txt"
MI355X_TEXT = "amd-smi_topology__mi355x-8gpu-spx__oci-gpu-quickstarts.txt"
NEW_JSON = "amd-smi_topology_-a-t_json__2gpu-pcie__amdsmi-changelog-rocm6.1.1.json"
OLD_JSON = "amd-smi_topology_json-oldformat__2gpu-pcie__amdsmi-changelog-rocm6.1.1.json"


def _read(name):
    with open(os.path.join(SMI, name)) as handle:
        return handle.read()


def _kinds(model):
    return dict(collections.Counter((link["type"], link["hops"], link["weight"], str(link["bandwidth_mbps"]))
                                    for link in model["links"]))


@pytest.mark.parametrize(
    ("capture", "bdfs", "kinds", "cliques"),
    [
        (MI300X_TEXT, ["0c", "22", "38", "5c", "9f", "af", "bf", "df"],
         {("xgmi", 1, 15, "{'min': 50000, 'max': 50000}"): 28}, [list(range(8))]),
        (MI355X_TEXT, ["0d", "26", "5d", "75", "8e", "a7", "dc", "f4"], {("xgmi", 1, None, "None"): 28},
         [list(range(8))]),
        (NEW_JSON, ["08", "44"], {("pcie", 2, None, "None"): 1}, []),
        (OLD_JSON, None, {("pcie", 2, 40, "None"): 1}, []),
    ],
    ids=["mi300x-text", "mi355x-text-9-tables", "json-current", "json-pre-6.1.1"],
)
def test_captures(capture, bdfs, kinds, cliques):
    model = parse_amdsmi(_read(capture), name=capture).to_dict()
    assert model["source"] == "amd-smi"
    if bdfs is None:
        assert [g["bdf"] for g in model["gpus"]] == [None, None]
    else:
        assert [g["bdf"] for g in model["gpus"]] == ["0000:%s:00.0" % b for b in bdfs]
    assert _kinds(model) == kinds
    assert model["xgmi_cliques"] == cliques
    assert len(model["physical_devices"]) == len(model["gpus"])
    assert any("carries no NUMA node" in w for w in model["warnings"])


def test_mi355x_zero_weights_become_unknown():
    model = parse_amdsmi(_read(MI355X_TEXT), name=MI355X_TEXT).to_dict()
    assert any("every off-diagonal weight is 0" in w for w in model["warnings"])


def test_current_json_without_hops_warns():
    model = parse_amdsmi(_read(NEW_JSON), name=NEW_JSON).to_dict()
    assert any("no hops given" in w for w in model["warnings"])


NUMA = [{"gpu": 0, "numa": {"node": 0, "affinity": 0}}, {"gpu": 1, "numa": {"node": 1, "affinity": -1}}]
LISTING = [{"gpu": 0, "bdf": "0000:08:00.0", "uuid": "u0", "kfd_id": 1234, "node_id": 2, "partition_id": 0},
           {"gpu": 1, "bdf": "0000:44:00.0", "uuid": "u1", "kfd_id": 5678, "node_id": 3, "partition_id": 0}]


def test_numa_and_list_json_fill_gpus():
    model = parse_amdsmi(_read(OLD_JSON), json.dumps(NUMA), json.dumps(LISTING), name=OLD_JSON).to_dict()
    g0, g1 = model["gpus"]
    assert (g0["numa_node"], g0["numa_source"], g0["kfd_node"], g0["gpu_id"], g0["bdf"]) == (
        0, "smi", 2, 1234, "0000:08:00.0")
    assert g1["numa_node"] is None
    assert any("GPU 1: amd-smi NUMA affinity is -1" in w for w in model["warnings"])


@pytest.mark.parametrize(
    ("parser", "data", "result"),
    [
        (parse_numa_json, {"gpu_data": NUMA}, {0: {"node": 0, "affinity": 0}, 1: {"node": 1, "affinity": -1}}),
        (parse_list_json, [{"gpu": 0, "gpu_bdf": "0000:0a:00.0", "gpu_uuid": "x"}],
         {0: {"bdf": "0000:0a:00.0", "uuid": "x", "kfd_id": None, "node_id": None, "partition_id": None}}),
    ],
)
def test_side_json(parser, data, result):
    assert parser(json.dumps(data)) == result


def _truncate_text(text):
    lines = text.splitlines()
    lines[13] = " ".join(lines[13].split()[:4])
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("capture", "transform", "error"),
    [
        (MI300X_TEXT, _truncate_text, r"line 14: row 0000:0c:00\.0 has 3 values for 8 columns"),
        (MI300X_TEXT, lambda t: t.replace("HOPS TABLE:", "").replace("LINK TYPE TABLE:", ""),
         "line 24: BDF header row without a 'XXX TABLE:' title"),
        (MI300X_TEXT, lambda t: "no tables here", "no 'XXX TABLE:' section found"),
        (OLD_JSON, lambda t: t[: len(t) // 2], "invalid JSON"),
        (OLD_JSON, lambda t: json.dumps([{"gpu": 0, "foo": 1}]), "gpu 0 has neither 'links'"),
        (NEW_JSON, lambda t: json.dumps([{"gpu": 0, "links": [{"bdf": "x"}]}]), "a link of gpu 0 has no integer"),
        (NEW_JSON, lambda t: json.dumps({"a": 1}), "expected a JSON list of per-GPU objects"),
        (NEW_JSON, lambda t: json.dumps([{"gpu": 1, "links": []}]), r"GPU indices \[1\] are not 0\.\.1"),
    ],
    ids=["truncated-row", "missing-sections", "not-amd-smi", "truncated-json", "unknown-schema",
         "link-without-gpu", "not-a-list", "gap-in-indices"],
)
def test_malformed_raises(capture, transform, error):
    with pytest.raises(TopologyError, match=error):
        parse_amdsmi(transform(_read(capture)), name=capture)


def test_tables_without_blank_lines_and_with_blank_lines_agree():
    with_blanks = parse_amdsmi(_read(MI300X_TEXT), name="a").to_dict()
    without = parse_amdsmi("\n".join(line for line in _read(MI300X_TEXT).splitlines() if line.strip()), name="a").to_dict()
    assert with_blanks == without
