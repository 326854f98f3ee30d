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
``OPTIONS``
    The module's options and the role's variables, declared once (``module_utils/core/options.py``).
``role_plan(governor, cpus, sysroot, persist, boot_script=None)``
    The decisions of role ``cpu_governor`` from its variables, before anything is read: raises ``GovernorError``
    naming each wrong variable (``cpu_governor_<option>``), its value and the fix; else the plan: the CPU
    directory, the boot-time files and enable link (``persist``), and the ``cpu_governor_managed`` record.
"""

import os
import re

from ..core.cpulist import CpulistError, format_cpulist, parse
from ..core.errors import TopotuneError
from ..core.sysroot import join, list_dir, read_text

CPU_BASE = "sys/devices/system/cpu"
_CPU_DIR = re.compile(r"^cpu([0-9]+)$")
# Governor names are kernel identifiers; they are written to sysfs and passed to the boot script.
_GOVERNOR = re.compile(r"^[a-z][a-z0-9_-]*$")
_CPUS = re.compile(r"^(all|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)$")
_SYSROOT = re.compile(r"^/\S*$")
# The boot-time unit of role cpu_governor and the link `systemctl enable` creates for its WantedBy=multi-user.target
UNIT = "topotune-cpu-governor.service"
UNIT_FILE = "/etc/systemd/system/" + UNIT
UNIT_LINK = "/etc/systemd/system/multi-user.target.wants/" + UNIT
SCRIPT = "/usr/local/sbin/topotune-cpu-governor"
HEADER = "# Managed by topotune (role topotune.instinct.cpu_governor): local edits are overwritten."

# The options of the cpu_governor module and the variables of role cpu_governor, declared once
# (module_utils/core/options.py): the module's argument spec is built from here, its documentation and the role's
# argument specs, defaults, README table and task arguments generated from here (scripts/gen-options).
OPTIONS = {
    "sysroot": {
        "type": "path", "default": "/",
        "description": "Directory under which sysfs is read and written (C(/) on a real node, C(/sim) on a simulated "
                       "one).",
        "role": {"type": "str", "default": "{{ topotune_sysroot | default('/') }}"},
    },
    "governor": {
        "type": "str", "required": True,
        "description": "Governor to set, for example C(performance); it must be in the CPUs' "
                       "C(scaling_available_governors) (amd-pstate in active mode offers C(performance) and "
                       "C(powersave)).",
        "role": {"default": "performance"},
    },
    "cpus": {
        "type": "str", "default": "all",
        "description": "CPUs to manage: C(all), or a cpulist such as C(0-95,192-287).",
    },
    "persist": {
        "type": "bool", "default": False,
        "description": "Install and enable, in the same call, what re-applies the governor at boot: the boot "
                       "script (the role's C(files/topotune-cpu-governor), O(boot_script)) as "
                       "C(/usr/local/sbin/topotune-cpu-governor), its oneshot unit and the unit's "
                       "C(multi-user.target.wants) link (the role's README says why a unit).",
        "role": {"default": True},
    },
    "boot_script": {
        "type": "str", "role": False,
        "description": "Content of the boot script (the role's C(files/topotune-cpu-governor)); required with "
                       "O(persist).",
    },
}


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


def _cpus_problem(cpus):
    if not isinstance(cpus, str) or not _CPUS.match(cpus):
        problem = ""
        if isinstance(cpus, str):
            try:
                parse(cpus)
            except CpulistError as err:
                problem = " (%s)" % err
        return 'cpu_governor_cpus must be "all" or a cpulist such as 0-95,192-287, got %s%s' % (cpus, problem)
    if cpus != "all":
        try:
            parse(cpus)
        except CpulistError as err:
            return "cpu_governor_cpus must be a cpulist such as 0-95,192-287: %s" % err
    return None


def boot_unit(governor, cpus, cpu_dir):
    """The oneshot unit that re-applies the governor at boot (``ExecStart`` runs ``SCRIPT GOVERNOR CPUS CPU_DIR``)."""
    return "\n".join([
        HEADER,
        "[Unit]",
        "Description=Set the %s CPU frequency governor (topotune)" % governor,
        "Documentation=https://github.com/topotune/topotune/tree/main/roles/cpu_governor",
        "# nothing to do on nodes without cpufreq (VMs)",
        "ConditionPathExistsGlob=%s/cpu*/cpufreq/scaling_governor" % cpu_dir,
        "After=systemd-modules-load.service",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=true",
        "ExecStart=/bin/sh %s %s %s %s" % (SCRIPT, governor, cpus, cpu_dir),
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])


def role_plan(governor, cpus, sysroot, persist, boot_script=None):
    """Validate the role's variables (what their types cannot say) and decide its files and manifest record."""
    problems = [problem for problem in (
        None if isinstance(governor, str) and _GOVERNOR.match(governor) else
        "cpu_governor_governor must be a governor name such as performance (lower-case letters, digits, - and _), "
        "got %s" % (governor,),
        _cpus_problem(cpus),
        None if isinstance(sysroot, str) and _SYSROOT.match(sysroot) else
        "cpu_governor_sysroot must be an absolute path without spaces, got %s" % (sysroot,),
        None if not persist or isinstance(boot_script, str) and boot_script.strip() else
        "boot_script must hold the role's files/topotune-cpu-governor when cpu_governor_persist is true",
    ) if problem]
    if problems:
        raise GovernorError("cpu_governor: invalid input. %s" % "; ".join(problems))
    cpu_dir = join(sysroot, CPU_BASE)
    files, links = [], []
    if persist:
        files = [{"path": SCRIPT, "content": boot_script, "mode": "0755", "validate": "/bin/sh -n %s"},
                 {"path": UNIT_FILE, "content": boot_unit(governor, cpus, cpu_dir), "mode": "0644"}]
        links = [{"path": UNIT_LINK, "src": UNIT_FILE}]
    # "all" is a glob, so CPUs brought online later are watched too; a cpulist names its CPUs
    value_path = "%s/cpu%s/cpufreq/scaling_governor" % (CPU_BASE, "[0-9]*" if cpus == "all" else "{cpu}")
    return {
        "governor": governor,
        "cpus": cpus,
        "cpu_dir": cpu_dir,
        "files": files,
        "links": links,
        # what systemd must reload when it changes (the script alone needs no reload)
        "unit_paths": [UNIT_FILE, UNIT_LINK] if persist else [],
        "managed": {
            "owner": "cpu_governor",
            "sysroot": sysroot,
            "values": [{"path": value_path, "value": governor, "cpus": cpus}],
            "files": [f["path"] for f in files],
            "units": [{"name": UNIT, "enabled": True, "active": None}] if persist else [],
        },
    }
