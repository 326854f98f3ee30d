"""Property-based tests of the TransferBench parser on the real captures (hypothesis).

Truncated, noisy, mutated or prefixed captures may parse or be refused, but the only exception is the project's
own (``AcceptanceParseError``, a ``TopotuneError``) with a one-line message; realistic launcher and log prefixes,
TABs and CRLF line ends parse to the same measurements as the plain capture. Runs are derandomized (fixed examples)
and bounded (at most 50 examples a property).
"""

import datetime
import glob
import math
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.transferbench import detect, parse
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PATHS = {os.path.basename(p): p for p in glob.glob(os.path.join(REPO, "tests", "fixtures", "acceptance",
                                                                "transferbench_*.txt"))}
CAPTURES = sorted(PATHS)
TEXTS = {}
for _name in CAPTURES:
    with open(PATHS[_name], encoding="utf-8", newline="") as _handle:
        TEXTS[_name] = _handle.read()
PARSED = {name: parse(TEXTS[name], name) for name in CAPTURES}

SETTINGS = settings(derandomize=True, max_examples=50, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

captures = st.sampled_from(CAPTURES)
# noise: what log collectors and launchers interleave, and lines the parser's own patterns look for
noise_lines = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=60),
    st.sampled_from([
        "...", "<SNIP>", "\u2026", "", "\t", "TransferBench v1.62.00", "[ERROR] HIP Error: invalid resource handle",
        "[WARN] Large BAR is not enabled for GPU 0 in BIOS", "Summary: [1 bytes per Transfer]", "Test 7:",
        "SRC\\DST GPU 00 STotal Actual", "GPU 00 -> 1.0 2.0", "GPU 00  N/A  nan", "RTotal 1 2 3",
        "Averages (During UniDir): 1 2 3 4", "CPU->CPU CPU->GPU", "Bytes Per Direction 4096",
        "Average   bandwidth (GPU Timed):   inf GB/s", "Aggregate bandwidth (CPU Timed): 1e400 GB/s",
        " Transfer 00  | 1.0 GB/s | 1.0 ms | 4 bytes | G0 -> G0:1 -> G1", " Aggregate (CPU) | x GB/s",
        "Testing all-to-all XGMI copies ....PASS", " GPU 03: Measured:  40.12 GB/s      Criteria:  45.00 GB/s",
        " GPU 03: Measured:  1e400 GB/s      Criteria:  45.00 GB/s", "Testing HBM performance [READ] " + "." * 300,
        " Executor: GPU 00 | 1e400 GB/s | 1.0 ms | 4 bytes | 1e999 GB/s (sum)", "[1,0]<stdout>:Test 9:",
        "\u2500\u2500\u253c\u2500\u2500", "## a comment", "\x1b[31mTest 1:\x1b[0m"]))


def _check(text, name="capture"):
    """Parse; a refusal is the project's error in one line. Returns the result or None."""
    try:
        result = parse(text, name)
    except AcceptanceParseError as err:
        message = str(err)
        assert isinstance(err, TopotuneError) and message and "\n" not in message and "\r" not in message
        assert message.startswith(name + " line ")
        return None
    assert result["tool"] == "transferbench" and result["test"] in ("p2p", "a2a", "config", "healthcheck")
    assert result["measurements"] and isinstance(result["complete"], bool)
    for m in result["measurements"]:
        assert set(m) == {"case", "metric", "unit", "value", "scope"}
        if m["unit"] == "bool":
            assert isinstance(m["value"], bool)
        else:
            assert m["unit"] == "GB/s" and isinstance(m["value"], float) and math.isfinite(m["value"])
            assert m["value"] >= 0
    assert all(isinstance(w, str) and "\n" not in w for w in result["warnings"])
    assert detect(text)
    return result


@SETTINGS
@given(name=captures, data=st.data())
def test_truncation_anywhere(name, data):
    text = TEXTS[name]
    cut = data.draw(st.integers(0, len(text)))
    _check(text[:cut], name)
    _check(text[cut:], name)


@SETTINGS
@given(name=captures, data=st.data())
def test_line_noise(name, data):
    lines = TEXTS[name].split("\n")
    for _count in range(data.draw(st.integers(1, 4))):
        lines.insert(data.draw(st.integers(0, len(lines))), data.draw(noise_lines))
    _check("\n".join(lines), name)


@SETTINGS
@given(name=captures, data=st.data())
def test_token_mutation(name, data):
    lines = TEXTS[name].split("\n")
    index = data.draw(st.integers(0, len(lines) - 1))
    tokens = lines[index].split()
    if tokens:
        position = data.draw(st.integers(0, len(tokens) - 1))
        odd = ["N/A", "-1", "1e+06", "nan", "inf", "|", "->", "<->", "", "GB/s", "GPU", "00", "1.5", "-0", "1_0"]
        tokens[position] = data.draw(st.one_of(st.sampled_from(odd), st.text(max_size=8)))
        lines[index] = " ".join(tokens)
    _check("\n".join(lines), name)


@SETTINGS
@given(name=captures, prefix=st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
                                     max_size=12))
def test_any_prefix(name, prefix):
    _check("\n".join(prefix + line for line in TEXTS[name].split("\n")), name)


_BASE = datetime.datetime(2025, 3, 2, 10, 0, 0)
hostnames = st.from_regex(r"[a-z]{1,8}[0-9]{0,3}(-[a-z0-9]{1,4})?", fullmatch=True)
prefixes = st.one_of(
    st.builds(lambda a, b: lambda n: "[%d,%d]<stdout>:" % (a, b), st.integers(0, 9), st.integers(0, 511)),
    st.builds(lambda task: lambda n: "%2d: " % task, st.integers(0, 99)),
    st.builds(lambda host: lambda n: "%s: " % host, hostnames),
    st.builds(lambda step: lambda n: (_BASE + datetime.timedelta(milliseconds=n * step)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ "), st.integers(1, 90000)),
    st.builds(lambda step, host: lambda n: (_BASE + datetime.timedelta(seconds=n * step)).strftime(
        "%b %d %H:%M:%S ") + host + " TransferBench[4242]: ", st.integers(0, 4000), hostnames),
    st.builds(lambda step: lambda n: (_BASE + datetime.timedelta(seconds=n * step)).strftime(
        "[%Y-%m-%d %H:%M:%S] [1,0]<stdout>:"), st.integers(0, 4000)),
)
KEYS = ("test", "version", "complete", "measurements")


@SETTINGS
@given(name=captures, make=prefixes)
def test_launcher_and_log_prefixes_parse_to_the_same_measurements(name, make):
    text = "\n".join(make(number) + line for number, line in enumerate(TEXTS[name].split("\n")))
    result = _check(text, name)
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
