"""The PCIe hierarchy of a simulated node: bridges above each GPU, its NICs, and their config space bytes.

Two layouts (``plan``):

- ``switch``, as on MI300X OAM platforms (tests/fixtures/smi/lspci-PP__mi300x-8gpu__system-acceptance-docs.txt and
  lspci-PP__connectx7-8nic-same-mi300x-node__system-acceptance-docs.txt): each GPU sits below a CPU root port and a
  PCIe switch (upstream port, downstream port), and each ConnectX-7 NIC below another downstream port of the same
  switch;
- ``root_port``, as on the HPE Cray EX235a MI250X node of
  tests/fixtures/smi/hwloc-xml__mi250x-8gcd-hpe-ex235a-tioga__llnl-mpibind.xml: each GCD (its own PCI device) directly
  below its own CPU root port, no switch; a Slingshot NIC below another root port of the same root bus.

The functions of one slot (a CPX GPU's partitions, in this sim) share the slot's bridges. Linux shows the chain in
sysfs: ``sys/bus/pci/devices/<bdf>`` is a symlink to ``sys/devices/pci<domain>:<root bus>/<root port>/.../<bdf>``.

Config space bytes follow the PCI Express Base Specification layout (``include/uapi/linux/pci_regs.h``), the one
``plugins/module_utils/checks/pci_config.py`` decodes and ``lspci -F`` reads (tests/unit/plugins/module_utils/checks/test_pci_config.py).
"""

import os
import struct

CONFIG_SIZE = 4096
# Link capability / status for a Gen5 x16 link: speed code 5 (32 GT/s), width 16
_GEN = {"2.5": 1, "5.0": 2, "8.0": 3, "16.0": 4, "32.0": 5, "64.0": 6}
AER_NAMES = {
    "correctable": ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr",
                    "HeaderOF"),
    "nonfatal": ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF",
                 "MalfTLP", "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked",
                 "TLPBlockedErr", "PoisonTLPBlocked"),
}
AER_NAMES["fatal"] = AER_NAMES["nonfatal"]
AER_TOTAL = {"correctable": "TOTAL_ERR_COR", "nonfatal": "TOTAL_ERR_NONFATAL", "fatal": "TOTAL_ERR_FATAL"}


def _gen_code(speed_text):
    return _GEN.get(str(speed_text).split()[0], 4)


def config_bytes(vendor, device, class_code, port_type, speed="32.0 GT/s", width=16, bridge=None, acs=None,
                 aspm=0, ten_bit_tags=True, ari_forwarding=None, ari=False, rebar=None, multifunction=False):
    """4096 bytes of config space.

    ``port_type`` 0 endpoint, 4 root port, 5 switch upstream, 6 switch downstream; ``bridge`` = (primary,
    secondary, subordinate) bus numbers for a type 1 header; ``acs`` = ACS control value (the ACS capability is
    present when not None); ``aspm`` = LnkCtl ASPM control (0 off, 2 L1); ``ari_forwarding`` = DevCtl2 ARI
    forwarding enable of a downstream/root port; ``ari`` adds the ARI capability (endpoint); ``rebar`` =
    (current size as log2 MiB, [supported sizes as log2 MiB]) for BAR 0; ``multifunction`` sets Header Type bit 7
    (a device with more than one function)."""
    buf = bytearray(CONFIG_SIZE)
    struct.pack_into("<HHHH", buf, 0, int(vendor, 16), int(device, 16), 0x0406, 0x0010)
    struct.pack_into("<I", buf, 0x08, int(class_code, 16) << 8)
    if bridge is not None:
        buf[0x0E] = 0x01
        buf[0x18], buf[0x19], buf[0x1A] = bridge
    if multifunction:
        buf[0x0E] |= 0x80
    buf[0x34] = 0x50
    # power management capability (id 0x01) first, so the walk follows a next pointer to PCI Express
    buf[0x50], buf[0x51] = 0x01, 0x60
    struct.pack_into("<H", buf, 0x52, 0x0003)
    exp = 0x60
    buf[exp], buf[exp + 1] = 0x10, 0x00
    struct.pack_into("<H", buf, exp + 0x02, 0x0002 | (port_type << 4))
    struct.pack_into("<I", buf, exp + 0x04, 0x00008002 | (0x8000 if port_type == 0 else 0))  # MPS 512, RBER
    struct.pack_into("<H", buf, exp + 0x08, 0x2030)  # MPS 256, MRRS 512, relaxed ordering
    gen = _gen_code(speed)
    struct.pack_into("<I", buf, exp + 0x0C, gen | (width << 4) | (0x3 << 10))  # ASPM L0s+L1 supported
    struct.pack_into("<H", buf, exp + 0x10, aspm & 0x3)
    struct.pack_into("<H", buf, exp + 0x12, gen | (width << 4))
    devcap2 = 0x0000001F | (0x3 << 16 if ten_bit_tags else 0)  # completion timeout ranges, 10-bit tags
    if port_type in (4, 6):
        devcap2 |= 1 << 5  # ARI forwarding supported
    struct.pack_into("<I", buf, exp + 0x24, devcap2)
    devctl2 = (1 << 12 if ten_bit_tags else 0) | (1 << 5 if ari_forwarding else 0)
    struct.pack_into("<H", buf, exp + 0x28, devctl2)
    struct.pack_into("<I", buf, exp + 0x2C, ((1 << gen) - 1) << 1)  # supported speeds vector
    struct.pack_into("<H", buf, exp + 0x30, gen)
    ext = [(0x0001, 2, 0x48, None)]  # AER
    if acs is not None:
        ext.append((0x000D, 1, 8, ("acs", acs)))
    if ari:
        ext.append((0x000E, 1, 8, ("ari", None)))
    if rebar is not None:
        ext.append((0x0015, 1, 12, ("rebar", rebar)))
    pos = 0x100
    offsets = []
    for _unused, _unused, length, _unused in ext:
        offsets.append(pos)
        pos = (pos + length + 0xF) & ~0xF
    for k, (cap_id, version, _unused, body) in enumerate(ext):
        off = offsets[k]
        nxt = offsets[k + 1] if k + 1 < len(ext) else 0
        struct.pack_into("<I", buf, off, cap_id | (version << 16) | (nxt << 20))
        if body and body[0] == "acs":
            struct.pack_into("<HH", buf, off + 4, 0x005F, body[1])  # SV TB RR CR UF DT supported
        elif body and body[0] == "rebar":
            current, supported = body[1]
            struct.pack_into("<I", buf, off + 4, sum(1 << (s + 4) for s in supported if s < 28))
            struct.pack_into("<I", buf, off + 8, 0 | (1 << 5) | (current << 8))
    return bytes(buf)


def aer_text(kind, counts=None):
    """An ``aer_dev_<kind>`` file as the kernel prints it (one ``NAME count`` per line, then the total);
    Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats."""
    counts = counts or {}
    lines = ["%s %d" % (name, int(counts.get(name, 0))) for name in AER_NAMES[kind]]
    lines.append("%s %d" % (AER_TOTAL[kind], sum(int(v) for v in counts.values())))
    return "\n".join(lines) + "\n"


def parse_bdf(bdf):
    dom, bus, rest = bdf.split(":")
    dev, fn = rest.split(".")
    return int(dom, 16), int(bus, 16), int(dev, 16), int(fn, 16)


def fmt_bdf(dom, bus, dev, fn):
    return "%04x:%02x:%02x.%x" % (dom, bus, dev, fn)


LAYOUTS = ("switch", "root_port")
BRIDGES = ("root_port", "switch_up", "switch_down")


def physical_gpus(gpus):
    """``[(slot, [positions])]``: the physical GPUs (one PCI slot ``dddd:bb:dd`` each) in the order of their first
    function in ``gpus``, with the positions of their functions (CPX partitions are functions of one slot here)."""
    slots = {}
    for pos, g in enumerate(gpus):
        slots.setdefault(g["bdf"].rsplit(".", 1)[0], []).append(pos)
    return list(slots.items())


def _nic_slots(nics, count):
    """The physical GPU indexes with a NIC beside them: ``nics`` is a count (the first N) or a list of indexes."""
    if isinstance(nics, bool) or not isinstance(nics, (int, list, tuple)):
        raise ValueError("NICs must be a count of GPUs or a list of GPU indexes, not %r" % (nics,))
    if isinstance(nics, int):
        if nics < 0:
            raise ValueError("a negative NIC count (%d)" % nics)
        return set(range(min(nics, count)))  # the first N GPUs present (a fault may leave fewer than N)
    if not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < count for i in nics) or \
            len(set(nics)) != len(nics):
        raise ValueError("NIC GPU indexes must be distinct indexes of the %d physical GPUs (0-%d), not %r"
                         % (count, count - 1, list(nics)))
    return set(nics)


def plan(gpus, nics=0, far_numa_nics=(), numa_count=1, layout="switch"):
    """Bridges and NICs for ``gpus`` (``[{"bdf", "numa"}]`` in GPU order; the functions of one slot, CPX partitions,
    share the slot's bridges).

    ``layout`` ``switch`` (MI300X OAM platforms, the lspci -PP captures above): each physical GPU at bus B gets root
    port ``(B-3):01.1``, switch upstream ``(B-2):00.0``, downstream ``(B-1):00.0``; a NIC paired with it sits at bus
    B+1 below downstream port ``(B-1):01.0``. ``root_port`` (HPE Cray EX235a, the MI250X capture above): each GCD
    directly below its own CPU root port ``R:07.1`` on root bus R = B-1; a GCD with a NIC beside it has root bus
    R = B-2, and the NIC sits at bus B-1 below root port ``R:01.1`` of the same root bus. ``nics`` = how many
    physical GPUs (the first N present) or which (indexes) have a NIC. A NIC listed in
    ``far_numa_nics`` (physical GPU indexes) is placed instead below its own root port on the first GPU of the
    farthest NUMA node, at that GPU's bus + 2. Raises ValueError (one line, naming the GPU) when the buses
    collide. Returns ``{"devices": [...], "nics": [...]}``; each device ``{"bdf", "path": [bdf of each ancestor, root
    first], "kind", "numa"}``, bridges with ``bus_range`` (primary, secondary, subordinate) and ``serves`` (``gpu``
    or ``nic``), GPU functions with ``multifunction`` (their slot has more than one) and ``physical`` (the slot's
    lowest function, the one amdgpu drives: the others stand for CPX partitions)."""
    if layout not in LAYOUTS:
        raise ValueError("layout %r is not one of %s" % (layout, ", ".join(LAYOUTS)))
    slots = physical_gpus(gpus)
    with_nic = _nic_slots(nics, len(slots))
    far = set(_nic_slots(list(far_numa_nics), len(slots)))
    devices, out_nics = [], []
    gpu_buses = {}
    for slot, _unused in slots:
        dom, bus, _unused, _unused = parse_bdf(slot + ".0")
        if (dom, bus) in gpu_buses:
            raise ValueError("GPUs %s.x and %s.x share bus 0x%02x: one GPU slot per bus" % (gpu_buses[(dom, bus)], slot, bus))
        gpu_buses[(dom, bus)] = slot
    taken = set(gpu_buses)

    def claim(slot, dom, needed):
        """Reserve the buses a slot's bridges and NIC need (each bus belongs to one bridge or device)."""
        for bus in needed:
            if not 0 <= bus <= 0xFF or (dom, bus) in taken:
                raise ValueError("GPU %s.0: its bus leaves no room for its bridges and NIC (%s layout: bus %s %s)" % (
                    slot, layout, "0x%02x" % bus if bus >= 0 else bus,
                    "is taken" if 0 <= bus <= 0xFF else "is outside 0x00-0xff"))
        taken.update((dom, bus) for bus in needed)

    for idx, (slot, positions) in enumerate(slots):
        first = gpus[positions[0]]
        dom, bus, _unused, _unused = parse_bdf(first["bdf"])
        numa = first["numa"]
        nic_here = idx in with_nic and idx not in far
        nic_path = nic = None  # set below when the slot has its NIC
        if layout == "switch":
            claim(slot, dom, [bus - 3, bus - 2, bus - 1] + ([bus + 1] if nic_here else []))
            sub = bus + 1 if nic_here else bus
            root, up, down = fmt_bdf(dom, bus - 3, 1, 1), fmt_bdf(dom, bus - 2, 0, 0), fmt_bdf(dom, bus - 1, 0, 0)
            devices.append({"bdf": root, "path": [], "kind": "root_port", "numa": numa, "serves": "gpu",
                            "bus_range": (bus - 3, bus - 2, sub)})
            devices.append({"bdf": up, "path": [root], "kind": "switch_up", "numa": numa, "serves": "gpu",
                            "bus_range": (bus - 2, bus - 1, sub)})
            devices.append({"bdf": down, "path": [root, up], "kind": "switch_down", "numa": numa, "serves": "gpu",
                            "bus_range": (bus - 1, bus, bus)})
            gpu_path = [root, up, down]
            if nic_here:
                nic_down, nic = fmt_bdf(dom, bus - 1, 1, 0), fmt_bdf(dom, bus + 1, 0, 0)
                devices.append({"bdf": nic_down, "path": [root, up], "kind": "switch_down", "numa": numa,
                                "serves": "nic", "bus_range": (bus - 1, bus + 1, bus + 1)})
                nic_path = [root, up, nic_down]
        else:
            root_bus = bus - 2 if nic_here else bus - 1
            claim(slot, dom, [root_bus] + ([bus - 1] if nic_here else []))
            root = fmt_bdf(dom, root_bus, 7, 1)
            devices.append({"bdf": root, "path": [], "kind": "root_port", "numa": numa, "serves": "gpu",
                            "bus_range": (root_bus, bus, bus)})
            gpu_path = [root]
            if nic_here:
                nic_port, nic = fmt_bdf(dom, root_bus, 1, 1), fmt_bdf(dom, bus - 1, 0, 0)
                devices.append({"bdf": nic_port, "path": [], "kind": "root_port", "numa": numa, "serves": "nic",
                                "bus_range": (root_bus, bus - 1, bus - 1)})
                nic_path = [nic_port]
        lowest = min(gpus[pos]["bdf"] for pos in positions)
        for pos in positions:
            devices.append({"bdf": gpus[pos]["bdf"], "path": gpu_path, "kind": "gpu", "numa": gpus[pos]["numa"],
                            "multifunction": len(positions) > 1, "physical": gpus[pos]["bdf"] == lowest})
        if nic_here:
            devices.append({"bdf": nic, "path": nic_path, "kind": "nic", "numa": numa})
            out_nics.append({"index": idx, "bdf": nic, "numa": numa})
    for idx in sorted(far):
        # the farthest NUMA node's first GPU: another socket when there are two
        numa = gpus[slots[idx][1][0]]["numa"]
        target_numa = (numa + max(1, numa_count // 2)) % max(1, numa_count)
        host = next((gpus[p[0]] for _unused, p in slots if gpus[p[0]]["numa"] == target_numa), None)
        if host is None:
            raise ValueError("far-NUMA NIC %d: no GPU on NUMA node %d to place it beside" % (idx, target_numa))
        dom, bus, _unused, _unused = parse_bdf(host["bdf"])
        host_root = next(d for d in devices if d["bdf"] == host["bdf"])["path"][0]
        root_bus = parse_bdf(host_root)[1]
        root, nic = fmt_bdf(dom, root_bus, 1, 2), fmt_bdf(dom, bus + 2, 0, 0)
        if (dom, bus + 2) in taken:
            raise ValueError("far-NUMA NIC %d: bus 0x%02x is taken" % (idx, bus + 2))
        taken.add((dom, bus + 2))
        devices.append({"bdf": root, "path": [], "kind": "root_port", "numa": target_numa, "serves": "nic",
                        "bus_range": (root_bus, bus + 2, bus + 2)})
        devices.append({"bdf": nic, "path": [root], "kind": "nic", "numa": target_numa})
        out_nics.append({"index": idx, "bdf": nic, "numa": target_numa})
    out_nics.sort(key=lambda n: n["index"])
    return {"devices": devices, "nics": out_nics}


def bridge_above(layout_plan, gpu_bdf, which):
    """The BDF of bridge ``which`` (``root_port``, ``switch_up``, ``switch_down``) above GPU function ``gpu_bdf``;
    ValueError when the GPU is not in the plan or has no such bridge (a ``root_port`` layout has no switch)."""
    if which not in BRIDGES:
        raise ValueError("bridge %r is not one of %s" % (which, ", ".join(BRIDGES)))
    gpu = next((d for d in layout_plan["devices"] if d["bdf"] == gpu_bdf and d["kind"] == "gpu"), None)
    if gpu is None:
        raise ValueError("GPU %s is not in the PCIe tree" % gpu_bdf)
    kinds = {d["bdf"]: d["kind"] for d in layout_plan["devices"] if d["bdf"] in gpu["path"]}
    for bdf in gpu["path"]:
        if kinds[bdf] == which:
            return bdf
    raise ValueError("GPU %s has no %s above it (bridges: %s)" % (gpu_bdf, which, ", ".join(
        "%s %s" % (kinds[b], b) for b in gpu["path"])))


_IDS = ("vendor", "device", "class")


def _ids(spec, where):
    """``(vendor, device, class)`` of a profile's id mapping (hex strings such as ``"0x1022"``)."""
    if not isinstance(spec, dict):
        raise ValueError("%s must be a mapping of vendor, device and class, not %r" % (where, spec))
    out = []
    for key in _IDS:
        value = spec.get(key)
        try:
            int(str(value), 16)
        except ValueError:
            raise ValueError("%s.%s must be a hex id such as 0x1022, not %r" % (where, key, value)) from None
        out.append(str(value))
    return tuple(out)


def profile_plan(tree, rdma, gpus, faults, numa_count):
    """A profile's PCIe tree: ``plan`` of its ``pcie_tree`` (``layout``, default ``switch``) with the NICs of
    ``rdma`` (RDMA devices: ``nics`` = count or GPU indexes) or of ``pcie_tree.nics`` (NICs that are no RDMA device,
    e.g. HPE Slingshot: ``{vendor, device, class, gpus: [indexes], sysfs_class}``, ``sysfs_class`` the class their
    driver registers them in: ``cxi``), and the faults that act on it resolved to
    BDFs. Returns the plan plus ``ids`` (``(vendor, device, class)`` per ``root_port``, ``nic_port``, ``switch``,
    ``nic``), ``rdma`` (its NICs are RDMA devices), ``nic_class``, ``acs`` ``{bridge bdf: control}`` (``acs_enabled``), ``aer``
    ``{bdf: {kind: counts}}`` (``aer``), ``rebar`` (the GPUs' BAR 0, or None: no resizable BAR capability) and
    ``acs_default``/``aspm``. ValueError (one line) on anything that does not fit."""
    if not isinstance(tree, dict):
        raise ValueError("must be a mapping, not %r" % (tree,))
    layout = tree.get("layout", "switch")
    nic_spec = tree.get("nics")
    if rdma and nic_spec:
        raise ValueError("both rdma.nics and pcie_tree.nics place NICs: give one (pcie_tree.nics is for NICs that are "
                         "no RDMA device)")
    ids = {"root_port": _ids(tree.get("root_port"), "pcie_tree.root_port")}
    ids["nic_port"] = _ids(tree["nic_port"], "pcie_tree.nic_port") if "nic_port" in tree else ids["root_port"]
    if layout == "switch":
        ids["switch"] = _ids(tree.get("switch"), "pcie_tree.switch")
    if rdma:
        ids["nic"], nics = _ids(rdma, "rdma"), rdma.get("nics", 0)
    elif nic_spec:
        ids["nic"], nics = _ids(nic_spec, "pcie_tree.nics"), nic_spec.get("gpus")
    else:
        nics = 0
    nic_class = (nic_spec or {}).get("sysfs_class") if isinstance(nic_spec, dict) else None
    if nic_class is not None and not (isinstance(nic_class, str) and nic_class.isalpha() and nic_class.islower()):
        raise ValueError("pcie_tree.nics.sysfs_class must be a driver class name such as cxi, not %r" % (nic_class,))
    rebar = tree.get("gpu_rebar")
    if rebar is not None and not (isinstance(rebar, list) and len(rebar) == 2 and isinstance(rebar[1], list) and all(
            isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 28 for v in [rebar[0]] + rebar[1])
            and rebar[0] in rebar[1]):
        raise ValueError("gpu_rebar must be [current, [supported sizes]] as log2 MiB (0-27, current among the "
                         "supported), not %r" % (rebar,))
    aspm = tree.get("aspm", 0)
    if aspm not in (0, 1, 2, 3):
        raise ValueError("aspm must be the LnkCtl ASPM control 0-3, not %r" % (aspm,))
    try:
        acs_default = int(str(tree.get("acs", 0)), 0)
    except ValueError:
        raise ValueError("acs must be an ACS control value such as 0 or 0x001d, not %r" % (tree.get("acs"),)) from None
    out = plan(gpus, nics, faults.get("nic_far_numa") or (), numa_count, layout)

    def gpu_bdf(item, key):
        pos = item.get("gpu") if isinstance(item, dict) else None
        if not isinstance(pos, int) or isinstance(pos, bool) or not 0 <= pos < len(gpus):
            raise ValueError("faults.%s names GPU %r: not one of the %d GPUs (0-%d)" % (
                key, pos, len(gpus), len(gpus) - 1))
        return gpus[pos]["bdf"]

    acs = {}
    for item in faults.get("acs_enabled") or []:
        bridge = bridge_above(out, gpu_bdf(item, "acs_enabled"), item.get("bridge"))
        try:
            acs[bridge] = int(str(item.get("control")), 0)
        except ValueError:
            raise ValueError("faults.acs_enabled control must be a number such as 0x001d, not %r"
                             % (item.get("control"),)) from None
    aer = {}
    physical = {d["bdf"].rsplit(".", 1)[0]: d["bdf"] for d in out["devices"] if d.get("physical")}
    for item in faults.get("aer") or []:
        kind = item.get("kind") if isinstance(item, dict) else None
        if kind not in AER_NAMES:
            raise ValueError("faults.aer kind must be one of %s, not %r" % (", ".join(AER_NAMES), kind))
        # the counters of the GPU's PCI function (a CPX partition's are its GPU's)
        aer.setdefault(physical[gpu_bdf(item, "aer").rsplit(".", 1)[0]], {})[kind] = item.get("counts") or {}
    return dict(out, layout=layout, ids=ids, rdma=bool(rdma), nic_class=nic_class, acs=acs, aer=aer,
                acs_default=acs_default, aspm=aspm, rebar=tuple(rebar) if rebar is not None else None)


def sysfs_dir(dest, device):
    """Where a device's directory lives: ``sys/devices/pci<dom>:<root bus>/<path...>/<bdf>``."""
    first = (device["path"] or [device["bdf"]])[0]
    dom, bus, _unused, _unused = parse_bdf(first)
    return os.path.join(dest, "sys", "devices", "pci%04x:%02x" % (dom, bus), *(device["path"] + [device["bdf"]]))
