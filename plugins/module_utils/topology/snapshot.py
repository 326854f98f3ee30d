"""A compact snapshot of the kernel state topotune reads, as a sysroot-shaped tar.gz.

The archive holds the sysfs/procfs files the topology reader and the platform and health checks read, laid
out as a sysroot with its symbolic links (the PCIe hierarchy is in the ``sys/bus/pci/devices`` links), so
``bin/topotune topology|checks --sysroot <extracted dir>`` (or a simulated profile built from it) analyses the node
anywhere and judges it as on the node. What the checks read is not listed here: ``collect`` runs their readers
(``platform_checks.gather``) under ``sysroot.recording`` and keeps every file, directory and link they touched;
the boot's kernel log, which they read from the journal on a node, is kept as the file they read on a tree.
``TREES`` and ``FILES`` add what the topology reader walks and what hwloc reads beyond topotune. Device nodes
become empty regular files; their owner, group and mode are kept in ``snapshot.json``. Output of ``amd-smi`` /
``rocm-smi``, where installed, goes under ``smi/``.

Standard library only (runs on the managed node and in the offline CLI).
"""

import glob
import io
import json
import os
import stat
import tarfile
import time

from ..checks import gpu_health, platform_checks
from ..core.errors import TopotuneError
from ..core.files import write_atomic
from ..core.sysroot import AMD_VENDOR, recording

# Relative to the sysroot. Directories are walked whole (the KFD tree), globs expanded.
TREES = ("sys/class/kfd/kfd/topology",)
FILES = (
    "proc/cmdline",
    "proc/sys/kernel/numa_balancing",
    "sys/devices/system/cpu/online",
    "sys/devices/system/cpu/possible",
    "sys/devices/system/cpu/present",
    "sys/devices/system/cpu/smt/active",
    "sys/devices/system/cpu/smt/control",
    "sys/devices/system/cpu/cpuidle/current_driver",
    "sys/devices/system/cpu/cpu*/cpufreq/scaling_governor",
    "sys/devices/system/cpu/cpu*/cpufreq/scaling_available_governors",
    "sys/devices/system/cpu/cpu*/cpufreq/scaling_driver",
    # CPU topology: what module_utils/topology/cpu.py and hwloc read to build packages, dies, clusters and cores
    # (core_cpus, package_cpus, die_cpus, cluster_cpus, core_id, physical_package_id; the *_list files of
    # kernels before 5.3, which lack core_cpus/package_cpus) and which CPUs are online, so that hwloc
    # (HWLOC_FSROOT=<extracted dir>) finds the node's machine too; caches: CACHE_ATTRIBUTES
    "sys/devices/system/cpu/cpu*/online",
    "sys/devices/system/cpu/cpu*/topology/thread_siblings_list",
    "sys/devices/system/cpu/cpu*/topology/core_siblings_list",
    "sys/devices/system/cpu/cpu*/topology/core_cpus",
    "sys/devices/system/cpu/cpu*/topology/package_cpus",
    "sys/devices/system/cpu/cpu*/topology/die_cpus",
    "sys/devices/system/cpu/cpu*/topology/cluster_cpus",
    "sys/devices/system/cpu/cpu*/topology/core_id",
    "sys/devices/system/cpu/cpu*/topology/physical_package_id",
    "sys/devices/system/cpu/cpu*/cpuidle/state*/name",
    "sys/devices/system/cpu/cpu*/cpuidle/state*/disable",
    "sys/devices/system/node/online",
    "sys/devices/system/node/possible",
    "sys/devices/system/node/node*/cpulist",
    "sys/devices/system/node/node*/cpumap",
    "sys/devices/system/node/node*/distance",
    "sys/devices/system/node/node*/meminfo",
    "proc/cpuinfo",
    "sys/kernel/mm/transparent_hugepage/enabled",
    "sys/kernel/mm/transparent_hugepage/defrag",
    "sys/class/dmi/id/bios_version",
    "sys/class/dmi/id/bios_vendor",
    "sys/class/dmi/id/bios_date",
    "sys/class/dmi/id/product_name",
    "sys/class/dmi/id/sys_vendor",
)
# Per cache (cpu*/cache/index*): what hwloc and topotune need to build the cache objects (shared_cpu_map; the
# shared_cpu_list of level-3 caches for people reading the snapshot; ids, line sizes, ways and sets left out).
CACHE_ATTRIBUTES = ("level", "type", "size", "shared_cpu_map")
PCI_ATTRIBUTES = ("vendor", "device", "class", "numa_node", "local_cpulist", "local_cpus", "current_link_width",
                  "max_link_width", "current_link_speed", "max_link_speed", "fw_version/mec_fw_version")
# PCI classes kept besides AMD's functions: PCI-to-PCI bridges (0x0604) and network controllers (0x02)
PCI_CLASSES_KEPT = (b"0x0604", b"0x02")
DEVICES = ("dev/kfd", "dev/dri/renderD*", "dev/dri/card*")
# sysfs files report a 4 KiB size whatever they hold; nothing topotune reads is larger than this
MAX_FILE = 1 << 20


class SnapshotError(TopotuneError):
    """The snapshot cannot be written."""


def _read(path):
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_FILE)
    except OSError:
        return None


def _rel(sysroot, path):
    return os.path.relpath(path, sysroot)


def _walk(sysroot, path, links, depth=0):
    """The sysroot-relative real location of ``path``; every symbolic link on the way is added to ``links``
    (relative path -> target relative to the link's directory). None when the path leaves the sysroot."""
    root = os.path.realpath(sysroot)
    rel = os.path.relpath(os.path.abspath(path), os.path.abspath(sysroot))
    if rel.startswith(".."):
        return None
    done = []
    parts = [p for p in rel.split(os.sep) if p not in ("", ".")]
    while parts and depth < 40:
        here = os.path.join(root, *done, parts[0])
        if os.path.islink(here):
            target = os.readlink(here)
            dest = os.path.normpath(os.path.join(root, *done, target) if not os.path.isabs(target)
                                    else os.path.join(root, target.lstrip("/")))
            dest_rel = os.path.relpath(dest, root)
            if dest_rel.startswith(".."):
                return None
            link = os.path.join(*done, parts[0])
            links[link] = os.path.relpath(dest_rel, os.path.dirname(link) or ".")
            parts = dest_rel.split(os.sep) + parts[1:]
            done, depth = [], depth + 1
            continue
        done.append(parts.pop(0))
    return os.path.join(*done) if done else ""


def _checks_reads(sysroot, files, links, dirs):
    """Keep everything the platform and health checks read under ``sysroot`` (see the module docstring)."""
    with recording() as reads:
        platform_checks.gather(sysroot, unit_root=sysroot)
    for path in sorted(reads.files):
        rel = _walk(sysroot, path, links)
        data = _read(path) if rel else None
        if data is not None:
            files[rel] = data
    for path in sorted(reads.dirs):
        rel = _walk(sysroot, path, links)
        if rel is None:
            continue
        dirs.add(rel)
        # entries a reader counts or follows (IOMMU units, PCI device links): directories and links, not contents
        for name in sorted(os.listdir(path)) if os.path.isdir(path) else []:
            entry = os.path.join(path, name)
            if os.path.islink(entry) or os.path.isdir(entry):
                _walk(sysroot, entry, links) if os.path.islink(entry) else dirs.add(os.path.join(rel, name))
    for path in sorted(reads.links):
        _walk(sysroot, path, links)
    if (sysroot or "/") == "/":
        # on a node the checks read the boot's kernel log from the journal: keep it where they read it on a tree
        text, _origin = gpu_health.kernel_log(sysroot)
        if text is not None:
            files[gpu_health.KERNEL_LOG_FILE] = text.encode("utf-8", "replace")


def collect(sysroot="/"):
    """Return ``(files, meta)``: ``files`` maps sysroot-relative paths to bytes, ``meta`` describes the rest (with
    ``links``, relative path -> target, and ``dirs``, directories that must exist even when empty)."""
    sysroot = sysroot or "/"
    files, unreadable, devices, links, dirs = {}, [], [], {}, set()
    for tree in TREES:
        top = os.path.join(sysroot, tree)
        for dirpath, _dirs, names in os.walk(top):
            for name in names:
                path = os.path.join(dirpath, name)
                data = _read(path)
                if data is None:
                    unreadable.append(_rel(sysroot, path))
                else:
                    files[_rel(sysroot, path)] = data
    for pattern in FILES:
        for path in sorted(glob.glob(os.path.join(sysroot, pattern))):
            data = _read(path)
            if data is None:
                unreadable.append(_rel(sysroot, path))
            else:
                files[_rel(sysroot, path)] = data
    for index in sorted(glob.glob(os.path.join(sysroot, "sys/devices/system/cpu/cpu*/cache/index*"))):
        level = _read(os.path.join(index, "level"))
        for attr in CACHE_ATTRIBUTES + (("shared_cpu_list",) if level and level.strip() == b"3" else ()):
            data = _read(os.path.join(index, attr))
            if data is not None:
                files[_rel(sysroot, os.path.join(index, attr))] = data
    pci = os.path.join(sysroot, "sys/bus/pci/devices")
    for bdf in sorted(os.listdir(pci)) if os.path.isdir(pci) else []:
        vendor = _read(os.path.join(pci, bdf, "vendor"))
        amd = vendor is not None and vendor.strip().decode("ascii", "replace") == AMD_VENDOR
        # the bridges and NICs too, with the header bytes hwloc reads bus numbers from: the GPUs' PCIe tree and the
        # NICs beside them (also those no check reads, e.g. HPE Slingshot) as hwloc shows them on the node
        kept = amd or (_read(os.path.join(pci, bdf, "class")) or b"").startswith(PCI_CLASSES_KEPT)
        if not kept:
            continue
        for attr in PCI_ATTRIBUTES + (() if amd else ("config",)):
            data = _read(os.path.join(pci, bdf, attr))
            if data is not None:
                files["sys/bus/pci/devices/%s/%s" % (bdf, attr)] = data
    iommu = os.path.join(sysroot, "sys/class/iommu")
    # an empty sys/class/iommu means "IOMMU off", a missing one "unknown": keep the difference
    iommu_present = os.path.isdir(iommu)
    iommu_units = sorted(os.listdir(iommu)) if iommu_present else []
    for pattern in DEVICES:
        for path in sorted(glob.glob(os.path.join(sysroot, pattern))):
            try:
                st = os.stat(path)
            except OSError:
                continue
            devices.append({"path": _rel(sysroot, path), "uid": st.st_uid, "gid": st.st_gid,
                            "mode": "%04o" % stat.S_IMODE(st.st_mode), "char_device": stat.S_ISCHR(st.st_mode)})
    _checks_reads(sysroot, files, links, dirs)
    # every file at its real location, the links on its way kept as links (the PCI device links carry the hierarchy)
    placed = {}
    for rel, data in files.items():
        real = _walk(sysroot, os.path.join(sysroot, rel), links) if not rel.startswith("var/log/") else rel
        placed[real or rel] = data
    files = placed
    for link in links:
        files.pop(link, None)
        dirs.discard(link)
    meta = {"sysroot": sysroot, "files": len(files), "unreadable": sorted(unreadable), "devices": devices,
            "iommu_present": iommu_present, "iommu_units": iommu_units, "links": dict(sorted(links.items())),
            "dirs": sorted(dirs)}
    return files, meta


def write_archive(dest, files, meta, smi=None):
    """Write ``files`` (+ ``snapshot.json`` and ``smi/*``) as a gzip tar at ``dest``, mode 0600, through the shared
    atomic writer (module_utils/core/files.py). The archive is built in memory: it holds small sysfs and smi text files
    (each capped at MAX_FILE), gzip-compressed."""
    smi = smi or {}
    now = int(time.time())
    buffer = io.BytesIO()
    try:
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            def add(name, data, mode=0o644):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = now
                info.mode = mode
                tar.addfile(info, io.BytesIO(data))

            links = meta.get("links") or {}
            dirs = set()
            for name in list(files) + list(links) + list(meta.get("dirs") or []):
                parent = os.path.dirname(name)
                while parent and parent not in dirs:
                    dirs.add(parent)
                    parent = os.path.dirname(parent)
            dirs.update(meta.get("dirs") or [])
            dirs.difference_update(links)
            if meta.get("iommu_present"):
                dirs.update(("sys", "sys/class", "sys/class/iommu"))
            for unit in meta.get("iommu_units", []):
                dirs.add("sys/class/iommu/" + unit)
            for name in sorted(dirs):
                info = tarfile.TarInfo(name)
                info.type = tarfile.DIRTYPE
                info.mode = 0o755
                info.mtime = now
                tar.addfile(info)
            for name in sorted(files):
                add(name, files[name])
            for name, target in sorted(links.items()):
                info = tarfile.TarInfo(name)
                info.type = tarfile.SYMTYPE
                info.linkname = target
                info.mtime = now
                tar.addfile(info)
            for device in meta.get("devices", []):
                add(device["path"], b"")
            for name in sorted(smi):
                add("smi/" + name, smi[name].encode("utf-8"))
            add("snapshot.json", (json.dumps(meta, indent=1, sort_keys=True) + "\n").encode("utf-8"))
        write_atomic(None, dest, buffer.getvalue(), 0o600, root_owned=False)
    except (OSError, tarfile.TarError) as exc:
        raise SnapshotError("cannot write the snapshot %s: %s" % (dest, exc)) from exc
    return dest
