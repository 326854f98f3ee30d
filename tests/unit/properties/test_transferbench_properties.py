"""Property-based tests of the TransferBench parser on the real captures (hypothesis).

Truncated, noisy, mutated or prefixed captures may parse or be refused, but the only exception is the project's
own (``AcceptanceParseError``, a ``TopotuneError``) with a one-line message; realistic launcher and log prefixes,
TABs and CRLF line ends parse to the same measurements as the plain capture. Runs are derandomized (fixed examples)
and bounded (at most 50 examples a property).
"""

import glob
import os
import sys

from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.transferbench import detect, parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import strategies as shared  # noqa: E402

TEXTS = shared.read_texts({os.path.basename(p): p for p in glob.glob(os.path.join(shared.FIXTURES, "acceptance",
                                                                                  "transferbench_*.txt"))},
                          encoding="utf-8")
CAPTURES = sorted(TEXTS)
PARSED = {name: parse(TEXTS[name], name) for name in CAPTURES}

SETTINGS = shared.bounded(max_examples=50)

captures = st.sampled_from(CAPTURES)
# noise: what log collectors and launchers interleave, and lines the parser's own patterns look for
noise = shared.noise_lines([
    "...", "<SNIP>", "\u2026", "", "\t", "TransferBench v1.62.00", "[ERROR] HIP Error: invalid resource handle",
    "[WARN] Large BAR is not enabled for GPU 0 in BIOS", "Summary: [1 bytes per Transfer]", "Test 7:",
    "SRC\\DST GPU 00 STotal Actual", "GPU 00 -> 1.0 2.0", "GPU 00  N/A  nan", "RTotal 1 2 3",
    "Averages (During UniDir): 1 2 3 4", "CPU->CPU CPU->GPU", "Bytes Per Direction 4096",
    "Average   bandwidth (GPU Timed):   inf GB/s", "Aggregate bandwidth (CPU Timed): 1e400 GB/s",
    " Transfer 00  | 1.0 GB/s | 1.0 ms | 4 bytes | G0 -> G0:1 -> G1", " Aggregate (CPU) | x GB/s",
    "Testing all-to-all XGMI copies ....PASS", " GPU 03: Measured:  40.12 GB/s      Criteria:  45.00 GB/s",
    " GPU 03: Measured:  1e400 GB/s      Criteria:  45.00 GB/s", "Testing HBM performance [READ] " + "." * 300,
    " Executor: GPU 00 | 1e400 GB/s | 1.0 ms | 4 bytes | 1e999 GB/s (sum)", "[1,0]<stdout>:Test 9:",
    "\u2500\u2500\u253c\u2500\u2500", "## a comment", "\x1b[31mTest 1:\x1b[0m"])


def _check(text, name="capture"):
    """Parse; a refusal is the project's error in one line. Returns the result or None."""
    try:
        result = parse(text, name)
    except AcceptanceParseError as err:
        shared.assert_one_line_refusal(err)
        assert "\r" not in str(err) and str(err).startswith(name + " line ")
        return None
    assert result["tool"] == "transferbench" and result["test"] in ("p2p", "a2a", "config", "healthcheck")
    assert result["measurements"] and isinstance(result["complete"], bool)
    for m in result["measurements"]:
        assert set(m) == {"case", "metric", "unit", "value", "scope"}
        shared.assert_measured_value(m)
        if m["unit"] != "bool":
            assert m["unit"] == "GB/s" and m["value"] >= 0
    shared.assert_one_line_warnings(result)
    assert detect(text)
    return result


@SETTINGS
@given(name=captures, data=st.data())
def test_truncation_anywhere(name, data):
    for part in shared.truncated(TEXTS[name], data):
        _check(part, name)


@SETTINGS
@given(name=captures, data=st.data())
def test_line_noise(name, data):
    _check(shared.with_noise(TEXTS[name], data, noise), name)


@SETTINGS
@given(name=captures, data=st.data())
def test_token_mutation(name, data):
    odd = ["N/A", "-1", "1e+06", "nan", "inf", "|", "->", "<->", "", "GB/s", "GPU", "00", "1.5", "-0", "1_0"]
    _check(shared.with_token_mutated(TEXTS[name], data, odd), name)


@SETTINGS
@given(name=captures, prefix=shared.line_text(12))
def test_any_prefix(name, prefix):
    _check(shared.prefixed(TEXTS[name], prefix), name)


prefixes = shared.launcher_prefixes("TransferBench")
KEYS = ("test", "version", "complete", "measurements")


@SETTINGS
@given(name=captures, make=prefixes)
def test_launcher_and_log_prefixes_parse_to_the_same_measurements(name, make):
    result = _check(shared.numbered(TEXTS[name], make), name)
    assert result is not None and result["prefixes"]
    assert {k: result[k] for k in KEYS} == {k: PARSED[name][k] for k in KEYS}


@SETTINGS
@given(name=captures, tabs=st.booleans(), crlf=st.booleans(), trailing=st.text(" \t", max_size=4))
def test_whitespace_variants_parse_to_the_same_measurements(name, tabs, crlf, trailing):
    lines = TEXTS[name].split("\n")
    if tabs:
        lines = ["\t".join(line.split("  ")) for line in lines]
    text = ("\r\n" if crlf else "\n").join(line + trailing for line in lines)
    result = _check(text, name)
    assert result is not None and {k: result[k] for k in KEYS} == {k: PARSED[name][k] for k in KEYS}
