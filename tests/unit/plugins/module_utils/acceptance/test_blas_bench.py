"""rocblas-bench / hipblaslt-bench output read into measurements (module_utils/acceptance/blas_bench.py), and AMD's
rocBLAS criteria judged on it.

The real captures are tests/fixtures/acceptance/rocblas-bench_*.txt (their .source.md lists the facts asserted here).
No hipblaslt-bench output was found published whole: the SYNTHETIC_* inputs below are written from the tools' own
print formats (hipBLASLt clients/include/argument_model.hpp ``log_args``/``log_perf``, testing_matmul.hpp's
``Winner:`` block, clients/benchmarks/README.md's demo lines; rocBLAS clients/include/argument_model.hpp with
``--log_function_name``/``--log_datatype`` and client_utility.cpp's device block), never copied from a run.
"""

import glob
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.blas_bench import (
    case_of,
    detect,
    parse,
    parse_each,
)
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import criteria_of, judge
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
FP32 = "rocblas-bench_gemm-fp32__mi300x__rocm-system-acceptance-rst.txt"
BF16 = "rocblas-bench_gemm-strided-batched-bf16__mi300x__rocm-system-acceptance-rst.txt"
OWN = (FP32, BF16)


def _read(name):
    with open(os.path.join(FIXTURES, "acceptance", name), newline="") as handle:
        return handle.read()


def _mi300x():
    return {c["id"]: c for c in criteria_of(load_knowledge("acceptance"), "MI300X") if c["tool"] == "rocblas-bench"}


def _one(result, metric):
    found = [m for m in result["measurements"] if m["metric"] == metric]
    assert len(found) == 1, found
    return found[0]


SYNTHETIC_ROCBLAS_Z = """\
rocBLAS info: Using reference library 'openblas'
rocBLAS version: 4.5.0.713501e60
rocBLAS-commit-hash: 713501e6022e39b4283e132a6865a050893f7347
Query device success: there are 1 devices
-------------------------------------------------------------------------------
Device ID 0 : AMD Instinct MI300X gfx942:sramecc+:xnack-
with 206.1 GB memory, max. SCLK 2100 MHz, max. MCLK 1300 MHz, memoryBusWidth 8192 Bytes, compute capability 9.4
-------------------------------------------------------------------------------

rocBLAS info: maximum library size per device is 0.61866 GB.
function,a_type,b_type,c_type,d_type,compute_type,transA,transB,M,N,K,alpha,lda,stride_a,beta,ldb,stride_b,ldc,\
stride_c,ldd,stride_d,batch_count,cold_iters,hot_iters,rocblas-Gflops,us
gemm_strided_batched_ex,i8_r,i8_r,i32_r,i32_r,i32_r,N,T,1024,2048,512,1.1,1024,4096,1,2048,4096,1024,2097152,1024,\
2097152,5, 2, 10, 1.70123e+05, 63.1
"""

# rocBLAS 4.5 (ROCm 6.4) gemm_ex: ldd and batch_count columns (testing_gemm_ex.hpp), cold_iters/hot_iters
# (ArgumentModel::log_perf), the GFLOPS in exponent form; gemm_batched_ex and gemm_ex3 print the same columns
SYNTHETIC_ROCBLAS_GEMM_EX = """\
rocBLAS version: 4.5.0.713501e60
Query device success: there are 1 devices
-------------------------------------------------------------------------------
Device ID 0 : AMD Instinct MI300X gfx942:sramecc+:xnack-
-------------------------------------------------------------------------------

rocBLAS info: maximum library size per device is 0.61866 GB.
transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,ldd,batch_count,cold_iters,hot_iters,rocblas-Gflops,us
T,N,8192,8192,8192,1,8192,0,8192,8192,8192,1, 2, 10, 1.15342e+06, 953.3
"""

_LT_HEADER = ("transA,transB,grouped_gemm,batch_count,m,n,k,alpha,lda,stride_a,beta,ldb,stride_b,ldc,stride_c,ldd,"
              "stride_d,a_type,b_type,c_type,d_type,compute_type,scaleA,scaleB,scaleC,scaleD,amaxD,activation_type,"
              "bias_vector,bias_type,hipblaslt-Gflops,hipblaslt-GB/s,us")
_LT_ARGS = ("    T,N,0,1,8192,8192,8192,1,8192,67108864,0,8192,67108864,8192,67108864,8192,67108864,bf16_r,bf16_r,"
            "bf16_r,bf16_r,f32_r,0,0,0,0,0,none,0,non-supported type,")


def _lt_block(index, gflops, us):
    return "[%d]:%s\n%s%s,310.5,%s\n    --Solution index: %d\n    --Solution name:  Cijk_Alik_Bljk_BBS_BH_MT256x256\n" \
           "    --kernel name:    Cijk_Alik_Bljk_BBS_BH_MT256x256_K%d\n" % (index, _LT_HEADER, _LT_ARGS, gflops, us,
                                                                            10 + index, index)


SYNTHETIC_HIPBLASLT_TUNING = ("hipBLASLt version: 100000\nhipBLASLt git version: 7d9fb683\n\n"
                              "Is supported 3 / Total solutions: 3\n"
                              + _lt_block(0, 701234, 1567.8) + _lt_block(1, 755123, 1456.1) + _lt_block(2, 690001, 1593.5)
                              + "Winner: \n" + _lt_block(1, 755123, 1456.1))

SYNTHETIC_HIPBLASLT_VERIFY = """\
[0]:transA,transB,grouped_gemm,batch_count,m,n,k,alpha,lda,stride_a,beta,ldb,stride_b,ldc,stride_c,ldd,stride_d,\
a_type,b_type,c_type,d_type,compute_type,scaleA,scaleB,scaleC,scaleD,amaxD,activation_type,bias_vector,bias_type,\
hipblaslt-Gflops,hipblaslt-GB/s,us,CPU-Gflops,CPU-us,norm_error,atol,rtol
    N,N,0,1,128,128,128,1,128,16384,0,128,16384,128,16384,128,16384,f32_r,f32_r,f32_r,f32_r,f32_r,0,0,0,0,0,none,0,\
non-supported type,403.298,17.6063,10.4,0.0960059,43688,2.44879e-07,1e-05,1e-05
"""


def test_the_fp32_capture_gives_its_facts():
    result = parse(_read(FP32), FP32)
    assert (result["tool"], result["test"], result["complete"]) == ("rocblas-bench", "gemm", True)
    gflops, us = _one(result, "gflops"), _one(result, "us")
    assert (gflops["value"], gflops["unit"], us["value"], us["unit"]) == (97190.6, "GFLOPS", 1317.0, "us")
    assert gflops["scope"] == {"m": 4000, "n": 4000, "k": 4000, "trans_a": "N", "trans_b": "T"}
    columns = result["problems"][0]["columns"]
    assert (columns["alpha"], columns["beta"], columns["lda"], columns["ldb"], columns["ldc"]) == ("1", "0", 4000,
                                                                                                   4000, 4000)
    assert result["problems"][0]["function_from"] == "columns"
    # rocblas-bench printed no precision and no command names it: the case is unknown, and the warning says why
    assert gflops["case"] is None and any("precision" in w and "command" in w for w in result["warnings"])


def test_the_strided_batched_capture_gives_its_facts():
    result = parse(_read(BF16), BF16)
    assert (result["test"], result["complete"]) == ("gemm_strided_batched_ex", True)
    assert (_one(result, "gflops")["value"], _one(result, "us")["value"]) == (159783.0, 67.2)
    assert _one(result, "gflops")["scope"] == {"m": 1024, "n": 2048, "k": 512, "trans_a": "N", "trans_b": "T",
                                               "batch_count": 5}
    columns = result["problems"][0]["columns"]
    assert (columns["alpha"], columns["beta"], columns["stride_c"], columns["ldd"]) == ("1.1", "1", 2097152, 1024)


def test_amds_command_names_the_precision():
    criteria = _mi300x()
    fp32 = parse(_read(FP32), FP32, command=criteria["fp32"]["command"])
    assert _one(fp32, "gflops")["case"] == "fp32" and fp32["problems"][0]["types_from"] == "command"
    assert not fp32["warnings"]
    # AMD's "rocBLAS BF16" card runs --a_type h: rocBLAS's f16_r, so the case is fp16 (compute type s)
    half = parse(_read(BF16), BF16, command=criteria["bf16"]["command"])
    assert _one(half, "gflops")["case"] == "fp16"
    assert (half["problems"][0]["a_type"], half["problems"][0]["compute_type"]) == ("f16_r", "f32_r")
    # as an argument list too; a command for another problem size is not used
    assert _one(parse(_read(FP32), FP32, command=["rocblas-bench", "-f", "gemm", "-r", "d", "-m", "4000", "-n",
                                                  "4000", "-k", "4000"]), "gflops")["case"] == "fp64"
    other = parse(_read(FP32), FP32, command="rocblas-bench -f gemm -r h -m 8192 -n 8192 -k 8192")
    assert _one(other, "gflops")["case"] is None and any("another problem size" in w for w in other["warnings"])


def test_a_command_echoed_in_the_log_names_the_precision():
    text = "$ ./rocblas-bench -f gemm -r s -m 4000 -n 4000 -k 4000 --lda 4000 --ldb 4000 --ldc 4000 --transposeA N " \
           "--transposeB T\n" + _read(FP32)
    result = parse(text, "echoed")
    assert _one(result, "gflops")["case"] == "fp32" and result["commands"][0].startswith("rocblas-bench -f gemm")
    assert detect(text)


def test_amds_mi300x_rocblas_criteria_on_the_captures():
    criteria = _mi300x()
    assert sorted(criteria) == ["bf16", "fp32", "int8"]
    results = [parse(_read(FP32), FP32, command=criteria["fp32"]["command"]),
               parse(_read(BF16), BF16, command=criteria["bf16"]["command"])]
    fp32 = judge(criteria["fp32"], results)
    assert (fp32["status"], fp32["value"], fp32["unit"]) == ("pass", 97190.6, "GFLOPS")
    assert fp32["margin_pct"] == pytest.approx(3.28, abs=0.01) and "mi300x.md" in fp32["source"]
    half = judge(criteria["bf16"], results)
    assert (half["status"], half["value"]) == ("pass", 159783.0)
    int8 = judge(criteria["int8"], results)
    assert int8["status"] == "unknown" and "has no gflops for int8" in int8["observed"]
    # without the command the precision is unknown, so the criterion cannot be judged
    assert judge(criteria["fp32"], [parse(_read(FP32), FP32)])["status"] == "unknown"
    # derived: the same run 5% slower (92331.1 GFLOPS) misses AMD's 94100
    slower = _read(FP32).replace(" 97190.6,", " 92331.1,")
    verdict = judge(criteria["fp32"], [parse(slower, "slower", command=criteria["fp32"]["command"])])
    assert verdict["status"] == "fail" and verdict["value"] == 92331.1 and verdict["margin_pct"] < 0
    assert verdict["failing"] == ["k 4000,m 4000,n 4000,trans_a N,trans_b T"]


def test_every_card_with_a_rocblas_page_lists_its_criteria():
    view = load_knowledge("acceptance")
    expected = {"MI210": {"fp32": (28000, "GFLOPS")}, "MI250X": {"fp32": (30, "TFLOPS")},
                "MI300A": {"fp32": (60, "TFLOPS")},
                "MI300X": {"fp32": (94100, "GFLOPS"), "bf16": (130600, "GFLOPS"), "int8": (162700, "GFLOPS")},
                "MI325X": {"fp32": (94100, "GFLOPS"), "bf16": (130600, "GFLOPS"), "int8": (162700, "GFLOPS")},
                "MI355X": {}, "MI308X": {}}
    for generation, wanted in expected.items():
        found = {c["id"]: (c["min"], c["unit"]) for c in criteria_of(view, generation) if c["tool"] == "rocblas-bench"}
        assert found == wanted, generation
        for criterion in criteria_of(view, generation):
            if criterion["tool"] != "rocblas-bench":
                continue
            assert criterion["command"].startswith("rocblas-bench -f ") and criterion["sources"]
            assert all(s["commit"] and s["says"] for s in criterion["sources"])
    mi355x = next(g for g in view["generations"] if g["name"] == "MI355X")
    assert "GEMM" in mi355x["rocblas-bench"]["unknown"] and "mi350x.md" in mi355x["rocblas-bench"]["source"]
    # the cards' commands parse: each names the precision its case says
    for criterion in (c for c in criteria_of(view, "MI300X") if c["tool"] == "rocblas-bench"):
        text = _read(FP32) if criterion["test"] == "gemm" else _read(BF16)
        assert {m["case"] for m in parse(text, "x", command=criterion["command"])["measurements"]} == {
            criterion["case"]}


def test_synthetic_rocblas_output_with_function_and_datatype_columns():
    result = parse(SYNTHETIC_ROCBLAS_Z, "synthetic-z")
    assert (result["test"], result["version"], result["complete"]) == ("gemm_strided_batched_ex", "4.5.0.713501e60",
                                                                       True)
    gflops = _one(result, "gflops")
    assert (gflops["case"], gflops["value"]) == ("int8", 170123.0)
    problem = result["problems"][0]
    assert (problem["function_from"], problem["types_from"], problem["columns"]["hot_iters"]) == ("column", "column",
                                                                                                  10)
    assert result["devices"] == [{"id": 0, "name": "AMD Instinct MI300X gfx942:sramecc+:xnack-"}]
    verdict = judge(_mi300x()["int8"], [result])
    assert verdict["status"] == "pass" and verdict["value"] == 170123.0


def test_synthetic_rocblas_gemm_ex_needs_its_command_for_function_and_precision():
    alone = parse(SYNTHETIC_ROCBLAS_GEMM_EX, "gemm_ex")
    assert alone["test"] is None and _one(alone, "gflops")["value"] == 1153420.0
    assert any("names no function" in w for w in alone["warnings"])
    told = parse(SYNTHETIC_ROCBLAS_GEMM_EX, "gemm_ex", command="rocblas-bench -f gemm_ex --transposeA T --transposeB N "
                 "-m 8192 -n 8192 -k 8192 --a_type bf16_r --b_type bf16_r --c_type bf16_r --d_type bf16_r "
                 "--compute_type s")
    assert told["test"] == "gemm_ex" and _one(told, "gflops")["case"] == "bf16" and not told["warnings"]
    assert told["problems"][0]["function_from"] == "command"


def test_synthetic_hipblaslt_tuning_measures_the_winner():
    result = parse(SYNTHETIC_HIPBLASLT_TUNING, "synthetic-hipblaslt")
    assert (result["tool"], result["test"], result["version"], result["complete"]) == ("hipblaslt-bench", "matmul",
                                                                                       "100000", True)
    gflops = _one(result, "gflops")
    assert (gflops["case"], gflops["value"]) == ("bf16", 755123.0)
    assert gflops["scope"] == {"m": 8192, "n": 8192, "k": 8192, "trans_a": "T", "trans_b": "N", "batch_count": 1}
    roles = [(p["index"], p["role"]) for p in result["problems"]]
    assert roles == [(0, "candidate"), (1, "candidate"), (2, "candidate"), (1, "winner")]
    assert result["problems"][-1]["solution_index"] == "11" and result["problems"][-1]["kernel"].endswith("_K1")
    assert _one(result, "bandwidth")["unit"] == "GB/s" and _one(result, "us")["value"] == 1456.1


def test_synthetic_hipblaslt_without_its_winner_is_not_complete_and_not_measured():
    text = SYNTHETIC_HIPBLASLT_TUNING.split("Winner:")[0]
    result = parse(text, "cut")
    assert result["complete"] is False and result["measurements"] == []
    assert any("Winner" in w for w in result["warnings"])


def test_synthetic_hipblaslt_verify_columns():
    result = parse(SYNTHETIC_HIPBLASLT_VERIFY, "verify")
    assert _one(result, "gflops")["value"] == 403.298 and _one(result, "gflops")["case"] == "fp32"
    assert result["problems"][0]["columns"]["atol"] == "1e-05"


def test_several_problems_and_functions_in_one_log():
    criteria = _mi300x()
    text = ("+ " + " ".join(criteria["fp32"]["command"].replace("\\\n", " ").split()) + "\n" + _read(FP32) + "\n"
            + "+ " + " ".join(criteria["bf16"]["command"].replace("\\\n", " ").split()) + "\n" + _read(BF16))
    result = parse(text, "two")
    assert result["test"] is None and any("parse_each" in w for w in result["warnings"])
    assert [m["scope"]["problem"] for m in result["measurements"] if m["metric"] == "gflops"] == [1, 2]
    each = parse_each(text, "two")
    assert [(r["test"], _one(r, "gflops")["case"]) for r in each] == [("gemm", "fp32"),
                                                                      ("gemm_strided_batched_ex", "fp16")]
    assert judge(criteria["fp32"], each)["status"] == "pass" and judge(criteria["bf16"], each)["status"] == "pass"


def test_prefixes_cuts_and_truncation():
    plain = parse(_read(FP32), FP32, command=_mi300x()["fp32"]["command"])
    prefixed = "\n".join("[1,0]<stdout>:" + line for line in _read(FP32).split("\n"))
    assert parse(prefixed, "p", command=_mi300x()["fp32"]["command"])["measurements"] == plain["measurements"]
    cut = parse(_read(FP32) + "...\n", "cut")
    assert cut["complete"] is False and _one(cut, "gflops")["value"] == 97190.6
    # the value line cut short at the end of the log: not complete, no figure
    lines = SYNTHETIC_HIPBLASLT_VERIFY.rstrip("\n").split("\n")
    with pytest.raises(AcceptanceParseError):
        parse("\n".join(lines[:-1] + [lines[-1][:40]]), "short")      # nothing left to measure
    short = parse(_read(FP32) + "\n" + "\n".join(lines[:-1] + [lines[-1][:40]]), "short")
    assert short["complete"] is False and _one(short, "gflops")["value"] == 97190.6
    assert any("cut" in w for w in short["warnings"])


@pytest.mark.parametrize("text, why", [
    ("", "no rocblas-bench"),
    ("rocBLAS info: maximum library size per device is 0.61866 GB.\n", "no rocblas-bench"),
    ("transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,rocblas-Gflops,us\nN,T,4000,4000,4000,1,4000,0,4000\nmore\n",
     "9 fields, the result header on line 1 has 12"),
    ("transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,rocblas-Gflops,us\nN,T,4000,4000,4000,1,4000,0,4000,4000,fast,1\n",
     "rocblas-Gflops 'fast' is not a number"),
    ("transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,rocblas-Gflops,us\nN,T,4000,x,4000,1,4000,0,4000,4000,1,1\n",
     "N 'x' is not an integer"),
    ("rocBLAS error: Invalid value for --precision q\n", "the run failed before printing a result"),
    (_read(FP32) + SYNTHETIC_HIPBLASLT_VERIFY, "rocblas-bench and hipblaslt-bench output in one log"),
])
def test_refusals_are_one_line_naming_source_line_and_why(text, why):
    with pytest.raises(AcceptanceParseError) as error:
        parse(text, "some.log")
    message = str(error.value)
    assert "\n" not in message and message.startswith("some.log line ") and why in message


def test_a_non_text_input_is_refused():
    with pytest.raises(AcceptanceParseError, match="expected text"):
        parse(None, "x")


def test_case_names():
    assert [case_of(t) for t in ("f32_r", "s", "h", "bf16_r", "i8_r", "f8_r", "z", "f16_k", "f6_r", "x")] == [
        "fp32", "fp32", "fp16", "bf16", "int8", "fp8", "fp64-complex", "fp16-complex", "fp6", None]


OTHERS = sorted(p for folder in ("acceptance", "smi") for p in glob.glob(os.path.join(FIXTURES, folder, "*"))
                if not p.endswith(".md") and os.path.basename(p) not in OWN)


def test_detect_claims_rocblas_and_hipblaslt_output_only():
    for text in [_read(name) for name in OWN] + [SYNTHETIC_ROCBLAS_Z, SYNTHETIC_ROCBLAS_GEMM_EX,
                                                 SYNTHETIC_HIPBLASLT_TUNING, SYNTHETIC_HIPBLASLT_VERIFY]:
        assert detect(text)
    claimed = []
    for path in OTHERS:
        with open(path, newline="", errors="replace") as handle:
            if detect(handle.read()):
                claimed.append(os.path.basename(path))
    assert claimed == [] and len(OTHERS) > 40
    assert not detect(None) and not detect("the rocblas-Gflops column, and us\n")
