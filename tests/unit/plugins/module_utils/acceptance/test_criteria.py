"""The judging of parsed acceptance-tool results against criteria (module_utils/acceptance/criteria.py)."""

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.common import (
    clean_lines,
    is_cut,
    measurement,
    new_result,
)
from ansible_collections.topotune.instinct.plugins.module_utils.acceptance.criteria import convert, criteria_of, judge

SOURCE = [{"document": "ROCm/system-acceptance-docs docs/gpus/mi300x.md", "section": "Performance Benchmarks",
           "commit": "e42af240cdbfdeae12d018b3df44d3af81cfc50b", "says": "Pass: >= 3,885,301 MB/s"}]
TRIAD = {"id": "triad", "tool": "babelstream", "test": "stream", "case": "Triad", "metric": "bandwidth",
         "unit": "MB/s", "min": 3885301, "per": "each", "sources": SOURCE}


def _run(*values, complete=True):
    result = new_result("babelstream", "stream", "out")
    result["complete"] = complete
    result["measurements"] = [measurement("bandwidth", "GB/s", v, case="Triad", gpu=i) for i, v in enumerate(values)]
    return result


def test_every_measurement_meets_a_minimum_in_the_criterions_unit():
    verdict = judge(TRIAD, [_run(3950.0, 3890.0)])
    assert verdict["status"] == "pass" and verdict["value"] == pytest.approx(3890000.0)
    assert verdict["margin_pct"] == pytest.approx(0.12, abs=0.01)
    assert verdict["expected"] == "stream Triad bandwidth: >= 3885301 MB/s on every measurement"
    assert verdict["source"].startswith("ROCm/system-acceptance-docs docs/gpus/mi300x.md (e42af24): Pass")
    failed = judge(TRIAD, [_run(3950.0, 3000.0)])
    assert failed["status"] == "fail" and failed["failing"] == ["gpu 1"] and failed["margin_pct"] < 0
    assert failed["observed"] == "1 of 2 miss the bound: gpu 1 3000000 MB/s"


def test_missing_output_or_case_is_unknown_with_the_reason():
    assert judge(TRIAD, [])["observed"] == "no babelstream stream output"
    other = dict(TRIAD, case="Dot")
    assert judge(other, [_run(4000.0, complete=False)])["observed"] == (
        "the babelstream stream output has no bandwidth for Dot (the output was cut)")
    assert judge(other, [_run(4000.0)])["status"] == "unknown"


def test_boolean_and_maximum_bounds():
    met = {"id": "gst", "tool": "rvs", "test": "gst", "case": None, "metric": "met", "unit": "bool", "equals": True}
    run = new_result("rvs", "gst", "out")
    run["measurements"] = [measurement("met", "bool", True, gpu=1), measurement("met", "bool", False, gpu=2)]
    verdict = judge(met, [run])
    assert verdict["status"] == "fail" and verdict["failing"] == ["gpu 2"] and verdict["margin_pct"] is None
    latency = {"id": "lat", "tool": "perftest", "test": "ib_send_lat", "case": None, "metric": "t_avg", "unit": "us",
               "max": 3.0, "per": "node"}
    run = new_result("perftest", "ib_send_lat", "out")
    run["measurements"] = [measurement("t_avg", "us", 2.4)]
    assert judge(latency, [run])["status"] == "pass" and judge(latency, [run])["margin_pct"] == pytest.approx(20.0)


def test_units_convert_within_a_kind_only():
    assert convert(400.0, "Gb/s", "GB/s") == pytest.approx(50.0)
    assert convert(1.0, "TFLOPS", "GFLOPS") == pytest.approx(1000.0)
    with pytest.raises(ValueError):
        convert(1.0, "GB/s", "GFLOPS")


def test_criteria_of_flattens_a_cards_tools():
    view = {"generations": [{"name": "MI300X", "babelstream": [TRIAD], "rvs": [dict(TRIAD, id="x", tool="rvs")]},
                            {"name": "MI210", "unknown": "AMD states none"}]}
    keys = [c["key"] for c in criteria_of(view, "MI300X")]
    assert keys == ["babelstream.triad", "rvs.x"]
    assert criteria_of(view, "MI210") == [] and criteria_of(view, "MI999") == []


def test_lines_are_cleaned_and_cuts_recognized():
    assert clean_lines("a\r\n\x1b[1mb\x1b[0m \rc\x07") == [(1, "a"), (2, "b"), (3, "c")]
    assert all(is_cut(line) for line in ("...", " .... ", "…", "<SNIP>……"))
    assert not is_cut("Test 1 ... done")
