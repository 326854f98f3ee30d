"""GPU topology from rocm-smi output (a fallback source: rocm-smi is being replaced by amd-smi).

Public API:

``parse_rocmsmi(text, name="rocm-smi output")``  (``text`` may be a list of ``(name, text)`` to merge)
    A ``Topology`` (source ``rocm-smi``) from any mix of ``--showtopo`` text sections (weight, hops,
    link type, NUMA), ``--showtoponuma``, ``--shownodesbw``, or from ``--showtopo --json``. ``name``
    appears in error messages (the file name or the command). Raises ``TopologyError`` when no section
    is recognised or a matrix is malformed.
``parse_text_sections(text, name)`` / ``parse_json(text_or_obj, name)``
    The raw tables: ``{"weight": {(a, b): str}, "hops": ..., "link_type": ..., "bandwidth": ...,
    "numa_node": {gpu: int}, "numa_affinity": {gpu: int}}``.

rocm-smi numbers link types in its own enum and prints "XGMI"/"PCIE"; values are kept as printed.
"Numa Node" is the KFD CPU node, "Numa Affinity" the Linux NUMA node (``-1`` = none).
"""

import json
import re

from .topology_model import Topology, TopologyError, parse_bandwidth

_SECTION = re.compile(r"^=+\s*(.*?)\s*=+\s*$")
_NUMA_LINE = re.compile(
    r"^GPU\s*\[?\s*(\d+)\s*\]?\s*:\s*\(Topology\)\s*Numa\s+(Node|Affinity)\s*:\s*(\S+)\s*$", re.I)
_JSON_PAIR = re.compile(r"\(Topology\)\s*(Weight|Hops|Link type)\s+between DRM devices\s+(\d+)\s+and\s+(\d+)", re.I)
_JSON_NUMA = re.compile(r"\(Topology\)\s*Numa\s+(Node|Affinity)", re.I)

_MATRICES = (
    ("weight between", "weight"),
    ("hops between", "hops"),
    ("link type between", "link_type"),
    ("bandwidth", "bandwidth"),
)


def _empty_tables():
    return {"weight": {}, "hops": {}, "link_type": {}, "bandwidth": {}, "numa_node": {}, "numa_affinity": {}}


def _parse_matrix(lines, title, name):
    """Parse ``GPU0 GPU1 ...`` header + ``GPUi v v ...`` rows; returns {(i, j): str}."""
    header = None
    cells = {}
    for lineno, line in lines:
        words = line.split()
        if not words:
            continue
        if header is None:
            if all(re.match(r"^GPU\d+$", w) for w in words):
                header = [int(w[3:]) for w in words]
            continue
        if not re.match(r"^GPU\d+$", words[0]):
            continue  # footer text such as "Format: min-max; Units: mps"
        row = int(words[0][3:])
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
        match = _SECTION.match(line.strip())
        if match and line.strip().startswith("="):
            current = [match.group(1), []]
            sections.append(current)
            continue
        numa = _NUMA_LINE.match(line.strip())
        if numa:
            gpu, kind, value = int(numa.group(1)), numa.group(2).lower(), numa.group(3)
            try:
                tables["numa_" + kind][gpu] = int(value)
            except ValueError:
                raise TopologyError("%s line %d: Numa %s of GPU %d is %r, not an integer"
                                    % (name, lineno, kind.capitalize(), gpu, value)) from None
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
    keys = {"weight": "weight", "hops": "hops", "link type": "link_type"}
    found = False
    for section, values in data.items():
        if not isinstance(values, dict):
            continue
        card = re.match(r"^card(\d+)$", str(section))
        for key, value in values.items():
            pair = _JSON_PAIR.search(key)
            if pair:
                a, b = int(pair.group(2)), int(pair.group(3))
                tables[keys[pair.group(1).lower()]][(a, b)] = str(value)
                found = True
                continue
            numa = _JSON_NUMA.search(key)
            if numa and card:
                try:
                    tables["numa_" + numa.group(1).lower()][int(card.group(1))] = int(str(value))
                    found = True
                except ValueError:
                    raise TopologyError("%s: %s %r of %s is not an integer" % (name, key, value, section)) from None
    if not found:
        raise TopologyError("%s: no '(Topology) ...' keys in the JSON (not rocm-smi --showtopo --json?)" % name)
    return tables


def _cell(table, a, b):
    # JSON holds the upper triangle only; text holds both
    value = table.get((a, b))
    return value if value is not None else table.get((b, a))


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def build_topology(tables, name="rocm-smi output"):
    topo = Topology("rocm-smi")
    indices = set(tables["numa_node"]) | set(tables["numa_affinity"])
    for key in ("weight", "hops", "link_type", "bandwidth"):
        for a, b in tables[key]:
            indices.update((a, b))
    count = max(indices) + 1
    if sorted(indices) != list(range(count)):
        topo.warn("%s: GPU indices %s are not contiguous" % (name, sorted(indices)))
    no_numa = []
    for index in range(count):
        gpu = topo.add_gpu()
        affinity = tables["numa_affinity"].get(index)
        node = tables["numa_node"].get(index)
        if affinity is not None and affinity >= 0:
            gpu["numa_node"], gpu["numa_source"] = affinity, "smi"
        elif affinity is not None:
            topo.warn("GPU %d: Numa Affinity is %d (no NUMA affinity reported, typical of VMs): NUMA node left "
                      "unknown" % (index, affinity))
        elif node is not None and node >= 0:
            gpu["numa_node"], gpu["numa_source"] = node, "smi"
        else:
            no_numa.append(str(index))
    if no_numa:
        topo.warn("%s: no NUMA information for GPU %s (add --showtoponuma output)" % (name, ", ".join(no_numa)))
    _links(topo, tables, count, name)
    return topo


def _links(topo, tables, count, name):
    have_type = bool(tables["link_type"])
    have_bw = bool(tables["bandwidth"])
    if count < 2:
        return
    if not have_type and not have_bw:
        topo.warn("%s: no link matrices (weight/hops/link type or bandwidth): links unknown" % name)
        return
    direct = set()
    for a in range(count):
        for b in range(a + 1, count):
            bw = parse_bandwidth(_cell(tables["bandwidth"], a, b))
            if bw:
                direct.add((a, b))
    if not have_type:
        topo.warn("%s: no link type matrix: link types and hops inferred from the bandwidth matrix "
                  "(non-zero = direct xGMI, 0-0 = reached over xGMI through another GPU)" % name)
        _infer_from_bandwidth(topo, tables, count, direct)
        return
    for a in range(count):
        for b in range(a + 1, count):
            raw_type = _cell(tables["link_type"], a, b)
            kind = {"XGMI": "xgmi", "PCIE": "pcie"}.get(str(raw_type).upper())
            hops = _int(_cell(tables["hops"], a, b))
            if kind is None:
                topo.warn("%s: link type of GPUs %d and %d is %r: recorded as pcie" % (name, a, b, raw_type))
                kind = "pcie"
            if hops is None:
                hops = 1 if kind == "xgmi" else 2
                if tables["hops"]:
                    topo.warn("%s: hops of GPUs %d and %d unreadable: assumed %d" % (name, a, b, hops))
            weight = _int(_cell(tables["weight"], a, b))
            bw = parse_bandwidth(_cell(tables["bandwidth"], a, b))
            topo.set_link(a, b, kind, hops, weight=weight, bandwidth_mbps=bw)
    if not tables["hops"]:
        topo.warn("%s: no hops matrix: hops assumed 1 for xGMI and 2 for PCIe" % name)


def _infer_from_bandwidth(topo, tables, count, direct):
    neighbours = {v: set() for v in range(count)}
    for a, b in direct:
        neighbours[a].add(b)
        neighbours[b].add(a)
    for a in range(count):
        # breadth-first distances over direct xGMI links
        dist = {a: 0}
        frontier = [a]
        while frontier:
            nxt = []
            for v in frontier:
                for w in neighbours[v]:
                    if w not in dist:
                        dist[w] = dist[v] + 1
                        nxt.append(w)
            frontier = nxt
        for b in range(a + 1, count):
            bw = parse_bandwidth(_cell(tables["bandwidth"], a, b))
            if (a, b) in direct:
                topo.set_link(a, b, "xgmi", 1, bandwidth_mbps=bw)
            elif b in dist:
                topo.set_link(a, b, "xgmi", 2)
            else:
                topo.set_link(a, b, "pcie", 2)


def _tables(text, name):
    if not isinstance(text, str) or text.lstrip().startswith("{"):
        return parse_json(text, name)
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
                    tables[key].setdefault(k, v)
        name = " + ".join(part_name for part_name, _unused in text)
    else:
        tables = _tables(text, name)
    return build_topology(tables, name)
