"""GPU topology from rocm-smi output (a fallback source: rocm-smi is being replaced by amd-smi).

Public API:

``parse_rocmsmi(text, name="rocm-smi output")``  (``text`` may be a list of ``(name, text)`` to merge)
    A ``Topology`` (source ``rocm-smi``) from any mix of ``--showtopo`` text sections (weight, hops,
    link type, link accessibility, NUMA), ``--showtoponuma``, ``--shownodesbw``, per-GPU identity lines
    (``--showbus``, ``--showid``, ``--showuniqueid``, ``--showproductname``), or from JSON (``--showtopo
    --json`` and "all" dumps with ``cardN`` sections). ``name`` appears in error messages (the file name
    or the command). Raises ``TopologyError`` when no section is recognised or a matrix is malformed.
``parse_text_sections(text, name)`` / ``parse_json(text_or_obj, name)``
    The raw tables: ``{"weight": {(a, b): str}, "hops": ..., "link_type": ..., "bandwidth": ..., "access":
    ..., "numa_node": {gpu: value}, "numa_affinity": {gpu: value}, "info": {gpu: {model key: value}},
    "cards": {gpu: True}}`` (``cards``: JSON ``cardN`` sections; ``json``: ``{0: True}`` for JSON input).

rocm-smi numbers link types in its own enum and prints "XGMI"/"PCIE"; values are kept as printed.
"Numa Node" is the KFD CPU node, "Numa Affinity" the Linux NUMA node (``-1``, or ``4294967295`` = uint32
-1, = none; the Numa Node is used then). Text lines may carry a prefix (``[1,0]<stdout>:``, srun's
`` 0: ``, a log collector's time stamp and host name): it is skipped.
"""

import json
import re

from .amdsmi import MAX_GPUS, normalize_bdf, set_numa, shown, smi_links
from .model import Topology, TopologyError, assign_physical, parse_bandwidth

_SECTION = re.compile(r"={3,}\s*(.*?)\s*={3,}\s*$")
_NUMA_LINE = re.compile(
    r"(?<![A-Za-z0-9])GPU\s*\[?\s*(\d+)\s*\]?\s*:\s*\(Topology\)\s*Numa\s+(Node|Affinity)\s*:\s*(\S+)\s*$", re.I)
_INFO_LINE = re.compile(r"(?<![A-Za-z0-9])GPU\s*\[\s*(\d+)\s*\]\s*:\s*([A-Za-z][A-Za-z ]*?)\s*:\s*(.*?)\s*$")
_GPU_WORD = re.compile(r"(?<![A-Za-z0-9_])GPU\d+(?=\s|$)")
_JSON_PAIR = re.compile(r"\(Topology\)\s*(Weight|Hops|Link type|Link accessibility)\s+between DRM devices\s+"
                        r"(\d+)\s+and\s+(\d+)", re.I)
_JSON_NUMA = re.compile(r"\(Topology\)\s*Numa\s+(Node|Affinity)", re.I)
_HEX = re.compile(r"^0x[0-9a-fA-F]+$")
_GFX = re.compile(r"^gfx[0-9a-f]+$")

_MATRICES = (
    ("weight between", "weight"),
    ("hops between", "hops"),
    ("link type between", "link_type"),
    ("link accessibility between", "access"),
    ("bandwidth", "bandwidth"),
)
_PAIR_KEYS = {"weight": "weight", "hops": "hops", "link type": "link_type", "link accessibility": "access"}

# per-GPU "Key: value" of rocm-smi (text lines and JSON card sections) -> model GPU key
_INFO_KEYS = {
    "pci bus": "bdf",
    "device id": "device_id",
    "gpu id": "device_id",
    "unique id": "unique_id",
    "card series": "name",
    "device name": "name",
    "guid": "gpu_id",
    "node id": "kfd_node",
    "gfx version": "gfx",
}
_INFO_PRIORITY = ("card series",)  # "Card series" names the GPU even when "Device Name" is printed too


def _empty_tables():
    return {"weight": {}, "hops": {}, "link_type": {}, "access": {}, "bandwidth": {}, "numa_node": {},
            "numa_affinity": {}, "info": {}, "cards": {}, "json": {}}


def _check_index(index, name, where):
    if index >= MAX_GPUS:
        raise TopologyError("%s%s: GPU index %d is out of range (0..%d)" % (name, where, index, MAX_GPUS - 1))
    return index


def _info_value(key, value):
    """The model value of a per-GPU identity field, None when unknown."""
    text = str(value).strip() if value is not None and not isinstance(value, (dict, list)) else ""
    if not text or text.upper() in ("N/A", "NONE", "UNKNOWN"):
        return None
    field = _INFO_KEYS[key]
    if field == "bdf":
        return normalize_bdf(text)
    if field == "device_id":
        return "0x%04x" % int(text, 16) if _HEX.match(text) else None
    if field == "unique_id":
        # rocm-smi prints KFD's unique_id in hex; the model keeps KFD's decimal form
        return str(int(text, 16)) if _HEX.match(text) else text[:64]
    if field in ("gpu_id", "kfd_node"):
        return int(text) if text.isdigit() and text.isascii() and len(text) < 20 else None
    if field == "gfx":
        return text.lower() if _GFX.match(text.lower()) else None
    return text[:128]


def _add_info(tables, gpu, key, value):
    key = " ".join(key.lower().split())
    if key not in _INFO_KEYS:
        return
    value = _info_value(key, value)
    if value is None:
        return
    field = _INFO_KEYS[key]
    info = tables["info"].setdefault(gpu, {})
    if field not in info or key in _INFO_PRIORITY:
        info[field] = value


def _parse_matrix(lines, title, name):
    """Parse ``GPU0 GPU1 ...`` header + ``GPUi v v ...`` rows; returns {(i, j): str}."""
    header = None
    cells = {}
    for lineno, line in lines:
        match = _GPU_WORD.search(line)
        if not match:
            continue  # blank, footer text such as "Format: min-max; Units: mps", log noise
        words = line[match.start():].split()
        if all(re.match(r"^GPU\d+$", w) for w in words):
            columns = [_check_index(int(w[3:]), name, " line %d" % lineno) for w in words]
            if header is None:
                header = columns
            elif columns != header:
                raise TopologyError("%s line %d: %s has a second, different GPU header row" % (name, lineno, title))
            continue
        if header is None or not re.match(r"^GPU\d+$", words[0]):
            continue
        row = _check_index(int(words[0][3:]), name, " line %d" % lineno)
        values = words[1:]
        if len(values) != len(header):
            raise TopologyError("%s line %d: %s row GPU%d has %d values for %d columns (truncated output?)"
                                % (name, lineno, title, row, len(values), len(header)))
        for col, value in zip(header, values):
            cells[(row, col)] = value
    if header is None:
        raise TopologyError("%s: section %r has no GPU header row" % (name, title))
    return cells


def parse_text_sections(text, name="rocm-smi output"):
    tables = _empty_tables()
    sections = []
    current = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        match = _SECTION.search(line)
        if match:
            current = [match.group(1), []]
            sections.append(current)
            continue
        numa = _NUMA_LINE.search(line)
        if numa:
            gpu, kind, value = int(numa.group(1)), numa.group(2).lower(), numa.group(3)
            _check_index(gpu, name, " line %d" % lineno)
            try:
                tables["numa_" + kind][gpu] = int(value)
            except ValueError:
                raise TopologyError("%s line %d: Numa %s of GPU %d is %s, not an integer"
                                    % (name, lineno, kind.capitalize(), gpu, shown(value))) from None
            continue
        info = _INFO_LINE.search(line)
        if info:
            _add_info(tables, _check_index(int(info.group(1)), name, " line %d" % lineno), info.group(2), info.group(3))
            continue
        if current is not None:
            current[1].append((lineno, line))
    found = bool(tables["numa_node"] or tables["numa_affinity"])
    for title, lines in sections:
        low = title.lower()
        for prefix, key in _MATRICES:
            if low.startswith(prefix):
                tables[key] = _parse_matrix(lines, title, name)
                found = True
    if not found:
        raise TopologyError("%s: no rocm-smi topology section found (expected --showtopo, --showtoponuma or "
                            "--shownodesbw output)" % name)
    return tables


def parse_json(data, name="rocm-smi output"):
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as err:
            raise TopologyError("%s: invalid JSON: %s" % (name, err)) from None
    if not isinstance(data, dict):
        raise TopologyError("%s: expected a JSON object of rocm-smi --showtopo --json" % name)
    tables = _empty_tables()
    tables["json"][0] = True
    found = False
    for section, values in data.items():
        if not isinstance(values, dict):
            continue
        card = re.match(r"^card(\d+)$", str(section))
        if card:
            index = _check_index(int(card.group(1)), name, " section %s" % section)
            tables["cards"][index] = True
        for key, value in values.items():
            key = str(key)
            pair = _JSON_PAIR.search(key)
            if pair:
                a = _check_index(int(pair.group(2)), name, " key %r" % key[:80])
                b = _check_index(int(pair.group(3)), name, " key %r" % key[:80])
                tables[_PAIR_KEYS[pair.group(1).lower()]][(a, b)] = str(value)
                found = True
                continue
            if not card:
                continue
            numa = _JSON_NUMA.search(key)
            if numa:
                try:
                    tables["numa_" + numa.group(1).lower()][index] = int(str(value).strip())
                    found = True
                except ValueError:
                    raise TopologyError("%s: %s of %s is %s, not an integer"
                                        % (name, key[:40], section, shown(value))) from None
            else:
                _add_info(tables, index, key, value)
    if not found:
        raise TopologyError("%s: no '(Topology) ...' keys in the JSON (not rocm-smi --showtopo --json?)" % name)
    return tables


def _cell(table, a, b):
    # JSON holds the upper triangle only; text holds both
    value = table.get((a, b))
    return value if value is not None else table.get((b, a))


def _int(value):
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def _ranges(indices):
    """``[1, 2, 3, 5]`` -> ``"1-3, 5"``."""
    parts = []
    for index in sorted(indices):
        if parts and parts[-1][1] == index - 1:
            parts[-1][1] = index
        else:
            parts.append([index, index])
    return ", ".join(str(a) if a == b else "%d-%d" % (a, b) for a, b in parts)


def build_topology(tables, name="rocm-smi output"):
    topo = Topology("rocm-smi")
    indices = set(tables["numa_node"]) | set(tables["numa_affinity"]) | set(tables["info"]) | set(tables["cards"])
    covered = set()
    for key in ("weight", "hops", "link_type", "access", "bandwidth"):
        for a, b in tables[key]:
            covered.update((a, b))
    indices |= covered
    if not indices:
        raise TopologyError("%s: the rocm-smi sections name no GPU" % name)
    count = max(indices) + 1
    if sorted(indices) != list(range(count)):
        topo.warn("%s: GPU indices %s are not contiguous" % (name, _ranges(indices)))
    if tables["json"]:
        bare = sorted(set(range(count)) - set(tables["cards"]))
        if bare:
            having = "has no cardN section" if not tables["cards"] else \
                "has a cardN section only for device(s) %s" % _ranges(tables["cards"])
            topo.warn("%s: the JSON topology covers devices %s but %s: no PCI address, identity or NUMA node for "
                      "device(s) %s" % (name, _ranges(range(count)), having, _ranges(bare)))
    no_numa = []
    for index in range(count):
        gpu = topo.add_gpu(**tables["info"].get(index, {}))
        if not set_numa(topo, gpu, tables["numa_affinity"].get(index), tables["numa_node"].get(index),
                        ("Numa Affinity", "Numa Node")):
            no_numa.append(index)
    if no_numa:
        topo.warn("%s: no NUMA information for GPU %s (add --showtoponuma output)" % (name, _ranges(no_numa)))
    assign_physical(topo)
    _links(topo, tables, count, name)
    return topo


def _links(topo, tables, count, name):
    if count < 2:
        return
    if not (tables["link_type"] or tables["hops"] or tables["weight"] or tables["bandwidth"]):
        topo.warn("%s: no link matrices (weight/hops/link type or bandwidth): links unknown" % name)
        return
    if not (tables["link_type"] or tables["hops"] or tables["weight"]):
        topo.warn("%s: no link type matrix: link types and hops inferred from the bandwidth matrix "
                  "(non-zero = direct xGMI, 0-0 = reached over xGMI through another GPU)" % name)
        _infer_from_bandwidth(topo, tables, count)
        return
    smi_links(topo, tables, count, name, "matrix")


def _infer_from_bandwidth(topo, tables, count):
    # connected components over the direct xGMI links (non-zero bandwidth)
    pairs = [(a, b) for a in range(count) for b in range(a + 1, count)]
    parent = list(range(count))

    def root(v):
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    bandwidth = {}
    for a, b in pairs:
        bw = parse_bandwidth(_cell(tables["bandwidth"], a, b))
        if bw:
            bandwidth[(a, b)] = bw
            parent[root(a)] = root(b)
    for a, b in pairs:
        if (a, b) in bandwidth:
            topo.set_link(a, b, "xgmi", 1, bandwidth_mbps=bandwidth[(a, b)])
        elif root(a) == root(b):
            topo.set_link(a, b, "xgmi", 2)
        else:
            topo.set_link(a, b, "pcie", 2)


def _json_text(text):
    """The JSON object in ``text`` (rocm-smi may print WARNING lines before it), else None."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        return stripped
    start = text.find("\n{")
    if start >= 0 and "(Topology)" in text[start:]:
        candidate = text[start + 1:]
        try:
            json.loads(candidate)
        except ValueError:
            return None
        return candidate
    return None


def _tables(text, name):
    if not isinstance(text, str):
        return parse_json(text, name)
    candidate = _json_text(text)
    if candidate is not None:
        return parse_json(candidate, name)
    return parse_text_sections(text, name)


def parse_rocmsmi(text, name="rocm-smi output"):
    """Parse rocm-smi output (text or JSON) into a ``Topology``.

    ``text`` may also be a list of ``(name, text)`` pairs (e.g. ``--showtopo`` plus ``--shownodesbw``):
    their tables are merged, later files filling what earlier ones lack.
    """
    if isinstance(text, list):
        tables = _empty_tables()
        for part_name, part in text:
            for key, values in _tables(part, part_name).items():
                for k, v in values.items():
                    if key == "info":
                        for field, value in v.items():
                            tables["info"].setdefault(k, {}).setdefault(field, value)
                    else:
                        tables[key].setdefault(k, v)
        name = " + ".join(part_name for part_name, _unused in text)
    else:
        tables = _tables(text, name)
    return build_topology(tables, name)
