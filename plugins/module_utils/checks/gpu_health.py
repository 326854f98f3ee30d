"""GPU health checks of an AMD Instinct node: partition modes, ECC/RAS counters and retired pages, amdgpu errors in
the boot's kernel log, firmware consistency between the GPUs, services that re-apply a CPU governor or sysctl, and an
idle GPU's utilization and temperatures.

Public API (standard library only, Python 3.8+; hooked into ``platform_checks.gather`` / ``run_checks``):

``gather(sysroot="/", unit_root="/", runner=process.run)``
    Read-only facts: per physical GPU (the lowest PCI function of a slot: CPX partitions share one device, amdkfd
    only ORs the partition into the KFD ``location_id``) its partition modes, the compute partitions the device shows
    (its KFD nodes), VBIOS, ``fw_version/*_fw_version``, ``ras/*_err_count`` and ``ras/gpu_vram_bad_pages``,
    ``mem_info_vram_total``, the driver's own bad-page threshold (debugfs ``dri/<card>/ras/bad_page_cnt_threshold``,
    root only); amdgpu's ``bad_page_threshold`` parameter and which amdgpu runs (``sys/module/amdgpu/version``:
    AMD's DKMS build); ROCm (``opt/rocm/.info/version``) and kernel (``proc/sys/kernel/osrelease``) versions; the
    kernel log of the current boot; tuned's active profile and the enablement of the units that set a governor (unit
    files under ``unit_root``: ``/etc`` and systemd units live at their real paths, not under the sysroot); the
    direct xGMI links between the physical GPUs (``xgmi``, from the KFD reader's model: ``xgmi_facts``); per GPU
    amdgpu's ``gpu_busy_percent``, ``mem_busy_percent`` and its hwmon temperatures (``hwmon/hwmon*/temp*_input``,
    ``temp*_label``), the render node minors of each GPU (``sys/class/drm/renderD*``) and the processes holding
    ``/dev/kfd`` or a render node (``gpu_users``: ``gpu_users(sysroot)``).
    Unreadable or malformed files become ``None`` (the check reports ``unknown``), never an exception.
``gpu_users(sysroot)``
    The processes with an open file on ``/dev/kfd`` or ``/dev/dri/*``, read from the ``proc/<pid>/fd`` links under
    ``sysroot`` (root reads every process's): ``{"error", "processes", "unreadable", "users": [{pid, comm,
    devices}]}``; ``error`` says why no process table was seen. Only the links to those device nodes are read through
    the sysroot helpers, so a node snapshot keeps them and not every open file of the node.
``kernel_log_findings(text, spec)``
    ``(found, benign)``: the lines of ``text`` the curated patterns, then the generic driver-error filter of ``spec``
    (``knowledge/gpu_health.yml`` ``kernel_log``) match, ``{id: (level, [lines])}``, and ``{id: count}`` of the lines the
    generic filter would catch that the known-benign list leaves out.
``kernel_log(sysroot="/", runner=process.run)``
    ``(text, origin)``: on a real node (sysroot ``/``) ``journalctl -k -b``, else ``/dev/kmsg``, else ``dmesg``;
    under another sysroot the file ``KERNEL_LOG_FILE`` that stands for the boot's kernel log (a simulated node, a
    snapshot). ``(None, why)`` when none can be read.
``parse_err_count(text)`` / ``parse_bad_pages(text)``
    amdgpu's ``ue: N`` / ``ce: N`` (/ ``de: N``) counter text -> ``{"ue", "ce", "de"}``; ``gpu_vram_bad_pages``
    lines -> flag counts.
``xgmi_facts(model)``
    From a topology model (``topology/kfd.py`` ``read_kfd(...).to_dict()``): the physical GPUs (``index``, ``bdf``,
    ``hive_id``, ``partitions``) and the pairs of them joined by a direct xGMI link (KFD io_link type 11, any of
    their partitions, either direction) -> ``{"error": None, "gpus", "pairs", "warnings"}``.
``driver_kind(driver)``
    ``"amd"`` (AMD's amdgpu, DKMS: a module version), ``"upstream"`` (the in-tree module: loaded, no version) or
    ``None`` (not told apart: no ``sys/module/amdgpu``).
``retired_page_threshold(gpu, health, spec, gen_name)``
    The bad-page threshold the running driver applies to ``gpu``: ``{"limit", "how", "mode", "amd_limit"}``.
``run_checks(health, knowledge, gen=None, facts=None, options=None)``
    Pure: the results (same shape as ``platform_checks``) from gathered ``health`` and ``knowledge/gpu_health.yml``;
    ``gen`` is the detected generation entry, ``facts`` the platform facts (host NPS, THP), ``options`` the platform
    options (expected governor). ``[]`` when either ``health`` or ``knowledge`` is missing.
``inventory(health, facts=None)``
    What the cross-node comparison needs from this node: per-GPU firmware, VBIOS, partition modes; ROCm, kernel and
    BIOS versions.
"""

import itertools
import os
import re

from ..core.process import CommandError, run
from ..core.sysroot import amd_gpu_functions, is_dir, join, list_dir, read_properties, read_text, real_path
from ..state.managed_state import unit_file_state
from ..topology.kfd import read_kfd
from ..topology.model import TopologyError

# Under a sysroot other than "/" (a simulated node, a node snapshot) the kernel log of the boot the tree stands for:
# the text `journalctl -k -b` prints (sim/sysroot.py writes it from the profile's kernel_log lines).
KERNEL_LOG_FILE = "var/log/topotune/kernel-boot.log"
ROCM_VERSION_FILE = "opt/rocm/.info/version"
TUNED_PROFILE_FILE = "/etc/tuned/active_profile"
_COUNT = re.compile(r"^\s*(ue|ce|de)\s*:\s*(\d+)\s*$")
_KFD_NODES = "sys/class/kfd/kfd/topology/nodes"
_AMDGPU_MODULE = "sys/module/amdgpu"
_BAD_PAGE = re.compile(r"^\s*0x[0-9a-fA-F]+\s*:\s*0x[0-9a-fA-F]+\s*:\s*([RPF])\s*$")


# ------------------------------------------------------------------------------------------------ gather
def parse_err_count(text):
    """``"ue: 0\\nce: 3"`` -> ``{"ue": 0, "ce": 3, "de": 0}``; the UMC block and the ACA path of MI300/MI350 add
    ``"de: N"`` (deferred errors), kept as read. None when ``ue`` or ``ce`` is missing (e.g. "Query currently
    inaccessible" while the driver recovers)."""
    found = {}
    for line in (text or "").splitlines():
        match = _COUNT.match(line)
        if match:
            found[match.group(1)] = int(match.group(2))
    if not {"ue", "ce"} <= set(found):
        return None
    found.setdefault("de", 0)
    return found


def parse_bad_pages(text):
    """``gpu_vram_bad_pages`` (``0x00000001 : 0x00001000 : R`` per page) -> ``{"R": n, "P": n, "F": n}``; None when
    a non-empty line is not in that format."""
    counts = {"R": 0, "P": 0, "F": 0}
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        match = _BAD_PAGE.match(line)
        if not match:
            return None
        counts[match.group(1)] += 1
    return counts


def _int_or_none(text):
    try:
        return int(text, 0)
    except (TypeError, ValueError):
        return None


def _physical_devices(sysroot):
    """``{slot: bdf}``: the lowest PCI function of every AMD GPU slot (partitions are functions of one device)."""
    base = join(sysroot, "sys/bus/pci/devices")
    slots = {}
    for bdf in amd_gpu_functions(sysroot):
        slot = bdf.rsplit(".", 1)[0]
        if slot not in slots or bdf < slots[slot]:
            slots[slot] = bdf
    return base, [slots[s] for s in sorted(slots)]


def partition_modes(sysroot="/"):
    """``[{"bdf", "compute_partition", "memory_partition"}]`` per physical GPU in BDF order (None where amdgpu has no
    ``current_*_partition`` file): what ``inventory`` gives the cross-node comparison's hardware class, read alone
    (the gpu_topology module returns it with the node's rails)."""
    base, bdfs = _physical_devices(sysroot)
    return [{"bdf": bdf,
             "compute_partition": read_text(os.path.join(base, bdf, "current_compute_partition"), None),
             "memory_partition": read_text(os.path.join(base, bdf, "current_memory_partition"), None)}
            for bdf in bdfs]


def _kfd_partitions(sysroot):
    """``{slot: KFD GPU nodes}``: the compute partitions each GPU shows. amdkfd makes one node per partition
    (``location_id`` = bus << 8 | device << 3 | function, the partition ORed into the function bits)."""
    base = join(sysroot, _KFD_NODES)
    counts = {}
    for node in list_dir(base):
        props = read_properties(os.path.join(base, node, "properties"), default=None, raw=True) or {}
        try:
            if int(props.get("simd_count", "0")) <= 0:
                continue
            loc, domain = int(props["location_id"]), int(props.get("domain", "0"))
        except (KeyError, ValueError):
            continue
        slot = "%04x:%02x:%02x" % (domain, loc >> 8 & 0xFF, loc >> 3 & 0x1F)
        counts[slot] = counts.get(slot, 0) + 1
    return counts


def _drm_cards(sysroot):
    """``{real path of a PCI function: card index}`` from ``sys/class/drm/card<N>/device``."""
    base = join(sysroot, "sys/class/drm")
    cards = {}
    for name in list_dir(base):
        match = re.match(r"^card(\d+)$", name)
        if match:
            cards[real_path(os.path.join(base, name, "device"))] = int(match.group(1))
    return cards


KFD_NODE = "/dev/kfd"
DRI_PREFIX = "/dev/dri/"
_RENDER_NODE = re.compile(r"^/dev/dri/renderD(\d+)$")
_HWMON = re.compile(r"^hwmon\d+$")
_TEMP_INPUT = re.compile(r"^temp(\d+)_input$")


def _hwmon_temperatures(dev):
    """``[{"label", "millidegrees"}]`` of the GPU's hwmon channels (``temp<N>_label``, else ``temp<N>``); an unreadable
    input is None (amdgpu refuses reads during a reset)."""
    temps = []
    base = os.path.join(dev, "hwmon")
    for hwmon in list_dir(base):
        if not _HWMON.match(hwmon):
            continue
        folder = os.path.join(base, hwmon)
        channels = sorted((int(m.group(1)), name) for name in list_dir(folder) for m in [_TEMP_INPUT.match(name)] if m)
        for channel, name in channels:
            label = read_text(os.path.join(folder, "temp%d_label" % channel), None) or "temp%d" % channel
            temps.append({"label": label, "millidegrees": _int_or_none(read_text(os.path.join(folder, name), None))})
    return temps


def _drm_renders(sysroot):
    """``[{"minor", "bdf"}]`` of ``sys/class/drm/renderD<N>/device`` (the PCI function of each render node)."""
    base = join(sysroot, "sys/class/drm")
    renders = []
    for name in list_dir(base):
        match = re.match(r"^renderD(\d+)$", name)
        if match:
            renders.append({"minor": int(match.group(1)),
                            "bdf": os.path.basename(real_path(os.path.join(base, name, "device")))})
    return sorted(renders, key=lambda r: r["minor"])


def _host_path(sysroot, folder, target):
    """A ``proc/<pid>/fd`` link target as the host path it names: absolute on a node, relative (into the tree) in a node
    snapshot, which lays links out inside the sysroot."""
    if os.path.isabs(target):
        return target
    rel = os.path.relpath(os.path.normpath(os.path.join(folder, target)), os.path.abspath(sysroot or "/"))
    return target if rel.startswith("..") else "/" + rel


def gpu_users(sysroot="/"):
    """See the module docstring."""
    base = join(sysroot, "proc")
    pids = [name for name in list_dir(base) if name.isdigit() and name.isascii()]
    users, unreadable = [], 0
    for pid in pids:
        folder = os.path.join(base, pid, "fd")
        try:
            fds = os.listdir(folder)
        except FileNotFoundError:
            continue  # the process ended (a snapshot keeps no fd table of a process that held no GPU)
        except OSError:
            unreadable += 1  # another user's process, read without root
            continue
        held = set()
        for fd in fds:
            link = os.path.join(folder, fd)
            try:
                target = _host_path(sysroot, folder, os.readlink(link))
            except OSError:
                continue  # closed meanwhile
            if target == KFD_NODE or target.startswith(DRI_PREFIX):
                real_path(link)  # a recording (node snapshot) keeps the links that hold a GPU, nothing else
                held.add(target)
        if held:
            users.append({"pid": int(pid), "comm": read_text(os.path.join(base, pid, "comm"), None),
                          "devices": sorted(held)})
    return {"error": None if pids else "no process directories under %s (not a procfs)" % base,
            "processes": len(pids), "unreadable": unreadable, "users": sorted(users, key=lambda u: u["pid"])}


def _gather_gpu(dev, bdf, sysroot="/", cards=None, partitions=None):
    ras_dir = os.path.join(dev, "ras")
    ras, ras_unreadable = {}, []
    for name in list_dir(ras_dir):
        if name.endswith("_err_count"):
            counts = parse_err_count(read_text(os.path.join(ras_dir, name), None))
            if counts is None:
                ras_unreadable.append(name[:-len("_err_count")])
            else:
                ras[name[:-len("_err_count")]] = counts
    bad_text = read_text(os.path.join(ras_dir, "gpu_vram_bad_pages"), None)
    firmware = {}
    for name in list_dir(os.path.join(dev, "fw_version")):
        if name.endswith("_fw_version"):
            value = read_text(os.path.join(dev, "fw_version", name), None)
            if value is not None:
                firmware[name[:-len("_fw_version")]] = value
    card = (cards or {}).get(real_path(dev))
    # the driver's own threshold (debugfs, root only): what amd-smi bad-pages reports
    stated = None if card is None else _int_or_none(
        read_text(join(sysroot, "sys/kernel/debug/dri/%d/ras/bad_page_cnt_threshold" % card), None))
    return {
        "bdf": bdf,
        "compute_partition": read_text(os.path.join(dev, "current_compute_partition"), None),
        "available_compute": read_text(os.path.join(dev, "available_compute_partition"), None),
        "memory_partition": read_text(os.path.join(dev, "current_memory_partition"), None),
        "available_memory": read_text(os.path.join(dev, "available_memory_partition"), None),
        "kfd_partitions": (partitions or {}).get(bdf.rsplit(".", 1)[0]),
        "vbios": read_text(os.path.join(dev, "vbios_version"), None),
        "firmware": firmware,
        "ras": ras if is_dir(ras_dir) else None,
        "ras_unreadable": ras_unreadable,
        "bad_pages": parse_bad_pages(bad_text) if bad_text is not None else None,
        "vram_bytes": _int_or_none(read_text(os.path.join(dev, "mem_info_vram_total"), None)),
        "drm_card": card,
        "driver_threshold": stated,
        # amdgpu_pm.c DOC gpu_busy_percent / mem_busy_percent; DOC hwmon (temp*_input millidegrees, temp*_label)
        "gpu_busy_percent": _int_or_none(read_text(os.path.join(dev, "gpu_busy_percent"), None)),
        "mem_busy_percent": _int_or_none(read_text(os.path.join(dev, "mem_busy_percent"), None)),
        "temperatures": _hwmon_temperatures(dev),
    }


def _gather_driver(sysroot):
    """Which amdgpu runs: AMD's DKMS build sets MODULE_VERSION (``sys/module/amdgpu/version``) and, built out of
    tree, taints the kernel ``O``; the in-tree module has neither."""
    mod = join(sysroot, _AMDGPU_MODULE)
    return {"loaded": is_dir(mod), "version": read_text(os.path.join(mod, "version"), None),
            "taint": read_text(os.path.join(mod, "taint"), None)}


def kernel_log(sysroot="/", runner=run):
    """``(text, origin)`` of the current boot's kernel log; ``(None, why)`` when it cannot be read."""
    if (sysroot or "/") != "/":
        path = join(sysroot, KERNEL_LOG_FILE)
        text = read_text(path, None)
        return (text, path) if text is not None else (None, "%s missing (no kernel log for this sysroot)" % path)
    why = []
    try:
        rc, out, err = runner(["journalctl", "-k", "-b", "--no-pager", "-q", "-o", "short-monotonic"], timeout=30)
        if rc == 0:
            return out, "journalctl -k -b"
        why.append("journalctl rc %d: %s" % (rc, (err or "").strip()[:120]))
    except CommandError as exc:
        why.append(str(exc))
    text = _read_kmsg()
    if text is not None:
        return text, "/dev/kmsg"
    why.append("/dev/kmsg not readable")
    try:
        rc, out, err = runner(["dmesg"], timeout=30)
        if rc == 0:
            return out, "dmesg"
        why.append("dmesg rc %d: %s" % (rc, (err or "").strip()[:120]))
    except CommandError as exc:
        why.append(str(exc))
    return None, "; ".join(why)


def _read_kmsg():
    """The kernel ring buffer through /dev/kmsg (root): records are ``prio,seq,usec,flags;message``."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return None
    lines = []
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == 32:  # EPIPE: a record was overwritten while reading; go on with the next
                    continue
                break
            if not record:
                break
            lines.append(record.decode("utf-8", "replace").split(";", 1)[-1].split("\n", 1)[0])
    finally:
        os.close(fd)
    return "\n".join(lines)


def _gather_managers(unit_root, units):
    profile = read_text(join(unit_root, TUNED_PROFILE_FILE), None)
    names = ["tuned.service"] + list(units)
    return {
        "tuned_profile": profile,
        "units": {name: unit_file_state(name, unit_root) for name in names},
    }


def xgmi_facts(model):
    """The physical GPUs of ``model`` and the pairs of them joined by a direct xGMI link. Partitions (CPX/DPX: several
    KFD nodes per device) are folded into their physical GPU: a pair is linked when any of their partitions has a
    1-hop xGMI link (the reader takes either direction) to the other."""
    gpus = model.get("gpus") or []
    physical = []
    for dev in model.get("physical_devices") or []:
        members = [gpus[i] for i in dev["gpus"]]
        physical.append({"index": dev["physical_index"], "bdf": dev["bdf"],
                         "hive_id": next((g["hive_id"] for g in members if g["hive_id"]), None),
                         "partitions": len(members)})
    pairs = set()
    for link in model.get("links") or []:
        if link["type"] == "xgmi" and link["hops"] == 1:
            a, b = gpus[link["a"]]["physical_index"], gpus[link["b"]]["physical_index"]
            if a != b:
                pairs.add((min(a, b), max(a, b)))
    return {"error": None, "gpus": physical, "pairs": [list(p) for p in sorted(pairs)],
            "warnings": list(model.get("warnings") or [])}


def _gather_xgmi(sysroot):
    """The xGMI links of the KFD topology under ``sysroot``, read by the one KFD reader (``topology/kfd.py``)."""
    try:
        return xgmi_facts(read_kfd(sysroot=sysroot).to_dict())
    except TopologyError as exc:
        return {"error": str(exc), "gpus": [], "pairs": [], "warnings": []}


# the units whose enablement is read: knowledge managers.units names them; these are the defaults of gather()
MANAGER_UNITS = ("power-profiles-daemon.service", "cpupower.service", "ondemand.service", "cpufrequtils.service")


def gather(sysroot="/", unit_root="/", runner=run, units=MANAGER_UNITS):
    """Return the GPU health facts under ``sysroot`` (read-only)."""
    base, bdfs = _physical_devices(sysroot)
    text, origin = kernel_log(sysroot, runner)
    cards, partitions = _drm_cards(sysroot), _kfd_partitions(sysroot)
    return {
        "gpus": [_gather_gpu(os.path.join(base, bdf), bdf, sysroot, cards, partitions) for bdf in bdfs],
        "bad_page_threshold": _int_or_none(
            read_text(join(sysroot, "sys/module/amdgpu/parameters/bad_page_threshold"), None)),
        "driver": _gather_driver(sysroot),
        "rocm_version": read_text(join(sysroot, ROCM_VERSION_FILE), None),
        "kernel_release": read_text(join(sysroot, "proc/sys/kernel/osrelease"), None),
        "kernel_log": text,
        "kernel_log_origin": origin,
        "managers": _gather_managers(unit_root, units),
        "xgmi": _gather_xgmi(sysroot),
        "render_nodes": _drm_renders(sysroot),
        "gpu_users": gpu_users(sysroot),
    }


# ---------------------------------------------------------------------------------------------- helpers
def _result(check_id, status, observed, expected, remediation="", source="", cvs=None):
    return {"id": check_id, "status": status, "observed": observed, "expected": expected,
            "remediation": remediation if status != "pass" else "", "source": source, "cvs": cvs}


def _worst(statuses):
    rank = {"pass": 0, "unknown": 1, "warn": 2, "fail": 3}
    return max(statuses, key=lambda s: rank[s]) if statuses else "pass"


def _bdfs(gpus):
    return ", ".join(g["bdf"] for g in gpus)


def _by_value(gpus, key):
    groups = {}
    for gpu in gpus:
        groups.setdefault(gpu[key], []).append(gpu)
    return groups


# ----------------------------------------------------------------------------------------------- checks
def _modes(text):
    """``"SPX, DPX, CPX"`` (amdgpu's available_*_partition) -> ``["SPX", "DPX", "CPX"]``; None when unread."""
    if not text:
        return None
    return [m.strip().upper() for m in text.split(",") if m.strip()]


def _compute_partitions(compute, gpus, table, spec):
    """Compute partitions per GPU in ``compute``: what the device shows (its KFD nodes, equal on every GPU), else the
    mode's divisor of the generation's XCDs (CPX: one per XCD). ``(count, how)``; ``(None, why)`` when neither is
    known."""
    shown = {g.get("kfd_partitions") for g in gpus} - {None}
    if len(shown) == 1:
        return next(iter(shown)), "KFD nodes"
    if compute == "CPX":
        xcds = (table or {}).get("xcds")
        return (xcds, "one per XCD") if xcds else (None, "XCD count unknown")
    count = (spec.get("compute_count") or {}).get(compute)
    return (count, compute) if count else (None, "mode unknown")


def _check_partitions(health, spec, gen, facts):
    source = spec.get("source", "")
    gpus = health["gpus"]
    name = (gen or {}).get("name")
    table = (spec.get("generations") or {}).get(name)
    if isinstance(table, dict) and table.get("not_applicable"):
        table = None  # the generation has no partition modes (its entry says why)
    if not gpus:
        return _result("gpu_partition_mode", "unknown", "no AMD GPU", "one compute/memory partition mode",
                       "no AMD GPU under sys/bus/pci/devices", source)
    reporting = [g for g in gpus if g["compute_partition"] or g["memory_partition"]]
    if not reporting:
        if table is None:
            return _result("gpu_partition_mode", "pass", "no partition modes (%s)" % (name or "generation unknown"),
                           "none for this generation", source=source)
        return _result("gpu_partition_mode", "unknown", "no current_compute_partition / current_memory_partition",
                       "one mode of %s" % ", ".join(table["validated"]),
                       "this amdgpu does not expose the partition files: update amdgpu (ROCm 6.x) and read "
                       "'amd-smi static --partition'", source)
    modes = {}
    for gpu in gpus:
        modes.setdefault("%s/%s" % (gpu["compute_partition"], gpu["memory_partition"]), []).append(gpu)
    observed = "; ".join("%s on %s" % (mode, _bdfs(g)) for mode, g in sorted(modes.items()))
    host = _host_nps(facts)
    if host:
        observed += "; host NPS%d" % host
    validated = (table or {}).get("validated") or []
    expected = ("one mode on every GPU, validated by AMD: " + ", ".join(validated)) if table else "one mode on every GPU"
    if len(modes) > 1:
        majority = max(sorted(modes), key=lambda m: len(modes[m]))
        odd = [gpu for m, group in modes.items() if m != majority for gpu in group]
        return _result("gpu_partition_mode", "fail", observed, expected,
                       "GPUs of one node in different partition modes (%s differ from %s): set one mode on every "
                       "GPU, 'amd-smi set --gpu all --compute-partition %s --memory-partition %s', and restart "
                       "the GPU users (RCCL, Slurm GRES, the device plugin count devices per mode)"
                       % (_bdfs(odd), majority, majority.split("/")[0], majority.split("/")[1]), source)
    mode = next(iter(modes))
    compute, memory = mode.split("/")
    count, how = _compute_partitions(compute, gpus, table, spec)
    if count:
        observed += "; %d compute partition(s) per GPU (%s)" % (count, how)
    fix = "switch to one of %s ('amd-smi set --gpu all --compute-partition X --memory-partition Y')" % (
        ", ".join(validated) or "the modes amdgpu offers")
    # what the driver offers: the device's own lists first, else the driver's rules for the generation
    driver = (table or {}).get("driver") or {}
    offered_memory = _modes(gpus[0].get("available_memory")) or driver.get("memory")
    accepted = _modes(gpus[0].get("available_compute"))
    by_driver = (driver.get("compute") or {}).get(compute)
    if offered_memory is not None and memory not in offered_memory:
        return _result("gpu_partition_mode", "fail", observed, expected,
                       "amdgpu does not offer %s on %s (it offers %s): %s" % (
                           memory, name or "this GPU", ", ".join(offered_memory), fix), source)
    if accepted is not None and compute not in accepted or \
            accepted is None and table and (by_driver is None or memory not in by_driver):
        allowed = accepted if accepted is not None else [c for c, mems in sorted((driver.get("compute") or {})
                                                                                 .items()) if memory in mems]
        return _result("gpu_partition_mode", "fail", observed, expected,
                       "amdgpu does not accept %s with %s on %s (with %s it accepts %s): %s" % (
                           compute, memory, name or "this GPU", memory, ", ".join(allowed) or "no compute mode", fix),
                       source)
    mcount = (spec.get("memory_count") or {}).get(memory)
    if count and mcount and mcount > count:
        return _result("gpu_partition_mode", "fail", observed, expected,
                       "%s makes %d memory partitions but only %d compute partition(s), which amdgpu does not allow: %s"
                       % (mode, mcount, count, fix), source)
    if table and table.get("memory_is_host_nps") and host and mcount and host != mcount:
        return _result("gpu_partition_mode", "fail", observed, "%s, memory partition = host NPS" % expected,
                       "on an APU the memory partition is the host's NUMA layout: host NPS%d but GPU %s; set the "
                       "same NPS in BIOS and amdgpu" % (host, memory), source)
    if table and mode not in validated:
        row = table.get("matrix_row") or name
        return _result("gpu_partition_mode", "warn", observed, expected,
                       "%s runs (amdgpu offers it) but AMD's compatibility matrix does not list it for %s%s: %s" % (
                           mode, row, "" if row == name else " (the row %s is judged by)" % name, fix), source)
    return _result("gpu_partition_mode", "pass", observed, expected, source=source)


def _host_nps(facts):
    nodes, packages = (facts or {}).get("numa_nodes"), (facts or {}).get("packages")
    if nodes and packages and nodes >= packages and not nodes % packages:
        return nodes // packages
    return None


def _check_ras(health, spec):
    source = spec.get("source", "")
    gpus = [g for g in health["gpus"] if g["ras"] is not None]
    cvs = None  # ROCm/cvs checks ECC through its health suites (RVS, AGFHC), not as a host_configs test
    if not gpus:
        return _result("gpu_ecc_errors", "unknown", "no ras/ directory on any GPU" if health["gpus"] else "no AMD GPU",
                       "0 uncorrectable and 0 deferred errors", "RAS is off or unsupported (amdgpu ras_enable=0, a VF "
                       "guest, an old driver): read 'amd-smi metric --ecc' on the node", source, cvs)
    ue_max = int(spec.get("uncorrectable_max", 0))
    de_max = int(spec.get("deferred_max", 0))
    ce_warn = int(spec.get("correctable_warn", 100))
    bad, bad_ce, unreadable = [], [], []
    for gpu in gpus:
        for key, limit in (("ue", ue_max), ("de", de_max)):
            counts = {block: c.get(key, 0) for block, c in sorted(gpu["ras"].items()) if c.get(key, 0)}
            if sum(counts.values()) > limit:
                bad.append("%s %s %s" % (gpu["bdf"], key, ", ".join("%s=%d" % kv for kv in counts.items())))
        ce = sum(c["ce"] for c in gpu["ras"].values())
        if ce > ce_warn:
            bad_ce.append("%s ce %d" % (gpu["bdf"], ce))
        unreadable.extend("%s %s" % (gpu["bdf"], block) for block in gpu["ras_unreadable"])
    expected = "uncorrectable <= %d, deferred <= %d, correctable <= %d per GPU" % (ue_max, de_max, ce_warn)
    if bad:
        return _result("gpu_ecc_errors", "fail", "; ".join(bad + bad_ce), expected,
                       "uncorrectable or deferred (poisoned) ECC/RAS errors: drain the node, note 'amd-smi metric "
                       "--ecc' and the bad pages, reset the GPU (or reboot); if they come back, follow AMD's Service "
                       "Action Guide / RMA the GPU", source, cvs)
    if bad_ce:
        return _result("gpu_ecc_errors", "warn", "; ".join(bad_ce), expected,
                       "correctable errors above the threshold: watch the count (Prometheus) and the retired pages; "
                       "a GPU whose count keeps rising goes to maintenance", spec.get("correctable_source") or source,
                       cvs)
    if unreadable:
        return _result("gpu_ecc_errors", "unknown", "counters not readable: " + ", ".join(unreadable), expected,
                       "amdgpu answered 'Query currently inaccessible' (recovery in progress): run again", source, cvs)
    return _result("gpu_ecc_errors", "pass", "no uncorrectable or deferred errors on %d GPU(s)" % len(gpus), expected,
                   source=source, cvs=cvs)


def driver_kind(driver):
    """``"amd"``: AMD's amdgpu (DKMS: MODULE_VERSION, out-of-tree taint ``O``); ``"upstream"``: the in-tree module;
    ``None``: not told apart (no ``sys/module/amdgpu``, e.g. a snapshot or simulated tree without it)."""
    driver = driver or {}
    if driver.get("version") or "O" in (driver.get("taint") or ""):
        return "amd"
    if driver.get("loaded"):
        return "upstream"
    return None


def stated_thresholds(text, patterns):
    """``{bdf: threshold}`` the driver printed in the kernel log (its last statement per GPU)."""
    regexes = [re.compile(p) for p in patterns or []]
    found = {}
    for line in (text or "").splitlines():
        for regex in regexes:
            match = regex.search(line)
            if match:
                found[match.group("bdf")] = int(match.group("threshold"))
                break
    return found


def retired_page_threshold(gpu, health, spec, gen_name, stated=None):
    """The threshold the running driver applies to ``gpu``: ``{"limit", "how", "mode", "amd_limit"}``; ``mode`` is
    ``stated`` (the driver said it), ``user`` (bad_page_threshold > 0), ``disabled`` (0), ``formula`` (-2, or the
    in-tree -1), ``reserved`` (AMD's -1) or ``unknown``; ``amd_limit`` is AMD's value where the in-tree driver differs."""
    param = health.get("bad_page_threshold")
    driver = health.get("driver") or {}
    kind = driver_kind(driver)
    cover = int(spec.get("bad_page_cover_bytes", 104857600))
    vram = gpu.get("vram_bytes")
    formula = vram // cover if vram else None
    reserved = (spec.get("reserved_vram_bytes") or {}).get(gen_name) if gen_name else None
    amd_default = (reserved >> 21) << 4 if reserved else None
    who = {"amd": "AMD's amdgpu%s" % (" %s" % driver["version"] if driver.get("version") else " (DKMS)"),
           "upstream": "in-tree amdgpu",
           None: "amdgpu not told apart (no sys/module/amdgpu): judged by AMD's amdgpu, what ROCm installs"}[kind]
    if gpu.get("driver_threshold") is not None:
        return {"limit": gpu["driver_threshold"], "mode": "stated", "amd_limit": None,
                "how": "stated by the driver (debugfs ras/bad_page_cnt_threshold, what amd-smi bad-pages reports)"}
    if (stated or {}).get(gpu["bdf"]) is not None:
        return {"limit": stated[gpu["bdf"]], "mode": "stated", "amd_limit": None,
                "how": "stated by the driver in the kernel log"}
    if param is not None and param > 0:
        return {"limit": param, "mode": "user", "amd_limit": None,
                "how": "bad_page_threshold=%d, user-defined (amdgpu halts the GPU when it is reached)" % param}
    if param == 0:
        return {"limit": None, "mode": "disabled", "amd_limit": None,
                "how": "bad_page_threshold=0: bad page retirement disabled (amdgpu: for debugging)"}
    if param == -2:
        return {"limit": formula, "mode": "formula" if formula else "unknown", "amd_limit": None,
                "how": "%s, bad_page_threshold=-2: 1 page per 100 MiB of VRAM%s" % (
                    who, "" if formula else " (VRAM size unknown: mem_info_vram_total)")}
    setting = "bad_page_threshold=%s" % (param if param is not None else "-1 (default)")
    if kind == "upstream":
        return {"limit": formula, "mode": "formula" if formula else "unknown", "amd_limit": amd_default,
                "how": "%s, %s: 1 page per 100 MiB of VRAM, at most the EEPROM's records (kernels with the 2025 "
                       "rework use AMD's reserved-VRAM rule instead)%s" % (
                           who, setting, "" if formula else " (VRAM size unknown: mem_info_vram_total)")}
    if amd_default is None:
        return {"limit": None, "mode": "unknown", "amd_limit": None,
                "how": "%s, %s: no reserved-VRAM figure for %s" % (who, setting, gen_name or "an unknown generation")}
    return {"limit": amd_default, "mode": "reserved", "amd_limit": None,
            "how": "%s, %s: %d MiB reserved VRAM = %d pages" % (who, setting, reserved >> 20, amd_default)}


def _check_bad_pages(health, spec, gen=None):
    source = spec.get("source", "")
    name = (gen or {}).get("name")
    if name and name in (spec.get("not_applicable") or []):
        return _result("gpu_retired_pages", "pass", "bad page retirement not applicable on %s (amdgpu turns it off "
                       "there: bad_page_threshold reads 0)" % name, "nothing to judge", source=source)
    gpus = [g for g in health["gpus"] if g["bad_pages"] is not None]
    if not gpus:
        return _result("gpu_retired_pages", "unknown", "no ras/gpu_vram_bad_pages", "retired pages below the threshold",
                       "bad page retirement is off (bad_page_threshold=0) or unsupported on this GPU/driver", source)
    fraction = float(spec.get("warn_fraction", 0.9))
    stated = stated_thresholds(health.get("kernel_log"), spec.get("statements"))
    worst, parts, hows, modes, over_amd = [], [], [], set(), []
    for gpu in gpus:
        pages = sum(gpu["bad_pages"].values())
        rule = retired_page_threshold(gpu, health, spec, name, stated)
        limit = rule["limit"]
        if rule["how"] not in hows:
            hows.append(rule["how"])
        if rule["mode"] == "disabled":
            status = "warn"
        elif limit is None:
            status = "unknown" if pages else "pass"
        elif pages > limit:
            status = "fail"
        elif rule["amd_limit"] and pages > rule["amd_limit"]:
            status = "warn"
            over_amd.append("%s over AMD's %d" % (gpu["bdf"], rule["amd_limit"]))
        elif pages >= limit * fraction:
            status = "warn"
        else:
            status = "pass"
        modes.add((status, rule["mode"]))
        worst.append(status)
        if pages or status != "pass":
            parts.append("%s %d page(s)%s%s" % (gpu["bdf"], pages, " of %d" % limit if limit is not None else "",
                                                " (%d not reservable)" % gpu["bad_pages"]["F"]
                                                if gpu["bad_pages"]["F"] else ""))
    status = _worst(worst)
    expected = "below the threshold the running amdgpu applies: " + "; ".join(hows)
    observed = "; ".join(parts + over_amd) or "no retired pages on %d GPU(s)" % len(gpus)
    failing = {mode for st, mode in modes if st == status}
    if status == "fail" and "user" in failing:
        remediation = ("the user-defined bad_page_threshold is reached: amdgpu marks the GPU for RMA and halts its "
                       "runtime services ('User defined threshold is set, runtime service will be halt when "
                       "threshold is reached'): drain the node, save 'amd-smi bad-pages' and 'amd-smi ras --cper', "
                       "and follow AMD's Service Action Guide (SAG) for the GPU")
    elif status == "fail":
        remediation = ("retired pages over the threshold: amdgpu keeps the GPU in service (bad_page_threshold -1/-2) "
                       "and logs 'Please consult AMD Service Action Guide (SAG) for appropriate service procedures'; "
                       "it has reached AMD's RMA threshold (the driver sends the RMA record, CPER, to the platform). "
                       "Drain the node, save 'amd-smi bad-pages' and 'amd-smi ras --cper', and follow the SAG with "
                       "the platform vendor / AMD")
    elif status == "warn" and "disabled" in failing:
        remediation = ("amdgpu.bad_page_threshold=0 turns bad page retirement off (a debugging setting): faulty HBM "
                       "pages stay in use. Remove the parameter (default -1) and reload amdgpu / reboot")
    elif status == "warn":
        remediation = ("retired pages near the threshold (amdgpu itself warns 'RAS records ... exceeds 90%% of "
                       "threshold' from %d%%) or over AMD's RMA threshold: plan the GPU's replacement per AMD's "
                       "Service Action Guide and watch the count" % int(fraction * 100))
    elif status == "unknown":
        remediation = ("the threshold is unknown (%s): read it as root from sys/kernel/debug/dri/<card>/ras/"
                       "bad_page_cnt_threshold or 'amd-smi bad-pages'" % "; ".join(hows))
    else:
        remediation = ""
    return _result("gpu_retired_pages", status, observed, expected, remediation, source)


def _compiled(items):
    """``[(item, regex)]`` of the items whose ``pattern`` compiles; a broken pattern is skipped (named by the schema
    test), never a traceback on the node."""
    out = []
    for item in items or []:
        try:
            out.append((item, re.compile(str(item.get("pattern", "")))))
        except re.error:
            continue
    return out


def kernel_log_findings(text, spec):
    """See the module docstring."""
    curated = _compiled(spec.get("patterns"))
    generic = spec.get("generic") or {}
    filters = _compiled(generic.get("filters"))
    benign = _compiled(spec.get("benign"))
    try:
        line_re = re.compile(str(generic.get("line") or r"(?i)amdgpu"))
    except re.error:
        line_re = re.compile(r"(?i)amdgpu")
    level = generic.get("level", "warn")
    found, ignored = {}, {}
    for raw in (text or "").splitlines():
        line = raw.strip()
        if not line:
            continue
        hits = [(item.get("id", "pattern"), item.get("level", "warn")) for item, regex in curated if regex.search(line)]
        if hits:
            for key, hit_level in hits:
                found.setdefault(key, (hit_level, []))[1].append(line)
            continue
        if not filters or not line_re.search(line):
            continue
        generic_hits = [item.get("id", "generic") for item, regex in filters if regex.search(line)]
        if not generic_hits:
            continue
        harmless = next((item.get("id", "benign") for item, regex in benign if regex.search(line)), None)
        if harmless:
            ignored[harmless] = ignored.get(harmless, 0) + 1
            continue
        for key in generic_hits:
            found.setdefault(key, (level, []))[1].append(line)
    return found, ignored


# the ROCm CVS host-config test whose driver-error filter gpu_kernel_log applies (docs/health-checks.md, coverage)
KERNEL_LOG_CVS = "test_check_dmesg_driver_errors"


def _check_kernel_log(health, spec):
    source = spec.get("source", "")
    generic = spec.get("generic") or {}
    if generic.get("source"):
        source = "%s; the generic driver-error filter: %s" % (source, generic["source"])
    text = health.get("kernel_log")
    expected = ("no amdgpu error lines since boot: none of the curated patterns (their levels), and no other amdgpu "
                "line with fail|error or reset|hang (%s) but the known-benign ones" % generic.get("level", "warn"))
    if text is None:
        return _result("gpu_kernel_log", "unknown", "kernel log not readable: %s" % health.get("kernel_log_origin"),
                       expected, "run as root on the node (journalctl -k -b needs the systemd-journal group or root)",
                       source, KERNEL_LOG_CVS)
    found, ignored = kernel_log_findings(text, spec)
    note = ("; %d known-benign line(s) left out (%s)" % (sum(ignored.values()), ", ".join(sorted(ignored)))
            if ignored else "")
    if not found:
        return _result("gpu_kernel_log", "pass", "no amdgpu error lines (%s)%s" % (health.get("kernel_log_origin"), note),
                       expected, source=source, cvs=KERNEL_LOG_CVS)
    status = _worst([level for level, _unused in found.values()])
    observed = "; ".join("%s x%d (first: %s)" % (key, len(lines), lines[0][:160])
                         for key, (_unused, lines) in sorted(found.items())) + note
    generic_ids = {item.get("id") for item in generic.get("filters") or []}
    fix = ("read the full lines with 'journalctl -k -b | grep amdgpu'; uncorrectable errors, failed resets, bad pages "
           "over the threshold or a failed initialization (the GPU is out of service: check firmware, the "
           "amdgpu-dkms package, then reseat or replace the GPU): drain the node and reset/replace the GPU; timeouts "
           "and page faults: find the job (pid in the next lines) before putting the node back")
    if generic_ids & set(found):
        fix += ("; driver error lines no curated pattern knows: read each, and if harmless add it to "
                "knowledge/gpu_health.yml kernel_log.benign with its reason")
    return _result("gpu_kernel_log", status, observed, expected, fix, source, KERNEL_LOG_CVS)


def _check_firmware(health):
    source = "amdgpu sysfs fw_version/<name>_fw_version and vbios_version (amdgpu_ucode.c, amdgpu_atombios.c)"
    gpus = health["gpus"]
    if not gpus:
        return _result("gpu_firmware_consistency", "unknown", "no AMD GPU", "one firmware set on every GPU",
                       "no AMD GPU under sys/bus/pci/devices", source)
    items = {"vbios": {g["bdf"]: g["vbios"] for g in gpus}}
    for name in sorted({n for g in gpus for n in g["firmware"]}):
        items[name] = {g["bdf"]: g["firmware"].get(name) for g in gpus}
    known = {k: v for k, v in items.items() if any(x is not None for x in v.values())}
    if not known:
        return _result("gpu_firmware_consistency", "unknown", "no fw_version/ or vbios_version on any GPU",
                       "one firmware set on every GPU", "run on the node itself (amdgpu loaded)", source)
    differ = []
    for name, values in sorted(known.items()):
        groups = {}
        for bdf, value in values.items():
            groups.setdefault(value, []).append(bdf)
        if len(groups) > 1:
            majority = max(sorted(groups, key=str), key=lambda v: len(groups[v]))
            differ.append("%s: %s on %s, majority %s" % (
                name, ", ".join("%s" % v for v in sorted(groups, key=str) if v != majority),
                ", ".join(b for v in groups if v != majority for b in groups[v]), majority))
    expected = "the same VBIOS and firmware versions on every GPU"
    if differ:
        return _result("gpu_firmware_consistency", "fail", "; ".join(differ), expected,
                       "one GPU was flashed differently (or a replacement arrived with other firmware): update it "
                       "with the platform vendor's firmware bundle so every GPU runs the same set", source)
    return _result("gpu_firmware_consistency", "pass", "%d item(s) identical on %d GPU(s)" % (len(known), len(gpus)),
                   expected, source=source)


def _check_managers(health, spec, facts, options, host):
    source = spec.get("source", "")
    managers = health.get("managers") or {}
    units = managers.get("units") or {}
    want_gov = (options or {}).get("cpu_governor") or (host.get("cpu_governor") or {}).get("expected", "performance")
    want_thp = (options or {}).get("transparent_hugepage") or (host.get("transparent_hugepage") or {}).get(
        "expected", "always")
    want_nb = str((host.get("numa_balancing") or {}).get("expected", "0"))
    enabled = ("enabled", "enabled-runtime", "static", "alias", "indirect", "generated")
    conflicts, notes = [], []
    tuned_state = units.get("tuned.service", "not-found")
    profile = managers.get("tuned_profile")
    if tuned_state in enabled:
        known = (spec.get("tuned_profiles") or {}).get(profile) if profile else None
        if not profile:
            notes.append("tuned enabled without an active profile")
        elif known is None:
            conflicts.append(("warn", "tuned profile %r (not in the knowledge table: check its [cpu] governor, [vm] "
                                      "transparent_hugepages and [sysctl])" % profile))
        else:
            for key, want, label in (("governor", want_gov, "governor"),
                                     ("transparent_hugepages", want_thp, "THP"),
                                     ("numa_balancing", want_nb, "kernel.numa_balancing")):
                value = known.get(key)
                if value is not None and str(value) != str(want):
                    conflicts.append(("warn", "tuned profile %s sets %s %s, topotune %s" % (profile, label, value, want)))
            if not conflicts:
                notes.append("tuned profile %s agrees with topotune" % profile)
    for entry in spec.get("units") or []:
        state = units.get(entry["name"], "not-found")
        if state in enabled:
            conflicts.append(("warn", "%s %s (%s)" % (entry["name"], state, entry["what"])))
    expected = "no service re-applying a governor other than %s, THP other than %s or kernel.numa_balancing" % (
        want_gov, want_thp)
    if conflicts:
        return _result("power_managers", "warn", "; ".join(text for _unused, text in conflicts), expected,
                       "reconcile: keep tuned with a profile that agrees (accelerator-performance or "
                       "throughput-performance set governor=performance; a custom profile with "
                       "include=throughput-performance and [sysctl] kernel.numa_balancing=0), or disable it "
                       "('systemctl disable --now tuned' / 'tuned-adm off'); disable power-profiles-daemon, "
                       "cpupower, ondemand and cpufrequtils units ('systemctl disable --now <unit>'): topotune's "
                       "cpu_governor and kernel_tuning roles own these settings", source)
    observed = "; ".join(notes) or "none of tuned, %s enabled" % ", ".join(e["name"] for e in spec.get("units") or [])
    return _result("power_managers", "pass", observed, expected, source=source)


def _gpu_name(gpu):
    return "GPU %d (%s)" % (gpu["index"], gpu["bdf"] or "PCI address unknown")


def _embed(layout, count, linked):
    """Match a per-pair ``layout`` (``[[a, b], ...]`` over GPUs ``0..count-1``) to the node's GPUs up to renumbering:
    the numbering (identity first) under which most layout pairs are ``linked``. ``(missing pairs in node numbering,
    None)``, or ``(None, why)`` when the layout cannot be matched."""
    size = max(max(a, b) for a, b in layout) + 1
    if size != count:
        return None, "the layout is for %d GPUs, the node shows %d" % (size, count)
    if count > 9:
        return None, "the layout has %d GPUs: too many to match up to renumbering" % count
    best = None
    for perm in itertools.permutations(range(count)):
        missing = [tuple(sorted((perm[a], perm[b]))) for a, b in layout if tuple(sorted((perm[a], perm[b]))) not in linked]
        if best is None or len(missing) < len(best):
            best = missing
            if not missing:
                break
    return sorted(best), None


def _expected_xgmi(entry, gpus, linked):
    """``(expected pairs, missing pairs, description)`` of the generation's layout on these physical GPUs;
    ``(None, None, why)`` when it cannot be judged."""
    layout = entry.get("layout")
    indexes = [g["index"] for g in gpus]
    if layout == "full_mesh":
        pairs = list(itertools.combinations(sorted(indexes), 2))
        desc = "full mesh: a direct xGMI link between every pair of the %d GPUs (%s peers per GPU)" % (
            len(indexes), entry.get("peers_per_gpu", len(indexes) - 1))
    elif layout == "hive_full_mesh":
        hives = {}
        for gpu in gpus:
            if gpu["hive_id"]:
                hives.setdefault(gpu["hive_id"], []).append(gpu["index"])
        pairs = [p for members in hives.values() for p in itertools.combinations(sorted(members), 2)]
        desc = "every GPU of an xGMI hive linked to every other (%s)" % (
            ", ".join("hive of %d" % len(m) for m in hives.values()) or "no hive: PCIe only, no link expected")
    elif layout == "pairs":
        layout_pairs = [(int(p[0]), int(p[1])) for p in entry.get("pairs") or []]
        if not layout_pairs:
            return None, None, "the generation's xgmi layout lists no pairs"
        missing, why = _embed(layout_pairs, len(indexes), linked)
        if why:
            return None, None, why
        desc = "the generation's %d linked GPU pairs (%s peers per GPU), matched up to GPU numbering" % (
            len(layout_pairs), entry.get("peers_per_gpu", "?"))
        return layout_pairs, missing, desc
    else:
        return None, None, "xgmi layout %r is not one the check knows (full_mesh, pairs, hive_full_mesh)" % layout
    return pairs, sorted(p for p in pairs if p not in linked), desc


def _wafl_counts(health, gpus, spec):
    """``(bad, unknown)``: per physical GPU of ``gpus``, ``ras/xgmi_wafl_err_count`` over its maxima, or why it is
    not known."""
    by_slot = {g["bdf"].rsplit(".", 1)[0]: g for g in health.get("gpus") or []}
    limits = {"ue": int(spec.get("uncorrectable_max", 0)), "ce": int(spec.get("correctable_max", 0)),
              "de": int(spec.get("deferred_max", 0))}
    bad, unknown = [], {}
    for phys in gpus:
        gpu = by_slot.get((phys["bdf"] or "").rsplit(".", 1)[0])
        if gpu is None:
            unknown.setdefault("no amdgpu PCI device", []).append(_gpu_name(phys))
        elif gpu["ras"] is None:
            unknown.setdefault("no ras/ directory", []).append(gpu["bdf"])
        elif "xgmi_wafl" in gpu["ras_unreadable"]:
            unknown.setdefault("ras/xgmi_wafl_err_count unreadable", []).append(gpu["bdf"])
        elif "xgmi_wafl" not in gpu["ras"]:
            unknown.setdefault("no ras/xgmi_wafl_err_count", []).append(gpu["bdf"])
        else:
            counts = gpu["ras"]["xgmi_wafl"]
            over = ["%s %d" % (key, counts.get(key, 0)) for key in ("ue", "ce", "de") if counts.get(key, 0) > limits[key]]
            if over:
                bad.append("%s %s" % (gpu["bdf"], ", ".join(over)))
    unknown = ["%s on %s" % (why, "all %d GPU(s)" % len(gpus) if len(names) == len(gpus) > 1 else ", ".join(names))
               for why, names in unknown.items()]
    return bad, unknown


def _check_xgmi(health, spec, gen):
    """xgmi_links: the generation's expected xGMI peers present in KFD io_links (type 11) and the xGMI/WAFL RAS
    counters zero."""
    source = spec.get("source", "")
    name = (gen or {}).get("name")
    default = "the generation's xGMI links (KFD io_links type 11) present and ras/xgmi_wafl_err_count 0"
    if gen is None:
        return _result("xgmi_links", "unknown", "GPU generation unknown: no expected xGMI layout", default,
                       "identify the GPUs (check gpu_generation) or set platform_checks_generation", source)
    entry = (spec.get("generations") or {}).get(name)
    if not isinstance(entry, dict):
        return _result("xgmi_links", "unknown", "no xGMI layout for %s in the knowledge (gpu_health xgmi)" % name,
                       default, "give knowledge/generations/%s.yml an xgmi section" % name.lower(), source)
    source = "; ".join(s for s in (entry.get("source"), source) if s)
    if entry.get("not_applicable"):
        return _result("xgmi_links", "pass", "no xGMI on %s: %s" % (name, entry["not_applicable"]),
                       "nothing to judge", source=source)
    if entry.get("unknown"):
        return _result("xgmi_links", "unknown", "xGMI layout of %s unknown: %s" % (name, entry["unknown"]), default,
                       "compare 'amd-smi topology' with the platform vendor's baseboard documentation", source)
    xgmi = health.get("xgmi") or {"error": "no KFD facts gathered"}
    if xgmi.get("error"):
        return _result("xgmi_links", "unknown", "KFD topology not readable: %s" % xgmi["error"], default,
                       "run on the node with amdgpu loaded (sys/class/kfd/kfd/topology/nodes)", source)
    gpus = xgmi["gpus"]
    linked = {tuple(p) for p in xgmi["pairs"]}
    named = {g["index"]: g for g in gpus}
    pairs, missing, desc = _expected_xgmi(entry, gpus, linked)
    wafl = spec.get("wafl") or {}
    expected = "%s; ras/xgmi_wafl_err_count ue <= %d, ce <= %d" % (
        desc if pairs is not None else "the %s xGMI layout" % name, int(wafl.get("uncorrectable_max", 0)),
        int(wafl.get("correctable_max", 0)))
    parts = []  # (status, observed, remediation)
    if pairs is None:
        parts.append(("unknown", "links not judged: %s" % desc,
                      "compare 'amd-smi topology' with the generation's layout by hand"))
    elif missing:
        parts.append(("fail", "missing xGMI link(s): " + ", ".join(
            "%s <-> %s" % (_gpu_name(named[a]), _gpu_name(named[b])) for a, b in missing),
            "KFD shows no direct xGMI link (io_link type 11) for the named GPU pair(s): traffic between them takes "
            "another path and collective bandwidth drops. Drain the node, save 'amd-smi topology', 'amd-smi xgmi' and "
            "'dmesg | grep -i xgmi', reset the GPUs or power-cycle the node; a link that stays down is a hardware "
            "fault (OAM, baseboard, or the Infinity Fabric bridge of PCIe cards: reseat it): service it per AMD's "
            "Service Action Guide with the platform vendor"))
    else:
        parts.append(("pass", "%d of %d expected GPU pair(s) linked" % (len(pairs), len(pairs)) if pairs
                      else "no xGMI link expected (%d GPU(s), %s)" % (len(gpus), desc), ""))
    # the counters of the GPUs that have xGMI links to judge (a PCIe-only card has none)
    peers = sorted(named) if entry.get("layout") == "pairs" else sorted({i for p in pairs or [] for i in p})
    if peers:
        bad, unknown = _wafl_counts(health, [named[i] for i in peers], wafl)
        if bad:
            parts.append((wafl.get("level", "fail"), "xgmi_wafl_err_count: " + "; ".join(bad),
                          "xGMI/WAFL errors counted since the driver loaded on the named GPU(s): a link failed or "
                          "retried. Save 'amd-smi metric --ecc-blocks' and the kernel log and reset the GPUs; errors "
                          "that come back mean a failing link: service it per AMD's Service Action Guide"))
        if unknown:
            parts.append(("unknown", "xGMI/WAFL counters not known: " + "; ".join(unknown),
                          "amdgpu shows no readable ras/xgmi_wafl_err_count (RAS off: amdgpu.ras_enable=0, a VF "
                          "guest, an older driver, or a recovery in progress): read 'amd-smi metric --ecc-blocks' on "
                          "the node"))
        if not bad and not unknown:
            parts.append(("pass", "xgmi_wafl_err_count 0 on %d GPU(s)" % len(peers), ""))
    status = _worst([st for st, _unused, _unused in parts])
    return _result("xgmi_links", status, "; ".join(obs for _unused, obs, _unused in parts), expected,
                   "; ".join(fix for st, _unused, fix in parts if st != "pass"), source)


def _celsius(millidegrees):
    return millidegrees / 1000.0


def _number(value, default):
    try:
        return float(value)
    except (TypeError, ValueError):
        return float(default)


def _judge_idle_gpu(gpu, busy, temps):
    """``[(status, text)]`` of one GPU nobody holds: its busy readings and temperatures against the limits."""
    parts = []
    for key in ("gpu_busy_percent", "mem_busy_percent"):
        value = gpu.get(key)
        if value is None:
            if key == "gpu_busy_percent":
                parts.append(("unknown", "%s unreadable" % key))
            continue  # mem_busy_percent: not on every device (amdgpu_pm.c: APUs, GC 9.0.1)
        if value > busy["fail_above"]:
            parts.append((busy["fail_level"], "%s %d %%" % (key, value)))
        elif value > busy["warn_above"]:
            parts.append((busy["warn_level"], "%s %d %%" % (key, value)))
    readings = gpu.get("temperatures") or []
    if not readings:
        parts.append(("unknown", "no hwmon temperature"))
    for reading in readings:
        value = reading.get("millidegrees")
        if value is None:
            parts.append(("unknown", "%s temperature unreadable" % reading.get("label")))
        elif _celsius(value) >= temps["fail_at"]:
            parts.append(("fail", "%s %.0f °C" % (reading.get("label"), _celsius(value))))
        elif _celsius(value) > temps["warn_above"]:
            parts.append(("warn", "%s %.0f °C" % (reading.get("label"), _celsius(value))))
    return parts


def _idle_summary(gpus):
    """``gpu_busy 0 %, mem_busy 0 %, junction <= 55 °C, mem <= 43 °C`` over the judged GPUs."""
    out = []
    for key, short in (("gpu_busy_percent", "gpu_busy"), ("mem_busy_percent", "mem_busy")):
        values = [g[key] for g in gpus if g.get(key) is not None]
        if values:
            out.append("%s %s %%" % (short, max(values)) if min(values) == max(values)
                       else "%s %d-%d %%" % (short, min(values), max(values)))
    labels = {}
    for gpu in gpus:
        for reading in gpu.get("temperatures") or []:
            if reading.get("millidegrees") is not None:
                labels.setdefault(reading["label"], []).append(_celsius(reading["millidegrees"]))
    out.extend("%s <= %.0f °C" % (label, max(values)) for label, values in sorted(labels.items()))
    return ", ".join(out)


def _holders(health, gpus):
    """``(all_gpus, per_slot, errors)``: the users of /dev/kfd (every GPU in use), ``{slot: [users]}`` of render
    nodes, and why the process table is not known."""
    users = health.get("gpu_users") or {"error": "process table not gathered", "users": []}
    slot_of_minor = {r.get("minor"): (r.get("bdf") or "").rsplit(".", 1)[0] for r in health.get("render_nodes") or []}
    every, per_slot = [], {}
    for user in users.get("users") or []:
        name = "pid %s (%s)" % (user.get("pid"), user.get("comm") or "?")
        for device in user.get("devices") or []:
            match = _RENDER_NODE.match(device)
            if device == KFD_NODE:
                every.append("%s holds %s" % (name, KFD_NODE))
            elif match and int(match.group(1)) in slot_of_minor:
                per_slot.setdefault(slot_of_minor[int(match.group(1))], []).append("%s holds %s" % (name, device))
    errors = []
    if users.get("error"):
        errors.append(users["error"])
    elif users.get("unreadable"):
        errors.append("the open files of %d process(es) are not readable (not root): whether they hold a GPU is not "
                      "known" % users["unreadable"])
    return sorted(set(every)), per_slot, errors


def _check_idle(health, spec):
    """gpu_idle: with no process holding the GPU, amdgpu's busy percentages and hwmon temperatures at idle values."""
    busy_spec, temp_spec = spec.get("busy") or {}, spec.get("temperature") or {}
    busy = {"warn_above": _number(busy_spec.get("warn_above"), 0), "fail_above": _number(busy_spec.get("fail_above"), 10),
            "warn_level": busy_spec.get("warn_level", "warn"), "fail_level": busy_spec.get("fail_level", "fail")}
    temps = {"warn_above": _number(temp_spec.get("warn_above_c"), 70), "fail_at": _number(temp_spec.get("fail_at_c"), 85)}
    source = "; ".join(" ".join(str(x).split()) for x in (busy_spec.get("source"), busy_spec.get("level_source"),
                                                          temp_spec.get("source"), temp_spec.get("level_source"),
                                                          spec.get("holders_source")) if x)
    expected = ("with no process holding /dev/kfd or the GPU's render node: gpu_busy_percent and mem_busy_percent "
                "<= %g %% (fail above %g %%), every hwmon temperature <= %g °C (fail at %g °C)" % (
                    busy["warn_above"], busy["fail_above"], temps["warn_above"], temps["fail_at"]))
    gpus = health.get("gpus") or []
    if not gpus:
        return _result("gpu_idle", "unknown", "no AMD GPU", expected, "no AMD GPU under sys/bus/pci/devices", source)
    every, per_slot, errors = _holders(health, gpus)
    if errors:
        return _result("gpu_idle", "unknown", "processes not known: %s; %s" % ("; ".join(errors), _idle_summary(gpus)),
                       expected, "run the checks as root (become) on the node itself: /proc/<pid>/fd of every "
                       "process is readable by root only", source)
    if every:
        return _result("gpu_idle", "unknown", "not idle, not judged: %s (a KFD user may run on any GPU); %s" % (
            "; ".join(every[:3]) + (" and %d more" % (len(every) - 3) if len(every) > 3 else ""),
            _idle_summary(gpus)), expected, "judge an idle node: drain it and wait for the jobs to end, then run the "
            "checks again", source)
    parts, judged, held = [], [], []
    for index, gpu in enumerate(gpus):
        slot = gpu["bdf"].rsplit(".", 1)[0]
        name = "GPU %d (%s)" % (index, gpu["bdf"])
        if per_slot.get(slot):
            held.append("%s in use: %s" % (name, "; ".join(per_slot[slot])))
            continue
        judged.append(gpu)
        found = _judge_idle_gpu(gpu, busy, temps)
        if found:
            parts.append((_worst([st for st, _unused in found]), "%s: %s, no process holds it" % (
                name, ", ".join(text for _unused, text in found))))
            parts.extend((st, text) for st, text in found)
    problems = [(status, text) for status, text in parts if status != "pass"]
    status = _worst([st for st, _unused in problems] + (["unknown"] if held else []))
    observed = "; ".join(text for _unused, text in problems if text.startswith("GPU "))
    if held:
        observed = "; ".join(x for x in (observed, "not judged: " + "; ".join(held)) if x)
    if status == "pass":
        return _result("gpu_idle", "pass", "%d GPU(s) idle, no process holds them: %s" % (
            len(judged), _idle_summary(judged)), expected, source=source)
    fixes = []
    if any(st in ("warn", "fail") and "busy" in text for st, text in problems):
        fixes.append("busy with no process holding it: a hung kernel or queue; save 'amd-smi metric' and the kernel "
                     "log, drain the node and reset the GPU ('amd-smi reset -G -g <gpu>') or reboot; busy again after "
                     "that: a hardware fault, service it per AMD's Service Action Guide")
    if any(st in ("warn", "fail") and "°C" in text for st, text in problems):
        fixes.append("hot at idle: check the data center ambient temperature and the system fans, power cycle the "
                     "system; if it persists, contact the system manufacturer (AMD's acceptance guide)")
    if any(st == "unknown" for st, _unused in problems):
        fixes.append("readings missing: run on the node with amdgpu loaded (gpu_busy_percent, hwmon temp*_input)")
    if held:
        fixes.append("GPUs in use are not judged: drain the node and run the checks again when it is idle")
    return _result("gpu_idle", status, observed, expected, "; ".join(fixes), source)


def run_checks(health, knowledge, gen=None, facts=None, options=None, host=None):
    """Return the GPU health results; ``[]`` when ``health`` or ``knowledge`` is missing."""
    if not health or not knowledge:
        return []
    return [
        _check_partitions(health, knowledge.get("partitions") or {}, gen, facts),
        _check_ras(health, knowledge.get("ras") or {}),
        _check_bad_pages(health, knowledge.get("retired_pages") or {}, gen),
        _check_kernel_log(health, knowledge.get("kernel_log") or {}),
        _check_firmware(health),
        _check_managers(health, knowledge.get("managers") or {}, facts, options, host or {}),
        _check_xgmi(health, knowledge.get("xgmi") or {}, gen),
        _check_idle(health, knowledge.get("idle") or {}),
    ]


def inventory(health, facts=None):
    """Per-node versions for the controller-side cross-node comparison (``plugin_utils/fleet/consistency.py``)."""
    health = health or {}
    return {
        "gpus": [{"bdf": g["bdf"], "vbios": g["vbios"], "firmware": dict(g["firmware"]),
                  "compute_partition": g["compute_partition"], "memory_partition": g["memory_partition"]}
                 for g in health.get("gpus") or []],
        "rocm_version": health.get("rocm_version"),
        "kernel_release": health.get("kernel_release"),
        "bios_version": (facts or {}).get("bios_version"),
    }
