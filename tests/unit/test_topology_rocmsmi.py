"""rocm-smi parsers on the real captures and on derived malformed variants."""

import collections
import json
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.topology_model import TopologyError
from ansible_collections.topotune.instinct.plugins.module_utils.topology_rocmsmi import parse_rocmsmi

SMI = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fixtures", "smi")


def _read(name):
    with open(os.path.join(SMI, name)) as handle:
        return handle.read()


def _kinds(model):
    return dict(collections.Counter((link["type"], link["hops"], link["weight"]) for link in model["links"]))


@pytest.mark.parametrize(
    ("capture", "numa", "kinds", "cliques"),
    [
        ("rocm-smi_showtopo__mi210-4gpu-xgmi__archer2-docs.txt", [0, 1, 2, 3], {("xgmi", 1, 15): 6},
         [[0, 1, 2, 3]]),
        ("rocm-smi_showtopo__mi300a-4apu__mzank-gpu-benchmarks-hip.txt", [0, 1, 2, 3], {("xgmi", 1, 15): 6},
         [[0, 1, 2, 3]]),
        ("rocm-smi_showtopo__mi308x-8gpu__ms-swift-docs.txt", [0, 0, 0, 0, 1, 1, 1, 1], {("xgmi", 1, 15): 28},
         [list(range(8))]),
        ("rocm-smi_showtoponuma__mi250-4oam-8gcd-2numa__optimum-amd-docs.txt", [0, 0, 0, 0, 1, 1, 1, 1], {}, []),
        ("rocm-smi_showtoponuma__mi250x-8gcd-lumi-g__lumi-userguide.txt", [3, 3, 1, 1, 0, 0, 2, 2], {}, []),
    ],
    ids=["mi210-old-numa-format", "mi300a-tabs", "mi308x", "mi250-toponuma", "lumi-g-toponuma"],
)
def test_captures(capture, numa, kinds, cliques):
    model = parse_rocmsmi(_read(capture), capture).to_dict()
    assert model["source"] == "rocm-smi"
    assert [g["numa_node"] for g in model["gpus"]] == numa
    assert {g["numa_source"] for g in model["gpus"]} == {"smi"}
    assert _kinds(model) == kinds
    assert model["xgmi_cliques"] == cliques
    if not kinds:
        assert any("no link matrices" in w for w in model["warnings"])
    else:
        assert model["warnings"] == []


def test_shownodesbw_mi250_infers_links():
    name = "rocm-smi_shownodesbw__mi250-4oam-8gcd-2numa__optimum-amd-docs.txt"
    model = parse_rocmsmi(_read(name), name).to_dict()
    links = {(link["a"], link["b"]): link for link in model["links"]}
    assert links[(0, 1)]["bandwidth_mbps"] == {"min": 50000, "max": 200000}  # in-package pair, 4 links
    assert links[(0, 6)]["bandwidth_mbps"] == {"min": 50000, "max": 100000}
    assert (links[(0, 3)]["type"], links[(0, 3)]["hops"], links[(0, 3)]["bandwidth_mbps"]) == ("xgmi", 2, None)
    assert _kinds(model) == {("xgmi", 1, None): 12, ("xgmi", 2, None): 16}
    assert [0, 1] in model["xgmi_cliques"] and len(model["xgmi_cliques"]) == 12
    assert any("inferred from the bandwidth matrix" in w for w in model["warnings"])


def test_merge_showtoponuma_and_shownodesbw():
    names = ("rocm-smi_showtoponuma__mi250-4oam-8gcd-2numa__optimum-amd-docs.txt",
             "rocm-smi_shownodesbw__mi250-4oam-8gcd-2numa__optimum-amd-docs.txt")
    parts = [(n, _read(n)) for n in names]
    model = parse_rocmsmi(parts).to_dict()
    assert [n["gpus"] for n in model["numa_nodes"]] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(model["links"]) == 28


def test_json_upper_triangle_and_strings():
    data = {"system": {}, "card0": {"(Topology) Numa Node": "0", "(Topology) Numa Affinity": "0"},
            "card1": {"(Topology) Numa Node": "1", "(Topology) Numa Affinity": "-1"}}
    data["system"]["(Topology) Weight between DRM devices 0 and 1"] = "40"
    data["system"]["(Topology) Hops between DRM devices 0 and 1"] = "2"
    data["system"]["(Topology) Link type between DRM devices 0 and 1"] = "PCIE"
    model = parse_rocmsmi(json.dumps(data), "showtopo.json").to_dict()
    assert model["links"] == [{"a": 0, "b": 1, "type": "pcie", "hops": 2, "weight": 40, "xgmi_links": None,
                               "bandwidth_mbps": None}]
    assert [g["numa_node"] for g in model["gpus"]] == [0, None]
    assert any("GPU 1: Numa Affinity is -1" in w for w in model["warnings"])


def _tabs_to_spaces(text):
    return text.replace("\t", "    ")


def _spaces_to_tabs(text):
    return "\n".join("\t".join(line.split()) if line.startswith("GPU") else line for line in text.splitlines())


@pytest.mark.parametrize("transform", [_tabs_to_spaces, _spaces_to_tabs], ids=["tabs-to-spaces", "spaces-to-tabs"])
def test_whitespace_variants_parse_the_same(transform):
    for name in ("rocm-smi_showtopo__mi300a-4apu__mzank-gpu-benchmarks-hip.txt",
                 "rocm-smi_showtopo__mi210-4gpu-xgmi__archer2-docs.txt"):
        original = parse_rocmsmi(_read(name), name).to_dict()
        assert parse_rocmsmi(transform(_read(name)), name).to_dict() == original


def _truncate_row(text):
    return text.replace("GPU3   15           15           15           0", "GPU3   15           15")


def _drop_numa_section(text):
    return text.split("Numa Nodes")[0]


def _garbage_numa(text):
    return text.replace("Numa Affinity: 2", "Numa Affinity: two")


@pytest.mark.parametrize(
    ("transform", "error"),
    [
        (_truncate_row, r"line 7: Weight between two GPUs row GPU3 has 2 values for 4 columns \(truncated output\?\)"),
        (_garbage_numa, "line 29: Numa Affinity of GPU 2 is 'two', not an integer"),
        (lambda text: "hello\nworld\n", "no rocm-smi topology section found"),
        (lambda text: "{not json", "invalid JSON"),
        (lambda text: '{"card0": {"GPU ID": "0x74a1"}}', r"no '\(Topology\) \.\.\.' keys"),
    ],
    ids=["truncated-row", "garbage-numa", "not-rocm-smi", "bad-json", "json-without-topology"],
)
def test_malformed_raises(transform, error):
    name = "rocm-smi_showtopo__mi210-4gpu-xgmi__archer2-docs.txt"
    with pytest.raises(TopologyError, match=error):
        parse_rocmsmi(transform(_read(name)), "x.txt")


def test_missing_numa_section_is_partial():
    name = "rocm-smi_showtopo__mi308x-8gpu__ms-swift-docs.txt"
    model = parse_rocmsmi(_drop_numa_section(_read(name)), name).to_dict()
    assert [g["numa_node"] for g in model["gpus"]] == [None] * 8
    assert any("no NUMA information for GPU 0, 1, 2, 3, 4, 5, 6, 7" in w for w in model["warnings"])
    assert len(model["links"]) == 28
