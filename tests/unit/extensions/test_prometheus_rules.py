"""The shipped alert rules (extensions/prometheus/topotune-rules.yml) against the project: the checks whose failure is
critical are real check ids, every rule has a promtool case that fires and one that does not, docs/fleet-metrics.md
lists every alert. promtool itself runs them in tests/integration/test_drift_exporter.py."""

import json
import os
import re
import sys

import yaml

from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks
from ansible_collections.topotune.instinct.plugins.module_utils.state import drift_metrics
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
sys.path.insert(0, os.path.join(REPO, "sim"))
import sysroot as sim  # noqa: E402 - sim/ is not a package

RULES = os.path.join(REPO, "extensions", "prometheus", "topotune-rules.yml")
RULES_TEST = os.path.join(REPO, "tests", "integration", "prometheus", "topotune-rules.test.yml")
# What a failure of these means: a GPU or its memory failing, or a GPU gone (issue 22, "Alert rules")
CRITICAL = {"gpu_ecc_errors", "gpu_retired_pages", "gpu_kernel_log", "pci_accelerators"}
SEVERITY = re.compile(r'^\{\{ if match "\^\(([a-z0-9_|]+)\)\$" \$labels\.check \}\}critical\{\{ else \}\}warning\{\{ end \}\}$')


def load(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def rules():
    return {rule["alert"]: rule for group in load(RULES)["groups"] for rule in group["rules"]}


def knowledge():
    data = {name: load_knowledge(name) for name in ("gpu_generations", "pcie_health", "gpu_health")}
    return dict(data["gpu_generations"], pcie_health=data["pcie_health"], gpu_health=data["gpu_health"])


def check_ids(tmp_path, profile):
    """The ids the platform checks give on a simulated node of ``profile`` (what the node-local check exports)."""
    root = tmp_path / profile
    sim.build(profile, str(root))
    facts = platform_checks.gather(str(root))
    return {item["id"] for item in platform_checks.run_checks(facts, json.loads(json.dumps(knowledge())), {})}


def test_critical_checks_are_one_list_of_real_check_ids(tmp_path):
    severity = " ".join(rules()["TopotunePlatformCheckFailing"]["labels"]["severity"].split())
    match = SEVERITY.match(severity)
    assert match, severity
    listed = set(match.group(1).split("|"))
    assert listed == CRITICAL
    ids = check_ids(tmp_path, "mi300x-8gpu-2cpu") | check_ids(tmp_path, "fault-ecc-uncorrectable")
    assert listed <= ids, sorted(listed - ids)
    # the other checks, failing, are warnings (no other severity is decided here)
    assert len(ids - listed) > 20


def test_every_rule_has_a_case_that_fires_and_one_that_does_not():
    cases = {}
    for test in load(RULES_TEST)["tests"]:
        for case in test.get("alert_rule_test") or []:
            cases.setdefault(case["alertname"], set()).add(bool(case.get("exp_alerts")))
    assert {name: cases.get(name, set()) for name in rules()} == {name: {True, False} for name in rules()}


def test_severities_and_the_metrics_the_rules_read():
    found = rules()
    assert {name: rule["labels"]["severity"] for name, rule in found.items() if name != "TopotunePlatformCheckFailing"} == {
        "TopotuneDriftPresent": "warning", "TopotuneDriftCheckStale": "warning", "TopotuneDriftCheckTimerOff": "warning",
        "TopotuneDriftCheckFailing": "warning", "TopotuneManifestMissing": "warning",
        "TopotuneTextfileUnreadable": "warning", "TopotuneMetricsAbsent": "warning",
        "TopotuneMetricsAbsentEverywhere": "warning", "TopotuneRebootPending": "info"}
    # the metrics vanish: node_exporter's own error gauge, and the last check's end time the checker writes
    assert found["TopotuneTextfileUnreadable"]["expr"] == "node_textfile_scrape_error == 1"
    written = {name for name, _kind, _help, _samples in drift_metrics.check({"manifest": "/nonexistent", "sysroot": "/nonexistent",
                                                                            "knowledge": "/nonexistent"})[0]}
    assert "topotune_drift_check_last_end_time_seconds" in written
    assert "absent_over_time(topotune_drift_check_last_end_time_seconds[1h])" in found["TopotuneMetricsAbsentEverywhere"]["expr"]
    assert "present_over_time(topotune_drift_check_last_end_time_seconds[1d])" in found["TopotuneMetricsAbsent"]["expr"]
    assert found["TopotuneDriftCheckTimerOff"]["expr"] == "topotune_drift_check_interval_seconds == 0"
    assert "topotune_drift_check_interval_seconds" in written


def test_docs_list_every_alert():
    with open(os.path.join(REPO, "docs", "fleet-metrics.md"), encoding="utf-8") as handle:
        text = handle.read()
    assert [name for name in rules() if "| `%s` |" % name not in text] == []
