"""gres.conf: logical core indices (never Linux CPU ids), socket alignment, Links from the xGMI model, Type, Flags."""

import os
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.cpulist import parse
from ansible_collections.topotune.instinct.plugins.module_utils.launch_render import render
from ansible_collections.topotune.instinct.plugins.module_utils.topology import load_capture

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as simsys  # noqa: E402 - sim/ is not a package

PROFILES = [name for name, _desc in simsys.list_profiles()]


@pytest.fixture()
def topo(sim_model):
    return sim_model


def _gres(model, options=None):
    result = render(model, dict(options or {}))
    text = next(f["content"] for f in result["files"] if f["path"].endswith("/gres.conf"))
    lines = [dict(kv.split("=", 1) for kv in line.split()) for line in text.splitlines() if line.startswith("Name=")]
    return text, lines, result


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
    assert any("Cores= omitted" in w for w in result["warnings"]) and "NodeName=" not in text


def test_a_gpu_without_render_node_is_left_out_and_the_others_keep_their_positions(topo):
    model = dict(topo("mi300x-8gpu-spx"))
    model["gpus"] = [dict(g, render_minor=None) if g["index"] == 2 else g for g in model["gpus"]]
    text, lines, result = _gres(model)
    assert len(lines) == 7 and "# GPU 2 (0000:38:00.0): render node unknown, not listed" in text
    assert all(len(line["Links"].split(",")) == 7 for line in lines)
    table = next(f["content"] for f in result["files"] if f["path"].endswith("bind.table"))
    assert "gpu 2 - - 0 " in table and "gpu 3 2 131 0 " in table
