"""rccl-tests / nccl-tests parser (module_utils/rccl.py), the busbw comparison and `topotune rccl`."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.module_utils.gpu_identity import by_name, identify
from ansible_collections.topotune.instinct.plugins.module_utils.rccl import (
    RcclParseError,
    compare_busbw,
    parse_perf,
    row_busbw,
)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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
GIB = 1 << 30


def _read(name):
    with open(os.path.join(SMI, name), newline="") as handle:
        return handle.read()


def _knowledge(name):
    with open(os.path.join(REPO, "knowledge", name + ".yml")) as handle:
        return yaml.safe_load(handle)


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


def test_expectations_are_amds_criteria_with_their_source():
    data = _knowledge("rccl_expectations")
    generations = {g["name"] for g in _knowledge("gpu_generations")["generations"]}
    criteria = {}
    for entry in data["generations"]:
        assert entry["name"] in generations
        assert entry["criteria"] or entry["source"]
        for criterion in entry["criteria"]:
            assert criterion["kind"] == "amd_pass_criterion" and criterion["reference"].startswith(ACCEPTANCE)
            assert criterion["source"].startswith("AMD Instinct Customer Acceptance Guide")
            assert (criterion["collective"], criterion["column"], criterion["message_bytes"], criterion["nodes"]) == (
                "all_reduce_perf", "in_place", 8 * GIB, 1)
            criteria[(entry["name"], criterion["ranks"])] = criterion["busbw_gbs"]
        # observed runs are kept for context and must still match their capture
        for seen in entry["observed"]:
            result = parse_perf(_read(os.path.basename(seen["reference"])))
            assert row_busbw(_row(result, seen["message_bytes"]), seen["column"]) == seen["busbw_gbs"]
            assert result["peak_busbw"] == seen["peak_busbw_gbs"] and result["n_ranks"] == seen["ranks"]
            assert "observed, not a criterion" in seen["source"]
    assert criteria == {("MI210", 4): 30, ("MI210", 8): 8, ("MI250X", 8): 125, ("MI300X", 8): 304,
                        ("MI325X", 8): 304, ("MI355X", 8): 350, ("MI300A", 4): 230}
    assert "no AMD" not in json.dumps(data) and "no AMD-published" not in json.dumps(data)


def _mi300x_at_8gib(in_place, out_of_place="317.96"):
    """The MI300X capture with another 8 GiB row (in-place busbw, out-of-place busbw)."""
    return _read(MI300X).replace("181.69  317.96      0    47323  181.52  317.66",
                                 "181.69  %s      0    47323  181.52  %s" % (out_of_place, in_place))


# (capture, generation given, generation found, status, measured, expected, reason fragment)
COMPARISONS = [
    (_read(MI300X), None, "MI300X", "ok", 317.66, 304.0,
     "in-place busbw at 8 GiB (8589934592 B) 317.66 GB/s meets AMD's MI300X pass criterion (>= 304 GB/s, 8 ranks)"),
    # the peak (318.98 out-of-place at 16 GiB) and the 8 GiB out-of-place column are not what AMD states
    (_mi300x_at_8gib("300.00", "330.00"), None, "MI300X", "below", 300.0, 304.0, "is below AMD's MI300X"),
    (_mi300x_at_8gib("304.00"), None, "MI300X", "ok", 304.0, 304.0, "meets"),
    (_read(MI300X), "MI325X", "MI325X", "ok", 317.66, 304.0, "MI325X pass criterion (>= 304 GB/s"),
    (_read(MI355X), None, "MI355X", "ok", 407.26, 350.0, "MI355X pass criterion (>= 350 GB/s, 8 ranks)"),
    (_read(MI355X), "MI350X", "MI355X", "ok", 407.26, 350.0, "meets"),
    (_read(MI300X), "MI250", "MI250X", "ok", 317.66, 125.0, "MI250X pass criterion (>= 125 GB/s"),
    (_read(MI300X_VF), None, "MI300X", "unknown", None, 304.0, "no 8589934592-byte row (8 GiB), the size AMD states"),
    (_read(MI355X_A2A), None, "MI355X", "unknown", None, 350.0, "criterion is for all_reduce_perf; this run is "
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
    assert reason in comparison["reason"]
    if measured is not None:
        assert comparison["compared"]["size"] == 8 * GIB and comparison["compared"]["column"] == "in_place"
        assert comparison["reference"].startswith(ACCEPTANCE)


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
