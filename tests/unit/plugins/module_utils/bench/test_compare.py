"""The article's comparison (module_utils/bench/compare.py, filter benchmark_baseline): the figures a run is compared
by, read off real captures by hand; deltas, plan rankings and baseline verdicts on real captures and on the stand-in
simulator's runs (sim/bench_standin.py: not rccl-tests, figures from its model)."""

import importlib.util
import json
import os

import pytest

from ansible_collections.topotune.instinct.plugins.filter.benchmark_baseline import benchmark_baseline
from ansible_collections.topotune.instinct.plugins.module_utils.bench import compare
from ansible_collections.topotune.instinct.plugins.module_utils.bench.rccl import parse_perf

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
SMI = os.path.join(REPO, "tests", "fixtures", "smi")
MI300X = os.path.join(SMI, "rccl-tests_all_reduce_perf__mi300x-8gpu-1node-mpi__rocm-blogs-rccl-xgmi.txt")
MI355X = os.path.join(SMI, "rccl-tests_all_reduce_perf__mi355x-8gpu-1node__oci-gpu-quickstarts.txt")
AZURE_VF = os.path.join(SMI, "rccl-tests_all_reduce_perf__mi300x-vf-8gpu-azure__rccl-issue1562.txt")
_SPEC = importlib.util.spec_from_file_location("sim_bench_standin_compare", os.path.join(REPO, "sim", "bench_standin.py"))
standin = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(standin)
GIB8 = 8 << 30


def _parse(path):
    with open(path, encoding="utf-8") as handle:
        return parse_perf(handle.read(), path)


def _standin(slow=1.0, latency=1.0, **kwargs):
    faults = {"n1": {"slow": slow}} if slow != 1.0 else {}
    text, _code = standin.render(["n1"], 8, faults=faults, latency_factor=latency, **kwargs)
    return parse_perf(text, "stand-in")


def test_figures_of_the_mi300x_capture_are_its_8gib_in_place_row():
    fig = compare.figures(_parse(MI300X))
    # the capture's 8589934592 row: in-place 47323 us, 317.66 GB/s
    assert (fig["size"], fig["column"], fig["busbw"], fig["time_us"]) == (GIB8, "in_place", 317.66, 47323)
    assert fig["sizes"]["8"] == {"busbw": 0.0, "time_us": 16.53}
    assert fig["n_ranks"] == 8 and not fig["failed"]


def test_a_run_without_the_8gib_row_is_compared_at_its_largest_size():
    parsed = _parse(AZURE_VF)
    fig = compare.figures(parsed)
    assert fig["size"] == max(r["size"] for r in parsed["rows"]) < GIB8


def test_delta_between_two_real_runs_matches_the_captures():
    d = compare.delta(compare.figures(_parse(MI300X)), compare.figures(_parse(MI355X)))
    # 317.66 -> 407.26 GB/s, 47323 -> 36911 us at 8 GiB (in-place); the MI355X capture has only 8 and 16 GiB rows,
    # so no small message is compared
    assert d["busbw_pct"] == pytest.approx(28.21, abs=0.01)
    assert d["time_pct"] == pytest.approx(-22.0, abs=0.01)
    assert str(GIB8) in d["sizes"] and d["small_time_pct"] is None
    assert d["verdict"] == "better" and "+28.2 %" in d["reason"]


def test_delta_is_unknown_when_the_other_run_lacks_the_headline_size():
    d = compare.delta(compare.figures(_parse(MI300X)), compare.figures(_parse(AZURE_VF)))
    assert d["verdict"] == "unknown" and "8 GiB" in d["reason"]


def test_delta_is_unknown_when_a_run_failed_validation():
    bad = compare.figures(_standin())
    bad["failed"] = True
    d = compare.delta(compare.figures(_standin()), bad)
    assert d["verdict"] == "unknown" and "failed validation" in d["reason"]


def test_plans_rank_numa_over_no_binding_in_the_standins_cross_numa_model():
    unbound = compare.figures(_standin(slow=0.8))
    bound = compare.figures(_standin())
    out = compare.compare_plans({"none": {"figures": unbound}, "numa": {"figures": bound}, "l3": {"figures": bound}},
                                deployed="l3")
    assert out["reference"] == "none" and out["best"] == "numa"
    assert out["deltas"]["numa"]["verdict"] == "better"
    assert out["deltas"]["numa"]["busbw_pct"] == pytest.approx(25.0, abs=0.3)
    assert out["recommendation"].startswith("numa: busbw at 8 GiB +2")
    # l3 ties numa: the deployed l3 is not called slower
    assert "deployed" not in out["recommendation"]
    deployed_none = compare.compare_plans({"none": {"figures": unbound}, "numa": {"figures": bound}}, deployed="none")
    assert "the deployed plan (none) is slower than numa" in deployed_none["recommendation"]


def test_plans_that_measure_the_same_are_called_the_same():
    fig = compare.figures(_standin())
    out = compare.compare_plans({"none": {"figures": fig}, "numa": {"figures": fig}})
    assert out["deltas"]["numa"]["verdict"] == "same"
    assert out["recommendation"].startswith("no plan beats no binding by 5 % or more at 8 GiB")


def test_plans_without_figures_are_named_not_ranked():
    fig = compare.figures(_standin())
    out = compare.compare_plans({"none": {"error": "mpirun: not found"}, "numa": {"figures": fig}})
    assert out["reference"] == "numa" and out["deltas"] == {}
    empty = compare.compare_plans({"none": {"error": "mpirun: not found"}})
    assert empty["best"] is None and "none: mpirun: not found" in empty["recommendation"]


def test_a_slow_governor_shows_as_small_message_time_not_busbw():
    before = compare.figures(_standin(latency=standin.GOVERNOR_LATENCY))
    after = compare.figures(_standin())
    d = compare.delta(before, after)
    assert abs(d["busbw_pct"]) < 1 and d["small_time_pct"] < -25
    assert d["verdict"] == "better" and "small-message time" in d["reason"]


def _run(parsed, cmd=("all_reduce_perf",)):
    return {"result": parsed, "cmd": list(cmd), "binding": None}


def test_baseline_is_recorded_then_compared_then_replaced():
    first = benchmark_baseline(_run(_standin(latency=standin.GOVERNOR_LATENCY)), "", "n1", "2026-12-07T10:00:00+00:00")
    assert first["status"] == "recorded" and first["stored"]
    assert first["record"]["schema_version"] == 1 and first["record"]["figures"]["size"] == GIB8
    second = benchmark_baseline(_run(_standin()), json.dumps(first["record"]), "n1", "2026-12-07T11:00:00+00:00")
    assert second["status"] == "improved" and "2026-12-07T10:00:00+00:00" in second["reason"]
    assert second["stored"] and second["record"]["recorded_at"] == "2026-12-07T11:00:00+00:00"
    kept = benchmark_baseline(_run(_standin(slow=0.5)), json.dumps(first["record"]), "n1", "later", keep=True)
    assert kept["status"] == "regressed" and kept["record"] is None and not kept["stored"]


def test_a_damaged_or_foreign_baseline_is_named_and_never_overwritten():
    damaged = benchmark_baseline(_run(_standin()), "{not json", "n1", "now")
    assert damaged["status"] == "unknown" and "not JSON" in damaged["reason"] and damaged["record"] is None
    foreign = benchmark_baseline(_run(_standin()), json.dumps({"schema_version": 9}), "n1", "now")
    assert foreign["status"] == "unknown" and "schema 1" in foreign["reason"] and foreign["record"] is None


def test_a_run_that_failed_validation_never_becomes_the_baseline():
    text, _code = standin.render(["n1"], 8, faults={"n1": {"wrong": True, "at": 1 << 20}})
    out = benchmark_baseline(_run(parse_perf(text, "stand-in")), "", "n1", "now")
    assert out["record"] is None and not out["stored"]
    nothing = benchmark_baseline({"result": None, "skipped": True}, "", "n1", "now")
    assert nothing["status"] == "unknown" and nothing["record"] is None
