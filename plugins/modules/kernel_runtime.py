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
    description: Directory under which procfs and sysfs are read and written (C(/) on a real node).
    type: path
    default: /
  bootloader:
    description:
      - Report the boot state too. RV(cmdline) is read from C(<sysroot>/proc/cmdline); RV(bootloader) is the
        tool that persists kernel parameters on this node (a node's tools are looked up at their real paths,
        not under O(sysroot)).
      - C(auto) picks it from what the node has, in this order. C(grubby) when C(grubby) is on the PATH
        (RedHat family, whose boot entries follow grubby even where C(/etc/default/grub) exists).
        C(grub_dropin) when C(/etc/default/grub) or C(update-grub) exists (Debian family). Otherwise by the
        family in C(/etc/os-release) (C(ID) or C(ID_LIKE)), where C(debian) or C(ubuntu) gives C(grub_dropin),
        C(rhel), C(fedora) or C(centos) gives C(grubby). With no match the module fails before writing anything.
      - C(grub_dropin), C(grubby) and C(none) are returned as given.
      - For C(grubby) the module also returns the arguments of every boot entry (RV(grubby_args), from
        C(grubby --info=ALL), also in check mode); for C(grub_dropin), where C(update-grub) is (RV(update_grub)).
      - Omitted, nothing of the boot state is read.
    type: str
    choices: [auto, grub_dropin, grubby, none]
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
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.core.errors import TopotuneError
from ansible_collections.topotune.instinct.plugins.module_utils.core.sysroot import read_text
from ansible_collections.topotune.instinct.plugins.module_utils.state.kernel_runtime import (
    BOOTLOADERS,
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
        sysroot = self.params["sysroot"]
        # read everything first: a boot-state failure leaves the runtime values untouched
        boot = self.boot_state()
        writes, before, after, sysctl, warnings = plan_sysctl(sysroot, self.params["sysctl"])
        idle_writes, idle_before, idle_after, cpuidle, idle_warnings = plan_cpuidle(sysroot, self.params["cpuidle"])
        writes.extend(idle_writes)
        for warning in warnings + idle_warnings:
            self.module.warn(warning)
        if writes and not self.module.check_mode:
            apply_writes(writes)
        return {
            "changed": bool(writes),
            "changed_paths": len(writes),
            "sysctl": sysctl,
            "cpuidle": cpuidle,
            "diff": {"before": before + idle_before, "after": after + idle_after},
            **boot,
        }


def main():
    module = AnsibleModule(
        argument_spec={
            "sysctl": {"type": "dict", "default": {}},
            "cpuidle": {"type": "dict", "default": {}},
            "sysroot": {"type": "path", "default": "/"},
            "bootloader": {"type": "str", "choices": list(BOOTLOADERS)},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**KernelRuntime(module).run())
    except TopotuneError as err:
        module.fail_json(msg=str(err))


if __name__ == "__main__":
    main()
