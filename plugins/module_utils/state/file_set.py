# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge a set of root-owned files, symlinks and removals in one call, all or nothing: the body of the
``managed_files`` module, and of every module that writes a role's files with its other work in one call
(``cpu_governor``, ``kernel_runtime``).

Public API (standard library only, Python 3.8+):

``FileSetError(TopotuneError)``
    A malformed entry, a file that failed its ``validate`` command (nothing of the set was changed), or a
    non-link standing where a link belongs; the message names the path and the fix.
``converge(module, files=(), links=(), prune=(), check_mode=False, units=())``
    ``files``: ``{path, content, mode="0644", state="present", validate=None}``; ``links``: ``{path, src,
    state="present"}``; ``prune``: ``{path, pattern}`` (files matching ``pattern`` in ``path`` that ``files`` does
    not list are removed). Writes through ``files.py`` (every file staged and validated before the first rename),
    unless ``check_mode``. Returns ``{"changed", "files", "changed_files", "created_files", "changed_links",
    "removed_files", "diff", "unit_changed"}``, the ``managed_files`` result (``created_files``: the changed files
    that did not exist). ``units``: the paths among them that are systemd unit files or their enable links; when one
    changed (``unit_changed``) systemd is reloaded in the same call, as ``systemctl enable`` does (where systemd is
    not running, a warning says the unit takes effect when it runs).
"""

import fnmatch
import os

from ..core.errors import TopotuneError
from ..core.files import ValidationError, commit_all, diff_entry, differs, parse_mode, read_text, replace_symlink, stage_all

_FILE_DEFAULTS = {"content": None, "mode": "0644", "state": "present", "validate": None}
_LINK_DEFAULTS = {"src": None, "state": "present"}


class FileSetError(TopotuneError):
    """A file set that cannot be converged."""


def _entries(items, defaults):
    return [dict(defaults, **{k: v for k, v in item.items() if v is not None}) for item in items or ()]


def _check(files, links):
    """The parsed mode of every file to write; FileSetError naming the first bad entry."""
    seen, modes = set(), {}
    for kind, entries in (("files", files), ("links", links)):
        for entry in entries:
            path = entry.get("path")
            if not isinstance(path, str) or not os.path.isabs(path):
                raise FileSetError("%s: path %r must be absolute" % (kind, path))
            if path in seen:
                raise FileSetError("%s is listed twice; each path has one writer" % path)
            seen.add(path)
            if entry["state"] not in ("present", "absent"):
                raise FileSetError("%s: state %r must be present or absent" % (path, entry["state"]))
            present = entry["state"] == "present"
            if kind == "files" and present and entry["content"] is None:
                raise FileSetError("%s: content is required unless state=absent" % path)
            if kind == "links" and present and not entry["src"]:
                raise FileSetError("%s: src is required unless state=absent" % path)
            if kind == "files" and present:
                modes[path] = parse_mode(entry["mode"], "%s: mode" % path)
                if entry["validate"] and "%s" not in entry["validate"]:
                    raise FileSetError("%s: validate must contain %%s (the staged file), got %r" % (path, entry["validate"]))
    return modes


def converge(module, files=(), links=(), prune=(), check_mode=False, units=()):
    files, links = _entries(files, _FILE_DEFAULTS), _entries(links, _LINK_DEFAULTS)
    modes = _check(files, links)
    root_owned = os.geteuid() == 0
    writes, removals, link_changes, diffs, created = [], [], [], [], []
    wanted = set()
    for entry in files:
        path = entry["path"]
        if entry["state"] == "absent":
            if os.path.lexists(path):
                removals.append(path)
            continue
        wanted.add(path)
        if differs(path, entry["content"], modes[path], root_owned):
            writes.append((path, entry["content"], modes[path], entry["validate"]))
            if not os.path.lexists(path):
                created.append(path)
            diffs.append(diff_entry(path, read_text(path), entry["content"]))
    for rule in prune or ():
        directory = rule["path"]
        if not os.path.isdir(directory):
            continue
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if fnmatch.fnmatch(name, rule["pattern"]) and path not in wanted and os.path.isfile(path) and path not in removals:
                removals.append(path)
    for path in removals:
        diffs.append(diff_entry(path, read_text(path), "", " (removed)"))
    for link in links:
        current = os.readlink(link["path"]) if os.path.islink(link["path"]) else None
        if link["state"] == "absent":
            if current is not None:
                link_changes.append((link["path"], None))
                diffs.append(diff_entry(link["path"], "-> %s\n" % current, "", " (removed)"))
        elif current != link["src"]:
            if os.path.lexists(link["path"]) and current is None:
                raise FileSetError("%s exists and is not a symlink; move it away, topotune does not replace it" % link["path"])
            link_changes.append((link["path"], link["src"]))
            diffs.append(diff_entry(link["path"], "-> %s\n" % current if current else "", "-> %s\n" % link["src"]))
    changed_paths = {w[0] for w in writes} | set(removals) | {c[0] for c in link_changes}
    unit_changed = bool(set(units) & changed_paths)
    if not check_mode:
        _apply(module, writes, removals, link_changes, sorted(wanted) + [link["path"] for link in links], root_owned)
        if unit_changed:
            daemon_reload(module)
    return {
        "unit_changed": unit_changed,
        "changed": bool(writes or removals or link_changes),
        "files": sorted(wanted),
        "changed_files": [w[0] for w in writes],
        "created_files": created,
        "changed_links": [c[0] for c in link_changes],
        "removed_files": removals,
        "diff": diffs,
    }


def daemon_reload(module):
    """``systemctl daemon-reload`` after a unit file or its enable link changed; a warning where systemd does not run
    (sd_booted(): no /run/systemd/system), FileSetError when the reload fails."""
    systemctl = module.get_bin_path("systemctl")
    if not systemctl or not os.path.isdir("/run/systemd/system"):
        module.warn("systemd is not running here: the unit files are written and take effect when it runs")
        return
    rc, out, err = module.run_command([systemctl, "daemon-reload"])
    if rc != 0:
        raise FileSetError("systemctl daemon-reload failed (rc=%d): %s; the unit files are written, reload systemd "
                           "before relying on them" % (rc, (err or out).strip()))


def _apply(module, writes, removals, link_changes, managed, root_owned):
    # stage and validate everything first: a rejected file leaves every file of the call as it was. Temp files an
    # interrupted run left are removed from every directory this call manages, written to or not.
    try:
        staged = stage_all(module, writes, root_owned, sweep=managed)
    except ValidationError as err:
        raise FileSetError("%s; no file was changed" % err) from None
    # each step below is one rename or unlink: a run killed anywhere leaves every file and link old or new
    commit_all(module, staged)
    for path in removals:
        os.unlink(path)
    for path, src in link_changes:
        if src is None:
            os.unlink(path)
        else:
            replace_symlink(path, src)
