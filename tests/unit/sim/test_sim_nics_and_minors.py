"""The simulated node's render minors (kfd.synthetic.render_minors) and RDMA GID tables (rdma.addresses,
rdma.gid_table_len), read back the way the kernel's files are read: KFD properties, /dev/dri, sys/class/drm and
sys/class/infiniband/<dev>/ports/<n>/{gids,gid_attrs/types,gid_attrs/ndevs}/<i>."""

import copy
import os
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import rdma_health as rh
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as simsys  # noqa: E402 - sim/ is not a package


def _build(tmp_path, monkeypatch, name, change):
    profile = copy.deepcopy(simsys.load_profile(name))
    change(profile)
    monkeypatch.setattr(simsys, "load_profile", lambda _name: profile)
    dest = tmp_path / "root"
    simsys.build(name, str(dest))
    return str(dest)


def test_render_minors_reach_kfd_dev_and_drm(sim_tree):
    root = sim_tree("mi300x-8gpu-2cpu-minors")
    model = load_capture(sysroot=root)
    assert [g["render_minor"] for g in model["gpus"]] == list(range(135, 127, -1))
    assert [g["bdf"] for g in model["gpus"]][:2] == ["0000:0c:00.0", "0000:22:00.0"]  # GPU order is KFD's
    device = os.path.realpath(os.path.join(root, "sys/class/drm/renderD135/device"))
    assert os.path.basename(device) == "0000:0c:00.0" and os.path.exists(os.path.join(root, "dev/dri/renderD128"))


@pytest.mark.parametrize("minors", [[128] * 8, [128, 129], [127, 129, 130, 131, 132, 133, 134, 135], "128"])
def test_bad_render_minors_are_a_profile_error(tmp_path, monkeypatch, minors):
    def change(profile):
        profile["kfd"]["synthetic"]["render_minors"] = minors
    with pytest.raises(simsys.ProfileError, match="render_minors must list one distinct render minor"):
        _build(tmp_path, monkeypatch, "mi300x-8gpu-2cpu", change)


def test_addresses_lay_out_one_v1_and_one_v2_entry_each(tmp_path, monkeypatch):
    def change(profile):
        profile["rdma"] = dict(profile["rdma"], addresses=["link_local", "fd00:0:0:1::1", "ipv4"], gid_table_len=8)
    root = _build(tmp_path, monkeypatch, "mi300x-8gpu-spx", change)
    [port] = rh.read_rdma_ports(root, "mlx5_1")
    assert [(g["index"], g["type"]) for g in port["gids"] if g["type"]] == [
        (i, t) for i in range(6) for t in [("IB/RoCE v1", "RoCE v2")[i % 2]]]
    assert port["gids"][2]["gid"] == "fd00:0000:0000:0001:0000:0000:0000:0001" and len(port["gids"]) == 8
    assert rh.roce_v2_gid_index(port) == (5, None)   # the IPv4 RoCE v2 entry, behind a global IPv6 address
    options = rh.launch_rdma_options(root)
    assert {q["gid_index"] for ports in options["rdma_ports"].values() for q in ports} == {5}


def test_infiniband_ports_hold_their_port_gid_and_get_no_index(tmp_path, monkeypatch):
    def change(profile):
        profile["rdma"] = dict(profile["rdma"], link_layer="InfiniBand")
    root = _build(tmp_path, monkeypatch, "mi300x-8gpu-spx", change)
    [port] = rh.read_rdma_ports(root, "mlx5_0")
    assert port["link_layer"] == "InfiniBand"
    assert [(g["gid"], g["type"], g["ndev"]) for g in port["gids"] if g["type"]] == [
        ("fe80:0000:0000:0000:b83f:d203:0000:1c2d", "IB/RoCE v1", None)]
    index, why = rh.roce_v2_gid_index(port)
    assert index is None and "InfiniBand" in why


@pytest.mark.parametrize("rdma,match", [
    ({"gid_table_len": 3}, "need 4 GID entries, more than rdma.gid_table_len 3"),
    ({"addresses": ["not-an-address"]}, "rdma.addresses"),
    ({"gid_table_len": 0}, "rdma.gid_table_len must be a positive integer"),
])
def test_bad_gid_layouts_are_a_profile_error(tmp_path, monkeypatch, rdma, match):
    def change(profile):
        profile["rdma"] = dict(profile["rdma"], **rdma)
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "keep").write_text("x")
    with pytest.raises(simsys.ProfileError, match=match):
        _build(tmp_path, monkeypatch, "mi300x-8gpu-spx", change)
    assert (tmp_path / "root" / "keep").read_text() == "x"  # checked before the destination was emptied


@pytest.mark.parametrize("faults,match", [
    ({"nic_pcie_degraded": [{"nic": 8, "width": 8, "speed": "16.0 GT/s PCIe"}]},
     r"faults.nic_pcie_degraded: NIC 8 is not one of the 8 NICs \(0..7\)"),
    ({"nic_pcie_degraded": [{"nic": 1, "width": "x8", "speed": "16.0 GT/s PCIe"}]},
     r"faults.nic_pcie_degraded entries are \{nic, width, speed"),
    ({"rdma_port_down": [{"nic": 1, "state": "1: DOWN"}]}, r"faults.rdma_port_down entries are \{nic, state, phys_state"),
    ({"rdma_port_down": [{"nic": 1, "state": "1: DOWN", "phys_state": "2: Polling", "speed": 1}]},
     r"faults.rdma_port_down entries"),
    ({"rdma_no_ipv4": [True]}, r"faults.rdma_no_ipv4: NIC True is not one of the 8 NICs"),
])
def test_bad_rdma_faults_are_a_profile_error(tmp_path, monkeypatch, faults, match):
    def change(profile):
        profile["faults"] = dict(profile["faults"], **faults)
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "keep").write_text("x")
    with pytest.raises(simsys.ProfileError, match=match):
        _build(tmp_path, monkeypatch, "mi300x-8gpu-spx", change)
    assert (tmp_path / "root" / "keep").read_text() == "x"  # checked before the destination was emptied


def test_an_rdma_fault_on_a_node_without_nics_is_a_profile_error(tmp_path, monkeypatch):
    def change(profile):
        profile["faults"] = dict(profile["faults"], rdma_no_ipv4=[0])
    with pytest.raises(simsys.ProfileError, match=r"faults.rdma_no_ipv4: NIC 0 is not one of the 0 NICs"):
        _build(tmp_path, monkeypatch, "mi250x-8gcd", change)


def test_a_port_down_takes_its_netdev_down_and_the_rest_stays(sim_tree):
    root = sim_tree("fault-rdma-port-down")
    port = os.path.join(root, "sys/class/infiniband/mlx5_5/ports/1")
    with open(os.path.join(port, "state"), encoding="utf-8") as handle:
        assert handle.read() == "1: DOWN\n"
    net = os.path.join(root, "sys/class/net/enp176s0np0")
    with open(os.path.join(net, "operstate"), encoding="utf-8") as handle:
        assert handle.read() == "down\n"
    assert os.path.basename(os.path.realpath(os.path.join(net, "device"))) == "0000:b0:00.0"
    # the netdev keeps its address: its GIDs and its route stay
    [read] = rh.read_rdma_ports(root, "mlx5_5")
    assert rh.roce_v2_gid_index(read) == (3, None)
    with open(os.path.join(root, "proc/net/route"), encoding="utf-8") as handle:
        assert "enp176s0np0\t0000050A\t00000000\t0001" in handle.read()
