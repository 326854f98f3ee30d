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
    ``plan_tuning``: the sysctl and cmdline merges, the runtime values to set, the C-state switch.
``plan_tuning(inputs, boot)``
    With the node's boot state (``{"cmdline", "bootloader", "grubby_args"}``): the files (sysctl drop-in, GRUB
    drop-in, C-state script and unit, the pending-reboot record, each present or absent), the enable link, what the
    running command line lacks (``pending``), the grubby changes, and the ``kernel_tuning_managed`` record.
``check_reboot(reboot, sysroot)``
    What a type cannot say about the reboot variables of ``playbooks/reboot.yml`` (``kernel_tuning_reboot_*``).
``reboot_pending(record_text, cmdline)``
    What the running command line still lacks of what the pending-reboot record wants (``[]`` without a record).
"""

import json
import os
import re

from ..core.cpulist import format_cpulist
from ..core.errors import TopotuneError
from ..core.sysroot import join, list_dir, read_text
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
                    "(C(docs/fleet-reboots.md)).",
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
# The pending reboot, kept on the node while the running command line lacks a configured parameter the bootloader now
# holds: playbooks/reboot.yml reads it, possibly in a later run. In /etc, so it survives until the reboot; not in the
# manifest (run state, not a setting).
REBOOT_RECORD = "/etc/topotune/reboot-pending.json"
HEADER = "# Managed by topotune (role topotune.instinct.kernel_tuning): local edits are overwritten."
_ABSOLUTE = re.compile(r"^/\S*$")
_BATCH = re.compile(r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$")
_SLURM_NODE = re.compile(r"^[A-Za-z0-9._-]+$")


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
    ) if problem])
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


def reboot_record(wanted, pending):
    """The pending-reboot record's text (the layout Ansible's to_nice_json(sort_keys=true) gave it)."""
    return json.dumps({"owner": "kernel_tuning", "wanted": wanted, "pending": pending}, indent=4, sort_keys=True,
                      separators=(",", ": ")) + "\n"


def plan_tuning(inputs, boot):
    """Files, link, pending reboot, grubby changes and manifest record, from ``check_tuning``'s inputs and the boot
    state ``{"cmdline", "bootloader", "grubby_args"}`` (``kernel_runtime``'s boot-state read)."""
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
        # what systemd must reload when it changes (the script alone needs no reload)
        "unit_paths": [CSTATE_UNIT_FILE, CSTATE_UNIT_LINK] if inputs["c2_disable"] else [],
        "managed": {
            "owner": "kernel_tuning",
            "sysroot": inputs["sysroot"],
            # [path, value] pairs: kernel.numa_balancing -> proc/sys/kernel/numa_balancing
            "values": [["proc/sys/" + item["name"].replace(".", "/"), item["value"]] for item in present],
            # kernel parameters: the GRUB drop-in is watched as a file; what the running kernel lacks is reported by
            # kernel_tuning_reboot_required and the platform checks, not as drift. C2 through its unit.
            "files": written,
            "units": [{"name": CSTATE_UNIT, "enabled": True, "active": None}] if inputs["c2_disable"] else [],
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
