"""Runtime kernel values under a sysroot: sysctl files in procfs and cpuidle state switches in sysfs.

Public API (standard library only, Python 3.8+):

``KernelRuntimeError(TopotuneError)``
    Bad request (sysctl name, cpuidle value) or a write the kernel refused; the message names it and the fix.
``sysctl_path(sysroot, name)``
    ``kernel.numa_balancing`` -> ``<sysroot>/proc/sys/kernel/numa_balancing``.
``plan_sysctl(sysroot, wanted)`` / ``plan_cpuidle(sysroot, wanted)``
    Read only. Each returns ``(writes, before, after, state, warnings)``: ``writes`` a list of
    ``(path, value)``, ``before``/``after`` diff text, ``state`` the result after the writes.
``apply_writes(writes)``
    Write each value in place (procfs/sysfs cannot do temp file + rename) and verify it by re-reading.
``read_cmdline(sysroot)``
    The running kernel's command line (``<sysroot>/proc/cmdline``); raises ``KernelRuntimeError`` naming the path.
``parse_os_release(text)``
    ``/etc/os-release`` as ``{KEY: value}`` (quotes removed).
``pick_bootloader(grubby, grub, os_release)``
    The tool that persists kernel parameters: ``grubby`` when grubby is installed, ``grub_dropin`` when GRUB's
    ``/etc/default/grub`` or ``update-grub`` is, else by the os-release family; ``None`` when nothing matches.
``parse_grubby_args(text)``
    The ``args=`` of every boot entry in ``grubby --info=ALL`` output, unquoted.
"""

import os
import re

from ..core.cpulist import format_cpulist
from ..core.errors import TopotuneError
from ..core.sysroot import join, list_dir, read_text

_SYSCTL_NAME = re.compile(r"^[A-Za-z0-9_-]+([./][A-Za-z0-9_-]+)*$")
_CPU_DIR = re.compile(r"^cpu([0-9]+)$")
_STATE_DIR = re.compile(r"^state[0-9]+$")
_IDLE_VALUES = {"disabled": "1", "enabled": "0"}
BOOTLOADERS = ("auto", "grub_dropin", "grubby", "none")
# os-release IDs (ID, ID_LIKE) by the tool their kernels' boot entries are updated with
_FAMILY_TOOL = (
    (("debian", "ubuntu"), "grub_dropin"),
    (("rhel", "fedora", "centos"), "grubby"),
)


class KernelRuntimeError(TopotuneError):
    """A runtime kernel write that cannot be done."""


def _norm(value):
    return " ".join(str(value).split())


def sysctl_path(sysroot, name):
    if not _SYSCTL_NAME.match(name or ""):
        raise KernelRuntimeError("sysctl name %r is invalid: use dotted names such as kernel.numa_balancing" % (name,))
    return join(sysroot, "proc/sys/" + name.replace(".", "/"))


def plan_sysctl(sysroot, wanted):
    writes, before, after, state, warnings = [], "", "", {}, []
    for name in sorted(wanted or {}):
        value = wanted[name]
        if isinstance(value, bool) or value is None:
            raise KernelRuntimeError("sysctl %s: value %r is not a number or string; quote it (\"0\")" % (name, value))
        path = sysctl_path(sysroot, name)
        current = read_text(path, None)
        if current is None:
            warnings.append("sysctl %s does not exist on this kernel (%s): skipped" % (name, path))
            state[name] = None
            continue
        target = _norm(value)
        state[name] = target
        if _norm(current) != target:
            writes.append((path, target))
            before += "%s = %s\n" % (name, _norm(current))
            after += "%s = %s\n" % (name, target)
    return writes, before, after, state, warnings


def plan_cpuidle(sysroot, wanted):
    writes, before, after, state, warnings = [], "", "", {}, []
    if not wanted:
        return writes, before, after, state, warnings
    for name, value in wanted.items():
        if value not in _IDLE_VALUES:
            raise KernelRuntimeError("cpuidle state %s: %r is not one of disabled, enabled" % (name, value))
    base = join(sysroot, "sys/devices/system/cpu")
    found = {name: [] for name in wanted}
    changed = {name: [] for name in wanted}
    for entry in list_dir(base):
        match = _CPU_DIR.match(entry)
        if not match:
            continue
        cpu = int(match.group(1))
        idle_dir = os.path.join(base, entry, "cpuidle")
        for sdir in list_dir(idle_dir):
            if not _STATE_DIR.match(sdir):
                continue
            sname = read_text(os.path.join(idle_dir, sdir, "name"), None)
            if sname not in wanted:
                continue
            path = os.path.join(idle_dir, sdir, "disable")
            current = read_text(path, None)
            if current is None:
                continue
            found[sname].append(cpu)
            target = _IDLE_VALUES[wanted[sname]]
            if current != target:
                writes.append((path, target))
                changed[sname].append(cpu)
    for name in sorted(wanted):
        if not found[name]:
            warnings.append("no CPU has cpuidle state %s (VM, or another cpuidle driver): skipped" % name)
        if changed[name]:
            before += "cpuidle %s: %s on CPUs %s\n" % (
                name, "enabled" if wanted[name] == "disabled" else "disabled", format_cpulist(changed[name]))
            after += "cpuidle %s: %s on CPUs %s\n" % (name, wanted[name], format_cpulist(changed[name]))
        state[name] = {"state": wanted[name], "cpus": format_cpulist(found[name]),
                       "changed_cpus": format_cpulist(changed[name])}
    return writes, before, after, state, warnings


def apply_writes(writes):
    for path, value in writes:
        try:
            # procfs/sysfs attribute: written in place; the kernel ignores the trailing newline, which
            # keeps a snapshot/simulated tree reading like the real files
            with open(path, "w") as handle:
                handle.write(value + "\n")
        except OSError as err:
            raise KernelRuntimeError("cannot write %r to %s: %s (read-only /proc/sys in a container? use a "
                                     "sysroot)" % (value, path, err.strerror or err)) from None
        if _norm(read_text(path, "")) != _norm(value):
            raise KernelRuntimeError("the kernel did not keep %r in %s (read back %r)"
                                     % (value, path, read_text(path, "")))


def read_cmdline(sysroot):
    path = join(sysroot, "proc/cmdline")
    text = read_text(path, None)
    if text is None:
        raise KernelRuntimeError("cannot read the running kernel's command line from %s: is sysroot %r right?"
                                 % (path, sysroot))
    return text


def parse_os_release(text):
    values = {}
    for line in (text or "").splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            values[key] = value.strip().strip("\"'")
    return values


def pick_bootloader(grubby, grub, os_release):
    """``grubby``/``grub``: whether those tools are installed; ``os_release``: ``parse_os_release`` output."""
    # grubby first: RedHat-family nodes have /etc/default/grub too, but their boot entries (BLS) follow grubby
    if grubby:
        return "grubby"
    if grub:
        return "grub_dropin"
    ids = [os_release.get("ID", "")] + os_release.get("ID_LIKE", "").split()
    for family, tool in _FAMILY_TOOL:
        if any(i in family for i in ids):
            return tool
    return None


def parse_grubby_args(text):
    args = []
    for line in (text or "").splitlines():
        if line.startswith("args="):
            args.append(line[len("args="):].strip().strip('"'))
    return args
