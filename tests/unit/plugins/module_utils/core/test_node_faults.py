"""node_faults: the preflight's findings (read-only mount, full filesystem, no inodes, immutable files) and the one
line the run summary gives each failed node (module messages, no Python, unreachable, OS errors)."""

import json
import os

from ansible_collections.topotune.instinct.plugins.filter.node_failures import node_failures
from ansible_collections.topotune.instinct.plugins.filter.node_notes import node_notes
from ansible_collections.topotune.instinct.plugins.filter.run_summary_lines import run_summary_lines
from ansible_collections.topotune.instinct.plugins.module_utils.core import node_faults as nf

MOUNTINFO = """\
21 1 0:20 / / rw,relatime - overlay overlay rw
30 21 0:21 /etc /etc ro,relatime - overlay overlay rw
31 21 0:40 / /etc/topotune rw,relatime - tmpfs tmpfs rw,size=64k
32 21 0:41 / /usr/local/my\\040dir rw - tmpfs tmpfs rw
"""


class Vfs:
    def __init__(self, flag=0, bavail=10 ** 6, frsize=4096, blocks=2 * 10 ** 6, files=1000, favail=900):
        self.f_flag, self.f_bavail, self.f_frsize, self.f_blocks = flag, bavail, frsize, blocks
        self.f_files, self.f_favail = files, favail


def test_read_mounts_and_mount_point(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_text(MOUNTINFO)
    mounts = nf.read_mounts(str(info))
    assert mounts["/etc/topotune"] == ("tmpfs", "tmpfs") and "/usr/local/my dir" in mounts
    assert nf.mount_point("/etc/topotune/env", mounts) == "/etc/topotune"
    assert nf.mount_point("/etc/sysctl.d", mounts) == "/etc"
    assert nf.mount_point("/etcetera", mounts) == "/"
    assert nf.read_mounts(str(tmp_path / "missing")) == {}


def test_preflight_names_each_mount_once_with_its_fix(tmp_path, monkeypatch):
    info = tmp_path / "mountinfo"
    info.write_text(MOUNTINFO)
    monkeypatch.setattr(nf, "existing_ancestor", lambda path: path)
    stats = {"/etc/sysctl.d": Vfs(flag=os.ST_RDONLY), "/etc/profile.d": Vfs(flag=os.ST_RDONLY),
             "/etc/topotune": Vfs(bavail=0, blocks=16), "/usr/local/bin": Vfs(favail=0)}
    problems = nf.preflight(["/etc/topotune", "/etc/sysctl.d", "/etc/profile.d", "/usr/local/bin"], 512,
                            mountinfo=str(info), statvfs=stats.__getitem__, flags=lambda _p: None)
    assert problems == [
        "/ has no free inodes (overlay, holding /usr/local/bin): remove files there and rerun",
        "/etc is mounted read-only (overlay, holding /etc/sysctl.d, /etc/profile.d): topotune cannot write there; "
        "remount it read-write (mount -o remount,rw /etc) and rerun",
        "/etc/topotune is full: 0 KiB free of 64 KiB (tmpfs, holding /etc/topotune), topotune needs 512 KiB "
        "(min_free_kib); free space there and rerun",
    ]


def test_preflight_finds_immutable_and_append_only_files_of_the_manifest(tmp_path):
    frozen, appended, fine = (tmp_path / n for n in ("frozen.env", "appended.json", "fine.conf"))
    for f in (frozen, appended, fine):
        f.write_text("x")
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"version": 1, "owners": {
        "rocm_env": {"files": {str(frozen): {}, str(fine): {}}, "json_keys": []},
        "container_runtime": {"files": {}, "json_keys": [{"path": str(appended), "keys": {}}]},
        "broken": "not a mapping"}}))
    assert nf.manifest_files(str(manifest)) == sorted([str(frozen), str(appended), str(fine)])
    flags = {str(frozen): nf.FS_IMMUTABLE_FL, str(appended): nf.FS_APPEND_FL, str(fine): 0}
    problems = nf.preflight([str(tmp_path)], 0, manifest=str(manifest), flags=flags.get)
    assert problems == [
        "%s is append-only (chattr +a): topotune can neither update nor correct it; run chattr -a %s and rerun" % (appended, appended),
        "%s is immutable (chattr +i): topotune can neither update nor correct it; run chattr -i %s and rerun" % (frozen, frozen),
    ]
    assert nf.manifest_files(str(tmp_path / "none.json")) == []


def test_preflight_on_a_real_writable_tree_finds_nothing(tmp_path):
    (tmp_path / "etc").mkdir()
    assert nf.preflight([str(tmp_path / "etc" / "topotune"), str(tmp_path / "etc")], 0, manifest=str(tmp_path / "m.json")) == []
    # the real inode flags of a plain file: no immutable bit (None where the filesystem cannot say)
    (tmp_path / "plain").write_text("x")
    assert nf.get_flags(str(tmp_path / "plain")) in (None,) or not nf.get_flags(str(tmp_path / "plain")) & nf.FS_IMMUTABLE_FL
    assert nf.get_flags(str(tmp_path / "missing")) is None


# What ansible-core 2.19 registers when the interpreter is missing (captured from a run)
NO_PYTHON = {"changed": False, "exception": "(traceback unavailable)", "failed": True,
             "module_stderr": "/bin/sh: 1: /usr/bin/python3: not found\n", "module_stdout": "",
             "msg": "The module interpreter '/usr/bin/python3' was not found.", "rc": 127}
UNREACHABLE = {"changed": False, "unreachable": True,
               "msg": "Task failed: Failed to connect to the host via ssh: ssh: connect to host 10.0.0.9 port 22: No route"}


def test_explain_failure_lines():
    line = nf.explain_failure(NO_PYTHON)
    assert line.startswith("no Python on the node: /usr/bin/python3 was not found (/bin/sh: 1: /usr/bin/python3: not found)")
    assert "set ansible_python_interpreter" in line
    assert nf.explain_failure(dict(NO_PYTHON, msg="MODULE FAILURE"), "/opt/py/bin/python3").startswith(
        "no Python on the node: /usr/bin/python3 was not found")
    assert nf.explain_failure(UNREACHABLE).startswith("unreachable (Task failed: Failed to connect")
    erofs = {"failed": True, "msg": "managed_files: cannot write /etc/x: [Errno 30] Read-only file system\nmore"}
    assert nf.explain_failure(erofs) == (
        "managed_files: cannot write /etc/x: [Errno 30] Read-only file system; remount that filesystem read-write and rerun")
    full = {"failed": True, "msg": "One or more items failed", "results": [
        {"failed": False}, {"failed": True, "msg": "[Errno 28] No space left on device: '/etc/topotune/x'"}]}
    assert nf.explain_failure(full).endswith("No space left on device: '/etc/topotune/x'; free space on that filesystem and rerun")
    clear = {"failed": True, "msg": "node cannot take this run's writes, nothing was changed: /etc is full ...; free it and rerun"}
    assert nf.explain_failure(clear) == clear["msg"]
    assert nf.explain_failure({"failed": False, "msg": "fine"}) is None
    assert nf.explain_failure({"failed": True, "msg": ""}).startswith("failed without a message")


class RawHostvars(dict):
    """hostvars as the filter meets it in a play: raw_get gives the variables untemplated."""

    def raw_get(self, host):
        return self[host]


def test_node_failures_and_notes_filters():
    hostvars = RawHostvars({
        "n1": {"topotune_discovery": NO_PYTHON, "ansible_python_interpreter": "/usr/bin/python3"},
        "n2": {"__topotune_run_lock": {"failed": True, "msg": "node cannot take this run's writes, nothing was changed: x"},
               "zz_other": {"failed": True, "msg": "later"}},
        "n3": {"some": "value"},
        "n4": {"__topotune_run_lock": {"acquired": True, "notes": ["waited 12s for run abc (site.yml)"]}},
        "n5": {"__topotune_run_lock": {"skipped": True}},
    })
    lines = node_failures(["n1", "n2", "n3"], hostvars)
    assert lines["n1"].startswith("n1: no Python on the node: /usr/bin/python3 was not found")
    assert lines["n2"] == "n2: node cannot take this run's writes, nothing was changed: x"
    assert lines["n3"] == "n3: failed at a task that kept no result; see its 'fatal: [n3]' line in the play output"
    assert node_notes(["n4", "n5", "n1"], hostvars) == {"n4": ["waited 12s for run abc (site.yml)"]}
    assert node_failures([], hostvars) == {}

    # the terminal lines of the run summary built from them (playbooks/summary.yml prints these)
    summary = {"hosts": ["n1", "n2", "n4"], "completed_hosts": ["n4"], "failed_hosts": ["n1", "n2"],
               "failures": node_failures(["n1", "n2"], hostvars), "notes": node_notes(["n4"], hostvars),
               "consistency": {"nodes": []}}
    assert run_summary_lines(summary) == [
        "1 of 3 node(s) completed; failed or unreachable: n1, n2", lines["n1"], lines["n2"],
        "n4: waited 12s for run abc (site.yml)"]
    clean = dict(summary, completed_hosts=["n1", "n2", "n4"], failed_hosts=[], failures={}, notes={})
    assert run_summary_lines(clean) == ["3 of 3 node(s) completed; none failed"]
