"""gres.conf: logical core indices (never Linux CPU ids), socket alignment, Links from the xGMI model, Type, Flags,
AutoDetect=off per node, and the GPU id order Slurm hands jobs."""

import copy
import os
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import parse
from ansible_collections.topotune.instinct.plugins.module_utils.launch.gres import record_order
from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import render
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as simsys  # noqa: E402 - sim/ is not a package

PROFILES = [name for name, _desc in simsys.list_profiles()]


@pytest.fixture()
def topo(sim_model):
    return sim_model


def _gres(model, options=None):
    result = render(model, dict(options or {}))
    text = next(f["content"] for f in result["files"] if f["path"].endswith("/gres.conf"))
    lines = [dict(kv.split("=", 1) for kv in line.split()) for line in text.splitlines()
             if line and not line.startswith("#")]
    return text, lines, result


def _table_gres(result):
    """GPU index -> gres position, from the wrapper's table (``gpu INDEX GRES RENDER NUMA CPUS MEMS POLICY``)."""
    table = next(f["content"] for f in result["files"] if f["path"].endswith("bind.table"))
    rows = [line.split() for line in table.splitlines() if line.startswith("gpu ")]
    return {int(row[1]): int(row[2]) for row in rows if row[2] != "-"}


@pytest.mark.parametrize("name", PROFILES)
def test_cores_are_logical_indices_of_the_gpus_numa_node(name, topo):
    model = topo(name)
    cores = model["cpu_topology"]["cores"]
    numa = {n["node"]: set(parse(n["cpus"])) for n in model["numa_nodes"] if n.get("cpus")}
    _text, lines, result = _gres(model)
    listed = [g for g in model["gpus"] if isinstance(g.get("render_minor"), int)]
    assert len(lines) == len(listed)
    for gpu, line in zip(listed, lines):
        assert line["File"] == "/dev/dri/renderD%d" % gpu["render_minor"] and line["Flags"] == "amd_gpu_env"
        if gpu["numa_node"] is None:
            assert "Cores" not in line
            continue
        indices = parse(line["Cores"])
        assert max(indices) < len(cores), "a core index past the core count makes slurmd reject the GRES"
        # the cores hold exactly the CPUs of the GPU's NUMA node, SMT siblings included
        assert {c for i in indices for c in parse(cores[i])} == numa[gpu["numa_node"]]
        links = [int(v) for v in line["Links"].split(",")]
        assert len(links) == len(listed) and links[listed.index(gpu)] == -1
    assert result["plan"]["gres"]["lines"][0]["file"] == lines[0]["File"]


def test_mi300x_spx_two_sockets_need_no_socket_parameter(topo):
    text, lines, result = _gres(topo("mi300x-8gpu-spx"), {"gres_type": "mi300x", "node_name": "gpu01"})
    assert [line["Cores"] for line in lines] == ["0-95"] * 4 + ["96-191"] * 4
    assert {line["Type"] for line in lines} == {"mi300x"}
    assert all(sorted(line["Links"].split(",")) == ["-1"] + ["1"] * 7 for line in lines)  # all-to-all, one link each
    assert "NodeName=gpu01 CPUs=384 Sockets=2 CoresPerSocket=96 ThreadsPerCore=2 Gres=gpu:mi300x:8" in text
    assert "SlurmdParameters" not in text and result["plan"]["gres"]["socket_parameter"] is None


def test_mi250x_nps4_needs_numa_node_as_socket_and_links_follow_the_link_counts(topo):
    text, lines, result = _gres(topo("mi250x-8gcd"))
    assert [line["Cores"] for line in lines] == ["48-63", "48-63", "16-31", "16-31", "0-15", "0-15", "32-47", "32-47"]
    # xgmi_num_links of the MI250X capture: 4 in-package, 2 or 1 between packages
    assert lines[0]["Links"] == "-1,4,1,0,0,0,2,0" and lines[5]["Links"] == "0,1,0,0,4,-1,0,1"
    assert "SlurmdParameters=numa_node_as_socket" in text
    assert "NodeName=NODE CPUs=128 Sockets=4 CoresPerSocket=16 ThreadsPerCore=2 Gres=gpu:8" in text
    assert result["plan"]["gres"]["socket_parameter"] == "numa_node_as_socket"


def test_mi250x_l3_binding_gives_one_l3_per_gcd_and_l3cache_as_socket(topo):
    text, lines, _result = _gres(topo("mi250x-8gcd"), {"cpu_binding": "l3"})
    assert [line["Cores"] for line in lines] == ["48-55", "56-63", "16-23", "24-31", "0-7", "8-15", "32-39", "40-47"]
    assert "SlurmdParameters=l3cache_as_socket" in text and "Sockets=8 CoresPerSocket=8" in text


def test_without_cpu_topology_cores_are_omitted_with_a_warning():
    model = load_capture(kfd=os.path.join(REPO, "tests", "fixtures", "kfd", "mi210-8gpu-2hive"))
    text, lines, result = _gres(model)
    assert lines and all("Cores" not in line for line in lines)
    assert any("Cores= omitted" in w for w in result["warnings"]) and "# slurm.conf node line" not in text


def test_a_gpu_without_render_node_is_left_out_and_the_others_keep_their_positions(topo):
    model = dict(topo("mi300x-8gpu-spx"))
    model["gpus"] = [dict(g, render_minor=None) if g["index"] == 2 else g for g in model["gpus"]]
    text, lines, result = _gres(model)
    assert len(lines) == 7 and "# GPU 2 (0000:38:00.0): render node unknown, not listed" in text
    assert all(len(line["Links"].split(",")) == 7 for line in lines)
    table = next(f["content"] for f in result["files"] if f["path"].endswith("bind.table"))
    assert "gpu 2 - - 0 " in table and "gpu 3 2 131 0 " in table


@pytest.mark.parametrize("name", PROFILES)
def test_every_line_is_this_nodes_with_autodetect_off(name, topo):
    """gres.conf(5) AutoDetect: configured File/Cores/Links are checked against rsmi's devices, whose Links carry no
    xGMI counts, and a mismatch drains the node; in-line AutoDetect takes effect only with NodeName."""
    _text, lines, result = _gres(topo(name), {"node_name": "gpu01"})
    assert lines and all(list(line)[:3] == ["NodeName", "AutoDetect", "Name"] for line in lines)
    assert {(line["NodeName"], line["AutoDetect"], line["Name"]) for line in lines} == {("gpu01", "off", "gpu")}
    assert not [w for w in result["warnings"] if "placeholder" in w]


def test_the_placeholder_node_name_is_warned_about(topo):
    _text, lines, result = _gres(topo("mi300x-8gpu-spx"))
    assert {line["NodeName"] for line in lines} == {"NODE"}
    assert any("NodeName=NODE is a placeholder: slurmd skips gres.conf lines of another node name" in w
               for w in result["warnings"])


def test_record_order_is_slurms_sort():
    """_sort_gpu_by_file (strnatcmp, null last) then _sort_gpu_by_links_order (-1 position, null last), in
    src/plugins/gres/gpu/gres_gpu.c of Slurm 22.05 and 24.11."""
    records = [{"file": "/dev/dri/renderD130", "links": None}, {"file": "/dev/dri/renderD99", "links": None},
               {"file": None, "links": None}, {"file": "/dev/dri/renderD1000", "links": "0,-1"},
               {"file": "/dev/dri/renderD128", "links": "-1,0"}]
    assert [r["file"] for r in record_order(records)] == [
        "/dev/dri/renderD128", "/dev/dri/renderD1000",   # by the -1 position first
        "/dev/dri/renderD99", "/dev/dri/renderD130",     # no Links: natural File order (99 < 130, not "1" < "9")
        None]


def _variants(model):
    """The model as read, with render minors reversed, and with no link data: what Slurm's sort must not move."""
    shuffled = copy.deepcopy(model)
    minors = [g["render_minor"] for g in shuffled["gpus"]]
    for gpu, minor in zip(shuffled["gpus"], reversed(minors)):
        gpu["render_minor"] = minor
    unlinked = copy.deepcopy(shuffled)
    unlinked["links"] = []
    return {"as read": model, "minors reversed": shuffled, "minors reversed, no links": unlinked}


@pytest.mark.parametrize("name", ["mi300x-8gpu-spx", "mi250x-8gcd", "mi210-8gpu-2hive", "mi300x-8gpu-2cpu-minors"])
def test_slurm_keeps_the_line_order_so_step_gpu_ids_name_the_tables_gpus(name, topo):
    for variant, model in _variants(topo(name)).items():
        _text, lines, result = _gres(model)
        records = [{"file": line["File"], "links": line["Links"]} for line in lines]
        assert record_order(records) == records, variant
        # the id Slurm gives the record at position k is k; the table maps it to the GPU whose file that line has
        by_minor = {g["render_minor"]: g["index"] for g in model["gpus"]}
        gres = _table_gres(result)
        for position, line in enumerate(lines):
            gpu = by_minor[int(line["File"].rsplit("renderD", 1)[1])]
            assert gres[gpu] == position, variant
        # lines in GPU (ROCm) order, so Slurm's own ROCR_VISIBLE_DEVICES indices are ROCm's too
        assert sorted(gres, key=gres.get) == sorted(gres), variant


def test_without_link_data_links_keep_only_each_gpus_position(topo):
    model = copy.deepcopy(topo("mi300x-8gpu-spx"))
    model["links"] = []
    text, lines, result = _gres(model)
    assert [line["Links"] for line in lines][:3] == ["-1,0,0,0,0,0,0,0", "0,-1,0,0,0,0,0,0", "0,0,-1,0,0,0,0,0"]
    assert "# Links= has no link counts" in text and result["plan"]["gres"]["links_known"] is False
    assert topo("mi300x-8gpu-spx")["links"] and _gres(topo("mi300x-8gpu-spx"))[2]["plan"]["gres"]["links_known"]


def test_render_minors_out_of_gpu_order_keep_gpu_order(topo):
    text, lines, result = _gres(topo("mi300x-8gpu-2cpu-minors"), {"cpu_binding": "l3"})
    assert [line["File"] for line in lines] == ["/dev/dri/renderD%d" % m for m in range(135, 127, -1)]
    assert [line["Cores"] for line in lines] == ["0"] * 4 + ["1"] * 4   # GPUs 0-3 on CPU 0's L3, 4-7 on CPU 1's
    assert _table_gres(result) == {g: g for g in range(8)}
    table = next(f["content"] for f in result["files"] if f["path"].endswith("bind.table"))
    assert "gpu 0 0 135 0 0 0 membind\n" in table and "gpu 7 7 128 0 1 0 membind\n" in table
