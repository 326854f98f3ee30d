"""bench/cost_model.py: the formulas docs/performance.md states, on the figures it quotes."""

import importlib.util
import os

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
_SPEC = importlib.util.spec_from_file_location("cost_model", os.path.join(REPO, "bench", "cost_model.py"))
cost = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(cost)


@pytest.mark.parametrize("nodes,per_node,cores,expected", [
    (64, 9.7 / 64, 2, 9.7),            # the measured fast drift at 64 nodes comes back
    (10000, 9.7 / 64, 2, 1515.625),    # linear in nodes
    (10000, 9.7 / 64, 16, 189.453125),  # linear in cores (the optimistic bound)
])
def test_push_is_linear_in_nodes_and_cores(nodes, per_node, cores, expected):
    assert cost.push(nodes, per_node, 2, cores) == pytest.approx(expected)


def test_awx_slices_divide_the_nodes_not_the_overhead_or_the_report():
    # 10,000 nodes in 16 slices: 625 nodes each, then the job overhead and the report over all 10,000
    assert cost.awx(10000, 2.0, 16, 60.0, 0.005) == pytest.approx(625 * 2.0 + 60 + 50)
    assert cost.awx(10, 1.0, 4, 0.0, 0.0) == 3.0  # the largest slice sets the time


def test_local_costs_and_latency():
    r = cost.local(10000, 0.1, 120.0, 60.0, 60.0, 60.0, 40, 2.0, 15)
    assert r["fleet_cpu_cores"] == pytest.approx(10000 * 0.1 / 120)
    assert r["samples_per_s"] == pytest.approx(10000 * 40 / 60)
    assert r["disk_gb"] == pytest.approx(10000 * 40 / 60 * 15 * 86400 * 2 / 1e9)
    assert r["latency_s"] == pytest.approx(120 + 60 + 0.1 + 60) and r["alert_latency_s"] == r["latency_s"] + 60


def test_table_prints_every_engine(capsys):
    cost.main(["--nodes", "64,10000", "--cores", "2", "--slices", "16"])
    out = capsys.readouterr().out
    assert "| 10000 | 2 | 22.4 min | 25.3 min | 5.6 h |" in out
    assert "| 10000 | 16 |" in out and "| 1000 | 0.57 |" not in out and "| 10000 | 5.67 |" in out
