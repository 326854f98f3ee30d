"""process.run: the one subprocess runner (no shell, a timeout, LC_ALL=C). A command that cannot run or hangs is one
CommandError (a TopotuneError) naming it and why, never a traceback; topology.run_command turns it into a shell code."""

import sys

import pytest

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.process import CommandError, run
from ansible_collections.topotune.instinct.plugins.module_utils.topology.discover import run_command


@pytest.mark.parametrize("argv,env,expected", [
    (["sh", "-c", "printf %s \"$LC_ALL\""], None, (0, "C", "")),
    (["sh", "-c", "printf %s \"$X\"; exit 3"], {"X": 1}, (3, "1", "")),
    (["sh", "-c", "printf '\\377' >&2"], None, (0, "", "\ufffd")),  # undecodable bytes replaced
    ([sys.executable, "-c", "import sys; print(sys.stdin.read() == '')"], None, (0, "True\n", "")),  # stdin closed
])
def test_run_returns_rc_and_text(argv, env, expected):
    assert run(argv, timeout=30, env=env) == expected


@pytest.mark.parametrize("argv,rc,fragments", [
    (["sh", "-c", "sleep 5"], 124, ["`sh -c sleep 5` timed out after 1s"]),
    (["/nonexistent/amd-smi", "list"], 127, ["`/nonexistent/amd-smi list` cannot be started", "command not found"]),
    (["NOEXEC"], 126, ["cannot be started", "ermission denied"]),
    (["/"], 126, ["cannot be started"]),
    ([], 127, ["an empty command cannot be started"]),
    (["echo", "a\0b"], 126, ["cannot be started"]),
], ids=["hang", "missing", "not-executable", "directory", "empty", "nul"])
def test_run_failures_are_one_clear_topotune_error(tmp_path, argv, rc, fragments):
    if argv == ["NOEXEC"]:
        argv = [str(tmp_path / "tool")]
        (tmp_path / "tool").write_text("#!/bin/sh\n")  # mode 0644: not executable
    with pytest.raises(CommandError) as info:
        run(argv, timeout=1)
    err = info.value
    assert isinstance(err, TopotuneError) and err.rc == rc and "\n" not in str(err)
    for fragment in fragments:
        assert fragment in str(err)
    # the topology runner's contract: (rc, stdout, stderr), never raises
    assert run_command(argv, timeout=1) == (rc, "", str(err))
