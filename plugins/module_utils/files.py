# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Atomic, compare-first file writes shared by the modules that write files (one place for temp file, mode,
owner and validation handling)."""

from __future__ import annotations

import os
import tempfile


def read_text(path):
    """The file's text, or None when it does not exist or cannot be read as text."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def differs(path, content, mode, root_owned):
    """True when path is missing or its content, permission bits or (as root) root:root ownership differ."""
    try:
        info = os.lstat(path)
    except OSError:
        return True
    if not os.path.isfile(path) or os.path.islink(path):
        return True
    if info.st_mode & 0o7777 != mode:
        return True
    if root_owned and (info.st_uid, info.st_gid) != (0, 0):
        return True
    return read_text(path) != content


class ValidationError(Exception):
    """A staged file was rejected by its validate command; nothing was moved into place."""


def stage(module, path, content, mode, root_owned, validate=None, temp_prefix=".topotune-"):
    """Write content to a temp file beside path with its final mode and owner and check it with validate (a command
    holding %s). Returns the temp path; raises ValidationError (temp removed) when the check fails. Parent
    directories are created 0755."""
    directory = os.path.dirname(path) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=temp_prefix)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(content)
        os.chmod(tmp, mode)
        if root_owned:
            os.chown(tmp, 0, 0)
        if validate:
            rc, out, err = module.run_command(validate % tmp)
            if rc != 0:
                raise ValidationError("%s: validation (%s) failed with rc=%d: %s" % (path, validate, rc, (err or out).strip()))
    except BaseException:
        discard(tmp)
        raise
    return tmp


def commit(module, tmp, path, mode, root_owned):
    """Rename a staged temp file over path: readers see the old or the new file, never half of one."""
    try:
        module.atomic_move(tmp, path)
    finally:
        discard(tmp)
    # atomic_move keeps an existing file's mode and owner; enforce ours
    os.chmod(path, mode)
    if root_owned:
        os.chown(path, 0, 0)


def stage_all(module, writes, root_owned):
    """stage() every ``(path, content, mode, validate)`` before any file is renamed into place; returns
    ``[(tmp, path, mode)]`` for commit_all(). On any error every staged temp file is removed and the error raised:
    nothing of the set has changed."""
    staged = []
    try:
        for path, content, mode, validate in writes:
            staged.append((stage(module, path, content, mode, root_owned, validate), path, mode))
    except BaseException:
        for tmp, _path, _mode in staged:
            discard(tmp)
        raise
    return staged


def commit_all(module, staged, root_owned):
    for tmp, path, mode in staged:
        commit(module, tmp, path, mode, root_owned)


def discard(tmp):
    if os.path.exists(tmp):
        os.unlink(tmp)


def write_atomic(module, path, content, mode, root_owned, validate=None, temp_prefix=".topotune-"):
    """stage() then commit(): one file written atomically."""
    commit(module, stage(module, path, content, mode, root_owned, validate, temp_prefix), path, mode, root_owned)


def diff_entry(path, before, after, note=""):
    """One element of a module's diff list (the callbacks print each with its own header)."""
    return {"before_header": path, "after_header": path + note, "before": before or "", "after": after or ""}
