"""docker_daemon_config: merges owned keys into daemon.json, keeps the rest, backs up, never clobbers bad JSON."""

import json
import os

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core.owned_keys import merge_owned, remove_owned
from ansible_collections.topotune.instinct.plugins.modules import docker_daemon_config

MEMLOCK = {"default-ulimits": {"memlock": {"Name": "memlock", "Soft": -1, "Hard": -1}}}
UNRELATED = {
    "log-driver": "journald",
    "registry-mirrors": ["https://mirror.example"],
    "default-ulimits": {"nofile": {"Name": "nofile", "Soft": 65536, "Hard": 65536}},
    "runtimes": {"amd": {"path": "amd-container-runtime"}},
}


def write(path, data, mode=0o644):
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    os.chmod(path, mode)


@pytest.mark.parametrize(
    "existing,owned,expected",
    [
        ({}, MEMLOCK, MEMLOCK),
        (UNRELATED, MEMLOCK, dict(UNRELATED, **{"default-ulimits": {**UNRELATED["default-ulimits"], **MEMLOCK["default-ulimits"]}})),
        ({"default-shm-size": "64M"}, {"default-shm-size": "1G"}, {"default-shm-size": "1G"}),
        ({"x": {"a": 1}}, {"x": 2}, {"x": 2}),
        (None, {"a": 1}, {"a": 1}),
    ],
)
def test_merge_owned_keeps_every_other_key(existing, owned, expected):
    assert merge_owned(existing, owned) == expected


def test_remove_owned_removes_only_owned_subkeys():
    merged = merge_owned(UNRELATED, MEMLOCK)
    assert remove_owned(merged, MEMLOCK) == UNRELATED
    assert remove_owned({"a": 1}, {"b": 1}) == {"a": 1}
    assert remove_owned({"a": {"b": 1}}, {"a": {"b": 0}}) == {}


def test_merge_into_existing_file_keeps_unrelated_keys_and_backs_up(tmp_path, run_module):
    path = tmp_path / "daemon.json"
    write(path, UNRELATED)
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path))
    assert code == 0 and result["changed"] is True
    on_disk = json.loads(path.read_text())
    for key in ("log-driver", "registry-mirrors", "runtimes"):
        assert on_disk[key] == UNRELATED[key]
    assert on_disk["default-ulimits"]["nofile"] == UNRELATED["default-ulimits"]["nofile"]
    assert on_disk["default-ulimits"]["memlock"]["Hard"] == -1
    assert result["backup_file"] and json.loads(open(result["backup_file"]).read()) == UNRELATED
    assert result["diff"]["before"] != result["diff"]["after"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    code, again = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path))
    assert again["changed"] is False and "backup_file" not in again


def test_check_mode_reports_without_writing(tmp_path, run_module):
    path = tmp_path / "daemon.json"
    write(path, UNRELATED)
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path), check_mode=True)
    assert result["changed"] is True and json.loads(path.read_text()) == UNRELATED
    assert "memlock" in result["diff"]["after"]


def test_missing_file_is_created_and_missing_dir_too(tmp_path, run_module):
    path = tmp_path / "docker" / "daemon.json"
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path))
    assert result["changed"] is True and json.loads(path.read_text()) == MEMLOCK
    assert "backup_file" not in result


def test_absent_with_missing_file_changes_nothing(tmp_path, run_module):
    path = tmp_path / "daemon.json"
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path), state="absent")
    assert result["changed"] is False and not path.exists()


def test_absent_removes_only_owned_keys(tmp_path, run_module):
    path = tmp_path / "daemon.json"
    write(path, merge_owned(UNRELATED, MEMLOCK))
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path), state="absent")
    assert result["changed"] is True and json.loads(path.read_text()) == UNRELATED


@pytest.mark.parametrize("content,fragment", [("{not json", "is not valid JSON"), ("[1, 2]", "not an object")])
def test_invalid_json_is_never_overwritten(tmp_path, run_module, content, fragment):
    path = tmp_path / "daemon.json"
    write(path, content)
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path))
    assert code == 1 and result["failed"] and fragment in result["msg"] and str(path) in result["msg"]
    assert path.read_text() == content


def test_wrong_mode_is_corrected_and_reported(tmp_path, run_module):
    path = tmp_path / "daemon.json"
    write(path, merge_owned(UNRELATED, MEMLOCK), mode=0o666)
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path), check_mode=True)
    assert result["changed"] is True
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path))
    assert result["changed"] is True and oct(os.stat(path).st_mode & 0o777) == "0o644"


@pytest.mark.parametrize("mode", ["0666", "0777", "rw", "1777", "0888", "04644", True])
def test_world_writable_or_bad_modes_are_refused(tmp_path, run_module, mode):
    # "0888" used to pass the check and end in an uncaught ValueError (a traceback)
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(tmp_path / "daemon.json"), mode=mode)
    msg = result["msg"]
    assert code == 1 and msg.startswith("docker_daemon_config: mode ") and ("e.g. '0644'" in msg or "; use '0" in msg)
    assert not (tmp_path / "daemon.json").exists()


@pytest.mark.parametrize("mode", ["0640", 0o640])  # quoted, and an unquoted YAML 0640 (the int 416)
def test_mode_as_a_string_or_as_the_int_of_unquoted_yaml(tmp_path, run_module, mode):
    path = tmp_path / "daemon.json"
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path), mode=mode)
    assert code == 0 and os.stat(path).st_mode & 0o777 == 0o640


def test_validate_command_failure_keeps_the_old_file(tmp_path, run_module):
    path = tmp_path / "daemon.json"
    write(path, UNRELATED)
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path), validate="/bin/false %s")
    assert code == 1 and "validation" in result["msg"]
    assert json.loads(path.read_text()) == UNRELATED
    assert [p for p in os.listdir(tmp_path) if p.startswith(".topotune-") or p.startswith(".daemon.json.")] == []


def test_validate_needs_placeholder(tmp_path, run_module):
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(tmp_path / "daemon.json"), validate="/bin/true")
    assert code == 1 and "%s" in result["msg"]


def test_backup_is_a_byte_copy_and_a_killed_runs_temp_file_is_removed(tmp_path, run_module):
    from ansible_collections.topotune.instinct.plugins.module_utils.core.files import RUN_STARTED

    path = tmp_path / "daemon.json"
    original = b'{"log-driver": "journald"}\r\n'
    path.write_bytes(original)
    os.chmod(path, 0o640)
    leftover = tmp_path / ".topotune-daemon.json.k2j3h4l5.tmp"
    leftover.write_text('{"log-dri')
    os.utime(leftover, (RUN_STARTED - 60, RUN_STARTED - 60))
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path))
    assert code == 0 and result["changed"]
    with open(result["backup_file"], "rb") as handle:
        assert handle.read() == original
    assert os.stat(result["backup_file"]).st_mode & 0o777 == 0o640
    assert sorted(os.listdir(tmp_path)) == sorted(["daemon.json", os.path.basename(result["backup_file"])])


def test_a_rejected_file_makes_no_backup(tmp_path, run_module):
    path = tmp_path / "daemon.json"
    write(path, UNRELATED)
    code, result = run_module(docker_daemon_config, settings=MEMLOCK, path=str(path), validate="/bin/false %s")
    assert code == 1 and "was not changed" in result["msg"] and os.listdir(tmp_path) == ["daemon.json"]
