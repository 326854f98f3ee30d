"""amd-smi parsers: topology text tables (all or some of them), both JSON schemas, static --numa and list JSON,
and the shared smi rules (weight rule, NUMA rule, PCI addresses). Expectations are the facts of each capture's
.source.md."""

import collections
import json
import os
import re

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.topology.amdsmi import (
    infer_link,
    normalize_bdf,
    numa_number,
    parse_amdsmi,
    parse_list_json,
    parse_numa_json,
    xgmi_hops,
)
from ansible_collections.topotune.instinct.plugins.module_utils.topology.model import TopologyError

SMI = os.path.join(os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")), "fixtures", "smi")
MI300X_TEXT = "amd-smi_topology__mi300x-8gpu__amdsmi-changelog-rocm6.1.txt"
MI355X_TEXT = "amd-smi_topology__mi355x-8gpu-spx__oci-gpu-quickstarts.txt"
RX7900_TEXT = "amd-smi_topology__rx7900xtx-2gpu-pcie__rocm-issue6074.txt"
NEW_JSON = "amd-smi_topology_-a-t_json__2gpu-pcie__amdsmi-changelog-rocm6.1.1.json"
OLD_JSON = "amd-smi_topology_json-oldformat__2gpu-pcie__amdsmi-changelog-rocm6.1.1.json"
TEXT_CAPTURES = (MI300X_TEXT, MI355X_TEXT, RX7900_TEXT)


def _read(name):
    with open(os.path.join(SMI, name)) as handle:
        return handle.read()


def _model(text, name="capture"):
    return parse_amdsmi(text, name=name).to_dict()


def _kinds(model):
    return dict(collections.Counter((link["type"], link["hops"], link["weight"], str(link["bandwidth_mbps"]),
                                     link["p2p_access"]) for link in model["links"]))


def _keep_tables(text, keep):
    """The capture with only the tables named in ``keep`` (the legend and other trailing lines stay)."""
    out, table = [], None
    for line in text.splitlines():
        title = re.match(r"^([A-Z][A-Z -]*) TABLE:", line)
        if title:
            table = title.group(1)
        elif line.startswith("Legend:"):
            table = None
        if table is None or table in keep:
            out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    ("capture", "bdfs", "kinds", "cliques"),
    [
        (MI300X_TEXT, ["0c", "22", "38", "5c", "9f", "af", "bf", "df"],
         {("xgmi", 1, 15, "{'min': 50000, 'max': 50000}", True): 28}, [list(range(8))]),
        (MI355X_TEXT, ["0d", "26", "5d", "75", "8e", "a7", "dc", "f4"], {("xgmi", 1, None, "None", True): 28},
         [list(range(8))]),
        # rocm-issue6074: ACCESS DISABLED, WEIGHT 40, HOPS 2, LINK TYPE PCIE, NUMA BW N/A
        (RX7900_TEXT, ["03", "0c"], {("pcie", 2, 40, "None", False): 1}, []),
        (NEW_JSON, ["08", "44"], {("pcie", 2, None, "None", False): 1}, []),
        (OLD_JSON, None, {("pcie", 2, 40, "None", False): 1}, []),
    ],
    ids=["mi300x-text", "mi355x-text-9-tables", "rx7900xtx-text-p2p-disabled", "json-current", "json-pre-6.1.1"],
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
    assert [g["numa_node"] for g in model["gpus"]] == [None] * len(bdfs or [0, 0])
    assert any("carries no NUMA node" in w for w in model["warnings"])


def test_mi355x_zero_weights_become_unknown():
    model = parse_amdsmi(_read(MI355X_TEXT), name=MI355X_TEXT).to_dict()
    assert any("every off-diagonal weight is 0" in w for w in model["warnings"])


def test_current_json_without_hops_warns():
    model = parse_amdsmi(_read(NEW_JSON), name=NEW_JSON).to_dict()
    assert any("no hops given" in w for w in model["warnings"])


@pytest.mark.parametrize(
    ("capture", "keep", "kinds", "warning"),
    [
        # ACCESS + WEIGHT only: the link type comes from AMD's weight rule (40 = PCIe under one CPU node, 15 = xGMI)
        (RX7900_TEXT, {"ACCESS", "WEIGHT"}, {("pcie", 2, 40, "None", False): 1}, "inferred from the weight table"),
        (MI300X_TEXT, {"ACCESS", "WEIGHT"}, {("xgmi", 1, 15, "None", True): 28}, "inferred from the weight table"),
        (MI300X_TEXT, {"WEIGHT", "NUMA BW"}, {("xgmi", 1, 15, "{'min': 50000, 'max': 50000}", None): 28},
         "inferred from the weight table"),
        # no LINK TYPE table: HOPS 1 = xGMI, 2 = PCIe (AMD's hops definition)
        (RX7900_TEXT, {"WEIGHT", "HOPS"}, {("pcie", 2, 40, "None", None): 1}, "inferred from the hops table"),
        (MI355X_TEXT, {"ACCESS", "HOPS"}, {("xgmi", 1, None, "None", True): 28}, "inferred from the hops table"),
        # LINK TYPE without HOPS: hops from the weight (MI300X) or assumed (MI355X prints weight 0)
        (MI300X_TEXT, {"LINK TYPE", "WEIGHT"}, {("xgmi", 1, 15, "None", None): 28}, "inferred from the weight table"),
        (MI355X_TEXT, {"LINK TYPE", "WEIGHT"}, {("xgmi", 1, None, "None", None): 28}, "hops assumed 1 for xGMI"),
        # nothing tells the link type: no links, said so
        (RX7900_TEXT, {"ACCESS"}, {}, "no LINK TYPE, HOPS or WEIGHT table: links unknown"),
        (MI355X_TEXT, {"ACCESS", "WEIGHT"}, {}, "no readable link type, hops or weight: links unknown"),
    ],
    ids=["rx7900-access-weight", "mi300x-access-weight", "mi300x-weight-bw", "rx7900-weight-hops",
         "mi355x-access-hops", "mi300x-type-weight", "mi355x-type-zero-weight", "rx7900-access-only",
         "mi355x-access-zero-weight"],
)
def test_some_tables_only(capture, keep, kinds, warning):
    text = _keep_tables(_read(capture), keep)
    assert "TABLE:" in text and all(("%s TABLE:" % t) in text for t in keep)
    model = _model(text, capture)
    assert _kinds(model) == kinds
    assert any(warning in w for w in model["warnings"]), model["warnings"]
    if "weight table" in warning:
        assert any("amd-smi CLI guide" in w for w in model["warnings"])  # the rule and its source are named


def test_p2p_disabled_is_surfaced_not_enabled():
    model = _model(_read(RX7900_TEXT), RX7900_TEXT)
    assert model["links"][0]["p2p_access"] is False
    enabled = _model(_read(MI300X_TEXT), MI300X_TEXT)
    assert {link["p2p_access"] for link in enabled["links"]} == {True}
    # one direction DISABLED is enough
    one_way = _read(RX7900_TEXT).replace("0000:0c:00.0 DISABLED     ENABLED", "0000:0c:00.0 ENABLED      ENABLED")
    assert _model(one_way)["links"][0]["p2p_access"] is False


@pytest.mark.parametrize(
    "trailer",
    ["\n\n$ \n", "```\n", "Legend:\n  SELF = Current GPU\n", "\nEnd of output\n0000:03:00.0    AMD Radeon RX 7900 XTX\n",
     "\n[user@host ~]$ amd-smi version\n"],
    ids=["prompt", "fence", "legend", "summary-line-with-bdf", "next-command"],
)
@pytest.mark.parametrize("capture", TEXT_CAPTURES)
def test_trailing_lines_are_ignored(capture, trailer):
    text = _read(capture)
    assert _model(text + trailer) == _model(text)
    partial = _keep_tables(text, {"ACCESS", "WEIGHT"})
    assert _model(partial + trailer) == _model(partial)


PREFIXES = {
    "mpirun-tag-output": "[1,0]<stdout>:",
    "srun-label": "  0: ",
    "iso-time-host": "2025-06-25T10:11:12.345678+00:00 gpu-node-01 ",
    "syslog": "Jun 25 10:11:12 gpu-node-01 amd-smi[4242]: ",
    "pdsh": "gpu-node-01: ",
    "k8s-log": "2025-06-25T10:11:12.123456789Z stdout F ",
}


@pytest.mark.parametrize("prefix", sorted(PREFIXES))
@pytest.mark.parametrize("capture", TEXT_CAPTURES)
def test_line_prefixes_give_the_same_model(capture, prefix):
    text = _read(capture)
    prefixed = "\n".join(PREFIXES[prefix] + line for line in text.splitlines())
    assert _model(prefixed, capture) == _model(text, capture)


def test_reordered_tables_give_the_same_model():
    text = _read(RX7900_TEXT)
    blocks = re.split(r"(?m)^(?=[A-Z][A-Z -]* TABLE:)", text.split("\n\n\nLegend")[0])
    reordered = "".join(reversed([b if b.endswith("\n") else b + "\n" for b in blocks if b]))
    assert _model(reordered) == _model(text)


def test_tables_without_blank_lines_and_with_blank_lines_agree():
    with_blanks = parse_amdsmi(_read(MI300X_TEXT), name="a").to_dict()
    without = parse_amdsmi("\n".join(line for line in _read(MI300X_TEXT).splitlines() if line.strip()), name="a").to_dict()
    assert with_blanks == without


NUMA = [{"gpu": 0, "numa": {"node": 0, "affinity": 0}}, {"gpu": 1, "numa": {"node": 1, "affinity": -1}}]
LISTING = [{"gpu": 0, "bdf": "0000:08:00.0", "uuid": "u0", "kfd_id": 1234, "node_id": 2, "partition_id": 0},
           {"gpu": 1, "bdf": "0000:44:00.0", "uuid": "u1", "kfd_id": 5678, "node_id": 3, "partition_id": 0}]


def test_numa_and_list_json_fill_gpus():
    model = parse_amdsmi(_read(OLD_JSON), json.dumps(NUMA), json.dumps(LISTING), name=OLD_JSON).to_dict()
    g0, g1 = model["gpus"]
    assert (g0["numa_node"], g0["numa_source"], g0["kfd_node"], g0["gpu_id"], g0["bdf"]) == (
        0, "smi", 2, 1234, "0000:08:00.0")
    # affinity -1: the KFD CPU node ("node") is used, and said so
    assert (g1["numa_node"], g1["numa_source"]) == (1, "kfd")
    assert any("GPU 1: amd-smi NUMA affinity is -1" in w and "using its NUMA node 1" in w for w in model["warnings"])


@pytest.mark.parametrize(
    ("numa", "expected"),
    [
        ({"node": 1, "affinity": 1}, (1, "smi")),
        ({"node": 0, "affinity": 4294967295}, (0, "kfd")),  # uint32 -1
        ({"node": 4294967295, "affinity": 4294967295}, (None, None)),
        ({"node": -1, "affinity": -1}, (None, None)),
        ({"node": 1}, (1, "kfd")),
        ({"node": "N/A", "affinity": "N/A"}, (None, None)),
    ],
    ids=["affinity", "affinity-uint32-minus-one", "both-uint32-minus-one", "both-minus-one", "node-only", "n/a"],
)
def test_numa_rule(numa, expected):
    model = parse_amdsmi(_read(OLD_JSON), json.dumps([{"gpu": 0, "numa": numa}]), name=OLD_JSON).to_dict()
    gpu = model["gpus"][0]
    assert (gpu["numa_node"], gpu["numa_source"]) == expected
    assert all(n["node"] < 2 ** 31 for n in model["numa_nodes"])


@pytest.mark.parametrize(
    ("parser", "data", "result"),
    [
        (parse_numa_json, {"gpu_data": NUMA}, {0: {"node": 0, "affinity": 0}, 1: {"node": 1, "affinity": -1}}),
        (parse_list_json, [{"gpu": 0, "gpu_bdf": "0000:0A:00.0", "gpu_uuid": "x"}],
         {0: {"bdf": "0000:0a:00.0", "uuid": "x", "kfd_id": None, "node_id": None, "partition_id": None}}),
    ],
)
def test_side_json(parser, data, result):
    assert parser(json.dumps(data)) == result


@pytest.mark.parametrize(
    ("weight", "partitions", "expected"),
    [
        (15, False, ("xgmi", 1)),    # one xGMI hop (KFD_CRAT_XGMI_WEIGHT)
        (30, False, ("xgmi", 2)),    # two xGMI hops: MI250 GCDs that are not linked directly
        (13, True, ("xgmi", 1)),     # MI300 partitions of one socket
        (41, True, ("xgmi", 1)),     # MI300 partitions of two sockets: 13 + 15 + 13
        (41, False, ("pcie", 3)),
        (40, False, ("pcie", 2)),    # GPU->CPU 20 + CPU->GPU 20, one CPU node
        (52, False, ("pcie", 3)),    # + a CPU-CPU io_link of 12 (rocm_smi_lib issue 108)
        (72, False, ("pcie", 3)),    # + 32 between the sockets of an EPYC server (MI50 capture)
        (0, False, None),
        (None, False, None),
    ],
)
def test_weight_rule(weight, partitions, expected):
    assert infer_link(weight, partitions) == expected


@pytest.mark.parametrize(("hops", "weight", "expected"), [
    (1, 15, 1), (1, 30, 2), (1, 45, 2), (1, 41, 1), (1, 13, 1), (2, 30, 2), (1, None, 1)])
def test_xgmi_hops(hops, weight, expected):
    assert xgmi_hops(hops, weight) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [("0000:1E:00.0", "0000:1e:00.0"), ("1e:00.0", "0000:1e:00.0"), (" 0001:C1:00.7 ", "0001:c1:00.7"),
     ("10000:e1:00.0", "10000:e1:00.0"), ("0000:1e:00.8", None), ("0000:1e:20.0", None), ("N/A", None), (12, None)],
)
def test_normalize_bdf(value, expected):
    assert normalize_bdf(value) == expected


@pytest.mark.parametrize(("value", "expected"), [(0, 0), ("3", 3), (-1, None), ("-1", None), (4294967295, None),
                                                 ("4294967295", None), (2 ** 31, None), ("N/A", None), (True, None)])
def test_numa_number(value, expected):
    assert numa_number(value) == expected


def test_mpi_tagged_text_is_not_taken_for_json():
    text = "\n".join("[1,0]<stdout>:" + line for line in _read(RX7900_TEXT).splitlines())
    assert text.startswith("[")
    assert _kinds(_model(text)) == {("pcie", 2, 40, "None", False): 1}


def _truncate_text(text):
    lines = text.splitlines()
    lines[13] = " ".join(lines[13].split()[:4])
    return "\n".join(lines)


@pytest.mark.parametrize(
    ("capture", "transform", "error"),
    [
        (MI300X_TEXT, _truncate_text, r"line 14: row 0000:0c:00\.0 of the WEIGHT table has 3 values for 8 columns"),
        (MI300X_TEXT, lambda t: t.replace("HOPS TABLE:", "").replace("LINK TYPE TABLE:", ""),
         "line 24: BDF header row without a 'XXX TABLE:' title"),
        (MI300X_TEXT, lambda t: "no tables here", "no 'XXX TABLE:' section found"),
        (MI300X_TEXT, lambda t: t.replace("             0000:0c:00.0 0000:22", "             0000:22:00.0 0000:0c", 1),
         "line 13: tables list GPUs in different orders"),
        (RX7900_TEXT, lambda t: t.replace("WEIGHT TABLE:\n             0000:03:00.0 0000:0c:00.0\n", "WEIGHT TABLE:\n"),
         "line 6: expected the BDF header row of the WEIGHT table"),
        (OLD_JSON, lambda t: t[: len(t) // 2], "invalid JSON"),
        (OLD_JSON, lambda t: json.dumps([{"gpu": 0, "foo": 1}]), "gpu 0 has neither 'links'"),
        (NEW_JSON, lambda t: json.dumps([{"gpu": 0, "links": [{"bdf": "x"}]}]), "a link of gpu 0 has no integer"),
        (NEW_JSON, lambda t: json.dumps([{"gpu": True, "links": []}]), "an entry has no integer 'gpu' key"),
        (NEW_JSON, lambda t: json.dumps({"a": 1}), "expected a JSON list of per-GPU objects"),
        (NEW_JSON, lambda t: json.dumps([{"gpu": 1, "links": []}]), r"GPU indices \[1\] are not consecutive from 0"),
        (NEW_JSON, lambda t: json.dumps([{"gpu": 10 ** 12, "links": []}]), "GPU index 1000000000000 is out of range"),
    ],
    ids=["truncated-row", "missing-sections", "not-amd-smi", "columns-reordered", "missing-header", "truncated-json",
         "unknown-schema", "link-without-gpu", "bool-gpu", "not-a-list", "gap-in-indices", "huge-index"],
)
def test_malformed_raises(capture, transform, error):
    with pytest.raises(TopologyError, match=error) as info:
        parse_amdsmi(transform(_read(capture)), name=capture)
    assert "\n" not in str(info.value)
