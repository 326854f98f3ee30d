"""sim/bench_standin.py, the STAND-IN SIMULATOR of rccl-tests' all_reduce_perf (no GPU runs; no real rccl-tests
output is produced here): its output has the real tool's format and parses with ``parse_perf`` (hosts, ranks, rows,
average bus bandwidth), its figures follow its model of the nodes' links (the slowest member sets the pace), injected
slow, failing, corrupting and unreachable hosts change the output as documented, and it names itself a simulator in
its output and ``--help``."""

import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import RcclParseError, parse_perf

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
SCRIPT = os.path.join(REPO, "sim", "bench_standin.py")
_SPEC = importlib.util.spec_from_file_location("sim_bench_standin", SCRIPT)
standin = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(standin)

CAPTURE = os.path.join(REPO, "tests", "fixtures", "acceptance",
                       "rccl-tests_all_reduce_perf-2node-16rank__mi210-2x8__mhilgema-core42.txt")
GIB = 1 << 30


def _busbw(parsed, size, column="in_place"):
    return next(r for r in parsed["rows"] if r["size"] == size)[column]["busbw"]


def _render(hosts, **kwargs):
    text, code = standin.render(hosts, **kwargs)
    return text, code


# ------------------------------------------------------------------------------------------------ format
def test_healthy_two_node_output_parses_like_the_real_tool():
    text, code = _render(["n01", "n02"])
    parsed = parse_perf(text)
    assert code == 0
    assert parsed["hosts"] == ["n01", "n02"] and parsed["n_ranks"] == 16
    assert [r["rank"] for r in parsed["ranks"]] == list(range(16))
    assert parsed["device_names"] == ["AMD Instinct MI300X"]
    assert [r["size"] for r in parsed["rows"]] == [8 << i for i in range(31)]   # -b 8 -e 8G -f 2
    assert parsed["complete"] and not parsed["failed"] and parsed["warnings"] == []
    assert parsed["out_of_bounds"] == {"count": 0, "ok": True}
    printed = [c["busbw"] for r in parsed["rows"] for c in (r["out_of_place"], r["in_place"])]
    # the footer averages the unrounded figures, the rows print them to 0.01
    assert parsed["avg_busbw"] == pytest.approx(sum(printed) / len(printed), abs=0.01)
    assert parsed["params"]["nGpus"] == 1 and parsed["params"]["maxBytes"] == 8 * GIB


def test_output_names_itself_a_simulator():
    text, _code = _render(["n01", "n02"], min_bytes=GIB)
    assert text.splitlines()[0].startswith("# STAND-IN SIMULATOR")
    parsed = parse_perf(text)
    assert parsed["versions"]["rccl_tests"] == "standin-sim"
    assert "simulated" in parsed["versions"]["rccl"]


def test_lines_have_the_capture_layout():
    """Rank lines, the column header and the rows of the real 2-node MI210 capture, reproduced character for
    character but for the Pid and the figures."""
    with open(CAPTURE, encoding="utf-8") as handle:
        capture = handle.read().splitlines()
    text, _code = _render(["auh7-3b-gpu-006", "auh7-3b-gpu-008"], generation="mi210", max_bytes=4 * GIB)
    lines = text.splitlines()

    def ranks(rows):
        return [re.sub(r"Pid +\d+", "Pid N", line) for line in rows if line.startswith("#  Rank")]

    assert ranks(lines) == ranks(capture)
    header = [line for line in capture if line.startswith("#  ") and "size" in line or "(B)" in line
              or "out-of-place" in line]
    assert header and all(line in lines for line in header)

    def ends(line):
        return [m.end() for m in re.finditer(r"\S+", line)]

    first_capture = next(line for line in capture if line.strip().startswith("8 "))
    first = next(line for line in lines if line.strip().startswith("8 "))
    assert ends(first) == ends(first_capture)
    assert any(line.startswith("# Avg bus bandwidth    : ") and line.endswith(" ") for line in lines)


# ------------------------------------------------------------------------------------------------ the model
def test_slowest_member_sets_the_pace():
    hosts = ["n%02d" % i for i in range(4)]
    healthy = parse_perf(_render(hosts, min_bytes=8 * GIB)[0])
    slow = parse_perf(_render(hosts, min_bytes=8 * GIB, faults={"n02": {"slow": 0.5}})[0])
    slower = parse_perf(_render(hosts, min_bytes=8 * GIB, faults={"n01": {"slow": 0.8}, "n02": {"slow": 0.5},
                                                                  "n03": {"slow": 0.9}})[0])
    base = _busbw(healthy, 8 * GIB)
    assert _busbw(slow, 8 * GIB) == pytest.approx(base * 0.5, rel=0.01)
    assert _busbw(slower, 8 * GIB) == pytest.approx(base * 0.5, rel=0.01)
    figures = standin.run_model(hosts, faults={"n01": {"slow": 0.8}, "n02": {"slow": 0.5}})
    assert figures["slowest"] == "n02" and figures["plateau"] == pytest.approx(figures["hosts"]["n02"]["limit"])


def test_across_nodes_the_nic_limits_and_on_one_node_the_xgmi():
    one = standin.run_model(["n01"])
    two = standin.run_model(["n01", "n02"])
    mi300x = standin.GENERATIONS["mi300x"]
    assert one["plateau"] == mi300x["xgmi_busbw"] and one["hosts"]["n01"]["inter"] is None
    nic = mi300x["nics"] * mi300x["nic_gbps"] / 8 * standin.NET_EFFICIENCY
    assert two["plateau"] == pytest.approx(min(mi300x["xgmi_busbw"], nic))
    parsed = parse_perf(_render(["n01", "n02"], min_bytes=8 * GIB)[0])
    # latency is small next to 8 GiB: the row is within 1.5 % of the plateau (latency 0.6 %, jitter under 0.5 %)
    assert _busbw(parsed, 8 * GIB) == pytest.approx(two["plateau"], rel=0.015)
    mi210 = standin.run_model(["a", "b"], generation="mi210")
    assert mi210["plateau"] == pytest.approx(1 * 200 / 8 * standin.NET_EFFICIENCY)


def test_model_overrides_per_host():
    model = {"hosts": {"n02": {"nics": 4}}}
    figures = standin.run_model(["n01", "n02"], model=model)
    assert figures["slowest"] == "n02" and figures["plateau"] == pytest.approx(4 * 400 / 8 * standin.NET_EFFICIENCY)


def test_figures_are_deterministic_and_the_seed_moves_only_the_jitter():
    first = _render(["n01", "n02"], min_bytes=GIB)[0]
    assert first == _render(["n01", "n02"], min_bytes=GIB)[0]
    other = _render(["n01", "n02"], min_bytes=GIB, seed=7)[0]
    assert other != first
    assert _busbw(parse_perf(other), 8 * GIB) == pytest.approx(_busbw(parse_perf(first), 8 * GIB), rel=0.011)


# ------------------------------------------------------------------------------------------------ faults
def test_failing_nic_aborts_the_run_with_the_tools_error_lines():
    text, code = _render(["n01", "n02", "n03"], min_bytes=GIB // 8, faults={"n02": {"fail": "nic", "at": GIB}})
    assert code == 3
    parsed = parse_perf(text)
    assert parsed["failed"] and not parsed["complete"] and parsed["avg_busbw"] is None
    assert [r["size"] for r in parsed["rows"]] == [GIB // 8, GIB // 4, GIB // 2]
    assert parsed["failures"][0]["text"].startswith("n02: Test NCCL failure")
    assert any("NCCL WARN NET/IB" in w["text"] for w in parsed.get("debug_warnings") or [])
    assert "MPI_ABORT was invoked on rank 8" in text


def test_failing_before_the_first_row_is_refused_quoting_the_failure():
    text, code = _render(["n01", "n02"], min_bytes=GIB, faults={"n01": {"fail": "nic"}})
    assert code == 3
    with pytest.raises(RcclParseError, match="Test NCCL failure"):
        parse_perf(text)


def test_a_nic_fault_is_not_seen_on_one_node_but_a_gpu_fault_is():
    assert _render(["n01"], min_bytes=GIB, faults={"n01": {"fail": "nic"}})[1] == 0
    text, code = _render(["n01"], min_bytes=GIB // 2, faults={"n01": {"fail": "gpu", "at": GIB}})
    assert code == 3 and parse_perf(text)["failures"][0]["text"].startswith("n01: Test HIP failure")


def test_corrupting_host_prints_wrong_values():
    text, code = _render(["n01", "n02"], min_bytes=256 << 10, max_bytes=4 << 20, faults={"n02": {"wrong": True}})
    parsed = parse_perf(text)
    assert code == 1 and parsed["failed"] and parsed["complete"]
    assert [w["size"] for w in parsed["wrong_rows"]] == [1 << 20, 2 << 20, 4 << 20]
    assert parsed["out_of_bounds"]["ok"] is False and parsed["out_of_bounds"]["count"] > 0


def test_unreachable_host_is_a_launcher_failure_without_a_table():
    text, code = _render(["n01", "n02"], faults={"n02": {"unreachable": True}})
    assert code == 1 and "ssh: connect to host n02" in text and "ORTE was unable" in text
    with pytest.raises(RcclParseError, match="no rccl-tests"):
        parse_perf(text)


def test_malformed_faults_are_refused():
    for spec in ({"slow": 2}, {"slow": True}, {"fail": "disk"}, {"color": 1}, "slow"):
        with pytest.raises(standin.StandinError):
            standin._fault("n01", spec)
    with pytest.raises(standin.StandinError, match="twice"):
        standin.run_model(["n01", "n01"])


# ------------------------------------------------------------------------------------------------ the CLI
def _cli(*args):
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, check=False)


def test_help_names_it_a_simulator():
    out = _cli("--help")
    text = " ".join(out.stdout.split())
    assert out.returncode == 0
    assert "STAND-IN SIMULATOR" in text and "not rccl-tests" in text


def test_cli_reads_a_hostfile_and_a_fault_file(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# rack 1\nn01 slots=8\nn02:8\nn03\n")
    faults = tmp_path / "faults.json"
    faults.write_text(json.dumps({"hosts": {"n02": {"slow": 0.5}}}))
    out = _cli("--hostfile", str(hostfile), "--faults", str(faults), "-b", "1G", "-e", "8G", "-g", "4")
    assert out.returncode == 0, out.stderr
    assert out.stdout == standin.render(["n01", "n02", "n03"], gpus_per_host=4, min_bytes=GIB,
                                        faults={"n02": {"slow": 0.5}})[0]
    assert parse_perf(out.stdout)["n_ranks"] == 12


def test_cli_flags_and_explain():
    out = _cli("--hosts", "n01,n02,n03", "--slow", "n02=0.5", "--fail", "n03=gpu", "--explain")
    figures = json.loads(out.stdout)
    assert figures["slowest"] == "n02" and figures["faults"]["n03"] == {"fail": "gpu"}
    assert "stand-in" in figures["simulator"]
    out = _cli("--hosts", "n01,n02", "--slow", "n02=fast")
    assert out.returncode == 2 and "stand-in simulator" in out.stderr


def test_transferbench_a2a_mode_prints_what_the_transferbench_parser_reads():
    """The stand-in's TransferBench mode (a2a only): the current layout of the real MI350X capture, every pair at
    the generation's published average, a slow host's pairs times its factor; named as the simulator it is."""
    from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import transferbench

    healthy = transferbench.parse(standin.render_a2a("n1", "mi300x"), "standin")
    average = next(m["value"] for m in healthy["measurements"] if m["metric"] == "avg_bandwidth")
    assert healthy["complete"] and healthy["test"] == "a2a" and abs(average - 35.776) < 0.36
    assert len([m for m in healthy["measurements"] if m["metric"] == "bandwidth"]) == 56
    slow = transferbench.parse(standin.render_a2a("n1", "mi300x", {"n1": {"slow": 0.5}}), "standin")
    assert abs(next(m["value"] for m in slow["measurements"] if m["metric"] == "avg_bandwidth") - average / 2) < 0.01
    run = subprocess.run([sys.executable, SCRIPT, "transferbench", "a2a", "--hosts", "n1", "--generation", "mi355x"],
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0 and "STAND-IN SIMULATOR" in run.stdout and transferbench.detect(run.stdout)
    refused = subprocess.run([sys.executable, SCRIPT, "transferbench", "p2p", "--hosts", "n1"], capture_output=True,
                             text=True, check=False)
    assert refused.returncode == 2 and "a2a" in refused.stderr
    with pytest.raises(standin.StandinError, match="no TransferBench a2a figure is modelled for mi210"):
        standin.render_a2a("n1", "mi210")


# --- rank mode: the binding and governor models (the module's and the integration tests run it under launchers) ------

@pytest.fixture(scope="module")
def two_numa_tree(tmp_path_factory):
    sys.path.insert(0, os.path.join(REPO, "sim"))
    import sysroot as simsys  # noqa: E402 - sim/ is not a package

    root = tmp_path_factory.mktemp("standin-2numa")
    simsys.build("mi300x-8gpu-2cpu-2numa", str(root), force=True)
    return str(root)


def test_node_model_reads_the_gpus_numa_nodes_cpus_and_governors(two_numa_tree):
    model = standin.node_model(two_numa_tree)
    assert model["gpu_numa"] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert model["cpu_node"] == {0: 0, 1: 1}
    assert model["governor"] == {0: "schedutil", 1: "schedutil"}
    assert standin.node_model(os.path.join(two_numa_tree, "absent")) == {"gpu_numa": [], "cpu_node": {},
                                                                         "governor": {}}


def test_ranks_off_their_gpus_numa_node_run_slower_and_a_slow_governor_adds_latency(two_numa_tree):
    model = standin.node_model(two_numa_tree)
    unbound = [{"rank": r, "gpu": r, "cpus": [0, 1]} for r in range(8)]
    bound = [{"rank": r, "gpu": r, "cpus": [r // 4]} for r in range(8)]
    wrong = [{"rank": r, "gpu": r, "cpus": [1 - r // 4]} for r in range(8)]
    assert standin.rank_factors(unbound, model)[:2] == (0.8, standin.GOVERNOR_LATENCY)
    assert standin.rank_factors(wrong, model)[0] == pytest.approx(1 - standin.CROSS_NUMA_PENALTY)
    model["governor"] = {0: "performance", 1: "performance"}
    bandwidth, latency, why = standin.rank_factors(bound, model)
    assert (bandwidth, latency, why) == (1.0, 1.0, [])
    assert standin.rank_factors(unbound, model)[2] == ["rank 0: GPU 0 on NUMA node 0, 1 of its 2 CPUs elsewhere"]


def test_launcher_rank_reads_open_mpi_and_slurm_and_needs_a_job_id():
    assert standin.launcher_rank({}) is None
    assert standin.launcher_rank({"OMPI_COMM_WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "0"}) is None
    assert standin.launcher_rank({"OMPI_COMM_WORLD_SIZE": "8", "OMPI_COMM_WORLD_RANK": "3",
                                  "OMPI_COMM_WORLD_LOCAL_RANK": "3", "PMIX_NAMESPACE": "prterun-x-1@1"}) == {
        "size": 8, "rank": 3, "local_rank": 3, "job": "prterun-x-1@1"}
    assert standin.launcher_rank({"SLURM_NTASKS": "4", "SLURM_PROCID": "2", "SLURM_LOCALID": "0", "SLURM_JOB_ID": "7",
                                  "SLURM_STEP_ID": "1"})["job"] == "7.1"
    with pytest.raises(standin.StandinError, match="job id"):
        standin.launcher_rank({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "0"})


def test_rank_zero_gathers_every_rank_and_names_the_missing_one(tmp_path):
    me = {"size": 2, "rank": 1, "local_rank": 1, "job": "j"}
    assert standin.rendezvous(me, {"rank": 1, "gpu": 1}, str(tmp_path / "r")) is None
    ranks = standin.rendezvous(dict(me, rank=0), {"rank": 0, "gpu": 0}, str(tmp_path / "r"))
    assert [r["gpu"] for r in ranks] == [0, 1] and not (tmp_path / "r").exists()
    with pytest.raises(standin.StandinError, match=r"rank\(s\) 1 did not report within 0 s"):
        standin.rendezvous(dict(me, rank=0), {"rank": 0, "gpu": 0}, str(tmp_path / "s"), timeout=0)


def test_eight_ranks_under_a_launcher_print_one_run_from_rank_zero(two_numa_tree):
    procs = []
    for rank in range(8):
        env = dict(os.environ, OMPI_COMM_WORLD_SIZE="8", OMPI_COMM_WORLD_RANK=str(rank),
                   OMPI_COMM_WORLD_LOCAL_RANK=str(rank), PMIX_NAMESPACE="unit-%d" % os.getpid(),
                   TOPOTUNE_GPU=str(7 - rank))
        procs.append(subprocess.Popen([sys.executable, SCRIPT, "--sysroot", two_numa_tree, "-b", "8", "-e", "1M",
                                       "-g", "1"], env=env, stdout=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * 8 and all(out == "" for out in outs[1:])
    parsed = parse_perf(outs[0], "stand-in")
    assert parsed["n_ranks"] == 8 and parsed["params"]["nGpus"] == 1
    # each rank prints the GPU topotune-bind gave it
    assert [r["device"] for r in parsed["ranks"]] == list(range(7, -1, -1))
