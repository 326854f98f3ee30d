"""Property-based tests of the RVS parser on the real captures (hypothesis).

Truncated, noisy, prefixed or mutated captures may parse or be refused, but the only exception is the project's own
(``AcceptanceParseError``, a ``TopotuneError``) with a one-line message, and what parses is judged by AMD's MI300X
criteria without error; realistic launcher and log prefixes parse to the same measurements as the plain capture.
Runs are derandomized (fixed examples) and bounded (at most 50 examples a property).
"""

import datetime
import glob
import math
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import rvs
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import UNITS, criteria_of, judge
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PATHS = {os.path.basename(p): p for p in glob.glob(os.path.join(REPO, "tests", "fixtures", "acceptance", "rvs_*.txt"))}
CAPTURES = sorted(PATHS)
TEXTS = {}
for _name in CAPTURES:
    with open(PATHS[_name], newline="") as _handle:
        TEXTS[_name] = _handle.read()
CRITERIA = criteria_of(load_knowledge("acceptance"), "MI300X")

SETTINGS = settings(derandomize=True, max_examples=50, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

captures = st.sampled_from(CAPTURES)
noise_lines = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=60),
    st.sampled_from([
        "...", "```bash", "grep bandwidth mem.txt", "[RESULT] [1.1] Action name :", "[RESULT] [1.2] Module name :gst",
        "[RESULT] [1.3] [a] [GPU:: abc] GFLOPS 1", "[RESULT] [1.4] [a] [GPU:: 7] GFLOPS nan Target GFLOPS: 1 met: TRUE",
        "[ERROR ] [1.5] [a] gst 1 failed", "RVS-ERROR [GST] [a] Action failed to run successfully.",
        "[RESULT] [1.6] [a] mem Test 1 : PASS", "[RESULT] [1.7] [a] mem Test 11: elapsedtime = 1 bandwidth = inf GB/s",
        "+=====================================================================+", "| x | GST | PASS |",
        "| AMD Instinct MI300X - 28851 | |", "| 0 - 2 - 0000:05:00.0 | |", "GPU Id Function MBytes/sec Max Min Avg",
        "42583 Copy 1 2 3 4", "[RESULT] [1.8] [p] p2p-bandwidth[ 1/2] [GPU:: 2 - 1 - 0000:05:00.0] [GPU:: 3 - 2 - "
        "0000:06:00.0] bidirectional: maybe 1e999 GBps duration: x secs", "[RESULT] [1.9] [p] pcie-bandwidth [ 1/2] "
        "[CPU:: 0] h2d::true d2h::false (pending)", "[RESULT] [2.0] [q] peqt", "[RESULT] [2.1] [q] peqt maybe",
        "[RESULT] [2.2] [g] gpup 1 2 3 4 5", "ROCm Validation Suite (version 1)", "\t\x00\x0b", "\x1b[31mFAIL\x1b[0m"]))


def _check(text, name="capture"):
    """parse_all and parse; a refusal is the project's error in one line. Returns parse_all's results or None."""
    try:
        results = rvs.parse_all(text, name)
    except AcceptanceParseError as err:
        assert isinstance(err, TopotuneError) and "\n" not in str(err) and str(err)
        with pytest.raises(AcceptanceParseError):
            rvs.parse(text, name)
        return None
    assert results and [r["test"] for r in results] == results[0]["modules"]
    for result in results:
        assert result["tool"] == "rvs" and isinstance(result["complete"], bool)
        assert all(isinstance(w, str) and "\n" not in w for w in result["warnings"])
        for m in result["measurements"]:
            assert m["unit"] in UNITS and "action" in m["scope"] or m["metric"] == "gpus"
            if m["unit"] == "bool":
                assert isinstance(m["value"], bool)
            else:
                assert isinstance(m["value"], float) and math.isfinite(m["value"])
    for criterion in CRITERIA:
        verdict = judge(criterion, results)
        assert verdict["status"] in ("pass", "fail", "unknown") and "\n" not in verdict["observed"]
    first = rvs.parse(text, name)
    assert first["test"] == results[0]["test"] and len(first["others"]) == len(results) - 1
    return results


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
    odd = ["nan", "inf", "-1", "TRUE", "FALSE", "[GPU::", "]", "GBps", "(not measured)", "1e308", "", "met:", ":"]
    tokens[position] = data.draw(st.one_of(st.sampled_from(odd), st.text(max_size=8)))
    lines[index] = " ".join(tokens)
    _check("\n".join(lines))


@SETTINGS
@given(name=captures, prefix=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
                                     max_size=12))
def test_any_prefix(name, prefix):
    _check("\n".join(prefix + line for line in TEXTS[name].split("\n")))


_BASE = datetime.datetime(2025, 3, 2, 10, 0, 0)
hostnames = st.from_regex(r"[a-z]{1,8}[0-9]{0,3}(-[a-z0-9]{1,4})?", fullmatch=True)
prefixes = st.one_of(
    st.builds(lambda a, b: lambda n: "[%d,%d]<stdout>:" % (a, b), st.integers(0, 9), st.integers(0, 511)),
    st.builds(lambda task: lambda n: "%2d: " % task, st.integers(0, 99)),
    st.builds(lambda host: lambda n: "%s: " % host, hostnames),
    st.builds(lambda step: lambda n: (_BASE + datetime.timedelta(milliseconds=n * step)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ "), st.integers(1, 90000)),
    st.builds(lambda step, host: lambda n: (_BASE + datetime.timedelta(seconds=n * step)).strftime(
        "%b %d %H:%M:%S ") + host + " rvs[4242]: ", st.integers(0, 4000), hostnames),
)
_KEYS = ("test", "measurements", "complete", "actions", "gpus", "gpu_info", "filtered", "commands", "modules")


@SETTINGS
@given(name=captures, make=prefixes)
def test_launcher_and_log_prefixes_parse_to_the_same_measurements(name, make):
    text = "\n".join(make(number) + line for number, line in enumerate(TEXTS[name].split("\n")))
    results = _check(text, name)
    plain = rvs.parse_all(TEXTS[name], name)
    assert results is not None and results[0]["prefixes"]
    assert [{k: r[k] for k in _KEYS} for r in results] == [{k: r[k] for k in _KEYS} for r in plain]


@pytest.mark.parametrize("name", CAPTURES)
def test_the_captures_parse(name):
    assert _check(TEXTS[name], name) is not None
