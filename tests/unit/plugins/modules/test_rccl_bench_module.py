"""rccl_bench module (main() with patched args): absent binary, saved output, a fake all_reduce_perf."""

import json
import os
import stat
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.modules import rccl_bench
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
SMI = os.path.join(REPO, "tests", "fixtures", "smi")
MI300X = os.path.join(SMI, "rccl-tests_all_reduce_perf__mi300x-8gpu-1node-mpi__rocm-blogs-rccl-xgmi.txt")
MI355X = os.path.join(SMI, "rccl-tests_all_reduce_perf__mi355x-8gpu-1node__oci-gpu-quickstarts.txt")
GH200_WRONG = os.path.join(SMI, "nccl-tests_all_reduce_perf-wrong96-failed__gh200-2node-slingshot__nccl-tests-issue369.txt")
GH200_CRASH = os.path.join(SMI, "nccl-tests_all_reduce_perf-cuda-failure-no-table__gh200-8gpu-2node-exclusive__"
                                "nccl-tests-issue369.txt")
TAGGED = os.path.join(SMI, "nccl-tests_all_reduce_perf_mpi__rtx5090-1gpu-2ranks-tagoutput__eunomia-nccl-ebpf.txt")


def _knowledge(name):
    return load_knowledge(name)


def _fake_binary(tmp_path, capture=MI300X, rc=0, extra=""):
    """An all_reduce_perf stand-in that records its argv and environment and prints a capture."""
    script = tmp_path / "build" / "all_reduce_perf"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "#!%s\nimport json, os, sys\n%s\n"
        "open(%r, 'w').write(json.dumps({'argv': sys.argv[1:], 'debug': os.environ.get('NCCL_DEBUG')}))\n"
        "sys.stdout.write(open(%r).read())\nsys.stderr.write('fake failure\\n' if %d else '')\nsys.exit(%d)\n"
        % (sys.executable, extra, str(tmp_path / "called.json"), capture, rc, rc))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_absent_binary_is_skipped_not_failed(tmp_path, run_module):
    code, result = run_module(rccl_bench, rccl_tests_path=str(tmp_path / "nope" / "all_reduce_perf"))
    assert code == 0
    assert result["skipped"] is True and result.get("failed") is not True
    assert "all_reduce_perf not found at %s" % (tmp_path / "nope" / "all_reduce_perf") in result["msg"]
    assert "topotune_rccl_tests_path" in result["msg"]
    assert result["result"] is None and "rc" not in result


@pytest.mark.parametrize("check_mode", [False, True])
def test_saved_output_parsed_and_compared(run_module, check_mode):
    args = {"output_file": MI300X, "expectations": _knowledge("rccl_expectations"),
            "topology": {"gpus": [{"index": 0, "device_id": "0x74a1"}]},
            "gpu_generations": _knowledge("gpu_generations")}
    code, result = run_module(rccl_bench, check_mode=check_mode, **args)
    assert code == 0 and result["changed"] is False and result["skipped"] is False
    assert len(result["result"]["rows"]) == 32 and result["result"]["avg_busbw"] == 116.669
    comparison = result["comparison"]
    assert (comparison["generation"], comparison["generation_from"], comparison["status"]) == (
        "MI300X", "topology identity (MI300X 0x74a1)", "ok")
    # AMD's criterion: in-place busbw at 8 GiB >= 304 GB/s (not the run's 318.98 peak)
    assert (comparison["expected_busbw"], comparison["measured_busbw"], comparison["message_bytes"],
            comparison["column"]) == (304.0, 317.66, 8589934592, "in_place")
    assert comparison["reference"].endswith("/gpus/mi300x.html") and comparison["observed"][0]["busbw_gbs"] == 317.66
    assert result["cmd"] == []


def test_fake_binary_runs_and_is_parsed(tmp_path, run_module):
    _fake_binary(tmp_path, MI355X)
    args = {"rccl_tests_path": str(tmp_path), "arguments": ["-b", "512K", "-e", "16G", "-g", "8"],
            "environment": {"NCCL_DEBUG": "VERSION"}, "expectations": _knowledge("rccl_expectations"),
            "gpu_generations": _knowledge("gpu_generations")}
    code, result = run_module(rccl_bench, **args)
    assert code == 0 and result["rc"] == 0
    assert result["cmd"] == [str(tmp_path / "build" / "all_reduce_perf"), "-b", "512K", "-e", "16G", "-g", "8"]
    with open(str(tmp_path / "called.json")) as handle:
        assert json.load(handle) == {"argv": ["-b", "512K", "-e", "16G", "-g", "8"], "debug": "VERSION"}
    assert result["result"]["rows"][-1]["out_of_place"]["busbw"] == 406.76
    # generation from the device name the run printed
    assert result["comparison"]["generation"] == "MI355X" and result["comparison"]["status"] == "ok"
    assert any("smaller sizes are missing" in w for w in result["result"]["warnings"])


def test_check_mode_does_not_run_unless_asked(tmp_path, run_module):
    _fake_binary(tmp_path)
    code, result = run_module(rccl_bench, check_mode=True, rccl_tests_path=str(tmp_path))
    assert code == 0 and result["skipped"] is True and "check mode" in result["msg"]
    assert not (tmp_path / "called.json").exists()
    code, result = run_module(rccl_bench, check_mode=True, rccl_tests_path=str(tmp_path), run_in_check_mode=True)
    assert code == 0 and result["skipped"] is False and (tmp_path / "called.json").exists()
    assert result["comparison"]["status"] == "unknown" and "no expectations passed" in result["comparison"]["reason"]


FAILURES = [
    ({"rc": 3}, {}, "failed (rc=3): fake failure"),
    # the tool's own failure lines are quoted, not the launcher's last words
    ({"rc": 1, "capture": GH200_CRASH}, {}, "failed (rc=1): %s: the run failed before printing a result table: "
     "line 14: \"gpu-1-1: Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are busy or unavailable'\""),
    ({"extra": "import time; time.sleep(5)"}, {"timeout": 1}, "timed out after 1s"),
    ({"capture": os.path.join(SMI, "..", "README.md")}, {}, "no rccl-tests/nccl-tests result table"),
]


@pytest.mark.parametrize("fake,args,message", FAILURES, ids=["rc", "crashed", "timeout", "garbage"])
def test_failures_are_one_line(tmp_path, run_module, fake, args, message):
    _fake_binary(tmp_path, **fake)
    binary = str(tmp_path / "build" / "all_reduce_perf")
    code, result = run_module(rccl_bench, rccl_tests_path=binary, **args)
    assert code == 1 and result["failed"] is True
    assert message.replace("%s", binary) in result["msg"] and "\n" not in result["msg"]


def test_failed_run_with_a_table_fails_and_keeps_the_table(tmp_path, run_module):
    # the GH200 run: #wrong 96/32 at 1 MiB, then ' .. host pid N: Test failure' and exit 1
    _fake_binary(tmp_path, GH200_WRONG, rc=1)
    code, result = run_module(rccl_bench, rccl_tests_path=str(tmp_path), expectations=_knowledge("rccl_expectations"),
                              generation="MI300X")
    assert code == 1 and result["failed"] is True and result["rc"] == 1
    assert result["msg"].endswith("failed (rc=1): .. gpu-1-1 pid 662195: Test failure common.cu:1189")
    assert len(result["result"]["rows"]) == 25 and result["result"]["wrong_rows"][0]["out_of_place"] == 96
    assert result["comparison"]["status"] == "unknown" and "this run has 2" in result["comparison"]["reason"]


def test_saved_tagged_output(run_module):
    code, result = run_module(rccl_bench, output_file=TAGGED)
    assert code == 0 and result["result"]["prefixes"] and len(result["result"]["rows"]) == 8
    assert result["comparison"]["status"] == "unknown"


def test_unreadable_output_file(tmp_path, run_module):
    code, result = run_module(rccl_bench, output_file=str(tmp_path / "missing.txt"))
    assert code == 1 and "missing.txt cannot be read: No such file or directory" in result["msg"]


ACC = os.path.join(REPO, "tests", "fixtures", "acceptance")
MI210_OK = os.path.join(ACC, "rccl-tests_all_reduce_perf-1node-healthy__mi210-8gpu-node-006__mhilgema-core42.txt")
MI210_BAD = os.path.join(ACC, "rccl-tests_all_reduce_perf-1node-degraded__mi210-8gpu-node-003__mhilgema-core42.txt")


@pytest.mark.parametrize("capture,status,fragment", [
    (MI210_OK, "ok", "meets AMD's MI210 pass criterion (>= 8 GB/s, 8 ranks: docs/gpus/mi210.md)"),
    (MI210_BAD, "unknown", "the run did not finish: no '# Avg bus bandwidth' line"),
], ids=["healthy-node", "degraded-node"])
def test_mi210_saved_runs_by_amds_average(run_module, capture, status, fragment):
    # the MI210 of the capture (device 0x740f) is found from the topology; AMD's MI210 criterion is an average
    code, result = run_module(rccl_bench, output_file=capture, expectations=_knowledge("rccl_expectations"),
                              topology={"gpus": [{"index": i, "device_id": "0x740f"} for i in range(8)]},
                              gpu_generations=_knowledge("gpu_generations"))
    assert code == 0 and result["skipped"] is False
    comparison = result["comparison"]
    assert (comparison["generation"], comparison["generation_from"], comparison["kind"], comparison["status"]) == (
        "MI210", "topology identity (MI210 0x740f)", "avg_busbw", status)
    assert fragment in comparison["reason"] and comparison["expected_busbw"] == 8.0
    assert comparison["bounds"][0]["sources"][0]["commit"] == "a785131c367d5b10593cef366902131628f5d6c4"
    assert result["msg"].endswith("comparison: %s" % status)


def test_mi355x_between_amds_two_figures_warns(tmp_path, run_module):
    # 320 GB/s in-place at 8 GiB: AMD's MI355X page passes it (>= 304), its common RCCL page does not (350)
    saved = tmp_path / "mi355x.txt"
    with open(MI355X) as handle:
        saved.write_text(handle.read().replace("232.72  407.26", "232.72  320.00"))
    code, result = run_module(rccl_bench, output_file=str(saved), expectations=_knowledge("rccl_expectations"))
    comparison = result["comparison"]
    assert code == 0 and (comparison["generation"], comparison["status"], comparison["measured_busbw"]) == (
        "MI355X", "warn", 320.0)
    assert [(b["busbw_gbs"], b["below"]) for b in comparison["bounds"]] == [(304.0, "fail"), (350.0, "warn")]
    assert comparison["bound"]["sources"][0]["document"].endswith("docs/common/rccl-benchmarking.md")
    assert "AMD's documents disagree" in comparison["reason"] and comparison["disagreement"]


# --- the binding comparison (plans): the real topotune-bind wrapper and numactl bind each rank ---------------------

# A TEST DOUBLE of Open MPI's mpirun, not MPI: it reads the options of the mpirun template of knowledge/acceptance.yml,
# starts -np copies of the rest of its argv with the rank variables Open MPI sets, and prints what they print.
FAKE_MPIRUN = r'''#!%s
import os, subprocess, sys, uuid
argv, np = sys.argv[1:], 1
while argv and argv[0].startswith("-"):
    option = argv.pop(0)
    value = argv.pop(0) if option in ("--hostfile", "-np", "--map-by", "--bind-to", "-x") else None
    if option == "-np":
        np = int(value)
job = uuid.uuid4().hex
procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=dict(
    os.environ, OMPI_COMM_WORLD_SIZE=str(np), OMPI_COMM_WORLD_RANK=str(r), OMPI_COMM_WORLD_LOCAL_RANK=str(r),
    PMIX_NAMESPACE=job)) for r in range(np)]
outs = [p.communicate()[0] for p in procs]
sys.stdout.write("".join(outs))
sys.exit(max(p.returncode for p in procs))
'''


@pytest.fixture(scope="module")
def binding_node(tmp_path_factory):
    """A simulated node tree per profile, the real wrapper, the stand-in simulator and the mpirun test double."""
    sys.path.insert(0, os.path.join(REPO, "sim"))
    import sysroot as simsys  # noqa: E402 - sim/ is not a package

    from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import load_capture

    base = tmp_path_factory.mktemp("binding")
    tools = base / "bin"
    tools.mkdir()
    (tools / "mpirun").write_text(FAKE_MPIRUN % sys.executable)
    with open(os.path.join(REPO, "roles", "launch_templates", "files", "topotune-bind"), encoding="utf-8") as handle:
        (tools / "topotune-bind").write_text(handle.read())
    # the stand-in simulator of rccl-tests, installed under rccl-tests' name as on the simulated nodes
    with open(os.path.join(REPO, "sim", "bench_standin.py"), encoding="utf-8") as handle:
        (tools / "all_reduce_perf").write_text("#!%s\n%s" % (sys.executable, handle.read().split("\n", 1)[1]))
    for name in ("mpirun", "topotune-bind", "all_reduce_perf"):
        (tools / name).chmod(0o755)
    nodes = {}
    for profile in ("mi300x-8gpu-2cpu-2numa", "mi300x-8gpu-2cpu"):
        root = base / profile
        simsys.build(profile, str(root), force=True)
        nodes[profile] = {"root": str(root), "topology": load_capture(sysroot=str(root))}
    return {"tools": tools, "nodes": nodes}


def _compare_plans(run_module, binding_node, profile, **extra):
    node = binding_node["nodes"][profile]
    args = {"rccl_tests_path": str(binding_node["tools"] / "all_reduce_perf"), "plans": ["none", "numa", "l3"],
            "launcher": [str(binding_node["tools"] / "mpirun")] + _knowledge("acceptance")["collective"]["templates"][
                "mpirun"]["argv"][1:],
            "bind": str(binding_node["tools"] / "topotune-bind"), "topology": node["topology"],
            "sysroot": node["root"],
            "environment": {"TOPOTUNE_STANDIN_SYSROOT": node["root"]},
            "expectations": _knowledge("rccl_expectations"), "gpu_generations": _knowledge("gpu_generations")}
    args.update(extra)
    return run_module(rccl_bench, **args)


def test_plans_bind_each_rank_and_numa_beats_no_binding_across_two_numa_nodes(run_module, binding_node):
    code, result = _compare_plans(run_module, binding_node, "mi300x-8gpu-2cpu-2numa", deployed_plan="l3")
    assert code == 0, result.get("msg")
    runs = {run["plan"]: run for run in result["binding"]["runs"]}
    assert [run["plan"] for run in result["binding"]["runs"]] == ["none", "numa", "l3"]
    # the stand-in's cross-NUMA model: an unbound rank (CPUs 0 and 1) has half its CPUs off its GPU's node -> x0.8
    assert runs["numa"]["figures"]["busbw"] == pytest.approx(runs["none"]["figures"]["busbw"] / 0.8, rel=0.01)
    assert runs["l3"]["figures"]["busbw"] == runs["numa"]["figures"]["busbw"]
    comparison = result["binding"]["comparison"]
    assert (comparison["reference"], comparison["best"], comparison["deployed"]) == ("none", "numa", "l3")
    assert comparison["deltas"]["numa"]["verdict"] == "better"
    assert comparison["deltas"]["numa"]["busbw_pct"] == pytest.approx(25.0, abs=0.5)
    # one rank per GPU through the launcher template; the deployed plan's run is the result AMD's criterion judges
    assert runs["numa"]["cmd"][:2] == [str(binding_node["tools"] / "mpirun"), "--hostfile"]
    assert runs["numa"]["cmd"][-8:] == ["-b", "8", "-e", "8G", "-f", "2", "-g", "1"]
    assert result["result"]["n_ranks"] == 8 and result["comparison"]["generation"] == "MI300X"
    assert result["comparison"]["status"] == "ok" and result["cmd"] == runs["l3"]["cmd"]
    assert "numa: busbw at 8 GiB +2" in result["msg"]


def test_plans_measure_the_same_on_one_numa_node(run_module, binding_node):
    code, result = _compare_plans(run_module, binding_node, "mi300x-8gpu-2cpu")
    assert code == 0, result.get("msg")
    comparison = result["binding"]["comparison"]
    assert {d["verdict"] for d in comparison["deltas"].values()} == {"same"}
    assert comparison["recommendation"].startswith("no plan beats no binding")


def test_plans_without_the_wrapper_are_skipped_with_the_fix(run_module, binding_node, tmp_path):
    code, result = _compare_plans(run_module, binding_node, "mi300x-8gpu-2cpu", bind=str(tmp_path / "absent"))
    assert code == 0 and result["skipped"] is True
    assert "topotune.instinct.launch_templates" in result["msg"]


def test_plans_without_a_topology_fail_with_the_fix(run_module, binding_node):
    code, result = _compare_plans(run_module, binding_node, "mi300x-8gpu-2cpu", topology=None)
    assert code == 1 and "playbooks/topology.yml" in result["msg"]
