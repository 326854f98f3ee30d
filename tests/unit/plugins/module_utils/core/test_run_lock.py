"""run_lock: a real holder process and flock on tmp_path locks: waiting, timeout naming the holder, release, stale
holders (killed, expired), breaking, re-entry, check mode, clocks that are off or stand still; the module's interface."""

import json
import os
import signal
import threading
import time

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.topotune.instinct.plugins.module_utils.core import run_lock as rl
from ansible_collections.topotune.instinct.plugins.modules import run_lock as module


@pytest.fixture
def lock(tmp_path):
    made = []

    def make(**kwargs):
        kwargs.setdefault("interval", 0.05)
        made.append(rl.RunLock(str(tmp_path / "run" / "run.lock"), **kwargs))
        return made[-1]

    yield make
    # never leave a holder process behind
    for each in made:
        record = rl.read_record(each.path)
        if record and rl.holder_running(record):
            os.kill(record["pid"], signal.SIGKILL)


def wait_gone(pid, seconds=5.0):
    for _attempt in range(int(seconds / 0.05)):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # reap it when it is our child (the holder is started by this process in the tests)
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.05)
    return False


def test_acquire_starts_a_holder_and_release_ends_it(lock):
    first = lock()
    got = first.acquire("run-a", "playbooks/site.yml", controller_time="2026-12-01T10:00:00Z")
    assert got["acquired"] and got["changed"] and got["waited"] == 0 and got["notes"] == []
    record = rl.read_record(first.path)
    assert record == got["holder"] and record["run_id"] == "run-a" and record["released"] is False
    assert record["holder"] == "playbooks/site.yml" and record["controller_time"] == "2026-12-01T10:00:00Z"
    assert rl.holder_running(record)
    with open("/proc/%d/cmdline" % record["pid"], "rb") as handle:
        assert rl.MARKER.encode() in handle.read()
    # the lock is held by the holder, not by this (acquiring) process: another descriptor cannot take it
    fd = rl.open_lock(first.path)
    try:
        assert not rl.try_lock(fd)
    finally:
        os.close(fd)
    done = first.release("run-a")
    assert done["released"] and done["changed"] and done["holder"]["released"] is True and done["holder"]["released_at"]
    assert wait_gone(record["pid"])
    again = first.release("run-a")
    assert again["changed"] is False and again["released"] is True


def test_a_second_run_times_out_naming_the_holder(lock):
    lock().acquire("run-a", "playbooks/site.yml", expires=60)
    with pytest.raises(rl.LockError) as err:
        lock().acquire("run-b", "playbooks/drift.yml (correction)", timeout=0)
    message = str(err.value)
    assert "run run-a (playbooks/site.yml, pid " in message and "waited 0s (topotune_lock_timeout)" in message
    assert "1m" in message and "topotune_lock_break=true" in message and "\n" not in message


def test_a_second_run_waits_for_the_release_then_names_whom_it_waited_for(lock):
    first = lock()
    first.acquire("run-a", "playbooks/site.yml")
    releaser = threading.Timer(0.5, first.release, args=("run-a",))
    releaser.start()
    try:
        got = lock().acquire("run-b", "playbooks/drift.yml (correction)", timeout=10)
    finally:
        releaser.join()
    assert got["acquired"] and got["waited"] >= 0.3
    assert got["previous"]["run_id"] == "run-a" and got["previous"]["released"] is True
    assert any(n.startswith("waited ") and "run run-a (playbooks/site.yml" in n for n in got["notes"])
    lock().release("run-b")


def test_waiting_counts_sleeps_so_a_clock_that_stands_still_or_jumps_cannot_stall_it(lock):
    lock().acquire("run-a", "playbooks/site.yml", expires=60)
    sleeps = []
    # a wall clock frozen years ahead: only the number of sleeps decides when to give up
    stuck = lock(sleep=sleeps.append, interval=1.0, clock=lambda: 4102444800.0)
    with pytest.raises(rl.LockError):
        stuck.acquire("run-b", "x", timeout=3)
    assert sleeps == [1.0, 1.0, 1.0]


def test_a_killed_holder_leaves_no_stale_lock(lock):
    first = lock()
    pid = first.acquire("run-a", "playbooks/site.yml")["holder"]["pid"]
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    got = lock().acquire("run-b", "playbooks/site.yml", timeout=0)
    assert got["acquired"] and got["previous"]["run_id"] == "run-a"
    assert any("took over the run lock of run run-a" in n and "ended without releasing" in n for n in got["notes"])
    # the first run's release finds its lock gone and leaves the new holder alone
    late = first.release("run-a")
    assert late["changed"] is False and "not this run's (run run-b" in late["notes"][0]
    assert rl.holder_running(rl.read_record(first.path))
    lock().release("run-b")


def test_the_holder_gives_the_lock_up_after_expires_seconds(lock):
    pid = lock().acquire("run-a", "playbooks/site.yml", expires=1)["holder"]["pid"]
    assert wait_gone(pid, 10)
    got = lock().acquire("run-b", "x", timeout=0)
    assert any("took over" in n and "1s expired" in n for n in got["notes"])
    lock().release("run-b")


def test_acquiring_again_in_the_same_run_returns_at_once(lock):
    lock().acquire("run-a", "playbooks/site.yml")
    again = lock().acquire("run-a", "playbooks/site.yml", timeout=0)
    assert again["acquired"] and again["already_held"] and again["changed"] is False
    lock().release("run-a")


def test_force_breaks_another_runs_lock_and_says_so(lock):
    pid = lock().acquire("run-a", "playbooks/site.yml")["holder"]["pid"]
    got = lock().acquire("run-b", "playbooks/site.yml", timeout=5, force=True)
    assert got["acquired"] and any(n.startswith("broke the run lock of run run-a") for n in got["notes"])
    assert wait_gone(pid)
    lock().release("run-b")


def test_release_never_signals_a_pid_that_is_not_the_holder(lock, tmp_path):
    first = lock()
    first.acquire("run-a", "x")
    record = rl.read_record(first.path)
    holder = record["pid"]
    # the record names a pid reused by another process (this one): its command line does not say run-a's holder
    rl.write_record(first.path, dict(record, pid=os.getpid()))
    assert not rl.holder_running(rl.read_record(first.path))
    with pytest.raises(rl.LockError) as err:
        rl.RunLock(first.path, sleep=lambda _s: None).release("run-a")
    assert "still holds" in str(err.value)
    os.kill(holder, signal.SIGTERM)
    assert wait_gone(holder)


def test_check_mode_takes_nothing_and_names_the_holder(lock, tmp_path):
    probe = lock()
    got = probe.acquire("run-c", "x", check_mode=True)
    assert got["changed"] and not got["acquired"] and not os.path.exists(probe.path)
    lock().acquire("run-a", "playbooks/site.yml")
    got = lock().acquire("run-c", "x", check_mode=True, timeout=7)
    assert got["holder"]["run_id"] == "run-a" and "a real run would wait for it up to 7s" in got["notes"][0]
    assert lock().release("run-a", check_mode=True)["holder"]["released"] is False
    lock().release("run-a")


def test_clock_note_names_the_skew_both_ways_and_ignores_small_ones():
    base = rl.parse_iso("2026-12-01T10:00:00Z")
    skew, note = rl.clock_note("2026-12-01T10:00:00Z", 300, now=base + 5 * 365 * 86400 + 3 * 86400)
    assert skew == 5 * 365 * 86400 + 3 * 86400
    assert "5y 3d ahead of the controller's" in note and "node 2031-" in note and "NTP" in note
    skew, note = rl.clock_note("2026-12-01T10:00:00+00:00", 300, now=base - 7200)
    assert skew == -7200 and "2h behind" in note
    assert rl.clock_note("2026-12-01 10:00:00", 300, now=base + 60) == (60, None)
    assert rl.clock_note("not a time", 300) == (None, None)


def test_open_lock_refuses_a_symlink(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / "run.lock").symlink_to(target)
    with pytest.raises(rl.LockError) as err:
        rl.open_lock(str(tmp_path / "run.lock"))
    assert "cannot open" in str(err.value)


def run(capsys, **args):
    with patch_module_args(args), pytest.raises(SystemExit) as exit_info:
        module.main()
    return exit_info.value.code, json.loads(capsys.readouterr().out)


def test_module_acquires_and_releases_with_warnings(tmp_path, capsys):
    path = str(tmp_path / "run.lock")
    writable = [str(tmp_path)]
    code, got = run(capsys, path=path, holder="playbooks/site.yml", writable=writable, manifest=str(tmp_path / "none.json"),
                    min_free_kib=0, controller_time="2000-01-01T00:00:00Z")
    try:
        assert code == 0 and got["acquired"] and got["clock_skew"] > 20 * 365 * 86400 and got["problems"] == []
        assert "ahead of the controller's" in json.dumps(got["notes"])
        code, other = run(capsys, path=path, timeout=0, writable=writable, min_free_kib=0)
        assert code == 1 and "holds the run lock" in other["msg"] and got["run_id"] in other["msg"]
    finally:
        code, done = run(capsys, state="released", path=path, run_id=got["run_id"])
    assert code == 0 and done["released"]
    code, bad = run(capsys, state="released", path=path)
    assert code == 1 and "needs run_id" in bad["msg"]


def test_module_preflight_fails_before_taking_the_lock(tmp_path, capsys):
    path = str(tmp_path / "run.lock")
    code, got = run(capsys, path=path, writable=[str(tmp_path)], min_free_kib=2 ** 50)
    assert code == 1 and got["msg"].startswith("node cannot take this run's writes, nothing was changed: ")
    assert "is full" in got["msg"] and not os.path.exists(path)
