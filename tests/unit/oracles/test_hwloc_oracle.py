"""hwloc as an oracle: real hwloc (``lstopo-no-graphics``, Slurm's topology source) run on every simulated node must
find (a) the machine the profile describes and (b) exactly the CPU topology, NUMA nodes and GPU placement that
topotune's own reader (``load_capture``) reports, including hwloc's logical core numbering, which Slurm uses for
gres.conf ``Cores=``. The same comparison runs on this machine (sysroot ``/``).

On these EPYC-like trees (L2 per core, no clusters) lstopo's ``Core L#`` is also slurmd's numbering; where they
differ (a shared L2, I/O Groups), ``test_hwloc_trees.py`` checks slurmd's order on hwloc's own Linux test trees.

hwloc reads the tree through ``HWLOC_FSROOT``; its x86 backend is disabled for simulated trees because it would
annotate them with the CPUID of the machine running the test. Needs the Debian package ``hwloc`` (``scripts/setup``
installs it); without ``lstopo-no-graphics`` every test here is skipped with that reason.
"""

import importlib.util
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import parse
from ansible_collections.topotune.instinct.plugins.module_utils.topology.cpu import read_cpu_topology
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture
from ansible_collections.topotune.instinct.plugins.module_utils.topology.model import TopologyError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("sim_sysroot", os.path.join(REPO, "sim", "sysroot.py"))
sysroot = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sysroot)

PROFILES = [name for name, _unused in sysroot.list_profiles()]
LSTOPO = shutil.which("lstopo-no-graphics")
pytestmark = pytest.mark.skipif(
    LSTOPO is None, reason="hwloc is not installed: lstopo-no-graphics not on PATH (apt-get install hwloc; "
                           "scripts/setup installs it)")
IO_TYPES = ("Bridge", "PCIDev", "OSDev", "Misc")


# ------------------------------------------------------------------------------------------- hwloc side
def bitmap(text):
    """hwloc bitmap string (``0x0000ffff,,0x0000ffff``: 32-bit words, most significant first, empty = 0) -> set."""
    if "f...f" in text:
        raise ValueError("infinite hwloc bitmap %r" % text)
    value = 0
    for word in text.split(","):
        value = (value << 32) | (int(word, 16) if word else 0)
    return frozenset(i for i in range(value.bit_length()) if value >> i & 1)


def run_hwloc(root, tmp_path):
    """Run lstopo on ROOT; return (XML text, [(logical index, cpuset)] of the cores as lstopo itself lists them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
    if root != "/":
        env.update(HWLOC_FSROOT=root, HWLOC_COMPONENTS="-x86")
    xml_path = str(tmp_path / "topology.xml")
    proc = subprocess.run([LSTOPO, "-f", "--of", "xml", xml_path], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    if root != "/":
        # a tree hwloc finds inconsistent makes it complain here (e.g. "failed to find sysfs cpu topology")
        assert not proc.stderr.strip(), proc.stderr
    listing = subprocess.run([LSTOPO, "-i", xml_path, "--only", "core", "--cpuset"], env=env, capture_output=True,
                             text=True, timeout=120, check=True).stdout
    cores = []
    for line in listing.splitlines():
        name, cpuset = line.split(" cpuset=")
        assert name.startswith("Core L#")
        cores.append((int(name[len("Core L#"):]), bitmap(cpuset)))
    with open(xml_path, encoding="utf-8") as fh:
        return fh.read(), cores


def _amd_gpu(pci_type):
    """hwloc's ``pci_type`` (``"0380 [1002:740c] [1002:0b0c] 01"``) of an AMD GPU: class 0x12 (processing accelerator,
    MI300) or an AMD class 0x03 (display controller: MI200 GCDs)."""
    return pci_type.startswith("12") or (pci_type.startswith("03") and " [1002:" in pci_type)


class Hwloc:
    """The machine hwloc found: objects in hwloc's logical (depth-first) order."""

    def __init__(self, xml_text):
        self.packages, self.cores, self.pus, self.l3, self.numa, self.gpus = [], [], [], [], {}, {}
        self.memory = {}
        root = ET.fromstring(xml_text).find("object")
        self.root_nodeset = bitmap(root.get("nodeset"))
        self._walk(root, [])

    def _walk(self, elem, ancestors):
        kind = elem.get("type")
        if kind == "Package":
            self.packages.append((int(elem.get("os_index")), bitmap(elem.get("cpuset"))))
        elif kind == "Core":
            self.cores.append(bitmap(elem.get("cpuset")))
        elif kind == "PU":
            self.pus.append(int(elem.get("os_index")))
        elif kind == "L3Cache":
            self.l3.append((bitmap(elem.get("cpuset")), bitmap(elem.get("nodeset"))))
        elif kind == "NUMANode":
            node = int(elem.get("os_index"))
            self.numa[node] = bitmap(elem.get("cpuset"))
            self.memory[node] = int(elem.get("local_memory", 0))
        elif kind == "PCIDev" and _amd_gpu(elem.get("pci_type", "")):
            parent = next(a for a in reversed(ancestors) if a.get("type") not in IO_TYPES)
            self.gpus[elem.get("pci_busid")] = {
                "parent": parent.get("type"), "nodeset": bitmap(parent.get("nodeset"))}
        for child in elem.findall("object"):
            self._walk(child, ancestors + [elem])

    def gpu_numa(self, bdf):
        """The one NUMA node local to a GPU (its first non-I/O ancestor's nodeset), None if it spans several."""
        nodeset = self.gpus[bdf]["nodeset"]
        return next(iter(nodeset)) if len(nodeset) == 1 else None

    def core_index(self):
        return {cpu: i for i, core in enumerate(self.cores) for cpu in core}


# -------------------------------------------------------------------------------------- topotune side
def topotune_view(root):
    """``(cpu_topology, numa_nodes, gpus)`` as topotune reports them; the NUMA nodes and GPUs need a KFD tree."""
    try:
        model = load_capture(sysroot=root)
    except TopologyError:  # no amdgpu here (the real machine): CPU topology only
        return read_cpu_topology(root)[0], None, None
    return model["cpu_topology"], model["numa_nodes"], model["gpus"]


def cpus(text):
    return frozenset(parse(text))


# ------------------------------------------------------------------------------------------------ checks
def compare_topotune(hw, root):
    """Assert that topotune's model of ROOT equals hwloc's; return the topotune view for further checks."""
    cpu_topo, numa_nodes, gpus = topotune_view(root)
    assert cpu_topo is not None, "topotune found no CPU topology where hwloc found %d cores" % len(hw.cores)
    core_index = hw.core_index()
    # every core, in logical order: topotune's core index must be hwloc's logical index
    assert len(cpu_topo["cores"]) == len(hw.cores)
    for index, (ours, theirs) in enumerate(zip(cpu_topo["cores"], hw.cores)):
        assert cpus(ours) == theirs, "core %d: topotune %s, hwloc Core L#%d = %s" % (
            index, ours, index, sorted(theirs))
    assert cpu_topo["cpus"] == len(hw.pus)
    assert cpu_topo["threads_per_core"] == max(len(c) for c in hw.cores)
    assert [(p["id"], cpus(p["cpus"]), cpus(p["cores"])) for p in cpu_topo["packages"]] == [
        (os_index, cpuset, frozenset(core_index[c] for c in cpuset)) for os_index, cpuset in hw.packages]
    # the CPU model's own NUMA nodes (node<N>/cpumap, as hwloc reads them) and their cores
    assert {n["node"]: (cpus(n["cpus"]), cpus(n["cores"])) for n in cpu_topo["numa_nodes"]} == {
        node: (cpuset, frozenset(core_index[c] for c in cpuset)) for node, cpuset in hw.numa.items()}
    package_of = {cpu: os_index for os_index, cpuset in hw.packages for cpu in cpuset}
    assert [(cpus(d["cpus"]), cpus(d["cores"]), d["numa_node"], d["package"]) for d in cpu_topo["l3"]] == [
        (cpuset, frozenset(core_index[c] for c in cpuset), next(iter(nodes)) if len(nodes) == 1 else None,
         package_of[min(cpuset)]) for cpuset, nodes in hw.l3]
    if numa_nodes is not None:
        assert {n["node"]: cpus(n["cpus"]) for n in numa_nodes} == hw.numa
        for gpu in gpus:
            assert gpu["bdf"] in hw.gpus, "GPU %d (%s): topotune has it, hwloc does not" % (gpu["index"], gpu["bdf"])
            assert gpu["numa_node"] == hw.gpu_numa(gpu["bdf"]), "GPU %d (%s): topotune NUMA %s, hwloc %s" % (
                gpu["index"], gpu["bdf"], gpu["numa_node"], sorted(hw.gpus[gpu["bdf"]]["nodeset"]))
        by_node = {}
        for gpu in gpus:
            by_node.setdefault(gpu["numa_node"], []).append(gpu["index"])
        assert {n["node"]: sorted(n["gpus"]) for n in numa_nodes} == {
            node: sorted(by_node.get(node, [])) for node in hw.numa}
    return cpu_topo, numa_nodes, gpus


@pytest.fixture(scope="module")
def hwloc_of(tmp_path_factory, sim_tree):
    cache = {}

    def get(name):
        if name not in cache:
            root = sim_tree(name)
            xml_text, listed = run_hwloc(root, tmp_path_factory.mktemp(name))
            cache[name] = (root, Hwloc(xml_text), listed)
        return cache[name]

    return get


@pytest.mark.parametrize("name", PROFILES)
def test_hwloc_finds_the_profiled_machine(name, hwloc_of):
    root, hw, listed = hwloc_of(name)
    want = sysroot.machine(name)
    expect = sysroot.load_profile(name)["expect"]
    # the XML's depth-first order is the logical order lstopo prints (Core L#i)
    assert listed == list(enumerate(hw.cores))
    assert sorted(hw.pus) == list(range(want["cpus"])) and len(hw.pus) == expect["cpu_count"]
    assert [cpuset for _unused, cpuset in hw.packages] == [cpus(p) for p in want["packages"]]
    assert [os_index for os_index, _unused in hw.packages] == list(range(len(want["packages"])))
    # core k of the profile (k-th first thread) is hwloc's Core L#k
    assert hw.cores == [cpus(c) for c in want["cores"]]
    assert hw.numa == {k: cpus(c) for k, c in enumerate(want["numa"])}
    assert len(hw.numa) == expect["numa_nodes"]
    if "numa_cpulists" in expect:
        assert hw.numa == {int(k): cpus(c) for k, c in expect["numa_cpulists"].items()}
    assert hw.memory == {k: kib * 1024 for k, kib in enumerate(want["memory_kib"])}
    l3 = [cpuset for cpuset, _unused in hw.l3]
    assert l3 == [cpus(d) for d in want["l3"]]
    if "l3_cpulists" in expect:
        assert l3 == [cpus(d) for d in expect["l3_cpulists"]]
    # every L3 inside one NUMA node, with cores_per_l3 cores
    per_l3 = sysroot.load_profile(name)["cpu"]["cores_per_l3"]
    assert all(len(nodes) == 1 for _unused, nodes in hw.l3)
    assert {sum(1 for core in hw.cores if core <= cpuset) for cpuset in l3} == {per_l3}
    # each GPU under the object holding its NUMA node
    assert sorted(hw.gpus) == sorted(g["bdf"] for g in want["gpus"])
    for gpu in want["gpus"]:
        if gpu["numa"] >= 0:
            assert hw.gpu_numa(gpu["bdf"]) == gpu["numa"], gpu
        else:  # numa_node -1: hwloc places the device by local_cpus (= every CPU here), i.e. on the Machine
            assert hw.gpus[gpu["bdf"]] == {"parent": "Machine", "nodeset": hw.root_nodeset}, gpu


@pytest.mark.parametrize("name", PROFILES)
def test_topotune_agrees_with_hwloc(name, hwloc_of):
    root, hw, _unused = hwloc_of(name)
    cpu_topo, numa_nodes, gpus = compare_topotune(hw, root)
    assert numa_nodes is not None
    truncated = sysroot.load_profile(name)["faults"].get("kfd_truncate")
    if not truncated:  # a GPU without KFD properties is left out by topotune, hwloc still sees its PCI device
        assert sorted(g["bdf"] for g in gpus) == sorted(hw.gpus)


def test_numa_minus1_gpus_hang_off_the_machine(hwloc_of):
    """What hwloc does with numa_node -1 (a VM): local_cpus lists every CPU, so the GPUs are attached to the
    Machine object, local to both NUMA nodes; topotune says NUMA node unknown (None)."""
    root, hw, _unused = hwloc_of("fault-numa-minus1")
    assert {g["parent"] for g in hw.gpus.values()} == {"Machine"}
    assert all(hw.gpu_numa(bdf) is None for bdf in hw.gpus)
    _unused, _unused, gpus = topotune_view(root)
    assert {g["numa_node"] for g in gpus} == {None}


def test_two_cpu_profile_splits_l3(hwloc_of):
    """mi300x-8gpu-2cpu: hwloc finds the CPUs of this kind of test machine, one L3 per core, GPUs on NUMA 0."""
    _unused, hw, _unused = hwloc_of("mi300x-8gpu-2cpu")
    assert hw.cores == [frozenset({0}), frozenset({1})]
    assert [cpuset for cpuset, _unused in hw.l3] == [frozenset({0}), frozenset({1})]
    assert {hw.gpu_numa(bdf) for bdf in hw.gpus} == {0} and len(hw.gpus) == 8


def test_real_machine(tmp_path):
    """The same comparison on the machine running the tests (sysroot /)."""
    xml_text, listed = run_hwloc("/", tmp_path)
    hw = Hwloc(xml_text)
    assert listed == list(enumerate(hw.cores))
    if not os.path.isdir("/sys/devices/system/cpu/cpu0/topology"):
        pytest.skip("this machine hides /sys/devices/system/cpu/cpu*/topology (a container?): nothing to compare")
    compare_topotune(hw, "/")


@pytest.mark.parametrize("damage", ["swap_cores", "gpu_numa", "l3_node"])
def test_the_comparison_catches_a_wrong_model(hwloc_of, monkeypatch, damage):
    """The oracle fails when topotune numbers two cores differently from hwloc, misplaces a GPU or an L3."""
    root, hw, _unused = hwloc_of("mi250x-8gcd")
    cpu_topo, numa_nodes, gpus = topotune_view(root)
    if damage == "swap_cores":
        cpu_topo["cores"][8], cpu_topo["cores"][9] = cpu_topo["cores"][9], cpu_topo["cores"][8]
    elif damage == "gpu_numa":
        gpus[0]["numa_node"] = 0
    else:
        cpu_topo["l3"][0]["numa_node"] = 1
    monkeypatch.setitem(globals(), "topotune_view", lambda _root: (cpu_topo, numa_nodes, gpus))
    with pytest.raises(AssertionError):
        compare_topotune(hw, root)


def test_bitmap_parser():
    assert bitmap("0x00000001") == {0}
    assert bitmap("0x0000ffff,,0x0000ffff") == set(range(16)) | set(range(64, 80))
    assert bitmap("0x00000001,0x0") == {32}
    with pytest.raises(ValueError):
        bitmap("0xf...f")
