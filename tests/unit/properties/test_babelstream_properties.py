"""Property-based tests of the BabelStream parser on the real capture (hypothesis).

Truncated, noisy, prefixed or mutated captures, and multi-rank logs built from the capture, may parse or be refused,
but the only exception is the project's own (``AcceptanceParseError``, a ``TopotuneError``) with a one-line message,
and what parses is judged by the cards' BabelStream criteria without error; realistic launcher and log prefixes
parse to the same measurements as the plain capture. Runs are derandomized and bounded (at most 50 examples a
property).
"""

import datetime
import glob
import os
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import babelstream
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import UNITS, criteria_of, judge
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import strategies as shared  # noqa: E402

TEXTS = shared.read_texts({os.path.basename(p): p
                           for p in glob.glob(os.path.join(shared.FIXTURES, "acceptance", "babelstream_*.txt"))})
CAPTURES = sorted(TEXTS)
VIEW = load_knowledge("acceptance")
CRITERIA = [c for g in ("MI300X", "MI355X", "MI210") for c in criteria_of(VIEW, g) if c["tool"] == "babelstream"]

SETTINGS = shared.bounded(max_examples=50)

captures = st.sampled_from(CAPTURES)
noise = shared.noise_lines([
    "...", "BabelStream", "Version: 6.0", "Function    MBytes/sec  Min (sec)   Max         Average",
    "Function    parsecs/s  Min (sec)   Max         Average", "Copy        nan         1 1 1", "Dot 1e999 1 1 1",
    "Triad 1 2 3", "Nstream     1.0         1.0         1.0         1.0", "Running kernels 0 times",
    "Array size: 1e3 MB (=x GB)", "Init: 1 s (=2 furlongs)", "Read: x s (=1 MBytes/sec)",
    "function,num_times,n_elements,sizeof,max_mbytes_per_sec,min_runtime,max_runtime,avg_runtime", "Copy,1,2",
    "Runtime (seconds): nan", "Bandwidth (GB/s):  1", "Bandwidth (PB/s):  1", "Validation failed on a[]. x",
    "[1,3]<stdout>:Copy 1 1 1 1", " 7: BabelStream", "--------------------------------", "\t\x00\x0b"])


def _check(text, name="capture"):
    """Parse; a refusal is the project's error in one line. Returns the result or None."""
    try:
        result = babelstream.parse(text, name)
    except AcceptanceParseError as err:
        shared.assert_one_line_refusal(err)
        return None
    assert result["tool"] == "babelstream" and result["test"] == "stream" and isinstance(result["complete"], bool)
    assert result["measurements"]
    shared.assert_one_line_warnings(result)
    for m in result["measurements"]:
        assert m["unit"] in UNITS
        shared.assert_measured_value(m)
    for criterion in CRITERIA:
        verdict = judge(criterion, [result])
        assert verdict["status"] in ("pass", "fail", "unknown") and "\n" not in verdict["observed"]
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
    odd = ["nan", "inf", "-1", "1e308", "MiBytes/sec", "GB/s", "Copy", "Function", "(sec)", "", ",", "BabelStream"]
    _check(shared.with_token_mutated(TEXTS[name], data, odd, sep=" "))


@SETTINGS
@given(name=captures, prefix=shared.line_text(12))
def test_any_prefix(name, prefix):
    _check(shared.prefixed(TEXTS[name], prefix))


@SETTINGS
@given(name=captures, ranks=st.integers(1, 8), data=st.data())
def test_ranks_interleaved_by_mpirun_parse_rank_by_rank(name, ranks, data):
    streams = [["[1,%d]<stdout>:%s" % (rank, line) for line in TEXTS[name].split("\n")] for rank in range(ranks)]
    lines = []
    while any(streams):
        live = [s for s in streams if s]
        lines.append(live[data.draw(st.integers(0, len(live) - 1))].pop(0))
    result = _check("\n".join(lines))
    plain = babelstream.parse(TEXTS[name])
    assert result is not None and result["complete"] == plain["complete"]
    if ranks == 1:
        assert result["measurements"] == plain["measurements"]
    else:
        assert result["ranks"] == list(range(ranks))
        for rank in range(ranks):
            mine = [dict(m, scope={}) for m in result["measurements"] if m["scope"] == {"rank": rank}]
            assert mine == plain["measurements"]


prefixes = shared.launcher_prefixes("hip-stream", base=datetime.datetime(2025, 7, 11, 10, 0, 0), bracketed=False)
_KEYS = ("measurements", "complete", "version", "device_names", "array_size", "num_times", "precision", "format")


@SETTINGS
@given(name=captures, make=prefixes)
def test_launcher_and_log_prefixes_parse_to_the_same_measurements(name, make):
    result = _check(shared.numbered(TEXTS[name], make), name)
    plain = babelstream.parse(TEXTS[name], name)
    assert result is not None and result["prefixes"]
    assert {k: result[k] for k in _KEYS} == {k: plain[k] for k in _KEYS}


@pytest.mark.parametrize("name", CAPTURES)
def test_the_captures_parse(name):
    assert _check(TEXTS[name], name) is not None
