"""Launch file rendering: bindings read off the topology, env files, gres.conf, README, option checks."""

import os
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.launch_render import (
    ENV_FILE,
    LaunchRenderError,
    gpu_binding,
    plan,
    render,
    validate_options,
)
from ansible_collections.topotune.instinct.plugins.module_utils.topology import load_capture

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as simsys  # noqa: E402 - sim/ is not a package

# Read by hand: Frontier/LUMI GCD -> NUMA table (mi250-topology-facts.md) and the MI210 capture, where KFD
# GPU nodes 2-5 link to CPU node 0 and nodes 6-9 to CPU node 1.
EXPECTED_NUMA = {
    "mi250x-8gcd": {0: 3, 1: 3, 2: 1, 3: 1, 4: 0, 5: 0, 6: 2, 7: 2},
    "mi210-8gpu-2hive": {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1},
    "mi300x-8gpu-spx": {0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1},
}


@pytest.fixture(scope="module")
def topo(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            dest = tmp_path_factory.mktemp(name)
            simsys.build(name, str(dest), force=True)
            cache[name] = load_capture(sysroot=str(dest))
        return cache[name]
    return get


def _files(result):
    return {f["path"]: f for f in result["files"]}


@pytest.mark.parametrize("name", sorted(EXPECTED_NUMA))
def test_bindings_match_the_numa_mapping_read_by_hand(name, topo):
    p = plan(topo(name), {})
    for gpu, node in EXPECTED_NUMA[name].items():
        assert p["bindings"][gpu]["numactl"] == ["--cpunodebind=%d" % node, "--membind=%d" % node]
        assert p["bindings"][gpu]["warning"] is None


def test_mi210_capture_bindings_match(tmp_path):
    model = load_capture(kfd=os.path.join(REPO, "tests", "fixtures", "kfd", "mi210-8gpu-2hive"))
    p = plan(model, {"membind": False})
    assert [p["bindings"][g]["numactl"] for g in range(8)] == [["--cpunodebind=0"]] * 4 + [["--cpunodebind=1"]] * 4


def test_numa_minus1_gives_no_binding_and_a_warning(topo):
    result = render(topo("fault-numa-minus1"), {})
    assert all(b["numactl"] == [] for b in result["plan"]["bindings"])
    assert any("NUMA node unknown" in w and "unbound" in w for w in result["warnings"])
    files = _files(result)
    gres = files["/etc/topotune/launch/gres.conf"]["content"]
    assert "Name=gpu File=/dev/dri/renderD128\n" in gres and " Cores=" not in gres.split("# GPU 0")[1]
    env = files["/etc/topotune/launch/size4-group0.env"]["content"]
    assert "TOPOTUNE_NUMA_NODES=\n" in env and "TOPOTUNE_CPUS=\n" in env
    assert 'BIND[0]=""' in files["/usr/local/bin/topotune-bind"]["content"]


def test_file_set_modes_and_env_contents(topo):
    result = render(topo("mi210-8gpu-2hive"), {"sizes": [4, 8, 3]})
    files = _files(result)
    assert sorted(files) == [
        "/etc/topotune/launch/README", "/etc/topotune/launch/gres.conf", "/etc/topotune/launch/size4-group0.env",
        "/etc/topotune/launch/size4-group1.env", "/etc/topotune/launch/size8-group0.env", "/usr/local/bin/topotune-bind"]
    assert files["/usr/local/bin/topotune-bind"]["mode"] == "0755"
    assert {f["mode"] for p, f in files.items() if p.startswith("/etc")} == {"0644"}
    assert any("group size 3 skipped" in w for w in result["warnings"])
    env = files["/etc/topotune/launch/size4-group1.env"]["content"]
    values = dict(line.split("=", 1) for line in env.splitlines() if line and not line.startswith("#"))
    assert values == {"TOPOTUNE_GROUP_SIZE": "4", "TOPOTUNE_GROUP": "1", "TOPOTUNE_GROUP_GPUS": "4,5,6,7",
                      "ROCR_VISIBLE_DEVICES": "4,5,6,7", "TOPOTUNE_NUMA_NODES": "1",
                      "TOPOTUNE_CPUS": values["TOPOTUNE_CPUS"], "HSA_OVERRIDE_CPU_AFFINITY_DEBUG": "0"}
    assert all(ENV_FILE.match(os.path.basename(p)) for p in files if p.endswith(".env"))


def test_gres_fragment_lines(topo):
    gres = _files(render(topo("mi250x-8gcd"), {"gres_type": "mi250x"}))["/etc/topotune/launch/gres.conf"]["content"]
    lines = [line for line in gres.splitlines() if line.startswith("Name=")]
    assert lines[0] == "Name=gpu Type=mi250x File=/dev/dri/renderD128 Cores=48-63,112-127"
    assert lines[4] == "Name=gpu Type=mi250x File=/dev/dri/renderD132 Cores=0-15,64-79"
    assert "numa_node_as_socket" in gres


def test_readme_explains_groups(topo):
    readme = _files(render(topo("mi250x-8gcd"), {"sizes": [2]}))["/etc/topotune/launch/README"]["content"]
    assert "group 0: GPUs 0,1: 1 of 1 GPU pairs directly xGMI-linked" in readme
    assert "ROCR_VISIBLE_DEVICES=0,1 numactl --cpunodebind=3 --membind=3 <command>" in readme
    assert "torchrun" in readme and "srun" in readme and "mpirun" in readme


def test_l3_binding_uses_the_cpu_map(topo):
    p = plan(topo("mi250x-8gcd"), {"cpu_binding": "l3", "cpu_map": {"4": "0-7,64-71"}})
    assert p["bindings"][4]["numactl"] == ["--physcpubind=0-7,64-71", "--membind=0"]
    assert p["bindings"][0]["numactl"] == ["--cpunodebind=3", "--membind=3"]
    assert any("no L3/CCD core set" in w for w in p["warnings"])


def test_gpu_binding_none_mode():
    assert gpu_binding({"index": 0, "numa_node": 1}, validate_options({"cpu_binding": "none"}))["numactl"] == []


def test_rendering_is_deterministic(topo):
    assert render(topo("mi300x-8gpu-spx"), {}) == render(topo("mi300x-8gpu-spx"), {})


@pytest.mark.parametrize("options,match", [
    ({"sizes": []}, "sizes"),
    ({"sizes": [0]}, "sizes"),
    ({"default_size": 16}, "default_size"),
    ({"visible_devices_env": "CUDA_VISIBLE_DEVICES"}, "visible_devices_env"),
    ({"dest": "relative/dir"}, "dest"),
    ({"extra_env": {"BAD NAME": "1"}}, "extra_env"),
    ({"extra_env": {"X": "a b"}}, r"extra_env\[X\]"),
    ({"extra_env": {"X": "$(reboot)"}}, r"extra_env\[X\]"),
    ({"cpu_map": {"x": "0-3"}}, r"cpu_map\[x\]"),
    ({"cpu_map": {"0": "zero"}}, r"cpu_map\[0\]"),
])
def test_bad_options_name_the_option(options, match):
    with pytest.raises(LaunchRenderError, match=match):
        validate_options(options)


def test_no_fitting_size_degrades_to_per_gpu_groups(topo):
    result = plan(topo("fault-missing-gpu"), {"sizes": [2, 4]})
    assert [s["size"] for s in result["sizes"]] == [1]
    assert result["sizes"][0]["groups"] == [[i] for i in range(7)]
    assert any("divides the 7 GPUs" in w and "size 1" in w for w in result["warnings"])


def test_extra_env_reaches_env_files_and_wrapper(topo):
    files = _files(render(topo("mi300x-8gpu-spx"), {"extra_env": {"NCCL_MIN_NCHANNELS": 112}}))
    assert "NCCL_MIN_NCHANNELS=112\n" in files["/etc/topotune/launch/size2-group0.env"]["content"]
    assert "export NCCL_MIN_NCHANNELS=112\n" in files["/usr/local/bin/topotune-bind"]["content"]
