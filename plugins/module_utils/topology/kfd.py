"""GPU topology from KFD sysfs, PCI sysfs and NUMA sysfs (no ROCm user space needed).

Public API:

``KFD_NODES``
    ``sys/class/kfd/kfd/topology/nodes``, relative to the sysroot.
``find_nodes_dir(sysroot="/", path=None)``
    The KFD ``nodes`` directory: ``<sysroot>/KFD_NODES``, or ``path`` given as the ``topology`` or the
    ``nodes`` directory of a capture. Raises ``TopologyError`` when it does not exist.
``read_kfd(sysroot=None, path=None)``
    A ``Topology`` (source ``kfd``). PCI facts (NUMA node, local CPUs, link width/speed, firmware versions) come from
    ``<sysroot>/sys/bus/pci/devices/<bdf>/``, NUMA CPU lists from
    ``<sysroot>/sys/devices/system/node/node<N>/cpulist``; both are optional (captures hold no PCI sysfs).

KFD facts used here: GPU nodes have ``gpu_id`` != 0 (or ``simd_count`` > 0 when ``gpu_id`` files are
absent); link ``type`` 2 = PCIe and 11 = xGMI (CRAT numbering, not rocm-smi's 1/2 enum); BDF =
``domain`` + ``location_id`` = ``(bus << 8) | (dev << 3) | fn``.
"""

import heapq
import os

from ..core.cpulist import CpulistError, normalize
from ..core.sysroot import join, list_dir, numeric_entries, read_int, read_properties, read_text
from .model import Topology, TopologyError, assign_physical, gfx_name

KFD_NODES = "sys/class/kfd/kfd/topology/nodes"
PCI_DEVICES = "sys/bus/pci/devices"
NUMA_NODES = "sys/devices/system/node"

LINK_PCIE = 2
LINK_XGMI = 11


def find_nodes_dir(sysroot="/", path=None):
    if path:
        for candidate in (os.path.join(path, "nodes"), os.path.join(path, "topology", "nodes"), path):
            if os.path.isdir(candidate) and candidate.rstrip("/").endswith("nodes"):
                return candidate
        if os.path.isdir(path) and numeric_entries(path):
            return path
        raise TopologyError("KFD topology not found: %s has no nodes/ directory" % path)
    nodes = join(sysroot, KFD_NODES)
    if not os.path.isdir(nodes):
        raise TopologyError(
            "KFD topology not found: %s does not exist (amdgpu driver not loaded, or wrong sysroot)" % nodes)
    return nodes


def bdf_of(domain, location_id):
    """``domain`` + KFD ``location_id`` -> ``dddd:bb:dd.f``; None when either is outside the kernel's u32 range
    (a corrupt properties file), never a malformed address."""
    if not (0 <= domain <= 0xFFFFFFFF and 0 < location_id <= 0xFFFFFFFF):
        return None
    return "%04x:%02x:%02x.%x" % (domain, (location_id >> 8) & 0xFF, (location_id >> 3) & 0x1F,
                                  location_id & 0x7)


def _speed(text):
    """``"32.0 GT/s PCIe"`` -> 32.0; unknown -> None."""
    if not text:
        return None
    head = text.split()[0]
    try:
        return float(head)
    except ValueError:
        return None


def _width(text):
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


class _Node:
    __slots__ = ("num", "props", "gpu_id", "name", "links", "is_gpu")

    def __init__(self, num, props, gpu_id, name):
        self.num = num
        self.props = props
        self.gpu_id = gpu_id
        self.name = name
        self.links = []
        self.is_gpu = False

    def prop(self, key):
        value = self.props.get(key)
        return value if isinstance(value, int) else None


_LINK_KEYS = (b"node_to", b"type", b"weight", b"min_bandwidth", b"max_bandwidth")


def _read_link_file(path):
    """Return the 5 link integers of a link properties file, None when unreadable, [] when malformed.

    A CPX node has ~4000 of these tiny files: read them as bytes with os.open and parse only the keys
    used, which keeps a 65-node tree well under 50 ms.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        data = os.read(fd, 65536)
    except OSError:
        return None
    finally:
        os.close(fd)
    words = data.split()
    # fast path: the kernel's iolink_show() prints the keys in this fixed order
    if (len(words) >= 20 and words[0] == b"type" and words[8] == b"node_to" and words[10] == b"weight"
            and words[16] == b"min_bandwidth" and words[18] == b"max_bandwidth"):
        try:
            values = [int(words[9]), int(words[1]), int(words[11]), int(words[17]), int(words[19])]
            # the kernel prints these as u32: a negative number is a corrupt file, not a value
            return [v if v >= 0 else None for v in values]
        except ValueError:
            pass
    props = dict(zip(words[::2], words[1::2]))
    values = []
    for key in _LINK_KEYS:
        try:
            value = int(props[key])
        except (KeyError, ValueError):
            value = None
        values.append(value if value is None or value >= 0 else None)
    return values


def _read_links(node_dir, num, warnings):
    """Return ``[(to, type, weight, min_bw, max_bw, is_io_link)]`` from io_links and p2p_links."""
    links = []
    for sub in ("io_links", "p2p_links"):
        base = node_dir + "/" + sub
        is_io = sub == "io_links"
        for link in numeric_entries(base):
            values = _read_link_file("%s/%d/properties" % (base, link))
            if values is None:
                warnings.append("KFD node %d: %s/%d/properties is missing or unreadable: link ignored"
                                % (num, sub, link))
                continue
            if None in values[:3]:
                # negative values (the kernel prints u32) count as missing too
                warnings.append("KFD node %d: %s/%d/properties has no integer node_to/type/weight: link ignored"
                                % (num, sub, link))
                continue
            links.append((values[0], values[1], values[2], values[3] or 0, values[4] or 0, is_io))
    return links


def _read_nodes(nodes_dir, topo):
    warnings = []
    nodes = []
    entries = numeric_entries(nodes_dir)
    if not entries:
        raise TopologyError("KFD topology %s holds no numbered node directories" % nodes_dir)
    for num in entries:
        node_dir = os.path.join(nodes_dir, str(num))
        props = read_properties(os.path.join(node_dir, "properties"), None)
        if props is None:
            warnings.append("KFD node %d: %s/properties is missing or unreadable: node skipped" % (num, node_dir))
            continue
        bad = sorted(k for k, v in props.items() if not isinstance(v, int))
        if bad:
            warnings.append("KFD node %d: non-integer values for %s in %s/properties: treated as unknown"
                            % (num, ", ".join(bad), node_dir))
        gpu_id = read_int(os.path.join(node_dir, "gpu_id"), None)
        name = read_text(os.path.join(node_dir, "name"), None) or None
        node = _Node(num, props, gpu_id, name)
        if gpu_id is not None:
            node.is_gpu = gpu_id != 0
        else:
            node.is_gpu = (node.prop("simd_count") or 0) > 0
        node.links = _read_links(node_dir, num, warnings)
        if node.is_gpu and not os.path.isdir(os.path.join(node_dir, "io_links")):
            warnings.append("KFD node %d: io_links/ is missing: its links and NUMA node are unknown" % num)
        nodes.append(node)
    for message in warnings:
        topo.warn(message)
    return nodes


def _dedupe(gpus, topo):
    """Drop GPU nodes that repeat the identity (gpu_id or PCI address) of an earlier node."""
    seen = {}
    kept = []
    for node in gpus:
        domain, location = node.prop("domain") or 0, node.prop("location_id")
        keys = []
        if location and bdf_of(domain, location):
            keys.append(("bdf", bdf_of(domain, location)))
        if node.gpu_id:
            keys.append(("gpu_id", node.gpu_id))
        clash = next((seen[k] for k in keys if k in seen), None)
        if clash is not None:
            what = " and ".join("%s %s" % k for k in keys if seen.get(k) is clash)
            topo.warn("KFD node %d duplicates GPU node %d (same %s): node %d ignored"
                      % (node.num, clash.num, what, node.num))
            continue
        for k in keys:
            seen[k] = node
        kept.append(node)
    return kept


def _cpu_node_of(node, cpu_nums):
    """The KFD CPU node reached by the GPU's lowest-weight io_link (rocm-smi's "Numa Node")."""
    best = None
    # io_links only: p2p_links to the *other* socket's CPU node would give a wrong NUMA binding
    for to, _kind, weight, _lo, _hi, is_io in node.links:
        if is_io and to in cpu_nums and (best is None or weight < best[0]):
            best = (weight, to)
    return best


def _pci_facts(sysroot, bdf):
    if not bdf or sysroot is None:
        return None
    dev = join(sysroot, os.path.join(PCI_DEVICES, bdf))
    if not os.path.isdir(dev):
        return None
    facts = {"numa_node": read_int(os.path.join(dev, "numa_node"), None)}
    facts["local_cpulist"] = read_text(os.path.join(dev, "local_cpulist"), None)
    facts["firmware"] = _firmware(dev)
    facts["pcie"] = {
        "current_width": _width(read_text(os.path.join(dev, "current_link_width"), None)),
        "max_width": _width(read_text(os.path.join(dev, "max_link_width"), None)),
        "current_speed_gts": _speed(read_text(os.path.join(dev, "current_link_speed"), None)),
        "max_speed_gts": _speed(read_text(os.path.join(dev, "max_link_speed"), None)),
    }
    return facts


# amdgpu's fw_version/<name>_fw_version files ("0x%08x"); the ones knowledge/ rules read.
FIRMWARE_FILES = ("mec",)


def _firmware(dev):
    """``{"mec": 177}`` from the device's fw_version/ files; None when the driver exposes none."""
    found = {}
    for name in FIRMWARE_FILES:
        value = read_int(os.path.join(dev, "fw_version", "%s_fw_version" % name), None)
        if value is not None:
            found[name] = value
    return found or None


def _numa_cpulists(sysroot, topo):
    if sysroot is None:
        return {}
    base = join(sysroot, NUMA_NODES)
    result = {}
    for name in list_dir(base):
        if name.startswith("node") and name[4:].isdigit():
            text = read_text(os.path.join(base, name, "cpulist"), None)
            if text is None:
                continue
            try:
                result[int(name[4:])] = normalize(text)
            except CpulistError as err:
                topo.warn("%s/%s/cpulist: %s" % (base, name, err))
    return result


def _xgmi_path_weight(start, goal, xgmi):
    """Shortest xGMI path weight from start to goal (Dijkstra over direct xGMI links)."""
    dist = {start: 0}
    heap = [(0, start)]
    while heap:
        d, v = heapq.heappop(heap)
        if v == goal:
            return d
        if d > dist.get(v, d):
            continue
        for w, weight in xgmi.get(v, {}).items():
            nd = d + weight
            if nd < dist.get(w, nd + 1):
                dist[w] = nd
                heapq.heappush(heap, (nd, w))
    return None


def read_kfd(sysroot=None, path=None):
    """Read the KFD topology (plus PCI and NUMA sysfs) into a ``Topology``.

    ``sysroot`` None means ``/`` when ``path`` is None; with a capture ``path`` and no ``sysroot`` the
    host's own PCI and NUMA sysfs are not consulted (they describe another machine).
    """
    nodes_dir = find_nodes_dir(sysroot or "/", path)
    if sysroot is None and path is None:
        sysroot = "/"
    topo = Topology("kfd")
    nodes = _read_nodes(nodes_dir, topo)
    cpu_nodes = {n.num: n for n in nodes if not n.is_gpu}
    gpus = _dedupe([n for n in nodes if n.is_gpu], topo)
    if not gpus:
        raise TopologyError("KFD topology %s has no GPU node (gpu_id != 0 or simd_count > 0)" % nodes_dir)
    numa_cpus = _numa_cpulists(sysroot, topo)
    topo.numa_cpus.update(numa_cpus)
    index_of = {n.num: i for i, n in enumerate(gpus)}
    cpu_of = {}

    for node in gpus:
        domain, location = node.prop("domain") or 0, node.prop("location_id")
        bdf = bdf_of(domain, location) if location else None
        if location and bdf is None:
            topo.warn("GPU KFD node %d: domain %s / location_id %s out of range: PCI address unknown"
                      % (node.num, domain, location))
        hive = node.prop("hive_id")
        unique = node.prop("unique_id")
        gpu = topo.add_gpu(
            kfd_node=node.num, gpu_id=node.gpu_id, bdf=bdf,
            gfx=gfx_name(node.prop("gfx_target_version")),
            gfx_target_version=node.prop("gfx_target_version") or None,
            device_id="0x%04x" % node.prop("device_id") if node.prop("device_id") else None,
            vendor_id="0x%04x" % node.prop("vendor_id") if node.prop("vendor_id") else None,
            render_minor=node.prop("drm_render_minor"),
            hive_id=str(hive) if hive else None,
            simd_count=node.prop("simd_count"), num_xcc=node.prop("num_xcc"),
            unique_id=str(unique) if unique else None, name=node.name,
        )
        if bdf is None:
            topo.warn("GPU %s (KFD node %d): location_id missing or 0: PCI address unknown"
                      % (gpu["index"], node.num))
        cpu = _cpu_node_of(node, cpu_nodes)
        cpu_of[node.num] = cpu
        pci = _pci_facts(sysroot, bdf)
        if pci is not None:
            gpu["pcie"] = pci["pcie"]
            gpu["firmware"] = pci["firmware"]
            if pci["numa_node"] is None:
                topo.warn("GPU %s (%s): %s/%s/numa_node is unreadable: NUMA node unknown"
                          % (gpu["index"], bdf, PCI_DEVICES, bdf))
            elif pci["numa_node"] < 0:
                # VMs and single-node firmware report -1: binding to a guessed node would be wrong
                topo.warn("GPU %s (%s): PCI numa_node is -1 (no NUMA affinity reported, typical of VMs): "
                          "NUMA node left unknown" % (gpu["index"], bdf))
            else:
                gpu["numa_node"], gpu["numa_source"] = pci["numa_node"], "pci"
            if pci["local_cpulist"]:
                try:
                    gpu["cpus"] = normalize(pci["local_cpulist"])
                except CpulistError as err:
                    topo.warn("GPU %s (%s): local_cpulist: %s" % (gpu["index"], bdf, err))
        elif cpu is not None:
            gpu["numa_node"], gpu["numa_source"] = cpu[1], "kfd"
        else:
            topo.warn("GPU %s (KFD node %d): no PCI sysfs and no io_link to a CPU node: NUMA node unknown"
                      % (gpu["index"], node.num))
        if gpu["cpus"] is None and gpu["numa_node"] is not None:
            gpu["cpus"] = numa_cpus.get(gpu["numa_node"])
        if gpu["cpus"] is None and gpu["numa_source"] == "kfd":
            cpu_node = cpu_nodes[cpu[1]]
            base, count = cpu_node.prop("cpu_core_id_base"), cpu_node.prop("cpu_cores_count")
            if base is not None and count:
                gpu["cpus"] = "%d-%d" % (base, base + count - 1) if count > 1 else str(base)
                topo.warn("GPU CPU lists come from KFD cpu_core_id_base/cpu_cores_count (no PCI or NUMA "
                          "sysfs under the sysroot): they may not match Linux CPU numbers")

    assign_physical(topo)
    _links(topo, gpus, index_of, cpu_of, cpu_nodes)
    return topo


def _links(topo, gpus, index_of, cpu_of, cpu_nodes):
    direct = {}
    xgmi = {}
    for node in gpus:
        for to, kind, weight, low, high, _io in node.links:
            if to not in index_of or to == node.num:
                continue
            if kind == LINK_XGMI:
                key = (node.num, to)
                if key not in direct or weight < direct[key][0]:
                    direct[key] = (weight, low, high)
                xgmi.setdefault(node.num, {})[to] = weight
    cpu_links = {}
    for cpu in cpu_nodes.values():
        for to, _kind, weight, _lo, _hi, is_io in cpu.links:
            if is_io and to in cpu_nodes:
                cpu_links[(cpu.num, to)] = weight
    for i, na in enumerate(gpus):
        for nb in gpus[i + 1:]:
            a, b = index_of[na.num], index_of[nb.num]
            link = direct.get((na.num, nb.num)) or direct.get((nb.num, na.num))
            if link is not None:
                bw = {"min": link[1], "max": link[2]} if link[2] > 0 else None
                topo.set_link(a, b, "xgmi", 1, weight=link[0], bandwidth_mbps=bw)
                continue
            hive_a, hive_b = topo.gpus[a]["hive_id"], topo.gpus[b]["hive_id"]
            if hive_a and hive_a == hive_b:
                weight = _xgmi_path_weight(na.num, nb.num, xgmi)
                if weight is None:
                    topo.warn("GPUs %d and %d share hive %s but no xGMI path joins them in io_links"
                              % (a, b, hive_a))
                topo.set_link(a, b, "xgmi", 2, weight=weight)
                continue
            ca, cb = cpu_of.get(na.num), cpu_of.get(nb.num)
            if ca is None or cb is None:
                topo.warn("GPUs %d and %d: no io_link to a CPU node: PCIe hops/weight unknown, hops set to 4"
                          % (a, b))
                topo.set_link(a, b, "pcie", 4)
            elif ca[1] == cb[1]:
                topo.set_link(a, b, "pcie", 2, weight=ca[0] + cb[0])
            elif (ca[1], cb[1]) in cpu_links:
                topo.set_link(a, b, "pcie", 3, weight=ca[0] + cb[0] + cpu_links[(ca[1], cb[1])])
            else:
                # rocm_smi_lib: no direct CPU-CPU link -> 4 hops, weight + 10
                topo.set_link(a, b, "pcie", 4, weight=ca[0] + cb[0] + 10)
