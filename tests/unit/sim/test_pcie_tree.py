"""sim/pcie_tree.py: the PCIe hierarchy plan (switch and root_port layouts, multi-function GPU slots, NICs, bus
collisions) and what a built tree shows of it: the MI250X tree against the EX235a capture it is taken from
(tests/fixtures/smi/hwloc-xml__mi250x-8gcd-hpe-ex235a-tioga__llnl-mpibind.xml), CPX partitions below their GPU's
bridges, and malformed ``pcie_tree`` blocks as one-line profile errors raised before the destination is touched."""

import copy
import importlib.util
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("sim_pcie_tree_t", os.path.join(REPO, "sim", "pcie_tree.py"))
pcie_tree = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(pcie_tree)
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot  # noqa: E402 - sim/ is not a package

EX235A = os.path.join(REPO, "tests", "fixtures", "smi", "hwloc-xml__mi250x-8gcd-hpe-ex235a-tioga__llnl-mpibind.xml")
PCI = "sys/bus/pci/devices"


def _gpus(bdfs, numa=0):
    return [{"bdf": b, "numa": numa} for b in bdfs]


def _by_bdf(layout_plan):
    return {d["bdf"]: d for d in layout_plan["devices"]}


# ------------------------------------------------------------------------------------------------- plan
def test_switch_layout_puts_each_gpu_below_root_port_switch_and_its_nic_beside():
    out = pcie_tree.plan(_gpus(["0000:0c:00.0", "0000:22:00.0"]), 1)
    dev = _by_bdf(out)
    assert dev["0000:0c:00.0"]["path"] == ["0000:09:01.1", "0000:0a:00.0", "0000:0b:00.0"]
    assert [dev[b]["kind"] for b in dev["0000:0c:00.0"]["path"]] == ["root_port", "switch_up", "switch_down"]
    assert dev["0000:0d:00.0"] == {"bdf": "0000:0d:00.0", "path": ["0000:09:01.1", "0000:0a:00.0", "0000:0b:01.0"],
                                   "kind": "nic", "numa": 0}
    # bus numbers: the root port's range covers the NIC's bus, the GPU's downstream port only the GPU's
    assert dev["0000:09:01.1"]["bus_range"] == (0x09, 0x0a, 0x0d) and dev["0000:0b:00.0"]["bus_range"] == (0x0b, 0x0c, 0x0c)
    assert out["nics"] == [{"index": 0, "bdf": "0000:0d:00.0", "numa": 0}]
    assert "0000:23:00.0" not in dev  # the second GPU has no NIC (nics=1)


def test_partitions_of_a_gpu_share_its_bridges_and_only_the_lowest_function_is_physical():
    bdfs = ["0000:05:00.%d" % f for f in (3, 0, 1, 2)] + ["0000:27:00.0"]
    out = pcie_tree.plan(_gpus(bdfs), 2)
    dev = _by_bdf(out)
    paths = {tuple(dev[b]["path"]) for b in bdfs[:4]}
    assert paths == {("0000:02:01.1", "0000:03:00.0", "0000:04:00.0")}
    assert [d["bdf"] for d in out["devices"] if d["kind"] == "root_port"] == ["0000:02:01.1", "0000:24:01.1"]
    assert [b for b in bdfs if dev[b]["physical"]] == ["0000:05:00.0", "0000:27:00.0"]
    assert all(dev[b]["multifunction"] for b in bdfs[:4]) and not dev["0000:27:00.0"]["multifunction"]
    # NIC indexes count physical GPUs, not functions: the second NIC is the second GPU's
    assert [n["bdf"] for n in out["nics"]] == ["0000:06:00.0", "0000:28:00.0"]
    assert pcie_tree.physical_gpus(_gpus(bdfs)) == [("0000:05:00", [0, 1, 2, 3]), ("0000:27:00", [4])]


def test_root_port_layout_is_the_ex235a_one():
    out = pcie_tree.plan(_gpus(["0000:c1:00.0", "0000:c6:00.0"]), [1], layout="root_port")
    dev = _by_bdf(out)
    assert dev["0000:c1:00.0"]["path"] == ["0000:c0:07.1"] and dev["0000:c0:07.1"]["bus_range"] == (0xc0, 0xc1, 0xc1)
    assert dev["0000:c6:00.0"]["path"] == ["0000:c4:07.1"] and dev["0000:c4:07.1"]["bus_range"] == (0xc4, 0xc6, 0xc6)
    assert dev["0000:c5:00.0"]["path"] == ["0000:c4:01.1"] and dev["0000:c4:01.1"]["serves"] == "nic"
    assert {d["kind"] for d in out["devices"] if d["kind"] != "gpu" and d["kind"] != "nic"} == {"root_port"}
    assert pcie_tree.bridge_above(out, "0000:c6:00.0", "root_port") == "0000:c4:07.1"
    with pytest.raises(ValueError, match="GPU 0000:c6:00.0 has no switch_up above it"):
        pcie_tree.bridge_above(out, "0000:c6:00.0", "switch_up")


def test_buses_are_per_pci_domain():
    """MI308X: the second socket's GPUs are in domain 0001 on buses next to the first socket's, which is no collision."""
    out = pcie_tree.plan(_gpus(["0000:0a:00.0", "0001:0b:00.0"]), 2)
    assert _by_bdf(out)["0001:0b:00.0"]["path"][0] == "0001:08:01.1"
    assert pcie_tree.sysfs_dir("/r", _by_bdf(out)["0001:0b:00.0"]).startswith("/r/sys/devices/pci0001:08/0001:08:01.1/")
    with pytest.raises(ValueError, match=r"GPU 0000:0a:00\.0: its bus leaves no room .*bus 0x0b is taken"):
        pcie_tree.plan(_gpus(["0000:0a:00.0", "0000:0b:00.0"]), 2)


@pytest.mark.parametrize("gpus, nics, layout, message", [
    (["0000:02:00.0"], 0, "switch", "bus -1 is outside 0x00-0xff"),
    (["0000:ff:00.0"], 1, "switch", "bus 0x100 is outside"),
    (["0000:c1:00.0", "0000:c2:00.0"], [1], "root_port", "GPU 0000:c2:00.0: its bus leaves no room for its bridges and "
                                                         "NIC (root_port layout: bus 0xc0 is taken)"),
    (["0000:05:00.0", "0000:05:01.0"], 0, "switch", "share bus 0x05: one GPU slot per bus"),
    (["0000:05:00.0"], 0, "mesh", "layout 'mesh' is not one of switch, root_port"),
    (["0000:05:00.0"], [1], "switch", "NIC GPU indexes must be distinct indexes of the 1 physical GPUs"),
    (["0000:05:00.0"], "8", "switch", "NICs must be a count of GPUs or a list"),
])
def test_a_plan_that_does_not_fit_is_a_one_line_error(gpus, nics, layout, message):
    with pytest.raises(ValueError) as info:
        pcie_tree.plan(_gpus(gpus), nics, layout=layout)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_multifunction_sets_the_header_type_bit():
    single = pcie_tree.config_bytes("0x1002", "0x74a1", "0x120000", 0)
    multi = pcie_tree.config_bytes("0x1002", "0x74a1", "0x120000", 0, multifunction=True)
    bridge = pcie_tree.config_bytes("0x1022", "0x14ab", "0x060400", 4, bridge=(2, 3, 5))
    assert (single[0x0E], multi[0x0E], bridge[0x0E], tuple(bridge[0x18:0x1B])) == (0x00, 0x80, 0x01, (2, 3, 5))


# -------------------------------------------------------------------------------------- built trees
def _real(root, bdf):
    return os.path.realpath(os.path.join(root, PCI, bdf))


def _capture_pci():
    """``{bdf: (class, vendor:device, [bridge bdfs above, root port first], NUMA node)}`` of the capture's PCI devices."""
    out = {}

    def walk(node, bridges, numa):
        for child in node.findall("object"):
            kind = child.get("type")
            if kind == "Group":
                numa_child = child.find("object[@type='NUMANode']")
                walk(child, bridges, int(numa_child.get("os_index")) if numa_child is not None else numa)
            elif kind == "Bridge":
                walk(child, bridges + ([child.get("pci_busid")] if child.get("pci_busid") else []), numa)
            elif kind == "PCIDev":
                klass, ids = child.get("pci_type").split()[:2]
                out[child.get("pci_busid")] = (klass, ids.strip("[]"), bridges, numa)
            else:
                walk(child, bridges, numa)
    walk(ET.parse(EX235A).getroot(), [], None)
    return out


def test_mi250x_tree_is_the_ex235a_capture(sim_tree):
    """Every GCD and Slingshot NIC of the capture at its BDF, below the same root ports, on the same NUMA node, with
    the capture's class and ids (the GCDs' device id aside: the capture's early-access node has 0x7408, the profile
    the 0x740c its other cites give); the root ports' ids too."""
    root = sim_tree("mi250x-8gcd")
    captured = {b: v for b, v in _capture_pci().items() if v[1].split(":")[0] in ("1002", "17db")}
    assert len(captured) == 12
    for bdf, (klass, ids, bridges, numa) in captured.items():
        d = _real(root, bdf)
        path = os.path.relpath(d, os.path.realpath(os.path.join(root, "sys", "devices"))).split(os.sep)
        assert path[1:-1] == bridges and path[0] == "pci0000:%s" % bridges[0][5:7], bdf
        with open(os.path.join(d, "class")) as fh:
            assert fh.read().strip()[2:6] == klass
        with open(os.path.join(d, "numa_node")) as fh:
            assert int(fh.read()) == numa, bdf
        vendor = open(os.path.join(d, "vendor")).read().strip()
        assert vendor == "0x" + ids.split(":")[0]
        if vendor == "0x17db":
            assert open(os.path.join(d, "device")).read().strip() == "0x0501"
        for bridge in bridges:
            with open(os.path.join(root, PCI, bridge, "device")) as fh:
                assert "1022:" + fh.read().strip()[2:] == _capture_bridge_ids()[bridge]
    # no RDMA device: the Slingshot NICs are in their driver's class, as the cxi driver registers them
    assert not os.path.exists(os.path.join(root, "sys/class/infiniband"))
    cxi = sorted(os.listdir(os.path.join(root, "sys/class/cxi")))
    assert cxi == ["cxi0", "cxi1", "cxi2", "cxi3"]
    assert [os.path.basename(os.path.realpath(os.path.join(root, "sys/class/cxi", n, "device"))) for n in cxi] == [
        "0000:c5:00.0", "0000:cd:00.0", "0000:d5:00.0", "0000:dd:00.0"]


def _capture_bridge_ids():
    out = {}
    for node in ET.parse(EX235A).getroot().iter("object"):
        if node.get("type") == "Bridge" and node.get("pci_busid"):
            out[node.get("pci_busid")] = node.get("pci_type").split()[1].strip("[]")
    return out


def test_cpx_partitions_are_functions_below_their_gpus_bridges(sim_tree):
    root = sim_tree("mi300x-8gpu-cpx")
    slot = "0000:05:00"
    dirs = [_real(root, "%s.%d" % (slot, f)) for f in range(8)]
    assert {os.path.dirname(d) for d in dirs} == {os.path.dirname(dirs[0])}
    assert os.path.basename(os.path.dirname(dirs[0])) == "0000:04:00.0"
    # the PCI core's AER counters on the GPU's function only; config space on each, Header Type multi-function
    assert [os.path.exists(os.path.join(d, "aer_dev_fatal")) for d in dirs] == [True] + [False] * 7
    for d in dirs:
        with open(os.path.join(d, "config"), "rb") as fh:
            assert fh.read()[0x0E] == 0x80
    # the capture's missing partition 0000:e5:00.7 stays missing
    assert not os.path.exists(os.path.join(root, PCI, "0000:e5:00.7"))


# --------------------------------------------------------------------------------- malformed profiles
def _with(monkeypatch, name, change):
    profile = copy.deepcopy(sysroot.load_profile(name))
    change(profile)
    monkeypatch.setattr(sysroot, "load_profile", lambda _name: profile)


@pytest.mark.parametrize("name, change, message", [
    ("mi300x-8gpu-spx", lambda p: p["pcie_tree"].update(layout="ring"), "layout 'ring' is not one of"),
    ("mi300x-8gpu-spx", lambda p: p["pcie_tree"].pop("switch"), "pcie_tree.switch must be a mapping"),
    ("mi300x-8gpu-spx", lambda p: p["pcie_tree"]["root_port"].update(device="x14ab"), "pcie_tree.root_port.device must "
     "be a hex id"),
    ("mi300x-8gpu-spx", lambda p: p["pcie_tree"].update(gpu_rebar=[19, [8, 18]]), "gpu_rebar must be [current"),
    ("mi300x-8gpu-spx", lambda p: p["pcie_tree"].update(aspm=5), "aspm must be the LnkCtl ASPM control"),
    ("mi300x-8gpu-spx", lambda p: p["pcie_tree"].update(nics={"vendor": "0x17db", "device": "0x0501",
                                                              "class": "0x020000", "gpus": [0]}),
     "both rdma.nics and pcie_tree.nics place NICs"),
    ("mi300x-8gpu-spx", lambda p: p["faults"].update(acs_enabled=[{"gpu": 9, "bridge": "root_port", "control": 1}]),
     "faults.acs_enabled names GPU 9: not one of the 8 GPUs"),
    ("mi300x-8gpu-spx", lambda p: p["faults"].update(aer=[{"gpu": 0, "kind": "scary", "counts": {}}]),
     "faults.aer kind must be one of"),
    ("mi250x-8gcd", lambda p: p["faults"].update(acs_enabled=[{"gpu": 0, "bridge": "switch_down", "control": 1}]),
     "GPU 0000:c1:00.0 has no switch_down above it (bridges: root_port 0000:c0:07.1)"),
    ("mi250x-8gcd", lambda p: p["pcie_tree"]["nics"].update(gpus=[1, 3, 8]), "distinct indexes of the 8 physical GPUs"),
    ("mi250x-8gcd", lambda p: p["pcie_tree"]["nics"].update(sysfs_class="../x"), "sysfs_class must be a driver class"),
])
def test_a_bad_pcie_tree_is_a_profile_error_before_the_destination_is_touched(tmp_path, monkeypatch, name, change,
                                                                              message):
    _with(monkeypatch, name, change)
    (tmp_path / "keep").write_text("x")
    with pytest.raises(sysroot.ProfileError) as info:
        sysroot.build(name, str(tmp_path), force=True)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert str(info.value).startswith("profile %s: pcie_tree: " % name)
    assert (tmp_path / "keep").read_text() == "x"


def test_the_cli_says_it_in_one_line(tmp_path):
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for name in ("mi250x-8gcd", "mi210-8gpu-2hive"):
        (profiles / f"{name}.yml").write_text(open(os.path.join(sysroot.PROFILES_DIR, f"{name}.yml")).read())
    (profiles / "bad.yml").write_text("description: bad\nprovenance: {kind: synthetic}\nbase: mi250x-8gcd\n"
                                      "pcie_tree: {layout: root_port, nics: {gpus: [0, 0]}}\nexpect: {}\n")
    code = ("import sys; sys.path.insert(0, %r); import sysroot; sysroot.PROFILES_DIR = %r; "
            "sys.exit(sysroot.main(['build', 'bad', %r]))" % (os.path.join(REPO, "sim"), str(profiles),
                                                              str(tmp_path / "node")))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "sysroot: error: profile bad: pcie_tree: NIC GPU indexes must be distinct indexes of the 8 physical GPUs (0-7), "
        "not [0, 0]"]
    assert not (tmp_path / "node").exists()
