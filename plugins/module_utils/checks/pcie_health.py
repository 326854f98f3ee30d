"""PCIe and RDMA health of an AMD Instinct node, read from sysfs and PCI config space (read-only).

Public API (standard library only, Python 3.8+):

``gather(sysroot)``
    The GPUs and RDMA NICs (``sys/class/infiniband/<dev>/device``), each with its PCI path (the bridges above it,
    from the ``sys/bus/pci/devices/<bdf>`` symlink into ``sys/devices``), NUMA node, config space bytes and AER
    counters; and the config space of every bridge on those paths. Missing files become ``None``, never an
    exception.
``run_checks(facts, knowledge, gen=None, options=None)``
    Pure: results ``{id, status, observed, expected, remediation, source, cvs}`` (the shape of
    ``platform_checks``) for ``pci_acs``, ``rdma_gpu_nic_affinity``, ``pcie_aspm``, ``pcie_10bit_tags``,
    ``pcie_ari_forwarding``, ``gpu_large_bar``, ``pcie_aer`` and ``pcie_replay``; ``knowledge`` is
    ``knowledge/pcie_health.yml``,
    ``gen`` the node's generation entry (where AMD requires a setting, its level), ``options`` the platform options
    (``virtualization_host``: ACS is expected on).
``acs_bridges(facts, want=0)``
    The bridges above the GPUs and RDMA NICs with their ACS Control, and those not at ``want``: what ``pci_acs`` names,
    and what role kernel_tuning's ACS fix clears (``kernel_tuning_acs_disable``).
``nic_affinity(facts)``
    Which NIC is closest to each GPU, and the ``NCCL_IB_HCA`` suggestion when the topology is clear.
``parse_aer(text)``
    An ``aer_dev_*`` file -> ``{name: count}`` (its ``TOTAL_ERR_*`` line under ``"total"``).

The RDMA ports and their GIDs, the launch options of the ``NCCL_IB_HCA`` suggestion (``read_rdma_ports``,
``roce_v2_gid_index``, ``launch_rdma_options``) and the RDMA NIC checks are ``rdma_health.py``'s.
"""

import os
import re

from ..core.sysroot import amd_gpu_functions, is_dir, join, list_dir, read_bytes, read_text, real_path
from .pci_config import EXT_CAP_ARI, ConfigSpace, human_bytes

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
AER_KINDS = ("correctable", "nonfatal", "fatal")
HEST_TABLE = "sys/firmware/acpi/tables/HEST"
# HPE Slingshot NICs (Cassini, 17db:0501 / 1590:0371): the cxi driver registers them in sys/class/cxi (cxi0..) for the
# libfabric CXI provider, not in sys/class/infiniband (HewlettPackard/shs-cxi-driver ARCHITECTURE.md)
FABRIC_NIC_CLASSES = {"cxi": "HPE Slingshot"}


# ------------------------------------------------------------------------------------------------ gather
def parse_aer(text):
    """``aer_dev_correctable`` text -> ``{name: count, "total": TOTAL_ERR_*}``; None when unreadable.

    Format (Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats): one ``<name> <count>`` per line, the
    last ``TOTAL_ERR_COR|TOTAL_ERR_NONFATAL|TOTAL_ERR_FATAL <count>``. Names may hold spaces (``Receiver Error``)."""
    if text is None:
        return None
    counts = {}
    for line in text.splitlines():
        name, _sep, value = line.strip().rpartition(" ")
        if not name or not value.isdigit():
            continue
        counts["total" if name.startswith("TOTAL_ERR_") else name.strip()] = int(value)
    if "total" not in counts:
        if not counts:
            return None
        counts["total"] = sum(counts.values())
    return counts


def _int_or_none(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def _pci_path(sysroot, bdf):
    """Bridges above ``bdf`` (root port first), from the ``sys/bus/pci/devices/<bdf>`` symlink; None if flat."""
    link = join(sysroot, os.path.join("sys/bus/pci/devices", bdf))
    real = real_path(link)
    if real == os.path.abspath(link):
        return None  # not a symlink into sys/devices: a flat capture, the hierarchy is unknown
    parts = real.split(os.sep)
    return [p for p in parts[:-1] if _BDF.match(p)]


def _device(sysroot, bdf, kind, name=None):
    dev = join(sysroot, os.path.join("sys/bus/pci/devices", bdf))
    aer = {}
    for aer_kind in AER_KINDS:
        aer[aer_kind] = parse_aer(read_text(os.path.join(dev, "aer_dev_" + aer_kind), None))
    device = {
        "bdf": bdf, "kind": kind, "name": name,
        "numa_node": _int_or_none(read_text(os.path.join(dev, "numa_node"), None)),
        "path": _pci_path(sysroot, bdf),
        "config": read_bytes(os.path.join(dev, "config"), default=None),
        "aer": aer,
    }
    if kind == "gpu":
        # amdgpu_vram_mgr.c: the VRAM the CPU can see through the BAR, and all of it; readable without root
        device["vram_bytes"] = _int_or_none(read_text(os.path.join(dev, "mem_info_vram_total"), None))
        device["vis_vram_bytes"] = _int_or_none(read_text(os.path.join(dev, "mem_info_vis_vram_total"), None))
        # amdgpu_device.c DOC pcie_replay_count: NAKs generated + received (not created on an SR-IOV VF)
        device["replay_count"] = _int_or_none(read_text(os.path.join(dev, "pcie_replay_count"), None))
    return device


def gather(sysroot="/"):
    """GPUs, RDMA NICs and the bridges above them, under ``sysroot`` (read-only)."""
    gpus = [_device(sysroot, bdf, "gpu") for bdf in amd_gpu_functions(sysroot)]
    nics = []
    ib = join(sysroot, "sys/class/infiniband")
    for name in list_dir(ib):
        real = real_path(os.path.join(ib, name, "device"))
        bdf = os.path.basename(real)
        if _BDF.match(bdf):
            nics.append(_device(sysroot, bdf, "nic", name))
    bridges = {}
    for item in gpus + nics:
        for bdf in item["path"] or []:
            if bdf not in bridges:
                bridges[bdf] = read_bytes(join(sysroot, os.path.join("sys/bus/pci/devices", bdf, "config")),
                                          default=None)
    # APEI's Hardware Error Source Table: the firmware may own PCIe error handling (firmware-first), see check_aer;
    # listed, not read (the table itself is root-only)
    hest = os.path.basename(HEST_TABLE) in list_dir(join(sysroot, os.path.dirname(HEST_TABLE)))
    # NICs whose driver is no RDMA verbs driver, by the class it registers them in (listed, not judged)
    fabric = {cls: list_dir(join(sysroot, os.path.join("sys/class", cls))) for cls in FABRIC_NIC_CLASSES}
    return {"gpus": gpus, "nics": nics, "bridges": bridges, "rdma_dir": is_dir(ib), "hest": hest,
            "fabric_nics": {cls: names for cls, names in fabric.items() if names}}


# ---------------------------------------------------------------------------------------------- helpers
def _result(check_id, status, observed, expected, remediation="", source="", cvs=None):
    return {"id": check_id, "status": status, "observed": observed, "expected": expected,
            "remediation": remediation if status != "pass" else "", "source": source, "cvs": cvs}


def _spec(knowledge, key):
    return (knowledge or {}).get(key) or {}


def _level(spec, gen, default="warn"):
    """The finding's level: ``required.level`` where AMD requires the setting for the node's generation, else
    ``level``."""
    required = spec.get("required") or {}
    if (gen or {}).get("name") in (required.get("generations") or []):
        return required.get("level", "fail")
    return spec.get("level", default)


def _source(spec, gen):
    required = spec.get("required") or {}
    if (gen or {}).get("name") in (required.get("generations") or []) and required.get("source"):
        return "%s; %s" % (spec.get("source", ""), required["source"])
    return spec.get("source", "")


def _physical(gpus):
    """One entry per physical GPU: CPX/DPX partitions appear as functions of one slot."""
    seen, out = set(), []
    for gpu in gpus:
        slot = gpu["bdf"].rsplit(".", 1)[0]
        if slot not in seen:
            seen.add(slot)
            out.append(gpu)
    return out


def _unreadable(spaces, what, extended=True):
    """``None`` when every config space decodes ``what``; else the first reason it cannot."""
    for bdf, space in spaces:
        if space is None:
            return "%s: config not readable" % bdf
        reason = ConfigSpace(space).reason(what, extended)
        if reason:
            return "%s: %s (run the check as root)" % (bdf, reason)
    return None


def _short(items, limit=4):
    items = list(items)
    return ", ".join(items[:limit]) + (" and %d more" % (len(items) - limit) if len(items) > limit else "")


# ----------------------------------------------------------------------------------------------- checks
def acs_bridges(facts, want=0):
    """The bridges ``pci_acs`` judges, the one selection of check ``pci_acs`` and of role kernel_tuning's ACS fix
    (``kernel_tuning_acs_disable``, ``state/kernel_runtime.py``): every bridge above a GPU (one function per physical GPU)
    or RDMA NIC, sorted, deduplicated. Returns ``{"bridges": [{"bdf", "control", "flags"}], "enabled": [...],
    "unknown": None}``: ``control`` the ACS Control register (``None`` without the ACS capability), ``flags`` the names
    of its set bits, ``enabled`` the bridges whose control is not ``want``. When the bridges cannot be told, ``unknown``
    is ``(kind, why)``, ``kind`` one of ``no_devices``, ``flat`` (no PCI hierarchy), ``unreadable`` (config space)."""
    found = {"bridges": [], "enabled": [], "unknown": None}
    devices = _physical(facts["gpus"]) + facts["nics"]
    if not devices:
        found["unknown"] = ("no_devices", "no GPU or RDMA NIC")
        return found
    if any(d["path"] is None for d in devices):
        found["unknown"] = ("flat", "sys/bus/pci/devices/<bdf> is not a link into sys/devices: the bridges above the "
                                    "devices are unknown")
        return found
    bridges = sorted({b for d in devices for b in d["path"]})
    why = _unreadable([(b, facts["bridges"].get(b)) for b in bridges], "the ACS capability")
    if why:
        found["unknown"] = ("unreadable", why)
        return found
    for bdf in bridges:
        space = ConfigSpace(facts["bridges"][bdf])
        ctl = space.acs_control
        bridge = {"bdf": bdf, "control": ctl, "flags": space.acs_enabled_flags}
        found["bridges"].append(bridge)
        if ctl is not None and ctl != want:
            found["enabled"].append(bridge)
    return found


_ACS_UNKNOWN_FIX = {"no_devices": "nothing to check", "flat": "run on the node itself",
                    "unreadable": "run the checks with become (root) to read the extended config space"}


def check_acs(facts, knowledge, options=None):
    spec = _spec(knowledge, "acs")
    source, cvs = spec.get("source", ""), "test_check_pci_acs"
    virt = bool((options or {}).get("virtualization_host"))
    want = int(spec.get("expected_control", 0))
    if virt:
        source = (spec.get("virtualization_host") or {}).get("source") or source
        expected = "ACS enabled on the bridges above the GPUs and RDMA NICs (virtualization host: AMD's BIOS table sets " \
                   "ACS Enabled)"
    else:
        expected = "ACS control 0x%04x (every bit clear) on every bridge above the GPUs and RDMA NICs" % want
    found = acs_bridges(facts, want)
    if found["unknown"]:
        kind, why = found["unknown"] or (None, None)
        return _result("pci_acs", "unknown", why, expected, _ACS_UNKNOWN_FIX[kind], source, cvs)
    enabled = ["%s ACSCtl %s (0x%04x)" % (b["bdf"], " ".join(f + "+" for f in b["flags"]), b["control"])
               for b in found["enabled"]]
    with_acs = sum(1 for b in found["bridges"] if b["control"] is not None)
    without = len(found["bridges"]) - with_acs
    if virt:
        if enabled:
            return _result("pci_acs", "pass", "ACS on at %d of %d bridge(s) with the capability: %s" % (
                len(enabled), with_acs, _short(enabled, 3)), expected, source=source, cvs=cvs)
        return _result("pci_acs", (spec.get("virtualization_host") or {}).get("level", "warn"),
                       "ACS off on %d bridge(s) (%d without the capability)" % (with_acs, without),
                       expected, "a virtualization host isolates its VFs behind ACS: set BIOS AMD CBS > NBIO common "
                       "options > ACS = Enabled (AMD's virtualization table), or set platform_checks_virtualization_host"
                       ": false if the node runs bare metal", source, cvs)
    if enabled:
        fix = (spec.get("fix") or {}).get("role_variable", "kernel_tuning_acs_disable")
        return _result("pci_acs", spec.get("level", "fail"), "; ".join(enabled), expected,
                       "disable ACS on these bridges, now and at every boot: %s: true (role kernel_tuning: a boot-time "
                       "unit clearing exactly them), or BIOS ACS = Disabled (AMD's bare-metal table); setpci -s <bdf> "
                       "ECAP_ACS+0x6.w=0000 lasts until the next boot; a virtualization host keeps ACS on "
                       "(platform_checks_virtualization_host: true)" % fix, source, cvs)
    return _result("pci_acs", "pass", "ACS off on %d bridge(s) (%d without the capability)"
                   % (with_acs, without), expected, source=source, cvs=cvs)


def _closeness(gpu, nic):
    """``switch`` (a common bridge below the root port), ``root_port``, ``numa`` or ``far``."""
    common = 0
    for a, b in zip(gpu["path"] or [], nic["path"] or []):
        if a != b:
            break
        common += 1
    if common >= 2:
        return "switch"
    if common == 1:
        return "root_port"
    if gpu["numa_node"] is not None and gpu["numa_node"] >= 0 and gpu["numa_node"] == nic["numa_node"]:
        return "numa"
    return "far"


_RANK = {"switch": 0, "root_port": 1, "numa": 2, "far": 3}


def nic_affinity(facts):
    """``{"pairs": [{gpu, nic, level}], "nccl_ib_hca": "=mlx5_0,..." or None, "reason": why not, "problems": []}``.

    Each physical GPU is paired with its closest NIC: first the NICs below the GPU's own PCIe switch or root port
    (one per GPU: the rail-optimized layout), then unpaired NICs on the GPU's NUMA node. The NCCL_IB_HCA
    suggestion (NICs in GPU order) is made only when every GPU has exactly one NIC of its own below its switch or
    root port."""
    gpus, nics = _physical(facts["gpus"]), sorted(facts["nics"], key=lambda n: n["name"] or "")
    pairs, taken, problems = {}, set(), []
    unclear = []
    for gpu in gpus:
        near = [n for n in nics if _closeness(gpu, n) in ("switch", "root_port")]
        if len(near) == 1 and near[0]["bdf"] not in taken:
            pairs[gpu["bdf"]] = (near[0], _closeness(gpu, near[0]))
            taken.add(near[0]["bdf"])
        elif len(near) > 1:
            names = ", ".join(n["name"] for n in near)
            unclear.append("%s has %d NICs below its switch (%s)" % (gpu["bdf"], len(near), names))
    for gpu in gpus:
        if gpu["bdf"] in pairs:
            continue
        free = [n for n in nics if n["bdf"] not in taken]
        best = sorted(free, key=lambda n: (_RANK[_closeness(gpu, n)], n["name"] or ""))
        if best and _closeness(gpu, best[0]) != "far":
            pairs[gpu["bdf"]] = (best[0], _closeness(gpu, best[0]))
            taken.add(best[0]["bdf"])
        else:
            pairs[gpu["bdf"]] = (best[0] if best else None, "far")
            if best:
                taken.add(best[0]["bdf"])
            problems.append("GPU %s (NUMA %s) has no NIC of its own on NUMA node %s%s" % (
                gpu["bdf"], gpu["numa_node"], gpu["numa_node"],
                "; nearest free NIC %s on NUMA %s" % (best[0]["name"], best[0]["numa_node"]) if best else ""))
    gpu_numas = {g["numa_node"] for g in gpus}
    for nic in nics:
        if nic["numa_node"] is not None and nic["numa_node"] >= 0 and nic["numa_node"] not in gpu_numas:
            problems.append("NIC %s (%s) sits on NUMA node %s, which has no GPU"
                            % (nic["name"], nic["bdf"], nic["numa_node"]))
    out = [{"gpu": g["bdf"], "nic": (pairs[g["bdf"]][0] or {}).get("name"), "nic_bdf": (pairs[g["bdf"]][0] or {}).get("bdf"),
            "level": pairs[g["bdf"]][1]} for g in gpus]
    reason = None
    if not nics:
        reason = "no RDMA device under sys/class/infiniband"
    elif any(g["path"] is None for g in gpus) or any(n["path"] is None for n in nics):
        reason = "the PCI hierarchy is unknown (sys/bus/pci/devices entries are not links into sys/devices)"
    elif unclear:
        reason = "; ".join(unclear)
    else:
        far = [p["gpu"] for p in out if p["level"] not in ("switch", "root_port")]
        if far:
            reason = "GPU(s) %s have no NIC below their own PCIe switch or root port" % _short(far)
    names = []
    for pair in out:
        if pair["nic"] and pair["nic"] not in names:
            names.append(pair["nic"])
    # "=": exact names (RCCL matches each entry as a prefix otherwise: mlx5_1 would also select mlx5_10..mlx5_19)
    return {"pairs": out, "nccl_ib_hca": None if reason else "=" + ",".join(names), "reason": reason,
            "problems": problems}


def check_affinity(facts, knowledge):
    spec = _spec(knowledge, "rdma_affinity")
    source = spec.get("source", "")
    expected = "every GPU with a NIC below its own PCIe switch, else on its NUMA node; no NIC on a GPU-less NUMA node"
    if not facts["nics"]:
        observed = "no RDMA device (sys/class/infiniband %s)" % ("empty" if facts.get("rdma_dir") else "missing")
        fabric = facts.get("fabric_nics") or {}
        if fabric:
            # a fabric RCCL reaches through libfabric (the aws-ofi-rccl plugin), not through NCCL_IB_HCA
            observed += "; %s" % "; ".join("%s NIC(s) %s (sys/class/%s)" % (
                FABRIC_NIC_CLASSES.get(cls, cls), _short(sorted(names)), cls) for cls, names in sorted(fabric.items()))
            return _result("rdma_gpu_nic_affinity", "unknown", observed, expected, spec.get(
                "fabric_note", "these NICs are no RDMA verbs device: RCCL reaches them through libfabric (the "
                "aws-ofi-rccl plugin), which this check does not pair with the GPUs"), "%s; %s" % (
                source, spec["fabric_source"]) if spec.get("fabric_source") else source)
        return _result("rdma_gpu_nic_affinity", "unknown", observed, expected,
                       "nothing to pair: a node without RDMA NICs runs single-node jobs only", source)
    if not facts["gpus"]:
        return _result("rdma_gpu_nic_affinity", "unknown", "no GPU", expected, "nothing to pair", source)
    if any(n["numa_node"] is None or n["numa_node"] < 0 for n in facts["nics"] + facts["gpus"]):
        return _result("rdma_gpu_nic_affinity", "unknown", "numa_node missing or -1 on a GPU or NIC", expected,
                       "firmware gives no NUMA proximity (ACPI _PXM/SRAT) or a VM: pair GPUs and NICs by hand",
                       source)
    aff = nic_affinity(facts)
    levels = {}
    for pair in aff["pairs"]:
        levels[pair["level"]] = levels.get(pair["level"], 0) + 1
    observed = "%d GPU(s), %d NIC(s); closest NIC: %s" % (
        len(aff["pairs"]), len(facts["nics"]), ", ".join("%d %s" % (levels[k], k) for k in sorted(levels, key=_RANK.get)))
    observed += "; NCCL_IB_HCA=%s" % aff["nccl_ib_hca"] if aff["nccl_ib_hca"] else "; no NCCL_IB_HCA suggestion: %s" % aff["reason"]
    if aff["problems"]:
        return _result("rdma_gpu_nic_affinity", spec.get("level", "warn"), observed + "; " + "; ".join(aff["problems"]),
                       expected, "move the NIC to a slot on the GPUs' PCIe switch or NUMA node (the platform's "
                       "GPU-NIC pairing table), or pin each rank's NIC by hand (NCCL_IB_HCA per rank)", source)
    return _result("rdma_gpu_nic_affinity", "pass", observed, expected, source=source)


def _link_pairs(facts):
    """(device, its upstream port) for every physical GPU and NIC whose parent is known."""
    out = []
    for dev in _physical(facts["gpus"]) + facts["nics"]:
        if dev["path"]:
            out.append((dev, dev["path"][-1]))
    return out


def check_aspm(facts, knowledge):
    spec = _spec(knowledge, "aspm")
    source, want = spec.get("source", ""), spec.get("expected", "disabled")
    expected = "ASPM %s on the GPU and NIC links (both ends)" % want
    ends = []
    for dev, parent in _link_pairs(facts):
        ends += [(dev["bdf"], dev["config"]), (parent, facts["bridges"].get(parent))]
    if not ends:
        return _result("pcie_aspm", "unknown", "no GPU or NIC below a known port", expected, "run on the node itself",
                       source)
    why = _unreadable(ends, "the PCI Express capability", extended=False)
    if why:
        return _result("pcie_aspm", "unknown", why, expected, "run the checks with become (root)", source)
    bad = []
    for bdf, space in ends:
        state = ConfigSpace(space).aspm_enabled
        if state is None:
            return _result("pcie_aspm", "unknown", "%s: no PCI Express capability in the readable bytes" % bdf,
                           expected, "run the checks with become (root)", source)
        if state != want:
            bad.append("%s %s" % (bdf, state))
    if bad:
        return _result("pcie_aspm", spec.get("level", "warn"), "ASPM on: " + _short(sorted(set(bad)), 6), expected,
                       "set BIOS PCIe ASPM = Disabled, or boot with pcie_aspm=off (kernel_tuning_cmdline)", source)
    return _result("pcie_aspm", "pass", "ASPM %s on %d link end(s)" % (want, len(ends)), expected, source=source)


def check_ten_bit_tags(facts, knowledge, gen=None):
    spec = _spec(knowledge, "ten_bit_tags")
    source = _source(spec, gen)
    expected = "10-bit tag requester enabled on every GPU whose path supports 10-bit tag completion"
    gpus = _physical(facts["gpus"])
    if not gpus:
        return _result("pcie_10bit_tags", "unknown", "no GPU", expected, "nothing to check", source)
    spaces = [(g["bdf"], g["config"]) for g in gpus]
    spaces += [(b, facts["bridges"].get(b)) for g in gpus for b in g["path"] or []]
    why = _unreadable(spaces, "DevCap2/DevCtl2", extended=False)
    if why:
        return _result("pcie_10bit_tags", "unknown", why, expected, "run the checks with become (root)", source)
    off, unsupported = [], []
    for gpu in gpus:
        space = ConfigSpace(gpu["config"])
        if space.ten_bit_tag_requester_supported is None:
            return _result("pcie_10bit_tags", "unknown", "%s: DevCap2 beyond the readable bytes" % gpu["bdf"], expected,
                           "run the checks with become (root)", source)
        completers = [ConfigSpace(facts["bridges"].get(b) or b"").ten_bit_tag_completer_supported
                      for b in gpu["path"] or []]
        if not space.ten_bit_tag_requester_supported or False in completers:
            unsupported.append(gpu["bdf"])
        elif not space.ten_bit_tag_requester_enabled:
            off.append(gpu["bdf"])
    if off:
        return _result("pcie_10bit_tags", _level(spec, gen), "10-bit tag requester off on " + _short(off),
                       expected, "set BIOS AMD CBS > NBIO common options > PCIe ten bit tag support = Enabled (AMD's "
                       "required MI3xx setting; Auto on MI200) and reboot", source)
    if len(unsupported) == len(gpus):
        return _result("pcie_10bit_tags", "unknown", "no GPU path supports 10-bit tags", expected,
                       "check the platform's PCIe switch and root port capabilities", source)
    return _result("pcie_10bit_tags", "pass", "enabled on %d GPU(s)%s" % (
        len(gpus) - len(unsupported), "; not supported on the path of " + _short(unsupported) if unsupported else ""),
        expected, source=source)


def check_ari(facts, knowledge, gen=None):
    spec = _spec(knowledge, "ari")
    source = _source(spec, gen)
    expected = "ARI forwarding enabled on the port above every device with the ARI capability"
    pairs = _link_pairs(facts)
    spaces = [(d["bdf"], d["config"]) for d, _unused in pairs] + [(p, facts["bridges"].get(p)) for _unused, p in pairs]
    if not pairs:
        return _result("pcie_ari_forwarding", "unknown", "no GPU or NIC below a known port", expected,
                       "run on the node itself", source)
    why = _unreadable(spaces, "the ARI capability")
    if why:
        return _result("pcie_ari_forwarding", "unknown", why, expected, "run the checks with become (root)", source)
    bad, ari = [], 0
    for dev, parent in pairs:
        if EXT_CAP_ARI not in ConfigSpace(dev["config"]).ext_capabilities():
            continue
        ari += 1
        port = ConfigSpace(facts["bridges"][parent])
        if port.ari_forwarding_supported and not port.ari_forwarding_enabled:
            bad.append("%s above %s" % (parent, dev["bdf"]))
    if bad:
        return _result("pcie_ari_forwarding", _level(spec, gen), "ARI forwarding off on " + _short(bad), expected,
                       "set BIOS AMD CBS > NBIO common options > PCIE ARI Enumeration and PCIE ARI Support = Enabled "
                       "(AMD: required on MI3xx); Linux enables ARI forwarding when it enumerates an ARI device: check "
                       "dmesg for PCI errors, and that pci=noari is not on the kernel command line", source)
    return _result("pcie_ari_forwarding", "pass", "%d ARI device(s), forwarding on above each" % ari, expected,
                   source=source)


def _visible_vram(gpus):
    """Large BAR judged without config space: amdgpu's mem_info_vis_vram_total equals mem_info_vram_total when the
    BAR shows the whole VRAM. ``(small, sizes)``, or None when a GPU lacks either file."""
    small, sizes = [], set()
    for gpu in gpus:
        vram, vis = gpu.get("vram_bytes"), gpu.get("vis_vram_bytes")
        if not vram or vis is None:
            return None
        sizes.add(human_bytes(vis))
        if vis < vram:
            small.append("%s visible VRAM %s of %s" % (gpu["bdf"], human_bytes(vis), human_bytes(vram)))
    return small, sizes


def check_large_bar(facts, knowledge):
    spec = _spec(knowledge, "large_bar")
    source = spec.get("source", "")
    expected = "each GPU's resizable BAR at the largest size it supports (the whole VRAM visible)"
    gpus = _physical(facts["gpus"])
    if not gpus:
        return _result("gpu_large_bar", "unknown", "no GPU", expected, "nothing to check", source)
    fix = ("enable BIOS Above 4G Decoding and Re-Size BAR Support (AMD: large BAR for P2P), and keep "
           "pci=realloc=off; then reboot")
    why = _unreadable([(g["bdf"], g["config"]) for g in gpus], "the resizable BAR capability")
    if why:
        # unprivileged (the node-local exporter): amdgpu's visible VRAM says it without config space
        visible = _visible_vram(gpus)
        if visible is None:
            return _result("gpu_large_bar", "unknown", why + "; no mem_info_vis_vram_total to judge by", expected,
                           "run the checks with become (root)", source)
        small, sizes = visible
        if small:
            return _result("gpu_large_bar", spec.get("level", "warn"), _short(small), expected, fix, source)
        return _result("gpu_large_bar", "pass", "whole VRAM visible (%s, mem_info_vis_vram_total = "
                       "mem_info_vram_total) on %d GPU(s)" % ("/".join(sorted(sizes)), len(gpus)), expected,
                       source=source)
    small, sizes = [], set()
    for gpu in gpus:
        bars = ConfigSpace(gpu["config"]).resizable_bars()
        if not bars:
            continue
        first = bars[0]
        sizes.add(human_bytes(first["current_bytes"]))
        top = max(first["supported_bytes"] or [first["current_bytes"]])
        if first["current_bytes"] < top:
            small.append("%s BAR %d %s of %s"
                         % (gpu["bdf"], first["bar"], human_bytes(first["current_bytes"]), human_bytes(top)))
    if not sizes:
        visible = _visible_vram(gpus)
        if visible is not None:
            small, vis_sizes = visible
            if small:
                return _result("gpu_large_bar", spec.get("level", "warn"), _short(small), expected, fix, source)
            return _result("gpu_large_bar", "pass", "no resizable BAR capability; whole VRAM visible (%s) on %d GPU(s)"
                           % ("/".join(sorted(vis_sizes)), len(gpus)), expected, source=source)
        return _result("gpu_large_bar", "unknown", "no resizable BAR capability on the GPUs", expected,
                       "check 'Above 4G decoding' and 'Re-Size BAR support' in BIOS by hand", source)
    if small:
        return _result("gpu_large_bar", spec.get("level", "warn"), _short(small), expected, fix, source)
    return _result("gpu_large_bar", "pass", "BAR at %s on %d GPU(s)" % ("/".join(sorted(sizes)), len(gpus)), expected,
                   source=source)


def _firmware_first(facts, spec):
    """The note ``pcie_aer`` adds when the platform has an APEI HEST table, else ''."""
    if not facts.get("hest"):
        return ""
    return spec.get("firmware_first_note") or (
        "ACPI HEST present: the firmware may handle PCIe errors first (firmware-first), and then these counters "
        "stay 0 whatever happens")


def check_aer(facts, knowledge):
    spec = _spec(knowledge, "aer")
    source = spec.get("source", "")
    limits = {"fatal": int(spec.get("fatal_max", 0)), "nonfatal": int(spec.get("nonfatal_max", 0)),
              "correctable": int(spec.get("correctable_max", 0))}
    expected = "fatal <= %(fatal)d, non-fatal <= %(nonfatal)d, correctable <= %(correctable)d per device" % limits
    note = _firmware_first(facts, spec)
    if note and spec.get("firmware_first_source"):
        source = "%s; %s" % (source, spec["firmware_first_source"])
    devices = facts["gpus"] + facts["nics"]
    if not devices:
        return _result("pcie_aer", "unknown", "no GPU or RDMA NIC", expected, "nothing to check", source)
    counted = [d for d in devices if any(d["aer"][k] is not None for k in AER_KINDS)]
    if not counted:
        return _result("pcie_aer", "unknown", "no aer_dev_* counters (kernel < 4.19, AER not native, or firmware-first "
                       "error handling)" + ("; " + note if note else ""), expected,
                       "read the BMC's PCIe error log instead", source)
    over = {k: [] for k in AER_KINDS}
    for dev in counted:
        for kind in AER_KINDS:
            counts = dev["aer"][kind]
            if counts is not None and counts["total"] > limits[kind]:
                named = [n for n, v in sorted(counts.items()) if v and n != "total"]
                label = dev["bdf"] + (" " + dev["name"] if dev.get("name") else "")
                over[kind].append("%s %s %d (%s)" % (label, kind, counts["total"], ", ".join(named) or "total"))
    if over["fatal"] or over["nonfatal"]:
        return _result("pcie_aer", spec.get("uncorrectable_level", "fail"), "; ".join(over["fatal"] + over["nonfatal"]),
                       expected, "uncorrectable PCIe errors since boot: reseat or replace the device/riser/retimer on "
                       "this link, check dmesg for 'AER:' lines, then reboot to clear the counters", source)
    if over["correctable"]:
        return _result("pcie_aer", spec.get("correctable_level", "warn"), "; ".join(over["correctable"]), expected,
                       "correctable errors above the threshold point to a marginal link (signal integrity): watch "
                       "the rate, reseat the device or riser at the next maintenance", source)
    observed = "%d device(s) within the limits" % len(counted)
    if note:
        # the counters are all there is to judge by; what they cannot see is said, not judged
        observed += "; " + note + ": read the BMC's PCIe error log too"
    return _result("pcie_aer", "pass", observed, expected, source=source)


def check_replay(facts, knowledge):
    """amdgpu's ``pcie_replay_count`` of every physical GPU against ``replay``'s warn and fail levels."""
    spec = _spec(knowledge, "replay")
    source = spec.get("source", "")
    warn_above, fail_above = int(spec.get("warn_above", 0)), int(spec.get("fail_above", 1000))
    expected = "pcie_replay_count <= %d per GPU (warn above %d, fail above %d)" % (warn_above, warn_above, fail_above)
    gpus = _physical(facts["gpus"])
    if not gpus:
        return _result("pcie_replay", "unknown", "no AMD GPU", expected, "nothing to check", source)
    missing = [g["bdf"] for g in gpus if g.get("replay_count") is None]
    if len(missing) == len(gpus):
        return _result("pcie_replay", "unknown", "no pcie_replay_count on any GPU (amdgpu not loaded, an SR-IOV VF: "
                       "amdgpu does not create it there, or an older driver)", expected,
                       "load amdgpu on the host (the physical function), or read the replay counters with "
                       "'amd-smi metric --pcie'", source)
    failing = [g for g in gpus if g.get("replay_count") is not None and g["replay_count"] > fail_above]
    warning = [g for g in gpus if g.get("replay_count") is not None and warn_above < g["replay_count"] <= fail_above]
    named = ["%s %d replay(s)" % (g["bdf"], g["replay_count"]) for g in failing + warning]
    if missing:
        named.append("no pcie_replay_count on " + _short(missing))
    fix = ("PCIe replays are link-level retransmissions (the link layer re-sends a TLP after a NAK or timeout): "
           "a marginal link (signal integrity: riser, retimer, cable, seating). Check the link speed and width "
           "(gpu_pcie_speed_width) and pcie_aer, reseat the GPU or riser at the next maintenance; the count "
           "restarts at the next reboot or GPU reset")
    if failing:
        return _result("pcie_replay", spec.get("fail_level", "fail"), "; ".join(named), expected, fix, source)
    if warning:
        return _result("pcie_replay", spec.get("warn_level", "warn"), "; ".join(named), expected, fix, source)
    if missing:
        return _result("pcie_replay", "unknown", "; ".join(named), expected,
                       "check that amdgpu runs on every GPU (an SR-IOV VF has no pcie_replay_count)", source)
    return _result("pcie_replay", "pass", "%s on %d GPU(s)" % (
        "no replays" if not any(g["replay_count"] for g in gpus) else "at most %d replay(s)" % max(
            g["replay_count"] for g in gpus), len(gpus)), expected, source=source)


# Settings of the physical host's PCIe fabric: an SR-IOV guest sees a virtual one (platform_checks._as_guest)
HOST_ONLY = ("pci_acs", "pcie_aspm", "pcie_10bit_tags", "pcie_ari_forwarding", "gpu_large_bar")
CHECKS = (check_acs, check_affinity, check_aspm, check_ten_bit_tags, check_ari, check_large_bar, check_aer,
          check_replay)
CHECK_IDS = ("pci_acs", "rdma_gpu_nic_affinity", "pcie_aspm", "pcie_10bit_tags", "pcie_ari_forwarding",
             "gpu_large_bar", "pcie_aer", "pcie_replay")


def run_checks(facts, knowledge, gen=None, options=None):
    """Results of every PCIe/RDMA check; ``facts`` from ``gather``, ``knowledge`` = knowledge/pcie_health.yml, ``gen``
    the generation entry, ``options`` the platform options (``virtualization_host``)."""
    if not facts:
        return []
    return [check_acs(facts, knowledge, options), check_affinity(facts, knowledge), check_aspm(facts, knowledge),
            check_ten_bit_tags(facts, knowledge, gen), check_ari(facts, knowledge, gen),
            check_large_bar(facts, knowledge), check_aer(facts, knowledge), check_replay(facts, knowledge)]
