"""The node-local drift check judges the node by the options bring-up recorded (role platform_checks' record,
/etc/topotune/platform-checks.json), not by a copy of them: the drift_exporter_* variables only override it."""

import json

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.checks import platform_checks as pc
from ansible_collections.topotune.instinct.plugins.module_utils.state import drift_metrics
from ansible_collections.topotune.instinct.plugins.plugin_utils.core.knowledge import load_knowledge
from ansible_collections.topotune.instinct.plugins.plugin_utils.fleet import drift_exporter

# the configuration build_config gives for the role's defaults (no override set)
DEFAULT_OVERRIDES = {"generation": "", "gpu_count": 0, "expected": {}, "virtualization_host": False, "cpu_governor": "",
                     "transparent_hugepage": "", "skip": []}
ROLE_OPTIONS = dict({"sysroot": "/", "textfile_dir": "/var/lib/prometheus/node-exporter",
                     "manifest": "/etc/topotune/manifest.json", "interval_seconds": 120, "randomized_delay_seconds": 60,
                     "boot_delay_seconds": 60, "timer_enabled": True}, **DEFAULT_OVERRIDES)


def _config(tmp_path, **overrides):
    config = drift_metrics.build_config(dict(ROLE_OPTIONS, **overrides), "/usr/local/lib/topotune/knowledge.json")
    return dict(config, platform_checks_record=str(tmp_path / "platform-checks.json"))


def _record(tmp_path, **options):
    (tmp_path / "platform-checks.json").write_text(pc.record_text(dict(
        {"generation": None, "gpu_count": 0, "expected": {}, "cpu_governor": "", "transparent_hugepage": "",
         "virtualization_host": False, "skip": []}, **options)))


def test_the_configuration_points_at_the_record():
    config = drift_metrics.build_config(ROLE_OPTIONS, "/k.json")
    assert config["platform_checks_record"] == pc.RECORD == "/etc/topotune/platform-checks.json"


def test_the_recorded_options_are_the_checks_and_a_later_option_needs_no_variable(tmp_path):
    _record(tmp_path, gpu_count=8, skip=["smt"], expected={"rocm_version": "6.4.*"}, virtualization_host=True,
            rdma_gid_index=3)
    options = drift_metrics.check_options(_config(tmp_path))
    # rdma_gid_index came after role drift_exporter's variables: the record alone carries it to the node-local check
    assert options == {"generation": None, "gpu_count": 8, "expected": {"rocm_version": "6.4.*"}, "cpu_governor": "",
                       "transparent_hugepage": "", "virtualization_host": True, "rdma_gid_index": 3, "skip": ["smt"]}
    assert "rdma_gid_index" not in drift_metrics.OVERRIDES
    # every recorded option reaches the checks, whatever drift_exporter declares
    assert set(options) == set(pc.RECORDED)


def test_an_override_other_than_the_default_wins_over_the_record(tmp_path):
    _record(tmp_path, gpu_count=8, skip=["smt"], cpu_governor="performance")
    options = drift_metrics.check_options(_config(tmp_path, gpu_count=4, skip=["numa_nps"]))
    assert options["gpu_count"] == 4 and options["skip"] == ["numa_nps"]
    assert options["cpu_governor"] == "performance"  # the default "" overrides nothing


def test_without_a_record_the_overrides_and_defaults_apply(tmp_path):
    options = drift_metrics.check_options(_config(tmp_path, gpu_count=8))
    assert options["gpu_count"] == 8 and options["skip"] == [] and options["generation"] is None


def test_a_configuration_from_before_the_record_keeps_its_options():
    old = {"platform_checks": {"gpu_count": 8, "skip": []}}
    assert drift_metrics.check_options(old)["gpu_count"] == 8


def test_an_unreadable_record_fails_the_platform_stage_only(tmp_path):
    (tmp_path / "platform-checks.json").write_text("{truncated")
    knowledge = tmp_path / "knowledge.json"
    knowledge.write_text(json.dumps(load_knowledge("gpu_generations")))
    config = dict(_config(tmp_path), sysroot=str(tmp_path), knowledge=str(knowledge),
                  manifest=str(tmp_path / "manifest.json"), grub_dropin=None)
    with pytest.raises(pc.PlatformChecksError, match="platform-checks.json is not JSON"):
        drift_metrics.check_options(config)
    _families, errors = drift_metrics.check(config)
    assert "platform-checks.json is not JSON" in errors["platform_checks"] and "manifest" not in errors


def test_the_overrides_are_declared_from_the_platform_checks_declaration():
    for name in drift_metrics.OVERRIDES:
        option = drift_exporter.OPTIONS[name]
        check = pc.OPTIONS[name]
        assert option["type"] == (check.get("role") or {}).get("type", check["type"]), name
        assert option["default"].startswith("{{ platform_checks_%s | default(" % name), name
    assert set(drift_metrics.OVERRIDES) <= set(pc.RECORDED)
