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
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.topotune.instinct.plugins.module_utils.kernel_runtime import (
    apply_writes,
    plan_cpuidle,
    plan_sysctl,
)
from ansible_collections.topotune.instinct.plugins.module_utils.sysroot import TopotuneError


class KernelRuntime:
    def __init__(self, module):
        self.module = module
        self.params = module.params

    def run(self):
        sysroot = self.params["sysroot"]
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
        }


def main():
    module = AnsibleModule(
        argument_spec={
            "sysctl": {"type": "dict", "default": {}},
            "cpuidle": {"type": "dict", "default": {}},
            "sysroot": {"type": "path", "default": "/"},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**KernelRuntime(module).run())
    except TopotuneError as err:
        module.fail_json(msg=str(err))


if __name__ == "__main__":
    main()
