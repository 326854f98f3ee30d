"""report_files / drift_reports / drift_line: every host's report built on the controller for one write."""

import json

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.filter.drift_line import drift_line
from ansible_collections.topotune.instinct.plugins.filter.drift_reports import drift_reports
from ansible_collections.topotune.instinct.plugins.filter.report_files import report_files

ITEM = {"owner": "kernel_tuning", "kind": "value", "item": "proc/sys/kernel/numa_balancing", "expected": "0", "observed": "1"}


def test_report_files_layout_is_to_nice_json_with_a_final_newline(tmp_path):
    entries = report_files({"n2": {"b": 1, "a": [1]}, "n1": {}}, str(tmp_path / "drift"))
    assert [e["path"] for e in entries] == [str(tmp_path / "drift" / "n1.json"), str(tmp_path / "drift" / "n2.json")]
    assert entries[1]["content"] == '{\n    "a": [\n        1\n    ],\n    "b": 1\n}\n'
    assert json.loads(entries[1]["content"]) == {"a": [1], "b": 1} and entries[1]["mode"] == "0644"


def test_report_files_expands_home_and_relative_directories(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert report_files({"a": {}}, "~/checks")[0]["path"] == str(tmp_path / "checks" / "a.json")
    assert report_files({"a": {}}, "out")[0]["path"] == str(tmp_path / "out" / "a.json")


@pytest.mark.parametrize("documents,directory,message", [
    ([], "/out", "expects a mapping"),
    ({"a/b": {}}, "/out", "cannot be a file name"),
    ({"..": {}}, "/out", "cannot be a file name"),
    ({"a": {}}, "", "must be a path"),
])
def test_report_files_rejects_names_that_would_escape_the_directory(documents, directory, message):
    with pytest.raises(AnsibleFilterError, match=message):
        report_files(documents, directory)


HOSTVARS = {
    "clean": {"__topotune_drift_fast": {"checked": 21, "drifted": [], "summary": "ok"}},
    "drifted": {"__topotune_drift_fast": {"checked": 21, "drifted": [ITEM]}},
    "corrected": {"__topotune_drift_fast": {"checked": 21, "drifted": [ITEM]},
                  "__topotune_drift_corrected": {"checked": 21, "drifted": [dict(ITEM, corrected=True)]}},
    "failed_before": {"__topotune_drift_fast": {"skipped": True}},
    "nothing": {},
}


@pytest.mark.parametrize("host,checked,drifted", [
    ("clean", 21, []),
    ("drifted", 21, [ITEM]),
    ("corrected", 21, [dict(ITEM, corrected=True)]),
    ("failed_before", 0, []),
    ("nothing", 0, []),
])
def test_drift_reports_fast_mode_takes_the_correction_first(host, checked, drifted):
    report = drift_reports([host], HOSTVARS, "fast")[host]
    assert report == {"host": host, "mode": "fast", "checked": checked, "drifted": drifted}


def test_drift_reports_full_mode_reads_the_capture():
    capture = {"hosts": {"a": {"checked": "68", "drifted": [ITEM]}}}
    reports = drift_reports(["a", "b"], {"a": {}, "b": {}}, "full", capture=capture)
    assert reports["a"] == {"host": "a", "mode": "full", "checked": 68, "drifted": [ITEM]}
    assert reports["b"]["drifted"] == [] and reports["b"]["checked"] == 0


def test_drift_reports_rejects_an_unknown_mode():
    with pytest.raises(AnsibleFilterError, match="fast or full"):
        drift_reports(["a"], {}, "slow")


def test_drift_line_does_not_repeat_the_owner_of_a_full_mode_item():
    report = {"host": "n1", "checked": 24, "drifted": [{"owner": "rocm_env", "item": "rocm_env : Write the env file"}]}
    assert drift_line(report) == "n1: 1 drifted of 24 checked (rocm_env : Write the env file)"


def test_drift_line_names_the_node_and_its_items():
    report = {"host": "n7", "checked": 21, "drifted": [ITEM, dict(ITEM, owner="rocm_env", item="/etc/x", corrected=True)]}
    assert drift_line(report) == "n7: 2 drifted of 21 checked (kernel_tuning: proc/sys/kernel/numa_balancing, rocm_env: /etc/x)"
    assert drift_line(report, True) == ("n7: 2 drifted of 21 checked, 1 corrected "
                                        "(kernel_tuning: proc/sys/kernel/numa_balancing, rocm_env: /etc/x)")
