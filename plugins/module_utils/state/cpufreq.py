"""CPU frequency governors through sysfs (``cpu<N>/cpufreq/scaling_governor``) under a sysroot.

Public API (standard library only, Python 3.8+):

``GovernorError(TopotuneError)``
    A governor request that cannot be met (unknown CPUs, governor not available); the message names the
    CPUs, the governor, what is available and the fix.
``read_state(sysroot, cpus=None)``
    ``{"cpus": [...], "governors": {cpu: governor}, "available": {cpu: [governors]}, "no_cpufreq": [...]}``
    for the selected CPUs (default: every ``cpu<N>`` directory). Reads only.
``plan(state, governor)``
    CPUs whose governor differs from ``governor``; raises ``GovernorError`` when ``governor`` is not in a
    CPU's ``scaling_available_governors``.
``apply(sysroot, cpus, governor)``
    Write ``governor`` to each CPU's ``scaling_governor`` in place (sysfs attributes cannot be replaced by
    rename) and re-read it; raises ``GovernorError`` naming the CPUs the kernel refused.
``group(governors)``
    ``{cpu: gov}`` -> ``{gov: "cpulist"}``, the compact form for diffs and results.
"""

import os
import re

from ..core.cpulist import format_cpulist, parse
from ..core.errors import TopotuneError
from ..core.sysroot import join, list_dir, read_text

CPU_BASE = "sys/devices/system/cpu"
_CPU_DIR = re.compile(r"^cpu([0-9]+)$")


class GovernorError(TopotuneError):
    """A governor request that cannot be met."""


def _cpufreq_dir(sysroot, cpu):
    return join(sysroot, "%s/cpu%d/cpufreq" % (CPU_BASE, cpu))


def all_cpus(sysroot):
    """Every ``cpu<N>`` directory under the sysroot, sorted."""
    return sorted(int(m.group(1)) for m in (_CPU_DIR.match(n) for n in list_dir(join(sysroot, CPU_BASE))) if m)


def read_state(sysroot, cpus=None):
    """Current governors of ``cpus`` (a cpulist string, a list, or None for all)."""
    present = all_cpus(sysroot)
    if cpus is None or cpus == "" or cpus == "all":
        selected = present
    else:
        selected = parse(cpus) if isinstance(cpus, str) else sorted(set(int(c) for c in cpus))
        missing = sorted(set(selected) - set(present))
        if missing:
            raise GovernorError("CPUs %s do not exist on this node (present: %s): fix the cpus list"
                                % (format_cpulist(missing), format_cpulist(present) or "none"))
    governors, available, no_cpufreq = {}, {}, []
    for cpu in selected:
        base = _cpufreq_dir(sysroot, cpu)
        gov = read_text(os.path.join(base, "scaling_governor"), None)
        if gov is None:
            no_cpufreq.append(cpu)
            continue
        governors[cpu] = gov
        available[cpu] = read_text(os.path.join(base, "scaling_available_governors"), "").split()
    return {"cpus": selected, "governors": governors, "available": available, "no_cpufreq": no_cpufreq}


def plan(state, governor):
    """CPUs to change; ``GovernorError`` when ``governor`` is not available on some CPU."""
    lacking = [cpu for cpu, avail in state["available"].items() if avail and governor not in avail]
    if lacking:
        avail = sorted({g for cpu in lacking for g in state["available"][cpu]})
        raise GovernorError(
            "governor %r is not available on CPUs %s (scaling_available_governors: %s): set cpu_governor_governor "
            "to one of them, or load the cpufreq driver/governor module that provides %r"
            % (governor, format_cpulist(lacking), " ".join(avail), governor))
    return sorted(cpu for cpu, gov in state["governors"].items() if gov != governor)


def apply(sysroot, cpus, governor):
    """Write ``governor`` to each CPU in ``cpus``; verify by re-reading."""
    refused = []
    for cpu in cpus:
        path = os.path.join(_cpufreq_dir(sysroot, cpu), "scaling_governor")
        try:
            # sysfs attribute: written in place (no temp file + rename on sysfs); the newline keeps a
            # snapshot/simulated tree reading like sysfs, which the kernel ignores on write
            with open(path, "w") as handle:
                handle.write(governor + "\n")
        except OSError as err:
            raise GovernorError("cannot write %s: %s" % (path, err.strerror or err)) from None
        if read_text(path, None) != governor:
            refused.append(cpu)
    if refused:
        raise GovernorError("the kernel kept another governor than %r on CPUs %s: check dmesg and the cpufreq "
                            "driver (intel_pstate/amd-pstate active mode only offers performance/powersave)"
                            % (governor, format_cpulist(refused)))


def group(governors):
    """``{cpu: gov}`` -> ``{gov: cpulist}``."""
    out = {}
    for cpu, gov in governors.items():
        out.setdefault(gov, []).append(cpu)
    return {gov: format_cpulist(cpus) for gov, cpus in sorted(out.items())}
