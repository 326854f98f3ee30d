"""Property-based tests of the topology readers on damaged real captures.

The amd-smi parsers (text tables, both JSON schemas, static --numa / list JSON), the rocm-smi parsers (text and
JSON) and the KFD sysfs reader get the real captures of tests/fixtures/smi and tests/fixtures/kfd with truncations,
line noise, prefixes (log collectors' time stamps and host names, ``[1,0]<stdout>:``, srun's `` 0: ``), reordered
sections, deleted / duplicated / swapped lines, random bytes, and (JSON) dropped keys, retyped values and duplicated
entries. Whatever they get, they either return a well-formed model or raise the project's own error (a
``TopotuneError``) with a one-line message; anything else (a traceback) fails.

Metamorphic properties: a prefix added to every line, or tables / sections in another order, give the same model.

Reproducible: ``derandomize=True`` (examples derived from the test), no example database. Budget: well under a
minute on 2 cores (``max_examples`` below); ``TOPOTUNE_FUZZ_SCALE`` / ``TOPOTUNE_FUZZ_RANDOM`` run longer, randomly
seeded campaigns locally.
"""

import json
import os
import re
import shutil

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402 - after the importorskip above
from hypothesis import strategies as st  # noqa: E402

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError  # noqa: E402
from ansible_collections.topotune.instinct.plugins.module_utils.topology.amdsmi import parse_amdsmi  # noqa: E402
from ansible_collections.topotune.instinct.plugins.module_utils.topology.kfd import read_kfd  # noqa: E402
from ansible_collections.topotune.instinct.plugins.module_utils.topology.model import GPU_KEYS  # noqa: E402
from ansible_collections.topotune.instinct.plugins.module_utils.topology.rocmsmi import parse_rocmsmi  # noqa: E402

FIXTURES = os.path.join(os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")), "fixtures")
SMI = os.path.join(FIXTURES, "smi")
KFD = os.path.join(FIXTURES, "kfd")

AMDSMI_TEXT = (
    "amd-smi_topology__mi300x-8gpu__amdsmi-changelog-rocm6.1.txt",
    "amd-smi_topology__mi355x-8gpu-spx__oci-gpu-quickstarts.txt",
    "amd-smi_topology__rx7900xtx-2gpu-pcie__rocm-issue6074.txt",
)
AMDSMI_JSON = (
    "amd-smi_topology_-a-t_json__2gpu-pcie__amdsmi-changelog-rocm6.1.1.json",
    "amd-smi_topology_json-oldformat__2gpu-pcie__amdsmi-changelog-rocm6.1.1.json",
)
ROCMSMI_TEXT = (
    "rocm-smi_showtopo__mi210-4gpu-xgmi__archer2-docs.txt",
    "rocm-smi_showtopo__mi300a-4apu__mzank-gpu-benchmarks-hip.txt",
    "rocm-smi_showtopo__mi308x-8gpu__ms-swift-docs.txt",
    "rocm-smi_showtopo__rx580-1gpu-affinity-minus1__rocm-issue4965.txt",
    "rocm-smi_showtoponuma__mi250-4oam-8gcd-2numa__optimum-amd-docs.txt",
    "rocm-smi_showtoponuma__mi250x-8gcd-lumi-g__lumi-userguide.txt",
    "rocm-smi_shownodesbw__mi250-4oam-8gcd-2numa__optimum-amd-docs.txt",
)
ROCMSMI_JSON = (
    "rocm-smi_json-alltopo__mi100-6gpu-pcie-rocm571__telegraf-testdata.json",
    "rocm-smi_json-alltopo__mi50-1card-8dev-topo__telegraf-testdata.json",
)
KFD_TREES = ("mi210-8gpu-2hive", "mi300x-8gpu-cpx", "mi308x-cpx", "single-gpu-dup")

# amd-smi static --numa / list --json in the documented shape, for the 2-GPU JSON captures
AMDSMI_NUMA = [{"gpu": 0, "numa": {"node": 0, "affinity": 0}}, {"gpu": 1, "numa": {"node": 1, "affinity": -1}}]
AMDSMI_LIST = [{"gpu": 0, "bdf": "0000:08:00.0", "uuid": "u0", "kfd_id": 1234, "node_id": 2, "partition_id": 0},
               {"gpu": 1, "bdf": "0000:44:00.0", "uuid": "u1", "kfd_id": 5678, "node_id": 3, "partition_id": 0}]

MODEL_KEYS = {"schema", "source", "sources", "gpus", "links", "numa_nodes", "hives", "xgmi_cliques",
              "physical_devices", "cpu_topology", "warnings", "discrepancies"}
LINK_KEYS = {"a", "b", "type", "hops", "weight", "xgmi_links", "bandwidth_mbps", "p2p_access"}
BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")


# Longer, randomly seeded local runs: TOPOTUNE_FUZZ_SCALE=20 TOPOTUNE_FUZZ_RANDOM=1 pytest tests/unit/properties/test_topology_properties.py
FUZZ_SCALE = float(os.environ.get("TOPOTUNE_FUZZ_SCALE", "1"))
FUZZ_RANDOM = os.environ.get("TOPOTUNE_FUZZ_RANDOM") == "1"


def _fuzz(max_examples):
    return settings(max_examples=max(1, int(max_examples * FUZZ_SCALE)), deadline=None, derandomize=not FUZZ_RANDOM,
                    database=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _read(name):
    with open(os.path.join(SMI, name)) as handle:
        return handle.read()


CAPTURES = {name: _read(name) for name in AMDSMI_TEXT + AMDSMI_JSON + ROCMSMI_TEXT + ROCMSMI_JSON}


# --- the contract ----------------------------------------------------------------------------------------------

def check_model(model):
    """Assert ``model`` (a ``Topology.to_dict()``) is well formed."""
    assert set(model) == MODEL_KEYS
    json.dumps(model)
    gpus = model["gpus"]
    count = len(gpus)
    assert count >= 1
    assert [g["index"] for g in gpus] == list(range(count))
    for gpu in gpus:
        assert set(gpu) == set(GPU_KEYS)
        assert gpu["bdf"] is None or BDF.match(gpu["bdf"]), gpu["bdf"]
        node = gpu["numa_node"]
        assert node is None or (isinstance(node, int) and 0 <= node < 2 ** 31), node
        assert (node is None) == (gpu["numa_source"] is None)
        assert gpu["numa_source"] in (None, "pci", "kfd", "smi")
        assert isinstance(gpu["physical_index"], int) and 0 <= gpu["physical_index"] < count
    pairs = set()
    for link in model["links"]:
        assert set(link) == LINK_KEYS
        a, b = link["a"], link["b"]
        assert 0 <= a < b < count, (a, b)
        assert (a, b) not in pairs
        pairs.add((a, b))
        assert link["type"] in ("xgmi", "pcie")
        assert isinstance(link["hops"], int) and link["hops"] >= 1
        assert link["weight"] is None or (isinstance(link["weight"], int) and link["weight"] >= 0)
        assert link["p2p_access"] in (True, False, None)
        bandwidth = link["bandwidth_mbps"]
        assert bandwidth is None or (set(bandwidth) == {"min", "max"} and bandwidth["max"] > 0)
    assert len(pairs) in (0, count * (count - 1) // 2)
    for clique in model["xgmi_cliques"]:
        assert clique == sorted(clique) and len(clique) >= 2 and all(0 <= v < count for v in clique)
    assert all(isinstance(n["node"], int) and 0 <= n["node"] < 2 ** 31 for n in model["numa_nodes"])
    for warning in model["warnings"]:
        assert isinstance(warning, str) and warning and "\n" not in warning, warning


def check(parse):
    """Run ``parse()``: a well-formed model or a one-line ``TopotuneError``; returns the model or None."""
    try:
        topo = parse()
    except TopotuneError as err:
        message = str(err)
        assert message and "\n" not in message and "Traceback" not in message, message
        return None
    model = topo.to_dict()
    check_model(model)
    return model


# --- damage ----------------------------------------------------------------------------------------------------

NOISE_LINES = (
    "", " ", "\t", "Legend:", "  SELF = Current GPU", "WARNING: AMD GPU device(s) is/are in a low-power state",
    "==================================== End of ROCm SMI Log ====================================",
    "================================ Weight between two GPUs =================================",
    "ACCESS TABLE:", "WEIGHT TABLE:", "HOPS TABLE:", "LINK TYPE TABLE:", "NUMA BW TABLE:", "DMA TABLE:",
    "             0000:0c:00.0 0000:22:00.0", "0000:0c:00.0 0            15", "0000:0c:00.0 ENABLED DISABLED",
    "       GPU0         GPU1", "GPU0   0            15", "GPU1   XGMI         0", "GPU[0]\t\t: (Topology) Numa Node: 0",
    "GPU[1]\t\t: (Topology) Numa Affinity: 4294967295", "GPU[2]\t\t: PCI Bus: 0000:1E:00.0", "GPU 3 : garbage",
    "GPU[7]\t\t: Card series: \t\tAMD Instinct MI300X OAM", "$ amd-smi topology", "```", "[1,0]<stderr>:abort",
    "srun: error: node01: task 0: Exited with exit code 1", "Format: min-max; Units: mps", "0-0 N/A SELF XGMI PCIE",
)
PREFIX_STYLES = (
    "[1,0]<stdout>:", "[1,12]<stderr>:", "  0: ", "13: ", "2025-06-25T10:11:12.345678+00:00 gpu-node-01 ",
    "2025-06-25T10:11:12Z ", "Jun 25 10:11:12 gpu-node-01 amd-smi[4242]: ", "gpu-node-01: ",
    "2025-06-25T10:11:12.123456789Z stdout F ", "[2025-06-25 10:11:12,345] INFO ",
)
TEXT_CHARS = st.characters(codec="utf-8", exclude_categories=("Cs",))
TOKEN_CHARS = "0123456789abcdefABCDEFGPUXMITNL:.-=[]()<> \t,/"


def _title_line(line):
    return "TABLE:" in line or re.search(r"={3,}.*={3,}", line) is not None


def damage_text(data, text):
    """Apply 1-5 random damages to ``text`` (drawn from ``data``)."""
    lines = text.splitlines()
    for operation in data.draw(st.lists(st.sampled_from(
            ("delete", "duplicate", "swap", "noise", "edit", "bytes", "prefix", "prefix-some", "reorder", "truncate",
             "blank", "crlf")), min_size=1, max_size=5), label="operations"):
        position = data.draw(st.integers(0, max(len(lines) - 1, 0)), label="line")
        if operation == "delete" and lines:
            del lines[position]
        elif operation == "duplicate" and lines:
            lines.insert(position, lines[position])
        elif operation == "swap" and lines:
            other = data.draw(st.integers(0, len(lines) - 1), label="other line")
            lines[position], lines[other] = lines[other], lines[position]
        elif operation == "noise":
            noise = data.draw(st.one_of(st.sampled_from(NOISE_LINES), st.text(TOKEN_CHARS, max_size=40),
                                        st.text(TEXT_CHARS, max_size=20)), label="noise")
            lines.insert(position, noise)
        elif operation == "edit" and lines:
            line = lines[position]
            start = data.draw(st.integers(0, len(line)), label="start")
            end = data.draw(st.integers(start, len(line)), label="end")
            lines[position] = line[:start] + data.draw(st.text(TOKEN_CHARS, max_size=6), label="insert") + line[end:]
        elif operation == "bytes":
            joined = "\n".join(lines)
            at = data.draw(st.integers(0, len(joined)), label="at")
            junk = data.draw(st.binary(min_size=1, max_size=12), label="bytes").decode("utf-8", "replace")
            lines = (joined[:at] + junk + joined[at:]).splitlines()
        elif operation == "prefix":
            prefix = data.draw(st.sampled_from(PREFIX_STYLES), label="prefix")
            lines = [prefix + line for line in lines]
        elif operation == "prefix-some":
            prefix = data.draw(st.sampled_from(PREFIX_STYLES), label="prefix")
            lines = [prefix + line if i % 3 == position % 3 else line for i, line in enumerate(lines)]
        elif operation == "reorder":
            lines = reorder_sections(lines, data.draw(st.randoms(use_true_random=False), label="order"))
        elif operation == "truncate":
            joined = "\n".join(lines)
            lines = joined[:data.draw(st.integers(0, len(joined)), label="cut")].splitlines()
        elif operation == "blank":
            lines = [line for line in lines if line.strip()]
        elif operation == "crlf":
            lines = [line + "\r" for line in lines]
    return "\n".join(lines)


def reorder_sections(lines, rng):
    """The lines with their titled sections (``XXX TABLE:``, ``=== title ===``) shuffled."""
    blocks, current = [], []
    for line in lines:
        if _title_line(line) and current:
            blocks.append(current)
            current = []
        current.append(line)
    if current:
        blocks.append(current)
    head = blocks[:1] if blocks and not _title_line(blocks[0][0]) else []
    body = blocks[len(head):]
    rng.shuffle(body)
    return [line for block in head + body for line in block]


JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-2 ** 40, 2 ** 40), st.floats(allow_nan=False, allow_infinity=False),
    st.text(TEXT_CHARS, max_size=8),
    st.sampled_from(["N/A", "-1", "4294967295", "XGMI", "PCIE", "SELF", "ENABLED", "DISABLED", "True", "0-0",
                     "50000-50000", "0000:0c:00.0", "0000:1E:00.0", "0x74a1", "gpu_0", "gpu_9", "15", "40", "72"]),
)
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(TEXT_CHARS, max_size=6), inner, max_size=3), max_leaves=6)


def _locations(value, found):
    """Every ``(container, key)`` inside ``value``."""
    if isinstance(value, dict):
        for key in list(value):
            found.append((value, key))
            _locations(value[key], found)
    elif isinstance(value, list):
        for index in range(len(value)):
            found.append((value, index))
            _locations(value[index], found)
    return found


def damage_json(data, obj):
    """Apply 1-4 structural damages to a copy of the JSON value ``obj``."""
    obj = json.loads(json.dumps(obj))
    for operation in data.draw(st.lists(st.sampled_from(("drop", "replace", "duplicate", "shuffle", "rekey", "wrap")),
                                        min_size=1, max_size=4), label="operations"):
        found = _locations(obj, [])
        if not found:
            break
        container, key = data.draw(st.sampled_from(found), label="location")
        if operation == "drop":
            del container[key]
        elif operation == "replace":
            container[key] = data.draw(JSON_VALUES, label="value")
        elif operation == "duplicate" and isinstance(container, list):
            container.insert(key, json.loads(json.dumps(container[key])))
        elif operation == "shuffle" and isinstance(container[key], list):
            data.draw(st.randoms(use_true_random=False), label="order").shuffle(container[key])
        elif operation == "rekey" and isinstance(container, dict):
            container[data.draw(st.text(TEXT_CHARS, max_size=12), label="key")] = container.pop(key)
        elif operation == "wrap":
            container[key] = {"value": container[key]}
    return obj


# --- amd-smi ---------------------------------------------------------------------------------------------------

@_fuzz(400)
@given(capture=st.sampled_from(AMDSMI_TEXT), data=st.data())
def test_amdsmi_text_damaged(capture, data):
    text = damage_text(data, CAPTURES[capture])
    check(lambda: parse_amdsmi(text, name=capture))


@_fuzz(300)
@given(capture=st.sampled_from(AMDSMI_JSON), data=st.data())
def test_amdsmi_json_damaged(capture, data):
    topology = damage_json(data, json.loads(CAPTURES[capture]))
    numa = json.dumps(damage_json(data, AMDSMI_NUMA)) if data.draw(st.booleans(), label="numa") else None
    listing = json.dumps(damage_json(data, AMDSMI_LIST)) if data.draw(st.booleans(), label="list") else None
    check(lambda: parse_amdsmi(json.dumps(topology), numa, listing, name=capture))
    check(lambda: parse_amdsmi(topology, numa, listing, name=capture))  # an already decoded object


@_fuzz(150)
@given(capture=st.sampled_from(AMDSMI_JSON), data=st.data())
def test_amdsmi_json_text_damaged(capture, data):
    text = damage_text(data, CAPTURES[capture])
    check(lambda: parse_amdsmi(text, json.dumps(AMDSMI_NUMA), json.dumps(AMDSMI_LIST), name=capture))


# --- rocm-smi --------------------------------------------------------------------------------------------------

@_fuzz(400)
@given(capture=st.sampled_from(ROCMSMI_TEXT), data=st.data())
def test_rocmsmi_text_damaged(capture, data):
    text = damage_text(data, CAPTURES[capture])
    check(lambda: parse_rocmsmi(text, capture))


@_fuzz(200)
@given(capture=st.sampled_from(ROCMSMI_JSON), data=st.data())
def test_rocmsmi_json_damaged(capture, data):
    obj = damage_json(data, json.loads(CAPTURES[capture]))
    check(lambda: parse_rocmsmi(json.dumps(obj), capture))


@_fuzz(150)
@given(capture=st.sampled_from(ROCMSMI_JSON), data=st.data())
def test_rocmsmi_json_text_damaged(capture, data):
    text = damage_text(data, CAPTURES[capture])
    check(lambda: parse_rocmsmi(text, capture))


@_fuzz(100)
@given(first=st.sampled_from(ROCMSMI_TEXT + ROCMSMI_JSON), second=st.sampled_from(ROCMSMI_TEXT), data=st.data())
def test_rocmsmi_merged_files_damaged(first, second, data):
    parts = [(first, damage_text(data, CAPTURES[first])), (second, CAPTURES[second])]
    check(lambda: parse_rocmsmi(parts))


# --- metamorphic: prefixes and section order change nothing -------------------------------------------------------

HOSTNAMES = st.from_regex(r"[a-z][a-z0-9-]{0,12}", fullmatch=True)
PREFIXES = st.one_of(
    st.sampled_from(PREFIX_STYLES),
    st.builds("[{},{}]<stdout>:".format, st.integers(0, 99), st.integers(0, 4095)),
    st.builds("{:>3}: ".format, st.integers(0, 4095)),
    st.builds("{}: ".format, HOSTNAMES),
    st.builds("2025-{:02d}-{:02d}T{:02d}:{:02d}:{:02d}.{:06d}Z {} ".format, st.integers(1, 12), st.integers(1, 28),
              st.integers(0, 23), st.integers(0, 59), st.integers(0, 59), st.integers(0, 999999), HOSTNAMES),
    st.builds("Jun {:>2} {:02d}:{:02d}:{:02d} {} amd-smi[{}]: ".format, st.integers(1, 30), st.integers(0, 23),
              st.integers(0, 59), st.integers(0, 59), HOSTNAMES, st.integers(1, 99999)),
)


@_fuzz(150)
@given(capture=st.sampled_from(AMDSMI_TEXT + ROCMSMI_TEXT), prefix=PREFIXES)
def test_prefix_on_every_line_changes_nothing(capture, prefix):
    parse = parse_amdsmi if capture.startswith("amd-smi") else parse_rocmsmi
    text = CAPTURES[capture]
    prefixed = "\n".join(prefix + line for line in text.splitlines())
    assert parse(prefixed, name=capture).to_dict() == parse(text, name=capture).to_dict()


@_fuzz(100)
@given(capture=st.sampled_from(AMDSMI_TEXT + ROCMSMI_TEXT), rng=st.randoms(use_true_random=False))
def test_section_order_changes_nothing(capture, rng):
    parse = parse_amdsmi if capture.startswith("amd-smi") else parse_rocmsmi
    text = CAPTURES[capture].split("\n\n\nLegend:")[0]  # the legend belongs after the last table
    shuffled = "\n".join(reorder_sections(text.splitlines(), rng))
    original = parse(text, name=capture).to_dict()
    model = parse(shuffled, name=capture).to_dict()
    original.pop("warnings")
    model.pop("warnings")
    assert model == original


# --- KFD sysfs reader (not changed here: tested) -----------------------------------------------------------------

@pytest.fixture(scope="module")
def kfd_trees(tmp_path_factory):
    """Writable copies of the KFD captures, made once; each example damages some files and puts them back."""
    root = tmp_path_factory.mktemp("kfd")
    trees = {}
    for name in KFD_TREES:
        shutil.copytree(os.path.join(KFD, name), str(root / name))
        base = str(root / name)
        nodes = os.path.join(base, "nodes") if os.path.isdir(os.path.join(base, "nodes")) else \
            os.path.join(base, "topology", "nodes")
        files = sorted(os.path.relpath(os.path.join(d, f), nodes) for d, _dirs, fs in os.walk(nodes) for f in fs)
        trees[name] = _Tree(nodes, files)
    return trees


class _Tree(tuple):
    """``(nodes directory, files under it)``; a short repr for Hypothesis' failure reports."""

    def __new__(cls, nodes, files):
        return super().__new__(cls, (nodes, files))

    def __repr__(self):
        return "<KFD tree %s, %d files>" % (self[0], len(self[1]))


class _Restorer:
    """Remember the state of the paths an example changes and put it back."""

    def __init__(self):
        self.files = {}
        self.created = []
        self.moved = []

    def save(self, path):
        if path not in self.files:
            with open(path, "rb") as handle:
                self.files[path] = handle.read()

    def restore(self):
        for source, stash in reversed(self.moved):
            shutil.move(stash, source)
        for path in reversed(self.created):
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
        for path, content in self.files.items():
            with open(path, "wb") as handle:
                handle.write(content)


def damage_tree(data, nodes, files, restorer):
    for operation in data.draw(st.lists(st.sampled_from(("edit", "edit", "empty", "delete-file", "delete-dir",
                                                         "add-node", "add-link")), min_size=1, max_size=4),
                               label="operations"):
        relative = data.draw(st.sampled_from(files), label="file")
        path = os.path.join(nodes, relative)
        if not os.path.exists(path):
            continue
        if operation == "edit":
            restorer.save(path)
            with open(path, encoding="utf-8", errors="replace") as handle:
                text = handle.read()
            with open(path, "w", encoding="utf-8", errors="surrogateescape") as handle:
                handle.write(damage_text(data, text))
        elif operation == "empty":
            restorer.save(path)
            open(path, "w").close()
        elif operation == "delete-file":
            restorer.save(path)
            os.remove(path)
        elif operation == "delete-dir":
            parts = relative.split(os.sep)
            depth = data.draw(st.integers(1, len(parts) - 1), label="depth") if len(parts) > 1 else 1
            directory = os.path.join(nodes, *parts[:depth])
            if os.path.isdir(directory):
                stash = directory.rstrip("/") + ".stash"
                shutil.move(directory, stash)
                restorer.moved.append((directory, stash))
        elif operation == "add-node":
            name = data.draw(st.sampled_from(["99", "007", "x", "-1", "2.5", "\u0663", "1e3"]), label="node name")
            new = os.path.join(nodes, name)
            if not os.path.exists(new):
                os.makedirs(new)
                restorer.created.append(new)
                with open(os.path.join(new, "properties"), "w") as handle:
                    handle.write(data.draw(st.sampled_from(("simd_count 4\nlocation_id 256\n", "cpu_cores_count 8\n",
                                                            "", "gfx_target_version x\n")), label="properties"))
        elif operation == "add-link":
            node = relative.split(os.sep)[0]
            links = os.path.join(nodes, node, "io_links")
            new = os.path.join(links, "77")
            if os.path.isdir(links) and not os.path.exists(new):
                os.makedirs(new)
                restorer.created.append(new)
                weight = data.draw(st.sampled_from(("15", "0", "9" * 30, "x")), label="weight")
                to = data.draw(st.integers(0, 70), label="node_to")
                with open(os.path.join(new, "properties"), "w") as handle:
                    handle.write("type 11\nnode_from %s\nnode_to %d\nweight %s\n" % (node, to, weight))


@_fuzz(150)
@given(tree=st.sampled_from(KFD_TREES), data=st.data())
def test_kfd_damaged(kfd_trees, tree, data):
    nodes, files = kfd_trees[tree]
    restorer = _Restorer()
    try:
        damage_tree(data, nodes, files, restorer)
        check(lambda: read_kfd(path=nodes))
    finally:
        restorer.restore()


def test_kfd_trees_are_restored(kfd_trees):
    for name in KFD_TREES:
        nodes, files = kfd_trees[name]
        model = read_kfd(path=nodes).to_dict()
        pristine = read_kfd(path=os.path.join(KFD, name)).to_dict()
        check_model(model)
        assert (model["gpus"], model["links"]) == (pristine["gpus"], pristine["links"])
        assert len(files) > 10


# --- KFD reader cases found by the fuzzing above: corrupt values give a warning or an unknown, never a hang, a
# traceback or a malformed PCI address.

def _mi210_copy(tmp_path):
    shutil.copytree(os.path.join(KFD, "mi210-8gpu-2hive"), str(tmp_path / "t"))
    return str(tmp_path / "t" / "nodes")


def _set(path, key, value):
    with open(path) as handle:
        text = handle.read()
    with open(path, "w") as handle:
        handle.write(re.sub(r"(?m)^%s .*$" % key, "%s %s" % (key, value), text))


def _xgmi_link(nodes, node, to):
    for link in os.listdir(os.path.join(nodes, str(node), "io_links")):
        path = os.path.join(nodes, str(node), "io_links", link, "properties")
        with open(path) as handle:
            props = dict(line.split() for line in handle if line.strip())
        if props["type"] == "11" and props["node_to"] == str(to):
            return path
    raise AssertionError("no xGMI io_link %d -> %d" % (node, to))


def test_kfd_negative_xgmi_weights_do_not_hang(tmp_path):
    import signal

    nodes = _mi210_copy(tmp_path)
    for a, b in ((2, 3), (3, 2)):  # GPUs 0 and 1 (KFD nodes 2, 3) share a hive but lose their direct link
        shutil.rmtree(os.path.dirname(_xgmi_link(nodes, a, b)))
    for a, b in ((2, 4), (4, 2)):
        _set(_xgmi_link(nodes, a, b), "weight", "-15")

    def expire(signum, frame):
        raise TimeoutError("read_kfd did not return within 2 s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(2)
    try:
        check(lambda: read_kfd(path=nodes))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_kfd_negative_weight_is_not_a_weight(tmp_path):
    nodes = _mi210_copy(tmp_path)
    _set(_xgmi_link(nodes, 2, 3), "weight", "-15")
    check(lambda: read_kfd(path=nodes))


@pytest.mark.parametrize("domain", ["-1", str(2 ** 40)])
def test_kfd_bad_domain_gives_no_malformed_bdf(tmp_path, domain):
    nodes = _mi210_copy(tmp_path)
    _set(os.path.join(nodes, "2", "properties"), "domain", domain)
    check(lambda: read_kfd(path=nodes))


def test_kfd_odd_entry_name_is_not_a_traceback(tmp_path):
    nodes = _mi210_copy(tmp_path)
    os.makedirs(os.path.join(nodes, "\u00b2"))
    check(lambda: read_kfd(path=nodes))
