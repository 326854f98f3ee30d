"""cpulist parse/format, table-driven."""

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core.cpulist import (
    CpulistError,
    format_cpulist,
    normalize,
    parse,
)


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("0-3", [0, 1, 2, 3]),
        ("0-7,64-71", list(range(8)) + list(range(64, 72))),
        ("5", [5]),
        ("", []),
        ("  0-1,4\n", [0, 1, 4]),
        ("3,1,2,1", [1, 2, 3]),
        ("0-7:2", [0, 2, 4, 6]),
        ("0-15:2/8", [0, 1, 8, 9]),
    ],
)
def test_parse(text, cpus):
    assert parse(text) == cpus


@pytest.mark.parametrize(
    ("cpus", "text"),
    [
        ([0, 1, 2, 3], "0-3"),
        ([0, 1, 2, 3, 8], "0-3,8"),
        ([], ""),
        ([7], "7"),
        ([64, 65, 0, 1], "0-1,64-65"),
        (range(0, 64), "0-63"),
    ],
)
def test_format(cpus, text):
    assert format_cpulist(cpus) == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0-", "is not a CPU number"),
        ("a-b", "is not a CPU number"),
        ("7-3", "reversed"),
        ("1,,2", "empty element"),
        ("0-7:0", "zero stride"),
        (None, "expected a string"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(CpulistError, match=message):
        parse(text)


def test_normalize_roundtrip():
    assert normalize("0-47,96-143, 48-95") == "0-143"
