# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who can open the ROCm device nodes, and which container tooling the node has (read-only).

``device_access(sysroot, users=())``
    ``{sysroot, kfd, render_nodes, users, docker, amd_ctk}``: owner, group, GID and mode of ``/dev/kfd`` and of every
    ``/dev/dri/renderD*`` under ``sysroot``, each user's groups, and where dockerd (or docker) and amd-ctk are.

Read by the ``gpu_device_access`` module and, without users, by ``gpu_topology`` as part of the discovery, which
the container_runtime action then reads instead of a round trip of its own.
"""

import grp
import os
import pwd
import re
import shutil
import stat

from ..core.sysroot import join


def _name(getter, ident):
    try:
        return getter(ident)[0]
    except KeyError:
        return str(ident)


def device_node(sysroot, path):
    """``{path, full_path, exists}`` and, when it exists, ``char_device``, ``owner``, ``gid``, ``group``, ``mode``."""
    full = join(sysroot, path)
    entry = {"path": path, "full_path": full, "exists": False}
    try:
        st = os.stat(full)
    except OSError:
        return entry
    entry.update(
        exists=True,
        char_device=stat.S_ISCHR(st.st_mode),
        owner=_name(pwd.getpwuid, st.st_uid),
        gid=st.st_gid,
        group=_name(grp.getgrgid, st.st_gid),
        mode="%04o" % stat.S_IMODE(st.st_mode),
    )
    return entry


def render_nodes(sysroot):
    """One ``device_node`` per ``renderD<minor>`` (plus ``minor``), sorted by minor; [] without ``/dev/dri``."""
    try:
        names = os.listdir(join(sysroot, "/dev/dri"))
    except OSError:
        return []
    minors = sorted(int(m.group(1)) for m in (re.match(r"^renderD(\d+)$", n) for n in names) if m)
    return [dict(device_node(sysroot, "/dev/dri/renderD%d" % minor), minor=minor) for minor in minors]


def user(name):
    """``{exists, groups}`` of the account ``name`` (its primary group included)."""
    try:
        account = pwd.getpwnam(name)
    except KeyError:
        return {"exists": False, "groups": []}
    groups = {g.gr_name for g in grp.getgrall() if name in g.gr_mem}
    groups.add(_name(grp.getgrgid, account.pw_gid))
    return {"exists": True, "groups": sorted(groups)}


def tool(*names):
    """``{present, path}`` of the first of ``names`` on PATH (and the usual sbin/bin directories)."""
    for name in names:
        path = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/usr/bin:/usr/local/bin")
        if path:
            return {"present": True, "path": path}
    return {"present": False, "path": None}


def device_access(sysroot, users=()):
    return {
        "sysroot": sysroot,
        "kfd": device_node(sysroot, "/dev/kfd"),
        "render_nodes": render_nodes(sysroot),
        "users": {name: user(name) for name in users},
        "docker": tool("dockerd", "docker"),
        "amd_ctk": tool("amd-ctk"),
    }
