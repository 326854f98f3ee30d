"""Launcher and log prefixes learned from the lines a tool always prints, and removed from every line
(module_utils/acceptance/prefixes.py, the one learner of the six acceptance parsers), and the command-line helpers
of ``common``.

The prefixes are those launchers and log collectors write: Open MPI ``--tag-output``, ``srun --label``, syslog and
ISO timestamps, host names; the anchor lines below are lines the tools print (TransferBench, RVS, perftest,
amd-smi).
"""

import re

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import prefixes
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import clean_lines, options, split_command

ANCHOR = re.compile(r"TransferBench v\d|Summary:|RTotal\b|\[RESULT\s*\]|local address:|#bytes\s")


def _lines(*lines):
    return clean_lines("\n".join(lines))


def test_open_mpi_tags_learned_with_digits_and_streams_varying():
    lines = _lines("[1,0]<stdout>:TransferBench v1.62.00", "[1,0]<stdout>:Summary: [268435456 bytes per Transfer]",
                   "[1,0]<stdout>:GPU 00   46.95", "[1,12]<stderr>:[WARN] Large BAR is not enabled")
    patterns = prefixes.learn(lines, ANCHOR)
    assert patterns == [r"\[\d+,\d+\]<std(?:out|err|diag)>:"]
    assert prefixes.strip("[1,12]<stderr>:[WARN] Large BAR", patterns) == ("[WARN] Large BAR", "[1,12]<stderr>:")
    assert prefixes.strip_all(lines, patterns) == [
        (1, "TransferBench v1.62.00"), (2, "Summary: [268435456 bytes per Transfer]"), (3, "GPU 00   46.95"),
        (4, "[WARN] Large BAR is not enabled")]


def test_srun_labels_padded_and_tables_keep_their_indentation():
    # amd-smi metric under srun --label: the blocks' indentation tells sections from their keys
    lines = _lines(" 3: GPU: 0", " 3:     PCIE:", " 3:         WIDTH: 16", "12: GPU: 1", "12:     PCIE:",
                   "12:         SPEED: 32 GT/s", " 3: GPU: 2", "12: GPU: 3", "12:")
    patterns = prefixes.learn(lines, re.compile(r"GPU:\s*\d+\s*$"))
    assert patterns == [r"\d+:\s{0,1}", r"\s*\d+:\s{0,1}"]
    assert [line for _n, line in prefixes.strip_all(lines, patterns)] == [
        "GPU: 0", "    PCIE:", "        WIDTH: 16", "GPU: 1", "    PCIE:", "        SPEED: 32 GT/s", "GPU: 2", "GPU: 3",
        ""]
    # fewer blanks than the anchor line had: still the prefix
    assert prefixes.strip(" 7:GPU: 7", patterns) == ("GPU: 7", " 7:")


def test_syslog_and_iso_timestamps_and_host_names_with_a_function_anchor():
    syslog = ["Mar  2 10:00:0%d node7 rvs[4242]: [RESULT] [603545.52%d] Action name :gst-1" % (n, n) for n in (1, 2)]
    syslog.append("Mar 12 10:00:03 node7 rvs[4242]:     indented detail")

    def anchor(line):
        found = line.find("[RESULT]")
        return found if found >= 0 else None

    patterns = prefixes.learn(_lines(*syslog), anchor)
    assert patterns == [r"Mar\s*\d+\s+\d+:\d+:\d+\s*node\d+\s*rvs\[\d+\]:\s{0,1}"]
    assert prefixes.strip(syslog[2], patterns)[0] == "    indented detail"
    iso = ["2025-03-02T10:00:%02d.%06dZ host-12: Summary: x" % (n, n * 7919) for n in (1, 59)]
    patterns = prefixes.learn(_lines(*iso), ANCHOR)
    assert prefixes.strip("2025-03-03T00:00:00.000001Z host-1: RTotal 1", patterns) == (
        "RTotal 1", "2025-03-03T00:00:00.000001Z host-1: ")


def test_what_is_learned_digits_and_blanks_never_once_among_several_the_only_anchor_line():
    # digits and blanks alone could be the tool's own first column
    assert prefixes.learn(_lines(" 0  Summary: a", " 0  Summary: b"), ANCHOR) == []
    # seen once among several anchor lines: noise, not a prefix
    assert prefixes.learn(_lines("node1: Summary: a", "RTotal 1", "RTotal 2"), ANCHOR) == []
    # the only anchor line carries it: learned
    assert prefixes.learn(_lines("node1: Summary: a", "GPU 00 1.0"), ANCHOR) == [r"node\d+:\s{0,1}"]
    # seen on two anchor lines of three: learned
    assert prefixes.learn(_lines("node1: Summary: a", "RTotal 1", "node3: RTotal 3"), ANCHOR) == [r"node\d+:\s{0,1}"]
    # longer than 160 characters: no launcher's
    assert prefixes.learn(_lines("x" * 161 + "Summary: a"), ANCHOR) == []
    assert prefixes.learn(_lines("no anchor here"), ANCHOR) == []


def test_the_longest_prefix_is_removed_once():
    patterns = prefixes.learn(_lines("node7: Summary: a", "node7: RTotal 1", "node7: [1,0]<stdout>:Summary: b",
                                     "node7: [1,0]<stdout>:RTotal 2"), ANCHOR)
    assert len(patterns) == 2
    assert prefixes.strip("node7: [1,3]<stdout>:GPU 00", patterns) == ("GPU 00", "node7: [1,3]<stdout>:")
    assert prefixes.strip("node7: GPU 00", patterns) == ("GPU 00", "node7: ")
    # once: the tool's own text may start like the prefix (amd-smi's 'GPU0' after a learned 'G')
    patterns = prefixes.learn(_lines("GTransferBench v1.62", "GSummary: a"), ANCHOR)
    assert prefixes.strip("GGPU0 0000:0c:00.0", patterns) == ("GPU0 0000:0c:00.0", "G")
    # compiled patterns do as well; none strips nothing
    assert prefixes.strip("GSummary: a", [re.compile(p) for p in patterns]) == ("Summary: a", "G")
    assert prefixes.strip("GSummary: a", []) == ("GSummary: a", "")
    assert prefixes.strip_all([(4, "GSummary: a")], []) == [(4, "GSummary: a")]


def test_a_prefix_of_many_numbers_fails_on_a_long_number_without_backtracking():
    # '\d+\s*\d+...' (the blanks optional) tried every way to split a run of digits: exponential in the numbers of
    # the prefix; between two numbers the blanks are '\s+', so a line the prefix does not start fails at once
    prefix = " ".join(str(n) for n in range(1, 30)) + ": "
    patterns = prefixes.learn(_lines(prefix + "Summary: a", prefix + "RTotal 1"), ANCHOR)
    assert patterns and r"\d+\s+\d+" in patterns[0] and r"\d+\s*\d+" not in patterns[0]
    line = "1" * 5000 + " GB/s"
    assert prefixes.strip(line, patterns) == (line, "")
    assert prefixes.strip_all([(1, line), (2, prefix + "GPU 00")], patterns) == [(1, line), (2, "GPU 00")]


def test_unicode_digits_and_blanks_in_a_prefix_match_themselves():
    for prefix in ("n\xb2:\xa0", "\u0663x\u2003", "host\x85"):
        patterns = prefixes.learn(_lines(prefix + "Summary: a", prefix + "RTotal 1"), ANCHOR)
        assert prefixes.strip(prefix + "GPU 00", patterns) == ("GPU 00", prefix), prefix


def test_command_lines():
    assert split_command("rocblas-bench -f gemm \\\n -r s --transposeA N") == ["rocblas-bench", "-f", "gemm", "-r", "s",
                                                                               "--transposeA", "N"]
    assert split_command("ib_write_bw -d 'mlx5 0") == ["ib_write_bw", "-d", "'mlx5", "0"]
    assert split_command(["a", 1]) == ["a", "1"] and split_command(None) == []
    spec = {"function": (("f", "function"), True), "device": (("d", "ib-dev"), True), "all": (("a", "all"), False),
            "use_rocm": (("use_rocm",), True)}
    assert options(["-fgemm", "--ib-dev=mlx5_0", "-a", "-use_rocm=0", "--unknown", "host", "-f", "gemm_ex"], spec) == (
        {"function": "gemm_ex", "device": "mlx5_0", "all": True, "use_rocm": "0"}, ["host"])
