"""TransferBench output read into measurements (module_utils/acceptance/transferbench.py) and judged against AMD's
TransferBench criteria (the generation cards' ``acceptance.transferbench``).

The captures are real (tests/fixtures/acceptance, each fact read by hand in its .source.md); the layouts no capture
shows (the healthcheck preset, the oldest p2p, the newest box-drawn tables) are written from TransferBench's printf
formats (ROCm/TransferBench src/TransferBench.cpp v1.52, src/client/Presets/*.hpp, src/client/Utilities.hpp).
"""

import glob
import os
import re

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import criteria_of, judge
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.transferbench import detect, parse
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "fixtures")
A2A = "transferbench_a2a__mi350x-8gpu__mhilgema-ihc.txt"
CFG = "transferbench_examplecfg__mi350x-8gpu__mhilgema-ihc.txt"
P2P = "transferbench_p2p__mi350x-8gpu__mhilgema-ihc.txt"
P2P_4M = "transferbench_p2p-4M__8gpu-unnamed__rocm-cluster-networking.txt"
OURS = (A2A, CFG, P2P, P2P_4M)
OTHERS = sorted(p for folder in ("acceptance", "smi") for p in glob.glob(os.path.join(FIXTURES, folder, "*"))
                if not p.endswith((".md",)) and not os.path.basename(p).startswith("transferbench_"))


def _text(name):
    with open(os.path.join(FIXTURES, "acceptance", name), encoding="utf-8", newline="") as handle:
        return handle.read()


TEXT = {name: _text(name) for name in OURS}


def _values(result, metric, case=None, **scope):
    """{frozen scope: value} of the measurements of ``metric`` (and ``case``) whose scope holds ``scope``."""
    out = {}
    for m in result["measurements"]:
        if m["metric"] == metric and m["case"] == case and all(m["scope"].get(k) == v for k, v in scope.items()):
            out[tuple(sorted(m["scope"].items()))] = m["value"]
    return out


def _one(result, metric, case=None, **scope):
    found = _values(result, metric, case, **scope)
    assert len(found) == 1, (metric, case, scope, found)
    return next(iter(found.values()))


def _scaled(text, factor):
    """Every decimal figure of ``text`` times ``factor`` (a slower node), printed with its own decimals."""
    def scale(match):
        token = match.group(0)
        return "%.*f" % (len(token.split(".")[1]), float(token) * factor)
    return re.sub(r"(?<![\w.])\d+\.\d+(?![\w.])", scale, text)


def _refusal(text, source="out"):
    with pytest.raises(AcceptanceParseError) as caught:
        parse(text, source)
    message = str(caught.value)
    assert isinstance(caught.value, TopotuneError) and "\n" not in message and message.startswith(source + " line ")
    return message


# ---------------------------------------------------------------------------------------------------- captures


def test_a2a_capture_current_summary_layout():
    result = parse(TEXT[A2A], A2A)
    assert (result["tool"], result["test"], result["source"]) == ("transferbench", "a2a", A2A)
    assert result["complete"] is False  # the author's '...' cut above the summary
    assert any("cut" in w for w in result["warnings"]) and result["prefixes"] == [] and result["errors"] == []
    assert (result["bytes_per_transfer"], result["executor"], result["subexecutors"], result["reads"],
            result["writes"]) == (268435456, "GFX", 8, 1, 1)
    assert result["gpus"] == ["GPU %02d" % i for i in range(8)]
    assert (result["avg_bandwidth"], result["aggregate_bandwidth"], result["aggregate_bandwidth_cpu_timed"]) == (
        51.417, 2879.354, 2671.564)
    assert [result["rtotal"]["GPU %02d" % i] for i in range(8)] == [
        359.786, 360.074, 359.978, 359.793, 360.180, 360.278, 359.282, 359.981]
    assert (result["rtotal_sum"], result["actual_min"], result["actual_max"]) == (2879.354, 354.785, 357.285)
    assert (result["stotal"]["GPU 00"], result["actual"]["GPU 00"]) == (359.089, 354.785)
    assert all(result["matrix"][g][g] is None for g in result["gpus"])   # the diagonal is N/A
    pairs = _values(result, "bandwidth")
    assert len(pairs) == 56
    assert min(pairs.items(), key=lambda kv: kv[1]) == ((("dst", "GPU 06"), ("src", "GPU 00")), 50.684)
    assert max(pairs.items(), key=lambda kv: kv[1]) == ((("dst", "GPU 01"), ("src", "GPU 02")), 53.446)
    for gpu in result["gpus"]:   # STotal is the row's sum, RTotal the column's (3 decimals each)
        assert sum(result["matrix"][gpu][d] or 0 for d in result["gpus"]) == pytest.approx(result["stotal"][gpu],
                                                                                           abs=0.005)
        assert sum(result["matrix"][s][gpu] or 0 for s in result["gpus"]) == pytest.approx(result["rtotal"][gpu],
                                                                                           abs=0.005)
    assert _one(result, "avg_bandwidth") == 51.417 and _one(result, "stotal", gpu="GPU 03") == 359.629
    assert len(result["measurements"]) == 56 + 3 * 8 + 3
    assert {m["unit"] for m in result["measurements"]} == {"GB/s"}


def test_config_capture_v162_pipes_and_echo_lines():
    result = parse(TEXT[CFG], CFG)
    assert (result["test"], result["version"], result["complete"]) == ("config", "1.62.00", False)  # '…' cut
    tests = result["tests"]
    assert [t["test"] for t in tests] == [1, 2, 3, 4, 5, 6]
    assert tests[0]["description"] == "Single GPU-executed Transfer between GPUs 0 and 1 using 4 CUs"
    assert tests[5]["description"] == "Broadcast from GPU 0 to GPU 0 and GPU 1"
    assert [t["transfers"][0]["bytes"] for t in tests] == [268435456, 268435456, 1048576, 268435456, 268435456,
                                                           268435456]
    assert tests[2]["transfers"][1]["bytes"] == 2097152 and tests[2]["aggregate"]["bytes"] == 3145728
    one = tests[0]
    assert (one["executors"][0]["executor"], one["executors"][0]["bandwidth"], one["executors"][0]["sum_bandwidth"],
            one["aggregate"]["bandwidth"], one["aggregate"]["overhead_ms"]) == ("GPU 00", 56.299, 56.309, 55.015, 0.111)
    assert {k: one["transfers"][0][k] for k in ("bandwidth", "src", "executor", "dst", "case")} == {
        "bandwidth": 56.309, "src": "G0", "executor": "G000:004", "dst": "G1", "case": "test 1"}
    assert tests[1]["executors"][0]["executor"] == "DMA 00" and tests[1]["transfers"][0]["executor"] == "D000:001"
    assert _one(result, "bandwidth", "test 1") == 56.309
    assert _one(result, "executor_bandwidth", "test 1", executor="GPU 00") == 56.299
    assert _one(result, "aggregate_bandwidth_cpu_timed", "test 1") == 55.015
    assert (_one(result, "bandwidth", "test 2"), _one(result, "aggregate_bandwidth_cpu_timed", "test 2")) == (
        60.973, 58.541)
    assert _one(result, "bandwidth", "test 3 0->1", executor="G000:004") == 37.857
    assert _one(result, "bandwidth", "test 3 1->0", executor="G001:008") == 46.304
    assert _one(result, "bandwidth", "test 4", src="N", dst="G0") == 1493.789
    assert _one(result, "bandwidth", "test 5", src="C0", executor="C000:004", dst="N") == 37.756
    assert _one(result, "bandwidth", "test 6", dst="G0G1") == 58.327
    assert len(result["measurements"]) == 7 + 7 + 6


def _check_p2p_averages(result):
    """The tool's 'Averages' lines are the means of the figures each kind names (its own rule, reproduced)."""
    for case in ("unidir", "bidir"):
        for kind, label in (("cpu_cpu", "CPU->CPU"), ("cpu_gpu", "CPU->GPU"), ("gpu_cpu", "GPU->CPU"),
                            ("gpu_gpu", "GPU->GPU")):
            values = list(_values(result, "%s_bandwidth" % kind, case).values())
            assert sum(values) / len(values) == pytest.approx(result["averages"][case][label], abs=0.006)
            assert _one(result, "avg_%s_bandwidth" % kind, case) == result["averages"][case][label]


def test_p2p_capture_v162_blank_lines_and_two_slow_pairs():
    result = parse(TEXT[P2P], P2P)
    assert (result["test"], result["complete"]) == ("p2p", False)   # '....' cut under the command
    assert (result["bytes_per_direction"], result["executor"], result["read"], result["write"]) == (
        268435456, "GFX", "Local", "Remote")
    assert result["devices"] == ["CPU 00", "CPU 01"] + ["GPU %02d" % i for i in range(8)]
    assert result["averages"] == {
        "unidir": {"CPU->CPU": 103.69, "CPU->GPU": 44.91, "GPU->CPU": 55.25, "GPU->GPU": 57.32},
        "bidir": {"CPU->CPU": 88.84, "CPU->GPU": 49.67, "GPU->CPU": 49.66, "GPU->GPU": 54.32}}
    _check_p2p_averages(result)
    uni = _values(result, "gpu_gpu_bandwidth", "unidir")
    assert len(uni) == 56
    slowest = min(uni.items(), key=lambda kv: kv[1])
    assert slowest == ((("dst", "GPU 01"), ("src", "GPU 07")), 46.66)
    assert all(57.2 <= v <= 57.8 for k, v in uni.items() if k != slowest[0])
    local = _values(result, "local_bandwidth", "unidir")
    assert local[(("dst", "GPU 00"), ("src", "GPU 00"))] == 2132.28
    assert all(2122 <= v <= 2164 for k, v in local.items() if k[0][1].startswith("GPU"))
    combined = _values(result, "gpu_gpu_combined_bandwidth", "bidir")
    assert len(combined) == 56
    assert {k: v for k, v in combined.items() if v < 100} == {
        (("dst", "GPU 06"), ("src", "GPU 03")): 79.33, (("dst", "GPU 01"), ("src", "GPU 07")): 92.79}
    assert all(108.9 <= v <= 110.0 for v in combined.values() if v >= 100)   # healthy pairs ~109-110
    assert _one(result, "gpu_gpu_bandwidth", "bidir", src="GPU 03", dst="GPU 06", pair="GPU 03<->GPU 06") == 38.96
    assert _one(result, "gpu_gpu_bandwidth", "bidir", src="GPU 06", dst="GPU 03", pair="GPU 03<->GPU 06") == 40.37
    assert _one(result, "gpu_gpu_bandwidth", "bidir", src="GPU 01", dst="GPU 07", pair="GPU 07<->GPU 01") == 37.99
    assert result["bidir"]["<->"]["GPU 03"]["GPU 06"] == 79.33 and result["bidir"]["->"]["GPU 00"]["GPU 00"] is None
    assert len(result["measurements"]) == 100 + 270 + 8


def test_p2p_capture_v150_snip_cut_and_4m_transfers():
    result = parse(TEXT[P2P_4M], P2P_4M)
    assert (result["test"], result["version"], result["complete"]) == ("p2p", "1.50", False)   # <SNIP>
    assert result["bytes_per_direction"] == 4194304
    assert result["averages"]["unidir"] == {"CPU->CPU": 22.23, "CPU->GPU": 16.35, "GPU->CPU": 23.77,
                                            "GPU->GPU": 37.74}
    assert result["averages"]["bidir"] == {"CPU->CPU": 15.29, "CPU->GPU": 19.72, "GPU->CPU": 19.39,
                                           "GPU->GPU": 36.17}
    _check_p2p_averages(result)
    uni = _values(result, "gpu_gpu_bandwidth", "unidir")
    low = min(uni.values())
    assert low == 26.93 and sorted(k for k, v in uni.items() if v == low) == [
        (("dst", "GPU 01"), ("src", "GPU 04")), (("dst", "GPU 03"), ("src", "GPU 06"))]
    assert max(uni.items(), key=lambda kv: kv[1]) == ((("dst", "GPU 00"), ("src", "GPU 01")), 66.52)
    combined = _values(result, "gpu_gpu_combined_bandwidth", "bidir")
    assert max(combined.items(), key=lambda kv: kv[1]) == ((("dst", "GPU 01"), ("src", "GPU 00")), 127.61)
    assert min(combined.items(), key=lambda kv: kv[1]) == ((("dst", "GPU 04"), ("src", "GPU 00")), 50.53)
    local = [v for k, v in _values(result, "local_bandwidth", "unidir").items() if k[0][1].startswith("GPU")]
    assert len(local) == 8 and all(108.6 <= v <= 111 for v in local)
    assert len(result["measurements"]) == 378


# ---------------------------------------------------------------------------------------------------- variants


def test_launcher_prefixes_tabs_crlf_and_trailing_spaces_read_the_same():
    for name in OURS:
        plain = parse(TEXT[name], name)
        lines = TEXT[name].split("\n")
        for text in ("\n".join("[1,%d]<stdout>:%s" % (n % 3, line) for n, line in enumerate(lines)),
                     "\n".join(" 0: " + line for line in lines),
                     "\r\n".join(re.sub(r" {2,}", "\t", line) + "   " for line in lines)):
            result = parse(text, name)
            assert result["measurements"] == plain["measurements"], name
            assert (result["test"], result["complete"], result["version"]) == (plain["test"], plain["complete"],
                                                                               plain["version"])
        assert parse("\n".join("[1,0]<stdout>:" + line for line in lines))["prefixes"]


def test_the_newest_box_drawn_tables_read_the_same():
    # TransferBench's TableHelper (src/client/Utilities.hpp): cells between '│', row borders of '─' and '┼'
    a2a = parse(TEXT[A2A])
    gpus = a2a["gpus"]
    vbar = "\u2502"
    rule = "\u2500" * 9 + ("\u253c" + "\u2500" * 9) * (len(gpus) + 2)
    rows = [rule, " SRC\\DST " + vbar + vbar.join(" %s " % g for g in gpus) + vbar + " STotal " + vbar + " Actual " + vbar,
            rule]
    for src in gpus:
        cells = ["N/A" if a2a["matrix"][src][d] is None else "%.3f" % a2a["matrix"][src][d] for d in gpus]
        cells += ["%.3f" % a2a["stotal"][src], "%.3f" % a2a["actual"][src]]
        rows.append(" %s " % src + vbar + vbar.join(" %s " % c for c in cells) + vbar)
    rows += [rule, " RTotal " + vbar + vbar.join(" %.3f " % a2a["rtotal"][g] for g in gpus) + vbar
             + " %.3f %s %.3f %s" % (a2a["rtotal_sum"], vbar, sum(a2a["actual"].values()), vbar), rule,
             " " * 60 + vbar + " CPU Timed: " + vbar + " 2671.56 " + vbar, "",
             "Average   bandwidth (GPU Timed):   51.417 GB/s", "Aggregate bandwidth (GPU Timed): 2879.354 GB/s",
             "Aggregate bandwidth (CPU Timed): 2671.564 GB/s"]
    text = "TransferBench v1.66.00\nGPU-GFX All-To-All benchmark:\n==============================\n" \
           "[268435456 bytes per Transfer] [GFX:8] [1 Read(s) 1 Write(s)] [MemType:fine] [NIC QueuePairs:0] " \
           "[#Ranks:1]\n" + "\n".join(rows)
    newest = parse(text)
    assert newest["complete"] is True and newest["version"] == "1.66.00"
    assert newest["measurements"] == a2a["measurements"]
    assert (newest["actual_min"], newest["actual_max"]) == (None, None)   # the newest RTotal row has no min/max
    # config tables: '│' cells, '─┼' borders, unpadded 'Transfer 0', newer executor tokens
    lines = []
    for line in TEXT[CFG].split("\n"):
        line = re.sub(r"Transfer 0(\d)", r"Transfer \1   ", line.replace("|", vbar)).replace("G000:004", "G0:4")
        if line.startswith(" Executor:"):
            lines.append("\u2500" * 18 + "\u253c" + "\u2500" * 14 + "\u253c" + "\u2500" * 12)
        lines.append(line)
    config = parse("\n".join(lines))
    plain = parse(TEXT[CFG])
    assert [(m["case"], m["metric"], m["value"]) for m in config["measurements"]] == [
        (m["case"], m["metric"], m["value"]) for m in plain["measurements"]]
    assert _one(config, "bandwidth", "test 1", executor="G0:4") == 56.309


def test_the_oldest_p2p_layout_without_direction_markers():
    # TransferBench v1.1x: 'D/D' header, no '->' markers, the bidirectional figure a sum, no averages
    text = "\n".join([
        "Performing copies in each direction of 67108864 bytes",
        "Unidirectional copy peak bandwidth GB/s [Local read / Remote write]",
        "       D/D    CPU 00    GPU 00    GPU 01",
        "    CPU 00     25.10     20.40     20.50",
        "    GPU 00     26.00   1200.00     48.20",
        "    GPU 01     26.10     48.30   1190.00",
        "",
        "Bidirectional copy peak bandwidth GB/s [Local read / Remote write]",
        "       D/D    CPU 00    GPU 00    GPU 01",
        "    CPU 00       N/A     41.00     41.20",
        "    GPU 00     41.10       N/A     92.50",
        "    GPU 01     41.30     92.40       N/A",
        ""])
    result = parse(text)
    assert result["complete"] is True and result["executor"] is None
    assert _one(result, "gpu_gpu_bandwidth", "unidir", src="GPU 00", dst="GPU 01") == 48.2
    assert _one(result, "local_bandwidth", "unidir", src="GPU 01", dst="GPU 01") == 1190.0
    assert _values(result, "gpu_gpu_combined_bandwidth", "bidir") == {
        (("dst", "GPU 01"), ("src", "GPU 00")): 92.5, (("dst", "GPU 00"), ("src", "GPU 01")): 92.4}
    assert not _values(result, "gpu_gpu_bandwidth", "bidir")


def test_show_iterations_rows_are_not_figures():
    lines = TEXT[P2P].split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("  GPU 03  ->"))
    extra = ["  GPU 03 min     50.00     50.00        50.00     50.00     50.00  2000.00     50.00     50.00     50.00"
             "     50.00", "  GPU 03  sd   3.3e-01   9.6e-02        0.10      0.10      0.10      0.10      0.10      "
             "0.10      0.10      0.10"]
    result = parse("\n".join(lines[:at + 1] + extra + lines[at + 1:]))
    assert result["measurements"] == parse(TEXT[P2P])["measurements"]


HEALTHCHECK = """TransferBench v1.66.00
Disclaimer:
==================================================================
NOTE: This is an experimental feature and may be subject to change
      Failures do not necessarily indicate hardware issues, as other factors
      such as simultaneous workloads may influence results

Testing HBM performance [READ]             ........PASS
Testing HBM performance [WRITE]            ........PASS
Testing HBM performance [COPY]             ........FAIL (1 test(s))
 GPU 03: Measured: 1890.12 GB/s      Criteria: 1983.65 GB/s
Testing HBM performance [ADD]              ........PASS
Testing unidirectional host to device copy ........PASS
Testing unidirectional device to host copy ........PASS
Testing bidirectional host<->device copies ........PASS
Testing all-to-all XGMI copies             ........FAIL (2 test(s))
 GPU 00 to GPU 05:  40.12 GB/s      Criteria:  43.65 GB/s
 GPU 05 to GPU 00:  39.80 GB/s      Criteria:  43.65 GB/s
"""


def test_healthcheck_preset_current_and_v151_layouts():
    result = parse(HEALTHCHECK, "hc")
    assert (result["test"], result["complete"], result["passed"]) == ("healthcheck", True, False)
    assert [c["name"] for c in result["checks"]][2:] == [
        "HBM performance [COPY]", "HBM performance [ADD]", "unidirectional host to device copy",
        "unidirectional device to host copy", "bidirectional host<->device copies", "all-to-all XGMI copies"]
    assert _one(result, "pass", "HBM performance [READ]") is True and _one(result, "pass") is False
    assert _one(result, "pass", "HBM performance [COPY]") is False
    assert _one(result, "bandwidth", "HBM performance [COPY]", gpu="GPU 03") == 1890.12
    assert _values(result, "bandwidth", "all-to-all XGMI copies") == {
        (("dst", "GPU 05"), ("src", "GPU 00")): 40.12, (("dst", "GPU 00"), ("src", "GPU 05")): 39.8}
    assert result["checks"][-1]["results"][0]["limit"] == 43.65
    # VERBOSE=1: every GPU's figure, the verdict on its own line
    verbose = parse("Testing all-to-all XGMI copies            \n   GPU 00 to GPU 01: : Measured  47.12 Limit  43.65\n"
                    "   GPU 01 to GPU 00: : Measured  47.30 Limit  43.65\nPASS\n")
    assert verbose["passed"] is True and len(_values(verbose, "bandwidth", "all-to-all XGMI copies")) == 2
    # v1.51: other check names, the same lines
    old = parse("Testing unidirectional reads from CPU ........PASS\nTesting unidirectional writes to  CPU ...."
                "....FAIL (1 test(s))\n GPU 02: Measured:  40.00 GB/s      Criteria:  45.00 GB/s\n")
    assert [c["name"] for c in old["checks"]] == ["unidirectional reads from CPU", "unidirectional writes to CPU"]
    assert _one(old, "bandwidth", "unidirectional writes to CPU", gpu="GPU 02") == 40.0
    # cut: the last check without its verdict, or a FAIL listing fewer GPUs than it counts
    cut = parse(HEALTHCHECK.split("Testing all-to-all", maxsplit=1)[0] + "Testing all-to-all XGMI copies             ....")
    assert cut["complete"] is False and cut["passed"] is None and not _values(cut, "pass")
    short = parse(HEALTHCHECK.rsplit(" GPU 05 to GPU 00", 1)[0])
    assert short["complete"] is False


# ---------------------------------------------------------------------------------------------------- refusals


def test_refusals_are_one_line_naming_source_line_and_why():
    assert "empty" in _refusal("")
    assert "empty" in _refusal(" \n\t\n")
    with pytest.raises(AcceptanceParseError):
        parse(None, "out")
    assert "line 2" in _refusal("TransferBench v1.62.00\n[ERROR] HIP Error: invalid resource handle\n")
    message = _refusal("# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592\n#  size count type\n")
    assert "not TransferBench output" in message and "nThread" in message


@pytest.mark.parametrize("path", OTHERS, ids=os.path.basename)
def test_other_tools_output_is_neither_detected_nor_parsed(path):
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        text = handle.read()
    assert detect(text) is False
    _refusal(text, os.path.basename(path))


def test_a_malformed_row_with_rows_after_it_is_refused_and_at_the_end_it_is_a_cut():
    lines = TEXT[P2P].split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("  GPU 03  ->"))
    bad = list(lines)
    bad[at] = bad[at].replace("57.48", "5x.48")
    message = _refusal("\n".join(bad))
    assert message.startswith("out line %d:" % (at + 1)) and "'5x.48' is not a number" in message and "GPU 03" in message
    short = list(lines)
    short[at] = short[at].rsplit(" ", 1)[0].rstrip()
    assert "9 values, the column header has 10" in _refusal("\n".join(short))
    cut = parse("\n".join(lines[:at] + [short[at]]))   # the output ends on the short row: a cut, not a refusal
    assert cut["complete"] is False and any("ends there" in w for w in cut["warnings"])
    a2a = TEXT[A2A].replace("51.478", "51,47.8")
    assert "11 values, the column header has 10, and table lines follow it" in _refusal(a2a)
    cfg = TEXT[CFG].replace("37.857 GB/s |    0.028 ms", "fast GB/s |    0.028 ms")
    assert "bandwidth cell" in _refusal(cfg)
    assert "not a finite number" in _refusal(TEXT[CFG].replace("58.313 GB/s", "1e400 GB/s") + "\nTest 7:")
    health = HEALTHCHECK.replace("1890.12", "1e999")
    assert "not a healthcheck result ('1e999' is not a finite number)" in _refusal(health)


def test_tables_out_of_order_or_twice_are_refused():
    lines = TEXT[P2P].split("\n")
    assert "before its table's title" in _refusal("\n".join(lines[5:]))
    assert "second unidir table" in _refusal(TEXT[P2P] + "\n" + TEXT[P2P])
    assert "second a2a" in _refusal(TEXT[A2A] + "\n" + TEXT[A2A])
    assert "p2p and a2a" in _refusal(TEXT[P2P] + "\n" + TEXT[A2A])
    assert "Test 1 again" in _refusal(TEXT[CFG] + "\n" + TEXT[CFG])


def test_detect_claims_transferbench_only():
    assert all(detect(TEXT[name]) for name in OURS)
    assert detect(HEALTHCHECK) and detect("[1,0]<stdout>:TransferBench v1.50")
    assert not detect("") and not detect(None)
    assert not detect("Unidirectional copy peak bandwidth GB/s\nD/D 0 1\n0 N/A 26.9")   # rocm-bandwidth-test


def test_cut_before_the_summary_leaves_the_figures_absent_and_the_run_incomplete():
    text = TEXT[A2A].split("Average   bandwidth")[0]
    result = parse(text)
    assert result["complete"] is False and result["avg_bandwidth"] is None
    assert not _values(result, "avg_bandwidth") and len(_values(result, "bandwidth")) == 56


# ---------------------------------------------------------------------------------------------------- criteria

VIEW = load_knowledge("acceptance")


def _criteria(generation):
    return {c["id"]: c for c in criteria_of(VIEW, generation) if c["tool"] == "transferbench"}


def test_mi355x_card_has_no_transferbench_criterion_and_mi300x_nine():
    # AMD's MI350X and MI355X pages state only the RCCL figure ("only the RCCL all-reduce threshold above is
    # required in this template"); MI308X has no page
    assert _criteria("MI355X") == {} and _criteria("MI308X") == {}
    assert sorted(_criteria("MI300X")) == sorted(_criteria("MI325X")) == [
        "a2a_avg", "example_cfg_test1", "example_cfg_test2", "example_cfg_test3_0to1", "example_cfg_test3_1to0",
        "example_cfg_test4", "example_cfg_test6", "p2p_bidir_avg", "p2p_unidir_avg"]
    for generation in ("MI210", "MI250X", "MI300A", "MI300X", "MI325X"):
        for criterion in _criteria(generation).values():
            assert criterion["unit"] == "GB/s" and criterion["sources"] and criterion["command"].startswith(
                "TransferBench")
            assert all(s["commit"] and s["says"] and s["section"] for s in criterion["sources"])


# the verdicts read by hand: (criterion, value, status) on the MI350X captures, judged by MI300X's bounds
MI300X_ON_MI350X = [("a2a_avg", 51.417, 56.28), ("p2p_unidir_avg", 57.32, 69.09), ("p2p_bidir_avg", 54.32, 23.74),
                    ("example_cfg_test1", 56.309, 19.55), ("example_cfg_test2", 60.973, 25.98),
                    ("example_cfg_test3_0to1", 37.857, 18.67), ("example_cfg_test3_1to0", 46.304, 19.03),
                    ("example_cfg_test4", 1493.789, 18.18), ("example_cfg_test6", 58.327, 20.01)]


@pytest.mark.parametrize("key,value,margin", MI300X_ON_MI350X, ids=[v[0] for v in MI300X_ON_MI350X])
def test_mi300x_criteria_pass_on_the_mi350x_captures(key, value, margin):
    results = [parse(TEXT[name], name) for name in (A2A, P2P, CFG)]
    verdict = judge(_criteria("MI300X")[key], results)
    assert (verdict["status"], verdict["value"], verdict["margin_pct"]) == ("pass", value, margin)
    assert verdict["source"].startswith("ROCm/system-acceptance-docs docs/gpus/mi300x.md (e42af24)")


def test_a_slower_node_fails_mi300x_criteria_naming_the_test():
    slow = [parse(_scaled(TEXT[A2A], 0.6)), parse(_scaled(TEXT[P2P], 0.55))]
    criteria = _criteria("MI300X")
    verdicts = {key: judge(criteria[key], slow) for key in ("a2a_avg", "p2p_unidir_avg", "p2p_bidir_avg")}
    assert {k: (v["status"], v["value"]) for k, v in verdicts.items()} == {
        "a2a_avg": ("fail", 30.85), "p2p_unidir_avg": ("fail", 31.53), "p2p_bidir_avg": ("fail", 29.88)}
    assert verdicts["p2p_bidir_avg"]["expected"] == "p2p bidir avg_gpu_gpu_bandwidth: >= 43.9 GB/s"
    assert verdicts["a2a_avg"]["observed"] == "1 of 1 miss the bound: node 30.85 GB/s"
    # one slow test of example.cfg: test 3's GPU 1 -> GPU 0 transfer at 30 GB/s fails, the other tests pass
    cfg = parse(TEXT[CFG].replace("46.304 GB/s |    0.045 ms", "30.000 GB/s |    0.070 ms"))
    verdicts = {key: judge(c, [cfg]) for key, c in criteria.items() if c["test"] == "config"}
    failing = {k: v for k, v in verdicts.items() if v["status"] != "pass"}
    assert list(failing) == ["example_cfg_test3_1to0"]
    verdict = failing["example_cfg_test3_1to0"]
    assert verdict["status"] == "fail" and verdict["expected"] == "config test 3 1->0 bandwidth: >= 38.9 GB/s"
    assert verdict["failing"] == ["dst G0,executor G001:008,src G1,transfer 1"]


def test_the_slow_pairs_pass_an_average_and_fail_a_per_pair_bound():
    # the fixture's note: MI300X's bounds pass on the averages, a per-pair check flags 03<->06 and 07<->01
    result = parse(TEXT[P2P])
    per_pair = {"id": "bidir_pairs", "tool": "transferbench", "test": "p2p", "case": "bidir",
                "metric": "gpu_gpu_bandwidth", "unit": "GB/s", "min": 43.9, "per": "each"}
    verdict = judge(per_pair, [result])
    assert judge(_criteria("MI300X")["p2p_bidir_avg"], [result])["status"] == "pass"
    assert verdict["status"] == "fail" and verdict["value"] == 37.99
    assert sorted(verdict["failing"]) == ["dst GPU 03,pair GPU 03<->GPU 06,src GPU 06",
                                          "dst GPU 06,pair GPU 03<->GPU 06,src GPU 03",
                                          "dst GPU 07,pair GPU 07<->GPU 01,src GPU 01"]


def test_per_pair_criteria_of_the_older_cards():
    # MI250X's per-pair UniDir bound (>= 30 GB/s) on the v1.50 4 MiB run: not AMD's command (the default size),
    # so slow; the slowest pairs are named
    verdict = judge(_criteria("MI250X")["p2p_unidir"], [parse(TEXT[P2P_4M])])
    assert verdict["status"] == "fail" and verdict["value"] == 26.93
    assert {"dst GPU 01,src GPU 04", "dst GPU 03,src GPU 06"} <= set(verdict["failing"])
    # MI210's per-GPU aggregate (STotal >= 80 GB/s on every GPU) on the MI350X a2a: worst GPU 00's 359.089
    verdict = judge(_criteria("MI210")["a2a_per_gpu"], [parse(TEXT[A2A])])
    assert (verdict["status"], verdict["value"]) == ("pass", 359.089)
    assert judge(_criteria("MI300A")["a2a_aggregate"], [parse(TEXT[A2A])])["value"] == 2879.354
    # a cut a2a without its summary: AMD's average is unknown, never a pass
    cut = parse(TEXT[A2A].split("Average   bandwidth")[0])
    verdict = judge(_criteria("MI300X")["a2a_avg"], [cut])
    assert verdict["status"] == "unknown" and "cut" in verdict["observed"]
