# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's run lock: one topotune run changes a node at a time.

The lock is an ``fcntl.flock`` on ``/run/topotune/run.lock`` held by a small *holder process* on the node, started
when a run acquires it and ended when the run releases it. Ansible runs each task as its own short-lived process,
so the module that acquires hands its open lock file to the holder, which only waits for a signal. The kernel drops
the lock when the holder is gone (killed, crashed, node rebooted: ``/run`` is a tmpfs), so a dead holder never
leaves a stale lock, and the holder exits by itself after ``expires`` seconds (``alarm(2)``): the safety net for a
run that died on the controller without releasing. Both are elapsed times (the alarm, counted sleeps while
waiting): a node clock years off, or one that jumps during the run, neither expires a lock early nor keeps it
forever. Wall-clock times are recorded for people only: the node's own (``started``) and the controller's
(``controller_time``).

Who holds it is written beside the lock, atomically, in ``<path>.json``: run id, holder (what is running, from
where), holder pid, times, ``released``. A record without ``released`` whose lock is free is a run that ended
without releasing (its holder was killed or expired): the next acquirer takes over and says so.

Standard library only (runs on the managed node's Python 3.8+).
"""

from __future__ import annotations

import datetime
import errno
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid

from .errors import TopotuneError
from .files import write_atomic

DEFAULT_PATH = "/run/topotune/run.lock"
# In the holder's command line: a pid is only signalled when its command line holds this and the run id.
MARKER = "topotune-run-lock"
# The holder: signals readiness on a pipe, then waits for a signal. SIGTERM (release) ends it; so does SIGALRM from
# alarm(2) after the expiry, a kernel interval timer that counts elapsed time, whatever the wall clock says or does.
# When it ends, the kernel drops the flock of the inherited descriptor.
# argv: -c MARKER <lock fd> <ready fd> <run id> <seconds>
HOLDER_CODE = (
    "import os,signal,sys\n"
    "signal.signal(signal.SIGTERM,lambda *a:os._exit(0))\n"
    "signal.signal(signal.SIGHUP,signal.SIG_IGN)\n"
    "signal.signal(signal.SIGINT,signal.SIG_IGN)\n"
    "signal.signal(signal.SIGALRM,signal.SIG_DFL)\n"
    "signal.alarm(max(1,int(sys.argv[5])))\n"
    "os.write(int(sys.argv[3]),b'ok')\n"
    "os.close(int(sys.argv[3]))\n"
    "while True:\n"
    " signal.pause()\n"
)


def pause(seconds):
    """Sleep with select's relative timeout. time.sleep waits for an absolute CLOCK_MONOTONIC deadline, which some
    time shims break (libfaketime with DONT_FAKE_MONOTONIC fails it with EINVAL); no clock enters into this one."""
    select.select([], [], [], seconds)


class LockError(TopotuneError):
    """The lock could not be taken or released; the message names the holder and the fix."""


def iso(timestamp):
    """UTC ISO 8601 with a Z, to the second."""
    return datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_iso(text):
    """Seconds since the epoch of an ISO 8601 time (``Z`` or an offset; naive means UTC), None when unparsable."""
    if not isinstance(text, str) or not text.strip():
        return None
    text = text.strip().replace(" ", "T", 1)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        value = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.timezone.utc)
    return value.timestamp()


def duration(seconds):
    """``4y 12d``, ``3d 4h``, ``2h 5m``, ``5m 3s`` or ``42s``: the two largest units."""
    seconds = int(abs(seconds))
    units = (("y", 365 * 86400), ("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
    parts = []
    for name, size in units:
        if seconds >= size or (name == "s" and not parts):
            parts.append("%d%s" % (seconds // size, name))
            seconds %= size
        if len(parts) == 2:
            break
    return " ".join(parts)


def clock_note(controller_time, max_skew, now=None):
    """(skew in seconds, node clock minus controller clock; a warning line or None). None, None without a time."""
    controller = parse_iso(controller_time)
    if controller is None:
        return None, None
    node = time.time() if now is None else now
    skew = int(round(node - controller))
    if abs(skew) <= max_skew:
        return skew, None
    return skew, (
        "the node's clock is %s %s the controller's (node %s, controller %s): files and backups the node writes carry "
        "its time, and so does the run lock's 'started'; topotune decides nothing on it (locks wait and expire by "
        "elapsed time, reports are stamped on the controller); set the node's time (NTP/chrony) to fix it"
        % (duration(skew), "ahead of" if skew > 0 else "behind", iso(node), iso(controller)))


def describe(record):
    """``run <id> (<holder>, pid <n>, started <node time> by the node's clock, <controller time> by the controller's)``."""
    if not isinstance(record, dict):
        return "an unknown run (no readable holder record)"
    details = [str(record.get("holder") or "holder unknown")]
    if record.get("pid"):
        details.append("pid %s" % record["pid"])
    if record.get("started"):
        details.append("started %s by the node's clock" % record["started"])
    if record.get("controller_time"):
        details.append("%s by the controller's" % record["controller_time"])
    return "run %s (%s)" % (record.get("run_id") or "?", ", ".join(details))


def record_path(path):
    return path + ".json"


def read_record(path):
    """The holder record beside the lock, None when there is none, ``{}`` when it is unreadable."""
    try:
        with open(record_path(path), encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError):
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def write_record(path, record):
    """Atomically (files.write_atomic: temp file, fsync, rename): a reader sees the old holder or the new one."""
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    write_atomic(None, record_path(path), text, 0o644, root_owned=os.geteuid() == 0, temp_prefix="run-lock")


def open_lock(path):
    """The lock file's descriptor (created root-owned 0644 with its directory 0755); never follows a symlink."""
    try:
        os.makedirs(os.path.dirname(path), 0o755, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    except OSError as err:
        raise LockError("run lock: cannot open %s: %s; /run must be a writable tmpfs (or set the lock path)"
                        % (path, err.strerror or err)) from None
    info = os.fstat(fd)
    if not (info.st_mode & 0o170000 == 0o100000) or (os.geteuid() == 0 and info.st_uid != 0):
        os.close(fd)
        raise LockError("run lock: %s is not a regular root-owned file; remove it and rerun" % path)
    return fd


def try_lock(fd):
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        if err.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def holder_running(record, proc="/proc"):
    """True when the record's pid is a live holder process of this record's run (its command line says so)."""
    pid = record.get("pid") if isinstance(record, dict) else None
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        with open(os.path.join(proc, str(pid), "cmdline"), "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return False
    return MARKER.encode() in argv and str(record.get("run_id")).encode() in argv


def spawn_holder(fd, run_id, expires):
    """Start the holder process with the locked descriptor; its pid once it is ready."""
    ready_r, ready_w = os.pipe()
    try:
        proc = subprocess.Popen(  # noqa: S603 (fixed argv: this interpreter and HOLDER_CODE)
            [sys.executable or "/usr/bin/python3", "-c", HOLDER_CODE, MARKER, str(fd), str(ready_w), run_id, str(int(expires))],
            pass_fds=(fd, ready_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            cwd="/", start_new_session=True, close_fds=True)
    finally:
        os.close(ready_w)
    try:
        ready = os.read(ready_r, 2)  # b"" (end of file) when the holder died before it was ready
    finally:
        os.close(ready_r)
    if ready != b"ok":
        raise LockError("run lock: the holder process (%s -c ...) exited before holding the lock (rc=%s)"
                        % (sys.executable, proc.poll()))
    return proc.pid


def stop_holder(record):
    """SIGTERM the record's holder when it is one (command line checked, so a reused pid is never signalled)."""
    if holder_running(record):
        try:
            os.kill(record["pid"], signal.SIGTERM)
        except ProcessLookupError:
            pass
        return True
    return False


class RunLock:
    """Acquire and release the lock at ``path``. ``sleep`` and ``interval`` are injectable for the tests."""

    def __init__(self, path=DEFAULT_PATH, sleep=pause, interval=1.0, spawn=spawn_holder, clock=time.time):
        self.path = path
        self.sleep = sleep
        self.interval = interval
        self.spawn = spawn
        self.clock = clock

    def _wait_free(self, fd, run_id, timeout, force, notes):
        """Block until the lock is ours; returns (seconds waited, the holder we waited for or broke, already ours)."""
        # Waiting counts sleeps rather than reading a clock, so a node clock that jumps or stands still changes nothing.
        attempts = int(max(0, timeout) / self.interval + 0.999)
        waited = 0
        first_holder = None
        broke = False
        while not try_lock(fd):
            holder = read_record(self.path)
            if isinstance(holder, dict) and holder.get("run_id") == run_id and not holder.get("released"):
                return waited * self.interval, None, True
            first_holder = first_holder or holder
            if force and not broke:
                broke = True
                notes.append("broke the run lock of %s (topotune_lock_break): that run can no longer keep its changes "
                             "from mixing with this one's" % describe(holder))
                stop_holder(holder)
            if waited >= attempts:
                expires_in = holder.get("expires_in") if isinstance(holder, dict) else None
                raise LockError(
                    "run lock: %s holds the run lock %s; waited %ds (topotune_lock_timeout). If that run is still going, "
                    "let it finish and rerun; if it was interrupted, its lock ends by itself %s after it started "
                    "(topotune_lock_expires), or rerun with -e topotune_lock_break=true to take it over"
                    % (describe(holder), self.path, timeout, duration(expires_in) if expires_in else "some time"))
            self.sleep(self.interval)
            waited += 1
        return round(waited * self.interval, 1), first_holder, False

    def acquire(self, run_id, holder, timeout=600, expires=7200, controller_time=None, force=False, check_mode=False):
        notes = []
        if check_mode:
            current = read_record(self.path)
            fd = open_lock(self.path) if os.path.exists(self.path) else None
            try:
                free = fd is None or try_lock(fd)
            finally:
                if fd is not None:
                    os.close(fd)
            if not free:
                notes.append("%s holds the run lock: a real run would wait for it up to %ds" % (describe(current), timeout))
            return {"changed": True, "acquired": False, "run_id": run_id, "waited": 0, "holder": current if not free else None,
                    "notes": notes}
        fd = open_lock(self.path)
        try:
            waited, waited_for, already = self._wait_free(fd, run_id, timeout, force, notes)
            if already:
                return {"changed": False, "acquired": True, "run_id": run_id, "waited": 0, "already_held": True,
                        "holder": read_record(self.path), "notes": notes}
            previous = read_record(self.path)
            if waited and waited_for:
                notes.append("waited %ss for %s to release the run lock" % (waited, describe(waited_for)))
            if isinstance(previous, dict) and previous and not previous.get("released") and not force:
                notes.append("took over the run lock of %s, which ended without releasing it (its holder process is gone "
                             "or its %ds expired)" % (describe(previous), previous.get("expires_in") or 0))
            now = self.clock()
            record = {"run_id": run_id, "holder": holder, "pid": None, "started": iso(now), "controller_time": controller_time,
                      "expires_in": int(expires), "released": False}
            record["pid"] = self.spawn(fd, run_id, expires)
            write_record(self.path, record)
        finally:
            # the holder keeps the open file description, and with it the lock
            os.close(fd)
        return {"changed": True, "acquired": True, "run_id": run_id, "waited": waited, "holder": record,
                "previous": previous, "notes": notes}

    def release(self, run_id, force=False, check_mode=False):
        record = read_record(self.path)
        mine = isinstance(record, dict) and record.get("run_id") == run_id
        if not os.path.exists(self.path) or not isinstance(record, dict) or (not mine and not force):
            notes = [] if not record or not isinstance(record, dict) or record.get("released") else [
                "the run lock is not this run's (%s holds it): left alone" % describe(record)]
            return {"changed": False, "released": False, "run_id": run_id, "holder": record, "notes": notes}
        if record.get("released"):
            return {"changed": False, "released": True, "run_id": run_id, "holder": record, "notes": []}
        if check_mode:
            return {"changed": True, "released": True, "run_id": run_id, "holder": record, "notes": []}
        notes = []
        released = dict(record, released=True, released_at=iso(self.clock()))
        fd = open_lock(self.path)
        try:
            if try_lock(fd):
                notes.append("the run lock of this run had already ended (its holder process was gone or its %ds expired): "
                             "other runs may have changed the node meanwhile" % (record.get("expires_in") or 0))
                write_record(self.path, released)
            else:
                # Recorded as released first, while the holder still holds the lock: the run that takes it next
                # reads a released record, not one of a run that ended without releasing.
                write_record(self.path, released)
                stop_holder(record)
                # the holder exits at once on SIGTERM; 10 s is for a loaded node
                for _attempt in range(100):
                    if try_lock(fd):
                        break
                    current = read_record(self.path)
                    if isinstance(current, dict) and current.get("run_id") != run_id:
                        break  # a waiting run took the lock as soon as the holder was gone
                    self.sleep(0.1)
                else:
                    write_record(self.path, record)
                    raise LockError("run lock: %s still holds %s 10s after it was told to stop; end pid %s and rerun"
                                    % (describe(record), self.path, record.get("pid")))
        finally:
            os.close(fd)
        record = released
        return {"changed": True, "released": True, "run_id": run_id, "holder": record, "notes": notes}


def new_run_id():
    return uuid.uuid4().hex[:12]
