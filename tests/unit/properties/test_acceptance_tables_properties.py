"""Property-based tests of the rocblas-bench / hipblaslt-bench, perftest and amd-smi xgmi/metric parsers on the real
captures (hypothesis).

Truncated, noisy, mutated or prefixed captures may parse or be refused, but the only exception is the project's own
(``AcceptanceParseError``, a ``TopotuneError``) with a one-line message, and a parse has the common result shape;
realistic launcher and log prefixes parse to the same measurements as the plain capture. Derandomized (fixed
examples), at most 50 examples per property.
"""

import os
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import amdsmi_tables, blas_bench, perftest
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import UNITS

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import strategies as shared  # noqa: E402

FP32_COMMAND = "rocblas-bench -f gemm -r s -m 4000 -n 4000 -k 4000 --lda 4000 --ldb 4000 --ldc 4000 --transposeA N " \
               "--transposeB T"
HALF_COMMAND = "rocblas-bench -f gemm_strided_batched_ex -m 1024 -n 2048 -k 512 --a_type h --b_type h --c_type s " \
               "--d_type s --compute_type s"
# capture -> the parse it gets (the blas captures with the command that ran them: their cases are known)
PARSERS = {
    "rocblas-bench_gemm-fp32__mi300x__rocm-system-acceptance-rst.txt":
        lambda text, name: blas_bench.parse(text, name, command=FP32_COMMAND),
    "rocblas-bench_gemm-strided-batched-bf16__mi300x__rocm-system-acceptance-rst.txt":
        lambda text, name: blas_bench.parse(text, name, command=HALF_COMMAND),
    "perftest_ib_write_bw-bidir-all-sizes-report-gbits-use-rocm__roce-loopback__rocm-cluster-networking.txt":
        perftest.parse,
    "amdsmi_xgmi__mi300x-8gpu__amdsmi-changelog.txt": amdsmi_tables.parse,
    "amdsmi_xgmi__rx7900xtx-2gpu-no-xgmi__rocm-issue-6074.txt": amdsmi_tables.parse,
    "amdsmi_metric-pcie__mi300-2gpu-excerpt__amdsmi-changelog.txt": amdsmi_tables.parse,
}
CAPTURES = sorted(PARSERS)
TEXTS = shared.read_texts({name: os.path.join(shared.FIXTURES, "acceptance", name) for name in CAPTURES})
PLAIN = {name: PARSERS[name](TEXTS[name], name) for name in CAPTURES}

SETTINGS = shared.bounded(max_examples=50)

captures = st.sampled_from(CAPTURES)
# what log collectors and launchers interleave, and what the parsers' own patterns look for
noise = shared.noise_lines([
    "...", "<SNIP>", "Winner:", "    --Solution index: 3", "rocBLAS error: out of memory",
    "transA,transB,M,N,K,alpha,lda,beta,ldb,ldc,rocblas-Gflops,us", "N,T,1,1,1,1,1,0,1,1, nan, inf",
    "[0]:m,n,k,hipblaslt-Gflops,us", "    1,1,1,-5,0", "$ rocblas-bench -f gemm -r d",
    "-" * 87, "                    RDMA_Read BW Test", " #bytes     #iterations    BW peak[Gb/sec]",
    " 65536      1000     1e400     nan    0.1", " local address: LID 0x1 QPN 0x2 PSN 0x3", " GID: 1:2:3",
    "Completion with error at client", "391.5", "$ ib_write_bw --output=bandwidth -a", " Local results: ",
    "LINK METRIC TABLE:", "XGMI LINK STATUS:", "GPU LINK PORT STATUS:", " Read   N/A  1 KB",
    "GPU9   0000:ff:00.0  65535 Gb/s4294967295 Gb/sN/A", "GPU: 3", "    PCIE:", "        WIDTH: 18446744073709551615",
    "\x1b[31mGPU0\t0000:03:00.0   SELF\x1b[0m", "\t\x00\x0b"])
odd_tokens = ["N/A", "-1", "1e+06", "nan", "inf", "", "X", "U/D", "KB", "Gb/s", "#bytes", "0x10", ",", ":", "1.5"]


def _check(name, text):
    """Parse; a refusal is the project's error in one line. Returns the result or None."""
    try:
        result = PARSERS[name](text, name)
    except AcceptanceParseError as err:
        shared.assert_one_line_refusal(err)
        return None
    assert result["tool"] in ("rocblas-bench", "hipblaslt-bench", "perftest", "amd-smi")
    assert isinstance(result["complete"], bool) and result["source"] == name
    shared.assert_one_line_warnings(result)
    for m in result["measurements"]:
        assert set(m) == {"case", "metric", "unit", "value", "scope"} and m["unit"] in UNITS
        shared.assert_measured_value(m)
        assert m["unit"] == "bool" or m["value"] >= 0
        assert m["case"] is None or isinstance(m["case"], str)
    return result


@SETTINGS
@given(name=captures, data=st.data())
def test_truncation_anywhere(name, data):
    for part in shared.truncated(TEXTS[name], data):
        _check(name, part)


@SETTINGS
@given(name=captures, data=st.data())
def test_line_noise(name, data):
    _check(name, shared.with_noise(TEXTS[name], data, noise))


@SETTINGS
@given(name=captures, data=st.data())
def test_token_mutation(name, data):
    _check(name, shared.with_token_mutated(TEXTS[name], data, odd_tokens, sep=" "))


@SETTINGS
@given(name=captures, data=st.data())
def test_reordering(name, data):
    for text in shared.reordered(TEXTS[name], data):
        _check(name, text)


@SETTINGS
@given(name=captures, prefix=shared.line_text(12))
def test_any_prefix(name, prefix):
    _check(name, shared.prefixed(TEXTS[name], prefix))


prefixes = shared.launcher_prefixes("bench")


@SETTINGS
@given(name=captures, make=prefixes)
def test_launcher_and_log_prefixes_parse_to_the_same_measurements(name, make):
    result = _check(name, shared.numbered(TEXTS[name], make))
    plain = PLAIN[name]
    assert result is not None
    keys = ("tool", "test", "complete", "measurements")
    assert {k: result[k] for k in keys} == {k: plain[k] for k in keys}


@pytest.mark.parametrize("name", CAPTURES)
def test_the_captures_parse(name):
    # the properties above start from these: every capture parses unchanged, with measurements
    assert _check(name, TEXTS[name])["measurements"]
