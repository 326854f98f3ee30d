"""Property-based tests of the rccl-tests / nccl-tests parser on the real captures (hypothesis).

Truncated, noisy, prefixed, reordered or mutated captures may parse or be refused, but the only exception is
the project's own (``RcclParseError``, a ``TopotuneError``) with a one-line message; realistic launcher and
log prefixes parse to the same rows as the plain capture. Runs are derandomized (fixed examples) and bounded.
"""

import glob
import os
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import RcclParseError, compare_busbw, parse_perf
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import strategies as shared  # noqa: E402

TEXTS = shared.read_texts({os.path.basename(p): p for folder in ("smi", "acceptance")
                           for p in glob.glob(os.path.join(shared.FIXTURES, folder, "*_perf*.txt"))})
CAPTURES = sorted(TEXTS)
PARSED = {}
for _name in CAPTURES:
    try:
        PARSED[_name] = parse_perf(TEXTS[_name], _name)
    except RcclParseError:
        pass
EXPECTATIONS = {"generations": [{"name": "X", "criteria": [
    {"busbw_gbs": 10, "message_bytes": size, "column": column, "ranks": ranks, "nodes": 1,
     "collective": "all_reduce_perf"}
    for size in (1048576, 134217728, 8589934592) for column in ("in_place", "out_of_place") for ranks in (None, 2)]}]}

AMD = load_knowledge("rccl_expectations")

SETTINGS = shared.bounded(max_examples=1000)

captures = st.sampled_from(CAPTURES)
parsed_captures = st.sampled_from(sorted(PARSED))
# noise: what log collectors and launchers interleave, and what the parser's own patterns look for
noise = shared.noise_lines([
    "#", "# Avg bus bandwidth : ", "# Avg bus bandwidth : nan", "# Out of bounds values : 1 FAILED",
    "#  size count type redop root time algbw busbw #wrong", "in-place", "out-of-place in-place",
    "0 0 float sum -1 1 1 1 0 1 1 1 0", "8 2 float sum -1 1.0 0.00 0.00 N/A",
    "# nThread 1 nGpus 1 minBytes 0 maxBytes 0 step: 0(factor)", "# Testing 2 cycle.",
    "host:1:2 [0] NCCL INFO Bootstrap", "gpu-1: Test CUDA failure common.cu:1 'x'",
    "#   Rank  0 Pid 1 on h device 0 [0x0c] X", "\x1b[31m# Collective test starting: x\x1b[0m",
    "1e308 1e308 float sum -1 inf nan -0 1e400 1 1 1 1", "\t\x00\x0b"])


def _check(text, name="capture"):
    """Parse; a refusal is the project's error in one line. Returns the result or None."""
    try:
        result = parse_perf(text, name)
    except RcclParseError as err:
        shared.assert_one_line_refusal(err)
        return None
    assert isinstance(result["rows"], list) and result["rows"]
    shared.assert_one_line_warnings(result)
    # the tools' rule: within one cycle of a series (type, op, root) the printed sizes never decrease
    for rows in [result["rows"]] + result["extra_cycles"]:
        last = {}
        for row in rows:
            key = (row["type"], row["redop"], row["root"])
            assert row["size"] >= last.get(key, 0), (key, row["size"], last)
            last[key] = row["size"]
    for expectations in (EXPECTATIONS, AMD):
        for generation in ("X", None, "unknown", "MI210", "MI355X", "MI300X"):
            comparison = compare_busbw(result, expectations, generation)
            assert comparison["status"] in ("ok", "warn", "below", "failed", "unknown") and comparison["reason"]
            assert "\n" not in comparison["reason"]
            if comparison["status"] in ("ok", "warn"):
                assert comparison["measured_busbw"] is not None and comparison["measured_busbw"] >= (
                    comparison["expected_busbw"])
    return result


@SETTINGS
@given(name=captures, data=st.data())
def test_truncation_anywhere(name, data):
    for part in shared.truncated(TEXTS[name], data):
        _check(part)


@SETTINGS
@given(name=captures, data=st.data())
def test_line_noise(name, data):
    _check(shared.with_noise(TEXTS[name], data, noise))


@SETTINGS
@given(name=captures, data=st.data())
def test_token_mutation(name, data):
    odd = ["N/A", "-1", "1e+06", "nan", "inf", "*", "0*", "", "#wrong", "time", "in-place", "1.5", "-0"]
    _check(shared.with_token_mutated(TEXTS[name], data, odd))


@SETTINGS
@given(name=captures, data=st.data())
def test_reordering(name, data):
    for text in shared.reordered(TEXTS[name], data):
        _check(text)


@SETTINGS
@given(name=captures, prefix=shared.line_text(12))
def test_any_prefix(name, prefix):
    _check(shared.prefixed(TEXTS[name], prefix))


prefixes = shared.launcher_prefixes("rccl")


@SETTINGS
@given(name=parsed_captures, make=prefixes)
def test_launcher_and_log_prefixes_parse_to_the_same_rows(name, make):
    result = _check(shared.numbered(TEXTS[name], make), name)
    plain = PARSED[name]
    assert result is not None and result["prefixes"]
    keys = ("rows", "extra_cycles", "avg_busbw", "groups", "n_ranks", "hosts", "params", "out_of_bounds", "complete",
            "failed", "wrong_rows", "collective")
    assert {k: result[k] for k in keys} == {k: plain[k] for k in keys}


def _row_block(text):
    """(lines, index of the first and of the last result row) of a capture whose rows are plain lines."""
    lines = text.split("\n")
    rows = [i for i, line in enumerate(lines) if line.split()[:1] and line.split()[0].isdigit()]
    return lines, rows[0], rows[-1]


# captures whose table is one block of plain row lines (no launcher prefix, no cycle already)
BLOCKS = sorted(name for name in PARSED if "Testing" not in TEXTS[name] and not PARSED[name]["prefixes"])


@SETTINGS
@given(name=st.sampled_from(BLOCKS), times=st.integers(1, 3), marker=st.booleans())
def test_cycles_of_a_run_parse_to_the_same_rows(name, times, marker):
    # -N / -s cycles print the sweep again (rccl-tests: '# Testing N cycle.' before each); sizes repeated inside
    # the sweep (alltoall's size-0 rows) must not start a cycle, a restart of the sweep must
    lines, first, last = _row_block(TEXTS[name])
    block = [line for line in lines[first:last + 1] if line.strip()]
    table = []
    for cycle in range(times):
        table += (["# Testing %d cycle." % (cycle + 1)] if marker else []) + block
    result = _check("\n".join(lines[:first] + table + lines[last + 1:]), name)
    assert result is not None
    assert result["n_cycles"] == times and len(result["rows"]) == len(block)
    assert result["rows"] == PARSED[name]["rows"] and result["extra_cycles"] == [result["rows"]] * (times - 1)


@pytest.mark.parametrize("name", sorted(PARSED))
def test_the_captures_parse(name):
    # the properties above start from these: every parseable capture parses unchanged
    assert _check(TEXTS[name], name) is not None
