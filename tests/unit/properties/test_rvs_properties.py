"""Property-based tests of the RVS parser on the real captures (hypothesis).

Truncated, noisy, prefixed or mutated captures may parse or be refused, but the only exception is the project's own
(``AcceptanceParseError``, a ``TopotuneError``) with a one-line message, and what parses is judged by AMD's MI300X
criteria without error; realistic launcher and log prefixes parse to the same measurements as the plain capture.
Runs are derandomized (fixed examples) and bounded (at most 50 examples a property).
"""

import glob
import os
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import rvs
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import UNITS, criteria_of, judge
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import strategies as shared  # noqa: E402

TEXTS = shared.read_texts({os.path.basename(p): p
                           for p in glob.glob(os.path.join(shared.FIXTURES, "acceptance", "rvs_*.txt"))})
CAPTURES = sorted(TEXTS)
CRITERIA = criteria_of(load_knowledge("acceptance"), "MI300X")

SETTINGS = shared.bounded(max_examples=50)

captures = st.sampled_from(CAPTURES)
noise = shared.noise_lines([
    "...", "```bash", "grep bandwidth mem.txt", "[RESULT] [1.1] Action name :", "[RESULT] [1.2] Module name :gst",
    "[RESULT] [1.3] [a] [GPU:: abc] GFLOPS 1", "[RESULT] [1.4] [a] [GPU:: 7] GFLOPS nan Target GFLOPS: 1 met: TRUE",
    "[ERROR ] [1.5] [a] gst 1 failed", "RVS-ERROR [GST] [a] Action failed to run successfully.",
    "[RESULT] [1.6] [a] mem Test 1 : PASS", "[RESULT] [1.7] [a] mem Test 11: elapsedtime = 1 bandwidth = inf GB/s",
    "+=====================================================================+", "| x | GST | PASS |",
    "| AMD Instinct MI300X - 28851 | |", "| 0 - 2 - 0000:05:00.0 | |", "GPU Id Function MBytes/sec Max Min Avg",
    "42583 Copy 1 2 3 4", "[RESULT] [1.8] [p] p2p-bandwidth[ 1/2] [GPU:: 2 - 1 - 0000:05:00.0] [GPU:: 3 - 2 - "
    "0000:06:00.0] bidirectional: maybe 1e999 GBps duration: x secs", "[RESULT] [1.9] [p] pcie-bandwidth [ 1/2] "
    "[CPU:: 0] h2d::true d2h::false (pending)", "[RESULT] [2.0] [q] peqt", "[RESULT] [2.1] [q] peqt maybe",
    "[RESULT] [2.2] [g] gpup 1 2 3 4 5", "ROCm Validation Suite (version 1)", "\t\x00\x0b", "\x1b[31mFAIL\x1b[0m"])


def _check(text, name="capture"):
    """parse_all and parse; a refusal is the project's error in one line. Returns parse_all's results or None."""
    try:
        results = rvs.parse_all(text, name)
    except AcceptanceParseError as err:
        shared.assert_one_line_refusal(err)
        with pytest.raises(AcceptanceParseError):
            rvs.parse(text, name)
        return None
    assert results and [r["test"] for r in results] == results[0]["modules"]
    for result in results:
        assert result["tool"] == "rvs" and isinstance(result["complete"], bool)
        shared.assert_one_line_warnings(result)
        for m in result["measurements"]:
            assert m["unit"] in UNITS and "action" in m["scope"] or m["metric"] == "gpus"
            shared.assert_measured_value(m)
    for criterion in CRITERIA:
        verdict = judge(criterion, results)
        assert verdict["status"] in ("pass", "fail", "unknown") and "\n" not in verdict["observed"]
    first = rvs.parse(text, name)
    assert first["test"] == results[0]["test"] and len(first["others"]) == len(results) - 1
    return results


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
    odd = ["nan", "inf", "-1", "TRUE", "FALSE", "[GPU::", "]", "GBps", "(not measured)", "1e308", "", "met:", ":"]
    _check(shared.with_token_mutated(TEXTS[name], data, odd, sep=" "))


@SETTINGS
@given(name=captures, prefix=shared.line_text(12))
def test_any_prefix(name, prefix):
    _check(shared.prefixed(TEXTS[name], prefix))


prefixes = shared.launcher_prefixes("rvs", bracketed=False)
_KEYS = ("test", "measurements", "complete", "actions", "gpus", "gpu_info", "filtered", "commands", "modules")


@SETTINGS
@given(name=captures, make=prefixes)
def test_launcher_and_log_prefixes_parse_to_the_same_measurements(name, make):
    results = _check(shared.numbered(TEXTS[name], make), name)
    plain = rvs.parse_all(TEXTS[name], name)
    assert results is not None and results[0]["prefixes"]
    assert [{k: r[k] for k in _KEYS} for r in results] == [{k: r[k] for k in _KEYS} for r in plain]


@pytest.mark.parametrize("name", CAPTURES)
def test_the_captures_parse(name):
    assert _check(TEXTS[name], name) is not None
