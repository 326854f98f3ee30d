"""Simulated-node profiles: every profile builds into a sysroot whose tree matches its ``expect`` block and
the numbers it cites.  The tree is read directly (not through the topology module under test elsewhere)."""

import filecmp
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("sim_sysroot", os.path.join(REPO, "sim", "sysroot.py"))
sysroot = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sysroot)

PROFILES = [name for name, _unused in sysroot.list_profiles()]
KFD = "sys/class/kfd/kfd/topology"
PCI = "sys/bus/pci/devices"
SPEED_RE = re.compile(r"^\d+\.\d GT/s PCIe$")


# ----------------------------------------------------------------------------------------- helpers
def _read(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as fh:
        return fh.read().strip()


def _props(path):
    with open(path, encoding="utf-8") as fh:
        return dict(line.split() for line in fh if len(line.split()) == 2)


def _parse_list(text):
    out = []
    for part in text.split(","):
        lo, _unused, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


class Tree:
    """What a reader sees in a built sysroot."""

    def __init__(self, root):
        self.root = root
        nodes_dir = os.path.join(root, KFD, "nodes")
        self.nodes = {}
        self.links = {}
        for n in sorted(os.listdir(nodes_dir), key=int):
            d = os.path.join(nodes_dir, n)
            pf = os.path.join(d, "properties")
            self.nodes[int(n)] = _props(pf) if os.path.exists(pf) else None
            ld = os.path.join(d, "io_links")
            self.links[int(n)] = (
                [_props(os.path.join(ld, link, "properties")) for link in sorted(os.listdir(ld), key=int)]
                if os.path.isdir(ld) else None
            )
        self.cpu_nodes = [n for n, p in self.nodes.items() if p and int(p["cpu_cores_count"]) > 0]
        self.gpu_nodes = [n for n, p in self.nodes.items() if p and int(p["simd_count"]) > 0]
        # GPU order = render minor order, read through sys/class/drm (independent of the KFD tree)
        drm = os.path.join(root, "sys/class/drm")
        minors = sorted(int(e[7:]) for e in os.listdir(drm) if e.startswith("renderD"))
        self.gpu_bdfs = [os.path.basename(os.path.realpath(os.path.join(drm, f"renderD{m}", "device")))
                         for m in minors]
        self.pci = {
            bdf: {f: _read(os.path.join(root, PCI, bdf), f) for f in os.listdir(os.path.join(root, PCI, bdf))
                  if os.path.isfile(os.path.join(root, PCI, bdf, f)) and f != "config"}
            for bdf in os.listdir(os.path.join(root, PCI))
        }

    def rdma_numa(self):
        """``{name: numa_node}`` of the RDMA devices, through sys/class/infiniband/<name>/device."""
        ib = os.path.join(self.root, "sys/class/infiniband")
        return {name: int(_read(os.path.join(ib, name), "device/numa_node"))
                for name in (os.listdir(ib) if os.path.isdir(ib) else [])}

    def acs_control(self, bdf):
        """ACS control word, read by walking the extended capabilities by hand (PCIe spec layout)."""
        with open(os.path.join(self.root, PCI, bdf, "config"), "rb") as fh:
            data = fh.read()
        pos = 0x100
        while pos and pos + 8 <= len(data):
            header = int.from_bytes(data[pos:pos + 4], "little")
            if header & 0xFFFF == 0x000D:
                return int.from_bytes(data[pos + 6:pos + 8], "little")
            pos = header >> 20
        return None

    def accel_bdfs(self):
        """AMD GPU functions: class 0x12 (processing accelerator, MI300) or 0x03 (display controller, MI200 GCDs)."""
        return sorted(b for b, v in self.pci.items() if v["vendor"] == "0x1002" and v["class"][:4] in ("0x12", "0x03"))

    def pci_path(self, bdf):
        """The bridges above ``bdf`` (root port first), read off the sys/bus/pci/devices symlink into sys/devices;
        None when the entry is a plain directory (a flat tree)."""
        link = os.path.join(self.root, PCI, bdf)
        if not os.path.islink(link):
            return None
        real = os.path.relpath(os.path.realpath(link), os.path.join(os.path.realpath(self.root), "sys", "devices"))
        parts = real.split(os.sep)
        assert parts[0] == "pci%s" % (parts[1][:7] if len(parts) > 1 else "")  # pci<domain>:<root bus>
        return parts[1:-1]

    def classes(self, prefix):
        return sorted(b for b, v in self.pci.items() if v.get("class", "").startswith(prefix))

    def cpus(self):
        base = os.path.join(self.root, "sys/devices/system/cpu")
        return sorted(int(e[3:]) for e in os.listdir(base) if re.fullmatch(r"cpu\d+", e))

    def numa_lists(self):
        base = os.path.join(self.root, "sys/devices/system/node")
        return {int(e[4:]): _read(base, f"{e}/cpulist") for e in os.listdir(base) if re.fullmatch(r"node\d+", e)}

    def cpu_file(self, cpu, rel):
        return _read(self.root, f"sys/devices/system/cpu/cpu{cpu}/{rel}")

    def l3_domains(self):
        """Distinct L3 shared_cpu_list sets (cache/index3), sorted by first CPU."""
        return sorted({frozenset(_parse_list(self.cpu_file(c, "cache/index3/shared_cpu_list"))) for c in self.cpus()},
                      key=min)

    def xgmi_matrix(self, field="max_bandwidth"):
        """GPU index x GPU index matrix of an io_link field for type-11 links (0 = no direct link)."""
        idx = {n: i for i, n in enumerate(self.gpu_nodes)}
        m = [[0] * len(idx) for _unused in idx]
        for n in self.gpu_nodes:
            for link in self.links[n] or []:
                if link["type"] == "11" and int(link["node_to"]) in idx:
                    m[idx[n]][idx[int(link["node_to"])]] = int(link[field])
        return m


@pytest.fixture(scope="module")
def built(sim_tree):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = Tree(sim_tree(name))
        return cache[name]

    return get


def _counts(values):
    out = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


# ------------------------------------------------------------------------------- expect checkers


def _listing(root, rel):
    path = os.path.join(root, rel)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


def _firmware_outliers(t):
    """BDFs whose fw_version/ set differs from the most common set among the physical GPUs."""
    sets = {b: tuple(_read(t.root, f"{PCI}/{b}/fw_version/{f}") for f in _listing(t.root, f"{PCI}/{b}/fw_version"))
            for b in t.pci if "current_compute_partition" in t.pci[b]}
    counts = _counts(sets.values())
    common = max(counts, key=counts.get)
    return sorted(b for b, fw in sets.items() if fw != common)


def _numa_of(tree):
    return [int(tree.pci[b]["numa_node"]) for b in tree.gpu_bdfs]


def _port_files(root, *names):
    """``{"<dev>/<port>": "<file> / <file>"}`` of every RDMA port."""
    out = {}
    for dev in _listing(root, "sys/class/infiniband"):
        for port in _listing(root, f"sys/class/infiniband/{dev}/ports"):
            out[f"{dev}/{port}"] = " / ".join(_read(root, f"sys/class/infiniband/{dev}/ports/{port}/{n}") for n in names)
    return out


def _temperatures(root, bdf):
    base = os.path.join(root, PCI, bdf, "hwmon")
    return [int(_read(os.path.join(base, hw), name)) for hw in os.listdir(base)
            for name in os.listdir(os.path.join(base, hw)) if re.match(r"^temp\d+_input$", name)]


CHECKS = {
    "gpu_count": lambda t, v: len(t.accel_bdfs()) == v == len(t.gpu_bdfs),
    "device_id": lambda t, v: {t.pci[b]["device"] for b in t.accel_bdfs()} == {v},
    "kfd_cpu_nodes": lambda t, v: len(t.cpu_nodes) == v,
    "kfd_gpu_nodes": lambda t, v: len(t.gpu_nodes) == v,
    "hives": lambda t, v: len({t.nodes[n]["hive_id"] for n in t.gpu_nodes} - {"0"}) == v,
    "cpu_count": lambda t, v: len(t.cpus()) == v and _read(t.root, "sys/devices/system/cpu/online") == f"0-{v - 1}",
    "numa_nodes": lambda t, v: len(t.numa_lists()) == v,
    "smt_active": lambda t, v: _read(t.root, "sys/devices/system/cpu/smt/active") == ("1" if v else "0"),
    "cpufreq": lambda t, v: os.path.isdir(os.path.join(t.root, "sys/devices/system/cpu/cpu0/cpufreq")) == v,
    "gpu_numa": lambda t, v: _numa_of(t) == v,
    "gpu_numa_counts": lambda t, v: _counts(_numa_of(t)) == {int(k): c for k, c in v.items()},
    "numa_cpulists": lambda t, v: t.numa_lists() == {int(k): c for k, c in v.items()},
    "gpu_bdfs": lambda t, v: t.gpu_bdfs == v,
    "gpu_bdfs_include": lambda t, v: set(v) <= set(t.gpu_bdfs),
    "pcie_current_width": lambda t, v: _counts(int(t.pci[b]["current_link_width"]) for b in t.gpu_bdfs)
    == {int(k): c for k, c in v.items()},
    "pcie_current_speed": lambda t, v: _counts(t.pci[b]["current_link_speed"] for b in t.gpu_bdfs) == v,
    "pcie_max_width": lambda t, v: _counts(int(t.pci[b]["max_link_width"]) for b in t.gpu_bdfs)
    == {int(k): c for k, c in v.items()},
    "pcie_max_speed": lambda t, v: _counts(t.pci[b]["max_link_speed"] for b in t.gpu_bdfs) == v,
    "pcie_degraded_bdfs": lambda t, v: [
        b for b in t.gpu_bdfs if t.pci[b]["current_link_width"] != t.pci[b]["max_link_width"]
    ] == v,
    "xgmi_link_counts": lambda t, v: [[bw // 50000 for bw in row] for row in t.xgmi_matrix()] == v,
    "xgmi_weight": lambda t, v: {w for row in t.xgmi_matrix("weight") for w in row} - {0} == {v},
    "xgmi_all_to_all": lambda t, v: all(
        (t.xgmi_matrix()[i][j] > 0) == (i != j) for i in range(len(t.gpu_nodes)) for j in range(len(t.gpu_nodes))
    ) == v,
    "kfd_missing_properties": lambda t, v: [n for n, p in t.nodes.items() if p is None] == v,
    "kfd_missing_io_links": lambda t, v: [n for n, links in t.links.items() if links is None] == v,
    "kfd_verbatim": lambda t, v: _same_tree(_capture_nodes(v), os.path.join(t.root, KFD, "nodes")),
    "rdma_nics": lambda t, v: len(t.rdma_numa()) == v,
    "nic_numa": lambda t, v: [numa for _unused, numa in sorted(t.rdma_numa().items())] == v,
    "acs_enabled_bridges": lambda t, v: sorted(
        b for b in t.pci if (t.acs_control(b) or 0) != 0) == v,
    # PCIe hierarchy: the bridges above each named function (root port first), the number of bridges, the network
    # functions (class 0x02)
    "pcie_paths": lambda t, v: {b: t.pci_path(b) for b in v} == v,
    "pci_bridges": lambda t, v: len(t.classes("0x0604")) == v,
    "network_bdfs": lambda t, v: t.classes("0x02") == v,
    "aer_fatal_bdfs": lambda t, v: sorted(
        b for b, files in t.pci.items() if files.get("aer_dev_fatal", "").endswith(tuple(
            f"TOTAL_ERR_FATAL {n}" for n in range(1, 100)))) == v,
    "l3_count": lambda t, v: len(t.l3_domains()) == v,
    "l3_cpulists": lambda t, v: t.l3_domains() == [frozenset(_parse_list(d)) for d in v],
    "l3_cpulists_include": lambda t, v: {frozenset(_parse_list(d)) for d in v} <= set(t.l3_domains()),
    # amdgpu files of the physical GPUs (one per slot): partition modes, RAS counters, retired pages, firmware
    "partition_modes": lambda t, v: _counts("%s/%s" % (t.pci[b]["current_compute_partition"],
                                                       t.pci[b]["current_memory_partition"])
                                            for b in t.pci if "current_compute_partition" in t.pci[b]) == v,
    "ras_uncorrectable_bdfs": lambda t, v: sorted(
        b for b in t.pci if any(_read(t.root, f"{PCI}/{b}/ras/{f}").startswith("ue: ") and
                                not _read(t.root, f"{PCI}/{b}/ras/{f}").startswith("ue: 0\n")
                                for f in _listing(t.root, f"{PCI}/{b}/ras") if f.endswith("_err_count"))) == v,
    "ras_deferred_bdfs": lambda t, v: sorted(
        b for b in t.pci if any(re.search(r"^de: [1-9]", _read(t.root, f"{PCI}/{b}/ras/{f}"), re.M)
                                for f in _listing(t.root, f"{PCI}/{b}/ras") if f.endswith("_err_count"))) == v,
    "bad_page_counts": lambda t, v: {
        b: len(_read(t.root, f"{PCI}/{b}/ras/gpu_vram_bad_pages").splitlines()) for b in t.pci
        if os.path.isfile(os.path.join(t.root, PCI, b, "ras", "gpu_vram_bad_pages"))
        and _read(t.root, f"{PCI}/{b}/ras/gpu_vram_bad_pages")} == v,
    "firmware_differs_bdfs": lambda t, v: _firmware_outliers(t) == v,
    "vbios_versions": lambda t, v: _counts(t.pci[b]["vbios_version"] for b in t.pci if "vbios_version" in t.pci[b]) == v,
    # amdgpu's pcie_replay_count of every physical GPU: the non-zero ones
    "pcie_replay_counts": lambda t, v: {b: int(t.pci[b]["pcie_replay_count"]) for b in t.pci
                                        if int(t.pci[b].get("pcie_replay_count", "0")) != 0} == v,
    # memory blocks online x block_size_bytes (hex), in GiB, as lsmem sums them
    "online_memory_gib": lambda t, v: _online_gib(t.root) == v,
    # the RDMA NICs (sys/class/infiniband/<dev>/device): links below their capability, ports not ACTIVE/LinkUp,
    # port rates, the index of each port's IPv4 RoCE v2 GID, and the connected routes of proc/net/route
    "nic_degraded_links": lambda t, v: _nic_degraded(t.root) == v,
    "rdma_port_states": lambda t, v: {k: s for k, s in _port_files(t.root, "state", "phys_state").items()
                                      if s != "4: ACTIVE / 5: LinkUp"} == v,
    "rdma_rates": lambda t, v: _counts(_port_files(t.root, "rate").values()) == v,
    "rdma_fw_ver": lambda t, v: {_read(t.root, f"sys/class/infiniband/{d}/fw_ver")
                                 for d in _listing(t.root, "sys/class/infiniband")} == {v},
    "netdev_speeds": lambda t, v: _counts(int(_read(t.root, f"sys/class/net/{n}/speed"))
                                          for n in _listing(t.root, "sys/class/net")) == {int(k): c for k, c in v.items()},
    "roce_v2_ipv4_gid_index": lambda t, v: _ipv4_gid_index(t.root) == v,
    "routes": lambda t, v: _routes(t.root) == v,
    # each RDMA device's PCI function (sys/class/infiniband/<dev>/device)
    "rdma_devices": lambda t, v: {d: os.path.basename(os.path.realpath(os.path.join(
        t.root, "sys/class/infiniband", d, "device"))) for d in _listing(t.root, "sys/class/infiniband")} == v,
    # amdgpu's utilization (gpu_busy_percent) of every physical GPU: the non-zero ones; the hottest hwmon channel of the
    # GPUs given (temp*_input, millidegrees, in °C)
    "gpu_busy_percents": lambda t, v: {b: int(t.pci[b]["gpu_busy_percent"]) for b in t.pci
                                       if int(t.pci[b].get("gpu_busy_percent", "0")) != 0} == v,
    "max_temperatures_c": lambda t, v: {b: max(_temperatures(t.root, b)) // 1000 for b in v} == v,
    # etc/os-release ID VERSION_ID, proc/sys/kernel/osrelease, opt/rocm/.info/version, the boot's kernel log
    "os_release": lambda t, v: "%(ID)s %(VERSION_ID)s" % _os_release(t.root) == v,
    "kernel_release": lambda t, v: _read(t.root, "proc/sys/kernel/osrelease") == v,
    "rocm_version": lambda t, v: _read(t.root, "opt/rocm/.info/version") == v,
    "kernel_log_lines": lambda t, v: len(_read(t.root, sysroot.KERNEL_LOG_FILE).splitlines()) == v,
}


def _nic_degraded(root):
    """``{bdf: "x<w> <speed> of x<max w> <max speed>"}`` of the RDMA NICs whose current link differs from the max."""
    out = {}
    for dev in _listing(root, "sys/class/infiniband"):
        pci = os.path.realpath(os.path.join(root, "sys/class/infiniband", dev, "device"))
        cur = (_read(pci, "current_link_width"), _read(pci, "current_link_speed"))
        top = (_read(pci, "max_link_width"), _read(pci, "max_link_speed"))
        if cur != top:
            out[os.path.basename(pci)] = "x%s %s of x%s %s" % (cur + top)
    return out


def _ipv4_gid_index(root):
    """``{dev: index}`` of port 1's first RoCE v2 GID holding an IPv4-mapped address (None without one)."""
    out = {}
    for dev in _listing(root, "sys/class/infiniband"):
        port = f"sys/class/infiniband/{dev}/ports/1"
        indexes = sorted(int(i) for i in _listing(root, f"{port}/gid_attrs/types"))
        out[dev] = next((i for i in indexes if _read(root, f"{port}/gid_attrs/types/{i}") == "RoCE v2"
                         and _read(root, f"{port}/gids/{i}").startswith("0000:0000:0000:0000:0000:ffff:")), None)
    return out


def _routes(root):
    """proc/net/route read by hand: ``{iface: "a.b.c.d/prefix"}`` (little-endian hex words, as x86 prints them)."""
    out = {}
    with open(os.path.join(root, "proc/net/route"), encoding="utf-8") as fh:
        for line in fh.read().splitlines()[1:]:
            iface, dest, _gw, _flags, _ref, _use, _metric, mask = line.split()[:8]
            address = ".".join(str(b) for b in int(dest, 16).to_bytes(4, "little"))
            out[iface] = "%s/%d" % (address, bin(int(mask, 16)).count("1"))
    return out


def _os_release(root):
    pairs = (line.split("=", 1) for line in _read(root, "etc/os-release").splitlines() if "=" in line)
    return {k: v.strip('"') for k, v in pairs}


def _online_gib(root):
    blocks = [n for n in _listing(root, "sys/devices/system/memory") if re.match(r"^memory\d+$", n)]
    online = [n for n in blocks if _read(root, f"sys/devices/system/memory/{n}/online") == "1"]
    return len(online) * int(_read(root, "sys/devices/system/memory/block_size_bytes"), 16) / float(1 << 30)


def _mask(text):
    """Kernel cpumask (``00000000,0000ffff``: 32-bit hex words, most significant first) -> sorted CPU list."""
    value = int(text.replace(",", ""), 16)
    return [c for c in range(value.bit_length()) if value >> c & 1]


def _capture_nodes(capture):
    root = os.path.join(REPO, "tests", "fixtures", "kfd", capture)
    return os.path.join(root, "topology", "nodes") if os.path.isdir(os.path.join(root, "topology")) else \
        os.path.join(root, "nodes")


def _same_tree(a, b):
    cmp = filecmp.dircmp(a, b)
    stack = [cmp]
    while stack:
        c = stack.pop()
        if c.left_only or c.right_only or c.funny_files:
            return False
        _unused, mismatch, errors = filecmp.cmpfiles(c.left, c.right, c.common_files, shallow=False)
        if mismatch or errors:
            return False
        stack.extend(c.subdirs.values())
    return True


# ---------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize("name", PROFILES)
def test_profile_is_documented(name):
    p = sysroot.load_profile(name)
    assert p["description"].strip()
    prov = p["provenance"]
    assert prov["kind"] in ("capture", "synthetic", "variant", "fault", "scale", "test")
    if prov["kind"] == "capture":
        assert "tests/fixtures/kfd/" in prov["source"] and prov["inferred"]
    if prov["kind"] == "synthetic":
        assert p["description"].startswith("SYNTHETIC") and len(prov["cites"]) >= 3
    if prov["kind"] in ("variant", "fault", "scale", "test"):
        assert prov["derived_from"].split()[0] in PROFILES
    if prov["kind"] == "variant":
        # another device of the same part (an HF product variant): cited, like a synthetic profile
        assert p["description"].startswith("VARIANT") and prov["cites"]
    if prov["kind"] == "test":
        assert p["description"].startswith("TEST") and prov["purpose"].strip()
    # a profile that sets cores_per_l3 says where the number comes from (cites / illustrative / inferred)
    own = sysroot._read_yaml(name)
    if "cores_per_l3" in (own.get("cpu") or {}):
        sourced = [text for key in ("cites", "illustrative", "inferred", "derived") for text in prov.get(key) or []]
        assert any("cores_per_l3" in text for text in sourced), f"{name}: no source for cpu.cores_per_l3"


@pytest.mark.parametrize("name", PROFILES)
def test_tree_matches_expect(name, built):
    tree = built(name)
    expect = sysroot.load_profile(name)["expect"]
    unknown = set(expect) - set(CHECKS)
    assert not unknown, f"{name}: expect keys without a checker: {unknown}"
    failed = [key for key, val in expect.items() if not CHECKS[key](tree, val)]
    assert not failed, f"{name}: tree differs from expect on {failed}"


@pytest.mark.parametrize("name", PROFILES)
def test_tree_is_self_consistent(name, built):
    t = built(name)
    # every KFD link starts at its node and ends at an existing node; counts match the directories
    for n, links in t.links.items():
        for link in links or []:
            assert int(link["node_from"]) == n and int(link["node_to"]) in t.nodes
        if links is not None and t.nodes[n] is not None:
            assert int(t.nodes[n]["io_links_count"]) == len(links)
    # KFD GPU nodes map to PCI devices through domain + location_id
    for n in t.gpu_nodes:
        p = t.nodes[n]
        assert sysroot.bdf_of(p["domain"], p["location_id"]) in t.pci
        assert os.path.isfile(os.path.join(t.root, "dev/dri", f"renderD{p['drm_render_minor']}"))
    # NUMA cpulists partition the CPUs; SMT siblings agree with the per-CPU topology files
    cpus = t.cpus()
    all_numa = sorted(c for lst in t.numa_lists().values() for c in _parse_list(lst))
    assert all_numa == cpus == list(range(len(cpus)))
    for cpu in (cpus[0], cpus[-1]):
        sib = _parse_list(_read(t.root, f"sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"))
        assert cpu in sib
    for bdf in t.gpu_bdfs:
        dev = t.pci[bdf]
        assert SPEED_RE.match(dev["current_link_speed"]) and SPEED_RE.match(dev["max_link_speed"])
        numa = int(dev["numa_node"])
        expected = t.numa_lists()[numa] if numa >= 0 else f"0-{len(cpus) - 1}"
        assert dev["local_cpulist"] == expected
        mask = int(dev["local_cpus"].replace(",", ""), 16)
        assert sorted(c for c in cpus if mask >> c & 1) == _parse_list(expected)


@pytest.mark.parametrize("name", PROFILES)
def test_cpu_topology_files_are_consistent(name, built):
    """Per-CPU topology/ and cache/ files, node cpumap/meminfo and /proc/cpuinfo describe one machine: SMT
    siblings, packages, core ids, L1/L2 per core, one L3 per cores_per_l3 cores inside one NUMA node."""
    t = built(name)
    cpu = sysroot.load_profile(name)["cpu"]
    tpc, per_l3 = int(cpu["threads_per_core"]), int(cpu["cores_per_l3"])
    cpus = t.cpus()
    numa_of = {c: node for node, lst in t.numa_lists().items() for c in _parse_list(lst)}
    siblings = {c: _parse_list(t.cpu_file(c, "topology/thread_siblings_list")) for c in cpus}
    package = {c: int(t.cpu_file(c, "topology/physical_package_id")) for c in cpus}
    core_id = {c: int(t.cpu_file(c, "topology/core_id")) for c in cpus}
    pkg_cpus = {}
    for c in cpus:
        pkg_cpus.setdefault(package[c], []).append(c)
    cores = set()
    for c in cpus:
        sib = siblings[c]
        assert c in sib and len(sib) == tpc
        assert all(siblings[s] == sib and core_id[s] == core_id[c] and package[s] == package[c] for s in sib)
        assert _mask(t.cpu_file(c, "topology/core_cpus")) == sib
        assert _mask(t.cpu_file(c, "topology/package_cpus")) == pkg_cpus[package[c]]
        cores.add((package[c], core_id[c]))
        for index, (level, ctype) in enumerate(((1, "Data"), (1, "Instruction"), (2, "Unified"), (3, "Unified"))):
            cache = f"cache/index{index}"
            assert (int(t.cpu_file(c, f"{cache}/level")), t.cpu_file(c, f"{cache}/type")) == (level, ctype)
            assert re.fullmatch(r"\d+K", t.cpu_file(c, f"{cache}/size"))
            assert t.cpu_file(c, f"{cache}/coherency_line_size") == "64"
            if level < 3:
                assert _mask(t.cpu_file(c, f"{cache}/shared_cpu_map")) == sib
        l3 = _parse_list(t.cpu_file(c, "cache/index3/shared_cpu_list"))
        assert _mask(t.cpu_file(c, "cache/index3/shared_cpu_map")) == l3 and c in l3
        assert len(l3) == per_l3 * tpc
        assert {numa_of[x] for x in l3} == {numa_of[c]} and {package[x] for x in l3} == {package[c]}
    assert len(cores) == len(cpus) // tpc  # (package, core_id) names one core
    # L3 domains partition the CPUs; each has its own id
    domains = t.l3_domains()
    assert sorted(x for d in domains for x in d) == cpus
    assert len({t.cpu_file(min(d), "cache/index3/id") for d in domains}) == len(domains)
    # NUMA nodes: cpumap = cpulist, a plausible MemTotal
    for node, lst in t.numa_lists().items():
        base = f"sys/devices/system/node/node{node}"
        assert _mask(_read(t.root, f"{base}/cpumap")) == _parse_list(lst)
        match = re.fullmatch(rf"Node {node} MemTotal:\s+(\d+) kB", _read(t.root, f"{base}/meminfo"))
        assert match and int(match.group(1)) >= 1 << 20  # at least 1 GiB
    # /proc/cpuinfo agrees with sysfs
    blocks = [dict(re.split(r"\s*:\s*", line, maxsplit=1) for line in block.splitlines())
              for block in _read(t.root, "proc/cpuinfo").split("\n\n")]
    assert [int(b["processor"]) for b in blocks] == cpus
    assert all((int(b["physical id"]), int(b["core id"])) == (package[int(b["processor"])], core_id[int(b["processor"])])
               and int(b["siblings"]) == len(pkg_cpus[package[int(b["processor"])]]) for b in blocks)


def test_mi250x_l3_regions_are_the_frontier_table(built):
    """Each Frontier L3 region lies in the NUMA node the table puts it in, and the GCD the table pairs with it is
    local to that node."""
    t = built("mi250x-8gcd")
    table = {"0-7,64-71": (0, 4), "8-15,72-79": (0, 5), "16-23,80-87": (1, 2), "24-31,88-95": (1, 3),
             "32-39,96-103": (2, 6), "40-47,104-111": (2, 7), "48-55,112-119": (3, 0), "56-63,120-127": (3, 1)}
    assert t.l3_domains() == [frozenset(_parse_list(r)) for r in table]
    numa = {node: set(_parse_list(lst)) for node, lst in t.numa_lists().items()}
    for region, (node, gcd) in table.items():
        assert set(_parse_list(region)) <= numa[node]
        assert int(t.pci[t.gpu_bdfs[gcd]]["numa_node"]) == node


@pytest.mark.parametrize("change, message", [
    ({"cores_per_l3": 7}, "not a multiple of cores_per_l3"),
    ({"cores_per_l3": 0}, "cores_per_l3 must be a positive integer"),
    ({"cores_per_l3": None}, "cores_per_l3 must be a positive integer"),
    ({"caches": {"l1d": "32KB"}}, "cpu.caches.l1d"),
])
def test_bad_cpu_keys_are_a_profile_error(tmp_path, monkeypatch, change, message):
    good = sysroot.load_profile("mi250x-8gcd")
    bad = dict(good, cpu=dict(good["cpu"], **change))
    if "caches" in change:
        bad["cpu"]["caches"] = dict(good["cpu"]["caches"], **change["caches"])
    monkeypatch.setattr(sysroot, "load_profile", lambda _name: bad)
    (tmp_path / "keep").write_text("x")
    with pytest.raises(sysroot.ProfileError, match=message):
        sysroot.build("mi250x-8gcd", str(tmp_path), force=True)
    assert (tmp_path / "keep").read_text() == "x"  # validated before the destination was emptied


@pytest.mark.parametrize("base, down, message", [
    ("mi300x-8gpu-spx", [[2, 8]], "faults.xgmi_link_down lists pairs"),
    ("mi300x-8gpu-spx", [[3, 3]], "faults.xgmi_link_down lists pairs"),
    ("mi300x-8gpu-spx", [2, 5], "faults.xgmi_link_down lists pairs"),
    ("mi210-8gpu-2hive", [[0, 1]], "needs a kfd.synthetic profile"),
])
def test_bad_xgmi_link_down_is_a_profile_error(tmp_path, monkeypatch, base, down, message):
    good = sysroot.load_profile(base)
    monkeypatch.setattr(sysroot, "load_profile", lambda _name: dict(good, faults={"xgmi_link_down": down}))
    (tmp_path / "keep").write_text("x")
    with pytest.raises(sysroot.ProfileError, match=message):
        sysroot.build(base, str(tmp_path), force=True)
    assert (tmp_path / "keep").read_text() == "x"  # validated before the destination was emptied


def test_bad_memory_is_a_profile_error(tmp_path, monkeypatch):
    good = sysroot.load_profile("mi250x-8gcd")
    monkeypatch.setattr(sysroot, "load_profile", lambda _name: dict(good, memory={"node_kib": [1, 2]}))
    with pytest.raises(sysroot.ProfileError, match="memory.node_kib"):
        sysroot.build("mi250x-8gcd", str(tmp_path / "n"))


@pytest.mark.parametrize("change, message", [
    ({"faults": {"gpu_busy": [{"gpu": 8, "gpu_busy_percent": 100}]}}, "faults.gpu_busy lists"),
    ({"faults": {"gpu_busy": [{"gpu": 1, "gpu_busy_percent": 101}]}}, "faults.gpu_busy lists"),
    ({"faults": {"gpu_busy": [{"gpu": 1, "temperatures": {"hotspot": 90000}}]}}, "faults.gpu_busy lists"),
    ({"faults": {"gpu_busy": ["gpu 1"]}}, "faults.gpu_busy lists"),
    ({"amdgpu_temperatures": {"junction": "55 C"}}, "amdgpu.temperatures maps"),
    ({"amdgpu_temperatures": {"die": 55000}}, "amdgpu.temperatures maps"),
    ({"os_release": {"ID": "ubuntu", "VERSION_ID": 24.04}}, "os_release maps os-release"),
    ({"os_release": ["ID=ubuntu"]}, "os_release maps os-release"),
])
def test_bad_idle_or_os_release_is_a_profile_error(tmp_path, monkeypatch, change, message):
    """faults.gpu_busy, amdgpu.temperatures and os_release are checked before the destination is emptied."""
    good = sysroot.load_profile("mi300x-8gpu-spx")
    change = dict(change)
    if "amdgpu_temperatures" in change:
        change["amdgpu"] = dict(good["amdgpu"], temperatures=change.pop("amdgpu_temperatures"))
    monkeypatch.setattr(sysroot, "load_profile", lambda _name: dict(good, **change))
    (tmp_path / "keep").write_text("x")
    with pytest.raises(sysroot.ProfileError, match=message):
        sysroot.build("mi300x-8gpu-spx", str(tmp_path), force=True)
    assert (tmp_path / "keep").read_text() == "x"


@pytest.mark.parametrize("name", PROFILES)
def test_machine_matches_the_built_tree(name, built):
    """sysroot.machine() (what the hwloc oracle compares hwloc with) describes the tree build() writes."""
    t, m = built(name), sysroot.machine(name)
    assert m["cpus"] == len(t.cpus())
    assert [frozenset(_parse_list(d)) for d in m["l3"]] == t.l3_domains()
    assert dict(enumerate(m["numa"])) == t.numa_lists()
    by_minor = sorted(m["gpus"], key=lambda g: g["minor"])  # the tree's GPU list is in render minor order
    assert [g["bdf"] for g in by_minor] == t.gpu_bdfs
    assert [g["numa"] for g in by_minor] == _numa_of(t)
    # core k = the core whose first thread is CPU k (first threads of all cores come first)
    tree_cores = sorted({tuple(_parse_list(t.cpu_file(c, "topology/thread_siblings_list"))) for c in t.cpus()}, key=min)
    assert [tuple(_parse_list(c)) for c in m["cores"]] == tree_cores


@pytest.mark.parametrize("name", PROFILES)
def test_careless_host_state(name, built):
    """A fresh node is untuned: the roles must have something to change."""
    t = built(name)
    assert "[madvise]" in _read(t.root, "sys/kernel/mm/transparent_hugepage/enabled")
    cmdline = _read(t.root, "proc/cmdline")
    assert "iommu=pt" not in cmdline and "pci=realloc=off" not in cmdline
    assert _read(t.root, "proc/sys/kernel/numa_balancing") == "1"
    assert _read(t.root, "sys/devices/system/cpu/cpuidle/current_driver") == "acpi_idle"
    assert _read(t.root, "sys/devices/system/cpu/cpu0/cpuidle/state2/name") == "C2"
    assert os.path.isfile(os.path.join(t.root, "dev/kfd"))
    freq = os.path.join(t.root, "sys/devices/system/cpu/cpu0/cpufreq")
    if os.path.isdir(freq):
        gov = _read(freq, "scaling_governor")
        assert gov != "performance" and gov in _read(freq, "scaling_available_governors").split()
    for key in ("bios_version", "bios_vendor", "bios_date", "product_name", "sys_vendor"):
        assert _read(t.root, f"sys/class/dmi/id/{key}")


def test_mi250x_cited_numbers(built):
    t = built("mi250x-8gcd")
    gcd0 = {int(link["node_to"]): link for link in t.links[t.gpu_nodes[0]]}
    gcd = dict(enumerate(t.gpu_nodes))
    # 4 links to GCD1 (same package), 1 to GCD2, 2 to GCD6 (shownodesbw min-max), nothing to GCD3/4/5/7
    assert (gcd0[gcd[1]]["min_bandwidth"], gcd0[gcd[1]]["max_bandwidth"]) == ("50000", "200000")
    assert (gcd0[gcd[2]]["min_bandwidth"], gcd0[gcd[2]]["max_bandwidth"]) == ("50000", "50000")
    assert (gcd0[gcd[6]]["min_bandwidth"], gcd0[gcd[6]]["max_bandwidth"]) == ("50000", "100000")
    assert not {gcd[i] for i in (3, 4, 5, 7)} & set(gcd0)
    assert all(gcd0[gcd[i]]["type"] == "11" and gcd0[gcd[i]]["weight"] == "15" for i in (1, 2, 6))
    # the matrix is symmetric and every package pair (0-1, 2-3, 4-5, 6-7) has 4 links
    m = t.xgmi_matrix()
    assert all(m[i][j] == m[j][i] for i in range(8) for j in range(8))
    assert [m[i][i + 1] for i in (0, 2, 4, 6)] == [200000] * 4
    # Frontier table: GCD -> L3 region threads, inside the GCD's NUMA node
    frontier = {4: "0-7,64-71", 5: "8-15,72-79", 2: "16-23,80-87", 3: "24-31,88-95",
                6: "32-39,96-103", 7: "40-47,104-111", 0: "48-55,112-119", 1: "56-63,120-127"}
    for g, threads in frontier.items():
        local = _parse_list(t.pci[t.gpu_bdfs[g]]["local_cpulist"])
        assert set(_parse_list(threads)) <= set(local)
    assert len(t.cpus()) == 128
    # one GCD's KFD CPU link goes to the KFD CPU node numbered as its NUMA node
    for i, n in enumerate(t.gpu_nodes):
        to_cpu = [int(link["node_to"]) for link in t.links[n] if link["type"] == "2"]
        assert to_cpu == [int(t.pci[t.gpu_bdfs[i]]["numa_node"])]


def test_mi300x_spx_cited_numbers(built):
    t = built("mi300x-8gpu-spx")
    m = t.xgmi_matrix()
    assert all((m[i][j] == 50000) == (i != j) for i in range(8) for j in range(8))
    assert {t.nodes[n]["gfx_target_version"] for n in t.gpu_nodes} == {"90402"}
    assert {t.pci[b]["max_link_speed"] for b in t.gpu_bdfs} == {"32.0 GT/s PCIe"}
    assert len(t.cpus()) == 384


def test_fault_x8_has_exactly_one_degraded_gpu(built):
    t = built("fault-x8-gen3")
    slow = [b for b in t.gpu_bdfs if t.pci[b]["current_link_width"] == "8"]
    assert slow == ["0000:5c:00.0"]
    dev = t.pci[slow[0]]
    assert (dev["current_link_speed"], dev["max_link_width"], dev["max_link_speed"]) == (
        "8.0 GT/s PCIe", "16", "32.0 GT/s PCIe")


def test_scale_profiles_differ_only_in_cpus(built):
    small, big = built("cpu16"), built("cpu256")
    assert (len(small.cpus()), len(big.cpus())) == (16, 256)
    assert small.gpu_bdfs == big.gpu_bdfs
    assert small.links == big.links
    for n in small.gpu_nodes:
        assert small.nodes[n] == big.nodes[n]


def test_build_into_existing_dir_keeps_inode(tmp_path):
    dest = tmp_path / "bind-mount"
    dest.mkdir()
    inode = dest.stat().st_ino
    sysroot.build("cpu256", str(dest))
    assert (dest / "sys/devices/system/cpu/cpu255").is_dir()
    sysroot.build("cpu16", str(dest))
    assert dest.stat().st_ino == inode
    assert not (dest / "sys/devices/system/cpu/cpu16").exists()
    assert (dest / sysroot.MARKER).read_text().strip() == "cpu16"


def test_build_refuses_a_foreign_directory(tmp_path):
    (tmp_path / "precious").write_text("keep me")
    with pytest.raises(sysroot.ProfileError, match="not empty"):
        sysroot.build("cpu16", str(tmp_path))
    assert (tmp_path / "precious").read_text() == "keep me"


def test_unknown_profile_names_the_known_ones():
    with pytest.raises(sysroot.ProfileError, match="mi250x-8gcd"):
        sysroot.load_profile("mi999")


def test_drm_links_stay_inside_the_sysroot(built):
    t = built("mi308x-cpx")
    link = os.path.join(t.root, "sys/class/drm/renderD128/device")
    assert not os.path.isabs(os.readlink(link))
    assert os.path.realpath(link) == os.path.realpath(os.path.join(t.root, PCI, "0000:0a:00.0"))


@pytest.mark.parametrize("args", [["list"], ["expect", "mi250x-8gcd"]])
def test_cli(args):
    out = subprocess.run([sys.executable, os.path.join(REPO, "sim", "sysroot.py"), *args],
                         capture_output=True, text=True, check=True).stdout
    if args[0] == "list":
        assert {line.split()[0] for line in out.splitlines()} == set(PROFILES)
    else:
        assert json.loads(out)["gpu_numa"] == [3, 3, 1, 1, 0, 0, 2, 2]


def test_cli_error_is_a_message_not_a_traceback(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(REPO, "sim", "sysroot.py"), "build", "nope", str(tmp_path)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "not found" in proc.stderr


@pytest.mark.parametrize("body, message", [
    ("cpu: null", "cpu must be a mapping"),
    ("cpu: {cores_per_l3: 5}", "not a multiple of cores_per_l3=5"),
    ("cpu: {cores_per_l3: two}", "cores_per_l3 must be a positive integer"),
    ("kfd: {synthetic: {gpu_numa: [0, 0]}}", "8 bdfs but 2 gpu_numa"),
    ("kfd: {synthetic: {gpu_numa: [0, 0, 0, 0, 1, 1, 1, 9]}}", "NUMA node outside 0-1"),
    ("memory: {node_kib: lots}", "memory.node_kib"),
    ("cpu: {cores_per_socket: null}", "cpu.cores_per_socket must be a positive integer"),
])
def test_cli_malformed_profile_is_a_message(tmp_path, monkeypatch, capsys, body, message):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for name in ("mi300x-8gpu-spx", "mi300x-8gpu-cpx"):
        (profiles / f"{name}.yml").write_text(open(os.path.join(sysroot.PROFILES_DIR, f"{name}.yml")).read())
    (profiles / "bad.yml").write_text(f"description: bad\nprovenance: {{kind: synthetic}}\nbase: mi300x-8gpu-spx\n"
                                      f"{body}\nexpect: {{}}\n")
    monkeypatch.setattr(sysroot, "PROFILES_DIR", str(profiles))
    assert sysroot.main(["build", "bad", str(tmp_path / "node")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "node").exists()


@pytest.mark.parametrize("name", ["fault-truncated-kfd", "mi300x-8gpu-2cpu"])
def test_build_reports_the_files_it_wrote(tmp_path, name):
    result = sysroot.build(name, str(tmp_path / "n"))
    assert result["files"] == sum(len(files) for _unused, _unused, files in os.walk(tmp_path / "n"))


def test_firmware_versions_are_written_as_amdgpu_prints_them(built):
    tree = built("mi300x-8gpu-spx")
    assert tree.accel_bdfs()
    for bdf in tree.accel_bdfs():  # the GPUs; bridges and NICs have no amdgpu firmware
        assert _read(os.path.join(tree.root, PCI, bdf), "fw_version/mec_fw_version") == "0x000000b1"


def test_iommu_groups_as_the_kernel_shows_them(built):
    """With IOMMU units every PCI function has an iommu_group link to sys/kernel/iommu_groups/<n>, whose type file
    says the domain (identity = passthrough) and whose devices/ links back; without units there are no groups."""
    tree = built("mi300x-8gpu-spx")
    groups = os.path.join(tree.root, "sys/kernel/iommu_groups")
    seen = set()
    for bdf in sorted(tree.pci):
        link = os.path.join(tree.root, PCI, bdf, "iommu_group")
        group = os.path.realpath(link)
        assert os.path.dirname(group) == os.path.realpath(groups), bdf
        assert _read(group, "type") == "identity"
        assert os.path.realpath(os.path.join(group, "devices", bdf)) == os.path.realpath(os.path.join(tree.root, PCI, bdf))
        assert not os.path.isabs(os.readlink(link))  # relative: the tree stays valid under /sim
        seen.add(group)
    assert len(seen) == len(tree.pci) == len(os.listdir(groups))
    assert not os.path.exists(os.path.join(built("fault-numa-minus1").root, "sys/kernel/iommu_groups"))


def test_amdgpu_files_of_the_spx_profile(built):
    """Large BAR seen without root (mem_info_vis_vram_total = mem_info_vram_total), the deferred count of UMC, and
    AMD's DKMS amdgpu (sys/module/amdgpu/version, bad_page_threshold -1)."""
    tree = built("mi300x-8gpu-spx")
    for bdf in tree.accel_bdfs():
        files = tree.pci[bdf]
        assert files["mem_info_vis_vram_total"] == files["mem_info_vram_total"] == "206158430208"
        assert _read(tree.root, f"{PCI}/{bdf}/ras/umc_err_count") == "ue: 0\nce: 0\nde: 0"
        assert _read(tree.root, f"{PCI}/{bdf}/ras/gfx_err_count") == "ue: 0\nce: 0"
    assert _read(tree.root, "sys/module/amdgpu/version") == "6.12.12"
    assert _read(tree.root, "sys/module/amdgpu/parameters/bad_page_threshold") == "-1"
