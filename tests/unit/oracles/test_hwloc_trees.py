"""hwloc's own Linux test trees (tests/fixtures/hwloc-linux: sysfs/procfs snapshots of real machines, from hwloc's
test suite) read by topotune's CPU topology reader, with hwloc itself, run on each tree, as the oracle.

For every ``NAME.tar.bz2`` (unpacked once per session; the tree sits in the archive's one top folder) hwloc runs as
``HWLOC_FSROOT=<tree> HWLOC_COMPONENTS=linux,stop lstopo-no-graphics --disallowed -f --of xml -`` with the
environment of hwloc's own ``NAME.test`` (its ``env:`` lines but the ``HWLOC_DEBUG_*`` knobs), and once more as
slurmd loads hwloc (hwloc's default filters: no instruction caches, no I/O; ``src/slurmd/common/xcpuinfo.c``
``xcpuinfo_hwloc_topo_load``: L1, L2, L4, L5 caches and Misc dropped, ``WHOLE_SYSTEM`` = ``--disallowed``), whose
depth-first core order is the one slurmd numbers gres.conf ``Cores=`` with (its block map). topotune's model must
match: the cores in that order (each core's CPUs), the PU count, threads per core,
the packages (id, CPUs, cores), the NUMA nodes (CPUs, cores), the L3 domains (CPUs, cores, NUMA node, package),
the CPUs the cgroup cpuset allows and the offline CPUs. ``TOPOTUNE_HWLOC_TREES=<dir>`` runs the same checks on
another folder of such trees (the rest of hwloc's suite).

Degraded trees (no cache files, no ``cpu/online``, lists without masks, a CPU-less node 0, sparse ids, garbage) are
derived from the real ones here, and hwloc is run on them too where it can read them.
"""

import glob
import os
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import CpulistError, parse, parse_mask
from ansible_collections.topotune.instinct.plugins.module_utils.topology.cpu import logical_cores, read_cpu_topology

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
TREES_DIR = os.environ.get("TOPOTUNE_HWLOC_TREES") or os.path.join(REPO, "tests", "fixtures", "hwloc-linux")
TREES = sorted(os.path.basename(p)[:-len(".tar.bz2")] for p in glob.glob(os.path.join(TREES_DIR, "*.tar.bz2")))
LSTOPO = shutil.which("lstopo-no-graphics")
# The topology slurmd numbers cores in: hwloc's library defaults (hwloc/topology.c hwloc_topology_setup_defaults:
# no instruction or memory-side caches, no I/O, no Misc, Groups only where they add structure) with L1, L2, L4, L5
# and Misc filtered out by slurmd (xcpuinfo_hwloc_topo_load). lstopo itself keeps everything, I/O included.
SLURM_FILTERS = ("--filter", "l1:none", "--filter", "l2:none", "--filter", "l4:none", "--filter", "l5:none",
                 "--filter", "misc:none", "--filter", "icache:none", "--filter", "memcache:none",
                 "--filter", "group:structure", "--no-io")


# ------------------------------------------------------------------------------------------- hwloc side
def bitmap(text):
    """hwloc bitmap (``0x0000ffff,,0x0000ffff``: 32-bit words, most significant first, empty = 0) -> frozenset."""
    value = 0
    for word in text.split(","):
        value = (value << 32) | (int(word, 16) if word else 0)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def suite_env(name):
    """The environment hwloc's NAME.test sets (``env: VAR=value`` lines; ``export`` lines add nothing), less its
    ``HWLOC_DEBUG_*`` knobs."""
    env = {}
    path = os.path.join(TREES_DIR, name + ".test")
    if not os.path.exists(path):
        return env
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            key, _sep, value = line.partition(":")
            value = value.strip()
            if key.strip() != "env" or value.startswith("export ") or "=" not in value:
                continue
            var, _sep, text = value.partition("=")
            # debug knobs change what hwloc builds (overlapping NUMA nodes kept); slurmd never sets them
            if not var.strip().startswith("HWLOC_DEBUG_"):
                env[var.strip()] = text.strip().strip('"')
    return env


def lstopo(root, extra_env=None, options=()):
    """hwloc's XML of the tree ROOT: what ``lstopo-no-graphics --disallowed`` finds there."""
    assert LSTOPO, "hwloc is not installed: lstopo-no-graphics not on PATH (scripts/setup installs Debian's hwloc)"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    env.update(extra_env or {})
    env.update(HWLOC_FSROOT=root, HWLOC_COMPONENTS="linux,stop", LC_ALL="C")
    proc = subprocess.run([LSTOPO, "--disallowed", "-f", *options, "--of", "xml", "-"], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


class Hwloc:
    """The machine hwloc found, objects in its logical (depth-first) order."""

    def __init__(self, xml_text):
        self.packages, self.cores, self.pus, self.l3, self.numa = [], [], [], [], {}
        root = ET.fromstring(xml_text).find("object")
        self.cpuset = bitmap(root.get("cpuset"))
        self.complete = bitmap(root.get("complete_cpuset"))
        self.allowed = bitmap(root.get("allowed_cpuset"))
        self._walk(root)

    def _walk(self, elem):
        kind = elem.get("type")
        if kind == "Package":
            index = elem.get("os_index")
            self.packages.append((int(index) if index is not None else None, bitmap(elem.get("cpuset"))))
        elif kind == "Core":
            self.cores.append(bitmap(elem.get("cpuset")))
        elif kind == "PU":
            self.pus.append(int(elem.get("os_index")))
        elif kind == "L3Cache":
            self.l3.append(bitmap(elem.get("cpuset")))
        elif kind == "NUMANode":
            self.numa[int(elem.get("os_index"))] = bitmap(elem.get("cpuset"))
        for child in elem.findall("object"):
            self._walk(child)


# -------------------------------------------------------------------------------------------- the trees
def unpack(name, dest):
    """Unpack NAME.tar.bz2 under DEST; return the tree root (the archive's one top folder, whatever its name)."""
    # the tar program: Python's tarfile takes ten times as long on these trees of thousands of tiny files
    subprocess.run(["tar", "-xjf", os.path.join(TREES_DIR, name + ".tar.bz2"), "-C", dest, "--no-same-owner"],
                   check=True, timeout=300)
    entries = [e for e in os.listdir(dest) if not e.startswith(".")]
    if len(entries) == 1 and os.path.isdir(os.path.join(dest, entries[0], "sys")):
        return os.path.join(dest, entries[0])
    assert os.path.isdir(os.path.join(dest, "sys")), "%s: no sys/ in the archive" % name
    return dest


@pytest.fixture(scope="session")
def scratch(tmp_path_factory):
    """Where trees are unpacked: a tmpfs when there is one (creating files is much faster there), else tmp."""
    shm = "/dev/shm"
    if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK):
        base = tempfile.mkdtemp(prefix="topotune-hwloc-", dir=shm)
        yield base
        shutil.rmtree(base, ignore_errors=True)
    else:
        yield str(tmp_path_factory.mktemp("hwloc-trees"))


@pytest.fixture(scope="session")
def tree(scratch):
    """``tree(name)`` -> (root, hwloc as lstopo shows it, hwloc as slurmd loads it): unpacked and run once."""
    cache = {}

    def get(name):
        if name not in cache:
            root = unpack(name, tempfile.mkdtemp(prefix="tree-", dir=scratch))
            env = suite_env(name)
            cache[name] = (root, Hwloc(lstopo(root, env)), Hwloc(lstopo(root, env, SLURM_FILTERS)))
        return cache[name]
    return get


@pytest.fixture
def derived(tree, scratch):
    """``derived(name)``: a writable copy of tree NAME to damage."""
    def copy(name):
        dest = os.path.join(tempfile.mkdtemp(prefix="derived-", dir=scratch), "tree")
        shutil.copytree(tree(name)[0], dest, symlinks=True)
        return dest
    return copy


def cpus(text):
    return frozenset(parse(text))


def nvidia_gpu_nodes(root):
    """NUMA nodes of NVIDIA GPU memory (/proc/driver/nvidia/gpus/*/numa_status): hwloc hides them on POWER or moves
    them to the GPU's locality (look_sysfsnode); topotune reports them as sysfs does."""
    found = set()
    for path in glob.glob(os.path.join(root, "proc/driver/nvidia/gpus/*/numa_status")):
        with open(path, encoding="latin-1") as fh:
            for line in fh:
                if line.strip().startswith("Node:") and line.split(":")[1].strip().isdigit():
                    found.add(int(line.split(":")[1]))
    return found


def cpuless_nodes(root):
    """The NUMA nodes whose own cpumap is empty: hwloc gives them the CPUs of their HMAT initiators or of their
    closest nodes (look_sysfsnode), topotune their own (none)."""
    found = set()
    for path in glob.glob(os.path.join(root, "sys/devices/system/node/node*/cpumap")):
        with open(path, encoding="latin-1") as fh:
            if not parse_mask(fh.read().split("\x00")[0]):
                found.add(int(os.path.basename(os.path.dirname(path))[4:]))
    return found


def compare(model, hw, slurm, root):
    """Assert that topotune's model is the machine hwloc found, cores numbered as slurmd numbers them."""
    if not slurm.cores:  # no core information (PUs only): Slurm would fudge one core; topotune says unknown
        assert model is None
        return
    assert model is not None, "topotune found no CPU topology where hwloc found %d cores" % len(slurm.cores)
    ours = [cpus(c) for c in model["cores"]]
    assert len(ours) == len(slurm.cores), "%d cores, hwloc (as slurmd loads it) %d" % (len(ours), len(slurm.cores))
    for index, (mine, theirs) in enumerate(zip(ours, slurm.cores)):
        assert mine == theirs, "core %d: topotune %s, hwloc Core L#%d %s" % (
            index, sorted(mine), index, sorted(theirs))
    # which objects exist does not depend on slurmd's filters, their order may (an I/O Group lstopo makes)
    assert sorted(hw.pus) == sorted(slurm.pus) and hw.numa == slurm.numa
    assert sorted(hw.packages, key=lambda p: min(p[1])) == sorted(slurm.packages, key=lambda p: min(p[1]))
    assert sorted(hw.l3, key=min) == sorted(slurm.l3, key=min)
    hw = slurm
    index = {cpu: i for i, core in enumerate(slurm.cores) for cpu in core}

    def core_set(cpuset):
        return frozenset(index[c] for c in cpuset if c in index)

    assert model["cpus"] == len(hw.pus)
    assert model["threads_per_core"] == max(len(c) for c in slurm.cores)
    assert [(p["id"], cpus(p["cpus"]), cpus(p["cores"])) for p in model["packages"]] == [
        (os_index, cpuset, core_set(cpuset)) for os_index, cpuset in hw.packages]
    cpuless, nvidia = cpuless_nodes(root), nvidia_gpu_nodes(root)
    with_cpus = {node: cpuset for node, cpuset in hw.numa.items() if node not in cpuless | nvidia}
    ours = {n["node"]: (cpus(n["cpus"]), cpus(n["cores"])) for n in model["numa_nodes"] if n["node"] not in nvidia}
    if not os.path.isdir(os.path.join(root, "sys/devices/system/node")):
        # a kernel without NUMA: hwloc makes one node of the whole machine, topotune reports none
        assert ours == {} and list(hw.numa.values()) == [frozenset(hw.pus)]
        with_cpus = {}
    else:
        assert ours == {**{node: (cpuset, core_set(cpuset)) for node, cpuset in with_cpus.items()},
                        **{node: (frozenset(), frozenset()) for node in cpuless - nvidia if node in hw.numa}}
    package_of = {cpu: os_index for os_index, cpuset in hw.packages for cpu in cpuset}

    def node_of(cpuset):
        nodes = [node for node, node_cpus in with_cpus.items() if node_cpus & cpuset]
        return nodes[0] if len(nodes) == 1 and cpuset <= hw.numa[nodes[0]] else None

    assert [(cpus(d["cpus"]), cpus(d["cores"]), d["numa_node"], d["package"]) for d in model["l3"]] == [
        (cpuset, core_set(cpuset), node_of(cpuset), package_of.get(min(cpuset))) for cpuset in hw.l3]
    assert cpus(model["allowed_cpus"]) == hw.allowed & hw.cpuset
    assert cpus(model["offline_cpus"]) <= hw.complete - hw.cpuset
    # what gres.conf Cores= is made of: the cores of each NUMA node and package, by slurmd's numbering
    for cpuset in list(with_cpus.values()) + [cpuset for _index, cpuset in hw.packages]:
        if cpuset:
            assert cpus(logical_cores(model, ",".join(str(c) for c in sorted(cpuset)))) == core_set(cpuset)


@pytest.mark.parametrize("name", TREES)
def test_topotune_reads_the_tree_as_hwloc_and_slurm_do(name, tree):
    root, hw, slurm = tree(name)
    model, warnings = read_cpu_topology(root)
    compare(model, hw, slurm, root)
    assert all(isinstance(w, str) and w for w in warnings)


def test_the_suite_is_here():
    assert len(TREES) >= 8, TREES_DIR
    if TREES_DIR.startswith(REPO):
        assert {"16em64t-4s2c2t", "8em64t-2s2ca2c", "16amd64-8n2c-cpusets", "128arm-2pa2n8cluster4co",
                "20em64t-hybrid-1p6c2t+2ca4co1t", "offline-cpu0-node0", "48amd64-4pa2n6c-sparse",
                "40intel64-2g2n4c+pcilocality"} <= set(TREES)


# ----------------------------------------------------------------------------------- what each tree shows
def test_old_kernel_hex_masks_without_lists_or_online(tree):
    """16em64t-4s2c2t: thread_siblings/core_siblings masks only, no cpu/online: 4 packages x 2 cores x 2 threads,
    hyper-threads 8 apart, the cores of a package 4 apart (0,8 and 4,12 on package 0)."""
    root, _hw, _slurm = tree("16em64t-4s2c2t")
    assert not os.path.exists(os.path.join(root, "sys/devices/system/cpu/online"))
    assert not glob.glob(os.path.join(root, "sys/devices/system/cpu/cpu*/topology/*_list"))
    model, warnings = read_cpu_topology(root)
    assert model["cores"][:4] == ["0,8", "4,12", "1,9", "5,13"]
    assert [p["cores"] for p in model["packages"]] == ["0-1", "2-3", "4-5", "6-7"]
    assert model["threads_per_core"] == 2 and model["cpus"] == 16
    assert [d["cpus"] for d in model["l3"]] == ["0,4,8,12", "1,5,9,13", "2,6,10,14", "3,7,11,15"]
    assert any("online is missing" in w for w in warnings)


def test_shared_l2_orders_lstopo_but_not_slurm(tree):
    """8em64t-2s2ca2c: two cores share each L2. lstopo's Core L# follows the L2 pairs (0,4,2,6), but slurmd drops
    L2 objects before numbering (xcpuinfo_hwloc_topo_load), so its core k on package 0 is CPU 0,2,4,6: topotune
    numbers as slurmd does, gres.conf Cores= being slurmd's numbers."""
    root, hw, slurm = tree("8em64t-2s2ca2c")
    assert [sorted(c) for c in hw.cores] == [[0], [4], [2], [6], [1], [5], [3], [7]]
    assert [sorted(c) for c in slurm.cores] == [[0], [2], [4], [6], [1], [3], [5], [7]]
    model, _warnings = read_cpu_topology(root)
    assert model["cores"] == ["0", "2", "4", "6", "1", "3", "5", "7"]
    assert logical_cores(model, "4") == "2"


def test_cgroup_restricted_view_is_the_whole_machine(tree):
    """16amd64-8n2c-cpusets: the process's cpuset (/dev/cpuset/dummy) allows CPUs 0-6,12-15 and CPU 4 is offline.
    slurmd loads hwloc with WHOLE_SYSTEM (--disallowed), so it numbers the 15 online CPUs' cores: the model
    describes the whole machine and says what is allowed."""
    root, hw, _slurm = tree("16amd64-8n2c-cpusets")
    model, warnings = read_cpu_topology(root)
    assert len(model["cores"]) == 15 and model["cores"][4] == "5" and model["cores"][6] == "7"
    assert model["allowed_cpus"] == "0-3,5-6,12-15"
    assert model["offline_cpus"] == "4"
    assert any("cgroup cpuset" in w and "/dev/cpuset/dummy/cpus" in w and "0-3,5-6,12-15" in w for w in warnings)
    assert any("CPUs 4 are offline" in w for w in warnings)
    assert any("leaves out CPUs 15" in w for w in warnings)
    # without --disallowed hwloc would hide CPUs 7-11: the numbering slurmd uses is the whole machine's
    assert len(hw.cores) == 15 and hw.allowed & hw.cpuset == cpus("0-3,5-6,12-15")


def test_arm_clusters_group_cores(tree):
    """128arm-2pa2n8cluster4co (Kunpeng 920): clusters of 4 cores (cluster_cpus) inside each L3/NUMA node."""
    root, _hw, slurm = tree("128arm-2pa2n8cluster4co")
    model, _warnings = read_cpu_topology(root)
    assert len(model["cores"]) == 128 and model["threads_per_core"] == 1
    assert [n["cores"] for n in model["numa_nodes"]] == ["0-31", "32-63", "64-95", "96-127"]
    assert [p["cores"] for p in model["packages"]] == ["0-63", "64-127"]
    assert [cpus(c) for c in model["cores"]] == slurm.cores


@pytest.mark.parametrize("level", ["cluster_cpus", "die_cpus"])
def test_clusters_and_dies_change_the_order(derived, level):
    """Where clusters (Linux 5.16+) or dies (5.2+) interleave CPU ids, cores follow them: CPUs 0,2,4,6 and 1,3,5,7
    as two clusters or dies of one package (derived from the 8em64t tree) give core order 0,2,4,6,1,..., on hwloc
    too."""
    root = derived("8em64t-2s2ca2c")
    base = os.path.join(root, "sys/devices/system/cpu")
    for cpu in range(8):
        topo = os.path.join(base, "cpu%d" % cpu, "topology")
        for fname, text in (("package_cpus", "000000ff"), (level, "00000055" if cpu % 2 == 0 else "000000aa"),
                            ("core_cpus", "%08x" % (1 << cpu))):
            with open(os.path.join(topo, fname), "w", encoding="ascii") as fh:
                fh.write(text + "\n")
    model, _warnings = read_cpu_topology(root)
    compare(model, Hwloc(lstopo(root)), Hwloc(lstopo(root, options=SLURM_FILTERS)), root)
    assert model["cores"] == ["0", "2", "4", "6", "1", "3", "5", "7"]
    assert [p["cores"] for p in model["packages"]] == ["0-7"]


def test_hybrid_cpu_cores_and_e_core_note(tree, derived):
    """20em64t-hybrid: 6 P-cores with 2 threads, then 8 E-cores in 2 clusters sharing an L2. slurmd numbers the
    P-cores only unless SlurmdParameters=allow_ecores (_remove_ecores, from hwloc's CoreType): with the kernel's
    cpu_core/cpu_atom PMU files (absent from this capture, added in a derived tree) the model says so."""
    root = tree("20em64t-hybrid-1p6c2t+2ca4co1t")[0]
    model, warnings = read_cpu_topology(root)
    assert model["cores"][:7] == ["0-1", "2-3", "4-5", "6-7", "8-9", "10-11", "12"]
    assert len(model["cores"]) == 14 and model["threads_per_core"] == 2
    assert any("1 or 2 threads" in w for w in warnings)
    assert not any("allow_ecores" in w for w in warnings)
    root = derived("20em64t-hybrid-1p6c2t+2ca4co1t")
    for kind, text in (("cpu_core", "0-11\n"), ("cpu_atom", "12-19\n")):
        os.makedirs(os.path.join(root, "sys/devices", kind))
        with open(os.path.join(root, "sys/devices", kind, "cpus"), "w", encoding="ascii") as fh:
            fh.write(text)
    assert read_cpu_topology(root)[0] == model
    assert any("allow_ecores" in w and "CPUs 0-11" in w for w in read_cpu_topology(root)[1])


def test_offline_cpu0_and_cpuless_node0(tree):
    """offline-cpu0-node0: CPUs 0-3 and 21-23 offline, node 0 offline; the lists of this crafted tree still name
    the offline CPUs, the masks do not (hwloc reads the masks): package 0 has no NUMA node."""
    root, _hw, _slurm = tree("offline-cpu0-node0")
    model, warnings = read_cpu_topology(root)
    assert model["cores"][0] == "4" and model["cpus"] == 17
    assert model["offline_cpus"] == "0-3,21-23"
    assert [n["node"] for n in model["numa_nodes"]] == [1]
    assert model["l3"][0]["numa_node"] is None and model["l3"][1]["numa_node"] == 1
    assert any("offline" in w and "shift" in w for w in warnings)
    # slurmd 22.05's block map skips CPUs whose id is not below the CPU count (its Block Map on this tree:
    # 4,6,8,10,12,14,16,7,8,5,7,9,11,13,15,15,16): the model says so
    assert any("leaves out CPUs 17-20" in w for w in warnings)


def test_sparse_node_ids(tree):
    """48amd64-4pa2n6c-sparse: NUMA nodes 0,1,2,33,34,45,72,73, two per package, one L3 each."""
    root, _hw, _slurm = tree("48amd64-4pa2n6c-sparse")
    model, _warnings = read_cpu_topology(root)
    assert [n["node"] for n in model["numa_nodes"]] == [0, 1, 2, 33, 34, 45, 72, 73]
    assert [d["numa_node"] for d in model["l3"]] == [0, 1, 2, 33, 34, 45, 72, 73]
    assert [n["cores"] for n in model["numa_nodes"]][3] == "18-23"


@pytest.mark.parametrize("own_core_ids", [True, False])
def test_amd_compute_unit_threads_are_cores(derived, own_core_ids):
    """AMD family 15h (Bulldozer): the two threads of a compute unit are siblings in sysfs but each has its own
    core_id, and hwloc (look_sysfscpu, is_amd_with_CU) makes each a core; with equal core_ids they are one core.
    Derived from the 16em64t tree with /proc/cpuinfo saying AuthenticAMD family 21; hwloc-nofile-info tells hwloc
    the tree is x86 (on the machine itself hwloc knows, and only x86 kernels print vendor_id)."""
    root = derived("16em64t-4s2c2t")
    with open(os.path.join(root, "proc/hwloc-nofile-info"), "w", encoding="ascii") as fh:
        fh.write("Architecture: x86_64\n")
    with open(os.path.join(root, "proc/cpuinfo"), encoding="latin-1") as fh:
        text = fh.read().replace("GenuineIntel", "AuthenticAMD")
    with open(os.path.join(root, "proc/cpuinfo"), "w", encoding="latin-1") as fh:
        fh.write("\n".join("cpu family\t: 21" if line.startswith("cpu family") else line
                           for line in text.splitlines()) + "\n")
    if own_core_ids:
        for cpu in range(16):
            with open(os.path.join(root, "sys/devices/system/cpu/cpu%d/topology/core_id" % cpu), "w",
                      encoding="ascii") as fh:
                fh.write("%d\n" % cpu)
    model, _warnings = read_cpu_topology(root)
    compare(model, Hwloc(lstopo(root)), Hwloc(lstopo(root, options=SLURM_FILTERS)), root)
    assert len(model["cores"]) == (16 if own_core_ids else 8)


@pytest.mark.parametrize("cgroup, allowed", [("0::/job\n", "0-5,24-29"), ("0::/../../outside\n", "0-47")])
def test_cgroup_v2_restriction(derived, cgroup, allowed):
    """cgroup v2 (derived from the sparse tree): the process's cgroup's cpuset.cpus.effective is what is allowed;
    a path outside the cgroup namespace (/../..) cannot be read, so every CPU is allowed, as hwloc finds. (hwloc
    2.9 finds the mount in /proc/mounts only, later versions try /sys/fs/cgroup first: a node has both.)"""
    root = derived("48amd64-4pa2n6c-sparse")
    for path, text in (("proc/mounts", "cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime 0 0\n"),
                       ("sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory pids\n"),
                       ("sys/fs/cgroup/cpuset.cpus.effective", "0-47\n"),
                       ("sys/fs/cgroup/job/cpuset.cpus.effective", "0-5,24-29\n"), ("proc/self/cgroup", cgroup)):
        os.makedirs(os.path.dirname(os.path.join(root, path)), exist_ok=True)
        with open(os.path.join(root, path), "w", encoding="ascii") as fh:
            fh.write(text)
    model, _warnings = read_cpu_topology(root)
    compare(model, Hwloc(lstopo(root)), Hwloc(lstopo(root, options=SLURM_FILTERS)), root)
    assert model["allowed_cpus"] == allowed and len(model["cores"]) == 48


def test_this_machine():
    """The machine running the tests, read at / (hwloc's view of it with HWLOC_FSROOT=/)."""
    model, _warnings = read_cpu_topology("/")
    compare(model, Hwloc(lstopo("/")), Hwloc(lstopo("/", options=SLURM_FILTERS)), "/")


# ---------------------------------------------------------------------------------------- degraded inputs
def _remove(root, pattern):
    for path in glob.glob(os.path.join(root, pattern)):
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.remove(path)


def test_no_cache_files(derived):
    """No cpuN/cache: no L3 domain (hwloc finds none either), a warning, cores unchanged."""
    root = derived("48amd64-4pa2n6c-sparse")
    _remove(root, "sys/devices/system/cpu/cpu*/cache")
    model, warnings = read_cpu_topology(root)
    hw = Hwloc(lstopo(root))
    compare(model, hw, Hwloc(lstopo(root, options=SLURM_FILTERS)), root)
    assert model["l3"] == [] and len(model["cores"]) == 48
    assert any("cache/" in w and "L3 domains unknown" in w for w in warnings)


def test_some_cpus_without_cache_files(derived):
    root = derived("48amd64-4pa2n6c-sparse")
    _remove(root, "sys/devices/system/cpu/cpu4[0-7]/cache")
    model, warnings = read_cpu_topology(root)
    compare(model, Hwloc(lstopo(root)), Hwloc(lstopo(root, options=SLURM_FILTERS)), root)
    assert len(model["l3"]) == 7
    assert any("CPUs 40-47 have no cache/" in w for w in warnings)


def test_no_online_file_with_offline_cpus(tree, derived):
    """Without cpu/online each cpuN/online says which CPUs are online, as hwloc reads them (look_sysfscpu); hwloc
    itself gives up on this tree (check_sysfs_cpu_path wants cpu0/topology or cpu/online), topotune does not."""
    want = read_cpu_topology(tree("offline-cpu0-node0")[0])[0]
    root = derived("offline-cpu0-node0")
    os.remove(os.path.join(root, "sys/devices/system/cpu/online"))
    model, warnings = read_cpu_topology(root)
    assert model == want and model["offline_cpus"] == "0-3,21-23"
    assert any("online is missing" in w for w in warnings)


def test_cpuless_numa_node_and_sparse_cpu_ids(derived):
    """Node 0 without CPUs (its cpumap zero, its CPUs now in node 1) and CPUs 6-11 gone (sparse CPU ids)."""
    root = derived("48amd64-4pa2n6c-sparse")
    nodes = os.path.join(root, "sys/devices/system/node")
    for fname, text in (("node0/cpumap", "00000000,00000000\n"), ("node0/cpulist", "\n"),
                        ("node1/cpumap", "00000000,00000fff\n"), ("node1/cpulist", "0-11\n")):
        with open(os.path.join(nodes, fname), "w", encoding="ascii") as fh:
            fh.write(text)
    _remove(root, "sys/devices/system/cpu/cpu[6-9]")
    _remove(root, "sys/devices/system/cpu/cpu1[01]")
    with open(os.path.join(root, "sys/devices/system/cpu/online"), "w", encoding="ascii") as fh:
        fh.write("0-5,12-47\n")
    model, _warnings = read_cpu_topology(root)
    compare(model, Hwloc(lstopo(root)), Hwloc(lstopo(root, options=SLURM_FILTERS)), root)
    assert model["numa_nodes"][0] == {"node": 0, "cpus": "", "cores": ""}
    assert model["cores"][6] == "12" and len(model["cores"]) == 42


def test_lists_without_masks_give_the_same_model(tree, derived):
    """A tree with *_list files only (no masks: hwloc cannot read it) still gives the same model."""
    name = "128arm-2pa2n8cluster4co"
    want = read_cpu_topology(tree(name)[0])[0]
    root = derived(name)
    for mask in ("core_cpus", "thread_siblings", "cluster_cpus", "die_cpus", "package_cpus", "core_siblings"):
        _remove(root, "sys/devices/system/cpu/cpu*/topology/%s" % mask)
    _remove(root, "sys/devices/system/cpu/cpu*/cache/index*/shared_cpu_map")
    _remove(root, "sys/devices/system/node/node*/cpumap")
    model, _warnings = read_cpu_topology(root)
    assert model == want


def test_garbage_files_give_warnings_not_tracebacks(derived):
    root = derived("8em64t-2s2ca2c")
    base = os.path.join(root, "sys/devices/system/cpu")
    for path, text in (("cpu1/topology/thread_siblings", "zz,yy\n"), ("cpu1/topology/thread_siblings_list", "1-\n"),
                       ("cpu3/topology/core_siblings", "\x00\x01\n"), ("online", "0-7,a\n")):
        with open(os.path.join(base, path), "w", encoding="latin-1") as fh:
            fh.write(text)
    model, warnings = read_cpu_topology(root)
    assert model is not None and "1" not in model["cores"]
    assert any("cpu1/topology/thread_siblings" in w for w in warnings)
    assert any("belong to no core" in w for w in warnings)
    assert any("/online" in w for w in warnings)


def test_no_package_files_groups_by_physical_package_id(derived):
    root = derived("16em64t-4s2c2t")
    _remove(root, "sys/devices/system/cpu/cpu*/topology/core_siblings*")
    model, warnings = read_cpu_topology(root)
    assert [p["id"] for p in model["packages"]] == [0, 1, 2, 3]
    assert model["cores"][:2] == ["0,8", "4,12"]
    assert any("physical_package_id" in w for w in warnings)


def test_a_cache_crossing_packages_is_dropped_as_hwloc_drops_it(derived):
    """cpu0's L3 said to be shared with CPU 1 (another package, and not its hyper-thread 8): hwloc drops the
    crossing object, so does topotune, with a warning; the other packages' L3 domains stay."""
    root = derived("16em64t-4s2c2t")
    with open(os.path.join(root, "sys/devices/system/cpu/cpu0/cache/index2/shared_cpu_map"), "w",
              encoding="ascii") as fh:
        fh.write("00000003\n")
    model, warnings = read_cpu_topology(root)
    compare(model, Hwloc(lstopo(root, {"HWLOC_SHOW_ERRORS": "none"})),
            Hwloc(lstopo(root, {"HWLOC_SHOW_ERRORS": "none"}, SLURM_FILTERS)), root)
    assert [d["cpus"] for d in model["l3"]] == ["1,5,9,13", "2,6,10,14", "3,7,11,15"]
    assert any("L3 cache 0-1 crosses core 0,8" in w for w in warnings)


@pytest.mark.parametrize("damage", ["no_cpu_dir", "no_topology", "no_core_files"])
def test_no_topology_at_all_is_none_with_a_reason(derived, damage):
    root = derived("8em64t-2s2ca2c")
    pattern = {"no_cpu_dir": "sys/devices/system/cpu", "no_topology": "sys/devices/system/cpu/cpu*/topology",
               "no_core_files": "sys/devices/system/cpu/cpu*/topology/thread_siblings*"}[damage]
    _remove(root, pattern)
    model, warnings = read_cpu_topology(root)
    assert model is None and "CPU topology unknown" in warnings[-1]


def test_the_comparison_catches_a_wrong_order(tree):
    root, hw, slurm = tree("8em64t-2s2ca2c")
    model, _warnings = read_cpu_topology(root)
    with pytest.raises(AssertionError):
        compare(dict(model, cores=[",".join(str(c) for c in sorted(core)) for core in hw.cores]), hw, slurm, root)
    with pytest.raises(AssertionError):
        compare(dict(model, allowed_cpus="0"), hw, slurm, root)
    with pytest.raises(AssertionError):
        compare(dict(model, numa_nodes=[]), hw, slurm, root)


# ------------------------------------------------------------------------------------------ kernel masks
@pytest.mark.parametrize("text, want", [
    ("00000001", [0]), ("00000000,00000100", [8]), ("0000ffff,00000000", list(range(32, 48))),
    ("00000000,00000000,00000000,00000000,00000000,000aaaa0", list(range(5, 20, 2))), ("f\n", [0, 1, 2, 3]),
    ("0x3", [0, 1]),
])
def test_parse_mask(text, want):
    assert parse_mask(text) == want


@pytest.mark.parametrize("text", ["", "zz", "1,,2", "100000000", None])
def test_parse_mask_rejects(text):
    with pytest.raises(CpulistError):
        parse_mask(text)
