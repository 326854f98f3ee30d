# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node faults: what stops a run from changing a node, said in one line with its fix.

``preflight`` runs on the node before a run takes its lock (``topotune.instinct.run_lock``), so a node that cannot
take the run's writes fails before anything is changed, instead of half-tuned at the first write:

- a directory topotune writes is on a read-only mount (e.g. ``/etc`` remounted read-only);
- the filesystem holding it has less than ``min_free_kib`` free, or no free inodes (e.g. a full tmpfs over
  ``/etc/topotune``);
- a file the manifest of the last bring-up lists, or one of those directories, is immutable or append-only
  (``chattr +i`` / ``+a``): topotune could neither update nor correct it.

``explain_failure`` turns the registered result of a task that failed on a node (a module message, a module that
could not start, an unreachable node) into one line naming the fault and the fix, for the run summary.

Standard library only (the preflight runs on the managed node's Python 3.8+).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import struct

# Directories the roles write with their defaults (docs/drift.md, "What each role records").
DEFAULT_WRITABLE = (
    "/etc/topotune", "/etc/systemd/system", "/etc/sysctl.d", "/etc/default/grub.d", "/etc/profile.d", "/etc/docker",
    "/usr/local/bin", "/usr/local/sbin",
)
FS_IOC_GETFLAGS = 0x80086601  # _IOR('f', 1, long) on 64-bit Linux
FS_IMMUTABLE_FL = 0x10
FS_APPEND_FL = 0x20


def existing_ancestor(path):
    path = os.path.abspath(path)
    while not os.path.exists(path) and path != "/":
        path = os.path.dirname(path)
    return path


def _unescape(field):
    # mountinfo escapes space, tab, newline and backslash as \ooo
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def read_mounts(mountinfo="/proc/self/mountinfo"):
    """{mount point: (fs type, source)} of the visible mounts (the last one mounted on a point wins)."""
    mounts = {}
    try:
        with open(mountinfo, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                left, _sep, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) >= 5 and len(rest) >= 2:
                    mounts[_unescape(fields[4])] = (rest[0], rest[1])
    except OSError:
        pass
    return mounts


def mount_point(path, mounts):
    """The longest mount point holding ``path`` (``/`` when the mount table is unknown)."""
    best = "/"
    for point in mounts:
        if (path == point or path.startswith(point.rstrip("/") + "/")) and len(point) > len(best):
            best = point
    return best


def get_flags(path):
    """The file's inode flags (``lsattr``), None when the filesystem cannot say."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        raw = fcntl.ioctl(fd, FS_IOC_GETFLAGS, struct.pack("l", 0))
        return struct.unpack("l", raw)[0]
    except OSError:  # ENOTTY / EOPNOTSUPP / EINVAL: no flags on this filesystem
        return None
    finally:
        os.close(fd)


def manifest_files(manifest_path):
    """The files a manifest (``topotune.instinct.managed_state``) lists, sorted; [] without a readable manifest."""
    try:
        with open(manifest_path, encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return []
    owners = manifest.get("owners") if isinstance(manifest, dict) else None
    files = set()
    for spec in (owners or {}).values():
        if not isinstance(spec, dict):
            continue
        if isinstance(spec.get("files"), dict):
            files.update(p for p in spec["files"] if isinstance(p, str))
        for entry in spec.get("json_keys") or []:
            if isinstance(entry, dict) and isinstance(entry.get("path"), str):
                files.add(entry["path"])
    return sorted(files)


def _kib(value):
    return "%d KiB" % (value // 1024)


def preflight(writable=DEFAULT_WRITABLE, min_free_kib=512, manifest=None, mountinfo="/proc/self/mountinfo",
              statvfs=os.statvfs, flags=get_flags):
    """One line per problem that would stop the run's writes; [] for a node that can take them."""
    mounts = read_mounts(mountinfo)
    by_mount = {}
    for path in writable:
        existing = existing_ancestor(path)
        point = mount_point(existing, mounts) if mounts else existing
        by_mount.setdefault(point, (existing, []))[1].append(path)
    problems = []
    for point, (existing, paths) in sorted(by_mount.items()):
        held = ", ".join(paths)
        try:
            st = statvfs(existing)
        except OSError as err:
            problems.append("cannot inspect %s (%s): %s" % (existing, held, err.strerror or err))
            continue
        fstype = mounts.get(point, ("?", "?"))[0]
        if st.f_flag & os.ST_RDONLY:
            problems.append("%s is mounted read-only (%s, holding %s): topotune cannot write there; remount it "
                            "read-write (mount -o remount,rw %s) and rerun" % (point, fstype, held, point))
            continue
        free = st.f_bavail * st.f_frsize
        if free < min_free_kib * 1024:
            problems.append("%s is full: %s free of %s (%s, holding %s), topotune needs %d KiB (min_free_kib); free space "
                            "there and rerun" % (point, _kib(free), _kib(st.f_blocks * st.f_frsize), fstype, held, min_free_kib))
        elif st.f_files and not st.f_favail:
            problems.append("%s has no free inodes (%s, holding %s): remove files there and rerun" % (point, fstype, held))
    checked = [p for p in writable if os.path.isdir(p)] + (manifest_files(manifest) if manifest else [])
    for path in checked:
        value = flags(path) if os.path.exists(path) else None
        if value is None:
            continue
        if value & (FS_IMMUTABLE_FL | FS_APPEND_FL):
            attr = "i" if value & FS_IMMUTABLE_FL else "a"
            problems.append("%s is %s (chattr +%s): topotune can neither update nor correct it; run chattr -%s %s and rerun"
                            % (path, "immutable" if attr == "i" else "append-only", attr, attr, path))
    return problems


_HINTS = (
    ("read-only file system", "remount that filesystem read-write and rerun"),
    ("no space left on device", "free space on that filesystem and rerun"),
    ("disk quota exceeded", "free space or raise the quota and rerun"),
    ("operation not permitted", "if the file is immutable or append-only (lsattr), run chattr -i / -a on it and rerun"),
)


def _first_line(text):
    text = str(text or "").strip()
    return " ".join(text.splitlines()[0].split()) if text else ""


def _interpreter(result, default):
    found = re.search(r"module interpreter '([^']+)'", str(result.get("msg") or ""))
    if found:
        return found.group(1)
    found = re.search(r"(\S+): (?:not found|No such file or directory)", str(result.get("module_stderr") or ""))
    return found.group(1) if found else default


def explain_failure(result, interpreter=None):
    """One line naming why a registered task result failed and the fix; None when it is not a failure."""
    if not isinstance(result, dict) or not (result.get("failed") or result.get("unreachable")):
        return None
    # a loop: the first item that failed says why
    items = [r for r in result.get("results") or [] if isinstance(r, dict) and (r.get("failed") or r.get("unreachable"))]
    if items and not result.get("unreachable"):
        return explain_failure(items[0], interpreter)
    msg = _first_line(result.get("msg"))
    if result.get("unreachable"):
        return "unreachable (%s): check that the node is up and reachable, then rerun" % (msg or "no answer")
    stderr = str(result.get("module_stderr") or "")
    if result.get("rc") == 127 or "interpreter" in msg and "not found" in msg:
        path = _interpreter(result, interpreter or "python3")
        return ("no Python on the node: %s was not found (%s); install python3 on the node (apt-get install python3 / "
                "dnf install python3) or set ansible_python_interpreter for it, then rerun" % (path, _first_line(stderr) or msg))
    if not msg and stderr:
        msg = _first_line(stderr)
    lowered = msg.lower()
    if "rerun" not in lowered:
        for needle, hint in _HINTS:
            if needle in lowered:
                return "%s; %s" % (msg, hint)
    return msg or "failed without a message; see its fatal line in the play output"


def first_failure(variables, preferred=()):
    """The registered result that failed a host, from its variables: the ``preferred`` names first, then by name."""
    names = [n for n in preferred if n in variables] + sorted(n for n in variables if n not in preferred)
    for name in names:
        try:
            value = variables[name]
        except Exception:  # noqa: BLE001 (a variable that cannot be read is not the failed result)
            continue
        if isinstance(value, dict) and (value.get("failed") or value.get("unreachable")) and "msg" in value:
            return name, value
    return None, None


def host_variables(hostvars, host):
    """A host's variables from the C(hostvars) magic variable, untemplated when it can (``raw_get``): a registered
    result is plain data, and templating every variable of the host could fail on ones meant for other contexts."""
    raw_get = getattr(hostvars, "raw_get", None)
    try:
        data = raw_get(host) if raw_get else hostvars[host]
    except Exception:  # noqa: BLE001 (an unknown host has no variables)
        return {}
    return data if hasattr(data, "keys") and hasattr(data, "get") else {}
