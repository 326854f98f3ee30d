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

Role ``kernel_tuning``'s plan (the ``kernel_runtime`` module runs it; every message names the role variable):

``OPTIONS``
    The module's options and the role's variables (the suboptions of ``tuning`` and ``reboot``), declared once
    (``module_utils/core/options.py``).

``check_tuning(tuning, sysroot)``
    Before anything is read: what a type cannot say about the role's variables (``tuning`` holds them without the
    ``kernel_tuning_`` prefix), and the additive lists merged (``kernel_settings.merge``). Returns the inputs of
    ``plan_tuning``: the sysctl and cmdline merges, the runtime values to set, the C-state and ACS switches.
    ``kernel_tuning_acs_disable`` with ``virtualization_host`` (the role passes ``platform_checks_virtualization_host``)
    is refused here, on the controller, before anything reaches the node.
``plan_tuning(inputs, boot, acs=None)``
    With the node's boot state (``{"cmdline", "bootloader", "grubby_args"}``): the files (sysctl drop-in, GRUB
    drop-in, C-state script and unit, ACS program, list and unit, the pending-reboot record, each present or absent),
    the enable links, what the running command line lacks (``pending``), the grubby changes, the ACS bridges to clear
    now and the command that clears them (``acs``), and the ``kernel_tuning_managed`` record.
``read_acs(sysroot)`` / ``virtualization_signs(sysroot)`` / ``acs_refusal(reasons, cause)``
    Read only, for ``kernel_tuning_acs_disable``: the bridges check pci_acs judges (``pcie_health.acs_bridges``, one
    selection for both) with their ACS Control, and the signs that the node hands a GPU to VMs (SR-IOV virtual
    functions, a VFIO-bound GPU), each a reason the fix is refused (``acs_refusal``: the message naming the variable).
``acs_still_set(sysroot, bridges)``
    The listed bridges whose ACS Control is still not 0, read the way pci_acs reads it.
``check_reboot(reboot, sysroot)``
    What a type cannot say about the reboot variables of ``playbooks/reboot.yml`` (``kernel_tuning_reboot_*``).
``reboot_pending(record_text, cmdline)``
    What the running command line still lacks of what the pending-reboot record wants (``[]`` without a record).
"""

import json
import os
import re

from ..checks import pcie_health
from ..core.cpulist import format_cpulist
from ..core.errors import TopotuneError
from ..core.sysroot import amd_gpu_functions, join, list_dir, read_text
from . import kernel_settings

_SYSCTL_NAME = re.compile(r"^[A-Za-z0-9_-]+([./][A-Za-z0-9_-]+)*$")
_CPU_DIR = re.compile(r"^cpu([0-9]+)$")
_STATE_DIR = re.compile(r"^state[0-9]+$")
_IDLE_VALUES = {"disabled": "1", "enabled": "0"}
BOOTLOADERS = ("auto", "grub_dropin", "grubby", "none")

# The options of the kernel_runtime module and the variables of role kernel_tuning, declared once
# (module_utils/core/options.py): the module's argument spec is built from here, its documentation and the role's
# argument specs, defaults, README table and task arguments generated from here (scripts/gen-options). The role's
# variables are the suboptions of tuning (kernel_tuning_<name>) and of reboot (kernel_tuning_reboot_<name>).
OPTIONS = {
    "sysctl": {
        "type": "dict", "default": {}, "role": False,
        "description": "Sysctl names (C(kernel.numa_balancing)) and the values to set (compared as whitespace-normalized "
                       "text).",
    },
    "cpuidle": {
        "type": "dict", "default": {}, "role": False,
        "description": "cpuidle state names (C(C2)) mapped to C(disabled) or C(enabled), applied on every CPU having "
                       "the state.",
    },
    "sysroot": {
        "type": "path", "default": "/",
        "description": "Directory under which procfs and sysfs are read and written (C(/) on a real node, C(/sim) on "
                       "a simulated one).",
        "role": {"type": "str", "default": "{{ topotune_sysroot | default('/') }}",
                 "entries": ("reboot_pending", "reboot")},
    },
    "bootloader": {
        "type": "str", "choices": list(BOOTLOADERS),
        "description": [
            "How the kernel command line is persisted: C(auto), C(grub_dropin) (a GRUB drop-in, then C(update-grub)), "
            "C(grubby) (every boot entry) or C(none) (only report what is pending).",
            "With it the module reports the boot state too, read-only. RV(cmdline) is read from "
            "C(<sysroot>/proc/cmdline); RV(bootloader) is the tool that persists kernel parameters on this node (a "
            "node's tools are looked up at their real paths, not under O(sysroot)).",
            "C(auto) picks it from what the node has, in this order. C(grubby) when C(grubby) is on the PATH (RedHat "
            "family, whose boot entries follow grubby even where C(/etc/default/grub) exists). C(grub_dropin) when "
            "C(/etc/default/grub) or C(update-grub) exists (Debian family). Otherwise by the family in "
            "C(/etc/os-release) (C(ID) or C(ID_LIKE)), where C(debian) or C(ubuntu) gives C(grub_dropin), C(rhel), "
            "C(fedora) or C(centos) gives C(grubby). With no match the module fails before writing anything.",
            "C(grub_dropin), C(grubby) and C(none) are returned as given. For C(grubby) the module also returns the "
            "arguments of every boot entry (RV(grubby_args), from C(grubby --info=ALL), also in check mode); for "
            "C(grub_dropin), where C(update-grub) is (RV(update_grub)).",
            "Omitted, nothing of the boot state is read, unless O(tuning) is given (then C(auto)).",
        ],
        "role": {"default": "auto"},
    },
    "tuning": {
        "type": "dict", "role": False, "role_prefix": "",
        "description": "The variables of role C(topotune.instinct.kernel_tuning) without their C(kernel_tuning_) "
                       "prefix; the role's plan runs on them (see above). O(sysctl) and O(cpuidle) must then be empty; "
                       "O(bootloader) defaults to C(auto).",
        "options": {
            "numa_balancing_disable": {
                "type": "bool", "default": True,
                "description": "Set C(kernel.numa_balancing=0) now and in the sysctl drop-in (AMD's MI200 and MI300X "
                               "guides), before O(tuning.sysctl), which may override it.",
            },
            "sysctl": {
                "type": "list", "elements": "raw", "default": [],
                "description": "Additive sysctl settings C({name, value, state}) (C(state) C(present) or C(absent)), "
                               "applied after the built-in ones; a later entry of the same name wins, C(state=absent) "
                               "removes it.",
                "role": {"elements": "dict"},
            },
            "cmdline": {
                "type": "list", "elements": "raw", "default": [],
                "description": [
                    "Required kernel parameters C({name, value, state}); setting it replaces them.",
                    "The role's default is C(kernel_params.required) of the node's GPU generation in "
                    "C(knowledge/gpu_generations.yml) (C(iommu=pt pci=realloc=off pci=bfsort) on every Instinct GPU, "
                    "MI300A adds C(transparent_hugepage=always numa_balancing=disable)); without known GPUs the "
                    "parameters common to every generation. The generation is the node's topology model's: the "
                    "C(node_topology) chain (C(kernel_tuning_topology), C(topotune_topology), the play's "
                    "C(topotune_discovery)), else the role's own discovery.",
                ],
                "role": {"elements": "dict",
                         "default": "{{ kernel_tuning_topology | topotune.instinct.node_topology(topotune_topology "
                                    "| default({}), topotune_discovery | default({}))\n"
                                    "   | topotune.instinct.node_topology({}, __kernel_tuning_discovered | default({}))\n"
                                    "   | topotune.instinct.kernel_params(lookup('topotune.instinct.knowledge', "
                                    "'gpu_generations')) }}",
                         "default_doc": "the GPU generation's C(kernel_params.required) (knowledge)"},
            },
            "cmdline_extra": {
                "type": "list", "elements": "raw", "default": [],
                "description": "Additive site kernel parameters C({name, value, state}) (C(value) optional), applied "
                               "after O(tuning.cmdline); C(state=absent) with a value drops that token, without a value "
                               "every token of that name.",
                "role": {"elements": "dict"},
            },
            "c2_disable": {
                "type": "bool", "default": False,
                "description": "Disable the C2 idle state on every CPU now and at boot (AMD: C(cpupower idle-set -d 2)).",
            },
            "cstate_script": {
                "type": "str", "role": False,
                "description": "Content of the boot-time C-state script (the role's C(files/topotune-cstate)); required "
                               "with O(tuning.c2_disable).",
            },
            "acs_disable": {
                "type": "bool", "default": False,
                "description": [
                    "Clear PCIe ACS Control now and at every boot on the bridges above the GPUs and RDMA NICs that have "
                    "the ACS capability: the bridges check C(pci_acs) reads (AMD: disable ACS for multi-node RCCL and "
                    "peer-to-peer; C(roles/kernel_tuning/README.md)). The boot-time unit C(topotune-acs.service) runs "
                    "before udev's coldplug and C(systemd-modules-load), so before amdgpu loads; the role runs its "
                    "program at once too, so no reboot is needed.",
                    "Refused, changing nothing, on a virtualization host, which keeps ACS on to isolate what it hands "
                    "to VMs: C(platform_checks_virtualization_host: true), or a GPU with SR-IOV virtual functions "
                    "(C(sriov_numvfs) > 0) or bound to C(vfio-pci).",
                    "C(false) removes the unit, its program and its list when they exist (the firmware or the kernel "
                    "sets ACS again at the next boot).",
                ],
            },
            "acs_script": {
                "type": "str", "role": False,
                "description": "Content of the ACS program (the role's C(files/topotune-acs)); required with "
                               "O(tuning.acs_disable).",
            },
            "virtualization_host": {
                "type": "bool", "default": False, "role": False,
                "description": "The node is a virtualization host: role C(kernel_tuning) passes "
                               "C(platform_checks_virtualization_host), the variable of role C(platform_checks) that "
                               "says so for every role; O(tuning.acs_disable) is then refused.",
            },
        },
    },
    "topology": {
        "type": "dict", "default": {}, "role_only": True,
        "description": "Topology model (the C(gpu_topology) shape) whose GPUs give the generation; empty uses "
                       "C(topotune_topology) (a model the inventory gives), else the play's C(topotune_discovery) "
                       "(C(playbooks/topology.yml)), else runs C(topotune.instinct.gpu_topology).",
    },
    "reboot": {
        "type": "dict", "role": False, "role_prefix": "reboot_",
        "description": [
            "The reboot variables of role C(topotune.instinct.kernel_tuning) (C(kernel_tuning_reboot_<name>)), checked "
            "first.",
            "O(reboot.step=pending) reads the pending-reboot record and the running command line, read-only, and "
            "returns what a reboot would bring (RV(reboot)). O(reboot.step=verify), after the reboot, fails naming what "
            "the running command line still lacks (with a C(reason) for the Slurm drain) and otherwise removes the "
            "record.",
        ],
        "options": {
            "step": {
                "type": "str", "choices": ["pending", "verify"], "required": True, "role": False,
                "description": "The step of C(playbooks/reboot.yml) (see O(reboot)).",
            },
            "ok": {
                "type": "bool", "default": False, "role_only": True,
                "description": [
                    "Let C(playbooks/site.yml) end with the rolling reboot of C(playbooks/reboot.yml) for the nodes "
                    "whose running command line lacks the configured parameters; C(playbooks/reboot.yml) run on its "
                    "own reboots them regardless.",
                    "The role never reboots: it records a pending reboot on the node "
                    "(C(/etc/topotune/reboot-pending.json)) and C(playbooks/reboot.yml) reboots in batches "
                    "(C(docs/scheduler.md)).",
                ],
                "role": {"entries": ("reboot_pending",)},
            },
            "batch": {
                "type": "raw",
                "description": [
                    "Nodes rebooted at once (the reboot play's C(serial)): a count (C(2)), a percentage of the play's "
                    "nodes (C(10%)), or a list of either (C([1, \"25%\"])).",
                    "A play keyword, templated before any host exists, so inventory variables do not reach it; set it "
                    "with C(-e) or in the play.",
                ],
                "role": {"default": "10%", "entries": ("reboot_pending",)},
            },
            "max_fail_percentage": {
                "type": "raw",
                "description": [
                    "Percentage of a batch that may fail before the remaining batches are cancelled (the reboot play's "
                    "C(max_fail_percentage)); C(0) stops at the first failed node, and a batch that fails entirely "
                    "always stops the run.",
                    "A play keyword, as O(reboot.batch) (C(-e) or the play, not the inventory).",
                ],
                "role": {"type": "int", "default": 0, "entries": ("reboot_pending",)},
            },
            "via": {
                "type": "str", "default": "none",
                "description": [
                    "C(none) reboots directly; C(slurm) drains the node (C(scontrol update State=DRAIN)), waits until "
                    "C(sinfo) reports it C(drained), reboots, checks the running command line, then resumes it "
                    "(C(State=RESUME)).",
                    "A failed step leaves the node drained with a reason naming the step.",
                ],
                "role": {"choices": ["none", "slurm"], "entries": ("reboot_pending", "reboot")},
            },
            "slurm_host": {
                "type": "str", "role_only": True,
                "description": "Inventory host on which C(scontrol) and C(sinfo) run (the Slurm controller or any node "
                               "with a Slurm client configuration).",
                "role": {"default": "{{ inventory_hostname }}", "entries": ("reboot",)},
            },
            "slurm_node": {
                "type": "str",
                "description": "The node's Slurm NodeName.",
                "role": {"default": "{{ inventory_hostname_short }}", "entries": ("reboot",)},
            },
            "drain_timeout": {
                "type": "raw",
                "description": "Seconds to wait for the node's running jobs to end after the drain (C(DRAINING) to "
                               "C(DRAINED)) before giving up.",
                "role": {"type": "int", "default": 3600, "entries": ("reboot",)},
            },
            "drain_poll": {
                "type": "raw",
                "description": "Seconds between two C(sinfo) polls while the node drains.",
                "role": {"type": "int", "default": 10, "entries": ("reboot",)},
            },
            "timeout": {
                "type": "int", "default": 1800, "role_only": True,
                "description": "Seconds C(ansible.builtin.reboot) waits for the node to come back.",
                "role": {"entries": ("reboot",)},
            },
            "command": {
                "type": "str", "default": "",
                "description": [
                    "Command that reboots the node; empty uses C(ansible.builtin.reboot)'s own (C(shutdown -r)).",
                    "A node whose kernel state is read under a sysroot (a simulated node) is rebooted only with an "
                    "explicit command: there the tests stand in for the reboot syscall "
                    "(C(tests/integration/test_rolling_reboot.py)).",
                ],
                "role": {"entries": ("reboot_pending", "reboot")},
            },
        },
    },
}
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


# ------------------------------------------------------------------------------- role kernel_tuning's plan
SYSCTL_FILE = "/etc/sysctl.d/90-topotune-kernel.conf"
GRUB_DROPIN = kernel_settings.GRUB_DROPIN
CSTATE_UNIT = "topotune-cstate.service"
CSTATE_UNIT_FILE = "/etc/systemd/system/" + CSTATE_UNIT
# what `systemctl enable` creates for the unit's WantedBy=multi-user.target
CSTATE_UNIT_LINK = "/etc/systemd/system/multi-user.target.wants/" + CSTATE_UNIT
CSTATE_SCRIPT = "/usr/local/sbin/topotune-cstate"
# kernel_tuning_acs_disable: the program (the role's files/topotune-acs), the bridges it clears, its boot-time unit and
# the link `systemctl enable` creates for the unit's WantedBy=sysinit.target
ACS_UNIT = "topotune-acs.service"
ACS_UNIT_FILE = "/etc/systemd/system/" + ACS_UNIT
ACS_UNIT_LINK = "/etc/systemd/system/sysinit.target.wants/" + ACS_UNIT
ACS_SCRIPT = "/usr/local/sbin/topotune-acs"
ACS_LIST = "/etc/topotune/acs-bridges.conf"
# A GPU bound to one of these drivers is handed to a VM (VFIO passthrough): ACS isolates it there
PASSTHROUGH_DRIVERS = ("vfio-pci",)
# The pending reboot, kept on the node while the running command line lacks a configured parameter the bootloader now
# holds: playbooks/reboot.yml reads it, possibly in a later run. In /etc, so it survives until the reboot; not in the
# manifest (run state, not a setting).
REBOOT_RECORD = "/etc/topotune/reboot-pending.json"
HEADER = "# Managed by topotune (role topotune.instinct.kernel_tuning): local edits are overwritten."
_ABSOLUTE = re.compile(r"^/\S*$")
_BATCH = re.compile(r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$")
_SLURM_NODE = re.compile(r"^[A-Za-z0-9._-]+$")
_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
# a path written into a unit's ExecStart: no spaces, quotes or % (systemd expands %-specifiers there)
_UNIT_PATH = re.compile(r"^/[A-Za-z0-9._+/-]*$")


def _invalid(problems):
    if problems:
        raise KernelRuntimeError("kernel_tuning: invalid input. %s" % "; ".join(problems))


def _sysroot_problem(sysroot):
    if isinstance(sysroot, str) and _ABSOLUTE.match(sysroot):
        return None
    return "kernel_tuning_sysroot must be an absolute path without spaces, got %s" % (sysroot,)


def _settings(lists, key):
    try:
        return kernel_settings.merge(lists, key)
    except kernel_settings.SettingsError as err:
        raise KernelRuntimeError("kernel_tuning: invalid input. %s" % err) from None


def check_tuning(tuning, sysroot):
    """The role's inputs checked and merged; ``KernelRuntimeError`` naming the variable otherwise."""
    _invalid([problem for problem in (
        _sysroot_problem(sysroot),
        "cstate_script must hold the role's files/topotune-cstate when kernel_tuning_c2_disable is true"
        if tuning.get("c2_disable") and not (tuning.get("cstate_script") or "").strip() else None,
        "acs_script must hold the role's files/topotune-acs when kernel_tuning_acs_disable is true"
        if tuning.get("acs_disable") and not (tuning.get("acs_script") or "").strip() else None,
    ) if problem])
    if tuning.get("acs_disable") and tuning.get("virtualization_host"):
        raise KernelRuntimeError(acs_refusal(["platform_checks_virtualization_host is true"], "variable"))
    builtin = [{"name": "kernel.numa_balancing", "value": "0"}] if tuning.get("numa_balancing_disable", True) else []
    sysctl = _settings([("kernel_tuning_numa_balancing_disable", builtin),
                        ("kernel_tuning_sysctl", tuning.get("sysctl") or [])], "name")
    cmdline = _settings([("kernel_tuning_cmdline", tuning.get("cmdline") or []),
                         ("kernel_tuning_cmdline_extra", tuning.get("cmdline_extra") or [])], "token")
    return {
        "sysroot": sysroot,
        "sysctl": sysctl,
        "cmdline": cmdline,
        "c2_disable": bool(tuning.get("c2_disable")),
        "cstate_script": tuning.get("cstate_script"),
        "acs_disable": bool(tuning.get("acs_disable")),
        "acs_script": tuning.get("acs_script"),
        # what kernel_runtime sets now
        "runtime_sysctl": {item["name"]: item["value"] for item in sysctl["present"]},
        "runtime_cpuidle": {"C2": "disabled"} if tuning.get("c2_disable") else {},
    }


def _sysctl_dropin(present):
    lines = [HEADER,
             "# Sysctl settings of role topotune.instinct.kernel_tuning (kernel_tuning_numa_balancing_disable,",
             "# kernel_tuning_sysctl). NUMA balancing off: ROCm/amdgpu-docs mi300x.rst, mi200.md."]
    lines.extend("%s = %s" % (item["name"], item["value"]) for item in sorted(present, key=lambda i: i["name"]))
    return "\n".join(lines) + "\n"


def _grub_dropin(present):
    return "\n".join([
        HEADER,
        "# Kernel parameters of role topotune.instinct.kernel_tuning (kernel_tuning_cmdline, kernel_tuning_cmdline_extra),",
        "# appended to the parameters /etc/default/grub sets. Required by AMD for the GPU generation: "
        "knowledge/gpu_generations.yml",
        "# kernel_params (system-acceptance-docs kernel-parameters.md).",
        kernel_settings.grub_dropin_line([item["token"] for item in present]),
    ]) + "\n"


def _cstate_unit(cpu_dir):
    return "\n".join([
        HEADER,
        "[Unit]",
        "Description=Disable the C2 idle state on every CPU (topotune)",
        "Documentation=https://github.com/topotune/topotune/tree/main/roles/kernel_tuning",
        "ConditionPathExistsGlob=%s/cpu*/cpuidle/state*/name" % cpu_dir,
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=true",
        "ExecStart=/bin/sh %s %s" % (CSTATE_SCRIPT, cpu_dir),
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ])


def acs_refusal(reasons, cause):
    """Why ``kernel_tuning_acs_disable`` is refused on this node, and the fix; ``cause`` is ``variable`` (the play says
    the node is a virtualization host) or ``node`` (what the node shows)."""
    fix = ("or set platform_checks_virtualization_host: false if it runs bare metal" if cause == "variable" else
           "or, if the node is to run bare metal, remove the virtual functions (echo 0 > "
           "/sys/bus/pci/devices/<bdf>/sriov_numvfs) and unbind vfio-pci first")
    return ("kernel_tuning_acs_disable: refused on a virtualization host, nothing was changed: %s. A virtualization "
            "host keeps ACS on to isolate the devices it hands to VMs (AMD's virtualization BIOS table: ACS Enabled). "
            "Set kernel_tuning_acs_disable: false for this node, %s." % ("; ".join(reasons), fix))


def virtualization_signs(sysroot):
    """What shows that the node hands a GPU to VMs, one sentence each: an AMD GPU function with SR-IOV virtual
    functions (``sriov_numvfs`` > 0, MxGPU) or bound to a passthrough driver (``PASSTHROUGH_DRIVERS``). An RDMA NIC's
    virtual functions are no sign (containers use them too, with the host's driver)."""
    signs = []
    base = join(sysroot, "sys/bus/pci/devices")
    for bdf in amd_gpu_functions(sysroot):
        dev = os.path.join(base, bdf)
        numvfs = read_text(os.path.join(dev, "sriov_numvfs"), "")
        if numvfs.isdigit() and int(numvfs) > 0:
            signs.append("GPU %s has %d SR-IOV virtual function(s) (sriov_numvfs)" % (bdf, int(numvfs)))
        driver = os.path.join(dev, "driver")
        if os.path.islink(driver) and os.path.basename(os.readlink(driver)) in PASSTHROUGH_DRIVERS:
            signs.append("GPU %s is bound to %s (passed through to a VM)" % (bdf, os.path.basename(os.readlink(driver))))
    return signs


def read_acs(sysroot):
    """Read only, what ``kernel_tuning_acs_disable`` needs: ``pcie_health.acs_bridges`` (the bridges check pci_acs
    judges, with their ACS Control; ``enabled``: those not 0) and ``virtualized`` (``virtualization_signs``)."""
    found = pcie_health.acs_bridges(pcie_health.gather(sysroot))
    found["virtualized"] = virtualization_signs(sysroot)
    return found


def _acs_list(bridges):
    return "\n".join([
        HEADER,
        "# The bridges above the GPUs and RDMA NICs that have the ACS capability (those check pci_acs reads), whose ACS",
        "# Control topotune-acs.service clears at every boot (kernel_tuning_acs_disable). One PCI address per line.",
    ] + bridges) + "\n"


def _acs_unit(python, devices):
    return "\n".join([
        HEADER,
        "# ACS Control set on a bridge above a GPU or RDMA NIC sends their peer-to-peer traffic up through the root",
        "# complex (AMD: disable ACS for multi-node RCCL). The firmware, or the kernel when an IOMMU is on, sets it",
        "# again at every boot, before any unit runs: hence this unit, at every boot.",
        "# DefaultDependencies=no: the default dependencies would order it after sysinit.target, so after udev's",
        "# coldplug (systemd-udev-trigger.service) and systemd-modules-load.service, which load amdgpu and the RDMA",
        "# drivers. Those probe the PCIe path as it is then (the kernel's peer-to-peer distance counts an ACS redirect",
        "# as a trip through the host bridge), and no GPU job may run before the bits are clear: so it runs before both.",
        "# It needs only sysfs (mounted by systemd itself) and the root file system (this program, its list in /etc,",
        "# python3 in /usr), nothing udev brings. Conflicts/Before shutdown.target: what the defaults would have given.",
        "[Unit]",
        "Description=Clear PCIe ACS Control on the bridges above the GPUs and RDMA NICs (topotune)",
        "Documentation=https://github.com/topotune/topotune/tree/main/roles/kernel_tuning",
        "DefaultDependencies=no",
        "Before=systemd-udev-trigger.service systemd-modules-load.service sysinit.target shutdown.target",
        "Conflicts=shutdown.target",
        "",
        "[Service]",
        "Type=oneshot",
        "RemainAfterExit=true",
        "ExecStart=%s %s %s %s" % (python, ACS_SCRIPT, devices, ACS_LIST),
        "",
        "[Install]",
        "WantedBy=sysinit.target",
        "",
    ])


def _plan_acs(inputs, acs):
    """The ACS program, its list, unit and link (present with ``kernel_tuning_acs_disable``, else absent), the bridges
    to clear now and the command that clears them; ``acs`` is ``read_acs``'s result with ``python``, the interpreter
    the unit runs the program with."""
    plan = {"files": [{"path": path, "state": "absent"} for path in (ACS_SCRIPT, ACS_LIST, ACS_UNIT_FILE)],
            "links": [{"path": ACS_UNIT_LINK, "state": "absent"}], "bridges": [], "clear": [], "argv": [],
            "before": "", "after": "", "warnings": []}
    if not inputs["acs_disable"]:
        return plan
    if acs is None:
        raise KernelRuntimeError("kernel_tuning_acs_disable: the node's ACS state was not read (read_acs)")
    if acs["virtualized"]:
        raise KernelRuntimeError(acs_refusal(acs["virtualized"], "node"))
    if acs["unknown"] and acs["unknown"][0] != "no_devices":
        raise KernelRuntimeError("kernel_tuning_acs_disable: cannot tell which bridges to clear, nothing was changed: %s. "
                                 "Run the role with become (root) on the node itself." % acs["unknown"][1])
    python = acs.get("python")
    if not (isinstance(python, str) and _UNIT_PATH.match(python)):
        raise KernelRuntimeError("kernel_tuning_acs_disable: the node's Python interpreter %r is not an absolute path of "
                                 "letters, digits and ._+-/: set ansible_python_interpreter (the unit runs the program "
                                 "with it)" % (python,))
    devices = join(inputs["sysroot"], "sys/bus/pci/devices")
    if not _UNIT_PATH.match(devices):
        raise KernelRuntimeError("kernel_tuning_acs_disable: kernel_tuning_sysroot %r goes into the unit's command line: "
                                 "use letters, digits and ._+-/ only" % (inputs["sysroot"],))
    listed = [b["bdf"] for b in acs["bridges"] if b["control"] is not None]
    # every value written into a file is checked (the addresses come from sysfs link names)
    bad = [bdf for bdf in listed if not _BDF.match(bdf)]
    if bad:
        raise KernelRuntimeError("kernel_tuning_acs_disable: %s is not a PCI address (dddd:bb:dd.f), nothing was changed"
                                 % ", ".join(bad))
    if acs["unknown"]:
        plan["warnings"].append("kernel_tuning_acs_disable: no GPU or RDMA NIC on this node: the unit is installed with "
                                "an empty list and clears nothing")
    elif not listed:
        plan["warnings"].append("kernel_tuning_acs_disable: no bridge above the GPUs and RDMA NICs has the ACS "
                                "capability (BIOS ACS Disabled may hide it): nothing to clear")
    clear = [b for b in acs["enabled"] if b["bdf"] in listed]
    plan.update({
        "files": [
            {"path": ACS_SCRIPT, "content": inputs["acs_script"], "mode": "0755",
             "validate": "%s -c 'import ast, sys; ast.parse(open(sys.argv[1]).read())' %%s" % python},
            {"path": ACS_LIST, "content": _acs_list(listed), "mode": "0644"},
            {"path": ACS_UNIT_FILE, "content": _acs_unit(python, devices), "mode": "0644"},
        ],
        "links": [{"path": ACS_UNIT_LINK, "src": ACS_UNIT_FILE}],
        "bridges": listed,
        "clear": [b["bdf"] for b in clear],
        "argv": [python, ACS_SCRIPT, devices, ACS_LIST],
        "before": "".join("ACS Control %s = 0x%04x\n" % (b["bdf"], b["control"]) for b in clear),
        "after": "".join("ACS Control %s = 0x0000\n" % b["bdf"] for b in clear),
    })
    return plan


def acs_still_set(sysroot, bridges):
    """``bdf (0x....)`` of the ``bridges`` whose ACS Control is not 0 (after the program ran), read as pci_acs reads it."""
    found = pcie_health.acs_bridges(pcie_health.gather(sysroot))
    return ["%s (0x%04x)" % (b["bdf"], b["control"]) for b in found["enabled"] if b["bdf"] in bridges]


def reboot_record(wanted, pending):
    """The pending-reboot record's text (the layout Ansible's to_nice_json(sort_keys=true) gave it)."""
    return json.dumps({"owner": "kernel_tuning", "wanted": wanted, "pending": pending}, indent=4, sort_keys=True,
                      separators=(",", ": ")) + "\n"


def plan_tuning(inputs, boot, acs=None):
    """Files, links, pending reboot, grubby changes, the ACS bridges to clear and manifest record, from
    ``check_tuning``'s inputs, the boot state ``{"cmdline", "bootloader", "grubby_args"}`` (``kernel_runtime``'s
    boot-state read) and, with ``kernel_tuning_acs_disable``, ``acs`` (``read_acs`` and ``python``); raises
    ``KernelRuntimeError`` when the ACS fix is refused."""
    present, cmdline = inputs["sysctl"]["present"], inputs["cmdline"]
    bootloader = boot["bootloader"]
    pending = kernel_settings.pending(boot["cmdline"], cmdline)
    cpu_dir = join(inputs["sysroot"], "sys/devices/system/cpu")
    files = [{"path": SYSCTL_FILE, "content": _sysctl_dropin(present), "mode": "0644"} if present
             else {"path": SYSCTL_FILE, "state": "absent"}]
    if bootloader == "grub_dropin":
        files.append({"path": GRUB_DROPIN, "content": _grub_dropin(cmdline["present"]), "mode": "0644"})
    links = []
    if inputs["c2_disable"]:
        files.append({"path": CSTATE_SCRIPT, "content": inputs["cstate_script"], "mode": "0755",
                      "validate": "/bin/sh -n %s"})
        files.append({"path": CSTATE_UNIT_FILE, "content": _cstate_unit(cpu_dir), "mode": "0644"})
        links.append({"path": CSTATE_UNIT_LINK, "src": CSTATE_UNIT_FILE})
    acs_plan = _plan_acs(inputs, acs)
    files.extend(acs_plan["files"])
    links.extend(acs_plan["links"])
    # the record only while the bootloader carries a parameter the running kernel lacks
    files.append({"path": REBOOT_RECORD, "content": reboot_record(cmdline, pending), "mode": "0644"}
                 if pending and bootloader != "none" else {"path": REBOOT_RECORD, "state": "absent"})
    # grubby: what the boot entries lack or still have, as grubby --args / --remove-args
    changes = []
    if bootloader == "grubby":
        for args in boot.get("grubby_args") or []:
            changes.extend(c for c in kernel_settings.pending(args, cmdline) if c not in changes)
    grubby = {"add": [c[1:] for c in changes if c.startswith("+")], "remove": [c[1:] for c in changes if c.startswith("-")]}
    written = [f["path"] for f in files if f.get("state") != "absent" and f["path"] != REBOOT_RECORD]
    return {
        "files": files,
        "links": links,
        "pending": pending,
        "grubby": grubby,
        "grubby_argv": (["grubby", "--update-kernel=ALL"]
                        + (["--args=" + " ".join(grubby["add"])] if grubby["add"] else [])
                        + (["--remove-args=" + " ".join(grubby["remove"])] if grubby["remove"] else []))
        if changes else [],
        "grub_dropin": GRUB_DROPIN if bootloader == "grub_dropin" else None,
        # what systemd must reload when it changes (the scripts alone need no reload); the ACS unit's paths always, as
        # turning kernel_tuning_acs_disable off removes them
        "unit_paths": ([CSTATE_UNIT_FILE, CSTATE_UNIT_LINK] if inputs["c2_disable"] else []) + [ACS_UNIT_FILE, ACS_UNIT_LINK],
        "acs": {key: acs_plan[key] for key in ("bridges", "clear", "argv", "before", "after")},
        "warnings": acs_plan["warnings"],
        "managed": {
            "owner": "kernel_tuning",
            "sysroot": inputs["sysroot"],
            # [path, value] pairs: kernel.numa_balancing -> proc/sys/kernel/numa_balancing
            "values": [["proc/sys/" + item["name"].replace(".", "/"), item["value"]] for item in present],
            # kernel parameters: the GRUB drop-in is watched as a file; what the running kernel lacks is reported by
            # kernel_tuning_reboot_required and the platform checks, not as drift. C2 through its unit; ACS through its
            # unit, program and list (the registers themselves: check pci_acs).
            "files": written,
            "units": ([{"name": CSTATE_UNIT, "enabled": True, "active": None}] if inputs["c2_disable"] else [])
            + ([{"name": ACS_UNIT, "enabled": True, "active": None}] if inputs["acs_disable"] else []),
        },
    }


def check_reboot(reboot, sysroot):
    """``reboot`` holds the reboot variables without the ``kernel_tuning_reboot_`` prefix."""
    batch = reboot.get("batch")
    items = batch if isinstance(batch, (list, tuple)) else [batch]
    problems = []
    if not items or any(isinstance(i, bool) or not _BATCH.match(str(i)) for i in items):
        problems.append('kernel_tuning_reboot_batch must be a count > 0, a percentage such as "10%%", or a list of '
                        "them, got %s" % (batch,))
    fail = _number(reboot.get("max_fail_percentage"))
    if fail is None or not 0 <= fail <= 100:
        problems.append("kernel_tuning_reboot_max_fail_percentage must be 0-100, got %s" % (reboot.get("max_fail_percentage"),))
    timeout, poll = _number(reboot.get("drain_timeout")), _number(reboot.get("drain_poll"))
    if timeout is None or poll is None or timeout <= 0 or poll <= 0:
        problems.append("kernel_tuning_reboot_drain_timeout and kernel_tuning_reboot_drain_poll must be > 0, got %s and %s"
                        % (reboot.get("drain_timeout"), reboot.get("drain_poll")))
    if reboot.get("via") == "slurm" and not _SLURM_NODE.match(str(reboot.get("slurm_node") or "")):
        problems.append("kernel_tuning_reboot_slurm_node must be a Slurm NodeName (letters, digits, . _ -), got %s"
                        % (reboot.get("slurm_node"),))
    problems.append(_sysroot_problem(sysroot))
    _invalid([problem for problem in problems if problem])


def _number(value):
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def reboot_pending(record_text, cmdline):
    """``+token``/``-token`` a reboot must still bring, by the record's ``wanted``; ``[]`` without a record."""
    if record_text is None:
        return []
    try:
        wanted = json.loads(record_text).get("wanted")
    except (ValueError, AttributeError):
        wanted = None
    if not isinstance(wanted, dict) or "present" not in wanted:
        raise KernelRuntimeError("%s is not a pending-reboot record (no wanted parameters): remove it and run role "
                                 "kernel_tuning again" % REBOOT_RECORD)
    return kernel_settings.pending(cmdline, wanted)
