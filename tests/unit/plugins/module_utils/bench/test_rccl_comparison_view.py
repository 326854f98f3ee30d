"""The HTML report's benchmark section keeps the comparison's `warn` (AMD's pages disagree, run between them)."""

import os

from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import compare_busbw, parse_perf
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.report import data as report_data

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
MI355X = os.path.join(REPO, "tests", "fixtures", "smi", "rccl-tests_all_reduce_perf__mi355x-8gpu-1node__oci-gpu-quickstarts.txt")


def test_benchmark_view_shows_warn_as_warn():
    expectations = load_knowledge("rccl_expectations")
    with open(MI355X) as handle:
        result = parse_perf(handle.read().replace("232.72  407.26", "232.72  320.00"))
    comparison = compare_busbw(result, expectations, "MI355X")
    assert comparison["status"] == "warn"
    view = report_data._benchmark_view({"skipped": False, "msg": "parsed", "result": result, "comparison": comparison})
    assert view["comparison"]["status"] == "warn" and "AMD's documents disagree" in view["comparison"]["reason"]
