"""node_snapshot: the archive holds what topotune reads, so an extracted snapshot analyses like the node."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks.platform_checks import gather, run_checks
from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import parse
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import discover, load_capture
from ansible_collections.topotune.instinct.plugins.module_utils.topology.snapshot import collect, write_archive
from ansible_collections.topotune.instinct.plugins.modules import node_snapshot

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as sim_sysroot  # noqa: E402  (sim/ is not a package)

PROFILES = ["mi250x-8gcd", "mi300x-8gpu-cpx", "fault-numa-minus1", "fault-x8-gen3"]


def _gpu_view(model):
    keep = ("index", "bdf", "gfx", "numa_node", "cpus", "pcie", "render_minor", "hive_id", "partition")
    return [{k: g[k] for k in keep} for g in model["gpus"]], model["links"], model["numa_nodes"]


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory, sim_tree):
    """``snapshot(profile)``: (node, extracted, archive) for the profile's shared tree (tests/conftest.py), made once
    per module; the tests only read them."""
    cache = {}

    def get(profile):
        if profile not in cache:
            node = pathlib.Path(sim_tree(profile))
            base = tmp_path_factory.mktemp("snapshot-" + profile)
            files, meta = collect(str(node))
            archive = base / "snap.tar.gz"
            write_archive(str(archive), files, meta, {"rocm-smi_showtopo.txt": "fake\n"})
            extracted = base / "extracted"
            with tarfile.open(str(archive)) as tar:
                tar.extractall(str(extracted))
            cache[profile] = (node, extracted, archive)
        return cache[profile]
    return get


@pytest.mark.parametrize("profile", PROFILES)
def test_extracted_snapshot_gives_the_same_topology(snapshot, profile):
    node, extracted, _unused = snapshot(profile)
    assert _gpu_view(discover(sysroot=str(extracted))) == _gpu_view(discover(sysroot=str(node)))


# the health faults: the PCIe hierarchy, config space, AER counters, RDMA devices (ports, GIDs, netdevs, routes) and
# amdgpu's RAS files must survive
HEALTH_PROFILES = ["mi300x-8gpu-spx", "fault-acs-enabled", "fault-aer-fatal", "fault-nic-far-numa",
                   "fault-ecc-uncorrectable", "fault-mixed-partitions", "fault-rdma-port-down"]


@pytest.mark.parametrize("profile", PROFILES + HEALTH_PROFILES)
def test_extracted_snapshot_gives_the_same_platform_checks(snapshot, profile):
    from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

    node, extracted, _unused = snapshot(profile)
    knowledge = dict(load_knowledge("gpu_generations"), pcie_health=load_knowledge("pcie_health"),
                     gpu_health=load_knowledge("gpu_health"))
    # the kernel log check names the file it read: the same file under each root
    on_snapshot = json.loads(json.dumps(run_checks(gather(str(extracted)), knowledge)).replace(str(extracted), "ROOT"))
    on_node = json.loads(json.dumps(run_checks(gather(str(node)), knowledge)).replace(str(node), "ROOT"))
    # a snapshot is judged like the node: every check, health checks included, with the same observation
    assert on_snapshot == on_node
    if profile in HEALTH_PROFILES:
        judged = ("pci_acs", "pcie_aer", "rdma_gpu_nic_affinity", "gpu_ecc_errors", "gpu_partition_mode",
                  "rdma_nic_pcie_link", "rdma_port_state", "rdma_gid")
        assert not [r for r in on_snapshot if r["id"] in judged and r["status"] == "unknown"]


@pytest.mark.parametrize("profile", PROFILES + ["mi300x-8gpu-2cpu", "mi210-8gpu-2hive"])
def test_extracted_snapshot_gives_the_same_cpu_topology(snapshot, profile):
    node, extracted, _unused = snapshot(profile)
    ours = load_capture(sysroot=str(extracted))
    assert ours["cpu_topology"] == load_capture(sysroot=str(node))["cpu_topology"]
    assert ours["numa_nodes"] == load_capture(sysroot=str(node))["numa_nodes"]
    # ... and that is the machine the profile describes: cores, L3 domains, packages
    machine = sim_sysroot.machine(profile)
    topo = ours["cpu_topology"]
    assert [parse(c) for c in topo["cores"]] == [parse(c) for c in machine["cores"]]
    assert [parse(d["cpus"]) for d in topo["l3"]] == [parse(d) for d in machine["l3"]]
    assert [parse(p["cpus"]) for p in topo["packages"]] == [parse(p) for p in machine["packages"]]
    assert not [w for w in ours["warnings"] if "CPU" in w or "L3" in w]


@pytest.mark.skipif(shutil.which("lstopo-no-graphics") is None, reason="hwloc (lstopo-no-graphics) is not installed")
def test_hwloc_sees_the_same_machine_in_the_snapshot(snapshot):
    node, extracted, _unused = snapshot("mi250x-8gcd")

    def lstopo(root):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HWLOC_")}
        env.update(HWLOC_FSROOT=str(root), HWLOC_COMPONENTS="-x86")
        proc = subprocess.run(["lstopo-no-graphics", "--of", "console"], env=env, capture_output=True, text=True,
                              check=True)
        assert not proc.stderr.strip()
        return proc.stdout

    seen = lstopo(extracted)
    assert seen == lstopo(node)
    # the EX235a's PCIe tree: 8 GCDs (display controllers), each below its own root port, and 4 Slingshot NICs
    assert seen.count("L3 L#") == 8 and seen.count("(Display)") == 8 and seen.count("(Ethernet)") == 4
    assert seen.count("PCIBridge") == 12 and seen.count("HostBridge") == 8


def test_archive_records_devices_smi_and_stays_compact(snapshot):
    node, extracted, archive = snapshot("mi250x-8gcd")
    meta = json.loads((extracted / "snapshot.json").read_text())
    devices = {d["path"] for d in meta["devices"]}
    assert "dev/kfd" in devices and "dev/dri/renderD128" in devices
    assert (extracted / "smi" / "rocm-smi_showtopo.txt").read_text() == "fake\n"
    assert (extracted / "dev" / "kfd").is_file()
    assert oct(os.stat(archive).st_mode & 0o777) == "0o600"
    # only the PCI attributes of AMD GPUs, bridges and NICs, not every file of the node's tree
    assert all(p.startswith(("sys/", "proc/")) for p in meta["unreadable"])
    assert os.path.getsize(archive) < 200 * 1024


def test_module_writes_archive_in_check_mode(tmp_path, run_module, sim_tree):
    node = sim_tree("mi210-8gpu-2hive")
    dest = tmp_path / "out.tar.gz"
    _code, result = run_module(node_snapshot, check_mode=True, sysroot=str(node), dest=str(dest), smi=False)
    assert result["changed"] is False and result["files"] > 100 and dest.is_file()


def test_module_refuses_an_empty_sysroot(tmp_path, run_module):
    code, result = run_module(node_snapshot, sysroot=str(tmp_path), dest=str(tmp_path / "x.tar.gz"), smi=False)
    assert code == 1 and "nothing to archive" in result["msg"]


def test_cli_reads_the_extracted_snapshot(snapshot):
    _unused, extracted, _unused = snapshot("mi210-8gpu-2hive")
    out = subprocess.run([sys.executable, "-S", os.path.join(REPO, "bin", "topotune"), "topology", "--sysroot", str(extracted)],
                         check=True, capture_output=True, text=True).stdout
    model = json.loads(out)
    assert len(model["gpus"]) == 8 and [g["numa_node"] for g in model["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
