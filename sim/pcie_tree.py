"""The PCIe hierarchy of a simulated node: bridges above each GPU, RDMA NICs, and their config space bytes.

As on MI300X OAM platforms (tests/fixtures/smi/lspci-PP__mi300x-8gpu__system-acceptance-docs.txt and
lspci-PP__connectx7-8nic-same-mi300x-node__system-acceptance-docs.txt): each GPU sits below a CPU root port and a
PCIe switch (upstream port, downstream port), and each ConnectX-7 NIC below another downstream port of the same
switch. Linux shows the chain in sysfs: ``sys/bus/pci/devices/<bdf>`` is a symlink to
``sys/devices/pci<domain>:<root bus>/<root port>/<switch up>/<switch down>/<bdf>``.

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
                 aspm=0, ten_bit_tags=True, ari_forwarding=None, ari=False, rebar=None):
    """4096 bytes of config space.

    ``port_type`` 0 endpoint, 4 root port, 5 switch upstream, 6 switch downstream; ``bridge`` = (primary,
    secondary, subordinate) bus numbers for a type 1 header; ``acs`` = ACS control value (the ACS capability is
    present when not None); ``aspm`` = LnkCtl ASPM control (0 off, 2 L1); ``ari_forwarding`` = DevCtl2 ARI
    forwarding enable of a downstream/root port; ``ari`` adds the ARI capability (endpoint); ``rebar`` =
    (current size as log2 MiB, [supported sizes as log2 MiB]) for BAR 0."""
    buf = bytearray(CONFIG_SIZE)
    struct.pack_into("<HHHH", buf, 0, int(vendor, 16), int(device, 16), 0x0406, 0x0010)
    struct.pack_into("<I", buf, 0x08, int(class_code, 16) << 8)
    if bridge is not None:
        buf[0x0E] = 0x01
        buf[0x18], buf[0x19], buf[0x1A] = bridge
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


def plan(gpus, nics_per_gpu, far_numa_nics=(), numa_count=1):
    """Bridges and NICs for ``gpus`` (``[{"bdf", "numa"}]`` in GPU order).

    Each GPU at bus B gets root port ``(B-3):01.1``, switch upstream ``(B-2):00.0``, downstream ``(B-1):00.0``;
    a NIC paired with it sits at bus B+1 below downstream port ``(B-1):01.0`` (needs B >= 3 and the next GPU's bus
    > B+1). A NIC listed in ``far_numa_nics`` is placed instead below its own root port on the first GPU of the
    farthest NUMA node, at that GPU's bus + 2. Returns ``{"devices": [...], "nics": [...]}``; each device
    ``{"bdf", "path": [bdf of each ancestor, root first], "kind", "numa"}``."""
    devices, nics = [], []
    far = set(far_numa_nics)
    used_buses = {parse_bdf(g["bdf"])[1] for g in gpus}
    for idx, g in enumerate(gpus):
        dom, bus, _unused, _unused = parse_bdf(g["bdf"])
        if bus < 3 or {bus - 3, bus - 2, bus - 1, bus + 1} & (used_buses - {bus}):
            raise ValueError("GPU %s: bus 0x%02x leaves no room for its bridges and NIC" % (g["bdf"], bus))
        root = fmt_bdf(dom, bus - 3, 1, 1)
        up = fmt_bdf(dom, bus - 2, 0, 0)
        down = fmt_bdf(dom, bus - 1, 0, 0)
        nic_here = idx < nics_per_gpu and idx not in far
        sub = bus + 1 if nic_here else bus
        devices.append({"bdf": root, "path": [], "kind": "root_port", "numa": g["numa"], "bus_range": (bus - 3, bus - 2, sub)})
        devices.append({"bdf": up, "path": [root], "kind": "switch_up", "numa": g["numa"], "bus_range": (bus - 2, bus - 1, sub)})
        devices.append({"bdf": down, "path": [root, up], "kind": "switch_down", "numa": g["numa"], "bus_range": (bus - 1, bus, bus)})
        devices.append({"bdf": g["bdf"], "path": [root, up, down], "kind": "gpu", "numa": g["numa"]})
        if nic_here:
            nic_down = fmt_bdf(dom, bus - 1, 1, 0)
            nic = fmt_bdf(dom, bus + 1, 0, 0)
            devices.append({"bdf": nic_down, "path": [root, up], "kind": "switch_down", "numa": g["numa"],
                            "bus_range": (bus - 1, bus + 1, bus + 1)})
            devices.append({"bdf": nic, "path": [root, up, nic_down], "kind": "nic", "numa": g["numa"]})
            nics.append({"index": idx, "bdf": nic, "numa": g["numa"]})
    for idx in sorted(far):
        # the farthest NUMA node's first GPU: another socket when there are two
        g = gpus[idx]
        target_numa = (g["numa"] + max(1, numa_count // 2)) % max(1, numa_count)
        host = next(h for h in gpus if h["numa"] == target_numa)
        dom, bus, _unused, _unused = parse_bdf(host["bdf"])
        root = fmt_bdf(dom, bus - 3, 1, 2)
        nic = fmt_bdf(dom, bus + 2, 0, 0)
        if bus + 2 in used_buses or any(parse_bdf(d["bdf"])[1] == bus + 2 for d in devices):
            raise ValueError("far-NUMA NIC %d: bus 0x%02x is taken" % (idx, bus + 2))
        devices.append({"bdf": root, "path": [], "kind": "root_port", "numa": target_numa,
                        "bus_range": (bus - 3, bus + 2, bus + 2)})
        devices.append({"bdf": nic, "path": [root], "kind": "nic", "numa": target_numa})
        nics.append({"index": idx, "bdf": nic, "numa": target_numa})
    nics.sort(key=lambda n: n["index"])
    return {"devices": devices, "nics": nics}


def sysfs_dir(dest, device):
    """Where a device's directory lives: ``sys/devices/pci<dom>:<root bus>/<path...>/<bdf>``."""
    first = (device["path"] or [device["bdf"]])[0]
    dom, bus, _unused, _unused = parse_bdf(first)
    return os.path.join(dest, "sys", "devices", "pci%04x:%02x" % (dom, bus), *(device["path"] + [device["bdf"]]))
