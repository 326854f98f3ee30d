"""GPU topology from amd-smi output, plus the rules both smi parsers share.

Public API:

``parse_topology_json(text_or_obj, name)``
    ``amd-smi topology --json``, both schemas: ROCm >= 6.1.1 (a list of ``{gpu, bdf, links: [...]}``)
    and the earlier per-GPU maps (``{gpu, weight: {gpu_N: ...}, hops: ..., link_type: ...}``).
    Returns the tables ``{"gpus": {index: bdf|None}, "weight"|"hops"|"link_type"|"bandwidth"|"access":
    {(a, b): v}}``.
``parse_topology_text(text, name)``
    ``amd-smi topology`` text tables (ACCESS, WEIGHT, HOPS, LINK TYPE, NUMA BW, ...), same tables. Any
    subset of the tables is accepted; lines without a PCI address (legend, prompts, log noise) are
    ignored, and so is whatever precedes the address on a line (``[1,0]<stdout>:``, srun's `` 0: ``,
    log collectors' time stamps and host names).
``parse_numa_json(text_or_obj, name)``
    ``amd-smi static --numa --json`` -> ``{gpu: {"node": int|None, "affinity": int|None}}``.
``parse_list_json(text_or_obj, name)``
    ``amd-smi list --json`` -> ``{gpu: {"bdf", "uuid", "kfd_id", "node_id", "partition_id"}}``.
``parse_amdsmi(topology, numa=None, listing=None, name=...)``
    A ``Topology`` (source ``amd-smi``); ``topology`` is text or JSON (detected), the others optional.

Shared with the rocm-smi parser:

``MAX_GPUS``
    Largest GPU count accepted from tool output (an index beyond it is an error, not a huge model).
``normalize_bdf(value)``
    ``"0000:1E:00.0"`` -> ``"0000:1e:00.0"``; anything that is not a PCI address -> ``None``.
``numa_number(value)``
    A NUMA node number, or ``None`` for unknown: ``-1`` and its uint32 form ``4294967295`` (any value
    >= 2**31 is a wrapped negative), ``N/A``, garbage.
``set_numa(topo, gpu, affinity, node, what)``
    Apply the NUMA rule: a known affinity (Linux NUMA node of the PCI device) wins (``numa_source``
    ``smi``); else the printed KFD CPU node (``numa_source`` ``kfd``), with a warning when the affinity
    was reported unknown. Returns False when neither is known.
``infer_link(weight, partitions=False)``
    ``(type, hops)`` from a GPU-GPU weight by AMD's weight rule (see ``WEIGHT_RULE``), or ``None``.
``xgmi_hops(hops, weight)``
    The model's hops of an xGMI pair: the tools print 1 for every xGMI pair; a weight of 30, 45, ...
    (15 per physical xGMI hop) means the traffic crosses another GPU: 2.
``p2p_flag(value)``
    ``ENABLED``/``True``/... -> True, ``DISABLED``/``False``/... -> False, else None.
``resolve_link(raw_type, raw_hops, weight, partitions=False)`` / ``smi_links(topo, tables, count, name, word)``
    One pair's ``(type, hops, notes)`` from what the tool printed / every pair of a model, with warnings.

The topology output carries no NUMA node: it comes from ``static --numa`` (``affinity`` = Linux NUMA
node of the PCI device, -1 = none; ``node`` = the KFD CPU node).
"""

import json
import re

from .model import Topology, TopologyError, assign_physical, parse_bandwidth

MAX_GPUS = 512

# AMD's weight rule, documented in the amd-smi CLI guide (ROCm/rocm-systems,
# projects/amdsmi/docs/how-to/amdsmi-cli-tool.md, "Interpreting hops and weight", PR ROCm/rocm-systems#7372)
# and implemented by rocm_smi_lib's rsmi_topo_get_link_weight() (src/rocm_smi.cc), on top of the KFD
# io_link weights of the kernel (drivers/gpu/drm/amd/amdkfd/kfd_crat.c: KFD_CRAT_XGMI_WEIGHT 15 per xGMI
# hop, 20 for a PCIe GPU->CPU link, KFD_CRAT_INTRA_SOCKET_WEIGHT 13 between MI300 partitions of one
# socket and 2*13+15 = 41 between partitions of two sockets):
# - xGMI: 15 per physical xGMI hop (15 direct, 30 through another GPU);
# - PCIe: the segments are summed, GPU->CPU (typically 20) + CPU->CPU (the io_link weight, or 10 when it
#   cannot be read) + CPU->GPU, so a PCIe pair weighs at least 40 (40 under one CPU node, 72 = 20+32+20
#   across the two sockets of an EPYC server).
# Hence: weight < 40 is xGMI, weight >= 40 is PCIe (41 is xGMI when the 13 of partitions is present).
WEIGHT_RULE = ("weight < 40 = xGMI (15 per xGMI hop; 13 between partitions of one socket), weight >= 40 = PCIe "
               "(GPU->CPU 20 + CPU->GPU 20, + the CPU-CPU weight across CPU nodes), as the amd-smi CLI guide and "
               "rocm_smi_lib document them")
PCIE_MIN_WEIGHT = 40
XGMI_HOP_WEIGHT = 15
INTRA_SOCKET_WEIGHT = 13
CROSS_SOCKET_PARTITION_WEIGHT = 2 * INTRA_SOCKET_WEIGHT + XGMI_HOP_WEIGHT

_KNOWN_TITLE = re.compile(r"(?<![A-Za-z0-9])(ACCESS|WEIGHT|HOPS|LINK TYPE|NUMA BW)\s+TABLE:\s*$")
_ANY_TITLE = re.compile(r"(?<![A-Za-z0-9])([A-Z][A-Z -]*[A-Z])\s+TABLE:\s*$")
_BDF_TOKEN = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7](?![0-9A-Za-z])")
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_ANY_BDF = re.compile(r"^(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")
_TEXT_TABLES = {"WEIGHT": "weight", "HOPS": "hops", "LINK TYPE": "link_type", "NUMA BW": "bandwidth",
                "ACCESS": "access"}
_KINDS = {"XGMI": "xgmi", "PCIE": "pcie"}
_TRUE = ("ENABLED", "TRUE", "T", "YES")
_FALSE = ("DISABLED", "FALSE", "F", "NO")


def normalize_bdf(value):
    """Return the lower-case ``dddd:bb:dd.f`` form of a PCI address, or None."""
    if not isinstance(value, str):
        return None
    match = _ANY_BDF.match(value.strip())
    if not match:
        return None
    domain, bus, dev, fn = match.groups()
    if int(dev, 16) > 0x1F:
        return None
    return "%04x:%02x:%02x.%s" % (int(domain or "0", 16), int(bus, 16), int(dev, 16), fn)


def _int(value):
    if isinstance(value, bool) or isinstance(value, float):
        return None
    try:
        return int(str(value).strip())
    except (TypeError, ValueError):
        return None


def numa_number(value):
    """A NUMA node number, None when unknown (-1, 4294967295 = uint32 -1, N/A, not an integer)."""
    number = _int(value)
    if number is None or number < 0 or number >= 2 ** 31:
        return None
    return number


def set_numa(topo, gpu, affinity, node, what):
    """Fill ``gpu``'s NUMA node from an smi affinity and KFD CPU node (raw values); False if both unknown.

    ``what`` names the fields in warnings, e.g. ``("Numa Affinity", "Numa Node")``.
    """
    known_affinity, known_node = numa_number(affinity), numa_number(node)
    if known_affinity is not None:
        gpu["numa_node"], gpu["numa_source"] = known_affinity, "smi"
        return True
    if affinity is not None:
        if known_node is not None:
            topo.warn("GPU %d: %s is %s (none reported: a single-node machine or a VM): using its %s %d (the KFD "
                      "CPU node)" % (gpu["index"], what[0], shown(affinity), what[1], known_node))
        else:
            topo.warn("GPU %d: %s is %s (none reported, typical of VMs) and no %s: NUMA node left unknown"
                      % (gpu["index"], what[0], shown(affinity), what[1]))
    if known_node is not None:
        gpu["numa_node"], gpu["numa_source"] = known_node, "kfd"
        return True
    return False


def infer_link(weight, partitions=False):
    """``(type, hops)`` of a GPU pair from its weight by ``WEIGHT_RULE``; None for an unknown weight.

    ``partitions``: the weights include the 13 of MI300 partitions, so 41 is the cross-socket xGMI link.
    """
    if weight is None or weight <= 0:
        return None
    if partitions and weight == CROSS_SOCKET_PARTITION_WEIGHT:
        return "xgmi", 1  # one KFD io_link, as the KFD reader sees it
    if weight < PCIE_MIN_WEIGHT:
        return "xgmi", 1 if weight <= XGMI_HOP_WEIGHT else 2
    # 40 = GPU->CPU + CPU->GPU under one CPU node; more = a CPU-CPU segment in between
    return "pcie", 2 if weight == PCIE_MIN_WEIGHT else 3


def xgmi_hops(hops, weight):
    """The model's hops of an xGMI pair whose tool-printed hops are ``hops`` (1 for any xGMI route)."""
    if hops == 1 and weight is not None and weight >= 2 * XGMI_HOP_WEIGHT and weight % XGMI_HOP_WEIGHT == 0:
        return 2
    return hops


def shown(value):
    """A raw tool value for a one-line message."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return repr(str(value)[:24])


def p2p_flag(value):
    text = str(value).strip().upper() if value is not None and not isinstance(value, (dict, list)) else ""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None


def _load(data, name):
    if isinstance(data, str):
        try:
            data = json.loads(data)
        except ValueError as err:
            raise TopologyError("%s: invalid JSON: %s" % (name, err)) from None
    # some amd-smi versions wrap the per-GPU list in an object
    if isinstance(data, dict):
        lists = [v for v in data.values() if isinstance(v, list)]
        if len(lists) == 1:
            data = lists[0]
        elif "gpu" in data:
            data = [data]
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        raise TopologyError("%s: expected a JSON list of per-GPU objects" % name)
    return data


def _tables():
    return {"gpus": {}, "weight": {}, "hops": {}, "link_type": {}, "bandwidth": {}, "access": {}}


def _gpu_index(value):
    """A JSON ``gpu`` value as an index (bool is not an int here), else None."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


def _gpu_key(key, name):
    match = re.match(r"^gpu_(\d+)$", str(key))
    if not match:
        raise TopologyError("%s: unexpected key %r (expected gpu_N)" % (name, str(key)[:40]))
    return int(match.group(1))


def _check_index(index, name):
    if index < 0 or index >= MAX_GPUS:
        raise TopologyError("%s: GPU index %d is out of range (0..%d)" % (name, index, MAX_GPUS - 1))
    return index


def parse_topology_json(data, name="amd-smi topology --json"):
    entries = _load(data, name)
    tables = _tables()
    for entry in entries:
        a = _gpu_index(entry.get("gpu"))
        if a is None:
            raise TopologyError("%s: an entry has no integer 'gpu' key" % name)
        _check_index(a, name)
        tables["gpus"][a] = normalize_bdf(entry.get("bdf")) or tables["gpus"].get(a)
        if "links" in entry:
            links = entry["links"]
            if not isinstance(links, list):
                raise TopologyError("%s: 'links' of gpu %d is not a list" % (name, a))
            for link in links:
                b = _gpu_index(link.get("gpu")) if isinstance(link, dict) else None
                if b is None:
                    raise TopologyError("%s: a link of gpu %d has no integer 'gpu' key" % (name, a))
                _check_index(b, name)
                if b not in tables["gpus"]:
                    tables["gpus"][b] = normalize_bdf(link.get("bdf"))
                for src, dst in (("weight", "weight"), ("num_hops", "hops"), ("link_type", "link_type"),
                                 ("bandwidth", "bandwidth"), ("link_status", "access")):
                    if src in link:
                        tables[dst][(a, b)] = link[src]
        else:
            found = False
            for src, dst in (("weight", "weight"), ("hops", "hops"), ("link_type", "link_type"),
                             ("numa_bandwidth", "bandwidth"), ("link_accessibility", "access")):
                values = entry.get(src)
                if isinstance(values, dict):
                    found = True
                    for key, value in values.items():
                        tables[dst][(a, _check_index(_gpu_key(key, name), name))] = value
            if not found:
                raise TopologyError("%s: gpu %d has neither 'links' (ROCm >= 6.1.1) nor per-GPU maps "
                                    "('weight', 'hops', 'link_type')" % (name, a))
    if not tables["gpus"]:
        raise TopologyError("%s: no GPU in the JSON list" % name)
    return tables


def _title(line):
    """``(title, table key or None)`` when ``line`` is a ``XXX TABLE:`` title, else None."""
    match = _KNOWN_TITLE.search(line)
    if match:
        return match.group(1), _TEXT_TABLES[match.group(1)]
    match = _ANY_TITLE.search(line)
    if match:
        return match.group(1), None
    return None


def parse_topology_text(text, name="amd-smi topology"):
    tables = _tables()
    in_table = False  # inside a titled table whose rows are not all read yet
    current = None    # table key of a known table, None for the others (CACHE COHERANCY, DMA, ...)
    header = None
    rows = set()
    seen = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        title = _title(line)
        if title:
            seen.append(title[0])
            in_table, current, header, rows = True, title[1], None, set()
            continue
        bdf = _BDF_TOKEN.search(line)
        if not seen or bdf is None:
            continue  # before the first table, legend, prompts, log noise
        words = line[bdf.start():].split()
        if all(_BDF.match(w) for w in words):
            lowered = [w.lower() for w in words]
            if in_table and header is None:
                header = lowered
                if current is not None:
                    _record_header(tables, header, name, lineno)
                continue
            if in_table and lowered == header:
                continue  # the header printed twice
            raise TopologyError("%s line %d: BDF header row without a 'XXX TABLE:' title (section title missing?)"
                                % (name, lineno))
        if not in_table:
            continue  # after a complete table: trailing output
        if header is None:
            if current is None:
                continue
            raise TopologyError("%s line %d: expected the BDF header row of the %s table, found %r"
                                % (name, lineno, seen[-1], line[:60]))
        if not _BDF.match(words[0]):
            continue
        row = words[0].lower()
        if current is not None:
            if len(words) != len(header) + 1:
                raise TopologyError("%s line %d: row %s of the %s table has %d values for %d columns "
                                    "(truncated output?)" % (name, lineno, words[0], seen[-1], len(words) - 1,
                                                             len(header)))
            if row not in header:
                raise TopologyError("%s line %d: row %s is not in the %s table header"
                                    % (name, lineno, words[0], seen[-1]))
            index = header.index(row)
            for col, value in enumerate(words[1:]):
                tables[current][(index, col)] = value
        rows.add(row)
        if len(rows) >= len(header):
            in_table = False
    if not seen:
        raise TopologyError("%s: no 'XXX TABLE:' section found (not amd-smi topology output?)" % name)
    if not tables["gpus"]:
        raise TopologyError("%s: no table with a BDF header row (ACCESS, WEIGHT, HOPS, LINK TYPE or NUMA BW)" % name)
    return tables


def _record_header(tables, header, name, lineno):
    if len(header) > MAX_GPUS:
        raise TopologyError("%s line %d: %d GPUs in a table header (at most %d)" % (name, lineno, len(header), MAX_GPUS))
    if len(set(header)) != len(header):
        raise TopologyError("%s line %d: a PCI address appears twice in the table header" % (name, lineno))
    if tables["gpus"] and len(tables["gpus"]) != len(header):
        raise TopologyError("%s line %d: tables list different numbers of GPUs (%d and %d)"
                            % (name, lineno, len(tables["gpus"]), len(header)))
    for index, bdf in enumerate(header):
        known = tables["gpus"].get(index)
        if known is not None and known != bdf:
            raise TopologyError("%s line %d: tables list GPUs in different orders" % (name, lineno))
        tables["gpus"][index] = bdf


def parse_numa_json(data, name="amd-smi static --numa --json"):
    result = {}
    for entry in _load(data, name):
        gpu = _gpu_index(entry.get("gpu"))
        numa = entry.get("numa")
        if gpu is None or not isinstance(numa, dict):
            raise TopologyError("%s: each entry needs 'gpu' and a 'numa' object" % name)
        result[gpu] = {"node": _int(numa.get("node")), "affinity": _int(numa.get("affinity"))}
    return result


def _text(value):
    return value.strip() if isinstance(value, str) and value.strip() and value.strip().upper() != "N/A" else None


def parse_list_json(data, name="amd-smi list --json"):
    result = {}
    for entry in _load(data, name):
        gpu = _gpu_index(entry.get("gpu"))
        if gpu is None:
            raise TopologyError("%s: an entry has no integer 'gpu' key" % name)
        result[gpu] = {
            "bdf": normalize_bdf(entry.get("bdf")) or normalize_bdf(entry.get("gpu_bdf")),
            "uuid": _text(entry.get("uuid")) or _text(entry.get("gpu_uuid")),
            "kfd_id": _int(entry.get("kfd_id")),
            "node_id": _int(entry.get("node_id")),
            "partition_id": _int(entry.get("partition_id")),
        }
    return result


def _get(table, a, b):
    value = table.get((a, b))
    return value if value is not None else table.get((b, a))


def _topology_tables(topology, name):
    """Text tables or JSON (either schema); MPI-tagged text (``[1,0]<stdout>:...``) is text, not JSON."""
    if not isinstance(topology, str):
        return parse_topology_json(topology, name)
    if topology.lstrip()[:1] in ("[", "{"):
        try:
            data = json.loads(topology)
        except ValueError as err:
            if "TABLE:" not in topology:
                raise TopologyError("%s: invalid JSON: %s" % (name, err)) from None
        else:
            return parse_topology_json(data, name)
    return parse_topology_text(topology, name)


def parse_amdsmi(topology, numa=None, listing=None, name="amd-smi topology"):
    """Build a ``Topology`` from amd-smi topology output plus optional ``static --numa``/``list`` JSON."""
    tables = _topology_tables(topology, name)
    numa_info = parse_numa_json(numa) if numa is not None else {}
    list_info = parse_list_json(listing) if listing is not None else {}
    topo = Topology("amd-smi")
    indices = sorted(tables["gpus"])
    count = len(indices)
    if indices != list(range(count)):
        raise TopologyError("%s: GPU indices %s are not consecutive from 0" % (name, _span(indices)))
    for index in range(count):
        extra = list_info.get(index, {})
        gpu = topo.add_gpu(bdf=tables["gpus"][index] or extra.get("bdf"), kfd_node=extra.get("node_id"),
                           gpu_id=extra.get("kfd_id"), unique_id=extra.get("uuid"))
        info = numa_info.get(index)
        if info is not None:
            set_numa(topo, gpu, info["affinity"], info["node"], ("amd-smi NUMA affinity", "NUMA node"))
    if not numa_info:
        topo.warn("%s: amd-smi topology carries no NUMA node; give 'amd-smi static --numa --json' output "
                  "for NUMA locality" % name)
    assign_physical(topo)
    _links(topo, tables, count, name)
    return topo


def _span(indices):
    shown = ", ".join(str(i) for i in indices[:8])
    return "[%s%s]" % (shown, ", ..." if len(indices) > 8 else "")


def _links(topo, tables, count, name):
    if not (tables["link_type"] or tables["hops"] or tables["weight"]):
        if count > 1:
            topo.warn("%s: no LINK TYPE, HOPS or WEIGHT table: links unknown" % name)
        return
    smi_links(topo, tables, count, name, "table")


def resolve_link(raw_type, raw_hops, weight, partitions=False):
    """Type and model hops of a GPU pair from the printed link type, hops and weight (int or None).

    Returns ``(type, hops, notes)``; ``type`` is None when nothing tells it. ``notes`` names what was
    inferred: ``type-from-hops``, ``type-from-weight``, ``hops-from-weight``, ``hops-assumed``, ``odd-type``.
    """
    notes = set()
    text = str(raw_type).strip().upper() if raw_type is not None else ""
    kind = _KINDS.get(text)
    if kind is None and text not in ("", "N/A", "SELF"):
        notes.add("odd-type")
    hops = _int(raw_hops)
    hops = hops if hops is not None and hops > 0 else None
    weight = weight if weight is not None and weight > 0 else None
    inferred = infer_link(weight, partitions)
    if kind is None and hops is not None:
        kind = "xgmi" if hops == 1 else "pcie"
        notes.add("type-from-hops")
    elif kind is None and inferred is not None:
        kind, hops = inferred
        notes.add("type-from-weight")
    if kind is None:
        return None, None, notes
    if hops is None:
        if inferred is not None and inferred[0] == kind:
            hops = inferred[1]
            notes.add("hops-from-weight")
        else:
            hops = 1 if kind == "xgmi" else 2
            notes.add("hops-assumed")
    elif kind == "xgmi":
        hops = xgmi_hops(hops, weight)
    return kind, hops, notes


def smi_links(topo, tables, count, name, word):
    """Set every pair's link from ``tables`` (``weight``/``hops``/``link_type``/``bandwidth``/``access``,
    ``{(a, b): value}``, either triangle); ``word`` is "table" (amd-smi) or "matrix" (rocm-smi)."""
    pairs = [(a, b) for a in range(count) for b in range(a + 1, count)]
    weights = {pair: _int(_get(tables["weight"], *pair)) for pair in pairs}
    known = [w for w in weights.values() if w is not None]
    if known and all(w == 0 for w in known):
        topo.warn("%s: every off-diagonal weight is 0 (as amd-smi 26 prints): weights unknown" % name)
    partitions = INTRA_SOCKET_WEIGHT in known
    notes, unknown, odd = set(), [], None
    for a, b in pairs:
        raw = _get(tables["link_type"], a, b)
        weight = weights[(a, b)] if weights[(a, b)] is not None and weights[(a, b)] > 0 else None
        kind, hops, pair_notes = resolve_link(raw, _get(tables["hops"], a, b), weight, partitions)
        notes |= pair_notes
        if "odd-type" in pair_notes and odd is None:
            odd = (a, b, raw)
        access = [p2p_flag(tables["access"].get(key)) for key in ((a, b), (b, a))]
        p2p = False if False in access else (True if True in access else None)
        if kind is None:
            unknown.append((a, b, p2p))
            continue
        bw = parse_bandwidth(_get(tables["bandwidth"], a, b))
        topo.set_link(a, b, kind, hops, weight=weight, bandwidth_mbps=bw, p2p_access=p2p)
    if odd is not None:
        topo.warn("%s: link type of GPUs %d and %d is %s (not XGMI or PCIE): inferred from hops or weight"
                  % (name, odd[0], odd[1], shown(odd[2])))
    if "type-from-hops" in notes:
        topo.warn("%s: link types missing: inferred from the hops %s (1 = xGMI, 2 or more = PCIe)" % (name, word))
    if "type-from-weight" in notes or "hops-from-weight" in notes:
        topo.warn("%s: link types or hops missing: inferred from the weight %s (%s)" % (name, word, WEIGHT_RULE))
    if "hops-assumed" in notes:
        topo.warn("%s: no hops given: hops assumed 1 for xGMI and 2 for PCIe" % name)
    if unknown and len(unknown) == len(pairs):
        topo.links.clear()
        topo.warn("%s: no readable link type, hops or weight: links unknown" % name)
    elif unknown:
        for a, b, p2p in unknown:
            topo.set_link(a, b, "pcie", 4, p2p_access=p2p)
        topo.warn("%s: link type of %d GPU pair(s) unknown (first: GPUs %d and %d): recorded as PCIe, hops 4"
                  % (name, len(unknown), unknown[0][0], unknown[0][1]))
