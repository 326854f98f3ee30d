"""files: the shared atomic writer. Temp files carry their final mode and owner before the rename, hold a lock until
commit, and only this writer's temp files left by a dead run are ever removed. (Killing the modules at every write
step is tests/integration/test_interrupted_writes.py.)"""

import fcntl
import os

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.topotune.instinct.plugins.module_utils.core import files
from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError

ROOT_OWNED = os.geteuid() == 0


@pytest.fixture()
def module():
    from ansible.module_utils.basic import AnsibleModule

    with patch_module_args({}):
        return AnsibleModule(argument_spec={})


def old(path):
    """Make path look modified before this run started (a leftover of an earlier run)."""
    stamp = files.RUN_STARTED - 60
    os.utime(path, (stamp, stamp), follow_symlinks=False)
    return path


def temps(directory):
    return sorted(n for n in os.listdir(directory) if files.is_temp_name(n))


def test_stage_writes_mode_owner_and_data_before_the_rename_and_commit_leaves_no_temp(tmp_path, module):
    path = tmp_path / "sub" / "secret.env"
    staged = files.stage(module, str(path), "K=1\n", 0o600, ROOT_OWNED)
    info = os.stat(staged.tmp)
    assert os.path.dirname(staged.tmp) == str(tmp_path / "sub") and files.is_temp_name(os.path.basename(staged.tmp))
    assert os.path.basename(staged.tmp).startswith(".topotune-secret.env.")
    assert info.st_mode & 0o7777 == 0o600 and not path.exists()
    files.commit(module, staged)
    assert path.read_bytes() == b"K=1\n" and os.stat(path).st_mode & 0o7777 == 0o600
    assert temps(tmp_path / "sub") == []
    staged.discard()  # a second discard is harmless


def test_commit_keeps_the_new_mode_even_over_a_file_with_another(tmp_path, module):
    path = tmp_path / "tool"
    path.write_text("old\n")
    os.chmod(path, 0o644)
    files.write_atomic(module, str(path), "new\n", 0o750, ROOT_OWNED)
    assert path.read_text() == "new\n" and os.stat(path).st_mode & 0o7777 == 0o750


def test_a_rejected_file_is_removed_and_raises(tmp_path, module):
    with pytest.raises(files.ValidationError, match="validation"):
        files.stage(module, str(tmp_path / "x.sh"), "if (\n", 0o644, ROOT_OWNED, validate="/bin/sh -n %s")
    assert os.listdir(tmp_path) == []


def test_stage_all_removes_every_temp_when_one_fails(tmp_path, module):
    writes = [(str(tmp_path / "a"), "a\n", 0o644, None), (str(tmp_path / "b"), "b\n", 0o644, "/bin/false %s")]
    with pytest.raises(files.ValidationError):
        files.stage_all(module, writes, ROOT_OWNED)
    assert os.listdir(tmp_path) == []


def test_only_this_writers_leftovers_are_removed(tmp_path):
    leftover = tmp_path / ".topotune-a.env.k2j3h4l5.tmp"
    leftover.write_text("half")
    old(leftover)
    link = tmp_path / ".topotune-x.service.0a1b2c3d.tmp"
    os.symlink("/etc/x.service", link)
    old(link)
    keep = {}
    for name in (".topotune-notes", "a.env.tmp", ".topotune-dir.tmp"):
        keep[name] = tmp_path / name
    keep[".topotune-dir.tmp"].mkdir()
    for name in (".topotune-notes", "a.env.tmp"):
        keep[name].write_text("user's")
        old(keep[name])
    fresh = tmp_path / ".topotune-b.env.abcdefgh.tmp"  # modified after this run started: a later writer's
    fresh.write_text("being written")
    removed = files.remove_stale_temps([str(tmp_path / "a.env"), str(tmp_path / "missing" / "b")])
    assert sorted(removed) == sorted([str(leftover), str(link)])
    assert sorted(os.listdir(tmp_path)) == sorted(list(keep) + [fresh.name])


def test_a_live_writers_temp_file_is_left_alone(tmp_path, module):
    staged = files.stage(module, str(tmp_path / "daemon.json"), "{}\n", 0o644, ROOT_OWNED)
    old(staged.tmp)
    assert files.remove_stale_temps([staged.path]) == [] and os.path.exists(staged.tmp)
    # the same file, its writer gone (lock released): removed
    other = os.open(staged.tmp, os.O_RDONLY)
    try:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once the writer's descriptor is closed
        pytest.fail("the staged temp file should be locked by its writer")
    except OSError:
        pass
    finally:
        os.close(other)
    os.close(staged.fd)
    staged.fd = None
    assert files.remove_stale_temps([staged.path]) == [staged.tmp]


def test_stage_all_and_write_atomic_sweep_before_writing(tmp_path, module):
    (tmp_path / "etc").mkdir()
    leftover = tmp_path / "etc" / ".topotune-a.env.zzzzzzzz.tmp"
    leftover.write_text("half")
    old(leftover)
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    elsewhere = unrelated / ".topotune-b.zzzzzzzz.tmp"
    elsewhere.write_text("half")
    old(elsewhere)
    files.commit_all(module, files.stage_all(module, [], ROOT_OWNED, sweep=[str(tmp_path / "etc" / "a.env")]))
    assert not leftover.exists() and elsewhere.exists()
    files.write_atomic(module, str(unrelated / "b"), "b\n", 0o644, ROOT_OWNED, temp_prefix=".manifest.")
    assert os.listdir(unrelated) == ["b"]


def test_replace_symlink_swaps_the_link_in_one_rename(tmp_path):
    link = tmp_path / "wants" / "x.service"
    files.replace_symlink(str(link), "/etc/x.service")
    files.replace_symlink(str(link), "/lib/x.service")
    assert os.readlink(link) == "/lib/x.service" and temps(link.parent) == []


def test_differs_compares_bytes_exactly(tmp_path):
    path = tmp_path / "a.env"
    path.write_bytes(b"A=1\r\n")
    os.chmod(path, 0o644)
    assert files.differs(str(path), "A=1\n", 0o644, False)
    assert not files.differs(str(path), "A=1\r\n", 0o644, False)
    assert files.read_text(str(path)) == "A=1\r\n"
    assert files.differs(str(path), "A=1\r\n", 0o600, False)


# parse_mode: the one mode check of every mode option (docker_daemon_config, managed_files, report_files). A mode
# option is ``raw``: a quoted YAML "0644" arrives as a str, an unquoted 0644 as the int 420.
@pytest.mark.parametrize("value,special_bits,expected", [
    ("0644", True, 0o644),
    ("644", True, 0o644),
    ("0600", False, 0o600),
    ("0755", True, 0o755),
    ("0", True, 0),
    ("04755", True, 0o4755),
    (0o644, True, 0o644),         # unquoted YAML 0644
    (0o640, False, 0o640),
])
def test_parse_mode_accepts_octal_strings_and_the_int_of_an_unquoted_yaml_mode(value, special_bits, expected):
    assert files.parse_mode(value, "mode", special_bits=special_bits) == expected


@pytest.mark.parametrize("value,special_bits,fragments", [
    ("0888", True, ["'0888'", "must be octal", "'8' is not an octal digit", "'0644'"]),
    ("0x1a4", True, ["are not octal digits"]),
    ("rw-r--r--", True, ["must be octal"]),
    ("u+x", True, ["must be octal"]),
    ("", True, ["must be octal"]),
    (" 0644", True, ["must be octal"]),
    ("0666", True, ["world-writable", "use '0664'"]),
    ("0777", True, ["world-writable", "use '0775'"]),
    (0o666, True, ["438 (0o666)", "world-writable"]),
    ("1777", True, ["world-writable"]),
    ("04644", False, ["up to 0777", "no setuid, setgid or sticky bit"]),
    ("17777", True, ["up to 7777"]),
    (-1, True, ["up to 7777"]),
    (True, True, ["not a bool"]),
    (None, True, ["not a NoneType"]),
    (6.44, True, ["not a float"]),
    (["0644"], True, ["not a list"]),
])
def test_parse_mode_refuses_naming_the_option_the_value_and_the_fix(value, special_bits, fragments):
    with pytest.raises(TopotuneError) as info:
        files.parse_mode(value, "/etc/x.env: mode", special_bits=special_bits)
    message = str(info.value)
    assert message.startswith("/etc/x.env: mode ") and "\n" not in message
    for fragment in fragments:
        assert fragment in message


# module=None: the writer on the controller (report_files action, snapshot, sim/cluster.py): no SELinux step,
# validate commands run through process.run().
def test_the_writer_runs_without_a_module(tmp_path):
    path = tmp_path / "new" / "report.json"
    os.makedirs(tmp_path / "new")
    leftover = tmp_path / "new" / ".topotune-report.json.x.tmp"
    leftover.write_text("half")
    old(leftover)
    files.write_atomic(None, str(path), "{}\n", 0o640, root_owned=False)
    assert path.read_text() == "{}\n" and os.stat(path).st_mode & 0o7777 == 0o640
    assert temps(tmp_path / "new") == []


@pytest.mark.parametrize("validate,ok", [("test -s %s", True), ("false %s", False), ("/nonexistent/check %s", False)])
def test_validate_without_a_module_goes_through_the_runner(tmp_path, validate, ok):
    path = tmp_path / "f"
    if ok:
        files.write_atomic(None, str(path), "x\n", 0o644, False, validate=validate)
        assert path.read_text() == "x\n"
    else:
        with pytest.raises(files.ValidationError, match="validation"):
            files.write_atomic(None, str(path), "x\n", 0o644, False, validate=validate)
        assert not path.exists() and temps(tmp_path) == []
