#!/usr/bin/env python3
"""Materialize a simulated AMD Instinct node (a *profile*) into a sysroot tree.

A profile (``sim/profiles/<name>.yml``) describes the hardware of one node: the KFD topology (copied
verbatim from a real capture in ``tests/fixtures/kfd`` or generated from documented numbers), the GPUs'
PCI devices, the CPUs, NUMA nodes and a few procfs/DMI files.  ``build`` writes the tree our modules read
through their ``sysroot`` option (layout: ``docs/simulated-nodes.md``).

Runs in the project venv (PyYAML)::

    .venv/bin/python sim/sysroot.py list
    .venv/bin/python sim/sysroot.py build mi250x-8gcd /tmp/node1
    .venv/bin/python sim/sysroot.py expect mi250x-8gcd

Importable: ``build(profile_name, dest)``, ``load_profile(name)``, ``list_profiles()``, ``PROFILES_DIR``.
"""

from __future__ import annotations

import argparse
import importlib.util
import ipaddress
import json
import os
import shutil
import sys
import time

import yaml

SIM_DIR = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(SIM_DIR)

_TREE_SPEC = importlib.util.spec_from_file_location("sim_pcie_tree", os.path.join(SIM_DIR, "pcie_tree.py"))
pcie_tree = importlib.util.module_from_spec(_TREE_SPEC)
_TREE_SPEC.loader.exec_module(pcie_tree)

try:  # the collection's class when it is importable (tests, Ansible), so one except catches both
    from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
except ImportError:  # run as a script: the checkout's module_utils, by path as bin/topotune does
    sys.path.insert(0, os.path.join(REPO, "plugins"))
    from module_utils.core.errors import TopotuneError
PROFILES_DIR = os.path.join(SIM_DIR, "profiles")
KFD_FIXTURES = os.path.join(REPO, "tests", "fixtures", "kfd")
KFD_TOPOLOGY = "sys/class/kfd/kfd/topology"
PCI_DEVICES = "sys/bus/pci/devices"
CPU_DIR = "sys/devices/system/cpu"
NODE_DIR = "sys/devices/system/node"
# Written at the sysroot root so a later build may empty the directory again (see _prepare_dest).
MARKER = ".sim-profile"
AMD_VENDOR = "0x1002"
# PCI class 0x12 = "Processing accelerators", the class lspci prints for Instinct GPUs
# (tests/fixtures/smi/lspci-PP__mi300x-8gpu__system-acceptance-docs.txt).
ACCEL_CLASS = "0x120000"
# Keys that describe a profile rather than hardware: never inherited through ``base:``.
_NOT_INHERITED = ("description", "provenance", "expect", "base")

DEFAULTS = {
    "cpu": {"threads_per_core": 2, "nps": 1, "model_name": "AMD EPYC (simulated)",
            # sysfs cache sizes as the kernel prints them (Zen 3: 32K L1d/L1i, 512K L2 per core, 32M L3 per CCD)
            "caches": {"l1d": "32K", "l1i": "32K", "l2": "512K", "l3": "32768K"}},
    # node_kib: MemTotal per NUMA node; online_gib: the memory blocks of sys/devices/system/memory (what lsmem sums),
    # in blocks of block_bytes (x86 uses 2 GiB blocks on machines with 64 GiB or more: linux
    # arch/x86/mm/init_64.c probe_memory_block_size, MEM_SIZE_FOR_LARGE_BLOCK); no online_gib: MemTotal rounded up
    "memory": {"node_kib": 268435456, "block_bytes": 2147483648},
    "pcie": {"width": 16, "speed": "16.0 GT/s PCIe"},
    # acpi-cpufreq style: every generic governor is available; a careless node runs schedutil.
    "cpufreq": {
        "present": True,
        "driver": "acpi-cpufreq",
        "governor": "schedutil",
        "available": "conservative ondemand userspace powersave performance schedutil",
    },
    "cpuidle": {"driver": "acpi_idle", "states": ["POLL", "C1", "C2"]},
    "thp": {
        "enabled": "always [madvise] never",
        "defrag": "always defer defer+madvise [madvise] never",
    },
    # IOMMU units (sys/class/iommu) and, when there are any, one IOMMU group per PCI function whose type is `domain`
    # (identity = passthrough in effect; DMA-FQ = translated, the kernel default without iommu=pt)
    "iommu": {"units": 4, "domain": "identity"},
    "cmdline": "BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=0f3b2c1e-5d4a-4f7e-9a55-3c2d1e0f9b8a ro quiet splash",
    "numa_balancing": 1,
    "dmi": {
        "bios_vendor": "American Megatrends International, LLC.",
        "bios_version": "1.0.0",
        "bios_date": "01/01/2024",
        "sys_vendor": "Simulated",
        "product_name": "topotune simulated node",
    },
    "faults": {},
    # amdgpu's per-GPU files of the physical device (partition modes, VBIOS, RAS): none unless a profile sets them
    "amdgpu": {},
    "kernel_release": "6.8.0-45-generic",  # the BOOT_IMAGE of the default cmdline
    "kernel_log": [],                       # lines of the boot's kernel log (KERNEL_LOG_FILE)
    # the installed ROCm (opt/rocm/.info/version) and the OS (etc/os-release): a pair AMD's compatibility matrix lists
    # for ROCm 6.4.1 (knowledge/rocm_compatibility.yml: Ubuntu 24.04.2 with the 6.8 GA kernel of kernel_release), the
    # release whose amdgpu-dkms is the 6.12.12 of the profiles' amdgpu.module_version; the build number is illustrative
    "rocm_version": "6.4.1-112",
    "os_release": {"NAME": "Ubuntu", "VERSION": "24.04.2 LTS (Noble Numbat)", "ID": "ubuntu", "ID_LIKE": "debian",
                   "PRETTY_NAME": "Ubuntu 24.04.2 LTS", "VERSION_ID": "24.04", "VERSION_CODENAME": "noble"},
}


FAULT_KEYS = ("pcie_degraded", "absent_gpus", "numa_node_minus1", "no_cpufreq", "kfd_truncate",
              "acs_enabled", "nic_far_numa", "aer",
              "ras_errors", "bad_pages", "gpu_firmware", "gpu_partition", "xgmi_link_down", "pcie_replays",
              "memory_offline", "nic_pcie_degraded", "rdma_port_down", "rdma_no_ipv4", "rail_swapped",
              "gpu_busy")
# What module_utils/checks/gpu_health.py reads as the boot's kernel log under a sysroot other than /.
KERNEL_LOG_FILE = "var/log/topotune/kernel-boot.log"


class ProfileError(TopotuneError):
    """A profile is missing, malformed or inconsistent."""


# --------------------------------------------------------------------------------------------- loading
def list_profiles():
    """Return ``[(name, description)]`` for every profile file, sorted by name."""
    out = []
    for fname in sorted(os.listdir(PROFILES_DIR)):
        if fname.endswith(".yml"):
            name = fname[:-4]
            out.append((name, _read_yaml(name).get("description", "").strip().splitlines()[0]))
    return out


def _read_yaml(name):
    path = os.path.join(PROFILES_DIR, name + ".yml")
    if not os.path.isfile(path):
        known = ", ".join(n[:-4] for n in sorted(os.listdir(PROFILES_DIR)) if n.endswith(".yml"))
        raise ProfileError(f"profile {name!r} not found in {PROFILES_DIR} (known: {known})")
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    if not isinstance(data, dict):
        raise ProfileError(f"profile {path} is not a mapping")
    return data


def _merge(base, over):
    out = dict(base)
    for key, val in over.items():
        if isinstance(val, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], val)
        else:
            out[key] = val
    return out


def load_profile(name, _seen=()):
    """Load a profile, resolving ``base:`` (hardware keys are inherited, description/provenance/expect not)."""
    if name in _seen:
        raise ProfileError(f"profile {name!r}: base chain loops ({' -> '.join(_seen + (name,))})")
    data = _read_yaml(name)
    merged = dict(DEFAULTS)
    if data.get("base"):
        base = load_profile(data["base"], _seen + (name,))
        merged = {k: v for k, v in base.items() if k not in _NOT_INHERITED and k != "name"}
    merged = _merge(merged, data)
    merged["name"] = name
    for key in ("description", "provenance", "expect", "kfd"):
        if key not in merged:
            raise ProfileError(f"profile {name!r} lacks the required key {key!r}")
    for key, default in DEFAULTS.items():
        if isinstance(default, dict) and not isinstance(merged.get(key), dict):
            raise ProfileError(f"profile {name!r}: {key} must be a mapping, not {merged.get(key)!r}")
    unknown = set(merged.get("faults") or {}) - set(FAULT_KEYS)
    if unknown:
        raise ProfileError(f"profile {name!r}: unknown fault(s) {sorted(unknown)}; known: {', '.join(FAULT_KEYS)}")
    return merged


# ------------------------------------------------------------------------------------------ KFD model
def _read_props(path):
    props = {}
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) == 2:
                props[parts[0]] = parts[1]
    return props


def _props_text(props):
    return "".join(f"{k} {v}\n" for k, v in props.items())


def _capture_root(capture):
    """Return (source dir to copy, nodes dir) of a captured KFD tree (``nodes/`` or ``topology/nodes``)."""
    root = os.path.join(KFD_FIXTURES, capture)
    if os.path.isdir(os.path.join(root, "topology", "nodes")):
        return os.path.join(root, "topology"), os.path.join(root, "topology", "nodes")
    if os.path.isdir(os.path.join(root, "nodes")):
        return root, os.path.join(root, "nodes")
    raise ProfileError(f"KFD capture {root} has neither nodes/ nor topology/nodes/")


def bdf_of(domain, location_id):
    """PCI address from KFD ``domain`` + ``location_id`` = (bus << 8) | (dev << 3) | fn."""
    loc = int(location_id)
    return f"{int(domain):04x}:{loc >> 8 & 0xFF:02x}:{loc >> 3 & 0x1F:02x}.{loc & 0x7}"


def _model_from_capture(profile):
    """CPU nodes (logical CPU counts) and GPUs (BDF, KFD CPU node, render minor) read off the capture."""
    _unused, nodes_dir = _capture_root(profile["kfd"]["capture"])
    node_ids = sorted((int(n) for n in os.listdir(nodes_dir)), key=int)
    props = {n: _read_props(os.path.join(nodes_dir, str(n), "properties")) for n in node_ids}
    cpu_nodes = [n for n in node_ids if int(props[n].get("cpu_cores_count", 0)) > 0]
    numa_of_cpu_node = {n: i for i, n in enumerate(cpu_nodes)}
    gpus = []
    for n in node_ids:
        p = props[n]
        if int(p.get("simd_count", 0)) == 0:
            continue
        links_dir = os.path.join(nodes_dir, str(n), "io_links")
        best = None
        for link in os.listdir(links_dir):
            lp = _read_props(os.path.join(links_dir, link, "properties"))
            to = int(lp["node_to"])
            if to in numa_of_cpu_node and (best is None or int(lp["weight"]) < best[0]):
                best = (int(lp["weight"]), numa_of_cpu_node[to])
        if best is None:
            raise ProfileError(f"capture node {n}: no io_link to a CPU node")
        gpus.append({
            "kfd_node": n,
            "bdf": bdf_of(p["domain"], p["location_id"]),
            "numa": best[1],
            "minor": int(p["drm_render_minor"]),
            "device_id": f"0x{int(p['device_id']):04x}",
        })
    # KFD's virtual CRAT sets cpu_cores_count = cpumask_weight(cpumask_of_node(n)): logical CPUs per node.
    numa_cpus = [int(props[n]["cpu_cores_count"]) for n in cpu_nodes]
    return numa_cpus, gpus


def _synthetic_gpus(profile, n_numa):
    syn = profile["kfd"]["synthetic"]
    if len(syn["gpu_numa"]) != len(syn["bdfs"]):
        raise ProfileError(f"profile {profile['name']}: kfd.synthetic has {len(syn['bdfs'])} bdfs but "
                           f"{len(syn['gpu_numa'])} gpu_numa entries")
    absent = set(profile["faults"].get("absent_gpus", []))
    minors = syn.get("render_minors")
    if minors is not None and (not isinstance(minors, list) or len(minors) != len(syn["bdfs"]) or len(set(minors)) != len(
            minors) or not all(isinstance(m, int) and not isinstance(m, bool) and 128 <= m < 1 << 20 for m in minors)):
        raise ProfileError(f"profile {profile['name']}: kfd.synthetic.render_minors must list one distinct render minor "
                           f"(>= 128) per GPU of kfd.synthetic.bdfs, not {minors!r}")
    gpus = []
    kfd_node = n_numa
    for idx, bdf in enumerate(syn["bdfs"]):
        if idx in absent:
            continue
        gpus.append({
            "index": idx,
            "kfd_node": kfd_node,
            "bdf": bdf,
            "numa": syn["gpu_numa"][idx],
            # DRM registration order, 128 up; a profile may set them (KFD node order need not follow it)
            "minor": minors[idx] if minors is not None else 128 + len(gpus),
            "device_id": syn["device_id"],
        })
        kfd_node += 1
    return gpus


def _link_props(frm, to, typ, weight, min_bw, max_bw, flags, sdma_mask=0):
    return {
        "type": typ, "version_major": 0, "version_minor": 0, "node_from": frm, "node_to": to,
        "weight": weight, "min_latency": 0, "max_latency": 0, "min_bandwidth": min_bw,
        "max_bandwidth": max_bw, "recommended_transfer_size": 0,
        "recommended_sdma_engine_id_mask": sdma_mask, "flags": flags,
    }


def _write_links(node_dir, sub, links):
    os.makedirs(os.path.join(node_dir, sub), exist_ok=True)
    for i, link in enumerate(links):
        d = os.path.join(node_dir, sub, str(i))
        os.makedirs(d)
        _write(os.path.join(d, "properties"), _props_text(link))


def _write_synthetic_kfd(profile, gpus, numa_cpus, first_cpu, topo):
    """Generate a KFD tree: CPU nodes 0..N-1 (one per NUMA node), then one node per GPU."""
    syn = profile["kfd"]["synthetic"]
    n_numa = len(numa_cpus)
    links_matrix = syn.get("xgmi_links")
    bw_by_links = {int(k): v for k, v in syn.get("xgmi_bandwidth", {}).items()}
    by_index = {g["index"]: g for g in gpus}
    down = _links_down(profile, len(syn["bdfs"]))

    def nlinks(a, b):
        if a == b or frozenset((a, b)) in down:
            return 0
        if links_matrix is None:  # all-to-all, one link per pair
            return 1
        return int(links_matrix[a][b])

    cpu_tpl = _read_props(os.path.join(_capture_root(syn["cpu_template"][0])[1], syn["cpu_template"][1],
                                       "properties"))
    gpu_tpl = _read_props(os.path.join(_capture_root(syn["gpu_template"][0])[1], syn["gpu_template"][1],
                                       "properties"))
    nodes = os.path.join(topo, "nodes")
    for k in range(n_numa):
        io = [_link_props(k, o, 1, 32, 0, 0, 0) for o in range(n_numa) if o != k]  # CPU-CPU (capture: type 1)
        io += [_link_props(k, g["kfd_node"], 2, 20, 312, 32000, 3, 3) for g in gpus if g["numa"] == k]
        props = dict(cpu_tpl, cpu_cores_count=numa_cpus[k], io_links_count=len(io), p2p_links_count=0,
                     cpu_core_id_base=first_cpu[k])
        d = os.path.join(nodes, str(k))
        os.makedirs(d)
        _write_links(d, "io_links", io)
        os.makedirs(os.path.join(d, "p2p_links"))
        _write(os.path.join(d, "properties"), _props_text(props))
        _write(os.path.join(d, "gpu_id"), "0\n")
        _write(os.path.join(d, "name"), "\n")
    for g in gpus:
        n = g["kfd_node"]
        io = [_link_props(n, g["numa"], 2, 20, 312, 32000, 1, 3)]
        p2p = [_link_props(n, o, 2, 52, 0, 0, 1) for o in range(n_numa) if o != g["numa"]]
        for idx in sorted(by_index):
            peer = by_index[idx]
            cnt = nlinks(g["index"], idx)
            if peer is g:
                continue
            if cnt:
                lo, hi = bw_by_links[cnt]
                io.append(_link_props(n, peer["kfd_node"], 11, syn["xgmi_weight"], lo, hi, 1, 28))
            else:  # not directly linked: reached through the host, weights as in the mi210 capture
                p2p.append(_link_props(n, peer["kfd_node"], 2, 52 if peer["numa"] == g["numa"] else 72,
                                       0, 0, 3))
        props = dict(gpu_tpl)
        props.update(syn.get("gpu_properties", {}))
        loc_dom, loc_bus, loc_rest = g["bdf"].split(":")
        dev, fn = loc_rest.split(".")
        props.update({
            "io_links_count": len(io), "p2p_links_count": len(p2p),
            "device_id": int(g["device_id"], 16), "gfx_target_version": syn["gfx_target_version"],
            "location_id": (int(loc_bus, 16) << 8) | (int(dev, 16) << 3) | int(fn),
            "domain": int(loc_dom, 16), "drm_render_minor": g["minor"], "hive_id": syn["hive_id"],
            "unique_id": syn["hive_id"] // 7 + g["index"] * 1000003,
        })
        d = os.path.join(nodes, str(n))
        os.makedirs(d)
        _write_links(d, "io_links", io)
        _write_links(d, "p2p_links", p2p)
        _write(os.path.join(d, "properties"), _props_text(props))
        _write(os.path.join(d, "gpu_id"), f"{40000 + g['index'] * 1111}\n")
        _write(os.path.join(d, "name"), "ip discovery\n")  # what the mi308x capture's GPU nodes say
    _write(os.path.join(topo, "system_properties"), "platform_oem 0\nplatform_id 0\nplatform_rev 0\n")
    _write(os.path.join(topo, "generation_id"), "1\n")


def _links_down(profile, count):
    """Fault ``xgmi_link_down``: the GPU pairs (``[a, b]``, indexes of ``kfd.synthetic.bdfs``) whose xGMI link is
    down: no type-11 io_link either way (the pair is reached through the host, as a pair without a link)."""
    pairs = profile["faults"].get("xgmi_link_down") or []
    down = set()
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2 and all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < count for i in pair) and pair[0] != pair[1]):
            raise ProfileError(f"profile {profile['name']}: faults.xgmi_link_down lists pairs [a, b] of two GPU indexes "
                               f"of kfd.synthetic.bdfs (0-{count - 1}), not {pair!r}")
        down.add(frozenset(pair))
    return down


# ----------------------------------------------------------------------------------------- CPU layout
class CpuLayout:
    """Linux-style CPU numbering of a profile, as on EPYC: first threads of all cores 0..C-1 (NUMA node by
    NUMA node), SMT siblings at +C (numactl -H on EPYC, e.g. smi/numactl-H__mi355x-8gpu-2s-epyc9575f: node0
    0-63,128-191). Cores of a NUMA node are consecutive; every ``cores_per_l3`` of them share one L3 (a CCD
    or CCX), so an L3 never spans two NUMA nodes or packages.

    ``numa`` = CPU list per NUMA node, ``first_core`` = first core index per NUMA node, ``packages`` = CPU
    list per package, ``l3`` = CPU list per L3 domain (in core order), ``cpu`` = per CPU
    ``(core, core_id, package, l3, siblings)`` with ``core`` the global core index and ``core_id`` the
    index inside its package (what sysfs ``core_id`` shows)."""

    def __init__(self, profile, numa_cpus):
        cpu = profile["cpu"]
        name = profile["name"]
        tpc, nps = int(cpu["threads_per_core"]), int(cpu["nps"])
        per_l3 = cpu.get("cores_per_l3")
        if not isinstance(per_l3, int) or isinstance(per_l3, bool) or per_l3 < 1:
            raise ProfileError(f"profile {name}: cpu.cores_per_l3 must be a positive integer, not {per_l3!r}")
        if len(numa_cpus) % nps:
            raise ProfileError(f"profile {name}: {len(numa_cpus)} NUMA nodes is not a multiple of nps={nps}")
        for k, n in enumerate(numa_cpus):
            if n % tpc:
                raise ProfileError(f"profile {name}: NUMA node {k} has {n} CPUs, not a multiple of "
                                   f"threads_per_core={tpc}")
            if n // tpc % per_l3:
                raise ProfileError(f"profile {name}: NUMA node {k} has {n // tpc} cores, not a multiple of "
                                   f"cores_per_l3={per_l3} (an L3 must not span NUMA nodes)")
        self.threads_per_core = tpc
        self.total_cores = total = sum(numa_cpus) // tpc
        self.nr_cpus = sum(numa_cpus)
        self.numa, self.first_core, self.packages, self.l3, self.cpu = [], [], [], [], {}
        core = 0
        for k, n in enumerate(numa_cpus):
            pkg = k // nps
            if pkg == len(self.packages):
                self.packages.append([])
                pkg_first_core = core
            self.first_core.append(core)
            cpus = []
            for _unused in range(n // tpc):
                if (core - self.first_core[k]) % per_l3 == 0:
                    self.l3.append([])
                siblings = [core + t * total for t in range(tpc)]
                for c in siblings:
                    self.cpu[c] = (core, core - pkg_first_core, pkg, len(self.l3) - 1, siblings)
                cpus.extend(siblings)
                self.l3[-1].extend(siblings)
                core += 1
            self.numa.append(sorted(cpus))
            self.packages[pkg].extend(cpus)
        self.packages = [sorted(p) for p in self.packages]
        self.l3 = [sorted(d) for d in self.l3]


def cpulist(cpus):
    """Kernel list format: ``0-15,64-79``."""
    cpus = sorted(cpus)
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def cpumask(cpus, nr_cpus):
    """Kernel mask format (``local_cpus``): 32-bit hex words, most significant first, comma separated."""
    value = 0
    for c in cpus:
        value |= 1 << c
    words = max(1, (nr_cpus + 31) // 32)
    return ",".join(f"{(value >> (32 * w)) & 0xFFFFFFFF:08x}" for w in reversed(range(words)))


# ---------------------------------------------------------------------------------------------- build
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


_files_written = [0]  # by _write and _copy during the current build (cheaper than walking the tree after)


def _write(path, text):
    # os.open/os.write: a build writes ~10^4 small files, and this is ~3x cheaper than open().write()
    fd = os.open(path, _WRITE_FLAGS, 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)
    _files_written[0] += 1


def _copy(src, dst):
    """copytree's copy function: contents only (the capture's timestamps and modes are not part of it)."""
    shutil.copyfile(src, dst)
    _files_written[0] += 1


def _prepare_dest(dest, force):
    """Empty DEST's contents but keep DEST itself: it may be a docker bind mount, and a replaced
    directory would no longer be the one the container sees."""
    if not os.path.isdir(dest):
        if os.path.lexists(dest):
            raise ProfileError(f"destination {dest} exists and is not a directory")
        os.makedirs(dest)
        return
    entries = os.listdir(dest)
    if entries and MARKER not in entries and not force:
        raise ProfileError(f"destination {dest} is not empty and holds no {MARKER} marker (not a sysroot "
                           "built here); empty it yourself or pass --force")
    for entry in entries:
        path = os.path.join(dest, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)


def _cpu_int(profile, key):
    value = profile["cpu"].get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ProfileError(f"profile {profile['name']}: cpu.{key} must be a positive integer, not {value!r}")
    return value


def _hardware(profile):
    """``(layout, gpus)`` of a loaded profile: the CPU layout and the GPUs (BDF, NUMA node, render minor)."""
    try:
        return _hardware_of(profile)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:  # missing or mistyped key
        raise ProfileError(f"profile {profile['name']}: malformed cpu or kfd section ({type(exc).__name__}: "
                           f"{exc})") from exc


def _hardware_of(profile):
    for key in ("threads_per_core", "nps", "cores_per_l3"):
        _cpu_int(profile, key)
    if "capture" in profile["kfd"]:
        if profile["faults"].get("absent_gpus"):
            raise ProfileError(f"profile {profile['name']}: absent_gpus needs a synthetic KFD tree")
        numa_cpus, gpus = _model_from_capture(profile)
    else:
        per_numa, rest = divmod(_cpu_int(profile, "cores_per_socket"), _cpu_int(profile, "nps"))
        if rest:
            raise ProfileError(f"profile {profile['name']}: cpu.cores_per_socket is not a multiple of cpu.nps")
        numa_cpus = [per_numa * _cpu_int(profile, "threads_per_core")] * _cpu_int(profile, "sockets") * \
            profile["cpu"]["nps"]
        gpus = _synthetic_gpus(profile, len(numa_cpus))
        if any(not 0 <= g["numa"] < len(numa_cpus) for g in gpus):
            raise ProfileError(f"profile {profile['name']}: kfd.synthetic.gpu_numa names a NUMA node outside "
                               f"0-{len(numa_cpus) - 1}")
    if not numa_cpus or not all(numa_cpus):
        raise ProfileError(f"profile {profile['name']}: a NUMA node without CPUs ({numa_cpus})")
    return CpuLayout(profile, numa_cpus), gpus


def machine(profile_name):
    """The machine a profile describes, independent of any built tree: what hwloc must find in it.

    ``{"cpus", "threads_per_core", "packages": [cpulist], "numa": [cpulist], "l3": [cpulist],
    "cores": [cpulist] (core index order), "memory_kib": [per NUMA node], "gpus": [{"bdf", "numa", "minor"}]}``
    in GPU (KFD node) order, ``minor`` its render minor; a GPU's ``numa`` is -1 when the profile hides it
    (``numa_node_minus1``)."""
    profile = load_profile(profile_name)
    layout, gpus = _hardware(profile)
    vm = profile["faults"].get("numa_node_minus1", False)
    cores = {}
    for cpu, (core, _unused, _unused, _unused, _unused) in layout.cpu.items():
        cores.setdefault(core, []).append(cpu)
    return {
        "cpus": layout.nr_cpus, "threads_per_core": layout.threads_per_core,
        "packages": [cpulist(p) for p in layout.packages], "numa": [cpulist(n) for n in layout.numa],
        "l3": [cpulist(d) for d in layout.l3], "cores": [cpulist(cores[k]) for k in sorted(cores)],
        "memory_kib": _node_memory_kib(profile, len(layout.numa)),
        "gpus": [{"bdf": g["bdf"], "numa": -1 if vm else g["numa"], "minor": g["minor"]} for g in gpus],
    }


def build(profile_name, dest, force=False):
    """Materialize PROFILE_NAME into DEST (created if missing, emptied and refilled if present).

    Returns a summary dict (profile, files written, seconds)."""
    start = time.monotonic()
    profile = load_profile(profile_name)
    faults = profile["faults"] or {}
    layout, gpus = _hardware(profile)  # validates the profile before DEST is touched
    if faults.get("xgmi_link_down") and "capture" in profile["kfd"]:
        raise ProfileError(f"profile {profile_name}: faults.xgmi_link_down needs a kfd.synthetic profile (a "
                           "capture's KFD tree is copied verbatim)")
    if faults.get("xgmi_link_down"):
        _links_down(profile, len(profile["kfd"]["synthetic"]["bdfs"]))
    _cache_sizes(profile)
    _node_memory_kib(profile, len(layout.numa))
    _memory_blocks(profile, len(layout.numa), faults)
    _pcie_plan(profile, gpus, layout, faults)  # the PCIe tree fits, before DEST is touched
    _gpu_busy_faults(profile, len(gpus))  # the GPU utilization faults, temperatures and the OS release, before DEST
    _idle_temperatures(profile)           # is touched
    _os_release(profile)
    if profile.get("pcie_tree") and profile.get("rdma"):  # the GID layout, before DEST is touched
        _gid_table(profile, profile["rdma"], 0, "0000:00:00.0", "0000:0000:0000:0000",
                   profile["rdma"].get("link_layer", "Ethernet"))
    _rdma_faults(profile, faults)  # the RDMA faults name NICs the profile has
    dest = os.path.abspath(dest)
    _prepare_dest(dest, force)
    _files_written[0] = 0

    topo = os.path.join(dest, KFD_TOPOLOGY)
    kfd = profile["kfd"]
    if "capture" in kfd:
        src, _unused = _capture_root(kfd["capture"])
        if src.endswith("topology"):
            shutil.copytree(src, topo, copy_function=_copy)
        else:  # capture holds nodes/ only
            os.makedirs(topo)
            shutil.copytree(os.path.join(src, "nodes"), os.path.join(topo, "nodes"), copy_function=_copy)
    else:
        os.makedirs(os.path.join(topo, "nodes"))
        _write_synthetic_kfd(profile, gpus, [len(n) for n in layout.numa], layout.first_core, topo)
    _truncate_kfd(topo, faults.get("kfd_truncate"))

    _write_pci(dest, profile, gpus, layout, faults)
    _write_amdgpu(dest, profile, gpus, faults)
    _write_iommu_groups(dest, profile)
    _write_dev(dest, gpus)
    _write_cpus(dest, profile, layout, faults)
    _write_nodes(dest, profile, layout)
    _write_memory_blocks(dest, profile, len(layout.numa), faults)
    _write_misc(dest, profile, layout)
    _write(os.path.join(dest, MARKER), profile_name + "\n")
    return {"profile": profile_name, "dest": dest, "files": _files_written[0],
            "seconds": round(time.monotonic() - start, 3)}


def _truncate_kfd(topo, spec):
    """Fault: a KFD tree cut short (a node without ``properties``, a node without ``io_links/``)."""
    if not spec:
        return
    for node in spec.get("drop_properties", []):
        os.unlink(os.path.join(topo, "nodes", str(node), "properties"))
        _files_written[0] -= 1
    for node in spec.get("drop_io_links", []):
        links = os.path.join(topo, "nodes", str(node), "io_links")
        _files_written[0] -= sum(len(f) for _unused, _unused, f in os.walk(links))
        shutil.rmtree(links)


def _write_pci(dest, profile, gpus, layout, faults):
    pcie = profile["pcie"]
    degraded = {d["gpu"]: d for d in faults.get("pcie_degraded", [])}
    all_cpus = list(range(layout.nr_cpus))
    vm = faults.get("numa_node_minus1", False)
    gpu_dirs = _write_pcie_tree(dest, profile, gpus, layout, faults)
    for pos, g in enumerate(gpus):
        d = gpu_dirs.get(g["bdf"]) or os.path.join(dest, PCI_DEVICES, g["bdf"])
        os.makedirs(d, exist_ok=True)
        local = all_cpus if vm else layout.numa[g["numa"]]
        cur = degraded.get(pos, {})
        values = {
            "vendor": AMD_VENDOR, "device": g["device_id"], "class": pcie.get("gpu_class", ACCEL_CLASS),
            "subsystem_vendor": AMD_VENDOR,
            "numa_node": "-1" if vm else str(g["numa"]),
            "local_cpulist": cpulist(local), "local_cpus": cpumask(local, layout.nr_cpus),
            "current_link_width": str(cur.get("width", pcie["width"])),
            "max_link_width": str(pcie.get("max_width", pcie["width"])),
            "current_link_speed": cur.get("speed", pcie["speed"]),
            "max_link_speed": pcie.get("max_speed", pcie["speed"]),
            "enable": "1",
        }
        for key, val in values.items():
            _write(os.path.join(d, key), f"{val}\n")
        # amdgpu's fw_version/<name>_fw_version, printed "0x%08x"
        firmware = profile.get("firmware") or {}
        if firmware:
            os.makedirs(os.path.join(d, "fw_version"), exist_ok=True)
            for name, version in sorted(firmware.items()):
                _write(os.path.join(d, "fw_version", f"{name}_fw_version"), f"0x{int(version):08x}\n")


def _pci_numa_files(numa, layout, vm):
    local = list(range(layout.nr_cpus)) if vm else layout.numa[numa]
    return {"numa_node": "-1" if vm else str(numa), "local_cpulist": cpulist(local),
            "local_cpus": cpumask(local, layout.nr_cpus)}


def _pcie_plan(profile, gpus, layout, faults):
    """The profile's PCIe tree (``sim/pcie_tree.py`` ``profile_plan``), None without ``pcie_tree``; a ProfileError when
    it does not fit (``build`` asks before the destination is touched)."""
    if not profile.get("pcie_tree"):
        return None
    try:
        return pcie_tree.profile_plan(profile["pcie_tree"], profile.get("rdma"), gpus, faults, len(layout.numa))
    except (ValueError, TypeError, AttributeError) as exc:
        raise ProfileError(f"profile {profile['name']}: pcie_tree: {exc}") from exc


def _write_pcie_tree(dest, profile, gpus, layout, faults):
    """Profiles with ``pcie_tree``: the bridges above each GPU, NICs (``rdma``: RDMA devices; ``pcie_tree.nics``:
    NICs that are none), every function's binary ``config`` and AER counters, ``sys/bus/pci/devices/<bdf>`` as
    symlinks into ``sys/devices`` (as Linux shows them) and ``sys/class/infiniband/<name>`` for RDMA NICs. Returns
    ``{gpu bdf: its real directory}`` ({} without the key)."""
    layout_plan = _pcie_plan(profile, gpus, layout, faults)
    if not layout_plan:
        return {}
    rdma = profile.get("rdma") or {}
    vm = faults.get("numa_node_minus1", False)
    ids = layout_plan["ids"]
    pcie = profile["pcie"]
    gpu_class = pcie.get("gpu_class", ACCEL_CLASS)
    speed, width = pcie.get("max_speed", pcie["speed"]).split()[0], int(pcie.get("max_width", pcie["width"]))
    rdma_faults = _rdma_faults(profile, faults)
    # a NIC trained below its link (faults.nic_pcie_degraded): current_link_* only, max_link_* keep the capability
    nic_links = {layout_plan["nics"][k]["bdf"]: spec for k, spec in rdma_faults["degraded"].items()}
    gpu_by_bdf = {g["bdf"]: g for g in gpus}
    gpu_dirs = {}
    links = os.path.join(dest, PCI_DEVICES)
    os.makedirs(links, exist_ok=True)
    aspm = layout_plan["aspm"]
    for device in layout_plan["devices"]:
        kind = device["kind"]
        d = pcie_tree.sysfs_dir(dest, device)
        os.makedirs(d, exist_ok=True)
        os.symlink(os.path.relpath(d, links), os.path.join(links, device["bdf"]))
        if kind == "gpu":
            gpu_dirs[device["bdf"]] = d
            ident = (AMD_VENDOR, gpu_by_bdf[device["bdf"]]["device_id"], gpu_class)
            space = pcie_tree.config_bytes(*ident, 0, speed, width, ari=True, aspm=aspm, rebar=layout_plan["rebar"],
                                           multifunction=device["multifunction"])
        else:
            if kind == "root_port":
                ident = ids["nic_port"] if device["serves"] == "nic" else ids["root_port"]
            else:
                ident = ids["nic"] if kind == "nic" else ids["switch"]
            port = {"root_port": 4, "switch_up": 5, "switch_down": 6, "nic": 0}[kind]
            acs = None if kind == "nic" else layout_plan["acs"].get(device["bdf"], layout_plan["acs_default"])
            space = pcie_tree.config_bytes(*ident, port, speed, width, bridge=device.get("bus_range"), acs=acs,
                                           aspm=aspm, ari_forwarding=port in (4, 6), ari=kind == "nic")
            degraded = nic_links.get(device["bdf"], {})
            values = {"vendor": ident[0], "device": ident[1], "class": ident[2],
                      "current_link_width": str(degraded.get("width", width)), "max_link_width": str(width),
                      "current_link_speed": degraded.get("speed", f"{speed} GT/s PCIe"),
                      "max_link_speed": f"{speed} GT/s PCIe", "enable": "1"}
            values.update(_pci_numa_files(device["numa"], layout, vm))
            for key, val in values.items():
                _write(os.path.join(d, key), f"{val}\n")
        with open(os.path.join(d, "config"), "wb") as fh:
            fh.write(space)
        _files_written[0] += 1
        if kind == "nic" or (kind == "gpu" and device["physical"]):  # CPX partitions: no PCI function of their own
            counts = layout_plan["aer"].get(device["bdf"], {})
            for aer_kind in ("correctable", "nonfatal", "fatal"):
                _write(os.path.join(d, f"aer_dev_{aer_kind}"), pcie_tree.aer_text(aer_kind, counts.get(aer_kind)))
    if layout_plan["nic_class"]:  # NICs of another driver's class (HPE Slingshot: cxi0..), no RDMA device
        _write_nic_class(dest, layout_plan["nic_class"], [os.path.realpath(os.path.join(links, nic["bdf"]))
                                                          for nic in layout_plan["nics"]])
    ib = os.path.join(dest, "sys", "class", "infiniband")
    net = os.path.join(dest, "sys", "class", "net")
    port_spec = dict(RDMA_PORT, **(rdma.get("port") or {}))
    routes = []
    for k, nic in enumerate(layout_plan["nics"] if layout_plan["rdma"] else ()):  # pcie_tree.nics: no RDMA device
        nic_dir = os.path.realpath(os.path.join(links, nic["bdf"]))
        card = rdma_faults["identity"].get(k, k)  # the card in slot k: its name, GUID, MAC and rail subnet
        name = f"{rdma.get('name_prefix', 'mlx5_')}{card}"
        ib_dir = os.path.join(nic_dir, "infiniband", name)
        port_dir = os.path.join(ib_dir, "ports", "1")
        os.makedirs(port_dir)
        os.symlink(os.path.join("..", ".."), os.path.join(ib_dir, "device"))
        guid = f"b83f:d203:00{card:02x}:{0x1c2d + card:04x}"
        _write(os.path.join(ib_dir, "node_guid"), guid + "\n")
        if rdma.get("fw_ver"):
            _write(os.path.join(ib_dir, "fw_ver"), f"{rdma['fw_ver']}\n")
        port = dict(port_spec, **rdma_faults["down"].get(k, {}))
        for key in ("state", "phys_state", "rate"):
            if port.get(key):
                _write(os.path.join(port_dir, key), f"{port[key]}\n")
        os.makedirs(os.path.join(port_dir, "counters"))
        for counter in ("link_downed", "link_error_recovery"):
            _write(os.path.join(port_dir, "counters", counter), f"{int(port.get(counter, 0))}\n")
        layer = rdma.get("link_layer", "Ethernet")
        _write(os.path.join(port_dir, "link_layer"), layer + "\n")
        addresses = _nic_addresses(rdma, k in rdma_faults["no_ipv4"])
        _write_gid_table(port_dir, _gid_table(profile, rdma, card, nic["bdf"], guid, layer, addresses))
        os.makedirs(ib, exist_ok=True)
        os.symlink(os.path.relpath(ib_dir, ib), os.path.join(ib, name))
        if layer == "Ethernet":
            netdev = _netdev_name(nic["bdf"])
            up = _named(port.get("phys_state")) == "LinkUp"
            nd_dir = os.path.join(nic_dir, "net", netdev)
            os.makedirs(nd_dir)
            os.symlink(os.path.join("..", ".."), os.path.join(nd_dir, "device"))
            # drivers/net: operstate "up"/"down", speed in Mb/s (SPEED_UNKNOWN -1 without a link), dev_port 0
            for key, val in (("address", ":".join("%02x" % b for b in _mac(card))), ("operstate", "up" if up else "down"),
                             ("speed", rdma.get("netdev_speed_mbps", -1) if up else -1), ("dev_port", 0)):
                _write(os.path.join(nd_dir, key), f"{val}\n")
            os.makedirs(net, exist_ok=True)
            os.symlink(os.path.relpath(nd_dir, net), os.path.join(net, netdev))
            routes.extend((netdev, ipaddress.ip_network(f"{ip}/{IPV4_PREFIX}", strict=False))
                          for ip in _ipv4_addresses(addresses, card))
    if layout_plan["rdma"] and layout_plan["nics"]:
        _write_routes(dest, routes)
    return gpu_dirs


# The port files of a simulated RDMA port (drivers/infiniband/core/sysfs.c): state_show "%d: %s", phys_state_show
# "%d: %s"; rate (rate_show "%d Gb/sec (%dX%s)") and fw_ver only where the profile's rdma block gives them.
RDMA_PORT = {"state": "4: ACTIVE", "phys_state": "5: LinkUp", "link_downed": 0, "link_error_recovery": 0}
# The prefix of the connected route of each simulated netdev address (10.<k>.0.1 -> 10.<k>.0.0/24)
IPV4_PREFIX = 24


def _named(text):
    return str(text or "").partition(":")[2].strip()


def _mac(k):
    return bytes([0xb8, 0x3f, 0xd2, k, 0x1c, 0x2d])


def _netdev_name(bdf):
    """systemd's predictable name for PCI bus <n> slot 0, function 0, physical port 0: ``enp<n>s0np0``."""
    return "enp%ds0np0" % pcie_tree.parse_bdf(bdf)[1]


def _nic_addresses(rdma, no_ipv4):
    """The netdev addresses of a NIC: ``rdma.addresses``, without the IPv4 ones for a NIC of ``faults.rdma_no_ipv4``."""
    addresses = rdma.get("addresses", ["link_local", "ipv4"])
    if not no_ipv4:
        return addresses
    return [a for a in addresses if a != "ipv4" and not (a != "link_local" and ":" not in str(a))]


def _ipv4_addresses(addresses, k):
    return [f"10.{k}.0.1" if a == "ipv4" else str(a) for a in addresses
            if a == "ipv4" or (a != "link_local" and ":" not in str(a))]


def _write_routes(dest, routes):
    """``proc/net/route`` as linux net/ipv4/fib_trie.c ``fib_route_seq_show`` prints the main table: a header and one
    line per route, each padded to 127 characters; addresses and mask are the network-order ``__be32`` printed with
    ``%08X`` on a little-endian host (the bytes reversed). One connected route (flags RTF_UP, no gateway) per address."""
    def hex32(address):
        return "%08X" % int.from_bytes(address.packed, "little")
    lines = ["%-127s" % "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"]
    for netdev, network in routes:
        lines.append("%-127s" % "\t".join((netdev, hex32(network.network_address), "00000000", "0001", "0", "0", "0",
                                           hex32(network.netmask), "0", "0", "0")))
    os.makedirs(os.path.join(dest, "proc", "net"), exist_ok=True)
    _write(os.path.join(dest, "proc", "net", "route"), "\n".join(lines) + "\n")


def _rdma_faults(profile, faults):
    """The RDMA faults by NIC position (``mlx5_<k>``): ``{"degraded": {k: {width, speed}}, "down": {k: port files},
    "no_ipv4": {k}}``; a ProfileError names a malformed entry."""
    count = int((profile.get("rdma") or {}).get("nics", 0))
    name = profile["name"]

    def position(key, value):
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
            raise ProfileError(f"profile {name}: faults.{key}: NIC {value!r} is not one of the {count} NICs "
                               f"(0..{count - 1})")
        return value
    degraded, down = {}, {}
    for item in faults.get("nic_pcie_degraded") or []:
        if not isinstance(item, dict) or not isinstance(item.get("width"), int) or \
                not str(item.get("speed", "")).endswith("GT/s PCIe"):
            raise ProfileError(f"profile {name}: faults.nic_pcie_degraded entries are {{nic, width, speed: "
                               f"'<n> GT/s PCIe'}}, not {item!r}")
        degraded[position("nic_pcie_degraded", item.get("nic"))] = {"width": item["width"], "speed": item["speed"]}
    for item in faults.get("rdma_port_down") or []:
        keys = {"nic", "state", "phys_state", "rate", "link_downed", "link_error_recovery"}
        if not isinstance(item, dict) or set(item) - keys or not (item.get("state") and item.get("phys_state")):
            raise ProfileError(f"profile {name}: faults.rdma_port_down entries are {{nic, state, phys_state[, rate, "
                               f"link_downed, link_error_recovery]}}, not {item!r}")
        down[position("rdma_port_down", item["nic"])] = {k: v for k, v in item.items() if k != "nic"}
    no_ipv4 = {position("rdma_no_ipv4", k) for k in faults.get("rdma_no_ipv4") or []}
    # two NIC cards swapped between their slots, cables and names with them (names that follow the card: udev rules
    # keyed on the GUID/MAC): the NIC below GPU a's switch is NIC b, on rail b's subnet, and the other way round
    swapped = faults.get("rail_swapped")
    identity = {}
    if swapped is not None:
        if not isinstance(swapped, list) or len(swapped) != 2 or swapped[0] == swapped[1]:
            raise ProfileError(f"profile {name}: faults.rail_swapped is a list of two different NIC positions, "
                               f"not {swapped!r}")
        a, b = (position("rail_swapped", k) for k in swapped)
        identity = {a: b, b: a}
    return {"degraded": degraded, "down": down, "no_ipv4": no_ipv4, "identity": identity}


def _write_nic_class(dest, name, nic_dirs):
    """``sys/class/<name>/<name><k>`` -> ``<NIC's PCI dir>/<name>/<name><k>``, whose ``device`` links back to the NIC,
    as a driver's class device below its PCI parent (HewlettPackard/shs-cxi-driver: sys/class/cxi/cxi*/device)."""
    cls = os.path.join(dest, "sys", "class", name)
    os.makedirs(cls)
    for k, nic_dir in enumerate(nic_dirs):
        cdir = os.path.join(nic_dir, name, f"{name}{k}")
        os.makedirs(cdir)
        os.symlink(os.path.join("..", ".."), os.path.join(cdir, "device"))
        os.symlink(os.path.relpath(cdir, cls), os.path.join(cls, f"{name}{k}"))


# GID tables of the simulated RDMA ports, as drivers/infiniband/core/sysfs.c shows them under ports/<n>: gids/<i> for
# every table entry ("%pI6", the full 8-group form; an empty entry reads as all zeros), gid_attrs/types/<i>
# ("IB/RoCE v1" | "RoCE v2", ib_cache_gid_type_str in drivers/infiniband/core/cache.c) and gid_attrs/ndevs/<i>
# (the netdev). Reading types/ndevs of an empty entry fails with EINVAL on a real node; a file cannot, so empty
# entries have none here. A RoCE port holds one RoCE v1 and one RoCE v2 entry per address of its netdev, link-local
# first (tests/fixtures/acceptance/show_gids__connectx6-mlx5_0__ibm-spectrumscale-pr-4.txt); an InfiniBand port
# holds its port GID (subnet prefix fe80::/64 + port GUID) at index 0.
GID_TYPES = ("IB/RoCE v1", "RoCE v2")


def _gid_table(profile, rdma, k, bdf, guid, layer, addresses=None):
    """``[(gid text, type, netdev) or None]`` for one port: ``rdma.gid_table_len`` entries (default 16; mlx5 has
    255, fewer keep trees small), filled from ``addresses`` (default ``rdma.addresses``: ``link_local``, ``ipv4`` =
    10.<k>.0.1 on NIC k, or a literal address; default [link_local, ipv4])."""
    size = rdma.get("gid_table_len", 16)
    addresses = rdma.get("addresses", ["link_local", "ipv4"]) if addresses is None else addresses
    if not isinstance(size, int) or isinstance(size, bool) or size < 1 or not isinstance(addresses, list):
        raise ProfileError(f"profile {profile['name']}: rdma.gid_table_len must be a positive integer and "
                           f"rdma.addresses a list, not {size!r} / {addresses!r}")
    table = []
    if layer == "InfiniBand":
        table.append((ipaddress.IPv6Address("fe80::" + guid).exploded, GID_TYPES[0], None))
    else:
        mac = _mac(k)
        netdev = _netdev_name(bdf)
        for address in addresses:
            if address == "link_local":  # modified EUI-64 from the MAC (RFC 4291 appendix A)
                iid = bytes([mac[0] ^ 0x02]) + mac[1:3] + b"\xff\xfe" + mac[3:]
                gid = ipaddress.IPv6Address(b"\xfe\x80" + bytes(6) + iid)
            elif address == "ipv4":
                gid = ipaddress.IPv6Address("::ffff:10.%d.0.1" % k)
            else:
                try:
                    parsed = ipaddress.ip_address(str(address))
                except ValueError as exc:
                    raise ProfileError(f"profile {profile['name']}: rdma.addresses: {exc}") from exc
                gid = ipaddress.IPv6Address("::ffff:%s" % parsed) if parsed.version == 4 else parsed
            table.extend((gid.exploded, kind, netdev) for kind in GID_TYPES)
    if len(table) > size:
        raise ProfileError(f"profile {profile['name']}: rdma.addresses need {len(table)} GID entries, more than "
                           f"rdma.gid_table_len {size}")
    return table + [None] * (size - len(table))


def _write_gid_table(port_dir, table):
    for sub in ("gids", os.path.join("gid_attrs", "types"), os.path.join("gid_attrs", "ndevs")):
        os.makedirs(os.path.join(port_dir, sub))
    for index, entry in enumerate(table):
        _write(os.path.join(port_dir, "gids", str(index)), (entry[0] if entry else ipaddress.IPv6Address(0).exploded)
               + "\n")
        if entry:
            _write(os.path.join(port_dir, "gid_attrs", "types", str(index)), entry[1] + "\n")
            if entry[2]:
                _write(os.path.join(port_dir, "gid_attrs", "ndevs", str(index)), entry[2] + "\n")


def _pci_device_dir(dest, bdf):
    return os.path.join(dest, PCI_DEVICES, bdf)


# amdgpu's hwmon channels (amdgpu_pm.c: temp1 edge, temp2 junction, temp3 mem; millidegrees Celsius) and the idle
# readings a profile without amdgpu.temperatures gets: junction 55 °C and mem 43 °C are the example idle node of AMD's
# acceptance guide (docs/common/health-checks.md "Monitor Utilization Metrics": GPU_T 55 °C, MEM_T 43 °C); edge is
# illustrative. Profiles of MI300-series GPUs list junction and mem only: amdgpu hides the edge channel on GC 9.4.3
HWMON_CHANNELS = {"edge": 1, "junction": 2, "mem": 3}
IDLE_TEMPERATURES = {"edge": 50000, "junction": 55000, "mem": 43000}


def _gpu_busy_faults(profile, count):
    """Fault ``gpu_busy``: ``{gpu position: {gpu_busy_percent, mem_busy_percent, temperatures}}`` (a GPU busy and hot
    while no process holds it), checked before the tree is touched."""
    out = {}
    for item in profile["faults"].get("gpu_busy") or []:
        gpu = item.get("gpu") if isinstance(item, dict) else None
        busy = [item.get(k, 0) for k in ("gpu_busy_percent", "mem_busy_percent")] if isinstance(item, dict) else []
        temps = (item.get("temperatures") or {}) if isinstance(item, dict) else {}
        if not (isinstance(gpu, int) and not isinstance(gpu, bool) and 0 <= gpu < count
                and all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= 100 for b in busy)
                and isinstance(temps, dict) and set(temps) <= set(HWMON_CHANNELS)
                and all(isinstance(t, int) and not isinstance(t, bool) for t in temps.values())):
            raise ProfileError(f"profile {profile['name']}: faults.gpu_busy lists {{gpu: 0-{count - 1}, "
                               f"gpu_busy_percent: 0-100, mem_busy_percent: 0-100, temperatures: {{edge|junction|mem: "
                               f"millidegrees}}}}, not {item!r}")
        out[gpu] = item
    return out


def _idle_temperatures(profile):
    """``amdgpu.temperatures``: hwmon label -> millidegrees of an idle GPU (IDLE_TEMPERATURES when not given),
    checked before the tree is touched."""
    temperatures = (profile.get("amdgpu") or {}).get("temperatures") or IDLE_TEMPERATURES
    if not (isinstance(temperatures, dict) and set(temperatures) <= set(HWMON_CHANNELS)
            and all(isinstance(t, int) and not isinstance(t, bool) for t in temperatures.values())):
        raise ProfileError(f"profile {profile['name']}: amdgpu.temperatures maps edge, junction, mem to millidegrees, "
                           f"not {temperatures!r}")
    return temperatures


def _os_release(profile):
    """``os_release``: os-release(5) fields -> strings (checked before the tree is touched)."""
    release = profile.get("os_release") or {}
    if not (isinstance(release, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in release.items())):
        raise ProfileError(f"profile {profile['name']}: os_release maps os-release(5) fields to strings, not {release!r}")
    return release


def _write_amdgpu(dest, profile, gpus, faults):
    """amdgpu's files of each physical GPU (its lowest PCI function: CPX partitions are functions of one device in
    this tree, but amdgpu has one device and amdkfd ORs the partition into location_id): partition modes,
    vbios_version, mem_info_vram_total, ras/<block>_err_count ("ue: N\nce: N"), ras/gpu_vram_bad_pages,
    gpu_busy_percent, mem_busy_percent and hwmon/hwmon<N>/temp<i>_{input,label}; per-GPU faults change firmware,
    VBIOS, partition, counters, utilization and temperatures. Also the kernel release, the ROCm version, the OS
    release (etc/os-release), the boot's kernel log, and the process table the GPU users are read from: PID 1
    (systemd) with its standard descriptors on /dev/null, no process holding /dev/kfd or a render node (an idle
    node)."""
    spec = profile.get("amdgpu") or {}
    busy_faults = _gpu_busy_faults(profile, len(gpus))
    firmware = profile.get("firmware") or {}
    ras = {(e["gpu"], e["block"]): e for e in faults.get("ras_errors", [])}
    bad = {e["gpu"]: e["count"] for e in faults.get("bad_pages", [])}
    fw_over = {e["gpu"]: e for e in faults.get("gpu_firmware", [])}
    part_over = {e["gpu"]: e for e in faults.get("gpu_partition", [])}
    replays = {e["gpu"]: e["count"] for e in faults.get("pcie_replays", [])}
    first = {}
    for pos, g in enumerate(gpus):
        slot = g["bdf"].rsplit(".", 1)[0]
        if slot not in first or g["bdf"] < gpus[first[slot]]["bdf"]:
            first[slot] = pos
    temperatures = _idle_temperatures(profile)
    for hwmon, pos in enumerate(sorted(first.values())):
        d = _pci_device_dir(dest, gpus[pos]["bdf"])
        over = fw_over.get(pos, {})
        part = part_over.get(pos, {})
        busy = busy_faults.get(pos, {})
        # amdgpu_pm.c: the SMU's activity in percent; hwmon: one directory per device (hwmon numbers are the
        # kernel's, global over the node's devices: illustrative here)
        _write(os.path.join(d, "gpu_busy_percent"), f"{busy.get('gpu_busy_percent', 0)}\n")
        _write(os.path.join(d, "mem_busy_percent"), f"{busy.get('mem_busy_percent', 0)}\n")
        hw = os.path.join(d, "hwmon", f"hwmon{hwmon + 2}")
        os.makedirs(hw, exist_ok=True)
        _write(os.path.join(hw, "name"), "amdgpu\n")
        for label, millidegrees in sorted(dict(temperatures, **(busy.get("temperatures") or {})).items()):
            channel = HWMON_CHANNELS[label]
            _write(os.path.join(hw, f"temp{channel}_input"), f"{millidegrees}\n")
            _write(os.path.join(hw, f"temp{channel}_label"), f"{label}\n")
        values = {
            "current_compute_partition": part.get("compute", spec.get("compute_partition")),
            "available_compute_partition": spec.get("available_compute_partition"),
            "current_memory_partition": part.get("memory", spec.get("memory_partition")),
            "available_memory_partition": spec.get("available_memory_partition"),
            "vbios_version": over.get("vbios", spec.get("vbios_version")),
            "mem_info_vram_total": spec.get("vram_bytes"),
            # the CPU-visible VRAM: all of it with a large BAR (amdgpu_vram_mgr.c mem_info_vis_vram_total)
            "mem_info_vis_vram_total": spec.get("vis_vram_bytes", spec.get("vram_bytes")),
            # NAKs generated + received on the GPU's link (amdgpu_device.c DOC pcie_replay_count); 0 on a good link
            "pcie_replay_count": replays.get(pos, 0),
        }
        for key, val in values.items():
            if val is not None:
                _write(os.path.join(d, key), f"{val}\n")
        fw = dict(firmware, **(over.get("firmware") or {}))
        if over.get("firmware"):
            os.makedirs(os.path.join(d, "fw_version"), exist_ok=True)
            for name, version in sorted(fw.items()):
                _write(os.path.join(d, "fw_version", f"{name}_fw_version"), f"0x{int(version):08x}\n")
        if spec.get("ras_blocks"):
            os.makedirs(os.path.join(d, "ras"), exist_ok=True)
            deferred = set(spec.get("ras_deferred_blocks") or [])
            for block in spec["ras_blocks"]:
                err = ras.get((pos, block), {})
                # UMC and the ACA path (MI300/MI350) add the deferred count: amdgpu_ras.c amdgpu_ras_sysfs_read
                text = f"ue: {err.get('ue', 0)}\nce: {err.get('ce', 0)}\n"
                if block in deferred or err.get("de"):
                    text += f"de: {err.get('de', 0)}\n"
                _write(os.path.join(d, "ras", f"{block}_err_count"), text)
            # one line per retired page, "gpu pfn : gpu page size : flags" (amdgpu_ras.c), reserved (R)
            _write(os.path.join(d, "ras", "gpu_vram_bad_pages"),
                   "".join(f"0x{0x1000 + k:08x} : 0x00001000 : R\n" for k in range(bad.get(pos, 0))))
    if spec.get("debugfs_bad_page_cnt_threshold") is not None:
        # what the driver states (root only): sys/kernel/debug/dri/<card>/ras/bad_page_cnt_threshold, card = minor - 128
        for pos in sorted(first.values()):
            ras_dbg = os.path.join(dest, "sys", "kernel", "debug", "dri", str(gpus[pos]["minor"] - 128), "ras")
            os.makedirs(ras_dbg, exist_ok=True)
            _write(os.path.join(ras_dbg, "bad_page_cnt_threshold"), f"{spec['debugfs_bad_page_cnt_threshold']}\n")
    if spec.get("bad_page_threshold") is not None or spec.get("module_version"):
        module = os.path.join(dest, "sys", "module", "amdgpu")
        params = os.path.join(module, "parameters")
        os.makedirs(params, exist_ok=True)
        if spec.get("bad_page_threshold") is not None:
            _write(os.path.join(params, "bad_page_threshold"), f"{spec['bad_page_threshold']}\n")
        if spec.get("module_version"):
            # AMD's DKMS amdgpu: MODULE_VERSION(AMDGPU_VERSION) and the out-of-tree taint
            _write(os.path.join(module, "version"), f"{spec['module_version']}\n")
            _write(os.path.join(module, "taint"), "O\n")
    kernel = os.path.join(dest, "proc", "sys", "kernel")
    os.makedirs(kernel, exist_ok=True)
    _write(os.path.join(kernel, "osrelease"), f"{profile['kernel_release']}\n")
    if profile.get("rocm_version"):
        info = os.path.join(dest, "opt", "rocm", ".info")
        os.makedirs(info, exist_ok=True)
        _write(os.path.join(info, "version"), f"{profile['rocm_version']}\n")
    release = _os_release(profile)
    if release:
        os.makedirs(os.path.join(dest, "etc"), exist_ok=True)
        _write(os.path.join(dest, "etc", "os-release"), "".join(f'{k}="{v}"\n' for k, v in release.items()))
    log = os.path.join(dest, KERNEL_LOG_FILE)
    os.makedirs(os.path.dirname(log), exist_ok=True)
    _write(log, "".join(f"{line}\n" for line in profile.get("kernel_log") or []))
    # proc/<pid>/fd: links to the host paths a process has open (proc(5)); PID 1 holds no GPU
    fd_dir = os.path.join(dest, "proc", "1", "fd")
    os.makedirs(fd_dir, exist_ok=True)
    _write(os.path.join(dest, "proc", "1", "comm"), "systemd\n")
    for fd in range(3):
        os.symlink("/dev/null", os.path.join(fd_dir, str(fd)))
        _files_written[0] += 1


def _write_iommu_groups(dest, profile):
    """With IOMMU units: one group per PCI function, ``sys/kernel/iommu_groups/<n>/{type,devices/<bdf>}`` and the
    function's ``iommu_group`` link (drivers/iommu/iommu.c iommu_group_show_type spells the type)."""
    iommu = profile["iommu"]
    if not int(iommu.get("units", 0)):
        return
    groups = os.path.join(dest, "sys", "kernel", "iommu_groups")
    links = os.path.join(dest, PCI_DEVICES)
    for n, bdf in enumerate(sorted(os.listdir(links))):
        group = os.path.join(groups, str(n))
        os.makedirs(os.path.join(group, "devices"))
        _write(os.path.join(group, "type"), f"{iommu.get('domain', 'identity')}\n")
        device = os.path.realpath(os.path.join(links, bdf))
        os.symlink(os.path.relpath(device, os.path.join(group, "devices")), os.path.join(group, "devices", bdf))
        os.symlink(os.path.relpath(group, device), os.path.join(device, "iommu_group"))


def _write_dev(dest, gpus):
    """/dev/kfd and /dev/dri nodes as regular empty files: an unprivileged container cannot mknod; the
    roles only test that they exist. sys/class/drm/<name>/device links to the PCI dir (relative)."""
    os.makedirs(os.path.join(dest, "dev", "dri"))
    _write(os.path.join(dest, "dev", "kfd"), "")
    drm = os.path.join(dest, "sys", "class", "drm")
    os.makedirs(drm)
    for g in gpus:
        for name in (f"renderD{g['minor']}", f"card{g['minor'] - 128}"):
            _write(os.path.join(dest, "dev", "dri", name), "")
            os.makedirs(os.path.join(drm, name))
            os.symlink(os.path.join("..", "..", "..", "bus", "pci", "devices", g["bdf"]),
                       os.path.join(drm, name, "device"))


# Per-CPU topology and cache files: what hwloc 2.9 (Slurm's topology source) needs to find packages, cores and
# caches, and what topotune's module_utils/topology/cpu.py reads (found by running hwloc on a tree under
# strace). Left out to keep builds small: files neither reads (thread_siblings, core_siblings*,
# package_cpus_list, core_cpus_list, die_id, ways_of_associativity) and files hwloc reads for details only
# (number_of_sets, physical_line_partition, cpu_capacity). docs/simulated-nodes.md lists them.
CACHE_INDEXES = ((1, "Data", "l1d"), (1, "Instruction", "l1i"), (2, "Unified", "l2"), (3, "Unified", "l3"))


def _write_cpus(dest, profile, layout, faults):
    base = os.path.join(dest, CPU_DIR)
    os.makedirs(base)
    nr = layout.nr_cpus
    span = f"0-{nr - 1}\n" if nr > 1 else "0\n"
    for fname in ("online", "possible", "present"):
        _write(os.path.join(base, fname), span)
    tpc = layout.threads_per_core
    os.makedirs(os.path.join(base, "smt"))
    _write(os.path.join(base, "smt", "active"), "1\n" if tpc > 1 else "0\n")
    _write(os.path.join(base, "smt", "control"), "on\n" if tpc > 1 else "off\n")
    idle = profile["cpuidle"]
    os.makedirs(os.path.join(base, "cpuidle"))
    _write(os.path.join(base, "cpuidle", "current_driver"), idle["driver"] + "\n")
    freq = profile["cpufreq"]
    with_freq = freq.get("present", True) and not faults.get("no_cpufreq", False)
    freq_files = (("scaling_governor", freq["governor"] + "\n"),
                  ("scaling_available_governors", freq["available"] + "\n"),
                  ("scaling_driver", freq["driver"] + "\n"))
    caches = _cache_sizes(profile)
    pkg_mask = [cpumask(p, nr) + "\n" for p in layout.packages]
    l3_text = [(cpumask(d, nr) + "\n", cpulist(d) + "\n") for d in layout.l3]
    for cpu in range(nr):
        core, core_id, pkg, l3, siblings = layout.cpu[cpu]
        c = f"{base}/cpu{cpu}"
        os.mkdir(c)
        os.mkdir(c + "/topology")
        sib_mask = cpumask(siblings, nr) + "\n"
        for fname, text in (("core_id", f"{core_id}\n"), ("physical_package_id", f"{pkg}\n"),
                            ("core_cpus", sib_mask), ("package_cpus", pkg_mask[pkg]),
                            ("thread_siblings_list", cpulist(siblings) + "\n")):
            _write(f"{c}/topology/{fname}", text)
        os.mkdir(c + "/cache")
        for index, (level, ctype, key) in enumerate(CACHE_INDEXES):
            d = f"{c}/cache/index{index}"
            os.mkdir(d)
            files = [("level", f"{level}\n"), ("type", ctype + "\n"), ("size", caches[key]),
                     ("coherency_line_size", "64\n")]
            if level == 3:  # one L3 per CCD/CCX; its id numbers the L3 domains machine-wide
                files += [("id", f"{l3}\n"), ("shared_cpu_map", l3_text[l3][0]), ("shared_cpu_list", l3_text[l3][1])]
            else:  # L1d, L1i, L2: private to the core (shared by its SMT threads); id = core number
                files += [("id", f"{core}\n"), ("shared_cpu_map", sib_mask)]
            for fname, text in files:
                _write(f"{d}/{fname}", text)
        if with_freq:
            os.mkdir(c + "/cpufreq")
            for fname, text in freq_files:
                _write(f"{c}/cpufreq/{fname}", text)
        os.mkdir(c + "/cpuidle")
        for k, state in enumerate(idle["states"]):
            s = f"{c}/cpuidle/state{k}"
            os.mkdir(s)
            _write(s + "/name", state + "\n")
            _write(s + "/disable", "0\n")


def _cache_sizes(profile):
    """``cpu.caches`` as the kernel prints sizes (``32K``), newline-terminated, for l1d, l1i, l2 and l3."""
    caches = profile["cpu"].get("caches") or {}
    out = {}
    for key in ("l1d", "l1i", "l2", "l3"):
        value = str(caches.get(key, ""))
        if not value[:-1].isdigit() or value[-1] != "K":
            raise ProfileError(f"profile {profile['name']}: cpu.caches.{key} must be a size in KiB such as "
                               f"32K, not {caches.get(key)!r}")
        out[key] = value + "\n"
    return out


def _write_nodes(dest, profile, layout):
    base = os.path.join(dest, NODE_DIR)
    os.makedirs(base)
    n = len(layout.numa)
    span = f"0-{n - 1}\n" if n > 1 else "0\n"
    for fname in ("online", "possible", "has_cpu"):
        _write(os.path.join(base, fname), span)
    nps = int(profile["cpu"]["nps"])
    mem_kib = _node_memory_kib(profile, n)
    for k, cpus in enumerate(layout.numa):
        d = os.path.join(base, f"node{k}")
        os.makedirs(d)
        _write(os.path.join(d, "cpulist"), cpulist(cpus) + "\n")
        _write(os.path.join(d, "cpumap"), cpumask(cpus, layout.nr_cpus) + "\n")
        # SLIT distances: 10 local, 12 same socket (NPS>1), 32 other socket (numactl -H mi355x capture).
        dist = ["10" if o == k else ("12" if o // nps == k // nps else "32") for o in range(n)]
        _write(os.path.join(d, "distance"), " ".join(dist) + "\n")
        _write(os.path.join(d, "meminfo"), f"Node {k} MemTotal:       {mem_kib[k]} kB\n")


def _node_memory_kib(profile, n_numa):
    """MemTotal (kB) per NUMA node: ``memory.node_kib`` (one value for every node, or a list)."""
    value = (profile.get("memory") or {}).get("node_kib")
    values = value if isinstance(value, list) else [value] * n_numa
    if len(values) != n_numa or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        raise ProfileError(f"profile {profile['name']}: memory.node_kib must be a positive integer or a list of "
                           f"{n_numa}, not {value!r}")
    return values


def _memory_blocks(profile, n_numa, faults):
    """``(block_bytes, online, offline)``: the memory blocks of ``sys/devices/system/memory``; ``memory.online_gib``
    (else the MemTotal of the nodes, rounded up) in blocks of ``memory.block_bytes``, the last
    ``faults.memory_offline.blocks`` of them offline."""
    memory = profile.get("memory") or {}
    block = memory.get("block_bytes")
    if not isinstance(block, int) or isinstance(block, bool) or block <= 0 or block & (block - 1):
        raise ProfileError(f"profile {profile['name']}: memory.block_bytes must be a power of two, not {block!r}")
    gib = memory.get("online_gib")
    if gib is None:
        total = sum(_node_memory_kib(profile, n_numa)) * 1024
    elif isinstance(gib, int) and not isinstance(gib, bool) and gib > 0:
        total = gib << 30
    else:
        raise ProfileError(f"profile {profile['name']}: memory.online_gib must be a positive integer, not {gib!r}")
    blocks = -(-total // block)
    offline = (faults.get("memory_offline") or {}).get("blocks", 0)
    if not isinstance(offline, int) or isinstance(offline, bool) or not 0 <= offline <= blocks:
        raise ProfileError(f"profile {profile['name']}: faults.memory_offline.blocks must be 0..{blocks}, "
                           f"not {offline!r}")
    return block, blocks - offline, offline


def _write_memory_blocks(dest, profile, n_numa, faults):
    """``sys/devices/system/memory``: ``block_size_bytes`` (hex, no 0x, as the kernel prints it) and per block
    ``memoryN/online`` (Documentation/admin-guide/mm/memory-hotplug.rst); not ``state``, which says the same (the
    checks read it only where ``online`` is missing): a file fewer per block."""
    block, online, offline = _memory_blocks(profile, n_numa, faults)
    base = os.path.join(dest, "sys", "devices", "system", "memory")
    os.makedirs(base)
    _write(os.path.join(base, "block_size_bytes"), f"{block:x}\n")
    for index in range(online + offline):
        d = os.path.join(base, f"memory{index}")
        os.makedirs(d)
        _write(os.path.join(d, "online"), "1\n" if index < online else "0\n")


def _write_misc(dest, profile, layout):
    thp = os.path.join(dest, "sys", "kernel", "mm", "transparent_hugepage")
    os.makedirs(thp)
    _write(os.path.join(thp, "enabled"), profile["thp"]["enabled"] + "\n")
    _write(os.path.join(thp, "defrag"), profile["thp"]["defrag"] + "\n")
    dmi = os.path.join(dest, "sys", "class", "dmi", "id")
    os.makedirs(dmi)
    for key, val in profile["dmi"].items():
        _write(os.path.join(dmi, key), f"{val}\n")
    iommu = os.path.join(dest, "sys", "class", "iommu")
    os.makedirs(iommu)
    for i in range(int(profile["iommu"].get("units", 0))):
        os.makedirs(os.path.join(iommu, f"ivhd{i}"))  # AMD-Vi units are named ivhdN
    proc = os.path.join(dest, "proc")
    os.makedirs(os.path.join(proc, "sys", "kernel"), exist_ok=True)
    _write(os.path.join(proc, "cmdline"), profile["cmdline"] + "\n")
    _write(os.path.join(proc, "sys", "kernel", "numa_balancing"), f"{profile['numa_balancing']}\n")
    model = profile["cpu"]["model_name"]
    pkg_sizes = [len(p) for p in layout.packages]
    cores_per_pkg = [len(p) // layout.threads_per_core for p in layout.packages]
    _write(os.path.join(proc, "cpuinfo"), "".join(
        f"processor\t: {c}\nvendor_id\t: AuthenticAMD\nmodel name\t: {model}\nphysical id\t: {pkg}\n"
        f"siblings\t: {pkg_sizes[pkg]}\ncore id\t\t: {core_id}\ncpu cores\t: {cores_per_pkg[pkg]}\n\n"
        for c, (_unused, core_id, pkg, _unused, _unused) in sorted(layout.cpu.items())))


# ------------------------------------------------------------------------------------------------ CLI
def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list", help="profile names and descriptions")
    p_build = sub.add_parser("build", help="materialize PROFILE into DEST")
    p_build.add_argument("profile")
    p_build.add_argument("dest")
    p_build.add_argument("--force", action="store_true",
                         help="empty DEST even if it was not built by this tool")
    p_exp = sub.add_parser("expect", help="print the profile's expect block as JSON")
    p_exp.add_argument("profile")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "list":
            for name, desc in list_profiles():
                print(f"{name:20s} {desc}")
        elif args.cmd == "build":
            print(json.dumps(build(args.profile, args.dest, force=args.force)))
        else:
            print(json.dumps(load_profile(args.profile)["expect"], indent=2, sort_keys=True))
    except (ProfileError, OSError, yaml.YAMLError) as exc:
        print(f"sysroot: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
