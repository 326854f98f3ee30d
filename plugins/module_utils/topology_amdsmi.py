"""GPU topology from amd-smi output.

Public API:

``parse_topology_json(text_or_obj, name)``
    ``amd-smi topology --json``, both schemas: ROCm >= 6.1.1 (a list of ``{gpu, bdf, links: [...]}``)
    and the earlier per-GPU maps (``{gpu, weight: {gpu_N: ...}, hops: ..., link_type: ...}``).
    Returns the tables ``{"gpus": {index: bdf|None}, "weight"|"hops"|"link_type"|"bandwidth": {(a, b): v}}``.
``parse_topology_text(text, name)``
    ``amd-smi topology`` text tables (ACCESS, WEIGHT, HOPS, LINK TYPE, NUMA BW, ...), same tables.
``parse_numa_json(text_or_obj, name)``
    ``amd-smi static --numa --json`` -> ``{gpu: {"node": int|None, "affinity": int|None}}``.
``parse_list_json(text_or_obj, name)``
    ``amd-smi list --json`` -> ``{gpu: {"bdf", "uuid", "kfd_id", "node_id", "partition_id"}}``.
``parse_amdsmi(topology, numa=None, listing=None, name=...)``
    A ``Topology`` (source ``amd-smi``); ``topology`` is text or JSON (detected), the others optional.

The topology output carries no NUMA node: it comes from ``static --numa`` (``affinity`` = Linux NUMA
node of the PCI device, -1 = none).
"""

import json
import re

from .topology_model import Topology, TopologyError, assign_physical, parse_bandwidth

_TABLE = re.compile(r"^([A-Z][A-Z -]*?)\s+TABLE:\s*$")
_BDF = re.compile(r"^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")
_TEXT_TABLES = {"WEIGHT": "weight", "HOPS": "hops", "LINK TYPE": "link_type", "NUMA BW": "bandwidth",
                "ACCESS": "access"}


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


def _gpu_key(key, name):
    match = re.match(r"^gpu_(\d+)$", str(key))
    if not match:
        raise TopologyError("%s: unexpected key %r (expected gpu_N)" % (name, key))
    return int(match.group(1))


def parse_topology_json(data, name="amd-smi topology --json"):
    entries = _load(data, name)
    tables = _tables()
    for entry in entries:
        if not isinstance(entry.get("gpu"), int):
            raise TopologyError("%s: an entry has no integer 'gpu' key" % name)
        a = entry["gpu"]
        tables["gpus"][a] = entry.get("bdf")
        if "links" in entry:
            links = entry["links"]
            if not isinstance(links, list):
                raise TopologyError("%s: 'links' of gpu %d is not a list" % (name, a))
            for link in links:
                b = link.get("gpu") if isinstance(link, dict) else None
                if not isinstance(b, int):
                    raise TopologyError("%s: a link of gpu %d has no integer 'gpu' key" % (name, a))
                if link.get("bdf") and b not in tables["gpus"]:
                    tables["gpus"].setdefault(b, link.get("bdf"))
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
                        tables[dst][(a, _gpu_key(key, name))] = value
            if not found:
                raise TopologyError("%s: gpu %d has neither 'links' (ROCm >= 6.1.1) nor per-GPU maps "
                                    "('weight', 'hops', 'link_type')" % (name, a))
    if not tables["gpus"]:
        raise TopologyError("%s: no GPU in the JSON list" % name)
    return tables


def parse_topology_text(text, name="amd-smi topology"):
    tables = _tables()
    current = None
    header = None
    seen = set()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        match = _TABLE.match(line)
        if match:
            current = _TEXT_TABLES.get(match.group(1).strip())
            header = None
            seen.add(match.group(1).strip())
            continue
        if current is None:
            continue
        words = line.split()
        if header is None:
            if not all(_BDF.match(w) for w in words):
                raise TopologyError("%s line %d: expected the BDF header row of a table, found %r"
                                    % (name, lineno, line[:60]))
            header = [w.lower() for w in words]
            for index, bdf in enumerate(header):
                known = tables["gpus"].get(index)
                if known is not None and known != bdf:
                    raise TopologyError("%s line %d: tables list GPUs in different orders" % (name, lineno))
                tables["gpus"][index] = bdf
            continue
        if len(words) == len(header) and all(_BDF.match(w) for w in words):
            raise TopologyError("%s line %d: BDF header row without a 'XXX TABLE:' title (section title missing?)"
                                % (name, lineno))
        if not _BDF.match(words[0]):
            raise TopologyError("%s line %d: row does not start with a BDF: %r" % (name, lineno, line[:60]))
        if len(words) != len(header) + 1:
            raise TopologyError("%s line %d: row %s has %d values for %d columns (truncated output?)"
                                % (name, lineno, words[0], len(words) - 1, len(header)))
        row = header.index(words[0].lower()) if words[0].lower() in header else None
        if row is None:
            raise TopologyError("%s line %d: row %s is not in the table header" % (name, lineno, words[0]))
        for col, value in enumerate(words[1:]):
            tables[current][(row, col)] = value
    if not seen:
        raise TopologyError("%s: no 'XXX TABLE:' section found (not amd-smi topology output?)" % name)
    if not tables["link_type"] and not tables["hops"]:
        raise TopologyError("%s: neither LINK TYPE TABLE nor HOPS TABLE found" % name)
    return tables


def _int(value):
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def parse_numa_json(data, name="amd-smi static --numa --json"):
    result = {}
    for entry in _load(data, name):
        gpu = entry.get("gpu")
        numa = entry.get("numa")
        if not isinstance(gpu, int) or not isinstance(numa, dict):
            raise TopologyError("%s: each entry needs 'gpu' and a 'numa' object" % name)
        result[gpu] = {"node": _int(numa.get("node")), "affinity": _int(numa.get("affinity"))}
    return result


def parse_list_json(data, name="amd-smi list --json"):
    result = {}
    for entry in _load(data, name):
        gpu = entry.get("gpu")
        if not isinstance(gpu, int):
            raise TopologyError("%s: an entry has no integer 'gpu' key" % name)
        result[gpu] = {
            "bdf": entry.get("bdf") or entry.get("gpu_bdf"),
            "uuid": entry.get("uuid") or entry.get("gpu_uuid"),
            "kfd_id": _int(entry.get("kfd_id")),
            "node_id": _int(entry.get("node_id")),
            "partition_id": _int(entry.get("partition_id")),
        }
    return result


def _get(table, a, b):
    value = table.get((a, b))
    return value if value is not None else table.get((b, a))


def parse_amdsmi(topology, numa=None, listing=None, name="amd-smi topology"):
    """Build a ``Topology`` from amd-smi topology output plus optional ``static --numa``/``list`` JSON."""
    if isinstance(topology, str) and not topology.lstrip().startswith(("[", "{")):
        tables = parse_topology_text(topology, name)
    else:
        tables = parse_topology_json(topology, name)
    numa_info = parse_numa_json(numa) if numa is not None else {}
    list_info = parse_list_json(listing) if listing is not None else {}
    topo = Topology("amd-smi")
    count = max(tables["gpus"]) + 1
    if sorted(tables["gpus"]) != list(range(count)):
        raise TopologyError("%s: GPU indices %s are not 0..%d" % (name, sorted(tables["gpus"]), count - 1))
    for index in range(count):
        bdf = tables["gpus"][index]
        extra = list_info.get(index, {})
        bdf = (bdf or extra.get("bdf") or "").lower() or None
        gpu = topo.add_gpu(bdf=bdf, kfd_node=extra.get("node_id"), gpu_id=extra.get("kfd_id"),
                           unique_id=extra.get("uuid"))
        info = numa_info.get(index)
        if info is None:
            continue
        if info["affinity"] is not None and info["affinity"] >= 0:
            gpu["numa_node"], gpu["numa_source"] = info["affinity"], "smi"
        elif info["affinity"] is not None:
            topo.warn("GPU %d: amd-smi NUMA affinity is %d (none reported, typical of VMs): NUMA node left unknown"
                      % (index, info["affinity"]))
        elif info["node"] is not None and info["node"] >= 0:
            gpu["numa_node"], gpu["numa_source"] = info["node"], "smi"
    if not numa_info:
        topo.warn("%s: amd-smi topology carries no NUMA node; give 'amd-smi static --numa --json' output "
                  "for NUMA locality" % name)
    assign_physical(topo)
    _links(topo, tables, count, name)
    return topo


def _links(topo, tables, count, name):
    weights = [_int(_get(tables["weight"], a, b)) for a in range(count) for b in range(a + 1, count)]
    zero_weights = bool(weights) and all(w == 0 for w in weights)
    if zero_weights:
        topo.warn("%s: every off-diagonal weight is 0 (as amd-smi 26 prints): weights unknown" % name)
    guessed = False
    for a in range(count):
        for b in range(a + 1, count):
            raw = _get(tables["link_type"], a, b)
            kind = {"XGMI": "xgmi", "PCIE": "pcie"}.get(str(raw).upper())
            hops = _int(_get(tables["hops"], a, b))
            if kind is None:
                if raw is not None:
                    topo.warn("%s: link type of GPUs %d and %d is %r: recorded from hops" % (name, a, b, raw))
                kind = "xgmi" if hops == 1 else "pcie"
            if hops is None:
                hops = 1 if kind == "xgmi" else 2
                guessed = True
            weight = _int(_get(tables["weight"], a, b))
            if zero_weights:
                weight = None
            bw = parse_bandwidth(_get(tables["bandwidth"], a, b))
            topo.set_link(a, b, kind, hops, weight=weight, bandwidth_mbps=bw)
    if guessed:
        topo.warn("%s: no hops given: hops assumed 1 for xGMI and 2 for PCIe" % name)
