"""Launch file rendering: bindings read off the topology (NUMA, L3), the wrapper table, env files, README, options."""

import os
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.launch.render import (
    ENV_FILE,
    LaunchRenderError,
    container_indices,
    memory_policy,
    plan,
    render,
    render_table,
    validate_options,
)
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "sim"))

# Read by hand: Frontier/LUMI GCD -> NUMA table (mi250-topology-facts.md) and the MI210 capture, where KFD
# GPU nodes 2-5 link to CPU node 0 and nodes 6-9 to CPU node 1.
EXPECTED_NUMA = {
    "mi250x-8gcd": {0: 3, 1: 3, 2: 1, 3: 1, 4: 0, 5: 0, 6: 2, 7: 2},
    "mi210-8gpu-2hive": {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1},
    "mi300x-8gpu-spx": {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1},
}


@pytest.fixture()
def topo(sim_model):
    return sim_model


def _files(result):
    return {f["path"]: f for f in result["files"]}


# OLCF's Frontier table (tests/fixtures/smi/frontier-user-guide_gcd-numa-l3-mapping__olcf-user-docs.rst.txt):
# GCD -> the hardware threads of its L3 region; "Frontier reserves the first core in each L3 cache region".
FRONTIER_L3 = {4: "0-7,64-71", 5: "8-15,72-79", 2: "16-23,80-87", 3: "24-31,88-95",
               6: "32-39,96-103", 7: "40-47,104-111", 0: "48-55,112-119", 1: "56-63,120-127"}
FRONTIER_FIRST_CORES = "0,8,16,24,32,40,48,56,64,72,80,88,96,104,112,120"
FRONTIER_RESERVED = {4: "1-7,65-71", 5: "9-15,73-79", 2: "17-23,81-87", 3: "25-31,89-95",
                     6: "33-39,97-103", 7: "41-47,105-111", 0: "49-55,113-119", 1: "57-63,121-127"}


@pytest.mark.parametrize("name", sorted(EXPECTED_NUMA))
def test_bindings_match_the_numa_mapping_read_by_hand(name, topo):
    model = topo(name)
    numa_cpus = {n["node"]: n["cpus"] for n in model["numa_nodes"]}
    p = plan(model, {})
    for gpu, node in EXPECTED_NUMA[name].items():
        binding = p["bindings"][gpu]
        assert (binding["numa_node"], binding["cpus"]) == (node, numa_cpus[node])
        assert binding["numactl"] == ["--physcpubind=%s" % numa_cpus[node], "--membind=%d" % node]
        assert binding["warning"] is None


def test_mi210_capture_without_sysfs_binds_to_the_kfd_cpu_ranges():
    model = load_capture(kfd=os.path.join(REPO, "tests", "fixtures", "kfd", "mi210-8gpu-2hive"))
    p = plan(model, {"membind": False})
    nodes = [p["bindings"][g]["numa_node"] for g in range(8)]
    assert nodes == [0] * 4 + [1] * 4
    assert all(len(p["bindings"][g]["numactl"]) == 1 for g in range(8))


def test_l3_binding_reproduces_olcfs_frontier_table(topo):
    p = plan(topo("mi250x-8gcd"), {"cpu_binding": "l3"})
    assert {g: p["bindings"][g]["cpus"] for g in range(8)} == FRONTIER_L3
    assert all(p["bindings"][g]["warning"] is None for g in range(8))
    assert p["bindings"][4]["numactl"] == ["--physcpubind=0-7,64-71", "--membind=0"]


def test_frontier_reserved_first_core_of_each_l3(topo):
    p = plan(topo("mi250x-8gcd"), {"cpu_binding": "l3", "reserved_cpus": FRONTIER_FIRST_CORES})
    assert {g: p["bindings"][g]["cpus"] for g in range(8)} == FRONTIER_RESERVED


def test_l3_domains_are_shared_out_in_blocks_when_there_are_more_than_gpus(topo):
    # MI300X SPX: 4 GPUs per socket, 12 CCDs of 8 cores per EPYC 9654 socket -> 3 L3 domains (24 cores) each
    p = plan(topo("mi300x-8gpu-spx"), {"cpu_binding": "l3"})
    assert [len(p["bindings"][g]["l3"]) for g in range(8)] == [3] * 8
    assert p["bindings"][0]["cpus"] == "0-23,192-215" and p["bindings"][4]["cpus"] == "96-119,288-311"
    used = [c for g in range(4) for c in p["bindings"][g]["cpus"].split(",")]
    assert len(used) == len(set(used))


def test_cpu_map_overrides_one_gpu_and_l3_falls_back_to_numa_when_unknown(topo):
    p = plan(topo("mi250x-8gcd"), {"cpu_binding": "l3", "cpu_map": {"4": "2-7"}})
    assert p["bindings"][4]["cpus"] == "2-7" and p["bindings"][5]["cpus"] == "8-15,72-79"
    model = dict(topo("mi250x-8gcd"), cpu_topology=None)
    p = plan(model, {"cpu_binding": "l3"})
    assert p["bindings"][0]["cpus"] == "48-63,112-127"
    assert any("no L3 domain known on NUMA node 3" in w for w in p["warnings"])


def test_numa_minus1_gives_no_binding_and_a_warning(topo):
    result = render(topo("fault-numa-minus1"), {})
    assert all(b["numactl"] == [] and b["cpus"] is None for b in result["plan"]["bindings"])
    assert any("NUMA node unknown" in w and "unbound" in w for w in result["warnings"])
    files = _files(result)
    env = files["/etc/topotune/launch/size4-group0.env"]["content"]
    assert "TOPOTUNE_NUMA_NODES=\n" in env and "TOPOTUNE_CPUS=\n" in env
    assert "gpu 0 0 128 - - - none\n" in files["/etc/topotune/launch/bind.table"]["content"]


def test_reserving_every_cpu_of_a_gpu_leaves_it_unbound_with_a_warning(topo):
    p = plan(topo("mi300x-8gpu-spx"), {"reserved_cpus": "0-95,192-287"})
    assert p["bindings"][0]["cpus"] is None and p["bindings"][4]["cpus"] == "96-191,288-383"
    assert any("covers all of its CPUs" in w for w in p["warnings"])


def test_file_set_modes_and_env_contents(topo):
    result = render(topo("mi210-8gpu-2hive"), {"sizes": [4, 8, 3], "wrapper_content": "TABLE=${TOPOTUNE_LAUNCH_TABLE:-/x}\n"})
    files = _files(result)
    assert sorted(files) == [
        "/etc/topotune/launch/README", "/etc/topotune/launch/bind.table", "/etc/topotune/launch/gres.conf",
        "/etc/topotune/launch/size4-group0.env", "/etc/topotune/launch/size4-group1.env",
        "/etc/topotune/launch/size8-group0.env", "/usr/local/bin/topotune-bind"]
    assert files["/usr/local/bin/topotune-bind"]["mode"] == "0755"
    assert files["/usr/local/bin/topotune-bind"]["content"] == "TABLE=${TOPOTUNE_LAUNCH_TABLE:-/etc/topotune/launch/bind.table}\n"
    assert {f["mode"] for p, f in files.items() if p.startswith("/etc")} == {"0644"}
    assert any("group size 3 skipped" in w for w in result["warnings"])
    env = files["/etc/topotune/launch/size4-group1.env"]["content"]
    values = dict(line.split("=", 1) for line in env.splitlines() if line and not line.startswith("#"))
    # inside a container given only GPUs 4-7, ROCm numbers them 0-3
    assert values == {"TOPOTUNE_GROUP_SIZE": "4", "TOPOTUNE_GROUP": "1", "TOPOTUNE_GROUP_GPUS": "4,5,6,7",
                      "ROCR_VISIBLE_DEVICES": "0,1,2,3", "TOPOTUNE_NUMA_NODES": "1",
                      "TOPOTUNE_CPUS": values["TOPOTUNE_CPUS"], "HSA_OVERRIDE_CPU_AFFINITY_DEBUG": "0"}
    assert all(ENV_FILE.match(os.path.basename(p)) for p in files if p.endswith(".env"))


def test_without_wrapper_content_the_wrapper_is_not_written_and_a_bad_wrapper_is_refused(topo):
    assert "/usr/local/bin/topotune-bind" not in _files(render(topo("mi300x-8gpu-spx"), {}))
    with pytest.raises(LaunchRenderError, match="no TABLE="):
        render(topo("mi300x-8gpu-spx"), {"wrapper_content": "#!/bin/sh\n"})


@pytest.mark.parametrize("members,expected", [([4, 5, 6, 7], [0, 1, 2, 3]), ([6, 2], [1, 0]), ([0], [0])])
def test_container_indices_follow_host_order(members, expected):
    assert container_indices(members) == expected


def test_table_lists_gpus_groups_and_options(topo):
    table = _files(render(topo("mi250x-8gcd"), {"sizes": [2], "visible_devices_scope": "rank"}))[
        "/etc/topotune/launch/bind.table"]["content"]
    lines = [line for line in table.splitlines() if not line.startswith("#")]
    assert lines[:6] == ["format 2", "sizes 2", "default_size 2", "visible ROCR_VISIBLE_DEVICES", "scope rank",
                         "devdir /dev"]
    assert "gpu 0 0 128 3 48-63,112-127 3 membind" in lines and "gpu 4 4 132 0 0-15,64-79 0 membind" in lines
    assert "order 2 0 1 2 3 4 5 6 7" in lines and "group 2 3 6 7" in lines


def test_readme_explains_groups(topo):
    readme = _files(render(topo("mi250x-8gcd"), {"sizes": [2]}))["/etc/topotune/launch/README"]["content"]
    assert "group 0: GPUs 0,1: 1 of 1 GPU pairs directly xGMI-linked" in readme
    assert "ROCR_VISIBLE_DEVICES=0,1 numactl --cpunodebind=3 --membind=3 <command>" in readme
    assert "torchrun" in readme and "srun" in readme and "mpirun" in readme


def test_rendering_is_deterministic(topo):
    assert render(topo("mi300x-8gpu-spx"), {}) == render(topo("mi300x-8gpu-spx"), {})


@pytest.mark.parametrize("options,match", [
    ({"sizes": []}, "sizes"),
    ({"sizes": [0]}, "sizes"),
    ({"default_size": 16}, "default_size"),
    ({"visible_devices_env": "CUDA_VISIBLE_DEVICES"}, "visible_devices_env"),
    ({"dest": "relative/dir"}, "dest"),
    ({"dev_dir": "/dev/../etc"}, "dev_dir"),
    ({"extra_env": {"BAD NAME": "1"}}, "extra_env"),
    ({"extra_env": {"X": "a b"}}, r"extra_env\[X\]"),
    ({"extra_env": {"X": "$(reboot)"}}, r"extra_env\[X\]"),
    ({"cpu_map": {"x": "0-3"}}, r"cpu_map\[x\]"),
    ({"cpu_map": {"0": "zero"}}, r"cpu_map\[0\]"),
    ({"reserved_cpus": "0-x"}, "reserved_cpus"),
    ({"gres_type": "mi300x:8"}, "gres_type"),
    ({"node_name": "a b"}, "node_name"),
    ({"rdma_ports": ["mlx5_0"]}, "rdma_ports"),
    ({"rdma_ports": {"mlx5_0": [{"port": 0}]}}, r"rdma_ports\[mlx5_0\]"),
    ({"rdma_ports": {"mlx5_0": [{"port": 1, "gid_index": "3"}]}}, r"rdma_ports\[mlx5_0\]"),
    ({"rdma_ports": {"mlx5 0": []}}, r"rdma_ports\[mlx5 0\]"),
])
def test_bad_options_name_the_option(options, match):
    with pytest.raises(LaunchRenderError, match=match):
        validate_options(options)


def test_no_fitting_size_degrades_to_per_gpu_groups(topo):
    result = plan(topo("fault-missing-gpu"), {"sizes": [2, 4]})
    assert [s["size"] for s in result["sizes"]] == [1]
    assert result["sizes"][0]["groups"] == [[i] for i in range(7)]
    assert any("divides the 7 GPUs" in w and "size 1" in w for w in result["warnings"])


def test_extra_env_reaches_env_files_and_the_table(topo):
    files = _files(render(topo("mi300x-8gpu-spx"), {"extra_env": {"NCCL_MIN_NCHANNELS": 112}}))
    assert "NCCL_MIN_NCHANNELS=112\n" in files["/etc/topotune/launch/size2-group0.env"]["content"]
    assert "env NCCL_MIN_NCHANNELS 112\n" in files["/etc/topotune/launch/bind.table"]["content"]


def test_the_plan_records_what_was_applied(topo):
    summary = render(topo("mi250x-8gcd"), {"cpu_binding": "l3", "gres_type": "mi250x"})["plan"]
    assert summary["options"]["cpu_binding"] == "l3"
    assert summary["bindings"][4]["cpus"] == FRONTIER_L3[4]
    assert summary["sizes"][0]["order"] == list(range(8))
    assert summary["gres"]["socket_parameter"] == "l3cache_as_socket"


@pytest.mark.parametrize("name,warned", [("mi300x-8gpu-spx", [2, 4]), ("mi250x-8gcd", []), ("mi210-8gpu-2hive", []),
                                         ("mi300x-8gpu-cpx", [])])
def test_partial_groups_on_a_full_mesh_are_warned_not_refused(topo, name, warned):
    p = plan(topo(name), {"sizes": [2, 4, 8]})
    found = sorted(int(w.split()[2]) for w in p["warnings"] if "fully connected xGMI node" in w)
    assert found == warned
    if warned:
        assert [s["size"] for s in p["sizes"]] == [2, 4, 8]   # still generated
        assert any("uses 3 of each GPU's 7 xGMI links" in w for w in p["warnings"])


def test_memory_policy_is_decided_once_for_ranks_and_groups(topo):
    """memory_policy is the one rule: the per-GPU binding, the table line and the group recipe all follow it; a GPU
    whose ranks run unbound (every CPU reserved) gets no memory policy either, as its plan says."""
    p = plan(topo("mi300x-8gpu-spx"), {"reserved_cpus": "0-95,192-287", "sizes": [8]})
    assert (p["bindings"][0]["mems"], p["bindings"][0]["memory_policy"], p["bindings"][0]["numactl"]) == (None, "none", [])
    assert (p["bindings"][4]["mems"], p["bindings"][4]["memory_policy"]) == ("1", "membind")
    assert p["bindings"][4]["numactl"] == ["--physcpubind=96-191,288-383", "--membind=1"]
    assert p["sizes"][0]["recipes"][0]["numactl"] == ["--cpunodebind=0,1", "--membind=0,1"]
    table = render_table(p)
    assert "gpu 0 0 128 0 - - none\n" in table and "gpu 4 4 132 1 96-191,288-383 1 membind\n" in table
    assert memory_policy([0, 1], p["options"]) == ("membind", [0, 1])
    assert memory_policy([0, None], p["options"]) == ("none", None)
    assert memory_policy([3], dict(p["options"], membind=False)) == ("none", None)
    assert memory_policy([3], dict(p["options"], cpu_binding="none")) == ("none", None)


@pytest.mark.parametrize("options,variable", [
    ({"sizes": [2, 0]}, "launch_templates_sizes"),
    ({"dest": "relative/dir"}, "launch_templates_dir"),
    ({"wrapper_path": "/usr/local/bin/topotune bind"}, "launch_templates_wrapper_path"),
    ({"cpu_map": {"x": "0-3"}}, "launch_templates_cpu_map"),
    ({"extra_env": {"X": "a b"}}, "launch_templates_extra_env"),
    ({"gres_type": "mi/300"}, "launch_templates_gres_type"),
    ({"sizes": [2], "default_size": 4}, "launch_templates_default_size"),
])
def test_a_wrong_option_names_the_role_variable_it_comes_from(options, variable):
    with pytest.raises(LaunchRenderError) as info:
        validate_options(options)
    assert "(%s)" % variable in str(info.value)


def test_options_of_the_module_alone_name_no_role_variable():
    with pytest.raises(LaunchRenderError) as info:
        validate_options({"dev_dir": "/dev/../etc"})
    assert "launch_templates_" not in str(info.value)


def test_gres_type_auto_is_the_generation_of_the_models_identity(topo):
    model = topo("mi300x-8gpu-spx")
    assert plan(dict(model, identity={"generation": "MI300X"}), {"gres_type": "auto"})["options"]["gres_type"] == "mi300x"
    assert plan(dict(model, identity={"generation": None}), {"gres_type": "auto"})["options"]["gres_type"] == ""
    gres = _files(render(dict(model, identity={"generation": "MI300X"}), {"gres_type": "auto"}))["/etc/topotune/launch/gres.conf"]
    assert "Type=mi300x" in gres["content"] and "Type=auto" not in gres["content"]
    assert plan(dict(model, identity={"generation": "MI300X"}), {"gres_type": "site-a"})["options"]["gres_type"] == "site-a"
