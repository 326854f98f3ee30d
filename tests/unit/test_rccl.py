"""rccl-tests / nccl-tests parser (module_utils/rccl.py), the busbw comparison and `topotune rccl`."""

import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.topotune.instinct.plugins.module_utils.rccl import (
    RcclParseError,
    compare_busbw,
    parse_perf,
    resolve_generation,
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


def _read(name):
    with open(os.path.join(SMI, name), newline="") as handle:
        return handle.read()


def _knowledge(name):
    with open(os.path.join(REPO, "knowledge", name + ".yml")) as handle:
        return yaml.safe_load(handle)


def _row(result, size):
    return next(r for r in result["rows"] if r["size"] == size)


# Facts read off each capture by hand: rows, first/last size, one row's out-of-place / in-place busbw,
# avg busbw, format, ranks and device names.
CAPTURES = [
    (MI300X, dict(rows=32, first=8, last=17179869184, row=4194304, oop=141.91, ip=56.92, avg=116.669, fmt="new",
                  ranks=8, names=["AMD Instinct MI300X"], peak=318.98)),
    (MI300X_VF, dict(rows=25, first=8, last=134217728, row=16777216, oop=192.22, ip=184.67, avg=54.8575, fmt="new",
                     ranks=8, names=["AMD Instinct MI300X VF"], peak=293.07)),
    (MI355X, dict(rows=2, first=8589934592, last=17179869184, row=8589934592, oop=406.76, ip=407.26, avg=273.886,
                  fmt="new", ranks=8, names=["AMD Instinct MI355X"], peak=407.26)),
    (MI355X_A2A, dict(rows=2, first=8589934592, last=17179869184, row=17179869184, oop=361.41, ip=361.20,
                      avg=236.187, fmt="new", ranks=8, names=["AMD Instinct MI355X"], peak=361.41)),
    (DGX_K8S, dict(rows=30, first=8, last=4294967296, row=4294967296, oop=188.53, ip=188.70, avg=53.7098, fmt="old",
                   ranks=None, names=[], peak=188.70)),
    (DGX_SLURM, dict(rows=13, first=1048576, last=4294967296, row=134217728, oop=114.00, ip=121.64, avg=113.289,
                     fmt="old", ranks=None, names=[], peak=191.56)),
]


@pytest.mark.parametrize("name,facts", CAPTURES, ids=[c[0].split("__")[1] for c in CAPTURES])
def test_real_captures(name, facts):
    result = parse_perf(_read(name), name)
    assert len(result["rows"]) == facts["rows"]
    assert result["rows"][0]["size"] == facts["first"]
    assert result["rows"][-1]["size"] == facts["last"]
    row = _row(result, facts["row"])
    assert row["out_of_place"]["busbw"] == facts["oop"]
    assert row["in_place"]["busbw"] == facts["ip"]
    assert result["avg_busbw"] == facts["avg"]
    assert result["format"] == facts["fmt"]
    assert result["n_ranks"] == facts["ranks"]
    assert result["device_names"] == facts["names"]
    assert result["peak_busbw"] == facts["peak"]
    assert result["out_of_bounds"] == {"count": 0, "ok": True}
    assert result["complete"] is True
    sizes = [r["size"] for r in result["rows"]]
    assert sizes == sorted(sizes)
    assert all(r["count"] > 0 and r["type"] == "float" for r in result["rows"])


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
    ("failed mid-run", "\n".join(_mi300x_upto(512) + [
        "host: Test HIP failure common.cu:1037 'out of memory'",
        " .. host pid 1: Test failure common.cu:892"]), 7,
     ["truncated run: line 29 is not a complete row", "host: Test HIP failure common.cu:1037"]),
    ("out of bounds", _read(MI300X).replace("# Out of bounds values : 0 OK", "# Out of bounds values : 3 FAILED"), 32,
     ["3 out-of-bounds (wrong) values reported"]),
    ("error over threshold", _read(DGX_K8S).replace("188.53  5e-07", "188.53  5e-02*"), 30,
     ["marked '*'"]),
]


@pytest.mark.parametrize("label,text,rows,warnings", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_degraded_runs_keep_complete_rows(label, text, rows, warnings):
    result = parse_perf(text, "run.txt")
    assert len(result["rows"]) == rows
    for expected in warnings:
        assert any(expected in w for w in result["warnings"]), result["warnings"]
    if "footer" in " ".join(warnings):
        assert result["avg_busbw"] is None and result["complete"] is False


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
     "the result table has no complete row", "line 22: \"host: Test NCCL failure"),
    ("garbage inside the table", _read(MI300X).replace(
        "        1024           256     float     sum      -1    13.11",
        "        1024           256     float     sum      -1    oops!"),
     "run.txt line 29: not a result row", "rows follow it"),
    ("short row inside the table",
     "\n".join(_lines(DGX_SLURM)[:7] + ["     8388608       2097152"] + _lines(DGX_SLURM)[8:]),
     "run.txt line 8: not a result row (2 fields, the column header has 12)", ""),
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


def test_expectations_are_sourced_and_match_their_capture():
    data = _knowledge("rccl_expectations")
    generations = {g["name"] for g in _knowledge("gpu_generations")["generations"]}
    for entry in data["generations"]:
        assert entry["source"] and entry["name"] in generations
        if entry["busbw_gbs"] is None:
            assert entry["kind"] is None
            continue
        assert entry["kind"] == "observed" and "observed" in entry["source"]
        result = parse_perf(_read(os.path.basename(entry["reference"])))
        assert row_busbw(_row(result, entry["message_bytes"])) == entry["busbw_gbs"]
        assert result["n_ranks"] == entry["ranks"]


COMPARISONS = [
    (MI300X, None, "MI300X", "ok", 1.0),
    (MI355X, None, "MI355X", "ok", 1.0),
    (MI300X_VF, None, "MI300X", "unknown", None),   # sweep stops at 128 MiB
    (DGX_K8S, None, None, "unknown", None),          # NVIDIA: no generation
    (MI300X, "MI250", "MI250X", "unknown", None),    # no sourced figure
]


@pytest.mark.parametrize("name,given,generation,status,ratio", COMPARISONS)
def test_compare(name, given, generation, status, ratio):
    expectations = _knowledge("rccl_expectations")
    result = parse_perf(_read(name))
    found, _how = resolve_generation(expectations, given, device_names=result["device_names"])
    assert found == generation
    comparison = compare_busbw(result, expectations, found)
    assert comparison["status"] == status
    assert comparison["ratio"] == ratio
    assert comparison["reason"]


def test_compare_below_and_rank_mismatch_and_device_id():
    expectations = _knowledge("rccl_expectations")
    slow = parse_perf(_read(MI300X).replace("182.27  318.98", "150.00  262.50")
                      .replace("182.13  318.73", "150.00  262.40"))
    comparison = compare_busbw(slow, expectations, "MI300X")
    assert comparison["status"] == "below" and comparison["measured_busbw"] == 262.5
    assert "more than 10% below" in comparison["reason"]
    four = parse_perf(_read(MI300X))
    four["n_ranks"] = 4
    assert "reference has 8 ranks, this run 4" in compare_busbw(four, expectations, "MI300X")["reason"]
    gens = _knowledge("gpu_generations")["generations"]
    assert resolve_generation(expectations, device_ids=["0x74a1"], generations=gens) == ("MI300X", "device id")
    assert resolve_generation(expectations, device_ids=["0x740c"], generations=gens)[0] == "MI250X"


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
    proc = _cli(str(tmp_path / "missing.txt"))
    assert proc.returncode == 2 and "cannot read" in proc.stderr and "Traceback" not in proc.stderr
    truncated = tmp_path / "cut.txt"
    truncated.write_text("\n".join(_mi300x_upto(4096)))
    data = json.loads(_cli(str(truncated)).stdout)
    assert data["avg_busbw"] is None and len(data["rows"]) == 10
