"""gpu_topology module (main() with patched args) and the topology front door (discover, load_capture)."""

import json
import os
import shutil

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.topology import discover as topology
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import (
    discover,
    load_capture,
    run_command,
)
from ansible_collections.topotune.instinct.plugins.module_utils.topology.kfd import KFD_NODES
from ansible_collections.topotune.instinct.plugins.module_utils.topology.model import TopologyError
from ansible_collections.topotune.instinct.plugins.modules import gpu_topology

FIXTURES = os.path.join(os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..")), "fixtures")
MI210_NODES = os.path.join(FIXTURES, "kfd", "mi210-8gpu-2hive", "nodes")
SMI = os.path.join(FIXTURES, "smi")


@pytest.fixture
def mi210_root(tmp_path):
    shutil.copytree(MI210_NODES, str(tmp_path / KFD_NODES))
    return tmp_path


def _fake_runner(outputs):
    def runner(argv):
        key = " ".join(argv[1:])
        if key in outputs:
            return 0, outputs[key], ""
        return 127, "", "%s: command not found" % argv[0]
    return runner


def _read(name):
    with open(os.path.join(SMI, name)) as handle:
        return handle.read()


@pytest.mark.parametrize("check_mode", [False, True])
def test_module_reads_kfd_sysroot(mi210_root, run_module, check_mode):
    args = {"sysroot": str(mi210_root), "source": "kfd"}
    code, result = run_module(gpu_topology, check_mode=check_mode, **args)
    assert code == 0
    assert result["changed"] is False
    assert len(result["topology"]["gpus"]) == 8
    # not a fact: facts are deep-copied for every later task (docs/performance.md)
    assert "ansible_facts" not in result
    assert result["topology"]["hives"][1]["gpus"] == [4, 5, 6, 7]
    assert result["rocm_version"] == ""


def test_module_returns_the_rocm_version_under_the_sysroot(mi210_root, run_module):
    info = mi210_root / "opt" / "rocm" / ".info"
    info.mkdir(parents=True)
    (info / "version").write_text("6.2.1-112\n")
    code, result = run_module(gpu_topology, sysroot=str(mi210_root), source="kfd")
    assert code == 0
    assert result["rocm_version"] == "6.2.1-112"


def test_module_returns_the_device_nodes_access_under_the_sysroot(mi210_root, run_module):
    """What the container_runtime action reads from the discovery instead of its own round trip."""
    (mi210_root / "dev" / "dri").mkdir(parents=True)
    for name in ("dev/kfd", "dev/dri/renderD128"):
        (mi210_root / name).write_text("")
        os.chmod(mi210_root / name, 0o660)
    code, result = run_module(gpu_topology, sysroot=str(mi210_root), source="kfd")
    access = result["device_access"]
    assert code == 0 and access["sysroot"] == str(mi210_root) and access["users"] == {}
    assert access["kfd"]["exists"] and access["kfd"]["mode"] == "0660"
    assert [n["minor"] for n in access["render_nodes"]] == [128] and set(access["docker"]) == {"present", "path"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"source": "kfd"}, "gpu_topology: KFD topology not found: %s/sys/class/kfd/kfd/topology/nodes does not exist"),
        ({"source": "auto", "amd_smi_path": "/nonexistent/amd-smi", "rocm_smi_path": "/nonexistent/rocm-smi"},
         "gpu_topology: no topology source worked (kfd: KFD topology not found"),
        ({"command_timeout": 0}, "gpu_topology: command_timeout must be at least 1 second, got 0"),
    ],
    ids=["kfd-missing", "nothing-available", "bad-timeout"],
)
def test_module_fails_with_one_line(tmp_path, run_module, args, message):
    code, result = run_module(gpu_topology, sysroot=str(tmp_path), **args)
    assert code == 1 and result["failed"] is True
    assert result["msg"].startswith(message.replace("%s", str(tmp_path)))
    assert "\n" not in result["msg"]


def test_module_partial_tree_warns(mi210_root, run_module):
    os.remove(str(mi210_root / KFD_NODES / "5" / "properties"))
    code, result = run_module(gpu_topology, sysroot=str(mi210_root))
    assert code == 0 and len(result["topology"]["gpus"]) == 7
    assert any("KFD node 5: " in w for w in result["topology"]["warnings"])


def test_discover_auto_falls_back_to_amd_smi(tmp_path):
    runner = _fake_runner({"topology --json": _read(
        "amd-smi_topology_json-oldformat__2gpu-pcie__amdsmi-changelog-rocm6.1.1.json")})
    model = discover(sysroot=str(tmp_path), runner=runner)
    assert model["source"] == "amd-smi" and len(model["gpus"]) == 2
    assert any(w.startswith("source kfd: KFD topology not found") for w in model["warnings"])


def test_discover_rocm_smi_json(tmp_path):
    data = {"system": {"(Topology) Link type between DRM devices 0 and 1": "XGMI",
                       "(Topology) Hops between DRM devices 0 and 1": "1"},
            "card0": {"(Topology) Numa Affinity": "0"}, "card1": {"(Topology) Numa Affinity": "1"}}
    model = discover(source="rocm-smi", runner=_fake_runner({"--showtopo --json": json.dumps(data)}))
    assert model["links"][0]["type"] == "xgmi" and [g["numa_node"] for g in model["gpus"]] == [0, 1]


def test_discover_cross_check_records_discrepancies(mi210_root):
    # rocm-smi claims GPU 0 sits on NUMA node 1 and that GPUs 0 and 4 are xGMI neighbours
    tables = {"card%d" % i: {"(Topology) Numa Affinity": str(1 if i in (0, 4, 5, 6, 7) else 0)} for i in range(8)}
    system = {}
    for a in range(8):
        for b in range(a + 1, 8):
            same = (a < 4) == (b < 4) or (a, b) == (0, 4)
            system["(Topology) Link type between DRM devices %d and %d" % (a, b)] = "XGMI" if same else "PCIE"
            system["(Topology) Hops between DRM devices %d and %d" % (a, b)] = "1" if same else "3"
    tables["system"] = system
    runner = _fake_runner({"--showtopo --json": json.dumps(tables)})
    model = discover(sysroot=str(mi210_root), cross_check=True, runner=runner)
    assert model["sources"] == ["kfd", "rocm-smi"]
    assert {"what": "numa_node", "gpu": 0, "values": {"kfd": 0, "rocm-smi": 1}} in model["discrepancies"]
    assert {"what": "link 0-4 type", "gpu": None, "values": {"kfd": "pcie", "rocm-smi": "xgmi"}} in \
        model["discrepancies"]
    assert len(model["discrepancies"]) == 3  # numa of GPU 0, type and hops of 0-4
    assert any("cross-check: source amd-smi unavailable" in w for w in model["warnings"])


def test_discover_rejects_unknown_source():
    with pytest.raises(TopologyError, match="source 'nvml' is not one of auto, kfd, amd-smi, rocm-smi"):
        discover(source="nvml")


def test_failing_tool_message():
    def runner(argv):
        return 1, "", "ERROR: driver not loaded\n"
    with pytest.raises(TopologyError, match=r"`amd-smi topology --json` failed \(rc=1\): ERROR: driver not loaded"):
        discover(source="amd-smi", runner=runner)


@pytest.mark.parametrize(
    ("argv", "rc", "needle"),
    [
        (["/nonexistent/amd-smi"], 127, "command not found"),
        (["sh", "-c", "sleep 5"], 124, "timed out after 1s"),
        (["sh", "-c", "printf %s \"$LC_ALL\""], 0, "C"),
    ],
    ids=["missing", "hang", "locale"],
)
def test_run_command(argv, rc, needle):
    code, out, err = run_command(argv, timeout=1)
    assert code == rc and needle in (out + err)


def test_load_capture_cross_checks_two_files():
    model = load_capture(
        kfd=os.path.join(FIXTURES, "kfd", "mi308x-cpx"),
        rocm_smi=os.path.join(SMI, "rocm-smi_showtopo__mi308x-8gpu__ms-swift-docs.txt"),
    )
    # the KFD tree is CPX (32 GPUs), the rocm-smi capture another MI308X node in SPX (8 GPUs)
    assert model["sources"] == ["kfd", "rocm-smi"]
    assert model["discrepancies"][0] == {"what": "gpu_count", "gpu": None, "values": {"kfd": 32, "rocm-smi": 8}}


def test_load_capture_needs_something():
    with pytest.raises(TopologyError, match="no capture given"):
        load_capture()


def test_module_exports():
    assert topology.SOURCES == ("kfd", "amd-smi", "rocm-smi")
