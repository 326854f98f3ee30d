"""managed_files: one call converges files, links and stale files; nothing is half-applied; check mode changes nothing."""

import os

import pytest

from ansible_collections.topotune.instinct.plugins.modules import managed_files


def snapshot(root):
    out = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            out[path] = os.readlink(path) if os.path.islink(path) else (open(path).read(), os.stat(path).st_mode & 0o7777)
    return out


def test_writes_files_then_second_run_changes_nothing(tmp_path, run_module):
    files = [{"path": str(tmp_path / "etc" / "a.env"), "content": "A=1\n"},
             {"path": str(tmp_path / "bin" / "tool"), "content": "#!/bin/sh\n", "mode": "0755"}]
    code, first = run_module(managed_files, diff=True, files=files)
    assert code == 0 and first["changed"] and sorted(first["changed_files"]) == sorted(f["path"] for f in files)
    assert (tmp_path / "etc" / "a.env").read_text() == "A=1\n"
    assert os.stat(tmp_path / "bin" / "tool").st_mode & 0o7777 == 0o755
    assert [d["after"] for d in first["diff"]] == ["A=1\n", "#!/bin/sh\n"]
    code, second = run_module(managed_files, diff=True, files=files)
    assert code == 0 and not second["changed"] and second["changed_files"] == [] and second["diff"] == []


@pytest.mark.parametrize("tamper,expect_changed", [
    (lambda p: p.write_text("A=2\n"), True),      # content edited
    (lambda p: os.chmod(p, 0o600), True),         # mode changed
    (lambda p: None, False),                      # untouched
])
def test_detects_content_and_mode_drift(tmp_path, run_module, tamper, expect_changed):
    path = tmp_path / "a.env"
    run_module(managed_files, diff=True, files=[{"path": str(path), "content": "A=1\n"}])
    tamper(path)
    _code, result = run_module(managed_files, diff=True, files=[{"path": str(path), "content": "A=1\n"}])
    assert result["changed"] is expect_changed
    assert path.read_text() == "A=1\n" and os.stat(path).st_mode & 0o7777 == 0o644


def test_check_mode_reports_and_changes_nothing(tmp_path, run_module):
    (tmp_path / "keep.flags").write_text("old\n")
    (tmp_path / "stale.flags").write_text("stale\n")
    before = snapshot(tmp_path)
    _code, result = run_module(managed_files, diff=True, check_mode=True,
                               files=[{"path": str(tmp_path / "keep.flags"), "content": "new\n"}],
                               links=[{"path": str(tmp_path / "wants" / "x.service"), "src": "/etc/x.service"}],
                               prune=[{"path": str(tmp_path), "pattern": "*.flags"}])
    assert result["changed"] and result["changed_files"] == [str(tmp_path / "keep.flags")]
    assert result["removed_files"] == [str(tmp_path / "stale.flags")]
    assert result["changed_links"] == [str(tmp_path / "wants" / "x.service")]
    assert snapshot(tmp_path) == before


def test_prune_removes_only_unlisted_matching_files(tmp_path, run_module):
    for name in ("size2-group0.flags", "size8-group0.flags", "compose.gpu.yml", "notes.txt"):
        (tmp_path / name).write_text(name)
    _code, result = run_module(managed_files, diff=True, files=[{"path": str(tmp_path / "size2-group0.flags"), "content": "x\n"}],
                               prune=[{"path": str(tmp_path), "pattern": "*.flags"}, {"path": str(tmp_path / "missing"), "pattern": "*"}])
    assert result["removed_files"] == [str(tmp_path / "size8-group0.flags")]
    assert sorted(os.listdir(tmp_path)) == ["compose.gpu.yml", "notes.txt", "size2-group0.flags"]


def test_a_rejected_file_leaves_every_file_untouched(tmp_path, run_module):
    good, bad = tmp_path / "a.env", tmp_path / "profile.sh"
    good.write_text("A=0\n")
    files = [{"path": str(good), "content": "A=1\n"},
             {"path": str(bad), "content": "if then fi (\n", "validate": "/bin/sh -n %s"}]
    code, result = run_module(managed_files, diff=True, files=files)
    assert code == 1 and "profile.sh: validation" in result["msg"] and "no file was changed" in result["msg"]
    assert good.read_text() == "A=0\n" and not bad.exists()
    assert [n for n in os.listdir(tmp_path) if n.startswith(".topotune-")] == []


def test_links_are_created_replaced_and_removed(tmp_path, run_module):
    link = tmp_path / "multi-user.target.wants" / "t.service"
    _code, result = run_module(managed_files, diff=True, links=[{"path": str(link), "src": "/etc/systemd/system/t.service"}])
    assert result["changed"] and os.readlink(link) == "/etc/systemd/system/t.service"
    _code, result = run_module(managed_files, diff=True, links=[{"path": str(link), "src": "/etc/systemd/system/t.service"}])
    assert not result["changed"]
    _code, result = run_module(managed_files, diff=True, links=[{"path": str(link), "src": "/lib/systemd/system/t.service"}])
    assert result["changed"] and os.readlink(link) == "/lib/systemd/system/t.service"
    _code, result = run_module(managed_files, diff=True, links=[{"path": str(link), "state": "absent"}])
    assert result["changed"] and not os.path.lexists(link)


def test_absent_files_are_removed(tmp_path, run_module):
    path = tmp_path / "old.sh"
    path.write_text("x")
    _code, result = run_module(managed_files, diff=True, files=[{"path": str(path), "state": "absent"}])
    assert result["changed"] and result["removed_files"] == [str(path)] and not path.exists()
    _code, result = run_module(managed_files, diff=True, files=[{"path": str(path), "state": "absent"}])
    assert not result["changed"]


@pytest.mark.parametrize("args,message", [
    ({"files": [{"path": "relative.env", "content": ""}]}, "must be absolute"),
    ({"files": [{"path": "/tmp/x", "content": "", "mode": "0666"}]}, "world-writable"),
    ({"files": [{"path": "/tmp/x", "content": "", "mode": "rw-r--r--"}]}, "must be octal"),
    ({"files": [{"path": "/tmp/x"}]}, "content is required"),
    ({"files": [{"path": "/tmp/x", "content": "", "validate": "sh -n"}]}, "must contain %s"),
    ({"files": [{"path": "/tmp/x", "content": ""}], "links": [{"path": "/tmp/x", "src": "/y"}]}, "listed twice"),
    ({"links": [{"path": "/tmp/l"}]}, "src is required"),
])
def test_bad_input_names_the_entry_and_the_fix(run_module, args, message):
    code, result = run_module(managed_files, diff=True, **args)
    assert code == 1 and message in result["msg"]


def test_a_regular_file_in_place_of_a_link_is_not_replaced(tmp_path, run_module):
    path = tmp_path / "t.service"
    path.write_text("mine")
    code, result = run_module(managed_files, diff=True, links=[{"path": str(path), "src": "/etc/t.service"}])
    assert code == 1 and "is not a symlink" in result["msg"] and path.read_text() == "mine"


def _leftover(directory, name=".topotune-a.env.k2j3h4l5.tmp"):
    """A temp file as a killed run leaves it: half written, modified before this run started."""
    from ansible_collections.topotune.instinct.plugins.module_utils.core.files import RUN_STARTED

    path = directory / name
    path.write_text("A=")
    os.utime(path, (RUN_STARTED - 60, RUN_STARTED - 60))
    return path


def test_a_killed_runs_temp_files_are_removed_by_the_next_run_even_without_changes(tmp_path, run_module):
    files = [{"path": str(tmp_path / "etc" / "a.env"), "content": "A=1\n"}]
    links = [{"path": str(tmp_path / "wants" / "x.service"), "src": "/etc/x.service"}]
    run_module(managed_files, diff=True, files=files, links=links)
    stale = [_leftover(tmp_path / "etc"), _leftover(tmp_path / "wants", ".topotune-x.service.0a1b2c3d.tmp")]
    _code, result = run_module(managed_files, diff=True, check_mode=True, files=files, links=links)
    assert not result["changed"] and all(p.exists() for p in stale)  # check mode changes nothing
    _code, result = run_module(managed_files, diff=True, files=files, links=links)
    assert not result["changed"] and not any(p.exists() for p in stale)
    assert (tmp_path / "etc" / "a.env").read_text() == "A=1\n"


def test_a_new_file_appears_with_its_mode_and_a_link_is_swapped_not_removed_first(tmp_path, run_module):
    # the modes and the link are set before the rename: observable here as the end state and no temp left behind;
    # the windows themselves are killed into by tests/integration/test_interrupted_writes.py
    path, link = tmp_path / "secret.env", tmp_path / "wants" / "x.service"
    link.parent.mkdir()
    os.symlink("/etc/x.service", link)
    _code, result = run_module(managed_files, diff=True, files=[{"path": str(path), "content": "K=1\n", "mode": "0600"}],
                               links=[{"path": str(link), "src": "/lib/x.service"}])
    assert result["changed"] and os.stat(path).st_mode & 0o7777 == 0o600 and os.readlink(link) == "/lib/x.service"
    assert [n for n in os.listdir(tmp_path) + os.listdir(link.parent) if n.startswith(".topotune-")] == []
