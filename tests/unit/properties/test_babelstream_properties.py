"""Property-based tests of the BabelStream parser on the real capture (hypothesis).

Truncated, noisy, prefixed or mutated captures, and multi-rank logs built from the capture, may parse or be refused,
but the only exception is the project's own (``AcceptanceParseError``, a ``TopotuneError``) with a one-line message,
and what parses is judged by the cards' BabelStream criteria without error; realistic launcher and log prefixes
parse to the same measurements as the plain capture. Runs are derandomized and bounded (at most 50 examples a
property).
"""

import datetime
import glob
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import babelstream
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import UNITS, criteria_of, judge
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PATHS = {os.path.basename(p): p
         for p in glob.glob(os.path.join(REPO, "tests", "fixtures", "acceptance", "babelstream_*.txt"))}
CAPTURES = sorted(PATHS)
TEXTS = {}
for _name in CAPTURES:
    with open(PATHS[_name], newline="") as _handle:
        TEXTS[_name] = _handle.read()
VIEW = load_knowledge("acceptance")
CRITERIA = [c for g in ("MI300X", "MI355X", "MI210") for c in criteria_of(VIEW, g) if c["tool"] == "babelstream"]

SETTINGS = settings(derandomize=True, max_examples=50, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

captures = st.sampled_from(CAPTURES)
noise_lines = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=60),
    st.sampled_from([
        "...", "BabelStream", "Version: 6.0", "Function    MBytes/sec  Min (sec)   Max         Average",
        "Function    parsecs/s  Min (sec)   Max         Average", "Copy        nan         1 1 1", "Dot 1e999 1 1 1",
        "Triad 1 2 3", "Nstream     1.0         1.0         1.0         1.0", "Running kernels 0 times",
        "Array size: 1e3 MB (=x GB)", "Init: 1 s (=2 furlongs)", "Read: x s (=1 MBytes/sec)",
        "function,num_times,n_elements,sizeof,max_mbytes_per_sec,min_runtime,max_runtime,avg_runtime", "Copy,1,2",
        "Runtime (seconds): nan", "Bandwidth (GB/s):  1", "Bandwidth (PB/s):  1", "Validation failed on a[]. x",
        "[1,3]<stdout>:Copy 1 1 1 1", " 7: BabelStream", "--------------------------------", "\t\x00\x0b"]))


def _check(text, name="capture"):
    """Parse; a refusal is the project's error in one line. Returns the result or None."""
    try:
        result = babelstream.parse(text, name)
    except AcceptanceParseError as err:
        assert isinstance(err, TopotuneError) and "\n" not in str(err) and str(err)
        return None
    assert result["tool"] == "babelstream" and result["test"] == "stream" and isinstance(result["complete"], bool)
    assert result["measurements"] and all(isinstance(w, str) and "\n" not in w for w in result["warnings"])
    for m in result["measurements"]:
        assert m["unit"] in UNITS
        if m["unit"] == "bool":
            assert isinstance(m["value"], bool)
        else:
            assert isinstance(m["value"], float) and math.isfinite(m["value"])
    for criterion in CRITERIA:
        verdict = judge(criterion, [result])
        assert verdict["status"] in ("pass", "fail", "unknown") and "\n" not in verdict["observed"]
    return result


@SETTINGS
@given(name=captures, data=st.data())
def test_truncation_anywhere(name, data):
    text = TEXTS[name]
    cut = data.draw(st.integers(0, len(text)))
    _check(text[:cut])
    _check(text[cut:])


@SETTINGS
@given(name=captures, data=st.data())
def test_line_noise(name, data):
    lines = TEXTS[name].split("\n")
    for _count in range(data.draw(st.integers(1, 4))):
        lines.insert(data.draw(st.integers(0, len(lines))), data.draw(noise_lines))
    _check("\n".join(lines))


@SETTINGS
@given(name=captures, data=st.data())
def test_token_mutation(name, data):
    lines = TEXTS[name].split("\n")
    index = data.draw(st.integers(0, len(lines) - 1))
    tokens = lines[index].split(" ")
    position = data.draw(st.integers(0, len(tokens) - 1))
    odd = ["nan", "inf", "-1", "1e308", "MiBytes/sec", "GB/s", "Copy", "Function", "(sec)", "", ",", "BabelStream"]
    tokens[position] = data.draw(st.one_of(st.sampled_from(odd), st.text(max_size=8)))
    lines[index] = " ".join(tokens)
    _check("\n".join(lines))


@SETTINGS
@given(name=captures, prefix=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
                                     max_size=12))
def test_any_prefix(name, prefix):
    _check("\n".join(prefix + line for line in TEXTS[name].split("\n")))


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


_BASE = datetime.datetime(2025, 7, 11, 10, 0, 0)
hostnames = st.from_regex(r"[a-z]{1,8}[0-9]{0,3}(-[a-z0-9]{1,4})?", fullmatch=True)
prefixes = st.one_of(
    st.builds(lambda a, b: lambda n: "[%d,%d]<stdout>:" % (a, b), st.integers(0, 9), st.integers(0, 511)),
    st.builds(lambda task: lambda n: "%2d: " % task, st.integers(0, 99)),
    st.builds(lambda host: lambda n: "%s: " % host, hostnames),
    st.builds(lambda step: lambda n: (_BASE + datetime.timedelta(milliseconds=n * step)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ "), st.integers(1, 90000)),
    st.builds(lambda step, host: lambda n: (_BASE + datetime.timedelta(seconds=n * step)).strftime(
        "%b %d %H:%M:%S ") + host + " hip-stream[4242]: ", st.integers(0, 4000), hostnames),
)
_KEYS = ("measurements", "complete", "version", "device_names", "array_size", "num_times", "precision", "format")


@SETTINGS
@given(name=captures, make=prefixes)
def test_launcher_and_log_prefixes_parse_to_the_same_measurements(name, make):
    text = "\n".join(make(number) + line for number, line in enumerate(TEXTS[name].split("\n")))
    result = _check(text, name)
    plain = babelstream.parse(TEXTS[name], name)
    assert result is not None and result["prefixes"]
    assert {k: result[k] for k in _KEYS} == {k: plain[k] for k in _KEYS}


@pytest.mark.parametrize("name", CAPTURES)
def test_the_captures_parse(name):
    assert _check(TEXTS[name], name) is not None
