"""rocm-smi parsers on the real captures (text and JSON) and on derived variants. Expectations are the facts of
each capture's .source.md."""

import collections
import json
import os
import re

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.topology.model import TopologyError
from ansible_collections.topotune.instinct.plugins.module_utils.topology.rocmsmi import parse_rocmsmi

SMI = os.path.join(os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")), "fixtures", "smi")
MI100_JSON = "rocm-smi_json-alltopo__mi100-6gpu-pcie-rocm571__telegraf-testdata.json"
MI50_JSON = "rocm-smi_json-alltopo__mi50-1card-8dev-topo__telegraf-testdata.json"
RX580_TEXT = "rocm-smi_showtopo__rx580-1gpu-affinity-minus1__rocm-issue4965.txt"
MI210_TEXT = "rocm-smi_showtopo__mi210-4gpu-xgmi__archer2-docs.txt"
MI300A_TEXT = "rocm-smi_showtopo__mi300a-4apu__mzank-gpu-benchmarks-hip.txt"
MI308X_TEXT = "rocm-smi_showtopo__mi308x-8gpu__ms-swift-docs.txt"
MI250_NODESBW = "rocm-smi_shownodesbw__mi250-4oam-8gcd-2numa__optimum-amd-docs.txt"
MI300X_ALL = "rocm-smi_-a__mi300x-4gpu-spx__thamada-nvidia-smi.txt"
MI250X_LINKS = "sysfs_xgmi_num_links__mi250x-8gcd__rocm-systems-issue5763.txt"


def _read(name):
    with open(os.path.join(SMI, name)) as handle:
        return handle.read()


def _model(text, name="capture"):
    return parse_rocmsmi(text, name).to_dict()


def _kinds(model):
    return dict(collections.Counter((link["type"], link["hops"], link["weight"]) for link in model["links"]))


@pytest.mark.parametrize(
    ("capture", "numa", "kinds", "cliques"),
    [
        (MI210_TEXT, [0, 1, 2, 3], {("xgmi", 1, 15): 6}, [[0, 1, 2, 3]]),
        (MI300A_TEXT, [0, 1, 2, 3], {("xgmi", 1, 15): 6}, [[0, 1, 2, 3]]),
        (MI308X_TEXT, [0, 0, 0, 0, 1, 1, 1, 1], {("xgmi", 1, 15): 28}, [list(range(8))]),
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


# facts of the telegraf captures' .source.md
MI100_BUSES = ["0000:1E:00.0", "0000:22:00.0", "0000:3F:00.0", "0000:43:00.0", "0000:46:00.0", "0000:49:00.0"]


@pytest.mark.parametrize(
    ("capture", "bdfs", "device_ids", "names", "unique_ids", "numa", "kinds", "warnings"),
    [
        (MI100_JSON, [b.lower() for b in MI100_BUSES], ["0x738c"] * 6, ["Arcturus GL-XL [Instinct MI100]"] * 6,
         [None] * 6, [0] * 6, {("pcie", 2, 40): 15}, []),
        (MI50_JSON, ["0000:63:00.0"] + [None] * 7, ["0x66a1"] + [None] * 7, ["Radeon Instinct MI50 32GB"] + [None] * 7,
         [str(0x2f048617326b1ea)] + [None] * 7, [0] + [None] * 7, {("pcie", 2, 40): 12, ("pcie", 3, 72): 16},
         ["covers devices 0-7 but has a cardN section only for device(s) 0: no PCI address, identity or NUMA node "
          "for device(s) 1-7", "no NUMA information for GPU 1-7"]),
    ],
    ids=["mi100-6gpu", "mi50-1card-8dev"],
)
def test_json_alltopo_captures(capture, bdfs, device_ids, names, unique_ids, numa, kinds, warnings):
    model = _model(_read(capture), capture)
    gpus = model["gpus"]
    assert [g["bdf"] for g in gpus] == bdfs
    assert [g["device_id"] for g in gpus] == device_ids
    assert [g["name"] for g in gpus] == names
    assert [g["unique_id"] for g in gpus] == unique_ids
    assert [g["numa_node"] for g in gpus] == numa
    assert [g["numa_source"] for g in gpus] == ["smi" if n is not None else None for n in numa]
    assert _kinds(model) == kinds
    assert model["xgmi_cliques"] == []
    assert len(model["physical_devices"]) == len(gpus)
    for expected in warnings:
        assert any(expected in w for w in model["warnings"]), model["warnings"]
    assert len(model["warnings"]) == len(warnings)


def test_mi50_groups_of_four():
    links = {(link["a"], link["b"]): link for link in _model(_read(MI50_JSON))["links"]}
    for (a, b), link in links.items():
        same = a // 4 == b // 4
        assert (link["hops"], link["weight"]) == ((2, 40) if same else (3, 72))


def test_rx580_affinity_minus_one_uses_numa_node():
    model = _model(_read(RX580_TEXT), RX580_TEXT)
    assert [(g["numa_node"], g["numa_source"]) for g in model["gpus"]] == [(0, "kfd")]
    assert model["links"] == []
    assert model["numa_nodes"] == [{"node": 0, "cpus": None, "gpus": [0]}]
    assert any("GPU 0: Numa Affinity is -1" in w and "using its Numa Node 0" in w for w in model["warnings"])


@pytest.mark.parametrize(
    ("node", "affinity", "expected"),
    [
        ("0", "-1", (0, "kfd")),
        ("1", "4294967295", (1, "kfd")),
        ("4294967295", "4294967295", (None, None)),
        ("-1", "-1", (None, None)),
        ("1", "0", (0, "smi")),
        (None, "4294967295", (None, None)),
        ("1", None, (1, "kfd")),
    ],
    ids=["minus-one", "uint32-minus-one", "both-uint32", "both-minus-one", "affinity-wins", "affinity-only-unknown",
         "node-only"],
)
@pytest.mark.parametrize("form", ["text", "json"])
def test_numa_rule(form, node, affinity, expected):
    if form == "text":
        lines = [line for line in _read(RX580_TEXT).splitlines() if "Numa" not in line or "=" in line]
        end = lines.index(next(line for line in lines if "End of ROCm SMI Log" in line))
        numa = ["GPU[0]\t\t: (Topology) Numa %s: %s" % (k, v) for k, v in (("Node", node), ("Affinity", affinity))
                if v is not None]
        text = "\n".join(lines[:end] + numa + lines[end:])
    else:
        data = json.loads(_read(MI100_JSON))
        card = data["card2"]
        for key, value in (("(Topology) Numa Node", node), ("(Topology) Numa Affinity", affinity)):
            card.pop(key)
            if value is not None:
                card[key] = value
        text = json.dumps(data)
    model = _model(text)
    index = 0 if form == "text" else 2
    gpu = model["gpus"][index]
    assert (gpu["numa_node"], gpu["numa_source"]) == expected
    assert all(n["node"] != 4294967295 for n in model["numa_nodes"])


def test_identity_lines_in_text():
    """rocm-smi -a identity lines (PCI Bus, Device ID, Unique ID, Card series) next to --showtopo sections."""
    model = _model(_read(MI300A_TEXT) + _read(MI300X_ALL))
    gpus = model["gpus"]
    assert [g["bdf"] for g in gpus] == ["0000:26:00.0", "0000:46:00.0", "0000:65:00.0", "0000:85:00.0"]
    assert {g["device_id"] for g in gpus} == {"0x74a1"}
    assert {g["name"] for g in gpus} == {"AMD Instinct MI300X OAM"}
    assert gpus[0]["unique_id"] == str(0x8d1457e2c20f59d2)
    assert _kinds(model) == {("xgmi", 1, 15): 6}


def test_identity_without_topology_is_not_enough():
    with pytest.raises(TopologyError, match="no rocm-smi topology section found"):
        _model(_read(MI300X_ALL), MI300X_ALL)


def _weight_matrix_from_links(links_text):
    """A --showtopo text for the MI250X 8-GCD node: weight 15 per xGMI hop (15 = linked, 30 = through a GCD),
    hops 1 and XGMI everywhere, as rocm-smi prints them."""
    linked = [[int(v) > 0 for v in line.split()] for line in links_text.splitlines() if line.strip()]
    count = len(linked)
    header = "       " + "".join("GPU%-10d" % i for i in range(count))

    def matrix(title, cell):
        rows = ["GPU%-4d" % a + "".join("%-13s" % ("0" if a == b else cell(a, b)) for b in range(count))
                for a in range(count)]
        return ["=" * 20 + " %s " % title + "=" * 20, header] + rows + [""]

    return "\n".join(matrix("Weight between two GPUs", lambda a, b: 15 if linked[a][b] else 30)
                     + matrix("Hops between two GPUs", lambda a, b: 1)
                     + matrix("Link Type between two GPUs", lambda a, b: "XGMI"))


def test_xgmi_weight_30_means_two_hops():
    model = _model(_weight_matrix_from_links(_read(MI250X_LINKS)))
    assert _kinds(model) == {("xgmi", 1, 15): 12, ("xgmi", 2, 30): 16}
    assert len(model["xgmi_cliques"]) == 12 and [0, 1] in model["xgmi_cliques"]


def _keep_sections(text, keep):
    out, keeping = [], True
    for line in text.splitlines():
        title = re.match(r"^=+ (.*?) =+$", line)
        if title:
            keeping = title.group(1) in keep or "System Management" in title.group(1) or "End of" in title.group(1)
        if keeping:
            out.append(line)
    return "\n".join(out) + "\n"


@pytest.mark.parametrize(
    ("capture", "keep", "kinds", "warning"),
    [
        (MI308X_TEXT, {"Weight between two GPUs", "Numa Nodes"}, {("xgmi", 1, 15): 28}, "inferred from the weight matrix"),
        (MI308X_TEXT, {"Hops between two GPUs"}, {("xgmi", 1, None): 28}, "inferred from the hops matrix"),
        (MI210_TEXT, {"Link Type between two GPUs"}, {("xgmi", 1, None): 6}, "hops assumed 1 for xGMI"),
    ],
    ids=["weight-only", "hops-only", "type-only"],
)
def test_some_matrices_only(capture, keep, kinds, warning):
    model = _model(_keep_sections(_read(capture), keep))
    assert _kinds(model) == kinds
    assert any(warning in w for w in model["warnings"]), model["warnings"]


@pytest.mark.parametrize(
    ("drop", "kinds", "warning"),
    [
        ("Link type", {("pcie", 2, 40): 12, ("pcie", 3, 72): 16}, "inferred from the hops matrix"),
        ("Link type|Hops", {("pcie", 2, 40): 12, ("pcie", 3, 72): 16}, "inferred from the weight matrix"),
    ],
    ids=["no-type", "weight-only"],
)
def test_json_partial_topology(drop, kinds, warning):
    data = json.loads(_read(MI50_JSON))
    data["system"] = {k: v for k, v in data["system"].items() if not re.search(r"\) (%s) between" % drop, k)}
    model = _model(json.dumps(data))
    assert _kinds(model) == kinds
    assert any(warning in w for w in model["warnings"]), model["warnings"]


def test_showtopoaccess_matrix():
    access = ("==================== Link accessibility between two GPUs ======================\n"
              "       GPU0         GPU1         GPU2         GPU3\n"
              "GPU0   True         True         False        True\n"
              "GPU1   True         True         True         True\n"
              "GPU2   False        True         True         True\n"
              "GPU3   True         True         True         True\n")
    model = _model(_read(MI210_TEXT) + access)
    flags = {(link["a"], link["b"]): link["p2p_access"] for link in model["links"]}
    assert flags[(0, 2)] is False and flags[(0, 1)] is True and set(flags.values()) == {True, False}
    assert {link["p2p_access"] for link in _model(_read(MI210_TEXT))["links"]} == {None}


def test_shownodesbw_mi250_infers_links():
    model = parse_rocmsmi(_read(MI250_NODESBW), MI250_NODESBW).to_dict()
    links = {(link["a"], link["b"]): link for link in model["links"]}
    assert links[(0, 1)]["bandwidth_mbps"] == {"min": 50000, "max": 200000}  # in-package pair, 4 links
    assert links[(0, 6)]["bandwidth_mbps"] == {"min": 50000, "max": 100000}
    assert (links[(0, 3)]["type"], links[(0, 3)]["hops"], links[(0, 3)]["bandwidth_mbps"]) == ("xgmi", 2, None)
    assert _kinds(model) == {("xgmi", 1, None): 12, ("xgmi", 2, None): 16}
    assert [0, 1] in model["xgmi_cliques"] and len(model["xgmi_cliques"]) == 12
    assert any("inferred from the bandwidth matrix" in w for w in model["warnings"])


def test_merge_showtoponuma_and_shownodesbw():
    names = ("rocm-smi_showtoponuma__mi250-4oam-8gcd-2numa__optimum-amd-docs.txt", MI250_NODESBW)
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
                               "bandwidth_mbps": None, "p2p_access": None}]
    assert [(g["numa_node"], g["numa_source"]) for g in model["gpus"]] == [(0, "smi"), (1, "kfd")]
    assert any("GPU 1: Numa Affinity is -1" in w for w in model["warnings"])


def test_json_after_warning_lines():
    text = "WARNING: AMD GPU device(s) is/are in a low-power state. Check power control/runtime_status\n\n"
    assert _model(text + _read(MI100_JSON)) == _model(_read(MI100_JSON))


PREFIXES = ["[1,0]<stdout>:", "  0: ", "2025-06-25T10:11:12.345678+00:00 gpu-node-01 ",
            "Jun 25 10:11:12 gpu-node-01 rocm-smi[4242]: ", "gpu-node-01: "]


@pytest.mark.parametrize("prefix", PREFIXES)
@pytest.mark.parametrize("capture", [MI210_TEXT, MI300A_TEXT, MI308X_TEXT, RX580_TEXT, MI250_NODESBW])
def test_line_prefixes_give_the_same_model(capture, prefix):
    text = _read(capture)
    prefixed = "\n".join(prefix + line for line in text.splitlines())
    assert _model(prefixed) == _model(text)


def _tabs_to_spaces(text):
    return text.replace("\t", "    ")


def _spaces_to_tabs(text):
    return "\n".join("\t".join(line.split()) if line.startswith("GPU") else line for line in text.splitlines())


@pytest.mark.parametrize("transform", [_tabs_to_spaces, _spaces_to_tabs], ids=["tabs-to-spaces", "spaces-to-tabs"])
def test_whitespace_variants_parse_the_same(transform):
    for name in (MI300A_TEXT, MI210_TEXT):
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
        (lambda text: text.replace("GPU3   15", "GPU99999 15"), "line 7: GPU index 99999 is out of range"),
        (lambda text: '{"system": {"(Topology) Weight between DRM devices 0 and 123456789": "15"}}',
         "GPU index 123456789 is out of range"),
        (lambda text: "==== Weight between two GPUs ====\n       GPU0         GPU1\n", r"the rocm-smi sections name no GPU"),
    ],
    ids=["truncated-row", "garbage-numa", "not-rocm-smi", "bad-json", "json-without-topology", "huge-index-text",
         "huge-index-json", "header-only"],
)
def test_malformed_raises(transform, error):
    with pytest.raises(TopologyError, match=error) as info:
        parse_rocmsmi(transform(_read(MI210_TEXT)), "x.txt")
    assert "\n" not in str(info.value)


def test_missing_numa_section_is_partial():
    model = parse_rocmsmi(_drop_numa_section(_read(MI308X_TEXT)), MI308X_TEXT).to_dict()
    assert [g["numa_node"] for g in model["gpus"]] == [None] * 8
    assert any("no NUMA information for GPU 0-7" in w for w in model["warnings"])
    assert len(model["links"]) == 28
