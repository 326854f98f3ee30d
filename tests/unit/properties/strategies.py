"""What the parser property tests share (hypothesis): settings, capture reading, strategies and checks.

- ``bounded(max_examples)``: the settings every property runs under: derandomized (fixed examples), no deadline, no
  example database, at most ``max_examples`` examples.
- ``read_texts(paths, encoding)``: ``{capture name: text}`` of ``{capture name: path}``, line ends kept as read.
- ``line_text(max_size)``: one line of any text (no line break, no lone surrogate).
- ``noise_lines(samples)``: what log collectors and launchers interleave: any line, or one of the parser's own
  ``samples``.
- ``launcher_prefixes(program, base, bracketed)``: makers ``make(line number) -> prefix`` of the prefixes launchers
  and log collectors put before each line (mpirun's ``[a,b]<stdout>:``, srun's ``-l`` task number, pdsh's host,
  ISO and syslog time stamps from ``base``, ``program[4242]:``; with ``bracketed``, mpirun's ``--timestamp-output``).
- ``truncated``, ``with_noise``, ``with_token_mutated``, ``reordered``, ``prefixed``, ``numbered``: a capture
  changed as the properties change it (each draws from ``data`` as the tests did).
- ``assert_one_line_refusal(err)``: a refusal is the project's error (a ``TopotuneError``) with a one-line message.
- ``assert_one_line_warnings(result)``, ``assert_measured_value(m)``: a parse's warnings are one-line strings; a
  measurement's value is a bool for unit ``bool``, else a finite float.
"""

import datetime
import math
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")


def bounded(max_examples=50):
    return settings(derandomize=True, max_examples=max_examples, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def read_texts(paths, encoding=None):
    texts = {}
    for name in sorted(paths):
        with open(paths[name], encoding=encoding, newline="") as handle:
            texts[name] = handle.read()
    return texts


def line_text(max_size):
    return st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=max_size)


def noise_lines(samples):
    return st.one_of(line_text(60), st.sampled_from(samples))


hostnames = st.from_regex(r"[a-z]{1,8}[0-9]{0,3}(-[a-z0-9]{1,4})?", fullmatch=True)


def launcher_prefixes(program, base=datetime.datetime(2025, 3, 2, 10, 0, 0), bracketed=True):
    makers = [
        st.builds(lambda a, b: lambda n: "[%d,%d]<stdout>:" % (a, b), st.integers(0, 9), st.integers(0, 511)),
        st.builds(lambda task: lambda n: "%2d: " % task, st.integers(0, 99)),
        st.builds(lambda host: lambda n: "%s: " % host, hostnames),
        st.builds(lambda step: lambda n: (base + datetime.timedelta(milliseconds=n * step)).strftime(
            "%Y-%m-%dT%H:%M:%S.%fZ "), st.integers(1, 90000)),
        st.builds(lambda step, host: lambda n: (base + datetime.timedelta(seconds=n * step)).strftime(
            "%b %d %H:%M:%S ") + host + " " + program + "[4242]: ", st.integers(0, 4000), hostnames),
    ]
    if bracketed:
        makers.append(st.builds(lambda step: lambda n: (base + datetime.timedelta(seconds=n * step)).strftime(
            "[%Y-%m-%d %H:%M:%S] [1,0]<stdout>:"), st.integers(0, 4000)))
    return st.one_of(*makers)


def truncated(text, data):
    """(head, tail) of ``text`` cut anywhere."""
    cut = data.draw(st.integers(0, len(text)))
    return text[:cut], text[cut:]


def with_noise(text, data, noise):
    """``text`` with one to four ``noise`` lines inserted anywhere."""
    lines = text.split("\n")
    for _count in range(data.draw(st.integers(1, 4))):
        lines.insert(data.draw(st.integers(0, len(lines))), data.draw(noise))
    return "\n".join(lines)


def with_token_mutated(text, data, odd, sep=None):
    """``text`` with one token (split on ``sep``) of one line replaced by one of ``odd`` or any short text."""
    lines = text.split("\n")
    index = data.draw(st.integers(0, len(lines) - 1))
    tokens = lines[index].split(sep)
    if tokens:
        position = data.draw(st.integers(0, len(tokens) - 1))
        tokens[position] = data.draw(st.one_of(st.sampled_from(odd), st.text(max_size=8)))
        lines[index] = " ".join(tokens)
    return "\n".join(lines)


def reordered(text, data):
    """(the lines of ``text`` permuted, the lines rotated: a log read from the middle)."""
    lines = text.split("\n")
    permuted = "\n".join(data.draw(st.permutations(lines)))
    start = data.draw(st.integers(0, len(lines)))
    return permuted, "\n".join(lines[start:] + lines[:start])


def prefixed(text, prefix):
    """``text`` with ``prefix`` before every line."""
    return "\n".join(prefix + line for line in text.split("\n"))


def numbered(text, make):
    """``text`` with ``make(line number)`` before every line."""
    return "\n".join(make(number) + line for number, line in enumerate(text.split("\n")))


def assert_one_line_refusal(err):
    assert isinstance(err, TopotuneError) and "\n" not in str(err) and str(err)


def assert_one_line_warnings(result):
    assert all(isinstance(w, str) and "\n" not in w for w in result["warnings"])


def assert_measured_value(m):
    if m["unit"] == "bool":
        assert isinstance(m["value"], bool)
    else:
        assert isinstance(m["value"], float) and math.isfinite(m["value"])
