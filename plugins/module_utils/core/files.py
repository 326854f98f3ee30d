# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one atomic, compare-first file writer of topotune: temp file, mode, owner, validation, rename, and the clean-up
of what an interrupted run left; and parse_mode(), the one check of a mode option.

Modules pass their AnsibleModule (validate commands run through it, SELinux contexts are kept); controller-side
code (action plugins, bin/topotune, sim/) passes ``module=None``: no SELinux step, validate commands run through
process.run().

A file is written to a temp file beside it, with its final mode and owner and its data on disk, then renamed over
it: readers, and a run killed at any point, see the old or the new file, never part of one (nor the new content
with the old mode). Temp files are named ``.topotune-<name>.<random>.tmp``; see remove_stale_temps() for why such
a file cannot outlive the next run.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shlex
import stat
import tempfile
import time

from .errors import TopotuneError
from .process import CommandError, run

TEMP_PREFIX = ".topotune-"
TEMP_SUFFIX = ".tmp"

# When this run started (module_utils are imported when the module process starts): temp files modified before it
# cannot be being created by a writer that started after us (see remove_stale_temps).
RUN_STARTED = time.time()


def parse_mode(value, name="mode", special_bits=True):
    """The permission bits a mode option asks for, as an int; raises TopotuneError naming ``name`` (the option, e.g.
    ``mode`` or ``/etc/x.env: mode``), the value and the fix.

    Accepted: octal digits as a string (``"0644"``, ``"644"``), or an int as Ansible passes an unquoted YAML
    ``0644`` to a ``raw`` option (420, i.e. 0o644). Refused: anything else (``"0888"``, ``"rw-r--r--"``,
    ``"u+x"``, a bool, a float, None), more than 0o7777, the set-id and sticky bits unless ``special_bits``,
    and the world-writable bit (files topotune writes are never world-writable)."""
    if isinstance(value, int) and not isinstance(value, bool):
        mode, shown = value, "%r (0o%o)" % (value, value) if value >= 0 else repr(value)
    elif isinstance(value, str):
        bad = sorted(set(value) - set("01234567"))
        if not value or bad:
            why = ""
            if bad:
                why = ": %s %s" % (", ".join(repr(c) for c in bad), "is not an octal digit" if len(bad) == 1 else
                                   "are not octal digits")
            raise TopotuneError("%s %r must be octal permission bits as a quoted string, e.g. '0644'%s" % (
                name, value, why))
        mode, shown = int(value, 8), repr(value)
    else:
        raise TopotuneError("%s %r must be octal permission bits as a quoted string, e.g. '0644', not a %s" % (
            name, value, type(value).__name__))
    limit = 0o7777 if special_bits else 0o777
    if not 0 <= mode <= limit:
        raise TopotuneError("%s %s must be octal permission bits up to %04o, e.g. '0644'%s" % (
            name, shown, limit, "" if special_bits or not 0 <= mode <= 0o7777 else
            " (no setuid, setgid or sticky bit on this file)"))
    if mode & 0o002:
        raise TopotuneError("%s %s is world-writable: topotune never writes a file anyone can change; use %r" % (
            name, shown, "%04o" % (mode & ~0o002)))
    return mode


def read_text(path):
    """The file's text exactly as stored (no newline translation), or None when it does not exist or cannot be read
    as text."""
    try:
        with open(path, encoding="utf-8", newline="") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def attributes_differ(path, mode, root_owned):
    """True when path's permission bits, or (as root) its root:root ownership, differ. Follows a symlink."""
    info = os.stat(path)
    return info.st_mode & 0o7777 != mode or (root_owned and (info.st_uid, info.st_gid) != (0, 0))


def differs(path, content, mode, root_owned):
    """True when path is missing, not a regular file, or its bytes, permission bits or (as root) root:root
    ownership differ."""
    try:
        info = os.lstat(path)
    except OSError:
        return True
    if not stat.S_ISREG(info.st_mode):
        return True
    if info.st_mode & 0o7777 != mode or (root_owned and (info.st_uid, info.st_gid) != (0, 0)):
        return True
    try:
        with open(path, "rb") as handle:
            return handle.read() != _bytes(content)
    except OSError:
        return True


class ValidationError(TopotuneError):
    """A staged file was rejected by its validate command; nothing was moved into place."""


class Staged:
    """A temp file written and checked, waiting for commit(). Its descriptor stays open and locked until then: the
    lock tells a concurrent run's remove_stale_temps() that a live writer owns the file."""

    def __init__(self, tmp, fd, path, mode):
        self.tmp, self.fd, self.path, self.mode = tmp, fd, path, mode

    def discard(self):
        """Remove the temp file when it is still there (not committed), then close it (releasing the lock). Safe to
        call again: the descriptor is closed once (a second close could hit a descriptor reused meanwhile)."""
        if self.fd is None:
            return
        try:
            if os.path.lexists(self.tmp):
                os.unlink(self.tmp)  # still locked: no sweep takes it for a leftover in between
        finally:
            os.close(self.fd)
            self.fd = None


def _bytes(content):
    return content if isinstance(content, bytes) else content.encode("utf-8")


def _temp_prefix(path, hint=None):
    # the destination's name (or the caller's hint) makes a leftover recognizable; kept short for NAME_MAX
    name = (hint or "").strip(".-") or os.path.basename(path)
    return TEMP_PREFIX + name[:100] + "."


def is_temp_name(name):
    """True for the names this writer gives its temp files (and only those are ever removed as stale)."""
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)


def remove_stale_temps(paths):
    """Remove the temp files a killed run left beside paths (in their directories); returns what was removed.

    A run killed with SIGKILL (OOM killer, lost connection with ``kill -9`` of the module, node reset) between
    creating a temp file and renaming it leaves the temp file, whatever the writer does. Unnamed files
    (``O_TMPFILE``, linked in at commit) would not remove that: linkat() cannot replace an existing file, so
    they still need a named file for the rename, and overlayfs (the simulated nodes' /etc) and NFS lack them.
    So every writer sweeps the directories it writes before it writes, and removes a file only when all hold:

    - its name is ``.topotune-*.tmp`` (only this writer's temp files; never a user's file);
    - it was last modified before this run started (a writer that started later cannot own it);
    - nobody holds its lock: stage() locks its temp file from creation until commit, and a lock dies with its
      process, so a concurrent run's file in the middle of a write (or a long validate) is left alone.

    A temp file a kill leaves therefore lives until the next write to its directory, which happens at the
    next run: the kill left its destination old, so that run writes it again.
    """
    removed = []
    for directory in sorted({os.path.dirname(path) or "." for path in paths}):
        try:
            names = os.listdir(directory)
        except OSError:
            continue  # missing: nothing to sweep; unreadable: the write will report it
        for name in sorted(names):
            if is_temp_name(name) and _remove_if_stale(os.path.join(directory, name)):
                removed.append(os.path.join(directory, name))
    return removed


def _remove_if_stale(tmp):
    try:
        info = os.lstat(tmp)
    except OSError:
        return False
    if info.st_mtime >= RUN_STARTED:
        return False
    if stat.S_ISLNK(info.st_mode):
        # a link staged by replace_symlink() lives for one rename; one older than this run is a leftover
        return _unlink_quietly(tmp)
    if not stat.S_ISREG(info.st_mode):
        return False
    try:
        fd = os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False  # a live writer's
    try:
        # still the file that was checked (not replaced in between), then removed while locked
        if (os.fstat(fd).st_ino, os.fstat(fd).st_dev) != (info.st_ino, info.st_dev):
            return False
        return _unlink_quietly(tmp)
    finally:
        os.close(fd)


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        return False
    return True


def stage(module, path, content, mode, root_owned, validate=None, temp_prefix=None):
    """Write content (str or bytes) to a temp file beside path with its final mode and owner, on disk, and check it
    with validate (a command holding %s). Returns a Staged for commit(); raises ValidationError (temp removed)
    when the check fails. Parent directories are created 0755. temp_prefix names the temp file
    (``.topotune-<temp_prefix>.<random>.tmp``; default the destination's name). module is the AnsibleModule, or None
    on the controller (see the module docstring)."""
    directory = os.path.dirname(path) or "."
    # exist_ok: a concurrent writer (another slice of a sliced job writing the same report directory) may create it
    # between the check and the call
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=_temp_prefix(path, temp_prefix), suffix=TEMP_SUFFIX)
    staged = Staged(tmp, fd, path, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # held until commit: see remove_stale_temps()
        data = memoryview(_bytes(content))
        while data:
            data = data[os.write(fd, data):]
        if root_owned:
            os.fchown(fd, 0, 0)  # before fchmod: chown clears the set-id bits
        os.fchmod(fd, mode)
        # the data reaches the disk before the rename makes it the file: after a crash, old or new, never empty
        os.fsync(fd)
        if validate:
            rc, out, err = _run_validate(module, validate % tmp)
            if rc != 0:
                raise ValidationError("%s: validation (%s) failed with rc=%d: %s" % (path, validate, rc, (err or out).strip()))
    except BaseException:
        staged.discard()
        raise
    return staged


def _run_validate(module, command):
    if module is not None:
        return module.run_command(command)
    try:
        return run(shlex.split(command))
    except CommandError as err:
        return err.rc, "", str(err)


def commit(module, staged):
    """Rename a staged temp file over its destination: one rename(2) in one directory, so readers (and a run killed
    at any point) see the old file or the new one with its mode and owner. Ansible's atomic_move is not used: it
    gives an existing file's mode and owner to the new content, and a new file its umask mode, until the caller
    sets them after the rename (a window a kill can freeze, e.g. a 0600 file readable by all)."""
    try:
        if module is not None and module.selinux_enabled():
            # the context the file has (or its default), as atomic_move gives it, set before the file appears
            exists = os.path.exists(staged.path)
            context = module.selinux_context(staged.path) if exists else module.selinux_default_context(staged.path)
            module.set_context_if_different(staged.tmp, context, False)
        os.rename(staged.tmp, staged.path)
    finally:
        staged.discard()


def stage_all(module, writes, root_owned, sweep=()):
    """stage() every ``(path, content, mode, validate)`` before any file is renamed into place, after removing
    stale temp files (remove_stale_temps) in the directories of the writes and of sweep (more paths the caller
    manages). Returns the Staged list for commit_all(). On any error every staged temp file is removed and the
    error raised: nothing of the set has changed."""
    remove_stale_temps([write[0] for write in writes] + list(sweep))
    staged = []
    try:
        for path, content, mode, validate in writes:
            staged.append(stage(module, path, content, mode, root_owned, validate))
    except BaseException:
        for item in staged:
            item.discard()
        raise
    return staged


def commit_all(module, staged):
    """commit() each staged file in order; every temp file is gone afterwards, even on an error."""
    try:
        for item in staged:
            commit(module, item)
    finally:
        for item in staged:
            item.discard()


def write_atomic(module, path, content, mode, root_owned, validate=None, temp_prefix=None):
    """One file written atomically: stale temp files beside it removed, then stage() and commit()."""
    remove_stale_temps([path])
    commit(module, stage(module, path, content, mode, root_owned, validate, temp_prefix))


def replace_symlink(path, src):
    """Point the symlink path at src atomically (a link beside it renamed over it): readers see the old link or the
    new one, never none. Parent directories are created 0755."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755, exist_ok=True)
    prefix = _temp_prefix(path)
    for _attempt in range(100):
        tmp = os.path.join(directory, "%s%s%s" % (prefix, os.urandom(4).hex(), TEMP_SUFFIX))
        try:
            os.symlink(src, tmp)
        except FileExistsError:
            continue
        try:
            os.rename(tmp, path)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        return
    raise FileExistsError(errno.EEXIST, "no free temp name for the link", path)


def diff_entry(path, before, after, note=""):
    """One element of a module's diff list (the callbacks print each with its own header)."""
    return {"before_header": path, "after_header": path + note, "before": before or "", "after": after or ""}
