"""The normalized GPU topology model every topotune consumer reads (see docs/topology.md).

Public API (standard library only):

``TopologyError(TopotuneError)``
    Input that cannot give a model (one-line message naming the file or section).
``SCHEMA``
    Model schema version (``1``).
``Topology(source)``
    Builder: ``add_gpu(**fields)`` (returns the GPU dict), ``set_link(a, b, kind, hops, weight=,
    xgmi_links=, bandwidth_mbps=, p2p_access=)`` (``kind`` is the link ``type``; ``p2p_access`` True/False when
    the source reports peer access, else None), ``numa_cpus[node] = cpulist``, ``warn(msg)``, ``sources``;
    ``finalize()`` derives hives, xGMI cliques, NUMA nodes and physical devices; ``to_dict()`` returns
    the model dict (calls ``finalize``).
``new_gpu(index)``
    A GPU dict with every model key set to its "unknown" value.
``gfx_name(gfx_target_version)``
    ``90010`` -> ``"gfx90a"``, ``90402`` -> ``"gfx942"``, ``0``/``None`` -> ``None``.
``parse_bandwidth(text)``
    ``"50000-200000"`` -> ``{"min": 50000, "max": 200000}``; ``"N/A"``/``"0-0"`` -> ``None``.
``assign_physical(topo)``
    Fills ``physical_index``/``partition`` from PCI addresses (CPX partitions are PCI functions).
``Topology.cpu_topology``
    ``None`` or the CPU model of ``cpu_topology.read_cpu_topology`` (packages, cores, L3 domains).
``xgmi_cliques(n, edges)``
    Maximal cliques (size >= 2) of an undirected graph, each sorted, list sorted.
"""

from ..core.errors import TopotuneError

SCHEMA = 1

GPU_KEYS = (
    "index", "kfd_node", "gpu_id", "bdf", "physical_index", "partition", "gfx", "gfx_target_version",
    "device_id", "vendor_id", "render_minor", "hive_id", "numa_node", "numa_source", "cpus", "pcie",
    "simd_count", "num_xcc", "unique_id", "name", "firmware",
)


class TopologyError(TopotuneError):
    """Input that cannot produce a topology model."""


def new_gpu(index):
    gpu = dict.fromkeys(GPU_KEYS)
    gpu["index"] = index
    gpu["physical_index"] = index
    return gpu


def gfx_name(version):
    """Decode a KFD ``gfx_target_version`` (major*10000 + minor*100 + stepping)."""
    if not isinstance(version, int) or version <= 0:
        return None
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return "gfx%d%d%x" % (major, minor, step)


def parse_bandwidth(text):
    """Parse a ``min-max`` MB/s pair; unknown or ``0-0`` (no direct link) gives ``None``."""
    if text is None:
        return None
    parts = str(text).strip().split("-")
    if len(parts) != 2 or not parts[0].isdigit() or not parts[1].isdigit():
        return None
    low, high = int(parts[0]), int(parts[1])
    if high <= 0:
        return None
    return {"min": low, "max": high}


def assign_physical(topo):
    """Set ``physical_index`` and ``partition`` of every GPU of ``topo``.

    A physical device is a PCI ``domain:bus:device`` (CPX partitions appear as PCI functions .0-.7),
    else a KFD ``unique_id``, else the GPU alone. Unequal partition counts get a warning (a partition
    node missing from the tree, as in the MI300X CPX capture).
    """
    groups = {}
    order = []
    for gpu in topo.gpus:
        if gpu["bdf"]:
            key = ("pci", gpu["bdf"][:-2])
        elif gpu["unique_id"]:
            key = ("uid", gpu["unique_id"])
        else:
            key = ("gpu", gpu["index"])
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(gpu)
    counts = set()
    for phys, key in enumerate(order):
        members = groups[key]
        ordered = sorted(members, key=lambda g: (g["bdf"] or "", g["index"]))
        for part, gpu in enumerate(ordered):
            gpu["physical_index"] = phys
            gpu["partition"] = {"index": part, "count": len(members)} if len(members) > 1 else None
        counts.add(len(members))
    if len(counts) > 1:
        most = max(counts)
        odd = ", ".join("%s: %d" % (groups[k][0]["bdf"] or k[1], len(groups[k]))
                        for k in order if len(groups[k]) != most)
        topo.warn("physical devices have unequal partition counts (%s; %d on the others): "
                  "a partition may be missing" % (odd, most))


def xgmi_cliques(count, edges):
    """Return the maximal cliques of size >= 2 of the graph ``edges`` over ``range(count)``."""
    adj = {v: set() for v in range(count)}
    for a, b in edges:
        if a != b:
            adj[a].add(b)
            adj[b].add(a)
    cliques = []

    def expand(r, p, x):
        if not p and not x:
            if len(r) > 1:
                cliques.append(sorted(r))
            return
        pivot = max(p | x, key=lambda v: len(adj[v] & p))
        for v in list(p - adj[pivot]):
            expand(r | {v}, p & adj[v], x & adj[v])
            p = p - {v}
            x = x | {v}

    expand(set(), set(v for v in adj if adj[v]), set())
    return sorted(cliques)


class Topology:
    """Mutable builder of the model; parsers fill it, ``to_dict`` freezes it."""

    def __init__(self, source):
        self.source = source
        self.sources = [source]
        self.gpus = []
        self.links = {}
        self.numa_cpus = {}
        self.warnings = []
        self.discrepancies = []
        self.cpu_topology = None

    def warn(self, message):
        if message not in self.warnings:
            self.warnings.append(message)

    def add_gpu(self, **fields):
        gpu = new_gpu(len(self.gpus))
        unknown = set(fields) - set(GPU_KEYS)
        if unknown:
            raise TypeError("unknown GPU keys: %s" % ", ".join(sorted(unknown)))
        gpu.update(fields)
        self.gpus.append(gpu)
        return gpu

    def set_link(self, a, b, kind, hops, weight=None, xgmi_links=None, bandwidth_mbps=None, p2p_access=None):
        a, b = min(a, b), max(a, b)
        self.links[(a, b)] = {
            "a": a, "b": b, "type": kind, "hops": hops, "weight": weight,
            "xgmi_links": xgmi_links, "bandwidth_mbps": bandwidth_mbps, "p2p_access": p2p_access,
        }

    def link(self, a, b):
        return self.links.get((min(a, b), max(a, b)))

    def finalize(self):
        """Compute the derived facts; returns the derived parts as a dict."""
        count = len(self.gpus)
        hives = {}
        for gpu in self.gpus:
            if gpu["hive_id"]:
                hives.setdefault(gpu["hive_id"], []).append(gpu["index"])
        numa = {}
        for node, cpus in self.numa_cpus.items():
            numa[node] = {"node": node, "cpus": cpus, "gpus": []}
        for gpu in self.gpus:
            node = gpu["numa_node"]
            if node is None:
                continue
            entry = numa.setdefault(node, {"node": node, "cpus": None, "gpus": []})
            entry["gpus"].append(gpu["index"])
        physical = {}
        for gpu in self.gpus:
            entry = physical.setdefault(gpu["physical_index"], {
                "physical_index": gpu["physical_index"], "bdf": None, "gpus": []})
            entry["gpus"].append(gpu["index"])
            if entry["bdf"] is None and gpu["bdf"]:
                # the physical device is named by its function-0 address
                entry["bdf"] = gpu["bdf"][:-1] + "0"
        direct = [(link["a"], link["b"]) for link in self.links.values() if link["type"] == "xgmi" and link["hops"] == 1]
        return {
            "hives": [{"hive_id": h, "gpus": g} for h, g in sorted(hives.items(), key=lambda kv: kv[1][0])],
            "xgmi_cliques": xgmi_cliques(count, direct),
            "numa_nodes": [numa[k] for k in sorted(numa)],
            "physical_devices": [physical[k] for k in sorted(physical)],
        }

    def to_dict(self):
        derived = self.finalize()
        model = {
            "schema": SCHEMA,
            "source": self.source,
            "sources": list(self.sources),
            "gpus": [dict(g) for g in self.gpus],
            "links": [dict(self.links[k]) for k in sorted(self.links)],
        }
        model.update(derived)
        model["cpu_topology"] = self.cpu_topology
        model["warnings"] = list(self.warnings)
        model["discrepancies"] = list(self.discrepancies)
        return model
