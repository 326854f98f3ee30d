"""report_files (action) / drift_reports / drift_line: every host's report built and written on the controller in one task."""

import os
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail, AnsibleFilterError

from ansible_collections.topotune.instinct.plugins.action.report_files import ActionModule, plan
from ansible_collections.topotune.instinct.plugins.filter.drift_line import drift_line
from ansible_collections.topotune.instinct.plugins.filter.drift_reports import drift_reports

ITEM = {"owner": "kernel_tuning", "kind": "value", "item": "proc/sys/kernel/numa_balancing", "expected": "0", "observed": "1"}


def test_report_layout_is_to_nice_json_with_a_final_newline(tmp_path):
    entries = plan({"n2": {"b": 1, "a": [1]}, "n1": {}}, str(tmp_path / "drift"))
    assert [path for path, _text in entries] == [str(tmp_path / "drift" / "n1.json"), str(tmp_path / "drift" / "n2.json")]
    assert entries[1][1] == '{\n    "a": [\n        1\n    ],\n    "b": 1\n}\n'


def test_texts_are_written_as_they_are_after_the_documents(tmp_path):
    entries = plan({"n1": {}}, str(tmp_path), {"junit.xml": "<testsuites/>", "notes.txt": "a\n"})
    assert entries == [(str(tmp_path / "n1.json"), "{}\n"), (str(tmp_path / "junit.xml"), "<testsuites/>\n"),
                       (str(tmp_path / "notes.txt"), "a\n")]
    with pytest.raises(AnsibleActionFail, match="cannot be a file name"):
        plan({}, str(tmp_path), {"../x.xml": ""})


def test_report_directory_expands_home_and_relative_paths(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert plan({"a": {}}, "~/checks")[0][0] == str(tmp_path / "checks" / "a.json")
    assert plan({"a": {}}, "out")[0][0] == str(tmp_path / "out" / "a.json")


@pytest.mark.parametrize("documents,directory,message", [
    ({"a/b": {}}, "/out", "cannot be a file name"),
    ({"..": {}}, "/out", "cannot be a file name"),
    ({"a": {}}, " ", "must be a path"),
])
def test_report_names_that_would_escape_the_directory_are_refused(documents, directory, message):
    with pytest.raises(AnsibleActionFail, match=message):
        plan(documents, directory)


def _action(tmp_path, check_mode=False, diff=False, **args):
    task = MagicMock(args=dict({"directory": str(tmp_path / "out"), "documents": {"n1": {"ok": True}}}, **args),
                     check_mode=check_mode, diff=diff, async_val=0)
    return ActionModule(task, MagicMock(), MagicMock(), loader=None, templar=None, shared_loader_obj=None)


def test_report_files_action_writes_once_then_changes_nothing(tmp_path):
    first = _action(tmp_path).run(task_vars={})
    path = tmp_path / "out" / "n1.json"
    assert first["changed"] and first["changed_files"] == [str(path)] and path.read_text() == '{\n    "ok": true\n}\n'
    assert os.stat(path).st_mode & 0o777 == 0o644
    assert not _action(tmp_path).run(task_vars={})["changed"]


def test_report_files_action_check_mode_writes_nothing_and_diff_shows_the_report(tmp_path):
    result = _action(tmp_path, check_mode=True, diff=True).run(task_vars={})
    assert result["changed"] and not (tmp_path / "out").exists()
    assert result["diff"][0]["after"] == '{\n    "ok": true\n}\n' and result["diff"][0]["before"] == ""


@pytest.mark.parametrize("mode,message", [("0666", "world-writable"), ("0888", "'8' is not an octal digit"),
                                          (None, "not a NoneType")])
def test_report_files_action_refuses_a_bad_mode(tmp_path, mode, message):
    with pytest.raises(AnsibleActionFail, match=message):
        _action(tmp_path, mode=mode).run(task_vars={})
    assert not (tmp_path / "out").exists()


def test_report_files_action_writes_through_the_shared_writer(tmp_path):
    # an unquoted YAML 0640 arrives as the int 416; a temp file a killed run left is swept
    directory = tmp_path / "out"
    directory.mkdir()
    leftover = directory / ".topotune-n1.json.abc.tmp"
    leftover.write_text("half")
    os.utime(leftover, (0, 0))
    assert _action(tmp_path, mode=0o640).run(task_vars={})["changed"]
    assert os.stat(directory / "n1.json").st_mode & 0o777 == 0o640 and os.listdir(directory) == ["n1.json"]


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
