#!/usr/bin/python
# Copyright: topotune contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Set runtime kernel state (sysctl values in procfs, cpuidle state switches) under a sysroot."""

from __future__ import annotations

DOCUMENTATION = r"""
module: kernel_runtime
author: topotune contributors (@topotune)
short_description: Set runtime kernel values (sysctl, cpuidle states) idempotently under a sysroot
description:
  - Writes sysctl values to C(proc/sys/<name with dots as slashes>) and enables or disables cpuidle states
    by name on every CPU (C(sys/devices/system/cpu/cpu*/cpuidle/state*/disable)), under O(sysroot), in one
    call, only where the current value differs.
  - Runtime only; persistence is the role's job (C(/etc/sysctl.d) drop-in, systemd unit).
  - A sysctl the kernel does not have, or a node without cpuidle (VM), is skipped with a warning.
  - With O(bootloader) it also reports, read-only, what a role persisting kernel parameters needs, the running
    kernel's command line and the bootloader tool of the node (see O(bootloader)), so that no other task has to
    read them.
  - With O(tuning) it is role C(topotune.instinct.kernel_tuning) in one call (C(module_utils/state/kernel_runtime.py)
    C(check_tuning), C(plan_tuning)). The role's variables are checked before anything is read (each message names
    the variable, its value and the fix) and its additive lists merged; the sysctl values and the C2 switch are set
    now; the sysctl drop-in (removed when no sysctl is managed), the GRUB drop-in (RV(bootloader=grub_dropin), then
    C(update-grub) when it changed and is installed, else a warning), the C-state script, unit and enable link
    (O(tuning.c2_disable)) and the pending-reboot record C(/etc/topotune/reboot-pending.json) (while the bootloader
    holds a parameter the running kernel lacks) are written all or nothing; with RV(bootloader=grubby) every boot
    entry lacking a parameter is updated with C(grubby --update-kernel=ALL). Never reboots.
  - With O(tuning.acs_disable), the ACS program (O(tuning.acs_script)), its bridge list
    C(/etc/topotune/acs-bridges.conf) (the bridges check C(pci_acs) reads, with the ACS capability) and the boot-time
    unit C(topotune-acs.service) with its C(sysinit.target.wants) link are written with the other files, then, last,
    the program is run on the bridges whose ACS Control is not 0 and they are read again (RV(acs)). It is refused,
    before anything is written, on a virtualization host (O(tuning.virtualization_host), or a GPU with SR-IOV virtual
    functions or bound to C(vfio-pci)); without it the program, list, unit and link are removed when present.
  - With O(reboot) it is the read and the check of C(playbooks/reboot.yml) (O(reboot.step)).
  - Run as a task, the role's variables (O(tuning), O(reboot), O(sysroot)) are checked on the controller first, by the
    action of the same name with the module's own checks, so a wrong one is named before anything reaches the node.
# BEGIN generated options: plugins/module_utils/state/kernel_runtime.py (scripts/gen-options)
options:
  sysctl:
    description: Sysctl names (C(kernel.numa_balancing)) and the values to set (compared as whitespace-normalized text).
    type: dict
    default: {}
  cpuidle:
    description: cpuidle state names (C(C2)) mapped to C(disabled) or C(enabled), applied on every CPU having the state.
    type: dict
    default: {}
  sysroot:
    description: Directory under which procfs and sysfs are read and written (C(/) on a real node, C(/sim) on a
      simulated one).
    type: path
    default: /
  bootloader:
    description:
      - >-
        How the kernel command line is persisted: C(auto), C(grub_dropin) (a GRUB drop-in, then C(update-grub)),
        C(grubby) (every boot entry) or C(none) (only report what is pending).
      - With it the module reports the boot state too, read-only. RV(cmdline) is read from C(<sysroot>/proc/cmdline);
        RV(bootloader) is the tool that persists kernel parameters on this node (a node's tools are looked up at their
        real paths, not under O(sysroot)).
      - C(auto) picks it from what the node has, in this order. C(grubby) when C(grubby) is on the PATH (RedHat family,
        whose boot entries follow grubby even where C(/etc/default/grub) exists). C(grub_dropin) when
        C(/etc/default/grub) or C(update-grub) exists (Debian family). Otherwise by the family in C(/etc/os-release)
        (C(ID) or C(ID_LIKE)), where C(debian) or C(ubuntu) gives C(grub_dropin), C(rhel), C(fedora) or C(centos) gives
        C(grubby). With no match the module fails before writing anything.
      - C(grub_dropin), C(grubby) and C(none) are returned as given. For C(grubby) the module also returns the arguments
        of every boot entry (RV(grubby_args), from C(grubby --info=ALL), also in check mode); for C(grub_dropin), where
        C(update-grub) is (RV(update_grub)).
      - Omitted, nothing of the boot state is read, unless O(tuning) is given (then C(auto)).
    type: str
    choices: [auto, grub_dropin, grubby, none]
  tuning:
    description: The variables of role C(topotune.instinct.kernel_tuning) without their C(kernel_tuning_) prefix; the
      role's plan runs on them (see above). O(sysctl) and O(cpuidle) must then be empty; O(bootloader) defaults to
      C(auto).
    type: dict
    suboptions:
      numa_balancing_disable:
        description: Set C(kernel.numa_balancing=0) now and in the sysctl drop-in (AMD's MI200 and MI300X guides),
          before O(tuning.sysctl), which may override it.
        type: bool
        default: true
      sysctl:
        description: Additive sysctl settings C({name, value, state}) (C(state) C(present) or C(absent)), applied after
          the built-in ones; a later entry of the same name wins, C(state=absent) removes it.
        type: list
        elements: raw
        default: []
      cmdline:
        description:
          - Required kernel parameters C({name, value, state}); setting it replaces them.
          - >-
            The role's default is C(kernel_params.required) of the node's GPU generation in
            C(knowledge/gpu_generations.yml) (C(iommu=pt pci=realloc=off pci=bfsort) on every Instinct GPU, MI300A adds
            C(transparent_hugepage=always numa_balancing=disable)); without known GPUs the parameters common to every
            generation. The generation is the node's topology model's: the C(node_topology) chain
            (C(kernel_tuning_topology), C(topotune_topology), the play's C(topotune_discovery)), else the role's own
            discovery.
        type: list
        elements: raw
        default: []
      cmdline_extra:
        description: Additive site kernel parameters C({name, value, state}) (C(value) optional), applied after
          O(tuning.cmdline); C(state=absent) with a value drops that token, without a value every token of that name.
        type: list
        elements: raw
        default: []
      c2_disable:
        description: "Disable the C2 idle state on every CPU now and at boot (AMD: C(cpupower idle-set -d 2))."
        type: bool
        default: false
      cstate_script:
        description: Content of the boot-time C-state script (the role's C(files/topotune-cstate)); required with
          O(tuning.c2_disable).
        type: str
      acs_disable:
        description:
          - >-
            Clear PCIe ACS Control now and at every boot on the bridges above the GPUs and RDMA NICs that have the ACS
            capability: the bridges check C(pci_acs) reads (AMD: disable ACS for multi-node RCCL and peer-to-peer;
            C(roles/kernel_tuning/README.md)). The boot-time unit C(topotune-acs.service) runs before udev's coldplug
            and C(systemd-modules-load), so before amdgpu loads; the role runs its program at once too, so no reboot is
            needed.
          - >-
            Refused, changing nothing, on a virtualization host, which keeps ACS on to isolate what it hands to VMs:
            C(platform_checks_virtualization_host: true), or a GPU with SR-IOV virtual functions (C(sriov_numvfs) > 0)
            or bound to C(vfio-pci).
          - C(false) removes the unit, its program and its list when they exist (the firmware or the kernel sets ACS
            again at the next boot).
        type: bool
        default: false
      acs_script:
        description: Content of the ACS program (the role's C(files/topotune-acs)); required with O(tuning.acs_disable).
        type: str
      virtualization_host:
        description: >-
          The node is a virtualization host: role C(kernel_tuning) passes C(platform_checks_virtualization_host), the
          variable of role C(platform_checks) that says so for every role; O(tuning.acs_disable) is then refused.
        type: bool
        default: false
  reboot:
    description:
      - The reboot variables of role C(topotune.instinct.kernel_tuning) (C(kernel_tuning_reboot_<name>)), checked first.
      - O(reboot.step=pending) reads the pending-reboot record and the running command line, read-only, and returns what
        a reboot would bring (RV(reboot)). O(reboot.step=verify), after the reboot, fails naming what the running
        command line still lacks (with a C(reason) for the Slurm drain) and otherwise removes the record.
    type: dict
    suboptions:
      step:
        description: The step of C(playbooks/reboot.yml) (see O(reboot)).
        type: str
        required: true
        choices: [pending, verify]
      batch:
        description:
          - >-
            Nodes rebooted at once (the reboot play's C(serial)): a count (C(2)), a percentage of the play's nodes
            (C(10%)), or a list of either (C([1, "25%"])).
          - A play keyword, templated before any host exists, so inventory variables do not reach it; set it with C(-e)
            or in the play.
        type: raw
      max_fail_percentage:
        description:
          - Percentage of a batch that may fail before the remaining batches are cancelled (the reboot play's
            C(max_fail_percentage)); C(0) stops at the first failed node, and a batch that fails entirely always stops
            the run.
          - A play keyword, as O(reboot.batch) (C(-e) or the play, not the inventory).
        type: raw
      via:
        description:
          - C(none) reboots directly; C(slurm) drains the node (C(scontrol update State=DRAIN)), waits until C(sinfo)
            reports it C(drained), reboots, checks the running command line, then resumes it (C(State=RESUME)).
          - A failed step leaves the node drained with a reason naming the step.
        type: str
        default: none
      slurm_node:
        description: The node's Slurm NodeName.
        type: str
      drain_timeout:
        description: Seconds to wait for the node's running jobs to end after the drain (C(DRAINING) to C(DRAINED))
          before giving up.
        type: raw
      drain_poll:
        description: Seconds between two C(sinfo) polls while the node drains.
        type: raw
      command:
        description:
          - Command that reboots the node; empty uses C(ansible.builtin.reboot)'s own (C(shutdown -r)).
          - >-
            A node whose kernel state is read under a sysroot (a simulated node) is rebooted only with an explicit
            command: there the tests stand in for the reboot syscall (C(tests/integration/test_rolling_reboot.py)).
        type: str
        default: ""
# END generated options
extends_documentation_fragment:
  - topotune.instinct.attributes
  - topotune.instinct.attributes.idempotent
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  idempotent:
    support: full
"""

EXAMPLES = r"""
- name: Turn NUMA balancing off and disable C2 now
  topotune.instinct.kernel_runtime:
    sysctl:
      kernel.numa_balancing: "0"
    cpuidle:
      C2: disabled

- name: Same, and tell which bootloader tool persists kernel parameters and what the running kernel has
  topotune.instinct.kernel_runtime:
    sysctl:
      kernel.numa_balancing: "0"
    bootloader: auto
  register: kernel
  # kernel.bootloader: grub_dropin, kernel.cmdline: "BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=UUID=0f3b ro quiet"

- name: Role kernel_tuning in one call
  topotune.instinct.kernel_runtime:
    bootloader: auto
    tuning:
      cmdline: [{name: iommu, value: pt}, {name: pci, value: realloc=off}]
      c2_disable: true
      cstate_script: "{{ lookup('ansible.builtin.file', 'topotune-cstate') }}"

- name: Clear ACS on the bridges above the GPUs and RDMA NICs, now and at every boot
  topotune.instinct.kernel_runtime:
    tuning:
      acs_disable: true
      acs_script: "{{ lookup('ansible.builtin.file', 'topotune-acs', rstrip=false) }}"
      virtualization_host: "{{ platform_checks_virtualization_host | default(false) }}"
"""

RETURN = r"""
sysctl:
  description: Value of each requested sysctl after the run (planned in check mode); null when the kernel lacks it.
  returned: always
  type: dict
  sample: {kernel.numa_balancing: "0"}
cpuidle:
  description: Per requested state, the cpulist of CPUs changed and the CPUs that have the state.
  returned: always
  type: dict
  sample: {C2: {changed_cpus: "0-383", cpus: "0-383", state: disabled}}
changed_paths:
  description: Number of files written (or to be written in check mode).
  returned: always
  type: int
  sample: 385
cmdline:
  description: The running kernel's command line; null without O(bootloader).
  returned: always
  type: str
  sample: BOOT_IMAGE=/boot/vmlinuz-6.8.0-45-generic root=UUID=0f3b ro quiet iommu=pt
bootloader:
  description: The bootloader tool, O(bootloader) resolved (C(grub_dropin), C(grubby) or C(none)); null without O(bootloader).
  returned: always
  type: str
  sample: grub_dropin
update_grub:
  description: Path of C(update-grub) when RV(bootloader=grub_dropin) and it is installed, else null.
  returned: always
  type: str
  sample: /usr/sbin/update-grub
grubby_args:
  description: The kernel arguments of every boot entry when RV(bootloader=grubby) (C(grubby --info=ALL)), else empty.
  returned: always
  type: list
  elements: str
  sample: ["ro quiet iommu=pt"]
pending:
  description: With O(tuning), what the running command line lacks (C(+token)) or still has (C(-token)).
  returned: with O(tuning)
  type: list
  elements: str
  sample: ["+iommu=pt"]
reboot_required:
  description: With O(tuning), RV(pending) is not empty.
  returned: with O(tuning)
  type: bool
  sample: true
changed_files:
  description: With O(tuning), the files written (or, in check mode, that would be).
  returned: with O(tuning)
  type: list
  elements: str
  sample: [/etc/default/grub.d/90-topotune.cfg]
changed_links:
  description: With O(tuning), the enable links of the C-state and ACS units that changed.
  returned: with O(tuning)
  type: list
  elements: str
  sample: []
removed_files:
  description: With O(tuning), files removed (the sysctl drop-in when no sysctl is managed, the record once nothing is pending).
  returned: with O(tuning)
  type: list
  elements: str
  sample: [/etc/topotune/reboot-pending.json]
unit_changed:
  description: With O(tuning), a unit (C-state, ACS) or its link changed; systemd was reloaded in the same call (not in check mode).
  returned: with O(tuning)
  type: bool
  sample: false
managed:
  description: With O(tuning), what the role manages, its C(kernel_tuning_managed) record of the manifest.
  returned: with O(tuning)
  type: dict
  sample: {owner: kernel_tuning, sysroot: /, values: [[proc/sys/kernel/numa_balancing, "0"]], files: [], units: []}
plan:
  description: With O(tuning), the merged sysctl and kernel parameters (C(present), C(absent)) and the grubby changes.
  returned: with O(tuning)
  type: dict
  sample: {sysctl: {present: [], absent: []}, cmdline: {present: [], absent: []}, grubby: {add: [], remove: []}}
acs:
  description:
    - With O(tuning), C(bridges) (the bridges in the ACS list, with O(tuning.acs_disable)), C(cleared) (those whose
      ACS Control was set and is cleared now, or would be in check mode) and C(list) (the list's path, null without
      O(tuning.acs_disable)).
  returned: with O(tuning)
  type: dict
  sample: {bridges: ["0000:35:01.1", "0000:36:00.0", "0000:37:00.0"], cleared: ["0000:37:00.0"], list: /etc/topotune/acs-bridges.conf}
reboot:
  description:
    - With O(reboot), C(pending) (what a reboot would bring), C(rebootable) (false for a node under a sysroot without
      O(reboot.command)) and C(record) (its path).
  returned: with O(reboot)
  type: dict
  sample: {pending: ["+iommu=pt"], rebootable: true, record: /etc/topotune/reboot-pending.json}
"""

import os
import sys

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.options import argument_spec
from ansible_collections.topotune.instinct.plugins.module_utils.core.sysroot import join, read_text
from ansible_collections.topotune.instinct.plugins.module_utils.state import kernel_runtime as plan
from ansible_collections.topotune.instinct.plugins.module_utils.state.file_set import converge
from ansible_collections.topotune.instinct.plugins.module_utils.state.kernel_runtime import (
    BOOTLOADERS,
    OPTIONS,
    KernelRuntimeError,
    apply_writes,
    parse_grubby_args,
    parse_os_release,
    pick_bootloader,
    plan_cpuidle,
    plan_sysctl,
    read_cmdline,
)


class KernelRuntime:
    # real paths on the node, not under sysroot (tests point them elsewhere)
    GRUB_DEFAULTS = "/etc/default/grub"
    OS_RELEASE = ("/etc/os-release", "/usr/lib/os-release")

    def __init__(self, module):
        self.module = module
        self.params = module.params

    def _os_release(self):
        for path in self.OS_RELEASE:
            text = read_text(path, None)
            if text is not None:
                return parse_os_release(text)
        return {}

    def _bootloader(self, wanted):
        if wanted != "auto":
            return wanted
        grub = os.path.exists(self.GRUB_DEFAULTS) or self.module.get_bin_path("update-grub") is not None
        os_release = self._os_release()
        tool = pick_bootloader(self.module.get_bin_path("grubby") is not None, grub, os_release)
        if tool is None:
            raise KernelRuntimeError(
                "no known bootloader tool on this node (no grubby on the PATH, no %s or update-grub, os-release "
                "ID=%s ID_LIKE=%s): set bootloader (role kernel_tuning: kernel_tuning_bootloader) to grub_dropin "
                "(GRUB reading /etc/default/grub.d), grubby, or none (report only)"
                % (self.GRUB_DEFAULTS, os_release.get("ID", "unknown"), os_release.get("ID_LIKE", "")))
        return tool

    def _grubby_args(self):
        grubby = self.module.get_bin_path("grubby")
        if grubby is None:
            raise KernelRuntimeError("bootloader grubby: grubby is not on the PATH; install it (RedHat family: dnf "
                                     "install grubby) or use bootloader grub_dropin or none")
        rc, out, err = self.module.run_command([grubby, "--info=ALL"])
        if rc != 0:
            raise KernelRuntimeError("grubby --info=ALL failed (rc=%d): %s" % (rc, (err or out).strip()))
        return parse_grubby_args(out)

    def boot_state(self):
        """Read-only: the running command line and the bootloader tool (O(bootloader) set), else nulls."""
        state = {"cmdline": None, "bootloader": None, "update_grub": None, "grubby_args": []}
        wanted = self.params.get("bootloader")
        if wanted is None:
            return state
        if wanted not in BOOTLOADERS:
            raise KernelRuntimeError("bootloader %r is not one of %s" % (wanted, ", ".join(BOOTLOADERS)))
        state["cmdline"] = read_cmdline(self.params["sysroot"])
        state["bootloader"] = self._bootloader(wanted)
        if state["bootloader"] == "grubby":
            state["grubby_args"] = self._grubby_args()
        elif state["bootloader"] == "grub_dropin":
            state["update_grub"] = self.module.get_bin_path("update-grub")
        return state

    def run(self):
        if self.params["reboot"] is not None:
            return self.reboot()
        tuning, inputs = self.params["tuning"], None
        if tuning is not None:
            if self.params["sysctl"] or self.params["cpuidle"]:
                raise KernelRuntimeError("sysctl and cpuidle are the role's plan with tuning: pass the values in tuning")
            # the role's variables checked before anything is read
            inputs = plan.check_tuning(tuning, self.params["sysroot"])
            self.params["sysctl"], self.params["cpuidle"] = inputs["runtime_sysctl"], inputs["runtime_cpuidle"]
            self.params["bootloader"] = self.params["bootloader"] or "auto"
        sysroot = self.params["sysroot"]
        # read everything first: a boot-state failure, a refused ACS fix or an unreadable PCI tree leaves the runtime
        # values untouched
        boot = self.boot_state()
        writes, before, after, sysctl, warnings = plan_sysctl(sysroot, self.params["sysctl"])
        idle_writes, idle_before, idle_after, cpuidle, idle_warnings = plan_cpuidle(sysroot, self.params["cpuidle"])
        writes.extend(idle_writes)
        # the unit runs the ACS program with the interpreter this module runs on (the node's python3)
        acs = dict(plan.read_acs(sysroot), python=sys.executable) if inputs is not None and inputs["acs_disable"] else None
        decided = plan.plan_tuning(inputs, boot, acs) if inputs is not None else None
        for warning in warnings + idle_warnings + (decided["warnings"] if decided else []):
            self.module.warn(warning)
        if writes and not self.module.check_mode:
            apply_writes(writes)
        acs_diff = decided["acs"] if decided else {"before": "", "after": "", "clear": []}
        result = {
            "changed": bool(writes) or bool(acs_diff["clear"]),
            "changed_paths": len(writes),
            "sysctl": sysctl,
            "cpuidle": cpuidle,
            "diff": {"before": before + idle_before + acs_diff["before"], "after": after + idle_after + acs_diff["after"]},
            **boot,
        }
        if decided is not None:
            result.update(self.persist(decided, inputs, boot, result["diff"]))
            result["changed"] = result["changed"] or result.pop("persist_changed")
        return result

    def persist(self, decided, inputs, boot, runtime_diff):
        """The role's files, then grubby and update-grub; the diff becomes a list (runtime values, files, grubby)."""
        check = self.module.check_mode
        files = converge(self.module, decided["files"], decided["links"], check_mode=check, units=decided["unit_paths"])
        diffs = [dict(runtime_diff, before_header="runtime values", after_header="runtime values")] \
            if runtime_diff["before"] or runtime_diff["after"] else []
        diffs.extend(files["diff"])
        changed = files["changed"]
        if decided["grubby_argv"]:
            diffs.append({"before_header": "grubby boot entries", "after_header": "grubby boot entries",
                          "before": "".join("%s\n" % args for args in boot["grubby_args"]),
                          "after": "grubby: %s\n" % " ".join(decided["grubby_argv"][2:])})
            changed = True
            if not check:
                self._run([self.module.get_bin_path("grubby", required=True)] + decided["grubby_argv"][1:])
        if decided["grub_dropin"] in files["changed_files"]:
            if boot["update_grub"] is None:
                self.module.warn("update-grub not found: %s is written but grub.cfg was not regenerated. Install grub2 "
                                 "or run your bootloader's config generator before rebooting." % decided["grub_dropin"])
            elif not check:
                self._run([boot["update_grub"]])
        # last: the files and the boot configuration are complete whatever happens here, and a failed clear is
        # planned again by the next run (it follows the registers, not a record)
        acs = decided["acs"]
        if acs["clear"] and not check:
            self._clear_acs(acs, inputs["sysroot"])
        return {
            "persist_changed": changed,
            "diff": diffs,
            "pending": decided["pending"],
            "reboot_required": bool(decided["pending"]),
            "changed_files": files["changed_files"],
            "changed_links": files["changed_links"],
            "removed_files": files["removed_files"],
            "unit_changed": files["unit_changed"],
            "managed": decided["managed"],
            "plan": {"sysctl": inputs["sysctl"], "cmdline": inputs["cmdline"], "grubby": decided["grubby"]},
            "acs": {"bridges": acs["bridges"], "cleared": acs["clear"], "list": plan.ACS_LIST if inputs["acs_disable"] else None},
        }

    def _run(self, argv):
        rc, out, err = self.module.run_command(argv)
        if rc != 0:
            raise KernelRuntimeError("%s failed (rc=%d): %s" % (" ".join(argv), rc, (err or out).strip()))

    def _clear_acs(self, acs, sysroot):
        """The ACS program the boot-time unit runs, run now on the list just written; then the bridges read again
        the way check pci_acs reads them."""
        self._run(acs["argv"])
        still = plan.acs_still_set(sysroot, acs["bridges"])
        if still:
            raise KernelRuntimeError("kernel_tuning_acs_disable: %s ran, but ACS Control still reads non-zero on %s: the "
                                     "bridges do not keep the write; set BIOS ACS = Disabled instead"
                                     % (plan.ACS_SCRIPT, ", ".join(still)))

    def reboot(self):
        """playbooks/reboot.yml: the pending-reboot record against the running command line."""
        reboot, sysroot = self.params["reboot"], self.params["sysroot"]
        plan.check_reboot(reboot, sysroot)
        record = read_text(plan.REBOOT_RECORD, None)
        cmdline_file = join(sysroot, "proc/cmdline")
        if reboot["step"] == "pending":
            # the running command line is read only when there is a record: a node rebooted by hand meanwhile has the
            # parameters already, and the record alone would reboot it again
            pending = plan.reboot_pending(record, read_cmdline(sysroot)) if record is not None else []
            return {"changed": False, "reboot": {"pending": pending, "record": plan.REBOOT_RECORD,
                                                 "rebootable": sysroot == "/" or bool(reboot["command"])}}
        cmdline = read_text(cmdline_file, None)
        if cmdline is None:
            self.module.fail_json(msg="cannot read the running kernel's command line from %s after the reboot" % cmdline_file,
                                  reason="command line unreadable after reboot")
        still = plan.reboot_pending(record, cmdline)
        if still:
            self.module.fail_json(
                msg="rebooted, but the running command line still lacks (+) or has (-) %s: check that the bootloader "
                    "configuration (kernel_tuning_bootloader) is the one the node boots from." % " ".join(still),
                reason="parameters not live after reboot")
        try:
            files = converge(self.module, [{"path": plan.REBOOT_RECORD, "state": "absent"}], check_mode=self.module.check_mode)
        except (TopotuneError, OSError) as err:
            self.module.fail_json(msg="cannot remove %s: %s" % (plan.REBOOT_RECORD, err), reason="record not removed")
        return {"changed": files["changed"], "removed_files": files["removed_files"], "diff": files["diff"],
                "reboot": {"pending": [], "record": plan.REBOOT_RECORD, "rebootable": True}}


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(OPTIONS),
        mutually_exclusive=[("tuning", "reboot")],
        supports_check_mode=True,
    )
    try:
        module.exit_json(**KernelRuntime(module).run())
    except (TopotuneError, OSError) as err:
        module.fail_json(msg=str(err))


if __name__ == "__main__":
    main()
