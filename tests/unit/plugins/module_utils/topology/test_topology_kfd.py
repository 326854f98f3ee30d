"""KFD sysfs reader on the real captures, on PCI/NUMA sysfs built in tmp_path, and on damaged trees."""

import collections
import os
import shutil

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.topology.kfd import KFD_NODES, bdf_of, read_kfd
from ansible_collections.topotune.instinct.plugins.module_utils.topology.model import TopologyError

KFD = os.path.join(os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")), "fixtures", "kfd")
MI210 = os.path.join(KFD, "mi210-8gpu-2hive")
MI300X_CPX = os.path.join(KFD, "mi300x-8gpu-cpx")
MI308X_CPX = os.path.join(KFD, "mi308x-cpx")
DUP = os.path.join(KFD, "single-gpu-dup")


def _model(path):
    return read_kfd(path=path).to_dict()


def _link_kinds(model):
    return dict(collections.Counter((link["type"], link["hops"], link["weight"]) for link in model["links"]))


# facts read by hand off each capture's properties files
@pytest.mark.parametrize(
    ("capture", "gpus", "physical", "gfx", "device", "numa", "link_kinds", "hives"),
    [
        (MI210, 8, 8, "gfx90a", "0x740f", [0, 0, 0, 0, 1, 1, 1, 1],
         {("xgmi", 1, 15): 12, ("pcie", 3, 72): 16}, [[0, 1, 2, 3], [4, 5, 6, 7]]),
        (MI300X_CPX, 63, 8, "gfx942", "0x74a1", [0] * 32 + [1] * 31,
         {("xgmi", 1, 13): 217, ("xgmi", 1, 41): 1736}, [list(range(63))]),
        (MI308X_CPX, 32, 8, "gfx942", "0x74a2", [0] * 16 + [1] * 16,
         {("xgmi", 1, 13): 48, ("xgmi", 1, 41): 448}, [list(range(32))]),
        (DUP, 1, 1, None, "0x6860", [0], {}, []),
    ],
    ids=["mi210", "mi300x-cpx", "mi308x-cpx", "single-gpu-dup"],
)
def test_captures(capture, gpus, physical, gfx, device, numa, link_kinds, hives):
    model = _model(capture)
    assert model["source"] == "kfd"
    assert len(model["gpus"]) == gpus
    assert len(model["physical_devices"]) == physical
    assert {g["gfx"] for g in model["gpus"]} == {gfx}
    assert {g["device_id"] for g in model["gpus"]} == {device}
    assert [g["numa_node"] for g in model["gpus"]] == numa
    assert {g["numa_source"] for g in model["gpus"]} == {"kfd"}
    assert _link_kinds(model) == link_kinds
    assert len(model["links"]) == gpus * (gpus - 1) // 2
    assert all(link["a"] < link["b"] for link in model["links"])
    assert [h["gpus"] for h in model["hives"]] == hives


def test_mi210_identity_and_paths():
    model = _model(MI210)
    first = model["gpus"][0]
    assert first["kfd_node"] == 2 and first["bdf"] == "0000:63:00.0" and first["gpu_id"] is None
    assert first["render_minor"] == 128 and first["vendor_id"] == "0x1002" and first["simd_count"] == 416
    assert first["hive_id"] == "12609507387757274807" and first["gfx_target_version"] == 90010
    assert model["xgmi_cliques"] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # no PCI sysfs in the capture: CPUs fall back to the KFD CPU node's core range
    assert [g["cpus"] for g in model["gpus"]] == ["0-63"] * 4 + ["64-127"] * 4
    assert any("cpu_core_id_base" in w for w in model["warnings"])
    cross = [link for link in model["links"] if link["a"] == 0 and link["b"] == 4][0]
    assert cross["bandwidth_mbps"] is None  # PCIe peers: no direct bandwidth
    direct = [link for link in model["links"] if link["a"] == 0 and link["b"] == 1][0]
    assert direct["bandwidth_mbps"] == {"min": 50000, "max": 50000}


def test_mi300x_cpx_partitions_and_missing_node():
    model = _model(MI300X_CPX)
    assert model["physical_devices"][0] == {"physical_index": 0, "bdf": "0000:05:00.0", "gpus": list(range(8))}
    assert model["gpus"][1]["partition"] == {"index": 1, "count": 8}
    assert model["gpus"][62]["partition"] == {"index": 6, "count": 7}
    assert model["gpus"][62]["bdf"] == "0000:e5:00.6"
    assert any("unequal partition counts (0000:e5:00.0: 7; 8 on the others)" in w for w in model["warnings"])
    assert model["xgmi_cliques"] == [list(range(63))]


def test_mi308x_has_gpu_id_and_domains():
    model = _model(MI308X_CPX)
    assert model["gpus"][0]["gpu_id"] == 24248 and model["gpus"][0]["name"] == "ip discovery"
    assert model["gpus"][16]["bdf"] == "0001:0b:00.0"
    assert [len(p["gpus"]) for p in model["physical_devices"]] == [4] * 8


def test_single_gpu_dup_is_dropped_with_warning():
    model = _model(DUP)
    assert [g["kfd_node"] for g in model["gpus"]] == [1]
    assert model["warnings"][0] == (
        "KFD node 2 duplicates GPU node 1 (same bdf 0000:19:00.0 and gpu_id 13261): node 2 ignored")


@pytest.mark.parametrize("sub", ["topology", "topology/nodes"])
def test_capture_path_forms(sub):
    assert len(read_kfd(path=os.path.join(MI308X_CPX, sub)).gpus) == 32


def test_bdf_of():
    assert bdf_of(1, (0xC9 << 8) | (0 << 3) | 3) == "0001:c9:00.3"


# ---- sysroot layout with PCI and NUMA sysfs built in tmp_path ----

def _sysroot(tmp_path, capture=MI210):
    src = os.path.join(capture, "nodes") if os.path.isdir(os.path.join(capture, "nodes")) else \
        os.path.join(capture, "topology", "nodes")
    dst = tmp_path / KFD_NODES
    shutil.copytree(src, str(dst))
    return tmp_path


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _pci(root, bdf, numa, cpulist=None, width="16", speed="16.0 GT/s PCIe"):
    dev = root / "sys/bus/pci/devices" / bdf
    _write(dev / "numa_node", "%s\n" % numa)
    if cpulist is not None:
        _write(dev / "local_cpulist", cpulist + "\n")
    _write(dev / "current_link_width", width + "\n")
    _write(dev / "max_link_width", "16\n")
    _write(dev / "current_link_speed", speed + "\n")
    _write(dev / "max_link_speed", "16.0 GT/s PCIe\n")


def test_pci_sysfs_wins_over_kfd(tmp_path):
    root = _sysroot(tmp_path)
    _pci(root, "0000:63:00.0", 3, "48-55,112-119", width="8")
    _pci(root, "0000:43:00.0", 2)
    _write(root / "sys/devices/system/node/node2/cpulist", "32-47,96-111\n")
    _write(root / "sys/devices/system/node/node0/cpulist", "0-15\n")
    model = read_kfd(sysroot=str(root)).to_dict()
    g0, g1, g2 = model["gpus"][:3]
    assert (g0["numa_node"], g0["numa_source"], g0["cpus"]) == (3, "pci", "48-55,112-119")
    assert g0["pcie"] == {"current_width": 8, "max_width": 16, "current_speed_gts": 16.0, "max_speed_gts": 16.0}
    assert (g1["numa_node"], g1["numa_source"], g1["cpus"]) == (2, "pci", "32-47,96-111")
    # GPU 2 has no PCI dir: KFD CPU node 0, CPUs from node0/cpulist
    assert (g2["numa_node"], g2["numa_source"], g2["cpus"], g2["pcie"]) == (0, "kfd", "0-15", None)
    nodes = {n["node"]: n for n in model["numa_nodes"]}
    assert nodes[2] == {"node": 2, "cpus": "32-47,96-111", "gpus": [1]}
    assert nodes[3]["gpus"] == [0]


def test_pci_numa_minus_one_is_unknown_not_guessed(tmp_path):
    root = _sysroot(tmp_path)
    _pci(root, "0000:63:00.0", -1)
    model = read_kfd(sysroot=str(root)).to_dict()
    assert model["gpus"][0]["numa_node"] is None and model["gpus"][0]["numa_source"] is None
    assert any("PCI numa_node is -1" in w for w in model["warnings"])


def test_bad_local_cpulist_warns(tmp_path):
    root = _sysroot(tmp_path)
    _pci(root, "0000:63:00.0", 0, "zero-seven")
    model = read_kfd(sysroot=str(root)).to_dict()
    assert model["gpus"][0]["cpus"] is None or model["gpus"][0]["cpus"] == "0-63"
    assert any("local_cpulist: invalid cpulist 'zero-seven'" in w for w in model["warnings"])


# ---- damaged trees ----

def _damage_missing_properties(nodes):
    os.remove(os.path.join(nodes, "3", "properties"))


def _damage_missing_io_links(nodes):
    shutil.rmtree(os.path.join(nodes, "2", "io_links"))


def _damage_garbage_value(nodes):
    path = os.path.join(nodes, "2", "properties")
    text = open(path).read().replace("hive_id 12609507387757274807", "hive_id zz")
    with open(path, "w") as handle:
        handle.write(text)


def _damage_truncated_link(nodes):
    with open(os.path.join(nodes, "2", "io_links", "1", "properties"), "w") as handle:
        handle.write("type 11\nversion_major 0\n")


def _damage_empty_link_file(nodes):
    os.remove(os.path.join(nodes, "4", "io_links", "0", "properties"))


@pytest.mark.parametrize(
    ("damage", "gpus", "message"),
    [
        (_damage_missing_properties, 7, "KFD node 3: "),
        (_damage_missing_io_links, 8, "KFD node 2: io_links/ is missing"),
        (_damage_garbage_value, 8, "KFD node 2: non-integer values for hive_id"),
        (_damage_truncated_link, 8, "KFD node 2: io_links/1/properties has no integer node_to/type/weight"),
        (_damage_empty_link_file, 8, "KFD node 4: io_links/0/properties is missing or unreadable"),
    ],
    ids=["missing-properties", "missing-io_links", "garbage-value", "truncated-link", "missing-link-file"],
)
def test_damaged_tree_gives_partial_model(tmp_path, damage, gpus, message):
    root = _sysroot(tmp_path)
    damage(str(root / KFD_NODES))
    model = read_kfd(sysroot=str(root)).to_dict()
    assert len(model["gpus"]) == gpus
    assert any(message in w for w in model["warnings"]), model["warnings"]
    assert len(model["links"]) == gpus * (gpus - 1) // 2


def test_missing_io_links_leaves_numa_unknown(tmp_path):
    root = _sysroot(tmp_path)
    _damage_missing_io_links(str(root / KFD_NODES))
    model = read_kfd(sysroot=str(root)).to_dict()
    assert model["gpus"][0]["numa_node"] is None
    # GPU 0 still reaches its hive peers through their io_links
    assert [link["type"] for link in model["links"] if link["a"] == 0][:3] == ["xgmi", "xgmi", "xgmi"]


def test_garbage_hive_id_splits_hive(tmp_path):
    root = _sysroot(tmp_path)
    _damage_garbage_value(str(root / KFD_NODES))
    model = read_kfd(sysroot=str(root)).to_dict()
    assert model["gpus"][0]["hive_id"] is None
    assert model["hives"][0]["gpus"] == [1, 2, 3]


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda root: None, "KFD topology not found: %s/sys/class/kfd/kfd/topology/nodes does not exist"),
        (lambda root: (root / KFD_NODES).mkdir(parents=True), "holds no numbered node directories"),
        (lambda root: _write(root / KFD_NODES / "0" / "properties", "cpu_cores_count 8\nsimd_count 0\n"),
         "has no GPU node"),
    ],
    ids=["no-tree", "empty-nodes", "cpu-only"],
)
def test_unusable_tree_raises(tmp_path, setup, message):
    setup(tmp_path)
    with pytest.raises(TopologyError, match=message.replace("%s", str(tmp_path)).replace(".", r"\.")):
        read_kfd(sysroot=str(tmp_path))


def test_mi250_like_hive_without_direct_link(tmp_path):
    """Two GPUs in one hive joined only through a third: xgmi, hops 2, weight = sum along the path."""
    nodes = tmp_path / KFD_NODES
    _write(nodes / "0" / "properties", "cpu_cores_count 8\nsimd_count 0\n")
    links = {1: [(0, 2, 20), (2, 11, 15)], 2: [(0, 2, 20), (1, 11, 15), (3, 11, 15)], 3: [(0, 2, 20), (2, 11, 15)]}
    for num, node_links in links.items():
        _write(nodes / str(num) / "properties",
               "simd_count 416\ngfx_target_version 90010\nhive_id 99\ndomain 0\nlocation_id %d\n" % (num << 8))
        for i, (to, kind, weight) in enumerate(node_links):
            _write(nodes / str(num) / "io_links" / str(i) / "properties",
                   "type %d\nnode_from %d\nnode_to %d\nweight %d\n" % (kind, num, to, weight))
    model = read_kfd(sysroot=str(tmp_path)).to_dict()
    far = [link for link in model["links"] if (link["a"], link["b"]) == (0, 2)][0]
    assert (far["type"], far["hops"], far["weight"]) == ("xgmi", 2, 30)
    assert model["xgmi_cliques"] == [[0, 1], [1, 2]]


def test_firmware_versions_come_from_the_pci_devices(sim_model):
    assert {g["firmware"]["mec"] for g in sim_model("mi300x-8gpu-spx")["gpus"]} == {177}
    # no fw_version/ in the tree: unknown, not zero
    assert {g["firmware"] for g in sim_model("mi250x-8gcd")["gpus"]} == {None}
