"""rccl-tests / nccl-tests parser (module_utils/bench/rccl.py), the busbw comparison and `topotune rccl`."""

import json
import os
import re
import subprocess
import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import (
    RcclParseError,
    compare_busbw,
    parse_perf,
    row_busbw,
    sweep_sizes,
)
from ansible_collections.topotune.instinct.plugins.module_utils.topology.identity import by_name, identify
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
SMI = os.path.join(REPO, "tests", "fixtures", "smi")
MI300X = "rccl-tests_all_reduce_perf__mi300x-8gpu-1node-mpi__rocm-blogs-rccl-xgmi.txt"
MI300X_VF = "rccl-tests_all_reduce_perf__mi300x-vf-8gpu-azure__rccl-issue1562.txt"
MI355X = "rccl-tests_all_reduce_perf__mi355x-8gpu-1node__oci-gpu-quickstarts.txt"
MI355X_A2A = "rccl-tests_alltoall_perf__mi355x-8gpu-1node__oci-gpu-quickstarts.txt"
DGX_K8S = "nccl-tests_all_reduce_perf_oldformat__dgx-a100-2node-16gpu-k8s__deepops.txt"
DGX_SLURM = "nccl-tests_all_reduce_perf_oldformat__dgx-a100-4node-32gpu-slurm__deepops.txt"
GH200_WRONG = "nccl-tests_all_reduce_perf-wrong96-failed__gh200-2node-slingshot__nccl-tests-issue369.txt"
GH200_CRASH = "nccl-tests_all_reduce_perf-cuda-failure-no-table__gh200-8gpu-2node-exclusive__nccl-tests-issue369.txt"
RTX_TAGGED = "nccl-tests_all_reduce_perf_mpi__rtx5090-1gpu-2ranks-tagoutput__eunomia-nccl-ebpf.txt"
VEGA_2019 = "rccl-tests_all_gather_perf-2019-format__vega64-4gpu-pcie__rccl-issue80.txt"
MI325X_GREP = "rccl-tests_all_reduce_perf-egrep-filtered__mi325x-1-8node__hisohara-ai-scripts.txt"
R9700_TCP = "rccl-tests_all_reduce_perf__r9700-2node-1gpu-tcp__rocm-issue5571.txt"
A2A_8 = "rccl-tests_alltoall_perf-size0-rows__gfx950-8gpu-1node-docker__prasad-nair-amd-alibaba.txt"
A2A_16 = "rccl-tests_alltoall_perf-size0-rows__gfx950-2node-16rank-ainic__prasad-nair-amd-alibaba.txt"
ACC = os.path.join(REPO, "tests", "fixtures", "acceptance")
MI210_BAD = "rccl-tests_all_reduce_perf-1node-degraded__mi210-8gpu-node-003__mhilgema-core42.txt"
MI210_OK = "rccl-tests_all_reduce_perf-1node-healthy__mi210-8gpu-node-006__mhilgema-core42.txt"
MI210_OK2 = "rccl-tests_all_reduce_perf-1node-healthy__mi210-8gpu-node-008__mhilgema-core42.txt"
MI210_2N = "rccl-tests_all_reduce_perf-2node-16rank__mi210-2x8__mhilgema-core42.txt"
GIB = 1 << 30


def _read(name):
    folder = ACC if name.startswith("rccl-tests_all_reduce_perf-") and "__mi210-" in name else SMI
    with open(os.path.join(folder, name), newline="") as handle:
        return handle.read()


def _knowledge(name):
    return load_knowledge(name)


def _row(result, size):
    return next(r for r in result["rows"] if r["size"] == size)


# Facts read off each capture by hand (and in its .source.md): rows, first/last size, one row's out-of-place /
# in-place busbw, avg busbw, format, ranks, hosts, device names, peak, out-of-bounds footer, failed.
OK_OOB = {"count": 0, "ok": True}
CAPTURES = [
    (MI300X, dict(rows=32, first=8, last=16 * GIB, row=4194304, oop=141.91, ip=56.92, avg=116.669, fmt="new",
                  ranks=8, hosts=["host"], names=["AMD Instinct MI300X"], peak=318.98, oob=OK_OOB, failed=False)),
    (MI300X_VF, dict(rows=25, first=8, last=134217728, row=16777216, oop=192.22, ip=184.67, avg=54.8575, fmt="new",
                     ranks=8, hosts=["c42f4555f685"], names=["AMD Instinct MI300X VF"], peak=293.07, oob=OK_OOB,
                     failed=False)),
    (MI355X, dict(rows=2, first=8 * GIB, last=16 * GIB, row=8 * GIB, oop=406.76, ip=407.26, avg=273.886,
                  fmt="new", ranks=8, hosts=["GPU-6403"], names=["AMD Instinct MI355X"], peak=407.26, oob=OK_OOB,
                  failed=False)),
    (MI355X_A2A, dict(rows=2, first=8 * GIB, last=16 * GIB, row=16 * GIB, oop=361.41, ip=361.20,
                      avg=236.187, fmt="new", ranks=8, hosts=["GPU-6403"], names=["AMD Instinct MI355X"], peak=361.41,
                      oob=OK_OOB, failed=False)),
    (DGX_K8S, dict(rows=30, first=8, last=4 * GIB, row=4 * GIB, oop=188.53, ip=188.70, avg=53.7098, fmt="old",
                   ranks=None, hosts=[], names=[], peak=188.70, oob=OK_OOB, failed=False)),
    (DGX_SLURM, dict(rows=13, first=1048576, last=4 * GIB, row=134217728, oop=114.00, ip=121.64, avg=113.289,
                     fmt="old", ranks=None, hosts=[], names=[], peak=191.56, oob=OK_OOB, failed=False)),
    # 2 ranks on 2 hosts over Slingshot; #wrong 96 / 32 at 1 MiB, '4 FAILED', the test exits with failure
    (GH200_WRONG, dict(rows=25, first=8, last=134217728, row=134217728, oop=22.87, ip=22.80, avg=4.79995, fmt="new",
                       ranks=2, hosts=["gpu-1-1", "gpu-1-7"], names=["NVIDIA GH200 120GB"], peak=22.87,
                       oob={"count": 4, "ok": False}, failed=True)),
    # every line behind Open MPI's --tag-output prefix, X11 noise before it
    (RTX_TAGGED, dict(rows=8, first=1048576, last=134217728, row=134217728, oop=2.30, ip=2.31, avg=1.57614,
                      fmt="new", ranks=2, hosts=["lab"], names=["NVIDIA GeForce RTX 5090"], peak=2.31, oob=OK_OOB,
                      failed=False)),
    # 2019 rccl-tests: no redop/root columns, 'error' column, rank lines without Group, bus byte [0x0c]
    (VEGA_2019, dict(rows=1, first=33554432, last=33554432, row=33554432, oop=1.93, ip=1.96, avg=1.94158,
                     fmt="old", ranks=4, hosts=["wwk"], names=["Vega 10 XT [Radeon RX Vega 64]"], peak=1.96,
                     oob=OK_OOB, failed=False)),
    # 2 hosts, 1 GPU each, over TCP
    (R9700_TCP, dict(rows=25, first=8, last=134217728, row=134217728, oop=10.77, ip=10.77, avg=3.51213, fmt="new",
                     ranks=2, hosts=["bootes", "corona"], names=["AMD Radeon AI PRO R9700"], peak=10.77,
                     oob=OK_OOB, failed=False)),
]


@pytest.mark.parametrize("name,facts", CAPTURES, ids=[c[0].split("__")[1] for c in CAPTURES])
def test_real_captures(name, facts):
    result = parse_perf(_read(name), name)
    assert len(result["rows"]) == facts["rows"] and result["n_cycles"] == 1 and result["extra_cycles"] == []
    assert result["rows"][0]["size"] == facts["first"]
    assert result["rows"][-1]["size"] == facts["last"]
    row = _row(result, facts["row"])
    assert row["out_of_place"]["busbw"] == facts["oop"]
    assert row["in_place"]["busbw"] == facts["ip"]
    assert result["avg_busbw"] == facts["avg"]
    assert result["format"] == facts["fmt"]
    assert result["n_ranks"] == facts["ranks"]
    assert result["hosts"] == facts["hosts"]
    assert result["device_names"] == facts["names"]
    assert result["peak_busbw"] == facts["peak"]
    assert result["out_of_bounds"] == facts["oob"]
    assert result["complete"] is True and result["failed"] is facts["failed"]
    assert result["groups"] == ["out_of_place", "in_place"]
    sizes = [r["size"] for r in result["rows"]]
    assert sizes == sorted(sizes)
    assert all(r["count"] > 0 and r["type"] == "float" for r in result["rows"])
    assert not any("missing" in w for w in result["warnings"]) or name in (MI355X, MI355X_A2A)


def test_mi300x_header_facts():
    result = parse_perf(_read(MI300X))
    assert result["versions"] == {"rccl_tests": "develop:448c4c7", "rccl": "2.22.3-develop:f5b15f2",
                                  "hip": "6.3.42131-fa1d09cbd", "rocm": "6.3.0.0-39-ce2be3b"}
    assert result["hostname"] == "host"
    assert result["library_path"] == "/home/User/all2all/doc/rccl/build/release/librccl.so.1"
    assert result["params"] == {"nThread": 1, "nGpus": 1, "minBytes": 8, "maxBytes": 17179869184, "step": "2(factor)",
                                "warmup_iters": 5, "iters": 20, "agg_iters": 1, "validation": 1, "graph": 0}
    assert result["ranks"][0] == {"rank": 0, "group": None, "pid": 2509534, "host": "host", "device": 0,
                                  "bus_id": "0000:0c:00.0", "name": "AMD Instinct MI300X"}
    assert result["ranks"][7]["bus_id"] == "0000:df:00.0"
    first = result["rows"][0]
    assert first == {"size": 8, "count": 2, "type": "float", "redop": "sum", "root": -1, "errors_flagged": False,
                     "out_of_place": {"time_us": 16.61, "algbw": 0.0, "busbw": 0.0, "wrong": 0},
                     "in_place": {"time_us": 16.53, "algbw": 0.0, "busbw": 0.0, "wrong": 0}}
    # the 16 GiB row starts at column 0 in the source
    assert _row(result, 17179869184)["out_of_place"]["time_us"] == 94254
    assert result["warnings"] == []


def test_vf_and_mi355x_header_facts():
    vf = parse_perf(_read(MI300X_VF))
    assert vf["versions"] == {"rccl_tests": ":+"}
    assert vf["params"]["nGpus"] == 8 and vf["params"]["maxBytes"] == 134217728
    assert vf["hosts"] == ["c42f4555f685"] and {r["pid"] for r in vf["ranks"]} == {56417}
    assert vf["ranks"][7]["bus_id"] == "0009:00:00.0"
    mi355 = parse_perf(_read(MI355X))
    assert mi355["collective"] == "all_reduce_perf"
    assert mi355["ranks"][1] == {"rank": 1, "group": 0, "pid": 9632, "host": "GPU-6403", "device": 1,
                                 "bus_id": "0000:0a:00", "name": "AMD Instinct MI355X"}
    # the document kept only the two largest rows: the parser says so
    assert any("smaller sizes are missing" in w for w in mi355["warnings"])


def test_alltoall_in_place_na_and_old_error_column():
    a2a = parse_perf(_read(MI355X_A2A))
    assert a2a["collective"] == "alltoall_perf"
    row = a2a["rows"][0]
    assert row["redop"] == "none" and row["out_of_place"]["wrong"] == 0 and row["in_place"]["wrong"] is None
    old = parse_perf(_read(DGX_K8S))
    assert old["columns"][:4] == ["size", "count", "type", "redop"]
    first = old["rows"][0]
    assert first["root"] is None
    assert first["out_of_place"] == {"time_us": 38.63, "algbw": 0.0, "busbw": 0.0, "error": 2e-07}
    assert first["in_place"]["error"] == 1e-07
    assert "\r" not in json.dumps(old)


def test_gh200_wrong_values_and_trailing_failure_lines():
    result = parse_perf(_read(GH200_WRONG), "gh200.txt")
    assert result["wrong_rows"] == [{"size": 1048576, "cycle": 1, "out_of_place": 96, "in_place": 32}]
    assert all(r["out_of_place"]["wrong"] == 0 for r in result["rows"] if r["size"] != 1048576)
    # the two ' .. host pid N: Test failure' lines after the footer are the tool's own failure report
    assert [f["line"] for f in result["failures"]] == [43, 44]
    assert result["failures"][0]["text"] == ".. gpu-1-1 pid 662195: Test failure common.cu:1189"
    assert result["versions"] == {"nccl_tests": "2.17.8", "nccl_headers": "22902", "nccl_library": "22902",
                                  "nccl": "2.29.2"}
    warnings = " | ".join(result["warnings"])
    for expected in ("line 43: '.. gpu-1-1 pid 662195: Test failure common.cu:1189' (and 1 more",
                     "4 out-of-bounds (wrong) values", "non-zero #wrong in 1 row(s), first at 1048576 B "
                     "(out-of-place 96, in-place 32)"):
        assert expected in warnings
    assert "after the table ignored" not in warnings


def test_tag_output_prefix_is_learned_and_removed():
    result = parse_perf(_read(RTX_TAGGED))
    assert result["prefixes"] == [r"\[\d+,\d+\]<std(?:out|err|diag)>:"]
    assert result["collective"] == "all_reduce_perf_mpi" and result["versions"]["nccl"] == "2.29.7"
    assert result["ranks"][1] == {"rank": 1, "group": 0, "pid": 2994448, "host": "lab", "device": 0,
                                  "bus_id": "0000:02:00", "name": "NVIDIA GeForce RTX 5090"}
    last = result["rows"][-1]
    assert (last["out_of_place"]["time_us"], last["in_place"]["time_us"]) == (58479.5, 58055.4)
    # the untagged X11 noise and the stderr lines are named, not parsed
    assert [w.split(" before")[0] for w in result["warnings"]] == ["line 1", "line 3", "line 5", "line 7"]


def test_2019_layout_and_two_host_tcp_run():
    vega = parse_perf(_read(VEGA_2019))
    assert vega["columns"][:4] == ["size", "count", "type", "time"] and vega["params"]["step"] == "1048576(bytes)"
    assert vega["ranks"][0] == {"rank": 0, "group": None, "pid": 6818, "host": "wwk", "device": 0, "bus_id": "0x0c",
                                "name": "Vega 10 XT [Radeon RX Vega 64]"}
    row = vega["rows"][0]
    assert (row["redop"], row["root"], row["out_of_place"]["time_us"], row["in_place"]["error"]) == (None, None, 13058, 0)
    assert vega["collective"] is None and vega["warnings"] == []
    tcp = parse_perf(_read(R9700_TCP))
    assert [(r["rank"], r["host"], r["pid"]) for r in tcp["ranks"]] == [(0, "corona", 4791), (1, "bootes", 5418)]
    assert tcp["versions"] == {"rccl_tests": "develop:33cc4df"} and tcp["warnings"] == []
    assert _row(tcp, 1048576)["in_place"] == {"time_us": 169.3, "algbw": 6.19, "busbw": 6.19, "wrong": 0}


def _lines(name):
    return _read(name).replace("\r\n", "\n").split("\n")


# --- sizes repeated inside a cycle (rccl-tests rounds the element count down per collective) ----------------
# alltoall on R ranks: count = size / 4 (float), rounded down to R x 4 elements (nccl-tests 2.17 alltoall.cu), so
# -b 8 on 8 ranks and -b 16 on 16 ranks print their first four sizes as 0 B: one cycle, not five.
REPEATS = [
    (A2A_8, dict(rows=25, first=[0, 0, 0, 0, 128, 256], last=134217728, oop=322.22, ip=316.42, avg=58.3947, ranks=8,
                 hosts=["Aliyun3"], versions={"rccl_tests": "2.17.9-develop:2596ca5f71", "rccl_headers": "22803",
                                              "rccl_library": "22707", "rccl": "2.27.7"})),
    (A2A_16, dict(rows=31, first=[0, 0, 0, 0, 256, 512], last=16 * GIB, oop=91.09, ip=91.10, avg=36.0754, ranks=16,
                  hosts=["Aliyun1", "Aliyun3"], versions={"rccl_tests": "2.17.9-develop:4a65e8d", "rccl_headers": "22707",
                                                          "rccl_library": "22707", "rccl": "2.27.7-HEAD:96a25b5",
                                                          "hip": "7.2.53211-671d39a71e",
                                                          "rocm": "7.2.2.0-86-671d39a71e"})),
]


@pytest.mark.parametrize("name,facts", REPEATS, ids=["8-ranks", "16-ranks-2-nodes"])
def test_sizes_repeated_at_the_start_are_one_cycle(name, facts):
    result = parse_perf(_read(name), name)
    assert (len(result["rows"]), result["n_cycles"], result["extra_cycles"]) == (facts["rows"], 1, [])
    assert [r["size"] for r in result["rows"]][:6] == facts["first"]
    assert all(r["count"] == 0 and r["in_place"]["wrong"] is None for r in result["rows"][:4])
    last = result["rows"][-1]
    assert (last["size"], last["out_of_place"]["busbw"], last["in_place"]["busbw"]) == (
        facts["last"], facts["oop"], facts["ip"])
    assert result["avg_busbw"] == facts["avg"] and result["complete"] is True and result["failed"] is False
    assert (result["n_ranks"], result["hosts"], result["collective"]) == (facts["ranks"], facts["hosts"], "alltoall_perf")
    assert result["versions"] == facts["versions"]
    # one row per size of the run's own sweep: nothing is missing (the old parser said "larger sizes are missing")
    assert len(result["rows"]) == len(sweep_sizes(result["params"]["minBytes"], result["params"]["maxBytes"],
                                                  result["params"]["step"]))
    assert not any("missing" in w for w in result["warnings"]), result["warnings"]


def _repeated_table(name, times, marker=None, drop_params=False, text=None):
    """A capture as -N ``times`` prints it: the rows again after the first cycle, with rccl-tests' '# Testing N
    cycle.' line before each cycle when ``marker``; ``drop_params`` removes the '# nThread ...' line."""
    lines = (text if text is not None else _read(name)).split("\n")
    rows = [i for i, line in enumerate(lines) if line.split()[:1] and line.split()[0].isdigit()]
    block = lines[rows[0]:rows[-1] + 1]
    table = []
    for cycle in range(times):
        table += ([marker % (cycle + 1)] if marker else []) + block
    out = lines[:rows[0]] + table + lines[rows[-1] + 1:]
    return "\n".join(line for line in out if not (drop_params and "nThread" in line))


def _stepped_bytes():
    """The MI300X run as `-b 1000 -e 1012 -i 1` prints it: all_reduce float rounds each size down to whole floats
    (setupArgs: count = size / 4), so 1000..1003 print 1000, 1004..1007 print 1004, ... (13 rows, one cycle)."""
    lines = _lines(MI300X)
    header = [line.replace("minBytes 8 maxBytes 17179869184 step: 2(factor)", "minBytes 1000 maxBytes 1012 step: "
                           "1(bytes)") for line in lines[:21]]
    template = next(line for line in lines if line.split()[:1] == ["1024"]).split()
    rows = ["  ".join([str(size // 4 * 4), str(size // 4)] + template[2:]) for size in range(1000, 1013)]
    return "\n".join(header + rows + lines[53:])


CYCLES = [
    ("-N 2 with size-0 rows", _repeated_table(A2A_8, 2), A2A_8, 2, 25),
    ("-N 3, 16 ranks", _repeated_table(A2A_16, 3), A2A_16, 3, 31),
    ("'# Testing N cycle.' before each cycle", _repeated_table(A2A_8, 2, "# Testing %d cycle."), A2A_8, 2, 25),
    # without the run's header the sweep is unknown: a repeated 0 B is still rounding (only 0 repeats in a -f sweep)
    ("no '# nThread' header", _repeated_table(A2A_16, 1, drop_params=True), A2A_16, 1, 31),
    # a one-size sweep run three times repeats its size: each row is a cycle
    ("-b 16G -e 16G -N 3", _repeated_table(None, 3, text="\n".join(
        line.replace("minBytes 524288 ", "minBytes 17179869184 ") for line in _lines(MI355X)
        if line.split()[:1] != ["8589934592"])), None, 3, 1),
]


@pytest.mark.parametrize("label,text,name,cycles,rows", CYCLES, ids=[c[0] for c in CYCLES])
def test_cycles_follow_the_tools_rule(label, text, name, cycles, rows):
    result = parse_perf(text, "cycles.txt")
    assert (result["n_cycles"], len(result["rows"])) == (cycles, rows)
    assert all(cycle == result["rows"] for cycle in result["extra_cycles"])
    if name:
        assert result["rows"] == parse_perf(_read(name))["rows"]
    assert not any("missing" in w for w in result["warnings"]), result["warnings"]


def test_stepped_sweep_repeats_sizes_inside_one_cycle():
    result = parse_perf(_stepped_bytes(), "stepped.txt")
    assert result["n_cycles"] == 1 and len(result["rows"]) == 13
    assert [r["size"] for r in result["rows"]] == [1000] * 4 + [1004] * 4 + [1008] * 4 + [1012]
    assert sweep_sizes(1000, 1012, "1(bytes)") == list(range(1000, 1013))
    assert result["warnings"] == []


@pytest.mark.parametrize("low,high,step,sizes", [
    (8, 8 * GIB, "2(factor)", [8 << k for k in range(31)]),
    (524288, 16 * GIB, "2(factor)", [524288 << k for k in range(16)]),
    (8, 100, "3(factor)", [8, 24, 72]),
    (33554432, 33554432, "1048576(bytes)", [33554432]),
    (0, 8, "2(factor)", None),          # rccl-tests' loop never ends: size 0 times 2 stays 0
    (8, 64, "0(bytes)", None),
    (64, 8, "2(factor)", None),
    (8, 64, "", None),
])
def test_sweep_sizes_follow_the_tools_loop(low, high, step, sizes):
    assert sweep_sizes(low, high, step) == sizes


def _mi300x_upto(marker):
    """MI300X capture lines up to and including the row whose size is ``marker``."""
    lines = _lines(MI300X)
    end = next(i for i, line in enumerate(lines) if line.split()[:1] == [str(marker)])
    return lines[:end + 1]


def _variant_truncated_mid_row():
    lines = _mi300x_upto(4096)
    nxt = _lines(MI300X)[len(lines)]
    return "\n".join(lines + [nxt[:60]])


MALFORMED = [
    ("truncated mid-row", _variant_truncated_mid_row(), 10,
     ["truncated run: line 32 is not a complete row", "no '# Avg bus bandwidth' footer"]),
    ("truncated at a row boundary", "\n".join(_mi300x_upto(4096)), 10, ["no '# Avg bus bandwidth' footer"]),
    ("crashed mid-run", "\n".join(_mi300x_upto(512) + [
        "host: Test HIP failure common.cu:1037 'out of memory'",
        " .. host pid 1: Test failure common.cu:892"]), 7,
     ["the run reported a failure: line 29: \"host: Test HIP failure common.cu:1037 'out of memory'\" (and 1 more",
      "no '# Avg bus bandwidth' footer"]),
    ("out of bounds", _read(MI300X).replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED"), 32,
     ["3 out-of-bounds (wrong) values reported"]),
    ("error over threshold", _read(DGX_K8S).replace("188.53  5e-07", "188.53  5e-02*"), 30,
     ["marked '*'"]),
    ("NCCL_TESTS_MIN_BW failed", _read(MI300X).replace("116.669", "116.669 FAILED"), 32,
     ["below NCCL_TESTS_MIN_BW"]),
]


@pytest.mark.parametrize("label,text,rows,warnings", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_degraded_runs_keep_complete_rows(label, text, rows, warnings):
    result = parse_perf(text, "run.txt")
    assert len(result["rows"]) == rows
    for expected in warnings:
        assert any(expected in w for w in result["warnings"]), result["warnings"]
    if "footer" in " ".join(warnings):
        assert result["avg_busbw"] is None and result["complete"] is False
    assert result["failed"] is (label not in ("truncated mid-row", "truncated at a row boundary"))


def test_truncated_rows_are_whole():
    result = parse_perf(_variant_truncated_mid_row())
    assert result["rows"][-1]["size"] == 4096
    assert result["rows"][-1]["in_place"]["busbw"] == 0.56


ERRORS = [
    ("garbage", "hello world\nthis is not a benchmark\n", "run.txt: no rccl-tests/nccl-tests result table",
     "first line 1: 'hello world'"),
    ("empty", "", "no rccl-tests/nccl-tests result table", "the output is empty"),
    ("header only", "\n".join(_lines(MI300X)[:20]), "the result table has no complete row",
     "ends after the column header"),
    ("failed before any row", "\n".join(_lines(MI300X)[:21] + ["host: Test NCCL failure common.cu:958 'unhandled'"]),
     "run.txt: the run failed before its first result row", "line 22: \"host: Test NCCL failure common.cu:958"),
    # the real crashed run: 8 rank lines, then the tool's own CUDA failure lines, no table at all
    ("crashed before the table (GH200 capture)", _read(GH200_CRASH), "run.txt: the run failed before printing a "
     "result table", "line 14: \"gpu-1-1: Test CUDA failure common.cu:1304 'CUDA-capable device(s) is/are busy or "
     "unavailable'\" (12 failure line(s)"),
    # the real grep-filtered capture: rows of four runs, no column header
    ("grep-filtered rows (MI325X capture)", _read(MI325X_GREP), "run.txt line 2: result rows without their column "
     "header (12 row-like line(s)", "filtered or cut (grep?)"),
    ("garbage inside the table", _read(MI300X).replace(
        "        1024           256     float     sum      -1    13.11",
        "        1024           256     float     sum      -1    oops!"),
     "run.txt line 29: not a result row", "rows follow it"),
    ("short row inside the table",
     "\n".join(_lines(DGX_SLURM)[:7] + ["     8388608       2097152"] + _lines(DGX_SLURM)[8:]),
     "run.txt line 8: not a result row (2 fields, the column header has 12)", ""),
    ("a name where the size goes", _read(MI300X).replace("        2048           512     float",
                                                         "        2048           512        42"),
     "run.txt line 30: not a result row (type '42' is not a name)", "rows follow it"),
    ("bad average", _read(MI300X).replace("116.669", "n/a"), "average bus bandwidth 'n/a' is not a number",
     "line 56"),
]


@pytest.mark.parametrize("label,text,first,second", ERRORS, ids=[e[0] for e in ERRORS])
def test_unusable_output_names_the_line(label, text, first, second):
    with pytest.raises(RcclParseError) as info:
        parse_perf(text, "run.txt")
    assert first in str(info.value)
    assert second in str(info.value)
    assert "\n" not in str(info.value)


# --- output shapes users paste: each derived from a real capture, parsed to the same rows --------------------


def _prefixed(name, make):
    return "\n".join(make(number, line) for number, line in enumerate(_lines(name)))


def _without_hashes(name):
    return "\n".join(line.lstrip("#") for line in _lines(name))


def _table_rows(name):
    return [line for line in _lines(name) if line.split()[:1] and line.split()[0].isdigit()]


def _two_cycles(marker):
    lines = _lines(MI300X)
    rows = _table_rows(MI300X)
    return "\n".join(lines[:21] + rows + marker + rows + lines[53:])


def _single_group(keep):
    """MI300X run as rccl-tests -O 0 prints it (in-place only), or with only the out-of-place group."""
    out = []
    for line in _lines(MI300X):
        tokens = line.split()
        if "out-of-place" in line:
            out.append("#" + " " * 62 + keep)
        elif tokens[:2] == ["#", "size"]:
            out.append(" ".join(tokens[:10]))
        elif tokens and tokens[0].isdigit():
            out.append(" ".join(tokens[:5] + (tokens[9:13] if keep == "in-place" else tokens[5:9])))
        else:
            out.append(line)
    return "\n".join(out)


def _sweep(max_bytes, last_size, drop=()):
    """MI300X run edited to another -e (maxBytes) and cut after ``last_size``, less the ``drop`` rows."""
    lines = _mi300x_upto(last_size) + _lines(MI300X)[53:]
    lines = [line for line in lines if line.split()[:1] not in [[str(size)] for size in drop]]
    return "\n".join(lines).replace("maxBytes 17179869184", "maxBytes %d" % max_bytes)


SHAPES = [
    ("Open MPI --tag-output", _prefixed(MI300X, lambda n, line: "[1,0]<stdout>:" + line), {}),
    ("srun --label", _prefixed(MI300X, lambda n, line: " 0: " + line), {}),
    ("ISO timestamps", _prefixed(
        MI300X, lambda n, line: "2025-03-02T10:%02d:%02d.%06dZ %s" % (n // 60, n % 60, n * 7919, line)), {}),
    ("kubectl logs --timestamps, CRI", _prefixed(MI300X, lambda n, line: "2025-03-02T10:00:%02d.123456789Z stdout F "
                                                 % (n % 60) + line), {}),
    ("syslog with host", _prefixed(MI300X, lambda n, line: "Mar  2 10:00:%02d gpu-a01 rccl[4242]: %s" % (n % 60, line)),
     {}),
    ("pdsh host prefix", _prefixed(MI300X, lambda n, line: "gpu-a01: " + line), {}),
    ("tag-output behind timestamps", _prefixed(MI300X, lambda n, line: "[2025-03-02 10:00:%02d] [1,0]<stdout>:%s"
                                               % (n % 60, line)), {}),
    ("header lines without '#'", _without_hashes(MI300X), {}),
    ("old layout without '#'", _without_hashes(DGX_SLURM), {"name": DGX_SLURM}),
    ("-N 2 (nccl-tests): sizes start again", _two_cycles([]), {"cycles": 2}),
    ("-s 2 (rccl-tests): '# Testing 2 cycle.'", _two_cycles(["# Testing 2 cycle."]), {"cycles": 2}),
    ("header printed again per cycle", _two_cycles(_lines(MI300X)[18:21]), {"cycles": 2}),
    ("-O 0: in-place only", _single_group("in-place"), {"groups": ["in_place"]}),
    ("out-of-place only", _single_group("out-of-place"), {"groups": ["out_of_place"]}),
    # -e 12G -f 2 stops at 8 GiB: 16 GiB was never run, nothing is missing
    ("-f 2 steps past maxBytes", _sweep(12 * GIB, 8 * GIB), {"rows": 31}),
    ("rows cut before the sweep's end", _sweep(12 * GIB, 4 * GIB), {
        "rows": 30, "warning": "the rows end at 4294967296 B but the run's sweep (minBytes 8, maxBytes 12884901888, "
                               "step 2(factor)) ends at 8589934592 B: larger sizes are missing"}),
    ("rows filtered out inside the sweep", _sweep(16 * GIB, 16 * GIB, drop=(65536, 131072)), {
        "rows": 30, "warning": "sizes are missing inside the sweep, first between 32768 B and 262144 B (1 gap(s))"}),
]


@pytest.mark.parametrize("label,text,expect", SHAPES, ids=[s[0] for s in SHAPES])
def test_pasted_shapes_parse_to_the_capture_rows(label, text, expect):
    name = expect.get("name", MI300X)
    plain = parse_perf(_read(name))
    result = parse_perf(text, "pasted.txt")
    groups = expect.get("groups", ["out_of_place", "in_place"])
    assert result["groups"] == groups
    assert result["n_cycles"] == expect.get("cycles", 1)
    rows = len(plain["rows"]) if "rows" not in expect else expect["rows"]
    assert len(result["rows"]) == rows
    by_size = {row["size"]: row for row in plain["rows"]}
    for got in result["rows"]:
        want = by_size[got["size"]]
        assert (got["count"], got["type"], got["redop"], got["root"]) == (want["count"], want["type"], want["redop"],
                                                                          want["root"])
        for group in ("out_of_place", "in_place"):
            assert got[group] == (want[group] if group in groups else None)
    for cycle in result["extra_cycles"]:
        assert cycle == result["rows"]
    assert result["avg_busbw"] == plain["avg_busbw"] and result["complete"] is True
    edited = dict(plain["params"], **{k: v for k, v in result["params"].items() if k == "maxBytes"})
    assert (result["n_ranks"], result["params"], result["versions"]) == (plain["n_ranks"], edited, plain["versions"])
    assert bool(result["prefixes"]) is label.startswith(("Open", "srun", "ISO", "kubectl", "syslog", "pdsh", "tag"))
    if "warning" in expect:
        assert any(expect["warning"] in w for w in result["warnings"]), result["warnings"]
    else:
        assert result["warnings"] == [] or groups != ["out_of_place", "in_place"]


def test_wrong_count_in_exponent_form():
    # nccl-tests prints #wrong with %g: a million wrong elements read 1.04858e+06
    text = _read(GH200_WRONG).replace("2.20      96", "2.20 1.04858e+06")
    row = _row(parse_perf(text), 1048576)
    assert row["out_of_place"]["wrong"] == 1048580 and row["in_place"]["wrong"] == 32


def test_debug_lines_bytes_and_in_place_first():
    lines = _lines(MI300X)
    lines.insert(20, "host:2509534:2509534 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>")
    lines.insert(25, "host:2509534:2509600 [0] NCCL INFO comm 0x1234 rank 0 nranks 8 - Init COMPLETE")
    result = parse_perf("\n".join(lines).encode())
    assert result["debug_lines"] == 2 and len(result["rows"]) == 32 and result["complete"]
    swapped = _read(DGX_SLURM).replace("out-of-place                       in-place",
                                       "in-place                           out-of-place")
    row = _row(parse_perf(swapped), 134217728)
    assert row["in_place"]["busbw"] == 114.00 and row["out_of_place"]["busbw"] == 121.64
    with pytest.raises(RcclParseError, match="expected text, got int"):
        parse_perf(42)


# --- comparison with knowledge/rccl_expectations.yml ------------------------------------------------------


ACCEPTANCE = "https://instinct.docs.amd.com/projects/system-acceptance/en/latest/gpus/"
DOCS = "ROCm/system-acceptance-docs docs/"


def test_expectations_are_amds_criteria_with_their_source():
    data = _knowledge("rccl_expectations")
    assert data["schema_version"] == 3 and len(data["acceptance_guide"]["revision"]) == 40
    generations = {g["name"] for g in _knowledge("gpu_generations")["generations"]}
    criteria = {}
    for entry in data["generations"]:
        assert entry["name"] in generations
        assert entry.get("criteria") or (entry["unknown"] and entry["source"])
        for criterion in entry.get("criteria") or []:
            assert criterion["reference"].startswith(ACCEPTANCE) and criterion["collective"] == "all_reduce_perf"
            assert criterion["nodes"] == 1 and "all_reduce_perf -b 8 -e 8G -f 2 -g " in criterion["command"]
            if criterion["kind"] == "avg_busbw":
                assert criterion["sweep"] == {"min_bytes": 8, "max_bytes": 8 * GIB, "step": "2(factor)"}
                assert (criterion["datatype"], criterion["redop"]) == ("float", "sum")
            else:
                assert criterion["kind"] == "busbw_at_size" and criterion["column"] == "in_place"
                assert criterion["message_bytes"] == 8 * GIB and criterion["column_from"]
            bounds = criterion["bounds"]
            # the lowest bound fails, higher ones (another AMD page's figure) warn; every bound names its pages
            assert [b["below"] for b in bounds] == ["fail"] + ["warn"] * (len(bounds) - 1)
            assert [b["busbw_gbs"] for b in bounds] == sorted(b["busbw_gbs"] for b in bounds)
            for bound in bounds:
                for source in bound["sources"]:
                    assert source["document"].startswith(DOCS) and len(source["commit"]) == 40
                    assert source["section"] and source["says"]
            # AMD's pages disagree exactly where there is more than one bound, and the data says so
            assert bool(criterion.get("disagreement")) is (len(bounds) > 1)
            criteria[(entry["name"], criterion["ranks"])] = (criterion["kind"], [(b["busbw_gbs"], b["below"])
                                                                                 for b in bounds])
        # observed runs are kept for context and must still match their capture
        for seen in entry["observed"]:
            result = parse_perf(_read(os.path.basename(seen["reference"])))
            assert "observed, not a criterion" in seen["source"] and result["n_ranks"] == seen["ranks"]
            if "avg_busbw_gbs" in seen:
                assert result["avg_busbw"] == seen["avg_busbw_gbs"]
                assert (result["params"]["minBytes"], result["params"]["maxBytes"], result["params"]["step"]) == (
                    seen["sweep"]["min_bytes"], seen["sweep"]["max_bytes"], seen["sweep"]["step"])
            else:
                assert row_busbw(_row(result, seen["message_bytes"]), seen["column"]) == seen["busbw_gbs"]
                assert result["peak_busbw"] == seen["peak_busbw_gbs"]
    assert criteria == {
        ("MI210", 4): ("avg_busbw", [(30, "fail")]), ("MI210", 8): ("avg_busbw", [(8, "fail")]),
        ("MI250X", 8): ("busbw_at_size", [(125, "fail")]), ("MI300X", 8): ("busbw_at_size", [(304, "fail")]),
        ("MI325X", 8): ("busbw_at_size", [(304, "fail")]), ("MI300A", 4): ("busbw_at_size", [(230, "fail")]),
        # AMD's MI350X/MI355X pages say 304, its common RCCL page 350: fail under 304, warn from 304 to 350
        ("MI355X", 8): ("busbw_at_size", [(304, "fail"), (350, "warn")])}
    mi355 = next(g for g in data["generations"] if g["name"] == "MI355X")["criteria"][0]
    assert [s["document"] for s in mi355["bounds"][0]["sources"]] == [DOCS + "gpus/mi355x.md", DOCS + "gpus/mi350x.md"]
    assert [s["document"] for s in mi355["bounds"][1]["sources"]] == [DOCS + "common/rccl-benchmarking.md"]
    assert "304" in mi355["disagreement"] and "350" in mi355["disagreement"]
    assert "no AMD" not in json.dumps(data) and "no AMD-published" not in json.dumps(data)


def _mi300x_at_8gib(in_place, out_of_place="317.96"):
    """The MI300X capture with another 8 GiB row (in-place busbw, out-of-place busbw)."""
    return _read(MI300X).replace("181.69  317.96      0    47323  181.52  317.66",
                                 "181.69  %s      0    47323  181.52  %s" % (out_of_place, in_place))


def _mi355x_at_8gib(in_place):
    return _read(MI355X).replace("232.72  407.26", "232.72  %s" % in_place)


MI355X_BOTH = "(>= 304 GB/s in docs/gpus/mi355x.md, docs/gpus/mi350x.md; >= 350 GB/s in docs/common/rccl-benchmarking.md"
MI355X_WARN = ("meets AMD's MI355X criterion >= 304 GB/s (docs/gpus/mi355x.md, docs/gpus/mi350x.md) but not >= 350 "
               "GB/s (docs/common/rccl-benchmarking.md): AMD's documents disagree; topotune fails under 304 GB/s and "
               "warns below 350 GB/s")

# (capture, generation given, generation found, status, measured, expected, reason fragment)
COMPARISONS = [
    (_read(MI300X), None, "MI300X", "ok", 317.66, 304.0,
     "in-place busbw at 8 GiB (8589934592 B) 317.66 GB/s meets AMD's MI300X pass criterion (>= 304 GB/s, 8 ranks: "
     "docs/gpus/mi300x.md, docs/common/rccl-benchmarking.md, docs/common/system-validation.md)"),
    # the peak (318.98 out-of-place at 16 GiB) and the 8 GiB out-of-place column are not what AMD states
    (_mi300x_at_8gib("300.00", "330.00"), None, "MI300X", "below", 300.0, 304.0, "is below AMD's MI300X"),
    (_mi300x_at_8gib("304.00"), None, "MI300X", "ok", 304.0, 304.0, "meets"),
    (_read(MI300X), "MI325X", "MI325X", "ok", 317.66, 304.0, "MI325X pass criterion (>= 304 GB/s, 8 ranks: "
     "docs/gpus/mi325x.md)"),
    (_read(MI355X), None, "MI355X", "ok", 407.26, 304.0, "407.26 GB/s meets every AMD MI355X criterion " + MI355X_BOTH),
    (_read(MI355X), "MI350X", "MI355X", "ok", 407.26, 304.0, "meets every AMD MI355X criterion"),
    # AMD's pages disagree on MI350X/MI355X: 304 (per-GPU pages) vs 350 (common RCCL page)
    (_mi355x_at_8gib("350.00"), None, "MI355X", "ok", 350.0, 304.0, "meets every AMD MI355X criterion"),
    (_mi355x_at_8gib("349.99"), None, "MI355X", "warn", 349.99, 304.0, "349.99 GB/s " + MI355X_WARN),
    (_mi355x_at_8gib("304.00"), None, "MI355X", "warn", 304.0, 304.0, MI355X_WARN),
    (_mi355x_at_8gib("303.99"), None, "MI355X", "below", 303.99, 304.0,
     "303.99 GB/s is below AMD's MI355X pass criterion (>= 304 GB/s, 8 ranks: docs/gpus/mi355x.md, docs/gpus/mi350x.md); "
     "AMD's other figure: >= 350 GB/s in docs/common/rccl-benchmarking.md"),
    (_read(MI300X), "MI250", "MI250X", "ok", 317.66, 125.0, "MI250X pass criterion (>= 125 GB/s"),
    (_read(MI300X_VF), None, "MI300X", "unknown", None, 304.0, "no 8589934592-byte row (8 GiB), the size AMD states; "
     "rerun with -e covering it (build/all_reduce_perf -b 8 -e 8G -f 2 -g 8)"),
    (_read(MI355X_A2A), None, "MI355X", "unknown", None, 304.0, "criterion is for all_reduce_perf; this run is "
     "alltoall_perf"),
    (_read(DGX_K8S), None, None, "unknown", None, None, "GPU generation unknown"),
    (_read(MI300X), "MI308X", "MI308X", "unknown", None, None, "AMD publishes no RCCL pass criterion for MI308X"),
    (_read(R9700_TCP), "MI210", "MI210", "unknown", None, None, "AMD's criterion is for 4 or 8 ranks; this run has 2"),
    (_read(GH200_WRONG), "MI300X", "MI300X", "unknown", None, None, "AMD's criterion is for 8 ranks; this run has 2"),
    (_read(MI300X).replace("181.52  317.66      0", "181.52  317.66      5"),
     None, "MI300X", "failed", 317.66, 304.0, "the 8 GiB row failed data validation"),
    (_single_group("out-of-place"), None, "MI300X", "unknown", None, 304.0, "no in-place column at 8 GiB"),
    (_single_group("in-place"), None, "MI300X", "ok", 317.66, 304.0, "meets"),
    (_two_cycles([]).replace("181.52  317.66", "181.52  290.00", 1), None, "MI300X", "below", 290.0, 304.0,
     "290.00 GB/s (worst of 2 cycles) is below"),
]


@pytest.mark.parametrize("text,given,generation,status,measured,expected,reason", COMPARISONS,
                         ids=["%s-%s" % (c[2], c[3]) for c in COMPARISONS])
def test_compare_with_amds_pass_criterion(text, given, generation, status, measured, expected, reason):
    expectations = _knowledge("rccl_expectations")
    result = parse_perf(text)
    gens = _knowledge("gpu_generations")["generations"]
    named = [by_name(gens, name) for name in result["device_names"]]
    found = identify([], gens, given)["generation"] if given else next((gen["name"] for gen in named if gen), None)
    assert found == generation
    comparison = compare_busbw(result, expectations, found)
    assert (comparison["status"], comparison["measured_busbw"], comparison["expected_busbw"]) == (
        status, measured, expected)
    assert reason in comparison["reason"], comparison["reason"]
    if measured is not None:
        assert comparison["compared"]["size"] == 8 * GIB and comparison["compared"]["column"] == "in_place"
        assert comparison["reference"].startswith(ACCEPTANCE) and comparison["kind"] == "busbw_at_size"
        # every bound in the result names its pages; the deciding bound is one of them
        assert all(b["sources"] and b["sources"][0]["document"].startswith(DOCS) for b in comparison["bounds"])
        assert comparison["bound"] is None if status in ("ok", "failed") else comparison["bound"] in comparison["bounds"]
    if status == "warn":
        assert comparison["bound"]["busbw_gbs"] == 350 and "350 GB/s" in comparison["disagreement"]


# --- MI210: AMD's criterion is the '# Avg bus bandwidth' of its sweep (-b 8 -e 8G -f 2) ------------------------


def _printed_busbw(result, sizes):
    return [row[g]["busbw"] for row in result["rows"] if row["size"] in sizes for g in ("out_of_place", "in_place")]


AMD_SWEEP = [8 << k for k in range(31)]      # -b 8 -e 8G -f 2: 31 sizes, both columns: 62 busbw values


def _to_amds_sweep(name, copy_size):
    """A MI210 capture as AMD's -e 8G sweep prints it: maxBytes 8 GiB, the missing sizes up to 8 GiB with the
    ``copy_size`` row's measurements, and the footer rccl-tests computes (the mean of all busbw values, %g)."""
    lines = _lines(name)
    rows = [i for i, line in enumerate(lines) if line.split()[:1] and line.split()[0].isdigit()]
    template = next(line for line in lines if line.split()[:1] == [str(copy_size)]).split()
    have = {int(lines[i].split()[0]) for i in rows}
    extra = ["  ".join([str(size), str(size // 4)] + template[2:]) for size in AMD_SWEEP if size not in have]
    table = [lines[i] for i in rows] + extra
    values = [float(line.split()[j]) for line in table for j in (7, 11)]
    footer = ["# Errors with asterisks indicate errors that have exceeded the maximum threshold.",
              "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : %g " % (sum(values) / len(values)), "#"]
    head = [line.replace("maxBytes 4294967296", "maxBytes 8589934592") for line in lines[:rows[0]]]
    return "\n".join(head + table + footer), sum(values) / len(values)


def test_mi210_captures_parse_to_the_facts_read_by_hand():
    bad = parse_perf(_read(MI210_BAD))
    assert (len(bad["rows"]), bad["n_ranks"], bad["hosts"]) == (28, 8, ["auh7-3b-gpu-003"])
    assert (_row(bad, 8388608)["out_of_place"]["busbw"], _row(bad, 8388608)["in_place"]["busbw"]) == (58.36, 58.90)
    assert _row(bad, 16777216)["out_of_place"]["busbw"] == 8.25
    assert (bad["rows"][-1]["size"], bad["rows"][-1]["out_of_place"]["busbw"], bad["rows"][-1]["in_place"]["busbw"]) \
        == (1073741824, 5.32, 5.22)
    assert bad["avg_busbw"] is None and bad["complete"] is False
    assert any("no '# Avg bus bandwidth' footer" in w for w in bad["warnings"])
    good = parse_perf(_read(MI210_OK))
    assert (good["avg_busbw"], _row(good, 4 * GIB)["out_of_place"]["busbw"], _row(good, 4 * GIB)["in_place"]["busbw"],
            _row(good, 16777216)["out_of_place"]["busbw"]) == (16.7201, 36.65, 36.68, 26.50)
    assert good["complete"] and good["warnings"] == [] and good["params"]["maxBytes"] == 4 * GIB
    # rccl-tests' footer is the mean of every printed busbw (out-of-place and in-place, every size)
    assert abs(sum(_printed_busbw(good, {r["size"] for r in good["rows"]})) / 60 - 16.7201) < 0.005
    assert parse_perf(_read(MI210_OK2))["avg_busbw"] == 16.7097
    two = parse_perf(_read(MI210_2N))
    assert (two["n_ranks"], two["hosts"], two["avg_busbw"], two["peak_busbw"]) == (
        16, ["auh7-3b-gpu-006", "auh7-3b-gpu-008"], 5.77252, 16.05)
    assert [r["host"] for r in two["ranks"]] == ["auh7-3b-gpu-006"] * 8 + ["auh7-3b-gpu-008"] * 8
    assert _row(two, 4 * GIB)["out_of_place"]["busbw"] == 15.17 and two["out_of_bounds"] == {"count": 0, "ok": True}


@pytest.mark.parametrize("name", [MI210_OK, MI210_OK2], ids=["node-006", "node-008"])
def test_healthy_mi210_nodes_pass_amds_average_criterion(name):
    """The healthy nodes swept to 4 GiB, AMD sweeps to 8 GiB: the 8 GiB row's two values are unknown, so AMD's
    average is at least the printed values (less their rounding) over all 62: 16.18 GB/s, past AMD's 8 GB/s."""
    result = parse_perf(_read(name))
    found = by_name(_knowledge("gpu_generations")["generations"], result["device_names"][0])["name"]
    comparison = compare_busbw(result, _knowledge("rccl_expectations"), found)
    values = _printed_busbw(result, set(AMD_SWEEP))
    at_least = sum(max(v - 0.005, 0) for v in values) / 62
    assert (found, comparison["kind"], comparison["status"], comparison["expected_busbw"]) == (
        "MI210", "avg_busbw", "ok", 8.0)
    assert comparison["measured_busbw"] == round(at_least, 4) and 16.1 < at_least < 16.2
    compared = comparison["compared"]
    assert (compared["from"], compared["cells"], compared["cells_expected"], compared["range"][1]) == (
        "rows, missing counted as 0", 60, 62, None)
    assert compared["sweep"] == {"min_bytes": 8, "max_bytes": 8 * GIB, "step": "2(factor)", "sizes": 31}
    assert compared["run_sweep"] == {"min_bytes": 8, "max_bytes": 4 * GIB, "step": "2(factor)"}
    assert "is at least %.2f GB/s by the run's rows" % at_least in comparison["reason"]
    assert "meets AMD's MI210 pass criterion (>= 8 GB/s, 8 ranks: docs/gpus/mi210.md)" in comparison["reason"]
    assert comparison["bounds"][0]["sources"][0]["says"].startswith("`-g 8` (dual-socket, cross-socket ring)")


def test_degraded_mi210_node_is_never_a_pass():
    """Node 003's log ends at 1 GiB without the footer (the run was stopped): AMD's average cannot be shown. Its rows
    give at least 7.52 GB/s, below 8 with AMD's 2/4/8 GiB sizes unknown: unknown with the reason, never ok."""
    result = parse_perf(_read(MI210_BAD))
    comparison = compare_busbw(result, _knowledge("rccl_expectations"), "MI210")
    assert comparison["status"] == "unknown" and comparison["measured_busbw"] is None
    for part in ("the run did not finish: no '# Avg bus bandwidth' line (rows end at 1 GiB; the run's sweep: 8 B .. "
                 "4 GiB, step 2(factor)) (its rows alone average at least 7.52 GB/s over AMD's sweep)",
                 "a cut or unfinished run is never a pass", "build/all_reduce_perf -b 8 -e 8G -f 2 -g <N>"):
        assert part in comparison["reason"]


def test_mi210_on_amds_own_sweep_compares_the_footer():
    """The nodes as AMD's command prints them (-e 8G: 31 sizes): the footer is AMD's number, compared as printed."""
    expectations = _knowledge("rccl_expectations")
    text, mean = _to_amds_sweep(MI210_OK, 4 * GIB)
    good = compare_busbw(parse_perf(text), expectations, "MI210")
    assert (good["status"], good["compared"]["from"], good["measured_busbw"]) == ("ok", "footer", float("%g" % mean))
    assert good["reason"].startswith("'# Avg bus bandwidth' %g GB/s of AMD's sweep (-b 8 -e 8G -f 2) meets AMD's "
                                     "MI210 pass criterion (>= 8 GB/s" % mean)
    # at the bound passes, under it fails (the footer is printed with 6 significant digits)
    at = compare_busbw(parse_perf(re.sub(r"Avg bus bandwidth    : \S+", "Avg bus bandwidth    : 8", text)),
                       expectations, "MI210")
    assert at["status"] == "ok"
    under = compare_busbw(parse_perf(re.sub(r"Avg bus bandwidth    : \S+", "Avg bus bandwidth    : 7.99999", text)),
                          expectations, "MI210")
    assert under["status"] == "below" and under["bound"]["busbw_gbs"] == 8
    assert "is below AMD's MI210 pass criterion (>= 8 GB/s, 8 ranks: docs/gpus/mi210.md)" in under["reason"]
    # node 003 had it kept its 1 GiB speed (5.3 GB/s, a seventh of node 006's) at 2, 4 and 8 GiB: 8.04 GB/s on
    # average, which passes AMD's 8 GB/s criterion for the cross-socket ring. AMD's average does not see its collapse.
    text, mean = _to_amds_sweep(MI210_BAD, 1 * GIB)
    bad = compare_busbw(parse_perf(text), expectations, "MI210")
    assert 8 < mean < 8.1 and (bad["status"], bad["compared"]["from"]) == ("ok", "footer")
    # four ranks: AMD's quad criterion (>= 30 GB/s) applies
    four = parse_perf(_to_amds_sweep(MI210_OK, 4 * GIB)[0])
    four["ranks"], four["n_ranks"] = four["ranks"][:4], 4
    quad = compare_busbw(four, expectations, "MI210")
    assert (quad["status"], quad["expected_busbw"]) == ("below", 30.0)
    assert quad["bounds"][0]["sources"][0]["says"].startswith("`-g 4` (single-socket quad)")


def test_mi210_sweeps_other_than_amds():
    expectations = _knowledge("rccl_expectations")
    # a sweep past AMD's (MI300X capture to 16 GiB, taken as an 8-rank MI210 run): AMD's average from its 31 sizes,
    # not the run's own footer
    wide = parse_perf(_read(MI300X))
    comparison = compare_busbw(wide, expectations, "MI210")
    values = _printed_busbw(wide, set(AMD_SWEEP))
    assert len(values) == 62 and comparison["compared"]["from"] == "rows"
    assert comparison["measured_busbw"] == round(sum(values) / 62, 4) != wide["avg_busbw"]
    low, high = comparison["compared"]["range"]
    assert low < sum(values) / 62 < high and high - low <= 0.0101
    assert "whose own footer says 116.669 GB/s" in comparison["reason"] and comparison["status"] == "ok"
    # one size failed validation anywhere in the sweep: the average is no measurement
    wrong = parse_perf(_read(MI210_OK).replace("36.57      0    51231", "36.57      3    51231"))
    assert compare_busbw(wrong, expectations, "MI210")["status"] == "failed"
    # another data type than AMD's default float: no row of AMD's command
    double = parse_perf(_read(MI210_OK).replace("float", "double"))
    assert "no float sum row at the sizes of AMD's sweep" in compare_busbw(double, expectations, "MI210")["reason"]
    # too few of AMD's sizes to show the average: unknown, never ok
    short = parse_perf("\n".join(line for line in _lines(MI210_OK)
                                 if not (line.split()[:1] and line.split()[0].isdigit() and int(line.split()[0]) > 1024)))
    short_cmp = compare_busbw(short, expectations, "MI210")
    assert short_cmp["status"] == "unknown" and "is not enough to show AMD's MI210 pass criterion" in short_cmp["reason"]
    # two hosts: AMD's criterion is one node
    assert "16 ranks" in compare_busbw(parse_perf(_read(MI210_2N)), expectations, "MI210")["reason"]


def test_rank_count_picks_the_criterion_and_device_ids():
    expectations = _knowledge("rccl_expectations")
    four = parse_perf(_read(MI300X))
    four["ranks"], four["n_ranks"] = four["ranks"][:4], 4
    comparison = compare_busbw(four, expectations, "MI210")
    assert (comparison["expected_busbw"], comparison["status"]) == (30.0, "ok")
    assert "reference has" not in comparison["reason"] and "MI210" in comparison["reason"]
    assert compare_busbw(four, expectations, "MI300X")["reason"] == (
        "AMD's criterion is for 8 ranks; this run has 4 ranks: busbw of other shapes is not comparable")
    two_nodes = parse_perf(_read(MI300X))
    two_nodes["hosts"] = ["a", "b"]
    assert "spans 2 hosts" in compare_busbw(two_nodes, expectations, "MI300X")["reason"]
    broken = {"generations": [{"name": "MI300X", "criteria": [{"busbw_gbs": 304, "message_bytes": "8G"}]}]}
    assert "malformed criterion" in compare_busbw(parse_perf(_read(MI300X)), broken, "MI300X")["reason"]


# --- CLI ---------------------------------------------------------------------------------------------------


def _cli(*args, stdin=None):
    return subprocess.run([sys.executable, os.path.join(REPO, "bin", "topotune"), "rccl"] + list(args),
                          capture_output=True, text=True, input=stdin, check=False)


@pytest.mark.parametrize("name,facts", CAPTURES[:1] + CAPTURES[4:5], ids=["mi300x", "dgx-old"])
def test_cli_rccl(name, facts):
    proc = _cli(os.path.join(SMI, name))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert len(data["rows"]) == facts["rows"] and data["avg_busbw"] == facts["avg"]
    row = _row(data, facts["row"])
    assert set(row["out_of_place"]) >= {"time_us", "algbw", "busbw"}
    assert set(row) >= {"size", "count", "type", "redop", "out_of_place", "in_place"}


def test_cli_rccl_unusable_input(tmp_path):
    proc = _cli("-", stdin="not a benchmark\n")
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no rccl-tests/nccl-tests result table" in proc.stderr
    proc = _cli(os.path.join(SMI, GH200_CRASH))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "the run failed before printing a result table: line 14:" in proc.stderr
    assert "'CUDA-capable device(s) is/are busy or unavailable'" in proc.stderr
    proc = _cli(str(tmp_path / "missing.txt"))
    assert proc.returncode == 2 and "cannot read" in proc.stderr and "Traceback" not in proc.stderr
    truncated = tmp_path / "cut.txt"
    truncated.write_text("\n".join(_mi300x_upto(4096)))
    data = json.loads(_cli(str(truncated)).stdout)
    assert data["avg_busbw"] is None and len(data["rows"]) == 10
