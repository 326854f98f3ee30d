"""ROCm Validation Suite output parser (module_utils/acceptance/rvs.py) and AMD's RVS criteria judged on it.

The captures are AMD's published MI300X outputs (tests/fixtures/acceptance/rvs_*, facts from their .source.md);
failing variants are derived from them, and the layouts without a capture (iet, pebb, babel, the summary table,
the pre-2024 lines) follow RVS's own log strings (ROCm/ROCmValidationSuite *.so/src, docs/ug1main.md)."""

import glob
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance import babelstream, rvs
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import AcceptanceParseError
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import criteria_of, judge
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
ACC = os.path.join(REPO, "tests", "fixtures", "acceptance")
SMI = os.path.join(REPO, "tests", "fixtures", "smi")
GST = "rvs_gst_single__mi300x-8gpu__rocm-system-acceptance.txt"
GST_EXT = "rvs_gst_ext__mi300x-8gpu__rocm-system-acceptance.txt"
GPUP = "rvs_gpup_single__mi300x-8gpu__rocm-system-acceptance.txt"
MEM = "rvs_mem__mi300x-8gpu__rocm-system-acceptance.txt"
PBQT = "rvs_pbqt_single__mi300x-8gpu__rocm-system-acceptance.txt"
PEQT = "rvs_peqt_single__mi300x-8gpu__rocm-system-acceptance.txt"
CAPTURES = (GST, GST_EXT, GPUP, MEM, PBQT, PEQT)
GPU_IDS = (28851, 23018, 29122, 22683, 53458, 63883, 53667, 63738)   # rvs -g in the same guide
BDFS = ("05", "26", "46", "65", "85", "a6", "c6", "e5")

VIEW = load_knowledge("acceptance")
MI300X = {c["key"]: c for c in criteria_of(VIEW, "MI300X")}


def _text(name):
    with open(os.path.join(ACC, name), newline="") as handle:
        return handle.read()


def _measures(result, metric):
    return [(m["scope"], m["value"]) for m in result["measurements"] if m["metric"] == metric]


def _one_line(err):
    message = str(err.value)
    assert isinstance(err.value, TopotuneError) and "\n" not in message and message
    return message


# --- the captures ----------------------------------------------------------------------------------------


def test_gst_single_reads_the_final_met_line_and_the_interval_gflops():
    result = rvs.parse(_text(GST), GST)
    assert (result["tool"], result["test"], result["source"]) == ("rvs", "gst", GST)
    action = "gst-1215Tflops-4K4K8K-rand-fp8"
    assert result["actions"] == [{"name": action, "module": "gst", "gpus": [28851], "lines": 5, "result": None}]
    assert result["gpus"] == [28851] and result["modules"] == ["gst"] and result["others"] == []
    scope = {"action": action, "gpu": 28851}
    assert _measures(result, "met") == [(scope, True)]
    assert _measures(result, "gflops") == [(scope, 1687129.0)]
    assert _measures(result, "target_gflops") == [(scope, 1215000.0)]
    assert result["per_gpu"] == [{"action": action, "gpu": 28851, "lines": 2, "samples": [1539705.0, 1640057.0]}]
    # a published excerpt: the '...' line is skipped and the result is not complete
    assert result["complete"] is False and any("cut markers" in w for w in result["warnings"])
    assert all(m["unit"] in ("bool", "GFLOPS") for m in result["measurements"])


def test_gst_ext_reads_its_action_and_figures():
    result = rvs.parse(_text(GST_EXT), GST_EXT)
    scope = {"action": "gst-1000Tflops-8KB-fp8_r-false", "gpu": 28851}
    assert _measures(result, "met") == [(scope, True)]
    assert _measures(result, "gflops") == [(scope, 1238206.0)] and _measures(result, "target_gflops") == [
        (scope, 1000000.0)]
    assert result["per_gpu"][0]["samples"] == [1235406.0]


def test_gpup_reads_properties_and_io_links_but_counts_no_gpus_on_a_cut_log():
    result = rvs.parse(_text(GPUP), GPUP)
    assert result["test"] == "gpup" and result["gpus"] == [28851]
    assert result["properties"]["28851"] == {"cpu_cores_count": "0", "simd_count": "1216", "num_xcc": "8",
                                             "max_engine_clk_ccompute": "3250"}
    link = result["io_links"]["28851"]["0"]
    assert {k: link[k] for k in ("type", "node_from", "node_to", "weight", "min_bandwidth", "max_bandwidth",
                                 "flags")} == {"type": "2", "node_from": "2", "node_to": "0", "weight": "20",
                                               "min_bandwidth": "312", "max_bandwidth": "64000", "flags": "1"}
    assert result["complete"] is False and result["measurements"] == []
    verdict = judge(MI300X["rvs.gpup_gpus"], [result])
    assert verdict["status"] == "unknown" and verdict["observed"].endswith("(the output was cut)")


def test_mem_reads_the_verdicts_and_the_test_11_bandwidth_of_a_filtered_log():
    result = rvs.parse(_text(MEM), MEM)
    assert result["test"] == "mem" and result["gpus"] == []          # mem lines carry no GPU id
    assert result["filtered"] is True and result["commands"] == ['grep "mem Test 1:" mem.txt',
                                                                 'grep "bandwidth" mem.txt']
    assert result["complete"] is False and any("filtered" in w for w in result["warnings"])
    passes = _measures(result, "pass")
    assert passes == [({"action": "action_1", "test": 1, "n": n}, True) for n in range(1, 9)]
    bandwidth = [v for _s, v in _measures(result, "bandwidth")]
    assert bandwidth == [2003.01709, 2004.028564, 1999.846802, 2000.926392, 2003.597534, 2006.810059, 1998.476196,
                         1994.768433]
    assert min(bandwidth) == 1994.768433
    elapsed = [v for _s, v in _measures(result, "elapsedtime")]
    assert min(elapsed) == 6378.345703 and max(elapsed) == 6416.849121
    assert result["mem_tests"][0]["starts"] == 8 and result["mem_tests"][0]["passed"] == 8
    assert judge(MI300X["rvs.mem_pass"], [result])["status"] == "pass"


def test_pbqt_reads_peers_distances_and_bandwidths():
    result = rvs.parse(_text(PBQT), PBQT)
    assert result["test"] == "pbqt" and result["gpus"] == [23018, 28851, 29122]
    seq, par = "p2p-unidir-sequential-64MB", "p2p-unidir-parallel-64MB"
    assert _measures(result, "peers") == [({"action": seq, "src": 28851, "dst": 23018}, True),
                                          ({"action": seq, "src": 28851, "dst": 29122}, True)]
    assert [link["distance"] for link in result["links"]] == [15, 15]
    assert result["links"][0]["hops"] == [{"type": "xGMI", "distance": 15}]
    assert _measures(result, "bandwidth") == [({"action": par, "src": 28851, "dst": 23018}, 48.962),
                                              ({"action": par, "src": 28851, "dst": 29122}, 48.914)]
    assert _measures(result, "duration")[0] == ({"action": par, "src": 28851, "dst": 23018}, 1.462462)
    info = {g["id"]: g for g in result["gpu_info"]}
    assert info[28851]["bdf"] == "0000:05:00.0" and info[28851]["node"] == 2 and info[23018]["node"] == 3
    # cut after transfer 2 of 56: the other 54 are not failures, and the Markdown fence is named, not read
    assert result["complete"] is False
    assert any("transfer 3/56 and 53 more" in w for w in result["warnings"])
    assert any("'```bash'" in w for w in result["warnings"])
    for key in ("rvs.pbqt_peers", "rvs.pbqt_bandwidth", "rvs.pbqt_measured"):
        assert judge(MI300X[key], [result])["status"] == "pass"


def test_peqt_reads_each_actions_verdict():
    result = rvs.parse(_text(PEQT), PEQT)
    assert _measures(result, "pass") == [({"action": "pcie_act_1"}, True), ({"action": "pcie_act_17"}, True)]
    assert [a["name"] for a in result["actions"]] == ["pcie_act_1", "pcie_act_2", "pcie_act_17"]
    assert all(a["module"] == "peqt" for a in result["actions"])
    assert result["complete"] is False and any("pcie_act_2" in w for w in result["warnings"])


@pytest.mark.parametrize("name", CAPTURES)
def test_every_capture_is_detected_and_parsed(name):
    text = _text(name)
    assert rvs.detect(text) is True and babelstream.detect(text) is False
    result = rvs.parse(text, name)
    assert result["tool"] == "rvs" and result["measurements"] or result["test"] == "gpup"
    assert set(result["gpus"]) <= set(GPU_IDS)
    assert all("\n" not in w for w in result["warnings"])


def _other_files():
    mine = set(CAPTURES)
    paths = [p for p in glob.glob(os.path.join(ACC, "*")) + glob.glob(os.path.join(SMI, "*"))
             if os.path.basename(p) not in mine and not p.endswith("README.md")]
    return sorted(paths)


@pytest.mark.parametrize("path", _other_files(), ids=os.path.basename)
def test_detect_claims_no_other_tools_output(path):
    with open(path, encoding="utf-8", errors="replace") as handle:
        assert rvs.detect(handle.read()) is False


# --- refusals ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text, needle", [
    ("", "the output is empty"),
    ("hello\nworld\n", "first line 1: 'hello'"),
    (None, "expected text"),
    ("RVS-ERROR [GST] [gst-1] Action failed to run successfully.\n", "failed before any module output"),
    ("ROCm Validation Suite (version 0.0.60202)\n\nSupported GPUs available:\n"
     "0000:05:00.0 - GPU[ 2 - 28851] AMD Instinct MI300X (Device 29857)\n", "only the GPU list of 'rvs -g'"),
])
def test_output_without_module_lines_is_refused_in_one_line(text, needle):
    with pytest.raises(AcceptanceParseError) as err:
        rvs.parse(text, "node1/rvs.log")
    message = _one_line(err)
    assert needle in message and message.startswith("node1/rvs.log")


def test_babelstream_output_is_not_rvs():
    with pytest.raises(AcceptanceParseError):
        rvs.parse(_text("babelstream_hip__mi350x__mhilgema-ihc.txt"))


def test_a_damaged_result_line_followed_by_results_is_refused_naming_the_line():
    lines = _text(MEM).split("\n")
    lines[19] = "[RESULT] [214808.291036] [action_1] mem Test 11: elapsedtime = 6390.4 bandwidth = x.y GB/s"
    with pytest.raises(AcceptanceParseError) as err:
        rvs.parse("\n".join(lines), "mem.txt")
    message = _one_line(err)
    assert message.startswith("mem.txt line 20:") and "'x.y' is not a number" in message


def test_a_damaged_last_line_is_a_cut_run():
    lines = _text(GST).rstrip("\n").split("\n")
    lines[-1] = lines[-1].replace("met: TRUE", "met: TR")
    result = rvs.parse("\n".join(lines))
    assert result["complete"] is False and _measures(result, "met") == []
    assert any("truncated run: line 8" in w and "neither TRUE nor FALSE" in w for w in result["warnings"])


# --- failing variants judged with AMD's MI300X criteria --------------------------------------------------


def test_a_met_false_gst_line_fails_naming_the_gpu():
    text = _text(GST).replace("met: TRUE", "met: FALSE")
    verdict = judge(MI300X["rvs.gst_met"], [rvs.parse(text)])
    assert verdict["status"] == "fail"
    assert verdict["failing"] == ["action gst-1215Tflops-4K4K8K-rand-fp8,gpu 28851"]
    assert "docs/gpus/mi300x.md" in verdict["source"]


def test_a_failed_mem_test_fails_naming_its_report():
    lines = _text(MEM).split("\n")
    assert lines[11].endswith("mem Test 1 : PASS")
    lines[11] = lines[11].replace("PASS", "FAIL")
    verdict = judge(MI300X["rvs.mem_pass"], [rvs.parse("\n".join(lines))])
    assert verdict["status"] == "fail" and verdict["failing"] == ["action action_1,n 3,test 1"]


def _mem_log(drop_pass=None, later_tests=True, closed=False):
    """An unfiltered mem log of 8 GPUs (the capture's lines, its grep lines removed, RVS's headers added)."""
    lines = [line for line in _text(MEM).split("\n") if line.startswith("[RESULT]") and "Test 11" not in line]
    if drop_pass is not None:
        passes = [i for i, line in enumerate(lines) if line.endswith("Test 1 : PASS")]
        del lines[passes[drop_pass]]
    head = ["[RESULT] [214775.000001] Action name :action_1", "[RESULT] [214775.000002] Module name :mem"]
    tail = ["[RESULT] [214778.%06d] [action_1] mem Test 2: Each Memory location is filled with its own address" % i
            for i in range(8)] if later_tests else []
    tail += ["[RESULT] [214779.000001] Action name :action_2"] if closed else []
    return "\n".join(head + lines + tail) + "\n"


def test_a_mem_test_never_passed_fails_once_every_gpu_went_on():
    # RVS's mem prints no FAIL line: a GPU whose test found errors goes on to the next test without 'PASS'
    result = rvs.parse(_mem_log(drop_pass=4))
    assert result["filtered"] is False and result["complete"] is False     # the log ends inside Test 2
    assert any("no line for Test 2 report 1 and 7 more" in w for w in result["warnings"])
    verdict = judge(MI300X["rvs.mem_pass"], [result])
    assert verdict["status"] == "fail" and verdict["failing"] == ["action action_1,n 8,test 1"]
    assert judge(MI300X["rvs.mem_pass"], [rvs.parse(_mem_log())])["status"] == "pass"


def test_a_mem_log_ending_inside_a_test_is_not_complete_rather_than_failed():
    result = rvs.parse(_mem_log(drop_pass=4, later_tests=False))
    assert result["complete"] is False and not any(v is False for _s, v in _measures(result, "pass"))
    assert any("no line for Test 1 report 8" in w and "ends inside the action" in w for w in result["warnings"])
    closed = rvs.parse(_mem_log(drop_pass=4, later_tests=False, closed=True))
    assert [s for s, v in _measures(closed, "pass") if v is False] == [{"action": "action_1", "test": 1, "n": 8}]


def test_peqt_false_fails_naming_the_action():
    text = _text(PEQT).replace("[pcie_act_17] peqt true", "[pcie_act_17] peqt false")
    verdict = judge(MI300X["rvs.peqt_pass"], [rvs.parse(text)])
    assert verdict["status"] == "fail" and verdict["failing"] == ["action pcie_act_17"]


def test_pbqt_variants_fail_naming_the_pair():
    text = _text(PBQT)
    peers = rvs.parse(text.replace("[GPU:: 4 - 29122 - 0000:46:00.0] peers:true",
                                   "[GPU:: 4 - 29122 - 0000:46:00.0] peers:false"))
    verdict = judge(MI300X["rvs.pbqt_peers"], [peers])
    assert verdict["status"] == "fail"
    assert verdict["failing"] == ["action p2p-unidir-sequential-64MB,dst 29122,src 28851"]
    zero = rvs.parse(text.replace("48.914 GBps", "0.000 GBps"))
    assert judge(MI300X["rvs.pbqt_bandwidth"], [zero])["failing"] == [
        "action p2p-unidir-parallel-64MB,dst 29122,src 28851"]
    unmeasured = rvs.parse(text.replace("48.914 GBps duration: 1.470746", "(not measured) duration: 0.000000"))
    assert judge(MI300X["rvs.pbqt_measured"], [unmeasured])["status"] == "fail"
    assert len(_measures(unmeasured, "bandwidth")) == 1


# --- layouts without a capture (RVS's own log strings) ------------------------------------------------------

IET = """\
[RESULT] [1102597.157090] Action name :iet-620W-1K-rand-dgemm
[RESULT] [1102597.159274] Module name :iet
[RESULT] [1102597.333747] [iet-620W-1K-rand-dgemm] [GPU:: 28851] Power(W) 127.000000
[RESULT] [1102597.334457] [iet-620W-1K-rand-dgemm] [GPU:: 23018] Power(W) 123.000000
[RESULT] [1102602.333747] [iet-620W-1K-rand-dgemm] [GPU:: 28851] Power(W) 618.000000
[RESULT] [1102602.334457] [iet-620W-1K-rand-dgemm] [GPU:: 23018] Power(W) 621.000000
[RESULT] [1102657.372859] [iet-620W-1K-rand-dgemm] [GPU:: 23018] pass: TRUE
[RESULT] [1102657.372936] [iet-620W-1K-rand-dgemm] [GPU:: 28851] pass: {verdict}
[RESULT] [1102658.379728] Action name :iet-wait-750W-28K-rand-dgemm
[RESULT] [1102658.379781] Module name :iet
"""


def test_iet_reads_pass_verdicts_and_power_samples():
    result = rvs.parse(IET.format(verdict="TRUE"))
    action = "iet-620W-1K-rand-dgemm"
    assert _measures(result, "pass") == [({"action": action, "gpu": 23018}, True),
                                         ({"action": action, "gpu": 28851}, True)]
    assert _measures(result, "power_max") == [({"action": action, "gpu": 28851}, 618.0),
                                              ({"action": action, "gpu": 23018}, 621.0)]
    assert [a["name"] for a in result["actions"]] == [action, "iet-wait-750W-28K-rand-dgemm"]
    assert judge(MI300X["rvs.iet_pass"], [result])["status"] == "pass"
    failed = judge(MI300X["rvs.iet_pass"], [rvs.parse(IET.format(verdict="FALSE"))])
    assert failed["status"] == "fail" and failed["failing"] == ["action %s,gpu 28851" % action]


def test_a_gpu_without_its_final_line_fails_only_when_the_action_finished():
    lines = IET.format(verdict="TRUE").split("\n")
    unfinished = rvs.parse("\n".join(lines[:7]))          # ends before GPU 28851's verdict
    assert unfinished["complete"] is False and len(_measures(unfinished, "pass")) == 1
    finished = rvs.parse("\n".join(lines[:7] + lines[8:]))  # the next action started without it
    assert ({"action": "iet-620W-1K-rand-dgemm", "gpu": 28851}, False) in _measures(finished, "pass")
    assert judge(MI300X["rvs.iet_pass"], [finished])["status"] == "fail"


PEBB = """\
[RESULT] [1103843.610745] Action name :d2h-sequential-64MB
[RESULT] [1103843.610746] Module name :pebb
[RESULT] [1103843.610747] [d2h-sequential-64MB] pcie-bandwidth [CPU:: 0] @GPU distance:20 PCIe:20
[RESULT] [1103843.610763] [d2h-sequential-64MB] pcie-bandwidth [CPU:: 1] @GPU distance:52 PCIe:52
[INFO  ] [1103873.617888] [d2h-sequential-64MB] pcie-bandwidth [ 1/2] [CPU:: 0] @GPU h2d::false d2h::true 50.100 GBps
[RESULT] [1103903.617888] [d2h-sequential-64MB] pcie-bandwidth [ 1/2] [CPU:: 0] @GPU h2d::false d2h::true 56.298 GBps duration: 0.2047 secs
[RESULT] [1103903.617971] [d2h-sequential-64MB] pcie-bandwidth [ 2/2] [CPU:: 1] @GPU h2d::false d2h::true {second}
+=====================================================================+
|                 ROCm Validation Suite (RVS) Summary                 |
+=====================================================================+
""".replace("@GPU", "[GPU:: 2 - 28851 - 0000:05:00.0]")


def test_pebb_reads_final_transfers_and_flags_an_unmeasured_one():
    result = rvs.parse(PEBB.format(second="55.664 GBps duration: 0.213882 secs"))
    scope0, scope1 = ({"action": "d2h-sequential-64MB", "cpu": c, "gpu": 28851} for c in (0, 1))
    assert _measures(result, "bandwidth") == [(scope0, 56.298), (scope1, 55.664)]   # the INFO interval line is not
    assert [(link["cpu"], link["distance"]) for link in result["links"]] == [(0, 20), (1, 52)]
    assert result["complete"] is True and result["summary"] is True
    assert judge(MI300X["rvs.pebb_measured"], [result])["status"] == "pass"
    failed = judge(MI300X["rvs.pebb_measured"], [rvs.parse(PEBB.format(second="(not measured) duration: 0 secs"))])
    assert failed["status"] == "fail" and failed["failing"] == ["action d2h-sequential-64MB,cpu 1,gpu 28851"]
    # AMD's page cut the lines after 'GBps' ('56.298 GBps ...'): a RESULT line is final all the same
    cut = rvs.parse(PEBB.format(second="55.664 GBps ..."))
    assert _measures(cut, "bandwidth")[1] == (scope1, 55.664)


def test_a_transfer_missing_from_a_finished_action_is_not_measured():
    lines = PEBB.format(second="55.664 GBps duration: 0.213882 secs").split("\n")
    del lines[6]
    verdict = judge(MI300X["rvs.pebb_measured"], [rvs.parse("\n".join(lines))])
    assert verdict["status"] == "fail" and verdict["failing"] == ["action d2h-sequential-64MB,transfer 2/2"]


def _gpup_log(gpus):
    lines = ["[RESULT] [54433.732433] Action name :RVS-GPUP-TC1", "[RESULT] [54433.733858] Module name :gpup"]
    for gpu in gpus:
        lines += ["[RESULT] [54433.733992] [RVS-GPUP-TC1] gpup %d simd_count 1216" % gpu,
                  "[RESULT] [54433.733993] [RVS-GPUP-TC1] gpup %d 0 type 2" % gpu]
    return "\n".join(lines) + "\n"


def test_gpup_counts_the_gpus_it_lists_and_its_errors():
    result = rvs.parse(_gpup_log(GPU_IDS))
    assert _measures(result, "gpus") == [({}, 8.0)] and _measures(result, "errors") == [
        ({"action": "RVS-GPUP-TC1"}, 0.0)]
    assert judge(MI300X["rvs.gpup_gpus"], [result])["status"] == "pass"
    assert judge(MI300X["rvs.gpup_errors"], [result])["status"] == "pass"
    missing = judge(MI300X["rvs.gpup_gpus"], [rvs.parse(_gpup_log(GPU_IDS[:7]))])
    assert missing["status"] == "fail" and missing["value"] == 7.0
    errors = rvs.parse(_gpup_log(GPU_IDS) + "RVS-ERROR [GPUP] [RVS-GPUP-TC1] Properties not found for GPU 28851: x\n")
    assert judge(MI300X["rvs.gpup_errors"], [errors])["failing"] == ["action RVS-GPUP-TC1"]
    assert errors["errors"][0]["text"].startswith("RVS-ERROR [GPUP]")


SUMMARY = """\
+=====================================================================+
|                 ROCm Validation Suite (RVS) Summary                 |
+=====================================================================+
|                           System Overview                           |
+---------------------------------------------------------------------+
\r| Operating System                 | Ubuntu 22.04.5 LTS               |
\r| RVS version                      | 1.6.75                           |
\r| ROCm version                     | 7.2.1-81                         |
| GPUs                             | 2                                |
+---------------------------------------------------------------------+
| AMD Instinct MI300X - 28851      | AMD Instinct MI300X - 23018      |
| 0 - 2 - 0000:05:00.0             | 1 - 3 - 0000:26:00.0             |
+=====================================================================+
| Action Name                      | Module         | Result          |
+=====================================================================+
| gst-1215Tflops-4K4K8K-rand-fp8   | GST            | \x1b[32mPASS          \x1b[0m  |
| pcie_act_1                       | PEQT           | \x1b[31mFAIL          \x1b[0m  |
+---------------------------------------------------------------------+
"""


def test_a_log_of_several_modules_gives_one_result_per_module():
    peqt = [line for line in _text(PEQT).split("\n") if line != "..." and "pcie_act_2" not in line]
    text = _text(GST).replace("...\n", "") + "\n".join(peqt) + SUMMARY
    results = rvs.parse_all(text, "run.log")
    assert [r["test"] for r in results] == ["gst", "peqt"]
    gst, peqt = results
    assert gst["version"] == "1.6.75" and gst["rocm_version"] == "7.2.1-81" and gst["summary"] is True
    info = {g["id"]: g for g in gst["gpu_info"]}
    assert info[23018] == {"id": 23018, "node": 3, "index": 1, "bdf": "0000:26:00.0", "name": "AMD Instinct MI300X"}
    assert _measures(gst, "result") == [({"action": "gst-1215Tflops-4K4K8K-rand-fp8"}, True)]
    assert ({"action": "pcie_act_1"}, False) in _measures(peqt, "result")
    assert all(m["scope"]["action"].startswith("gst") for m in gst["measurements"] if "action" in m["scope"])
    first = rvs.parse(text, "run.log")
    assert first["test"] == "gst" and [r["test"] for r in first["others"]] == ["peqt"]
    assert any("2 RVS modules (gst, peqt)" in w for w in first["warnings"])
    verdicts = {key: judge(MI300X[key], [first] + first["others"])["status"] for key in ("rvs.gst_met",
                                                                                         "rvs.peqt_pass")}
    assert verdicts == {"rvs.gst_met": "pass", "rvs.peqt_pass": "pass"}


OLD = """\
[RESULT] [ 5301.123   ] [gpustress-9000-sgemm-false] gst 28851 GFLOPS 9123.456000 Target stress : 9000.000000 met :FALSE
[RESULT] [ 5302.1     ] [p2p-old] p2p 28851 23018 peers:true distance:15 xGMI:15
[RESULT] [ 5330.2     ] [p2p-old] p2p-bandwidth  [1/1] 28851 23018  bidirectional: false  21.500 GBps  duration: 1.2 sec
[RESULT] [ 5331.3     ] [h2d-old] pcie-bandwidth  [1/1]  CPU ::0 GPU ::28851  h2d::true  d2h::false  24.100 GBps  duration: 1.0 sec
"""


def test_the_pre_2024_line_layouts_are_read():
    gst, pbqt, pebb = rvs.parse_all(OLD)
    assert _measures(gst, "met") == [({"action": "gpustress-9000-sgemm-false", "gpu": 28851}, False)]
    assert _measures(gst, "target_gflops")[0][1] == 9000.0
    assert _measures(pbqt, "peers") == [({"action": "p2p-old", "src": 28851, "dst": 23018}, True)]
    assert _measures(pbqt, "bandwidth") == [({"action": "p2p-old", "src": 28851, "dst": 23018}, 21.5)]
    assert _measures(pebb, "bandwidth") == [({"action": "h2d-old", "cpu": 0, "gpu": 28851}, 24.1)]


BABEL = """\
[RESULT] [302411.15197 ] Action name :babel-double-825MiB
[RESULT] [302411.96856 ] Module name :babel
[RESULT] [302411.735270] [babel-double-825MiB] [GPU:: 42583] Starting the Babel memory stress test
[RESULT] [302411.735337] Running kernels 2000 times, Precision: double
[RESULT] [302411.735378] Array size: 6920.6 MB (=6.9 GB), Total size: 20761.8 MB (=20.8 GB)

[RESULT] [302446.903905]
---------------------------------------------------------------------------------
GPU Id      Function    MBytes/sec     Max MB/s       Min MB/s       Avg MB/s
---------------------------------------------------------------------------------
42583       Copy        6224488.986    6224488.986    6037686.546    6150313.849
42583       Triad       6031416.066    6031416.066    5879289.313    5950804.403
---------------------------------------------------------------------------------
"""


def test_the_babel_module_table_is_read_per_gpu_and_kernel():
    result = rvs.parse(BABEL)
    assert result["test"] == "babel" and result["gpus"] == [42583]
    triad = [m for m in result["measurements"] if m["case"] == "Triad"]
    assert [(m["metric"], m["unit"], m["value"]) for m in triad] == [
        ("bandwidth", "MB/s", 6031416.066), ("max_bandwidth", "MB/s", 6031416.066),
        ("min_bandwidth", "MB/s", 5879289.313), ("avg_bandwidth", "MB/s", 5950804.403)]
    assert triad[0]["scope"] == {"action": "babel-double-825MiB", "gpu": 42583}
    assert not any("not read" in w for w in result["warnings"])
    # AMD's BabelStream criteria name the standalone tool (tool babelstream): the RVS module is not judged by them
    assert judge(criteria_of(VIEW, "MI300X")[0], [result])["status"] == "unknown"


def test_older_babel_tables_and_triad_only_blocks_are_read():
    old = BABEL.replace("MBytes/sec     Max MB/s       Min MB/s       Avg MB/s",
                        "MBytes/sec     Min (sec)   Max         Average")
    old = old.replace("6224488.986    6037686.546    6150313.849", "0.00110     0.00113     0.00111")
    old = old.replace("6031416.066    5879289.313    5950804.403", "0.00170     0.00172     0.00171")
    result = rvs.parse(old)
    copy = {m["metric"]: m["value"] for m in result["measurements"] if m["case"] == "Copy"}
    assert copy == {"bandwidth": 6224488.986, "min_runtime": 0.0011, "max_runtime": 0.00113, "avg_runtime": 0.00111}
    triad = BABEL.split("\n[RESULT] [302446.903905]", maxsplit=1)[0] + (
        "\n[RESULT] [302446.903905] --------------------------------\nGPU Id: 42583\nRuntime (seconds): 0.41234\n"
        "Bandwidth (GB/s):  6012.345\n")
    assert [(m["case"], m["metric"], m["unit"], m["value"]) for m in rvs.parse(triad)["measurements"][:2]] == [
        ("Triad", "bandwidth", "GB/s", 6012.345), ("Triad", "runtime", "s", 0.41234)]


def test_launcher_prefixes_are_removed():
    text = "".join("[1,0]<stdout>:%s\n" % line for line in _text(GST).split("\n"))
    result = rvs.parse(text)
    assert result["prefixes"] and result["measurements"] == rvs.parse(_text(GST))["measurements"]


# --- the cards' RVS criteria ---------------------------------------------------------------------------------


def test_the_cards_rvs_criteria_are_complete_and_cite_amds_pages():
    cards = {entry["name"]: entry for entry in VIEW["generations"]}
    assert "MI308X" not in cards or "rvs" not in cards["MI308X"]
    assert set(cards["MI355X"]["rvs"]) == {"unknown", "source"} and "mi355x.md" in cards["MI355X"]["rvs"]["source"]
    for name in ("MI210", "MI250X", "MI300A", "MI300X", "MI325X"):
        criteria = cards[name]["rvs"]
        ids = [c["id"] for c in criteria]
        assert len(ids) == len(set(ids)) and {"gst_met", "iet_pass", "mem_pass", "pebb_measured", "peqt_pass",
                                              "pbqt_peers", "gpup_gpus"} <= set(ids), name
        for c in criteria:
            assert c["test"] in rvs.MODULES and c["unit"] in ("bool", "count", "GB/s", "TB/s"), (name, c["id"])
            assert sum(b in c for b in ("min", "max", "equals")) == 1 and c["per"] in ("each", "node")
            assert c["command"].startswith("rvs -c ${RVS_CONF}/")
            for source in c["sources"]:
                assert source["document"].startswith("ROCm/system-acceptance-docs docs/") and source["says"]
                assert len(source["commit"]) == 40 and source["section"]
            assert c["sources"][0]["document"].endswith(".md") and "docs/gpus/" in c["sources"][0]["document"]
    bounds = {name: {c["id"]: c.get("min", c.get("max", c.get("equals"))) for c in cards[name]["rvs"]}
              for name in cards if isinstance(cards[name].get("rvs"), list)}
    assert bounds["MI250X"]["mem_bandwidth"] == 1050 and bounds["MI300A"]["mem_bandwidth"] == 2.0
    assert "mem_bandwidth" not in bounds["MI300X"] and "mem_bandwidth" not in bounds["MI210"]   # '~2TB/s', '~1.1TB/s'
    assert {n: b["gpup_gpus"] for n, b in bounds.items()} == {"MI210": 4, "MI250X": 8, "MI300A": 4, "MI300X": 8,
                                                              "MI325X": 8}
    assert all(b["gst_met"] is True and b["pbqt_bandwidth"] == 0.001 for b in bounds.values())
